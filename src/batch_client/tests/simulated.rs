//! The batcher against a simulated database canister: `batch_core` with its `Deduplicator` on
//! an in-memory SQLite database, answering a declared canister's `execute_writes_packed` as
//! ic-rusqlite-batch does (the generic packed request read by the tests' own declaration, the
//! outcomes packed in runs, typed refusals), behind a transport that injects the faults of a
//! real network. Time is tokio's paused clock, so every run is deterministic.
//!
//! Each op inserts an order whose amount is the op's own tag, so the rows of an op can be
//! counted in SQLite: applied twice would show as two rows with one tag.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use batch_core::rusqlite::Connection;
use batch_core::{
    BatchDigest, BatchKey as CoreKey, Budget, CountingMeter, DedupConfig, Deduplicator, SqlValue,
    WriteOp,
};
use batch_types::SqlParam;
use batch_types::declare::{BatchRefusal, Blob, PackedWritesResult, Writes};
use batch_types::packed;
use ic_batch_client::{
    BatchError, Batcher, BatcherConfig, BatcherStats, Declared, OpError, OpResult, Outcome,
    RejectCode, SendError, Transport, WriteError, tokio_driver,
};

batch_types::writes! {
    /// A shop's users and orders: the declaration of the simulated canister and its clients.
    pub enum ShopWrite {
        /// A user.
        create_user = "INSERT INTO users (username, email) VALUES (?1, ?2)" {
            username: String, email: String
        },
        /// An order of `amount` for user `user_id`.
        create_order = "INSERT INTO orders (user_id, amount) VALUES (?1, ?2)" {
            user_id: i64, amount: f64
        },
        /// Sets the amount of order `order_id`.
        update_order_amount = "UPDATE orders SET amount = ?2 WHERE order_id = ?1" {
            order_id: i64, amount: f64
        },
        /// Deletes the orders of user `user_id`.
        delete_user_orders = "DELETE FROM orders WHERE user_id = ?1" { user_id: i64 },
    }
}

type Codec = Declared<ShopWrite>;

const SCHEMA: &str = "
CREATE TABLE users (
  user_id INTEGER PRIMARY KEY AUTOINCREMENT,
  username TEXT NOT NULL,
  email TEXT NOT NULL
);
CREATE TABLE orders (
  order_id INTEGER PRIMARY KEY AUTOINCREMENT,
  user_id INTEGER NOT NULL REFERENCES users(user_id),
  amount REAL NOT NULL
);
";

const MS: u64 = 1_000_000;
const SECOND: u64 = 1_000 * MS;
/// The simulated time starts here (nanoseconds since the Unix epoch).
const EPOCH: u64 = 1_700_000_000 * SECOND;
/// The canister's deduplication window and drift in these tests.
const WINDOW: u64 = 3_600 * SECOND;
const DRIFT: u64 = 60 * SECOND;
/// The user every order belongs to; orders of `MISSING_USER` fail (foreign key).
const USER: i64 = 1;
const MISSING_USER: i64 = 999_999;

/// Nanoseconds since the Unix epoch on tokio's (paused) clock.
fn clock(start: tokio::time::Instant) -> impl Fn() -> u64 + Clone + Send + Sync + 'static {
    move || EPOCH + start.elapsed().as_nanos() as u64
}

/// The database canister: executes packed batches of declared writes as ic-rusqlite-batch's
/// `execute_writes_packed` does (read the header, check the declaration's digest, read the ops
/// by the declaration, digest the ops bytes, deduplicate, run within a budget).
struct Canister {
    state: Mutex<CanisterState>,
}

struct CanisterState {
    conn: Connection,
    dedup: Deduplicator,
    /// Added to the clients' clock: the canister's time.
    skew_ns: i64,
    stopped: bool,
    /// Whether the client may write (otherwise `NotAuthorized`).
    authorized: bool,
    /// Meter reads a batch may use: ops after that are not executed.
    budget: u64,
    executions: u64,
}

impl Canister {
    fn new() -> Arc<Self> {
        let conn = Connection::open_in_memory().expect("open");
        conn.execute_batch(SCHEMA).expect("schema");
        conn.execute_batch("PRAGMA foreign_keys = ON;")
            .expect("pragma");
        conn.execute(
            "INSERT INTO users (username, email) VALUES (?1, ?2)",
            ["owner", "owner@x"],
        )
        .expect("user");
        Arc::new(Canister {
            state: Mutex::new(CanisterState {
                conn,
                dedup: Deduplicator::new(DedupConfig {
                    window_ns: WINDOW,
                    permitted_drift_ns: DRIFT,
                    ..DedupConfig::default()
                })
                .expect("dedup config"),
                skew_ns: 0,
                stopped: false,
                authorized: true,
                budget: u64::MAX / 4,
                executions: 0,
            }),
        })
    }

    fn with<R>(&self, f: impl FnOnce(&mut CanisterState) -> R) -> R {
        f(&mut self.state.lock().expect("canister lock"))
    }

