//! The core's state machine, driven by hand: triggers, bounds, keys, and what each kind of
//! attempt result delivers. The ops are the tests' own declared writes, in the generic packed
//! format ([`Declared`]).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::Poll;

use batch_types::declare::{BatchRefusal, Blob, PackedWritesResult, Writes};
use batch_types::packed::{self, PackedOp};
use batch_types::{OpError, Outcome, WriteError};
use futures_util::FutureExt;

use super::*;
use crate::codec::Declared;

const MS: u64 = 1_000_000;

batch_types::writes! {
    /// A shop's writes: the tests' declaration.
    pub enum ShopWrite {
        /// An order of `amount` for user `user_id`.
        create_order = "INSERT INTO orders (user_id, amount) VALUES (?1, ?2)" {
            user_id: i64, amount: f64
        },
        /// A user.
        create_user = "INSERT INTO users (username, email) VALUES (?1, ?2)" {
            username: String, email: String
        },
    }
}

type Codec = Declared<ShopWrite>;

fn order(user_id: i64) -> ShopWrite {
    ShopWrite::create_order {
        user_id,
        amount: 1.0,
    }
}

fn config() -> BatcherConfig {
    BatcherConfig {
        max_batch_ops: 3,
        max_queued_ops: 5,
        max_in_flight: 2,
        key_prefix: *b"prefix!!",
        ..BatcherConfig::default()
    }
}

fn batcher(config: BatcherConfig) -> Batcher<Codec> {
    Batcher::new(Codec::new(), config).expect("valid config")
}

fn committed(rowid: i64) -> Outcome {
    Outcome::Committed {
        rows_changed: 1,
        last_insert_rowid: rowid,
    }
}

/// The canister's reply to a batch that ran: the packed outcomes.
fn reply(duplicate: bool, outcomes: &[Outcome]) -> Vec<u8> {
    let blob = Blob::from(packed::encode_reply(duplicate, outcomes));
    candid::encode_one(PackedWritesResult::Ok(blob)).expect("encode")
}

/// The canister's typed refusal of a batch.
fn refusal(refusal: BatchRefusal) -> Vec<u8> {
    candid::encode_one(PackedWritesResult::Err(refusal)).expect("encode")
}

/// The ops a request carries, as the canister reads them.
fn ops_of(batch: &InFlight<Codec>) -> Vec<PackedOp> {
    let blob: Blob = candid::decode_one(batch.request()).expect("blob");
    let (header, ops) = packed::read_header(&blob).expect("a request");
    assert_eq!(header.digest, ShopWrite::declaration().digest);
    assert_eq!(header.key.created_at_time, batch.key().created_at_time);
    assert_eq!(header.key.id, batch.key().id);
    packed::read_ops(ShopWrite::declaration(), ops, usize::MAX).expect("the ops")
}

/// `ops` as the canister reads them.
fn unpacked(ops: &[ShopWrite]) -> Vec<PackedOp> {
    ops.iter()
        .map(|op| PackedOp {
            write: op.index(),
            params: op.clone().into_params(),
        })
        .collect()
}

fn ready<F: Future + Unpin>(future: &mut F) -> Option<F::Output> {
    future.now_or_never()
}

#[test]
fn a_batch_is_due_at_its_size_or_after_its_delay() {
    let b = batcher(config());
    assert_eq!(b.due(0), Due::Idle);
    let _a = b.try_submit(order(1), 10).unwrap();
    assert_eq!(b.due(10), Due::At(10 + 50 * MS));
    assert!(b.take_batch(10 + 50 * MS - 1).is_none());
    let _b = b.try_submit(order(2), 20).unwrap();
    let _c = b.try_submit(order(3), 30).unwrap();
    // Three queued: the size trigger.
    assert_eq!(b.due(30), Due::Now);
    let batch = b.take_batch(30).expect("due");
    assert_eq!(ops_of(&batch), unpacked(&[order(1), order(2), order(3)]));
    assert_eq!(batch.key().created_at_time, 30);
    assert_eq!(&batch.key().id[..8], b"prefix!!");
    assert_eq!(b.due(30), Due::Idle);
    // The delay trigger, from the oldest op.
    let _d = b.try_submit(order(4), 40).unwrap();
    assert!(b.take_batch(40 + 50 * MS - 1).is_none());
    let late = b.take_batch(40 + 50 * MS).expect("delay trigger");
    assert_eq!(ops_of(&late), unpacked(&[order(4)]));
    assert_ne!(late.key(), batch.key());
    assert_eq!(late.key().id[8..], 1u64.to_be_bytes());
}

