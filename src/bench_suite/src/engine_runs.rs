//! Every call into the offline engine lives here: the canbench benchmarks of the canbench wasm,
//! and the message-level runs of the deployable wasm (real update calls with Candid arguments,
//! the timer flush through `tick`). The rest of the crate works on the plain figures these
//! functions return, so it can be tested without a wasm.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Instant;

use anyhow::{Context, Result, anyhow, bail, ensure};
use candid::{CandidType, Decode, Deserialize, Encode};
use offline_engine::canbench;
use offline_engine::{Canister, Engine, EngineConfig, Execution, MessageResult, Program, Settings};
use serde::Serialize;

use crate::fees::ingress_bytes;
use crate::message_bench::{MessageKind, MessageRecord, Mode, ModeRun};
use crate::progress::Progress;

/// The engine label every table and file carries.
pub const ENGINE_LABEL: &str = canbench::ENGINE_LABEL;

/// Method name of the self-call ic-cdk-timers makes for every timer (ic-cdk-timers 1.0
/// `global_timer.rs`); its payload is the 8-byte task id.
pub const TIMER_SELF_CALL_METHOD: &str = "<ic-cdk internal> timer_executor";
/// Billed bytes of that self-call: method name + 8-byte payload.
pub const TIMER_SELF_CALL_BYTES: u64 = TIMER_SELF_CALL_METHOD.len() as u64 + 8;

/// Users created before each message-level run (the canbench batched/unbatched fixture:
/// 10,000 users, 2 orders each, seed 004's two indexes).
pub const FIXTURE_USERS: usize = 10_000;

/// One measurement of a canbench bench (canbench-rs's `Measurement`, absent fields as 0).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(default)]
pub struct Measured {
    /// Times the scope ran (1 for a total).
    pub calls: u64,
    /// Instructions (performance-counter delta: no heap dirty-page charge).
    pub instructions: u64,
    /// Heap growth, 64 KiB pages.
    pub heap_increase: u64,
    /// Stable memory growth, 64 KiB pages.
    pub stable_memory_increase: u64,
}

/// One canbench bench: its total and its `bench_scope` scopes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct CanbenchFigures {
    /// The whole bench.
    pub total: Measured,
    /// Named scopes.
    #[serde(default)]
    pub scopes: BTreeMap<String, Measured>,
}

/// All canbench benches of one wasm.
#[derive(Debug, Clone, Default, PartialEq, Serialize, serde::Deserialize)]
pub struct CanbenchRun {
    /// SHA-256 of the canbench wasm.
    pub wasm_sha256: String,
    /// Bench name → figures.
    pub benches: BTreeMap<String, CanbenchFigures>,
    /// Wall seconds of the run (engine execution plus loading).
    pub wall_seconds: f64,
}

impl From<&canbench::Measurement> for Measured {
    fn from(m: &canbench::Measurement) -> Measured {
        Measured {
            calls: m.calls.unwrap_or(0),
            instructions: m.instructions(),
            heap_increase: m.heap_increase.unwrap_or(0),
            stable_memory_increase: m.stable_memory_increase.unwrap_or(0),
        }
    }
}

impl From<&canbench::BenchResult> for CanbenchFigures {
    fn from(r: &canbench::BenchResult) -> CanbenchFigures {
        CanbenchFigures {
            total: Measured::from(&r.total),
            scopes: r
                .scopes
                .iter()
                .map(|(k, v)| (k.clone(), Measured::from(v)))
                .collect(),
        }
    }
}

/// Creates the engine (compiled modules cached on disk, see `offline_engine::default_cache_dir`).
pub fn engine() -> Result<Engine> {
    Engine::new(EngineConfig::default()).context("creating the offline engine")
}

/// Reads and loads a wasm, pointing to `scripts/build.sh` when it is absent.
pub fn load(engine: &Engine, path: &Path, build_hint: &str) -> Result<Program> {
    if !path.is_file() {
        bail!(
            "{} does not exist; build it first with `{build_hint}`",
            path.display()
        );
    }
    engine
        .load_file(path)
        .with_context(|| format!("loading {} into the offline engine", path.display()))
}

