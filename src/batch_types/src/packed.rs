//! The generic packed batch: a canister's declared writes ([`crate::declare`]) and their
//! outcomes in a compact binary form, carried as a Candid `blob` both ways. One format for
//! every canister built on ic-rusqlite-batch: the ops are encoded by their declared types, so
//! the same code packs a todo store's writes and a ledger's.
//!
//! # Format (request version 16, reply version 17)
//!
//! Integers are LEB128 varints (`uint`), signed ones zigzag-encoded first (`sint`: 0, −1, 1,
//! −2, ... become 0, 1, 2, 3, ...); a real is its 8 IEEE 754 bytes, little-endian; a text or a
//! blob is its byte length as a `uint`, then the bytes (a text's are UTF-8).
//!
//! Request: the byte `16` (the version); the declaration's digest (8 bytes,
//! [`Declaration::digest`](crate::declare::Declaration::digest)); the batch key's
//! `created_at_time` (nanoseconds since the Unix epoch, 8 bytes little-endian) and its 16 id
//! bytes; then each op: the index of its write in the declaration (`uint`), then its
//! parameters in declared order, each by its declared kind (`integer`: `sint`, `real`: 8
//! bytes, `text` and `blob`: length and bytes), a nullable one preceded by a byte `0` (`NULL`,
//! no value follows) or `1`. No tags: what a byte means follows from the declaration.
//!
//! Reply: the byte `17`, a flags byte (bit 0: the batch is a duplicate, answered with the
//! outcomes recorded when it first ran; other bits must be 0), then the outcomes in op order,
//! each record standing for one outcome or a run of them:
//!
//! | tag | outcomes | fields |
//! |---:|---|---|
//! | 0 | one `Committed` | `rows_changed: uint`, `last_insert_rowid: sint` |
//! | 1 | one `Failed` | `code: sint`, `message: text` |
//! | 2 | `count` `Committed`, all with `rows_changed`, the k-th (from 0) with `last_insert_rowid` = `first + k · step` | `count: uint`, `rows_changed: uint`, `first: sint`, `step: sint` |
//! | 3 | `count` identical `Failed` | `count: uint`, `code: sint`, `message: text` |
//! | 4 | `count` `NotExecuted` | `count: uint` |
//!
//! These outcome records are the library's one outcome codec ([`put_outcomes`],
//! [`read_outcomes_from`]): the reference canister's hand-written packed reply carries them
//! too, and `batch_core` stores a keyed batch's outcomes in them.
//!
//! A run is what a batch of inserts returns (each op its own rowid, one above the last) and of
//! single-row updates (step 0): 10,000 committed inserts take a few bytes, and each reply byte
//! saved is 50 instructions the canister does not spend on `ic0.msg_reply_data_append`. So are
//! the ops a batch's budget did not reach (one record for all of them) and a failure repeated
//! (a trigger's `RAISE` on every op of a batch: its message once).
//!
//! Each value has one encoding: a varint is read only in its shortest form (no padding bytes
//! of 0x80 ending in 0x00), so the bytes of a request are a function of its ops, and a client
//! that encodes the same ops again sends the same bytes (the canister digests them to tell a
//! retry from another batch under the same key).
//!
//! Anything else (another version, another declaration, an unknown write index, a truncated
//! field, a varint not in its shortest form, text that is not UTF-8, a presence byte other
//! than 0 or 1, bytes after the last op, more ops or outcomes than expected, an unknown flag)
//! is refused whole, naming the byte offset where the refused field starts; a request is
//! refused before any op runs.

use crate::declare::{Declaration, ParamKind};
use crate::{BatchKey, OpError, Outcome, SqlParam};

/// The format version of requests.
pub const REQUEST_VERSION: u8 = 16;
/// The format version of replies.
pub const REPLY_VERSION: u8 = 17;
/// Bit 0 of a reply's flags: the batch was a duplicate of a recorded one.
pub const FLAG_DUPLICATE: u8 = 1;
/// Bytes before the ops of a request: the version, the declaration's digest, the key's
/// `created_at_time` and its id.
pub const REQUEST_HEADER_BYTES: usize = 1 + 8 + 8 + 16;

