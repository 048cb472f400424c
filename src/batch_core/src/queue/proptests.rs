//! Model-based property test: a [`BatchQueue`] flushed at random points with random budgets
//! must leave the same database and give the same per-op outcomes as executing every accepted
//! op alone in autocommit mode ([`execute_autocommit`]) on a second database.
//!
//! The ops run on the users/orders schema of [`crate::testing`], and fail in every way the
//! executor distinguishes: constraint violations (`UNIQUE`, `NOT NULL`, foreign keys), a trigger
//! aborting the statement, `INSERT OR ROLLBACK` / `UPDATE OR ROLLBACK` and a `RAISE(ROLLBACK)`
//! trigger ending the whole transaction, bad SQL, an unknown column, a wrong parameter count,
//! a read-only statement, units failing part-way, and heavy ops that the instruction guard
//! interrupts (flushes with a meter that charges for SQLite's virtual-machine operations: a
//! heavy op not at the head is left for the next flush, at the head it fails alone; every
//! other op is unaffected).

use std::collections::VecDeque;

use proptest::prelude::*;

use super::*;
use crate::clock::{Clock, ManualClock};
use crate::executor::{TEST_PROGRESS_PERIOD_OPS, execute_autocommit};
use crate::meter::CountingMeter;
use crate::op::{SqlValue, Statement};
use crate::testing::{INSERT_ORDER, INSERT_USER, dump, open_db};

/// Cases per run: at least 1,000; `PROPTEST_CASES` can raise it.
fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|cases| cases.parse().ok())
        .unwrap_or(0)
        .max(1_000)
}

fn email() -> impl Strategy<Value = SqlValue> {
    (0..6u8).prop_map(|i| SqlValue::Text(format!("u{i}@x")))
}

fn name() -> impl Strategy<Value = SqlValue> {
    (0..3u8).prop_map(|i| SqlValue::Text(format!("name{i}")))
}

fn user_id() -> impl Strategy<Value = SqlValue> {
    (1..8i64).prop_map(SqlValue::Integer)
}

fn order_id() -> impl Strategy<Value = SqlValue> {
    (1..12i64).prop_map(SqlValue::Integer)
}

/// Mostly ordinary amounts; sometimes one over the limit (the insert trigger rolls back the
/// transaction) or negative (the update trigger aborts the statement).
fn amount() -> impl Strategy<Value = SqlValue> {
    prop_oneof![
        8 => (0..4_000i64).prop_map(|quarters| SqlValue::Real(quarters as f64 / 4.0)),
        1 => Just(SqlValue::Real(2_000_000.0)),
        1 => Just(SqlValue::Real(-5.0)),
    ]
}

fn stmt(sql: &str, params: Vec<SqlValue>) -> Statement {
    Statement::new(sql.to_owned(), params)
}

fn statement() -> impl Strategy<Value = Statement> {
    prop_oneof![
        4 => (name(), email()).prop_map(|(n, e)| stmt(INSERT_USER, vec![n, e])),
        1 => (name(), email()).prop_map(|(n, e)| stmt(
            "INSERT OR ROLLBACK INTO users (username, email) VALUES (?1, ?2)", vec![n, e])),
        1 => (name(), email()).prop_map(|(n, e)| stmt(
            "INSERT OR IGNORE INTO users (username, email) VALUES (?1, ?2)", vec![n, e])),
        1 => (name(), email()).prop_map(|(n, e)| stmt(
            "INSERT OR REPLACE INTO users (username, email) VALUES (?1, ?2)", vec![n, e])),
        4 => (user_id(), amount()).prop_map(|(u, a)| stmt(INSERT_ORDER, vec![u, a])),
        3 => (amount(), order_id()).prop_map(|(a, o)| stmt(
            "UPDATE orders SET amount = ?1 WHERE order_id = ?2", vec![a, o])),
        1 => user_id().prop_map(|u| stmt(
            "UPDATE orders SET amount = amount + 1 WHERE user_id = ?1", vec![u])),
        2 => (email(), user_id()).prop_map(|(e, u)| stmt(
            "UPDATE users SET email = ?1 WHERE user_id = ?2", vec![e, u])),
        1 => (email(), user_id()).prop_map(|(e, u)| stmt(
            "UPDATE OR ROLLBACK users SET email = ?1 WHERE user_id = ?2", vec![e, u])),
        2 => user_id().prop_map(|u| stmt("DELETE FROM orders WHERE user_id = ?1", vec![u])),
        2 => user_id().prop_map(|u| stmt("DELETE FROM users WHERE user_id = ?1", vec![u])),
        1 => email().prop_map(|e| stmt(INSERT_USER, vec![SqlValue::Null, e])),
        1 => user_id().prop_map(|u| stmt("INSRT INTO users VALUES (?1)", vec![u])),
        1 => (name(), user_id()).prop_map(|(n, u)| stmt(
            "UPDATE users SET nickname = ?1 WHERE user_id = ?2", vec![n, u])),
        1 => name().prop_map(|n| stmt(INSERT_USER, vec![n])),
        1 => Just(stmt("SELECT COUNT(*) FROM users", vec![])),
    ]
}

