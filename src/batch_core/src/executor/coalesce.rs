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

use std::sync::Arc;

use rusqlite::{CachedStatement, Connection, ffi};

use crate::op::{OpOutcome, Statement, WriteOp};

#[cfg(test)]
mod tests;

/// A parsed single-row INSERT that can be coalesced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Shape {
    /// The table as written in the SQL (quotes kept).
    table_sql: String,
    /// The table's name without quotes.
    table: String,
    /// The column list as written (without parentheses).
    columns_sql: String,
    /// The column names without quotes.
    columns: Vec<String>,
}

impl Shape {
    /// Parameters per row.
    fn params(&self) -> usize {
        self.columns.len()
    }

    /// The multi-row statement for `rows` rows.
    fn sql(&self, rows: usize) -> String {
        let row = format!("({})", vec!["?"; self.params()].join(","));
        let mut sql = format!(
            "INSERT OR FAIL INTO {} ({}) VALUES ",
            self.table_sql, self.columns_sql
        );
        for r in 0..rows {
            if r > 0 {
                sql.push(',');
            }
            sql.push_str(&row);
        }
        sql
    }
}

/// Parses `sql` as a coalescible single-row INSERT (see the module documentation).
pub(crate) fn parse_insert(sql: &str) -> Option<Shape> {
    let mut p = Parser { s: sql, i: 0 };
    p.keyword("INSERT")?;
    p.keyword("INTO")?;
    let (table_sql, table) = p.identifier()?;
    p.symbol('(')?;
    let columns_start = p.i;
    let mut columns = vec![p.identifier()?.1];
    while p.try_symbol(',') {
        columns.push(p.identifier()?.1);
    }
    let columns_sql = sql[columns_start..p.i].trim().to_owned();
    p.symbol(')')?;
    p.keyword("VALUES")?;
    p.symbol('(')?;
    let mut numbered = None;
    let mut count = 0;
    loop {
        p.skip_space();
        let rest = &sql[p.i..];
        if !rest.starts_with('?') {
            return None;
        }
        let digits = rest[1..].bytes().take_while(u8::is_ascii_digit).count();
        p.i += 1 + digits;
        count += 1;
        let is_numbered = digits > 0;
        if *numbered.get_or_insert(is_numbered) != is_numbered {
            return None;
        }
        if is_numbered && rest[1..=digits].parse::<usize>().ok()? != count {
            return None;
        }
        if !p.try_symbol(',') {
            break;
        }
    }
    p.symbol(')')?;
    p.try_symbol(';');
    p.skip_space();
    if p.i != sql.len() || count != columns.len() {
        return None;
    }
    Some(Shape {
        table_sql,
        table,
        columns_sql,
        columns,
    })
}

struct Parser<'s> {
    s: &'s str,
    i: usize,
}

impl Parser<'_> {
    fn skip_space(&mut self) {
        let rest = &self.s[self.i..];
        self.i += rest.len() - rest.trim_start().len();
    }

    /// A keyword (case-insensitive) followed by a non-identifier character.
    fn keyword(&mut self, word: &str) -> Option<()> {
        self.skip_space();
        let rest = &self.s.as_bytes()[self.i..];
        if rest.len() < word.len() || !rest[..word.len()].eq_ignore_ascii_case(word.as_bytes()) {
            return None;
        }
        if rest.get(word.len()).is_some_and(|&b| is_ident_byte(b)) {
            return None;
        }
        self.i += word.len();
        Some(())
    }

    fn symbol(&mut self, c: char) -> Option<()> {
        self.try_symbol(c).then_some(())
    }

    fn try_symbol(&mut self, c: char) -> bool {
        self.skip_space();
        if self.s[self.i..].starts_with(c) {
            self.i += 1;
            true
        } else {
            false
        }
    }

    /// A plain identifier, or one in double quotes without doubled quotes inside; returns it
    /// as written and unquoted. A qualified name (`main.t`) is not accepted.
    fn identifier(&mut self) -> Option<(String, String)> {
        self.skip_space();
        let rest = &self.s[self.i..];
        let (written, name) = if let Some(quoted) = rest.strip_prefix('"') {
            let end = quoted.find('"')?;
            if quoted[end + 1..].starts_with('"') || end == 0 {
                return None;
            }
            (&rest[..end + 2], &quoted[..end])
        } else {
            let len = rest.bytes().take_while(|&b| is_ident_byte(b)).count();
            if len == 0 || rest.as_bytes()[0].is_ascii_digit() || !rest.is_char_boundary(len) {
                return None;
            }
            (&rest[..len], &rest[..len])
        };
        self.i += written.len();
        if self.s[self.i..].trim_start().starts_with('.') {
            return None;
        }
        Some((written.to_owned(), name.to_owned()))
    }
}

fn is_ident_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'$' || b >= 0x80
}

