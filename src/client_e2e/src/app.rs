//! Cycles per user write of the application canister example (`examples/app_canister`), end to
//! end: users send one `create_user` call each to the application canister, which forwards the
//! write to the reference database canister through the batcher (one inter-canister call per
//! flush) or with one inter-canister call per write. The cycles both canisters spent, read with
//! `canister_status` before and after, divided by the writes; with the breakdown by canister and
//! the ingress share (what the application canister pays to receive the user calls).
//!
//! Figures: offline replica through a real agent (the offline engine's fee schedule of a
//! 13-node application subnet).

use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use candid::{CandidType, Decode, Deserialize, Encode, Principal};
use ic_agent::Agent;
use ic_management_canister_types::{
    CanisterIdRecord, CanisterInstallMode, InstallCodeArgs, ProvisionalCreateCanisterWithCyclesArgs,
};

use crate::{E2eError, Replica, cycles, deploy, identity};

/// The application canister's wasm, as `scripts/build.sh` builds it.
pub fn app_wasm_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../target/wasm32-unknown-unknown/release/app_canister.wasm")
}

/// The application canister's mode (its install argument's `mode`).
#[derive(CandidType, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Through the batcher.
    Batched,
    /// One call per write.
    Direct,
}

#[derive(CandidType, Deserialize)]
struct Init {
    database: Principal,
    mode: Mode,
}

/// The application canister's `summary()`.
#[derive(CandidType, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    /// Tickets issued.
    pub tickets: u64,
    /// Ops committed.
    pub committed: u64,
    /// Ops failed.
    pub failed: u64,
    /// Ops not answered yet.
    pub pending: u64,
}

/// What one mode cost.
#[derive(Clone, Debug)]
pub struct AppCost {
    /// The mode.
    pub mode: Mode,
    /// User writes sent.
    pub writes: u64,
    /// The application canister's final summary.
    pub summary: Summary,
    /// Cycles the application canister spent (ingress, executions, calls).
    pub app_cycles: u128,
    /// Cycles the database canister spent.
    pub database_cycles: u128,
    /// Rows in the database's `users` table afterwards.
    pub rows: u64,
}

impl AppCost {
    /// Cycles per user write, both canisters.
    pub fn per_write(&self) -> f64 {
        (self.app_cycles + self.database_cycles) as f64 / self.writes as f64
    }
}

fn err(what: &str) -> impl FnOnce(ic_agent::AgentError) -> E2eError + '_ {
    move |source| E2eError::Agent {
        what: what.into(),
        source: Box::new(source),
    }
}

fn candid_err(e: candid::Error) -> E2eError {
    E2eError::Candid {
        what: "app canister".into(),
        message: e.to_string(),
    }
}

async fn deploy_app(agent: &Agent, database: Principal, mode: Mode) -> Result<Principal, E2eError> {
    let first = Principal::from_text("lxzze-o7777-77777-aaaaa-cai")
        .map_err(|e| E2eError::Start(e.to_string()))?;
    let created = agent
        .update(
            &Principal::management_canister(),
            "provisional_create_canister_with_cycles",
        )
        .with_effective_canister_id(first)
        .with_arg(
            Encode!(&ProvisionalCreateCanisterWithCyclesArgs {
                amount: Some(100_000_000_000_000u128.into()),
                settings: None,
                specified_id: None,
                sender_canister_version: None,
            })
            .map_err(candid_err)?,
        )
        .call_and_wait()
        .await
        .map_err(err("creating the app canister"))?;
    let canister_id = Decode!(&created, CanisterIdRecord)
        .map_err(candid_err)?
        .canister_id;
    let path = app_wasm_path();
    let wasm = std::fs::read(&path)
        .and_then(|wasm| {
            use std::io::Write as _;
            let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            gz.write_all(&wasm)?;
            gz.finish()
        })
        .map_err(|source| E2eError::Wasm { path, source })?;
    agent
        .update(&Principal::management_canister(), "install_code")
        .with_effective_canister_id(canister_id)
        .with_arg(
            Encode!(&InstallCodeArgs {
                mode: CanisterInstallMode::Install,
                canister_id,
                wasm_module: wasm,
                arg: Encode!(&Init { database, mode }).map_err(candid_err)?,
                sender_canister_version: None,
            })
            .map_err(candid_err)?,
        )
        .call_and_wait()
        .await
        .map_err(err("installing the app canister"))?;
    Ok(canister_id)
}

async fn summary(agent: &Agent, app: Principal) -> Result<Summary, E2eError> {
    let reply = agent
        .query(&app, "summary")
        .with_arg(Encode!().map_err(candid_err)?)
        .call()
        .await
        .map_err(err("summary"))?;
    Decode!(&reply, Summary).map_err(candid_err)
}

