//! The load test with real clients: ops offered at a fixed number per round to the offline
//! replica running one block per round (at most 1,000 ingress messages and 4 MiB per block, the
//! IC's limits), written by `concurrency` client tasks of one process through ic-agent
//! (certificate verification on) in one of three ways ([`Path`]).
//!
//! The offered load is open: `ops_per_round` ops arrive right after each of `rounds`
//! consecutive rounds ends, whatever is still unanswered. Each client task takes the oldest
//! waiting op, writes it and waits for its outcome before it takes the next (so an op may first
//! wait in the client for a free task; its latency counts from its arrival). Per path: ops/s,
//! latency from arrival to outcome (p50/p99, in ms and in rounds: ms ÷ the round interval, so
//! an op committed in the next block takes about 1 round), failures, and cycles per committed
//! op: the canister's balance before and after (`canister_status`), which the replica debits by
//! the IC's fee model (5 M + 1 per metered instruction per executed message, 1.2 M + 2,000 per
//! byte per ingress message, a 13-node application subnet), with the ingress part computed
//! from the bytes sent. The blocks the path's rounds held (the replica's `rounds` hook) show
//! what capped it.
//!
//! A call still unanswered when the replica's synchronous call window (10 s) closes is polled
//! at once and then once per round (`read_state`, one certificate verified per poll), as
//! ic-agent's 0.5-1 s polling does at the IC's rate of about one round per second.
//!
//! Each profile of [`crate::PROFILES`] runs the paths on a replica of its own, one profile after
//! the other (two at once would share the machine's cores and change every wall-clock figure).
//!
//! Figures: offline replica through a real agent, labelled with the metering profile.

use std::collections::{BTreeMap, VecDeque};
use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bench_api::client::PackedUserOrders;
use bench_api::{InitArgs, Outcome, Ticket, UserOrderOp};
use candid::Principal;
use ic_agent::Agent;
use ic_agent::agent::{CallResponse, RequestStatusResponse};
use ic_batch_client::agent::AgentTransport;
use ic_batch_client::{Batcher, BatcherConfig, SendError, Transport, tokio_driver};
use offline_engine::Metering;
use offline_engine::fees::{IC_2025, ingress_bytes};
use tokio::sync::{oneshot, watch};

use crate::replies::{self, ReplyError};
use crate::{E2eError, PROFILES, Replica, agent_label, cycles, deploy, identity, profile_title};

/// The IC's limits on one block's ingress (the replica's `MAX_INGRESS_MESSAGES_PER_BLOCK`).
pub const BLOCK_MESSAGES: u64 = 1_000;

/// Requests the agent allows in flight beyond the client tasks' (the ticket poller's, the
/// batcher's batches).
pub const SPARE_REQUESTS: usize = 16;

/// How the clients write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Path {
    /// (a) One `create_user` update call per op.
    OneCallPerOp,
    /// (b) One `submit_create_user` call per op; the canister's queue flushes on size (100
    /// ops, in the submit that fills it, while the queue is healthy) or on its timer; the
    /// outcome is read with `ticket_statuses` (queries, free). The canister is installed with
    /// `max_delay_ms` of `max_delay_rounds` rounds: its timer's period, and the time scale of
    /// its flush watchdog (the default 1,000 ms is about one round on the IC).
    SubmitAndTimer {
        /// The canister's `max_delay_ms`, in rounds.
        max_delay_rounds: u32,
    },
    /// (c) The Rust batcher (`ic-batch-client`, its default configuration): keyed packed
    /// batches, one `execute_batch_packed` call per flush.
    Batcher,
}

impl Path {
    /// The table's paths, in order: (a), (b) at the IC default's scale (one round), (b) with
    /// two rounds, (c).
    pub const ALL: [Path; 4] = [
        Path::OneCallPerOp,
        Path::SubmitAndTimer {
            max_delay_rounds: 1,
        },
        Path::SubmitAndTimer {
            max_delay_rounds: 2,
        },
        Path::Batcher,
    ];

    /// Its label in the table.
    pub fn label(self) -> String {
        match self {
            Path::OneCallPerOp => "(a) one call per op (`create_user`)".into(),
            Path::SubmitAndTimer { max_delay_rounds } => format!(
                "(b) `submit_create_user` + timer, `max_delay_ms` = {max_delay_rounds} round{}",
                if max_delay_rounds == 1 { "" } else { "s" }
            ),
            Path::Batcher => "(c) the Rust batcher (`ic-batch-client`, keyed packed)".into(),
        }
    }

    /// The paths a list names: `a`, `b` followed by the rounds of `max_delay_ms` (one if no
    /// digit follows), `c`; for example `ab1b2c`.
    pub fn parse_list(list: &str) -> Result<Vec<Path>, String> {
        let mut paths = Vec::new();
        let mut chars = list.chars().peekable();
        while let Some(c) = chars.next() {
            paths.push(match c {
                'a' => Path::OneCallPerOp,
                'c' => Path::Batcher,
                'b' => {
                    let mut digits = String::new();
                    while let Some(d) = chars.next_if(char::is_ascii_digit) {
                        digits.push(d);
                    }
                    let max_delay_rounds = if digits.is_empty() {
                        1
                    } else {
                        digits
                            .parse()
                            .ok()
                            .filter(|&r| r > 0)
                            .ok_or(format!("path b{digits}: the rounds must be at least 1"))?
                    };
                    Path::SubmitAndTimer { max_delay_rounds }
                }
                other => return Err(format!("path {other:?}: a, b[ROUNDS] or c")),
            });
        }
        Ok(paths)
    }

    /// Its short name in progress lines.
    pub fn short(self) -> String {
        match self {
            Path::OneCallPerOp => "(a)".into(),
            Path::SubmitAndTimer { max_delay_rounds } => format!("(b{max_delay_rounds})"),
            Path::Batcher => "(c)".into(),
        }
    }