#[test]
fn a_request_stays_within_its_byte_bound() {
    let codec = Codec::new();
    // Room for exactly two orders of 10 bytes after the header.
    let b = batcher(BatcherConfig {
        max_batch_ops: 100,
        max_queued_ops: 100,
        max_request_bytes: codec.header_len() + 25,
        max_queued_bytes: 1 << 20,
        ..config()
    });
    let _futures: Vec<_> = (1..=5)
        .map(|i| b.try_submit(order(i), 0).unwrap())
        .collect();
    // 50 bytes queued, more than a request: due now, two ops per batch.
    let first = b.take_batch(0).expect("bytes trigger");
    assert_eq!(first.len(), 2);
    assert!(first.request().len() <= codec.header_len() + 25);
    let second = b.take_batch(0).expect("still due");
    assert_eq!(second.len(), 2);
    assert!(b.take_batch(0).is_none(), "two in flight");
    // An op larger than a request's room is refused.
    let long = ShopWrite::create_user {
        username: "x".repeat(30),
        email: String::new(),
    };
    assert!(matches!(
        b.try_submit(long, 0),
        Err(SubmitError::OpTooLarge {
            len: 33,
            max: 25,
            ..
        })
    ));
}

#[test]
fn a_full_queue_pushes_back_until_a_batch_leaves() {
    let b = batcher(config());
    let _held: Vec<_> = (1..=5)
        .map(|i| b.try_submit(order(i), 0).unwrap())
        .collect();
    assert!(matches!(b.try_submit(order(6), 0), Err(SubmitError::QueueFull(op)) if op == order(6)));
    let woken = Arc::new(AtomicUsize::new(0));
    let waker = waker_counting(Arc::clone(&woken));
    let mut cx = Context::from_waker(&waker);
    let mut waiting = Box::pin(b.submit(order(6), 0));
    assert!(waiting.as_mut().poll(&mut cx).is_pending());
    assert_eq!(woken.load(Ordering::SeqCst), 0);
    let _batch = b.take_batch(0).expect("due");
    assert_eq!(woken.load(Ordering::SeqCst), 1);
    let Poll::Ready(Ok(_)) = waiting.as_mut().poll(&mut cx) else {
        panic!("room after the batch left");
    };
    assert_eq!(b.stats().queued, 3);
    b.close();
    assert!(matches!(
        b.try_submit(order(7), 0),
        Err(SubmitError::Closed(_))
    ));
}

fn waker_counting(count: Arc<AtomicUsize>) -> Waker {
    struct Count(Arc<AtomicUsize>);
    impl std::task::Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
    Waker::from(Arc::new(Count(count)))
}

#[test]
fn each_op_gets_its_own_outcome() {
    let b = batcher(config());
    let mut futures: Vec<_> = (1..=3)
        .map(|i| b.try_submit(order(i), 0).unwrap())
        .collect();
    let batch = b.take_batch(0).unwrap();
    let failure = Outcome::Failed(OpError {
        code: 787,
        message: "FOREIGN KEY constraint failed".into(),
    });
    let outcomes = vec![committed(7), failure.clone(), committed(8)];
    assert!(matches!(
        b.finish(batch, Ok(reply(false, &outcomes)), 1),
        Next::Done
    ));
    for (future, outcome) in futures.iter_mut().zip(&outcomes) {
        assert_eq!(ready(future), Some(Ok(outcome.clone())));
    }
    let stats = b.stats();
    assert_eq!((stats.outcomes, stats.in_flight, stats.attempts), (3, 0, 1));
}

