//! The reference canister: SQLite (ic-rusqlite) in stable memory, the workload of the
//! ic-rusqlite users/orders benchmark, and a Candid API that writes either at once (unbatched:
//! one autocommit transaction per call) or through a [`batch_core::BatchQueue`] flushed in one
//! transaction.
//!
//! The interface is documented in `bench_canister.did` and its types live in the `bench_api`
//! crate; this crate is thin glue over `batch_core`: settings (`settings`), access control
//! (`access`), the flush timer (`timer`) and the state kept across upgrades (`persist`).
#![cfg(target_arch = "wasm32")]
// ^ The canister only builds for wasm32 (ic-rusqlite refuses other targets). Natively the crate is
// empty, so that `cargo test` at the top level can run its tests/ against the built wasm.

use std::cell::RefCell;

use batch_core::{
    BatchQueue, Budget, FlushReport, InstructionMeter, OpOutcome, OpStatus, Owner, SqlValue,
    Statement, SubmitError, WriteOp,
};
use bench_api::{
    AdminResult, BatchResult, Counts, CountsResult, FlushResult, FlushSummary, InitArgs,
    MAX_CLIENT_BATCH, MAX_QUERY_ROWS, OpError, Order, OrdersResult, Outcome, Principals, Settings,
    SqlParam, SqlStatement, Stats, SubmitResult, Ticket, TicketStatus, User, UserOrder,
    UserOrderOp, UserOrdersResult, UsersResult, WriteError, WriteResult,
};

mod access;
mod db;
mod keyed;
mod persist;
mod settings;
mod timer;
mod workload;

#[cfg(feature = "canbench-rs")]
mod benches;

use settings::CanisterSettings;

thread_local! {
    static QUEUE: RefCell<BatchQueue> =
        RefCell::new(BatchQueue::new(batch_core::Config::default()).expect("default config is valid"));
    static SETTINGS: RefCell<CanisterSettings> = RefCell::new(CanisterSettings::default());
}

/// `ic0.performance_counter(0)`: instructions used so far by this message.
#[derive(Clone, Copy)]
struct MessageMeter;

impl InstructionMeter for MessageMeter {
    fn instructions(&self) -> u64 {
        ic_cdk::api::performance_counter(0)
    }
}

fn write_access() -> bench_api::WriteAccess {
    SETTINGS.with_borrow(|s| s.write_access)
}

/// Applies `settings` to the canister and its queue. Traps (refusing the install or upgrade,
/// which leaves the canister as it was) on invalid settings.
fn apply(settings: Result<CanisterSettings, String>) {
    let settings = settings.unwrap_or_else(|e| ic_cdk::trap(format!("invalid settings: {e}")));
    QUEUE
        .with_borrow_mut(|q| q.reconfigure(settings.config.clone()))
        .unwrap_or_else(|e| ic_cdk::trap(format!("invalid settings: {e}")));
    SETTINGS.with_borrow_mut(|s| *s = settings);
}

#[ic_cdk::init]
fn init(args: Option<InitArgs>) {
    db::open();
    // Tickets start at the install's time in nanoseconds: a reinstall (which wipes the state)
    // starts past every ticket the previous install issued.
    let first_ticket = ic_cdk::api::time().max(1);
    QUEUE.with_borrow_mut(|q| {
        *q = BatchQueue::with_first_ticket(batch_core::Config::default(), first_ticket)
            .unwrap_or_else(|e| ic_cdk::trap(format!("creating the queue: {e}")));
    });
    apply(CanisterSettings::default().merged(&args.unwrap_or_default()));
    timer::reset();
}

/// Saves the queue, its settings and the writers to stable memory. Does no flush: pending ops
/// survive the upgrade anyway, and the work here stays linear in the queue's bytes, whatever the
/// ops are.
#[ic_cdk::pre_upgrade]
fn pre_upgrade() {
    let state = persist::CanisterState {
        write_access: write_access(),
        writers: access::writers(),
        read_only: db::read_only(),
        sql_tickets: timer::sql_tickets(),
        dedup: keyed::counters(),
    };
    QUEUE.with_borrow(|q| persist::save(state, q));
}

