//! Exactly-once client batches on the offline engine: a repeated key is answered with the
//! recorded outcomes and runs nothing, keys are scoped to their caller, a batch that traps
//! records no key, keys survive upgrades, the window rules refuse too old and future keys with
//! their typed errors, and expired keys are pruned by the timer.

use bench_api::packed::{self, KeyedReply};
use bench_api::*;
use bench_suite::client::{CONTROLLER, Client, principal};
use offline_engine::{InstructionLimits, MessageResult, Settings, SubnetKind};

const SECOND: u64 = 1_000_000_000;
/// The default window (24 h) plus the default permitted drift (60 s).
const WINDOW_AND_DRIFT: u64 = 24 * 3_600 * SECOND + 60 * SECOND;
const WRITER: &[u8] = &[0xAB, 0xCD, 0x01];

fn key(created_at_time: u64, n: u8) -> BatchKey {
    BatchKey {
        created_at_time,
        id: [n; 16],
    }
}

fn orders(user_id: i64, n: usize) -> Vec<UserOrderOp> {
    (0..n)
        .map(|i| UserOrderOp::CreateOrder {
            user_id,
            amount: i as f64 + 0.5,
        })
        .collect()
}

fn keyed(c: &mut Client, caller: &[u8], ops: &[UserOrderOp], key: &BatchKey) -> BatchResult {
    c.update_as(caller, "execute_batch", (ops.to_vec(), Some(key)))
}

/// `execute_batch_packed` with a keyed request: the decoded reply, or the reject's error.
fn packed_keyed(
    c: &mut Client,
    caller: &[u8],
    ops: &[UserOrderOp],
    key: &BatchKey,
) -> Result<KeyedReply, WriteError> {
    let arg = serde_bytes::ByteBuf::from(packed::encode_keyed_ops(key, ops));
    let exec = c.raw_update(caller, "execute_batch_packed", (arg,));
    match &exec.result {
        MessageResult::Reply(bytes) => match candid::decode_one::<PackedResult>(bytes).unwrap() {
            PackedResult::Ok(blob) => Ok(packed::decode_keyed_outcomes(&blob, ops.len()).unwrap()),
            PackedResult::Err(refusal) => Err(refusal),
        },
        other => panic!("execute_batch_packed: {other:?}"),
    }
}

fn committed(rowid: i64) -> Outcome {
    Outcome::Committed {
        rows_changed: 1,
        last_insert_rowid: rowid,
    }
}

#[test]
fn a_repeated_key_returns_the_original_outcomes_and_runs_nothing() {
    let mut c = Client::install(InitArgs::default());
    assert_eq!(c.create_user("a"), 1);
    let now = c.canister.time();
    // Two orders, one for a user that does not exist (fails), one more order.
    let mut ops = orders(1, 2);
    ops.push(UserOrderOp::CreateOrder {
        user_id: 99,
        amount: 1.0,
    });
    ops.push(UserOrderOp::CreateOrder {
        user_id: 1,
        amount: 3.5,
    });
    let k = key(now, 7);
    let first = keyed(&mut c, CONTROLLER, &ops, &k);
    let BatchResult::Ok(outcomes) = first else {
        panic!("{first:?}")
    };
    assert_eq!(outcomes[0], committed(1));
    assert_eq!(outcomes[1], committed(2));
    assert!(
        matches!(&outcomes[2], Outcome::Failed(OpError { code: 787, .. })),
        "{:?}",
        outcomes[2]
    );
    // The failed op used no rowid.
    assert_eq!(outcomes[3], committed(3));
    assert_eq!(c.counts().orders, 3);

    // The same key and ops, later: the recorded outcomes (the failure's message included),
    // marked duplicate, and nothing ran.
    c.tick(10 * SECOND);
    let again = keyed(&mut c, CONTROLLER, &ops, &k);
    assert_eq!(again, BatchResult::Duplicate(outcomes.clone()));
    // The same through the packed method: the same digest, so the same batch.
    let packed = packed_keyed(&mut c, CONTROLLER, &ops, &k).unwrap();
    assert_eq!(
        packed,
        KeyedReply {
            duplicate: true,
            outcomes: outcomes.clone()
        }
    );
    assert_eq!(c.counts().orders, 3);
    assert_eq!(c.orders_of(1).len(), 3);

    // The same key with other ops is refused, never answered with this batch's outcomes.
    let other = keyed(&mut c, CONTROLLER, &orders(1, 4), &k);
    assert_eq!(
        other,
        BatchResult::Err(WriteError::DigestMismatch {
            created_at_time: now
        })
    );
    assert_eq!(c.counts().orders, 3);

    let s = c.stats();
    assert_eq!(
        (
            s.keyed_batches,
            s.duplicates_answered,
            s.keys_refused,
            s.keys_held
        ),
        (1, 2, 1, 1)
    );
    assert!(s.key_bytes_held > 0);
    assert!(c.traps().is_empty());
}

