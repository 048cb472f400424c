//! The flush timer, and the watchdog that keeps the queue moving when flushes fail or trap.
//!
//! One repeating timer runs while ops are pending, every `max(max_delay, 1 s)`, and is cleared
//! when the queue is empty. A repeating timer cannot be lost: ic-cdk-timers reschedules it in
//! `canister_global_timer` before running the task in a self-call, so even a task that traps
//! (its changes rolled back) leaves the next run scheduled. `stats.timer_armed` reads state that
//! a trap rolls back together with the timer's creation or removal, so it is true exactly when
//! a timer will fire. When a flush leaves a backlog of `flush_size` or more ops, or the watchdog
//! is searching, one extra run happens at the next round (a one-shot timer; if it traps, the
//! repeating timer still runs).
//!
//! Three things can keep a flush from draining the queue, and the watchdog tells them apart:
//!
//! - **A flush fails outside any op**: `BEGIN` or `COMMIT` fails (a read-only or full database,
//!   an I/O error). The flush returns the error; batch_core keeps every op queued and fails none
//!   of them. The watchdog raises the alarm (`stats.alarm`, with the error, also in
//!   `stats.last_error`) and the timer retries once per period, however long it lasts; the
//!   first flush that commits clears the alarm.
//! - **A flush traps**: the instruction guard turns every op that runs too long into a failed
//!   outcome, but an op can still make its message trap (a single SQLite operation the guard
//!   cannot interrupt, such as the sort of a `CREATE INDEX` on a huge table or a gigantic
//!   string function, or a heap exhausted mid-way). A trap rolls back everything the flush did,
//!   so nothing records it; the watchdog notices what a trap cannot roll back: time. When no
//!   flush has committed or returned for [`STALLED_PERIODS`] timer periods while ops are
//!   pending, the timer flushes *carefully*: it records the attempt, then flushes in a separate
//!   message (a call to itself), so that a trap there is answered as a reject and counted.
//!   The first careful flush runs what a normal flush would: a timer can be late without any
//!   trap (rounds longer than its period, a busy subnet), and if that flush answers, the
//!   careful mode ends at once, having cost one self-call. Once a careful flush has trapped,
//!   it looks for the culprit by halving: it keeps the number of ops from the head known to
//!   trap together (at first, the whole queue), flushes at most half of them, and either halves
//!   that number (the careful flush trapped) or subtracts the ops that committed (it did not).
//!   Whenever the head is new (at the start, and after a halving step committed ops), it first
//!   flushes the head alone: the op that stopped a flush is often the first one left, and a
//!   trap costs a whole message while a careful flush that commits costs one op. A culprit is
//!   thus found in O(log n) careful flushes, without normal flushes (which would trap again) in
//!   between. The first op is removed without effect (`SQLITE_ABORT`, "removed
//!   without effect: ...") only after [`MAX_TRAPS_ALONE`] flushes of it alone made their
//!   message trap, each of them vouched for by a probe (below): the one reason given is the one
//!   observed. A careful flush that fails outside any op counts nothing against the ops. The
//!   careful mode ends once every op that was pending when the stall was seen has been flushed
//!   or removed.
//! - **A flush traps for a reason no op causes**: the canister's memory allocation (or the
//!   subnet's memory, or `wasm_memory_limit`) leaves no room for the heap to grow, so every
//!   flush traps ("cannot grow its memory usage") whatever it runs. A canister cannot read why
//!   its earlier message trapped, so the watchdog asks a question whose answer it can read:
//!   after the first careful flush that traps, and after each careful flush of the first op
//!   alone that traps, the next step is a **probe**, a call to itself ([`PROBE_METHOD`]) that does a flush's kind of work without any op: it
//!   takes [`PROBE_HEAP_BYTES`] from the heap's allocator (which SQLite's allocations share)
//!   and frees them, and writes a page in SQLite (`BEGIN IMMEDIATE`, `PRAGMA user_version` set
//!   to its own value, which journals and dirties the database's first page, then
//!   `ROLLBACK`). Only if the probe answers does a trap of the op alone count against it, and
//!   does the search go on. If the probe
//!   fails too (it traps, SQLite refuses the write, or the call cannot be made), the
//!   environment is at fault: the trap is not counted, the alarm is raised (`stats.alarm`, and
//!   the probe's error in `stats.last_error`), every op stays queued, caller flushes stop, and
//!   once per period the timer sends the probe again (nothing else); the first probe that
//!   answers clears the alarm and starts the careful mode over with a whole flush, which ends
//!   it at once if it answers. No op is ever removed for it.
//!
//!   What the probe costs: nothing while flushes work. Against an op that makes flushes trap,
//!   one probe message after the first trapped careful flush and one per trap of the op alone
//!   ([`MAX_TRAPS_ALONE`] per removed op), each answering (no more trapped messages than
//!   before, one more round each; about 0.41 M instructions each on the reference canister,
//!   offline engine). With no memory to grow, the environment is found after the normal
//!   flushes of [`STALLED_PERIODS`] periods, a whole careful flush and one probe, all trapping;
//!   then one probe per period traps (about 4,400 instructions: the heap's allocation fails
//!   first) until memory is available.
//!   What it cannot tell: an op that needs more of the heap than the probe takes (more than
//!   [`PROBE_HEAP_BYTES`] at once) and traps because the heap cannot grow is taken for an op
//!   that traps (it is, unlike its neighbours, too large for the memory left); and an op that
//!   traps for its own reason (the instruction limit) while the heap has less than
//!   [`PROBE_HEAP_BYTES`] to spare is not removed until memory is available (the alarm says
//!   so; no op is removed on a guess).
//!
//! Submits never run someone else's op that could trap: the size-triggered flush inside a
//! submit runs only while the queue is healthy (no alarm, no careful mode, a flush committed
//! or returned within the last period) and only over the ops before the first pending
//! controller SQL op (the typed ops of the API each run within the guard's reach; arbitrary SQL
//! may not). Anything else waits for the timer, whose trap costs no caller a reply.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::time::Duration;