    /// One update call of `execute_writes_packed` at the clients' time `now`.
    fn execute(&self, caller: &[u8], request: &[u8], now: u64) -> Result<Vec<u8>, SendError> {
        let refused = |e: BatchRefusal| Ok(encode_result(PackedWritesResult::Err(e)));
        self.with(|st| {
            if st.stopped {
                return Err(SendError::Rejected {
                    code: RejectCode::CanisterError,
                    message: "canister is stopped".into(),
                });
            }
            if !st.authorized {
                return refused(BatchRefusal::NotAuthorized);
            }
            let now = now.saturating_add_signed(st.skew_ns);
            let (header, body, write_ops) = match read_request(request) {
                Ok(read) => read,
                Err(refusal) => return refused(refusal),
            };
            let key: CoreKey = header.key;
            let budget = Budget::new(CountingMeter::new(1), st.budget);
            let CanisterState { conn, dedup, .. } = st;
            let result = dedup.execute_keyed_within(
                conn,
                caller,
                &key,
                &BatchDigest::of_bytes(&body),
                &write_ops,
                &budget,
                now,
            );
            match result {
                Ok(batch) => {
                    if !batch.duplicate {
                        st.executions += 1;
                    }
                    let blob = Blob::from(packed::encode_reply(batch.duplicate, &batch.outcomes));
                    Ok(encode_result(PackedWritesResult::Ok(blob)))
                }
                // As the canister answers: TooOld, CreatedInFuture, DigestMismatch, StoreFull,
                // Database, each `Refused`.
                Err(error) => refused(BatchRefusal::from(WriteError::from(error))),
            }
        })
    }

    /// Rows of the order tagged `tag`.
    fn rows_of(&self, tag: f64) -> i64 {
        self.with(|st| {
            st.conn
                .query_row(
                    "SELECT count(*) FROM orders WHERE amount = ?1",
                    [tag],
                    |row| row.get(0),
                )
                .expect("count")
        })
    }

    /// Every tag with its row count, and the order id of each row.
    fn rows(&self) -> (HashMap<u64, i64>, HashMap<i64, u64>) {
        self.with(|st| {
            let mut counts = HashMap::new();
            let mut by_id = HashMap::new();
            let mut stmt = st
                .conn
                .prepare("SELECT order_id, amount FROM orders")
                .expect("prepare");
            let rows = stmt
                .query_map([], |row| Ok((row.get::<_, i64>(0)?, row.get::<_, f64>(1)?)))
                .expect("query");
            for row in rows {
                let (id, amount) = row.expect("row");
                *counts.entry(amount as u64).or_insert(0) += 1;
                by_id.insert(id, amount as u64);
            }
            (counts, by_id)
        })
    }
}

fn encode_result(result: PackedWritesResult) -> Vec<u8> {
    candid::encode_one(result).expect("a reply")
}

/// The request's header, its ops' bytes (what the key's digest covers) and its ops as
/// batch_core runs them: the declared SQL of each op's write, its parameters bound.
fn read_request(
    request: &[u8],
) -> Result<(packed::RequestHeader, Vec<u8>, Vec<WriteOp>), BatchRefusal> {
    let blob: Blob = candid::decode_one(request).map_err(|e| BatchRefusal::Malformed {
        offset: 0,
        what: e.to_string(),
    })?;
    let declaration = ShopWrite::declaration();
    let (header, body) = packed::read_header(&blob)?;
    if header.digest != declaration.digest {
        return Err(BatchRefusal::DeclarationMismatch {
            canister: Blob::from(declaration.digest.to_vec()),
            request: Blob::from(header.digest.to_vec()),
        });
    }
    let ops = packed::read_ops(declaration, body, 10_000)?
        .into_iter()
        .enumerate()
        .map(|(i, op)| {
            declaration.check(i, op.write, &op.params)?;
            let params = op.params.into_iter().map(sql_value).collect();
            Ok(WriteOp::single(declaration.writes[op.write].sql, params))
        })
        .collect::<Result<_, BatchRefusal>>()?;
    Ok((header, body.to_vec(), ops))
}

fn sql_value(param: SqlParam) -> SqlValue {
    match param {
        SqlParam::Null => SqlValue::Null,
        SqlParam::Integer(v) => SqlValue::Integer(v),
        SqlParam::Real(v) => SqlValue::Real(v),
        SqlParam::Text(v) => SqlValue::Text(v),
        SqlParam::Blob(v) => SqlValue::Blob(v),
    }
}

/// What the network does to one attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Fault {
    /// Delivered and answered.
    None,
    /// The canister runs the batch; the reply is lost (the client sees no answer).
    ReplyLostAfterCommit,
    /// The request never arrives; the client waits until its attempt timeout.
    Timeout,
    /// The connection fails before the request is sent.
    TransportError,
    /// The canister runs the batch at once; the reply arrives after the client gave up
    /// waiting (and retried).
    DelayedReply,
    /// The request reaches the canister only after the client's retry did.
    DelayedDelivery,
    /// The request is delivered twice, concurrently.
    SentTwice,
    /// The canister is stopped: rejected with `CANISTER_ERROR`, nothing runs.
    Stopped,
}

/// The transport: a caller's update calls to the canister, with faults from a script (in
/// order, then `None`) or drawn at random.
struct FaultyNetwork {
    canister: Arc<Canister>,
    caller: Vec<u8>,
    clock: Box<dyn Fn() -> u64 + Send + Sync>,
    script: Mutex<std::collections::VecDeque<Fault>>,
    random: Option<Mutex<Random>>,
    injected: Mutex<HashMap<Fault, u64>>,
    /// Concurrent sends of one key that got different answers.
    twins_differ: AtomicU64,
    /// Past the attempt timeout.
    late: Duration,
    /// Calls neither answered nor dropped (an abandoned attempt the driver still holds).
    open_calls: AtomicU64,
}

