//! The randomized fault run: concurrent submitters write new users through one batcher
//! (ic-agent, verification on) to the reference canister on the offline replica, on the
//! library's generic protocol (the declared writes `bench_api::writes::UserOrderWrite`, sent by
//! `ic_batch_client::Declared` to `execute_writes_packed`), while a fault
//! task drops and delays answers, stops and restarts the canister and upgrades it, at random.
//! Then every op is checked against the database: its outcome was delivered once, to its own
//! submitter (the row id it was told is the row holding its own email), and it was applied
//! exactly once (one row with its email). With `ordered`, each submitter's ops share an
//! ordering key (`submit_ordered`), and its rows must have been committed in the order it
//! submitted them (their row ids, given in commit order, increase); without it, the run counts
//! the submitters' ops committed out of order all the same.
//!
//! Figures: offline replica through a real agent.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bench_api::Outcome;
use bench_api::writes::UserOrderWrite;
use candid::Principal;
use ic_agent::Agent;
use ic_batch_client::agent::AgentTransport;
use ic_batch_client::{
    BatchError, Batcher, BatcherConfig, BatcherStats, Declared, OpResult, tokio_driver,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::{E2eError, Replica, deploy, identity, upgrade, users_with_email_prefix};

const MS: u64 = 1_000_000;

/// The batcher's codec: the reference canister's declared writes, packed.
type Codec = Declared<UserOrderWrite>;

/// What a fault run does.
#[derive(Clone, Debug)]
pub struct FaultRunConfig {
    /// Ops (each creates one user).
    pub ops: usize,
    /// Concurrent submitting tasks.
    pub submitters: usize,
    /// Most ops per batch.
    pub max_batch_ops: usize,
    /// Seeds the submitters' pauses and the fault schedule.
    pub seed: u64,
    /// Each submitter's ops share an ordering key.
    pub ordered: bool,
}

impl Default for FaultRunConfig {
    fn default() -> Self {
        FaultRunConfig {
            ops: 10_000,
            submitters: 8,
            max_batch_ops: 100,
            seed: 1,
            ordered: false,
        }
    }
}

/// Faults injected, by kind.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FaultCounts {
    /// Answers dropped after the commit (`drop_replies`).
    pub dropped_answers: u64,
    /// Answers delayed past the client's attempt timeout or not (`delay_replies`).
    pub delayed_answers: u64,
    /// Times the canister was stopped and started again.
    pub stops: u64,
    /// Upgrades (same code, stable memory kept).
    pub upgrades: u64,
}

/// What a fault run found.
#[derive(Clone, Debug)]
pub struct FaultRunReport {
    /// The run's configuration.
    pub config: FaultRunConfig,
    /// Ops whose future resolved (each resolves at most once).
    pub delivered: u64,
    /// Ops told `Committed`.
    pub committed: u64,
    /// Ops told `Failed` by the canister.
    pub failed: u64,
    /// Ops given a [`BatchError`] (refused, rejected, unknown).
    pub errors: u64,
    /// Ops with no row although told committed, or with no outcome at all.
    pub lost: u64,
    /// Ops with more than one row.
    pub applied_twice: u64,
    /// Ops told a row id that is not the row of their own email.
    pub misdelivered: u64,
    /// Ops committed before the op their submitter submitted just before them (row ids are
    /// given in commit order).
    pub out_of_order: u64,
    /// Rows of the `users` table.
    pub rows: u64,
    /// The batcher's counters.
    pub stats: BatcherStats,
    /// Faults injected.
    pub faults: FaultCounts,
    /// Wall time of the run (submits to last outcome).
    pub elapsed: Duration,
}

impl FaultRunReport {
    /// Whether the run kept every promise: every op delivered, committed and applied once, to
    /// its own submitter.
    pub fn exactly_once(&self) -> bool {
        let n = self.config.ops as u64;
        self.delivered == n
            && self.committed == n
            && self.lost == 0
            && self.applied_twice == 0
            && self.misdelivered == 0
            && self.rows == n
    }
}