use batch_core::{FlushError, FlushReport, Ticket};
use ic_cdk::call::{Call, CallFailed};
use ic_cdk_timers::TimerId;

use crate::message::MessageMeter;
use crate::state::{QUEUE, SETTINGS, with_connection};
use batch_types::{FlushSummary, WriteError};

/// Timer periods without a flush that committed or returned, while ops are pending, after which
/// the timer flushes carefully (the flushes in between must have trapped).
pub const STALLED_PERIODS: u64 = 2;
/// Careful flushes of the first op alone that made their message trap, after which it is
/// removed.
pub const MAX_TRAPS_ALONE: u32 = 3;
/// Timer periods after which a careful flush without a response is no longer waited for (its
/// callback trapped, for instance).
pub const STALE_CALL_PERIODS: u64 = 10;
/// The method a careful flush calls on the canister itself (hidden from the Candid interface).
pub const CAREFUL_FLUSH_METHOD: &str = "__careful_flush";
/// The method of the watchdog's probe, a flush's kind of work without any op, called on the
/// canister itself (hidden from the Candid interface).
pub const PROBE_METHOD: &str = "__careful_probe";
/// Bytes the probe takes from the heap's allocator and frees: 1 MiB, 256 database pages, far
/// more than a flush of one ordinary op allocates.
pub const PROBE_HEAP_BYTES: usize = 1 << 20;
/// The reject code of a call whose callee trapped (`CANISTER_ERROR` in the interface
/// specification).
const CANISTER_ERROR: u32 = 5;

/// The watchdog's view of the queue.
#[derive(Clone, Debug, Default)]
struct Watch {
    /// Last flush that executed an op, or the moment the queue became non-empty.
    progress_ns: u64,
    /// Last flush that returned (committed, failed outside any op, or stopped at its limit):
    /// it did not trap.
    answered_ns: u64,
    /// Flushes fail outside any op.
    failing: Option<Failing>,
    /// The search for an op that makes flushes trap.
    careful: Option<Careful>,
    /// Flushes trap and so does the probe, which runs no op: the environment is at fault.
    environment: Option<Failing>,
    /// The watchdog's last error (the probe's), with the queue's last error when it was
    /// recorded: `stats.last_error` shows it until the queue records another.
    last_error: Option<(String, Option<String>)>,
}