/// What the coalescer needs to know about a table it may insert into.
#[derive(Debug, Clone)]
pub(crate) struct Table {
    /// The name as stored in `sqlite_schema` (and `sqlite_sequence`), shared: the table is
    /// looked up for every chunk.
    name: Arc<str>,
    /// Declared `AUTOINCREMENT`.
    autoincrement: bool,
}

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
    pub(crate) outcomes: Vec<OpOutcome>,
}

impl ChunkRun {
    fn nothing(end: ChunkEnd) -> Self {
        ChunkRun {
            end,
            outcomes: Vec::new(),
        }
    }

    /// The first `kept` ops inserted with rowids `base + 1 ..`, then `culprit`.
    fn kept(end: ChunkEnd, base: i64, kept: usize, culprit: Option<OpOutcome>) -> Self {
        let mut outcomes = Vec::with_capacity(kept + usize::from(culprit.is_some()));
        outcomes.extend((1..=kept as i64).map(|j| OpOutcome::Committed {
            rows_changed: 1,
            last_insert_rowid: base + j,
        }));
        outcomes.extend(culprit);
        ChunkRun { end, outcomes }
    }
}

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

/// A connection (its handle's address) and the versions of its main and temp schemas: SQLite
/// increments a schema's `schema_version` on every change of it (a table, index or trigger
/// created, altered or dropped), also inside a transaction, and restores it on rollback.
type SchemaKey = (usize, i64, i64);

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
        super::reset_last_insert_rowid(conn);
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
            Err(error) if super::is_uncertain(&error) => {
                super::end_transaction(conn);
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
        let code = super::error_code(&error);
        // The row that stopped the statement fails alone exactly so: a constraint it violates
        // in the same state. A foreign key is checked at the end, for all rows at once.
        let culprit = (code & 0xff == ffi::SQLITE_CONSTRAINT
            && code != ffi::SQLITE_CONSTRAINT_FOREIGNKEY)
            .then(|| OpOutcome::Failed {
                code,
                error: super::error_message(error),
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
        super::end_transaction(self.conn);
        ChunkRun::nothing(ChunkEnd::Anomaly)
    }

    /// A bookkeeping statement of the coalescer failed after the chunk's statement ran: the
    /// transaction may hold rows whose ops have no outcome yet (or a counter not stored), so it
    /// is rolled back, and the batch starts again without coalescing.
    fn failed_after_rows(&mut self) -> ChunkRun {
        super::end_transaction(self.conn);
        self.disable();
        ChunkRun::nothing(ChunkEnd::Lost)
    }

    /// A bookkeeping statement of the coalescer failed before the chunk's statement ran: the
    /// transaction is rolled back if it may be half-done, and the batch continues without
    /// coalescing.
    fn failed_control(&mut self, error: &rusqlite::Error) -> ChunkRun {
        let lost = self.conn.is_autocommit() || super::is_uncertain(error);
        if lost {
            super::end_transaction(self.conn);
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
                let prepared = self.conn.prepare_cached(&sql)?;
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

/// Whether two SQL texts are equal, compared eight bytes at a time: a batch compares every
/// op's text with its neighbour's, and `memcmp` in a wasm build compares byte by byte (about
/// ten times the instructions).
pub(crate) fn same_text(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    if std::ptr::eq(a, b) {
        return true;
    }
    let (mut x, mut y) = (a.chunks_exact(8), b.chunks_exact(8));
    let word = |bytes: &[u8]| u64::from_ne_bytes(bytes.try_into().expect("eight bytes"));
    (&mut x).zip(&mut y).all(|(p, q)| word(p) == word(q)) && x.remainder() == y.remainder()
}

/// The rows of `main.sqlite_schema` and `temp.sqlite_schema` about a table (other than its
/// indexes): the table itself, views of that name, triggers on it.
const SCHEMA_ROWS: &str = "\
    SELECT 'main', type, name, sql FROM main.sqlite_schema
     WHERE tbl_name = ?1 COLLATE NOCASE AND type <> 'index'
    UNION ALL
    SELECT 'temp', type, name, sql FROM temp.sqlite_schema
     WHERE tbl_name = ?1 COLLATE NOCASE AND type <> 'index'";

/// What `sqlite3_table_column_metadata` says of a column.
struct ColumnMeta {
    declared_type: String,
    primary_key: bool,
    autoincrement: bool,
}

impl ColumnMeta {
    /// Declared `INTEGER` and part of the primary key: the rowid, its alias, or (conservatively)
    /// an `INTEGER` column of a composite key.
    fn is_integer_key(&self) -> bool {
        self.primary_key && self.declared_type.eq_ignore_ascii_case("INTEGER")
    }
}

/// `column` of table `table` in the main schema, as `sqlite3_table_column_metadata` describes
/// it (for `rowid`, `oid` and `_rowid_`: the column of that name if declared, else the rowid
/// or its alias); `None` if there is no such table (or it is a view) or column.
fn column_meta(conn: &Connection, table: &str, column: &str) -> Option<ColumnMeta> {
    let table = std::ffi::CString::new(table).ok()?;
    let column = std::ffi::CString::new(column).ok()?;
    let mut declared_type: *const std::ffi::c_char = std::ptr::null();
    let mut collation: *const std::ffi::c_char = std::ptr::null();
    let (mut not_null, mut primary_key, mut autoincrement) = (0, 0, 0);
    // SAFETY: a valid connection handle, NUL-terminated strings, and out-pointers to locals.
    // The type string belongs to the schema and is copied before anything else runs.
    let rc = unsafe {
        ffi::sqlite3_table_column_metadata(
            conn.handle(),
            c"main".as_ptr(),
            table.as_ptr(),
            column.as_ptr(),
            &mut declared_type,
            &mut collation,
            &mut not_null,
            &mut primary_key,
            &mut autoincrement,
        )
    };
    if rc != ffi::SQLITE_OK {
        return None;
    }
    let declared_type = if declared_type.is_null() {
        String::new()
    } else {
        // SAFETY: a NUL-terminated string owned by the schema, valid until it changes.
        unsafe { std::ffi::CStr::from_ptr(declared_type) }
            .to_string_lossy()
            .into_owned()
    };
    Some(ColumnMeta {
        declared_type,
        primary_key: primary_key != 0,
        autoincrement: autoincrement != 0,
    })
}

/// Whether the `CREATE TABLE` text `upper` (upper-cased) may declare a foreign key to `table`
/// itself: some `REFERENCES` is followed by that name, or by anything but a plain identifier
/// (a quoted name, a comment), which the caller then checks with SQLite's own parse.
fn may_reference_itself(upper: &str, table: &str) -> bool {
    upper.match_indices("REFERENCES").any(|(at, keyword)| {
        let rest = upper[at + keyword.len()..].trim_start();
        let target_len = rest.bytes().take_while(|&b| is_ident_byte(b)).count();
        target_len == 0 || rest[..target_len].eq_ignore_ascii_case(table)
    })
}

/// Whether the multi-row INSERTs of `shape` behave exactly as its single-row ones (see the
/// module documentation); `Ok(None)` if not. One query of the schema tables and SQLite's
/// column metadata: the first flush after a start or upgrade pays for it, later ones keep it.
fn check_table(conn: &Connection, shape: &Shape) -> rusqlite::Result<Option<Table>> {
    let table = shape.table.as_str();
    // An ordinary table of the main schema: no view of that name, nothing of that name in the
    // temp schema (a temp table would shadow it, a temp trigger fire on it), no trigger.
    let rows: Vec<(String, String, String, Option<String>)> = conn
        .prepare_cached(SCHEMA_ROWS)?
        .query_map([table], |row| {
            Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?))
        })?
        .collect::<rusqlite::Result<_>>()?;
    let [(schema, kind, name, Some(sql))] = rows.as_slice() else {
        return Ok(None);
    };
    let upper = sql.to_ascii_uppercase();
    if schema != "main"
        || kind != "table"
        || upper.starts_with("CREATE VIRTUAL")
        || upper.contains("CONFLICT")
    {
        return Ok(None);
    }
    // A foreign key to itself: a multi-row INSERT checks it at the statement's end, so a row
    // could reference a later row of the same chunk.
    if may_reference_itself(&upper, name) {
        let self_references: i64 = conn
            .prepare_cached(
                "SELECT count(*) FROM pragma_foreign_key_list(?1, 'main') WHERE \"table\" = ?1 COLLATE NOCASE",
            )?
            .query_row([name], |row| row.get(0))?;
        if self_references > 0 {
            return Ok(None);
        }
    }
    // The rowid must be what `max(rowid)` reads: a rowid table (not WITHOUT ROWID), where no
    // declared column takes one of the rowid's names unless it is the rowid's alias.
    let mut autoincrement = false;
    for rowid in ["rowid", "oid", "_rowid_"] {
        match column_meta(conn, name, rowid) {
            Some(meta) if meta.is_integer_key() => autoincrement |= meta.autoincrement,
            _ => return Ok(None),
        }
    }
    // The INSERT must not give the rowid, and every column must exist (otherwise it fails
    // alone anyway).
    for column in &shape.columns {
        match column_meta(conn, name, column) {
            Some(meta) if !meta.is_integer_key() => {}
            _ => return Ok(None),
        }
    }
    Ok(Some(Table {
        name: Arc::from(name.as_str()),
        autoincrement,
    }))
}

/// The connection and its schemas' versions (see [`SchemaKey`]).
fn schema_key(conn: &Connection) -> rusqlite::Result<SchemaKey> {
    let version = |pragma: &str| -> rusqlite::Result<i64> {
        conn.prepare_cached(pragma)?.query_row([], |row| row.get(0))
    };
    // SAFETY: only the handle's address is read, as the connection's identity.
    let handle = unsafe { conn.handle() } as usize;
    Ok((
        handle,
        version("PRAGMA main.schema_version")?,
        version("PRAGMA temp.schema_version")?,
    ))
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
