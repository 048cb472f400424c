//! What a batch looks like on the wire: [`BatchCodec`], and the codec of any canister's
//! declared writes ([`Declared`]).

use std::fmt;
use std::marker::PhantomData;

use batch_types::declare::{BatchRefusal, Blob, PackedWritesResult, Writes, encode_request};
use batch_types::packed;
use batch_types::retry::{self, Retry};
use batch_types::{Outcome, WriteError};

use crate::transport::RejectCode;

/// A batch's key: when the client created the batch and 16 bytes that tell the client's
/// batches apart (the batcher's: its key prefix, 8 bytes, and a counter, 8 bytes big-endian).
/// The canister records it with the batch's outcomes; the same key is sent on every retry of
/// the batch. The library's one key type (`ic-rusqlite-batch-types`' `BatchKey`), which the
/// canister's core records as it is.
pub use batch_types::BatchKey;

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

impl<O, R> Reply<O, R> {
    /// The reply of a batch of `ops` ops that ran: its outcomes, one per op (another count is
    /// an error: the reply cannot be read as this batch's).
    pub fn executed(outcomes: Vec<O>, duplicate: bool, ops: usize) -> Result<Self, String> {
        if outcomes.len() != ops {
            return Err(format!(
                "{} outcomes for a batch of {ops} ops",
                outcomes.len()
            ));
        }
        Ok(Reply::Executed {
            outcomes,
            duplicate,
        })
    }
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

/// The bytes of the Candid framing of a blob argument: `DIDL`, a type table of one
/// `vec nat8`, one argument of that type, and the blob's length as LEB128 (at most 3 bytes
/// below 2 MiB). A codec whose request is one blob adds it to its header.
pub const CANDID_BLOB_FRAMING_BYTES: usize = 4 + 1 + 2 + 1 + 1 + 3;

/// `bytes` as the Candid argument `(blob)`, framed without copying them twice.
pub fn encode_blob_arg(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(CANDID_BLOB_FRAMING_BYTES + bytes.len());
    out.extend_from_slice(b"DIDL\x01\x6d\x7b\x01\x00");
    let mut len = bytes.len();
    while len >= 0x80 {
        out.push(len as u8 | 0x80);
        len >>= 7;
    }
    out.push(len as u8);
    out.extend_from_slice(bytes);
    out
}

/// The codec of a canister's declared writes (`batch_types::writes!`, ic-rusqlite-batch's
/// `client_batches!`): each batch is the generic packed request (`batch_types::packed`,
/// version 16: the declaration's digest, the key, each op by its declared types) sent as the
/// Candid `blob` argument of the canister's `execute_writes_packed`, answered with a
/// [`PackedWritesResult`] (`variant { Ok : blob; Err : BatchRefusal }`): the outcome runs of
/// reply version 17, or a typed [`BatchRefusal`].
///
/// `W` is the canister's declaration, shared by the canister and its clients (for the example
/// todo store, `todo_canister::TodoWrite`): a canister whose declaration differs refuses every
/// batch with [`BatchRefusal::DeclarationMismatch`], naming both digests, before anything runs.
pub struct Declared<W>(PhantomData<fn() -> W>);

impl<W> Declared<W> {
    /// The codec of `W`'s declared writes.
    pub const fn new() -> Self {
        Declared(PhantomData)
    }
}

impl<W> Default for Declared<W> {
    fn default() -> Self {
        Self::new()
    }
}

impl<W> Clone for Declared<W> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<W> Copy for Declared<W> {}

impl<W> fmt::Debug for Declared<W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Declared<{}>", std::any::type_name::<W>())
    }
}

impl<W: Writes> BatchCodec for Declared<W> {
    type Op = W;
    type Outcome = Outcome;
    type Refusal = BatchRefusal;

    fn header_len(&self) -> usize {
        CANDID_BLOB_FRAMING_BYTES + packed::REQUEST_HEADER_BYTES
    }

    fn op_len(&self, op: &W) -> usize {
        op.op_len()
    }

    fn encode(&self, key: &BatchKey, ops: &[W]) -> Vec<u8> {
        encode_blob_arg(&encode_request(key, ops))
    }

    fn decode(&self, reply: &[u8], ops: usize) -> Result<Reply<Outcome, BatchRefusal>, String> {
        let blob: Blob =
            match candid::decode_one::<PackedWritesResult>(reply).map_err(|e| e.to_string())? {
                PackedWritesResult::Ok(blob) => blob,
                PackedWritesResult::Err(refusal) => return Ok(Reply::Refused(refusal)),
            };
        let reply = packed::decode_reply(&blob, ops).map_err(|e| e.to_string())?;
        Reply::executed(reply.outcomes, reply.duplicate, ops)
    }

    /// None: the canister refuses with a typed `Err`, never with a reject.
    fn refusal_of_reject(&self, _code: RejectCode, _message: &str) -> Option<BatchRefusal> {
        None
    }

    /// As `batch_types::retry`'s table says of `refusal` (`Refused` as its `WriteError`).
    fn refusal_kind(&self, refusal: &BatchRefusal) -> RefusalKind {
        RefusalKind::of_rule(retry::of_batch_refusal(refusal))
    }

    fn not_executed(&self, outcome: &Outcome) -> bool {
        is_not_executed(outcome)
    }
}

impl RefusalKind {
    /// What the batcher does with a canister's [`WriteError`] refusing a whole batch (every
    /// keyed batch method of ic-rusqlite-batch refuses with one), as `batch_types::retry`'s
    /// table says: `TooOld` as [`RefusalKind::TooOld`]; a full deduplication store, a database
    /// error (the transaction could not begin) and a full queue are retried; the others are
    /// final.
    pub fn of_write_error(error: &WriteError) -> RefusalKind {
        RefusalKind::of_rule(retry::of_write_error(error))
    }

    /// The batcher's handling of a refusal the retry table gives `rule`.
    fn of_rule(rule: Retry) -> RefusalKind {
        match rule {
            Retry::Never => RefusalKind::Final,
            Retry::Expired => RefusalKind::TooOld,
            Retry::SameKey => RefusalKind::Retry,
            // The table gives it only to an outcome (`NotExecuted`), never to a refusal.
            Retry::NewBatch => unreachable!("a refusal whose rule is NewBatch"),
        }
    }
}

/// Whether `outcome` says the op did not run at all (`Outcome::NotExecuted`: the batch's
/// instruction budget ended before it), so that it may be sent again: the retry table of
/// `batch_types::retry`. An op interrupted while running did start, and is not one.
pub fn is_not_executed(outcome: &Outcome) -> bool {
    retry::of_outcome(outcome) == Retry::NewBatch
}

#[cfg(test)]
mod tests;