/// Flushes fail outside any op, or the environment makes them trap: the alarm.
#[derive(Clone, Debug)]
struct Failing {
    since_ns: u64,
    attempts: u64,
    error: String,
}

#[derive(Clone, Copy, Debug)]
struct Careful {
    /// Ops from the head known to make a flush trap together (an upper bound).
    suspects: usize,
    /// The first pending op when `traps_alone` was counted.
    head: Ticket,
    /// Careful flushes of `head` alone that made their message trap.
    traps_alone: u32,
    /// The last op pending when the stall was seen: the search ends once it left the queue.
    until: Ticket,
    /// A careful flush is under way since then (its response has not come back).
    in_flight_since: Option<u64>,
    /// The current first op has been flushed alone once.
    probed: bool,
    /// A careful flush has trapped since the stall was seen. Until one has, the stall may be
    /// only a late timer (rounds longer than the period, a busy subnet): the first careful
    /// flush runs what a normal flush would, and if it answers the careful mode ends.
    confirmed: bool,
    /// A careful flush of this many ops has just trapped, and the probe is the next step: the
    /// first trap of the careful mode (is the environment at fault from the start?), or a trap
    /// of the first op alone (1), which counts against it only once the probe has answered.
    probe_after: Option<usize>,
}

thread_local! {
    /// The repeating flush timer, while ops are pending.
    static TIMER: RefCell<Option<TimerId>> = const { RefCell::new(None) };
    /// A one-shot catch-up run is scheduled.
    static CATCH_UP: Cell<bool> = const { Cell::new(false) };
    static WATCH: RefCell<Watch> = RefCell::new(Watch::default());
    /// Tickets of the pending controller SQL ops, in order (kept across upgrades).
    static SQL_TICKETS: RefCell<VecDeque<Ticket>> = const { RefCell::new(VecDeque::new()) };
}

/// Whether a timer will flush what is pending.
pub fn armed() -> bool {
    TIMER.with_borrow(Option::is_some)
}

/// Records that the queue made progress (or just became non-empty) at `now_ns`: the alarms
/// are over (the careful search goes on until its ops have left the queue).
pub(crate) fn progress(now_ns: u64) {
    WATCH.with_borrow_mut(|w| {
        w.progress_ns = now_ns;
        w.answered_ns = now_ns;
        w.failing = None;
        w.environment = None;
    });
}

/// Records what a flush returned at `now_ns` (it did not trap).
pub(crate) fn record(result: &Result<FlushReport, FlushError>, now_ns: u64) {
    match result {
        Ok(report) if report.executed > 0 => progress(now_ns),
        Ok(_) => WATCH.with_borrow_mut(|w| w.answered_ns = now_ns),
        Err(error) => failed_outside_ops(&error.to_string(), now_ns),
    }
}

fn failed_outside_ops(error: &str, now_ns: u64) {
    WATCH.with_borrow_mut(|w| {
        w.answered_ns = now_ns;
        count(&mut w.failing, error, now_ns);
    });
}

/// One more failure of the alarm `alarm` (raised at `now_ns` if it was not).
fn count(alarm: &mut Option<Failing>, error: &str, now_ns: u64) {
    let failing = alarm.get_or_insert(Failing {
        since_ns: now_ns,
        attempts: 0,
        error: String::new(),
    });
    failing.attempts += 1;
    error.clone_into(&mut failing.error);
}

/// The probe failed at `now_ns` with `error`: the environment is at fault.
fn environment_at_fault(error: &str, now_ns: u64) {
    let queue_error = QUEUE.with_borrow(|q| q.stats().last_error);
    WATCH.with_borrow_mut(|w| {
        count(&mut w.environment, error, now_ns);
        w.last_error = Some((format!("watchdog: {error}"), queue_error));
    });
}

