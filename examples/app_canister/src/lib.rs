//! An application canister that receives one user call per write and forwards the writes to
//! the reference database canister, in one of two modes chosen at install:
//!
//! - `Batched`: through the batcher (`ic-batch-client`, feature `ic-cdk`): each call queues its
//!   op and answers a ticket at once; a timer flushes the queue as one keyed packed batch, one
//!   bounded-wait inter-canister call (`execute_batch_packed`) per flush, retried with the same
//!   key until answered. The op's outcome is recorded under its ticket when the batch answers.
//! - `Direct`: each call makes one bounded-wait call (`create_user`) to the database canister
//!   and records its outcome before answering.
//!
//! `outcome(ticket)` reads an outcome; `summary()` counts them. The canister must be a writer
//! (or controller) of the database canister.
#![cfg(target_family = "wasm")]

use std::cell::RefCell;

use bench_api::client::PackedUserOrders;
use bench_api::{Outcome, UserOrderOp};
use candid::{CandidType, Deserialize, Principal};
use ic_batch_client::canister::{CanisterDriver, CdkTransport, with_time_key_prefix};
use ic_batch_client::{Batcher, BatcherConfig};

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
}

/// Seconds a bounded-wait call waits for its answer.
const CALL_TIMEOUT_SECONDS: u32 = 60;

thread_local! {
    static INIT: RefCell<Option<Init>> = const { RefCell::new(None) };
    static DRIVER: RefCell<Option<CanisterDriver<PackedUserOrders, CdkTransport>>> =
        const { RefCell::new(None) };
    /// Ticket `t`'s outcome (`None`: not answered yet).
    static OUTCOMES: RefCell<Vec<Option<Result<Outcome, String>>>> = const { RefCell::new(Vec::new()) };
}

fn setup(init: Init) {
    if init.mode == Mode::Batched {
        let config = with_time_key_prefix(BatcherConfig::default());
        match Batcher::new(PackedUserOrders, config) {
            Ok(batcher) => {
                let transport =
                    CdkTransport::new(init.database, "execute_batch_packed", CALL_TIMEOUT_SECONDS);
                DRIVER.set(Some(CanisterDriver::start(batcher, transport)));
            }
            Err(e) => ic_cdk::trap(format!("the batcher's configuration: {e}")),
        }
    }
    INIT.set(Some(init));
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
            let submitted = DRIVER.with_borrow(|d| {
                d.as_ref()
                    .map(|d| d.batcher().try_submit(op, ic_cdk::api::time()))
            });
            match submitted {
                Some(Ok(future)) => ic_cdk::futures::spawn_migratory(async move {
                    record(ticket, future.await.map_err(|e| e.to_string()));
                }),
                Some(Err(e)) => record(ticket, Err(e.to_string())),
                None => record(ticket, Err("no batcher".into())),
            }
        }
        Mode::Direct => {
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
