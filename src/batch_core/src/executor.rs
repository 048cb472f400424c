//! The executor: runs ops against a connection, in one transaction ([`execute_batch`],
//! [`execute_batch_within`], and [`BatchQueue::flush`](crate::BatchQueue::flush) through the
//! same code) or alone in autocommit mode ([`execute_autocommit`],
//! [`execute_autocommit_within`]). The per-op semantics are documented on [`execute_batch`];
//! the instruction guard on [`execute_batch_within`].

use std::borrow::Cow;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use rusqlite::{CachedStatement, Connection, ErrorCode, ffi};

use crate::config::DEFAULT_COALESCE_ROWS;
use crate::connection_state::{self, OpScope};
use crate::meter::{Budget, InstructionMeter};
use crate::op::{OpError, Outcome, Statement, WriteOp};
use crate::queue::MAX_ERROR_BYTES;
use batch_types::reply;

mod coalesce;
#[cfg(test)]
mod tests;

pub(crate) use coalesce::CoalesceCache;
use coalesce::{ChunkEnd, Coalescer};

/// Error text of a unit without statements.
pub(crate) const EMPTY_UNIT_ERROR: &str = "unit has no statements";

/// Error text of a statement that is empty, read-only or transaction control.
pub(crate) const NOT_A_WRITE_ERROR: &str = "not a write statement: empty, read-only (SELECT) and transaction control (BEGIN, COMMIT, ROLLBACK, SAVEPOINT, RELEASE) statements cannot be batched";

/// Names the reserved prefix (the transaction's name is ignored), so that no op can send this
/// text and reuse the statement the connection's cache holds compiled (see `connection_state`).
const BEGIN: &str = "BEGIN IMMEDIATE TRANSACTION batch_core_batch";
const COMMIT: &str = "COMMIT";
const ROLLBACK: &str = "ROLLBACK";
const SAVEPOINT: &str = "SAVEPOINT batch_core_unit";
const RELEASE: &str = "RELEASE batch_core_unit";
const ROLLBACK_TO: &str = "ROLLBACK TO batch_core_unit";

/// SQLite virtual-machine operations between two reads of the meter by the progress handler.
/// A statement overshoots its limit by at most this many operations (plus the cost of the
/// slowest single operation: a sort or a table clear runs inside one).
pub const PROGRESS_PERIOD_OPS: i32 = 1_000;

#[cfg(test)]
thread_local! {
    /// Tests shorten the period so that a heavy statement needs fewer operations.
    pub(crate) static TEST_PROGRESS_PERIOD_OPS: std::cell::Cell<i32> =
        const { std::cell::Cell::new(PROGRESS_PERIOD_OPS) };
}

fn progress_period_ops() -> i32 {
    #[cfg(test)]
    return TEST_PROGRESS_PERIOD_OPS.with(std::cell::Cell::get);
    #[cfg(not(test))]
    PROGRESS_PERIOD_OPS
}

