//! Schema checks: whether a table's multi-row INSERTs behave exactly as its single-row ones
//! ([`check_table`]), and the key under which those checks stay valid ([`schema_key`]).

use std::sync::Arc;

use rusqlite::{Connection, ffi};

use super::shape::{Shape, is_ident_byte};

/// What the coalescer needs to know about a table it may insert into.
#[derive(Debug, Clone)]
pub(crate) struct Table {
    /// The name as stored in `sqlite_schema` (and `sqlite_sequence`), shared: the table is
    /// looked up for every chunk.
    pub(super) name: Arc<str>,
    /// Declared `AUTOINCREMENT`.
    pub(super) autoincrement: bool,
}

/// A connection (its handle's address) and the versions of its main and temp schemas: SQLite
/// increments a schema's `schema_version` on every change of it (a table, index or trigger
/// created, altered or dropped), also inside a transaction, and restores it on rollback.
pub(super) type SchemaKey = (usize, i64, i64);

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
    pub(super) autoincrement: bool,
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
pub(super) fn may_reference_itself(upper: &str, table: &str) -> bool {
    upper.match_indices("REFERENCES").any(|(at, keyword)| {
        let rest = upper[at + keyword.len()..].trim_start();
        let target_len = rest.bytes().take_while(|&b| is_ident_byte(b)).count();
        target_len == 0 || rest[..target_len].eq_ignore_ascii_case(table)
    })
}

/// Whether the multi-row INSERTs of `shape` behave exactly as its single-row ones (see the
/// module documentation); `Ok(None)` if not. One query of the schema tables and SQLite's
/// column metadata: the first flush after a start or upgrade pays for it, later ones keep it.
pub(super) fn check_table(conn: &Connection, shape: &Shape) -> rusqlite::Result<Option<Table>> {
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
pub(super) fn schema_key(conn: &Connection) -> rusqlite::Result<SchemaKey> {
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
