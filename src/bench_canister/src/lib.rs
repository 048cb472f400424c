//! The reference canister: SQLite (ic-rusqlite) in stable memory, the workload of the
//! ic-rusqlite users/orders benchmark, and a Candid API that writes either at once (unbatched:
//! one autocommit transaction per call) or through a [`batch_core::BatchQueue`] flushed in one
//! transaction.
//!
//! The interface is documented in `bench_canister.did` and its types live in the `bench_api`
//! crate; the queue, its timer and watchdog, settings, access control and the state kept across
//! upgrades are `ic_rusqlite_batch`'s (whose Candid types `bench_api` re-exports). The canister
//! is built on the library's front door as any other: its lifecycle hooks and standard methods
//! are `canister_methods!`'s, its exactly-once client batches of the declared writes
//! (`bench_api::writes::UserOrderWrite`) are `client_batches!`'s, and its own keyed batches
//! (`execute_batch`, `execute_batch_packed`) run through
//! `ic_rusqlite_batch::canister::execute_batch_keyed`.
//! What it writes by hand is what the benchmark measures beside them: one call per write
//! (`create_*`) and the queue (`submit_*`) with hand-written Candid codecs, and the
//! hand-written packed batch (`bench_api::packed`). Every update method checks its caller
//! against its class in `bench_api::METHODS` before it reads its argument
//! (`ic_rusqlite_batch::canister::authorized`, or `ic_rusqlite_batch::update!` which calls it),
//! and every query is guarded by `ic_rusqlite_batch::canister::query_guard`.
#![cfg(target_arch = "wasm32")]
// ^ The canister only builds for wasm32 (ic-rusqlite refuses other targets). Natively the crate is
// empty, so that `cargo test` at the top level can run its tests/ against the built wasm.

use batch_core::{SqlValue, Statement, WriteOp};
use bench_api::writes::UserOrderWrite;
use bench_api::{
    BatchResult, Counts, CountsResult, MAX_CLIENT_BATCH, MAX_QUERY_ROWS, MAX_SINGLE_OP_ARG_BYTES,
    MIN_FLUSH_BUDGET, MIN_PENDING_BYTES, Order, OrdersResult, Outcome, SqlParam, SqlStatement,
    SubmitResult, Ticket, User, UserOrder, UserOrderOp, UserOrdersResult, UsersResult, WriteError,
    WriteResult,
};
use ic_rusqlite_batch::access::Interface;
use ic_rusqlite_batch::keyed::{KeyedBatch, KeyedOutcomes};
use ic_rusqlite_batch::settings::Floors;
use ic_rusqlite_batch::{self as batch, canister};
#[cfg(feature = "canbench-rs")]
use {batch_core::Owner, canister::Origin};

mod workload;

#[cfg(feature = "canbench-rs")]
mod benches;
#[cfg(all(feature = "canbench-rs", feature = "declared"))]
mod declared;

/// The users/orders database and its queue: the state is saved in virtual memory 1; the
/// pragmas and the statement cache are the reference's, or a lever's build's ([`PRAGMAS`], at
/// the end of this file).
static SETUP: batch::Setup = batch::Setup {
    memory_id: 1,
    pragmas: &PRAGMAS,
    schema: bench_api::schema::SCHEMA,
    statement_cache_capacity: STATEMENT_CACHE_CAPACITY,
    floors: Floors {
        min_flush_budget: MIN_FLUSH_BUDGET,
        min_flush_budget_reason: "an ordinary op of the users/orders workload could be interrupted (the most expensive one, measured, with headroom)",
        min_pending_bytes: MIN_PENDING_BYTES,
        min_pending_bytes_reason: "the size of the largest op of the API (a create_user with a username and an email at their limits)",
    },
    interface: Interface {
        // Lists every method, the standard ones too (the tests walk the table).
        methods: bench_api::METHODS,
        max_small_arg_bytes: MAX_SINGLE_OP_ARG_BYTES,
        standard_methods: true,
    },
};

// The lifecycle hooks, `flush`, the writers and read-only switches, and the queries on
// tickets, stats and settings.
batch::canister_methods!(SETUP);

// `execute_writes`, `execute_writes_packed` and `batch_declaration`: the declared writes'
// exactly-once client batches (the generic packed format).
batch::client_batches!(UserOrderWrite);

// `execute_write` and `submit_write`: one declared write per call, now or queued, beside the
// hand-written `create_*` and `submit_*` below (the suite compares them).
batch::single_writes!(UserOrderWrite);

