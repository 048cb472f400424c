//! An application canister that receives one user call per write and forwards the writes to
//! the reference database canister, in one of two modes chosen at install:
//!
//! - `Batched`: through `ic-batch-client`'s `CanisterDriver` and the library's generic protocol
//!   (the declared writes `bench_api::writes::UserOrderWrite`, `Declared`, the database
//!   canister's `execute_writes_packed`): each call queues its op and answers a ticket at once;
//!   once the oldest queued op has waited `max_delay_ns` (50 ms), the queue leaves as one keyed
//!   batch, one bounded-wait inter-canister call per flush, retried with the same key until
//!   answered. The driver sends a due batch with the next message that runs anyway (the next
//!   user call, or the answer of a batch in flight) and sets the canister's global timer only
//!   for the last ops of a burst and for retries. The op's outcome is recorded under its
//!   ticket when its batch answers.
//! - `Direct`: each call makes one bounded-wait call (`create_user`) to the database canister
//!   and records its outcome before answering.
//!
//! `outcome(ticket)` reads an outcome; `summary()` counts them, and the calls and timer
//! executions the canister made. The canister must be a writer (or controller) of the database
//! canister.
#![cfg(target_family = "wasm")]

use std::cell::{Cell, RefCell};

use bench_api::Outcome;
use bench_api::writes::UserOrderWrite;
use candid::{CandidType, Deserialize, Principal};
use ic_batch_client::canister::{CanisterDriver, CdkTransport, with_time_key_prefix};
use ic_batch_client::{Batcher, BatcherConfig, Declared};

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

/// Outcomes recorded so far, and what the canister sent.
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
    /// Runs of the driver's timer (executions of the global timer that had work for it).
    pub timers: u64,
    /// Batches formed (each under its own key; `calls` minus `retries`).
    pub batches: u64,
    /// Calls that were retries of a batch, with its key.
    pub retries: u64,
    /// Answers that said the batch had already run (a retry answered from the record).
    pub duplicate_replies: u64,
    /// Calls sent from a message that ran anyway (a user call or a batch's answer).
    pub sent_by_messages: u64,
    /// Calls sent from the timer.
    pub sent_by_timer: u64,
    /// Distinct rows (`last_insert_rowid`) among the committed outcomes: `committed` when each
    /// op was applied once, in a row of its own.
    pub distinct_rows: u64,
}

/// Seconds a bounded-wait call waits for its answer.
const CALL_TIMEOUT_SECONDS: u32 = 60;

type Driver = CanisterDriver<Declared<UserOrderWrite>, CdkTransport>;

thread_local! {
    static INIT: RefCell<Option<Init>> = const { RefCell::new(None) };
    static DRIVER: RefCell<Option<Driver>> = const { RefCell::new(None) };
    /// Ticket `t`'s outcome (`None`: not answered yet).
    static OUTCOMES: RefCell<Vec<Option<Result<Outcome, String>>>> = const { RefCell::new(Vec::new()) };
    /// Calls made to the database canister in `Direct` mode.
    static DIRECT_CALLS: Cell<u64> = const { Cell::new(0) };
}

// The driver's timer: the canister's global timer (the canister uses no other timer).
ic_batch_client::export_global_timer!();

fn setup(init: Init) {
    if init.mode == Mode::Batched {
        // Keys start with the canister's time: a reinstalled canister counts its batches
        // again, at a later time.
        let config = with_time_key_prefix(BatcherConfig::default());
        match Batcher::new(Declared::<UserOrderWrite>::new(), config) {
            Ok(batcher) => {
                let transport =
                    CdkTransport::new(init.database, "execute_writes_packed", CALL_TIMEOUT_SECONDS);
                DRIVER.set(Some(CanisterDriver::start(batcher, transport)));
            }
            Err(e) => ic_cdk::trap(format!("the batcher's configuration: {e}")),
        }
    }
    INIT.set(Some(init));
}

fn driver() -> Option<Driver> {
    DRIVER.with_borrow(|d| d.clone())
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
            let op = UserOrderWrite::create_user { username, email };
            // Queues the op; what is due leaves with this call's message.
            match driver().map(|d| d.try_submit(op)) {
                Some(Ok(future)) => {
                    ic_cdk::futures::spawn_migratory(async move {
                        record(ticket, future.await.map_err(|e| e.to_string()));
                    });
                }
                Some(Err(e)) => record(ticket, Err(e.to_string())),
                None => record(ticket, Err("no batcher".into())),
            }
        }
        Mode::Direct => {
            DIRECT_CALLS.set(DIRECT_CALLS.get() + 1);
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
    let mut s = Summary {
        calls: DIRECT_CALLS.get(),
        ..Summary::default()
    };
    if let Some(driver) = driver() {
        let (sent, batcher) = (driver.stats(), driver.batcher().stats());
        s.calls += sent.calls;
        s.timers = sent.timer_runs;
        s.sent_by_messages = sent.sent_by_messages;
        s.sent_by_timer = sent.sent_by_timer;
        s.batches = batcher.batches;
        s.retries = batcher.retries;
        s.duplicate_replies = batcher.duplicate_replies;
    }
    let mut rows = std::collections::BTreeSet::new();
    OUTCOMES.with_borrow(|o| {
        s.tickets = o.len() as u64;
        for x in o {
            match x {
                None => s.pending += 1,
                Some(Ok(Outcome::Committed {
                    last_insert_rowid, ..
                })) => {
                    s.committed += 1;
                    rows.insert(*last_insert_rowid);
                }
                Some(_) => s.failed += 1,
            }
        }
    });
    s.distinct_rows = rows.len() as u64;
    s
}