/// A write that changes nothing but runs about 200,000 virtual-machine operations: committed
/// (no rows) when nothing limits it, interrupted by a [`HEAVY_FLUSH_BUDGET`] guard.
const HEAVY_SQL: &str = "INSERT INTO users (username, email) SELECT 'never', 'never@x' FROM \
    (WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 40000) \
    SELECT x FROM c) WHERE x < 0";

/// The progress handler's period in the heavy flushes: a meter read every 10 operations.
const HEAVY_PERIOD_OPS: i32 = 10;
/// The budget of the heavy flushes, in meter reads of the progress handler (1 instruction
/// each): the ops of one flush (at most 30, each a few hundred operations) stay far below it,
/// a heavy op alone needs about 20,000 reads, far above its limit of twice this.
const HEAVY_FLUSH_BUDGET: u64 = 5_000;

fn is_heavy(op: &WriteOp) -> bool {
    matches!(op, WriteOp::Single(statement) if statement.sql == HEAVY_SQL)
}

fn write_op() -> impl Strategy<Value = WriteOp> {
    prop_oneof![
        12 => statement().prop_map(WriteOp::Single),
        4 => prop::collection::vec(statement(), 1..4).prop_map(WriteOp::Unit),
        2 => Just(WriteOp::Unit(Vec::new())),
        1 => Just(WriteOp::single(HEAVY_SQL, vec![])),
    ]
}

#[derive(Clone, Debug)]
enum Action {
    /// Submit an op at the current time.
    Submit(WriteOp),
    /// Submit a run of user inserts of one SQL text (which flushes coalesce), some failing.
    SubmitRun(Vec<WriteOp>),
    /// Flush with a `CountingMeter` advancing by `step` per read.
    Flush { step: u64 },
    /// Flush with a meter that charges 1 per progress-handler read (every 10 operations of a
    /// running statement) and nothing else, under [`HEAVY_FLUSH_BUDGET`].
    HeavyFlush,
    /// Flush while a transaction is open on the connection: `BEGIN` fails.
    FlushInsideTransaction,
    /// `save` to bytes and `restore`, as across a canister upgrade.
    Upgrade,
    /// Let time pass.
    Tick(u64),
}

fn action() -> impl Strategy<Value = Action> {
    prop_oneof![
        12 => write_op().prop_map(Action::Submit),
        2 => prop::collection::vec(
            (prop_oneof![6 => name(), 1 => Just(SqlValue::Null)], email()),
            2..30,
        )
        .prop_map(|rows| Action::SubmitRun(
            rows.into_iter()
                .map(|(n, e)| WriteOp::single(INSERT_USER, vec![n, e]))
                .collect()
        )),
        3 => (0..300u64).prop_map(|step| Action::Flush { step }),
        1 => Just(Action::HeavyFlush),
        1 => Just(Action::FlushInsideTransaction),
        1 => Just(Action::Upgrade),
        2 => (0..2_000u64).prop_map(Action::Tick),
    ]
}

