//! The driver and transport of an application canister (feature `ic-cdk`): the canister
//! batches its writes to a database canister with bounded-wait inter-canister calls. Builds
//! for `wasm32-unknown-unknown` and `wasm32-wasip1`.
//!
//! # How batches leave
//!
//! A due batch is sent from a message that runs anyway: the canister's own update method,
//! which submits with [`CanisterDriver::try_submit`] (or calls [`CanisterDriver::poke`] after
//! submitting to the [`Batcher`] itself), and the answer of every batch in flight. A timer is
//! set only for what would otherwise wait: the last ops of a burst ([`TIMER_GRACE_NS`] after
//! they are due, about one IC round, so that under load the next call sends them first) and
//! retries (at their backoff). When nothing waits, the timer is cleared. A batch that comes
//! due while `max_in_flight` batches are in flight goes with the next answer.
//!
//! # Why not ic-cdk-timers
//!
//! This driver used to flush from ic-cdk-timers timers. ic-cdk-timers runs every timer as a
//! self-call (`<ic-cdk internal> timer_executor`, to survive a trap), so each flush cost the
//! global timer, the self-call's execution, two callbacks and two call fees instead of one
//! callback and one call: about 10.6 M cycles more per flush on a 13-node subnet (measured on
//! `examples/app_canister`, `bench/app_canister.md`: 8,016,251 cycles per user write end to end
//! at 50 user calls per round, 7,159,476 once the flush went with the next message). Its
//! `clear_timer` also leaves the system timer set, so a timer moved or cleared at every call
//! still wakes the canister once (a global timer execution, about 5 M cycles).
//!
//! The driver therefore sets the canister's global timer itself (`ic0.global_timer_set`,
//! deactivated when nothing waits) and runs from the canister's `canister_global_timer`,
//! which the canister exports with one line, [`export_global_timer!`](crate::export_global_timer).
//! The library exports nothing by itself: a canister that also uses ic-cdk-timers (which
//! exports `canister_global_timer`; ic-rusqlite-batch uses it) cannot have its timer taken
//! silently. There, `export_global_timer!` fails to link (duplicate symbol
//! `canister_global_timer`); start the driver with [`CanisterDriver::start_with_wakeup`]
//! instead and give it a timer of that library (each firing then costs a self-call; the
//! messages still send what is due under load).
//!
//! # Example
//!
//! An update method must not await an op's future itself: its call context ends with its own
//! message unless it makes a call of its own, and the batch is answered in later messages.
//! Reply with something the caller can ask about later (a ticket), and keep the outcome from
//! a migratory task:
//!
//! ```ignore
//! use ic_batch_client::canister::{CanisterDriver, CdkTransport, with_time_key_prefix};
//! use ic_batch_client::{Batcher, BatcherConfig, Declared};
//!
//! type Driver = CanisterDriver<Declared<ShopWrite>, CdkTransport>;
//! thread_local! { static DRIVER: RefCell<Option<Driver>> = const { RefCell::new(None) }; }
//!
//! // Call from `init` and `post_upgrade` (the queue lives in the heap; timers do not survive
//! // an upgrade).
//! fn start(database: Principal) {
//!     let config = with_time_key_prefix(BatcherConfig::default());
//!     let batcher = Batcher::new(Declared::<ShopWrite>::new(), config).expect("a config");
//!     let transport = CdkTransport::new(database, "execute_writes_packed", 60);
//!     DRIVER.set(Some(CanisterDriver::start(batcher, transport)));
//! }
//!
//! // The driver's timer (a canister that uses ic-cdk-timers: `start_with_wakeup` instead).
//! ic_batch_client::export_global_timer!();
//!
//! #[ic_cdk::update]
//! fn create_order(user_id: i64, amount: f64) -> Result<u64, String> {
//!     let op = ShopWrite::create_order { user_id, amount };
//!     let driver = DRIVER.with_borrow(|d| d.clone()).expect("started");
//!     // Queues the op and sends whatever is due with this message.
//!     let outcome = driver.try_submit(op).map_err(|e| e.to_string())?;
//!     let ticket = next_ticket();
//!     ic_cdk::futures::spawn_migratory(async move { record(ticket, outcome.await) });
//!     Ok(ticket)
//! }
//! ```

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::{Arc, Mutex, MutexGuard};