impl fmt::Display for FaultRunReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let c = &self.config;
        let s = &self.stats;
        let x = &self.faults;
        writeln!(
            f,
            "fault run (offline replica through a real agent): {} ops, {} submitters{}, at most {} ops per batch, {:.1} s",
            c.ops,
            c.submitters,
            if c.ordered {
                ", one ordering key each"
            } else {
                ""
            },
            c.max_batch_ops,
            self.elapsed.as_secs_f64()
        )?;
        writeln!(
            f,
            "  faults: {} answers dropped, {} delayed, {} stops, {} upgrades",
            x.dropped_answers, x.delayed_answers, x.stops, x.upgrades
        )?;
        writeln!(
            f,
            "  batcher: {} batches, {} attempts, {} retries, {} duplicates answered",
            s.batches, s.attempts, s.retries, s.duplicate_replies
        )?;
        write!(
            f,
            "  outcomes delivered {} (committed {}, failed {}, errors {}); rows {}; lost {}; applied twice {}; delivered to another op {}; committed out of their submitter's order {}",
            self.delivered,
            self.committed,
            self.failed,
            self.errors,
            self.rows,
            self.lost,
            self.applied_twice,
            self.misdelivered,
            self.out_of_order
        )
    }
}

fn email(i: usize) -> String {
    format!("r{i:06}@fault.example")
}

/// Runs the randomized fault run on a fresh replica and canister (see the module
/// documentation). Cost: about one batch call per `max_batch_ops` ops, plus retries and one
/// query per 100 ops to check the rows.
pub async fn run(config: FaultRunConfig) -> Result<FaultRunReport, E2eError> {
    let replica = Replica::start(None)?;
    let agent = replica.agent(identity(77)).await?;
    let canister = deploy(&agent, None).await?;
    let batcher = Batcher::new(
        Codec::new(),
        tokio_driver::with_random_key_prefix(BatcherConfig {
            max_batch_ops: config.max_batch_ops,
            max_delay_ns: 20 * MS,
            attempt_timeout_ns: Some(1_500 * MS),
            initial_backoff_ns: 50 * MS,
            max_backoff_ns: 500 * MS,
            ..BatcherConfig::default()
        }),
    )
    .map_err(|e| E2eError::Start(e.to_string()))?;
    let transport = AgentTransport::new(agent.clone(), canister, "execute_writes_packed");
    let driver = tokio::spawn(tokio_driver::run(
        batcher.clone(),
        transport,
        tokio_driver::system_clock,
    ));
    let done = Arc::new(AtomicBool::new(false));
    let faults = tokio::spawn(inject_faults(
        replica.clone(),
        agent.clone(),
        canister,
        config.seed,
        Arc::clone(&done),
    ));
    let started = Instant::now();
    let delivered = Arc::new(AtomicU64::new(0));
    let mut submitters = Vec::new();
    for k in 0..config.submitters {
        let batcher = batcher.clone();
        let delivered = Arc::clone(&delivered);
        let (n, count, seed, ordered) =
            (config.ops, config.submitters, config.seed, config.ordered);
        submitters.push(tokio::spawn(async move {
            let mut rng = StdRng::seed_from_u64(seed ^ ((k as u64 + 1) << 32));
            let ordering_key = format!("submitter {k}");
            let mut futures = Vec::new();
            for i in (k..n).step_by(count) {
                let op = UserOrderWrite::create_user {
                    username: format!("u{i}"),
                    email: email(i),
                };
                let now = tokio_driver::system_clock();
                let future = if ordered {
                    batcher.submit_ordered(op, &ordering_key, now).await
                } else {
                    batcher.submit(op, now).await
                };
                futures.push((i, future));
                if rng.gen_ratio(1, 8) {
                    tokio::time::sleep(Duration::from_millis(rng.gen_range(1..40))).await;
                }
            }
            let mut results: Vec<(usize, Option<OpResult<Codec>>)> = Vec::new();
            for (i, future) in futures {
                match future {
                    Ok(f) => {
                        let r = f.await;
                        delivered.fetch_add(1, Ordering::SeqCst);
                        results.push((i, Some(r)));
                    }
                    Err(_) => results.push((i, None)),
                }
            }
            results
        }));
    }
    let mut results: Vec<Option<OpResult<Codec>>> = vec![None; config.ops];
    for s in submitters {
        let part = s.await.map_err(|e| E2eError::Start(e.to_string()))?;
        for (i, r) in part {
            results[i] = r;
        }
    }
    let elapsed = started.elapsed();
    done.store(true, Ordering::SeqCst);
    let fault_counts = faults.await.map_err(|e| E2eError::Start(e.to_string()))??;
    batcher.close();
    driver.await.map_err(|e| E2eError::Start(e.to_string()))?;
    // The rows: 100 emails per prefix (`r0123` holds ops 12,300 .. 12,399).
    let mut rows_of: HashMap<String, Vec<i64>> = HashMap::new();
    let mut rows = 0u64;
    for prefix in 0..config.ops.div_ceil(100) {
        for user in users_with_email_prefix(&agent, canister, &format!("r{prefix:04}")).await? {
            rows += 1;
            rows_of.entry(user.email).or_default().push(user.user_id);
        }
    }
    let (mut committed, mut failed, mut errors) = (0u64, 0u64, 0u64);
    let (mut lost, mut applied_twice, mut misdelivered) = (0u64, 0u64, 0u64);
    for (i, r) in results.iter().enumerate() {
        let own = rows_of.get(&email(i)).map(Vec::as_slice).unwrap_or(&[]);
        if own.len() > 1 {
            applied_twice += 1;
        }
        match r {
            None => lost += 1,
            Some(Ok(Outcome::Committed {
                last_insert_rowid, ..
            })) => {
                committed += 1;
                if own.is_empty() {
                    lost += 1;
                } else if !own.contains(last_insert_rowid) {
                    misdelivered += 1;
                }
            }
            Some(Ok(Outcome::Failed(_))) => failed += 1,
            // An op the canister did not reach, delivered rather than resent: not applied.
            Some(Ok(Outcome::NotExecuted)) => errors += 1,
            Some(Err(BatchError::Unknown { .. } | BatchError::BadReply(_))) => errors += 1,
            Some(Err(_)) => {
                errors += 1;
                if !own.is_empty() {
                    // Told "nothing ran", yet it ran: a false outcome.
                    misdelivered += 1;
                }
            }
        }
    }
    // Each submitter's ops in the order it submitted them (op `i` is submitter `i % count`'s):
    // their rows' ids must increase.
    let mut out_of_order = 0u64;
    for k in 0..config.submitters {
        let ids: Vec<i64> = (k..config.ops)
            .step_by(config.submitters)
            .filter_map(|i| {
                rows_of
                    .get(&email(i))
                    .and_then(|rows| rows.first().copied())
            })
            .collect();
        out_of_order += ids.windows(2).filter(|w| w[0] > w[1]).count() as u64;
    }
    Ok(FaultRunReport {
        delivered: delivered.load(Ordering::SeqCst),
        out_of_order,
        committed,
        failed,
        errors,
        lost,
        applied_twice,
        misdelivered,
        rows,
        stats: batcher.stats(),
        faults: fault_counts,
        elapsed,
        config,
    })
}

