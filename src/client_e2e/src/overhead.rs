//! What the client library and exactly-once cost, end to end: the canister's cycles for the
//! same 1,000 new users written (a) by the Rust batcher through ic-agent (one keyed packed
//! batch), (b) by one hand-built `execute_batch_packed` call without a key, and (c) by one
//! hand-built keyed call (the batcher's request, built by hand). Each on a fresh canister
//! with the same history, so the databases are alike; the balance is read with
//! `canister_status` before and after (management calls are not charged to the canister).
//!
//! Figures: offline replica through a real agent, under each metering profile of
//! [`crate::PROFILES`] (one replica per profile).

use std::fmt::Write as _;

use bench_api::BatchKey;
use bench_api::UserOrderOp;
use bench_api::client::PackedUserOrders;
use bench_api::packed;
use candid::Principal;
use ic_agent::Agent;
use ic_batch_client::agent::AgentTransport;
use ic_batch_client::{Batcher, BatcherConfig, tokio_driver};
use offline_engine::Metering;

use crate::{E2eError, PROFILES, Replica, agent_label, cycles, deploy, identity};

/// The cycles each way spent.
#[derive(Clone, Debug)]
pub struct Overhead {
    /// The rules for memory pages the replica metered by.
    pub metering: Metering,
    /// Ops per batch.
    pub ops: usize,
    /// (a) the batcher through ic-agent.
    pub batcher: u128,
    /// (b) one hand-built unkeyed `execute_batch_packed` call.
    pub unkeyed: u128,
    /// (c) one hand-built keyed call.
    pub keyed: u128,
}

impl Overhead {
    /// The batcher's cycles over the hand-built unkeyed call's, minus one, in percent.
    pub fn batcher_over_unkeyed_pct(&self) -> f64 {
        (self.batcher as f64 / self.unkeyed as f64 - 1.0) * 100.0
    }

    /// The keyed call's cycles over the unkeyed call's, minus one, in percent: what
    /// deduplication (the key's lookup and record) adds to the batch.
    pub fn dedup_pct(&self) -> f64 {
        (self.keyed as f64 / self.unkeyed as f64 - 1.0) * 100.0
    }
}

/// A row of the table: how the users were written, and one run's cycles that way with their
/// comparison to the hand-built unkeyed call.
type Row = (&'static str, fn(&Overhead) -> (u128, String));

/// The table: one column group per run (its profile named in its columns), in the order of
/// `runs`, and a label line naming each run's engine and profile.
pub fn render(runs: &[Overhead]) -> String {
    let Some(first) = runs.first() else {
        return String::new();
    };
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Overhead of the client library and of exactly-once: the canister's cycles for {} new users in one batch, under each metering profile.\n",
        first.ops
    );
    let labels: Vec<String> = runs.iter().map(|o| agent_label(&o.metering)).collect();
    let _ = writeln!(out, "*engines: {}*\n", labels.join("; "));
    let _ = write!(out, "| how |");
    for o in runs {
        let m = o.metering.name;
        let _ = write!(
            out,
            " cycles ({m}) | cycles per op ({m}) | vs hand-built ({m}) |"
        );
    }
    let _ = writeln!(out, "\n|---|{}", "---:|".repeat(3 * runs.len()));
    let rows: [Row; 3] = [
        ("one hand-built `execute_batch_packed` call, no key", |o| {
            (o.unkeyed, "1".into())
        }),
        ("one hand-built keyed call (deduplication)", |o| {
            (o.keyed, format!("{:+.2} %", o.dedup_pct()))
        }),
        ("the Rust batcher through ic-agent (keyed)", |o| {
            (o.batcher, format!("{:+.2} %", o.batcher_over_unkeyed_pct()))
        }),
    ];
    for (how, figures) in rows {
        let _ = write!(out, "| {how} |");
        for o in runs {
            let (cycles, vs) = figures(o);
            let _ = write!(
                out,
                " {cycles} | {:.0} | {vs} |",
                cycles as f64 / o.ops as f64
            );
        }
        let _ = writeln!(out);
    }
    out
}

