//! Chunk execution: one multi-row INSERT per planned chunk, each op's outcome and rowid read
//! back from the connection, the `AUTOINCREMENT` counter a stopped statement leaves unstored,
//! and what happens to the batch's transaction when a chunk fails.

use std::sync::Arc;

use rusqlite::{CachedStatement, Connection, ffi};

use super::schema::Table;
use super::{Chunk, Coalescer};
use crate::executor::{
    end_transaction, error_code, error_message, is_uncertain, reset_last_insert_rowid,
};
use crate::op::{OpError, Outcome, Statement, WriteOp};

/// How a chunk ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ChunkEnd {
    /// Every op of the chunk was inserted.
    Complete,
    /// The first `kept` ops were inserted and op `kept` stopped the statement: its outcome
    /// follows theirs if the coalescer could tell it, otherwise it must run alone next.
    Stopped { kept: usize },
    /// Nothing was inserted and which op failed is not known (or the chunk could not run).
    Undone,
    /// The batch's transaction is gone (the connection is back in autocommit mode, or it was
    /// rolled back after an error that may have left it half-done).
    Lost,
    /// The rowids contradict the rule of the module documentation: the transaction was rolled
    /// back; the batch must start again without coalescing.
    Anomaly,
}

/// A chunk's result: how it ended and the outcomes of the ops it inserted, then (if
/// [`ChunkEnd::Stopped`] could tell) the outcome of the op that stopped it.
#[derive(Debug)]
pub(crate) struct ChunkRun {
    pub(crate) end: ChunkEnd,
    pub(crate) outcomes: Vec<Outcome>,
}

impl ChunkRun {
    fn nothing(end: ChunkEnd) -> Self {
        ChunkRun {
            end,
            outcomes: Vec::new(),
        }
    }

    /// The first `kept` ops inserted with rowids `base + 1 ..`, then `culprit`.
    fn kept(end: ChunkEnd, base: i64, kept: usize, culprit: Option<Outcome>) -> Self {
        let mut outcomes = Vec::with_capacity(kept + usize::from(culprit.is_some()));
        outcomes.extend((1..=kept as i64).map(|j| Outcome::Committed {
            rows_changed: 1,
            last_insert_rowid: base + j,
        }));
        outcomes.extend(culprit);
        ChunkRun { end, outcomes }
    }
}