/// Injects a random fault every 150–600 ms until `done`; leaves the canister running.
async fn inject_faults(
    replica: Replica,
    agent: Agent,
    canister: Principal,
    seed: u64,
    done: Arc<AtomicBool>,
) -> Result<FaultCounts, E2eError> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut counts = FaultCounts::default();
    while !done.load(Ordering::SeqCst) {
        tokio::time::sleep(Duration::from_millis(rng.gen_range(150..600))).await;
        match rng.gen_range(0..10u32) {
            0..=2 => {
                let n = rng.gen_range(1..=2u64);
                replica.hook("drop_replies", &format!(r#"{{"count": {n}}}"#))?;
                counts.dropped_answers += n;
            }
            3..=5 => {
                let n = rng.gen_range(1..=2u64);
                let ms = rng.gen_range(300..3_000u64);
                replica.hook("delay_replies", &format!(r#"{{"count": {n}, "ms": {ms}}}"#))?;
                counts.delayed_answers += n;
            }
            6..=7 => {
                replica.set_running(canister, false)?;
                tokio::time::sleep(Duration::from_millis(rng.gen_range(200..1_200))).await;
                replica.set_running(canister, true)?;
                counts.stops += 1;
            }
            8 => {
                // The upgrade's own answer may be dropped or delayed by a pending fault: it
                // runs either way; the wait is bounded.
                let _ =
                    tokio::time::timeout(Duration::from_secs(10), upgrade(&agent, canister)).await;
                counts.upgrades += 1;
            }
            _ => {}
        }
    }
    // Pending drops and delays would only slow the checks that follow.
    replica.hook("drop_replies", r#"{"count": 0}"#)?;
    replica.hook("delay_replies", r#"{"count": 0, "ms": 0}"#)?;
    Ok(counts)
}
