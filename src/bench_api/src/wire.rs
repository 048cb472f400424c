//! Hand-written Candid codecs for the calls a client makes most: the same bytes as the `candid`
//! crate produces and accepts, for a fraction of the instructions.
//!
//! `candid` builds the type table of a reply (and type-checks an argument) on every call: for
//! `submit_create_order` that was about 129,000 of its 157,000 instructions, far more than queuing
//! the op. And every reply byte costs 50 instructions (`ic0.msg_reply_data_append`). The hot
//! calls reply with typed results (`variant { Ok : T; Err : WriteError }`), whose success
//! replies never change shape, so:
//! - a success reply is encoded as its `Ok` case alone ([`OkOnly`], a Candid subtype of the
//!   result: no type table for the error), whose bytes are a fixed prefix (the header, the type
//!   table, the index of the case), precomputed as a constant (the tests check it against
//!   `candid`), followed by the value's few bytes; an error reply is encoded by `candid` in
//!   full;
//! - an argument is read directly when it has the exact encoding every Candid library emits for
//!   it (no type table, primitive argument types); any other encoding, equally valid, goes through
//!   `candid`'s full decoder, so nothing a client may send is refused.
//!
//! The tests check every codec against `candid` byte for byte, for arbitrary values, and that
//! `candid` decodes each success reply as the method's full result type. A canister
//! uses them with `#[ic_cdk::update(decode_with = "...", encode_with = "...")]`, keeping the
//! method's Candid types in its interface.

use candid::CandidType;
use candid::utils::ArgumentDecoder;

use crate::{Outcome, PackedResult, SubmitResult, Ticket, WriteError, WriteResult};

/// The magic bytes every Candid message starts with.
const MAGIC: &[u8; 4] = b"DIDL";
/// Candid's type code of `int64` (−12 as a signed LEB128 byte).
const INT64: u8 = 0x74;
/// Candid's type code of `float64` (−14).
const FLOAT64: u8 = 0x72;
/// Candid's type code of `text` (−15).
const TEXT: u8 = 0x71;

/// Decodes with `candid`, as `ic-cdk` does for a method without a custom decoder (including its
/// skipping quota against costly unknown fields). Traps-to-be: the error says why.
fn candid_decode<T: for<'a> ArgumentDecoder<'a>>(bytes: &[u8]) -> Result<T, candid::Error> {
    let mut config = candid::DecoderConfig::new();
    config.set_skipping_quota(10_000);
    candid::utils::decode_args_with_config(bytes, &config)
}

/// The body after `DIDL`, an empty type table and `arity` arguments of the given primitive types,
/// if `bytes` starts that way.
fn primitive_args<'b>(bytes: &'b [u8], types: &[u8]) -> Option<&'b [u8]> {
    let rest = bytes.strip_prefix(MAGIC.as_slice())?;
    let (&table_len, rest) = rest.split_first()?;
    let (&arity, rest) = rest.split_first()?;
    if table_len != 0 || usize::from(arity) != types.len() {
        return None;
    }
    let (arg_types, body) = rest.split_at_checked(types.len())?;
    (arg_types == types).then_some(body)
}

fn read_u64(body: &[u8]) -> Option<(u64, &[u8])> {
    let (word, rest) = body.split_first_chunk::<8>()?;
    Some((u64::from_le_bytes(*word), rest))
}

/// An unsigned LEB128 number at the start of `body`, if it fits in `usize`.
fn read_leb(body: &[u8]) -> Option<(usize, &[u8])> {
    let mut value: u64 = 0;
    for (i, &byte) in body.iter().enumerate().take(9) {
        value |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return Some((usize::try_from(value).ok()?, &body[i + 1..]));
        }
    }
    None
}

fn read_text(body: &[u8]) -> Option<(String, &[u8])> {
    let (len, rest) = read_leb(body)?;
    let (text, rest) = rest.split_at_checked(len)?;
    Some((std::str::from_utf8(text).ok()?.to_owned(), rest))
}

