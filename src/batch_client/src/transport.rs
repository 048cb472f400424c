//! How a batch reaches the canister: [`Transport`], and what can go wrong on the way
//! ([`SendError`], [`RejectCode`]).

use std::fmt;
use std::future::Future;

/// Sends one request (the Candid-encoded argument of the batch method) and returns the
/// method's reply bytes.
///
/// A transport makes one attempt per call and reports what happened truthfully: a reply, a
/// reject, or that it does not know ([`SendError::Unknown`]). The batcher decides whether to
/// retry; a retry sends the same bytes, with the same batch key, so a canister that
/// deduplicates runs the batch at most once.
///
/// Implementations: `AgentTransport` (ic-agent, feature `ic-agent`), `CdkTransport`
/// (inter-canister calls, feature `ic-cdk`), `PocketIcTransport` (feature `pocket-ic`), and
/// any test double.
pub trait Transport {
    /// Sends `request` once. Cost: one update call of the batch method.
    fn call(&self, request: Vec<u8>) -> impl Future<Output = Result<Vec<u8>, SendError>>;
}

/// The reject codes of the Internet Computer's interface specification ("Reject codes").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RejectCode {
    /// 1: a fatal system error; retrying does not help.
    SysFatal,
    /// 2: a transient system error (for example a full queue); retrying may help.
    SysTransient,
    /// 3: the destination does not exist or has no such method.
    DestinationInvalid,
    /// 4: the canister rejected the call explicitly (before writing anything, for the batch
    /// methods).
    CanisterReject,
    /// 5: the canister trapped or could not run (stopped, out of cycles): its changes were
    /// rolled back.
    CanisterError,
    /// 6: the outcome is unknown (a bounded-wait call timed out): the call may have run.
    SysUnknown,
    /// A code this crate does not know.
    Other(u32),
}

impl RejectCode {
    /// The code for its number.
    pub fn from_u32(code: u32) -> Self {
        match code {
            1 => RejectCode::SysFatal,
            2 => RejectCode::SysTransient,
            3 => RejectCode::DestinationInvalid,
            4 => RejectCode::CanisterReject,
            5 => RejectCode::CanisterError,
            6 => RejectCode::SysUnknown,
            other => RejectCode::Other(other),
        }
    }

    /// Its number.
    pub fn as_u32(self) -> u32 {
        match self {
            RejectCode::SysFatal => 1,
            RejectCode::SysTransient => 2,
            RejectCode::DestinationInvalid => 3,
            RejectCode::CanisterReject => 4,
            RejectCode::CanisterError => 5,
            RejectCode::SysUnknown => 6,
            RejectCode::Other(code) => code,
        }
    }
}

impl RejectCode {
    /// Whether the batcher sends a batch rejected with this code again, with the same request
    /// and key: `SYS_TRANSIENT` and `CANISTER_ERROR` (stopped, trapped, out of cycles: nothing
    /// ran, a later attempt may succeed) and `SYS_UNKNOWN` (the call may have run: the retry is
    /// answered from the canister's record if it did). Any other code is final.
    pub fn is_retried(self) -> bool {
        matches!(
            self,
            RejectCode::SysTransient | RejectCode::CanisterError | RejectCode::SysUnknown
        )
    }

    /// Whether a call rejected with this code may have run: `SYS_UNKNOWN` (a bounded-wait call
    /// that timed out). Every other reject of a batch method changed nothing.
    pub fn may_have_run(self) -> bool {
        self == RejectCode::SysUnknown
    }
}

impl fmt::Display for RejectCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?} ({})", self, self.as_u32())
    }
}

/// Why an attempt got no reply.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SendError {
    /// No answer: a timeout, a lost connection, a status that could not be read. The call
    /// may or may not have run.
    #[error("no answer (the call may have run): {0}")]
    Unknown(String),
    /// The system or the canister rejected the call. Except for [`RejectCode::SysUnknown`],
    /// a rejected call of a batch method changed nothing (a trap rolls back, and the batch
    /// methods reject only before writing).
    #[error("rejected with {code}: {message}")]
    Rejected {
        /// The reject code.
        code: RejectCode,
        /// The reject message.
        message: String,
    },
}
