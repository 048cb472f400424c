//! Statement coalescing: consecutive single-row INSERTs of one shape run as one multi-row
//! INSERT, with each op's own outcome and rowid.
//!
//! # Which ops
//!
//! A run of consecutive [`WriteOp::Single`] ops with the same SQL text of the shape
//! `INSERT INTO <table> (<col>, ...) VALUES (<param>, ...)` (one row; every value a bare `?` or
//! `?1`, `?2`, ... in order; identifiers plain or in double quotes; an optional `;`), each with
//! as many parameters as columns, into a table that passes [`Coalescer::table`]'s checks: an
//! ordinary rowid table of the main schema, not shadowed by a temp table, without triggers,
//! without a foreign key to itself, without `ON CONFLICT` clauses, and not given its rowid by
//! the INSERT (no rowid alias among the columns). Anything else runs op by op, as before.
//!
//! # Why the result is the same as op by op
//!
//! `INSERT OR FAIL INTO t (cols) VALUES (row 1), ..., (row m)` inserts the rows in order with the
//! same per-row work as m single-row statements (constraint checks, index updates, defaults).
//! Differences, and how they are closed:
//! - **Rowids.** SQLite gives a row without a rowid `max(rowid) + 1`, and for an `AUTOINCREMENT`
//!   table `max(max(rowid), sqlite_sequence.seq) + 1` (`OP_NewRowid` in SQLite's `vdbe.c`),
//!   unless the largest rowid is already `i64::MAX`. Each inserted row becomes the new largest,
//!   so the rows of a chunk get `base + 1, ..., base + m` where `base` is read before the chunk
//!   (or is the previous chunk's last rowid). A chunk runs only if `base + m` cannot overflow,
//!   and after it the connection's last insert rowid must be `base + kept`: if it is not, the
//!   batch's transaction is rolled back and the batch starts again without coalescing.
//! - **Failures.** `OR FAIL` stops the statement at the failing row and keeps the rows before
//!   it (<https://sqlite.org/lang_conflict.html>). How many stayed is read from the table (the
//!   rows above `base`; SQLite's change counter says 0 after some errors, a `STRICT` type error
//!   for one, although the rows before stay). Those ops are committed, and the failing op runs
//!   alone next, which gives exactly its own error. An error that undoes the whole statement
//!   (an immediate foreign key, checked at the statement's end) keeps nothing: the chunk's
//!   first op then runs alone; if it fails, it was the culprit, otherwise the rest of the chunk
//!   runs op by op too.
//! - **`sqlite_sequence`.** A statement stopped by `OR FAIL` does not store the `AUTOINCREMENT`
//!   counter of the rows it kept; the coalescer stores it, as the single-row statements would
//!   have. It stores it late, which costs nothing when it need not store it at all: before any
//!   op that is not a chunk runs (any statement may read or change `sqlite_sequence`), before a
//!   chunk into another table (so that `sqlite_sequence` rows are created in the same order), and
//!   before `COMMIT`; a later chunk into the same table that completes makes the store moot,
//!   because SQLite then stores the counter of its own last row, which is larger. Between the
//!   stop and the store only chunks into that table run, inserting rows above the kept ones, so
//!   the next rowid is the same either way.
//! - **The clock.** SQLite reads the time once per statement, so the rows of a chunk share one
//!   `CURRENT_TIMESTAMP`. In a canister the time does not change during a message anyway.
//!
//! # Cost
//!
//! Per statement SQLite pays the start and halt of its virtual machine, opening the table's and
//! indexes' cursors, the `AUTOINCREMENT` bookkeeping and constant defaults such as
//! `CURRENT_TIMESTAMP`: a chunk pays them once for all its rows. Chunks have a power-of-two
//! number of rows (at most [`Config::coalesce_rows`](crate::Config::coalesce_rows), and within
//! SQLite's bind-parameter limit), so a shape has at most a handful of SQL texts: they are
//! prepared once and stay in the connection's statement cache (give it room for them: 8 per
//! shape at the default).
//!
//! # Modules
//!
//! The planner here ([`Coalescer::plan`]) groups ops into chunks with what [`CoalesceCache`]
//! learned; `shape` parses SQL texts, `schema` checks tables, `chunk` runs the chunks.

mod chunk;
mod schema;
mod shape;
#[cfg(test)]
mod tests;

use std::sync::Arc;

use rusqlite::{CachedStatement, Connection, ffi};