const COMMITTED: u8 = 0;
const FAILED: u8 = 1;
const COMMITTED_RUN: u8 = 2;
const FAILED_REPEAT: u8 = 3;
const NOT_EXECUTED: u8 = 4;
/// The shortest run of committed outcomes [`put_outcomes`] writes as one record.
const MIN_RUN: usize = 3;

/// Why packed bytes were refused: what was expected, at which byte offset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackedError {
    /// Byte offset in the input.
    pub offset: usize,
    /// What was wrong there.
    pub what: String,
}

impl std::fmt::Display for PackedError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "packed batch, byte {}: {}", self.offset, self.what)
    }
}

impl std::error::Error for PackedError {}

/// The header of a request: the digest of the declaration it was built for, and the key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestHeader {
    /// The digest of the declaration the client built the request for.
    pub digest: [u8; 8],
    /// The batch's key.
    pub key: BatchKey,
}

/// One decoded op: the index of its write in the declaration and its parameters, in declared
/// order.
#[derive(Debug, Clone, PartialEq)]
pub struct PackedOp {
    /// The write's index in the declaration.
    pub write: usize,
    /// Its parameters (`SqlParam::Null` for an absent nullable one).
    pub params: Vec<SqlParam>,
}

/// A decoded reply.
#[derive(Debug, Clone, PartialEq)]
pub struct PackedReply {
    /// The batch was a duplicate: nothing ran, the outcomes are the recorded ones.
    pub duplicate: bool,
    /// One outcome per op, in order.
    pub outcomes: Vec<Outcome>,
}

/// Starts a request for `declaration` under `key`: append each op with
/// [`Declaration::put_op`](crate::declare::Declaration) or a [`Writes`](crate::declare::Writes)
/// type's `put_op`.
pub fn request_header(out: &mut Vec<u8>, digest: [u8; 8], key: &BatchKey) {
    out.push(REQUEST_VERSION);
    out.extend_from_slice(&digest);
    out.extend_from_slice(&key.created_at_time.to_le_bytes());
    out.extend_from_slice(&key.id);
}

/// Reads a request's header (without reading its ops): the bytes after it are the ops, which
/// the canister digests to tell a retry from another batch under the same key.
pub fn read_header(bytes: &[u8]) -> Result<(RequestHeader, &[u8]), PackedError> {
    let mut r = Reader::with_version(bytes, REQUEST_VERSION)?;
    let digest = r.array::<8>("the declaration's digest")?;
    let created_at_time = u64::from_le_bytes(r.array::<8>("created_at_time")?);
    let id = r.array::<16>("the key's id")?;
    Ok((
        RequestHeader {
            digest,
            key: BatchKey {
                created_at_time,
                id,
            },
        },
        &bytes[REQUEST_HEADER_BYTES..],
    ))
}

/// Reads the ops after a request's header (`ops`, as [`read_header`] returned them; offsets in
/// errors count from the request's first byte) by `declaration`, at most `max_ops`; a text or
/// blob longer than its declared limit is read whole (its check, with the write and the
/// parameter named, is [`Declaration::check`](crate::declare::Declaration::check)'s).
pub fn read_ops(
    declaration: &Declaration,
    ops: &[u8],
    max_ops: usize,
) -> Result<Vec<PackedOp>, PackedError> {
    let mut r = Reader {
        bytes: ops,
        offset: 0,
        base: REQUEST_HEADER_BYTES,
    };
    let mut out = Vec::new();
    while !r.done() {
        if out.len() == max_ops {
            return Err(r.error(format!("more than {max_ops} ops")));
        }
        let at = r.offset;
        let index = r.uint("a write index")?;
        let Some(write) = usize::try_from(index)
            .ok()
            .and_then(|i| declaration.writes.get(i))
        else {
            r.offset = at;
            return Err(r.error(format!(
                "write index {index}; the declaration has {} writes",
                declaration.writes.len()
            )));
        };
        let mut params = Vec::with_capacity(write.params.len());
        for param in write.params {
            if param.nullable {
                match r.byte(param.name)? {
                    0 => {
                        params.push(SqlParam::Null);
                        continue;
                    }
                    1 => {}
                    other => {
                        r.offset -= 1;
                        return Err(r.error(format!(
                            "{}: presence byte {other} (0 or 1 expected)",
                            param.name
                        )));
                    }
                }
            }
            params.push(match param.kind {
                ParamKind::Integer => SqlParam::Integer(r.sint(param.name)?),
                ParamKind::Real => SqlParam::Real(f64::from_le_bytes(r.array::<8>(param.name)?)),
                ParamKind::Text => SqlParam::Text(r.text(param.name)?),
                ParamKind::Blob => SqlParam::Blob(r.bytes(param.name)?.to_vec()),
            });
        }
        out.push(PackedOp {
            write: index as usize,
            params,
        });
    }
    Ok(out)
}