fn queue_config() -> impl Strategy<Value = Config> {
    (
        1..30usize,
        1..30usize,
        1..1_500u64,
        0..3_000u64,
        prop_oneof![Just(10_000usize), 0..8usize],
        prop_oneof![Just(0usize), Just(1), 2..9usize, Just(128)],
    )
        .prop_map(
            |(a, b, budget, delay, outcome_capacity, coalesce_rows)| Config {
                flush_size: a.min(b),
                max_pending: a.max(b),
                max_pending_bytes: 1 << 20,
                max_delay_ns: delay,
                flush_instruction_budget: budget,
                outcome_capacity,
                history_capacity: 10_000,
                coalesce_rows,
            },
        )
}

/// Ops a flush of `pending` ops runs with a `CountingMeter::new(step)`, and the instructions it
/// reports.
fn expected_budget_use(pending: usize, budget: u64, step: u64) -> (usize, u64) {
    if pending == 0 {
        return (0, 0);
    }
    let allowed = if step == 0 {
        pending
    } else {
        usize::try_from(budget.div_ceil(step))
            .unwrap_or(usize::MAX)
            .max(1)
    };
    let executed = pending.min(allowed);
    // Reads: start, before each op after the first, one more if the budget stopped the flush,
    // and after COMMIT.
    let reads_after_start = executed as u64 + u64::from(executed < pending);
    (executed, reads_after_start * step)
}

/// The reference: ops executed alone, in autocommit mode, in queue order.
struct Model {
    conn: rusqlite::Connection,
    pending: VecDeque<(Ticket, u64, WriteOp)>,
    next_ticket: Ticket,
    /// Outcomes of flushed ops, in flush (= ticket) order.
    flushed: Vec<(Ticket, Outcome)>,
    stats: Stats,
}

impl Model {
    fn expected_status(&self, config: &Config, ticket: Ticket) -> OpStatus {
        if ticket == 0 || ticket >= self.next_ticket {
            return OpStatus::Unknown;
        }
        if self.pending.iter().any(|(t, _, _)| *t == ticket) {
            return OpStatus::Pending;
        }
        let position = self
            .flushed
            .iter()
            .position(|(t, _)| *t == ticket)
            .expect("an issued ticket is pending or flushed");
        if self.flushed.len() - position <= config.outcome_capacity {
            OpStatus::Done(self.flushed[position].1.clone())
        } else {
            OpStatus::Evicted {
                committed: Some(self.flushed[position].1.is_committed()),
            }
        }
    }
}

fn check_flush(
    queue: &mut BatchQueue,
    conn: &rusqlite::Connection,
    model: &mut Model,
    step: u64,
) -> Result<(), TestCaseError> {
    let config = queue.config().clone();
    let meter = CountingMeter::new(step);
    let report = queue
        .flush(conn, &meter)
        .map_err(|error| TestCaseError::fail(format!("flush failed: {error}")))?;
    prop_assert!(report.coalesced <= report.committed);
    if config.coalesce_rows < 2 {
        prop_assert_eq!(report.coalesced, 0);
    }
    let (executed, instructions) = if config.coalesce_rows >= 2 {
        // A chunk reads the meter once for all its ops: how many ops fit in the budget
        // depends on the chunks. Whatever ran must be a prefix, match the reference op by op,
        // and respect the budget's bounds.
        let pending = model.pending.len();
        prop_assert!(report.executed <= pending);
        prop_assert_eq!(report.executed == 0, pending == 0);
        if step == 0 {
            prop_assert_eq!(report.executed, pending);
            prop_assert_eq!(report.instructions, 0);
        } else if pending > 0 {
            prop_assert_eq!(report.instructions % step, 0);
            // At most one read per op after the first, one to stop, plus one per chunk that
            // kept nothing; and at least the reads to start, finish and stop.
            let reads = report.instructions / step;
            prop_assert!(reads > u64::from(report.executed < pending));
        }
        (report.executed, report.instructions)
    } else {
        expected_budget_use(model.pending.len(), config.flush_instruction_budget, step)
    };
    let mut committed = 0;
    for (ticket, _, op) in model.pending.drain(..executed) {
        let outcome = execute_autocommit(&model.conn, &op);
        committed += usize::from(outcome.is_committed());
        model.flushed.push((ticket, outcome));
    }
    let remaining = model.pending.len();
    prop_assert_eq!(
        report,
        FlushReport {
            executed,
            committed,
            failed: executed - committed,
            interrupted: 0,
            coalesced: report.coalesced,
            remaining,
            more_due: remaining > 0,
            instructions,
            capped: false,
        }
    );
    if executed > 0 {
        model.stats.committed += committed as u64;
        model.stats.failed += (executed - committed) as u64;
        model.stats.flushes += 1;
        model.stats.last_flush_ops = executed as u64;
        model.stats.last_flush_instructions = instructions;
    }
    prop_assert!(conn.is_autocommit());
    prop_assert_eq!(dump(conn), dump(&model.conn));
    for (ticket, _) in &model.flushed[model.flushed.len() - executed..] {
        prop_assert_eq!(
            queue.status(*ticket),
            model.expected_status(&config, *ticket)
        );
    }
    Ok(())
}

