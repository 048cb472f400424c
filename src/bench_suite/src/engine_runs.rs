//! Every call into the offline engine lives here: the canbench benchmarks of the canbench wasm,
//! and the message-level runs of the deployable wasm (real update calls with Candid arguments,
//! the timer flush through `tick`). The rest of the crate works on the plain figures these
//! functions return, so it can be tested without a wasm.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Instant;

use anyhow::{Context, Result, anyhow, bail, ensure};
use bench_api::fixture::{self, Workload};
use bench_api::{BatchResult, InitArgs, Outcome, SqlStatement, Stats, UserOrderOp, WriteResult};
use candid::{Decode, Encode};
use offline_engine::canbench;
use offline_engine::{
    Canister, Engine, EngineConfig, Execution, MessageResult, Metering, Program, Settings,
};
use serde::Serialize;

use crate::fees::ingress_bytes;
use crate::message_bench::{MessageKind, MessageRecord, Mode, ModeRun, TrackedPages};
use crate::progress::Progress;

/// The engine label every table and file carries.
pub const ENGINE_LABEL: &str = canbench::ENGINE_LABEL;

/// Method name of the self-call ic-cdk-timers makes for every timer (ic-cdk-timers 1.0
/// `global_timer.rs`); its payload is the 8-byte task id.
pub const TIMER_SELF_CALL_METHOD: &str = "<ic-cdk internal> timer_executor";
/// Billed bytes of that self-call: method name + 8-byte payload.
pub const TIMER_SELF_CALL_BYTES: u64 = TIMER_SELF_CALL_METHOD.len() as u64 + 8;

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
    engine_with(Metering::POCKET_IC_13)
}

/// The engine metering memory pages by `metering` (`METERING.md` §10).
pub fn engine_with(metering: Metering) -> Result<Engine> {
    Engine::new(EngineConfig {
        metering,
        ..EngineConfig::default()
    })
    .with_context(|| format!("creating the offline engine ({})", metering.name))
}

/// The engine label with the metering profile, as every figure carries it:
/// `offline (wasmtime, IC metering: ic-dmt-0441fbd7)`.
pub fn profile_label(metering: &Metering) -> String {
    format!("{}: {})", ENGINE_LABEL.trim_end_matches(')'), metering.name)
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

// ---------------------------------------------------------------- message-level runs

fn reply<'a>(method: &str, exec: &'a Execution) -> Result<&'a [u8]> {
    match &exec.result {
        MessageResult::Reply(b) => Ok(b),
        other => Err(anyhow!("{method}: no reply: {other:?}")),
    }
}

/// The i-th order of a message-level run (the canbench benches' insert workload).
pub fn order(i: usize) -> (i64, f64) {
    match Workload::Insert.op(i) {
        UserOrderOp::CreateOrder { user_id, amount } => (user_id, amount),
        other => unreachable!("the insert workload creates orders: {other:?}"),
    }
}

/// The data a message-level run starts from (then [`fixture_indexes`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fixture {
    /// The batched/unbatched fixture of `bench_api::fixture` (the one the canbench benches
    /// build): 10,000 users with 2 orders each.
    Small,
    /// The full scale of the ic-rusqlite users/orders benchmark: 100,000 users, 1,000,000 orders.
    FullScale,
}

impl Fixture {
    /// Users and orders.
    pub fn rows(self) -> (usize, usize) {
        match self {
            Fixture::Small => (fixture::USERS, fixture::ORDERS),
            Fixture::FullScale => (fixture::FULL_SCALE_USERS, fixture::FULL_SCALE_ORDERS),
        }
    }
}

/// The client batches that build the small fixture ([`Fixture::Small`]). Every message-level
/// run (on the engine and through the `pocket-ic` client) sends these, then
/// [`fixture_indexes`].
pub fn fixture_batches() -> Vec<Vec<UserOrderOp>> {
    fixture_batches_of(Fixture::Small)
}