/// Why a whole batch could not be executed. The transaction was rolled back: none of the ops
/// took effect, and a [`BatchQueue`](crate::BatchQueue) keeps all of them queued.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FlushError {
    /// `BEGIN` failed, for example because a transaction is already open on the connection or
    /// the database is read-only. Nothing was executed (an already open transaction is left
    /// alone).
    #[error("BEGIN failed: {0}")]
    Begin(#[source] rusqlite::Error),
    /// `COMMIT` failed, for example on a deferred foreign-key violation or an I/O error. The
    /// transaction was rolled back. [`BatchQueue::flush`](crate::BatchQueue::flush) isolates
    /// the op that makes `COMMIT` fail by halving its next flushes (see there).
    #[error("COMMIT failed: {0}")]
    Commit(#[source] rusqlite::Error),
    /// The instruction guard (SQLite's progress handler) or the authorizer that refuses
    /// statements changing the connection could not be installed on the connection (rusqlite
    /// does not own it). Nothing was executed.
    #[error("installing the instruction guard failed: {0}")]
    Guard(#[source] rusqlite::Error),
    /// The statements run inside the transaction just before `COMMIT` (a keyed batch's record,
    /// see [`Deduplicator`](crate::Deduplicator)) failed. The transaction was rolled back.
    #[error("recording the batch before COMMIT failed: {0}")]
    BeforeCommit(#[source] rusqlite::Error),
}

/// Statements a caller runs inside a batch's transaction after its ops (and after any
/// re-application), just before `COMMIT`, given the outcomes of the ops executed so far. An
/// error rolls the whole transaction back ([`FlushError::BeforeCommit`]).
pub(crate) type BeforeCommit<'h> =
    &'h mut dyn FnMut(&Connection, &[Outcome]) -> rusqlite::Result<()>;

/// Executes `ops` in ONE transaction (`BEGIN IMMEDIATE` ... `COMMIT`), with the same executor as
/// [`BatchQueue::flush`](crate::BatchQueue::flush) but without an instruction budget, and
/// returns one outcome per op, in order. In a canister use [`execute_batch_within`]: without a
/// budget, an op that does not finish makes the message trap.
///
/// Per op:
/// - [`WriteOp::Single`]: the statement is prepared once per batch, bound, and stepped to
///   completion (rows of `RETURNING` are discarded). If it fails, SQLite has already undone it
///   (statement-level atomicity with the default `ABORT` conflict resolution): the other ops
///   keep their effects and nothing is re-executed.
/// - [`WriteOp::Unit`]: `SAVEPOINT batch_core_unit`, the statements, `RELEASE`. On the first
///   failing statement: `ROLLBACK TO` + `RELEASE`, and the unit fails as a whole with the
///   statement's index in its error (`statement 2: ...`).
/// - If an error ends the whole transaction (the connection is back in autocommit mode after
///   `ON CONFLICT ROLLBACK`, `RAISE(ROLLBACK)`, an interrupt or an I/O error; after
///   `SQLITE_FULL`, `SQLITE_IOERR`, `SQLITE_NOMEM`, `SQLITE_BUSY` or `SQLITE_INTERRUPT` it is
///   rolled back explicitly, since SQLite may have left it half-done), the earlier ops were
///   undone with it: the executor begins again, re-applies exactly the earlier ops that had
///   committed (their outcomes are re-recorded), marks the failing op failed without running it
///   again, and continues. Each restart fails one more op, so n ops restart at most n times.
///
/// An empty `ops` returns an empty vector without touching the connection. The connection must
/// be in autocommit mode (no open transaction), otherwise the result is [`FlushError::Begin`];
/// [`FlushError::Commit`] means the transaction was rolled back and no op took effect.
///
/// Cost: one transaction (one journal and page write-out at `COMMIT`) plus the statements.
pub fn execute_batch(conn: &Connection, ops: &[WriteOp]) -> Result<Vec<Outcome>, FlushError> {
    if ops.is_empty() {
        return Ok(Vec::new());
    }
    let batch = Batch::<fn() -> u64, _> {
        conn,
        len: ops.len(),
        op_at: |i| &ops[i],
        metered: None,
        on_interrupt: OnInterrupt::Fail,
        coalesce_rows: DEFAULT_COALESCE_ROWS,
        max_error_bytes: reply::max_error_bytes(ops.len()),
    };
    let run = run_batch_then(batch, &mut CoalesceCache::default(), None)?;
    Ok(run.outcomes)
}

/// [`execute_batch`] within an instruction budget: what a canister calls for a client's batch.
///
/// - Ops start only while the batch has used fewer than `budget.instructions`; the ops after
///   that are [`Outcome::NotExecuted`]: they did not run, and a client may send them again.
/// - The running op is interrupted (SQLite's progress handler reads the meter every
///   [`PROGRESS_PERIOD_OPS`] virtual-machine operations) once the batch has used
///   [`budget.op_limit()`](Budget::op_limit) instructions. An interrupt rolls back the whole
///   transaction in SQLite, so the earlier ops are re-applied (as after any lost transaction)
///   and the interrupted op fails with `SQLITE_INTERRUPT` and "interrupted: ...". Nothing of it
///   is committed; the other ops are unaffected.
/// - The re-application runs within [`budget.flush_limit()`](Budget::flush_limit), counted from
///   the batch's start: a re-applied op still running there (its cost varies) is interrupted
///   too and fails the same way, having committed nothing.
///
/// So the batch uses at most `flush_limit` (`3 × budget.instructions`) on ops, plus what a
/// statement runs between two reads of the meter, rollback and `COMMIT`, whatever the ops.
/// Keep that under the message's instruction limit.
///
/// Every failure's text is cut to the batch's share of one reply
/// (`batch_types::reply::max_error_bytes(ops.len())`: 1 KiB up to 1,997 ops, 185 bytes at
/// 10,000), so that the outcomes of any batch of up to 10,000 ops fit the 2 MiB an Internet
/// Computer reply may hold, in every reply format of the library (`batch_types::reply`).
pub fn execute_batch_within<M: InstructionMeter>(
    conn: &Connection,
    ops: &[WriteOp],
    budget: &Budget<M>,
) -> Result<Vec<Outcome>, FlushError> {
    execute_batch_within_then(conn, ops, budget, None)
}

/// [`execute_batch_within`], running `before_commit` inside the transaction just before
/// `COMMIT` with the outcomes of the executed ops (the ops the budget did not reach come after
/// them, each [`Outcome::NotExecuted`]). An empty `ops` runs nothing, `before_commit` included.
pub(crate) fn execute_batch_within_then<M: InstructionMeter>(
    conn: &Connection,
    ops: &[WriteOp],
    budget: &Budget<M>,
    before_commit: Option<BeforeCommit<'_>>,
) -> Result<Vec<Outcome>, FlushError> {
    if ops.is_empty() {
        return Ok(Vec::new());
    }
    let start = budget.meter.instructions();
    let batch = Batch {
        conn,
        len: ops.len(),
        op_at: |i| &ops[i],
        metered: Some((budget, start)),
        on_interrupt: OnInterrupt::Fail,
        coalesce_rows: DEFAULT_COALESCE_ROWS,
        max_error_bytes: reply::max_error_bytes(ops.len()),
    };
    let run = run_batch_then(batch, &mut CoalesceCache::default(), before_commit)?;
    let mut outcomes = run.outcomes;
    outcomes.resize(ops.len(), Outcome::NotExecuted);
    Ok(outcomes)
}

/// Executes one op alone, in autocommit mode: the unbatched path, and the reference that batched
/// execution is tested against.
///
/// A [`WriteOp::Single`] runs in SQLite's implicit per-statement transaction; a [`WriteOp::Unit`]
/// in its own transaction (its `SAVEPOINT` starts it and `RELEASE` commits it). If the caller has
/// a transaction open, the op joins it instead. Errors, including a failed commit, are reported
/// as [`Outcome::Failed`], their text cut to [`MAX_ERROR_BYTES`] as every outcome's. In a canister use [`execute_autocommit_within`].
pub fn execute_autocommit(conn: &Connection, op: &WriteOp) -> Outcome {
    if let Err(error) = connection_state::ensure_guarded(conn) {
        return guard_failed(&error);
    }
    let mut outcome = execute_op(&mut Statements::new(conn), op, Mode::Autocommit, None).outcome;
    outcome.truncate_message(MAX_ERROR_BYTES);
    outcome
}

fn guard_failed(error: &rusqlite::Error) -> Outcome {
    Outcome::Failed(OpError {
        code: error_code(error),
        message: format!("installing the instruction guard failed: {error}"),
    })
}

/// [`execute_autocommit`] within an instruction budget: the op is interrupted once it has used
/// `budget.instructions` (read by SQLite's progress handler every [`PROGRESS_PERIOD_OPS`]
/// virtual-machine operations). An interrupted op is rolled back by SQLite and fails with
/// [`SQLITE_INTERRUPT`](ffi::SQLITE_INTERRUPT) and "interrupted: ...".
pub fn execute_autocommit_within<M: InstructionMeter>(
    conn: &Connection,
    op: &WriteOp,
    budget: &Budget<M>,
) -> Outcome {
    let guard = match connection_state::ensure_guarded(conn)
        .and_then(|()| Guard::install(conn, &budget.meter))
    {
        Ok(guard) => guard,
        Err(error) => return guard_failed(&error),
    };
    guard.arm(
        budget
            .meter
            .instructions()
            .saturating_add(budget.instructions),
    );
    let run = execute_op(
        &mut Statements::new(conn),
        op,
        Mode::Autocommit,
        Some(&guard),
    );
    if run.interrupted {
        return interrupted(format!(
            "interrupted: the op was still running after its limit of {} instructions and was rolled back",
            budget.instructions
        ));
    }
    let mut outcome = run.outcome;
    outcome.truncate_message(MAX_ERROR_BYTES);
    outcome
}

fn interrupted(error: String) -> Outcome {
    Outcome::Failed(OpError {
        code: ffi::SQLITE_INTERRUPT,
        message: error,
    })
}

/// The most distinct SQL texts one batch keeps prepared; further texts go through the
/// connection's statement cache per op.
const MAX_HELD_STATEMENTS: usize = 16;

/// The prepared statements of one batch, looked up by SQL text.
///
/// A batch usually repeats a handful of SQL texts thousands of times. rusqlite's
/// `prepare_cached` hashes the text and moves the statement out of and back into its LRU cache on
/// every call, which measured about 4,000 instructions per op in the canister (15% of an indexed
/// INSERT inside a transaction). Holding each distinct statement for the whole batch and finding
/// it by comparing texts costs a few dozen. The statements go back to the connection's cache when
/// the batch ends. Reset statements do not block `COMMIT` or `ROLLBACK`.
struct Statements<'c> {
    conn: &'c Connection,
    held: Vec<(Cow<'static, str>, CachedStatement<'c>)>,
}

impl<'c> Statements<'c> {
    fn new(conn: &'c Connection) -> Self {
        Statements {
            conn,
            held: Vec::new(),
        }
    }

    /// Runs `statement` to completion with the batch's prepared statement for its text. A
    /// statement the authorizer refused (it would change the connection) fails as
    /// [`StatementError::Refused`].
    fn run(&mut self, statement: &Statement) -> Result<u64, StatementError> {
        match self.run_unchecked(statement) {
            Err(StatementError::Sqlite(error)) => Err(match connection_state::take_refusal() {
                Some(reason) => StatementError::Refused(reason),
                None => StatementError::Sqlite(error),
            }),
            other => other,
        }
    }

    fn run_unchecked(&mut self, statement: &Statement) -> Result<u64, StatementError> {
        let conn = self.conn;
        if let Some(i) = self
            .held
            .iter()
            .position(|(sql, _)| coalesce::same_text(sql, &statement.sql))
        {
            return run_prepared(conn, &mut self.held[i].1, statement);
        }
        let mut prepared = connection_state::prepare_op(conn, &statement.sql)?;
        let result = run_prepared(conn, &mut prepared, statement);
        if self.held.len() < MAX_HELD_STATEMENTS {
            self.held.push((statement.sql.clone(), prepared));
        }
        result
    }
}

/// The instruction guard: SQLite's progress handler, installed on the connection for one
/// execution, interrupting the running statement once the meter reaches the armed deadline.
///
/// The handler outlives any borrow (rusqlite requires `'static`), so it owns a clone of the
/// meter and shares the deadline through an `Arc`. Dropping the guard removes the handler.
struct Guard<'c> {
    conn: &'c Connection,
    state: Arc<GuardState>,
}

#[derive(Debug)]
struct GuardState {
    /// Meter value at which the running statement is interrupted (`u64::MAX`: never).
    deadline: AtomicU64,
    /// Set when the handler interrupted a statement since the last `arm`.
    tripped: AtomicBool,
}

impl<'c> Guard<'c> {
    fn install<M: InstructionMeter>(conn: &'c Connection, meter: &M) -> rusqlite::Result<Self> {
        let state = Arc::new(GuardState {
            deadline: AtomicU64::new(u64::MAX),
            tripped: AtomicBool::new(false),
        });
        let handler_state = Arc::clone(&state);
        let meter = meter.clone();
        conn.progress_handler(
            progress_period_ops(),
            Some(move || {
                let deadline = handler_state.deadline.load(Ordering::Relaxed);
                if deadline != u64::MAX && meter.instructions_while_running() >= deadline {
                    handler_state.tripped.store(true, Ordering::Relaxed);
                    true
                } else {
                    false
                }
            }),
        )?;
        Ok(Guard { conn, state })
    }

    /// Interrupts any statement still running when the meter reaches `deadline`.
    fn arm(&self, deadline: u64) {
        self.state.tripped.store(false, Ordering::Relaxed);
        self.state.deadline.store(deadline, Ordering::Relaxed);
    }

    /// Lets every statement run to completion (`BEGIN`, `COMMIT`, `ROLLBACK`).
    fn disarm(&self) {
        self.state.deadline.store(u64::MAX, Ordering::Relaxed);
    }

    fn tripped(&self) -> bool {
        self.state.tripped.load(Ordering::Relaxed)
    }
}

impl Drop for Guard<'_> {
    fn drop(&mut self) {
        // Removing a handler only fails on a connection rusqlite does not own, where installing
        // it failed first.
        let _ = self.conn.progress_handler(0, None::<fn() -> bool>);
    }
}

