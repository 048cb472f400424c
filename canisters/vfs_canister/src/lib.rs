//! The peer of the reference canister (`src/bench_canister`): the same users/orders schema
//! (`bench_api::schema::SCHEMA`), fixture and write paths, with SQLite on `ic-sqlite-vfs`
//! instead of `ic-rusqlite`. SQLite's pager reads and writes pages of an image kept in one
//! MemoryManager virtual memory ([`SQLITE_MEMORY_ID`]) through the crate's `icstable` VFS: no
//! WASI, no ic-wasi-polyfill, no stable-fs file layer.
//!
//! Durability is the crate's ([`ic_sqlite_vfs::db::pragmas`], applied on every write
//! connection): `journal_mode=MEMORY`, `synchronous=OFF`, `locking_mode=EXCLUSIVE`,
//! `foreign_keys=ON`, `temp_store=MEMORY`, a 32 MiB page cache, and 16 KiB pages (set on the
//! empty image). During an update the VFS keeps written pages in a heap overlay; SQLite's
//! `COMMIT` then writes the dirty pages in place and a superblock publishes the new image. A
//! trap rolls the whole message back, so the journal never needs to reach stable memory. The
//! reference keeps a `PERSIST` rollback journal in stable-fs, `locking_mode=EXCLUSIVE`, 4 KiB
//! pages and no foreign-key enforcement (`bench_api::schema::PRAGMAS`).
//!
//! Write paths, as the reference's:
//! - one call per write (`create_user`, `create_order`, `update_order_amount`,
//!   `delete_user_orders`): the op alone in its own transaction;
//! - one transaction per client batch (`execute_batch`, Candid; `execute_batch_packed`,
//!   `bench_api::packed`): the ops in order, a failing op undone alone by SQLite's
//!   statement-level atomicity while the others commit. Unkeyed only: the reference's
//!   exactly-once key store is `ic_rusqlite_batch::keyed`, built on rusqlite, so a keyed batch is
//!   refused `Invalid` here and nothing of it runs.
//!
//! There is no write queue (`submit_*`, `flush`): batch_core and ic-rusqlite-batch are written
//! for rusqlite. Only controllers may write; queries are open.
#![cfg(target_arch = "wasm32")]
// ^ ic-sqlite-vfs builds only for wasm32-unknown-unknown. Natively the crate is empty, so that
// `cargo test` can run its tests/ against the built wasm.

use std::cell::RefCell;
use std::ffi::{c_int, c_void};

use bench_api::schema::{
    DELETE_USER_ORDERS, INSERT_ORDER, INSERT_USER, SCHEMA, UPDATE_ORDER_AMOUNT,
};
use bench_api::{
    BatchKey, BatchResult, Counts, CountsResult, MAX_CLIENT_BATCH, OpError, Outcome, PackedResult,
    QueryError, SqlParam, SqlStatement, UserOrderOp, WriteError, WriteResult,
};
use candid::CandidType;
use ic_sqlite_vfs::db::connection::Connection;
use ic_sqlite_vfs::db::{ToSql, Value};
use ic_sqlite_vfs::{Db, DbError, DefaultMemoryImpl, MemoryId, MemoryManager};

#[cfg(feature = "canbench-rs")]
mod benches;

/// The virtual memory of the SQLite image: the crate's convention for a fresh single-database
/// canister (its README). The canister uses no other.
pub const SQLITE_MEMORY_ID: MemoryId = MemoryId::new(120);

thread_local! {
    static MEMORY_MANAGER: RefCell<MemoryManager<DefaultMemoryImpl>> = RefCell::new(
        MemoryManager::init_strict(DefaultMemoryImpl::default())
            .expect("stable memory is empty or holds a MemoryManager layout"),
    );
}

// SQLite's C API, for what the crate's facade does not expose (the symbols are those of the
// SQLite archive ic-sqlite-vfs links).
unsafe extern "C" {
    fn sqlite3_last_insert_rowid(db: *mut c_void) -> i64;
    fn sqlite3_set_last_insert_rowid(db: *mut c_void, rowid: i64);
    fn sqlite3_total_changes64(db: *mut c_void) -> i64;
    fn sqlite3_changes64(db: *mut c_void) -> i64;
    fn sqlite3_extended_errcode(db: *mut c_void) -> c_int;
}

