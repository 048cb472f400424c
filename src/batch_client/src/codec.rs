//! What a batch looks like on the wire: [`BatchCodec`], and the reference canister's packed
//! format ([`PackedUserOrders`]).

use std::fmt;

use bench_api::packed::{self, KEYED_HEADER_BYTES};
use bench_api::{Outcome, PackedResult, UserOrderOp, WriteError};

use crate::transport::RejectCode;

/// A batch's key: when the client created the batch and 16 bytes that tell the client's
/// batches apart. The canister records it with the batch's outcomes; the same key is sent on
/// every retry of the batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BatchKey {
    /// Nanoseconds since the Unix epoch when the batch was formed (ICRC-1's
    /// `created_at_time`).
    pub created_at_time_ns: u64,
    /// The client's key prefix (8 bytes) and a counter (8 bytes, big-endian).
    pub id: [u8; 16],
}

/// What the canister answered to a batch.
#[derive(Clone, Debug, PartialEq)]
pub enum Reply<O, R> {
    /// The batch ran (now, or earlier when `duplicate`): one outcome per op.
    Executed {
        /// One outcome per op, in order.
        outcomes: Vec<O>,
        /// The key was already recorded: these are the outcomes of the first run.
        duplicate: bool,
    },
    /// The canister refused the whole batch; nothing of it ran under this key.
    Refused(R),
}

/// What the batcher does with a refusal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RefusalKind {
    /// Deliver it to every op of the batch (for example `Invalid`, `NotAuthorized`).
    Final,
    /// The key is too old for the canister: if an earlier attempt may have run, the ops'
    /// outcome is unknown; otherwise nothing ran.
    TooOld,
    /// Nothing ran and a later attempt with the same key may succeed (a full deduplication
    /// store, a transaction that could not begin): retry with backoff.
    Retry,
}

/// The format of a batch method: how ops and the key are encoded into the method's argument,
/// how its reply and its rejects are read, and which outcomes say "not executed".
pub trait BatchCodec {
    /// What [`Batcher::submit`](crate::Batcher::submit) takes.
    type Op;
    /// What each op gets when its batch ran.
    type Outcome;
    /// Why the canister refused a whole batch.
    type Refusal: fmt::Display + Clone;

    /// The most bytes a request takes besides its ops (framing and key).
    fn header_len(&self) -> usize;
    /// The bytes `op` adds to a request.
    fn op_len(&self, op: &Self::Op) -> usize;
    /// The method's argument for `ops` under `key`.
    fn encode(&self, key: &BatchKey, ops: &[Self::Op]) -> Vec<u8>;
    /// Reads the method's reply to a batch of `ops` ops. An error means the reply could not be
    /// read (the batch may have run).
    fn decode(
        &self,
        reply: &[u8],
        ops: usize,
    ) -> Result<Reply<Self::Outcome, Self::Refusal>, String>;
    /// The refusal a reject with `code` and `message` stands for, if the canister refuses
    /// batches with rejects.
    fn refusal_of_reject(&self, code: RejectCode, message: &str) -> Option<Self::Refusal>;
    /// What the batcher does with `refusal`.
    fn refusal_kind(&self, refusal: &Self::Refusal) -> RefusalKind;
    /// Whether `outcome` says the op did not run at all (the batch's budget ended before it),
    /// so that it may be sent again in a later batch, under a new key.
    fn not_executed(&self, outcome: &Self::Outcome) -> bool;
}

/// The Candid framing of a blob argument: `DIDL`, a type table of one `vec nat8`, one
/// argument of that type, and the blob's length as LEB128 (at most 3 bytes below 2 MiB).
const CANDID_BLOB_FRAMING: usize = 4 + 1 + 2 + 1 + 1 + 3;

/// The reference canister's keyed packed batch (`bench_api::packed`, request version 2,
/// reply version 3), sent as the Candid `blob` argument of its packed batch method, answered
/// with a `PackedResult` (`variant { Ok : blob; Err : WriteError }`): a refusal is the typed
/// [`WriteError`].
///
/// An op takes [`packed::op_len`] bytes (10 for an order with a small user id).
#[derive(Clone, Copy, Debug, Default)]
pub struct PackedUserOrders;

/// The error text of an op the canister's budget did not reach (`batch_core`'s wording).
const NOT_EXECUTED_PREFIX: &str = "not executed: ";
/// `SQLITE_INTERRUPT`, the code of ops interrupted or not reached.
const SQLITE_INTERRUPT: i32 = 9;

impl BatchCodec for PackedUserOrders {
    type Op = UserOrderOp;
    type Outcome = Outcome;
    type Refusal = WriteError;

    fn header_len(&self) -> usize {
        CANDID_BLOB_FRAMING + KEYED_HEADER_BYTES
    }

    fn op_len(&self, op: &UserOrderOp) -> usize {
        packed::op_len(op)
    }

    fn encode(&self, key: &BatchKey, ops: &[UserOrderOp]) -> Vec<u8> {
        let key = packed::BatchKey {
            created_at_time_ns: key.created_at_time_ns,
            id: key.id,
        };
        bench_api::wire::encode_blob(&packed::encode_keyed_ops(&key, ops))
    }

    fn decode(&self, reply: &[u8], ops: usize) -> Result<Reply<Outcome, WriteError>, String> {
        let blob = match candid::decode_one::<PackedResult>(reply).map_err(|e| e.to_string())? {
            PackedResult::Ok(blob) => blob,
            PackedResult::Err(refusal) => return Ok(Reply::Refused(refusal)),
        };
        let reply = packed::decode_keyed_outcomes(&blob, ops).map_err(|e| e.to_string())?;
        if reply.outcomes.len() != ops {
            return Err(format!(
                "{} outcomes for a batch of {ops} ops",
                reply.outcomes.len()
            ));
        }
        Ok(Reply::Executed {
            outcomes: reply.outcomes,
            duplicate: reply.duplicate,
        })
    }

    /// None: the canister refuses with a typed `Err`, never with a reject.
    fn refusal_of_reject(&self, _code: RejectCode, _message: &str) -> Option<WriteError> {
        None
    }

    fn refusal_kind(&self, refusal: &WriteError) -> RefusalKind {
        match refusal {
            WriteError::TooOld { .. } => RefusalKind::TooOld,
            WriteError::StoreFull { .. }
            | WriteError::Database(_)
            | WriteError::QueueFull { .. }
            | WriteError::QueueBytesFull { .. } => RefusalKind::Retry,
            WriteError::CreatedInFuture { .. }
            | WriteError::DigestMismatch { .. }
            | WriteError::Invalid(_)
            | WriteError::NotAuthorized => RefusalKind::Final,
        }
    }

    fn not_executed(&self, outcome: &Outcome) -> bool {
        matches!(outcome, Outcome::Failed(error)
            if error.code == SQLITE_INTERRUPT && error.message.starts_with(NOT_EXECUTED_PREFIX))
    }
}
