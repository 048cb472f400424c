//! The stored form of a keyed batch's outcomes: what a duplicate is answered with, so it must
//! give back every outcome exactly, and it is kept for the whole window, so it must be small.
//!
//! Integers are LEB128 varints (`uint`), signed ones zigzag-encoded first (`sint`); a text is
//! its UTF-8 byte length as a `uint`, then the bytes. The blob is the byte `1` (the version),
//! then records in op order, each standing for one outcome or a run of them:
//!
//! | tag | outcomes | fields |
//! |---:|---|---|
//! | 0 | one `Committed` | `rows_changed: uint`, `last_insert_rowid: sint` |
//! | 1 | one `Failed` | `code: sint`, `error: text` |
//! | 2 | `count` `Committed`, all with `rows_changed`, the k-th (from 0) with `last_insert_rowid` = `first + k · step` | `count: uint`, `rows_changed: uint`, `first: sint`, `step: sint` |
//! | 3 | `count` identical `Failed` | `count: uint`, `code: sint`, `error: text` |
//!
//! A batch of 1,000 inserts is one run (a few bytes); the ops a budget did not reach are one
//! repeated failure.

use crate::op::OpOutcome;

/// The version byte of the stored form.
const VERSION: u8 = 1;
const COMMITTED: u8 = 0;
const FAILED: u8 = 1;
const COMMITTED_RUN: u8 = 2;
const FAILED_REPEAT: u8 = 3;
/// The shortest run of committed outcomes written as one record.
const MIN_RUN: usize = 3;

/// Encodes `executed` followed by `tail` copies of `tail_outcome` (the ops a budget did not
/// reach). O(outcomes + bytes of their error texts).
pub(crate) fn encode(executed: &[OpOutcome], tail: usize, tail_outcome: &OpOutcome) -> Vec<u8> {
    let mut out = Vec::with_capacity(16);
    out.push(VERSION);
    let mut i = 0;
    while i < executed.len() {
        let rest = &executed[i..];
        if let Some((count, rows_changed, first, step)) = committed_run(rest) {
            out.push(COMMITTED_RUN);
            put_uint(&mut out, count as u64);
            put_uint(&mut out, rows_changed);
            put_sint(&mut out, first);
            put_sint(&mut out, step);
            i += count;
            continue;
        }
        let repeats = rest.iter().take_while(|o| *o == &rest[0]).count();
        put_outcome(&mut out, &rest[0], repeats);
        i += repeats;
    }
    if tail > 0 {
        put_outcome(&mut out, tail_outcome, tail);
    }
    out
}

/// Writes `count` (at least 1) copies of `outcome`.
fn put_outcome(out: &mut Vec<u8>, outcome: &OpOutcome, count: usize) {
    match outcome {
        OpOutcome::Committed {
            rows_changed,
            last_insert_rowid,
        } => {
            // Equal committed outcomes form a run of step 0 from 3 on; fewer are written singly.
            for _ in 0..count {
                out.push(COMMITTED);
                put_uint(out, *rows_changed);
                put_sint(out, *last_insert_rowid);
            }
        }
        OpOutcome::Failed { code, error } => {
            if count == 1 {
                out.push(FAILED);
            } else {
                out.push(FAILED_REPEAT);
                put_uint(out, count as u64);
            }
            put_sint(out, i64::from(*code));
            put_uint(out, error.len() as u64);
            out.extend_from_slice(error.as_bytes());
        }
    }
}