/// What [`run_batch`] does with an op its guard interrupted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum OnInterrupt {
    /// Fail it (a client's batch; and the queue's first op, which ran with the whole budget).
    Fail,
    /// Leave it and the ops after it unexecuted, unless it is the first op (the queue: it gets
    /// the whole budget at the start of the next flush).
    LeavePending,
}

/// What [`run_batch`] executed.
#[derive(Debug, Default)]
pub(crate) struct BatchRun {
    /// Outcomes of the executed prefix of the ops.
    pub(crate) outcomes: Vec<Outcome>,
    /// Ops of the prefix that failed because the guard interrupted them.
    pub(crate) interrupted: usize,
    /// An op after the first was interrupted and left unexecuted ([`OnInterrupt::LeavePending`]).
    pub(crate) left_after_interrupt: bool,
    /// Ops of the prefix that committed as rows of multi-row INSERTs (statement coalescing).
    pub(crate) coalesced: usize,
    /// The flush reached its total limit ([`Budget::flush_limit`]) after a restart, with
    /// [`OnInterrupt::LeavePending`]: the transaction was rolled back and nothing executed
    /// (`outcomes` is empty). The number is how many ops had been admitted (at least 1): a
    /// flush of fewer ops needs less re-application.
    pub(crate) capped: Option<usize>,
}