#[test]
fn a_new_keyed_packed_batch_runs_once_and_its_repeat_is_flagged() {
    let mut c = Client::install(InitArgs::default());
    assert_eq!(c.create_user("a"), 1);
    let k = key(c.canister.time(), 1);
    let ops = orders(1, 5);
    let first = packed_keyed(&mut c, CONTROLLER, &ops, &k).unwrap();
    assert_eq!(
        first,
        KeyedReply {
            duplicate: false,
            outcomes: (1..=5).map(committed).collect()
        }
    );
    let again = packed_keyed(&mut c, CONTROLLER, &ops, &k).unwrap();
    assert_eq!(
        again,
        KeyedReply {
            duplicate: true,
            outcomes: first.outcomes
        }
    );
    assert_eq!(c.counts().orders, 5);
    // The Candid method sees the same record.
    assert_eq!(
        keyed(&mut c, CONTROLLER, &ops, &k),
        BatchResult::Duplicate((1..=5).map(committed).collect())
    );
    // Unkeyed packed batches are unchanged: reply version 2, run every time.
    let arg = serde_bytes::ByteBuf::from(packed::encode_ops(&ops));
    for round in 0..2 {
        let exec = c.raw_update(CONTROLLER, "execute_batch_packed", (arg.clone(),));
        let MessageResult::Reply(bytes) = &exec.result else {
            panic!("{:?}", exec.result)
        };
        let PackedResult::Ok(blob) = candid::decode_one::<PackedResult>(bytes).unwrap() else {
            panic!("refused")
        };
        assert_eq!(blob[0], packed::REPLY_VERSION);
        let first = 6 + 5 * round;
        assert_eq!(
            packed::decode_outcomes(&blob, 5).unwrap(),
            (first..first + 5).map(committed).collect::<Vec<_>>()
        );
    }
    assert_eq!(c.counts().orders, 15);
}

#[test]
fn the_same_key_from_another_caller_is_another_batch() {
    let mut c = Client::install(InitArgs::default());
    let added: AdminResult = c.update("add_writers", (vec![principal(WRITER)],));
    assert_eq!(added, AdminResult::Ok(()));
    assert_eq!(c.create_user("a"), 1);
    let k = key(c.canister.time(), 3);
    let ops = orders(1, 2);
    assert_eq!(
        keyed(&mut c, CONTROLLER, &ops, &k),
        BatchResult::Ok(vec![committed(1), committed(2)])
    );
    assert_eq!(
        keyed(&mut c, WRITER, &ops, &k),
        BatchResult::Ok(vec![committed(3), committed(4)])
    );
    // Each caller's repeat gets its own batch's outcomes.
    assert_eq!(
        keyed(&mut c, WRITER, &ops, &k),
        BatchResult::Duplicate(vec![committed(3), committed(4)])
    );
    assert_eq!(
        keyed(&mut c, CONTROLLER, &ops, &k),
        BatchResult::Duplicate(vec![committed(1), committed(2)])
    );
    // A stranger is refused before anything is looked up.
    let stranger = c.raw_update(
        bench_suite::client::STRANGER,
        "execute_batch",
        (ops.clone(), Some(k)),
    );
    assert_eq!(stranger.entry, "canister_inspect_message");
    assert!(
        matches!(&stranger.result, MessageResult::Reject(..)),
        "{:?}",
        stranger.result
    );
    assert_eq!(c.counts().orders, 4);
    let s = c.stats();
    assert_eq!(
        (s.keyed_batches, s.duplicates_answered, s.keys_held),
        (2, 2, 2)
    );
}