/// Runs every `__canbench__*` bench of `program` through `offline_engine::canbench`: one
/// install on a benchmarking subnet with `init_arg` (canbench's default is empty) and
/// `stable_memory` loaded after it, each bench a non-replicated query with canbench's argument,
/// so each starts from the post-install state. `filter` keeps only names it accepts.
pub fn run_canbench(
    engine: &Engine,
    program: &Program,
    init_arg: &[u8],
    stable_memory: Option<&[u8]>,
    filter: &dyn Fn(&str) -> bool,
    progress: &mut Progress,
) -> Result<CanbenchRun> {
    let started = Instant::now();
    let mut canister = canbench::install(engine, program, init_arg, stable_memory)
        .context("installing the canbench wasm")?;
    let names: Vec<String> = program
        .canbench_benchmarks()
        .into_iter()
        .filter(|n| filter(n))
        .collect();
    ensure!(
        !names.is_empty(),
        "the canbench wasm exports no __canbench__ benchmarks"
    );
    let mut benches = BTreeMap::new();
    for (i, name) in names.iter().enumerate() {
        progress.step(&format!("canbench [{}/{}] {name}", i + 1, names.len()));
        let run = canbench::run_benchmark(&mut canister, name)
            .with_context(|| format!("running bench {name}"))?;
        benches.insert(name.clone(), CanbenchFigures::from(&run.result));
    }
    Ok(CanbenchRun {
        wasm_sha256: program.sha256_hex(),
        benches,
        wall_seconds: started.elapsed().as_secs_f64(),
    })
}

// ---------------------------------------------------------------- Candid types of bench_canister.did

#[derive(CandidType, Deserialize, Clone, Debug, Default)]
struct InitArgs {
    flush_size: Option<u64>,
    max_delay_ms: Option<u64>,
    max_pending: Option<u64>,
    flush_instruction_budget: Option<u64>,
    outcome_capacity: Option<u64>,
}

#[derive(CandidType, Deserialize, Clone, Debug, PartialEq)]
enum Outcome {
    Committed {
        rows_changed: u64,
        last_insert_rowid: i64,
    },
    Failed(String),
}

#[derive(CandidType, Deserialize, Clone, Debug, PartialEq)]
struct FlushSummary {
    executed: u64,
    committed: u64,
    failed: u64,
    remaining: u64,
    more_due: bool,
    instructions: u64,
}

#[derive(CandidType, Deserialize, Clone, Debug, PartialEq)]
struct Submitted {
    ticket: u64,
    flushed: Option<FlushSummary>,
}

#[derive(CandidType, Deserialize, Clone, Debug, PartialEq)]
enum WriteError {
    QueueFull { capacity: u64 },
    Invalid(String),
    NotAuthorized,
    Database(String),
}

#[derive(CandidType, Deserialize, Clone, Debug, PartialEq)]
struct Stats {
    pending: u64,
    submitted: u64,
    committed: u64,
    failed: u64,
    rejected: u64,
    flushes: u64,
    last_flush_ops: u64,
    last_flush_instructions: u64,
    timer_armed: bool,
}

#[derive(CandidType, Deserialize, Clone, Debug, PartialEq)]
enum UserOrderOp {
    CreateUser { username: String, email: String },
    CreateOrder { user_id: i64, amount: f64 },
    UpdateOrderAmount { order_id: i64, amount: f64 },
    DeleteUserOrders { user_id: i64 },
}

#[derive(CandidType, Deserialize, Clone, Debug, PartialEq)]
enum SqlParam {
    Null,
    Integer(i64),
    Real(f64),
    Text(String),
    Blob(Vec<u8>),
}

#[derive(CandidType, Deserialize, Clone, Debug, PartialEq)]
struct SqlStatement {
    sql: String,
    params: Vec<SqlParam>,
}