/// Reopens the database, restores the queue and its settings (the argument's fields override
/// them; absent fields and an absent argument keep them), and re-arms the timer (upgrades
/// remove timers).
#[ic_cdk::post_upgrade]
fn post_upgrade(args: Option<InitArgs>) {
    db::open();
    timer::reset();
    let current = match persist::take() {
        Some(restored) => {
            access::set_writers(restored.state.writers);
            timer::set_sql_tickets(restored.state.sql_tickets);
            keyed::restore(restored.state.dedup);
            if restored.state.read_only {
                db::set_read_only(true)
                    .unwrap_or_else(|e| ic_cdk::trap(format!("restoring read-only mode: {e}")));
            }
            let current = CanisterSettings {
                config: restored.queue.config().clone(),
                write_access: restored.state.write_access,
            };
            QUEUE.with_borrow_mut(|q| *q = restored.queue);
            current
        }
        None => CanisterSettings::default(),
    };
    apply(current.merged(&args.unwrap_or_default()));
    timer::ensure();
}

/// Refuses, before the canister pays for them, ingress calls the method would refuse (writes by
/// callers who may not write, controller methods by others, oversized single-op arguments) and
/// every ingress update call of a method that is not an update method of the interface
/// (queries called as updates, the canister's internal methods).
#[ic_cdk::inspect_message]
fn inspect_message() {
    let method = ic_cdk::api::msg_method_name();
    let arg_bytes = ic_cdk::api::msg_arg_data().len();
    if access::accepts(
        &method,
        &ic_cdk::api::msg_caller(),
        arg_bytes,
        write_access(),
    ) {
        ic_cdk::api::accept_message();
    }
}

fn summary(r: FlushReport) -> FlushSummary {
    FlushSummary {
        executed: r.executed as u64,
        committed: r.committed as u64,
        failed: r.failed as u64,
        interrupted: r.interrupted as u64,
        remaining: r.remaining as u64,
        more_due: r.more_due,
        instructions: r.instructions,
    }
}

fn outcome(o: OpOutcome) -> Outcome {
    match o {
        OpOutcome::Committed {
            rows_changed,
            last_insert_rowid,
        } => Outcome::Committed {
            rows_changed,
            last_insert_rowid,
        },
        OpOutcome::Failed { code, error } => Outcome::Failed(OpError {
            code,
            message: error,
        }),
    }
}

/// Flushes at most `max_ops` queued ops within the instruction budget (see
/// `batch_core::BatchQueue::flush`), and tells the watchdog what happened.
fn flush_now(max_ops: usize) -> Result<FlushSummary, WriteError> {
    let report =
        QUEUE.with_borrow_mut(|q| db::with(|conn| q.flush_at_most(conn, &MessageMeter, max_ops)));
    timer::record(&report, ic_cdk::api::time());
    let report = report.map_err(|e| WriteError::Database(e.to_string()))?;
    Ok(summary(report))
}

/// The queue's owner of the caller's ops.
fn caller_owner() -> Owner {
    Owner::of(ic_cdk::api::msg_caller().as_slice())
}

/// Whether `op` may run long enough to make a flush trap: controller SQL may; the typed ops of
/// the API may not.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Origin {
    Typed,
    Sql,
}

/// Queues `op` for `owner` (the caller's [`Owner`]) and, when that fills a batch and the queue
/// is healthy, flushes the ops before the first pending controller SQL op in this call (never
/// an op that could make this caller's message trap; see [`timer`]). No timer is armed here
/// (queries, such as canbench's benches, may not set timers); [`submit`] adds that.
fn enqueue(op: WriteOp, origin: Origin, owner: Owner) -> Result<Ticket, WriteError> {
    let now = ic_cdk::api::time();
    if QUEUE.with_borrow(BatchQueue::is_empty) {
        // The watchdog measures stalls from here.
        timer::progress(now);
    }
    let submitted = QUEUE
        .with_borrow_mut(|q| q.submit_as(op, now, owner))
        .map_err(|e| match e {
            SubmitError::QueueFull { capacity } => WriteError::QueueFull {
                capacity: capacity as u64,
            },
            SubmitError::QueueBytesFull {
                pending_bytes,
                capacity_bytes,
                ..
            } => WriteError::QueueBytesFull {
                pending_bytes: pending_bytes as u64,
                capacity_bytes: capacity_bytes as u64,
            },
            other => WriteError::Invalid(other.to_string()),
        })?;
    if origin == Origin::Sql {
        timer::sql_queued(submitted.ticket);
    }
    // The op is queued from here on: a failed flush must not turn its acknowledgement into an
    // error. It stays queued and the timer retries.
    if submitted.flush_due {
        let limit = timer::caller_flush_limit(now);
        if limit > 0
            && let Err(e) = flush_now(limit)
        {
            ic_cdk::println!("size-triggered flush failed, queue kept: {e:?}");
        }
    }
    Ok(submitted.ticket)
}