/// Packs the reply of a batch: [`REPLY_VERSION`], the flags, then the outcomes (runs of
/// committed outcomes as one record).
pub fn encode_reply(duplicate: bool, outcomes: &[Outcome]) -> Vec<u8> {
    let mut out = Vec::with_capacity(16);
    out.push(REPLY_VERSION);
    out.push(if duplicate { FLAG_DUPLICATE } else { 0 });
    put_outcomes(&mut out, outcomes);
    out
}

/// Unpacks a reply of at most `max_outcomes` outcomes (the ops the request sent): a reply that
/// holds more is refused, so that a run's count cannot make the caller allocate without bound.
pub fn decode_reply(bytes: &[u8], max_outcomes: usize) -> Result<PackedReply, PackedError> {
    let mut r = Reader::with_version(bytes, REPLY_VERSION)?;
    let flags = r.byte("the flags byte")?;
    if flags & !FLAG_DUPLICATE != 0 {
        r.offset -= 1;
        return Err(r.error(format!("unknown flags {flags:#04x}")));
    }
    Ok(PackedReply {
        duplicate: flags & FLAG_DUPLICATE != 0,
        outcomes: read_outcomes(&mut r, max_outcomes)?,
    })
}

/// Appends `outcomes` as outcome records: runs of three or more committed outcomes with one
/// `rows_changed` and evenly spaced rowids as one record each, a failure repeated in a row as
/// one record, and the ops not executed in a row as one. O(outcomes + bytes of their messages).
pub fn put_outcomes(out: &mut Vec<u8>, outcomes: &[Outcome]) {
    let mut i = 0;
    while i < outcomes.len() {
        let rest = &outcomes[i..];
        if let Some((count, rows_changed, first, step)) = committed_run(rest) {
            out.push(COMMITTED_RUN);
            put_uint(out, count as u64);
            put_uint(out, rows_changed);
            put_sint(out, first);
            put_sint(out, step);
            i += count;
            continue;
        }
        let repeats = || rest.iter().take_while(|o| *o == &rest[0]).count();
        i += match &rest[0] {
            Outcome::Committed {
                rows_changed,
                last_insert_rowid,
            } => {
                out.push(COMMITTED);
                put_uint(out, *rows_changed);
                put_sint(out, *last_insert_rowid);
                1
            }
            Outcome::Failed(OpError { code, message }) => {
                let count = repeats();
                if count == 1 {
                    out.push(FAILED);
                } else {
                    out.push(FAILED_REPEAT);
                    put_uint(out, count as u64);
                }
                put_sint(out, i64::from(*code));
                put_text(out, message);
                count
            }
            Outcome::NotExecuted => {
                let count = repeats();
                put_not_executed(out, count);
                count
            }
        };
    }
}

/// Appends one record of `count` (at least 1) [`Outcome::NotExecuted`], as [`put_outcomes`]
/// writes them in a row: what a batch records for the ops its budget did not reach, without
/// making them first.
pub fn put_not_executed(out: &mut Vec<u8>, count: usize) {
    debug_assert!(count > 0, "a record stands for at least one outcome");
    out.push(NOT_EXECUTED);
    put_uint(out, count as u64);
}