fn reply<'a>(method: &str, exec: &'a Execution) -> Result<&'a [u8]> {
    match &exec.result {
        MessageResult::Reply(b) => Ok(b),
        other => Err(anyhow!("{method}: no reply: {other:?}")),
    }
}

/// The i-th order of a run: users cycle through the fixture, as the canbench benches do.
fn order(i: usize) -> (i64, f64) {
    ((i % FIXTURE_USERS + 1) as i64, (i % 1000) as f64 + 0.5)
}

/// Installs the deployable canister with `args` and builds the fixture (10,000 users with 2
/// orders each and seed 004's two indexes) through client batches and controller SQL.
fn install_with_fixture(engine: &Engine, program: &Program, args: InitArgs) -> Result<Canister> {
    let arg = Encode!(&Some(args)).context("encoding the init argument")?;
    let (mut c, _) = Canister::install(engine, program, &arg, Settings::default())
        .context("installing the deployable wasm")?;
    let users: Vec<UserOrderOp> = (1..=FIXTURE_USERS)
        .map(|i| UserOrderOp::CreateUser {
            username: format!("user{i}"),
            email: format!("user{i}@example.com"),
        })
        .collect();
    let mut batches = vec![users];
    for half in 0..2 {
        batches.push(
            (0..FIXTURE_USERS)
                .map(|i| {
                    let (user_id, amount) = order(half * FIXTURE_USERS + i);
                    UserOrderOp::CreateOrder { user_id, amount }
                })
                .collect(),
        );
    }
    for ops in batches {
        let exec = c.update("execute_batch", &Encode!(&ops)?)?;
        let outcomes = Decode!(
            reply("execute_batch", &exec)?,
            Result<Vec<Outcome>, WriteError>
        )?
        .map_err(|e| anyhow!("fixture execute_batch: {e:?}"))?;
        ensure!(
            outcomes
                .iter()
                .all(|o| matches!(o, Outcome::Committed { .. })),
            "fixture: an op failed"
        );
    }
    let indexes = vec![
        SqlStatement {
            sql: "CREATE INDEX IF NOT EXISTS idx_users_email ON users(email)".into(),
            params: vec![],
        },
        SqlStatement {
            sql: "CREATE INDEX IF NOT EXISTS idx_orders_user_id ON orders(user_id)".into(),
            params: vec![],
        },
    ];
    let exec = c.update("execute_sql", &Encode!(&indexes)?)?;
    Decode!(reply("execute_sql", &exec)?, Result<Outcome, WriteError>)?
        .map_err(|e| anyhow!("fixture indexes: {e:?}"))?;
    Ok(c)
}

fn record(kind: MessageKind, exec: &Execution) -> MessageRecord {
    MessageRecord {
        kind,
        entry: exec.entry.clone(),
        instructions: exec.instructions,
        billed_instructions: exec.billed_instructions,
        heap_dirty_pages: exec.heap_dirty_pages,
        stable_dirty_pages: exec.stable_dirty_pages,
    }
}

fn ingress(method: &str, arg: &[u8]) -> MessageKind {
    MessageKind::Ingress {
        method: method.to_string(),
        bytes: ingress_bytes(arg.len(), method),
    }
}

/// Classifies what `tick` ran: the timer task, the self-call it makes, and its callback.
fn tick_kind(exec: &Execution) -> MessageKind {
    if exec.entry == "canister_global_timer" {
        MessageKind::Timer { self_call_bytes: 0 }
    } else if exec.entry.starts_with("canister_update") {
        MessageKind::SelfCall
    } else {
        MessageKind::Callback
    }
}

/// Max delay of the batched runs (the canister's default, 1 s).
const MAX_DELAY_MS: u64 = 1_000;