fn users(tag: &str, n: usize) -> Vec<UserOrderOp> {
    (0..n)
        .map(|i| UserOrderOp::CreateUser {
            username: format!("{tag}{i:05}"),
            email: format!("{tag}{i:05}@overhead.example"),
        })
        .collect()
}

async fn spent<F, Fut>(agent: &Agent, send: F) -> Result<u128, E2eError>
where
    F: FnOnce(Principal) -> Fut,
    Fut: std::future::Future<Output = Result<(), E2eError>>,
{
    let canister = deploy(agent, None).await?;
    let before = cycles(agent, canister).await?;
    send(canister).await?;
    let after = cycles(agent, canister).await?;
    Ok(before.saturating_sub(after))
}

async fn call_packed(agent: &Agent, canister: Principal, blob: Vec<u8>) -> Result<(), E2eError> {
    agent
        .update(&canister, "execute_batch_packed")
        .with_arg(bench_api::wire::encode_blob(&blob))
        .call_and_wait()
        .await
        .map(drop)
        .map_err(|source| E2eError::Agent {
            what: "execute_batch_packed".into(),
            source: Box::new(source),
        })
}

/// Measures `ops` new users each way under every profile of [`PROFILES`], in its order, each
/// on a replica of its own. Cost: twice [`measure`]'s.
pub async fn measure_profiles(ops: usize) -> Result<Vec<Overhead>, E2eError> {
    let mut runs = Vec::with_capacity(PROFILES.len());
    for metering in PROFILES {
        eprintln!("overhead: {ops} ops each way, metering {}", metering.name);
        runs.push(measure(ops, metering).await?);
    }
    Ok(runs)
}

/// Measures `ops` new users each way (same usernames' lengths, so the same bytes) on a
/// replica metering by `metering`. Cost: three canisters deployed, three batches.
pub async fn measure(ops: usize, metering: Metering) -> Result<Overhead, E2eError> {
    let replica = Replica::start_metered(None, metering)?;
    let agent = replica.agent(identity(88)).await?;
    let unkeyed = spent(&agent, |c| {
        let agent = agent.clone();
        async move { call_packed(&agent, c, packed::encode_ops(&users("a", ops))).await }
    })
    .await?;
    let keyed = spent(&agent, |c| {
        let agent = agent.clone();
        async move {
            let key = BatchKey {
                created_at_time: tokio_driver::system_clock(),
                id: *b"overhead-keyed-1",
            };
            call_packed(&agent, c, packed::encode_keyed_ops(&key, &users("b", ops))).await
        }
    })
    .await?;
    let batcher = spent(&agent, |c| {
        let agent = agent.clone();
        async move {
            let batcher = Batcher::new(
                PackedUserOrders,
                tokio_driver::with_random_key_prefix(BatcherConfig {
                    max_batch_ops: ops,
                    max_delay_ns: 60_000_000_000,
                    ..BatcherConfig::default()
                }),
            )
            .map_err(|e| E2eError::Start(e.to_string()))?;
            let now = tokio_driver::system_clock();
            let futures: Vec<_> = users("c", ops)
                .into_iter()
                .filter_map(|op| batcher.try_submit(op, now).ok())
                .collect();
            batcher.flush();
            batcher.close();
            let transport = AgentTransport::new(agent, c, "execute_batch_packed");
            let collect = async {
                for f in futures {
                    let _ = f.await;
                }
            };
            tokio::join!(
                tokio_driver::run(batcher.clone(), transport, tokio_driver::system_clock),
                collect
            );
            if batcher.stats().batches == 1 {
                Ok(())
            } else {
                Err(E2eError::Start(format!(
                    "the batcher sent {} batches, not one",
                    batcher.stats().batches
                )))
            }
        }
    })
    .await?;
    Ok(Overhead {
        metering,
        ops,
        batcher,
        unkeyed,
        keyed,
    })
}
