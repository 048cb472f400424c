//! Cycles per user write of the application canister example (`examples/app_canister`), end to
//! end: users send one `create_user` call each to the application canister, which forwards the
//! write to the reference database canister through `ic-batch-client`'s `CanisterDriver` (one
//! inter-canister call of `execute_writes_packed` per flush) or with one inter-canister call per
//! write. The cycles both canisters spent, read with
//! `canister_status` before and after, divided by the writes; with the breakdown by canister and
//! the ingress share (what the application canister pays to receive the user calls).
//!
//! Figures: offline replica through a real agent (the offline engine's fee schedule of a
//! 13-node application subnet), and the offline engine's subnet run message by message; each
//! under the metering profile it names, the example under every profile of
//! [`crate::PROFILES`].

use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use candid::{CandidType, Decode, Deserialize, Encode, Principal};
use ic_agent::Agent;
use ic_management_canister_types::{
    CanisterIdRecord, CanisterInstallMode, InstallCodeArgs, ProvisionalCreateCanisterWithCyclesArgs,
};
use offline_engine::Metering;

use crate::{
    E2eError, Replica, agent_label, cycles, deploy, engine_label, identity, profile_title,
};

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
    /// Inter-canister calls the application canister made to the database canister.
    pub calls: u64,
    /// Runs of its batch driver's timer (executions of its global timer that had work).
    pub timers: u64,
    /// Batches the driver formed, each under its own key (`calls` minus `retries`).
    pub batches: u64,
    /// Calls that were retries of a batch, with its key.
    pub retries: u64,
    /// Answers that said the batch had already run (a retry answered from the record).
    pub duplicate_replies: u64,
    /// Calls sent from a message that ran anyway (a user call or a batch's answer).
    pub sent_by_messages: u64,
    /// Calls sent from the timer.
    pub sent_by_timer: u64,
    /// Distinct rows among the committed outcomes (`committed` when each op was applied once).
    pub distinct_rows: u64,
}

/// What one mode cost.
#[derive(Clone, Debug)]
pub struct AppCost {
    /// The rules for memory pages the replica metered by.
    pub metering: Metering,
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
        metering: replica.metering,
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

/// Both modes on a replica metering by `metering`, and the table.
pub async fn measure(
    writes: u64,
    in_flight: usize,
    metering: Metering,
) -> Result<(Vec<AppCost>, String), E2eError> {
    let replica = Replica::start_metered(None, metering)?;
    let direct = measure_mode(&replica, Mode::Direct, writes, in_flight, 60).await?;
    let batched = measure_mode(&replica, Mode::Batched, writes, in_flight, 61).await?;
    let table = render(&[direct.clone(), batched.clone()]);
    Ok((vec![direct, batched], table))
}

/// The table: cycles per user write, by canister, with the ingress share (`costs` of one
/// profile, which the table names).
pub fn render(costs: &[AppCost]) -> String {
    let ingress = ingress_fee_per_write() as f64;
    let mut out = String::new();
    let engine = costs.first().map_or_else(
        || "offline replica through a real agent".into(),
        |c| agent_label(&c.metering),
    );
    let _ = writeln!(
        out,
        "Application canister, cycles per user write end to end ({engine}; fees of a 13-node subnet):\n"
    );
    let _ = writeln!(
        out,
        "| app canister forwards | writes committed | per write | app canister (of which user ingress) | database canister | vs one call per write | calls to the database canister (app canister's timer executions) |"
    );
    let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|---:|");
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
            "| {label} | {} / {} | {:.0} | {:.0} ({ingress:.0}) | {:.0} | {vs} | {} ({}) |",
            c.summary.committed,
            c.writes,
            c.per_write(),
            c.app_cycles as f64 / n,
            c.database_cycles as f64 / n,
            c.summary.calls,
            c.summary.timers,
        );
    }
    out
}

// ------------------------------------------------------------------ message-level breakdown

/// How user writes reach the database canister in a message-level run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Path {
    /// Each user calls the database canister's `create_user` (no application canister).
    UserDirect,
    /// Each user calls the application canister, which forwards in `Mode`.
    App(Mode),
}

impl Path {
    /// The path's name in the tables.
    pub fn label(self) -> &'static str {
        match self {
            Path::UserDirect => "the user calls the database canister directly",
            Path::App(Mode::Direct) => "app canister, one inter-canister call per write",
            Path::App(Mode::Batched) => "app canister, through the batcher",
        }
    }
}

