//! What an op may do, by allow-list: statements are authorized while they are compiled, and
//! anything an op may not do is refused before it takes effect.
//!
//! # Why compile time
//!
//! SQLite applies some statements while it *compiles* them, before any step: a flag `PRAGMA`
//! (`foreign_keys`, `query_only`, `writable_schema`, `recursive_triggers`, ...) sets the flag in
//! `sqlite3_prepare` (`sqlite3Pragma` in SQLite's `pragma.c`), outside any transaction, and the
//! statements already compiled keep the code generated under the old value. An op that is
//! refused after it was compiled ("not a write statement") would therefore have changed the
//! connection for every later op and call. SQLite asks the connection's authorizer
//! (`sqlite3_set_authorizer`) about every table, column, function and schema change a statement
//! touches while it compiles it (for a `PRAGMA` before it looks at the pragma at all), so a
//! refusal there leaves nothing behind.
//!
//! batch_core installs one authorizer per connection, the first time it executes ops on it,
//! and keeps it: installing an authorizer expires every prepared statement of the connection,
//! so installing it per execution would re-compile the whole statement cache each time. It
//! allows everything, except while an op runs or its statement is compiled ([`OpScope`],
//! [`prepare_op`]); then it allows only what an op may do, and the op fails with `SQLITE_AUTH`
//! (23) and a message that says "refused, nothing happened", which object and why. The other
//! ops of a batch are not affected: a statement refused while it compiles never ran. The cost
//! is paid at compile time only: the executor reuses compiled statements (its batch's, and the
//! connection's statement cache), which SQLite does not authorize again.
//!
//! # What an op may do
//!
//! - Read and write the tables of the main schema (the database file): `INSERT`, `UPDATE`,
//!   `DELETE`, and `SELECT` inside them (a `SELECT` inside an `INSERT` is reported as
//!   `SQLITE_SELECT` and one `SQLITE_READ` per column it reads, and an unqualified table of its
//!   `FROM` whose columns it does not read as a `SQLITE_READ` without a schema: allowed unless
//!   the table is the library's).
//! - Change the main schema's own objects, since a controller's SQL arrives as ops too:
//!   create, alter and drop tables, indexes, views and triggers in main; `ANALYZE` and
//!   `REINDEX` of them. SQLite reports its own writes to the schema table (`sqlite_master`)
//!   when it compiles such a statement: allowed in main.
//! - Call functions (`SQLITE_FUNCTION`): a function computes a value inside the statement.
//!   Refused: `load_extension` (it loads code into the process; ic-rusqlite's SQLite omits it,
//!   the native one has it off unless the application turns it on) and `fts3_tokenizer` (its
//!   two-argument form registers a tokenizer by pointer when the application enables it).
//! - `PRAGMA` without an argument (a query, which the executor refuses to run anyway), and
//!   `PRAGMA user_version = n` / `application_id = n` of main: they are stored in the
//!   database header and written inside the transaction like any page.
//! - Transaction control other than `BEGIN` (`SQLITE_TRANSACTION` for `COMMIT` and `ROLLBACK`,
//!   `SQLITE_SAVEPOINT`): compiling it changes nothing, and the executor never runs it as an op
//!   (SQLite calls it read-only, and the executor refuses read-only statements as "not a write
//!   statement"). The executor's own `SAVEPOINT`, `RELEASE` and `ROLLBACK TO` of a unit, and
//!   its `ROLLBACK` after an error that may have left the transaction half-done, are compiled
//!   while the op runs, inside its scope: allowed for that reason.
//! - `AUTOINCREMENT`: SQLite reports nothing about `sqlite_sequence` for the counter it keeps
//!   itself (the code that reads and stores it is generated, not compiled from SQL), so an
//!   `INSERT` into such a table is authorized as the `INSERT` alone. A statement that names
//!   `sqlite_sequence` is a read or write of a main table and allowed: the counters are data of
//!   the database file, changed inside the transaction.
//!
//! # What an op may not do
//!
//! - Anything in the `temp` schema, however it is spelled (`CREATE TEMP TABLE`, `temp.t`,
//!   `"temp".t`, `TEMP.t`, an index on a temp table, a trigger `temp.t ... ON main.t`): it
//!   belongs to the connection, not to the database, and vanishes when the connection is
//!   reopened, at every upgrade of a canister. A temp table of a main table's name shadows it:
//!   every later write would be acknowledged and then lost. SQLite reports a temp object by the
//!   schema name `temp` in the report (a `CREATE TABLE temp.t` is `SQLITE_CREATE_TABLE` in
//!   schema `temp`, not `SQLITE_CREATE_TEMP_TABLE`), so the check is on the schema of every
//!   report, not on the `CREATE_TEMP_*` actions. A statement that creates or drops a temp table,
//!   view, index or virtual table first reports its write to the temp schema table, and the
//!   object itself right after: that write is let through so that the refusal can name the
//!   object, on the condition that the next report is refused whatever it is, and a statement
//!   that compiles without one is discarded from the statement cache and refused. A trigger
//!   `temp.t ON main.x` is reported as a trigger of main (its table's schema) followed by its
//!   write to the temp schema table, which is refused naming the trigger.
//! - Tables of another attached database (an op cannot attach one, but the application can).
//! - Virtual tables, created or dropped (`SQLITE_CREATE_VTABLE`, `SQLITE_DROP_VTABLE`), in any
//!   schema: a module runs code of its own on the connection when a table is created (shadow
//!   tables, reading the database's pages), not a table an op may make. Writes to virtual
//!   tables the application created are writes to main tables, and allowed.
//! - `BEGIN`, whatever its kind. SQLite calls `BEGIN IMMEDIATE` and `BEGIN EXCLUSIVE` writes
//!   (they take the write lock), so the executor would run them: alone, the op would leave a
//!   transaction open on the connection, which every later op would join, acknowledged and
//!   never committed, and every later flush would fail to begin. The authorizer reports every
//!   `BEGIN` alike, so every one is refused.
//! - `ATTACH` / `DETACH` (also what `VACUUM` does first when it runs, so `VACUUM` and
//!   `VACUUM INTO 'file'` are refused as `ATTACH`).
//! - A `PRAGMA` with an argument other than the two above, and any `PRAGMA` of another schema.
//! - Anything at all on the library's own tables, whose names start with
//!   [`RESERVED_PREFIX`] (`batch_core_`; today `batch_core_dedup_keys` and
//!   `batch_core_dedup_meta`): read, write, create, alter, drop, `ANALYZE`, an index or a
//!   trigger on them, an object of that name. They change only through the library, whose own
//!   statements run outside the op scope. An op that deleted the keys would make a resent batch
//!   run twice; one that dropped them or emptied the counters would make every keyed batch fail.
//!   A trigger or view the application created may reach them: its body is authorized when a
//!   statement that fires or reads it is compiled, with the trigger or view as the accessor, so
//!   the op is refused naming both.
//! - `dbstat` and `sqlite_dbpage`, read or written, in any schema: SQLite's virtual tables of
//!   page statistics and raw pages reach every table of the file, the library's included
//!   (`SELECT ... FROM dbstat WHERE name GLOB '*dedup_keys'` names no reserved table).
//!   ic-rusqlite's SQLite has `dbstat` but not `sqlite_dbpage` (an op naming it fails: no such
//!   table). The table-valued `pragma_*` functions show the schema of any table (the library's
//!   is public), never its rows.
//! - An action SQLite reports that is not listed here (a later SQLite's new action code).
//!
//! # The statement cache, and names SQLite does not report
//!
//! A compiled statement is authorized once: the connection's statement cache hands it out again
//! by its text, without asking the authorizer. The library prepares its own statements through
//! the same cache outside the op scope, so an op whose text equaled one of them (say, the
//! statement that deletes expired keys, with parameters of the op's choosing) would run it
//! unchecked. And `ALTER TABLE t RENAME TO x` reports the table, not the new name. Both are
//! closed by the text: an op statement that names the reserved prefix anywhere (at the start
//! of a word, in any case, quoted or not, even in a string literal or a comment) is refused
//! before it is compiled. Every statement the library caches that an op could not run itself
//! names the prefix: those on its tables, and the executor's `BEGIN IMMEDIATE TRANSACTION
//! batch_core_batch` (SQLite ignores the transaction's name); the rest are read-only (`COMMIT`,
//! `ROLLBACK`, the coalescer's checks), which the executor does not run as ops, or writes an op
//! may make (the coalescer's `sqlite_sequence` upkeep). Statements the application itself
//! prepares through the cache outside ops are its own: an op with the same text reuses them as
//! they were compiled.
//!
//! Replacing the connection's authorizer (rusqlite's `Connection::authorizer`) removes this
//! one; batch_core installs it again at its next execution. Statements the application runs
//! outside ops are not checked: a trigger fires with the authority of the statement that
//! fires it.