/// Decodes the argument `(int64, float64)` of `submit_create_order`, `create_order`,
/// `update_order_amount` and their kin.
pub fn decode_i64_f64(bytes: &[u8]) -> Result<(i64, f64), candid::Error> {
    let fast = primitive_args(bytes, &[INT64, FLOAT64]).and_then(|body| {
        let (a, body) = read_u64(body)?;
        let (b, body) = read_u64(body)?;
        body.is_empty().then_some((a as i64, f64::from_bits(b)))
    });
    match fast {
        Some(args) => Ok(args),
        None => candid_decode(bytes),
    }
}

/// Decodes the argument `(int64)` of `submit_delete_user_orders` and `delete_user_orders`.
pub fn decode_i64(bytes: &[u8]) -> Result<(i64,), candid::Error> {
    let fast = primitive_args(bytes, &[INT64]).and_then(|body| {
        let (a, body) = read_u64(body)?;
        body.is_empty().then_some((a as i64,))
    });
    match fast {
        Some(args) => Ok(args),
        None => candid_decode(bytes),
    }
}

/// Decodes the argument `(text, text)` of `submit_create_user` and `create_user`.
pub fn decode_text_text(bytes: &[u8]) -> Result<(String, String), candid::Error> {
    let fast = primitive_args(bytes, &[TEXT, TEXT]).and_then(|body| {
        let (a, body) = read_text(body)?;
        let (b, body) = read_text(body)?;
        body.is_empty().then_some((a, b))
    });
    match fast {
        Some(args) => Ok(args),
        None => candid_decode(bytes),
    }
}

/// The type table and argument types of a single `blob` (`vec nat8`) argument or reply: one
/// table entry `vec` (−19) of `nat8` (−5), one value of table type 0.
const BLOB_TYPES: [u8; 5] = [0x01, 0x6d, 0x7b, 0x01, 0x00];

/// Decodes a single `blob` argument (`execute_batch_packed`): read in place when it has the
/// encoding every Candid library emits for it, else with `candid`.
pub fn decode_blob(bytes: &[u8]) -> Result<Vec<u8>, candid::Error> {
    let fast = bytes
        .strip_prefix(MAGIC.as_slice())
        .and_then(|rest| rest.strip_prefix(BLOB_TYPES.as_slice()))
        .and_then(|body| {
            let (len, body) = read_leb(body)?;
            (body.len() == len).then(|| body.to_vec())
        });
    match fast {
        Some(blob) => Ok(blob),
        None => candid_decode::<(serde_bytes::ByteBuf,)>(bytes).map(|(b,)| b.into_vec()),
    }
}

/// Encodes a single `blob` reply (`execute_batch_packed`).
pub fn encode_blob(blob: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(MAGIC.len() + BLOB_TYPES.len() + 10 + blob.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&BLOB_TYPES);
    push_leb128(&mut out, blob.len() as u64);
    out.extend_from_slice(blob);
    out
}

/// The `Ok` case alone of a Candid result: `variant { Ok : T }`. Candid's subtyping makes it a
/// valid encoding of `variant { Ok : T; Err : E }` for every `E` (a variant with fewer cases
/// is a subtype), so a success reply carries no type table for the error: a few bytes instead
/// of `WriteError`'s ~250 (each reply byte costs 50 instructions).
#[derive(CandidType)]
pub enum OkOnly<T> {
    /// Success.
    Ok(T),
}

/// [`Outcome`]'s committed case alone (`variant { Committed : record { .. } }`), a subtype of
/// `Outcome` as [`OkOnly`] is of a result.
#[derive(CandidType)]
pub enum CommittedOnly {
    /// Committed.
    Committed {
        /// Rows it inserted, updated or deleted.
        rows_changed: u64,
        /// Rowid of the row it inserted last.
        last_insert_rowid: i64,
    },
}

/// `variant { Ok : nat64 }`'s header (magic, type table, argument type) and the index of `Ok`:
/// a [`SubmitResult::Ok`] without its 8 value bytes (the tests check it against `candid`).
const SUBMIT_OK_PREFIX: [u8; 14] = [
    0x44, 0x49, 0x44, 0x4c, 0x01, 0x6b, 0x01, 0xbc, 0x8a, 0x01, 0x78, 0x01, 0x00, 0x00,
];

