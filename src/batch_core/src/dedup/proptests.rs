//! Model-based property test of keyed batches: clients send batches under keys, repeat them
//! in any order, reuse a key for other ops, send keys at the edges of the window, run out of
//! budget, get interrupted, and trap (the whole message rolled back, committed transaction
//! included). Whatever happens:
//!
//! - no op is ever applied twice (every op inserts rows tagged with its own number, counted in
//!   SQLite after every call);
//! - an op reported committed is in the database, one reported failed is not, from the answer
//!   on (never a false outcome);
//! - a repeated key with the same ops is answered with the first answer, bit for bit, marked
//!   duplicate, and nothing runs; with other ops it is refused and nothing runs;
//! - a refused key (too old, created in the future, store full) runs nothing, and a full store
//!   names the share that is full: the caller's, holding exactly its most keys, or the store's;
//! - the store's counts of keys and bytes, and each caller's, equal what its table holds;
//! - a prune step removes exactly as many keys as its key bound, its instruction budget and the
//!   expired keys allow, oldest first.

use std::collections::HashMap;

use proptest::prelude::*;
use rusqlite::Connection;

use super::tests::{caller_rows, keys_by_caller, restore, snapshot};
use super::*;
use crate::executor::TEST_PROGRESS_PERIOD_OPS;
use crate::meter::CountingMeter;

/// Cases per run: at least 256; `PROPTEST_CASES` can raise it.
fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|cases| cases.parse().ok())
        .unwrap_or(0)
        .max(256)
}

const SECOND: u64 = 1_000_000_000;
const WINDOW: u64 = 100 * SECOND;
const DRIFT: u64 = 10 * SECOND;
const START: u64 = 1_000 * SECOND;

const SCHEMA: &str = "CREATE TABLE applied (tag INTEGER NOT NULL, n INTEGER NOT NULL);";
/// Inserts `n` rows tagged `tag` (1 to 3): a unit of inserts, or one statement.
const INSERT: &str = "INSERT INTO applied (tag, n) VALUES (?1, ?2)";
/// Fails with NOT NULL: changes nothing.
const FAILING: &str = "INSERT INTO applied (tag, n) VALUES (?1, NULL)";
/// Runs about 200,000 virtual-machine operations, then inserts one tagged row: interrupted by
/// the guard of a [`HEAVY_BUDGET`] batch.
const HEAVY: &str = "INSERT INTO applied (tag, n) SELECT ?1, 1 FROM \
    (WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 40000) \
    SELECT max(x) AS x FROM c)";
const HEAVY_PERIOD_OPS: i32 = 10;
const HEAVY_BUDGET: u64 = 5_000;

#[derive(Clone, Debug)]
enum OpKind {
    Insert,
    Unit(u8),
    Failing,
    Heavy,
}

#[derive(Clone, Debug)]
enum Event {
    /// Send batch `batch` (of the batch pool) under its own key, with a tight budget or not.
    Send { batch: usize, tight: bool },
    /// The same, and the message traps after the batch committed: everything is rolled back.
    SendAndTrap { batch: usize },
    /// Send batch `batch`'s ops without the last one under its key: other ops under the same
    /// key (a client bug, or an attacker replaying a key).
    Variant { batch: usize },
    /// Send a batch under a heavy-op budget (its heavy ops are interrupted).
    SendHeavy { batch: usize },
    /// Let time pass.
    Advance(u64),
    /// Prune at most `max` keys within a `budget` of instructions (the meter counts one per
    /// read).
    Prune { max: u64, budget: u64 },
}

fn batch_kinds() -> impl Strategy<Value = Vec<OpKind>> {
    prop::collection::vec(
        prop_oneof![
            6 => Just(OpKind::Insert),
            2 => (2..4u8).prop_map(OpKind::Unit),
            2 => Just(OpKind::Failing),
            2 => Just(OpKind::Heavy),
        ],
        0..8,
    )
}

fn events(batches: usize) -> impl Strategy<Value = Vec<Event>> {
    prop::collection::vec(
        prop_oneof![
            8 => (0..batches, any::<bool>()).prop_map(|(batch, tight)| Event::Send { batch, tight }),
            2 => (0..batches).prop_map(|batch| Event::SendAndTrap { batch }),
            2 => (0..batches).prop_map(|batch| Event::Variant { batch }),
            3 => (0..batches).prop_map(|batch| Event::SendHeavy { batch }),
            2 => (0..WINDOW / 8).prop_map(Event::Advance),
            2 => (1..6u64, 0..4u64).prop_map(|(max, budget)| Event::Prune { max, budget }),
        ],
        1..40,
    )
}

