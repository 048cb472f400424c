//! The runtime-agnostic core: a bounded queue of ops, each with a one-shot channel to its
//! submitter, formed into keyed batches when a trigger fires, and the state machine that turns
//! each attempt's result into outcomes, a retry, or a resubmission. It never sleeps, spawns or
//! reads a clock: drivers (tokio off-chain, ic-cdk timers in a canister, a test's own loop)
//! pass the time in and do the waiting.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet, VecDeque};
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};

use futures_channel::oneshot;

use crate::codec::{BatchCodec, BatchKey, RefusalKind, Reply};
use crate::config::{BatcherConfig, ConfigError};
use crate::transport::{RejectCode, SendError};

#[cfg(test)]
mod tests;

/// Why an op got no outcome from the canister.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BatchError<R> {
    /// The canister refused the op's batch as a whole, and nothing of it ran: no attempt of
    /// the batch could have run (otherwise the error is [`BatchError::Unknown`]).
    #[error("the batch was refused, nothing ran: {0}")]
    Refused(R),
    /// The Internet Computer rejected every attempt of the batch, and none could have run.
    #[error("the batch was rejected with {code}, nothing ran: {message}")]
    Rejected {
        /// The last reject code.
        code: RejectCode,
        /// The last reject message.
        message: String,
    },
    /// Whether the batch ran is not known: an attempt went unanswered and no later attempt
    /// got the recorded answer before retries stopped (`retry_for_ns`, or the key aged out of
    /// the canister's window). The op ran at most once.
    #[error(
        "unknown whether the batch ran (it ran at most once) after {attempts} attempts: {last_error}"
    )]
    Unknown {
        /// Attempts made.
        attempts: u32,
        /// What the last attempt got.
        last_error: String,
    },
    /// The canister answered but its reply could not be read: the batch may have run.
    #[error("the reply could not be read (the batch may have run): {0}")]
    BadReply(String),
    /// The batcher was dropped (or its driver stopped) before the op's batch was answered;
    /// the op may have been sent.
    #[error("the batcher stopped before the op's batch was answered")]
    Closed,
}

/// Why [`Batcher::try_submit`] did not take an op; the op is given back.
#[derive(Debug, thiserror::Error)]
pub enum SubmitError<Op> {
    /// The queue holds `max_queued_ops` ops or `max_queued_bytes` bytes: wait
    /// ([`Batcher::submit`]) or try later.
    #[error("the client queue is full")]
    QueueFull(Op),
    /// The op alone does not fit a request.
    #[error("the op takes {len} bytes; a request holds at most {max} bytes of ops")]
    OpTooLarge {
        /// The op.
        op: Op,
        /// Its encoded length.
        len: usize,
        /// The room for ops in one request.
        max: usize,
    },
    /// [`Batcher::close`] was called.
    #[error("the batcher is closed")]
    Closed(Op),
}

/// What an op's future resolves to: the canister's outcome of the op, or why there is none.
pub type OpResult<C> = Result<<C as BatchCodec>::Outcome, BatchError<<C as BatchCodec>::Refusal>>;

/// The future of one op's outcome, from [`Batcher::submit`]. Dropping it does not withdraw
/// the op.
pub struct OpFuture<C: BatchCodec> {
    receiver: oneshot::Receiver<OpResult<C>>,
}

impl<C: BatchCodec> Future for OpFuture<C> {
    type Output = OpResult<C>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Pin::new(&mut self.receiver)
            .poll(cx)
            .map(|result| result.unwrap_or(Err(BatchError::Closed)))
    }
}

impl<C: BatchCodec> fmt::Debug for OpFuture<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("OpFuture")
    }
}

/// When the next batch is due.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Due {
    /// A batch can be taken now ([`Batcher::take_batch`]).
    Now,
    /// The delay trigger fires at this time (nanoseconds, the driver's clock).
    At(u64),
    /// Nothing is queued, `max_in_flight` batches are in flight, or every queued op waits for
    /// the batch of its ordering key in flight.
    Idle,
}