fn raw(conn: &Connection) -> *mut c_void {
    conn.raw().cast()
}

/// Opens the image in [`SQLITE_MEMORY_ID`] and runs [`SCHEMA`] (idempotent: `IF NOT EXISTS`),
/// at install and at every upgrade, as the reference does.
fn open() {
    MEMORY_MANAGER
        .with(|m| Db::init(m.borrow().get(SQLITE_MEMORY_ID)))
        .unwrap_or_else(|e| ic_cdk::trap(format!("opening the SQLite image: {e}")));
    Db::update(|c| c.execute_batch(SCHEMA))
        .unwrap_or_else(|e| ic_cdk::trap(format!("the schema: {e}")));
}

#[ic_cdk::init]
fn init() {
    open();
}

#[ic_cdk::post_upgrade]
fn post_upgrade() {
    open();
}

/// Admits controllers only (before the argument is decoded).
fn controller() -> Result<(), String> {
    if ic_cdk::api::is_controller(&ic_cdk::api::msg_caller()) {
        Ok(())
    } else {
        Err("only controllers may write".into())
    }
}

// ---- executing ops ----

/// The SQL of `op` (the reference's, `bench_api::schema`).
fn sql_of(op: &UserOrderOp) -> &'static str {
    match op {
        UserOrderOp::CreateUser { .. } => INSERT_USER,
        UserOrderOp::CreateOrder { .. } => INSERT_ORDER,
        UserOrderOp::UpdateOrderAmount { .. } => UPDATE_ORDER_AMOUNT,
        UserOrderOp::DeleteUserOrders { .. } => DELETE_USER_ORDERS,
    }
}

/// Runs `op` inside the open transaction with its cached statement. A failing statement is
/// undone by SQLite (statement-level atomicity), the transaction stays open.
pub(crate) fn run_op(conn: &Connection, op: &UserOrderOp) -> Outcome {
    let mut stmt = match conn.prepare_cached(sql_of(op)) {
        Ok(stmt) => stmt,
        Err(e) => return Outcome::Failed(op_error(conn, e)),
    };
    let result = match op {
        UserOrderOp::CreateUser { username, email } => {
            stmt.execute(ic_sqlite_vfs::params![username.as_str(), email.as_str()])
        }
        UserOrderOp::CreateOrder { user_id, amount } => {
            stmt.execute(ic_sqlite_vfs::params![*user_id, *amount])
        }
        UserOrderOp::UpdateOrderAmount { order_id, amount } => {
            stmt.execute(ic_sqlite_vfs::params![*order_id, *amount])
        }
        UserOrderOp::DeleteUserOrders { user_id } => stmt.execute(ic_sqlite_vfs::params![*user_id]),
    };
    drop(stmt);
    outcome_of(conn, result)
}

/// What a statement did, as the reference reports it: rows changed (0 when it changed none),
/// the rowid it inserted (0 if none).
fn outcome_of(conn: &Connection, result: Result<(), DbError>) -> Outcome {
    match result {
        Ok(()) => unsafe {
            Outcome::Committed {
                rows_changed: sqlite3_changes64(raw(conn)) as u64,
                last_insert_rowid: sqlite3_last_insert_rowid(raw(conn)),
            }
        },
        Err(e) => Outcome::Failed(op_error(conn, e)),
    }
}

/// Runs `f` with the connection's counters reset, so that [`outcome_of`] reports only its work.
fn fresh<T>(conn: &Connection, f: impl FnOnce() -> T) -> (T, bool) {
    let before = unsafe {
        sqlite3_set_last_insert_rowid(raw(conn), 0);
        sqlite3_total_changes64(raw(conn))
    };
    let value = f();
    let changed = unsafe { sqlite3_total_changes64(raw(conn)) } != before;
    (value, changed)
}

/// [`run_op`] with its counters fresh: `rows_changed` is 0 for a statement that changed nothing
/// (`sqlite3_changes64` would repeat the previous statement's).
pub(crate) fn run_fresh(conn: &Connection, op: &UserOrderOp) -> Outcome {
    let (outcome, changed) = fresh(conn, || run_op(conn, op));
    match outcome {
        Outcome::Committed {
            last_insert_rowid, ..
        } if !changed => Outcome::Committed {
            rows_changed: 0,
            last_insert_rowid,
        },
        other => other,
    }
}