use std::cell::{Cell, RefCell};
use std::sync::Mutex;

use rusqlite::hooks::{AuthAction, AuthContext, Authorization, TransactionOperation};
use rusqlite::{CachedStatement, Connection, ffi};

#[cfg(test)]
mod tests;

/// The prefix of the library's own table names (and of any object it may add): reserved, an op
/// may not name or touch such an object.
pub(crate) const RESERVED_PREFIX: &str = "batch_core_";

/// Pragmas an op may set: values in the database header, written inside the transaction like
/// any page.
const TRANSACTIONAL_PRAGMAS: [&str; 2] = ["user_version", "application_id"];

/// SQLite's virtual tables that read the pages of every table, whatever the op's text names:
/// `dbstat` (page statistics) and `sqlite_dbpage` (the raw pages, writable).
const INTROSPECTION_TABLES: [&str; 2] = ["dbstat", "sqlite_dbpage"];

/// Functions an op may not call (see the module documentation).
const REFUSED_FUNCTIONS: [&str; 2] = ["load_extension", "fts3_tokenizer"];

/// The names SQLite reports for a schema's own table when it writes it.
const SCHEMA_TABLES: [&str; 4] = [
    "sqlite_master",
    "sqlite_temp_master",
    "sqlite_schema",
    "sqlite_temp_schema",
];