impl FaultyNetwork {
    fn new(canister: Arc<Canister>, clock: impl Fn() -> u64 + Send + Sync + 'static) -> Self {
        FaultyNetwork {
            canister,
            caller: b"client principal".to_vec(),
            clock: Box::new(clock),
            script: Mutex::new(Default::default()),
            random: None,
            injected: Mutex::new(HashMap::new()),
            twins_differ: AtomicU64::new(0),
            late: Duration::from_secs(3),
            open_calls: AtomicU64::new(0),
        }
    }

    fn scripted(self, faults: &[Fault]) -> Self {
        *self.script.lock().unwrap() = faults.iter().copied().collect();
        self
    }

    fn next_fault(&self) -> Fault {
        let fault = match &self.random {
            Some(random) => random.lock().unwrap().fault(),
            None => self
                .script
                .lock()
                .unwrap()
                .pop_front()
                .unwrap_or(Fault::None),
        };
        *self.injected.lock().unwrap().entry(fault).or_insert(0) += 1;
        fault
    }
}

/// A shared handle, so tests keep the network while the driver owns one.
#[derive(Clone)]
struct Net(Arc<FaultyNetwork>);

/// Counts a call open until it is answered or its future is dropped.
struct OpenCall<'a>(&'a AtomicU64);

impl<'a> OpenCall<'a> {
    fn new(open: &'a AtomicU64) -> Self {
        open.fetch_add(1, Ordering::SeqCst);
        OpenCall(open)
    }
}

impl Drop for OpenCall<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Transport for Net {
    async fn call(&self, request: Vec<u8>) -> Result<Vec<u8>, SendError> {
        let net = &self.0;
        let _open = OpenCall::new(&net.open_calls);
        let run = |request: &[u8]| net.canister.execute(&net.caller, request, (net.clock)());
        match net.next_fault() {
            Fault::None => run(&request),
            Fault::ReplyLostAfterCommit => {
                let _ = run(&request);
                Err(SendError::Unknown(
                    "connection closed before the reply".into(),
                ))
            }
            Fault::Timeout => std::future::pending().await,
            Fault::TransportError => Err(SendError::Unknown("connection refused".into())),
            Fault::DelayedReply => {
                let reply = run(&request);
                tokio::time::sleep(net.late).await;
                reply
            }
            Fault::DelayedDelivery => {
                let later = Arc::clone(net);
                tokio::spawn(async move {
                    tokio::time::sleep(later.late * 2).await;
                    let _ = later
                        .canister
                        .execute(&later.caller, &request, (later.clock)());
                });
                std::future::pending().await
            }
            Fault::SentTwice => {
                let twin = Arc::clone(net);
                let copy = request.clone();
                let other = tokio::spawn(async move {
                    twin.canister.execute(&twin.caller, &copy, (twin.clock)())
                });
                let first = run(&request);
                let second = other.await.expect("twin");
                // The IC runs messages one at a time: one ran the batch, the other was
                // answered from its record, with the same outcomes (checked by the tests).
                if first.as_ref().map(|r| outcomes_of(r).0)
                    != second.as_ref().map(|r| outcomes_of(r).0)
                {
                    net.twins_differ.fetch_add(1, Ordering::SeqCst);
                }
                first
            }
            Fault::Stopped => Err(SendError::Rejected {
                code: RejectCode::CanisterError,
                message: "canister is stopped".into(),
            }),
        }
    }
}

fn outcomes_of(reply: &[u8]) -> (Vec<Outcome>, bool) {
    let PackedWritesResult::Ok(blob) =
        candid::decode_one::<PackedWritesResult>(reply).expect("a packed result")
    else {
        panic!("refused")
    };
    let reply = packed::decode_reply(&blob, usize::MAX).expect("a packed reply");
    (reply.outcomes, reply.duplicate)
}

/// xorshift64*: a deterministic stream of faults.
struct Random {
    state: u64,
    /// Percent of attempts that get a fault.
    fault_percent: u64,
}