impl BatchRun {
    /// The result of an execution that reached its limit in a restart ([`BatchRun::capped`]),
    /// after admitting the ops of `run` (at least one).
    fn capped(run: &BatchRun) -> Self {
        BatchRun {
            capped: Some(run.outcomes.len().max(1)),
            ..BatchRun::default()
        }
    }

    /// Forgets the outcomes from position `at` on (their ops will be admitted again), with the
    /// interruptions counted among them.
    fn truncate(&mut self, at: usize) {
        if at < self.outcomes.len() {
            let dropped = self.outcomes[at..]
                .iter()
                .filter(|o| o.code() == Some(ffi::SQLITE_INTERRUPT))
                .count();
            self.interrupted -= dropped;
            self.outcomes.truncate(at);
        }
    }
}

/// Runs a prefix of the ops `0..len` in one transaction and commits it.
///
/// Without a budget the prefix is all ops and nothing is interrupted. With one (and the meter's
/// reading `start`, taken by the caller before `BEGIN`): op `i > 0` starts only while fewer than
/// `budget.instructions` have been used since `start` (one read before each op or chunk after
/// the first), so at least one op runs; and the guard interrupts the running statement once the
/// execution has used `budget.op_limit()` since `start`, except while a restart re-applies the
/// ops that had committed: that runs until [`budget.flush_limit()`](Budget::flush_limit) since
/// `start` (no deadline counted from the restart, so the whole execution stays within
/// `flush_limit` whatever the ops cost the second time). An interrupted op is failed or left per
/// `on_interrupt`; with [`OnInterrupt::LeavePending`], an interrupt of the re-application ends
/// the execution without effect ([`BatchRun::capped`]): re-applying again would pass the limit,
/// and failing a re-applied op would be false (it committed, and was only undone with the
/// transaction).
///
/// Consecutive single-row INSERTs of one shape run as chunks of up to `coalesce_rows` rows
/// (see the `coalesce` module). An interrupted chunk's ops are all failed
/// ([`OnInterrupt::Fail`]) or left ([`OnInterrupt::LeavePending`]; the queue's first op never
/// runs in a chunk, so that an interrupt there blames that op alone).
///
/// On `Err` the transaction is rolled back and no op took effect.
pub(crate) fn run_batch<'a, M: InstructionMeter>(
    conn: &Connection,
    len: usize,
    op_at: impl Fn(usize) -> &'a WriteOp,
    metered: Option<(&Budget<M>, u64)>,
    on_interrupt: OnInterrupt,
    coalesce_rows: usize,
    cache: &mut CoalesceCache,
) -> Result<BatchRun, FlushError> {
    let batch = Batch {
        conn,
        len,
        op_at,
        metered,
        on_interrupt,
        coalesce_rows,
        max_error_bytes: MAX_ERROR_BYTES,
    };
    run_batch_then(batch, cache, None)
}

/// What one execution of [`run_batch`] runs and by which rules, as its caller gives them: the
/// ops `0..len` (`op_at(i)` is op `i`), the budget with the meter's reading taken before `BEGIN`
/// (`None`: unmetered), what an interrupt does to an op, and the most rows of a coalesced INSERT.
struct Batch<'c, 'b, M, F> {
    conn: &'c Connection,
    len: usize,
    op_at: F,
    metered: Option<(&'b Budget<M>, u64)>,
    on_interrupt: OnInterrupt,
    coalesce_rows: usize,
    /// The longest error text an outcome keeps: the queue's [`MAX_ERROR_BYTES`], or a client
    /// batch's share of its reply (`batch_types::reply::max_error_bytes`).
    max_error_bytes: usize,
}

/// [`run_batch`], running `before_commit` (if any) just before `COMMIT`, with the guard
/// disarmed, on the outcomes of the executed prefix.
///
/// The execution is a small state machine of attempts, each in its own transaction
/// ([`Attempt`]): `BEGIN`, then the replay phase ([`Execution::replay`]: a restart re-applies
/// the ops that had committed), then the admission phase ([`Execution::admit`]: new ops, within
/// the budget), then the commit phase ([`commit`]). A phase that loses the transaction (or rolls
/// it back to run a chunk's ops alone) returns [`Step::Restart`], and a new attempt begins with
/// what the execution knows by then; a replay that reaches the limit returns [`Step::Capped`].
fn run_batch_then<'a, M: InstructionMeter>(
    batch: Batch<'_, '_, M, impl Fn(usize) -> &'a WriteOp>,
    cache: &mut CoalesceCache,
    before_commit: Option<BeforeCommit<'_>>,
) -> Result<BatchRun, FlushError> {
    let Batch {
        conn,
        len,
        op_at,
        metered,
        on_interrupt,
        coalesce_rows,
        max_error_bytes,
    } = batch;
    let (budget, start) = match metered {
        Some((budget, start)) => (Some(budget), Some(start)),
        None => (None, None),
    };
    connection_state::ensure_guarded(conn).map_err(FlushError::Guard)?;
    let guard = match budget {
        Some(b) => Some(Guard::install(conn, &b.meter).map_err(FlushError::Guard)?),
        None => None,
    };
    let mut run = BatchRun::default();
    let mut statements = Statements::new(conn);
    let mut coalescer = Coalescer::new(conn, coalesce_rows, cache);
    coalescer.ran_other(None, true);
    let mut execution = Execution {
        op_at: &op_at,
        budget,
        start,
        on_interrupt,
        guard: &guard,
        statements: &mut statements,
        run: &mut run,
        len,
        alone_until: 0,
        probe: None,
    };
    // Whether the next transaction attempt is a restart (after a lost transaction).
    let mut restarted = false;
    // Each pass is one attempt in its own transaction. Every way out of a pass other than
    // `break attempt` (`continue` after a lost transaction, a capped return, `?`, a panic) drops
    // the attempt, which rolls its transaction back.
    let attempt = loop {
        let restart = restarted;
        restarted = true;
        let mut attempt = Attempt::begin(conn, guard.as_ref(), &mut coalescer)?;
        let limit = execution.arm_replay(restart);
        // After a lost transaction: the admitted ops that had committed, re-applied first (held
        // until the attempt ends).
        let committed = execution.committed();
        let mut pass = Pass {
            attempt: &mut attempt,
            committed: &committed,
            limit,
            restart,
        };
        match execution.replay(&mut pass) {
            Step::Next => {}
            Step::Restart => continue,
            Step::Capped => return Ok(BatchRun::capped(execution.run)),
        }
        match execution.admit(&mut pass) {
            Step::Next => break attempt,
            Step::Restart => continue,
            Step::Capped => return Ok(BatchRun::capped(execution.run)),
        }
    };
    // Every message cut to the batch's share of a reply before anything records it.
    for outcome in &mut run.outcomes {
        outcome.truncate_message(max_error_bytes);
    }
    commit(conn, attempt, &run, before_commit)?;
    Ok(run)
}