/// The client batches that build `f`: the users, then the orders, in batches of at most
/// `bench_api::MAX_CLIENT_BATCH` ops.
pub fn fixture_batches_of(f: Fixture) -> Vec<Vec<UserOrderOp>> {
    let (users, orders) = f.rows();
    let users = (1..=users).map(|id| {
        let (username, email) = fixture::user(id);
        UserOrderOp::CreateUser { username, email }
    });
    let orders = (1..=orders).map(|i| {
        let (user_id, amount) = fixture::order(i, users_of(f));
        UserOrderOp::CreateOrder { user_id, amount }
    });
    let mut batches = Vec::new();
    for ops in [users.collect::<Vec<_>>(), orders.collect()] {
        batches.extend(ops.chunks(bench_api::MAX_CLIENT_BATCH).map(<[_]>::to_vec));
    }
    batches
}

fn users_of(f: Fixture) -> usize {
    f.rows().0
}

/// The fixture's indexes, as the controller's `execute_sql` statements.
pub fn fixture_indexes() -> Vec<SqlStatement> {
    fixture::INDEXES
        .iter()
        .map(|sql| SqlStatement {
            sql: sql.to_string(),
            params: vec![],
        })
        .collect()
}

/// The install argument of a message-level run of `mode` with `n` ops: the canister's defaults,
/// except for submit+timer, where the size trigger (flush_size = n + 1) never fires and the
/// timer flushes all `n` ops in one batch after [`MAX_DELAY_MS`]. The canister keeps at least
/// `max_pending` outcomes (a full queue's flush must not evict what it has just recorded), so
/// the outcome capacity grows with the queue past its default of 10,000.
pub fn mode_init_args(mode: Mode, n: usize) -> InitArgs {
    match mode {
        Mode::Unbatched | Mode::ClientBatch | Mode::ClientBatchPacked => InitArgs::default(),
        Mode::SubmitAndTimer => InitArgs {
            flush_size: Some(n as u64 + 1),
            max_pending: Some(n as u64 + 1),
            outcome_capacity: Some((n as u64 + 1).max(10_000)),
            max_delay_ms: Some(MAX_DELAY_MS),
            ..InitArgs::default()
        },
    }
}

/// The ops of a client batch of `n` orders (the client-batch mode's one `execute_batch`).
pub fn batch_ops(n: usize) -> Vec<UserOrderOp> {
    (0..n)
        .map(|i| {
            let (user_id, amount) = order(i);
            UserOrderOp::CreateOrder { user_id, amount }
        })
        .collect()
}

/// When set, [`profile_calls`] writes each call's folded stacks and flame graph there
/// (`<method>.folded`, `<method>.svg`).
pub const PROFILE_DIR_VAR: &str = "BENCH_PROFILE_DIR";

/// Profiles the client calls on the small fixture with `named` (the deployable wasm with its
/// function names, loaded with `Engine::load_profiled`): one `create_order`, one
/// `submit_create_order`, and `execute_batch` and `execute_batch_packed` with `batch` orders,
/// each the second such call on its canister. On the full-scale fixture only the two client
/// batches (building that fixture takes most of the time). Each profile adds up to the call's
/// performance counter exactly (checked).
pub fn profile_calls(
    engine: &Engine,
    named: &Program,
    batch: usize,
    fixture: Fixture,
) -> Result<Vec<crate::call_profile::CallProfile>> {
    let order = Encode!(&1i64, &9.5f64)?;
    let calls: [(&str, u64, Vec<u8>); 4] = [
        ("create_order", 1, order.clone()),
        ("submit_create_order", 1, order),
        ("execute_batch", batch as u64, Encode!(&batch_ops(batch))?),
        ("execute_batch_packed", batch as u64, packed_arg(batch)?),
    ];
    let mut out = Vec::new();
    let mut fixtures = Fixtures::new(engine, named, fixture);
    for (method, ops, arg) in calls {
        if fixture == Fixture::FullScale && ops == 1 {
            continue;
        }
        let mut c = fixtures.canister(InitArgs::default())?;
        // The second call, as a steady state: the first one prepares the statements.
        let warm_up = c.update(method, &arg)?;
        reply(method, &warm_up)?;
        let (exec, profile) = c
            .update_profiled(method, &arg)
            .with_context(|| format!("profiling {method}"))?;
        reply(method, &exec)?;
        ensure!(
            profile.instructions() == exec.instructions,
            "{method}: the profile holds {} instructions, the call {}",
            profile.instructions(),
            exec.instructions
        );
        let folded = profile.folded();
        if let Some(dir) = std::env::var_os(PROFILE_DIR_VAR) {
            let dir = std::path::PathBuf::from(dir);
            std::fs::create_dir_all(&dir)?;
            let name = match fixture {
                Fixture::Small => method.to_string(),
                Fixture::FullScale => format!("{method}.full_scale"),
            };
            std::fs::write(dir.join(format!("{name}.folded")), &folded)?;
            std::fs::write(
                dir.join(format!("{name}.svg")),
                profile.flamegraph_svg(&name)?,
            )?;
        }
        let parts = crate::call_profile::parts_of_folded(&folded);
        ensure!(
            parts.iter().sum::<u64>() == exec.instructions,
            "{method}: the parts do not add up"
        );
        out.push(crate::call_profile::CallProfile {
            method: method.to_string(),
            full_scale: fixture == Fixture::FullScale,
            self_by_function: crate::call_profile::self_by_function(&folded),
            ops,
            instructions: exec.instructions,
            parts,
        });
    }
    Ok(out)
}