impl Random {
    fn next(&mut self) -> u64 {
        self.state ^= self.state >> 12;
        self.state ^= self.state << 25;
        self.state ^= self.state >> 27;
        self.state.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn fault(&mut self) -> Fault {
        if self.next() % 100 >= self.fault_percent {
            return Fault::None;
        }
        const KINDS: [Fault; 7] = [
            Fault::ReplyLostAfterCommit,
            Fault::Timeout,
            Fault::TransportError,
            Fault::DelayedReply,
            Fault::DelayedDelivery,
            Fault::SentTwice,
            Fault::Stopped,
        ];
        KINDS[(self.next() % KINDS.len() as u64) as usize]
    }
}

fn config() -> BatcherConfig {
    BatcherConfig {
        max_batch_ops: 100,
        max_queued_ops: 1_000,
        max_delay_ns: 50 * MS,
        max_in_flight: 4,
        initial_backoff_ns: 100 * MS,
        max_backoff_ns: 2 * SECOND,
        retry_for_ns: WINDOW / 2,
        attempt_timeout_ns: Some(SECOND),
        key_prefix: *b"testkey!",
        ..BatcherConfig::default()
    }
}

fn order(tag: u64) -> ShopWrite {
    ShopWrite::create_order {
        user_id: USER,
        amount: tag as f64,
    }
}

/// A simulated day: a run that has not ended by then is stuck (paused time jumps ahead when
/// every task waits, so a deadlock ends here instead of hanging the test).
const STUCK: Duration = Duration::from_secs(24 * 3_600);

/// Submits `ops` (tags) through a batcher over `net`, awaits every outcome, stops the driver.
async fn run_ops(
    net: &Net,
    config: BatcherConfig,
    tags: &[u64],
    clock: impl Fn() -> u64 + Clone + Send + Sync + 'static,
) -> (Vec<OpResult<Codec>>, BatcherStats) {
    let run = run_ops_unbounded(net, config, tags, clock);
    let result = tokio::time::timeout(STUCK, run)
        .await
        .expect("the run is stuck");
    assert_eq!(
        net.0.twins_differ.load(Ordering::SeqCst),
        0,
        "a key sent twice ran twice"
    );
    result
}

async fn run_ops_unbounded(
    net: &Net,
    config: BatcherConfig,
    tags: &[u64],
    clock: impl Fn() -> u64 + Clone + Send + Sync + 'static,
) -> (Vec<OpResult<Codec>>, BatcherStats) {
    let batcher = Batcher::new(Codec::new(), config).expect("config");
    let driver = tokio::spawn(tokio_driver::run(
        batcher.clone(),
        net.clone(),
        clock.clone(),
    ));
    let mut futures = Vec::new();
    for &tag in tags {
        futures.push(
            batcher
                .submit(order(tag), clock())
                .await
                .expect("submitted"),
        );
    }
    let mut results = Vec::new();
    for future in futures {
        results.push(future.await);
    }
    batcher.close();
    driver.await.expect("driver");
    (results, batcher.stats())
}

fn committed_row(result: &OpResult<Codec>) -> Option<i64> {
    match result {
        Ok(Outcome::Committed {
            rows_changed: 1,
            last_insert_rowid,
        }) => Some(*last_insert_rowid),
        _ => None,
    }
}

/// Each fault, scripted on the first attempt of a batch of three ops: every op committed once,
/// and the batch ran once.
#[tokio::test(start_paused = true)]
async fn every_fault_kind_ends_in_one_run_and_every_outcome() {
    tokio::time::timeout(
        STUCK,
        every_fault_kind_ends_in_one_run_and_every_outcome_body(),
    )
    .await
    .expect("the run is stuck");
}

async fn every_fault_kind_ends_in_one_run_and_every_outcome_body() {
    for fault in [
        Fault::None,
        Fault::ReplyLostAfterCommit,
        Fault::Timeout,
        Fault::TransportError,
        Fault::DelayedReply,
        Fault::DelayedDelivery,
        Fault::SentTwice,
        Fault::Stopped,
    ] {
        let canister = Canister::new();
        let clock = clock(tokio::time::Instant::now());
        let net = Net(Arc::new(
            FaultyNetwork::new(Arc::clone(&canister), clock.clone()).scripted(&[fault]),
        ));
        let (results, stats) = run_ops(&net, config(), &[1, 2, 3], clock).await;
        // The driver returned: an attempt it abandoned was dropped, not left running.
        assert_eq!(net.0.open_calls.load(Ordering::SeqCst), 0, "{fault:?}");
        // Let a delayed delivery land before counting.
        tokio::time::sleep(Duration::from_secs(10)).await;
        for (tag, result) in [1u64, 2, 3].iter().zip(&results) {
            assert!(committed_row(result).is_some(), "{fault:?}: {result:?}");
            assert_eq!(canister.rows_of(*tag as f64), 1, "{fault:?}: op {tag}");
        }
        assert_eq!(canister.with(|st| st.executions), 1, "{fault:?}");
        assert_eq!(stats.batches, 1, "{fault:?}");
        let retried = fault != Fault::None && fault != Fault::SentTwice;
        assert_eq!(stats.attempts, if retried { 2 } else { 1 }, "{fault:?}");
        // A retry of a batch that ran is answered as a duplicate.
        let ran_first = matches!(fault, Fault::ReplyLostAfterCommit | Fault::DelayedReply);
        assert_eq!(stats.duplicate_replies, u64::from(ran_first), "{fault:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn a_stopped_canister_is_retried_until_it_runs_again() {
    tokio::time::timeout(
        STUCK,
        a_stopped_canister_is_retried_until_it_runs_again_body(),
    )
    .await
    .expect("the run is stuck");
}

async fn a_stopped_canister_is_retried_until_it_runs_again_body() {
    let canister = Canister::new();
    canister.with(|st| st.stopped = true);
    let clock = clock(tokio::time::Instant::now());
    let net = Net(Arc::new(FaultyNetwork::new(
        Arc::clone(&canister),
        clock.clone(),
    )));
    let restart = {
        let canister = Arc::clone(&canister);
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(30)).await;
            canister.with(|st| st.stopped = false);
        })
    };
    let (results, stats) = run_ops(&net, config(), &[7], clock).await;
    restart.await.unwrap();
    assert!(committed_row(&results[0]).is_some(), "{results:?}");
    assert_eq!(canister.rows_of(7.0), 1);
    assert!(stats.retries >= 5, "{stats:?}");
    assert_eq!(stats.duplicate_replies, 0);
}

