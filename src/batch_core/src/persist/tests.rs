use proptest::prelude::*;

use super::*;
use crate::op::{SqlValue, Statement, WriteOp};

fn config() -> Config {
    Config {
        flush_size: 3,
        max_delay_ns: 7,
        max_pending: 1_000_000,
        max_pending_bytes: 1 << 30,
        flush_instruction_budget: 123,
        outcome_capacity: 4,
        history_capacity: 8,
        coalesce_rows: 16,
    }
}

/// The bits of every float, so that NaN payloads and -0.0 compare exactly.
fn bits(value: &SqlValue) -> (u8, Vec<u8>) {
    match value {
        SqlValue::Null => (0, vec![]),
        SqlValue::Integer(i) => (1, i.to_le_bytes().to_vec()),
        SqlValue::Real(f) => (2, f.to_bits().to_le_bytes().to_vec()),
        SqlValue::Text(s) => (3, s.as_bytes().to_vec()),
        SqlValue::Blob(b) => (4, b.clone()),
    }
}

/// Per pending op: ticket, submit time, and the tagged bytes of its SQL texts and parameters.
type OpBits = (u64, u64, Vec<(u8, Vec<u8>)>);

fn all_bits(queue: &BatchQueue) -> Vec<OpBits> {
    queue
        .pending()
        .map(|op| {
            let statements: Vec<&Statement> = match &op.op {
                WriteOp::Single(statement) => vec![statement],
                WriteOp::Unit(statements) => statements.iter().collect(),
            };
            (
                op.ticket,
                op.enqueued_ns,
                statements
                    .iter()
                    .flat_map(|s| {
                        std::iter::once((5, s.sql.as_bytes().to_vec()))
                            .chain(s.params.iter().map(bits))
                    })
                    .collect(),
            )
        })
        .collect()
}

fn edge_values() -> Vec<SqlValue> {
    vec![
        SqlValue::Null,
        SqlValue::Integer(i64::MIN),
        SqlValue::Integer(i64::MAX),
        SqlValue::Integer(0),
        SqlValue::Integer(-1),
        SqlValue::Real(f64::NAN),
        SqlValue::Real(f64::from_bits(0x7ff8_dead_beef_0001)),
        SqlValue::Real(f64::from_bits(0xfff0_0000_0000_0001)),
        SqlValue::Real(f64::INFINITY),
        SqlValue::Real(f64::NEG_INFINITY),
        SqlValue::Real(-0.0),
        SqlValue::Real(f64::MIN_POSITIVE / 3.0),
        SqlValue::Real(f64::from_bits(1)),
        SqlValue::Real(-386.33000000000004),
        SqlValue::Real(8.010306006949637e142),
        SqlValue::Real(f64::MAX),
        SqlValue::Text(String::new()),
        SqlValue::Text("nul\0inside, emoji 🦀, accents é".into()),
        SqlValue::Blob(vec![]),
        SqlValue::Blob((0..=255).collect()),
    ]
}

#[test]
fn every_edge_value_survives_bit_for_bit() {
    let mut queue = BatchQueue::new(config()).unwrap();
    let values = edge_values();
    queue
        .submit(
            WriteOp::single("INSERT INTO t VALUES (?)", values.clone()),
            1,
        )
        .unwrap();
    queue
        .submit(
            WriteOp::unit(vec![
                Statement::new("A", values[..5].to_vec()),
                Statement::new("B\0é", values[5..].to_vec()),
            ]),
            u64::MAX,
        )
        .unwrap();
    let bytes = queue.save(Vec::new()).unwrap();
    assert_eq!(&bytes[..4], b"BQS\x03");
    let restored = BatchQueue::restore(&bytes).unwrap();
    assert_eq!(all_bits(&restored), all_bits(&queue));
    assert_eq!(restored.config(), &config());
    assert_eq!(restored.next_ticket(), 3);
    // Saving the restored queue gives the same bytes: nothing drifts across upgrades.
    assert_eq!(restored.save(Vec::new()).unwrap(), bytes);
}

