//! The transport of tests (feature `pocket-ic`): update calls through the PocketIC client.

use std::sync::Arc;

use candid::Principal;
use pocket_ic::nonblocking::PocketIc;

use crate::transport::{RejectCode, SendError, Transport};

/// Sends each attempt as an update call of `method` on `canister` from `sender`, through a
/// PocketIC instance (the real PocketIC server, or a server speaking its protocol).
#[derive(Clone)]
pub struct PocketIcTransport {
    pic: Arc<PocketIc>,
    canister: Principal,
    sender: Principal,
    method: String,
}

impl PocketIcTransport {
    /// A transport calling `method` of `canister` as `sender` on `pic`.
    pub fn new(
        pic: Arc<PocketIc>,
        canister: Principal,
        sender: Principal,
        method: impl Into<String>,
    ) -> Self {
        PocketIcTransport {
            pic,
            canister,
            sender,
            method: method.into(),
        }
    }
}

impl Transport for PocketIcTransport {
    async fn call(&self, request: Vec<u8>) -> Result<Vec<u8>, SendError> {
        self.pic
            .update_call(self.canister, self.sender, &self.method, request)
            .await
            .map_err(|reject| SendError::Rejected {
                code: RejectCode::from_u32(reject.reject_code as u32),
                message: reject.reject_message,
            })
    }
}
