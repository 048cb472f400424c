//! The reference canister: SQLite (ic-rusqlite) in stable memory, the users/orders workload of the
//! ic-rusqlite benchmark (seed 004), and a Candid API that writes either at once (unbatched: one
//! autocommit transaction per call) or through a [`batch_core::BatchQueue`] flushed in one transaction.
//!
//! The interface is documented in `bench_canister.did`; this file is thin glue over `batch_core`.
#![cfg(target_arch = "wasm32")]
// ^ The canister only builds for wasm32 (ic-rusqlite refuses other targets). Natively the crate is
// empty, so that `cargo test` at the top level can run its tests/ against the built wasm.

use std::cell::RefCell;
use std::time::Duration;

use batch_core::{
    BatchQueue, Config, FlushReport, InstructionMeter, OpOutcome, OpStatus, SqlValue, Statement,
    SubmitError, WriteOp,
};
use candid::{CandidType, Deserialize};

mod db;
mod persist;
mod workload;

#[cfg(feature = "canbench-rs")]
mod benches;

pub use workload::UserOrderOp;

/// Largest number of operations one `execute_batch` call accepts.
pub const MAX_CLIENT_BATCH: usize = 10_000;

/// Settings given at install or upgrade; every field is optional.
#[derive(CandidType, Deserialize, Clone, Debug, Default)]
pub struct InitArgs {
    /// Ops per flush: a submit that fills the queue to this size flushes in the same call.
    pub flush_size: Option<u64>,
    /// Longest time an op waits before the timer flushes it (rounds up to the next round).
    pub max_delay_ms: Option<u64>,
    /// Queue capacity: a submit beyond it is answered `QueueFull`.
    pub max_pending: Option<u64>,
    /// Instructions one flush may use before it stops and leaves the rest queued.
    pub flush_instruction_budget: Option<u64>,
    /// Number of outcomes kept for `ticket_status` (oldest evicted first).
    pub outcome_capacity: Option<u64>,
}

impl InitArgs {
    fn to_config(&self) -> Config {
        let d = Config::default();
        Config {
            flush_size: self.flush_size.map_or(d.flush_size, |v| v as usize),
            max_delay_ns: self
                .max_delay_ms
                .map_or(d.max_delay_ns, |ms| ms.saturating_mul(1_000_000)),
            max_pending: self.max_pending.map_or(d.max_pending, |v| v as usize),
            flush_instruction_budget: self
                .flush_instruction_budget
                .unwrap_or(d.flush_instruction_budget),
            outcome_capacity: self
                .outcome_capacity
                .map_or(d.outcome_capacity, |v| v as usize),
        }
    }
}

/// The result of one write.
#[derive(CandidType, Deserialize, Clone, Debug, PartialEq)]
pub enum Outcome {
    /// The write committed.
    Committed {
        rows_changed: u64,
        last_insert_rowid: i64,
    },
    /// The write failed and changed nothing; SQLite's error text.
    Failed(String),
}

impl From<OpOutcome> for Outcome {
    fn from(o: OpOutcome) -> Self {
        match o {
            OpOutcome::Committed {
                rows_changed,
                last_insert_rowid,
            } => Outcome::Committed {
                rows_changed,
                last_insert_rowid,
            },
            OpOutcome::Failed { error } => Outcome::Failed(error),
        }
    }
}

/// What one flush did.
#[derive(CandidType, Deserialize, Clone, Debug, PartialEq)]
pub struct FlushSummary {
    pub executed: u64,
    pub committed: u64,
    pub failed: u64,
    pub remaining: u64,
    pub more_due: bool,
    pub instructions: u64,
}

impl From<FlushReport> for FlushSummary {
    fn from(r: FlushReport) -> Self {
        FlushSummary {
            executed: r.executed as u64,
            committed: r.committed as u64,
            failed: r.failed as u64,
            remaining: r.remaining as u64,
            more_due: r.more_due,
            instructions: r.instructions,
        }
    }
}

/// An accepted submission.
#[derive(CandidType, Deserialize, Clone, Debug, PartialEq)]
pub struct Submitted {
    /// Ask `ticket_status` with it.
    pub ticket: u64,
    /// Present when this call filled a batch and flushed it.
    pub flushed: Option<FlushSummary>,
}