use crate::op::WriteOp;
// The tests build ops and outcomes.
#[cfg(test)]
use crate::op::{Outcome, Statement};
pub(crate) use chunk::ChunkEnd;
#[cfg(test)]
use schema::may_reference_itself;
use schema::{SchemaKey, Table, check_table, schema_key};
pub(crate) use shape::same_text;
use shape::{Shape, parse_insert};

/// What the coalescer learned about SQL texts and tables, kept from one batch to the next (a
/// [`BatchQueue`](crate::BatchQueue) holds one): checking a table costs more than a small
/// flush's inserts.
#[derive(Debug, Default)]
pub(crate) struct CoalesceCache {
    /// Parsed shapes by SQL text (`None`: not coalescible).
    shapes: Vec<(String, Option<Shape>)>,
    /// The checked target table by shape index (`None`: not coalescible), valid for `schema`.
    tables: Vec<(usize, Option<Table>)>,
    /// The connection and schema the checks in `tables` were made on.
    schema: Option<SchemaKey>,
}

/// Most SQL texts the cache keeps (beyond, it starts again).
const MAX_CACHED_SHAPES: usize = 64;

impl CoalesceCache {
    /// Forgets the table checks (the transaction they were made in was rolled back, so the
    /// schema they saw may never have existed).
    pub(crate) fn forget_tables(&mut self) {
        self.tables.clear();
        self.schema = None;
    }
}

/// Plans and runs coalesced chunks for one batch.
pub(crate) struct Coalescer<'c, 'k> {
    conn: &'c Connection,
    /// Largest chunk (a power of two), or 0 when coalescing is off.
    max_rows: usize,
    /// SQLite's bind-parameter limit on this connection.
    max_params: usize,
    /// Shapes and table checks, shared with earlier batches.
    cache: &'k mut CoalesceCache,
    /// The schema was compared with the cache's since the last statement that may have
    /// changed it.
    schema_checked: bool,
    /// Multi-row statements held for the batch, by (shape index, rows).
    statements: Vec<((usize, usize), CachedStatement<'c>)>,
    /// The last rowid of the previous chunk, when nothing that changed the database has run
    /// since it (by shape index).
    base: Option<(usize, i64)>,
    /// The largest chunk for now: `max_rows`, or less after a chunk that stopped early (it
    /// doubles back after each complete chunk), so that dense failures do not bind rows that
    /// never run.
    cap: usize,
    /// The `AUTOINCREMENT` counter a stopped chunk left unstored (table name, last rowid kept),
    /// until [`Coalescer::settle`] stores it or a complete chunk into the table makes it moot.
    unstored_sequence: Option<(Arc<str>, i64)>,
}

/// A planned chunk: the positions of its ops and their shape.
#[derive(Debug)]
pub(crate) struct Chunk {
    pub(crate) positions: Vec<usize>,
    shape: usize,
}

impl<'c, 'k> Coalescer<'c, 'k> {
    /// A coalescer making chunks of at most `max_rows` rows (0 or 1: coalescing off), with what
    /// earlier batches learned in `cache`.
    pub(crate) fn new(conn: &'c Connection, max_rows: usize, cache: &'k mut CoalesceCache) -> Self {
        // SAFETY: the handle is valid for the lifetime of `conn`; a negative new value only reads
        // the limit.
        let max_params =
            unsafe { ffi::sqlite3_limit(conn.handle(), ffi::SQLITE_LIMIT_VARIABLE_NUMBER, -1) };
        let max_rows = if max_rows >= 2 {
            1 << max_rows.ilog2()
        } else {
            0
        };
        Coalescer {
            conn,
            max_rows,
            max_params: usize::try_from(max_params).unwrap_or(0),
            cache,
            schema_checked: false,
            statements: Vec::new(),
            base: None,
            cap: max_rows,
            unstored_sequence: None,
        }
    }

    /// Turns coalescing off for the rest of the batch.
    pub(crate) fn disable(&mut self) {
        self.max_rows = 0;
        self.cap = 0;
        self.statements.clear();
    }