/// What to do with a batch after an attempt ([`Batcher::finish`]).
pub enum Next<C: BatchCodec> {
    /// Every op of the batch has its outcome (or was queued again).
    Done,
    /// Send the same request again after `delay_ns`.
    Retry {
        /// The batch, to send again with [`InFlight::request`].
        batch: InFlight<C>,
        /// Nanoseconds to wait first.
        delay_ns: u64,
    },
}

/// Counters of a [`Batcher`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BatcherStats {
    /// Ops accepted.
    pub submitted: u64,
    /// Ops queued now (those waiting for a batch of their ordering key included).
    pub queued: usize,
    /// Their encoded bytes.
    pub queued_bytes: usize,
    /// Batches in flight now.
    pub in_flight: usize,
    /// Batches formed (each with its own key).
    pub batches: u64,
    /// Attempts finished (first sends and retries).
    pub attempts: u64,
    /// Attempts that were retries.
    pub retries: u64,
    /// Replies that said the batch was a duplicate (a retry of a batch that had run).
    pub duplicate_replies: u64,
    /// Ops given an outcome of the canister.
    pub outcomes: u64,
    /// Ops given [`BatchError::Refused`] or [`BatchError::Rejected`].
    pub refused: u64,
    /// Ops given [`BatchError::Unknown`] or [`BatchError::BadReply`].
    pub unknown: u64,
    /// Ops queued again after the canister reported them not executed.
    pub resubmitted: u64,
}

/// An ordering key: ops sharing one are committed in the order they were submitted.
type OrderingKey = Arc<str>;

/// A queued op.
struct Slot<C: BatchCodec> {
    op: C::Op,
    len: usize,
    submitted_ns: u64,
    resubmits: u32,
    sender: oneshot::Sender<OpResult<C>>,
    /// Its place in submission order (kept when the op is queued again).
    seq: u64,
    ordering_key: Option<OrderingKey>,
}

/// The order of ops queued again: the lowest `seq` first.
impl<C: BatchCodec> Ord for Slot<C> {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        Reverse(self.seq).cmp(&Reverse(other.seq))
    }
}

impl<C: BatchCodec> PartialOrd for Slot<C> {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl<C: BatchCodec> PartialEq for Slot<C> {
    fn eq(&self, other: &Self) -> bool {
        self.seq == other.seq
    }
}

impl<C: BatchCodec> Eq for Slot<C> {}

/// The ops of one ordering key that are queued, and whether a batch of the key is in flight.
struct KeyState<C: BatchCodec> {
    queued: usize,
    queued_bytes: usize,
    in_flight: bool,
    /// Its queued ops taken out of the queue's order while a batch of the key is in flight
    /// (put back when it is settled).
    parked: Vec<Slot<C>>,
}

impl<C: BatchCodec> Default for KeyState<C> {
    fn default() -> Self {
        KeyState {
            queued: 0,
            queued_bytes: 0,
            in_flight: false,
            parked: Vec::new(),
        }
    }
}

struct State<C: BatchCodec> {
    /// The queued ops in submission order, except the parked ones and those queued again; an
    /// op whose key has a batch in flight is parked when it reaches the front.
    queue: VecDeque<Slot<C>>,
    /// Ops queued again, out of the queue's order (not executed, or unparked): they go before
    /// every later op of the queue. Empty but for those, so the queue's order costs nothing
    /// more than a FIFO when no op is queued again.
    again: BinaryHeap<Slot<C>>,
    /// Every queued op, parked or not, and their bytes.
    queued: usize,
    queued_bytes: usize,
    /// Of them, the ops whose key has a batch in flight, and their bytes.
    blocked: usize,
    blocked_bytes: usize,
    keys: HashMap<OrderingKey, KeyState<C>>,
    next_seq: u64,
    in_flight: usize,
    next_counter: u64,
    closed: bool,
    flush_requested: bool,
    room_waiters: Vec<Waker>,
    stats: BatcherStats,
}

impl<C: BatchCodec> State<C> {
    /// Ops that may leave in the next batch.
    fn eligible(&self) -> (usize, usize) {
        (
            self.queued - self.blocked,
            self.queued_bytes - self.blocked_bytes,
        )
    }

