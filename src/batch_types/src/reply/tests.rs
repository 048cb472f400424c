use serde_bytes::ByteBuf;

use super::*;
use crate::declare::{PackedWritesResult, WritesReply, WritesResult};
use crate::{BatchResult, OpError, Outcome, packed};

/// Batch sizes around every step of the cap: one op, the last size that keeps 1 KiB, the
/// first that does not, the size of the attacker's batch that trapped, and the library's
/// largest batch.
const SIZES: [usize; 9] = [1, 2, 3, 1_000, 1_997, 1_998, 2_201, 5_000, 10_000];

/// The costliest failure a batch of `ops` can answer: the code that takes most bytes in every
/// format, a message cut to the cap, of 2-, 3- and 4-byte characters, as the executor cuts it.
fn worst_failure(ops: usize) -> Outcome {
    let mut message = "é€😀".repeat(2_000);
    truncate_message(&mut message, max_error_bytes(ops));
    Outcome::Failed(OpError {
        code: i32::MIN,
        message,
    })
}

/// The costliest committed outcomes: the widest varints, never a run.
fn worst_committed(i: usize) -> Outcome {
    Outcome::Committed {
        rows_changed: u64::MAX - (i % 2) as u64,
        last_insert_rowid: if i.is_multiple_of(2) {
            i64::MIN
        } else {
            i64::MAX
        },
    }
}

/// Every reply format of the library, for `outcomes`: the Candid replies of `execute_writes`
/// and `execute_batch` (ran and duplicate) and the packed reply inside its Candid result.
fn replies(outcomes: &[Outcome]) -> Vec<(&'static str, usize)> {
    let writes = WritesResult::Ok(WritesReply {
        outcomes: outcomes.to_vec(),
        duplicate: true,
    });
    let packed = PackedWritesResult::Ok(ByteBuf::from(packed::encode_reply(true, outcomes)));
    vec![
        ("WritesResult", candid::encode_one(&writes).unwrap().len()),
        (
            "BatchResult::Ok",
            candid::encode_one(BatchResult::Ok(outcomes.to_vec()))
                .unwrap()
                .len(),
        ),
        (
            "BatchResult::Duplicate",
            candid::encode_one(BatchResult::Duplicate(outcomes.to_vec()))
                .unwrap()
                .len(),
        ),
        (
            "PackedWritesResult",
            candid::encode_one(&packed).unwrap().len(),
        ),
    ]
}

/// A reply of `ops` outcomes, each failed with the longest message the cap leaves or committed
/// with the widest figures, in any mix, never exceeds the stated bound, and the bound is within
/// the Internet Computer's reply limit.
#[test]
fn every_reply_of_a_batch_fits_its_bound() {
    for ops in SIZES {
        let bound = REPLY_FRAME_BYTES + ops * (OUTCOME_FIXED_BYTES + max_error_bytes(ops));
        assert!(bound <= MAX_REPLY_BYTES, "{ops} ops: bound {bound}");
        let failed: Vec<Outcome> = (0..ops).map(|_| worst_failure(ops)).collect();
        let committed: Vec<Outcome> = (0..ops).map(worst_committed).collect();
        let mixed: Vec<Outcome> = (0..ops)
            .map(|i| {
                if i % 3 == 0 {
                    worst_committed(i)
                } else {
                    worst_failure(ops)
                }
            })
            .collect();
        for outcomes in [&failed, &committed, &mixed] {
            for (format, bytes) in replies(outcomes) {
                assert!(
                    bytes <= bound,
                    "{ops} ops, {format}: {bytes} bytes > the bound {bound}"
                );
            }
        }
    }
}

/// The cap: the queue's 1 KiB up to 1,997 ops, then each op's share of the reply; 185 bytes at
/// the library's 10,000 ops, and still 16 at the largest bounded batch.
#[test]
fn the_cap_is_the_queue_s_until_the_reply_would_not_hold_it() {
    assert_eq!(max_error_bytes(0), MAX_ERROR_BYTES);
    assert_eq!(max_error_bytes(1), MAX_ERROR_BYTES);
    assert_eq!(max_error_bytes(1_997), MAX_ERROR_BYTES);
    assert_eq!(max_error_bytes(1_998), 1_023);
    assert_eq!(max_error_bytes(2_201), 926);
    assert_eq!(max_error_bytes(10_000), 185);
    assert!(max_error_bytes(MAX_BOUNDED_OPS) >= 16);
    assert!(max_error_bytes(MAX_BOUNDED_OPS + 1) < 16 + 1);
    let mut previous = usize::MAX;
    for ops in (1..=MAX_BOUNDED_OPS).step_by(97) {
        let cap = max_error_bytes(ops);
        assert!(cap <= previous, "the cap grows at {ops} ops");
        previous = cap;
    }
}

/// A cut message keeps its start, ends with the mark, stays valid UTF-8 and within the cap; a
/// message that fits is untouched.
#[test]
fn a_cut_message_ends_with_the_mark_at_a_character_boundary() {
    let mut fits = "CHECK constraint failed".to_owned();
    truncate_message(&mut fits, 23);
    assert_eq!(fits, "CHECK constraint failed");
    for max in [3, 4, 5, 6, 7, 100, 185, 1_024] {
        let mut long = "é€😀x".repeat(1_000);
        truncate_message(&mut long, max);
        assert!(long.len() <= max, "{max}: {} bytes", long.len());
        assert!(long.ends_with(TRUNCATION_MARK), "{max}: {long:?}");
        assert!(
            long.len() + 4 > max,
            "{max}: cut more than a character short"
        );
        assert!(
            "é€😀x"
                .repeat(1_000)
                .starts_with(long.trim_end_matches(TRUNCATION_MARK))
        );
    }
    let mut tiny = "abcdef".to_owned();
    truncate_message(&mut tiny, 2);
    assert_eq!(tiny, "");
}