/// Why a submission or batch was refused. Nothing was queued or executed.
#[derive(CandidType, Deserialize, Clone, Debug, PartialEq)]
pub enum WriteError {
    /// The queue holds `capacity` ops; retry after a flush.
    QueueFull { capacity: u64 },
    /// A batch longer than [`MAX_CLIENT_BATCH`], or an empty unit.
    Invalid(String),
    /// Only controllers may run SQL of their own.
    NotAuthorized,
    /// The transaction could not begin or commit; nothing of it was applied.
    Database(String),
}

/// State of a ticket.
#[derive(CandidType, Deserialize, Clone, Debug, PartialEq)]
pub enum TicketStatus {
    Pending,
    Committed {
        rows_changed: u64,
        last_insert_rowid: i64,
    },
    Failed(String),
    /// Done, but its outcome was evicted from the bounded outcome store.
    Evicted,
    /// Never issued.
    Unknown,
}

/// Queue counters.
#[derive(CandidType, Deserialize, Clone, Debug, PartialEq)]
pub struct Stats {
    pub pending: u64,
    pub submitted: u64,
    pub committed: u64,
    pub failed: u64,
    pub rejected: u64,
    pub flushes: u64,
    pub last_flush_ops: u64,
    pub last_flush_instructions: u64,
    pub timer_armed: bool,
}

/// Row counts.
#[derive(CandidType, Deserialize, Clone, Debug, PartialEq)]
pub struct Counts {
    pub users: u64,
    pub orders: u64,
}

/// A row of the seed-004 join.
#[derive(CandidType, Deserialize, Clone, Debug, PartialEq)]
pub struct UserOrder {
    pub user_id: i64,
    pub username: String,
    pub order_id: i64,
    pub amount: f64,
}

/// A row of `users`.
#[derive(CandidType, Deserialize, Clone, Debug, PartialEq)]
pub struct User {
    pub user_id: i64,
    pub username: String,
    pub email: String,
    pub created_at: String,
}