/// Flushes at most `max_ops` queued ops (the benches' flush).
#[cfg(feature = "canbench-rs")]
fn flush_now(max_ops: usize) -> Result<bench_api::FlushSummary, WriteError> {
    canister::flush_at_most(max_ops).map(Into::into)
}

/// Queues an op without arming the timer (the benches' submit).
#[cfg(feature = "canbench-rs")]
fn enqueue(op: WriteOp, origin: Origin, owner: Owner) -> Result<Ticket, WriteError> {
    canister::enqueue(op, origin, owner)
}

/// Runs one op now in its own transaction (the benches' unbatched write).
#[cfg(feature = "canbench-rs")]
fn execute_now(op: WriteOp) -> Outcome {
    canister::execute_now(op)
}

/// An unbatched write of the users/orders workload, by a caller who may write.
fn write_now(op: UserOrderOp) -> Result<Outcome, WriteError> {
    canister::write_now(user_order_op(op)?)
}

/// A queued write of the users/orders workload, by a caller who may write.
fn submit(op: UserOrderOp) -> Result<Ticket, WriteError> {
    canister::submit_op(user_order_op(op)?)
}

fn user_order_op(op: UserOrderOp) -> Result<WriteOp, WriteError> {
    op.validate().map_err(WriteError::Invalid)?;
    Ok(workload::to_write_op(&op))
}

fn sql_op(statements: Vec<SqlStatement>) -> Result<WriteOp, WriteError> {
    let mut statements: Vec<Statement> = statements
        .into_iter()
        .map(|s| {
            let params = s
                .params
                .into_iter()
                .map(|p| match p {
                    SqlParam::Null => SqlValue::Null,
                    SqlParam::Integer(v) => SqlValue::Integer(v),
                    SqlParam::Real(v) => SqlValue::Real(v),
                    SqlParam::Text(v) => SqlValue::Text(v),
                    SqlParam::Blob(v) => SqlValue::Blob(v),
                })
                .collect();
            Statement::new(s.sql, params)
        })
        .collect();
    match statements.len() {
        0 => Err(WriteError::Invalid("no statement".into())),
        1 => Ok(WriteOp::Single(statements.remove(0))),
        _ => Ok(WriteOp::Unit(statements)),
    }
}

// ---- the hot calls' codecs (see `bench_api::wire`) ----
//
// The unbatched and batched single-op methods decode their arguments and encode their replies
// with hand-written Candid codecs: bytes `candid` decodes as the method's types, without building
// the reply's type table on every call. They reply with a typed result (`WriteResult`,
// `SubmitResult`, `PackedResult`), a success as its `Ok` case alone (a Candid subtype: each
// reply byte costs 50 instructions), an error in full. Each is exported `hidden`, without
// arguments for ic-cdk and with a manual reply: it reads its argument itself, inside
// `canister::authorized`, once its caller is admitted. Its Candid signature is declared by an
// interface-only function.

fn trap_decode(e: candid::Error) -> ! {
    ic_cdk::trap(format!("failed to decode call arguments: {e}"))
}

fn args_i64_f64() -> (i64, f64) {
    bench_api::wire::decode_i64_f64(&ic_cdk::api::msg_arg_data()).unwrap_or_else(|e| trap_decode(e))
}

fn args_i64() -> i64 {
    bench_api::wire::decode_i64(&ic_cdk::api::msg_arg_data())
        .unwrap_or_else(|e| trap_decode(e))
        .0
}

fn args_blob() -> Vec<u8> {
    bench_api::wire::decode_blob(&ic_cdk::api::msg_arg_data()).unwrap_or_else(|e| trap_decode(e))
}

fn args_text_text() -> (String, String) {
    bench_api::wire::decode_text_text(&ic_cdk::api::msg_arg_data())
        .unwrap_or_else(|e| trap_decode(e))
}

/// Replies with the [`SubmitResult`].
fn reply_ticket(result: Result<Ticket, WriteError>) {
    ic_cdk::api::msg_reply(bench_api::wire::encode_submit_result(result));
}

/// Replies with the [`WriteResult`].
fn reply_outcome(result: Result<Outcome, WriteError>) {
    ic_cdk::api::msg_reply(bench_api::wire::encode_write_result(result));
}

/// Declares the Candid signature of a method exported with hand-written codecs.
macro_rules! interface {
    ($($name:ident ($($arg:ident : $ty:ty),*) -> $ret:ty;)*) => {
        mod interface {
            use super::*;
            $(
                #[candid::candid_method(update)]
                #[allow(dead_code, unused_variables)]
                fn $name($($arg: $ty),*) -> $ret {
                    unreachable!("interface only")
                }
            )*
        }
    };
}

