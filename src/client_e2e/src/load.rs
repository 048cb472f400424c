//! The load test with real clients: ops offered at a fixed rate per round to the offline
//! replica running one block per round (at most 1,000 ingress messages and 4 MiB per block, the
//! IC's limits), written by `concurrency` client tasks through ic-agent (verification on) in
//! one of three ways ([`Path`]). Per path: ops/s, latency from offer to outcome (p50/p99, in
//! ms and in rounds), failures and cycles per op (the canister's balance before and after).
//!
//! Figures: offline replica through a real agent.

use std::fmt::Write as _;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bench_api::{Outcome, Ticket, TicketStatus, UserOrderOp, WriteError};
use candid::{Decode, Encode};
use ic_batch_client::agent::AgentTransport;
use ic_batch_client::{Batcher, BatcherConfig, PackedUserOrders, tokio_driver};

use crate::{E2eError, Replica, cycles, deploy, identity};

/// How the clients write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Path {
    /// (a) One `create_user` update call per op.
    OneCallPerOp,
    /// (b) One `submit_create_user` call per op; the canister's queue flushes on size or its
    /// timer; the outcome is read with `ticket_statuses` (queries, free).
    SubmitAndTimer,
    /// (c) The Rust batcher (`ic-batch-client`): keyed packed batches, one call per flush.
    Batcher,
}

impl Path {
    /// Every path, in the table's order.
    pub const ALL: [Path; 3] = [Path::OneCallPerOp, Path::SubmitAndTimer, Path::Batcher];

    /// Its label in the table.
    pub fn label(self) -> &'static str {
        match self {
            Path::OneCallPerOp => "(a) one call per op (`create_user`)",
            Path::SubmitAndTimer => "(b) `submit_create_user` + timer",
            Path::Batcher => "(c) the batcher (`ic-batch-client`, keyed packed)",
        }
    }
}

/// The offered load.
#[derive(Clone, Debug)]
pub struct LoadConfig {
    /// Ops offered at the start of each round.
    pub ops_per_round: usize,
    /// Rounds during which ops are offered.
    pub rounds: usize,
    /// The replica's block interval (one round per interval).
    pub round: Duration,
    /// Concurrent client tasks.
    pub concurrency: usize,
}

impl Default for LoadConfig {
    fn default() -> Self {
        LoadConfig {
            ops_per_round: 2_000,
            rounds: 3,
            round: Duration::from_secs(1),
            concurrency: 100,
        }
    }
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
    /// Committed ops per second, from the first offer to the last outcome.
    pub ops_per_s: f64,
    /// Latency from offer to outcome: p50 and p99, milliseconds.
    pub p50_ms: f64,
    /// See `p50_ms`.
    pub p99_ms: f64,
    /// The canister's cycles spent per committed op.
    pub cycles_per_op: f64,
}

