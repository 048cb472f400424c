//! An application canister that receives one user call per write and forwards the writes to
//! the reference database canister, in one of two modes chosen at install:
//!
//! - `Batched`: through the batcher (`ic-batch-client`): each call queues its op and answers a
//!   ticket at once; once the oldest queued op has waited `max_delay_ns` (50 ms), the queue is
//!   flushed as one keyed packed batch, one bounded-wait inter-canister call
//!   (`execute_batch_packed`) per flush, retried with the same key until answered. The op's
//!   outcome is recorded under its ticket when the batch answers.
//! - `Direct`: each call makes one bounded-wait call (`create_user`) to the database canister
//!   and records its outcome before answering.
//!
//! `outcome(ticket)` reads an outcome; `summary()` counts them, and the calls and timer
//! executions the canister made. The canister must be a writer (or controller) of the database
//! canister.
//!
//! The batcher is driven here with the canister's one global timer (`canister_global_timer`,
//! `ic0.global_timer_set`), not through `ic-batch-client`'s `CanisterDriver`: that driver's
//! ic-cdk-timers run every timer as a self-call, so each flush cost three more executions
//! (`timer_executor`, its answer) and a call fee besides the timer's own, about 10.6 M cycles
//! per flush (`bench/app_canister.md`). Here a due batch goes with a message that runs anyway:
//! the next user call (or the answer of a batch in flight) sends it; the timer is set about a
//! round later, for the last ops of a burst (and retries), and cleared when nothing waits.
#![cfg(target_family = "wasm")]

use std::cell::{Cell, RefCell};

use bench_api::client::PackedUserOrders;
use bench_api::{Outcome, UserOrderOp};
use candid::{CandidType, Deserialize, Principal};
use ic_batch_client::{Batcher, BatcherConfig, Due, InFlight, Next, RejectCode, SendError};
use ic_cdk::call::{Call, CallFailed};

/// How writes reach the database canister.
#[derive(CandidType, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Through the batcher: one call per flush.
    Batched,
    /// One call per write.
    Direct,
}

/// The install argument.
#[derive(CandidType, Deserialize, Clone, Debug)]
pub struct Init {
    /// The database canister (the reference canister).
    pub database: Principal,
    /// How to forward writes.
    pub mode: Mode,
}

/// Outcomes recorded so far.
#[derive(CandidType, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    /// Tickets issued.
    pub tickets: u64,
    /// Ops committed.
    pub committed: u64,
    /// Ops that failed, or whose batch failed.
    pub failed: u64,
    /// Ops not answered yet.
    pub pending: u64,
    /// Inter-canister calls made to the database canister (retries included).
    pub calls: u64,
    /// Executions of the canister's global timer.
    pub timers: u64,
}

/// Seconds a bounded-wait call waits for its answer.
const CALL_TIMEOUT_SECONDS: u32 = 60;

thread_local! {
    static INIT: RefCell<Option<Init>> = const { RefCell::new(None) };
    static BATCHER: RefCell<Option<Batcher<PackedUserOrders>>> = const { RefCell::new(None) };
    /// Batches waiting to be sent again, with the time (ns) they are due.
    static RETRIES: RefCell<Vec<(u64, InFlight<PackedUserOrders>)>> = const { RefCell::new(Vec::new()) };
    /// Ticket `t`'s outcome (`None`: not answered yet).
    static OUTCOMES: RefCell<Vec<Option<Result<Outcome, String>>>> = const { RefCell::new(Vec::new()) };
    /// Calls made to the database canister.
    static CALLS: Cell<u64> = const { Cell::new(0) };
    /// Executions of the global timer.
    static TIMERS: Cell<u64> = const { Cell::new(0) };
}

fn setup(init: Init) {
    if init.mode == Mode::Batched {
        // Keys start with the canister's time: a reinstalled canister counts its batches
        // again, at a later time.
        let config = BatcherConfig {
            key_prefix: ic_cdk::api::time().to_be_bytes(),
            ..BatcherConfig::default()
        };
        match Batcher::new(PackedUserOrders, config) {
            Ok(batcher) => {
                batcher.set_notifier(arm);
                BATCHER.set(Some(batcher));
            }
            Err(e) => ic_cdk::trap(format!("the batcher's configuration: {e}")),
        }
    }
    INIT.set(Some(init));
}

fn batcher() -> Option<Batcher<PackedUserOrders>> {
    BATCHER.with_borrow(|b| b.clone())
}

/// How much later than a batch is due the timer is set for it: about one IC round, so that
/// under steady load the next user call, which runs anyway, sends the batch, and the timer
/// only sends the last ops of a burst.
const TIMER_GRACE_NS: u64 = 1_000_000_000;

/// Sets the global timer for the next batch ([`TIMER_GRACE_NS`] after it is due) or retry, or
/// clears it when nothing waits (a batch in flight sets it again when answered). Every call
/// sets the system's timer outright, so nothing here can disagree with it, even after a trap.
fn arm() {
    let Some(batcher) = batcher() else { return };
    let now = ic_cdk::api::time();
    let batch = match batcher.due(now) {
        Due::Idle => None,
        Due::Now => Some(now),
        Due::At(at) => Some(at.saturating_add(TIMER_GRACE_NS)),
    };
    let retry = RETRIES.with_borrow(|r| r.iter().map(|(at, _)| *at).min());
    // 0 clears the timer; a time already past fires it in the next round.
    let at = batch
        .into_iter()
        .chain(retry)
        .min()
        .map_or(0, |at| at.max(1));
    ic_cdk::api::global_timer_set(at);
}