/// The connections (by handle) that have batch_core's authorizer. An entry is removed when its
/// authorizer is dropped (the connection closes, or its authorizer is replaced), so a handle
/// reused by a new connection is not mistaken for a guarded one.
static GUARDED: Mutex<Vec<usize>> = Mutex::new(Vec::new());

/// Why an op's statement was refused. Its text (`Display`) is the op's error message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Refusal {
    /// A `PRAGMA` with an argument that is not a header value.
    #[error(
        "refused, nothing happened: PRAGMA {pragma} with an argument changes the connection while it is compiled, outside any transaction (an op may only set user_version and application_id)"
    )]
    PragmaArgument { pragma: String },
    /// `BEGIN`: a transaction the op would leave open on the connection.
    #[error(
        "refused, nothing happened: BEGIN would open a transaction that outlives the op (an op runs inside the transaction of its batch, or of its own)"
    )]
    Begin,
    /// `ATTACH` or `DETACH` (or `VACUUM`, which attaches first).
    #[error(
        "refused, nothing happened: ATTACH and DETACH change the databases of the connection, not the data"
    )]
    AttachDetach,
    /// An object of the temp schema, by name (`temp.x`).
    #[error(
        "refused, nothing happened: {object} is in the temp schema, which belongs to the connection, not to the database, and vanishes when the connection is reopened (at every upgrade of a canister)"
    )]
    Temp { object: String },
    /// A change of the temp schema whose object SQLite did not name.
    #[error(
        "refused, nothing happened: the statement changes the temp schema, which belongs to the connection, not to the database, and vanishes when the connection is reopened (at every upgrade of a canister)"
    )]
    TempSchema,
    /// An object of a database the application attached (`schema.x`).
    #[error(
        "refused, nothing happened: {object} is in a database attached to the connection, not in the main database the ops write"
    )]
    Attached { object: String },
    /// Creating or dropping a virtual table.
    #[error(
        "refused, nothing happened: {object} is a virtual table (module {module}): an op may not create or drop one, as its module runs code of its own on the connection"
    )]
    VirtualTable { object: String, module: String },
    /// An object whose name starts with [`RESERVED_PREFIX`]; `via` is the trigger or view
    /// that reached it, if any.
    #[error(
        "refused, nothing happened: {name} belongs to the library (the prefix batch_core_ is reserved: its tables change only through the library){}",
        via.as_ref().map(|via| format!(", reached through {via}")).unwrap_or_default()
    )]
    Reserved { name: String, via: Option<String> },
    /// A virtual table that reads (or writes) the pages of every table, the library's included.
    #[error(
        "refused, nothing happened: {table} reaches the pages of every table, the library's included"
    )]
    Introspection { table: String },
    /// A function that reaches outside the database.
    #[error(
        "refused, nothing happened: {function}() reaches outside the database (it loads code or registers a tokenizer)"
    )]
    Function { function: String },
    /// An action this allow-list does not know.
    #[error(
        "refused, nothing happened: SQLite asked about {action}, which is not among what an op may do"
    )]
    Unknown { action: String },
}