    /// Queues `slot` at its place in submission order: a new op at the back, an op queued
    /// again among the others queued again.
    fn push(&mut self, slot: Slot<C>) {
        self.queued += 1;
        self.queued_bytes += slot.len;
        if let Some(key) = &slot.ordering_key {
            let state = self.keys.entry(Arc::clone(key)).or_default();
            state.queued += 1;
            state.queued_bytes += slot.len;
            if state.in_flight {
                self.blocked += 1;
                self.blocked_bytes += slot.len;
            }
        }
        if self.queue.back().is_none_or(|last| last.seq < slot.seq) {
            self.queue.push_back(slot);
        } else {
            self.again.push(slot);
        }
    }

    /// The first queued op by submission order, from the queue or from the ops queued again.
    fn first(&self) -> Option<&Slot<C>> {
        match (self.queue.front(), self.again.peek()) {
            (Some(new), Some(again)) if again.seq < new.seq => Some(again),
            (None, again) => again,
            (new, _) => new,
        }
    }

    /// Takes the op [`first`](Self::first) returns.
    fn take_first(&mut self) -> Option<Slot<C>> {
        match (self.queue.front(), self.again.peek()) {
            (Some(new), Some(again)) if again.seq < new.seq => self.again.pop(),
            (None, _) => self.again.pop(),
            _ => self.queue.pop_front(),
        }
    }

    /// The first queued op that may leave now, parking the ops before it whose key has a batch
    /// in flight.
    fn front(&mut self) -> Option<&Slot<C>> {
        loop {
            let key = match self.first()?.ordering_key.as_ref() {
                Some(key) if self.keys.get(key).is_some_and(|k| k.in_flight) => Arc::clone(key),
                _ => return self.first(),
            };
            let slot = self.take_first().expect("a first op");
            self.keys
                .get_mut(&key)
                .expect("a key in flight")
                .parked
                .push(slot);
        }
    }

    /// Takes the front op (after [`front`](Self::front) returned it).
    fn pop_front(&mut self) -> Option<Slot<C>> {
        let slot = self.take_first()?;
        self.queued -= 1;
        self.queued_bytes -= slot.len;
        if let Some(key) = &slot.ordering_key
            && let Some(state) = self.keys.get_mut(key)
        {
            state.queued -= 1;
            state.queued_bytes -= slot.len;
        }
        Some(slot)
    }

    /// Marks `keys` as having a batch in flight: their queued ops wait.
    fn hold(&mut self, keys: &[OrderingKey]) {
        for key in keys {
            let state = self.keys.entry(Arc::clone(key)).or_default();
            state.in_flight = true;
            self.blocked += state.queued;
            self.blocked_bytes += state.queued_bytes;
        }
    }

    /// The batch of `keys` is settled: their queued ops may leave again, in their order.
    fn release_keys(&mut self, keys: &[OrderingKey]) {
        for key in keys {
            let Some(state) = self.keys.get_mut(key) else {
                continue;
            };
            state.in_flight = false;
            self.blocked -= state.queued;
            self.blocked_bytes -= state.queued_bytes;
            let parked = std::mem::take(&mut state.parked);
            if state.queued == 0 {
                self.keys.remove(key);
            }
            self.again.extend(parked);
        }
    }
}

type Notifier = Arc<dyn Fn() + Send + Sync>;

struct Shared<C: BatchCodec> {
    codec: C,
    config: BatcherConfig,
    state: Mutex<State<C>>,
    notifier: Mutex<Option<Notifier>>,
}

impl<C: BatchCodec> Shared<C> {
    fn lock(&self) -> MutexGuard<'_, State<C>> {
        // A panic while holding the lock leaves counters, not invariants, half-updated.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn notify(&self) {
        let notifier = self
            .notifier
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone();
        if let Some(notify) = notifier {
            notify();
        }
    }
}