/// What `stats.last_error` shows, given the queue's last error: the watchdog's, if it recorded
/// one since the queue recorded `queue_error`, else `queue_error`.
pub fn last_error(queue_error: Option<String>) -> Option<String> {
    WATCH.with_borrow(|w| match &w.last_error {
        Some((error, then)) if *then == queue_error => Some(error.clone()),
        _ => queue_error,
    })
}

/// A controller SQL op was queued with `ticket`.
pub(crate) fn sql_queued(ticket: Ticket) {
    SQL_TICKETS.with_borrow_mut(|t| t.push_back(ticket));
}

/// The tickets of the pending controller SQL ops (for the saved state).
pub(crate) fn sql_tickets() -> Vec<Ticket> {
    prune_sql_tickets();
    SQL_TICKETS.with_borrow(|t| t.iter().copied().collect())
}

/// Replaces the pending controller SQL tickets (after an upgrade).
pub(crate) fn set_sql_tickets(tickets: Vec<Ticket>) {
    SQL_TICKETS.with_borrow_mut(|t| *t = tickets.into());
}

/// Forgets the SQL tickets that left the queue.
fn prune_sql_tickets() {
    let head = QUEUE.with_borrow(|q| q.pending().next().map_or(q.next_ticket(), |op| op.ticket));
    SQL_TICKETS.with_borrow_mut(|t| {
        while t.front().is_some_and(|&ticket| ticket < head) {
            t.pop_front();
        }
    });
}

/// The most ops a flush on a caller's behalf (a submit's size flush, a writer's `flush`) may
/// run at `now_ns`: none while the queue is unhealthy (failing flushes, a careful search, or
/// no flush committed or returned for a period with ops pending), otherwise the ops before the
/// first pending controller SQL op, which only the timer (or a controller's `flush`) runs.
pub(crate) fn caller_flush_limit(now_ns: u64) -> usize {
    let period = SETTINGS.with_borrow(|s| s.timer_period_ns());
    let healthy = WATCH.with_borrow(|w| {
        w.failing.is_none()
            && w.environment.is_none()
            && w.careful.is_none()
            && now_ns.saturating_sub(w.progress_ns.max(w.answered_ns)) < period
    });
    if !healthy {
        return 0;
    }
    prune_sql_tickets();
    let head = QUEUE.with_borrow(|q| q.pending().next().map(|op| op.ticket));
    match (head, SQL_TICKETS.with_borrow(|t| t.front().copied())) {
        (Some(head), Some(sql)) => usize::try_from(sql.saturating_sub(head)).unwrap_or(usize::MAX),
        _ => usize::MAX,
    }
}

/// What the watchdog reports in `stats.alarm` at `now_ns`.
pub fn alarm(now_ns: u64) -> Option<String> {
    WATCH.with_borrow(|w| {
        if let Some(f) = &w.failing {
            return Some(format!(
                "flushes fail outside any op ({} attempts in {} s): {}; every queued op stays pending and the timer retries once per period",
                f.attempts,
                now_ns.saturating_sub(f.since_ns) / 1_000_000_000,
                f.error
            ));
        }
        if let Some(e) = &w.environment {
            return Some(format!(
                "flushes trap for a reason no op causes: a probe that runs no op failed too ({} attempts in {} s): {}; every queued op stays pending and the timer probes again once per period",
                e.attempts,
                now_ns.saturating_sub(e.since_ns) / 1_000_000_000,
                e.error
            ));
        }
        w.careful.map(|c| {
            format!(
                "flushes trap: careful flushes are looking for the op that makes them trap among the first {} pending ops (the first has trapped alone {} times; it is removed after {MAX_TRAPS_ALONE})",
                c.suspects, c.traps_alone
            )
        })
    })
}