interface! {
    create_user(username: String, email: String) -> WriteResult;
    create_order(user_id: i64, amount: f64) -> WriteResult;
    update_order_amount(order_id: i64, amount: f64) -> WriteResult;
    delete_user_orders(user_id: i64) -> WriteResult;
    submit_create_user(username: String, email: String) -> SubmitResult;
    submit_create_order(user_id: i64, amount: f64) -> SubmitResult;
    submit_update_order_amount(order_id: i64, amount: f64) -> SubmitResult;
    submit_delete_user_orders(user_id: i64) -> SubmitResult;
    execute_batch_packed(ops: serde_bytes::ByteBuf) -> bench_api::PackedResult;
}

// ---- unbatched writes: each call is its own autocommit transaction ----

#[ic_cdk::update(hidden = true, manual_reply = true)]
fn create_user() {
    canister::authorized("create_user", || {
        let (username, email) = args_text_text();
        reply_outcome(write_now(UserOrderOp::CreateUser { username, email }))
    })
}

#[ic_cdk::update(hidden = true, manual_reply = true)]
fn create_order() {
    canister::authorized("create_order", || {
        let (user_id, amount) = args_i64_f64();
        reply_outcome(write_now(UserOrderOp::CreateOrder { user_id, amount }))
    })
}

#[ic_cdk::update(hidden = true, manual_reply = true)]
fn update_order_amount() {
    canister::authorized("update_order_amount", || {
        let (order_id, amount) = args_i64_f64();
        reply_outcome(write_now(UserOrderOp::UpdateOrderAmount {
            order_id,
            amount,
        }))
    })
}

#[ic_cdk::update(hidden = true, manual_reply = true)]
fn delete_user_orders() {
    canister::authorized("delete_user_orders", || {
        let user_id = args_i64();
        reply_outcome(write_now(UserOrderOp::DeleteUserOrders { user_id }))
    })
}

batch::update! {
    fn execute_sql(statements: Vec<SqlStatement>) -> WriteResult {
        sql_op(statements).and_then(canister::execute_sql).into()
    }
}

// ---- batched writes: queued, flushed by size, timer or `flush` ----

#[ic_cdk::update(hidden = true, manual_reply = true)]
fn submit_create_user() {
    canister::authorized("submit_create_user", || {
        let (username, email) = args_text_text();
        reply_ticket(submit(UserOrderOp::CreateUser { username, email }))
    })
}

#[ic_cdk::update(hidden = true, manual_reply = true)]
fn submit_create_order() {
    canister::authorized("submit_create_order", || {
        let (user_id, amount) = args_i64_f64();
        reply_ticket(submit(UserOrderOp::CreateOrder { user_id, amount }))
    })
}

#[ic_cdk::update(hidden = true, manual_reply = true)]
fn submit_update_order_amount() {
    canister::authorized("submit_update_order_amount", || {
        let (order_id, amount) = args_i64_f64();
        reply_ticket(submit(UserOrderOp::UpdateOrderAmount { order_id, amount }))
    })
}

#[ic_cdk::update(hidden = true, manual_reply = true)]
fn submit_delete_user_orders() {
    canister::authorized("submit_delete_user_orders", || {
        let user_id = args_i64();
        reply_ticket(submit(UserOrderOp::DeleteUserOrders { user_id }))
    })
}

batch::update! {
    fn submit_sql(statements: Vec<SqlStatement>) -> SubmitResult {
        sql_op(statements).and_then(canister::submit_sql).into()
    }
}

// ---- client-side batch: many ops in one call, one transaction ----

batch::update! {
    /// A client batch in one transaction. With a key (`opt BatchKey`, absent in calls that
    /// predate it), exactly once per caller and key: a repeat is answered `Duplicate` with the
    /// recorded outcomes (see `ic_rusqlite_batch::keyed`); the anonymous caller's keyed batch
    /// is refused `Invalid` (`ic_rusqlite_batch::canister::key_scope`).
    fn execute_batch(ops: Vec<UserOrderOp>, key: Option<bench_api::BatchKey>) -> BatchResult {
        let Some(key) = key else {
            return client_ops(ops).and_then(canister::execute_batch).into();
        };
        let digest = digest_of_ops(&ops);
        match client_ops(ops)
            .and_then(|ops| canister::execute_batch_keyed(KeyedBatch { key, digest, ops }))
        {
            Ok(b) if b.duplicate => BatchResult::Duplicate(b.outcomes),
            Ok(b) => BatchResult::Ok(b.outcomes),
            Err(e) => BatchResult::Err(e),
        }
    }
}