/// The timer: sends the retries and batches that are due, then sets the timer for the next.
#[unsafe(export_name = "canister_global_timer")]
extern "C" fn global_timer() {
    ic_cdk::futures::internals::in_executor_context(|| {
        TIMERS.set(TIMERS.get() + 1);
        let now = ic_cdk::api::time();
        let due: Vec<_> = RETRIES.with_borrow_mut(|r| {
            let (due, wait) = std::mem::take(r)
                .into_iter()
                .partition(|(at, _)| *at <= now);
            *r = wait;
            due
        });
        for (_, batch) in due {
            ic_cdk::futures::spawn(attempt(batch));
        }
        send_due(now);
        arm();
    });
}

/// Sends every batch due at `now`, each from its own task; whether it sent one.
fn send_due(now: u64) -> bool {
    let Some(batcher) = batcher() else {
        return false;
    };
    let mut sent = false;
    while let Some(batch) = batcher.take_batch(now) {
        ic_cdk::futures::spawn(attempt(batch));
        sent = true;
    }
    sent
}

/// One attempt of `batch`: a bounded-wait call of `execute_batch_packed`. A call that times out
/// is rejected with `SYS_UNKNOWN` (it may have run): the batcher retries it with the same key.
/// Once answered, what is due is sent from here, and the timer set for the rest.
async fn attempt(batch: InFlight<PackedUserOrders>) {
    let (Some(batcher), Some(init)) = (batcher(), INIT.with_borrow(|i| i.clone())) else {
        return;
    };
    CALLS.set(CALLS.get() + 1);
    let answer = Call::bounded_wait(init.database, "execute_batch_packed")
        .change_timeout(CALL_TIMEOUT_SECONDS)
        .with_raw_args(batch.request())
        .await;
    let result = match answer {
        Ok(response) => Ok(response.into_bytes()),
        Err(CallFailed::CallRejected(rejected)) => Err(SendError::Rejected {
            code: RejectCode::from_u32(rejected.raw_reject_code()),
            message: rejected.reject_message().to_owned(),
        }),
        // The call was not made: nothing ran.
        Err(CallFailed::CallPerformFailed(error)) => Err(SendError::Rejected {
            code: RejectCode::SysTransient,
            message: error.to_string(),
        }),
        Err(CallFailed::InsufficientLiquidCycleBalance(error)) => Err(SendError::Rejected {
            code: RejectCode::SysTransient,
            message: error.to_string(),
        }),
    };
    let now = ic_cdk::api::time();
    if let Next::Retry { batch, delay_ns } = batcher.finish(batch, result, now) {
        RETRIES.with_borrow_mut(|r| r.push((now.saturating_add(delay_ns), batch)));
    }
    send_due(now);
    arm();
}

#[ic_cdk::init]
fn init(init: Init) {
    setup(init);
}

#[ic_cdk::post_upgrade]
fn post_upgrade(init: Init) {
    setup(init);
}

fn new_ticket() -> u64 {
    OUTCOMES.with_borrow_mut(|o| {
        o.push(None);
        o.len() as u64 - 1
    })
}

fn record(ticket: u64, outcome: Result<Outcome, String>) {
    OUTCOMES.with_borrow_mut(|o| {
        if let Some(slot) = o.get_mut(ticket as usize) {
            *slot = Some(outcome);
        }
    });
}

fn current() -> Init {
    INIT.with_borrow(|i| i.clone())
        .unwrap_or_else(|| ic_cdk::trap("not initialised"))
}

/// Creates a user in the database canister; answers its ticket (see the module
/// documentation for when its outcome is recorded).
#[ic_cdk::update]
async fn create_user(username: String, email: String) -> u64 {
    let init = current();
    let ticket = new_ticket();
    match init.mode {
        Mode::Batched => {
            let op = UserOrderOp::CreateUser { username, email };
            let submitted = batcher().map(|b| b.try_submit(op, ic_cdk::api::time()));
            match submitted {
                Some(Ok(future)) => {
                    ic_cdk::futures::spawn_migratory(async move {
                        record(ticket, future.await.map_err(|e| e.to_string()));
                    });
                    // The queue's oldest ops, once due, go with this call's message (the
                    // batcher's notifier set the timer when the queue was empty).
                    if send_due(ic_cdk::api::time()) {
                        arm();
                    }
                }
                Some(Err(e)) => record(ticket, Err(e.to_string())),
                None => record(ticket, Err("no batcher".into())),
            }
        }
        Mode::Direct => {
            CALLS.set(CALLS.get() + 1);
            let answer = ic_cdk::call::Call::bounded_wait(init.database, "create_user")
                .change_timeout(CALL_TIMEOUT_SECONDS)
                .with_args(&(username, email))
                .await;
            let outcome = match answer {
                Ok(response) => response
                    .candid::<Result<Outcome, bench_api::WriteError>>()
                    .map_err(|e| format!("the reply: {e}"))
                    .and_then(|r| r.map_err(|e| e.to_string())),
                Err(e) => Err(e.to_string()),
            };
            record(ticket, outcome);
        }
    }
    ticket
}

/// Ticket `ticket`'s outcome, if answered.
#[ic_cdk::query]
fn outcome(ticket: u64) -> Option<Result<Outcome, String>> {
    OUTCOMES.with_borrow(|o| o.get(ticket as usize).cloned().flatten())
}

/// The outcomes recorded so far.
#[ic_cdk::query]
fn summary() -> Summary {
    OUTCOMES.with_borrow(|o| {
        let mut s = Summary {
            tickets: o.len() as u64,
            calls: CALLS.get(),
            timers: TIMERS.get(),
            ..Summary::default()
        };
        for x in o {
            match x {
                None => s.pending += 1,
                Some(Ok(Outcome::Committed { .. })) => s.committed += 1,
                Some(_) => s.failed += 1,
            }
        }
        s
    })
}