impl<'c> Coalescer<'c, '_> {
    /// [`Coalescer::settle`], called before running anything other than a chunk and before
    /// `COMMIT`. If the store fails, the transaction holds rows whose counter is not stored: it
    /// is rolled back and coalescing turned off (as [`Coalescer::failed_after_rows`] does), and
    /// the result is false: the caller starts the batch's next attempt.
    pub(crate) fn settle_or_roll_back(&mut self) -> bool {
        if self.settle().is_err() {
            self.failed_after_rows();
            return false;
        }
        true
    }

    /// Stores the `AUTOINCREMENT` counter a stopped chunk left unstored, if any. On an error
    /// the transaction holds rows whose counter is not stored: the caller must roll it back.
    fn settle(&mut self) -> rusqlite::Result<()> {
        match self.unstored_sequence.take() {
            Some((table, last)) => store_sequence(self.conn, &table, last),
            None => Ok(()),
        }
    }

    /// Runs `chunk` as one multi-row INSERT (see the module documentation). The caller handles
    /// a tripped instruction guard.
    pub(crate) fn run<'a>(
        &mut self,
        chunk: &Chunk,
        op_at: &impl Fn(usize) -> &'a WriteOp,
    ) -> ChunkRun {
        let rows = chunk.positions.len();
        let undone = ChunkRun::nothing(ChunkEnd::Undone);
        if self.cache.shapes[chunk.shape].1.is_none() {
            return undone;
        }
        let Some(table) = self.table(chunk.shape) else {
            return undone;
        };
        // Another table's counter is stored first: op by op it would be stored before this
        // chunk's rows, and its `sqlite_sequence` row (if new) created before this table's.
        if self
            .unstored_sequence
            .as_ref()
            .is_some_and(|(name, _)| *name != table.name)
            && self.settle().is_err()
        {
            return self.failed_after_rows();
        }
        let base = match self.base {
            Some((s, last)) if s == chunk.shape => Ok(last),
            _ => next_rowid_base(self.conn, &table),
        };
        self.base = None;
        let base = match base {
            Ok(base) => base,
            Err(error) => return self.failed_control(&error),
        };
        if base.checked_add(rows as i64).is_none() {
            return undone;
        }
        let conn = self.conn;
        reset_last_insert_rowid(conn);
        let total_before = conn.total_changes();
        let result = {
            let statement = match self.statement(chunk.shape, rows) {
                Ok(statement) => statement,
                Err(_) => {
                    // Not preparable (a limit, or a schema the checks did not foresee): not
                    // again for this shape while the schema stays as it is.
                    self.refuse(chunk.shape);
                    return undone;
                }
            };
            if bind_rows(statement, chunk, op_at).is_err() {
                // A value SQLite refuses to bind (too big): the ops run alone and it fails there.
                return undone;
            }
            statement.raw_execute()
        };
        let last = conn.last_insert_rowid();
        let changed = conn.total_changes() - total_before;
        let error = match result {
            Ok(_) => {
                return if changed == rows as u64 && last == base + rows as i64 {
                    // SQLite stored this table's counter at the statement's end.
                    if self
                        .unstored_sequence
                        .as_ref()
                        .is_some_and(|(name, _)| *name == table.name)
                    {
                        self.unstored_sequence = None;
                    }
                    self.base = Some((chunk.shape, last));
                    self.cap = (self.cap * 2).min(self.max_rows);
                    ChunkRun::kept(ChunkEnd::Complete, base, rows, None)
                } else {
                    self.anomaly()
                };
            }
            Err(_) if conn.is_autocommit() => return ChunkRun::nothing(ChunkEnd::Lost),
            Err(error) if is_uncertain(&error) => {
                end_transaction(conn);
                return ChunkRun::nothing(ChunkEnd::Lost);
            }
            Err(error) => error,
        };
        // The rows of the ops before the failing one stay: a constraint's OR FAIL halt counts
        // them as changes. Other errors report no changes, whether their rows stayed (a STRICT
        // type error in a statement without a statement journal) or were undone (an immediate
        // foreign key, checked at the statement's end): if rows were inserted at all (the last
        // insert rowid moved), the table says which stayed.
        let kept = if changed > 0 || last <= base {
            changed as i64
        } else {
            match max_rowid(conn, &table) {
                Ok(max) => max.saturating_sub(base).max(0),
                Err(_) => return self.failed_after_rows(),
            }
        };
        let kept = usize::try_from(kept).unwrap_or(usize::MAX);
        if kept >= rows || (kept > 0 && last != base + kept as i64) {
            return self.anomaly();
        }
        let code = error_code(&error);
        // The row that stopped the statement fails alone exactly so: a constraint it violates
        // in the same state. A foreign key is checked at the end, for all rows at once.
        let culprit = (code & 0xff == ffi::SQLITE_CONSTRAINT
            && code != ffi::SQLITE_CONSTRAINT_FOREIGNKEY)
            .then(|| {
                Outcome::Failed(OpError {
                    code,
                    message: error_message(error),
                })
            });
        if kept == 0 && culprit.is_none() {
            return undone;
        }
        if kept > 0 {
            // The statement stopped before the end of its program, where SQLite stores the
            // AUTOINCREMENT counter: it is stored later (see the module documentation).
            if table.autoincrement {
                self.unstored_sequence = Some((Arc::clone(&table.name), last));
            }
            self.base = Some((chunk.shape, last));
        } else {
            self.base = Some((chunk.shape, base));
        }
        // Failures this dense: bind no more rows than the statement reached.
        self.cap = (kept + 1).next_power_of_two().clamp(2, self.max_rows);
        ChunkRun::kept(ChunkEnd::Stopped { kept }, base, kept, culprit)
    }

    /// Rolls back the transaction after an [`ChunkEnd::Anomaly`].
    fn anomaly(&mut self) -> ChunkRun {
        end_transaction(self.conn);
        ChunkRun::nothing(ChunkEnd::Anomaly)
    }

    /// A bookkeeping statement of the coalescer failed after the chunk's statement ran: the
    /// transaction may hold rows whose ops have no outcome yet (or a counter not stored), so it
    /// is rolled back, and the batch starts again without coalescing.
    fn failed_after_rows(&mut self) -> ChunkRun {
        end_transaction(self.conn);
        self.disable();
        ChunkRun::nothing(ChunkEnd::Lost)
    }

    /// A bookkeeping statement of the coalescer failed before the chunk's statement ran: the
    /// transaction is rolled back if it may be half-done, and the batch continues without
    /// coalescing.
    fn failed_control(&mut self, error: &rusqlite::Error) -> ChunkRun {
        let lost = self.conn.is_autocommit() || is_uncertain(error);
        if lost {
            end_transaction(self.conn);
        }
        self.disable();
        ChunkRun {
            end: if lost {
                ChunkEnd::Lost
            } else {
                ChunkEnd::Undone
            },
            outcomes: Vec::new(),
        }
    }

    /// The held multi-row statement for `rows` rows of the shape at `index`.
    fn statement(
        &mut self,
        index: usize,
        rows: usize,
    ) -> rusqlite::Result<&mut CachedStatement<'c>> {
        let position = match self
            .statements
            .iter()
            .position(|(k, _)| *k == (index, rows))
        {
            Some(position) => position,
            None => {
                let sql = match &self.cache.shapes[index].1 {
                    Some(shape) => shape.sql(rows),
                    None => return Err(rusqlite::Error::InvalidQuery),
                };
                // Compiled as the ops' own statements are, under the allow-list of ops.
                let prepared = crate::connection_state::prepare_op(self.conn, &sql)?;
                self.statements.push(((index, rows), prepared));
                self.statements.len() - 1
            }
        };
        Ok(&mut self.statements[position].1)
    }
}

