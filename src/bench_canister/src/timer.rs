//! The flush timer, and what keeps the queue moving when flushes trap.
//!
//! One repeating timer runs while ops are pending, every `max(max_delay, 1 s)`, and is cleared
//! when the queue is empty. A repeating timer cannot be lost: ic-cdk-timers reschedules it in
//! `canister_global_timer` before running the task in a self-call, so even a task that traps
//! (its changes rolled back) leaves the next run scheduled. `stats.timer_armed` reads state that
//! a trap rolls back together with the timer's creation or removal, so it is true exactly when
//! a timer will fire. When a flush leaves a backlog of `flush_size` or more ops, one extra flush
//! runs at the next round (a one-shot timer; if it traps, the repeating timer still drains).
//!
//! The instruction guard turns every op that runs too long into a failed outcome, but an op
//! can still make a flush trap: a single SQLite operation that cannot be interrupted (the sort
//! of a `CREATE INDEX` on a huge table, a gigantic string function) or a heap exhausted mid-way.
//! A trap rolls back everything the flush did, so the queue cannot record it; the op would be
//! first again at every flush. The watchdog notices what a trap cannot roll back: time. When
//! the queue has made no progress for [`STALLED_PERIODS`] timer periods, the timer runs
//! *careful* flushes instead: it first records the attempt, then flushes in a separate message
//! (a call to itself), at most half as many ops as before each time that message fails, down to
//! the first op alone; an op that makes its flush fail [`MAX_ATTEMPTS`] times alone is removed
//! without effect (`SQLITE_ABORT`, "removed: ..."). A careful flush that commits returns the
//! timer to normal flushes. The extra call costs one inter-canister message, only while stalled.

use std::cell::{Cell, RefCell};
use std::time::Duration;

use batch_core::Ticket;
use bench_api::{FlushResult, FlushSummary, WriteError};
use ic_cdk::call::Call;
use ic_cdk_timers::TimerId;

use crate::{MessageMeter, QUEUE, SETTINGS, db, flush_now, summary};

/// Timer periods without progress after which the timer flushes carefully.
pub const STALLED_PERIODS: u64 = 3;
/// Failed careful flushes of the first op alone after which it is removed.
pub const MAX_ATTEMPTS: u32 = 3;
/// The method a careful flush calls on the canister itself (hidden from the Candid interface).
pub const CAREFUL_FLUSH_METHOD: &str = "__careful_flush";

/// The watchdog's view: when the queue last made progress, and the careful flush in progress.
#[derive(Clone, Copy, Debug, Default)]
struct Watch {
    /// Last flush that executed an op, or the moment the queue became non-empty.
    progress_ns: u64,
    careful: Option<Careful>,
}

#[derive(Clone, Copy, Debug)]
struct Careful {
    /// Ops the next careful flush may execute.
    limit: usize,
    /// The first pending op when the attempts were counted.
    head: Ticket,
    /// Careful flushes of `head` alone that failed.
    attempts: u32,
}

thread_local! {
    /// The repeating flush timer, while ops are pending.
    static TIMER: RefCell<Option<TimerId>> = const { RefCell::new(None) };
    /// A one-shot catch-up flush is scheduled.
    static CATCH_UP: Cell<bool> = const { Cell::new(false) };
    static WATCH: Cell<Watch> = Cell::new(Watch::default());
}

/// Whether a timer will flush what is pending.
pub fn armed() -> bool {
    TIMER.with_borrow(Option::is_some)
}

/// Records that the queue made progress (or just became non-empty) at `now_ns`.
pub fn progress(now_ns: u64) {
    WATCH.set(Watch {
        progress_ns: now_ns,
        careful: None,
    });
}

/// Arms the repeating timer when ops are pending and none is armed; clears it when nothing is
/// pending. Never resets an armed timer (that would starve flushes under steady load).
pub fn ensure() {
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
}