#[test]
fn a_keyed_batch_that_traps_leaves_no_key() {
    // Updates may use 15 M instructions; a flush stops starting ops only at its 20 M budget, so
    // a batch of 2,000 orders traps at the message limit.
    let limits = InstructionLimits {
        update: 15_000_000,
        ..SubnetKind::Application.limits()
    };
    let mut c = Client::install_with(
        InitArgs {
            flush_instruction_budget: Some(MIN_FLUSH_BUDGET),
            ..Default::default()
        },
        Settings {
            subnet: SubnetKind::Custom(limits),
            ..Settings::default()
        },
    );
    assert_eq!(c.create_user("a"), 1);
    let k = key(c.canister.time(), 9);
    let exec = c.raw_update(CONTROLLER, "execute_batch", (orders(1, 2_000), Some(k)));
    assert!(exec.result.is_trap(), "{:?}", exec.result);
    assert_eq!(c.counts().orders, 0);
    assert_eq!(c.stats().keys_held, 0);
    // The key is free: the same key with other ops runs (no digest mismatch, no duplicate).
    assert_eq!(
        keyed(&mut c, CONTROLLER, &orders(1, 3), &k),
        BatchResult::Ok((1..=3).map(committed).collect())
    );
    let s = c.stats();
    assert_eq!(
        (s.keyed_batches, s.duplicates_answered, s.keys_held),
        (1, 0, 1)
    );
}

#[test]
fn a_key_is_still_known_across_an_upgrade() {
    let mut c = Client::install(InitArgs::default());
    assert_eq!(c.create_user("a"), 1);
    let k = key(c.canister.time(), 4);
    let ops = orders(1, 3);
    let outcomes: Vec<Outcome> = (1..=3).map(committed).collect();
    assert_eq!(
        keyed(&mut c, CONTROLLER, &ops, &k),
        BatchResult::Ok(outcomes.clone())
    );
    assert_eq!(
        keyed(&mut c, CONTROLLER, &ops, &k),
        BatchResult::Duplicate(outcomes.clone())
    );
    let before = c.stats();
    let upgrade = c.upgrade(None);
    assert!(!upgrade.result.is_trap(), "{:?}", upgrade.result);
    let after = c.stats();
    assert_eq!(
        (
            after.keyed_batches,
            after.duplicates_answered,
            after.keys_held,
            after.key_bytes_held
        ),
        (1, 1, 1, before.key_bytes_held)
    );
    assert_eq!(
        keyed(&mut c, CONTROLLER, &ops, &k),
        BatchResult::Duplicate(outcomes)
    );
    assert_eq!(c.counts().orders, 3);
    assert_eq!(c.stats().duplicates_answered, 2);
}

#[test]
fn too_old_and_future_keys_are_refused_with_their_errors() {
    let mut c = Client::install(InitArgs::default());
    assert_eq!(c.create_user("a"), 1);
    let now = c.canister.time();
    let oldest = now - WINDOW_AND_DRIFT;
    let newest = now + 60 * SECOND;
    let ops = orders(1, 1);
    assert_eq!(
        keyed(&mut c, CONTROLLER, &ops, &key(oldest - 1, 1)),
        BatchResult::Err(WriteError::TooOld {
            created_at_time: oldest - 1,
            now,
            oldest_accepted: oldest
        })
    );
    assert_eq!(
        keyed(&mut c, CONTROLLER, &ops, &key(newest + 1, 2)),
        BatchResult::Err(WriteError::CreatedInFuture {
            created_at_time: newest + 1,
            now,
            newest_accepted: newest
        })
    );
    // The packed method refuses them alike.
    assert_eq!(
        packed_keyed(&mut c, CONTROLLER, &ops, &key(oldest - 1, 3)),
        Err(WriteError::TooOld {
            created_at_time: oldest - 1,
            now,
            oldest_accepted: oldest
        })
    );
    assert_eq!(
        packed_keyed(&mut c, CONTROLLER, &ops, &key(u64::MAX, 4)),
        Err(WriteError::CreatedInFuture {
            created_at_time: u64::MAX,
            now,
            newest_accepted: newest
        })
    );
    assert_eq!(c.counts().orders, 0);
    // The bounds themselves are accepted.
    assert_eq!(
        keyed(&mut c, CONTROLLER, &ops, &key(oldest, 5)),
        BatchResult::Ok(vec![committed(1)])
    );
    assert_eq!(
        keyed(&mut c, CONTROLLER, &ops, &key(newest, 6)),
        BatchResult::Ok(vec![committed(2)])
    );
    // An id of another length is refused before anything runs, when the argument is decoded
    // (the key's type holds 16 bytes), naming the id's length: never read as no key.
    #[derive(candid::CandidType)]
    struct AnyKey {
        created_at_time: u64,
        id: Vec<u8>,
    }
    let short = AnyKey {
        created_at_time: now,
        id: vec![1; 15],
    };
    assert_eq!(
        c.update_as::<BatchResult, _>(CONTROLLER, "execute_batch", (ops.clone(), Some(short))),
        BatchResult::Err(WriteError::Invalid(
            "the arguments are not Candid: Deserialize error: the batch key's id has 15 bytes; \
             it must have 16"
                .into()
        ))
    );
    let s = c.stats();
    assert_eq!(
        (
            s.keyed_batches,
            s.keys_refused,
            s.keys_held,
            c.counts().orders
        ),
        (2, 4, 2, 2)
    );
}