/// Sends `writes` user calls (`in_flight` at a time) to a fresh application canister in
/// `mode` over a fresh database canister, waits until every write is answered, and returns
/// what both canisters spent.
pub async fn measure_mode(
    replica: &Replica,
    mode: Mode,
    writes: u64,
    in_flight: usize,
    seed: u8,
) -> Result<AppCost, E2eError> {
    let agent = replica.agent(identity(seed)).await?;
    let database = deploy(&agent, None).await?;
    let app = deploy_app(&agent, database, mode).await?;
    let added = agent
        .update(&database, "add_writers")
        .with_arg(Encode!(&vec![app]).map_err(candid_err)?)
        .call_and_wait()
        .await
        .map_err(err("add_writers"))?;
    Decode!(&added, Result<(), bench_api::WriteError>)
        .map_err(candid_err)?
        .map_err(|e| E2eError::Candid {
            what: "add_writers".into(),
            message: e.to_string(),
        })?;
    let (app_before, db_before) = (cycles(&agent, app).await?, cycles(&agent, database).await?);
    let mut next = 0u64;
    let mut calls = futures_util::stream::FuturesUnordered::new();
    use futures_util::StreamExt as _;
    while next < writes || !calls.is_empty() {
        while next < writes && calls.len() < in_flight {
            let (agent, i) = (agent.clone(), next);
            calls.push(async move {
                agent
                    .update(&app, "create_user")
                    .with_arg(
                        Encode!(&format!("app{i:06}"), &format!("app{i:06}@app.example"))
                            .unwrap_or_default(),
                    )
                    .call_and_wait()
                    .await
            });
            next += 1;
        }
        if let Some(r) = calls.next().await {
            r.map_err(err("create_user on the app canister"))?;
        }
    }
    let deadline = Instant::now() + Duration::from_secs(120);
    let summary = loop {
        let s = summary(&agent, app).await?;
        if s.pending == 0 || Instant::now() > deadline {
            break s;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let (app_after, db_after) = (cycles(&agent, app).await?, cycles(&agent, database).await?);
    let rows = crate::counts(&agent, database).await?.users;
    Ok(AppCost {
        mode,
        writes,
        summary,
        app_cycles: app_before.saturating_sub(app_after),
        database_cycles: db_before.saturating_sub(db_after),
        rows,
    })
}

/// The ingress fee of one user call (`create_user` with these arguments): 1.2 M + 2,000 per
/// byte of method name, argument and 8-byte nonce (the fee schedule of a 13-node subnet).
pub fn ingress_fee_per_write() -> u128 {
    let arg = Encode!(
        &"app000000".to_string(),
        &"app000000@app.example".to_string()
    )
    .map(|a| a.len())
    .unwrap_or(0);
    1_200_000 + 2_000 * ("create_user".len() + arg + 8) as u128
}

/// Both modes and the table.
pub async fn measure(writes: u64, in_flight: usize) -> Result<(Vec<AppCost>, String), E2eError> {
    let replica = Replica::start(None)?;
    let direct = measure_mode(&replica, Mode::Direct, writes, in_flight, 60).await?;
    let batched = measure_mode(&replica, Mode::Batched, writes, in_flight, 61).await?;
    let table = render(&[direct.clone(), batched.clone()]);
    Ok((vec![direct, batched], table))
}

/// The table: cycles per user write, by canister, with the ingress share.
pub fn render(costs: &[AppCost]) -> String {
    let ingress = ingress_fee_per_write() as f64;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Application canister, cycles per user write end to end (offline replica through a real agent; fees of a 13-node subnet):\n"
    );
    let _ = writeln!(
        out,
        "| app canister forwards | writes committed | per write | app canister (of which user ingress) | database canister | vs one call per write |"
    );
    let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|");
    let base = costs
        .iter()
        .find(|c| c.mode == Mode::Direct)
        .map(AppCost::per_write);
    for c in costs {
        let n = c.writes as f64;
        let label = match c.mode {
            Mode::Direct => "one inter-canister call per write",
            Mode::Batched => "through the batcher (one call per flush)",
        };
        let vs = base.map_or(String::new(), |b| {
            format!("{:+.1} %", (c.per_write() / b - 1.0) * 100.0)
        });
        let _ = writeln!(
            out,
            "| {label} | {} / {} | {:.0} | {:.0} ({ingress:.0}) | {:.0} | {vs} |",
            c.summary.committed,
            c.writes,
            c.per_write(),
            c.app_cycles as f64 / n,
            c.database_cycles as f64 / n,
        );
    }
    out
}