/// SQLite's extended code (1299 `SQLITE_CONSTRAINT_NOTNULL`, 787 `..._FOREIGNKEY`, ...) and
/// message, at most 1 KiB as the reference's.
fn op_error(conn: &Connection, e: DbError) -> OpError {
    let code = match &e {
        DbError::Sqlite(_, _) | DbError::Constraint(_) => unsafe {
            sqlite3_extended_errcode(raw(conn))
        },
        _ => 1, // SQLITE_ERROR: the facade refused before SQLite ran.
    };
    let mut message = match e {
        DbError::Sqlite(_, m) | DbError::Constraint(m) => m,
        other => other.to_string(),
    };
    if message.len() > 1024 {
        let mut end = 1024;
        while !message.is_char_boundary(end) {
            end -= 1;
        }
        message.truncate(end);
    }
    OpError { code, message }
}

fn database(e: DbError) -> WriteError {
    WriteError::Database(e.to_string())
}

/// One op in a transaction of its own (the unbatched path).
pub(crate) fn write_now(op: &UserOrderOp) -> Result<Outcome, WriteError> {
    op.validate().map_err(WriteError::Invalid)?;
    Db::update(|c| Ok(run_fresh(c, op))).map_err(database)
}

/// The ops in one transaction (the client-batch path), after the interface's limits. If an
/// error ends SQLite's transaction (none of the workload's can: a constraint undoes only its
/// statement), `COMMIT` fails and the whole batch is refused `Database`, nothing applied.
pub(crate) fn run_batch(ops: &[UserOrderOp]) -> Result<Vec<Outcome>, WriteError> {
    if ops.len() > MAX_CLIENT_BATCH {
        return Err(WriteError::Invalid(format!(
            "{} ops in one batch; the limit is {MAX_CLIENT_BATCH}",
            ops.len()
        )));
    }
    for (i, op) in ops.iter().enumerate() {
        op.validate()
            .map_err(|e| WriteError::Invalid(format!("op {i}: {e}")))?;
    }
    if ops.is_empty() {
        return Ok(Vec::new());
    }
    Db::update(|c| Ok(ops.iter().map(|op| run_fresh(c, op)).collect())).map_err(database)
}

/// The packed reply to an unkeyed packed request (`bench_api::packed`, version 1).
pub(crate) fn packed_batch(packed: &[u8]) -> Result<Vec<u8>, WriteError> {
    if packed.first() == Some(&bench_api::packed::KEYED_VERSION) {
        return Err(keyed_refused());
    }
    let ops = bench_api::packed::decode_ops(packed, MAX_CLIENT_BATCH)
        .map_err(|e| WriteError::Invalid(e.to_string()))?;
    Ok(bench_api::packed::encode_outcomes(&run_batch(&ops)?))
}

fn keyed_refused() -> WriteError {
    WriteError::Invalid(
        "keyed (exactly-once) batches are not supported by this canister; send the batch without a key".into(),
    )
}

// ---- one call per write ----

#[ic_cdk::update(guard = "controller")]
fn create_user(username: String, email: String) -> WriteResult {
    write_now(&UserOrderOp::CreateUser { username, email }).into()
}

#[ic_cdk::update(guard = "controller")]
fn create_order(user_id: i64, amount: f64) -> WriteResult {
    write_now(&UserOrderOp::CreateOrder { user_id, amount }).into()
}

#[ic_cdk::update(guard = "controller")]
fn update_order_amount(order_id: i64, amount: f64) -> WriteResult {
    write_now(&UserOrderOp::UpdateOrderAmount { order_id, amount }).into()
}

#[ic_cdk::update(guard = "controller")]
fn delete_user_orders(user_id: i64) -> WriteResult {
    write_now(&UserOrderOp::DeleteUserOrders { user_id }).into()
}

// ---- one transaction per client batch ----

/// A client batch in one transaction; with a key it is refused (see the crate docs).
#[ic_cdk::update(guard = "controller")]
fn execute_batch(ops: Vec<UserOrderOp>, key: Option<BatchKey>) -> BatchResult {
    if key.is_some() {
        return BatchResult::Err(keyed_refused());
    }
    match run_batch(&ops) {
        Ok(outcomes) => BatchResult::Ok(outcomes),
        Err(e) => BatchResult::Err(e),
    }
}

