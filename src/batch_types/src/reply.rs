//! The bound every batch reply keeps: the outcomes of a batch of `n` ops fit one reply of the
//! Internet Computer (2 MiB), in every reply format of the library, whatever its ops do.
//!
//! A reply larger than [`MAX_REPLY_BYTES`] traps in `ic0.msg_reply_data_append`: the batch is
//! rolled back, and so is every retry of it, so a batch whose outcomes could not be answered
//! would never commit. What makes an outcome large is a failure's message (SQLite's, or a
//! controller's trigger: `RAISE(ABORT, '...')` can say anything). So a failure message is cut
//! to [`max_error_bytes`]`(n)`: at most [`MAX_ERROR_BYTES`] (1 KiB, the queue's cap), and for a
//! large batch less, the same share of the reply for every op. A cut message ends with
//! [`TRUNCATION_MARK`]; the failure's code is never cut. The cut is applied where the outcomes
//! are made (batch_core), before a keyed batch records them, so a duplicate is answered with
//! the same text.
//!
//! The bound, for a batch of `n` ops (`n` ≤ [`MAX_BOUNDED_OPS`]):
//!
//! ```text
//! reply bytes ≤ REPLY_FRAME_BYTES + n × (OUTCOME_FIXED_BYTES + max_error_bytes(n)) ≤ MAX_REPLY_BYTES
//! ```
//!
//! where [`OUTCOME_FIXED_BYTES`] bounds what one outcome takes besides its message in every
//! format (Candid: a `Committed` outcome 17 bytes, a `Failed` one 7 plus the message; the packed
//! formats: 21 and 8 at most, a run of committed outcomes less per outcome) and
//! [`REPLY_FRAME_BYTES`] what a reply takes besides its outcomes (Candid's header and type
//! table, the packed version and flags bytes, the length of the outcome vector). At 10,000
//! ops a message keeps 185 bytes; at 1,000, the whole 1 KiB.

/// The most bytes a reply may hold: the Internet Computer's limit on a response payload
/// (2 MiB; the interface specification's `MAX_INTER_CANISTER_PAYLOAD_IN_BYTES`, which ingress
/// replies share).
pub const MAX_REPLY_BYTES: usize = 2 * 1024 * 1024;

/// The longest failure message an outcome keeps (SQLite's syntax errors quote the whole
/// statement): the queue's outcomes, and a client batch's of at most 1,997 ops.
pub const MAX_ERROR_BYTES: usize = 1_024;

/// The most bytes one outcome takes in any reply format of the library, besides its failure
/// message.
pub const OUTCOME_FIXED_BYTES: usize = 24;

/// The most bytes a batch reply takes besides its outcomes, in any format of the library.
pub const REPLY_FRAME_BYTES: usize = 4 * 1024;

/// The largest batch for which [`max_error_bytes`] leaves every failure at least its code and a
/// message of 16 bytes (the library's batches hold at most 10,000 ops).
pub const MAX_BOUNDED_OPS: usize =
    (MAX_REPLY_BYTES - REPLY_FRAME_BYTES) / (OUTCOME_FIXED_BYTES + 16);

/// What ends a cut message: `…` (3 bytes in UTF-8), counted in the cap.
pub const TRUNCATION_MARK: char = '…';

/// The most bytes of a failure message in the outcomes of a batch of `ops` ops:
/// [`MAX_ERROR_BYTES`], or less when `ops` such messages would not fit one reply (see the
/// [module documentation](self)). 185 at 10,000 ops.
pub const fn max_error_bytes(ops: usize) -> usize {
    let share = (MAX_REPLY_BYTES - REPLY_FRAME_BYTES) / if ops == 0 { 1 } else { ops };
    let room = share.saturating_sub(OUTCOME_FIXED_BYTES);
    if room < MAX_ERROR_BYTES {
        room
    } else {
        MAX_ERROR_BYTES
    }
}

/// Cuts `message` to at most `max_bytes` bytes, at a character boundary, ending with
/// [`TRUNCATION_MARK`]; a message that fits is left as it is. Below the mark's own 3 bytes the
/// message is emptied.
pub fn truncate_message(message: &mut String, max_bytes: usize) {
    if message.len() <= max_bytes {
        return;
    }
    let mark = TRUNCATION_MARK.len_utf8();
    if max_bytes < mark {
        message.clear();
        return;
    }
    let mut end = max_bytes - mark;
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    message.truncate(end);
    message.push(TRUNCATION_MARK);
}

#[cfg(test)]
mod tests;