/// `variant { Ok : blob }`'s header and the index of `Ok`: a [`PackedResult::Ok`] without the
/// blob's length and bytes.
const PACKED_OK_PREFIX: [u8; 16] = [
    0x44, 0x49, 0x44, 0x4c, 0x02, 0x6b, 0x01, 0xbc, 0x8a, 0x01, 0x01, 0x6d, 0x7b, 0x01, 0x00, 0x00,
];

/// `variant { Ok : variant { Committed : record { rows_changed : nat64; last_insert_rowid :
/// int64 } } }`'s header and the indexes of `Ok` and `Committed`: a committed
/// [`WriteResult::Ok`] without its two fields (`rows_changed` first, then `last_insert_rowid`).
const COMMITTED_OK_PREFIX: [u8; 36] = [
    0x44, 0x49, 0x44, 0x4c, 0x03, 0x6b, 0x01, 0xbc, 0x8a, 0x01, 0x01, 0x6b, 0x01, 0x9c, 0xc4, 0xbf,
    0x6d, 0x02, 0x6c, 0x02, 0x8e, 0x81, 0x91, 0x9a, 0x05, 0x78, 0xf8, 0xfc, 0x93, 0xcb, 0x0e, 0x74,
    0x01, 0x00, 0x00, 0x00,
];

/// `prefix` followed by `value`.
fn with_prefix(prefix: &[u8], value: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(prefix.len() + value.len());
    out.extend_from_slice(prefix);
    out.extend_from_slice(value);
    out
}

/// Encodes the reply of a `submit_*` method, [`SubmitResult`]: `Ok` from a precomputed prefix
/// (as `variant { Ok : nat64 }`, 22 bytes), `Err` with `candid`.
pub fn encode_submit_result(result: Result<Ticket, WriteError>) -> Vec<u8> {
    match result {
        Ok(ticket) => with_prefix(&SUBMIT_OK_PREFIX, &ticket.to_le_bytes()),
        Err(e) => candid::encode_one(SubmitResult::Err(e)).expect("a reply encodes"),
    }
}

/// Encodes the reply of an unbatched write, [`WriteResult`]: `Ok(Committed { .. })` from a
/// precomputed prefix (as `variant { Ok : variant { Committed : record { .. } } }`, 52 bytes),
/// `Ok(Failed)` and `Err` with `candid`.
pub fn encode_write_result(result: Result<Outcome, WriteError>) -> Vec<u8> {
    match result {
        Ok(Outcome::Committed {
            rows_changed,
            last_insert_rowid,
        }) => {
            let mut value = [0u8; 16];
            value[..8].copy_from_slice(&rows_changed.to_le_bytes());
            value[8..].copy_from_slice(&last_insert_rowid.to_le_bytes());
            with_prefix(&COMMITTED_OK_PREFIX, &value)
        }
        other => candid::encode_one(WriteResult::from(other)).expect("a reply encodes"),
    }
}

/// Encodes the reply of `execute_batch_packed`, [`PackedResult`]: `Ok` as `variant { Ok : blob }`
/// (the blob after a precomputed prefix), `Err` with `candid`.
pub fn encode_packed_result(result: Result<Vec<u8>, WriteError>) -> Vec<u8> {
    let blob = match result {
        Ok(blob) => blob,
        Err(e) => return candid::encode_one(PackedResult::Err(e)).expect("a reply encodes"),
    };
    let mut out = Vec::with_capacity(PACKED_OK_PREFIX.len() + 10 + blob.len());
    out.extend_from_slice(&PACKED_OK_PREFIX);
    push_leb128(&mut out, blob.len() as u64);
    out.extend_from_slice(&blob);
    out
}

/// Appends `n` as unsigned LEB128.
fn push_leb128(out: &mut Vec<u8>, mut n: u64) {
    while n >= 0x80 {
        out.push(n as u8 | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

#[cfg(test)]
mod tests;