/// Arms the repeating timer when ops are pending and none is armed; clears it when nothing is
/// pending. Never resets an armed timer (that would starve flushes under steady load).
pub(crate) fn ensure() {
    let pending = QUEUE.with_borrow(|q| !q.is_empty());
    TIMER.with_borrow_mut(|timer| match (pending, timer.is_some()) {
        (true, false) => {
            let period = SETTINGS.with_borrow(|s| s.timer_period_ns());
            // Not `set_timer_interval_serial`: its executor writes the task back after the run
            // and traps if the run cleared its own timer, undoing the last flush.
            *timer = Some(ic_cdk_timers::set_timer_interval(
                Duration::from_nanos(period),
                run,
            ));
        }
        (false, true) => {
            if let Some(id) = timer.take() {
                ic_cdk_timers::clear_timer(id);
            }
        }
        _ => {}
    });
    if !pending {
        WATCH.with_borrow_mut(|w| w.careful = None);
    }
}

/// One timer run: a normal or a careful flush, a catch-up run if a backlog is left or the
/// search goes on, the timer re-checked.
async fn run() {
    let now = ic_cdk::api::time();
    let period = SETTINGS.with_borrow(|s| s.timer_period_ns());
    let (careful, in_flight, stalled) = WATCH.with_borrow(|w| {
        let in_flight = w
            .careful
            .and_then(|c| c.in_flight_since)
            .is_some_and(|since| {
                now.saturating_sub(since) < STALE_CALL_PERIODS.saturating_mul(period)
            });
        let quiet = now.saturating_sub(w.progress_ns.max(w.answered_ns));
        (
            w.careful.is_some(),
            in_flight,
            quiet >= STALLED_PERIODS.saturating_mul(period),
        )
    });
    let pending = QUEUE.with_borrow(|q| !q.is_empty());
    if !pending || in_flight {
        // Nothing to do, or the last careful flush has not answered yet.
    } else if careful || stalled {
        careful_step(now).await;
    } else {
        let result =
            QUEUE.with_borrow_mut(|q| with_connection(|conn| q.flush(conn, &MessageMeter)));
        record(&result, now);
        if let Err(e) = result {
            ic_cdk::println!("timer flush failed, queue kept: {e}");
        }
    }
    // While the environment is at fault, the probe runs once per period, without catch-up.
    let searching = WATCH.with_borrow(|w| {
        w.environment.is_none() && w.careful.is_some_and(|c| c.in_flight_since.is_none())
    });
    let backlog = QUEUE.with_borrow(|q| q.len() >= q.config().flush_size);
    // Expired keys of client batches are pruned by a timer of their own, never in this
    // message: this only re-arms that timer if it was lost (a few `Cell` reads).
    crate::keyed::ensure_prune_timer();
    if (backlog || searching) && !CATCH_UP.get() {
        CATCH_UP.set(true);
        ic_cdk_timers::set_timer(Duration::ZERO, async {
            CATCH_UP.set(false);
            Box::pin(run()).await;
        });
    }
    ensure();
}