/// A batch of the pool: its key (created at `created_offset` from the start, possibly outside
/// the window when sent), its caller, its ops and their tags.
#[derive(Clone, Debug)]
struct Batch {
    caller: Vec<u8>,
    key: BatchKey,
    ops: Vec<WriteOp>,
    tags: Vec<i64>,
}

fn scenario() -> impl Strategy<Value = (Vec<Batch>, Vec<Event>, u64, u64)> {
    (
        prop::collection::vec(
            (
                batch_kinds(),
                0..3u8,
                0..4u8,
                prop_oneof![6 => Just(0i64), 1 => -3i64..3],
            ),
            1..6,
        ),
        1..4u64,
        1..4u64,
    )
        .prop_flat_map(|(specs, max_keys, max_keys_per_caller)| {
            let mut next_tag = 1i64;
            let batches: Vec<Batch> = specs
                .into_iter()
                .enumerate()
                .map(|(i, (kinds, caller, id, offset))| {
                    let mut ops = Vec::new();
                    let mut tags = Vec::new();
                    for kind in kinds {
                        let tag = next_tag;
                        next_tag += 1;
                        tags.push(tag);
                        ops.push(match kind {
                            OpKind::Insert => WriteOp::single(INSERT, vec![tag.into(), 1.into()]),
                            OpKind::Unit(n) => WriteOp::Unit(
                                (0..n)
                                    .map(|k| {
                                        crate::op::Statement::new(
                                            INSERT,
                                            vec![tag.into(), i64::from(k + 1).into()],
                                        )
                                    })
                                    .collect(),
                            ),
                            OpKind::Failing => WriteOp::single(FAILING, vec![tag.into()]),
                            OpKind::Heavy => WriteOp::single(HEAVY, vec![tag.into()]),
                        });
                    }
                    // Keys of one caller with one id may collide on purpose (same key, other
                    // ops); the creation time spreads keys over and past the window.
                    let created = START.saturating_add_signed(offset * (WINDOW / 2) as i64);
                    Batch {
                        caller: vec![caller],
                        key: BatchKey {
                            created_at_time: created + i as u64 % 2,
                            id: [id; 16],
                        },
                        ops,
                        tags,
                    }
                })
                .collect();
            let n = batches.len();
            (
                Just(batches),
                events(n),
                Just(max_keys * 2),
                Just(max_keys_per_caller),
            )
        })
}

/// What the model knows.
struct Model {
    /// The answer each recorded (caller, key) was first given, with its digest.
    answered: HashMap<(Vec<u8>, BatchKey), (BatchDigest, Vec<Outcome>)>,
    /// Tags reported committed / failed.
    committed: HashMap<i64, u64>,
    failed: std::collections::HashSet<i64>,
}

fn tag_rows(conn: &Connection) -> HashMap<i64, u64> {
    let mut stmt = conn
        .prepare("SELECT tag, count(DISTINCT n), count(*) FROM applied GROUP BY tag")
        .expect("prepare");
    let rows = stmt
        .query_map([], |row| {
            Ok((
                row.get::<_, i64>(0)?,
                row.get::<_, i64>(1)?,
                row.get::<_, i64>(2)?,
            ))
        })
        .expect("query");
    let mut counts = HashMap::new();
    for row in rows {
        let (tag, distinct, all) = row.expect("row");
        // Each op inserts rows with distinct n: a repeated n means the op was applied twice.
        assert_eq!(distinct, all, "op {tag} applied twice");
        counts.insert(tag, all as u64);
    }
    counts
}

fn store_counts(conn: &Connection) -> (u64, u64) {
    conn.query_row(
        "SELECT count(*), coalesce(sum(length(caller) + length(id) + length(digest) + length(outcomes)), 0) FROM batch_core_dedup_keys",
        [],
        |row| Ok((row.get::<_, i64>(0)? as u64, row.get::<_, i64>(1)? as u64)),
    )
    .expect("store counts")
}