/// What the authorizer saw of the statement being compiled.
#[derive(Debug, Default)]
struct Compile {
    /// A write to the temp schema's table was let through: the next report is refused.
    temp_schema_write: bool,
    /// The trigger the statement creates, as SQLite reported it (in its table's schema).
    trigger: Option<String>,
    /// The statement alters a table of main: SQLite rewrites the temp schema's triggers and
    /// views that name it.
    altering: bool,
}

impl Compile {
    /// Forgets the last statement (without touching memory that holds nothing).
    fn reset(&mut self) {
        self.temp_schema_write = false;
        self.altering = false;
        if self.trigger.is_some() {
            self.trigger = None;
        }
    }
}

thread_local! {
    /// An op's statement is being compiled or run on this thread: the authorizer allows only
    /// what an op may do.
    static IN_OP: Cell<bool> = const { Cell::new(false) };
    /// Why the authorizer refused the last statement, since the running op started.
    static REFUSED: RefCell<Option<Refusal>> = const { RefCell::new(None) };
    /// The statement being compiled, as far as the authorizer saw it.
    static COMPILE: RefCell<Compile> = const {
        RefCell::new(Compile {
            temp_schema_write: false,
            trigger: None,
            altering: false,
        })
    };
}

/// Owned by the installed authorizer: removes the connection from [`GUARDED`] when SQLite's
/// authorizer is dropped.
struct Registration(usize);

impl Drop for Registration {
    fn drop(&mut self) {
        let mut guarded = GUARDED
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        guarded.retain(|&handle| handle != self.0);
    }
}

/// Installs batch_core's authorizer on `conn` unless it has it already. Cost: a lock and a scan
/// of the guarded connections (usually one); the first time, SQLite also expires the
/// connection's prepared statements (they are compiled again when next used).
///
/// Fails only on a connection rusqlite does not own (one made from a raw handle).
pub(crate) fn ensure_guarded(conn: &Connection) -> rusqlite::Result<()> {
    // SAFETY: the handle is only compared, never dereferenced.
    let handle = unsafe { conn.handle() } as usize;
    {
        let mut guarded = GUARDED
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if guarded.contains(&handle) {
            return Ok(());
        }
        guarded.push(handle);
    }
    // Created after the push, so that a failure below (which drops the closure) removes it
    // again; the lock is released first, as replacing an authorizer drops the old one.
    let registration = Registration(handle);
    conn.authorizer(Some(move |context: AuthContext<'_>| {
        let _owner = &registration;
        decide(&context)
    }))
}

/// The authorizer's decision (see the module documentation).
fn decide(context: &AuthContext<'_>) -> Authorization {
    if !IN_OP.get() {
        return Authorization::Allow;
    }
    let verdict = judge(context);
    let pending = COMPILE.with_borrow_mut(|compile| std::mem::take(&mut compile.temp_schema_write));
    let refusal = match (verdict, pending) {
        (Ok(()), false) => return Authorization::Allow,
        (Err(Verdict::Tentative), false) => {
            COMPILE.with_borrow_mut(|compile| compile.temp_schema_write = true);
            return Authorization::Allow;
        }
        (Err(Verdict::Refused(refusal)), _) => refusal,
        // After a write to the temp schema's table SQLite reports the object: refused,
        // whatever it is.
        (_, true) => Refusal::TempSchema,
    };
    COMPILE.set(Compile::default());
    // The first refusal of the statement names it (SQLite may go on asking, about the other
    // tables of an `ANALYZE`, say).
    REFUSED.with_borrow_mut(|refused| {
        refused.get_or_insert(refusal);
    });
    Authorization::Deny
}