/// The Candid argument of `execute_batch_packed` with [`batch_ops`]`(n)` packed.
pub fn packed_arg(n: usize) -> Result<Vec<u8>> {
    let packed = serde_bytes::ByteBuf::from(bench_api::packed::encode_ops(&batch_ops(n)));
    Ok(Encode!(&packed)?)
}

/// The outcomes in a reply of `execute_batch_packed` that sent `n` ops.
pub fn packed_outcomes(reply: &[u8], n: usize) -> Result<Vec<Outcome>> {
    let blob = match Decode!(reply, bench_api::PackedResult)? {
        bench_api::PackedResult::Ok(blob) => blob,
        bench_api::PackedResult::Err(refusal) => anyhow::bail!("refused: {refusal}"),
    };
    Ok(bench_api::packed::decode_outcomes(&blob, n)?)
}

/// Fails unless `outcomes` has `n` outcomes, all committed.
pub fn ensure_all_committed(method: &str, outcomes: &[Outcome], n: usize) -> Result<()> {
    ensure!(
        outcomes.len() == n
            && outcomes
                .iter()
                .all(|o| matches!(o, Outcome::Committed { .. })),
        "{method}: not every op committed"
    );
    Ok(())
}

/// Installs the deployable canister with `args` and builds the fixture ([`fixture_batches`],
/// [`fixture_indexes`]) through client batches and controller SQL. The anonymous caller is the
/// engine's default controller.
fn install_with_fixture(
    engine: &Engine,
    program: &Program,
    args: InitArgs,
    fixture: Fixture,
) -> Result<Canister> {
    let arg = Encode!(&Some(args)).context("encoding the init argument")?;
    let (mut c, _) = Canister::install(engine, program, &arg, Settings::default())
        .context("installing the deployable wasm")?;
    for ops in fixture_batches_of(fixture) {
        let exec = c.update("execute_batch", &Encode!(&ops)?)?;
        let outcomes = Result::from(Decode!(reply("execute_batch", &exec)?, BatchResult)?)
            .map_err(|e| anyhow!("fixture execute_batch: {e:?}"))?;
        ensure_all_committed("fixture execute_batch", &outcomes, ops.len())?;
    }
    let exec = c.update("execute_sql", &Encode!(&fixture_indexes())?)?;
    Result::from(Decode!(reply("execute_sql", &exec)?, WriteResult)?)
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
        tracked: TrackedPages {
            heap_accessed: exec.pages.heap.accessed.len() as u64,
            heap_dirty: exec.pages.heap.dirty.len() as u64,
            stable_accessed: exec.pages.stable.accessed.len() as u64,
            stable_dirty: exec.pages.stable.dirty.len() as u64,
            instructions: exec.pages.instructions,
        },
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

/// What [`trace_pages`] runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PageWorkload {
    /// This many messages of one `create_order` each.
    Unbatched(usize),
    /// One `execute_batch_packed` message of this many writes.
    Packed(usize),
}