    /// The method one message of this path calls.
    pub fn method(self) -> &'static str {
        match self {
            Path::OneCallPerOp => "create_user",
            Path::SubmitAndTimer { .. } => "submit_create_user",
            Path::Batcher => "execute_batch_packed",
        }
    }

    fn is_submit(self) -> bool {
        matches!(self, Path::SubmitAndTimer { .. })
    }
}

/// The offered load.
#[derive(Clone, Debug)]
pub struct LoadConfig {
    /// Ops arriving after each round.
    pub ops_per_round: usize,
    /// Rounds after which ops arrive.
    pub rounds: usize,
    /// The replica's block interval (one round per interval).
    pub round: Duration,
    /// Concurrent client tasks (each carries one op at a time, from taking it to its outcome).
    pub concurrency: usize,
    /// Rounds after the last arrival within which every op must have its outcome; an op
    /// still unanswered then counts as a failure.
    pub drain_rounds: usize,
    /// The paths to run, in order.
    pub paths: Vec<Path>,
}

impl Default for LoadConfig {
    fn default() -> Self {
        LoadConfig {
            ops_per_round: 2_000,
            rounds: 3,
            round: Duration::from_secs(5),
            concurrency: 2_000,
            // Under the tracker's profile the offline engine answers about half as many calls
            // per round (see `render`): 16 rounds let every op of the default load commit.
            drain_rounds: 16,
            paths: Path::ALL.to_vec(),
        }
    }
}

/// What one round's block held, as the replica reported it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Deserialize)]
pub struct RoundRecord {
    /// The round's number.
    pub round: u64,
    /// Ingress messages its block inducted.
    pub inducted_ingress: u64,
    /// Ingress messages left waiting for a later block.
    pub waiting_ingress: u64,
}

/// What one path achieved.
#[derive(Clone, Debug)]
pub struct LoadResult {
    /// The path.
    pub path: Path,
    /// Ops offered.
    pub offered: usize,
    /// Ops committed.
    pub committed: usize,
    /// Ops that failed or got no outcome.
    pub failures: usize,
    /// Why ops failed: the error's text and how many ops got it.
    pub failure_causes: BTreeMap<String, usize>,
    /// Committed ops per second, from the first arrival to the last outcome.
    pub ops_per_s: f64,
    /// Latency from arrival to outcome of the committed ops: p50, milliseconds.
    pub p50_ms: f64,
    /// See `p50_ms`: p99.
    pub p99_ms: f64,
    /// Ingress messages sent (one per op, or one per batch attempt).
    pub messages: u64,
    /// The canister's cycles spent per committed op.
    pub cycles_per_op: f64,
    /// Of which the ingress messages' reception (computed from their bytes).
    pub ingress_cycles_per_op: f64,
    /// The rounds from the first arrival until the last outcome.
    pub blocks: Vec<RoundRecord>,
    /// Seconds the path took (first arrival to last outcome or the deadline).
    pub wall_s: f64,
    /// Path (b): the canister's alarms seen (their first words) and in how many rounds.
    pub alarms: BTreeMap<String, usize>,
}

impl LoadResult {
    /// The largest block of the path's rounds, in ingress messages.
    pub fn max_block(&self) -> u64 {
        self.blocks
            .iter()
            .map(|b| b.inducted_ingress)
            .max()
            .unwrap_or(0)
    }

    /// The most ingress messages left waiting after a block.
    pub fn max_waiting(&self) -> u64 {
        self.blocks
            .iter()
            .map(|b| b.waiting_ingress)
            .max()
            .unwrap_or(0)
    }

    /// US dollars per million committed ops at the fee schedule's XDR rate.
    pub fn usd_per_million(&self) -> f64 {
        self.cycles_per_op * 1e6 / offline_engine::fees::CYCLES_PER_XDR * IC_2025.usd_per_xdr
    }
}

/// Seen rounds: the replica's `rounds` hook polled from a thread of its own.
struct RoundWatch {
    latest: watch::Receiver<u64>,
    log: Arc<Mutex<Vec<RoundRecord>>>,
    stop: Arc<AtomicBool>,
}

impl RoundWatch {
    fn start(replica: &Replica) -> Result<RoundWatch, E2eError> {
        let first = round_log(replica)?;
        let (tx, latest) = watch::channel(first.last().map_or(0, |r| r.round));
        let log = Arc::new(Mutex::new(first));
        let stop = Arc::new(AtomicBool::new(false));
        let (replica, log2, stop2) = (replica.clone(), Arc::clone(&log), Arc::clone(&stop));
        std::thread::Builder::new()
            .name("load-round-watch".into())
            .spawn(move || {
                let mut complained = false;
                while !stop2.load(Ordering::SeqCst) {
                    std::thread::sleep(Duration::from_millis(20));
                    match round_log(&replica) {
                        Ok(rounds) => {
                            let last = rounds.last().map_or(0, |r| r.round);
                            if let Ok(mut log) = log2.lock() {
                                *log = rounds;
                            }
                            tx.send_if_modified(|seen| {
                                let new = last > *seen;
                                *seen = last.max(*seen);
                                new
                            });
                        }
                        Err(e) if !complained => {
                            complained = true;
                            eprintln!("load: reading the replica's rounds: {e}");
                        }
                        Err(_) => {}
                    }
                }
            })
            .map_err(|e| E2eError::Start(e.to_string()))?;
        Ok(RoundWatch { latest, log, stop })
    }

    fn current(&self) -> u64 {
        *self.latest.borrow()
    }

    fn blocks(&self, after: u64, to: u64) -> Vec<RoundRecord> {
        self.log
            .lock()
            .map(|log| {
                log.iter()
                    .filter(|r| r.round > after && r.round <= to)
                    .copied()
                    .collect()
            })
            .unwrap_or_default()
    }

