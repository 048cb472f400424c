//! The canister side (wasm32 only), as functions for methods of a canister's own shape: the
//! lifecycle hooks, the access checks, the queue of [`WriteOp`]s, writes run now, and the
//! queries. The crate's macros are made of them (`canister_methods!` calls [`init`],
//! [`flush`], [`stats`], ...). Every function here is meant to be called from a canister method
//! of the matching kind (an update, a query, a lifecycle hook); each traps, with the reason,
//! only where the canister must not go on (invalid settings at install, a saved state that
//! cannot be read back), and answers a typed [`WriteError`] otherwise.
//!
//! Every write entry point takes what it writes by value, already checked by the canister (its
//! own validation is a `?` before the call): one [`WriteOp`] ([`submit_op`], [`write_now`],
//! [`submit_sql`], [`execute_sql`]), the ops of a batch ([`execute_batch`]), or a keyed batch
//! ([`execute_batch_keyed`]); the declared writes' are in [`declared`](crate::declared).

use std::cell::{Cell, RefCell};
use std::collections::HashMap;

use batch_core::{
    BatchQueue, Budget, FlushReport, OpStatus, Outcome, Owner, SubmitError, Ticket, WriteOp,
};
use batch_types::{InitArgs, MethodClass, Settings, Stats, TicketStatus, WriteAccess, WriteError};
use candid::Principal;
use ic_rusqlite::ConnectionConfig;
use ic_stable_structures::memory_manager::MemoryId;

use crate::Setup;
use crate::access::{self, Writers};
use crate::keyed::{self, KeyedBatch, KeyedOutcomes};
use crate::message::MessageMeter;
use crate::persist::{self, SavedState};
use crate::settings::CanisterSettings;
use crate::state::{QUEUE, SETTINGS, with_connection};
use crate::timer;

/// Heap held for the queries (see [`query_guard`]): allocated at install and upgrade, never
/// written (it costs no dirty page), released inside a non-replicated query, whose changes the
/// IC discards.
pub const QUERY_RESERVE_BYTES: usize = 256 * 1024;

thread_local! {
    static SETUP: Cell<Option<&'static Setup>> = const { Cell::new(None) };
    static QUERY_RESERVE: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
    static WRITERS: RefCell<Writers> = RefCell::new(Writers::default());
    static READ_ONLY: Cell<bool> = const { Cell::new(false) };
    /// The caller of the method [`authorized`] is running, as it checked it (`None` outside).
    static CHECKED: Cell<Option<Checked>> = const { Cell::new(None) };
}

/// What [`authorized`] learnt of its caller, so that the checks of the functions its method
/// calls cost nothing more: a System API call costs 500 to 1,000 instructions.
#[derive(Clone, Copy)]
struct Checked {
    caller: Principal,
    controller: Option<bool>,
}

fn setup() -> &'static Setup {
    SETUP
        .get()
        .unwrap_or_else(|| ic_cdk::trap("ic-rusqlite-batch: call init or post_upgrade first"))
}

// ---------------------------------------------------------------- lifecycle

/// Applies `settings` to the canister and its queue. Traps (refusing the install or upgrade,
/// which leaves the canister as it was) on invalid settings.
fn apply(settings: Result<CanisterSettings, crate::settings::SettingsError>) {
    let settings = settings.unwrap_or_else(|e| ic_cdk::trap(format!("invalid settings: {e}")));
    QUEUE
        .with_borrow_mut(|q| q.reconfigure(settings.config.clone()))
        .unwrap_or_else(|e| ic_cdk::trap(format!("invalid settings: {e}")));
    SETTINGS.with_borrow_mut(|s| *s = settings);
}

/// Opens the database with `setup`'s pragmas and statement cache, and creates its schema.
fn open(setup: &'static Setup) {
    let id = setup.memory_id;
    if (101..=120).contains(&id) || id == u8::MAX {
        ic_cdk::trap(format!(
            "ic-rusqlite-batch: memory id {id} is not available (ic-rusqlite owns 101-120, 255 is reserved)"
        ));
    }
    SETUP.set(Some(setup));
    QUERY_RESERVE.set(Vec::with_capacity(QUERY_RESERVE_BYTES));
    let config = ConnectionConfig {
        pragma_settings: setup
            .pragmas
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect::<HashMap<_, _>>(),
        ..ConnectionConfig::default()
    };
    // ic-rusqlite creates its connection on first use, with the configuration set here; init and
    // post_upgrade both start with a fresh heap, so this runs before that first use.
    ic_rusqlite::set_connection_config(config);
    with_connection(|conn| {
        conn.set_prepared_statement_cache_capacity(setup.statement_cache_capacity);
        conn.execute_batch(setup.schema)
    })
    .unwrap_or_else(|e| ic_cdk::trap(format!("creating the schema: {e}")));
}

