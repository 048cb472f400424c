//! The executor: runs ops against a connection, in one transaction ([`execute_batch`], and
//! [`BatchQueue::flush`](crate::BatchQueue::flush) through the same code) or alone in autocommit
//! mode ([`execute_autocommit`]). The per-op semantics are documented on [`execute_batch`].

use rusqlite::{CachedStatement, Connection, ErrorCode};

use crate::meter::InstructionMeter;
use crate::op::{OpOutcome, Statement, WriteOp};

#[cfg(test)]
mod tests;

/// Error text of a unit without statements.
pub(crate) const EMPTY_UNIT_ERROR: &str = "unit has no statements";

/// Error text of a statement that is empty, read-only or transaction control.
pub(crate) const NOT_A_WRITE_ERROR: &str = "not a write statement: empty, read-only (SELECT) and transaction control (BEGIN, COMMIT, ROLLBACK, SAVEPOINT, RELEASE) statements cannot be batched";

const BEGIN: &str = "BEGIN IMMEDIATE";
const COMMIT: &str = "COMMIT";
const ROLLBACK: &str = "ROLLBACK";
const SAVEPOINT: &str = "SAVEPOINT batch_core_unit";
const RELEASE: &str = "RELEASE batch_core_unit";
const ROLLBACK_TO: &str = "ROLLBACK TO batch_core_unit";

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
    /// transaction was rolled back. A deferred constraint violated by a queued op makes every
    /// flush fail the same way: do not combine deferred constraints with batching.
    #[error("COMMIT failed: {0}")]
    Commit(#[source] rusqlite::Error),
}

/// Executes `ops` in ONE transaction (`BEGIN IMMEDIATE` ... `COMMIT`), with the same executor as
/// [`BatchQueue::flush`](crate::BatchQueue::flush) but without an instruction budget, and
/// returns one outcome per op, in order.
///
/// Per op:
/// - [`WriteOp::Single`]: the statement is prepared with `prepare_cached`, bound, and stepped to
///   completion (rows of `RETURNING` are discarded). If it fails, SQLite has already undone it
///   (statement-level atomicity with the default `ABORT` conflict resolution): the other ops
///   keep their effects and nothing is re-executed.
/// - [`WriteOp::Unit`]: `SAVEPOINT batch_core_unit`, the statements, `RELEASE`. On the first
///   failing statement: `ROLLBACK TO` + `RELEASE`, and the unit fails as a whole with the
///   statement's index in its error (`statement 2: ...`).
/// - If an error ends the whole transaction (the connection is back in autocommit mode after
///   `ON CONFLICT ROLLBACK`, `RAISE(ROLLBACK)` or an I/O error; after `SQLITE_FULL`,
///   `SQLITE_IOERR`, `SQLITE_NOMEM`, `SQLITE_BUSY` or `SQLITE_INTERRUPT` it is rolled back
///   explicitly, since SQLite may have left it half-done), the earlier ops were undone with it:
///   the executor begins again, re-applies exactly the earlier ops that had committed (their
///   outcomes are re-recorded), marks the failing op failed without running it again, and
///   continues. Each restart fails one more op, so n ops restart at most n times.
///
/// An empty `ops` returns an empty vector without touching the connection. The connection must
/// be in autocommit mode (no open transaction), otherwise the result is [`FlushError::Begin`];
/// [`FlushError::Commit`] means the transaction was rolled back and no op took effect.
///
/// Cost: one transaction (one journal and page write-out at `COMMIT`) plus the statements.
pub fn execute_batch(conn: &Connection, ops: &[WriteOp]) -> Result<Vec<OpOutcome>, FlushError> {
    if ops.is_empty() {
        return Ok(Vec::new());
    }
    run_batch(conn, ops.len(), |i| &ops[i], None)
}

/// Executes one op alone, in autocommit mode: the unbatched path, and the reference that batched
/// execution is tested against.
///
/// A [`WriteOp::Single`] runs in SQLite's implicit per-statement transaction; a [`WriteOp::Unit`]
/// in its own transaction (its `SAVEPOINT` starts it and `RELEASE` commits it). If the caller has
/// a transaction open, the op joins it instead. Errors, including a failed commit, are reported
/// as [`OpOutcome::Failed`].
pub fn execute_autocommit(conn: &Connection, op: &WriteOp) -> OpOutcome {
    execute_op(&mut Statements::new(conn), op, Mode::Autocommit).outcome
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
    held: Vec<(String, CachedStatement<'c>)>,
}

impl<'c> Statements<'c> {
    fn new(conn: &'c Connection) -> Self {
        Statements {
            conn,
            held: Vec::new(),
        }
    }

    /// Runs `statement` to completion with the batch's prepared statement for its text.
    fn run(&mut self, statement: &Statement) -> Result<u64, StatementError> {
        let conn = self.conn;
        if let Some(i) = self.held.iter().position(|(sql, _)| *sql == statement.sql) {
            return run_prepared(conn, &mut self.held[i].1, statement);
        }
        let mut prepared = conn.prepare_cached(&statement.sql)?;
        let result = run_prepared(conn, &mut prepared, statement);
        if self.held.len() < MAX_HELD_STATEMENTS {
            self.held.push((statement.sql.clone(), prepared));
        }
        result
    }
}

/// A budget for [`run_batch`]: a meter and the instructions after which no new op starts.
pub(crate) struct Budget<'a> {
    pub(crate) meter: &'a dyn InstructionMeter,
    pub(crate) start: u64,
    pub(crate) limit: u64,
}