/// One kind of message (or fee) of the application canister in a message-level run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Part {
    /// What it is.
    pub what: String,
    /// How many.
    pub count: u64,
    /// Instructions billed (with the dirty-page charge), all of them together.
    pub instructions: u64,
    /// Cycles, all of them together (13 nodes).
    pub cycles: u128,
}

/// What one path cost in a message-level run on the offline engine's subnet.
#[derive(Clone, Debug)]
pub struct Breakdown {
    /// The rules for memory pages the engine metered by.
    pub metering: Metering,
    /// The path.
    pub path: Path,
    /// User writes sent.
    pub writes: u64,
    /// User calls submitted per round (one round per second of canister time).
    pub per_round: u64,
    /// Rounds run until every write was answered and nothing ran any more.
    pub rounds: u64,
    /// Rows in the database's `users` table afterwards.
    pub rows: u64,
    /// The application canister's cycles by kind of message or fee (empty for
    /// [`Path::UserDirect`]).
    pub parts: Vec<Part>,
    /// Cycles the application canister spent (read from its balance).
    pub app_cycles: u128,
    /// Cycles the database canister spent (read from its balance).
    pub database_cycles: u128,
    /// Messages the database canister executed (its updates: one per call that reached it).
    pub database_messages: u64,
}

impl Breakdown {
    /// Cycles per user write, both canisters.
    pub fn per_write(&self) -> f64 {
        (self.app_cycles + self.database_cycles) as f64 / self.writes as f64
    }
}

fn engine_err(e: offline_engine::EngineError) -> E2eError {
    E2eError::Start(format!("the offline engine: {e}"))
}

/// A canister id with index `n` (the shape the IC gives canister ids).
fn canister_id(n: u64) -> Vec<u8> {
    let mut v = n.to_be_bytes().to_vec();
    v.extend_from_slice(&[1, 1]);
    v
}

const START: u64 = 1_700_000_000_000_000_000;
const ROUND_NS: u64 = 1_000_000_000;
/// The bytes of the method name of ic-cdk-timers' self-call (`<ic-cdk internal>
/// timer_executor`) plus its 8-byte argument.
const TIMER_SELF_CALL_BYTES: u64 = 32 + 8;

