//! The packed client batch of `execute_batch_packed`: the ops of [`UserOrderOp`] and their
//! [`Outcome`]s in a compact binary form, carried as a Candid `blob` both ways.
//!
//! Why: a client batch pays for its ingress bytes (2,000 cycles per byte on a 13-node subnet,
//! more than the instructions of an insert at Candid's 17 bytes per op) and for decoding them.
//! A packed op takes 10 bytes for an order (against 17 in Candid) and decodes with a few hundred
//! instructions; the outcomes come back packed too (every reply byte costs 50 instructions).
//! `execute_batch` with Candid types stays the documented, self-describing path; this one is for
//! clients that send thousands of ops per call.
//!
//! # Format (version 1)
//!
//! Integers are LEB128 varints (`uint`), signed ones zigzag-encoded first (`sint`: 0, −1, 1, −2,
//! ... become 0, 1, 2, 3, ...); a float is its 8 IEEE 754 bytes, little-endian; a text is its
//! UTF-8 byte length as a `uint`, then the bytes.
//!
//! Request: the byte `1` (the version), then each op as a tag byte and its fields:
//!
//! | tag | op | fields |
//! |---:|---|---|
//! | 1 | `CreateOrder` | `user_id: sint`, `amount: f64` |
//! | 2 | `UpdateOrderAmount` | `order_id: sint`, `amount: f64` |
//! | 3 | `DeleteUserOrders` | `user_id: sint` |
//! | 4 | `CreateUser` | `username: text`, `email: text` |
//!
//! Reply: the byte `2` (the reply's version), then the outcomes in op order, each record
//! standing for one outcome or a run of them:
//!
//! | tag | outcomes | fields |
//! |---:|---|---|
//! | 0 | one `Committed` | `rows_changed: uint`, `last_insert_rowid: sint` |
//! | 1 | one `Failed` | `code: sint`, `message: text` |
//! | 2 | `count` `Committed`, all with `rows_changed`, the k-th (from 0) with `last_insert_rowid` = `first + k · step` | `count: uint`, `rows_changed: uint`, `first: sint`, `step: sint` |
//! | 3 | `count` identical `Failed` | `count: uint`, `code: sint`, `message: text` |
//! | 4 | `count` `NotExecuted` (ops the batch's budget did not reach) | `count: uint` |
//!
//! The outcome records are those of the library's generic packed format (one codec for both:
//! `ic-rusqlite-batch-types`' `packed::put_outcomes` and `packed::read_outcomes_from`), and so
//! are the key ([`BatchKey`]) and the refusal ([`PackedError`]).
//!
//! A run is what a batch of inserts returns (each op its own rowid, one above the last) and of
//! single-row updates (the rowid does not move, step 0): a reply of 10,000 committed inserts
//! takes a few bytes instead of 50,000, and each byte saved is 50 instructions the canister does
//! not spend on `ic0.msg_reply_data_append`. [`encode_outcomes`] writes a run for three or
//! more such outcomes in a row; [`decode_outcomes`] expands it, up to the number of outcomes
//! its caller expects.
//!
//! # Keyed batches (request version 2, reply version 3)
//!
//! A batch the client may retry carries a key (see `batch_core`'s `Deduplicator`): the
//! request is the byte `2`, the key's `created_at_time` (nanoseconds since the Unix epoch) as 8
//! bytes little-endian, the key's 16 id bytes, then the ops exactly as in version 1 (without
//! its version byte). The canister digests the ops bytes (everything after the 25-byte
//! header, [`keyed_ops_body`]) to tell a retry from another batch under the same key.
//!
//! The reply is the byte `3`, a flags byte (bit 0: the batch is a duplicate, answered with the
//! outcomes recorded when it first ran; other bits must be 0), then the outcomes exactly as in
//! reply version 2 (without its version byte). Unkeyed requests and replies are unchanged.
//!
//! Anything else (another version, an unknown tag, a truncated field, text that is not UTF-8,
//! bytes after the last op, a rowid out of the 64-bit range, more outcomes than expected, an
//! unknown flag) is refused whole; a request is refused before any op runs.