/// One attempt as its phases see it.
struct Pass<'p, 'v, 'a, 'c, 'k> {
    attempt: &'p mut Attempt<'a, 'c, 'k>,
    /// The admitted ops that had committed before the attempt began.
    committed: &'v Vec<usize>,
    /// The limit of the replay, counted from the execution's start.
    limit: u64,
    /// The attempt follows a lost transaction.
    restart: bool,
}

/// Where an attempt goes after one of its phases.
enum Step {
    /// On to the attempt's next phase.
    Next,
    /// The transaction is gone (an error ended it, or it was rolled back so that a chunk's ops
    /// run alone): a new attempt begins.
    Restart,
    /// The re-application reached the execution's limit ([`BatchRun::capped`]): the execution
    /// ends without effect.
    Capped,
}

/// The state of one execution of [`run_batch_then`] that its attempts carry over from one to
/// the next, and what they all run by. The phases of an attempt are its methods.
struct Execution<'e, 'c, M, F> {
    op_at: &'e F,
    budget: Option<&'e Budget<M>>,
    /// The meter's reading taken before the first `BEGIN` (with a budget).
    start: Option<u64>,
    on_interrupt: OnInterrupt,
    guard: &'e Option<Guard<'c>>,
    statements: &'e mut Statements<'c>,
    run: &'e mut BatchRun,
    /// The ops `0..len` are to run: an op left after an interrupt ([`OnInterrupt::LeavePending`])
    /// shortens it.
    len: usize,
    /// Ops before this position run alone (after a chunk that failed without saying which op
    /// failed, or stopped at an op).
    alone_until: usize,
    /// The first op of a chunk that kept nothing, and the chunk's end: it runs alone; if it
    /// commits, the failing op was another one and the rest of the chunk runs alone too.
    probe: Option<(usize, usize)>,
}