/// Batches ops into keyed requests with Marlin.BatchOps' semantics: [`submit`](Self::submit)
/// one op, get a future of its outcome; ops leave the queue in batches when `max_batch_ops`
/// ops (or `max_request_bytes` bytes) are queued or the oldest has waited `max_delay_ns`.
/// Every batch gets its own [`BatchKey`]; an attempt without an answer is retried with the
/// same key (and the same bytes), so a canister that deduplicates runs it at most once.
///
/// The batcher is a handle (cloning shares it) and does no I/O: a driver takes due batches
/// ([`take_batch`](Self::take_batch)), sends them with a [`Transport`](crate::Transport), and
/// reports each attempt ([`finish`](Self::finish)). The drivers of this crate are
/// `tokio_driver` (feature `tokio`) and
/// `canister` (feature `ic-cdk`).
///
/// Ops of one batch run in order, in one transaction of the canister; batches in flight at
/// the same time may run in any order, except that the ops submitted with one ordering key
/// ([`try_submit_ordered`](Self::try_submit_ordered)) are committed in the order given: a
/// batch holding ops of a key leaves only once the previous one holding ops of it is settled.
pub struct Batcher<C: BatchCodec> {
    shared: Arc<Shared<C>>,
}

impl<C: BatchCodec> Clone for Batcher<C> {
    fn clone(&self) -> Self {
        Batcher {
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<C: BatchCodec> fmt::Debug for Batcher<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Batcher")
            .field("config", &self.shared.config)
            .field("stats", &self.stats())
            .finish()
    }
}

impl<C: BatchCodec> Batcher<C> {
    /// A batcher of `codec`'s ops with `config`.
    pub fn new(codec: C, config: BatcherConfig) -> Result<Self, ConfigError> {
        config.validate(codec.header_len())?;
        Ok(Batcher {
            shared: Arc::new(Shared {
                codec,
                config,
                state: Mutex::new(State {
                    queue: VecDeque::new(),
                    again: BinaryHeap::new(),
                    queued: 0,
                    queued_bytes: 0,
                    blocked: 0,
                    blocked_bytes: 0,
                    keys: HashMap::new(),
                    next_seq: 0,
                    in_flight: 0,
                    next_counter: 0,
                    closed: false,
                    flush_requested: false,
                    room_waiters: Vec::new(),
                    stats: BatcherStats::default(),
                }),
                notifier: Mutex::new(None),
            }),
        })
    }

    /// The configuration.
    pub fn config(&self) -> &BatcherConfig {
        &self.shared.config
    }

    /// The codec.
    pub fn codec(&self) -> &C {
        &self.shared.codec
    }

    /// Sets the function called when a batch may have become due earlier than the driver
    /// planned: the queue went from empty to non-empty, a size trigger was reached, ops were
    /// queued again, a flush was requested, or the batcher was closed. Called without any lock
    /// held; it should only wake the driver.
    pub fn set_notifier(&self, notify: impl Fn() + Send + Sync + 'static) {
        *self
            .shared
            .notifier
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(Arc::new(notify));
    }

    /// Queues `op`, submitted at `now_ns` (the driver's clock), and returns the future of its
    /// outcome, or gives the op back if the queue is full, the op does not fit a request, or
    /// the batcher is closed. Cost: the op's encoded length, computed once.
    pub fn try_submit(&self, op: C::Op, now_ns: u64) -> Result<OpFuture<C>, SubmitError<C::Op>> {
        self.enqueue(op, None, now_ns, None)
    }

    /// [`try_submit`](Self::try_submit) in the order of `ordering_key`: the ops submitted with
    /// one ordering key are committed in the order they were submitted. A batch holding ops of
    /// the key is sent only once the previous batch holding ops of it is settled (answered,
    /// retried until answered, or given up), so at most one batch per key is in flight and a
    /// retry never lets a later batch of the key pass. Ops without a key (and of other keys)
    /// keep leaving while they wait. Cost: one hash map lookup per op, and the key's
    /// batches one at a time (a key's ops leave in batches of up to `max_batch_ops`, one
    /// round trip each).
    pub fn try_submit_ordered(
        &self,
        op: C::Op,
        ordering_key: &str,
        now_ns: u64,
    ) -> Result<OpFuture<C>, SubmitError<C::Op>> {
        self.enqueue(op, Some(ordering_key), now_ns, None)
    }

    /// [`try_submit`](Self::try_submit), waiting for room while the queue is full
    /// (backpressure): the future resolves once the op is queued (or refused for another
    /// reason), not when it has its outcome.
    pub async fn submit(&self, op: C::Op, now_ns: u64) -> Result<OpFuture<C>, SubmitError<C::Op>> {
        self.submit_in(op, None, now_ns).await
    }