/// `execute_batch` with the ops and outcomes packed (`bench_api::packed`): an unkeyed request
/// (version 1) is answered with outcomes (reply version 2), a keyed one (version 2) with the
/// duplicate flag and outcomes (reply version 3); a refusal is `Err` with the typed error (the
/// anonymous caller's keyed request: `Invalid`, see `ic_rusqlite_batch::canister::key_scope`).
#[ic_cdk::update(hidden = true, manual_reply = true)]
fn execute_batch_packed() {
    canister::authorized("execute_batch_packed", || {
        let packed = args_blob();
        let reply = packed_batch(&packed, canister::execute_batch_keyed);
        ic_cdk::api::msg_reply(bench_api::wire::encode_packed_result(reply));
    })
}

/// The packed reply to a packed request by a caller who may write (see
/// [`execute_batch_packed`]): an unkeyed one runs at once, a keyed one through `keyed` (the
/// method's is the front door, `ic_rusqlite_batch::canister::execute_batch_keyed`; the benches
/// run the request under their own key without arming the prune timer).
fn packed_batch(
    packed: &[u8],
    keyed: impl FnOnce(KeyedBatch) -> Result<KeyedOutcomes, WriteError>,
) -> Result<Vec<u8>, WriteError> {
    if packed.first() == Some(&bench_api::packed::KEYED_VERSION) {
        let (key, body) = bench_api::packed::keyed_ops_body(packed).map_err(invalid)?;
        let (_, ops) =
            bench_api::packed::decode_keyed_ops(packed, MAX_CLIENT_BATCH).map_err(invalid)?;
        let b = keyed(KeyedBatch {
            key,
            digest: batch_core::BatchDigest::of_bytes(body),
            ops: client_ops(ops)?,
        })?;
        Ok(bench_api::packed::encode_keyed_outcomes(
            b.duplicate,
            &b.outcomes,
        ))
    } else {
        let ops = bench_api::packed::decode_ops(packed, MAX_CLIENT_BATCH).map_err(invalid)?;
        let outcomes = canister::run_batch(client_ops(ops)?)?;
        Ok(bench_api::packed::encode_outcomes(&outcomes))
    }
}

fn invalid(e: bench_api::packed::PackedError) -> WriteError {
    WriteError::Invalid(e.to_string())
}

/// The digest of a keyed batch's ops: of their packed form (without its version byte), which
/// is what a keyed packed request carries after its header, so that the same ops digest alike
/// through `execute_batch` and `execute_batch_packed`.
fn digest_of_ops(ops: &[UserOrderOp]) -> batch_core::BatchDigest {
    batch_core::BatchDigest::of_bytes(&bench_api::packed::encode_ops(ops)[1..])
}

/// A client batch's ops as batch_core runs them, after the interface's limits.
fn client_ops(ops: Vec<UserOrderOp>) -> Result<Vec<WriteOp>, WriteError> {
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
    Ok(ops.iter().map(workload::to_write_op).collect())
}

// ---- queries: each guarded (`canister::query_guard`): called as an update (replicated, paid
// like an update), it runs only for controllers and writers ----

fn query_error(e: impl std::fmt::Display) -> bench_api::QueryError {
    bench_api::QueryError::Database(e.to_string())
}

#[ic_cdk::query(guard = "canister::query_guard")]
fn counts() -> CountsResult {
    batch::with_connection(|conn| {
        let count = |table: &str| -> Result<u64, bench_api::QueryError> {
            conn.query_row(&format!("SELECT COUNT(*) FROM {table}"), [], |r| {
                r.get::<_, i64>(0)
            })
            .map(|n| n as u64)
            .map_err(query_error)
        };
        Ok(Counts {
            users: count("users")?,
            orders: count("orders")?,
        })
    })
    .into()
}

/// The join of the ic-rusqlite benchmark (`users JOIN orders ... WHERE u.user_id < ? ORDER BY
/// o.created_at DESC`), at most `limit` rows (capped at [`MAX_QUERY_ROWS`]).
#[ic_cdk::query(guard = "canister::query_guard")]
fn user_orders(max_user_id: i64, limit: u32) -> UserOrdersResult {
    batch::with_connection(|conn| {
        let mut stmt = conn
            .prepare_cached(
                "SELECT u.user_id, u.username, o.order_id, o.amount FROM users u \
                 JOIN orders o ON u.user_id = o.user_id WHERE u.user_id < ?1 \
                 ORDER BY o.created_at DESC LIMIT ?2",
            )
            .map_err(query_error)?;
        let rows = stmt
            .query_map((max_user_id, limit.min(MAX_QUERY_ROWS)), |r| {
                Ok(UserOrder {
                    user_id: r.get(0)?,
                    username: r.get(1)?,
                    order_id: r.get(2)?,
                    amount: r.get(3)?,
                })
            })
            .map_err(query_error)?;
        rows.collect::<Result<Vec<_>, _>>().map_err(query_error)
    })
    .into()
}