#[tokio::test(start_paused = true)]
async fn a_key_past_its_window_is_unknown_if_it_may_have_run_and_refused_if_it_did_not() {
    tokio::time::timeout(
        STUCK,
        a_key_past_its_window_is_unknown_if_it_may_have_run_and_refused_if_it_did_not_body(),
    )
    .await
    .expect("the run is stuck");
}

async fn a_key_past_its_window_is_unknown_if_it_may_have_run_and_refused_if_it_did_not_body() {
    // The reply of the first attempt is lost, then the canister's clock jumps past the window:
    // the retry is refused as too old. The op ran (one row); the client says it does not
    // know, never that it did not run.
    let canister = Canister::new();
    let clock = clock(tokio::time::Instant::now());
    let net = Net(Arc::new(
        FaultyNetwork::new(Arc::clone(&canister), clock.clone())
            .scripted(&[Fault::ReplyLostAfterCommit]),
    ));
    let jump = {
        let canister = Arc::clone(&canister);
        tokio::spawn(async move {
            // After the first attempt ran (at 50 ms), before its retry (100 ms later).
            tokio::time::sleep(Duration::from_millis(80)).await;
            canister.with(|st| st.skew_ns = (WINDOW + DRIFT + SECOND) as i64);
        })
    };
    let (results, _) = run_ops(&net, config(), &[5], clock.clone()).await;
    jump.await.unwrap();
    assert!(
        matches!(&results[0], Err(BatchError::Unknown { attempts: 2, last_error }) if last_error.contains("TooOld")),
        "{results:?}"
    );
    assert_eq!(canister.rows_of(5.0), 1);

    // A canister whose clock is past the window from the start never ran the batch: refused.
    let (results, _) = run_ops(&net, config(), &[6], clock).await;
    assert!(
        matches!(
            &results[0],
            Err(BatchError::Refused(BatchRefusal::Refused(
                WriteError::TooOld { .. }
            )))
        ),
        "{results:?}"
    );
    assert_eq!(canister.rows_of(6.0), 0);
}

#[tokio::test(start_paused = true)]
async fn a_client_clock_ahead_of_the_canister_is_refused_per_op() {
    tokio::time::timeout(
        STUCK,
        a_client_clock_ahead_of_the_canister_is_refused_per_op_body(),
    )
    .await
    .expect("the run is stuck");
}

async fn a_client_clock_ahead_of_the_canister_is_refused_per_op_body() {
    let canister = Canister::new();
    canister.with(|st| st.skew_ns = -((DRIFT + SECOND) as i64));
    let clock = clock(tokio::time::Instant::now());
    let net = Net(Arc::new(FaultyNetwork::new(
        Arc::clone(&canister),
        clock.clone(),
    )));
    let (results, _) = run_ops(&net, config(), &[1, 2], clock).await;
    for result in &results {
        assert!(
            matches!(
                result,
                Err(BatchError::Refused(BatchRefusal::Refused(
                    WriteError::CreatedInFuture { .. }
                )))
            ),
            "{result:?}"
        );
    }
    assert_eq!(canister.rows_of(1.0) + canister.rows_of(2.0), 0);
}

#[tokio::test(start_paused = true)]
async fn op_failures_are_per_op_and_ops_not_executed_are_resubmitted_under_new_keys() {
    tokio::time::timeout(
        STUCK,
        op_failures_are_per_op_and_ops_not_executed_are_resubmitted_under_new_keys_body(),
    )
    .await
    .expect("the run is stuck");
}

async fn op_failures_are_per_op_and_ops_not_executed_are_resubmitted_under_new_keys_body() {
    let canister = Canister::new();
    // Each meter read costs 1: a batch executes its first few ops only.
    canister.with(|st| st.budget = 3);
    let clock = clock(tokio::time::Instant::now());
    let net = Net(Arc::new(FaultyNetwork::new(
        Arc::clone(&canister),
        clock.clone(),
    )));
    let batcher = Batcher::new(Codec::new(), config()).expect("config");
    let driver = tokio::spawn(tokio_driver::run(
        batcher.clone(),
        net.clone(),
        clock.clone(),
    ));
    let mut futures = Vec::new();
    for tag in 1..=20u64 {
        // Every fifth op orders for a missing user, and alternating texts keep the ops from
        // being coalesced into one meter read.
        let op = if tag.is_multiple_of(5) {
            ShopWrite::create_order {
                user_id: MISSING_USER,
                amount: tag as f64,
            }
        } else if tag.is_multiple_of(2) {
            ShopWrite::update_order_amount {
                order_id: 1_000_000 + tag as i64,
                amount: tag as f64,
            }
        } else {
            order(tag)
        };
        futures.push((tag, batcher.submit(op, clock()).await.expect("submitted")));
    }
    for (tag, future) in futures {
        let result = future.await;
        match tag {
            t if t.is_multiple_of(5) => assert!(
                matches!(&result, Ok(Outcome::Failed(OpError { code: 787, .. }))),
                "{tag}: {result:?}"
            ),
            t if t.is_multiple_of(2) => assert_eq!(
                result,
                Ok(Outcome::Committed {
                    rows_changed: 0,
                    last_insert_rowid: 0
                }),
                "{tag}"
            ),
            _ => assert!(committed_row(&result).is_some(), "{tag}: {result:?}"),
        }
    }
    batcher.close();
    driver.await.unwrap();
    let stats = batcher.stats();
    assert!(stats.resubmitted > 0, "{stats:?}");
    assert!(stats.batches > 1, "{stats:?}");
    for tag in (1..=20u64).filter(|t| !t.is_multiple_of(2) && !t.is_multiple_of(5)) {
        assert_eq!(canister.rows_of(tag as f64), 1, "{tag}");
    }
}