/// The run of committed outcomes `outcomes` starts with, as (count, rows_changed, first rowid,
/// step), if it holds at least [`MIN_RUN`] of them.
fn committed_run(outcomes: &[Outcome]) -> Option<(usize, u64, i64, i64)> {
    let committed = |o: &Outcome| match o {
        Outcome::Committed {
            rows_changed,
            last_insert_rowid,
        } => Some((*rows_changed, *last_insert_rowid)),
        Outcome::Failed(_) | Outcome::NotExecuted => None,
    };
    let (rows_changed, first) = committed(outcomes.first()?)?;
    let (second_rows, second) = committed(outcomes.get(1)?)?;
    let step = second.checked_sub(first)?;
    if second_rows != rows_changed {
        return None;
    }
    let mut count = 2;
    let mut last = second;
    while let Some((rows, rowid)) = outcomes.get(count).and_then(committed) {
        if rows != rows_changed || last.checked_add(step) != Some(rowid) {
            break;
        }
        last = rowid;
        count += 1;
    }
    (count >= MIN_RUN).then_some((count, rows_changed, first, step))
}

/// Reads the outcome records of `bytes` from byte `start` to the end, at most `max_outcomes`
/// outcomes (errors name offsets in `bytes`): the outcome runs of every packed reply, this
/// format's and the reference canister's hand-written one.
pub fn read_outcomes_from(
    bytes: &[u8],
    start: usize,
    max_outcomes: usize,
) -> Result<Vec<Outcome>, PackedError> {
    let mut r = Reader {
        bytes,
        offset: start,
        base: 0,
    };
    read_outcomes(&mut r, max_outcomes)
}

/// Reads outcomes up to the end of the input, at most `max_outcomes`.
fn read_outcomes(r: &mut Reader<'_>, max_outcomes: usize) -> Result<Vec<Outcome>, PackedError> {
    let mut outcomes = Vec::new();
    while !r.done() {
        if outcomes.len() == max_outcomes {
            return Err(r.error(format!("more than {max_outcomes} outcomes")));
        }
        let room = (max_outcomes - outcomes.len()) as u64;
        // The outcomes a record of several stands for: 1 to `room`.
        let count = |r: &mut Reader<'_>| {
            let at = r.offset;
            let count = r.uint("count")?;
            if count == 0 || count > room {
                r.offset = at;
                return Err(r.error(format!("a run of {count} outcomes (1 to {room} expected)")));
            }
            Ok(count as usize)
        };
        match r.byte("an outcome tag")? {
            COMMITTED_RUN => {
                let at = r.offset;
                let count = count(r)? as u64;
                let rows_changed = r.uint("rows_changed")?;
                let first = r.sint("first")?;
                let step = r.sint("step")?;
                // The last rowid must be in range: then every one before it is.
                let span = i128::from(step) * i128::from(count - 1);
                if i64::try_from(i128::from(first) + span).is_err() {
                    r.offset = at;
                    return Err(r.error("a run's last rowid is out of the 64-bit range".into()));
                }
                // first + k · step lies between first and the last rowid, so the wrapping
                // arithmetic gives it exactly (k · step alone may pass the 64-bit range).
                outcomes.extend((0..count).map(|k| Outcome::Committed {
                    rows_changed,
                    last_insert_rowid: first.wrapping_add((k as i64).wrapping_mul(step)),
                }));
            }
            COMMITTED => outcomes.push(Outcome::Committed {
                rows_changed: r.uint("rows_changed")?,
                last_insert_rowid: r.sint("last_insert_rowid")?,
            }),
            FAILED => outcomes.push(Outcome::Failed(r.op_error()?)),
            FAILED_REPEAT => {
                let count = count(r)?;
                let failed = Outcome::Failed(r.op_error()?);
                outcomes.extend(std::iter::repeat_n(failed, count));
            }
            NOT_EXECUTED => {
                let count = count(r)?;
                outcomes.extend(std::iter::repeat_n(Outcome::NotExecuted, count));
            }
            tag => {
                r.offset -= 1;
                return Err(r.error(format!("unknown outcome tag {tag}")));
            }
        }
    }
    Ok(outcomes)
}