    /// [`try_submit_ordered`](Self::try_submit_ordered), waiting for room while the queue is
    /// full, as [`submit`](Self::submit) does.
    pub async fn submit_ordered(
        &self,
        op: C::Op,
        ordering_key: &str,
        now_ns: u64,
    ) -> Result<OpFuture<C>, SubmitError<C::Op>> {
        self.submit_in(op, Some(ordering_key), now_ns).await
    }

    async fn submit_in(
        &self,
        op: C::Op,
        ordering_key: Option<&str>,
        now_ns: u64,
    ) -> Result<OpFuture<C>, SubmitError<C::Op>> {
        let mut op = Some(op);
        std::future::poll_fn(|cx| {
            let Some(next) = op.take() else {
                return Poll::Pending;
            };
            match self.enqueue(next, ordering_key, now_ns, Some(cx.waker())) {
                Err(SubmitError::QueueFull(back)) => {
                    op = Some(back);
                    Poll::Pending
                }
                other => Poll::Ready(other),
            }
        })
        .await
    }

    fn enqueue(
        &self,
        op: C::Op,
        ordering_key: Option<&str>,
        now_ns: u64,
        waker: Option<&Waker>,
    ) -> Result<OpFuture<C>, SubmitError<C::Op>> {
        let config = &self.shared.config;
        let len = self.shared.codec.op_len(&op);
        let room = config.max_request_bytes - self.shared.codec.header_len();
        if len > room {
            return Err(SubmitError::OpTooLarge { op, len, max: room });
        }
        let (sender, receiver) = oneshot::channel();
        let wake_driver;
        {
            let mut st = self.shared.lock();
            if st.closed {
                return Err(SubmitError::Closed(op));
            }
            if st.queued >= config.max_queued_ops || st.queued_bytes + len > config.max_queued_bytes
            {
                if let Some(waker) = waker {
                    st.room_waiters.push(waker.clone());
                }
                return Err(SubmitError::QueueFull(op));
            }
            let (eligible_before, _) = st.eligible();
            // The key's one shared name (a lookup, no allocation, once the key is known).
            let ordering_key = ordering_key.map(|key| match st.keys.get_key_value(key) {
                Some((known, _)) => Arc::clone(known),
                None => OrderingKey::from(key),
            });
            let seq = st.next_seq;
            st.next_seq += 1;
            st.push(Slot {
                op,
                len,
                submitted_ns: now_ns,
                resubmits: 0,
                sender,
                seq,
                ordering_key,
            });
            st.stats.submitted += 1;
            let (eligible, _) = st.eligible();
            wake_driver =
                eligible > eligible_before && (eligible_before == 0 || self.size_reached(&st));
        }
        if wake_driver {
            self.shared.notify();
        }
        Ok(OpFuture { receiver })
    }

    /// Whether the ops that may leave now fill a batch.
    fn size_reached(&self, st: &State<C>) -> bool {
        let config = &self.shared.config;
        let (ops, bytes) = st.eligible();
        ops >= config.max_batch_ops
            || bytes + self.shared.codec.header_len() >= config.max_request_bytes
    }

    /// Makes everything queued due now (the next [`take_batch`](Self::take_batch) calls form
    /// batches without waiting for the delay).
    pub fn flush(&self) {
        self.shared.lock().flush_requested = true;
        self.shared.notify();
    }

    /// Refuses further submits; what is queued is sent at once, and the driver stops once
    /// every batch is answered ([`is_finished`](Self::is_finished)).
    pub fn close(&self) {
        {
            let mut st = self.shared.lock();
            st.closed = true;
            for waker in st.room_waiters.drain(..) {
                waker.wake();
            }
        }
        self.shared.notify();
    }

    /// Closed, nothing queued and nothing in flight.
    pub fn is_finished(&self) -> bool {
        let st = self.shared.lock();
        st.closed && st.queued == 0 && st.in_flight == 0
    }

    /// The counters.
    pub fn stats(&self) -> BatcherStats {
        let st = self.shared.lock();
        BatcherStats {
            queued: st.queued,
            queued_bytes: st.queued_bytes,
            in_flight: st.in_flight,
            ..st.stats.clone()
        }
    }

