//! The reference canister's keyed packed batch as an `ic-batch-client` codec
//! ([`PackedUserOrders`]): the benchmark suite's and the end-to-end tests' client of
//! `execute_batch_packed`. Not compiled into the canister (it calls nothing here).

use ic_batch_client::{
    BatchCodec, BatchKey, CANDID_BLOB_FRAMING_BYTES, RefusalKind, RejectCode, Reply,
    is_not_executed,
};

use crate::packed::{self, KEYED_HEADER_BYTES};
use crate::{Outcome, PackedResult, UserOrderOp, WriteError};

/// The reference canister's keyed packed batch ([`crate::packed`], request version 2, reply
/// version 3), sent as the Candid `blob` argument of its `execute_batch_packed`, answered with
/// a `PackedResult` (`variant { Ok : blob; Err : WriteError }`): a refusal is the typed
/// [`WriteError`].
///
/// An op takes [`packed::op_len`] bytes (10 for an order with a small user id).
#[derive(Clone, Copy, Debug, Default)]
pub struct PackedUserOrders;

impl BatchCodec for PackedUserOrders {
    type Op = UserOrderOp;
    type Outcome = Outcome;
    type Refusal = WriteError;

    fn header_len(&self) -> usize {
        CANDID_BLOB_FRAMING_BYTES + KEYED_HEADER_BYTES
    }

    fn op_len(&self, op: &UserOrderOp) -> usize {
        packed::op_len(op)
    }

    fn encode(&self, key: &BatchKey, ops: &[UserOrderOp]) -> Vec<u8> {
        crate::wire::encode_blob(&packed::encode_keyed_ops(key, ops))
    }

    fn decode(&self, reply: &[u8], ops: usize) -> Result<Reply<Outcome, WriteError>, String> {
        let blob = match candid::decode_one::<PackedResult>(reply).map_err(|e| e.to_string())? {
            PackedResult::Ok(blob) => blob,
            PackedResult::Err(refusal) => return Ok(Reply::Refused(refusal)),
        };
        let reply = packed::decode_keyed_outcomes(&blob, ops).map_err(|e| e.to_string())?;
        Reply::executed(reply.outcomes, reply.duplicate, ops)
    }

    /// None: the canister refuses with a typed `Err`, never with a reject.
    fn refusal_of_reject(&self, _code: RejectCode, _message: &str) -> Option<WriteError> {
        None
    }

    fn refusal_kind(&self, refusal: &WriteError) -> RefusalKind {
        RefusalKind::of_write_error(refusal)
    }

    fn not_executed(&self, outcome: &Outcome) -> bool {
        is_not_executed(outcome)
    }
}