#[test]
fn outcomes_stats_and_limits_survive() {
    let conn = rusqlite::Connection::open_in_memory().unwrap();
    conn.execute_batch("CREATE TABLE t (x INTEGER NOT NULL)")
        .unwrap();
    let mut queue = BatchQueue::new(config()).unwrap();
    queue
        .submit(
            WriteOp::single("INSERT INTO t VALUES (?1)", vec![1.into()]),
            0,
        )
        .unwrap();
    queue
        .submit(
            WriteOp::single("INSERT INTO t VALUES (?1)", vec![SqlValue::Null]),
            0,
        )
        .unwrap();
    queue.flush(&conn, &crate::CountingMeter::new(1)).unwrap();
    queue
        .submit(WriteOp::single("INSERT INTO t VALUES (2)", vec![]), 5)
        .unwrap();
    let restored = BatchQueue::restore(&queue.save(Vec::new()).unwrap()).unwrap();
    assert_eq!(restored.to_state(), queue.to_state());
    assert_eq!(restored.status(2), queue.status(2));
    assert_eq!(restored.stats(), queue.stats());
}

/// Format version 1, as the release before the last wrote it: its config had no
/// `coalesce_rows`, and no op or outcome had an owner.
#[derive(serde::Serialize)]
struct SavedV1 {
    config: (usize, u64, usize, usize, u64, usize),
    next_ticket: Ticket,
    commit_limit: Option<u64>,
    stats: StatsV2,
    pending: Vec<(Ticket, u64, WriteOp)>,
    outcomes: Vec<(Ticket, Outcome)>,
}

/// Format version 2: version 1 with `coalesce_rows`.
#[derive(serde::Serialize)]
struct SavedV2Written {
    config: (usize, u64, usize, usize, u64, usize, usize),
    next_ticket: Ticket,
    commit_limit: Option<u64>,
    stats: StatsV2,
    pending: Vec<(Ticket, u64, WriteOp)>,
    outcomes: Vec<(Ticket, Outcome)>,
}

/// The stats of versions 1 and 2, written.
#[derive(serde::Serialize)]
struct StatsV2(
    u64,
    u64,
    u64,
    u64,
    u64,
    u64,
    u64,
    u64,
    u64,
    u64,
    Option<String>,
);

fn stats_v2(s: &Stats) -> StatsV2 {
    StatsV2(
        s.pending,
        s.submitted,
        s.committed,
        s.failed,
        s.rejected,
        s.flushes,
        s.last_flush_ops,
        s.last_flush_instructions,
        s.flush_errors,
        s.interrupted,
        s.last_error.clone(),
    )
}

/// A queue with committed, failed and pending ops, submitted without an owner (all that
/// versions 1 and 2 knew).
fn old_style_queue() -> BatchQueue {
    let conn = rusqlite::Connection::open_in_memory().unwrap();
    conn.execute_batch("CREATE TABLE t (x INTEGER NOT NULL)")
        .unwrap();
    let mut queue = BatchQueue::new(config()).unwrap();
    let insert = |x: SqlValue| WriteOp::single("INSERT INTO t VALUES (?1)", vec![x]);
    queue.submit(insert(1.into()), 0).unwrap();
    queue.submit(insert(SqlValue::Null), 0).unwrap();
    queue.flush(&conn, &crate::CountingMeter::new(1)).unwrap();
    queue.submit(insert(SqlValue::Real(1.5)), 5).unwrap();
    queue
}

/// What a version 1 or 2 queue restores to: the same, without history.
fn without_history(queue: &BatchQueue) -> QueueState {
    let mut state = queue.to_state();
    state.history_base = queue
        .pending()
        .next()
        .map_or(queue.next_ticket(), |op| op.ticket);
    state.history.clear();
    state
}