/// Call from `#[init]`: opens the database, creates the schema, starts an empty queue whose
/// tickets start at the install's time in nanoseconds (a reinstall, which wipes the state,
/// starts past every ticket the previous install issued), and applies `args` over the
/// defaults. Traps on an invalid memory id or settings, or if the schema cannot be created.
pub fn init(setup: &'static Setup, args: Option<InitArgs>) {
    check_init_args();
    open(setup);
    let first_ticket = ic_cdk::api::time().max(1);
    QUEUE.with_borrow_mut(|q| {
        *q = BatchQueue::with_first_ticket(batch_core::Config::default(), first_ticket)
            .unwrap_or_else(|e| ic_cdk::trap(format!("creating the queue: {e}")));
    });
    apply(CanisterSettings::default().merged(&args.unwrap_or_default(), &setup.floors));
    timer::reset();
}

/// Traps (refusing the install or upgrade) when the argument holds a setting of another type
/// than [`InitArgs`] declares (`flush_size = opt (500 : nat)` where it is `opt nat64`): Candid
/// would read it as absent, and the setting would silently not apply ([`crate::args`]).
fn check_init_args() {
    crate::args::check::<(Option<InitArgs>,)>(&ic_cdk::api::msg_arg_data(), &["init"])
        .unwrap_or_else(|e| ic_cdk::trap(format!("invalid install argument: {e}")));
}

/// Call from `#[pre_upgrade]`: saves the queue, its settings, the writers and the read-only
/// mode to the setup's memory. Does no flush: pending ops survive the upgrade anyway, and the
/// work stays linear in the queue's bytes, whatever the ops are. Traps only if stable memory
/// cannot grow (the old version then keeps running with its queue).
pub fn pre_upgrade() {
    let state = SavedState {
        write_access: write_access(),
        writers: writers(),
        read_only: read_only(),
        sql_tickets: timer::sql_tickets(),
        dedup: keyed::counters(),
    };
    let mut mem =
        ic_rusqlite::MEMORY_MANAGER.with_borrow(|m| m.get(MemoryId::new(setup().memory_id)));
    QUEUE
        .with_borrow(|q| persist::save_to(&mut mem, state, q))
        .unwrap_or_else(|e| ic_cdk::trap(e.to_string()));
}

