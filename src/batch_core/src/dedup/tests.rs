use rusqlite::Connection;
use rusqlite::ffi::{SQLITE_CONSTRAINT_UNIQUE as UNIQUE, SQLITE_INTERRUPT as INTERRUPT};

use super::*;
use crate::executor::{TEST_PROGRESS_PERIOD_OPS, execute_batch};
use crate::meter::CountingMeter;
use crate::op::OpError;
use crate::op::Statement;
use crate::testing::{count, insert_order, insert_user, open_db};

const SECOND: u64 = 1_000_000_000;
/// A time well past the window, so that `now − window − drift` is positive.
const NOW: u64 = 10 * DEFAULT_WINDOW_NS;
const ALICE: &[u8] = b"alice";
const BOB: &[u8] = b"bob";

fn key(created_at_time: u64, n: u8) -> BatchKey {
    BatchKey {
        created_at_time,
        id: [n; 16],
    }
}

fn budget() -> Budget<CountingMeter> {
    Budget::new(CountingMeter::new(1), 1_000_000)
}

fn committed(rows_changed: u64, last_insert_rowid: i64) -> Outcome {
    Outcome::Committed {
        rows_changed,
        last_insert_rowid,
    }
}

fn dedup() -> Deduplicator {
    Deduplicator::new(DedupConfig::default()).expect("valid config")
}

/// Runs `ops` under `key` for `caller` at `now`, with the digest of the ops.
fn run(
    d: &mut Deduplicator,
    conn: &Connection,
    caller: &[u8],
    key: &BatchKey,
    ops: &[WriteOp],
    now: u64,
) -> Result<KeyedOutcomes, DedupError> {
    d.execute_keyed_within(
        conn,
        caller,
        key,
        &BatchDigest::of_ops(ops),
        ops,
        &budget(),
        now,
    )
}

fn users(names: &[&str]) -> Vec<WriteOp> {
    names
        .iter()
        .map(|n| insert_user(n, &format!("{n}@x")))
        .collect()
}

#[test]
fn a_repeated_key_is_answered_with_the_recorded_outcomes_and_runs_nothing() {
    let conn = open_db();
    let mut d = dedup();
    let ops = vec![
        insert_user("a", "a@x"),
        insert_user("b", "a@x"),
        insert_user("c", "c@x"),
    ];
    let first = run(&mut d, &conn, ALICE, &key(NOW, 1), &ops, NOW).expect("first");
    let expected = vec![
        committed(1, 1),
        Outcome::Failed(OpError {
            code: UNIQUE,
            message: "UNIQUE constraint failed: users.email".into(),
        }),
        committed(1, 2),
    ];
    assert_eq!(
        first,
        KeyedOutcomes {
            outcomes: expected.clone(),
            duplicate: false
        }
    );
    assert_eq!(count(&conn, "users"), 2);
    // The same batch again, later: nothing runs (a second run would fail both inserts with
    // UNIQUE), the original outcomes come back.
    for later in [NOW, NOW + SECOND, NOW + DEFAULT_WINDOW_NS] {
        let again = run(&mut d, &conn, ALICE, &key(NOW, 1), &ops, later).expect("duplicate");
        assert_eq!(
            again,
            KeyedOutcomes {
                outcomes: expected.clone(),
                duplicate: true
            }
        );
    }
    assert_eq!(count(&conn, "users"), 2);
    let stats = d.stats(&conn).expect("stats");
    assert_eq!(stats.keys_held, 1);
    assert_eq!(stats.counters.executed, 1);
    assert_eq!(stats.counters.duplicates_answered, 3);
}

#[test]
fn the_same_key_with_other_ops_is_refused_and_runs_nothing() {
    let conn = open_db();
    let mut d = dedup();
    run(&mut d, &conn, ALICE, &key(NOW, 1), &users(&["a"]), NOW).expect("first");
    for other in [users(&["b"]), users(&["a", "b"]), Vec::new()] {
        let error = run(&mut d, &conn, ALICE, &key(NOW, 1), &other, NOW).expect_err("conflict");
        assert!(
            matches!(error, DedupError::DigestMismatch { key: k } if k == key(NOW, 1)),
            "{error:?}"
        );
    }
    assert_eq!(count(&conn, "users"), 1);
    assert_eq!(d.counters().digest_mismatches, 3);
}

#[test]
fn keys_are_scoped_to_their_caller() {
    let conn = open_db();
    let mut d = dedup();
    let a = run(&mut d, &conn, ALICE, &key(NOW, 1), &users(&["a"]), NOW).expect("alice");
    let b = run(&mut d, &conn, BOB, &key(NOW, 1), &users(&["b"]), NOW).expect("bob");
    assert_eq!(a.outcomes, vec![committed(1, 1)]);
    assert_eq!(b.outcomes, vec![committed(1, 2)]);
    assert!(!b.duplicate);
    // Bob repeating Alice's batch under the same key runs it as his own (and fails: the
    // email is taken), without seeing Alice's outcome.
    let error = run(&mut d, &conn, BOB, &key(NOW, 1), &users(&["a"]), NOW).expect_err("bob");
    assert!(matches!(error, DedupError::DigestMismatch { .. }));
    let too_long = [0u8; MAX_CALLER_BYTES + 1];
    let error = run(&mut d, &conn, &too_long, &key(NOW, 2), &users(&["c"]), NOW).expect_err("len");
    assert!(matches!(
        error,
        DedupError::CallerTooLong {
            len: 65,
            max: MAX_CALLER_BYTES
        }
    ));
    assert_eq!(count(&conn, "users"), 2);
}