    fn block(&self, round: u64) -> Option<RoundRecord> {
        self.blocks(round.saturating_sub(1), round).pop()
    }
}

impl Drop for RoundWatch {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

fn round_log(replica: &Replica) -> Result<Vec<RoundRecord>, E2eError> {
    let answer = replica.hook("rounds", "{}")?;
    serde_json::from_value(answer["rounds"].clone()).map_err(|e| E2eError::Hook {
        hook: "rounds".into(),
        message: e.to_string(),
    })
}

/// An update call answered through the synchronous call or, once its window closed, by one
/// `read_state` poll per round completed (`rounds` ticks once per round).
async fn update_polled(
    agent: &Agent,
    canister: Principal,
    method: &str,
    arg: Vec<u8>,
    mut rounds: watch::Receiver<u64>,
) -> Result<Vec<u8>, ReplyError> {
    let response = agent
        .update(&canister, method)
        .with_arg(arg)
        .call()
        .await
        .map_err(agent_error)?;
    let request_id = match response {
        CallResponse::Response((reply, _certificate)) => return Ok(reply),
        CallResponse::Poll(request_id) => request_id,
    };
    // Polled at once (the round that ran it may have ended while the window closed), then
    // once per round.
    rounds.borrow_and_update();
    let mut first = true;
    loop {
        if !first {
            rounds
                .changed()
                .await
                .map_err(|_| ReplyError::Agent("the round watch ended".into()))?;
        }
        first = false;
        let (status, _certificate) = agent
            .request_status_raw(&request_id, canister)
            .await
            .map_err(agent_error)?;
        match status {
            RequestStatusResponse::Replied(reply) => return Ok(reply.arg),
            RequestStatusResponse::Rejected(reject) => {
                return Err(ReplyError::from_reject(&reject.reject_message));
            }
            RequestStatusResponse::Done => {
                return Err(ReplyError::Agent(
                    "the request is done and its reply dropped".into(),
                ));
            }
            RequestStatusResponse::Unknown
            | RequestStatusResponse::Received
            | RequestStatusResponse::Processing => {}
        }
    }
}

fn agent_error(error: ic_agent::AgentError) -> ReplyError {
    match error {
        ic_agent::AgentError::CertifiedReject { reject, .. }
        | ic_agent::AgentError::UncertifiedReject { reject, .. } => {
            ReplyError::from_reject(&reject.reject_message)
        }
        other => ReplyError::Agent(other.to_string()),
    }
}

/// The ingress reception fee of one message, as the replica charges it.
fn ingress_fee(arg_len: usize, method: &str) -> u64 {
    let bytes = ingress_bytes(arg_len, method);
    u64::try_from(
        IC_2025.ingress_message_reception_fee + IC_2025.ingress_byte_reception_fee * bytes as u128,
    )
    .unwrap_or(u64::MAX)
}

/// The batcher's transport, counting what it sends (every attempt is one ingress message).
struct Counting {
    inner: AgentTransport,
    messages: Arc<AtomicU64>,
    ingress_cycles: Arc<AtomicU64>,
}

impl Transport for Counting {
    async fn call(&self, request: Vec<u8>) -> Result<Vec<u8>, SendError> {
        self.messages.fetch_add(1, Ordering::SeqCst);
        self.ingress_cycles.fetch_add(
            ingress_fee(request.len(), Path::Batcher.method()),
            Ordering::SeqCst,
        );
        self.inner.call(request).await
    }
}

/// How often path (b) reads its tickets' statuses: 20 times per round, at most every 100 ms.
pub fn ticket_poll_period(round: Duration) -> Duration {
    (round / 20).max(Duration::from_millis(100))
}

/// Tickets of path (b) waiting for their outcome, resolved by one poller.
type Waiting = Arc<Mutex<BTreeMap<Ticket, oneshot::Sender<Result<(), String>>>>>;

/// Reads the outcome of every waiting ticket with `ticket_statuses` queries (as the
/// canister's controller, who may read every caller's tickets), every `period`.
async fn poll_tickets(agent: Agent, canister: Principal, waiting: Waiting, period: Duration) {
    loop {
        tokio::time::sleep(period).await;
        let tickets: Vec<Ticket> = match waiting.lock() {
            Ok(w) => w.keys().copied().collect(),
            Err(_) => return,
        };
        let mut i = 0;
        while i < tickets.len() {
            let first = tickets[i];
            let span = tickets[i..]
                .iter()
                .take_while(|&&t| t - first < u64::from(bench_api::MAX_QUERY_ROWS))
                .count();
            let last = tickets[i + span - 1];
            i += span;
            let Ok(arg) = replies::ticket_statuses_arg(first, (last - first + 1) as u32) else {
                continue;
            };
            let Ok(reply) = agent
                .query(&canister, "ticket_statuses")
                .with_arg(arg)
                .call()
                .await
            else {
                continue;
            };
            let Ok(statuses) = replies::ticket_statuses(&reply) else {
                continue;
            };
            let Ok(mut w) = waiting.lock() else { return };
            for (k, status) in statuses.iter().enumerate() {
                let ticket = first + k as u64;
                let Some(done) = replies::ticket_final(status) else {
                    continue;
                };
                if let Some(tx) = w.remove(&ticket) {
                    let _ = tx.send(if done {
                        Ok(())
                    } else {
                        Err(format!("ticket {status:?}"))
                    });
                }
            }
        }
    }
}

/// One op's record: when it arrived, when its outcome came, whether it committed (or why
/// not).
struct Done {
    arrived: Instant,
    answered: Instant,
    result: Result<(), String>,
}

/// A canister of `replica` prepared for one path: deployed, its balance read.
pub struct Prepared {
    path: Path,
    agent: Agent,
    /// A second agent of the same identity, for path (b)'s queries (its own connections).
    reader: Agent,
    canister: Principal,
    before: u128,
}

/// Deploys a fresh reference canister for `path` (with `seed`'s identity as its controller
/// and only writer; for path (b) with its `max_delay_ms`) and
/// reads its balance. The agent allows `concurrency` requests in flight
/// plus [`SPARE_REQUESTS`] (ic-agent's default of 50 would cap every path at 50 calls in
/// flight, so at 50 ops per round for one call per op). Cost: three update calls.
pub async fn prepare(
    replica: &Replica,
    config: &LoadConfig,
    path: Path,
    seed: u8,
) -> Result<Prepared, E2eError> {
    let agent = replica
        .agent_with_limit(identity(seed), config.concurrency + SPARE_REQUESTS)
        .await?;
    let init = match path {
        Path::SubmitAndTimer { max_delay_rounds } => Some(InitArgs {
            max_delay_ms: u64::try_from(config.round.as_millis() * u128::from(max_delay_rounds))
                .ok(),
            ..InitArgs::default()
        }),
        _ => None,
    };
    let canister = deploy(&agent, init).await?;
    let before = cycles(&agent, canister).await?;
    let reader = replica.agent(identity(seed)).await?;
    Ok(Prepared {
        path,
        agent,
        reader,
        canister,
        before,
    })
}

/// Runs one path on its prepared canister (the replica already making one block per
/// `config.round`). Cost: `rounds × ops_per_round` ops, at most `rounds + drain_rounds` rounds.
pub async fn run_path(
    replica: &Replica,
    config: &LoadConfig,
    prepared: Prepared,
) -> Result<LoadResult, E2eError> {
    let Prepared {
        path,
        agent,
        reader,
        canister,
        before,
    } = prepared;
    let watch = RoundWatch::start(replica)?;
    let offered = config.ops_per_round * config.rounds;
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<(usize, Instant)>();
    let rx = Arc::new(tokio::sync::Mutex::new(rx));
    let done: Arc<Mutex<Vec<Done>>> = Arc::new(Mutex::new(Vec::with_capacity(offered)));
    let messages = Arc::new(AtomicU64::new(0));
    let ingress_cycles = Arc::new(AtomicU64::new(0));
    let batcher = Batcher::new(
        PackedUserOrders,
        tokio_driver::with_random_key_prefix(BatcherConfig::default()),
    )
    .map_err(|e| E2eError::Start(e.to_string()))?;
    let driver = (path == Path::Batcher).then(|| {
        tokio::spawn(tokio_driver::run(
            batcher.clone(),
            Counting {
                inner: AgentTransport::new(agent.clone(), canister, path.method()),
                messages: Arc::clone(&messages),
                ingress_cycles: Arc::clone(&ingress_cycles),
            },
            tokio_driver::system_clock,
        ))
    });
    let waiting: Waiting = Arc::new(Mutex::new(BTreeMap::new()));
    let poller = path.is_submit().then(|| {
        let period = ticket_poll_period(config.round);
        tokio::spawn(poll_tickets(
            reader.clone(),
            canister,
            Arc::clone(&waiting),
            period,
        ))
    });
    // Path (b)'s queue, read once per round: what its watchdog says.
    let alarms: Arc<Mutex<BTreeMap<String, usize>>> = Arc::new(Mutex::new(BTreeMap::new()));
    let monitor = path.is_submit().then(|| {
        let (agent, alarms, mut rounds) =
            (reader.clone(), Arc::clone(&alarms), watch.latest.clone());
        tokio::spawn(async move {
            while rounds.changed().await.is_ok() {
                let round = *rounds.borrow_and_update();
                let Ok(arg) = replies::no_arg() else { return };
                let stats = agent
                    .query(&canister, "stats")
                    .with_arg(arg)
                    .call()
                    .await
                    .ok()
                    .and_then(|reply| replies::stats(&reply).ok());
                if let Some(s) = stats {
                    let alarm = s.alarm.as_deref().unwrap_or("none");
                    eprintln!(
                        "load {}: round {round}: canister queue {} pending, {} flushes, alarm: {alarm}",
                        path.short(), s.pending, s.flushes
                    );
                    if let (Some(alarm), Ok(mut a)) = (s.alarm, alarms.lock()) {
                        let kind: String = alarm.split(':').next().unwrap_or("").to_string();
                        *a.entry(kind).or_insert(0) += 1;
                    }
                }
            }
        })
    });
    let mut workers = Vec::with_capacity(config.concurrency);
    for _ in 0..config.concurrency {
        let (rx, done, agent, batcher, waiting, rounds) = (
            Arc::clone(&rx),
            Arc::clone(&done),
            agent.clone(),
            batcher.clone(),
            Arc::clone(&waiting),
            watch.latest.clone(),
        );
        let (messages, ingress_cycles) = (Arc::clone(&messages), Arc::clone(&ingress_cycles));
        workers.push(tokio::spawn(async move {
            loop {
                let next = rx.lock().await.recv().await;
                let Some((i, arrived)) = next else { break };
                let username = format!("load{i:06}");
                let email = format!("{username}@load.example");
                let result = match path {
                    Path::OneCallPerOp | Path::SubmitAndTimer { .. } => {
                        let sent = async {
                            let arg = replies::create_user_arg(&username, &email)?;
                            let fee = ingress_fee(arg.len(), path.method());
                            let reply =
                                update_polled(&agent, canister, path.method(), arg, rounds.clone())
                                    .await;
                            if !matches!(reply, Err(ReplyError::Agent(_))) {
                                // Answered (replied or rejected after induction): one ingress
                                // message received.
                                messages.fetch_add(1, Ordering::SeqCst);
                                ingress_cycles.fetch_add(fee, Ordering::SeqCst);
                            }
                            reply
                        };
                        match (path, sent.await) {
                            (_, Err(e)) => Err(e.to_string()),
                            (Path::OneCallPerOp, Ok(reply)) => match replies::outcome(&reply) {
                                Ok(Outcome::Committed { .. }) => Ok(()),
                                Ok(Outcome::Failed(e)) => Err(format!("failed: {}", e.message)),
                                Ok(Outcome::NotExecuted) => Err("not executed".into()),
                                Err(e) => Err(e.to_string()),
                            },
                            (_, Ok(reply)) => match replies::ticket(&reply) {
                                Ok(ticket) => {
                                    let (tx, rx) = oneshot::channel();
                                    if let Ok(mut w) = waiting.lock() {
                                        w.insert(ticket, tx);
                                    }
                                    rx.await.unwrap_or_else(|_| Err("poller ended".into()))
                                }
                                Err(e) => Err(e.to_string()),
                            },
                        }
                    }
                    Path::Batcher => {
                        let op = UserOrderOp::CreateUser { username, email };
                        match batcher.submit(op, tokio_driver::system_clock()).await {
                            Ok(outcome) => match outcome.await {
                                Ok(Outcome::Committed { .. }) => Ok(()),
                                Ok(Outcome::Failed(e)) => Err(format!("failed: {}", e.message)),
                                Ok(Outcome::NotExecuted) => Err("not executed".into()),
                                Err(e) => Err(e.to_string()),
                            },
                            Err(e) => Err(format!("not queued: {e}")),
                        }
                    }
                };
                if let Ok(mut d) = done.lock() {
                    d.push(Done {
                        arrived,
                        answered: Instant::now(),
                        result,
                    });
                }
            }
        }));
    }
    // The offer: `ops_per_round` right after each of `rounds` rounds ends.
    let mut latest = watch.latest.clone();
    latest.borrow_and_update();
    latest
        .changed()
        .await
        .map_err(|e| E2eError::Start(e.to_string()))?;
    let start_round = watch.current();
    let started = Instant::now();
    let progress = |round: u64| {
        let (answered, committed) = done
            .lock()
            .map(|d| (d.len(), d.iter().filter(|x| x.result.is_ok()).count()))
            .unwrap_or((0, 0));
        let block = watch.block(round).map_or(String::new(), |b| {
            format!(
                "block {} ingress, {} left waiting; ",
                b.inducted_ingress, b.waiting_ingress
            )
        });
        eprintln!(
            "load {}: round {round} ({:.0} s): {block}{answered} of {offered} ops answered, {committed} committed",
            path.short(),
            started.elapsed().as_secs_f64()
        );
    };
    for r in 0..config.rounds {
        if r > 0 {
            latest
                .changed()
                .await
                .map_err(|e| E2eError::Start(e.to_string()))?;
        }
        let now = Instant::now();
        for k in 0..config.ops_per_round {
            let _ = tx.send((r * config.ops_per_round + k, now));
        }
        progress(*latest.borrow_and_update());
    }
    drop(tx);
    // Until every op is answered or the drain rounds have passed.
    let last_offer_round = watch.current();
    let all_answered = async {
        for w in &mut workers {
            let _ = w.await;
        }
    };
    tokio::pin!(all_answered);
    loop {
        tokio::select! {
            () = &mut all_answered => break,
            changed = latest.changed() => {
                if changed.is_err() {
                    break;
                }
                let round = *latest.borrow_and_update();
                progress(round);
                if round >= last_offer_round + config.drain_rounds as u64 {
                    eprintln!("load {}: deadline ({} rounds after the last arrival)", path.short(), config.drain_rounds);
                    break;
                }
            }
        }
    }
    for w in &workers {
        w.abort();
    }
    let end_round = watch.current();
    batcher.close();
    if let Some(d) = driver {
        // Outstanding batches are left to the deadline's verdict.
        d.abort();
    }
    if let Some(p) = poller {
        p.abort();
    }
    if let Some(m) = monitor {
        m.abort();
    }
    drop(watch);
    // Read again now: the last round's record may have been written after its answers left.
    let blocks: Vec<RoundRecord> = round_log(replica)?
        .into_iter()
        .filter(|r| r.round > start_round && r.round <= end_round + 1)
        .collect();
    let after = cycles(&agent, canister).await?;
    let done = std::mem::take(&mut *done.lock().map_err(|e| E2eError::Start(e.to_string()))?);
    let committed = done.iter().filter(|d| d.result.is_ok()).count();
    let mut failure_causes = BTreeMap::new();
    for d in &done {
        if let Err(e) = &d.result {
            let cause: String = e.chars().take(120).collect();
            *failure_causes.entry(cause).or_insert(0) += 1;
        }
    }
    if done.len() < offered {
        failure_causes.insert(
            format!(
                "no outcome within {} rounds after the last arrival",
                config.drain_rounds
            ),
            offered - done.len(),
        );
    }
    let last = done.iter().map(|d| d.answered).max().unwrap_or(started);
    let mut latencies: Vec<f64> = done
        .iter()
        .filter(|d| d.result.is_ok())
        .map(|d| (d.answered - d.arrived).as_secs_f64() * 1e3)
        .collect();
    latencies.sort_by(f64::total_cmp);
    let committed_n = committed.max(1) as f64;
    Ok(LoadResult {
        path,
        offered,
        committed,
        failures: offered - committed,
        failure_causes,
        ops_per_s: committed as f64 / (last - started).as_secs_f64().max(1e-9),
        p50_ms: percentile(&latencies, 0.50),
        p99_ms: percentile(&latencies, 0.99),
        messages: messages.load(Ordering::SeqCst),
        cycles_per_op: before.saturating_sub(after) as f64 / committed_n,
        ingress_cycles_per_op: ingress_cycles.load(Ordering::SeqCst) as f64 / committed_n,
        blocks,
        wall_s: started.elapsed().as_secs_f64(),
        alarms: std::mem::take(&mut *alarms.lock().map_err(|e| E2eError::Start(e.to_string()))?),
    })
}

/// The `p`-quantile (nearest rank) of sorted `values`; NaN if there are none.
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

/// One metering profile's run: every path's result on a replica metering by it.
#[derive(Clone, Debug)]
pub struct ProfileRun {
    /// The rules for memory pages the replica metered by.
    pub metering: Metering,
    /// The paths' results, in the order of [`LoadConfig::paths`].
    pub results: Vec<LoadResult>,
}

/// Runs every path under each profile of [`PROFILES`], in its order, one profile after the
/// other, and renders the tables. Cost: twice [`run`]'s.
pub async fn run_profiles(config: &LoadConfig) -> Result<(Vec<ProfileRun>, String), E2eError> {
    let mut runs = Vec::with_capacity(PROFILES.len());
    for metering in PROFILES {
        eprintln!("load: metering {}", metering.name);
        runs.push(ProfileRun {
            metering,
            results: run(config, metering).await?,
        });
    }
    let table = render(config, &runs);
    Ok((runs, table))
}

/// Runs every path on one replica metering by `metering`. The canisters are deployed while
/// the replica runs a round whenever a call arrives; then it makes one block per
/// `config.round` for the paths, and at the end a round only when a call arrives again (so
/// that it stays idle while another profile runs). Cost: one canister per path,
/// `rounds × ops_per_round` ops per path.
pub async fn run(config: &LoadConfig, metering: Metering) -> Result<Vec<LoadResult>, E2eError> {
    let replica = Replica::start_metered(None, metering)?;
    let mut prepared = VecDeque::new();
    for (k, &path) in config.paths.iter().enumerate() {
        prepared.push_back(prepare(&replica, config, path, 90 + k as u8).await?);
    }
    let interval_ms = config.round.as_millis();
    replica.hook("block_interval", &format!(r#"{{"ms": {interval_ms}}}"#))?;
    eprintln!(
        "load: one block every {interval_ms} ms; {} ops after each of {} rounds, {} client tasks",
        config.ops_per_round, config.rounds, config.concurrency
    );
    let mut results = Vec::new();
    while let Some(p) = prepared.pop_front() {
        results.push(run_path(&replica, config, p).await?);
    }
    replica.hook("block_interval", r#"{"ms": 0}"#)?;
    Ok(results)
}

/// The markdown: the load stated, then per profile (each labelled with it) one row per path,
/// the blocks each path's rounds held and the target's verdict, and last the cycles per op
/// under every profile side by side.
pub fn render(config: &LoadConfig, runs: &[ProfileRun]) -> String {
    let round_ms = config.round.as_secs_f64() * 1e3;
    let poll_ms = ticket_poll_period(config.round).as_secs_f64() * 1e3;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Engine: offline replica through a real agent (`offline-pocket-ic --replica`, ic-agent with certificate verification on), one replica per metering profile, one profile after the other. \
         {} ops arrive right after each of {} consecutive rounds; one round, whose block takes at most {BLOCK_MESSAGES} ingress messages and 4 MiB (the IC's limits), every {round_ms:.0} ms; \
         {} client tasks in one process, each carrying one op from its arrival to its outcome. \
         Rounds = ms ÷ {round_ms:.0} (an op committed in the next block takes about 1). \
         Path (b) reads outcomes with `ticket_statuses` queries every {poll_ms:.0} ms; on the offline replica a query waits while a round executes (the IC answers queries beside execution), which adds up to a few seconds to (b)'s latencies. \
         The IC makes about one round per second; here rounds are {round_ms:.0} ms apart so that one process on 2 cores can verify every certificate (about 5 ms of BLS per answer), and the agent allows {} requests in flight (ic-agent's default of 50 would cap (a) and (b) at 50 ops per round). \
         Cycles per op: the canister's balance before and after, as the replica charges it by the IC's fees (5 M + 1 per instruction per message, 1.2 M + 2,000 per ingress byte; 13 nodes), with the ingress part computed from the bytes sent; US$ at {} per XDR.\n",
        config.ops_per_round,
        config.rounds,
        config.concurrency,
        config.concurrency + SPARE_REQUESTS,
        IC_2025.usd_per_xdr
    );
    let _ = writeln!(
        out,
        "Wall-clock figures, which depend on the machine and change from run to run: ops/s, p50 and p99 (ms and rounds), the ingress each block held. \
         Not wall-clock: the cycles per op, which follow from the metered instructions and the fees, set by the ops, the order the canister received them in \
         and how they were grouped ((c)'s batches; (b)'s flushes, which depend on when the submits arrived); \
         a path with ops left without an outcome paid for those it executed but did not answer in time, so its cycles per op are overstated. \
         Under `{}` the offline engine checks the tracker's page state before every load and store of the canister (`src/offline_engine/src/tracker.rs`), \
         so the same messages take longer to run in wall time there than under `{}` and the replica answers fewer calls per round: between the two tables, \
         the wall-clock figures and the ops left without an outcome by the deadline differ by the offline engine's speed, not by anything the IC would show.\n",
        Metering::IC_DMT.name,
        Metering::POCKET_IC_13.name
    );
    for run in runs {
        let _ = writeln!(
            out,
            "### Under {}\n\n*engine: {}*\n",
            profile_title(&run.metering),
            agent_label(&run.metering)
        );
        out.push_str(&render_run(config, &run.results));
        let _ = writeln!(out);
    }
    out.push_str(&render_cycles(runs));
    out
}

/// One profile's table, the blocks its paths' rounds held, and the verdict.
fn render_run(config: &LoadConfig, results: &[LoadResult]) -> String {
    let round_ms = config.round.as_secs_f64() * 1e3;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "| path | committed / offered | failures | ops/s | p50 ms (rounds) | p99 ms (rounds) | ingress messages | most per block | cycles per op (ingress) | US$ per 1M ops |"
    );
    let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for r in results {
        let _ = writeln!(
            out,
            "| {} | {} / {} | {} | {:.0} | {:.0} ({:.2}) | {:.0} ({:.2}) | {} | {} | {:.0} ({:.0}) | {:.3} |",
            r.path.label(),
            r.committed,
            r.offered,
            r.failures,
            r.ops_per_s,
            r.p50_ms,
            r.p50_ms / round_ms,
            r.p99_ms,
            r.p99_ms / round_ms,
            r.messages,
            r.max_block(),
            r.cycles_per_op,
            r.ingress_cycles_per_op,
            r.usd_per_million()
        );
    }
    let _ = writeln!(out);
    for r in results {
        let held: Vec<String> = r
            .blocks
            .iter()
            .map(|b| {
                if b.waiting_ingress > 0 {
                    format!("{} (+{} waiting)", b.inducted_ingress, b.waiting_ingress)
                } else {
                    b.inducted_ingress.to_string()
                }
            })
            .collect();
        let _ = writeln!(
            out,
            "- {}: ingress per block, round by round: {}.",
            r.path.short(),
            held.join(", ")
        );
        for (cause, n) in &r.failure_causes {
            let _ = writeln!(out, "  - {n} failed: {cause}");
        }
        for (alarm, n) in &r.alarms {
            let _ = writeln!(
                out,
                "  - the canister's queue alarm `{alarm}` in {n} rounds"
            );
        }
    }
    let _ = writeln!(out);
    let _ = writeln!(out, "{}", verdict(config, results));
    out
}

/// Cycles per committed op of every path under every profile, side by side, with each later
/// profile's over the first's.
fn render_cycles(runs: &[ProfileRun]) -> String {
    let mut out = String::new();
    let Some((first, others)) = runs.split_first() else {
        return out;
    };
    let names: Vec<&str> = runs.iter().map(|r| r.metering.name).collect();
    let _ = writeln!(
        out,
        "### Cycles per op under each profile\n\n*engines: {}*\n",
        runs.iter()
            .map(|r| agent_label(&r.metering))
            .collect::<Vec<_>>()
            .join("; ")
    );
    let _ = write!(out, "| path |");
    for name in &names {
        let _ = write!(out, " cycles per op ({name}) |");
    }
    for other in others {
        let _ = write!(out, " {} / {} |", first.metering.name, other.metering.name);
    }
    let _ = writeln!(out, "\n|---|{}", "---:|".repeat(runs.len() + others.len()));
    for r in &first.results {
        let _ = write!(out, "| {} |", r.path.label());
        let per_op: Vec<Option<f64>> = runs
            .iter()
            .map(|run| {
                run.results
                    .iter()
                    .find(|x| x.path == r.path)
                    .map(|x| x.cycles_per_op)
            })
            .collect();
        for c in &per_op {
            let _ = write!(out, " {} |", c.map_or("–".into(), |c| format!("{c:.0}")));
        }
        for c in &per_op[1..] {
            let ratio = match (per_op[0], c) {
                (Some(a), Some(b)) if *b > 0.0 => format!("{:.3}", a / b),
                _ => "–".into(),
            };
            let _ = write!(out, " {ratio} |");
        }
        let _ = writeln!(out);
    }
    out
}

/// What each path achieved against the target: at `ops_per_round` ops per round the batcher
/// commits every op with p99 ≤ 2 rounds, where one call per op is capped at 1,000 per block.
pub fn verdict(config: &LoadConfig, results: &[LoadResult]) -> String {
    let round_ms = config.round.as_secs_f64() * 1e3;
    let mut out = format!(
        "Target: at {} ops per round the batcher commits every op with p99 ≤ 2 rounds, where one call per op is capped at {BLOCK_MESSAGES} per block.",
        config.ops_per_round
    );
    for r in results {
        let p99_rounds = r.p99_ms / round_ms;
        let line = match r.path {
            Path::Batcher => {
                let met = r.failures == 0 && p99_rounds <= 2.0;
                format!(
                    "(c) the batcher committed {} of {} with p99 {:.2} rounds in at most {} messages per block: {}",
                    r.committed,
                    r.offered,
                    p99_rounds,
                    r.max_block(),
                    if met {
                        "met".to_string()
                    } else if r.failures > 0 {
                        format!("missed ({} ops without a committed outcome)", r.failures)
                    } else {
                        format!("missed (p99 {:.2} rounds)", p99_rounds)
                    }
                )
            }
            _ => {
                let mut line = format!(
                    "{} committed {} of {}, p99 {:.2} rounds; one message per op, its blocks held at most {} messages, with up to {} left waiting for later blocks{}",
                    r.path.short(),
                    r.committed,
                    r.offered,
                    p99_rounds,
                    r.max_block(),
                    r.max_waiting(),
                    if r.max_block() >= BLOCK_MESSAGES {
                        ": capped by the block limit"
                    } else {
                        ": below the block limit, so the clients (not the block) capped it"
                    }
                );
                if r.failures > 0 {
                    let _ = write!(line, "; {} ops without a committed outcome", r.failures);
                }
                for (alarm, n) in &r.alarms {
                    let _ = write!(
                        line,
                        "; the canister's queue raised `{alarm}` in {n} rounds"
                    );
                }
                line
            }
        };
        let _ = write!(out, " {line}.");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(path: Path, committed: usize, p99_ms: f64, blocks: &[(u64, u64)]) -> LoadResult {
        LoadResult {
            path,
            offered: 4_000,
            committed,
            failures: 4_000 - committed,
            failure_causes: BTreeMap::new(),
            ops_per_s: 100.0,
            p50_ms: p99_ms / 2.0,
            p99_ms,
            messages: 4,
            cycles_per_op: 90_000.0,
            ingress_cycles_per_op: 70_000.0,
            blocks: blocks
                .iter()
                .enumerate()
                .map(|(i, &(inducted_ingress, waiting_ingress))| RoundRecord {
                    round: i as u64 + 1,
                    inducted_ingress,
                    waiting_ingress,
                })
                .collect(),
            wall_s: 20.0,
            alarms: BTreeMap::new(),
        }
    }

    #[test]
    fn path_lists_parse_and_a_bad_letter_or_zero_rounds_is_refused() {
        assert_eq!(Path::parse_list("ab1b2c"), Ok(Path::ALL.to_vec()));
        assert_eq!(
            Path::parse_list("b"),
            Ok(vec![Path::SubmitAndTimer {
                max_delay_rounds: 1
            }])
        );
        assert!(Path::parse_list("ax").is_err());
        assert!(Path::parse_list("b0").is_err());
    }

    #[test]
    fn percentiles_are_nearest_rank() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&v, 0.50), 50.0);
        assert_eq!(percentile(&v, 0.99), 99.0);
        assert_eq!(percentile(&[7.0], 0.99), 7.0);
        assert!(percentile(&[], 0.5).is_nan());
    }

    #[test]
    fn the_verdict_says_met_only_when_every_op_committed_within_two_rounds() {
        let config = LoadConfig {
            ops_per_round: 2_000,
            rounds: 2,
            round: Duration::from_secs(5),
            ..LoadConfig::default()
        };
        let met = verdict(&config, &[result(Path::Batcher, 4_000, 5_020.0, &[(1, 0)])]);
        assert!(
            met.contains("committed 4000 of 4000 with p99 1.00 rounds"),
            "{met}"
        );
        assert!(met.ends_with(": met."), "{met}");
        let slow = verdict(
            &config,
            &[result(Path::Batcher, 4_000, 10_500.0, &[(1, 0)])],
        );
        assert!(slow.contains("missed (p99 2.10 rounds)"), "{slow}");
        let lost = verdict(&config, &[result(Path::Batcher, 3_990, 5_000.0, &[(1, 0)])]);
        assert!(
            lost.contains("missed (10 ops without a committed outcome)"),
            "{lost}"
        );
        let capped = verdict(
            &config,
            &[result(
                Path::OneCallPerOp,
                4_000,
                20_000.0,
                &[(1_000, 1_000), (1_000, 0)],
            )],
        );
        assert!(capped.contains("at most 1000 messages, with up to 1000 left waiting"));
        assert!(capped.contains("capped by the block limit"), "{capped}");
        let client_bound = verdict(
            &config,
            &[result(Path::OneCallPerOp, 4_000, 20_000.0, &[(50, 0)])],
        );
        assert!(client_bound.contains("the clients (not the block) capped it"));
    }

    #[test]
    fn the_tables_have_one_row_per_path_per_profile_each_labelled_with_it() {
        let config = LoadConfig::default();
        let results = |cycles_per_op: f64| {
            [
                result(Path::OneCallPerOp, 4_000, 20_000.0, &[(1_000, 1_000)]),
                result(Path::Batcher, 4_000, 5_000.0, &[(1, 0)]),
            ]
            .map(|r| LoadResult { cycles_per_op, ..r })
            .to_vec()
        };
        let runs = [
            ProfileRun {
                metering: Metering::IC_DMT,
                results: results(120_000.0),
            },
            ProfileRun {
                metering: Metering::POCKET_IC_13,
                results: results(90_000.0),
            },
        ];
        let md = render(&config, &runs);
        assert!(md.contains("every 5000 ms"));
        // The tracker's table first, then PocketIC 13's, each under its label.
        let tracker = md
            .find("### Under the replica's rules with the deterministic memory tracker (`ic-dmt-0441fbd7`)\n\n*engine: offline replica through a real agent, metering ic-dmt-0441fbd7*")
            .expect(&md);
        let pocket_ic = md
            .find("### Under the rules of PocketIC 13 and canbench 0.7.0 (`pocketic-13`)\n\n*engine: offline replica through a real agent, metering pocketic-13*")
            .expect(&md);
        assert!(tracker < pocket_ic, "{md}");
        let row = |cycles: &str| {
            format!(
                "| (c) the Rust batcher (`ic-batch-client`, keyed packed) | 4000 / 4000 | 0 | 100 | 2500 (0.50) | 5000 (1.00) | 4 | 1 | {cycles} (70000) |"
            )
        };
        let (row_tracker, row_pocket_ic) = (
            md.find(&row("120000")).expect(&md),
            md.find(&row("90000")).expect(&md),
        );
        assert!(tracker < row_tracker && row_tracker < pocket_ic && pocket_ic < row_pocket_ic);
        assert_eq!(
            md.matches("- (a): ingress per block, round by round: 1000 (+1000 waiting).")
                .count(),
            2
        );
        // Side by side at the end, with the ratio.
        assert!(md.contains(
            "| path | cycles per op (ic-dmt-0441fbd7) | cycles per op (pocketic-13) | ic-dmt-0441fbd7 / pocketic-13 |"
        ), "{md}");
        assert!(
            md.contains("| (c) the Rust batcher (`ic-batch-client`, keyed packed) | 120000 | 90000 | 1.333 |"),
            "{md}"
        );
    }

    #[test]
    fn the_ingress_fee_is_the_fee_schedule_s() {
        // 1.2 M + 2,000 per byte of argument, method name and 8-byte nonce.
        assert_eq!(
            ingress_fee(100, "create_user"),
            1_200_000 + 2_000 * (100 + 11 + 8)
        );
    }
}