    /// When the next batch is due at `now_ns`: whether one can be taken now, or when the
    /// oldest op that may leave reaches its delay.
    fn due_in(&self, st: &mut State<C>, now_ns: u64) -> Due {
        if st.in_flight >= self.shared.config.max_in_flight {
            return Due::Idle;
        }
        let urgent = st.closed || st.flush_requested || self.size_reached(st);
        let Some(front) = st.front() else {
            return Due::Idle;
        };
        let at = front
            .submitted_ns
            .saturating_add(self.shared.config.max_delay_ns);
        if urgent || now_ns >= at {
            Due::Now
        } else {
            Due::At(at)
        }
    }

    /// When the next batch is due at `now_ns`.
    pub fn due(&self, now_ns: u64) -> Due {
        self.due_in(&mut self.shared.lock(), now_ns)
    }

    /// Takes the next batch if one is due at `now_ns` and fewer than `max_in_flight` are in
    /// flight: the oldest queued ops, up to `max_batch_ops` and `max_request_bytes`, under a
    /// new key created at `now_ns`, encoded once; ops whose ordering key has a batch in flight
    /// stay queued, in their order. Waiting submitters are woken. Cost: encoding the batch.
    pub fn take_batch(&self, now_ns: u64) -> Option<InFlight<C>> {
        let config = &self.shared.config;
        let header = self.shared.codec.header_len();
        let (slots, ordering_keys, counter, waiters) = {
            let mut st = self.shared.lock();
            if self.due_in(&mut st, now_ns) != Due::Now {
                return None;
            }
            let mut bytes = header;
            let mut slots: Vec<Slot<C>> = Vec::new();
            let mut ordering_keys: HashSet<OrderingKey> = HashSet::new();
            // The keys of this batch are held once it is formed: until then their later ops
            // join it, in order.
            while slots.len() < config.max_batch_ops {
                match st.front() {
                    Some(front) if bytes + front.len <= config.max_request_bytes => {}
                    _ => break,
                }
                let slot = st.pop_front().expect("the front");
                bytes += slot.len;
                if let Some(key) = &slot.ordering_key {
                    ordering_keys.insert(Arc::clone(key));
                }
                slots.push(slot);
            }
            let ordering_keys: Vec<OrderingKey> = ordering_keys.into_iter().collect();
            st.hold(&ordering_keys);
            st.in_flight += 1;
            st.stats.batches += 1;
            if st.queued == 0 {
                st.flush_requested = false;
            }
            let counter = st.next_counter;
            st.next_counter += 1;
            (
                slots,
                ordering_keys,
                counter,
                std::mem::take(&mut st.room_waiters),
            )
        };
        for waker in waiters {
            waker.wake();
        }
        let mut id = [0u8; 16];
        id[..8].copy_from_slice(&config.key_prefix);
        id[8..].copy_from_slice(&counter.to_be_bytes());
        let key = BatchKey {
            created_at_time: now_ns,
            id,
        };
        let mut ops = Vec::with_capacity(slots.len());
        let mut meta = Vec::with_capacity(slots.len());
        for slot in slots {
            ops.push(slot.op);
            meta.push(OpMeta {
                len: slot.len,
                submitted_ns: slot.submitted_ns,
                resubmits: slot.resubmits,
                sender: slot.sender,
                seq: slot.seq,
                ordering_key: slot.ordering_key,
            });
        }
        let request = self.shared.codec.encode(&key, &ops);
        Some(InFlight {
            shared: Some(Arc::clone(&self.shared)),
            ordering_keys,
            key,
            request,
            ops,
            meta,
            attempts: 0,
            possibly_executed: false,
            last_error: None,
        })
    }