/// Runs one path on a fresh canister of `replica`. Cost: `rounds × ops_per_round` ops.
pub async fn run_path(
    replica: &Replica,
    config: &LoadConfig,
    path: Path,
    seed: u8,
) -> Result<LoadResult, E2eError> {
    let agent = replica.agent(identity(seed)).await?;
    let canister = deploy(&agent, None).await?;
    let before = cycles(&agent, canister).await?;
    let offered = config.ops_per_round * config.rounds;
    let queue = Arc::new(Mutex::new(
        std::collections::VecDeque::<(usize, Instant)>::new(),
    ));
    let notify = Arc::new(tokio::sync::Notify::new());
    let started = Instant::now();
    // (index, offered at, outcome at, committed)
    let done: Arc<Mutex<Vec<(Instant, Instant, bool)>>> = Arc::new(Mutex::new(Vec::new()));
    let batcher = Batcher::new(
        PackedUserOrders,
        tokio_driver::with_random_key_prefix(BatcherConfig {
            attempt_timeout_ns: Some(30_000_000_000),
            ..BatcherConfig::default()
        }),
    )
    .map_err(|e| E2eError::Start(e.to_string()))?;
    let driver = (path == Path::Batcher).then(|| {
        tokio::spawn(tokio_driver::run(
            batcher.clone(),
            AgentTransport::new(agent.clone(), canister, "execute_batch_packed"),
            tokio_driver::system_clock,
        ))
    });
    let tickets: Arc<Mutex<Vec<(Ticket, Instant)>>> = Arc::new(Mutex::new(Vec::new()));
    let offering_done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut workers = Vec::new();
    for _ in 0..config.concurrency {
        let (queue, notify, done, agent, batcher, tickets, offering_done) = (
            Arc::clone(&queue),
            Arc::clone(&notify),
            Arc::clone(&done),
            agent.clone(),
            batcher.clone(),
            Arc::clone(&tickets),
            Arc::clone(&offering_done),
        );
        workers.push(tokio::spawn(async move {
            let mut pending = Vec::new();
            loop {
                // Registered before the queue is read, so an offer in between is not missed.
                let notified = notify.notified();
                tokio::pin!(notified);
                notified.as_mut().enable();
                let next = queue.lock().map(|mut q| q.pop_front()).ok().flatten();
                let Some((i, offered_at)) = next else {
                    if offering_done.load(std::sync::atomic::Ordering::SeqCst) {
                        break;
                    }
                    notified.await;
                    continue;
                };
                let name = format!("load{i}");
                let email = format!("{name}@load.example");
                match path {
                    Path::OneCallPerOp => {
                        let r = agent
                            .update(&canister, "create_user")
                            .with_arg(Encode!(&name, &email).unwrap_or_default())
                            .call_and_wait()
                            .await;
                        let ok = matches!(
                            r.ok()
                                .and_then(|b| Decode!(&b, Result<Outcome, WriteError>).ok()),
                            Some(Ok(Outcome::Committed { .. }))
                        );
                        if let Ok(mut d) = done.lock() {
                            d.push((offered_at, Instant::now(), ok));
                        }
                    }
                    Path::SubmitAndTimer => {
                        let r = agent
                            .update(&canister, "submit_create_user")
                            .with_arg(Encode!(&name, &email).unwrap_or_default())
                            .call_and_wait()
                            .await;
                        match r
                            .ok()
                            .and_then(|b| Decode!(&b, Result<Ticket, WriteError>).ok())
                            .and_then(Result::ok)
                        {
                            Some(t) => {
                                if let Ok(mut ts) = tickets.lock() {
                                    ts.push((t, offered_at));
                                }
                            }
                            None => {
                                if let Ok(mut d) = done.lock() {
                                    d.push((offered_at, Instant::now(), false));
                                }
                            }
                        }
                    }
                    Path::Batcher => {
                        let op = UserOrderOp::CreateUser {
                            username: name,
                            email,
                        };
                        match batcher.submit(op, tokio_driver::system_clock()).await {
                            Ok(f) => pending.push((offered_at, f)),
                            Err(_) => {
                                if let Ok(mut d) = done.lock() {
                                    d.push((offered_at, Instant::now(), false));
                                }
                            }
                        }
                    }
                }
            }
            // The batcher's outcomes, each recorded when it resolves.
            let mut outcomes = futures_unordered(pending);
            while let Some((offered_at, r)) = outcomes.next().await {
                let ok = matches!(r, Ok(Outcome::Committed { .. }));
                if let Ok(mut d) = done.lock() {
                    d.push((offered_at, Instant::now(), ok));
                }
            }
        }));
    }
    // The ticket poller of path (b): every quarter round, the outstanding tickets' statuses.
    let poller = (path == Path::SubmitAndTimer).then(|| {
        let (agent, tickets, done) = (agent.clone(), Arc::clone(&tickets), Arc::clone(&done));
        let quarter = config.round / 4;
        tokio::spawn(async move {
            let mut seen = 0usize;
            while seen < offered {
                tokio::time::sleep(quarter).await;
                let outstanding: Vec<(Ticket, Instant)> = match tickets.lock() {
                    Ok(mut ts) => std::mem::take(&mut *ts),
                    Err(_) => return,
                };
                let mut keep = Vec::new();
                for chunk in sorted(outstanding).chunks(bench_api::MAX_QUERY_ROWS as usize) {
                    let first = chunk[0].0;
                    let count = (chunk[chunk.len() - 1].0 - first + 1) as u32;
                    let statuses = agent
                        .query(&canister, "ticket_statuses")
                        .with_arg(Encode!(&first, &count).unwrap_or_default())
                        .call()
                        .await
                        .ok()
                        .and_then(|b| Decode!(&b, Vec<TicketStatus>).ok())
                        .unwrap_or_default();
                    let now = Instant::now();
                    for &(t, offered_at) in chunk {
                        match statuses.get((t - first) as usize) {
                            None | Some(TicketStatus::Pending) => keep.push((t, offered_at)),
                            Some(s) => {
                                seen += 1;
                                let ok = matches!(s, TicketStatus::Committed { .. });
                                if let Ok(mut d) = done.lock() {
                                    d.push((offered_at, now, ok));
                                }
                            }
                        }
                    }
                }
                if let Ok(mut ts) = tickets.lock() {
                    ts.extend(keep);
                }
                let failed_submits = done.lock().map(|d| d.len()).unwrap_or(0);
                if failed_submits >= offered {
                    break;
                }
            }
        })
    });
    // The offer: `ops_per_round` at the start of each round.
    for r in 0..config.rounds {
        tokio::time::sleep_until((started + config.round * r as u32).into()).await;
        let now = Instant::now();
        if let Ok(mut q) = queue.lock() {
            for k in 0..config.ops_per_round {
                q.push_back((r * config.ops_per_round + k, now));
            }
        }
        notify.notify_waiters();
    }
    offering_done.store(true, std::sync::atomic::Ordering::SeqCst);
    notify.notify_waiters();
    for w in workers {
        w.await.map_err(|e| E2eError::Start(e.to_string()))?;
    }
    if let Some(p) = poller {
        p.await.map_err(|e| E2eError::Start(e.to_string()))?;
    }
    batcher.close();
    if let Some(d) = driver {
        d.await.map_err(|e| E2eError::Start(e.to_string()))?;
    }
    let after = cycles(&agent, canister).await?;
    let done = done.lock().map(|d| d.clone()).unwrap_or_default();
    let committed = done.iter().filter(|d| d.2).count();
    let last = done.iter().map(|d| d.1).max().unwrap_or(started);
    let mut latencies: Vec<f64> = done
        .iter()
        .filter(|d| d.2)
        .map(|d| (d.1 - d.0).as_secs_f64() * 1e3)
        .collect();
    latencies.sort_by(f64::total_cmp);
    let pct = |p: f64| -> f64 {
        if latencies.is_empty() {
            return f64::NAN;
        }
        let i = ((latencies.len() as f64 * p).ceil() as usize).clamp(1, latencies.len()) - 1;
        latencies[i]
    };
    Ok(LoadResult {
        path,
        offered,
        committed,
        failures: offered - committed,
        ops_per_s: committed as f64 / (last - started).as_secs_f64().max(1e-9),
        p50_ms: pct(0.50),
        p99_ms: pct(0.99),
        cycles_per_op: before.saturating_sub(after) as f64 / committed.max(1) as f64,
    })
}