/// Runs `workload` on a canister of `fixtures` (a fresh one with its fixture) and returns each
/// of its messages with the pages it touched, and the canister's stable memory after it
/// ([`crate::regions`]).
pub fn trace_pages(
    fixtures: &mut Fixtures,
    workload: PageWorkload,
) -> Result<crate::regions::Trace> {
    let (mode, n) = match workload {
        PageWorkload::Unbatched(n) => (Mode::Unbatched, n),
        PageWorkload::Packed(n) => (Mode::ClientBatchPacked, n),
    };
    let mut c = fixtures.canister(mode_init_args(mode, n))?;
    let mut messages = Vec::new();
    match workload {
        PageWorkload::Unbatched(n) => {
            for i in 0..n {
                let (user_id, amount) = order(i);
                let arg = Encode!(&user_id, &amount)?;
                let exec = c.update("create_order", &arg)?;
                let out = Decode!(reply("create_order", &exec)?, bench_api::WriteResult)?;
                ensure!(
                    matches!(out, bench_api::WriteResult::Ok(Outcome::Committed { .. })),
                    "create_order {i}: {out:?}"
                );
                messages.push((record(ingress("create_order", &arg), &exec), exec.pages));
            }
        }
        PageWorkload::Packed(n) => {
            let arg = packed_arg(n)?;
            let exec = c.update("execute_batch_packed", &arg)?;
            let outcomes = packed_outcomes(reply("execute_batch_packed", &exec)?, n)?;
            ensure_all_committed("execute_batch_packed", &outcomes, n)?;
            messages.push((
                record(ingress("execute_batch_packed", &arg), &exec),
                exec.pages,
            ));
        }
    }
    Ok(crate::regions::Trace {
        messages,
        stable: c.stable_memory(),
    })
}

/// Max delay of the batched runs (the canister's default, 1 s).
pub const MAX_DELAY_MS: u64 = 1_000;

/// Runs one mode with `n` ops on a fresh canister and returns every message it executed.
pub fn run_mode(engine: &Engine, program: &Program, mode: Mode, n: usize) -> Result<ModeRun> {
    run_mode_on(engine, program, mode, n, Fixture::Small)
}

/// [`run_mode`] starting from `fixture`.
pub fn run_mode_on(
    engine: &Engine,
    program: &Program,
    mode: Mode,
    n: usize,
    fixture: Fixture,
) -> Result<ModeRun> {
    Fixtures::new(engine, program, fixture).run_mode(mode, n)
}

/// Canisters with a fixture, built once for each install argument and forked for every run
/// ([`Canister::fork`]: the fork meters every later message as the canister it was taken
/// from, so a run on a fork measures what a run on a canister of its own would).
pub struct Fixtures<'a> {
    engine: &'a Engine,
    program: &'a Program,
    fixture: Fixture,
    /// The canisters built so far, by their Candid install argument.
    built: Vec<(Vec<u8>, Canister)>,
}

impl<'a> Fixtures<'a> {
    /// No canister built yet.
    pub fn new(engine: &'a Engine, program: &'a Program, fixture: Fixture) -> Fixtures<'a> {
        Fixtures {
            engine,
            program,
            fixture,
            built: Vec::new(),
        }
    }

    /// A canister installed with `args` holding the fixture: a fork of the one built for
    /// `args`, which is built first if there is none.
    pub fn canister(&mut self, args: InitArgs) -> Result<Canister> {
        let key = Encode!(&Some(args.clone())).context("encoding the init argument")?;
        let i = match self.built.iter().position(|(k, _)| *k == key) {
            Some(i) => i,
            None => {
                let c = install_with_fixture(self.engine, self.program, args, self.fixture)?;
                self.built.push((key, c));
                self.built.len() - 1
            }
        };
        Ok(self.built[i].1.fork()?)
    }

    /// Runs one mode with `n` ops on a canister with the fixture ([`run_mode`]).
    pub fn run_mode(&mut self, mode: Mode, n: usize) -> Result<ModeRun> {
        let c = self.canister(mode_init_args(mode, n))?;
        run_mode_in(c, mode, n)
    }

    /// Runs every mode at each of `sizes`, each on a canister of its own with the fixture,
    /// naming each run as a step: `what`, the mode and N.
    pub fn run_modes(
        &mut self,
        sizes: &[u64],
        what: &str,
        progress: &mut Progress,
    ) -> Result<Vec<ModeRun>> {
        let mut runs = Vec::new();
        for mode in Mode::ALL {
            for &n in sizes {
                progress.step(&format!("{what}: {} N = {n}", mode.label()));
                runs.push(self.run_mode(mode, n as usize)?);
            }
        }
        Ok(runs)
    }
}