use candid::Principal;
use ic_cdk::call::{Call, CallFailed};

use crate::batcher::{Batcher, Due, InFlight, Next, OpFuture, SubmitError};
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

/// How much later than a batch is due the driver's timer is set for it: about one IC round
/// (blocks come about once a second), so that under load the next message, which runs anyway,
/// sends the batch, and the timer sends only the last ops of a burst. The tail of a burst
/// waits at most `max_delay_ns` plus this.
pub const TIMER_GRACE_NS: u64 = 1_000_000_000;

/// Counters of a [`CanisterDriver`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DriverStats {
    /// Attempts sent: inter-canister calls to the database canister (retries included).
    pub calls: u64,
    /// Of them, sent from a message that ran anyway (a submit or [`poke`](CanisterDriver::poke)
    /// of the canister's method, or a batch's answer).
    pub sent_by_messages: u64,
    /// Of them, sent from the driver's timer.
    pub sent_by_timer: u64,
    /// Times the driver's timer ran.
    pub timer_runs: u64,
}

type Wakeup = Box<dyn Fn(Option<u64>) + Send + Sync>;

struct State<C: BatchCodec> {
    /// Batches to send again, with the time (ns) each is due.
    retries: Vec<(u64, InFlight<C>)>,
    /// When the driver asked its timer to run (`None`: not set).
    wake_at: Option<u64>,
    stats: DriverStats,
}

struct Inner<C: BatchCodec, T> {
    batcher: Batcher<C>,
    transport: T,
    state: Mutex<State<C>>,
    /// `None`: the canister's global timer.
    wakeup: Option<Wakeup>,
}

/// Drives a [`Batcher`] in a canister (see the module documentation). Cloning shares it.
pub struct CanisterDriver<C: BatchCodec, T> {
    inner: Arc<Inner<C, T>>,
}

impl<C: BatchCodec, T> Clone for CanisterDriver<C, T> {
    fn clone(&self) -> Self {
        CanisterDriver {
            inner: Arc::clone(&self.inner),
        }
    }
}

/// Where a batch was sent from.
#[derive(Clone, Copy)]
enum Origin {
    Message,
    Timer,
}