#[tokio::test(start_paused = true)]
async fn a_refusal_of_the_whole_batch_reaches_every_op() {
    tokio::time::timeout(STUCK, a_refusal_of_the_whole_batch_reaches_every_op_body())
        .await
        .expect("the run is stuck");
}

async fn a_refusal_of_the_whole_batch_reaches_every_op_body() {
    let canister = Canister::new();
    canister.with(|st| st.authorized = false);
    let clock = clock(tokio::time::Instant::now());
    let net = Net(Arc::new(FaultyNetwork::new(
        Arc::clone(&canister),
        clock.clone(),
    )));
    let (results, stats) = run_ops(&net, config(), &[1, 2, 3], clock.clone()).await;
    for result in &results {
        assert_eq!(
            result,
            &Err(BatchError::Refused(BatchRefusal::NotAuthorized))
        );
    }
    assert_eq!((stats.attempts, stats.refused), (1, 3));

    // Two batchers with one key prefix and a clock stopped at one instant form the same key:
    // the second batch, with other ops, is refused, never answered with the first's outcomes.
    canister.with(|st| st.authorized = true);
    let t0 = clock();
    let frozen = move || t0;
    for (tags, expect_refusal) in [(&[10u64][..], false), (&[11, 12][..], true)] {
        let batcher = Batcher::new(Codec::new(), config()).expect("config");
        let driver = tokio::spawn(tokio_driver::run(batcher.clone(), net.clone(), frozen));
        let mut futures = Vec::new();
        for &tag in tags {
            futures.push(batcher.submit(order(tag), t0).await.unwrap());
        }
        batcher.flush();
        for future in futures {
            let result = future.await;
            if expect_refusal {
                assert!(
                    matches!(
                        &result,
                        Err(BatchError::Refused(BatchRefusal::Refused(
                            WriteError::DigestMismatch { .. }
                        )))
                    ),
                    "{result:?}"
                );
            } else {
                assert!(committed_row(&result).is_some(), "{result:?}");
            }
        }
        batcher.close();
        driver.await.unwrap();
    }
    assert_eq!(canister.rows_of(10.0), 1);
    assert_eq!(canister.rows_of(11.0) + canister.rows_of(12.0), 0);
}