/// The run of committed outcomes `outcomes` starts with, as (count, rows_changed, first rowid,
/// step), if it holds at least [`MIN_RUN`] of them.
fn committed_run(outcomes: &[OpOutcome]) -> Option<(usize, u64, i64, i64)> {
    let committed = |o: &OpOutcome| match o {
        OpOutcome::Committed {
            rows_changed,
            last_insert_rowid,
        } => Some((*rows_changed, *last_insert_rowid)),
        OpOutcome::Failed { .. } => None,
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

/// Decodes exactly `expected` outcomes; anything else (another version, an unknown tag, a
/// truncated field, more or fewer outcomes) is an error naming the byte offset.
pub(crate) fn decode(bytes: &[u8], expected: usize) -> Result<Vec<OpOutcome>, String> {
    let mut r = Reader { bytes, offset: 0 };
    match r.byte()? {
        VERSION => {}
        v => return Err(format!("version {v}; version {VERSION} expected")),
    }
    let mut outcomes = Vec::with_capacity(expected);
    while r.offset < bytes.len() {
        let at = r.offset;
        let room = (expected - outcomes.len()) as u64;
        let count_in = |count: u64| {
            if count == 0 || count > room {
                Err(format!(
                    "byte {at}: a record of {count} outcomes (1 to {room} expected)"
                ))
            } else {
                Ok(count)
            }
        };
        match r.byte()? {
            COMMITTED => outcomes.push(OpOutcome::Committed {
                rows_changed: r.uint()?,
                last_insert_rowid: r.sint()?,
            }),
            FAILED => outcomes.push(r.failed()?),
            COMMITTED_RUN => {
                let count = count_in(r.uint()?)?;
                let rows_changed = r.uint()?;
                let first = r.sint()?;
                let step = r.sint()?;
                let span = i128::from(step) * i128::from(count - 1);
                if i64::try_from(i128::from(first) + span).is_err() {
                    return Err(format!("byte {at}: a run's last rowid is out of range"));
                }
                outcomes.extend((0..count).map(|k| OpOutcome::Committed {
                    rows_changed,
                    last_insert_rowid: first.wrapping_add((k as i64).wrapping_mul(step)),
                }));
            }
            FAILED_REPEAT => {
                let count = count_in(r.uint()?)?;
                let failed = r.failed()?;
                outcomes.extend(std::iter::repeat_n(failed, count as usize));
            }
            tag => return Err(format!("byte {at}: unknown record tag {tag}")),
        }
        if outcomes.len() > expected {
            return Err(format!("byte {at}: more than {expected} outcomes"));
        }
    }
    if outcomes.len() != expected {
        return Err(format!(
            "{} outcomes stored, {expected} expected",
            outcomes.len()
        ));
    }
    Ok(outcomes)
}

fn put_uint(out: &mut Vec<u8>, mut n: u64) {
    while n >= 0x80 {
        out.push(n as u8 | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

fn put_sint(out: &mut Vec<u8>, n: i64) {
    put_uint(out, ((n << 1) ^ (n >> 63)) as u64);
}

struct Reader<'b> {
    bytes: &'b [u8],
    offset: usize,
}

impl Reader<'_> {
    fn byte(&mut self) -> Result<u8, String> {
        let b = *self
            .bytes
            .get(self.offset)
            .ok_or_else(|| format!("byte {}: the record ended early", self.offset))?;
        self.offset += 1;
        Ok(b)
    }

    fn uint(&mut self) -> Result<u64, String> {
        let start = self.offset;
        let (n, len) = batch_types::packed::read_uint(&self.bytes[start..])
            .map_err(|e| format!("byte {start}: {e}"))?;
        self.offset += len;
        Ok(n)
    }

    fn sint(&mut self) -> Result<i64, String> {
        let z = self.uint()?;
        Ok((z >> 1) as i64 ^ -((z & 1) as i64))
    }

    fn failed(&mut self) -> Result<OpOutcome, String> {
        let at = self.offset;
        let code = i32::try_from(self.sint()?)
            .map_err(|_| format!("byte {at}: code does not fit in 32 bits"))?;
        let len = self.uint()?;
        let start = self.offset;
        let text = usize::try_from(len)
            .ok()
            .and_then(|len| self.bytes.get(start..start.checked_add(len)?))
            .ok_or_else(|| format!("byte {start}: {len} bytes of text expected"))?;
        let error = std::str::from_utf8(text)
            .map_err(|e| format!("byte {start}: text is not UTF-8: {e}"))?
            .to_owned();
        self.offset += text.len();
        Ok(OpOutcome::Failed { code, error })
    }
}