/// One timer run: a normal or a careful flush, a catch-up if a backlog is left, the timer
/// re-checked.
async fn run() {
    let now = ic_cdk::api::time();
    let period = SETTINGS.with_borrow(|s| s.timer_period_ns());
    let stalled = QUEUE.with_borrow(|q| !q.is_empty())
        && now.saturating_sub(WATCH.get().progress_ns) >= STALLED_PERIODS.saturating_mul(period);
    if stalled {
        careful_flush(now).await;
    } else if let Err(e) = flush_now() {
        ic_cdk::println!("timer flush failed, queue kept: {e:?}");
    }
    let backlog = QUEUE.with_borrow(|q| q.len() >= q.config().flush_size);
    if backlog && !CATCH_UP.get() {
        CATCH_UP.set(true);
        ic_cdk_timers::set_timer(Duration::ZERO, async {
            CATCH_UP.set(false);
            Box::pin(run()).await;
        });
    }
    ensure();
}

/// One step of the careful mode (see the module documentation).
async fn careful_flush(now: u64) {
    let Some((head, len)) =
        QUEUE.with_borrow(|q| q.pending().next().map(|op| (op.ticket, q.len())))
    else {
        return;
    };
    let mut careful = WATCH.get().careful.unwrap_or(Careful {
        limit: (len / 2).max(1),
        head,
        attempts: 0,
    });
    if careful.head != head {
        careful.head = head;
        careful.attempts = 0;
    }
    if careful.limit == 1 && careful.attempts >= MAX_ATTEMPTS {
        let removed = QUEUE.with_borrow_mut(|q| {
            q.fail_first(format!(
                "removed without effect: every flush that ran this op alone failed or trapped ({MAX_ATTEMPTS} times), so it would have stopped the queue"
            ))
        });
        ic_cdk::println!("careful flush: removed ticket {removed:?}");
        progress(now);
        return;
    }
    careful.attempts += 1;
    set_careful(careful);
    // The attempt is committed at this await: a trap in the flush cannot roll it back.
    let result = Call::unbounded_wait(ic_cdk::api::canister_self(), CAREFUL_FLUSH_METHOD)
        .with_arg(careful.limit as u64)
        .await;
    let flushed = match result {
        Ok(response) => response
            .candid::<FlushResult>()
            .map_err(|e| e.to_string())
            .and_then(|r| Result::from(r).map_err(|e: WriteError| format!("{e:?}"))),
        Err(e) => Err(e.to_string()),
    };
    match flushed {
        Ok(_) => progress(ic_cdk::api::time()),
        Err(reason) => {
            ic_cdk::println!("careful flush of {} ops failed: {reason}", careful.limit);
            if careful.limit > 1 {
                careful.limit /= 2;
                careful.attempts = 0;
            }
            set_careful(careful);
        }
    }
}

fn set_careful(careful: Careful) {
    let watch = WATCH.get();
    WATCH.set(Watch {
        careful: Some(careful),
        ..watch
    });
}

/// The careful flush: at most `limit` ops, in a message of its own. Only the canister itself
/// may call it.
pub fn careful_flush_now(limit: u64) -> Result<FlushSummary, WriteError> {
    if ic_cdk::api::msg_caller() != ic_cdk::api::canister_self() {
        return Err(WriteError::NotAuthorized);
    }
    let limit = usize::try_from(limit).unwrap_or(usize::MAX);
    let report =
        QUEUE.with_borrow_mut(|q| db::with(|conn| q.flush_at_most(conn, &MessageMeter, limit)));
    let report = report.map_err(|e| WriteError::Database(e.to_string()))?;
    if report.executed > 0 {
        progress(ic_cdk::api::time());
    }
    Ok(summary(report))
}

/// Forgets the timers and the watchdog (an upgrade removes timers; `post_upgrade` calls
/// [`ensure`] afterwards).
pub fn reset() {
    TIMER.with_borrow_mut(|t| *t = None);
    CATCH_UP.set(false);
    progress(ic_cdk::api::time());
}