/// The randomized run: 10,000 ops from 50 concurrent submitters, a fault on 35 % of the
/// attempts (every kind), batches cut short by the canister's budget. Every op's outcome is
/// delivered to its own submitter, none lost, none applied twice.
#[tokio::test(start_paused = true)]
async fn ten_thousand_ops_with_random_faults_run_exactly_once() {
    const SUBMITTERS: u64 = 50;
    const PER_SUBMITTER: u64 = 200;
    let canister = Canister::new();
    // Batches of up to 25 ops; the budget stops each after 3 meter reads (one per op or per
    // run of coalesced inserts), so most batches leave ops not executed, to be resubmitted.
    canister.with(|st| st.budget = 3);
    let clock = clock(tokio::time::Instant::now());
    let mut network = FaultyNetwork::new(Arc::clone(&canister), clock.clone());
    network.random = Some(Mutex::new(Random {
        state: 0x9e37_79b9_7f4a_7c15,
        fault_percent: 35,
    }));
    let net = Net(Arc::new(network));
    let batcher = Batcher::new(
        Codec::new(),
        BatcherConfig {
            max_batch_ops: 25,
            max_resubmits: 1_000,
            ..config()
        },
    )
    .expect("config");
    let driver = tokio::spawn(tokio_driver::run(
        batcher.clone(),
        net.clone(),
        clock.clone(),
    ));
    let delivered = Arc::new(AtomicU64::new(0));
    let mut submitters = Vec::new();
    for s in 0..SUBMITTERS {
        let batcher = batcher.clone();
        let clock = clock.clone();
        let delivered = Arc::clone(&delivered);
        submitters.push(tokio::spawn(async move {
            let mut mine = Vec::new();
            for k in 0..PER_SUBMITTER {
                let tag = 1 + s * PER_SUBMITTER + k;
                // Every 97th op orders for a missing user: it fails, and must leave no row.
                // Every 7th updates no order (another statement, which ends a run of
                // coalesced inserts).
                let op = if tag.is_multiple_of(97) {
                    ShopWrite::create_order {
                        user_id: MISSING_USER,
                        amount: tag as f64,
                    }
                } else if tag % 7 == 3 {
                    ShopWrite::update_order_amount {
                        order_id: -(tag as i64),
                        amount: tag as f64,
                    }
                } else {
                    order(tag)
                };
                mine.push((tag, batcher.submit(op, clock()).await.expect("submitted")));
                if k % 20 == 0 {
                    tokio::time::sleep(Duration::from_millis(s % 7 * 5)).await;
                }
            }
            let mut results = Vec::new();
            for (tag, future) in mine {
                results.push((tag, future.await));
                delivered.fetch_add(1, Ordering::SeqCst);
            }
            results
        }));
    }
    let all = async {
        let mut results = Vec::new();
        for submitter in submitters {
            results.extend(submitter.await.expect("submitter"));
        }
        batcher.close();
        driver.await.expect("driver");
        results
    };
    let results = tokio::time::timeout(STUCK, all)
        .await
        .expect("the run is stuck");
    assert_eq!(
        net.0.twins_differ.load(Ordering::SeqCst),
        0,
        "a key sent twice ran twice"
    );
    // Delayed deliveries still in the network land now: they must change nothing.
    tokio::time::sleep(Duration::from_secs(60)).await;

    let total = SUBMITTERS * PER_SUBMITTER;
    assert_eq!(results.len() as u64, total, "lost ops");
    assert_eq!(delivered.load(Ordering::SeqCst), total);
    let (counts, by_id) = canister.rows();
    let (mut committed, mut failed, mut updates) = (0u64, 0u64, 0u64);
    for (tag, result) in &results {
        let rows = counts.get(tag).copied().unwrap_or(0);
        if !tag.is_multiple_of(97) && tag % 7 == 3 {
            assert_eq!(
                result,
                &Ok(Outcome::Committed {
                    rows_changed: 0,
                    last_insert_rowid: 0
                }),
                "op {tag}"
            );
            assert_eq!(rows, 0, "op {tag}");
            updates += 1;
        } else if tag.is_multiple_of(97) {
            assert!(
                matches!(result, Ok(Outcome::Failed(OpError { code: 787, .. }))),
                "op {tag}: {result:?}"
            );
            assert_eq!(rows, 0, "op {tag}");
            failed += 1;
        } else {
            // Its own outcome: the row it reports holds its own tag.
            let rowid = committed_row(result).unwrap_or_else(|| panic!("op {tag}: {result:?}"));
            assert_eq!(
                by_id.get(&rowid),
                Some(tag),
                "op {tag} got another op's outcome"
            );
            assert_eq!(rows, 1, "op {tag} applied {rows} times");
            committed += 1;
        }
    }
    assert!(
        counts.values().all(|&rows| rows == 1),
        "an op applied twice"
    );
    assert_eq!(
        counts.len() as u64,
        committed,
        "rows without a committed outcome"
    );
    assert_eq!(committed + failed + updates, total);
    let stats = batcher.stats();
    let injected = net.0.injected.lock().unwrap().clone();
    let executions = canister.with(|st| st.executions);
    eprintln!(
        "randomized run: {total} ops, {committed} inserts committed, {updates} updates committed (no row), {failed} failed, 0 lost, 0 applied twice; \
         {} batches, {} attempts, {} retries, {} duplicate replies, {} ops resubmitted, {executions} batch executions; \
         faults injected: {injected:?}",
        stats.batches, stats.attempts, stats.retries, stats.duplicate_replies, stats.resubmitted
    );
    assert_eq!(stats.unknown + stats.refused, 0, "{stats:?}");
    assert_eq!(stats.outcomes, total);
    // Every kind of fault happened, more than a few times.
    for kind in [
        Fault::ReplyLostAfterCommit,
        Fault::Timeout,
        Fault::TransportError,
        Fault::DelayedReply,
        Fault::DelayedDelivery,
        Fault::SentTwice,
        Fault::Stopped,
    ] {
        assert!(
            injected.get(&kind).copied().unwrap_or(0) >= 10,
            "{kind:?}: {injected:?}"
        );
    }
    assert!(stats.duplicate_replies >= 10, "{stats:?}");
    assert!(stats.resubmitted >= 100, "{stats:?}");
}

/// Ops submitted per ordering key in the ordering runs, and the keys.
const KEYS: u64 = 20;
const PER_KEY: u64 = 100;

/// What an ordering run found: per key, the row ids of its ops in submission order.
struct OrderingRun {
    rowids: Vec<Vec<i64>>,
    stats: BatcherStats,
    injected: HashMap<Fault, u64>,
}

impl OrderingRun {
    /// Places where a key's op committed before the op submitted just before it.
    fn inversions(&self) -> usize {
        self.rowids
            .iter()
            .map(|ids| ids.windows(2).filter(|w| w[0] > w[1]).count())
            .sum()
    }
}