#[test]
fn version_1_and_2_queues_are_restored() {
    let queue = old_style_queue();
    let state = queue.to_state();
    let c = queue.config();
    let pending: Vec<(Ticket, u64, WriteOp)> = state
        .pending
        .iter()
        .map(|op| (op.ticket, op.enqueued_ns, op.op.clone()))
        .collect();
    let outcomes: Vec<(Ticket, Outcome)> = state
        .outcomes
        .iter()
        .map(|o| (o.ticket, o.outcome.clone()))
        .collect();
    let mut v1 = b"BQS\x01".to_vec();
    v1.extend(
        postcard::to_allocvec(&SavedV1 {
            config: (
                c.flush_size,
                c.max_delay_ns,
                c.max_pending,
                c.max_pending_bytes,
                c.flush_instruction_budget,
                c.outcome_capacity,
            ),
            next_ticket: queue.next_ticket(),
            commit_limit: None,
            stats: stats_v2(&queue.stats()),
            pending: pending.clone(),
            outcomes: outcomes.clone(),
        })
        .unwrap(),
    );
    let restored = BatchQueue::restore(&v1).unwrap();
    assert_eq!(
        restored.config(),
        &Config {
            coalesce_rows: crate::config::DEFAULT_COALESCE_ROWS,
            history_capacity: crate::config::DEFAULT_HISTORY_CAPACITY,
            ..config()
        }
    );
    assert_eq!(all_bits(&restored), all_bits(&queue));
    assert_eq!(restored.to_state(), without_history(&queue));
    assert_eq!(restored.stats(), queue.stats());
    // Saved again, it is the current version.
    assert_eq!(&restored.save(Vec::new()).unwrap()[..4], b"BQS\x03");

    let mut v2 = b"BQS\x02".to_vec();
    v2.extend(
        postcard::to_allocvec(&SavedV2Written {
            config: (
                c.flush_size,
                c.max_delay_ns,
                c.max_pending,
                c.max_pending_bytes,
                c.flush_instruction_budget,
                c.outcome_capacity,
                c.coalesce_rows,
            ),
            next_ticket: queue.next_ticket(),
            commit_limit: None,
            stats: stats_v2(&queue.stats()),
            pending,
            outcomes,
        })
        .unwrap(),
    );
    let restored = BatchQueue::restore(&v2).unwrap();
    assert_eq!(
        restored.config(),
        &Config {
            history_capacity: crate::config::DEFAULT_HISTORY_CAPACITY,
            ..config()
        }
    );
    assert_eq!(restored.to_state(), without_history(&queue));
    // Kept outcomes are visible to their owner, NONE (an old queue knew no owners).
    assert_eq!(
        restored.status_for(1, Owner::NONE),
        crate::OpStatus::Done(Outcome::Committed {
            rows_changed: 1,
            last_insert_rowid: 1
        })
    );
}

#[test]
fn foreign_or_damaged_bytes_are_refused() {
    let queue = BatchQueue::new(config()).unwrap();
    let bytes = queue.save(Vec::new()).unwrap();
    assert!(matches!(
        BatchQueue::restore(b"{\"pending\":[]}"),
        Err(RestoreError::NotASavedQueue)
    ));
    assert!(matches!(
        BatchQueue::restore(b"BQS"),
        Err(RestoreError::NotASavedQueue)
    ));
    let mut newer = bytes.clone();
    newer[3] = 4;
    assert!(matches!(
        BatchQueue::restore(&newer),
        Err(RestoreError::UnsupportedVersion(4))
    ));
    assert!(matches!(
        BatchQueue::restore(&bytes[..bytes.len() - 1]),
        Err(RestoreError::Decode(_))
    ));
    // Trailing bytes (a canister's unused stable memory) are ignored.
    let mut padded = bytes.clone();
    padded.extend_from_slice(&[0; 64]);
    assert!(BatchQueue::restore(&padded).is_ok());
}

fn value() -> impl Strategy<Value = SqlValue> {
    prop_oneof![
        Just(SqlValue::Null),
        any::<i64>().prop_map(SqlValue::Integer),
        any::<u64>().prop_map(|bits| SqlValue::Real(f64::from_bits(bits))),
        any::<String>().prop_map(SqlValue::Text),
        prop::collection::vec(any::<u8>(), 0..40).prop_map(SqlValue::Blob),
    ]
}

fn statement() -> impl Strategy<Value = Statement> {
    (any::<String>(), prop::collection::vec(value(), 0..6))
        .prop_map(|(sql, params)| Statement::new(sql, params))
}

fn op() -> impl Strategy<Value = WriteOp> {
    prop_oneof![
        statement().prop_map(WriteOp::Single),
        prop::collection::vec(statement(), 1..4).prop_map(WriteOp::Unit),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// Any queue, saved and restored three times, is the same bit for bit.
    #[test]
    fn any_queue_survives_three_round_trips(
        ops in prop::collection::vec((op(), any::<u64>()), 0..60),
    ) {
        let mut queue = BatchQueue::new(config()).unwrap();
        for (op, now) in ops {
            queue.submit(op, now).unwrap();
        }
        let mut current = queue.save(Vec::new()).unwrap();
        for _ in 0..3 {
            let restored = BatchQueue::restore(&current).unwrap();
            prop_assert_eq!(all_bits(&restored), all_bits(&queue));
            let again = restored.save(Vec::new()).unwrap();
            prop_assert_eq!(&again, &current);
            current = again;
        }
    }
}