use batch_types::BatchKey;
pub use batch_types::packed::PackedError;
use batch_types::packed::{
    VarintError, put_outcomes, put_sint, put_text, read_outcomes_from, read_uint, uint_len,
};

use crate::{Outcome, UserOrderOp};

/// The format version of requests this module reads and writes.
pub const VERSION: u8 = 1;
/// The format version of replies (version 1 had no runs).
pub const REPLY_VERSION: u8 = 2;
/// The format version of keyed requests: [`VERSION`]'s ops after a [`BatchKey`].
pub const KEYED_VERSION: u8 = 2;
/// The format version of keyed replies: a flags byte, then [`REPLY_VERSION`]'s outcomes.
pub const KEYED_REPLY_VERSION: u8 = 3;
/// Bit 0 of a keyed reply's flags: the batch was a duplicate of a recorded one.
pub const FLAG_DUPLICATE: u8 = 1;
/// Bytes before the ops of a keyed request: the version, `created_at_time`, the id.
pub const KEYED_HEADER_BYTES: usize = 1 + 8 + 16;

const CREATE_ORDER: u8 = 1;
const UPDATE_ORDER_AMOUNT: u8 = 2;
const DELETE_USER_ORDERS: u8 = 3;
const CREATE_USER: u8 = 4;

/// A decoded keyed reply.
#[derive(Debug, Clone, PartialEq)]
pub struct KeyedReply {
    /// The batch was a duplicate: nothing ran, the outcomes are the recorded ones.
    pub duplicate: bool,
    /// One outcome per op, in order.
    pub outcomes: Vec<Outcome>,
}

/// Packs `ops` (the request of `execute_batch_packed`).
pub fn encode_ops(ops: &[UserOrderOp]) -> Vec<u8> {
    let mut out = Vec::with_capacity(1 + ops.len() * 10);
    out.push(VERSION);
    put_ops(&mut out, ops);
    out
}

/// Packs a keyed request: [`KEYED_VERSION`], the key, then the ops as [`encode_ops`] does.
/// Cost: [`encode_ops`] plus 24 bytes.
pub fn encode_keyed_ops(key: &BatchKey, ops: &[UserOrderOp]) -> Vec<u8> {
    let mut out = Vec::with_capacity(KEYED_HEADER_BYTES + ops.len() * 10);
    out.push(KEYED_VERSION);
    out.extend_from_slice(&key.created_at_time.to_le_bytes());
    out.extend_from_slice(&key.id);
    put_ops(&mut out, ops);
    out
}

/// The bytes one op takes in a request (its tag and fields), without encoding it.
pub fn op_len(op: &UserOrderOp) -> usize {
    let sint_len = |n: i64| uint_len(((n << 1) ^ (n >> 63)) as u64);
    let text_len = |t: &str| uint_len(t.len() as u64) + t.len();
    1 + match op {
        UserOrderOp::CreateOrder { user_id: id, .. }
        | UserOrderOp::UpdateOrderAmount { order_id: id, .. } => sint_len(*id) + 8,
        UserOrderOp::DeleteUserOrders { user_id } => sint_len(*user_id),
        UserOrderOp::CreateUser { username, email } => text_len(username) + text_len(email),
    }
}

/// The key of a keyed request and its ops bytes (what the canister digests), without decoding
/// the ops.
pub fn keyed_ops_body(bytes: &[u8]) -> Result<(BatchKey, &[u8]), PackedError> {
    let mut r = Reader::with_version(bytes, KEYED_VERSION)?;
    let created_at_time = u64::from_le_bytes(r.array::<8>("created_at_time")?);
    let id = r.array::<16>("the key's id")?;
    Ok((
        BatchKey {
            created_at_time,
            id,
        },
        &bytes[KEYED_HEADER_BYTES..],
    ))
}

/// Unpacks a keyed request: its key and at most `max_ops` ops.
pub fn decode_keyed_ops(
    bytes: &[u8],
    max_ops: usize,
) -> Result<(BatchKey, Vec<UserOrderOp>), PackedError> {
    let (key, _) = keyed_ops_body(bytes)?;
    let mut r = Reader {
        bytes,
        offset: KEYED_HEADER_BYTES,
    };
    Ok((key, read_ops(&mut r, max_ops)?))
}