/// The batched write path of every `submit_*` method: check the caller, [`enqueue`], make sure
/// a timer will flush what is left, and reply.
fn submit(op: Result<WriteOp, WriteError>) {
    // The caller is read once (each System API call costs about 500 instructions).
    let caller = ic_cdk::api::msg_caller();
    let submitted = access::require_writer_as(&caller, write_access())
        .and(op)
        .and_then(|op| enqueue(op, Origin::Typed, Owner::of(caller.as_slice())));
    timer::ensure();
    reply_ticket(submitted);
}

/// Runs one op now in its own transaction, interrupted once it has used
/// `3 × flush_instruction_budget` instructions (30 billion by default): the most a flush may
/// use, so the same settings bound both paths within the message limit.
fn execute_now(op: &WriteOp) -> Outcome {
    let limit = SETTINGS.with_borrow(|s| s.config.max_flush_instructions());
    let budget = Budget::new(MessageMeter, limit);
    outcome(db::with(|conn| {
        batch_core::execute_autocommit_within(conn, op, &budget)
    }))
}

/// An unbatched write of the users/orders workload, by a caller who may write.
fn write_now(op: UserOrderOp) {
    reply_outcome(
        access::require_writer(write_access())
            .and_then(|()| user_order_op(op))
            .map(|op| execute_now(&op)),
    )
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
// with hand-written Candid codecs: the same bytes as `candid`, without building the reply's type
// table on every call. They reply with a small type (a `Ticket`, an `Outcome`: each reply byte
// costs 50 instructions) and refuse with a reject naming the `WriteError`. Each is exported
// `hidden` with a manual reply (its ic-cdk signature would be `blob`), and its Candid signature is
// declared by an interface-only function.

fn trap_decode(e: candid::Error) -> ! {
    ic_cdk::trap(format!("failed to decode call arguments: {e}"))
}

fn args_i64_f64(bytes: Vec<u8>) -> (i64, f64) {
    bench_api::wire::decode_i64_f64(&bytes).unwrap_or_else(|e| trap_decode(e))
}

fn args_i64(bytes: Vec<u8>) -> i64 {
    bench_api::wire::decode_i64(&bytes)
        .unwrap_or_else(|e| trap_decode(e))
        .0
}

fn args_blob(bytes: Vec<u8>) -> Vec<u8> {
    bench_api::wire::decode_blob(&bytes).unwrap_or_else(|e| trap_decode(e))
}

fn args_text_text(bytes: Vec<u8>) -> (String, String) {
    bench_api::wire::decode_text_text(&bytes).unwrap_or_else(|e| trap_decode(e))
}

/// Replies with the ticket, or refuses with a reject naming the error.
fn reply_ticket(result: Result<Ticket, WriteError>) {
    match result {
        Ok(ticket) => ic_cdk::api::msg_reply(bench_api::wire::encode_ticket(ticket)),
        Err(e) => ic_cdk::api::msg_reject(e.to_string()),
    }
}

/// Replies with the outcome, or refuses with a reject naming the error.
fn reply_outcome(result: Result<Outcome, WriteError>) {
    match result {
        Ok(outcome) => ic_cdk::api::msg_reply(bench_api::wire::encode_outcome(outcome)),
        Err(e) => ic_cdk::api::msg_reject(e.to_string()),
    }
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
    create_user(username: String, email: String) -> Outcome;
    create_order(user_id: i64, amount: f64) -> Outcome;
    update_order_amount(order_id: i64, amount: f64) -> Outcome;
    delete_user_orders(user_id: i64) -> Outcome;
    submit_create_user(username: String, email: String) -> Ticket;
    submit_create_order(user_id: i64, amount: f64) -> Ticket;
    submit_update_order_amount(order_id: i64, amount: f64) -> Ticket;
    submit_delete_user_orders(user_id: i64) -> Ticket;
    execute_batch_packed(ops: serde_bytes::ByteBuf) -> serde_bytes::ByteBuf;
}

// ---- unbatched writes: each call is its own autocommit transaction ----

#[ic_cdk::update(hidden = true, manual_reply = true, decode_with = "args_text_text")]
fn create_user(username: String, email: String) {
    write_now(UserOrderOp::CreateUser { username, email })
}

#[ic_cdk::update(hidden = true, manual_reply = true, decode_with = "args_i64_f64")]
fn create_order(user_id: i64, amount: f64) {
    write_now(UserOrderOp::CreateOrder { user_id, amount })
}

#[ic_cdk::update(hidden = true, manual_reply = true, decode_with = "args_i64_f64")]
fn update_order_amount(order_id: i64, amount: f64) {
    write_now(UserOrderOp::UpdateOrderAmount { order_id, amount })
}

#[ic_cdk::update(hidden = true, manual_reply = true, decode_with = "args_i64")]
fn delete_user_orders(user_id: i64) {
    write_now(UserOrderOp::DeleteUserOrders { user_id })
}

#[ic_cdk::update]
fn execute_sql(statements: Vec<SqlStatement>) -> WriteResult {
    access::require_controller()
        .and_then(|()| sql_op(statements))
        .map(|op| execute_now(&op))
        .into()
}

// ---- batched writes: queued, flushed by size, timer or `flush` ----

#[ic_cdk::update(hidden = true, manual_reply = true, decode_with = "args_text_text")]
fn submit_create_user(username: String, email: String) {
    submit(user_order_op(UserOrderOp::CreateUser { username, email }))
}

#[ic_cdk::update(hidden = true, manual_reply = true, decode_with = "args_i64_f64")]
fn submit_create_order(user_id: i64, amount: f64) {
    submit(user_order_op(UserOrderOp::CreateOrder { user_id, amount }))
}

#[ic_cdk::update(hidden = true, manual_reply = true, decode_with = "args_i64_f64")]
fn submit_update_order_amount(order_id: i64, amount: f64) {
    submit(user_order_op(UserOrderOp::UpdateOrderAmount {
        order_id,
        amount,
    }))
}

#[ic_cdk::update(hidden = true, manual_reply = true, decode_with = "args_i64")]
fn submit_delete_user_orders(user_id: i64) {
    submit(user_order_op(UserOrderOp::DeleteUserOrders { user_id }))
}

#[ic_cdk::update]
fn submit_sql(statements: Vec<SqlStatement>) -> SubmitResult {
    let op = access::require_controller().and_then(|()| sql_op(statements));
    let submitted = op.and_then(|op| enqueue(op, Origin::Sql, caller_owner()));
    timer::ensure();
    submitted.into()
}

/// Flushes now: everything a flush's budget reaches for a controller; for a writer, what a
/// submit's size flush may run (nothing while the queue is unhealthy, and not the controller
/// SQL ops, which the timer runs), so that no op of another caller can make this call trap.
#[ic_cdk::update]
fn flush() -> FlushResult {
    let summary = access::require_writer(write_access()).and_then(|()| {
        let limit = if access::caller_is_controller() {
            usize::MAX
        } else {
            timer::caller_flush_limit(ic_cdk::api::time())
        };
        if limit == 0 {
            let remaining = QUEUE.with_borrow(BatchQueue::len);
            return Ok(summary(FlushReport {
                remaining,
                more_due: remaining > 0,
                ..FlushReport::default()
            }));
        }
        flush_now(limit)
    });
    timer::ensure();
    summary.into()
}

/// Makes the database read-only (`PRAGMA query_only`), or writable again; kept across upgrades.
/// While read-only, queued ops wait (flushes fail at `BEGIN`, failing no op; `stats.alarm` says
/// so), unbatched writes and client batches fail with SQLite's error, and queries run.
#[ic_cdk::update]
fn set_read_only(read_only: bool) -> AdminResult {
    access::require_controller()
        .and_then(|()| db::set_read_only(read_only).map_err(WriteError::Database))
        .into()
}

/// A careful flush of at most `limit` ops, called by the canister itself when its flushes
/// have stopped making progress (see [`timer`]). Not part of the Candid interface.
#[ic_cdk::update(hidden = true, name = "__careful_flush")]
fn careful_flush(limit: u64) -> FlushResult {
    let summary = timer::careful_flush_now(limit);
    timer::ensure();
    summary.into()
}

// ---- client-side batch: many ops in one call, one transaction ----

/// A client batch in one transaction. With a key (`opt BatchKey`, absent in calls that predate
/// it), exactly once per caller and key: a repeat is answered `Duplicate` with the recorded
/// outcomes (see [`keyed`]).
#[ic_cdk::update]
fn execute_batch(ops: Vec<UserOrderOp>, key: Option<bench_api::BatchKey>) -> BatchResult {
    let result = access::require_writer(write_access()).and_then(|()| match key {
        None => batch(&ops).map(BatchResult::Ok),
        Some(key) => keyed::key_of(&key).and_then(|key| {
            let caller = ic_cdk::api::msg_caller();
            let digest = keyed::digest_of_ops(&ops);
            let batch = keyed_batch(caller.as_slice(), &key, &digest, &ops)?;
            Ok(if batch.duplicate {
                BatchResult::Duplicate(batch.outcomes)
            } else {
                BatchResult::Ok(batch.outcomes)
            })
        }),
    });
    keyed::ensure_prune_timer();
    result.unwrap_or_else(BatchResult::Err)
}

/// `execute_batch` with the ops and outcomes packed (`bench_api::packed`): an unkeyed request
/// (version 1) is answered with outcomes (reply version 2), a keyed one (version 2) with the
/// duplicate flag and outcomes (reply version 3); a refusal is a reject naming the error.
#[ic_cdk::update(hidden = true, manual_reply = true, decode_with = "args_blob")]
fn execute_batch_packed(packed: Vec<u8>) {
    let caller = ic_cdk::api::msg_caller();
    let reply = access::require_writer_as(&caller, write_access())
        .and_then(|()| packed_batch(caller.as_slice(), &packed));
    keyed::ensure_prune_timer();
    match reply {
        Ok(reply) => ic_cdk::api::msg_reply(bench_api::wire::encode_blob(&reply)),
        Err(e) => ic_cdk::api::msg_reject(e.to_string()),
    }
}

/// The packed reply to a packed request of `caller`, who may write (see
/// [`execute_batch_packed`]).
fn packed_batch(caller: &[u8], packed: &[u8]) -> Result<Vec<u8>, WriteError> {
    let invalid = |e: bench_api::packed::PackedError| WriteError::Invalid(e.to_string());
    if packed.first() == Some(&bench_api::packed::KEYED_VERSION) {
        let (key, body) = bench_api::packed::keyed_ops_body(packed).map_err(invalid)?;
        let (_, ops) =
            bench_api::packed::decode_keyed_ops(packed, MAX_CLIENT_BATCH).map_err(invalid)?;
        let key = batch_core::BatchKey {
            created_at_time_ns: key.created_at_time_ns,
            id: key.id,
        };
        let digest = batch_core::BatchDigest::of_bytes(body);
        let batch = keyed_batch(caller, &key, &digest, &ops)?;
        Ok(bench_api::packed::encode_keyed_outcomes(
            batch.duplicate,
            &batch.outcomes,
        ))
    } else {
        let ops = bench_api::packed::decode_ops(packed, MAX_CLIENT_BATCH).map_err(invalid)?;
        Ok(bench_api::packed::encode_outcomes(&batch(&ops)?))
    }
}

/// The client batch's ops as batch_core runs them, after the interface's limits.
fn client_ops(ops: &[UserOrderOp]) -> Result<Vec<WriteOp>, WriteError> {
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

/// An unkeyed client batch of a caller who may write.
fn batch(ops: &[UserOrderOp]) -> Result<Vec<Outcome>, WriteError> {
    let ops = client_ops(ops)?;
    let budget = Budget::new(
        MessageMeter,
        SETTINGS.with_borrow(|s| s.config.flush_instruction_budget),
    );
    db::with(|conn| batch_core::execute_batch_within(conn, &ops, &budget))
        .map(|outcomes| outcomes.into_iter().map(outcome).collect())
        .map_err(|e| WriteError::Database(e.to_string()))
}

/// A keyed client batch of `caller`, who may write (see [`keyed::run`]).
fn keyed_batch(
    caller: &[u8],
    key: &batch_core::BatchKey,
    digest: &batch_core::BatchDigest,
    ops: &[UserOrderOp],
) -> Result<keyed::KeyedOutcomes, WriteError> {
    let ops = client_ops(ops)?;
    keyed::run(caller, key, digest, &ops, ic_cdk::api::time())
}

// ---- controllers: writers ----

#[ic_cdk::update]
fn add_writers(principals: Principals) -> AdminResult {
    access::require_controller()
        .and_then(|()| access::add_writers(principals))
        .into()
}

#[ic_cdk::update]
fn remove_writers(principals: Principals) -> AdminResult {
    access::require_controller()
        .map(|()| access::remove_writers(&principals))
        .into()
}

#[ic_cdk::query]
fn writers() -> Principals {
    access::writers()
}

// ---- queries ----

/// The status of `ticket`, as the caller may see it: its own ops' (or, for a controller,
/// anyone's); `NotYours` for another caller's.
#[ic_cdk::query]
fn ticket_status(ticket: Ticket) -> TicketStatus {
    let viewer = viewer();
    QUEUE.with_borrow(|q| status(q, ticket, viewer))
}

/// The statuses of `count` tickets from `first` on (at most [`MAX_QUERY_ROWS`]), as
/// [`ticket_status`] answers each.
#[ic_cdk::query]
fn ticket_statuses(first: Ticket, count: u32) -> Vec<TicketStatus> {
    let count = u64::from(count.min(MAX_QUERY_ROWS));
    let viewer = viewer();
    QUEUE.with_borrow(|q| {
        (first..first.saturating_add(count))
            .map(|t| status(q, t, viewer))
            .collect()
    })
}

/// Whose statuses the caller sees: `None` for a controller (everyone's), else its own.
fn viewer() -> Option<Owner> {
    (!access::caller_is_controller()).then(caller_owner)
}

fn status(q: &BatchQueue, ticket: Ticket, viewer: Option<Owner>) -> TicketStatus {
    let status = match viewer {
        None => q.status(ticket),
        Some(owner) => q.status_for(ticket, owner),
    };
    match status {
        OpStatus::Pending => TicketStatus::Pending,
        OpStatus::Done(OpOutcome::Committed {
            rows_changed,
            last_insert_rowid,
        }) => TicketStatus::Committed {
            rows_changed,
            last_insert_rowid,
        },
        OpStatus::Done(OpOutcome::Failed { code, error }) => TicketStatus::Failed(OpError {
            code,
            message: error,
        }),
        OpStatus::Evicted { committed } => TicketStatus::Evicted { committed },
        OpStatus::NotYours => TicketStatus::NotYours,
        OpStatus::Unknown => TicketStatus::Unknown,
    }
}

#[ic_cdk::query]
fn stats() -> Stats {
    let (s, pending_bytes) = QUEUE.with_borrow(|q| (q.stats(), q.pending_bytes()));
    let [
        keyed_batches,
        duplicates_answered,
        keys_refused,
        keys_held,
        key_bytes_held,
        keys_pruned,
    ] = keyed::stats();
    Stats {
        pending: s.pending,
        pending_bytes: pending_bytes as u64,
        submitted: s.submitted,
        committed: s.committed,
        failed: s.failed,
        interrupted: s.interrupted,
        rejected: s.rejected,
        flushes: s.flushes,
        flush_errors: s.flush_errors,
        capped_flushes: s.capped_flushes,
        last_flush_ops: s.last_flush_ops,
        last_flush_instructions: s.last_flush_instructions,
        last_error: s.last_error,
        alarm: timer::alarm(ic_cdk::api::time()),
        timer_armed: timer::armed(),
        keyed_batches,
        duplicates_answered,
        keys_refused,
        keys_held,
        key_bytes_held,
        keys_pruned,
    }
}

#[ic_cdk::query]
fn settings() -> Settings {
    SETTINGS.with_borrow(|s| s.to_candid(db::read_only()))
}

fn query_error(e: impl std::fmt::Display) -> String {
    e.to_string()
}

#[ic_cdk::query]
fn counts() -> CountsResult {
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
    .into()
}

/// The join of the ic-rusqlite benchmark (`users JOIN orders ... WHERE u.user_id < ? ORDER BY
/// o.created_at DESC`), at most `limit` rows (capped at [`MAX_QUERY_ROWS`]).
#[ic_cdk::query]
fn user_orders(max_user_id: i64, limit: u32) -> UserOrdersResult {
    db::with(|conn| {
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
#[ic_cdk::query]
fn orders(user_id: i64, after_order_id: i64, limit: u32) -> OrdersResult {
    db::with(|conn| {
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
#[ic_cdk::query]
fn users_by_email_prefix(prefix: String, limit: u32) -> UsersResult {
    db::with(|conn| {
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