/// Runs `writes` user `create_user` calls, `per_round` of them per round (one round per second
/// of canister time, as the IC makes about one block a second), through `path`, on the offline
/// engine's subnet (both canisters on one 13-node application subnet, every fee charged),
/// message by message, metered by `metering`, and accounts every message the application
/// canister executed. The canisters are the wasm `scripts/build.sh` and
/// `scripts/build_example.sh` build.
pub fn breakdown(
    path: Path,
    writes: u64,
    per_round: u64,
    metering: Metering,
) -> Result<Breakdown, E2eError> {
    use ic_agent::Identity as _;
    use offline_engine::fees::{IC_2025, ingress_bytes};
    use offline_engine::messages::Ingress;
    use offline_engine::{
        Canister, Charging, Engine, EngineConfig, Settings, Subnet, SubnetConfig,
    };

    let nodes = Charging::APPLICATION.subnet_nodes;
    let user = identity(62)
        .sender()
        .map_err(|e| E2eError::Start(e.to_string()))?
        .as_slice()
        .to_vec();
    let engine = Engine::new(EngineConfig {
        metering,
        ..EngineConfig::default()
    })
    .map_err(engine_err)?;
    let settings = |id: &[u8]| Settings {
        canister_id: id.to_vec(),
        controllers: vec![user.clone()],
        cycles: 100_000_000_000_000,
        time_ns: START,
        debug_print_enabled: false,
        charging: Some(Charging::APPLICATION),
        ..Settings::default()
    };
    let load = |path: PathBuf| {
        std::fs::read(&path)
            .map_err(|source| E2eError::Wasm { path, source })
            .and_then(|wasm| engine.load(&wasm).map_err(engine_err))
    };
    let (db, app) = (canister_id(10), canister_id(11));
    let mut subnet = Subnet::new(SubnetConfig::APPLICATION, START);
    let (database, _) = Canister::install(
        &engine,
        &load(crate::canister_wasm_path())?,
        &Encode!(&None::<bench_api::InitArgs>).map_err(candid_err)?,
        settings(&db),
    )
    .map_err(engine_err)?;
    subnet.install(database);
    let mut next_id = 0u64;
    let mut ingress = |receiver: &[u8], method: &str, payload: Vec<u8>| {
        next_id += 1;
        Ingress {
            id: next_id.to_be_bytes().to_vec(),
            sender: user.clone(),
            receiver: receiver.to_vec(),
            method: method.into(),
            payload,
        }
    };
    let target = if let Path::App(mode) = path {
        let init = Encode!(&Init {
            database: Principal::from_slice(&db),
            mode
        })
        .map_err(candid_err)?;
        let (canister, _) =
            Canister::install(&engine, &load(app_wasm_path())?, &init, settings(&app))
                .map_err(engine_err)?;
        subnet.install(canister);
        let add = ingress(
            &db,
            "add_writers",
            Encode!(&vec![Principal::from_slice(&app)]).map_err(candid_err)?,
        );
        let (added, _) = subnet.execute_ingress(add, 10).map_err(engine_err)?;
        if added.reply().is_none() {
            return Err(E2eError::Start(format!("add_writers: {added:?}")));
        }
        app.clone()
    } else {
        db.clone()
    };
    let balance = |subnet: &Subnet, id: &[u8]| subnet.canister(id).map_or(0, |c| c.cycles());
    let (app_before, db_before) = (balance(&subnet, &app), balance(&subnet, &db));

    let mut parts: Vec<Part> = Vec::new();
    let mut add = |what: &str, instructions: u64, cycles: u128| match parts
        .iter_mut()
        .find(|p| p.what == what)
    {
        Some(p) => {
            p.count += 1;
            p.instructions += instructions;
            p.cycles += cycles;
        }
        None => parts.push(Part {
            what: what.into(),
            count: 1,
            instructions,
            cycles,
        }),
    };
    let (mut sent, mut answered, mut rounds, mut quiet) = (0u64, 0u64, 0u64, 0u32);
    let mut ingress_fees = 0u128;
    let mut database_messages = 0u64;
    // Until every user call is answered and two rounds ran nothing (timers and answers done).
    while answered < writes || quiet < 2 {
        for _ in 0..per_round.min(writes - sent) {
            let arg = Encode!(
                &format!("app{sent:06}"),
                &format!("app{sent:06}@app.example")
            )
            .map_err(candid_err)?;
            ingress_fees += IC_2025.ingress_cost(ingress_bytes(arg.len(), "create_user"), nodes);
            let m = ingress(&target, "create_user", arg);
            if let Err(refused) = subnet.submit(m).map_err(engine_err)? {
                return Err(E2eError::Start(format!("create_user refused: {refused:?}")));
            }
            sent += 1;
        }
        let round = subnet.execute_round().map_err(engine_err)?;
        rounds += 1;
        answered += round.completed.len() as u64;
        quiet = if round.executions.is_empty() {
            quiet + 1
        } else {
            0
        };
        for (canister, exec) in &round.executions {
            if *canister == db {
                database_messages += u64::from(exec.entry.starts_with("canister_update"));
                continue;
            }
            let cycles = if exec.entry == "cleanup" {
                IC_2025.instructions_cost(exec.billed_instructions, nodes)
            } else {
                IC_2025.execution_cost(exec.billed_instructions, nodes)
            };
            let what = match exec.entry.as_str() {
                "canister_update create_user" => "the user's `create_user` (execution)",
                "canister_global_timer" => "the flush timer: `canister_global_timer` (execution)",
                "canister_update <ic-cdk internal> timer_executor" => {
                    "timer: ic-cdk-timers' self-call `timer_executor` (execution)"
                }
                "reply_callback" | "reject_callback" | "cleanup" => "callbacks (execution)",
                other => other,
            };
            add(what, exec.billed_instructions, cycles);
        }
        subnet.set_time(subnet.time() + ROUND_NS);
        if rounds > writes * 10 + 100 {
            return Err(E2eError::Start(format!(
                "{}: {answered} of {writes} user calls answered after {rounds} rounds",
                path.label()
            )));
        }
    }
    let (app_after, db_after) = (balance(&subnet, &app), balance(&subnet, &db));
    let rows = {
        let c = subnet
            .canister_mut(&db)
            .ok_or_else(|| E2eError::Start("no database".into()))?;
        let reply = c
            .query("counts", &Encode!().map_err(candid_err)?)
            .map_err(engine_err)?;
        let bytes = reply
            .result
            .reply()
            .ok_or_else(|| E2eError::Start(format!("counts: {:?}", reply.result)))?;
        Decode!(bytes, Result<bench_api::Counts, String>)
            .map_err(candid_err)?
            .map_err(E2eError::Start)?
            .users
    };
    let app_cycles = app_before.saturating_sub(app_after);
    let database_cycles = db_before.saturating_sub(db_after);
    if path != Path::UserDirect {
        // The ingress fees, and the call fees: what the balance lost beyond the executions and
        // the ingress (the request fee of every call and the transmission of its reply).
        let executed: u128 = parts.iter().map(|p| p.cycles).sum();
        let calls = app_cycles.saturating_sub(executed + ingress_fees);
        let self_calls = parts
            .iter()
            .find(|p| p.what.contains("timer_executor"))
            .map_or(0, |p| p.count);
        let self_call_fees =
            u128::from(self_calls) * IC_2025.call_cost(TIMER_SELF_CALL_BYTES, nodes);
        parts.insert(
            0,
            Part {
                what: "the user's ingress (reception)".into(),
                count: writes,
                instructions: 0,
                cycles: ingress_fees,
            },
        );
        if self_calls > 0 {
            parts.push(Part {
                what: "timer: the self-call's fee (260 K + 40 bytes)".into(),
                count: self_calls,
                instructions: 0,
                cycles: self_call_fees,
            });
        }
        parts.push(Part {
            what: "calls to the database canister: fees (260 K + request and reply bytes)".into(),
            count: database_messages,
            instructions: 0,
            cycles: calls.saturating_sub(self_call_fees),
        });
    }
    Ok(Breakdown {
        metering,
        path,
        writes,
        per_round,
        rounds,
        rows,
        parts,
        app_cycles,
        database_cycles,
        database_messages,
    })
}