/// `execute_batch` with the ops and outcomes packed (`bench_api::packed`).
#[ic_cdk::update(guard = "controller")]
fn execute_batch_packed(ops: serde_bytes::ByteBuf) -> PackedResult {
    packed_batch(&ops).map(serde_bytes::ByteBuf::from).into()
}

/// Controller SQL (as the reference's `execute_sql`): the statements in one transaction, all
/// or nothing; the outcome of the last one.
#[ic_cdk::update(guard = "controller")]
fn execute_sql(statements: Vec<SqlStatement>) -> WriteResult {
    if statements.is_empty() {
        return WriteResult::Err(WriteError::Invalid("no statement".into()));
    }
    let result = Db::update(|c| {
        let mut last = Outcome::Committed {
            rows_changed: 0,
            last_insert_rowid: 0,
        };
        for s in &statements {
            let values: Vec<Value<'_>> = s.params.iter().map(value_of).collect();
            let refs: Vec<&dyn ToSql> = values.iter().map(|v| v as &dyn ToSql).collect();
            let (result, changed) = fresh(c, || c.prepare(&s.sql)?.execute(&refs));
            // An error rolls the whole transaction back (Db::update on Err).
            result?;
            last = outcome_of(c, Ok(()));
            if !changed && let Outcome::Committed { rows_changed, .. } = &mut last {
                *rows_changed = 0;
            }
        }
        Ok(last)
    });
    match result {
        Ok(outcome) => WriteResult::Ok(outcome),
        Err(e) => WriteResult::Ok(Outcome::Failed(OpError {
            code: match &e {
                DbError::Constraint(_) => 19,
                DbError::Sqlite(code, _) => *code,
                _ => 1,
            },
            message: e.to_string(),
        })),
    }
}

fn value_of(p: &SqlParam) -> Value<'_> {
    match p {
        SqlParam::Null => Value::Null,
        SqlParam::Integer(v) => Value::Integer(*v),
        SqlParam::Real(v) => Value::Real(*v),
        SqlParam::Text(v) => Value::Text(v),
        SqlParam::Blob(v) => Value::Blob(v),
    }
}

// ---- queries ----

fn query_error(e: DbError) -> QueryError {
    QueryError::Database(e.to_string())
}

fn count(conn: &Connection, table: &str) -> Result<u64, DbError> {
    conn.query_scalar::<i64>(&format!("SELECT COUNT(*) FROM {table}"), &[])
        .map(|n| n as u64)
}

#[ic_cdk::query]
fn counts() -> CountsResult {
    Db::query(|c| {
        Ok(Counts {
            users: count(c, "users")?,
            orders: count(c, "orders")?,
        })
    })
    .map_err(query_error)
    .into()
}

/// The SQLite image's geometry.
#[derive(CandidType, serde::Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct DbInfo {
    /// SQLite's page size in bytes (16,384 on an image this canister created).
    pub page_size: u64,
    /// Pages of the database (SQLite's `page_count`).
    pub page_count: u64,
    /// Free pages inside it.
    pub freelist_count: u64,
    /// Bytes of the canister's stable memory (all virtual memories and the MemoryManager's
    /// buckets of 8 MiB).
    pub stable_memory_bytes: u64,
}

/// The result of `db_info`.
#[derive(CandidType, serde::Deserialize, Clone, Debug, PartialEq, Eq)]
pub enum DbInfoResult {
    /// Success.
    Ok(DbInfo),
    /// The database answered an error.
    Err(QueryError),
}

#[ic_cdk::query]
fn db_info() -> DbInfoResult {
    Db::query(|c| {
        let pragma = |name: &str| {
            c.query_scalar::<i64>(&format!("PRAGMA {name}"), &[])
                .map(|v| v as u64)
        };
        Ok(DbInfo {
            page_size: pragma("page_size")?,
            page_count: pragma("page_count")?,
            freelist_count: pragma("freelist_count")?,
            stable_memory_bytes: ic_cdk::stable::stable_size() * 65_536,
        })
    })
    .map_or_else(|e| DbInfoResult::Err(query_error(e)), DbInfoResult::Ok)
}

ic_cdk::export_candid!();