fn run_scenario(
    batches: Vec<Batch>,
    events: Vec<Event>,
    max_keys: u64,
    max_keys_per_caller: u64,
) -> Result<(), TestCaseError> {
    let mut conn = Connection::open_in_memory().expect("open");
    conn.execute_batch(SCHEMA).expect("schema");
    let mut d = Deduplicator::new(DedupConfig {
        window_ns: WINDOW,
        permitted_drift_ns: DRIFT,
        max_keys,
        max_bytes: DEFAULT_MAX_BYTES,
        max_keys_per_caller,
        max_bytes_per_caller: DEFAULT_MAX_BYTES,
    })
    .expect("config");
    let mut model = Model {
        answered: HashMap::new(),
        committed: HashMap::new(),
        failed: Default::default(),
    };
    let mut now = START;
    for event in events {
        let (batch, ops, tags, budget, trap) = match &event {
            Event::Advance(by) => {
                now += by;
                continue;
            }
            Event::Prune { max, budget } => {
                let before = d.stats(&conn).expect("stats").keys_held;
                let oldest = d.config().oldest_accepted_ns(now) as i64;
                let expired = |conn: &Connection| -> u64 {
                    conn.query_row(
                        "SELECT count(*) FROM batch_core_dedup_keys WHERE created_at < ?1",
                        [oldest],
                        |row| row.get::<_, i64>(0),
                    )
                    .expect("expired") as u64
                };
                let expired_before = expired(&conn);
                let report = d
                    .prune(
                        &conn,
                        now,
                        *max,
                        &Budget::new(CountingMeter::new(1), *budget),
                    )
                    .expect("prune");
                // The meter reads 0 at the start and k before the (k+1)-th key: the step stops
                // once k reaches the budget, but always removes one expired key.
                let by_budget = (*budget).max(1);
                let removed = (*max).min(expired_before).min(by_budget);
                prop_assert_eq!(report.removed, removed);
                prop_assert_eq!(
                    report.budget_used,
                    removed == by_budget && removed < *max && removed < expired_before
                );
                prop_assert_eq!(store_counts(&conn).0, before - report.removed);
                prop_assert_eq!(report.more, expired(&conn) > 0);
                check_store(&mut d, &conn)?;
                continue;
            }
            Event::Send { batch, tight } => {
                let b = &batches[*batch];
                let budget = Budget::new(CountingMeter::new(1), if *tight { 3 } else { 1 << 40 });
                (b, b.ops.clone(), b.tags.clone(), budget, false)
            }
            Event::SendAndTrap { batch } => {
                let b = &batches[*batch];
                let budget = Budget::new(CountingMeter::new(1), 1 << 40);
                (b, b.ops.clone(), b.tags.clone(), budget, true)
            }
            Event::Variant { batch } => {
                let b = &batches[*batch];
                let kept = b.ops.len().saturating_sub(1);
                let budget = Budget::new(CountingMeter::new(1), 1 << 40);
                (
                    b,
                    b.ops[..kept].to_vec(),
                    b.tags[..kept].to_vec(),
                    budget,
                    false,
                )
            }
            Event::SendHeavy { batch } => {
                let b = &batches[*batch];
                let budget = Budget::new(CountingMeter::with_statement_step(0, 1), HEAVY_BUDGET);
                (b, b.ops.clone(), b.tags.clone(), budget, false)
            }
        };
        let heavy = matches!(event, Event::SendHeavy { .. });
        let digest = BatchDigest::of_ops(&ops);
        let before_rows = tag_rows(&conn);
        let saved = trap.then(|| (snapshot(&conn), d.clone()));
        let previous =
            heavy.then(|| TEST_PROGRESS_PERIOD_OPS.with(|p| p.replace(HEAVY_PERIOD_OPS)));
        // Ops that are not heavy run in a heavy batch too; without the heavy period, a heavy
        // op runs to completion (a plain budget is far above its cost).
        let result = d.execute_keyed_within(
            &conn,
            &batch.caller,
            &batch.key,
            &digest,
            &ops,
            &budget,
            now,
        );
        if let Some(previous) = previous {
            TEST_PROGRESS_PERIOD_OPS.with(|p| p.set(previous));
        }
        let after_rows = tag_rows(&conn);
        if let Some((bytes, dedup)) = saved {
            // The message trapped: nothing of it happened, and the client saw no answer.
            restore(&mut conn, &bytes);
            d = dedup;
            prop_assert_eq!(tag_rows(&conn), before_rows);
            continue;
        }
        let id = (batch.caller.clone(), batch.key);
        let oldest = d.config().oldest_accepted_ns(now);
        let newest = d.config().newest_accepted_ns(now);
        match result {
            Ok(answer) => {
                prop_assert!(batch.key.created_at_time >= oldest);
                prop_assert!(batch.key.created_at_time <= newest);
                prop_assert_eq!(answer.outcomes.len(), ops.len());
                match model.answered.get(&id) {
                    Some((recorded_digest, first)) => {
                        prop_assert_eq!(*recorded_digest, digest);
                        prop_assert!(answer.duplicate);
                        prop_assert_eq!(&answer.outcomes, first);
                        prop_assert_eq!(&after_rows, &before_rows, "a duplicate ran ops");
                    }
                    None => {
                        prop_assert!(!answer.duplicate);
                        for (tag, outcome) in tags.iter().zip(&answer.outcomes) {
                            prop_assert!(
                                !model.committed.contains_key(tag),
                                "op {} ran twice",
                                tag
                            );
                            prop_assert!(!model.failed.contains(tag), "op {} ran twice", tag);
                            if outcome.is_committed() {
                                model
                                    .committed
                                    .insert(*tag, after_rows.get(tag).copied().unwrap_or(0));
                            } else {
                                model.failed.insert(*tag);
                            }
                        }
                        model.answered.insert(id, (digest, answer.outcomes.clone()));
                    }
                }
            }
            Err(DedupError::TooOld { .. }) => {
                prop_assert!(batch.key.created_at_time < oldest);
                prop_assert_eq!(&after_rows, &before_rows);
            }
            Err(DedupError::CreatedInFuture { .. }) => {
                prop_assert!(batch.key.created_at_time > newest);
                prop_assert_eq!(&after_rows, &before_rows);
            }
            Err(DedupError::DigestMismatch { .. }) => {
                let recorded = model.answered.get(&id).map(|(digest, _)| *digest);
                prop_assert!(recorded.is_some() && recorded != Some(digest));
                prop_assert_eq!(&after_rows, &before_rows);
            }
            Err(DedupError::StoreFull {
                share,
                keys_held,
                max_keys: bound,
                ..
            }) => {
                prop_assert!(!model.answered.contains_key(&id));
                let held_by_caller = keys_by_caller(&conn)
                    .into_iter()
                    .find(|(caller, _, _)| *caller == batch.caller)
                    .map_or(0, |(_, keys, _)| keys);
                match share {
                    StoreShare::Caller => {
                        prop_assert_eq!(bound, max_keys_per_caller);
                        prop_assert_eq!(keys_held, max_keys_per_caller);
                        prop_assert_eq!(held_by_caller, max_keys_per_caller);
                    }
                    StoreShare::Store => {
                        prop_assert_eq!(bound, max_keys);
                        prop_assert_eq!(keys_held, max_keys);
                        prop_assert!(held_by_caller < max_keys_per_caller);
                    }
                }
                prop_assert_eq!(&after_rows, &before_rows);
            }
            Err(other) => return Err(TestCaseError::fail(format!("unexpected: {other}"))),
        }
        // Never a false outcome, never applied twice: every op reported committed has its rows
        // (exactly as many as when it committed), every op reported failed has none.
        for (tag, rows) in &model.committed {
            prop_assert!(*rows >= 1);
            prop_assert_eq!(after_rows.get(tag), Some(rows), "op {}", tag);
        }
        for tag in &model.failed {
            prop_assert_eq!(after_rows.get(tag), None, "op {}", tag);
        }
        // Nothing else is in the database.
        for tag in after_rows.keys() {
            prop_assert!(
                model.committed.contains_key(tag),
                "op {} has rows but no answer",
                tag
            );
        }
        check_store(&mut d, &conn)?;
    }
    Ok(())
}

fn check_store(d: &mut Deduplicator, conn: &Connection) -> Result<(), TestCaseError> {
    let stats = d.stats(conn).expect("stats");
    let (keys, payload) = store_counts(conn);
    prop_assert_eq!(stats.keys_held, keys);
    prop_assert_eq!(stats.bytes_held, payload + keys * KEY_OVERHEAD_BYTES);
    // Each caller's counts are its keys' (a caller holding none has no row).
    prop_assert_eq!(caller_rows(conn), keys_by_caller(conn));
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

    #[test]
    fn keyed_batches_run_at_most_once_and_answer_truthfully(
        (batches, events, max_keys, max_keys_per_caller) in scenario()
    ) {
        run_scenario(batches, events, max_keys, max_keys_per_caller)?;
    }
}