#[test]
fn no_answer_is_retried_with_the_same_request_and_a_duplicate_reply_settles_it() {
    let b = batcher(config());
    let mut future = b.try_submit(order(1), 0).unwrap();
    let batch = b.take_batch(50 * MS).unwrap();
    let request = batch.request().to_vec();
    let key = *batch.key();
    let Next::Retry { batch, delay_ns } =
        b.finish(batch, Err(SendError::Unknown("timeout".into())), 60 * MS)
    else {
        panic!("retry");
    };
    assert_eq!(delay_ns, 100 * MS);
    assert_eq!(batch.request(), &request[..]);
    assert_eq!(*batch.key(), key);
    let Next::Retry { batch, delay_ns } = b.finish(
        batch,
        Err(SendError::Rejected {
            code: RejectCode::CanisterError,
            message: "canister is stopped".into(),
        }),
        70 * MS,
    ) else {
        panic!("retry");
    };
    assert_eq!(delay_ns, 200 * MS);
    assert!(ready(&mut future).is_none());
    assert!(matches!(
        b.finish(batch, Ok(reply(true, &[committed(1)])), 80 * MS),
        Next::Done
    ));
    assert_eq!(ready(&mut future), Some(Ok(committed(1))));
    let stats = b.stats();
    assert_eq!(
        (stats.attempts, stats.retries, stats.duplicate_replies),
        (3, 2, 1)
    );
}

#[test]
fn a_refusal_after_an_unanswered_attempt_is_unknown_never_a_false_not_run() {
    let b = batcher(config());
    let mut first = b.try_submit(order(1), 0).unwrap();
    let batch = b.take_batch(50 * MS).unwrap();
    let Next::Retry { batch, .. } = b.finish(batch, Err(SendError::Unknown("lost".into())), 1)
    else {
        panic!("retry");
    };
    // The writer was removed between the attempts: the refusal proves nothing about the first.
    assert!(matches!(
        b.finish(batch, Ok(refusal(BatchRefusal::NotAuthorized)), 2),
        Next::Done
    ));
    assert!(matches!(
        ready(&mut first),
        Some(Err(BatchError::Unknown { attempts: 2, .. }))
    ));
    // Without an unanswered attempt the same refusal is certain.
    let mut second = b.try_submit(order(2), 0).unwrap();
    b.flush();
    let batch = b.take_batch(3).unwrap();
    assert!(matches!(
        b.finish(batch, Ok(refusal(BatchRefusal::NotAuthorized)), 4),
        Next::Done
    ));
    assert_eq!(
        ready(&mut second),
        Some(Err(BatchError::Refused(BatchRefusal::NotAuthorized)))
    );
    let stats = b.stats();
    assert_eq!((stats.unknown, stats.refused), (1, 1));
}

#[test]
fn too_old_is_unknown_after_a_lost_reply_and_a_refusal_otherwise() {
    let b = batcher(config());
    let mut lost = b.try_submit(order(1), 0).unwrap();
    b.flush();
    let batch = b.take_batch(0).unwrap();
    let Next::Retry { batch, .. } = b.finish(batch, Err(SendError::Unknown("lost".into())), 1)
    else {
        panic!("retry");
    };
    b.finish(
        batch,
        Ok(refusal(BatchRefusal::Refused(WriteError::TooOld {
            created_at_time: 0,
            now: 90_000_000_000_000,
            oldest_accepted: 3_540_000_000_000,
        }))),
        2,
    );
    assert!(matches!(
        ready(&mut lost),
        Some(Err(BatchError::Unknown { .. }))
    ));
    let mut skewed = b.try_submit(order(2), 0).unwrap();
    b.flush();
    let batch = b.take_batch(0).unwrap();
    b.finish(
        batch,
        Ok(refusal(BatchRefusal::Refused(
            WriteError::CreatedInFuture {
                created_at_time: 9,
                now: 0,
                newest_accepted: 6,
            },
        ))),
        1,
    );
    assert_eq!(
        ready(&mut skewed),
        Some(Err(BatchError::Refused(BatchRefusal::Refused(
            WriteError::CreatedInFuture {
                created_at_time: 9,
                now: 0,
                newest_accepted: 6,
            }
        ))))
    );
}