/// Why [`judge`] did not simply allow a report.
enum Verdict {
    /// Refused.
    Refused(Refusal),
    /// A write to the temp schema's table with no object named yet: allowed, and the next
    /// report refused (see the module documentation).
    Tentative,
}

impl From<Refusal> for Verdict {
    fn from(refusal: Refusal) -> Self {
        Verdict::Refused(refusal)
    }
}

/// The allow-list: `Ok` for what an op may do.
fn judge(context: &AuthContext<'_>) -> Result<(), Verdict> {
    let schema = context.database_name;
    let via = context.accessor;
    match context.action {
        // Renaming a table or column of main, SQLite also rewrites the SQL text of the temp
        // schema's triggers and views that name it: its own upkeep, which creates nothing.
        AuthAction::Read {
            table_name: name, ..
        }
        | AuthAction::Update {
            table_name: name, ..
        } if is_temp(schema)
            && is_schema_table(name)
            && COMPILE.with_borrow(|compile| compile.altering) =>
        {
            Ok(())
        }
        AuthAction::Transaction {
            operation: TransactionOperation::Begin,
        } => Err(Refusal::Begin.into()),
        AuthAction::Select
        | AuthAction::Recursive
        | AuthAction::Transaction { .. }
        | AuthAction::Savepoint { .. } => Ok(()),
        AuthAction::Function { function_name } => {
            if REFUSED_FUNCTIONS
                .iter()
                .any(|f| f.eq_ignore_ascii_case(function_name))
            {
                Err(Refusal::Function {
                    function: function_name.to_owned(),
                }
                .into())
            } else {
                Ok(())
            }
        }
        AuthAction::Pragma {
            pragma_name,
            pragma_value,
        } => pragma(schema, pragma_name, pragma_value).map_err(Verdict::from),
        AuthAction::Attach { .. } | AuthAction::Detach { .. } => Err(Refusal::AttachDetach.into()),
        AuthAction::CreateVtable {
            table_name,
            module_name,
        }
        | AuthAction::DropVtable {
            table_name,
            module_name,
        } => {
            reserved(table_name, via)?;
            Err(Refusal::VirtualTable {
                object: qualified(schema, table_name),
                module: module_name.to_owned(),
            }
            .into())
        }
        AuthAction::CreateTempTable { table_name: name }
        | AuthAction::DropTempTable { table_name: name }
        | AuthAction::CreateTempView { view_name: name }
        | AuthAction::DropTempView { view_name: name }
        | AuthAction::CreateTempIndex {
            index_name: name, ..
        }
        | AuthAction::DropTempIndex {
            index_name: name, ..
        }
        | AuthAction::CreateTempTrigger {
            trigger_name: name, ..
        }
        | AuthAction::DropTempTrigger {
            trigger_name: name, ..
        } => {
            reserved(name, via)?;
            Err(Refusal::Temp {
                object: format!("temp.{name}"),
            }
            .into())
        }
        AuthAction::CreateTable { table_name: name }
        | AuthAction::DropTable { table_name: name }
        | AuthAction::CreateView { view_name: name }
        | AuthAction::DropView { view_name: name }
        | AuthAction::Analyze { table_name: name }
        | AuthAction::Reindex { index_name: name }
        | AuthAction::Read {
            table_name: name, ..
        }
        | AuthAction::Update {
            table_name: name, ..
        } => object(schema, name, via),
        AuthAction::CreateIndex {
            index_name,
            table_name,
        }
        | AuthAction::DropIndex {
            index_name,
            table_name,
        } => {
            object(schema, table_name, via)?;
            object(schema, index_name, via)
        }
        AuthAction::CreateTrigger {
            trigger_name,
            table_name,
        } => {
            object(schema, table_name, via)?;
            object(schema, trigger_name, via)?;
            COMPILE.with_borrow_mut(|compile| compile.trigger = Some(trigger_name.to_owned()));
            Ok(())
        }
        AuthAction::DropTrigger {
            trigger_name,
            table_name,
        } => {
            object(schema, table_name, via)?;
            object(schema, trigger_name, via)
        }
        AuthAction::AlterTable {
            database_name,
            table_name,
        } => {
            object(Some(database_name), table_name, via)?;
            COMPILE.with_borrow_mut(|compile| compile.altering = true);
            Ok(())
        }
        AuthAction::Insert { table_name } | AuthAction::Delete { table_name }
            if is_temp(schema) && is_schema_table(table_name) =>
        {
            // The statement creates or drops a temp object; SQLite names it next, except a
            // trigger, which it named before.
            match COMPILE.with_borrow_mut(|compile| compile.trigger.take()) {
                Some(trigger) => Err(Refusal::Temp {
                    object: format!("temp.{trigger}"),
                }
                .into()),
                None => Err(Verdict::Tentative),
            }
        }
        AuthAction::Insert { table_name } | AuthAction::Delete { table_name } => {
            object(schema, table_name, via)
        }
        AuthAction::Unknown { code, .. } => Err(Refusal::Unknown {
            action: format!("action code {code}"),
        }
        .into()),
        other => Err(Refusal::Unknown {
            action: format!("{other:?}"),
        }
        .into()),
    }
}