fn put_ops(out: &mut Vec<u8>, ops: &[UserOrderOp]) {
    for op in ops {
        match op {
            UserOrderOp::CreateOrder { user_id, amount } => {
                out.push(CREATE_ORDER);
                put_sint(out, *user_id);
                out.extend_from_slice(&amount.to_le_bytes());
            }
            UserOrderOp::UpdateOrderAmount { order_id, amount } => {
                out.push(UPDATE_ORDER_AMOUNT);
                put_sint(out, *order_id);
                out.extend_from_slice(&amount.to_le_bytes());
            }
            UserOrderOp::DeleteUserOrders { user_id } => {
                out.push(DELETE_USER_ORDERS);
                put_sint(out, *user_id);
            }
            UserOrderOp::CreateUser { username, email } => {
                out.push(CREATE_USER);
                put_text(out, username);
                put_text(out, email);
            }
        }
    }
}

/// Unpacks a request; at most `max_ops` ops (more is refused as soon as the count is passed).
pub fn decode_ops(bytes: &[u8], max_ops: usize) -> Result<Vec<UserOrderOp>, PackedError> {
    let mut r = Reader::new(bytes)?;
    read_ops(&mut r, max_ops)
}

/// Reads ops up to the end of the input.
fn read_ops(r: &mut Reader<'_>, max_ops: usize) -> Result<Vec<UserOrderOp>, PackedError> {
    let mut ops = Vec::new();
    while !r.done() {
        if ops.len() == max_ops {
            return Err(r.error(format!("more than {max_ops} ops")));
        }
        let op = match r.byte("an op tag")? {
            CREATE_ORDER => UserOrderOp::CreateOrder {
                user_id: r.sint("user_id")?,
                amount: r.f64("amount")?,
            },
            UPDATE_ORDER_AMOUNT => UserOrderOp::UpdateOrderAmount {
                order_id: r.sint("order_id")?,
                amount: r.f64("amount")?,
            },
            DELETE_USER_ORDERS => UserOrderOp::DeleteUserOrders {
                user_id: r.sint("user_id")?,
            },
            CREATE_USER => UserOrderOp::CreateUser {
                username: r.text("username")?,
                email: r.text("email")?,
            },
            tag => {
                r.offset -= 1;
                return Err(r.error(format!("unknown op tag {tag}")));
            }
        };
        ops.push(op);
    }
    Ok(ops)
}

/// Packs outcomes (the reply of `execute_batch_packed`).
pub fn encode_outcomes(outcomes: &[Outcome]) -> Vec<u8> {
    let mut out = Vec::with_capacity(16);
    out.push(REPLY_VERSION);
    put_outcomes(&mut out, outcomes);
    out
}

/// Packs the reply of a keyed batch: [`KEYED_REPLY_VERSION`], the flags, then the outcomes as
/// [`encode_outcomes`] does. Cost: [`encode_outcomes`] plus one byte.
pub fn encode_keyed_outcomes(duplicate: bool, outcomes: &[Outcome]) -> Vec<u8> {
    let mut out = Vec::with_capacity(16);
    out.push(KEYED_REPLY_VERSION);
    out.push(if duplicate { FLAG_DUPLICATE } else { 0 });
    put_outcomes(&mut out, outcomes);
    out
}

/// Unpacks a keyed reply of at most `max_outcomes` outcomes.
pub fn decode_keyed_outcomes(bytes: &[u8], max_outcomes: usize) -> Result<KeyedReply, PackedError> {
    let mut r = Reader::with_version(bytes, KEYED_REPLY_VERSION)?;
    let flags = r.byte("the flags byte")?;
    if flags & !FLAG_DUPLICATE != 0 {
        r.offset -= 1;
        return Err(r.error(format!("unknown flags {flags:#04x}")));
    }
    Ok(KeyedReply {
        duplicate: flags & FLAG_DUPLICATE != 0,
        outcomes: read_outcomes_from(bytes, r.offset, max_outcomes)?,
    })
}