/// Runs one mode with `n` ops on a fresh canister and returns every message it executed.
pub fn run_mode(engine: &Engine, program: &Program, mode: Mode, n: usize) -> Result<ModeRun> {
    let mut messages = Vec::new();
    let committed;
    match mode {
        Mode::Unbatched => {
            let mut c = install_with_fixture(engine, program, InitArgs::default())?;
            let mut ok = 0;
            for i in 0..n {
                let (user_id, amount) = order(i);
                let arg = Encode!(&user_id, &amount)?;
                let exec = c.update("create_order", &arg)?;
                let out = Decode!(reply("create_order", &exec)?, Outcome)?;
                ensure!(
                    matches!(out, Outcome::Committed { .. }),
                    "create_order {i}: {out:?}"
                );
                ok += 1;
                messages.push(record(ingress("create_order", &arg), &exec));
            }
            committed = ok;
        }
        Mode::SubmitAndTimer => {
            // One batch: the size trigger (flush_size = n + 1) never fires, the timer flushes all.
            let args = InitArgs {
                flush_size: Some(n as u64 + 1),
                max_pending: Some(n as u64 + 1),
                max_delay_ms: Some(MAX_DELAY_MS),
                ..InitArgs::default()
            };
            let mut c = install_with_fixture(engine, program, args)?;
            for i in 0..n {
                let (user_id, amount) = order(i);
                let arg = Encode!(&user_id, &amount)?;
                let exec = c.update("submit_create_order", &arg)?;
                Decode!(reply("submit_create_order", &exec)?, Result<Submitted, WriteError>)?
                    .map_err(|e| anyhow!("submit_create_order {i}: {e:?}"))?;
                messages.push(record(ingress("submit_create_order", &arg), &exec));
            }
            let mut stats = Stats::default_pending(n as u64);
            for _ in 0..100 {
                c.advance_time(MAX_DELAY_MS * 1_000_000 + 1);
                for exec in c.tick()? {
                    ensure!(
                        !exec.result.is_trap(),
                        "{} trapped: {:?}",
                        exec.entry,
                        exec.result
                    );
                    messages.push(record(tick_kind(&exec), &exec));
                }
                let q = c.query("stats", &Encode!()?)?;
                stats = Decode!(reply("stats", &q)?, Stats)?;
                if stats.pending == 0 {
                    break;
                }
            }
            ensure!(
                stats.pending == 0,
                "the timer did not flush the queue: {stats:?}"
            );
            ensure!(
                stats.committed == n as u64,
                "{} of {n} ops committed: {stats:?}",
                stats.committed
            );
            committed = stats.committed;
            // Every timer task made one self-call of known size.
            for m in &mut messages {
                if let MessageKind::Timer { self_call_bytes } = &mut m.kind {
                    *self_call_bytes = TIMER_SELF_CALL_BYTES;
                }
            }
        }
        Mode::ClientBatch => {
            let mut c = install_with_fixture(engine, program, InitArgs::default())?;
            let ops: Vec<UserOrderOp> = (0..n)
                .map(|i| {
                    let (user_id, amount) = order(i);
                    UserOrderOp::CreateOrder { user_id, amount }
                })
                .collect();
            let arg = Encode!(&ops)?;
            let exec = c.update("execute_batch", &arg)?;
            let outcomes = Decode!(
                reply("execute_batch", &exec)?,
                Result<Vec<Outcome>, WriteError>
            )?
            .map_err(|e| anyhow!("execute_batch: {e:?}"))?;
            ensure!(
                outcomes.len() == n
                    && outcomes
                        .iter()
                        .all(|o| matches!(o, Outcome::Committed { .. })),
                "execute_batch: not every op committed"
            );
            committed = n as u64;
            messages.push(record(ingress("execute_batch", &arg), &exec));
        }
    }
    Ok(ModeRun {
        mode,
        n: n as u64,
        committed,
        messages,
    })
}

impl Stats {
    fn default_pending(pending: u64) -> Stats {
        Stats {
            pending,
            submitted: 0,
            committed: 0,
            failed: 0,
            rejected: 0,
            flushes: 0,
            last_flush_ops: 0,
            last_flush_instructions: 0,
            timer_armed: false,
        }
    }
}