/// A `PRAGMA` an op may run: of main (or unqualified), without an argument unless it sets a
/// header value.
fn pragma(schema: Option<&str>, name: &str, value: Option<&str>) -> Result<(), Refusal> {
    in_main(schema, &format!("PRAGMA {}", qualified(schema, name)))?;
    if value.is_some()
        && !TRANSACTIONAL_PRAGMAS
            .iter()
            .any(|p| p.eq_ignore_ascii_case(name))
    {
        return Err(Refusal::PragmaArgument {
            pragma: name.to_owned(),
        });
    }
    Ok(())
}

/// An object an op may touch: not the library's, and in main (or of an unqualified name whose
/// schema SQLite reports elsewhere).
fn object(schema: Option<&str>, name: &str, via: Option<&str>) -> Result<(), Verdict> {
    reserved(name, via)?;
    if INTROSPECTION_TABLES
        .iter()
        .any(|t| t.eq_ignore_ascii_case(name))
    {
        return Err(Refusal::Introspection {
            table: name.to_owned(),
        }
        .into());
    }
    in_main(schema, &qualified(schema, name))?;
    Ok(())
}

fn reserved(name: &str, via: Option<&str>) -> Result<(), Refusal> {
    // An index SQLite made for a constraint is named after its table.
    let table = name.strip_prefix("sqlite_autoindex_").unwrap_or(name);
    if is_reserved(table) {
        return Err(Refusal::Reserved {
            name: name.to_owned(),
            via: via.map(str::to_owned),
        });
    }
    Ok(())
}

/// `object` (as the refusal names it) is in the main schema, or SQLite did not say.
fn in_main(schema: Option<&str>, object: &str) -> Result<(), Refusal> {
    match schema {
        None => Ok(()),
        Some(s) if s.eq_ignore_ascii_case("main") => Ok(()),
        Some(s) if s.eq_ignore_ascii_case("temp") => Err(Refusal::Temp {
            object: object.to_owned(),
        }),
        Some(_) => Err(Refusal::Attached {
            object: object.to_owned(),
        }),
    }
}

fn is_temp(schema: Option<&str>) -> bool {
    schema.is_some_and(|s| s.eq_ignore_ascii_case("temp"))
}

fn is_schema_table(name: &str) -> bool {
    SCHEMA_TABLES.iter().any(|t| t.eq_ignore_ascii_case(name))
}

/// `schema.name`, or `name` when SQLite gave no schema.
fn qualified(schema: Option<&str>, name: &str) -> String {
    match schema {
        Some(schema) => format!("{schema}.{name}"),
        None => name.to_owned(),
    }
}

/// Whether `name` starts with [`RESERVED_PREFIX`] (ASCII case-insensitively, as SQLite
/// compares names).
fn is_reserved(name: &str) -> bool {
    name.as_bytes()
        .get(..RESERVED_PREFIX.len())
        .is_some_and(|head| head.eq_ignore_ascii_case(RESERVED_PREFIX.as_bytes()))
}