/// A flush under the instruction guard: heavy ops are interrupted, nothing else is.
fn check_heavy_flush(
    queue: &mut BatchQueue,
    conn: &rusqlite::Connection,
    model: &mut Model,
) -> Result<(), TestCaseError> {
    let config = queue.config().clone();
    queue
        .reconfigure(Config {
            flush_instruction_budget: HEAVY_FLUSH_BUDGET,
            ..config.clone()
        })
        .expect("valid config");
    let meter = CountingMeter::with_statement_step(0, 1);
    let previous = TEST_PROGRESS_PERIOD_OPS.with(|period| period.replace(HEAVY_PERIOD_OPS));
    let result = queue.flush(conn, &meter);
    TEST_PROGRESS_PERIOD_OPS.with(|period| period.set(previous));
    queue.reconfigure(config.clone()).expect("valid config");
    let report = result.map_err(|error| TestCaseError::fail(format!("flush failed: {error}")))?;

    let mut executed = 0;
    let mut committed = 0;
    let mut interrupted = 0;
    while let Some((ticket, _, op)) = model.pending.front() {
        let ticket = *ticket;
        if is_heavy(op) {
            if executed == 0 {
                let error = format!(
                    "interrupted: the op was still running after {} instructions, alone at the start of a flush (2 × flush_instruction_budget), and was rolled back",
                    2 * HEAVY_FLUSH_BUDGET
                );
                model.stats.last_error = Some(format!("ticket {ticket}: {error}"));
                model.flushed.push((
                    ticket,
                    Outcome::Failed(OpError {
                        code: rusqlite::ffi::SQLITE_INTERRUPT,
                        message: error,
                    }),
                ));
                model.pending.pop_front();
                executed += 1;
                interrupted += 1;
            }
            // The guard used at least the budget: nothing starts after a heavy op.
            break;
        }
        let (_, _, op) = model.pending.pop_front().expect("front exists");
        let outcome = execute_autocommit(&model.conn, &op);
        committed += usize::from(outcome.is_committed());
        model.flushed.push((ticket, outcome));
        executed += 1;
    }
    let remaining = model.pending.len();
    prop_assert_eq!(
        report,
        FlushReport {
            executed,
            committed,
            failed: executed - committed,
            interrupted,
            coalesced: report.coalesced,
            remaining,
            more_due: remaining > 0,
            instructions: report.instructions,
            capped: false,
        }
    );
    if executed > 0 {
        model.stats.committed += committed as u64;
        model.stats.failed += (executed - committed) as u64;
        model.stats.interrupted += interrupted as u64;
        model.stats.flushes += 1;
        model.stats.last_flush_ops = executed as u64;
        model.stats.last_flush_instructions = report.instructions;
    }
    prop_assert!(conn.is_autocommit());
    prop_assert_eq!(dump(conn), dump(&model.conn));
    for (ticket, _) in &model.flushed[model.flushed.len() - executed..] {
        prop_assert_eq!(
            queue.status(*ticket),
            model.expected_status(&config, *ticket)
        );
    }
    Ok(())
}

