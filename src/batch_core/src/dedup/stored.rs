//! The stored form of a keyed batch's outcomes: what a duplicate is answered with, so it must
//! give back every outcome exactly, and it is kept for the whole window, so it must be small.
//!
//! The byte `2` (the version), then the outcome records of every packed reply of the library
//! (`batch_types::packed::put_outcomes`, one codec): a run of committed inserts, a repeated
//! failure and the ops the budget did not reach are one record each, so a batch of 1,000
//! inserts takes a few bytes.
//!
//! Version 1, written before an op not executed was an outcome of its own, is read too (the
//! store lives across upgrades): the same records, where such an op was a failure with code 9
//! (`SQLITE_INTERRUPT`) and the message `not executed: ...`; it is read as
//! [`Outcome::NotExecuted`], which is what the batch's retry must be answered (its client may
//! send the op again).

use batch_types::packed::{put_not_executed, put_outcomes, read_outcomes_from};

use crate::op::Outcome;

/// The version byte of the stored form.
const VERSION: u8 = 2;
/// The version whose ops not executed were failures ([`is_v1_not_executed`]).
const VERSION_1: u8 = 1;

/// Encodes `executed` followed by `not_executed` ops the budget did not reach. O(outcomes +
/// bytes of their messages).
pub(crate) fn encode(executed: &[Outcome], not_executed: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(16);
    out.push(VERSION);
    put_outcomes(&mut out, executed);
    if not_executed > 0 {
        put_not_executed(&mut out, not_executed);
    }
    out
}

/// Decodes exactly `expected` outcomes; anything else (another version, an unknown tag, a
/// truncated field, more or fewer outcomes) is an error naming the byte offset.
pub(crate) fn decode(bytes: &[u8], expected: usize) -> Result<Vec<Outcome>, String> {
    let version = *bytes.first().ok_or("byte 0: the record is empty")?;
    if version != VERSION && version != VERSION_1 {
        return Err(format!(
            "version {version}; version {VERSION} (or {VERSION_1}) expected"
        ));
    }
    let mut outcomes = read_outcomes_from(bytes, 1, expected)
        .map_err(|e| format!("byte {}: {}", e.offset, e.what))?;
    if outcomes.len() != expected {
        return Err(format!(
            "{} outcomes stored, {expected} expected",
            outcomes.len()
        ));
    }
    if version == VERSION_1 {
        for outcome in &mut outcomes {
            if is_v1_not_executed(outcome) {
                *outcome = Outcome::NotExecuted;
            }
        }
    }
    Ok(outcomes)
}

/// How version 1 stored an op its batch's budget did not reach: `SQLITE_INTERRUPT` (9) and the
/// message `not executed: the batch's instruction budget (N instructions) was used up before
/// this op started` (an op interrupted while it ran says `interrupted: ...`).
fn is_v1_not_executed(outcome: &Outcome) -> bool {
    matches!(outcome, Outcome::Failed(error)
        if error.code == 9 && error.message.starts_with("not executed: "))
}