/// Unpacks a reply of at most `max_outcomes` outcomes (the ops the request sent): a reply that
/// holds more is refused, so that a run's count cannot make the caller allocate without bound.
pub fn decode_outcomes(bytes: &[u8], max_outcomes: usize) -> Result<Vec<Outcome>, PackedError> {
    let r = Reader::new_reply(bytes)?;
    read_outcomes_from(bytes, r.offset, max_outcomes)
}

/// Reads fields from packed bytes, tracking the offset for errors.
struct Reader<'b> {
    bytes: &'b [u8],
    offset: usize,
}

impl<'b> Reader<'b> {
    /// After the version byte of a request, which must be [`VERSION`].
    fn new(bytes: &'b [u8]) -> Result<Self, PackedError> {
        Self::with_version(bytes, VERSION)
    }

    /// After the version byte of a reply, which must be [`REPLY_VERSION`].
    fn new_reply(bytes: &'b [u8]) -> Result<Self, PackedError> {
        Self::with_version(bytes, REPLY_VERSION)
    }

    fn with_version(bytes: &'b [u8], version: u8) -> Result<Self, PackedError> {
        let mut r = Reader { bytes, offset: 0 };
        match r.byte("the version byte")? {
            v if v == version => Ok(r),
            v => Err(PackedError {
                offset: 0,
                what: format!("version {v}; version {version} expected"),
            }),
        }
    }

    fn done(&self) -> bool {
        self.offset == self.bytes.len()
    }

    fn error(&self, what: String) -> PackedError {
        PackedError {
            offset: self.offset,
            what,
        }
    }

    fn byte(&mut self, what: &str) -> Result<u8, PackedError> {
        let b = *self
            .bytes
            .get(self.offset)
            .ok_or_else(|| self.error(format!("{what} expected, the input ended")))?;
        self.offset += 1;
        Ok(b)
    }

    /// A varint in its shortest form (`batch_types::packed::read_uint`, the generic format's).
    fn uint(&mut self, what: &str) -> Result<u64, PackedError> {
        match read_uint(&self.bytes[self.offset..]) {
            Ok((n, len)) => {
                self.offset += len;
                Ok(n)
            }
            Err(VarintError::Ended { at }) => {
                self.offset += at;
                Err(self.error(format!("{what} expected, the input ended")))
            }
            Err(e) => Err(self.error(format!("{what}: {e}"))),
        }
    }

    fn sint(&mut self, what: &str) -> Result<i64, PackedError> {
        let z = self.uint(what)?;
        Ok((z >> 1) as i64 ^ -((z & 1) as i64))
    }

    fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N], PackedError> {
        let bytes = self
            .bytes
            .get(self.offset..self.offset + N)
            .ok_or_else(|| self.error(format!("{what}: {N} bytes expected, the input ended")))?;
        let array = bytes.try_into().expect("N bytes");
        self.offset += N;
        Ok(array)
    }

    fn f64(&mut self, what: &str) -> Result<f64, PackedError> {
        let end = self.offset + 8;
        let bytes = self
            .bytes
            .get(self.offset..end)
            .ok_or_else(|| self.error(format!("{what}: 8 bytes expected, the input ended")))?;
        let value = f64::from_le_bytes(bytes.try_into().expect("8 bytes"));
        self.offset = end;
        Ok(value)
    }

    fn text(&mut self, what: &str) -> Result<String, PackedError> {
        let len = self.uint(what)?;
        let start = self.offset;
        let bytes = usize::try_from(len)
            .ok()
            .and_then(|len| self.bytes.get(start..start.checked_add(len)?))
            .ok_or_else(|| self.error(format!("{what}: {len} bytes expected, the input ended")))?;
        let text = std::str::from_utf8(bytes)
            .map_err(|e| self.error(format!("{what} is not UTF-8: {e}")))?;
        self.offset += bytes.len();
        Ok(text.to_owned())
    }
}

#[cfg(test)]
mod tests;