    /// Something other than a chunk ran: `op` (`committed` says whether it took effect), or
    /// transaction control (`None`). Unless it failed (and so changed nothing), the rowid base
    /// is unknown, and the schema is compared with the cache's again before the next chunk
    /// unless `op` is an INSERT of a known shape (any other statement may have changed it).
    pub(crate) fn ran_other(&mut self, op: Option<&WriteOp>, committed: bool) {
        if op.is_some() && !committed {
            return;
        }
        self.base = None;
        if !self.schema_checked {
            return;
        }
        let keeps_schema = match op {
            Some(WriteOp::Single(statement)) => self
                .cache
                .shapes
                .iter()
                .any(|(sql, shape)| shape.is_some() && same_text(sql, &statement.sql)),
            _ => false,
        };
        if !keeps_schema {
            self.schema_checked = false;
        }
    }

    /// The batch's transaction was rolled back: the table checks made in it are forgotten.
    pub(crate) fn rolled_back(&mut self) {
        self.base = None;
        self.unstored_sequence = None;
        self.schema_checked = false;
        self.cache.forget_tables();
    }

    /// The chunk starting at the first of `positions`: the longest prefix (at most
    /// `max_rows`, cut to a power of two) of ops with the first op's SQL text, if that text is
    /// a coalescible INSERT with as many parameters as columns and the prefix has two ops or
    /// more. `None`: run the first op alone.
    pub(crate) fn plan<'a>(
        &mut self,
        mut positions: impl Iterator<Item = usize>,
        op_at: &impl Fn(usize) -> &'a WriteOp,
    ) -> Option<Chunk> {
        if self.max_rows == 0 {
            return None;
        }
        let first = positions.next()?;
        let WriteOp::Single(statement) = op_at(first) else {
            return None;
        };
        // Most ops that are not INSERTs are told apart by their first bytes, without looking
        // up their text.
        let head = statement.sql.trim_start().as_bytes();
        if head.len() < 6 || !head[..6].eq_ignore_ascii_case(b"INSERT") {
            return None;
        }
        let shape = self.shape(&statement.sql)?;
        let params = self.cache.shapes[shape].1.as_ref()?.params();
        if statement.params.len() != params {
            return None;
        }
        let max_rows = self.cap.min(self.max_params / params.max(1)).max(1);
        let mut chunk = Vec::with_capacity(max_rows);
        chunk.push(first);
        for position in positions {
            if chunk.len() == max_rows {
                break;
            }
            match op_at(position) {
                WriteOp::Single(s)
                    if same_text(&s.sql, &statement.sql) && s.params.len() == params =>
                {
                    chunk.push(position);
                }
                _ => break,
            }
        }
        if chunk.len() < 2 {
            return None;
        }
        chunk.truncate(1 << chunk.len().ilog2());
        self.table(shape)?;
        Some(Chunk {
            positions: chunk,
            shape,
        })
    }

    /// Index of the shape of `sql` in the cache's shapes, if coalescible.
    fn shape(&mut self, sql: &str) -> Option<usize> {
        let shapes = &mut self.cache.shapes;
        let index = match shapes.iter().position(|(s, _)| same_text(s, sql)) {
            Some(index) => index,
            None => {
                if shapes.len() >= MAX_CACHED_SHAPES {
                    // Indexes into `shapes` are about to change: drop what refers to them.
                    shapes.clear();
                    self.cache.tables.clear();
                    self.statements.clear();
                    self.base = None;
                }
                shapes.push((sql.to_owned(), parse_insert(sql)));
                shapes.len() - 1
            }
        };
        shapes[index].1.as_ref().map(|_| index)
    }

    /// The target table of `shape`'s inserts if they may be coalesced: checked once per
    /// schema (`None` also when the schema cannot be read).
    fn table(&mut self, shape: usize) -> Option<Table> {
        if !self.schema_checked {
            let key = schema_key(self.conn).ok()?;
            if self.cache.schema != Some(key) {
                self.cache.tables.clear();
                self.cache.schema = Some(key);
            }
            self.schema_checked = true;
        }
        if let Some((_, checked)) = self.cache.tables.iter().find(|(s, _)| *s == shape) {
            return checked.clone();
        }
        let checked = match &self.cache.shapes[shape].1 {
            Some(parsed) => check_table(self.conn, parsed).unwrap_or(None),
            None => None,
        };
        self.cache.tables.push((shape, checked.clone()));
        checked
    }

    /// Marks `shape` as not coalescible while the schema stays as it is.
    fn refuse(&mut self, shape: usize) {
        match self.cache.tables.iter_mut().find(|(s, _)| *s == shape) {
            Some((_, checked)) => *checked = None,
            None => self.cache.tables.push((shape, None)),
        }
    }
}