#[test]
fn retries_stop_at_the_retry_window() {
    let b = batcher(BatcherConfig {
        retry_for_ns: 1_000 * MS,
        ..config()
    });
    let mut unanswered = b.try_submit(order(1), 0).unwrap();
    let mut stopped = b.try_submit(order(2), 0).unwrap();
    b.flush();
    let first = b.take_batch(0).unwrap();
    let Next::Retry { batch, .. } =
        b.finish(first, Err(SendError::Unknown("lost".into())), 999 * MS)
    else {
        panic!("retry within the window");
    };
    assert!(matches!(
        b.finish(batch, Err(SendError::Unknown("lost".into())), 1_000 * MS),
        Next::Done
    ));
    assert!(matches!(
        ready(&mut unanswered),
        Some(Err(BatchError::Unknown { attempts: 2, .. }))
    ));
    assert!(matches!(
        ready(&mut stopped),
        Some(Err(BatchError::Unknown { .. }))
    ));
    // A canister stopped the whole time: nothing ran, and the ops are told so.
    let mut never = b.try_submit(order(3), 2_000 * MS).unwrap();
    b.flush();
    let batch = b.take_batch(2_000 * MS).unwrap();
    let stopped = || SendError::Rejected {
        code: RejectCode::CanisterError,
        message: "canister is stopped".into(),
    };
    let Next::Retry { batch, .. } = b.finish(batch, Err(stopped()), 2_500 * MS) else {
        panic!("retry");
    };
    b.finish(batch, Err(stopped()), 3_000 * MS);
    assert!(matches!(
        ready(&mut never),
        Some(Err(BatchError::Rejected {
            code: RejectCode::SysTransient,
            ..
        }))
    ));
}

#[test]
fn backoff_doubles_up_to_its_bound() {
    let b = batcher(BatcherConfig {
        max_backoff_ns: 700 * MS,
        ..config()
    });
    let _future = b.try_submit(order(1), 0).unwrap();
    b.flush();
    let mut batch = b.take_batch(0).unwrap();
    let mut delays = Vec::new();
    for _ in 0..5 {
        match b.finish(batch, Err(SendError::Unknown("lost".into())), 0) {
            Next::Retry {
                batch: again,
                delay_ns,
            } => {
                delays.push(delay_ns / MS);
                batch = again;
            }
            Next::Done => panic!("retry"),
        }
    }
    assert_eq!(delays, vec![100, 200, 400, 700, 700]);
}

#[test]
fn ops_not_executed_are_sent_again_first_under_a_new_key() {
    let b = batcher(BatcherConfig {
        max_resubmits: 1,
        ..config()
    });
    let mut futures: Vec<_> = (1..=3)
        .map(|i| b.try_submit(order(i), 0).unwrap())
        .collect();
    let _later = b.try_submit(order(4), 5).unwrap();
    let batch = b.take_batch(10).unwrap();
    let key = *batch.key();
    let not_run = Outcome::NotExecuted;
    let interrupted = Outcome::Failed(OpError {
        code: 9,
        message: "interrupted: the batch reached its limit".into(),
    });
    b.finish(
        batch,
        Ok(reply(
            false,
            &[committed(1), interrupted.clone(), not_run.clone()],
        )),
        11,
    );
    assert_eq!(ready(&mut futures[0]), Some(Ok(committed(1))));
    assert_eq!(ready(&mut futures[1]), Some(Ok(interrupted)));
    assert!(ready(&mut futures[2]).is_none());
    // Op 3 comes back at the front, due at once, with op 4 behind it.
    let again = b.take_batch(12).expect("due");
    assert_eq!(ops_of(&again), unpacked(&[order(3), order(4)]));
    assert_ne!(*again.key(), key);
    // Not executed a second time: past max_resubmits, delivered as it is.
    b.finish(
        again,
        Ok(reply(false, &[not_run.clone(), committed(2)])),
        13,
    );
    assert_eq!(ready(&mut futures[2]), Some(Ok(not_run)));
    assert_eq!(b.stats().resubmitted, 1);
}