#[test]
fn expired_keys_are_pruned_by_the_timer_and_then_refused_as_too_old() {
    let mut c = Client::install(InitArgs::default());
    assert_eq!(c.create_user("a"), 1);
    let start = c.canister.time();
    let ops = orders(1, 2);
    let k = key(start, 1);
    assert_eq!(
        keyed(&mut c, CONTROLLER, &ops, &k),
        BatchResult::Ok(vec![committed(1), committed(2)])
    );
    c.tick(12 * 3_600 * SECOND);
    let later = key(c.canister.time(), 2);
    assert_eq!(
        keyed(&mut c, CONTROLLER, &ops, &later),
        BatchResult::Ok(vec![committed(3), committed(4)])
    );
    // Just before the first key expires nothing is pruned.
    c.tick(WINDOW_AND_DRIFT - 12 * 3_600 * SECOND);
    assert_eq!((c.stats().keys_held, c.stats().keys_pruned), (2, 0));
    // Once it expired, the prune timer removes it (and only it).
    c.tick(SECOND);
    let s = c.stats();
    assert_eq!((s.keys_held, s.keys_pruned), (1, 1));
    assert_eq!(
        keyed(&mut c, CONTROLLER, &ops, &k),
        BatchResult::Err(WriteError::TooOld {
            created_at_time: start,
            now: c.canister.time(),
            oldest_accepted: c.canister.time() - WINDOW_AND_DRIFT
        })
    );
    // The second key is still answered, and is pruned in its turn.
    assert_eq!(
        keyed(&mut c, CONTROLLER, &ops, &later),
        BatchResult::Duplicate(vec![committed(3), committed(4)])
    );
    c.tick(12 * 3_600 * SECOND);
    let s = c.stats();
    assert_eq!((s.keys_held, s.key_bytes_held, s.keys_pruned), (0, 0, 2));
    assert_eq!(c.counts().orders, 4);
    assert!(c.traps().is_empty());
}

#[test]
fn unkeyed_calls_without_the_key_argument_still_decode() {
    let mut c = Client::install(InitArgs::default());
    assert_eq!(c.create_user("a"), 1);
    // The argument of clients that predate the key: one value.
    let r: BatchResult = c.update("execute_batch", (orders(1, 2),));
    assert_eq!(r, BatchResult::Ok(vec![committed(1), committed(2)]));
    let r: BatchResult = c.update("execute_batch", (orders(1, 2),));
    assert_eq!(r, BatchResult::Ok(vec![committed(3), committed(4)]));
    assert_eq!(c.stats().keys_held, 0);
}