/// One step of the careful search (see the module documentation).
async fn careful_step(now: u64) {
    let Some((head, last, len)) = QUEUE.with_borrow(|q| {
        let head = q.pending().next()?.ticket;
        Some((head, q.next_ticket() - 1, q.len()))
    }) else {
        WATCH.with_borrow_mut(|w| w.careful = None);
        return;
    };
    let mut careful = WATCH.with_borrow(|w| w.careful).unwrap_or(Careful {
        suspects: len,
        head,
        traps_alone: 0,
        until: last,
        in_flight_since: None,
        probed: false,
        confirmed: false,
        probe_after: None,
    });
    if careful.head != head {
        careful.head = head;
        careful.traps_alone = 0;
    }
    if head > careful.until {
        // Every op pending when the stall was seen has left the queue.
        WATCH.with_borrow_mut(|w| w.careful = None);
        return;
    }
    let unresolved = usize::try_from(careful.until - head + 1).unwrap_or(usize::MAX);
    if careful.suspects == 0 {
        // The ops that trapped together all committed in smaller flushes: no single op was the
        // cause; the rest of the search's ops are flushed carefully too.
        careful.suspects = unresolved;
    }
    if careful.suspects <= 1 && careful.traps_alone >= MAX_TRAPS_ALONE {
        let removed = QUEUE.with_borrow_mut(|q| {
            q.fail_first(format!(
                "removed without effect: each of {MAX_TRAPS_ALONE} flushes that ran this op alone made its message trap, so it would have stopped the queue"
            ))
        });
        ic_cdk::println!("careful flush: removed ticket {removed:?}");
        progress(now);
        careful.suspects = unresolved - 1;
        careful.traps_alone = 0;
        careful.probed = false;
        WATCH.with_borrow_mut(|w| w.careful = Some(careful));
        return;
    }
    if careful.probe_after.is_some() || WATCH.with_borrow(|w| w.environment.is_some()) {
        probe_step(careful, now, unresolved).await;
        return;
    }
    let limit = if !careful.confirmed {
        // What a normal flush would run (the budget bounds it), in a message of its own.
        usize::MAX
    } else if careful.probed {
        (careful.suspects / 2).max(1)
    } else {
        1
    };
    careful.probed = careful.confirmed;
    careful.in_flight_since = Some(now);
    WATCH.with_borrow_mut(|w| w.careful = Some(careful));
    // The attempt is committed at this await: a trap in the flush cannot roll it back.
    let result = Call::unbounded_wait(ic_cdk::api::canister_self(), CAREFUL_FLUSH_METHOD)
        .with_arg(limit as u64)
        .await;
    let answered = ic_cdk::api::time();
    careful.in_flight_since = None;
    match result {
        Ok(response) => match response.candid::<Result<FlushSummary, WriteError>>() {
            Ok(Ok(_)) if !careful.confirmed => {
                // A whole flush answered: the stall was a late timer, not a trap.
                WATCH.with_borrow_mut(|w| w.careful = None);
                return;
            }
            Ok(Ok(flushed)) => {
                let executed = usize::try_from(flushed.executed).unwrap_or(usize::MAX);
                careful.suspects = careful.suspects.saturating_sub(executed);
                if executed > 0 && limit > 1 {
                    // A new head after a halving step: it is flushed alone first.
                    careful.probed = false;
                }
            }
            Ok(Err(WriteError::Database(error))) => {
                // Not a trap and not an op's doing: the alarm is raised, nothing is counted.
                failed_outside_ops(&error, answered);
            }
            Ok(Err(other)) => ic_cdk::println!("careful flush refused: {other}"),
            Err(e) => ic_cdk::println!("careful flush: undecodable reply: {e}"),
        },
        Err(CallFailed::CallRejected(rejected)) if rejected.raw_reject_code() == CANISTER_ERROR => {
            ic_cdk::println!(
                "careful flush of {limit} ops trapped: {}",
                rejected.reject_message()
            );
            if !careful.confirmed {
                // A trap it is: the search starts over the whole queue, the head alone first,
                // once the probe has told whether the environment is at fault.
                careful.confirmed = true;
                careful.probed = false;
                careful.probe_after = Some(limit);
            } else {
                // A trap of the first op alone counts once the probe has answered.
                careful.probe_after = (limit == 1).then_some(1);
                careful.suspects = limit;
            }
        }
        Err(e) => ic_cdk::println!("careful flush not made: {e}"),
    }
    WATCH.with_borrow_mut(|w| w.careful = Some(careful));
}