impl<C, T> CanisterDriver<C, T>
where
    C: BatchCodec + Send + Sync + 'static,
    C::Op: Send,
    C::Outcome: Send,
    C::Refusal: Send,
    T: Transport + Send + Sync + 'static,
{
    /// Drives `batcher` over `transport` from now on, with the canister's global timer for
    /// what waits: the canister must export `canister_global_timer` with
    /// [`export_global_timer!`](crate::export_global_timer) (or call [`global_timer`] from its
    /// own). Call it from `init` and `post_upgrade` (the queue lives in the heap; so does the
    /// timer's deadline).
    pub fn start(batcher: Batcher<C>, transport: T) -> Self {
        let driver = Self::new(batcher, transport, None);
        let woken: Rc<dyn Woken> = Rc::new(driver.clone());
        DRIVERS.with_borrow_mut(|d| d.push(woken));
        driver
    }

    /// [`start`](Self::start) with another timer than the global timer (a canister that uses
    /// ic-cdk-timers): `wakeup(Some(at))` asks for [`run_timer`](Self::run_timer) to be called
    /// at `at` (nanoseconds, the canister's time), replacing the previous request;
    /// `wakeup(None)` cancels it. With ic-cdk-timers:
    ///
    /// ```ignore
    /// thread_local! { static TAIL: Cell<Option<ic_cdk_timers::TimerId>> = const { Cell::new(None) }; }
    /// let driver = CanisterDriver::start_with_wakeup(batcher, transport, |at| {
    ///     if let Some(timer) = TAIL.take() {
    ///         ic_cdk_timers::clear_timer(timer);
    ///     }
    ///     if let Some(at) = at {
    ///         let delay = Duration::from_nanos(at.saturating_sub(ic_cdk::api::time()));
    ///         TAIL.set(Some(ic_cdk_timers::set_timer(delay, async {
    ///             if let Some(driver) = DRIVER.with_borrow(|d| d.clone()) {
    ///                 driver.run_timer();
    ///             }
    ///         })));
    ///     }
    /// });
    /// ```
    pub fn start_with_wakeup(
        batcher: Batcher<C>,
        transport: T,
        wakeup: impl Fn(Option<u64>) + Send + Sync + 'static,
    ) -> Self {
        Self::new(batcher, transport, Some(Box::new(wakeup)))
    }

    fn new(batcher: Batcher<C>, transport: T, wakeup: Option<Wakeup>) -> Self {
        let driver = CanisterDriver {
            inner: Arc::new(Inner {
                batcher,
                transport,
                state: Mutex::new(State {
                    retries: Vec::new(),
                    wake_at: None,
                    stats: DriverStats::default(),
                }),
                wakeup,
            }),
        };
        // A batch may become due outside the driver's messages (a submit to the batcher
        // without a poke, a flush, ops queued again): the notifier sets the timer.
        let notified = driver.clone();
        driver.inner.batcher.set_notifier(move || notified.arm());
        driver
    }

    /// The batcher.
    pub fn batcher(&self) -> &Batcher<C> {
        &self.inner.batcher
    }

    /// The counters.
    pub fn stats(&self) -> DriverStats {
        self.lock().stats.clone()
    }

    /// Queues `op` at the canister's time and sends what is due with the current message
    /// ([`poke`](Self::poke)); returns the future of its outcome, or gives the op back
    /// ([`Batcher::try_submit`]). Call it from an update method.
    pub fn try_submit(&self, op: C::Op) -> Result<OpFuture<C>, SubmitError<C::Op>> {
        let future = self.inner.batcher.try_submit(op, ic_cdk::api::time())?;
        self.poke();
        Ok(future)
    }

    /// [`try_submit`](Self::try_submit) in the order of `ordering_key`
    /// ([`Batcher::try_submit_ordered`]): ops sharing the key are committed in the order given.
    pub fn try_submit_ordered(
        &self,
        op: C::Op,
        ordering_key: &str,
    ) -> Result<OpFuture<C>, SubmitError<C::Op>> {
        let future =
            self.inner
                .batcher
                .try_submit_ordered(op, ordering_key, ic_cdk::api::time())?;
        self.poke();
        Ok(future)
    }

    /// Sends every batch and retry due now from the current message (each as a call of its
    /// own) and sets the timer for what still waits. Call it from an update method that
    /// runs anyway, after submitting to the [`batcher`](Self::batcher) directly.
    pub fn poke(&self) {
        self.send_due(Origin::Message);
    }

    /// The timer's work: what [`poke`](Self::poke) does, counted as the timer's. Called by
    /// [`global_timer`]; call it from the timer of a [`start_with_wakeup`](Self::start_with_wakeup)
    /// driver.
    pub fn run_timer(&self) {
        {
            let mut st = self.lock();
            st.wake_at = None;
            st.stats.timer_runs += 1;
        }
        self.send_due(Origin::Timer);
    }

    fn lock(&self) -> MutexGuard<'_, State<C>> {
        self.inner
            .state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn send_due(&self, origin: Origin) {
        let now = ic_cdk::api::time();
        let retries: Vec<InFlight<C>> = {
            let mut st = self.lock();
            let (due, wait) = std::mem::take(&mut st.retries)
                .into_iter()
                .partition(|(at, _)| *at <= now);
            st.retries = wait;
            due.into_iter().map(|(_, batch)| batch).collect()
        };
        for batch in retries {
            self.send(batch, origin);
        }
        while let Some(batch) = self.inner.batcher.take_batch(now) {
            self.send(batch, origin);
        }
        self.arm();
    }

    fn send(&self, batch: InFlight<C>, origin: Origin) {
        {
            let mut st = self.lock();
            st.stats.calls += 1;
            match origin {
                Origin::Message => st.stats.sent_by_messages += 1,
                Origin::Timer => st.stats.sent_by_timer += 1,
            }
        }
        let driver = self.clone();
        ic_cdk::futures::spawn(async move { driver.attempt(batch).await });
    }

    /// One attempt; once answered, what is due goes with the answer's message.
    async fn attempt(self, batch: InFlight<C>) {
        let result = self.inner.transport.call(batch.request().to_vec()).await;
        let now = ic_cdk::api::time();
        if let Next::Retry { batch, delay_ns } = self.inner.batcher.finish(batch, result, now) {
            self.lock()
                .retries
                .push((now.saturating_add(delay_ns), batch));
        }
        self.send_due(Origin::Message);
    }

    /// Sets the timer for the next batch ([`TIMER_GRACE_NS`] after it is due; at once if it
    /// is due and no message sent it) or retry, or clears it when nothing waits.
    fn arm(&self) {
        let now = ic_cdk::api::time();
        let batch = match self.inner.batcher.due(now) {
            Due::Idle => None,
            Due::Now => Some(now),
            Due::At(at) => Some(at.saturating_add(TIMER_GRACE_NS)),
        };
        let at = {
            let mut st = self.lock();
            let retry = st.retries.iter().map(|(at, _)| *at).min();
            let at = batch.into_iter().chain(retry).min();
            if st.wake_at == at {
                return;
            }
            st.wake_at = at;
            at
        };
        match &self.inner.wakeup {
            Some(wakeup) => wakeup(at),
            None => set_global_timer(),
        }
    }
}