/// The ops a client batch's budget does not reach are `NotExecuted`, typed, in every batch
/// reply of the canister (Candid `execute_batch`, the hand-written packed `execute_batch_packed`,
/// the declared `execute_writes` and `execute_writes_packed`), one record for all of them in
/// the packed replies, and the same in each retry's recorded answer; none of them ran (engine:
/// offline (wasmtime, IC metering), at the smallest flush budget, 20 M instructions).
#[test]
fn ops_a_budget_does_not_reach_are_not_executed_in_every_reply_and_its_retry() {
    use batch_types::declare::{PackedWritesResult, WritesReply, WritesResult, encode_request};
    use bench_api::writes::UserOrderWrite;

    const OPS: usize = 10_000;
    let mut c = Client::install(InitArgs {
        flush_instruction_budget: Some(MIN_FLUSH_BUDGET),
        ..InitArgs::default()
    });
    assert_eq!(c.create_user("a"), 1);
    let now = c.canister.time();
    // Each reply's outcomes: a prefix committed, one rowid after the other, then the rest not
    // executed; as many more orders in the table as committed outcomes.
    let check = |c: &mut Client, outcomes: &[Outcome], before: u64| -> u64 {
        let ran = outcomes.iter().filter(|o| o.is_committed()).count();
        assert!(ran > 0 && ran < OPS / 2, "{ran} of {OPS} ran");
        assert!(
            outcomes[..ran]
                .iter()
                .zip(before as i64 + 1..)
                .all(|(o, rowid)| *o == committed(rowid))
        );
        assert!(outcomes[ran..].iter().all(|o| *o == Outcome::NotExecuted));
        let orders = before + ran as u64;
        assert_eq!(c.counts().orders, orders);
        orders
    };

    // Candid, then its retry.
    let ops = orders(1, OPS);
    let k = key(now, 1);
    let BatchResult::Ok(outcomes) = keyed(&mut c, CONTROLLER, &ops, &k) else {
        panic!("a batch that ran")
    };
    let orders = check(&mut c, &outcomes, 0);
    assert_eq!(
        keyed(&mut c, CONTROLLER, &ops, &k),
        BatchResult::Duplicate(outcomes)
    );
    assert_eq!(c.counts().orders, orders);

    // The hand-written packed batch: the ops not executed are one record (tag 4) ending the
    // reply, and so in its retry's.
    let k = key(now, 2);
    let raw = |c: &mut Client| {
        let arg = serde_bytes::ByteBuf::from(packed::encode_keyed_ops(&k, &ops));
        let exec = c.raw_update(CONTROLLER, "execute_batch_packed", (arg,));
        match candid::decode_one::<PackedResult>(exec.result.reply().expect("a reply")).unwrap() {
            PackedResult::Ok(blob) => blob,
            PackedResult::Err(e) => panic!("{e}"),
        }
    };
    let blob = raw(&mut c);
    let reply = packed::decode_keyed_outcomes(&blob, OPS).unwrap();
    let orders = check(&mut c, &reply.outcomes, orders);
    let not_run = reply
        .outcomes
        .iter()
        .filter(|o| **o == Outcome::NotExecuted)
        .count();
    let mut tail = vec![4];
    batch_types::packed::put_uint(&mut tail, not_run as u64);
    assert!(blob.ends_with(&tail), "{blob:?}");
    assert!(blob.len() < 32, "{} bytes", blob.len());
    let again = raw(&mut c);
    assert_eq!(again[1], packed::FLAG_DUPLICATE);
    assert_eq!(again[2..], blob[2..]);

    // The declared writes, in Candid and packed.
    let declared: Vec<UserOrderWrite> = ops.iter().cloned().map(UserOrderWrite::from).collect();
    let k = key(now, 3);
    let candid = |c: &mut Client| -> WritesReply {
        match c.update_as::<WritesResult, _>(CONTROLLER, "execute_writes", (k, declared.clone())) {
            WritesResult::Ok(reply) => reply,
            WritesResult::Err(e) => panic!("{e}"),
        }
    };
    let first = candid(&mut c);
    assert!(!first.duplicate);
    let orders = check(&mut c, &first.outcomes, orders);
    let again = candid(&mut c);
    assert!(again.duplicate);
    assert_eq!(again.outcomes, first.outcomes);
    let k = key(now, 4);
    let request = serde_bytes::ByteBuf::from(encode_request(&k, &declared));
    let blob =
        match c.update_as::<PackedWritesResult, _>(CONTROLLER, "execute_writes_packed", (request,))
        {
            PackedWritesResult::Ok(blob) => blob,
            PackedWritesResult::Err(e) => panic!("{e}"),
        };
    let reply = batch_types::packed::decode_reply(&blob, OPS).unwrap();
    check(&mut c, &reply.outcomes, orders);
    assert!(blob.len() < 32, "{} bytes", blob.len());
}