/// Appends `n` as an LEB128 varint.
pub fn put_uint(out: &mut Vec<u8>, mut n: u64) {
    while n >= 0x80 {
        out.push(n as u8 | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

/// Appends `n` zigzag-encoded, as an LEB128 varint.
pub fn put_sint(out: &mut Vec<u8>, n: i64) {
    put_uint(out, ((n << 1) ^ (n >> 63)) as u64);
}

/// Appends `bytes`' length as a varint, then the bytes.
pub fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    put_uint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

/// Appends `text`'s UTF-8 length as a varint, then its bytes.
pub fn put_text(out: &mut Vec<u8>, text: &str) {
    put_bytes(out, text.as_bytes());
}

/// The bytes [`put_uint`] writes for `n`.
pub fn uint_len(n: u64) -> usize {
    (64 - (n | 1).leading_zeros() as usize).div_ceil(7)
}

/// The bytes [`put_sint`] writes for `n`.
pub fn sint_len(n: i64) -> usize {
    uint_len(((n << 1) ^ (n >> 63)) as u64)
}

/// Why the bytes at a varint's place are not one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VarintError {
    /// The input ended at byte `at` (from the varint's start) before the varint did.
    Ended {
        /// Where the input ended, from the varint's first byte.
        at: usize,
    },
    /// More than 64 bits.
    TooLong,
    /// `value` in `len` bytes where fewer hold it: a padded encoding.
    Padded {
        /// The number.
        value: u64,
        /// The bytes it took.
        len: usize,
    },
}

impl std::fmt::Display for VarintError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            VarintError::Ended { .. } => write!(f, "the input ended inside a varint"),
            VarintError::TooLong => write!(f, "varint longer than 64 bits"),
            VarintError::Padded { value, len } => {
                write!(
                    f,
                    "varint {value} padded to {len} bytes (not its shortest form)"
                )
            }
        }
    }
}

impl std::error::Error for VarintError {}

/// Reads the LEB128 varint that `bytes` start with, in its shortest form only: the number and
/// the bytes it took. One encoding per number, so that the bytes of a request are a function of
/// its ops (the canister digests them to tell a retry from another batch under the same key):
/// a last byte of 0 after others (`81 00` for 1) is refused as [`VarintError::Padded`]. The one
/// varint reader of the library's formats.
pub fn read_uint(bytes: &[u8]) -> Result<(u64, usize), VarintError> {
    let mut n: u64 = 0;
    for i in 0..10 {
        let b = *bytes.get(i).ok_or(VarintError::Ended { at: i })?;
        // The tenth byte may only hold the 64th bit.
        if i == 9 && b & 0xfe != 0 {
            return Err(VarintError::TooLong);
        }
        n |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            if i > 0 && b == 0 {
                return Err(VarintError::Padded {
                    value: n,
                    len: i + 1,
                });
            }
            return Ok((n, i + 1));
        }
    }
    Err(VarintError::TooLong)
}

/// Reads fields from packed bytes, tracking the offset for errors.
struct Reader<'b> {
    bytes: &'b [u8],
    offset: usize,
    /// Where `bytes` start in the whole input (for the offsets of errors).
    base: usize,
}

impl<'b> Reader<'b> {
    fn with_version(bytes: &'b [u8], version: u8) -> Result<Self, PackedError> {
        let mut r = Reader {
            bytes,
            offset: 0,
            base: 0,
        };
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
            offset: self.base + self.offset,
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

    /// A varint in its shortest form ([`read_uint`]).
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

    fn bytes(&mut self, what: &str) -> Result<&'b [u8], PackedError> {
        let len = self.uint(what)?;
        let start = self.offset;
        let bytes = usize::try_from(len)
            .ok()
            .and_then(|len| self.bytes.get(start..start.checked_add(len)?))
            .ok_or_else(|| self.error(format!("{what}: {len} bytes expected, the input ended")))?;
        self.offset += bytes.len();
        Ok(bytes)
    }

    /// A failure's code and message.
    fn op_error(&mut self) -> Result<OpError, PackedError> {
        let at = self.offset;
        let code = i32::try_from(self.sint("code")?).map_err(|_| PackedError {
            offset: self.base + at,
            what: "code does not fit in 32 bits".into(),
        })?;
        Ok(OpError {
            code,
            message: self.text("message")?,
        })
    }

    fn text(&mut self, what: &str) -> Result<String, PackedError> {
        let start = self.offset;
        let bytes = self.bytes(what)?;
        match std::str::from_utf8(bytes) {
            Ok(text) => Ok(text.to_owned()),
            Err(e) => {
                self.offset = start;
                Err(self.error(format!("{what} is not UTF-8: {e}")))
            }
        }
    }
}