/// `KEYS` submitters, one per key, each submitting its `PER_KEY` ops in turn (with the key
/// when `ordered`), through one batcher over a network with a fault on 35 % of the attempts
/// (every kind), to a canister whose budget cuts batches short. Two ops in three insert an
/// order (its row id says when it was committed), the third updates no order (another
/// statement, which ends a run of coalesced inserts, so that the budget leaves ops not
/// executed). Every op is checked to be committed once, an insert's outcome being its own row.
async fn ordering_run(ordered: bool) -> OrderingRun {
    let canister = Canister::new();
    canister.with(|st| st.budget = 3);
    let clock = clock(tokio::time::Instant::now());
    let mut network = FaultyNetwork::new(Arc::clone(&canister), clock.clone());
    network.random = Some(Mutex::new(Random {
        state: 0x0123_4567_89ab_cdef,
        fault_percent: 35,
    }));
    let net = Net(Arc::new(network));
    let batcher = Batcher::new(
        Codec::new(),
        BatcherConfig {
            max_batch_ops: 10,
            max_resubmits: 1_000,
            ..config()
        },
    )
    .expect("config");
    let driver = tokio::spawn(tokio_driver::run(
        batcher.clone(),
        net.clone(),
        clock.clone(),
    ));
    let is_update = |tag: u64| tag.is_multiple_of(3);
    let mut submitters = Vec::new();
    for k in 0..KEYS {
        let (batcher, clock) = (batcher.clone(), clock.clone());
        submitters.push(tokio::spawn(async move {
            let key = format!("user {k}");
            let mut mine = Vec::new();
            for i in 0..PER_KEY {
                let tag = 1 + k * PER_KEY + i;
                let op = if is_update(tag) {
                    ShopWrite::update_order_amount {
                        order_id: -(tag as i64),
                        amount: tag as f64,
                    }
                } else {
                    order(tag)
                };
                let future = if ordered {
                    batcher.submit_ordered(op, &key, clock()).await
                } else {
                    batcher.submit(op, clock()).await
                };
                mine.push((tag, future.expect("submitted")));
                if i % 10 == 0 {
                    tokio::time::sleep(Duration::from_millis(k % 7 * 5)).await;
                }
            }
            let mut results = Vec::new();
            for (tag, future) in mine {
                results.push((tag, future.await));
            }
            results
        }));
    }
    let all = async {
        let mut per_key = Vec::new();
        for submitter in submitters {
            per_key.push(submitter.await.expect("submitter"));
        }
        batcher.close();
        driver.await.expect("driver");
        per_key
    };
    let per_key = tokio::time::timeout(STUCK, all)
        .await
        .expect("the run is stuck");
    assert_eq!(net.0.twins_differ.load(Ordering::SeqCst), 0);
    // Delayed deliveries still in the network land now: they must change nothing.
    tokio::time::sleep(Duration::from_secs(60)).await;
    let (counts, by_id) = canister.rows();
    let inserts = (1..=KEYS * PER_KEY).filter(|&tag| !is_update(tag)).count();
    assert_eq!(counts.len(), inserts, "lost ops");
    assert!(
        counts.values().all(|&rows| rows == 1),
        "an op applied twice"
    );
    let rowids = per_key
        .iter()
        .map(|results| {
            results
                .iter()
                .filter(|(tag, result)| {
                    let update = is_update(*tag);
                    if update {
                        assert_eq!(
                            result,
                            &Ok(Outcome::Committed {
                                rows_changed: 0,
                                last_insert_rowid: 0
                            }),
                            "op {tag}"
                        );
                    }
                    !update
                })
                .map(|(tag, result)| {
                    let rowid =
                        committed_row(result).unwrap_or_else(|| panic!("op {tag}: {result:?}"));
                    assert_eq!(by_id.get(&rowid), Some(tag), "op {tag}: another op's row");
                    rowid
                })
                .collect()
        })
        .collect();
    let injected = net.0.injected.lock().unwrap().clone();
    OrderingRun {
        rowids,
        stats: batcher.stats(),
        injected,
    }
}

/// The ordering option under dropped, late and duplicated answers, stops and budgets that
/// cut batches short: per key, the commit order (the orders' row ids, given in commit order)
/// is the submission order, exactly; nothing lost, nothing applied twice. The same run
/// without ordering keys commits some of a key's ops out of order: the check can fail.
#[tokio::test(start_paused = true)]
async fn ops_sharing_an_ordering_key_commit_in_submission_order_under_faults() {
    let ordered = ordering_run(true).await;
    let unordered = ordering_run(false).await;
    let s = &ordered.stats;
    eprintln!(
        "ordering run: {} ops of {KEYS} keys, {} batches, {} attempts, {} retries, {} duplicate replies, {} ops resubmitted; \
         faults injected: {:?}; per-key commit order checked on {} inserts: {} out of order (without keys: {})",
        KEYS * PER_KEY,
        s.batches,
        s.attempts,
        s.retries,
        s.duplicate_replies,
        s.resubmitted,
        ordered.injected,
        ordered.rowids.iter().map(Vec::len).sum::<usize>(),
        ordered.inversions(),
        unordered.inversions(),
    );
    for (k, ids) in ordered.rowids.iter().enumerate() {
        let mut sorted = ids.clone();
        sorted.sort_unstable();
        assert_eq!(
            ids, &sorted,
            "key {k}: commit order differs from submission order"
        );
    }
    assert!(
        unordered.inversions() > 0,
        "without keys the faults reorder nothing: the check proves nothing"
    );
    assert_eq!((s.unknown, s.refused), (0, 0), "{s:?}");
    assert_eq!(s.outcomes, KEYS * PER_KEY);
    for kind in [
        Fault::ReplyLostAfterCommit,
        Fault::Timeout,
        Fault::TransportError,
        Fault::DelayedReply,
        Fault::DelayedDelivery,
        Fault::SentTwice,
        Fault::Stopped,
    ] {
        assert!(
            ordered.injected.get(&kind).copied().unwrap_or(0) >= 5,
            "{kind:?}: {:?}",
            ordered.injected
        );
    }
    assert!(s.duplicate_replies >= 5 && s.resubmitted >= 50, "{s:?}");
}