#[test]
fn a_batch_dropped_by_its_driver_closes_its_futures_and_frees_its_place() {
    let b = batcher(config());
    let mut future = b.try_submit(order(1), 0).unwrap();
    b.flush();
    let batch = b.take_batch(0).unwrap();
    assert_eq!(b.stats().in_flight, 1);
    drop(batch);
    assert_eq!(b.stats().in_flight, 0);
    assert_eq!(ready(&mut future), Some(Err(BatchError::Closed)));
}

#[test]
fn a_reply_that_cannot_be_read_may_have_run() {
    let b = batcher(config());
    let mut future = b.try_submit(order(1), 0).unwrap();
    b.flush();
    let batch = b.take_batch(0).unwrap();
    // Two outcomes for one op.
    b.finish(batch, Ok(reply(false, &[committed(1), committed(2)])), 1);
    assert!(matches!(
        ready(&mut future),
        Some(Err(BatchError::BadReply(_)))
    ));
    let mut other = b.try_submit(order(2), 0).unwrap();
    b.flush();
    let batch = b.take_batch(0).unwrap();
    // A reply of another version (3: the reference canister's keyed reply).
    let mut other_version = packed::encode_reply(false, &[committed(1)]);
    other_version[0] = 3;
    b.finish(
        batch,
        Ok(candid::encode_one(PackedWritesResult::Ok(Blob::from(other_version))).unwrap()),
        1,
    );
    assert!(matches!(
        ready(&mut other),
        Some(Err(BatchError::BadReply(_)))
    ));
}

#[test]
fn the_notifier_hears_of_work_and_close_finishes_after_the_last_answer() {
    let b = batcher(config());
    let calls = Arc::new(AtomicUsize::new(0));
    {
        let calls = Arc::clone(&calls);
        b.set_notifier(move || {
            calls.fetch_add(1, Ordering::SeqCst);
        });
    }
    let _a = b.try_submit(order(1), 0).unwrap(); // empty → non-empty
    let _b = b.try_submit(order(2), 0).unwrap(); // nothing new
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    let _c = b.try_submit(order(3), 0).unwrap(); // size trigger
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    let batch = b.take_batch(0).unwrap();
    b.close();
    assert_eq!(calls.load(Ordering::SeqCst), 3);
    assert!(!b.is_finished());
    b.finish(
        batch,
        Ok(reply(false, &[committed(1), committed(2), committed(3)])),
        1,
    );
    assert!(b.is_finished());
}

#[test]
fn bad_configurations_are_refused() {
    let header = Codec::new().header_len();
    for (config, error) in [
        (
            BatcherConfig {
                max_in_flight: 0,
                ..BatcherConfig::default()
            },
            ConfigError::Zero("max_in_flight"),
        ),
        (
            BatcherConfig {
                max_queued_ops: 10,
                max_batch_ops: 11,
                ..BatcherConfig::default()
            },
            ConfigError::QueueSmallerThanBatch {
                queued: 10,
                batch: 11,
            },
        ),
        (
            BatcherConfig {
                max_request_bytes: header,
                ..BatcherConfig::default()
            },
            ConfigError::RequestSmallerThanHeader {
                request: header,
                header,
            },
        ),
    ] {
        assert_eq!(Batcher::new(Codec::new(), config).unwrap_err(), error);
    }
}

