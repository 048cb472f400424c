//! The transport of an off-chain service (feature `ic-agent`): update calls through
//! [`ic_agent::Agent`], which signs, sends and polls (or waits synchronously) for the
//! certified reply.

use candid::Principal;
use ic_agent::{Agent, AgentError};

use crate::transport::{RejectCode, SendError, Transport};

/// Sends each attempt as an update call of `method` on `canister` with `agent` (its identity
/// is the caller the canister scopes keys to). Every attempt is a new signed request (a new
/// request id); the batch key, not the request id, makes retries safe.
#[derive(Clone, Debug)]
pub struct AgentTransport {
    agent: Agent,
    canister: Principal,
    method: String,
}

impl AgentTransport {
    /// A transport calling `method` of `canister` through `agent`.
    pub fn new(agent: Agent, canister: Principal, method: impl Into<String>) -> Self {
        AgentTransport {
            agent,
            canister,
            method: method.into(),
        }
    }
}

impl Transport for AgentTransport {
    async fn call(&self, request: Vec<u8>) -> Result<Vec<u8>, SendError> {
        self.agent
            .update(&self.canister, &self.method)
            .with_arg(request)
            .call_and_wait()
            .await
            .map_err(send_error)
    }
}

/// What an agent error says about whether the call ran: a reject (certified, or a
/// non-replicated rejection of a synchronous call) is a [`SendError::Rejected`]; an HTTP 4xx
/// means the request was refused before it could run; anything else (a timeout, a transport
/// error, a 5xx, a certificate that cannot be verified) leaves it unknown.
pub fn send_error(error: AgentError) -> SendError {
    match error {
        AgentError::CertifiedReject { reject, .. }
        | AgentError::UncertifiedReject { reject, .. } => SendError::Rejected {
            code: RejectCode::from_u32(reject.reject_code as u32),
            message: reject.reject_message,
        },
        AgentError::HttpError(payload) if (400..500).contains(&payload.status) => {
            SendError::Rejected {
                code: RejectCode::SysFatal,
                message: format!(
                    "HTTP {}: {}",
                    payload.status,
                    String::from_utf8_lossy(&payload.content)
                ),
            }
        }
        other => SendError::Unknown(other.to_string()),
    }
}