/// Runs one mode with `n` ops on `c`, installed with [`mode_init_args`]`(mode, n)` and
/// holding its fixture.
fn run_mode_in(mut c: Canister, mode: Mode, n: usize) -> Result<ModeRun> {
    let mut messages = Vec::new();
    let committed;
    match mode {
        Mode::Unbatched => {
            let mut ok = 0;
            for i in 0..n {
                let (user_id, amount) = order(i);
                let arg = Encode!(&user_id, &amount)?;
                let exec = c.update("create_order", &arg)?;
                let out = Decode!(reply("create_order", &exec)?, bench_api::WriteResult)?;
                ensure!(
                    matches!(out, bench_api::WriteResult::Ok(Outcome::Committed { .. })),
                    "create_order {i}: {out:?}"
                );
                ok += 1;
                messages.push(record(ingress("create_order", &arg), &exec));
            }
            committed = ok;
        }
        Mode::SubmitAndTimer => {
            // One batch: the size trigger (flush_size = n + 1) never fires, the timer flushes all.
            for i in 0..n {
                let (user_id, amount) = order(i);
                let arg = Encode!(&user_id, &amount)?;
                let exec = c.update("submit_create_order", &arg)?;
                let submitted = Decode!(
                    reply("submit_create_order", &exec)?,
                    bench_api::SubmitResult
                )?;
                ensure!(
                    matches!(submitted, bench_api::SubmitResult::Ok(_)),
                    "submit_create_order {i}: {submitted:?}"
                );
                messages.push(record(ingress("submit_create_order", &arg), &exec));
            }
            let mut pending = n as u64;
            let mut stats = None;
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
                let s = Decode!(reply("stats", &q)?, Stats)?;
                pending = s.pending;
                stats = Some(s);
                if pending == 0 {
                    break;
                }
            }
            ensure!(pending == 0, "the timer did not flush the queue: {stats:?}");
            let committed_ops = stats.as_ref().map_or(0, |s| s.committed);
            ensure!(
                committed_ops == n as u64,
                "{committed_ops} of {n} ops committed: {stats:?}"
            );
            committed = committed_ops;
            // Every timer task made one self-call of known size.
            for m in &mut messages {
                if let MessageKind::Timer { self_call_bytes } = &mut m.kind {
                    *self_call_bytes = TIMER_SELF_CALL_BYTES;
                }
            }
        }
        Mode::ClientBatch => {
            let arg = Encode!(&batch_ops(n))?;
            let exec = c.update("execute_batch", &arg)?;
            let outcomes = Result::from(Decode!(reply("execute_batch", &exec)?, BatchResult)?)
                .map_err(|e| anyhow!("execute_batch: {e:?}"))?;
            ensure_all_committed("execute_batch", &outcomes, n)?;
            committed = n as u64;
            messages.push(record(ingress("execute_batch", &arg), &exec));
        }
        Mode::ClientBatchPacked => {
            let arg = packed_arg(n)?;
            let exec = c.update("execute_batch_packed", &arg)?;
            let outcomes = packed_outcomes(reply("execute_batch_packed", &exec)?, n)?;
            ensure_all_committed("execute_batch_packed", &outcomes, n)?;
            committed = n as u64;
            messages.push(record(ingress("execute_batch_packed", &arg), &exec));
        }
    }
    Ok(ModeRun {
        mode,
        n: n as u64,
        committed,
        messages,
    })
}