/// The probe step of the careful search (see the module documentation): a call to
/// [`PROBE_METHOD`]; if it answers, the search goes on and a trap of the first op alone counts
/// (after the environment was at fault, the careful mode starts over); otherwise the
/// environment is at fault and nothing counts.
async fn probe_step(mut careful: Careful, now: u64, unresolved: usize) {
    careful.in_flight_since = Some(now);
    WATCH.with_borrow_mut(|w| w.careful = Some(careful));
    // The attempt is committed at this await: a trap in the probe cannot roll it back.
    let result = Call::unbounded_wait(ic_cdk::api::canister_self(), PROBE_METHOD).await;
    let answered = ic_cdk::api::time();
    careful.in_flight_since = None;
    let failure = match result {
        Ok(response) => match response.candid::<Result<(), WriteError>>() {
            Ok(Ok(())) => None,
            Ok(Err(e)) => Some(format!("the probe failed: {e}")),
            Err(e) => Some(format!("the probe's reply is undecodable: {e}")),
        },
        Err(CallFailed::CallRejected(rejected)) => Some(format!(
            "the probe, which runs no op, was rejected with code {}: {}",
            rejected.raw_reject_code(),
            rejected.reject_message()
        )),
        Err(e) => Some(format!("the probe could not be sent: {e}")),
    };
    match failure {
        None => {
            if careful.probe_after.take() == Some(1) {
                careful.traps_alone += 1;
            }
            if WATCH.with_borrow_mut(|w| w.environment.take().is_some()) {
                // The environment has recovered: what trapped before may not trap now. The
                // search starts over with a whole flush, which ends it if it answers.
                careful.confirmed = false;
                careful.probed = false;
                careful.traps_alone = 0;
                careful.suspects = unresolved;
            }
        }
        Some(error) => {
            ic_cdk::println!("careful flush: {error}");
            // The trap that asked for the probe does not count against the op.
            careful.probe_after = None;
            environment_at_fault(&error, answered);
        }
    }
    WATCH.with_borrow_mut(|w| w.careful = Some(careful));
}

/// The probe: takes [`PROBE_HEAP_BYTES`] from the heap and frees them, and writes the
/// database's first page in a transaction it rolls back. Only the canister itself may call it
/// (an update hidden from the Candid interface, exported by this crate). Changes nothing.
#[ic_cdk::update(hidden = true, name = "__careful_probe")]
fn careful_probe() -> Result<(), WriteError> {
    if ic_cdk::api::msg_caller() != ic_cdk::api::canister_self() {
        return Err(WriteError::NotAuthorized);
    }
    probe()
}

fn probe() -> Result<(), WriteError> {
    // Taken from the allocator SQLite shares, where a flush's allocations come from; the
    // heap grows if it has no such room free (and the message traps if it cannot).
    let heap: Vec<u8> = Vec::with_capacity(PROBE_HEAP_BYTES);
    std::hint::black_box(&heap);
    drop(heap);
    with_connection(|conn| {
        conn.execute_batch("BEGIN IMMEDIATE")?;
        let written = conn
            .pragma_query_value(None, "user_version", |row| row.get::<_, i64>(0))
            .and_then(|version| conn.pragma_update(None, "user_version", version));
        let rolled_back = conn.execute_batch("ROLLBACK");
        written.and(rolled_back)
    })
    .map_err(|e| WriteError::Database(format!("the probe's write: {e}")))
}

/// The careful flush: at most `limit` ops, in a message of its own. Only the canister itself
/// may call it (an update hidden from the Candid interface, exported by this crate): anyone
/// else is answered `Err(NotAuthorized)` before the argument is read.
#[ic_cdk::update(hidden = true, name = "__careful_flush", manual_reply = true)]
fn careful_flush() {
    if ic_cdk::api::msg_caller() != ic_cdk::api::canister_self() {
        return ic_cdk::api::msg_reply(crate::access::NOT_AUTHORIZED_REPLY);
    }
    let (limit,): (u64,) = crate::message::arguments();
    let summary = careful_flush_now(limit);
    ensure();
    crate::message::reply(&summary);
}

fn careful_flush_now(limit: u64) -> Result<FlushSummary, WriteError> {
    if ic_cdk::api::msg_caller() != ic_cdk::api::canister_self() {
        return Err(WriteError::NotAuthorized);
    }
    let limit = usize::try_from(limit).unwrap_or(usize::MAX);
    let result = QUEUE
        .with_borrow_mut(|q| with_connection(|conn| q.flush_at_most(conn, &MessageMeter, limit)));
    let now = ic_cdk::api::time();
    record(&result, now);
    let report = result.map_err(|e| WriteError::Database(e.to_string()))?;
    Ok(report.into())
}

/// Forgets the timers and the watchdog (an upgrade removes timers; `post_upgrade` calls
/// [`ensure`] afterwards).
pub(crate) fn reset() {
    TIMER.with_borrow_mut(|t| *t = None);
    CATCH_UP.set(false);
    WATCH.with_borrow_mut(|w| *w = Watch::default());
    progress(ic_cdk::api::time());
}