#[test]
fn the_window_rules_are_icrc1s_at_their_exact_bounds() {
    let conn = open_db();
    let mut d = dedup();
    let oldest = NOW - DEFAULT_WINDOW_NS - DEFAULT_PERMITTED_DRIFT_NS;
    let newest = NOW + DEFAULT_PERMITTED_DRIFT_NS;
    let error = run(
        &mut d,
        &conn,
        ALICE,
        &key(oldest - 1, 1),
        &users(&["a"]),
        NOW,
    )
    .unwrap_err();
    assert!(
        matches!(
            error,
            DedupError::TooOld { created_at_time, now_ns: NOW, oldest_accepted_ns }
                if created_at_time == oldest - 1 && oldest_accepted_ns == oldest
        ),
        "{error:?}"
    );
    let error = run(
        &mut d,
        &conn,
        ALICE,
        &key(newest + 1, 1),
        &users(&["a"]),
        NOW,
    )
    .unwrap_err();
    assert!(
        matches!(
            error,
            DedupError::CreatedInFuture { created_at_time, now_ns: NOW, newest_accepted_ns }
                if created_at_time == newest + 1 && newest_accepted_ns == newest
        ),
        "{error:?}"
    );
    let error = run(
        &mut d,
        &conn,
        ALICE,
        &key(u64::MAX, 1),
        &users(&["a"]),
        u64::MAX,
    )
    .unwrap_err();
    assert!(
        matches!(error, DedupError::CreatedInFuture { .. }),
        "{error:?}"
    );
    assert_eq!(count(&conn, "users"), 0);
    run(&mut d, &conn, ALICE, &key(oldest, 1), &users(&["a"]), NOW).expect("oldest accepted");
    run(&mut d, &conn, ALICE, &key(newest, 2), &users(&["b"]), NOW).expect("newest accepted");
    assert_eq!(count(&conn, "users"), 2);
    // A recorded key past its window is refused as too old, not answered: the answer does not
    // depend on whether it was pruned yet.
    let later = NOW + 1;
    let error = run(&mut d, &conn, ALICE, &key(oldest, 1), &users(&["a"]), later).unwrap_err();
    assert!(matches!(error, DedupError::TooOld { .. }), "{error:?}");
    assert_eq!(d.counters().too_old, 2);
    assert_eq!(d.counters().created_in_future, 2);
}

#[test]
fn a_full_store_refuses_new_keys_answers_recorded_ones_and_frees_room_when_pruned() {
    let conn = open_db();
    let config = DedupConfig {
        max_keys: 2,
        ..DedupConfig::default()
    };
    let mut d = Deduplicator::new(config.clone()).expect("config");
    run(&mut d, &conn, ALICE, &key(NOW, 1), &users(&["a"]), NOW).expect("1");
    run(&mut d, &conn, ALICE, &key(NOW + 1, 2), &users(&["b"]), NOW).expect("2");
    let error = run(&mut d, &conn, ALICE, &key(NOW, 3), &users(&["c"]), NOW).unwrap_err();
    let held = d.stats(&conn).expect("stats");
    assert!(
        matches!(
            error,
            DedupError::StoreFull {
                share: StoreShare::Store,
                keys_held: 2,
                max_keys: 2,
                bytes_held,
                max_bytes: DEFAULT_MAX_BYTES,
                needed_bytes: 0,
            } if bytes_held == held.bytes_held
        ),
        "{error:?}"
    );
    assert_eq!(count(&conn, "users"), 2);
    // Still answered.
    let again = run(&mut d, &conn, ALICE, &key(NOW, 1), &users(&["a"]), NOW).expect("dup");
    assert!(again.duplicate);
    // Nothing expired yet: pruning removes nothing, and the store stays full.
    assert_eq!(
        d.prune(&conn, NOW, 10, &budget()).expect("prune"),
        PruneReport {
            removed: 0,
            bytes_freed: 0,
            more: false,
            budget_used: false,
        }
    );
    // Once the first key expires it is pruned (the second, one nanosecond younger, stays),
    // and the refused key can be sent again.
    let later = NOW + config.window_ns + config.permitted_drift_ns + 1;
    let report = d.prune(&conn, later, 10, &budget()).expect("prune");
    assert_eq!((report.removed, report.more), (1, false));
    assert_eq!(
        report.bytes_freed,
        ALICE.len() as u64 + 16 + 16 + 4 + KEY_OVERHEAD_BYTES
    );
    let third = run(&mut d, &conn, ALICE, &key(later, 3), &users(&["c"]), later).expect("3");
    assert_eq!(third.outcomes, vec![committed(1, 3)]);
    let stats = d.stats(&conn).expect("stats");
    assert_eq!(stats.keys_held, 2);
    assert_eq!(stats.counters.store_full, 1);
    assert_eq!(stats.counters.pruned, 1);
}

#[test]
fn a_record_past_the_byte_bound_rolls_the_batch_back() {
    let conn = open_db();
    // Room for the first key (one run of outcomes), not for a batch whose outcomes are
    // distinct failures with long messages.
    let config = DedupConfig {
        max_bytes: 200,
        ..DedupConfig::default()
    };
    let mut d = Deduplicator::new(config).expect("config");
    run(
        &mut d,
        &conn,
        ALICE,
        &key(NOW, 1),
        &users(&["a", "b", "c"]),
        NOW,
    )
    .expect("fits");
    let held = d.stats(&conn).expect("stats").bytes_held;
    assert_eq!(held, ALICE.len() as u64 + 16 + 16 + 6 + KEY_OVERHEAD_BYTES);
    let ops = vec![
        insert_user("d", "d@x"),
        insert_user("e", "a@x"),
        insert_order(999, 1.0),
        insert_user("f", "b@x"),
    ];
    let error = run(&mut d, &conn, ALICE, &key(NOW, 2), &ops, NOW).unwrap_err();
    match error {
        DedupError::StoreFull {
            share: StoreShare::Store,
            keys_held: 1,
            bytes_held,
            max_bytes: 200,
            needed_bytes,
            ..
        } => {
            assert_eq!(bytes_held, held);
            assert!(held + needed_bytes > 200, "{needed_bytes}");
        }
        other => panic!("{other:?}"),
    }
    // The batch ran and was rolled back with its record: "d" was not inserted.
    assert_eq!(count(&conn, "users"), 3);
    assert_eq!(d.stats(&conn).expect("stats").keys_held, 1);
    assert!(conn.is_autocommit());
}