impl Budget<'_> {
    fn exhausted(&self) -> bool {
        self.meter.instructions().saturating_sub(self.start) >= self.limit
    }
}

/// Runs a prefix of the ops `0..len` in one transaction and commits it. Without a budget the
/// prefix is all ops; with one, op `i > 0` starts only if the budget is not exhausted (one meter
/// read before each op after the first), so at least one op runs. Returns the outcomes of the
/// prefix.
///
/// On `Err` the transaction is rolled back and no op took effect.
pub(crate) fn run_batch<'a>(
    conn: &Connection,
    len: usize,
    op_at: impl Fn(usize) -> &'a WriteOp,
    budget: Option<&Budget<'_>>,
) -> Result<Vec<OpOutcome>, FlushError> {
    // Outcomes of the ops admitted to this batch so far (a prefix of `0..len`).
    let mut outcomes: Vec<OpOutcome> = Vec::new();
    let mut statements = Statements::new(conn);
    'attempt: loop {
        control(conn, BEGIN).map_err(FlushError::Begin)?;
        // After a lost transaction: re-apply the admitted ops that had committed. Failed ops had
        // no effect and keep their outcome; in particular the op whose failure ended the
        // transaction is never executed again, so every restart fails one more op.
        for (i, outcome) in outcomes.iter_mut().enumerate() {
            if !outcome.is_committed() {
                continue;
            }
            let run = execute_op(&mut statements, op_at(i), Mode::Batch);
            *outcome = run.outcome;
            if run.transaction_lost {
                end_transaction(conn);
                continue 'attempt;
            }
        }
        // Admit and run new ops.
        while outcomes.len() < len {
            let i = outcomes.len();
            if i > 0 && budget.is_some_and(Budget::exhausted) {
                break;
            }
            let run = execute_op(&mut statements, op_at(i), Mode::Batch);
            outcomes.push(run.outcome);
            if run.transaction_lost {
                end_transaction(conn);
                continue 'attempt;
            }
        }
        break;
    }
    if let Err(error) = control(conn, COMMIT) {
        end_transaction(conn);
        return Err(FlushError::Commit(error));
    }
    Ok(outcomes)
}

/// Where an op runs: inside the batch's transaction, or alone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Batch,
    Autocommit,
}

/// The outcome of one op, and whether its failure ended the surrounding batch transaction
/// (always `false` in autocommit mode).
struct OpRun {
    outcome: OpOutcome,
    transaction_lost: bool,
}

impl OpRun {
    fn failed(error: String, transaction_lost: bool) -> Self {
        OpRun {
            outcome: OpOutcome::Failed { error },
            transaction_lost,
        }
    }
}

fn execute_op(statements: &mut Statements<'_>, op: &WriteOp, mode: Mode) -> OpRun {
    let conn = statements.conn;
    reset_last_insert_rowid(conn);
    match op {
        WriteOp::Single(statement) => match statements.run(statement) {
            Ok(rows_changed) => OpRun {
                outcome: OpOutcome::Committed {
                    rows_changed,
                    last_insert_rowid: conn.last_insert_rowid(),
                },
                transaction_lost: false,
            },
            Err(error) => {
                let lost =
                    mode == Mode::Batch && batch_transaction_lost(conn, error.is_uncertain());
                OpRun::failed(error.to_string(), lost)
            }
        },
        WriteOp::Unit(unit) => run_unit(statements, unit, mode),
    }
}

fn run_unit(prepared: &mut Statements<'_>, statements: &[Statement], mode: Mode) -> OpRun {
    let conn = prepared.conn;
    if statements.is_empty() {
        return OpRun::failed(EMPTY_UNIT_ERROR.to_owned(), false);
    }
    // In autocommit mode the savepoint opens (and its RELEASE commits) the unit's transaction,
    // unless the caller already has one open.
    let owns_transaction = mode == Mode::Batch || conn.is_autocommit();
    if let Err(error) = control(conn, SAVEPOINT) {
        let lost = mode == Mode::Batch && batch_transaction_lost(conn, is_uncertain(&error));
        return OpRun::failed(format!("SAVEPOINT failed: {error}"), lost);
    }
    let mut rows_changed = 0;
    for (index, statement) in statements.iter().enumerate() {
        match prepared.run(statement) {
            Ok(changed) => rows_changed += changed,
            Err(error) => {
                let lost = abandon_unit(conn, error.is_uncertain(), mode, owns_transaction);
                return OpRun::failed(format!("statement {index}: {error}"), lost);
            }
        }
    }
    let last_insert_rowid = conn.last_insert_rowid();
    if let Err(error) = control(conn, RELEASE) {
        // In autocommit mode this RELEASE is the commit (a deferred constraint can fail it).
        let lost = abandon_unit(conn, is_uncertain(&error), mode, owns_transaction);
        return OpRun::failed(format!("RELEASE failed: {error}"), lost);
    }
    OpRun {
        outcome: OpOutcome::Committed {
            rows_changed,
            last_insert_rowid,
        },
        transaction_lost: false,
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
}

impl StatementError {
    fn is_uncertain(&self) -> bool {
        match self {
            StatementError::Sqlite(error) => is_uncertain(error),
            StatementError::NotAWrite => false,
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