/// The orders of `user_id` with `order_id > after_order_id`, by `order_id`, at most `limit` rows
/// (capped at [`MAX_QUERY_ROWS`]).
#[ic_cdk::query(guard = "canister::query_guard")]
fn orders(user_id: i64, after_order_id: i64, limit: u32) -> OrdersResult {
    batch::with_connection(|conn| {
        let mut stmt = conn
            .prepare_cached(
                "SELECT order_id, user_id, amount FROM orders \
                 WHERE user_id = ?1 AND order_id > ?2 ORDER BY order_id LIMIT ?3",
            )
            .map_err(query_error)?;
        let rows = stmt
            .query_map((user_id, after_order_id, limit.min(MAX_QUERY_ROWS)), |r| {
                Ok(Order {
                    order_id: r.get(0)?,
                    user_id: r.get(1)?,
                    amount: r.get(2)?,
                })
            })
            .map_err(query_error)?;
        rows.collect::<Result<Vec<_>, _>>().map_err(query_error)
    })
    .into()
}

/// The LIKE query of the ic-rusqlite benchmark (`SELECT * FROM users WHERE email LIKE
/// '<prefix>%'`), at most `limit` rows (capped at [`MAX_QUERY_ROWS`]).
#[ic_cdk::query(guard = "canister::query_guard")]
fn users_by_email_prefix(prefix: String, limit: u32) -> UsersResult {
    batch::with_connection(|conn| {
        let mut stmt = conn
            .prepare_cached(
                "SELECT user_id, username, email, created_at FROM users \
                 WHERE email LIKE ?1 || '%' LIMIT ?2",
            )
            .map_err(query_error)?;
        let rows = stmt
            .query_map((prefix, limit.min(MAX_QUERY_ROWS)), |r| {
                Ok(User {
                    user_id: r.get(0)?,
                    username: r.get(1)?,
                    email: r.get(2)?,
                    created_at: r.get(3)?,
                })
            })
            .map_err(query_error)?;
        rows.collect::<Result<Vec<_>, _>>().map_err(query_error)
    })
    .into()
}

ic_cdk::export_candid!();

// The database's pragmas and statement cache: the reference's (the ic-rusqlite benchmark's
// pragmas; a statement cache with room for every statement the canister repeats, where
// rusqlite's default of 16 would evict and re-prepare them every flush), or, built with the
// feature `levers` (`scripts/levers.sh`), those the build's environment names
// (`BENCH_LEVER_<SETTING>`, read at compile time) in their place. At the end of this file (and
// not in bench_api), so that the deployable wasm is the same byte for byte with or without them.

/// The pragmas the database is opened with.
#[cfg(not(feature = "levers"))]
const PRAGMAS: [(&str, &str); 6] = bench_api::schema::PRAGMAS;
/// The statement cache's capacity.
#[cfg(not(feature = "levers"))]
const STATEMENT_CACHE_CAPACITY: usize = REFERENCE_STATEMENT_CACHE;

/// The reference's statement cache capacity.
const REFERENCE_STATEMENT_CACHE: usize = 64;

/// A lever's pragmas: the reference's, with each one the environment names, in their order.
#[cfg(feature = "levers")]
const PRAGMAS: [(&str, &str); 6] = levers::pragmas_with([
    option_env!("BENCH_LEVER_JOURNAL_MODE"),
    option_env!("BENCH_LEVER_SYNCHRONOUS"),
    option_env!("BENCH_LEVER_PAGE_SIZE"),
    option_env!("BENCH_LEVER_LOCKING_MODE"),
    option_env!("BENCH_LEVER_TEMP_STORE"),
    option_env!("BENCH_LEVER_CACHE_SIZE"),
]);
/// A lever's statement cache capacity: `BENCH_LEVER_STATEMENT_CACHE`, or the reference's.
#[cfg(feature = "levers")]
const STATEMENT_CACHE_CAPACITY: usize = levers::count_or(
    option_env!("BENCH_LEVER_STATEMENT_CACHE"),
    REFERENCE_STATEMENT_CACHE,
);

/// How a lever's build reads its settings (evaluated at compile time; `tests/levers.rs` tests
/// them natively).
#[cfg(feature = "levers")]
mod levers;