/// Submits `op` to the queue and the model, checking the result.
fn submit(
    queue: &mut BatchQueue,
    model: &mut Model,
    config: &Config,
    op: WriteOp,
    now: u64,
) -> Result<(), TestCaseError> {
    let result = queue.submit(op.clone(), now);
    if model.pending.len() >= config.max_pending {
        prop_assert_eq!(
            result,
            Err(SubmitError::QueueFull {
                capacity: config.max_pending
            })
        );
        model.stats.rejected += 1;
    } else if matches!(&op, WriteOp::Unit(statements) if statements.is_empty()) {
        prop_assert_eq!(result, Err(SubmitError::EmptyUnit));
        model.stats.rejected += 1;
    } else {
        let ticket = model.next_ticket;
        model.next_ticket += 1;
        model.pending.push_back((ticket, now, op));
        model.stats.submitted += 1;
        prop_assert_eq!(
            result,
            Ok(Submitted {
                ticket,
                flush_due: model.pending.len() >= config.flush_size
            })
        );
        prop_assert_eq!(queue.status(ticket), OpStatus::Pending);
    }
    Ok(())
}

fn run(config: Config, actions: Vec<Action>) -> Result<(), TestCaseError> {
    let conn = open_db();
    let clock = ManualClock::new(1_000_000);
    let mut queue = BatchQueue::new(config.clone()).expect("valid config");
    let mut model = Model {
        conn: open_db(),
        pending: VecDeque::new(),
        next_ticket: 1,
        flushed: Vec::new(),
        stats: Stats::default(),
    };
    for action in actions {
        match action {
            Action::Submit(op) => submit(&mut queue, &mut model, &config, op, clock.now_ns())?,
            Action::SubmitRun(ops) => {
                for op in ops {
                    submit(&mut queue, &mut model, &config, op, clock.now_ns())?;
                }
            }
            Action::Flush { step } => check_flush(&mut queue, &conn, &mut model, step)?,
            Action::HeavyFlush => check_heavy_flush(&mut queue, &conn, &mut model)?,
            Action::FlushInsideTransaction => {
                let before = queue.to_state();
                conn.execute_batch("BEGIN").expect("begin");
                let result = queue.flush(&conn, &CountingMeter::new(1));
                conn.execute_batch("ROLLBACK").expect("rollback");
                if model.pending.is_empty() {
                    prop_assert_eq!(result.ok(), Some(FlushReport::default()));
                } else {
                    prop_assert!(matches!(result, Err(FlushError::Begin(_))));
                    model.stats.flush_errors += 1;
                    model.stats.last_error = Some(
                        "BEGIN failed: cannot start a transaction within a transaction".into(),
                    );
                }
                let after = queue.to_state();
                prop_assert_eq!(&after.pending, &before.pending);
                prop_assert_eq!(&after.outcomes, &before.outcomes);
                prop_assert_eq!(dump(&conn), dump(&model.conn));
            }
            Action::Upgrade => {
                let state = queue.to_state();
                let bytes = queue.save(Vec::new()).expect("save");
                queue = BatchQueue::restore(&bytes).expect("restore");
                prop_assert_eq!(queue.config(), &config);
                prop_assert_eq!(queue.to_state(), state);
            }
            Action::Tick(delta) => clock.advance(delta),
        }
        // Invariants after every action.
        let now = clock.now_ns();
        let expected_due = model.pending.front().map(|(_, enqueued, _)| {
            if model.pending.len() >= config.flush_size {
                now
            } else {
                enqueued + config.max_delay_ns
            }
        });
        prop_assert_eq!(queue.next_due(now), expected_due);
        prop_assert_eq!(queue.len(), model.pending.len());
        prop_assert_eq!(
            queue.stats(),
            Stats {
                pending: model.pending.len() as u64,
                ..model.stats.clone()
            }
        );
    }
    // Drain whatever is left, with budgets as small as they get: every flush makes progress.
    while !model.pending.is_empty() {
        check_flush(&mut queue, &conn, &mut model, 1_000)?;
    }
    prop_assert_eq!(dump(&conn), dump(&model.conn));
    for ticket in 0..=model.next_ticket {
        prop_assert_eq!(queue.status(ticket), model.expected_status(&config, ticket));
    }
    prop_assert_eq!(
        queue.stats(),
        Stats {
            pending: 0,
            ..model.stats.clone()
        }
    );
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    #[test]
    fn batched_execution_matches_autocommit_execution(
        config in queue_config(),
        actions in prop::collection::vec(action(), 0..80),
    ) {
        run(config, actions)?;
    }
}