impl<'a, 'c, M: InstructionMeter, F: Fn(usize) -> &'a WriteOp> Execution<'_, 'c, M, F> {
    /// Arms the guard for an attempt's replay and returns its limit, counted from the
    /// execution's start: [`Budget::flush_limit`] in a restart (which re-applies ops first),
    /// [`Budget::op_limit`] otherwise (0 without a budget).
    #[inline(always)]
    fn arm_replay(&self, restart: bool) -> u64 {
        let (reapply_limit, limit) = self
            .budget
            .map_or((0, 0), |b| (b.flush_limit(), b.op_limit()));
        let limit = if restart { reapply_limit } else { limit };
        if let (Some(guard), Some(start)) = (self.guard, self.start) {
            guard.arm(start.saturating_add(limit));
        }
        limit
    }

    /// The admitted ops that had committed: a restart re-applies them.
    #[inline(always)]
    fn committed(&self) -> Vec<usize> {
        (0..self.run.outcomes.len())
            .filter(|&i| self.run.outcomes[i].is_committed())
            .collect()
    }

    /// Whether the guard interrupted the last statement.
    #[inline(always)]
    fn tripped(&self) -> bool {
        self.guard.as_ref().is_some_and(Guard::tripped)
    }

    /// The replay phase: after a lost transaction, re-applies the admitted ops that had
    /// committed (`committed`, in chunks again where they form runs), within `limit`.
    ///
    /// Failed ops had no effect and keep their outcome; in particular the op whose failure
    /// ended the transaction is never executed again, so every restart fails one more op. Those
    /// outcomes hold only while the replay reaches the same states: once a replayed op does not
    /// commit again (the guard interrupted it, or a nondeterministic statement), every outcome
    /// after it was computed in a state that no longer exists, so those ops are admitted and run
    /// again (or left, or not reached, by the budget's rules).
    fn replay(&mut self, pass: &mut Pass<'_, '_, '_, 'c, '_>) -> Step {
        let Pass {
            ref mut attempt,
            committed,
            limit,
            restart,
        } = *pass;
        let on_interrupt = self.on_interrupt;
        let mut next = 0;
        while next < committed.len() {
            // As when it was admitted, the queue's first op runs alone.
            let alone = on_interrupt == OnInterrupt::LeavePending && committed[next] == 0;
            if !alone
                && let Some(chunk) = attempt
                    .coalescer
                    .plan(committed[next..].iter().copied(), self.op_at)
            {
                let chunk_run = attempt.coalescer.run(&chunk, self.op_at);
                if chunk_run.end == ChunkEnd::Complete {
                    for (&i, outcome) in chunk.positions.iter().zip(chunk_run.outcomes) {
                        self.run.outcomes[i] = outcome;
                    }
                    next += chunk.positions.len();
                    continue;
                }
                let first = chunk.positions[0];
                if self.tripped() {
                    if on_interrupt == OnInterrupt::LeavePending {
                        // Re-application happens in restarts only: the limit is reached.
                        return Step::Capped;
                    } else {
                        // The chunk's ops fail as interrupted, up to the first op between them
                        // (a failed one, whose outcome is stale now); from there on, again.
                        let gap = chunk
                            .positions
                            .iter()
                            .enumerate()
                            .find(|&(k, &i)| i != first + k)
                            .map_or(first + chunk.positions.len(), |(k, _)| first + k);
                        self.run.truncate(gap);
                        for i in first..gap {
                            self.run.interrupted += 1;
                            self.run.outcomes[i] =
                                interrupted(interrupt_error(limit, i, on_interrupt, restart));
                        }
                    }
                } else {
                    // These ops committed before in the same sequence of states: anything but
                    // the same result is unexpected, so the batch goes on op by op from the
                    // chunk.
                    attempt.coalescer.disable();
                    self.run.truncate(first);
                }
                return Step::Restart;
            }
            let i = committed[next];
            next += 1;
            if !attempt.coalescer.settle_or_roll_back() {
                return Step::Restart;
            }
            let op_run = execute_op(
                self.statements,
                (self.op_at)(i),
                Mode::Batch,
                self.guard.as_ref(),
            );
            attempt
                .coalescer
                .ran_other(Some((self.op_at)(i)), op_run.outcome.is_committed());
            if op_run.interrupted && on_interrupt == OnInterrupt::LeavePending {
                // Re-application happens in restarts only: the limit is reached. (Failing the
                // op would be false: it committed before and was only re-applied.)
                return Step::Capped;
            }
            let diverged = !op_run.outcome.is_committed();
            if diverged {
                self.run.truncate(i + 1);
            }
            self.run.outcomes[i] = op_run.outcome;
            if op_run.interrupted {
                self.run.interrupted += 1;
                self.run.outcomes[i] =
                    interrupted(interrupt_error(limit, i, on_interrupt, restart));
            }
            if op_run.transaction_lost {
                return Step::Restart;
            }
            if diverged {
                // The rest of `committed` lies past the truncation: admitted again below.
                break;
            }
        }
        Step::Next
    }

    /// The admission phase: admits and runs new ops (in chunks where they form runs) while the
    /// budget allows, within [`Budget::op_limit`], then stores a counter a stopped chunk left
    /// unstored, so that the attempt can commit.
    fn admit(&mut self, pass: &mut Pass<'_, '_, '_, 'c, '_>) -> Step {
        let Pass {
            ref mut attempt,
            restart,
            ..
        } = *pass;
        let on_interrupt = self.on_interrupt;
        let exhausted = |b: &Budget<M>, start: u64| {
            b.meter.instructions().saturating_sub(start) >= b.instructions
        };
        let limit = self.budget.map_or(0, Budget::op_limit);
        if restart && let (Some(guard), Some(start)) = (self.guard, self.start) {
            guard.arm(start.saturating_add(limit));
        }
        while self.run.outcomes.len() < self.len {
            let i = self.run.outcomes.len();
            if i > 0
                && let (Some(b), Some(start)) = (self.budget, self.start)
                && exhausted(b, start)
            {
                break;
            }
            let alone = i < self.alone_until
                || self.probe.is_some_and(|(first, _)| first == i)
                || (on_interrupt == OnInterrupt::LeavePending && i == 0);
            if !alone && let Some(chunk) = attempt.coalescer.plan(i..self.len, self.op_at) {
                let rows = chunk.positions.len();
                let chunk_run = attempt.coalescer.run(&chunk, self.op_at);
                match chunk_run.end {
                    ChunkEnd::Complete => {
                        self.run.coalesced += rows;
                        self.run.outcomes.extend(chunk_run.outcomes);
                    }
                    ChunkEnd::Stopped { kept } => {
                        self.run.coalesced += kept;
                        if chunk_run.outcomes.len() == kept {
                            // The op that stopped the statement runs alone: its own outcome.
                            self.alone_until = self.alone_until.max(i + kept + 1);
                        }
                        self.run.outcomes.extend(chunk_run.outcomes);
                    }
                    ChunkEnd::Undone => self.probe = Some((i, i + rows)),
                    ChunkEnd::Lost | ChunkEnd::Anomaly => {
                        if chunk_run.end == ChunkEnd::Anomaly {
                            attempt.coalescer.disable();
                        } else if self.tripped() {
                            if on_interrupt == OnInterrupt::LeavePending {
                                // The chunk did not start first: its ops run in the next flush.
                                self.len = i;
                                self.run.left_after_interrupt = true;
                            } else {
                                for j in i..i + rows {
                                    self.run.interrupted += 1;
                                    self.run.outcomes.push(interrupted(interrupt_error(
                                        limit,
                                        j,
                                        on_interrupt,
                                        restart,
                                    )));
                                }
                            }
                        } else {
                            self.probe = Some((i, i + rows));
                        }
                        return Step::Restart;
                    }
                }
                continue;
            }
            if !attempt.coalescer.settle_or_roll_back() {
                return Step::Restart;
            }
            let op_run = execute_op(
                self.statements,
                (self.op_at)(i),
                Mode::Batch,
                self.guard.as_ref(),
            );
            attempt
                .coalescer
                .ran_other(Some((self.op_at)(i)), op_run.outcome.is_committed());
            if op_run.interrupted {
                if on_interrupt == OnInterrupt::LeavePending && i > 0 {
                    // It did not have the whole budget: it runs first in the next flush.
                    self.len = i;
                    self.run.left_after_interrupt = true;
                } else {
                    self.run.interrupted += 1;
                    self.run.outcomes.push(interrupted(interrupt_error(
                        limit,
                        i,
                        on_interrupt,
                        restart,
                    )));
                }
                return Step::Restart;
            }
            if let Some((first, end)) = self.probe
                && first == i
            {
                self.probe = None;
                if op_run.outcome.is_committed() {
                    self.alone_until = self.alone_until.max(end);
                }
            }
            self.run.outcomes.push(op_run.outcome);
            if op_run.transaction_lost {
                return Step::Restart;
            }
        }
        // A counter a stopped chunk left unstored is stored before COMMIT.
        if !attempt.coalescer.settle_or_roll_back() {
            return Step::Restart;
        }
        Step::Next
    }
}

/// The commit phase: runs `before_commit` (if any) on `outcomes`, then `COMMIT`, with the guard
/// disarmed from here on (the caller's statements and `COMMIT` run to the end). On an error the
/// attempt is dropped, which rolls the transaction back.
#[inline(always)]
fn commit(
    conn: &Connection,
    attempt: Attempt<'_, '_, '_>,
    run: &BatchRun,
    before_commit: Option<BeforeCommit<'_>>,
) -> Result<(), FlushError> {
    attempt.disarm();
    if let Some(before_commit) = before_commit {
        before_commit(conn, &run.outcomes).map_err(FlushError::BeforeCommit)?;
    }
    attempt.commit().map_err(FlushError::Commit)
}