fn bind_rows<'a>(
    statement: &mut CachedStatement<'_>,
    chunk: &Chunk,
    op_at: &impl Fn(usize) -> &'a WriteOp,
) -> rusqlite::Result<()> {
    let mut index = 1;
    for &position in &chunk.positions {
        let WriteOp::Single(Statement { params, .. }) = op_at(position) else {
            unreachable!("a chunk holds single statements only");
        };
        for param in params {
            statement.raw_bind_parameter(index, param)?;
            index += 1;
        }
    }
    Ok(())
}

/// The rowid before the next inserted row of `table`: the largest rowid (0 if empty), and for
/// an `AUTOINCREMENT` table at least its `sqlite_sequence` counter.
fn next_rowid_base(conn: &Connection, table: &Table) -> rusqlite::Result<i64> {
    let mut base = max_rowid(conn, table)?;
    if table.autoincrement {
        let seq: Option<i64> = conn
            .prepare_cached("SELECT max(seq) FROM main.sqlite_sequence WHERE name = ?1")?
            .query_row([&table.name], |row| row.get(0))?;
        base = base.max(seq.unwrap_or(0));
    }
    Ok(base)
}

/// The largest rowid of `table`, 0 if it is empty.
fn max_rowid(conn: &Connection, table: &Table) -> rusqlite::Result<i64> {
    let quoted = table.name.replace('"', "\"\"");
    let max: Option<i64> = conn
        .prepare_cached(&format!("SELECT max(rowid) FROM main.\"{quoted}\""))?
        .query_row([], |row| row.get(0))?;
    Ok(max.unwrap_or(0))
}

/// Stores `last` as the `AUTOINCREMENT` counter of `table`, as SQLite does at the end of an
/// INSERT (it updates the table's row of `sqlite_sequence`, or adds one).
fn store_sequence(conn: &Connection, table: &str, last: i64) -> rusqlite::Result<()> {
    let updated = conn
        .prepare_cached("UPDATE main.sqlite_sequence SET seq = ?2 WHERE name = ?1 AND seq < ?2")?
        .execute(rusqlite::params![table, last])?;
    if updated == 0 {
        let exists: bool = conn
            .prepare_cached("SELECT count(*) > 0 FROM main.sqlite_sequence WHERE name = ?1")?
            .query_row([table], |row| row.get(0))?;
        if !exists {
            conn.prepare_cached("INSERT INTO main.sqlite_sequence (name, seq) VALUES (?1, ?2)")?
                .execute(rusqlite::params![table, last])?;
        }
    }
    Ok(())
}