/// The application canister's cycles per user write by kind of message or fee (`b` of a
/// path through the application canister).
pub fn render_breakdown(b: &Breakdown) -> String {
    let n = b.writes as f64;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Where the application canister's cycles go ({}, {} user writes, {} user calls per round, one round per second; engine: {}, message by message, fees of a 13-node subnet):\n",
        b.path.label(),
        b.writes,
        b.per_round,
        engine_label(&b.metering)
    );
    let _ = writeln!(
        out,
        "| application canister: message or fee | count | per user write: count | instructions per message | cycles per user write |"
    );
    let _ = writeln!(out, "|---|---:|---:|---:|---:|");
    for p in &b.parts {
        let per_message = if p.instructions > 0 {
            format!("{:.0}", p.instructions as f64 / p.count.max(1) as f64)
        } else {
            "–".into()
        };
        let _ = writeln!(
            out,
            "| {} | {} | {:.3} | {per_message} | {:.0} |",
            p.what,
            p.count,
            p.count as f64 / n,
            p.cycles as f64 / n
        );
    }
    let _ = writeln!(
        out,
        "| **the application canister, in all** (its balance) | | | | **{:.0}** |",
        b.app_cycles as f64 / n
    );
    let _ = writeln!(
        out,
        "| the database canister ({} update messages) | {} | {:.3} | | {:.0} |",
        b.database_messages,
        b.database_messages,
        b.database_messages as f64 / n,
        b.database_cycles as f64 / n
    );
    let _ = writeln!(
        out,
        "| **both canisters** ({} of {} writes applied, {} rounds) | | | | **{:.0}** |",
        b.rows,
        b.writes,
        b.rounds,
        b.per_write()
    );
    out
}

/// The loads (user calls per round) the example prices every path at.
pub const LOADS: [u64; 6] = [1, 10, 50, 100, 200, 1_000];

/// Every path at every load of [`LOADS`] (`writes` user writes each; message level, metered by
/// `metering`).
pub fn loads(writes: u64, metering: Metering) -> Result<Vec<Vec<Breakdown>>, E2eError> {
    LOADS
        .iter()
        .map(|&load| {
            [
                Path::UserDirect,
                Path::App(Mode::Direct),
                Path::App(Mode::Batched),
            ]
            .into_iter()
            .map(|path| breakdown(path, writes, load, metering))
            .collect()
        })
        .collect()
}

/// The engine label of message-level `rows` (as [`loads`] returns them: one profile).
fn rows_label(rows: &[Vec<Breakdown>]) -> String {
    rows.iter().flatten().next().map_or_else(
        || offline_engine::canbench::ENGINE_LABEL.into(),
        |b| engine_label(&b.metering),
    )
}

