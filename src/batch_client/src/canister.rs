//! The driver and transport of an application canister (feature `ic-cdk`): the canister
//! batches its writes to a database canister with bounded-wait inter-canister calls, flushed
//! from ic-cdk-timers timers. Builds for `wasm32-unknown-unknown` and `wasm32-wasip1`.
//!
//! A timer is armed when a batch may become due (the queue goes from empty to non-empty, a
//! size trigger, a resubmission): at the delay trigger, or at once. The timer takes every due
//! batch and sends each from its own task; a retry waits in a timer of its own. The IC runs
//! timers at most once per round, so `max_delay_ns` below a round means "next round".
//!
//! An update method must not await an op's future itself: its call context ends with its own
//! message unless it makes a call of its own, and the batch is answered in the timer's
//! messages. Reply with something the caller can ask about later (a ticket), and keep the
//! outcome from a migratory task:
//!
//! ```ignore
//! #[ic_cdk::update]
//! fn create_order(user_id: i64, amount: f64) -> Result<u64, String> {
//!     let op = UserOrderOp::CreateOrder { user_id, amount };
//!     let outcome = BATCHER.with(|b| b.try_submit(op, ic_cdk::api::time()))
//!         .map_err(|e| e.to_string())?;
//!     let ticket = next_ticket();
//!     ic_cdk::futures::spawn_migratory(async move { record(ticket, outcome.await) });
//!     Ok(ticket)
//! }
//! ```

use std::sync::{Arc, Mutex};
use std::time::Duration;

use candid::Principal;
use ic_cdk::call::{Call, CallFailed};
use ic_cdk_timers::TimerId;

use crate::batcher::{Batcher, Due, InFlight, Next};
use crate::codec::BatchCodec;
use crate::config::BatcherConfig;
use crate::transport::{RejectCode, SendError, Transport};

/// Sends each attempt as a bounded-wait call of `method` on `canister`. A bounded-wait call
/// that times out is rejected with `SYS_UNKNOWN` (the call may have run): the batcher retries
/// it with the same key.
#[derive(Clone, Debug)]
pub struct CdkTransport {
    canister: Principal,
    method: String,
    timeout_seconds: u32,
}

impl CdkTransport {
    /// A transport calling `method` of `canister`, waiting at most `timeout_seconds` for each
    /// reply (the system's bounded-wait timeout, 300 s at most).
    pub fn new(canister: Principal, method: impl Into<String>, timeout_seconds: u32) -> Self {
        CdkTransport {
            canister,
            method: method.into(),
            timeout_seconds,
        }
    }
}

impl Transport for CdkTransport {
    async fn call(&self, request: Vec<u8>) -> Result<Vec<u8>, SendError> {
        let call = Call::bounded_wait(self.canister, &self.method)
            .change_timeout(self.timeout_seconds)
            .with_raw_args(&request);
        match call.await {
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
        }
    }
}

/// `config` with the canister's time as its key prefix: a canister that is reinstalled starts
/// its counter again, at a later time.
pub fn with_time_key_prefix(mut config: BatcherConfig) -> BatcherConfig {
    config.key_prefix = ic_cdk::api::time().to_be_bytes();
    config
}

/// Drives a [`Batcher`] in a canister (see the module documentation). Cloning shares it.
pub struct CanisterDriver<C: BatchCodec, T> {
    batcher: Batcher<C>,
    transport: Arc<T>,
    /// The armed timer and when it fires (nanoseconds, the canister's time).
    armed: Arc<Mutex<Option<(TimerId, u64)>>>,
}

impl<C: BatchCodec, T> Clone for CanisterDriver<C, T> {
    fn clone(&self) -> Self {
        CanisterDriver {
            batcher: self.batcher.clone(),
            transport: Arc::clone(&self.transport),
            armed: Arc::clone(&self.armed),
        }
    }
}

impl<C, T> CanisterDriver<C, T>
where
    C: BatchCodec + Send + Sync + 'static,
    C::Op: Send,
    C::Outcome: Send,
    C::Refusal: Send,
    T: Transport + Send + Sync + 'static,
{
    /// Drives `batcher` over `transport` from now on: installs the batcher's notifier, which
    /// arms timers as batches become due. Call it from `init` and `post_upgrade` (timers do
    /// not survive an upgrade; neither does the queue, which lives in the heap).
    pub fn start(batcher: Batcher<C>, transport: T) -> Self {
        let driver = CanisterDriver {
            batcher,
            transport: Arc::new(transport),
            armed: Arc::new(Mutex::new(None)),
        };
        let notified = driver.clone();
        driver.batcher.set_notifier(move || notified.arm());
        driver
    }

    /// The batcher (to submit ops).
    pub fn batcher(&self) -> &Batcher<C> {
        &self.batcher
    }

    /// Arms the timer for the next due batch, unless one is armed that fires no later.
    fn arm(&self) {
        let now = ic_cdk::api::time();
        let at = match self.batcher.due(now) {
            Due::Idle => return,
            Due::Now => now,
            Due::At(at) => at,
        };
        let mut armed = self.armed.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((timer, fires_at)) = *armed {
            if fires_at <= at {
                return;
            }
            ic_cdk_timers::clear_timer(timer);
        }
        let driver = self.clone();
        let timer = ic_cdk_timers::set_timer(Duration::from_nanos(at - now), async move {
            driver.fire();
        });
        *armed = Some((timer, at));
    }

    /// The timer's work: send every due batch, each from its own task, and arm the next timer.
    fn fire(&self) {
        *self.armed.lock().unwrap_or_else(|p| p.into_inner()) = None;
        let now = ic_cdk::api::time();
        while let Some(batch) = self.batcher.take_batch(now) {
            let driver = self.clone();
            ic_cdk::futures::spawn(async move { driver.attempt(batch).await });
        }
        self.arm();
    }

    async fn attempt(self, batch: InFlight<C>) {
        let result = self.transport.call(batch.request().to_vec()).await;
        if let Next::Retry { batch, delay_ns } =
            self.batcher.finish(batch, result, ic_cdk::api::time())
        {
            let driver = self.clone();
            ic_cdk_timers::set_timer(Duration::from_nanos(delay_ns), async move {
                Box::pin(driver.attempt(batch)).await;
            });
        }
        self.arm();
    }
}