/// One attempt of [`run_batch_then`]: its transaction, open from `BEGIN IMMEDIATE` until
/// [`Attempt::commit`] consumes it, and rolled back when it is dropped otherwise (as rusqlite's
/// `Transaction`): after a lost transaction (a phase returns [`Step::Restart`]), when the limit is reached in
/// a restart, on an error returned with `?`, and when a panic unwinds through the batch. The
/// coalescer's knowledge of the transaction (rowid bases, an unstored `AUTOINCREMENT` counter,
/// table checks made inside it) is forgotten with it.
///
/// The transaction may already be gone when the attempt is dropped (an error ended it, or the
/// coalescer rolled it back): the rollback then does nothing. It runs with the instruction
/// guard disarmed, so that the progress handler cannot interrupt it and leave the transaction
/// open.
struct Attempt<'a, 'c, 'k> {
    conn: &'c Connection,
    guard: Option<&'a Guard<'c>>,
    /// The batch's coalescer, reached through the attempt while the transaction is open.
    coalescer: &'a mut Coalescer<'c, 'k>,
    /// `COMMIT` succeeded: nothing is left to roll back.
    committed: bool,
}

impl<'a, 'c, 'k> Attempt<'a, 'c, 'k> {
    /// Runs `BEGIN IMMEDIATE` with the guard disarmed (an error is
    /// [`FlushError::Begin`]: no transaction was opened, and an already open one is left alone).
    fn begin(
        conn: &'c Connection,
        guard: Option<&'a Guard<'c>>,
        coalescer: &'a mut Coalescer<'c, 'k>,
    ) -> Result<Self, FlushError> {
        if let Some(guard) = guard {
            guard.disarm();
        }
        control(conn, BEGIN).map_err(FlushError::Begin)?;
        Ok(Attempt {
            conn,
            guard,
            coalescer,
            committed: false,
        })
    }

    /// Lets every statement run to completion from here on.
    fn disarm(&self) {
        if let Some(guard) = self.guard {
            guard.disarm();
        }
    }

    /// Runs `COMMIT` (with the guard disarmed). On an error the attempt is dropped, which rolls
    /// the transaction back: no op took effect.
    fn commit(mut self) -> rusqlite::Result<()> {
        self.disarm();
        control(self.conn, COMMIT)?;
        self.committed = true;
        Ok(())
    }
}

impl Drop for Attempt<'_, '_, '_> {
    fn drop(&mut self) {
        if self.committed {
            return;
        }
        self.disarm();
        end_transaction(self.conn);
        self.coalescer.rolled_back();
    }
}

/// The error text of op `index`, interrupted by the guard at `limit` instructions (in a
/// restart if `restart`).
fn interrupt_error(limit: u64, index: usize, on_interrupt: OnInterrupt, restart: bool) -> String {
    if on_interrupt == OnInterrupt::LeavePending && index == 0 && !restart {
        format!(
            "interrupted: the op was still running after {limit} instructions, alone at the start of a flush (2 × flush_instruction_budget), and was rolled back"
        )
    } else {
        format!(
            "interrupted: the batch reached its limit of {limit} instructions while this op ran; the op was rolled back (run it alone or in a smaller batch)"
        )
    }
}

/// Where an op runs: inside the batch's transaction, or alone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Batch,
    Autocommit,
}

/// The outcome of one op, whether its failure ended the surrounding batch transaction (always
/// `false` in autocommit mode), and whether the guard interrupted it.
struct OpRun {
    outcome: Outcome,
    transaction_lost: bool,
    interrupted: bool,
}

impl OpRun {
    fn failed(code: i32, error: String, transaction_lost: bool) -> Self {
        OpRun {
            outcome: Outcome::Failed(OpError {
                code,
                message: error,
            }),
            transaction_lost,
            interrupted: false,
        }
    }
}

fn execute_op(
    statements: &mut Statements<'_>,
    op: &WriteOp,
    mode: Mode,
    guard: Option<&Guard<'_>>,
) -> OpRun {
    let conn = statements.conn;
    // While it runs, statements that would change the connection are refused.
    let _scope = OpScope::enter();
    reset_last_insert_rowid(conn);
    let mut run = match op {
        WriteOp::Single(statement) => match statements.run(statement) {
            Ok(rows_changed) => OpRun {
                outcome: Outcome::Committed {
                    rows_changed,
                    last_insert_rowid: conn.last_insert_rowid(),
                },
                transaction_lost: false,
                interrupted: false,
            },
            Err(error) => {
                let lost =
                    mode == Mode::Batch && batch_transaction_lost(conn, error.is_uncertain());
                let code = error.code();
                let message = match error {
                    StatementError::Sqlite(error) => error_message(error),
                    other => other.to_string(),
                };
                OpRun::failed(code, message, lost)
            }
        },
        WriteOp::Unit(unit) => run_unit(statements, unit, mode),
    };
    run.interrupted = !run.outcome.is_committed() && guard.is_some_and(Guard::tripped);
    run
}

fn run_unit(prepared: &mut Statements<'_>, statements: &[Statement], mode: Mode) -> OpRun {
    let conn = prepared.conn;
    if statements.is_empty() {
        return OpRun::failed(ffi::SQLITE_MISUSE, EMPTY_UNIT_ERROR.to_owned(), false);
    }
    // In autocommit mode the savepoint opens (and its RELEASE commits) the unit's transaction,
    // unless the caller already has one open.
    let owns_transaction = mode == Mode::Batch || conn.is_autocommit();
    if let Err(error) = control(conn, SAVEPOINT) {
        let lost = mode == Mode::Batch && batch_transaction_lost(conn, is_uncertain(&error));
        return OpRun::failed(
            error_code(&error),
            format!("SAVEPOINT failed: {error}"),
            lost,
        );
    }
    let mut rows_changed = 0;
    for (index, statement) in statements.iter().enumerate() {
        match prepared.run(statement) {
            Ok(changed) => rows_changed += changed,
            Err(error) => {
                let lost = abandon_unit(conn, error.is_uncertain(), mode, owns_transaction);
                return OpRun::failed(error.code(), format!("statement {index}: {error}"), lost);
            }
        }
    }
    let last_insert_rowid = conn.last_insert_rowid();
    if let Err(error) = control(conn, RELEASE) {
        // In autocommit mode this RELEASE is the commit (a deferred constraint can fail it).
        let lost = abandon_unit(conn, is_uncertain(&error), mode, owns_transaction);
        return OpRun::failed(error_code(&error), format!("RELEASE failed: {error}"), lost);
    }
    OpRun {
        outcome: Outcome::Committed {
            rows_changed,
            last_insert_rowid,
        },
        transaction_lost: false,
        interrupted: false,
    }
}