/// When the batched application canister costs less per user write than the user calling the
/// database canister directly, from `rows` (as [`loads`] returns them).
pub fn when_it_pays(rows: &[Vec<Breakdown>]) -> String {
    let cost = |row: &[Breakdown], path: Path| {
        row.iter()
            .find(|b| b.path == path)
            .map(Breakdown::per_write)
    };
    let mut first_cheaper = None;
    let mut parts = Vec::new();
    for row in rows {
        if let (Some(direct), Some(batched)) = (
            cost(row, Path::UserDirect),
            cost(row, Path::App(Mode::Batched)),
        ) {
            let load = row.first().map_or(0, |b| b.per_round);
            parts.push(format!(
                "{:+.1} % at {load}",
                (batched / direct - 1.0) * 100.0
            ));
            if batched < direct && first_cheaper.is_none() {
                first_cheaper = Some(load);
            }
        }
    }
    let verdict = match first_cheaper {
        Some(load) => format!(
            "it costs less than the user calling the database canister directly from {load} user calls per round"
        ),
        None => "it never costs less than the user calling the database canister directly at these loads".into(),
    };
    format!(
        "When it pays (engine: {}): through the batcher, {verdict} (against the direct path: {} user calls per round). \
         Both paths pay the user's ingress and one execution of the user's call; the application canister adds its own \
         instructions, its share of each flush (the callback, the call's fees, the database canister's execution of the \
         batch) and the batch's per-op work, against the database canister's own work for one write in one message.\n",
        rows_label(rows),
        parts.join(", ")
    )
}

/// Cycles per user write of every path at each load (`rows[i]`: the paths at one load, the
/// user calling the database canister directly first).
pub fn render_loads(rows: &[Vec<Breakdown>]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Cycles per user write by load, both canisters (engine: {}, message by message, one round per second, fees of a 13-node subnet):\n",
        rows_label(rows)
    );
    let Some(first) = rows.first() else {
        return out;
    };
    let _ = write!(out, "| user calls per round |");
    for b in first {
        let _ = write!(out, " {} |", b.path.label());
    }
    let _ = writeln!(out);
    let _ = writeln!(out, "|---:|{}", "---:|".repeat(first.len()));
    for row in rows {
        let base = row
            .iter()
            .find(|b| b.path == Path::UserDirect)
            .map(Breakdown::per_write);
        let _ = write!(out, "| {} |", row.first().map_or(0, |b| b.per_round));
        for b in row {
            let vs = match base {
                Some(base) if b.path != Path::UserDirect => {
                    format!(" ({:+.1} %)", (b.per_write() / base - 1.0) * 100.0)
                }
                _ => String::new(),
            };
            let _ = write!(out, " {:.0}{vs} |", b.per_write());
        }
        let _ = writeln!(out);
    }
    out
}

/// Everything the example measures under one metering profile.
#[derive(Clone, Debug)]
pub struct ProfileFigures {
    /// The rules for memory pages the replica and the engine metered by.
    pub metering: Metering,
    /// Both modes through the offline replica with a real agent ([`measure`]).
    pub agent: Vec<AppCost>,
    /// Where the batched application canister's cycles go ([`breakdown`]).
    pub breakdown: Breakdown,
    /// Every path at every load ([`loads`]).
    pub loads: Vec<Vec<Breakdown>>,
}

/// A section of the example's markdown: its title and how one profile's figures render in it.
type Section = (&'static str, fn(&ProfileFigures) -> String);

/// The example's markdown: each table under every profile of `figures`, in their order, the
/// profiles' tables one after the other, each labelled with its profile.
pub fn render_profiles(figures: &[ProfileFigures]) -> String {
    let mut out = String::new();
    let sections: [Section; 3] = [
        ("End to end through a real agent", |f| render(&f.agent)),
        ("Where the application canister's cycles go", |f| {
            render_breakdown(&f.breakdown)
        }),
        ("By load", |f| {
            format!("{}\n{}", render_loads(&f.loads), when_it_pays(&f.loads))
        }),
    ];
    for (title, section) in sections {
        let _ = writeln!(out, "## {title}\n");
        for f in figures {
            let _ = writeln!(out, "### Under {}\n", profile_title(&f.metering));
            let _ = writeln!(out, "{}", section(f));
        }
    }
    out
}