#[test]
fn pruning_takes_bounded_steps_oldest_first_and_keeps_exact_counts() {
    let conn = open_db();
    let mut d = dedup();
    for n in 0..5u8 {
        let created = NOW + u64::from(n);
        run(
            &mut d,
            &conn,
            ALICE,
            &key(created, n),
            &users(&[&format!("u{n}")]),
            NOW,
        )
        .expect("run");
    }
    let per_key = ALICE.len() as u64 + 16 + 16 + 4 + KEY_OVERHEAD_BYTES;
    assert_eq!(d.stats(&conn).expect("stats").bytes_held, 5 * per_key);
    // At this time the first three keys (created NOW, NOW+1, NOW+2) are too old.
    let later = NOW + 2 + DEFAULT_WINDOW_NS + DEFAULT_PERMITTED_DRIFT_NS + 1;
    let first = d.prune(&conn, later, 2, &budget()).expect("step 1");
    assert_eq!(
        first,
        PruneReport {
            removed: 2,
            bytes_freed: 2 * per_key,
            more: true,
            budget_used: false,
        }
    );
    let second = d.prune(&conn, later, 2, &budget()).expect("step 2");
    assert_eq!((second.removed, second.more), (1, false));
    let stats = d.stats(&conn).expect("stats");
    assert_eq!((stats.keys_held, stats.bytes_held), (2, 2 * per_key));
    let left: Vec<i64> = conn
        .prepare("SELECT created_at FROM batch_core_dedup_keys ORDER BY created_at")
        .unwrap()
        .query_map([], |row| row.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(left, vec![NOW as i64 + 3, NOW as i64 + 4]);
    // The keys that are left are still answered at that time.
    let dup = run(
        &mut d,
        &conn,
        ALICE,
        &key(NOW + 4, 4),
        &users(&["u4"]),
        later,
    )
    .expect("dup");
    assert!(dup.duplicate);
}

/// The bytes counted for one key of `caller` whose batch was one committed insert of a small
/// rowid: caller, id, digest, the 4-byte record, the overhead.
fn small_key_bytes(caller: &[u8]) -> u64 {
    caller.len() as u64 + 16 + 16 + 4 + KEY_OVERHEAD_BYTES
}

#[test]
fn a_caller_at_its_share_is_refused_naming_its_share_while_another_caller_records() {
    let conn = open_db();
    let config = DedupConfig {
        max_keys: 3,
        max_keys_per_caller: 2,
        ..DedupConfig::default()
    };
    let mut d = Deduplicator::new(config.clone()).expect("config");
    let (alice, bob) = (small_key_bytes(ALICE), small_key_bytes(BOB));
    run(&mut d, &conn, ALICE, &key(NOW, 1), &users(&["a"]), NOW).expect("1");
    run(&mut d, &conn, ALICE, &key(NOW, 2), &users(&["b"]), NOW).expect("2");
    // Alice holds her share (2 keys) in a store of 3: her next key is refused before it runs,
    // naming her share and her counts.
    let error = run(&mut d, &conn, ALICE, &key(NOW, 3), &users(&["c"]), NOW).unwrap_err();
    assert!(
        matches!(
            error,
            DedupError::StoreFull {
                share: StoreShare::Caller,
                keys_held: 2,
                max_keys: 2,
                bytes_held,
                max_bytes: DEFAULT_MAX_BYTES_PER_CALLER,
                needed_bytes: 0,
            } if bytes_held == 2 * alice
        ),
        "{error:?}"
    );
    assert_eq!(count(&conn, "users"), 2);
    // Bob still records a key: the store has room.
    let bobs = run(&mut d, &conn, BOB, &key(NOW, 3), &users(&["c"]), NOW).expect("bob");
    assert_eq!(bobs.outcomes, vec![committed(1, 3)]);
    // Now the store is full: Bob, under his share, is told the store is full...
    let error = run(&mut d, &conn, BOB, &key(NOW, 4), &users(&["d"]), NOW).unwrap_err();
    assert!(
        matches!(
            error,
            DedupError::StoreFull {
                share: StoreShare::Store,
                keys_held: 3,
                max_keys: 3,
                bytes_held,
                max_bytes: DEFAULT_MAX_BYTES,
                needed_bytes: 0,
            } if bytes_held == 2 * alice + bob
        ),
        "{error:?}"
    );
    // ...and Alice, at her share in a full store, that her share is full (the store's room
    // would not help her).
    let error = run(&mut d, &conn, ALICE, &key(NOW, 5), &users(&["e"]), NOW).unwrap_err();
    assert!(
        matches!(
            error,
            DedupError::StoreFull {
                share: StoreShare::Caller,
                keys_held: 2,
                ..
            }
        ),
        "{error:?}"
    );
    assert_eq!(
        error.to_string(),
        format!(
            "StoreFull: the caller's share of the deduplication store holds 2 of 2 keys and {} of {DEFAULT_MAX_BYTES_PER_CALLER} bytes; this key needs 0 bytes",
            2 * alice
        )
    );
    // Recorded keys are still answered.
    assert!(
        run(&mut d, &conn, ALICE, &key(NOW, 1), &users(&["a"]), NOW)
            .expect("dup")
            .duplicate
    );
    assert_eq!(count(&conn, "users"), 3);
    assert_eq!(
        caller_rows(&conn),
        vec![(ALICE.to_vec(), 2, 2 * alice), (BOB.to_vec(), 1, bob)]
    );
    assert_eq!(d.counters().store_full, 3);
    // Once the keys expire, pruning frees both shares: the callers' rows go with their last
    // key, and Alice records again.
    let later = NOW + config.window_ns + config.permitted_drift_ns + 1;
    let report = d.prune(&conn, later, 10, &budget()).expect("prune");
    assert_eq!(
        report,
        PruneReport {
            removed: 3,
            bytes_freed: 2 * alice + bob,
            more: false,
            budget_used: false,
        }
    );
    assert_eq!(caller_rows(&conn), vec![]);
    run(&mut d, &conn, ALICE, &key(later, 6), &users(&["f"]), later).expect("room again");
    assert_eq!(caller_rows(&conn), vec![(ALICE.to_vec(), 1, alice)]);
    let stats = d.stats(&conn).expect("stats");
    assert_eq!((stats.keys_held, stats.bytes_held), (1, alice));
}

#[test]
fn a_record_past_the_callers_byte_share_rolls_the_batch_back_and_names_the_share() {
    let conn = open_db();
    let config = DedupConfig {
        max_bytes_per_caller: 150,
        ..DedupConfig::default()
    };
    let mut d = Deduplicator::new(config).expect("config");
    let alice = small_key_bytes(ALICE);
    run(&mut d, &conn, ALICE, &key(NOW, 1), &users(&["a"]), NOW).expect("fits");
    // Distinct failures with their messages: a record larger than the 93 bytes Alice has left,
    // within the share of a caller holding nothing.
    let ops = vec![
        insert_user("d", "d@x"),
        insert_user("e", "a@x"),
        insert_order(999, 1.0),
        insert_user("f", "b@x"),
    ];
    let reference = open_db();
    execute_batch(&reference, &users(&["a"])).expect("same database");
    let outcomes = execute_batch(&reference, &ops).expect("reference");
    let needed = ALICE.len() as u64
        + 16
        + 16
        + stored::encode(&outcomes, 0).len() as u64
        + KEY_OVERHEAD_BYTES;
    assert!(alice + needed > 150 && needed <= 150, "{needed}");
    let error = run(&mut d, &conn, ALICE, &key(NOW, 2), &ops, NOW).unwrap_err();
    assert!(
        matches!(
            error,
            DedupError::StoreFull {
                share: StoreShare::Caller,
                keys_held: 1,
                max_keys: DEFAULT_MAX_KEYS_PER_CALLER,
                bytes_held,
                max_bytes: 150,
                needed_bytes,
            } if bytes_held == alice && needed_bytes == needed
        ),
        "{error:?}"
    );
    // The batch ran and was rolled back with its record: "d" was not inserted.
    assert_eq!(count(&conn, "users"), 1);
    assert_eq!(caller_rows(&conn), vec![(ALICE.to_vec(), 1, alice)]);
    // The same batch from Bob fits his share.
    let bobs = run(&mut d, &conn, BOB, &key(NOW, 2), &ops, NOW).expect("bob");
    assert_eq!(bobs.outcomes, outcomes);
    assert_eq!(
        caller_rows(&conn),
        vec![
            (ALICE.to_vec(), 1, alice),
            (
                BOB.to_vec(),
                1,
                needed - ALICE.len() as u64 + BOB.len() as u64
            )
        ]
    );
}

#[test]
fn a_prune_step_stops_at_its_key_and_instruction_bounds() {
    let conn = open_db();
    let mut d = dedup();
    // Seven keys, one per nanosecond, alternating callers.
    let mut sizes = Vec::new();
    for n in 0..7u8 {
        let caller = if n % 2 == 0 { ALICE } else { BOB };
        let created = NOW + u64::from(n);
        run(
            &mut d,
            &conn,
            caller,
            &key(created, n),
            &users(&[&format!("u{n}")]),
            NOW,
        )
        .expect("run");
        sizes.push(small_key_bytes(caller));
    }
    let later = NOW + 6 + DEFAULT_WINDOW_NS + DEFAULT_PERMITTED_DRIFT_NS + 1;
    let remaining = |conn: &Connection| -> Vec<i64> {
        conn.prepare("SELECT created_at FROM batch_core_dedup_keys ORDER BY created_at")
            .unwrap()
            .query_map([], |row| row.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap()
    };
    let held = |d: &mut Deduplicator, conn: &Connection| {
        let stats = d.stats(conn).expect("stats");
        (stats.keys_held, stats.bytes_held)
    };
    // Every read of the meter adds 100: the start reads 0, the read before the k-th key after
    // the first reads 100 k. With a budget of 250 the step removes 3 keys and stops before the
    // 4th (it had read 300): 4 reads.
    let meter = CountingMeter::new(100);
    let report = d
        .prune(&conn, later, 10, &Budget::new(meter.clone(), 250))
        .expect("step 1");
    assert_eq!(
        report,
        PruneReport {
            removed: 3,
            bytes_freed: sizes[..3].iter().sum(),
            more: true,
            budget_used: true,
        }
    );
    assert_eq!(meter.reads(), 4);
    assert_eq!(held(&mut d, &conn), (4, sizes[3..].iter().sum()));
    // A budget of 0 still removes one key, so that steps always make progress.
    let report = d
        .prune(&conn, later, 10, &Budget::new(CountingMeter::new(100), 0))
        .expect("step 2");
    assert_eq!(
        (report.removed, report.more, report.budget_used),
        (1, true, true)
    );
    assert_eq!(held(&mut d, &conn), (3, sizes[4..].iter().sum()));
    // The key bound: 2 of the 3 left, the budget not reached.
    let report = d.prune(&conn, later, 2, &budget()).expect("step 3");
    assert_eq!(
        report,
        PruneReport {
            removed: 2,
            bytes_freed: sizes[4..6].iter().sum(),
            more: true,
            budget_used: false,
        }
    );
    assert_eq!(remaining(&conn), vec![NOW as i64 + 6]);
    // The last one, oldest first throughout; the store and the callers' rows are empty.
    let report = d.prune(&conn, later, 10, &budget()).expect("step 4");
    assert_eq!(
        (report.removed, report.more, report.budget_used),
        (1, false, false)
    );
    assert_eq!(held(&mut d, &conn), (0, 0));
    assert_eq!(remaining(&conn), Vec::<i64>::new());
    assert_eq!(caller_rows(&conn), vec![]);
    assert_eq!(d.counters().pruned, 7);
}

#[test]
fn a_store_of_many_expired_large_keys_is_emptied_over_several_steps() {
    let conn = open_db();
    let mut d = dedup();
    let callers: [&[u8]; 3] = [ALICE, BOB, b"carol"];
    // Twelve keys whose records hold 20 distinct failures of about 230 bytes each.
    let long = "x".repeat(200);
    let mut sizes = Vec::new();
    for n in 0..12u8 {
        let ops: Vec<WriteOp> = (0..20)
            .map(|i| {
                WriteOp::single(
                    format!("INSERT INTO missing_{n}_{i}_{long} VALUES (1)"),
                    vec![],
                )
            })
            .collect();
        let before = d.stats(&conn).expect("stats").bytes_held;
        let batch = run(
            &mut d,
            &conn,
            callers[usize::from(n) % 3],
            &key(NOW + u64::from(n), n),
            &ops,
            NOW,
        )
        .expect("run");
        assert!(batch.outcomes.iter().all(|o| !o.is_committed()));
        let size = d.stats(&conn).expect("stats").bytes_held - before;
        assert!(size > 20 * 200, "{size}");
        sizes.push(size);
    }
    let later = NOW + 11 + DEFAULT_WINDOW_NS + DEFAULT_PERMITTED_DRIFT_NS + 1;
    // A budget of 3 meter reads: 3 keys per step, 4 steps, oldest first, exact counts after
    // each (the store's and every caller's).
    for step in 1..=4usize {
        let report = d
            .prune(&conn, later, 10, &Budget::new(CountingMeter::new(1), 3))
            .expect("step");
        let gone = 3 * step;
        assert_eq!(
            report,
            PruneReport {
                removed: 3,
                bytes_freed: sizes[gone - 3..gone].iter().sum(),
                more: step < 4,
                budget_used: step < 4,
            }
        );
        let stats = d.stats(&conn).expect("stats");
        assert_eq!(
            (stats.keys_held, stats.bytes_held),
            ((12 - gone) as u64, sizes[gone..].iter().sum())
        );
        assert_eq!(caller_rows(&conn), keys_by_caller(&conn));
    }
    assert_eq!(caller_rows(&conn), vec![]);
    assert_eq!(d.counters().pruned, 12);
}

#[test]
fn a_store_written_before_the_caller_counts_is_migrated_once() {
    let conn = open_db();
    let config = DedupConfig {
        max_keys_per_caller: 2,
        ..DedupConfig::default()
    };
    let mut d = Deduplicator::new(config.clone()).expect("config");
    run(&mut d, &conn, ALICE, &key(NOW, 1), &users(&["a"]), NOW).expect("1");
    run(&mut d, &conn, BOB, &key(NOW, 2), &users(&["b"]), NOW).expect("2");
    run(&mut d, &conn, ALICE, &key(NOW + 1, 3), &users(&["c"]), NOW).expect("3");
    let counted = caller_rows(&conn);
    let (alice, bob) = (small_key_bytes(ALICE), small_key_bytes(BOB));
    assert_eq!(
        counted,
        vec![(ALICE.to_vec(), 2, 2 * alice), (BOB.to_vec(), 1, bob)]
    );
    // The store as the version before per-caller counts left it: the keys and the meta row.
    conn.execute_batch("DROP TABLE batch_core_dedup_callers")
        .unwrap();
    // A new deduplicator (after an upgrade) aggregates the counts once from the keys.
    let mut upgraded = Deduplicator::new(config.clone()).expect("config");
    upgraded.prepare(&conn).expect("migrated");
    assert_eq!(caller_rows(&conn), counted);
    // Alice's keys from before count against her share.
    let error = run(
        &mut upgraded,
        &conn,
        ALICE,
        &key(NOW, 4),
        &users(&["d"]),
        NOW,
    )
    .unwrap_err();
    assert!(
        matches!(
            error,
            DedupError::StoreFull {
                share: StoreShare::Caller,
                keys_held: 2,
                ..
            }
        ),
        "{error:?}"
    );
    run(&mut upgraded, &conn, BOB, &key(NOW, 5), &users(&["e"]), NOW).expect("bob");
    // Opening it again migrates nothing twice.
    let mut again = Deduplicator::new(config.clone()).expect("config");
    again.prepare(&conn).expect("prepared");
    assert_eq!(
        caller_rows(&conn),
        vec![(ALICE.to_vec(), 2, 2 * alice), (BOB.to_vec(), 2, 2 * bob)]
    );
    // Pruning the migrated keys brings every count to zero.
    let later = NOW + 1 + config.window_ns + config.permitted_drift_ns + 1;
    let report = again.prune(&conn, later, 10, &budget()).expect("prune");
    assert_eq!((report.removed, report.more), (4, false));
    assert_eq!(caller_rows(&conn), vec![]);
    let stats = again.stats(&conn).expect("stats");
    assert_eq!((stats.keys_held, stats.bytes_held), (0, 0));
}

#[test]
fn an_interrupted_op_is_recorded_after_the_others_are_re_applied() {
    // A heavy op between two inserts: the guard interrupts it, the transaction is rolled back,
    // the first insert re-applied, the heavy op failed, the last insert not started (the
    // budget is used up); the record is written after all of that, and a repeat answers
    // exactly the same.
    const HEAVY: &str = "INSERT INTO users (username, email) SELECT 'never', 'never@x' FROM \
        (WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 40000) \
        SELECT x FROM c) WHERE x < 0";
    let conn = open_db();
    let mut d = dedup();
    let ops = vec![
        insert_user("a", "a@x"),
        WriteOp::single(HEAVY, vec![]),
        insert_user("b", "b@x"),
    ];
    let meter = CountingMeter::with_statement_step(0, 1);
    let previous = TEST_PROGRESS_PERIOD_OPS.with(|period| period.replace(10));
    let heavy_budget = Budget::new(meter, 5_000);
    let first = d.execute_keyed_within(
        &conn,
        ALICE,
        &key(NOW, 1),
        &BatchDigest::of_ops(&ops),
        &ops,
        &heavy_budget,
        NOW,
    );
    TEST_PROGRESS_PERIOD_OPS.with(|period| period.set(previous));
    let first = first.expect("batch");
    assert_eq!(first.outcomes[0], committed(1, 1));
    assert_eq!(first.outcomes[1].code(), Some(INTERRUPT));
    assert!(
        first.outcomes[1]
            .message()
            .unwrap()
            .starts_with("interrupted: ")
    );
    assert_eq!(first.outcomes[2], Outcome::NotExecuted);
    assert_eq!(count(&conn, "users"), 1);
    let again = run(&mut d, &conn, ALICE, &key(NOW, 1), &ops, NOW).expect("dup");
    assert_eq!(again.outcomes, first.outcomes);
    assert!(again.duplicate);
    assert_eq!(count(&conn, "users"), 1);
}

#[test]
fn ops_the_budget_did_not_reach_are_recorded_as_not_executed() {
    let conn = open_db();
    let mut d = dedup();
    // Alternating texts, so that no insert is coalesced with the next (a chunk is one meter
    // read).
    let ops = vec![
        insert_user("a", "a@x"),
        insert_order(1, 1.0),
        insert_user("b", "b@x"),
        insert_order(1, 2.0),
        insert_user("c", "c@x"),
    ];
    // Every meter read costs 1: the budget of 2 is used up after the first ops.
    let tight = Budget::new(CountingMeter::new(1), 2);
    let digest = BatchDigest::of_ops(&ops);
    let first = d
        .execute_keyed_within(&conn, ALICE, &key(NOW, 1), &digest, &ops, &tight, NOW)
        .expect("batch");
    let executed = first.outcomes.iter().filter(|o| o.is_committed()).count();
    assert!((1..5).contains(&executed), "{first:?}");
    assert!(first.outcomes[..executed].iter().all(Outcome::is_committed));
    let rows = |conn: &Connection| count(conn, "users") + count(conn, "orders");
    assert_eq!(rows(&conn), executed as i64);
    for outcome in &first.outcomes[executed..] {
        assert_eq!(outcome, &Outcome::NotExecuted);
    }
    let again = run(&mut d, &conn, ALICE, &key(NOW, 1), &ops, NOW).expect("dup");
    assert_eq!(again.outcomes, first.outcomes);
    assert_eq!(rows(&conn), executed as i64);
}

/// The store lives across upgrades: a batch recorded by the version before ops not executed
/// were typed (stored form 1: such an op was a failure `9`, `not executed: ...`) is answered,
/// when its client retries it after the upgrade, with those ops [`Outcome::NotExecuted`] (the
/// client may send them again) and every other outcome as recorded; nothing runs again.
#[test]
fn a_batch_recorded_before_the_upgrade_is_answered_with_its_ops_not_executed_typed() {
    let conn = open_db();
    let mut d = dedup();
    let ops = vec![
        insert_user("a", "a@x"),
        insert_order(1, 1.0),
        insert_user("b", "b@x"),
        insert_order(1, 2.0),
        insert_user("c", "c@x"),
    ];
    let tight = Budget::new(CountingMeter::new(1), 2);
    let digest = BatchDigest::of_ops(&ops);
    let first = d
        .execute_keyed_within(&conn, ALICE, &key(NOW, 1), &digest, &ops, &tight, NOW)
        .expect("batch");
    let executed = first.outcomes.iter().filter(|o| o.is_committed()).count();
    assert!((1..5).contains(&executed), "{first:?}");
    // The record as version 1 wrote it.
    let v1_outcomes: Vec<Outcome> = first
        .outcomes
        .iter()
        .map(|o| match o {
            Outcome::NotExecuted => Outcome::failed(
                INTERRUPT,
                "not executed: the batch's instruction budget (2 instructions) was used up \
                 before this op started",
            ),
            other => other.clone(),
        })
        .collect();
    let mut v1 = vec![1];
    batch_types::packed::put_outcomes(&mut v1, &v1_outcomes);
    let rewritten = conn
        .execute(
            "UPDATE batch_core_dedup_keys SET outcomes = ?1 WHERE caller = ?2",
            rusqlite::params![v1, ALICE],
        )
        .unwrap();
    assert_eq!(rewritten, 1);
    let rows = |conn: &Connection| count(conn, "users") + count(conn, "orders");
    let again = run(&mut d, &conn, ALICE, &key(NOW, 1), &ops, NOW).expect("dup");
    assert!(again.duplicate);
    assert_eq!(again.outcomes, first.outcomes);
    assert!(
        again.outcomes[executed..]
            .iter()
            .all(|o| *o == Outcome::NotExecuted)
    );
    assert_eq!(rows(&conn), executed as i64);
}

#[test]
fn a_failed_commit_records_nothing_and_a_retry_runs_the_batch() {
    let conn = open_db();
    conn.execute_batch(
        "CREATE TABLE parents (id INTEGER PRIMARY KEY);
         CREATE TABLE children (parent INTEGER REFERENCES parents(id) DEFERRABLE INITIALLY DEFERRED);",
    )
    .unwrap();
    let mut d = dedup();
    let orphan = vec![WriteOp::single(
        "INSERT INTO children (parent) VALUES (?1)",
        vec![7.into()],
    )];
    for _ in 0..2 {
        let error = run(&mut d, &conn, ALICE, &key(NOW, 1), &orphan, NOW).unwrap_err();
        assert!(
            matches!(error, DedupError::Flush(FlushError::Commit(_))),
            "{error:?}"
        );
        assert_eq!(d.stats(&conn).expect("stats").keys_held, 0);
        assert_eq!(count(&conn, "children"), 0);
    }
    // With the parent in place the same key runs, once.
    conn.execute("INSERT INTO parents (id) VALUES (7)", [])
        .unwrap();
    let ok = run(&mut d, &conn, ALICE, &key(NOW, 1), &orphan, NOW).expect("runs");
    assert_eq!((ok.outcomes, ok.duplicate), (vec![committed(1, 1)], false));
    assert!(
        run(&mut d, &conn, ALICE, &key(NOW, 1), &orphan, NOW)
            .unwrap()
            .duplicate
    );
    assert_eq!(count(&conn, "children"), 1);
}

#[test]
fn a_trap_after_commit_forgets_the_batch_with_its_key() {
    // In a canister a trap rolls back the whole message, the committed SQLite transaction
    // included: the database and the deduplicator's memory return to before the call, and the
    // retry runs the batch as if for the first time.
    let mut conn = open_db();
    let mut d = dedup();
    run(&mut d, &conn, ALICE, &key(NOW, 0), &users(&["z"]), NOW).expect("setup");
    let snapshot = snapshot(&conn);
    let saved = d.clone();
    let ops = users(&["a", "b"]);
    let trapped = run(&mut d, &conn, ALICE, &key(NOW, 1), &ops, NOW).expect("ran");
    restore(&mut conn, &snapshot);
    d = saved;
    assert_eq!(count(&conn, "users"), 1);
    let retried = run(&mut d, &conn, ALICE, &key(NOW, 1), &ops, NOW).expect("retry");
    assert_eq!(retried, trapped);
    assert_eq!(count(&conn, "users"), 3);
    assert_eq!(d.counters().executed, 2);
}

#[test]
fn an_open_transaction_is_refused_and_left_alone() {
    let conn = open_db();
    let mut d = dedup();
    conn.execute_batch("BEGIN; INSERT INTO users (username, email) VALUES ('t', 't@x');")
        .unwrap();
    let error = run(&mut d, &conn, ALICE, &key(NOW, 1), &users(&["a"]), NOW).unwrap_err();
    assert!(matches!(error, DedupError::Store(_)), "{error:?}");
    assert!(!conn.is_autocommit());
    conn.execute_batch("COMMIT").unwrap();
    assert_eq!(count(&conn, "users"), 1);
    // Once the tables exist, an open transaction makes the batch's BEGIN fail.
    run(&mut d, &conn, ALICE, &key(NOW, 1), &users(&["a"]), NOW).expect("runs");
    conn.execute_batch("BEGIN").unwrap();
    let error = run(&mut d, &conn, ALICE, &key(NOW, 2), &users(&["b"]), NOW).unwrap_err();
    assert!(
        matches!(error, DedupError::Flush(FlushError::Begin(_))),
        "{error:?}"
    );
    conn.execute_batch("ROLLBACK").unwrap();
    assert_eq!(count(&conn, "users"), 2);
}

#[test]
fn an_empty_batch_records_its_key_too() {
    let conn = open_db();
    let mut d = dedup();
    let first = run(&mut d, &conn, ALICE, &key(NOW, 1), &[], NOW).expect("empty");
    assert_eq!((first.outcomes.len(), first.duplicate), (0, false));
    assert!(
        run(&mut d, &conn, ALICE, &key(NOW, 1), &[], NOW)
            .unwrap()
            .duplicate
    );
    let error = run(&mut d, &conn, ALICE, &key(NOW, 1), &users(&["a"]), NOW).unwrap_err();
    assert!(matches!(error, DedupError::DigestMismatch { .. }));
    assert_eq!(d.stats(&conn).unwrap().keys_held, 1);
}

#[test]
fn a_key_recorded_by_another_connection_since_the_lookup_is_answered_from_its_record() {
    let path = std::env::temp_dir().join(format!(
        "batch_core_dedup_{}_{:?}.sqlite",
        std::process::id(),
        std::thread::current().id()
    ));
    let _ = std::fs::remove_file(&path);
    let a = Connection::open(&path).unwrap();
    a.execute_batch(crate::testing::SCHEMA).unwrap();
    let b = Connection::open(&path).unwrap();
    let ops = users(&["a", "b"]);
    let digest = BatchDigest::of_ops(&ops);
    let mut da = dedup();
    let mut db = dedup();
    let Lookup::New(admitted) = da
        .lookup(&a, ALICE, &key(NOW, 1), &digest, ops.len(), NOW)
        .unwrap()
    else {
        panic!("new key");
    };
    let by_b = run(&mut db, &b, ALICE, &key(NOW, 1), &ops, NOW).expect("b runs it");
    let by_a = da
        .execute_admitted_within(&a, admitted, &ops, &budget())
        .expect("answered");
    assert_eq!(by_a.outcomes, by_b.outcomes);
    assert!(by_a.duplicate);
    assert_eq!(count(&a, "users"), 2);
    drop((a, b));
    let _ = std::fs::remove_file(&path);
}

#[test]
fn the_digest_tells_every_part_of_the_ops_apart() {
    let base = vec![WriteOp::single(
        "INSERT INTO t (a) VALUES (?1)",
        vec![SqlValue::Real(f64::NAN)],
    )];
    let variants = [
        vec![WriteOp::single(
            "INSERT INTO t (a) VALUES (?1)",
            vec![SqlValue::Real(f64::from_bits(f64::NAN.to_bits() ^ 1))],
        )],
        vec![WriteOp::single(
            "INSERT INTO t (a) VALUES (?1)",
            vec![SqlValue::Real(-0.0)],
        )],
        vec![WriteOp::single(
            "INSERT INTO t (a) VALUES (?1)",
            vec![SqlValue::Null],
        )],
        vec![WriteOp::single(
            "INSERT INTO t (b) VALUES (?1)",
            vec![SqlValue::Null],
        )],
        vec![WriteOp::Unit(vec![Statement::new(
            "INSERT INTO t (a) VALUES (?1)",
            vec![SqlValue::Real(f64::NAN)],
        )])],
        vec![],
    ];
    let digest = BatchDigest::of_ops(&base);
    assert_eq!(digest, BatchDigest::of_ops(&base.clone()));
    for variant in &variants {
        assert_ne!(digest, BatchDigest::of_ops(variant), "{variant:?}");
    }
    // Text and blob with the same bytes differ; so do a text split differently.
    let text = |s: &str| vec![WriteOp::single("X", vec![SqlValue::Text(s.into())])];
    assert_ne!(
        BatchDigest::of_ops(&text("ab")),
        BatchDigest::of_ops(&[WriteOp::single("X", vec![SqlValue::Blob(b"ab".to_vec())])])
    );
    assert_ne!(
        BatchDigest::of_ops(&[WriteOp::single(
            "X",
            vec![SqlValue::Text("a".into()), SqlValue::Text("b".into())]
        )]),
        BatchDigest::of_ops(&text("ab"))
    );
    // XXH3-128 with seed 0, canonical (big-endian) bytes: the reference implementation's
    // values for "" and "abc".
    assert_eq!(
        BatchDigest::of_bytes(b"").0,
        0x99aa06d3014798d86001c324468d497f_u128.to_be_bytes()
    );
    assert_eq!(
        BatchDigest::of_bytes(b"abc").0,
        0x06b05ab6733a618578af5f94892f3950_u128.to_be_bytes()
    );
}

#[test]
fn stored_outcomes_round_trip_with_runs_and_repeats() {
    let failed = |code: i32, error: &str| Outcome::failed(code, error);
    let executed = vec![
        committed(1, 10),
        committed(1, 11),
        committed(1, 12),
        committed(1, 13),
        failed(UNIQUE, "dup"),
        failed(UNIQUE, "dup"),
        committed(0, 0),
        committed(2, i64::MAX),
        committed(2, i64::MIN),
        committed(2, i64::MIN),
        failed(i32::MIN, ""),
    ];
    let blob = stored::encode(&executed, 1_000);
    // The version (1 byte), one run (5), a repeat (8), four committed singles (3, and 12 each
    // for the rowids at the 64-bit bounds, which a run cannot join), a failure (7) and the
    // tail of 1,000 ops not executed as one record (3).
    let mut expected = executed.clone();
    expected.extend(std::iter::repeat_n(Outcome::NotExecuted, 1_000));
    assert_eq!(stored::decode(&blob, expected.len()).unwrap(), expected);
    assert_eq!(blob.len(), 1 + 5 + 8 + 3 + 3 * 12 + 7 + 3);
    assert_eq!(
        blob[blob.len() - 3..],
        [4, 0xe8, 0x07],
        "1,000 not executed"
    );
    // The records are the packed replies' (one codec): after the version byte, the same bytes.
    let mut records = Vec::new();
    batch_types::packed::put_outcomes(&mut records, &expected);
    assert_eq!(blob[1..], records);
    // 1,000 inserts are one run.
    let inserts: Vec<_> = (1..=1_000).map(|i| committed(1, i)).collect();
    assert_eq!(stored::encode(&inserts, 0), [2, 2, 0xe8, 0x07, 1, 2, 2]);
    // Exactly the expected count, or an error.
    assert!(stored::decode(&blob, expected.len() - 1).is_err());
    assert!(stored::decode(&blob, expected.len() + 1).is_err());
    assert!(stored::decode(&[3], 0).is_err());
    assert!(stored::decode(&[], 0).is_err());
    assert!(stored::decode(&[2, 9], 1).is_err());
    assert!(stored::decode(&blob[..blob.len() - 1], expected.len()).is_err());
    assert_eq!(stored::decode(&[2], 0).unwrap(), vec![]);
}

/// A record written by version 1 of the stored form (before an op not executed was an outcome
/// of its own), byte for byte as that version wrote it: an insert run, a repeated failure, a
/// failure interrupted while it ran, and the ops the budget did not reach as one repeated
/// failure `9`, `not executed: ...`. Read now, every outcome is what it was, except the ops not
/// executed, which are [`Outcome::NotExecuted`]: a client retrying that batch is told it may
/// send them again.
#[test]
fn records_of_version_1_read_with_their_ops_not_executed_typed() {
    let not_run = "not executed: the batch's instruction budget (50 instructions) was used up \
                   before this op started";
    let interrupted = "interrupted: the op reached its instruction limit";
    let mut v1 = vec![1];
    // Tag 2: a run of 3 inserts, rows_changed 1, rowids 10, 11, 12.
    v1.extend([2, 3, 1, 20, 2]);
    // Tag 3: 2 identical failures, code 2067 (zigzag 4134 = a6 20), "dup".
    v1.extend([3, 2, 0xa6, 0x20, 3, b'd', b'u', b'p']);
    // Tag 1: one failure with code 9, interrupted while it ran.
    v1.extend([1, 18, interrupted.len() as u8]);
    v1.extend_from_slice(interrupted.as_bytes());
    // Tag 3: 4 ops not executed, stored as failures with code 9.
    v1.extend([3, 4, 18, not_run.len() as u8]);
    v1.extend_from_slice(not_run.as_bytes());
    let mut expected: Vec<Outcome> = (10..=12).map(|rowid| committed(1, rowid)).collect();
    expected.extend([
        Outcome::failed(UNIQUE, "dup"),
        Outcome::failed(UNIQUE, "dup"),
    ]);
    expected.push(Outcome::failed(INTERRUPT, interrupted));
    expected.extend(std::iter::repeat_n(Outcome::NotExecuted, 4));
    assert_eq!(stored::decode(&v1, 10).unwrap(), expected);
    // The same bytes with the version of now: the failures are read as they are.
    v1[0] = 2;
    let read = stored::decode(&v1, 10).unwrap();
    assert_eq!(read[6..], vec![Outcome::failed(INTERRUPT, not_run); 4]);
}

#[test]
fn a_keyed_batch_gives_the_outcomes_of_an_unkeyed_one() {
    let keyed = open_db();
    let plain = open_db();
    let ops = vec![
        insert_user("a", "a@x"),
        insert_order(1, 5.0),
        insert_order(2, 5.0),
        insert_user("b", "a@x"),
    ];
    let mut d = dedup();
    let outcomes = run(&mut d, &keyed, ALICE, &key(NOW, 1), &ops, NOW)
        .unwrap()
        .outcomes;
    assert_eq!(outcomes, execute_batch(&plain, &ops).unwrap());
    assert_eq!(crate::testing::dump(&keyed), crate::testing::dump(&plain));
}

/// The main database's bytes.
pub(super) fn snapshot(conn: &Connection) -> Vec<u8> {
    conn.serialize(rusqlite::MAIN_DB)
        .expect("serialize")
        .to_vec()
}

/// Replaces the main database with `bytes` from [`snapshot`].
pub(super) fn restore(conn: &mut Connection, bytes: &[u8]) {
    conn.deserialize_read_exact(rusqlite::MAIN_DB, bytes, bytes.len(), false)
        .expect("deserialize");
}

/// Keys and bytes (with the overhead) each caller holds, from the table of keys, by caller.
pub(super) fn keys_by_caller(conn: &Connection) -> Vec<(Vec<u8>, u64, u64)> {
    let mut stmt = conn
        .prepare(
            "SELECT caller, count(*), sum(length(caller) + length(id) + length(digest) + length(outcomes)) \
             FROM batch_core_dedup_keys GROUP BY caller ORDER BY caller",
        )
        .expect("prepare");
    stmt.query_map([], |row| {
        let keys = row.get::<_, i64>(1)? as u64;
        Ok((
            row.get(0)?,
            keys,
            row.get::<_, i64>(2)? as u64 + keys * KEY_OVERHEAD_BYTES,
        ))
    })
    .expect("query")
    .collect::<Result<_, _>>()
    .expect("rows")
}

/// The per-caller counts as the store keeps them, by caller.
pub(super) fn caller_rows(conn: &Connection) -> Vec<(Vec<u8>, u64, u64)> {
    let mut stmt = conn
        .prepare("SELECT caller, keys, bytes FROM batch_core_dedup_callers ORDER BY caller")
        .expect("prepare");
    stmt.query_map([], |row| {
        Ok((
            row.get(0)?,
            row.get::<_, i64>(1)? as u64,
            row.get::<_, i64>(2)? as u64,
        ))
    })
    .expect("query")
    .collect::<Result<_, _>>()
    .expect("rows")
}