/// Call from `#[post_upgrade]`: reopens the database, restores the queue and its settings (the
/// argument's fields override them; absent fields and an absent argument keep them), and
/// re-arms the timer (upgrades remove timers). Traps (refusing the upgrade) on a saved state it
/// cannot read or invalid settings.
pub fn post_upgrade(setup: &'static Setup, args: Option<InitArgs>) {
    check_init_args();
    open(setup);
    timer::reset();
    let mem = ic_rusqlite::MEMORY_MANAGER.with_borrow(|m| m.get(MemoryId::new(setup.memory_id)));
    let restored = persist::take_from(&mem).unwrap_or_else(|e| ic_cdk::trap(e.to_string()));
    let current = match restored {
        Some(restored) => {
            WRITERS.with_borrow_mut(|w| *w = Writers::from_list(restored.state.writers));
            timer::set_sql_tickets(restored.state.sql_tickets);
            keyed::restore(restored.state.dedup);
            if restored.state.read_only {
                set_read_only_unchecked(true)
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
    apply(current.merged(&args.unwrap_or_default(), &setup.floors));
    timer::ensure();
}

/// Call from `#[inspect_message]`: accepts the ingress message only if its method would
/// accept it (see [`Interface::accepts`](crate::access::Interface::accepts); a query called as an update is refused whoever
/// sends it); refused messages cost the canister nothing.
pub fn inspect_message() {
    let method = ic_cdk::api::msg_method_name();
    let arg_bytes = ic_cdk::api::msg_arg_data().len();
    let caller = ic_cdk::api::msg_caller();
    let access = write_access();
    let accepted = setup().interface.accepts(
        &method,
        arg_bytes,
        || ic_cdk::api::is_controller(&caller),
        || {
            WRITERS.with_borrow(|w| {
                w.may_write(&caller, access, || ic_cdk::api::is_controller(&caller))
            })
        },
    );
    if accepted {
        ic_cdk::api::accept_message();
    }
}

// ---------------------------------------------------------------- access

/// Runs `body`, the work of update method `method` (a name of the [`Setup`]'s
/// [`Interface`](crate::access::Interface)), if the caller may call it (its class, see [`access::admits`]); `body`
/// reads the argument ([`arguments`](crate::message::arguments), or a codec of the canister's own) and replies. A caller
/// who may not call the method is answered [`access::NOT_AUTHORIZED_REPLY`], which the
/// method's reply type reads as its own `Err(NotAuthorized)` (it must have one:
/// [`access::Refusal`]), without its argument being read: a few thousand instructions,
/// whatever its size. This is the only check of the calls of other canisters, which
/// `canister_inspect_message` never sees. A name the interface does not list is refused to
/// everyone. Inside `body`, the checks of this crate's functions (`submit`, `flush`, ...)
/// reuse this one's System API calls.
pub fn authorized(method: &str, body: impl FnOnce()) {
    let caller = ic_cdk::api::msg_caller();
    let outer = CHECKED.replace(Some(Checked {
        caller,
        controller: None,
    }));
    let class = setup().interface.class_of(method);
    let admitted = access::admits(
        class,
        ic_cdk::api::in_replicated_execution,
        || is_controller(&caller),
        || may_write(&caller),
    );
    if admitted {
        body();
    } else {
        if class.is_none() {
            ic_cdk::println!(
                "ic-rusqlite-batch: `{method}` is not a method of the Setup's interface"
            );
        }
        ic_cdk::api::msg_reply(access::NOT_AUTHORIZED_REPLY);
    }
    CHECKED.set(outer);
}

/// The guard of every query method: `query!`'s, or a hand-written query's
/// (`#[ic_cdk::query(guard = "ic_rusqlite_batch::canister::query_guard")]`; ic-cdk runs it
/// before it decodes the argument). A query runs for everyone; called as an
/// update (replicated execution, which the canister pays like an update, from ingress that
/// `canister_inspect_message` let through or from another canister, which it never sees) it
/// runs only for whoever may write (controllers, registered writers, everyone in
/// [`WriteAccess::Open`]), so that an application canister registered as a writer can read
/// through inter-canister calls; anyone else's call is rejected with
/// [`access::REPLICATED_QUERY_REFUSED`] (queries have no typed refusal), for a few thousand
/// instructions. Costs 500 instructions in a query.
///
/// A non-replicated query first releases the [`QUERY_RESERVE_BYTES`] of heap the canister holds
/// for it, so that the library's queries (`stats`, `ticket_statuses` of 1,000 pending tickets,
/// ...) answer when the canister's memory cannot grow (a memory allocation reached: every
/// flush traps then, and the queries are how its controller learns why).
pub fn query_guard() -> Result<(), String> {
    if !ic_cdk::api::in_replicated_execution() {
        // The IC discards a query's changes: the reserve is back for the next message.
        QUERY_RESERVE.take();
    }
    let admitted = access::admits(
        Some(MethodClass::Query),
        ic_cdk::api::in_replicated_execution,
        || false,
        || may_write(&ic_cdk::api::msg_caller()),
    );
    if admitted {
        Ok(())
    } else {
        Err(access::REPLICATED_QUERY_REFUSED.to_owned())
    }
}

/// The caller of this message (read once inside [`authorized`]).
pub fn caller() -> Principal {
    CHECKED
        .get()
        .map_or_else(ic_cdk::api::msg_caller, |checked| checked.caller)
}

/// Whether `caller` is a controller, asked once per [`authorized`] method.
fn is_controller(caller: &Principal) -> bool {
    match CHECKED.get() {
        Some(checked) if checked.caller == *caller => checked.controller.unwrap_or_else(|| {
            let controller = ic_cdk::api::is_controller(caller);
            CHECKED.set(Some(Checked {
                controller: Some(controller),
                ..checked
            }));
            controller
        }),
        _ => ic_cdk::api::is_controller(caller),
    }
}

fn may_write(caller: &Principal) -> bool {
    let access = write_access();
    WRITERS.with_borrow(|w| w.may_write(caller, access, || is_controller(caller)))
}

/// Who may write now.
pub fn write_access() -> WriteAccess {
    SETTINGS.with_borrow(|s| s.write_access)
}

/// `caller` may write, or [`WriteError::NotAuthorized`].
pub fn require_writer_as(caller: &Principal) -> Result<(), WriteError> {
    if may_write(caller) {
        Ok(())
    } else {
        Err(WriteError::NotAuthorized)
    }
}

/// The caller may write, or [`WriteError::NotAuthorized`].
pub fn require_writer() -> Result<(), WriteError> {
    require_writer_as(&caller())
}

/// Whether the caller is a controller.
pub fn caller_is_controller() -> bool {
    is_controller(&caller())
}

/// The caller is a controller, or [`WriteError::NotAuthorized`].
pub fn require_controller() -> Result<(), WriteError> {
    if caller_is_controller() {
        Ok(())
    } else {
        Err(WriteError::NotAuthorized)
    }
}

/// The registered writers, sorted.
pub fn writers() -> Vec<Principal> {
    WRITERS.with_borrow(Writers::list)
}

/// For a controller: adds writers (at most [`MAX_WRITERS`](crate::access::MAX_WRITERS) in all;
/// beyond, none is added and the call answers `Invalid`).
pub fn add_writers(principals: Vec<Principal>) -> Result<(), WriteError> {
    require_controller()?;
    WRITERS.with_borrow_mut(|w| w.add(principals))
}

/// For a controller: removes writers (absent ones are ignored).
pub fn remove_writers(principals: &[Principal]) -> Result<(), WriteError> {
    require_controller()?;
    WRITERS.with_borrow_mut(|w| w.remove(principals));
    Ok(())
}

// ---------------------------------------------------------------- the database

/// Whether the database is read-only.
pub fn read_only() -> bool {
    READ_ONLY.get()
}

fn set_read_only_unchecked(read_only: bool) -> Result<(), WriteError> {
    with_connection(|conn| conn.pragma_update(None, "query_only", read_only))
        .map_err(|e| WriteError::Database(format!("PRAGMA query_only: {e}")))?;
    READ_ONLY.set(read_only);
    Ok(())
}

/// For a controller: makes the database read-only (`PRAGMA query_only`), or writable again;
/// kept across upgrades. While read-only, queued ops wait (flushes fail at `BEGIN`, failing no
/// op; `stats.alarm` says so), immediate writes fail with SQLite's error, and queries run.
/// The pragma runs as the canister's own statement (batch_core refuses it in ops).
pub fn set_read_only(read_only: bool) -> Result<(), WriteError> {
    require_controller()?;
    set_read_only_unchecked(read_only)
}

// ---------------------------------------------------------------- the queue

/// Runs `f` with the queue (read-only access: statuses, counters, pending ops).
pub fn with_queue<R>(f: impl FnOnce(&BatchQueue) -> R) -> R {
    QUEUE.with_borrow(f)
}

/// Runs `f` with the queue, mutably: a measurement hook of the reference canister's benches,
/// which set up a queue directly. Ops queued here are not seen by the timer until the next
/// submit or flush.
#[doc(hidden)]
pub fn with_queue_mut<R>(f: impl FnOnce(&mut BatchQueue) -> R) -> R {
    QUEUE.with_borrow_mut(f)
}

/// The settings in effect (the queue's configuration and who may write).
pub fn current_settings() -> CanisterSettings {
    SETTINGS.with_borrow(Clone::clone)
}

/// Whether an op may run long enough to make a flush trap: controller SQL may; a canister's
/// typed ops, each bounded by the instruction guard, may not ([`enqueue`]'s argument).
#[doc(hidden)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// An op built by the canister from typed arguments.
    Typed,
    /// Arbitrary SQL (a controller's): only the timer (or a controller's flush) runs it.
    Sql,
}

fn submit_error(e: SubmitError) -> WriteError {
    match e {
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
    }
}

/// Queues `op` for `owner` and, when that fills a batch and the queue is healthy, flushes the
/// ops before the first pending controller SQL op in this call (never an op that could make
/// this caller's message trap). No access check, and arms no timer (queries, such as canbench's
/// benches, may not set timers): [`submit_op`] does both; a measurement hook of the reference
/// canister's benches. Costs about 2,000 instructions plus the op's bytes, and a whole flush
/// when it fills a batch.
#[doc(hidden)]
pub fn enqueue(op: WriteOp, origin: Origin, owner: Owner) -> Result<Ticket, WriteError> {
    let now = ic_cdk::api::time();
    if QUEUE.with_borrow(BatchQueue::is_empty) {
        // The watchdog measures stalls from here.
        timer::progress(now);
    }
    let submitted = QUEUE
        .with_borrow_mut(|q| q.submit_as(op, now, owner))
        .map_err(submit_error)?;
    if origin == Origin::Sql {
        timer::sql_queued(submitted.ticket);
    }
    // The op is queued from here on: a failed flush must not turn its acknowledgement into an
    // error. It stays queued and the timer retries.
    if submitted.flush_due {
        let limit = timer::caller_flush_limit(now);
        if limit > 0
            && let Err(e) = flush_at_most(limit)
        {
            ic_cdk::println!("size-triggered flush failed, queue kept: {e:?}");
        }
    }
    Ok(submitted.ticket)
}

/// The batched write: checks that the caller may write, queues `op` (checked by the canister)
/// with the caller as its owner, flushes when that fills a batch and the queue is healthy, and
/// makes sure a timer will flush it. Answers the op's ticket; ask [`ticket_status`] with it. A
/// declared write is queued with [`submit`](crate::submit).
pub fn submit_op(op: WriteOp) -> Result<Ticket, WriteError> {
    // The caller is read once (each System API call costs about 500 instructions).
    let caller = caller();
    let submitted = require_writer_as(&caller)
        .and_then(|()| enqueue(op, Origin::Typed, Owner::of(caller.as_slice())));
    timer::ensure();
    submitted
}

/// For a controller: queues arbitrary SQL, which only the timer (or a controller's flush)
/// runs, so that no writer's message can trap on it.
pub fn submit_sql(op: WriteOp) -> Result<Ticket, WriteError> {
    let submitted = require_controller().and_then(|()| enqueue(op, Origin::Sql, caller_owner()));
    timer::ensure();
    submitted
}

/// Flushes at most `max_ops` queued ops within the instruction budget (see
/// `batch_core::BatchQueue::flush`), and tells the watchdog what happened. No access check:
/// for the canister's own use. Fails, keeping every op queued, when the transaction cannot
/// begin or commit.
pub fn flush_at_most(max_ops: usize) -> Result<FlushReport, WriteError> {
    let report = QUEUE
        .with_borrow_mut(|q| with_connection(|conn| q.flush_at_most(conn, &MessageMeter, max_ops)));
    timer::record(&report, ic_cdk::api::time());
    report.map_err(|e| WriteError::Database(e.to_string()))
}

/// A caller's flush: everything a flush's budget reaches for a controller; for a writer, what
/// a submit's size flush may run (nothing while the queue is unhealthy, and not the controller
/// SQL ops, which the timer runs), so that no op of another caller can make this call trap.
pub fn flush() -> Result<FlushReport, WriteError> {
    let report = require_writer().and_then(|()| {
        let limit = if caller_is_controller() {
            usize::MAX
        } else {
            timer::caller_flush_limit(ic_cdk::api::time())
        };
        if limit == 0 {
            let remaining = QUEUE.with_borrow(BatchQueue::len);
            return Ok(FlushReport {
                remaining,
                more_due: remaining > 0,
                ..FlushReport::default()
            });
        }
        flush_at_most(limit)
    });
    timer::ensure();
    report
}

/// Runs one op now in its own transaction, interrupted once it has used
/// `3 × flush_instruction_budget` instructions: the most a flush may use, so that the same
/// settings bound both paths within the message limit. No access check.
pub fn execute_now(op: WriteOp) -> Outcome {
    let limit = SETTINGS.with_borrow(|s| s.config.max_flush_instructions());
    let budget = Budget::new(MessageMeter, limit);
    with_connection(|conn| batch_core::execute_autocommit_within(conn, &op, &budget))
}

/// The unbatched write: checks that the caller may write, and runs `op` now
/// ([`execute_now`]).
pub fn write_now(op: WriteOp) -> Result<Outcome, WriteError> {
    require_writer().map(|()| execute_now(op))
}

/// For a controller: runs arbitrary SQL now ([`execute_now`]).
pub fn execute_sql(op: WriteOp) -> Result<Outcome, WriteError> {
    require_controller().map(|()| execute_now(op))
}

/// A client's batch: checks that the caller may write, and runs `ops` now ([`run_batch`]).
pub fn execute_batch(ops: Vec<WriteOp>) -> Result<Vec<Outcome>, WriteError> {
    require_writer()?;
    run_batch(ops)
}

/// Runs `ops` now in one transaction within `flush_instruction_budget` (one outcome per op, in
/// order; the ops the budget did not reach are [`Outcome::NotExecuted`]). No access check.
/// Fails, applying nothing, when the transaction cannot begin or commit.
pub fn run_batch(ops: Vec<WriteOp>) -> Result<Vec<Outcome>, WriteError> {
    let budget = Budget::new(
        MessageMeter,
        SETTINGS.with_borrow(|s| s.config.flush_instruction_budget),
    );
    with_connection(|conn| batch_core::execute_batch_within(conn, &ops, &budget))
        .map_err(|e| WriteError::Database(e.to_string()))
}

/// An exactly-once client batch: checks that the caller may write and has a key scope of its
/// own ([`key_scope`]), and runs `batch` (the key, the canister's digest of the ops as the
/// client sent them, the ops) under the caller's key: a new key runs the ops in one
/// transaction that also records the key, the digest and the outcomes; a repeated key with
/// the same digest answers the recorded outcomes and runs nothing. Arms the timer that prunes
/// expired keys. Refusals (the anonymous caller, window, reused key, full store) are typed
/// [`WriteError`]s; nothing runs then.
pub fn execute_batch_keyed(batch: KeyedBatch) -> Result<KeyedOutcomes, WriteError> {
    let caller = caller();
    let result = require_writer_as(&caller)
        .and_then(|()| key_scope(&caller))
        .and_then(|scope| keyed::run(scope, batch, ic_cdk::api::time()));
    keyed::ensure_prune_timer();
    result
}

/// The scope of `caller`'s batch keys (keys are deduplicated per caller): its principal. The
/// anonymous principal is everyone who calls without an identity, so its keys could not tell
/// one client's batches from another's: it is refused, `Invalid` with
/// [`access::ANONYMOUS_KEYED_REFUSED`], before anything is decoded or run.
pub fn key_scope(caller: &Principal) -> Result<&[u8], WriteError> {
    if *caller == Principal::anonymous() {
        Err(WriteError::Invalid(
            access::ANONYMOUS_KEYED_REFUSED.to_owned(),
        ))
    } else {
        Ok(caller.as_slice())
    }
}

// ---------------------------------------------------------------- queries

/// The queue's owner of the caller's ops.
pub fn caller_owner() -> Owner {
    Owner::of(caller().as_slice())
}

/// Whose statuses the caller sees: `None` for a controller (everyone's), else its own.
fn viewer() -> Option<Owner> {
    (!caller_is_controller()).then(caller_owner)
}

fn status(q: &BatchQueue, ticket: Ticket, viewer: Option<Owner>) -> OpStatus {
    match viewer {
        None => q.status(ticket),
        Some(owner) => q.status_for(ticket, owner),
    }
}

/// The status of `ticket` as the caller may see it: its own ops' (or, for a controller,
/// anyone's); `NotYours` for another caller's.
pub fn ticket_status(ticket: Ticket) -> TicketStatus {
    let viewer = viewer();
    QUEUE.with_borrow(|q| status(q, ticket, viewer)).into()
}

/// The statuses of `count` tickets from `first` on, as [`ticket_status`] answers each, in
/// their Candid form: one vector, so that a query of 1,000 statuses needs little heap (it must
/// answer when the canister's memory cannot grow).
pub fn ticket_statuses(first: Ticket, count: u64) -> Vec<TicketStatus> {
    let viewer = viewer();
    QUEUE.with_borrow(|q| {
        (first..first.saturating_add(count))
            .map(|t| status(q, t, viewer).into())
            .collect()
    })
}

/// The queue's counters and what the watchdog sees.
pub fn stats() -> Stats {
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
        last_error: timer::last_error(s.last_error),
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

/// The settings in effect, with the read-only mode.
pub fn settings() -> Settings {
    SETTINGS.with_borrow(|s| s.to_view(read_only()))
}