#[test]
fn an_ordering_key_holds_its_later_ops_until_its_batch_in_flight_is_settled() {
    let b = batcher(BatcherConfig {
        max_in_flight: 3,
        max_queued_ops: 10,
        ..config()
    });
    let mut a1 = b.try_submit_ordered(order(1), "user 1", 0).unwrap();
    let _a2 = b.try_submit_ordered(order(2), "user 1", 0).unwrap();
    let _x = b.try_submit(order(100), 0).unwrap();
    let first = b.take_batch(0).expect("the size trigger");
    assert_eq!(ops_of(&first), unpacked(&[order(1), order(2), order(100)]));
    // A later op of the key waits; other keys and unkeyed ops leave past it.
    let _a3 = b.try_submit_ordered(order(3), "user 1", 1).unwrap();
    let _b1 = b.try_submit_ordered(order(20), "user 2", 1).unwrap();
    let _y = b.try_submit(order(101), 1).unwrap();
    b.flush();
    let second = b.take_batch(1).expect("flushed");
    assert_eq!(ops_of(&second), unpacked(&[order(20), order(101)]));
    assert_eq!(b.due(1), Due::Idle, "only an op of a held key is queued");
    assert!(b.take_batch(1).is_none());
    assert_eq!(b.stats().queued, 1);
    // An unanswered attempt keeps the key held: the retry goes first.
    let Next::Retry { batch: first, .. } =
        b.finish(first, Err(SendError::Unknown("timeout".into())), 2)
    else {
        panic!("retry");
    };
    assert!(b.take_batch(3).is_none());
    // The retry is answered: the key is free, and its op is due at once (flushed).
    b.finish(
        first,
        Ok(reply(true, &[committed(1), committed(2), committed(3)])),
        4,
    );
    assert_eq!(ready(&mut a1), Some(Ok(committed(1))));
    assert_eq!(b.due(4), Due::Now);
    let third = b.take_batch(4).expect("the key is free");
    assert_eq!(ops_of(&third), unpacked(&[order(3)]));
    drop(second);
}

#[test]
fn ops_of_an_ordering_key_not_executed_go_again_before_its_later_ops() {
    let b = batcher(BatcherConfig {
        max_queued_ops: 10,
        ..config()
    });
    let mut futures: Vec<_> = (1..=3)
        .map(|i| b.try_submit_ordered(order(i), "user 1", 0).unwrap())
        .collect();
    let batch = b.take_batch(0).expect("the size trigger");
    let _a4 = b.try_submit_ordered(order(4), "user 1", 1).unwrap();
    let _x = b.try_submit(order(100), 1).unwrap();
    b.finish(
        batch,
        Ok(reply(
            false,
            &[committed(1), Outcome::NotExecuted, Outcome::NotExecuted],
        )),
        2,
    );
    assert_eq!(ready(&mut futures[0]), Some(Ok(committed(1))));
    let again = b.take_batch(2).expect("resubmitted ops are due at once");
    assert_eq!(ops_of(&again), unpacked(&[order(2), order(3), order(4)]));
    // A refusal settles the batch too: the key is free again.
    let _a5 = b.try_submit_ordered(order(5), "user 1", 3).unwrap();
    b.flush();
    let unkeyed = b.take_batch(3).expect("the unkeyed op");
    assert_eq!(ops_of(&unkeyed), unpacked(&[order(100)]));
    b.finish(again, Ok(refusal(BatchRefusal::NotAuthorized)), 4);
    assert!(matches!(
        ready(&mut futures[1]),
        Some(Err(BatchError::Refused(BatchRefusal::NotAuthorized)))
    ));
    let last = b.take_batch(4).expect("the key is free");
    assert_eq!(ops_of(&last), unpacked(&[order(5)]));
    drop(unkeyed);
}