/// A value bound to a `?N` parameter of controller SQL.
#[derive(CandidType, Deserialize, Clone, Debug, PartialEq)]
pub enum SqlParam {
    Null,
    Integer(i64),
    Real(f64),
    Text(String),
    Blob(#[serde(with = "serde_bytes")] Vec<u8>),
}

/// One SQL statement with its parameters (controller only).
#[derive(CandidType, Deserialize, Clone, Debug, PartialEq)]
pub struct SqlStatement {
    pub sql: String,
    pub params: Vec<SqlParam>,
}

thread_local! {
    static QUEUE: RefCell<BatchQueue> =
        RefCell::new(BatchQueue::new(Config::default()).expect("default config is valid"));
    static TIMER: RefCell<Option<ic_cdk_timers::TimerId>> = const { RefCell::new(None) };
}

/// `ic0.performance_counter(0)`: instructions used so far by this message.
struct MessageMeter;

impl InstructionMeter for MessageMeter {
    fn instructions(&self) -> u64 {
        ic_cdk::api::performance_counter(0)
    }
}

fn configure(args: Option<InitArgs>) {
    let config = args.unwrap_or_default().to_config();
    let queue = match persist::take() {
        Some(state) => BatchQueue::from_state(config, state),
        None => BatchQueue::new(config),
    };
    let queue = queue.unwrap_or_else(|e| ic_cdk::trap(format!("invalid configuration: {e}")));
    QUEUE.with_borrow_mut(|q| *q = queue);
}

#[ic_cdk::init]
fn init(args: Option<InitArgs>) {
    db::open();
    configure(args);
}

/// Flushes what the budget allows, then saves whatever is still pending to stable memory.
#[ic_cdk::pre_upgrade]
fn pre_upgrade() {
    if let Err(e) = flush_now() {
        ic_cdk::println!("pre_upgrade flush failed, queue kept for after the upgrade: {e:?}");
    }
    persist::save(&QUEUE.with_borrow(|q| q.to_state()));
}

/// Reopens the database, restores the saved queue, and re-arms the timer (upgrades disarm timers).
#[ic_cdk::post_upgrade]
fn post_upgrade(args: Option<InitArgs>) {
    db::open();
    configure(args);
    ensure_timer();
}

fn flush_now() -> Result<FlushSummary, WriteError> {
    let report = QUEUE.with_borrow_mut(|q| db::with(|conn| q.flush(conn, &MessageMeter)));
    report
        .map(FlushSummary::from)
        .map_err(|e| WriteError::Database(e.to_string()))
}

/// Arms the flush timer when ops are pending and no timer is armed. Never resets an armed timer
/// (that would starve flushes under steady load).
fn ensure_timer() {
    if TIMER.with_borrow(|t| t.is_some()) {
        return;
    }
    let now = ic_cdk::api::time();
    let Some(due) = QUEUE.with_borrow(|q| q.next_due(now)) else {
        return;
    };
    let id = ic_cdk_timers::set_timer(Duration::from_nanos(due.saturating_sub(now)), async {
        TIMER.with_borrow_mut(|t| *t = None);
        if let Err(e) = flush_now() {
            ic_cdk::println!("timer flush failed, queue kept: {e:?}");
        }
        ensure_timer();
    });
    TIMER.with_borrow_mut(|t| *t = Some(id));
}

/// Queues `op` and, when that fills a batch, flushes in this call. No timer is armed here (queries,
/// such as canbench's benches, may not set timers); [`submit`] adds that.
fn enqueue(op: WriteOp) -> Result<Submitted, WriteError> {
    let now = ic_cdk::api::time();
    let submitted = QUEUE
        .with_borrow_mut(|q| q.submit(op, now))
        .map_err(|e| match e {
            SubmitError::QueueFull { capacity } => WriteError::QueueFull {
                capacity: capacity as u64,
            },
            other => WriteError::Invalid(other.to_string()),
        })?;
    // The op is queued from here on: a failed flush must not turn its acknowledgement into an
    // error. It stays queued and the timer retries.
    let flushed = if submitted.flush_due {
        flush_now()
            .inspect_err(|e| ic_cdk::println!("size-triggered flush failed, queue kept: {e:?}"))
            .ok()
    } else {
        None
    };
    Ok(Submitted {
        ticket: submitted.ticket,
        flushed,
    })
}

/// The batched write path of every `submit_*` method: [`enqueue`], then make sure a timer will flush
/// what is left.
fn submit(op: WriteOp) -> Result<Submitted, WriteError> {
    let submitted = enqueue(op);
    ensure_timer();
    submitted
}

fn execute_now(op: &WriteOp) -> Outcome {
    db::with(|conn| batch_core::execute_autocommit(conn, op)).into()
}

fn require_controller() -> Result<(), WriteError> {
    if ic_cdk::api::is_controller(&ic_cdk::api::msg_caller()) {
        Ok(())
    } else {
        Err(WriteError::NotAuthorized)
    }
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

// ---- unbatched writes: each call is its own autocommit transaction ----

#[ic_cdk::update]
fn create_user(username: String, email: String) -> Outcome {
    execute_now(&UserOrderOp::CreateUser { username, email }.to_write_op())
}

#[ic_cdk::update]
fn create_order(user_id: i64, amount: f64) -> Outcome {
    execute_now(&UserOrderOp::CreateOrder { user_id, amount }.to_write_op())
}

#[ic_cdk::update]
fn update_order_amount(order_id: i64, amount: f64) -> Outcome {
    execute_now(&UserOrderOp::UpdateOrderAmount { order_id, amount }.to_write_op())
}

#[ic_cdk::update]
fn delete_user_orders(user_id: i64) -> Outcome {
    execute_now(&UserOrderOp::DeleteUserOrders { user_id }.to_write_op())
}

#[ic_cdk::update]
fn execute_sql(statements: Vec<SqlStatement>) -> Result<Outcome, WriteError> {
    require_controller()?;
    Ok(execute_now(&sql_op(statements)?))
}

// ---- batched writes: queued, flushed by size, timer, `flush` or upgrade ----

#[ic_cdk::update]
fn submit_create_user(username: String, email: String) -> Result<Submitted, WriteError> {
    submit(UserOrderOp::CreateUser { username, email }.to_write_op())
}

#[ic_cdk::update]
fn submit_create_order(user_id: i64, amount: f64) -> Result<Submitted, WriteError> {
    submit(UserOrderOp::CreateOrder { user_id, amount }.to_write_op())
}

#[ic_cdk::update]
fn submit_update_order_amount(order_id: i64, amount: f64) -> Result<Submitted, WriteError> {
    submit(UserOrderOp::UpdateOrderAmount { order_id, amount }.to_write_op())
}

#[ic_cdk::update]
fn submit_delete_user_orders(user_id: i64) -> Result<Submitted, WriteError> {
    submit(UserOrderOp::DeleteUserOrders { user_id }.to_write_op())
}

#[ic_cdk::update]
fn submit_sql(statements: Vec<SqlStatement>) -> Result<Submitted, WriteError> {
    require_controller()?;
    submit(sql_op(statements)?)
}

#[ic_cdk::update]
fn flush() -> Result<FlushSummary, WriteError> {
    let summary = flush_now();
    ensure_timer();
    summary
}

// ---- client-side batch: many ops in one call, one transaction ----

#[ic_cdk::update]
fn execute_batch(ops: Vec<UserOrderOp>) -> Result<Vec<Outcome>, WriteError> {
    if ops.len() > MAX_CLIENT_BATCH {
        return Err(WriteError::Invalid(format!(
            "{} ops in one batch; the limit is {MAX_CLIENT_BATCH}",
            ops.len()
        )));
    }
    let ops: Vec<WriteOp> = ops.iter().map(UserOrderOp::to_write_op).collect();
    db::with(|conn| batch_core::execute_batch(conn, &ops))
        .map(|outcomes| outcomes.into_iter().map(Outcome::from).collect())
        .map_err(|e| WriteError::Database(e.to_string()))
}

// ---- queries ----

#[ic_cdk::query]
fn ticket_status(ticket: u64) -> TicketStatus {
    match QUEUE.with_borrow(|q| q.status(ticket)) {
        OpStatus::Pending => TicketStatus::Pending,
        OpStatus::Done(OpOutcome::Committed {
            rows_changed,
            last_insert_rowid,
        }) => TicketStatus::Committed {
            rows_changed,
            last_insert_rowid,
        },
        OpStatus::Done(OpOutcome::Failed { error }) => TicketStatus::Failed(error),
        OpStatus::Evicted => TicketStatus::Evicted,
        OpStatus::Unknown => TicketStatus::Unknown,
    }
}

#[ic_cdk::query]
fn stats() -> Stats {
    let s = QUEUE.with_borrow(|q| q.stats());
    Stats {
        pending: s.pending,
        submitted: s.submitted,
        committed: s.committed,
        failed: s.failed,
        rejected: s.rejected,
        flushes: s.flushes,
        last_flush_ops: s.last_flush_ops,
        last_flush_instructions: s.last_flush_instructions,
        timer_armed: TIMER.with_borrow(|t| t.is_some()),
    }
}

fn query_error(e: impl std::fmt::Display) -> String {
    e.to_string()
}

#[ic_cdk::query]
fn counts() -> Result<Counts, String> {
    db::with(|conn| {
        let count = |table: &str| -> Result<u64, String> {
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
}

/// The join of seed 004 (`users JOIN orders ... WHERE u.user_id < ? ORDER BY o.created_at DESC`),
/// limited to `limit` rows so the reply stays under the message size limit.
#[ic_cdk::query]
fn user_orders(max_user_id: i64, limit: u32) -> Result<Vec<UserOrder>, String> {
    db::with(|conn| {
        let mut stmt = conn
            .prepare_cached(
                "SELECT u.user_id, u.username, o.order_id, o.amount FROM users u \
                 JOIN orders o ON u.user_id = o.user_id WHERE u.user_id < ?1 \
                 ORDER BY o.created_at DESC LIMIT ?2",
            )
            .map_err(query_error)?;
        let rows = stmt
            .query_map((max_user_id, limit), |r| {
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
}

/// The LIKE query of seed 004 (`SELECT * FROM users WHERE email LIKE '<prefix>%'`), limited.
#[ic_cdk::query]
fn users_by_email_prefix(prefix: String, limit: u32) -> Result<Vec<User>, String> {
    db::with(|conn| {
        let mut stmt = conn
            .prepare_cached("SELECT user_id, username, email, created_at FROM users WHERE email LIKE ?1 || '%' LIMIT ?2")
            .map_err(query_error)?;
        let rows = stmt
            .query_map((prefix, limit), |r| {
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
}

ic_cdk::export_candid!();