/// A driver on the global timer, as [`global_timer`] sees it.
trait Woken {
    fn wake_at(&self) -> Option<u64>;
    fn run_timer(&self);
}

impl<C, T> Woken for CanisterDriver<C, T>
where
    C: BatchCodec + Send + Sync + 'static,
    C::Op: Send,
    C::Outcome: Send,
    C::Refusal: Send,
    T: Transport + Send + Sync + 'static,
{
    fn wake_at(&self) -> Option<u64> {
        self.lock().wake_at
    }

    fn run_timer(&self) {
        CanisterDriver::run_timer(self);
    }
}

thread_local! {
    /// The drivers started with [`CanisterDriver::start`].
    static DRIVERS: RefCell<Vec<Rc<dyn Woken>>> = const { RefCell::new(Vec::new()) };
}

/// Sets the global timer for the earliest driver, or deactivates it (0) when none waits.
fn set_global_timer() {
    let at = DRIVERS.with_borrow(|d| d.iter().filter_map(|d| d.wake_at()).min());
    // A time already past fires the timer in the next round.
    ic_cdk::api::global_timer_set(at.map_or(0, |at| at.max(1)));
}

/// The global timer's work: runs every driver started with [`CanisterDriver::start`] whose
/// time has come, then sets the timer for the next. Call it from the canister's
/// `canister_global_timer` export, outside any executor context (what
/// [`export_global_timer!`](crate::export_global_timer) does).
pub fn global_timer() {
    ic_cdk::futures::internals::in_executor_context(|| {
        let now = ic_cdk::api::time();
        let drivers = DRIVERS.with_borrow(|d| d.clone());
        for driver in drivers {
            if driver.wake_at().is_some_and(|at| at <= now) {
                driver.run_timer();
            }
        }
        set_global_timer();
    });
}

/// Exports the canister's `canister_global_timer` for the drivers started with
/// [`CanisterDriver::start`](crate::canister::CanisterDriver::start): write
/// `ic_batch_client::export_global_timer!();` once, at the top level of the canister's crate.
/// A canister that exports its own (or uses ic-cdk-timers, which does) fails to link with a
/// duplicate `canister_global_timer`: it calls [`global_timer`](crate::canister::global_timer)
/// from its own export, or starts the drivers with
/// [`start_with_wakeup`](crate::canister::CanisterDriver::start_with_wakeup).
#[macro_export]
macro_rules! export_global_timer {
    () => {
        #[unsafe(export_name = "canister_global_timer")]
        extern "C" fn __ic_batch_client_global_timer() {
            $crate::canister::global_timer();
        }
    };
}