fn sorted(mut v: Vec<(Ticket, Instant)>) -> Vec<(Ticket, Instant)> {
    v.sort_by_key(|x| x.0);
    v
}

fn futures_unordered<F: std::future::Future>(
    pending: Vec<(Instant, F)>,
) -> futures_util::stream::FuturesUnordered<impl std::future::Future<Output = (Instant, F::Output)>>
{
    pending
        .into_iter()
        .map(|(at, f)| async move { (at, f.await) })
        .collect()
}

use futures_util::StreamExt as _;

/// Runs every path on one replica with `config.round` blocks and renders the table.
pub async fn run(config: &LoadConfig) -> Result<(Vec<LoadResult>, String), E2eError> {
    let replica = Replica::start(Some(config.round))?;
    let mut results = Vec::new();
    for (k, path) in Path::ALL.into_iter().enumerate() {
        results.push(run_path(&replica, config, path, 90 + k as u8).await?);
    }
    let table = render(config, &results);
    Ok((results, table))
}

/// The table: one row per path, with the offered load stated.
pub fn render(config: &LoadConfig, results: &[LoadResult]) -> String {
    let round_ms = config.round.as_secs_f64() * 1e3;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Load (offline replica through a real agent): {} ops offered per round for {} rounds, one round (block: at most 1,000 ingress messages and 4 MiB) every {round_ms:.0} ms, {} client tasks, ic-agent with certificate verification on.\n",
        config.ops_per_round, config.rounds, config.concurrency
    );
    let _ = writeln!(
        out,
        "| path | committed / offered | failures | ops/s | p50 ms (rounds) | p99 ms (rounds) | cycles per op |"
    );
    let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|---:|");
    for r in results {
        let _ = writeln!(
            out,
            "| {} | {} / {} | {} | {:.0} | {:.0} ({:.1}) | {:.0} ({:.1}) | {:.0} |",
            r.path.label(),
            r.committed,
            r.offered,
            r.failures,
            r.ops_per_s,
            r.p50_ms,
            r.p50_ms / round_ms,
            r.p99_ms,
            r.p99_ms / round_ms,
            r.cycles_per_op
        );
    }
    out
}