    /// Reports the result of one attempt of `batch` at `now_ns` and delivers what it settles:
    ///
    /// - a reply: every op gets its outcome, except ops the canister did not execute, which
    ///   are queued again at the front and sent at once (under a new key, in a later batch)
    ///   up to `max_resubmits` times;
    /// - no answer ([`SendError::Unknown`], reject code `SYS_UNKNOWN`), a transient reject
    ///   (`SYS_TRANSIENT`, `CANISTER_ERROR`: stopped, trapped, out of cycles) or a
    ///   [`RefusalKind::Retry`] refusal: retry with the same request after a backoff, until
    ///   `retry_for_ns` after the key's creation; then [`BatchError::Unknown`] if an attempt
    ///   may have run, the last error otherwise;
    /// - a final refusal or reject: every op gets it, as [`BatchError::Unknown`] if an earlier
    ///   attempt may have run (a refusal of a later attempt does not prove the first did not
    ///   run).
    pub fn finish(
        &self,
        mut batch: InFlight<C>,
        result: Result<Vec<u8>, SendError>,
        now_ns: u64,
    ) -> Next<C> {
        batch.attempts += 1;
        {
            let mut st = self.shared.lock();
            st.stats.attempts += 1;
            if batch.attempts > 1 {
                st.stats.retries += 1;
            }
        }
        let codec = &self.shared.codec;
        let refusal = match result {
            Ok(reply) => match codec.decode(&reply, batch.ops.len()) {
                Ok(Reply::Executed {
                    outcomes,
                    duplicate,
                }) => {
                    self.deliver_outcomes(batch, outcomes, duplicate);
                    return Next::Done;
                }
                Ok(Reply::Refused(refusal)) => refusal,
                Err(error) => {
                    self.settle(batch, BatchError::BadReply(error));
                    return Next::Done;
                }
            },
            Err(SendError::Unknown(message)) => {
                batch.possibly_executed = true;
                return self.retry(batch, format!("no answer: {message}"), now_ns);
            }
            Err(SendError::Rejected { code, message }) => {
                match codec.refusal_of_reject(code, &message) {
                    Some(refusal) => refusal,
                    None => {
                        return self.rejected(batch, code, message, now_ns);
                    }
                }
            }
        };
        match codec.refusal_kind(&refusal) {
            RefusalKind::Retry => self.retry(batch, format!("refused: {refusal}"), now_ns),
            RefusalKind::TooOld | RefusalKind::Final => {
                self.settle(batch, BatchError::Refused(refusal));
                Next::Done
            }
        }
    }

    fn rejected(
        &self,
        mut batch: InFlight<C>,
        code: RejectCode,
        message: String,
        now_ns: u64,
    ) -> Next<C> {
        if code.may_have_run() {
            batch.possibly_executed = true;
        }
        if code.is_retried() {
            self.retry(batch, format!("rejected with {code}: {message}"), now_ns)
        } else {
            self.settle(batch, BatchError::Rejected { code, message });
            Next::Done
        }
    }

    fn retry(&self, mut batch: InFlight<C>, error: String, now_ns: u64) -> Next<C> {
        batch.last_error = Some(error.clone());
        let config = &self.shared.config;
        if now_ns.saturating_sub(batch.key.created_at_time) >= config.retry_for_ns {
            let error = if batch.possibly_executed {
                BatchError::Unknown {
                    attempts: batch.attempts,
                    last_error: error,
                }
            } else {
                BatchError::Rejected {
                    code: RejectCode::SysTransient,
                    message: format!("retries stopped after {} attempts: {error}", batch.attempts),
                }
            };
            self.settle(batch, error);
            return Next::Done;
        }
        let shift = (batch.attempts - 1).min(32);
        let delay_ns = config
            .initial_backoff_ns
            .saturating_mul(1 << shift)
            .min(config.max_backoff_ns);
        Next::Retry { batch, delay_ns }
    }

    /// Gives every op of `batch` the same error: a certain one becomes
    /// [`BatchError::Unknown`] when an attempt may have run.
    fn settle(&self, mut batch: InFlight<C>, error: BatchError<C::Refusal>) {
        let error = match error {
            BatchError::Refused(_) | BatchError::Rejected { .. } if batch.possibly_executed => {
                BatchError::Unknown {
                    attempts: batch.attempts,
                    last_error: error.to_string(),
                }
            }
            other => other,
        };
        let unknown = matches!(error, BatchError::Unknown { .. } | BatchError::BadReply(_));
        let meta = std::mem::take(&mut batch.meta);
        {
            let mut st = self.shared.lock();
            if unknown {
                st.stats.unknown += meta.len() as u64;
            } else {
                st.stats.refused += meta.len() as u64;
            }
        }
        batch.release();
        for op in meta {
            let _ = op.sender.send(Err(error.clone()));
        }
    }