/// A byte that continues an SQL identifier (SQLite's tokenizer: letters, digits, `_`, `$` and
/// every byte of a non-ASCII character).
fn is_ident_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'$' || b >= 0x80
}

/// The first word of `sql` that starts with [`RESERVED_PREFIX`] (ASCII case-insensitively, at
/// the start of a word), as written. Cost: a word-at-a-time search for `_` (the standard
/// library's `memchr`), and a comparison at each underscore; most statements have a few.
fn reserved_word_in(sql: &str) -> Option<&str> {
    let bytes = sql.as_bytes();
    let prefix = RESERVED_PREFIX.as_bytes();
    // The prefix's first underscore ("batch_"), where the search lands.
    const AT: usize = 5;
    // Always just after an underscore (or 0): a character boundary.
    let mut from = 0;
    while let Some(found) = sql[from..].find('_') {
        let underscore = from + found;
        from = underscore + 1;
        let Some(start) = underscore.checked_sub(AT) else {
            continue;
        };
        if bytes.len() - start >= prefix.len()
            && bytes[start..start + prefix.len()].eq_ignore_ascii_case(prefix)
            && (start == 0 || !is_ident_byte(bytes[start - 1]))
        {
            let len = bytes[start..]
                .iter()
                .take_while(|&&b| is_ident_byte(b))
                .count();
            // Starts at an ASCII byte and ends before one (or at the end): character
            // boundaries.
            return sql.get(start..start + len);
        }
    }
    None
}

/// Records `refusal` as the running op's and returns the error the executor reports it by.
fn refuse(refusal: Refusal) -> rusqlite::Error {
    let message = refusal.to_string();
    REFUSED.set(Some(refusal));
    rusqlite::Error::SqliteFailure(ffi::Error::new(ffi::SQLITE_AUTH), Some(message))
}

/// Prepares an op's statement through the connection's statement cache, as an op may: refused
/// before it is compiled if its text names the reserved prefix (see the module documentation),
/// compiled under the op scope's allow-list, and discarded rather than cached if it compiled
/// with a change of the temp schema that SQLite did not name. A refusal is an `SQLITE_AUTH`
/// error whose reason [`take_refusal`] gives.
///
/// Cost on top of `prepare_cached`: one pass over the text and two thread-local writes.
pub(crate) fn prepare_op<'c>(
    conn: &'c Connection,
    sql: &str,
) -> rusqlite::Result<CachedStatement<'c>> {
    if let Some(word) = reserved_word_in(sql) {
        return Err(refuse(Refusal::Reserved {
            name: word.to_owned(),
            via: None,
        }));
    }
    let _scope = InOp::enter();
    REFUSED.with_borrow_mut(|refused| *refused = None);
    COMPILE.with_borrow_mut(Compile::reset);
    let statement = conn.prepare_cached(sql)?;
    if COMPILE.with_borrow_mut(|compile| std::mem::take(&mut compile.temp_schema_write)) {
        statement.discard();
        return Err(refuse(Refusal::TempSchema));
    }
    Ok(statement)
}

/// Sets [`IN_OP`] while alive, and restores it when dropped.
struct InOp {
    previous: bool,
}

impl InOp {
    fn enter() -> Self {
        InOp {
            previous: IN_OP.replace(true),
        }
    }
}

impl Drop for InOp {
    fn drop(&mut self) {
        IN_OP.set(self.previous);
    }
}

/// While alive, an op runs on this thread: the authorizer allows only what an op may do.
/// Nests (restores the previous state when dropped).
pub(crate) struct OpScope {
    _in_op: InOp,
}

impl OpScope {
    /// Starts an op: forgets an earlier refusal.
    pub(crate) fn enter() -> Self {
        REFUSED.set(None);
        COMPILE.set(Compile::default());
        OpScope {
            _in_op: InOp::enter(),
        }
    }
}

/// Why the authorizer refused a statement of the running op, if it did (taken: asked once).
pub(crate) fn take_refusal() -> Option<String> {
    REFUSED.take().map(|refusal| refusal.to_string())
}