/// Undoes a failed unit. Returns whether the batch transaction is gone (batch mode only).
fn abandon_unit(conn: &Connection, uncertain: bool, mode: Mode, owns_transaction: bool) -> bool {
    if conn.is_autocommit() {
        // The error rolled back the whole transaction, savepoint included.
        return mode == Mode::Batch;
    }
    if owns_transaction && uncertain {
        end_transaction(conn);
        return mode == Mode::Batch;
    }
    let undone = conn
        .execute_batch(ROLLBACK_TO)
        .and_then(|()| conn.execute_batch(RELEASE));
    if undone.is_err() && owns_transaction {
        end_transaction(conn);
        return mode == Mode::Batch;
    }
    mode == Mode::Batch && conn.is_autocommit()
}

/// After a failed statement inside the batch transaction: whether that transaction is gone,
/// rolling it back first when SQLite may have left it half-done.
fn batch_transaction_lost(conn: &Connection, uncertain: bool) -> bool {
    if conn.is_autocommit() {
        return true;
    }
    if uncertain {
        end_transaction(conn);
        return true;
    }
    false
}

/// Whether SQLite may have rolled back the statement, the transaction, or nothing after this
/// error (<https://sqlite.org/lang_transaction.html>, "Response To Errors Within A
/// Transaction"): the transaction must then be rolled back explicitly.
fn is_uncertain(error: &rusqlite::Error) -> bool {
    matches!(
        error.sqlite_error_code(),
        Some(
            ErrorCode::DiskFull
                | ErrorCode::SystemIoFailure
                | ErrorCode::OutOfMemory
                | ErrorCode::DatabaseBusy
                | ErrorCode::OperationInterrupted
        )
    )
}

/// The text of `error` as its `Display` shows it, without formatting it again when it is
/// SQLite's own message (which the error already holds).
pub(crate) fn error_message(error: rusqlite::Error) -> String {
    match error {
        rusqlite::Error::SqliteFailure(_, Some(message)) => message,
        other => other.to_string(),
    }
}

/// SQLite's extended result code of `error`; errors rusqlite detects before SQLite sees the
/// statement get the code SQLite itself would give: `SQLITE_RANGE` for a wrong parameter count,
/// `SQLITE_MISUSE` otherwise.
pub(crate) fn error_code(error: &rusqlite::Error) -> i32 {
    // SQLite's own errors carry an `ffi::Error`: directly, or as the source of a syntax error
    // that points into the SQL text (with rusqlite's `modern_sqlite`).
    let sqlite = error.sqlite_error().or_else(|| {
        std::error::Error::source(error).and_then(|source| source.downcast_ref::<ffi::Error>())
    });
    if let Some(sqlite) = sqlite {
        return sqlite.extended_code;
    }
    match error {
        rusqlite::Error::InvalidParameterCount(..) | rusqlite::Error::InvalidParameterName(_) => {
            ffi::SQLITE_RANGE
        }
        _ => ffi::SQLITE_MISUSE,
    }
}

/// Rolls back the batch transaction if it is still open (best effort: the error that led here
/// is the one worth reporting).
fn end_transaction(conn: &Connection) {
    if !conn.is_autocommit() {
        let _ = conn.execute_batch(ROLLBACK);
    }
}

/// Why one statement failed.
#[derive(Debug, thiserror::Error)]
enum StatementError {
    /// SQLite's (or rusqlite's) error, shown as its own message.
    #[error("{0}")]
    Sqlite(rusqlite::Error),
    /// The statement is empty, read-only or transaction control.
    #[error("{}", NOT_A_WRITE_ERROR)]
    NotAWrite,
    /// The authorizer refused the statement before it took effect: it would change the
    /// connection (see `connection_state`).
    #[error("{0}")]
    Refused(String),
}

impl StatementError {
    fn is_uncertain(&self) -> bool {
        match self {
            StatementError::Sqlite(error) => is_uncertain(error),
            StatementError::NotAWrite | StatementError::Refused(_) => false,
        }
    }

    fn code(&self) -> i32 {
        match self {
            StatementError::Sqlite(error) => error_code(error),
            StatementError::NotAWrite => ffi::SQLITE_MISUSE,
            StatementError::Refused(_) => ffi::SQLITE_AUTH,
        }
    }
}

impl From<rusqlite::Error> for StatementError {
    fn from(error: rusqlite::Error) -> Self {
        StatementError::Sqlite(error)
    }
}

/// Runs `statement` to completion with `prepared` (its SQL text prepared); returns the rows it
/// changed.
fn run_prepared(
    conn: &Connection,
    prepared: &mut CachedStatement<'_>,
    statement: &Statement,
) -> Result<u64, StatementError> {
    // Transaction control statements are read-only for SQLite; so is an empty statement.
    if prepared.readonly() {
        return Err(StatementError::NotAWrite);
    }
    let total_before = conn.total_changes();
    {
        let mut rows = prepared.query(rusqlite::params_from_iter(&statement.params))?;
        while rows.next()?.is_some() {}
    }
    // `changes()` keeps the count of the last INSERT/UPDATE/DELETE, so a DDL statement or a DML
    // statement that changed nothing would report a stale count: `total_changes()` tells them
    // apart.
    Ok(if conn.total_changes() == total_before {
        0
    } else {
        conn.changes()
    })
}

/// Runs a transaction control statement through the statement cache.
fn control(conn: &Connection, sql: &str) -> rusqlite::Result<()> {
    conn.prepare_cached(sql)?.execute([]).map(drop)
}

/// Sets the connection's last insert rowid to 0 so that an op reports only its own inserts.
fn reset_last_insert_rowid(conn: &Connection) {
    // SAFETY: the handle is valid for the lifetime of `conn`, and
    // `sqlite3_set_last_insert_rowid` only stores an integer in the connection.
    unsafe { rusqlite::ffi::sqlite3_set_last_insert_rowid(conn.handle(), 0) }
}