    fn deliver_outcomes(&self, mut batch: InFlight<C>, outcomes: Vec<C::Outcome>, duplicate: bool) {
        let max_resubmits = self.shared.config.max_resubmits;
        let meta = std::mem::take(&mut batch.meta);
        let ops = std::mem::take(&mut batch.ops);
        let mut again = Vec::new();
        let mut delivered = Vec::with_capacity(meta.len());
        for ((op, meta), outcome) in ops.into_iter().zip(meta).zip(outcomes) {
            if meta.resubmits < max_resubmits && self.shared.codec.not_executed(&outcome) {
                again.push(Slot {
                    op,
                    len: meta.len,
                    submitted_ns: meta.submitted_ns,
                    resubmits: meta.resubmits + 1,
                    sender: meta.sender,
                    seq: meta.seq,
                    ordering_key: meta.ordering_key,
                });
            } else {
                delivered.push((meta.sender, outcome));
            }
        }
        let requeued = !again.is_empty();
        {
            let mut st = self.shared.lock();
            if duplicate {
                st.stats.duplicate_replies += 1;
            }
            st.stats.outcomes += delivered.len() as u64;
            st.stats.resubmitted += again.len() as u64;
            // Back at their place in submission order: before every later op, and before the
            // later ops of their ordering key, which the batch holds until it is released below.
            for slot in again {
                st.push(slot);
            }
            if requeued {
                // They have waited their delay already: sent at once, with what is queued.
                st.flush_requested = true;
            }
        }
        batch.release();
        for (sender, outcome) in delivered {
            let _ = sender.send(Ok(outcome));
        }
        if requeued {
            self.shared.notify();
        }
    }
}

/// What the batcher keeps of a sent op.
struct OpMeta<C: BatchCodec> {
    len: usize,
    submitted_ns: u64,
    resubmits: u32,
    sender: oneshot::Sender<OpResult<C>>,
    seq: u64,
    ordering_key: Option<OrderingKey>,
}

/// A batch taken by a driver: its key, its encoded request and its ops, until an attempt
/// settles it ([`Batcher::finish`]). Dropping it unfinished (the driver stopped) gives its ops
/// [`BatchError::Closed`] and frees its place in flight.
pub struct InFlight<C: BatchCodec> {
    shared: Option<Arc<Shared<C>>>,
    /// The ordering keys of its ops, held until it is settled.
    ordering_keys: Vec<OrderingKey>,
    key: BatchKey,
    request: Vec<u8>,
    ops: Vec<C::Op>,
    meta: Vec<OpMeta<C>>,
    attempts: u32,
    possibly_executed: bool,
    last_error: Option<String>,
}

impl<C: BatchCodec> InFlight<C> {
    /// The batch's key (the same on every attempt).
    pub fn key(&self) -> &BatchKey {
        &self.key
    }

    /// The request to send (the same bytes on every attempt).
    pub fn request(&self) -> &[u8] {
        &self.request
    }

    /// The number of ops.
    pub fn len(&self) -> usize {
        self.ops.len()
    }

    /// Whether the batch has no ops (never: a batch holds at least one).
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    /// Attempts finished so far.
    pub fn attempts(&self) -> u32 {
        self.attempts
    }

    /// What the last unsuccessful attempt got.
    pub fn last_error(&self) -> Option<&str> {
        self.last_error.as_deref()
    }

    /// Frees the batch's place in flight and its ordering keys (once).
    fn release(&mut self) {
        if let Some(shared) = self.shared.take() {
            {
                let mut st = shared.lock();
                st.in_flight -= 1;
                st.release_keys(&self.ordering_keys);
            }
            shared.notify();
        }
    }
}

impl<C: BatchCodec> Drop for InFlight<C> {
    fn drop(&mut self) {
        self.release();
    }
}

impl<C: BatchCodec> fmt::Debug for InFlight<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InFlight")
            .field("key", &self.key)
            .field("ops", &self.ops.len())
            .field("request_bytes", &self.request.len())
            .field("attempts", &self.attempts)
            .finish()
    }
}
