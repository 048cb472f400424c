//! The whole suite: runs everything on the engine and collects every figure in one value
//! ([`SuiteResults`]), which the report, the results file, the charts and the baseline are made of.

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::{Context, Result, anyhow};
use serde::{Deserialize, Serialize};

use crate::analysis::{self, ErrorRow, FloorRow, FlushRow, GainRow, TargetCheck, UsersOrdersRow};
use crate::engine_runs::{self, CanbenchRun};
use crate::fees::{FeeSchedule, IC_2025};
use crate::load_model::{self, CallCosts, LoadMode, LoadResult, RoundModel};
use crate::message_bench::{self, MessageKind, Mode, ModeRun, ModeSummary};
use crate::progress::Progress;
pub use crate::scale::{Scale, WasmInfo, check_scale};

/// Build hint printed when a wasm is missing.
pub const BUILD_HINT_DEPLOYABLE: &str = "scripts/build.sh";
/// Build hint for the canbench wasm.
pub const BUILD_HINT_CANBENCH: &str = "BENCH_SCALE_DIVISOR=<1|100> scripts/build.sh canbench";

/// Orders per client batch in the call profiles.
pub const CALL_PROFILE_BATCH: usize = 1_000;

/// Concurrencies of the load model: the Go batching example's 100 and 500, and three loads
/// beyond them.
pub const LOAD_CONCURRENCIES: [u64; 5] = [100, 500, 2_000, 10_000, 100_000];

/// What to run.
#[derive(Debug, Clone)]
pub struct SuiteConfig {
    /// Scale.
    pub scale: Scale,
    /// The deployable wasm.
    pub deployable_wasm: PathBuf,
    /// The canbench wasm.
    pub canbench_wasm: PathBuf,
    /// Its install argument, as canbench sends it (`init_args` of `canbench.yml`).
    pub canbench_init_arg: Vec<u8>,
    /// The canbench wasm of the peer on ic-sqlite-vfs ([`crate::peer`]); none: no peer run.
    pub peer_canbench_wasm: Option<PathBuf>,
    /// The deployable wasm of the peer ([`crate::peer::pages`]): the workloads of where the pages
    /// go on it, under both profiles; none: not measured.
    pub peer_wasm: Option<PathBuf>,
}

/// Everything the suite measured and derived.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SuiteResults {
    /// Engine label, with the metering profile every table but the opening's is measured by
    /// (`pocketic-13`, the rules of PocketIC 13 and canbench 0.7.0).
    pub engine: String,
    /// Date (UTC, YYYY-MM-DD).
    pub date: String,
    /// Scale.
    pub scale: Scale,
    /// BENCH_SCALE_DIVISOR assumed for the canbench wasm.
    pub scale_divisor: u64,
    /// The deployable wasm.
    pub deployable_wasm: WasmInfo,
    /// The canbench wasm.
    pub canbench_wasm: WasmInfo,
    /// Fee schedule used for cycles and USD.
    pub fee_schedule: FeeSchedule,
    /// canbench figures.
    pub canbench: CanbenchRun,
    /// The ic-rusqlite users/orders benchmark table.
    pub users_orders: Vec<UsersOrdersRow>,
    /// Gain table.
    pub gains: Vec<GainRow>,
    /// Floor breakdown.
    pub floor: Vec<FloorRow>,
    /// Error isolation.
    pub errors: Vec<ErrorRow>,
    /// Flush-size curve.
    pub flush: Vec<FlushRow>,
    /// Targets.
    pub targets: Vec<TargetCheck>,
    /// Message-level runs (every executed message). Not in `results.json` (hundreds of
    /// thousands of lines): `write_all` writes them to `message_runs.json`, which is not
    /// committed; `messages` summarises them.
    #[serde(skip)]
    pub message_runs: Vec<ModeRun>,
    /// Message-level summaries with cycles and USD.
    pub messages: Vec<ModeSummary>,
    /// The same at the full scale of the ic-rusqlite users/orders benchmark (100,000 users,
    /// 1,000,000 orders; full-scale runs only, N up to 1,000).
    #[serde(default)]
    pub messages_full_scale: Vec<ModeSummary>,
    /// Where the instructions of the client calls go (exact profiles; empty without the
    /// deployable wasm's `.named.wasm` twin).
    #[serde(default)]
    pub call_profiles: Vec<crate::call_profile::CallProfile>,
    /// Message overhead of a call: message-level instructions vs the canbench figure of the
    /// same work.
    pub call_overhead: Vec<CallOverhead>,
    /// Per-call costs the load model uses (derived from the message runs).
    pub call_costs: Option<CallCosts>,
    /// Parameters of the load model.
    pub load_model: RoundModel,
    /// Load-model results.
    pub load: Vec<LoadResult>,
    /// Reliability scenarios (empty when the suite ran without them).
    pub reliability: Vec<crate::reliability::ScenarioResult>,
    /// The worst-case flush against its budget (absent when the suite ran without it).
    pub worst_case_flush: Option<crate::reliability::WorstCaseFlush>,
    /// Wall seconds of the suite.
    pub wall_seconds: f64,
    /// The canbench benches and message-level runs again under the replica's rules with the
    /// deterministic memory tracker ([`crate::profiles::LEAD`]), which the report leads with.
    #[serde(rename = "ic_dmt", skip_serializing_if = "Option::is_none")]
    pub tracker: Option<crate::profiles::ProfileRun>,
    /// The peer on ic-sqlite-vfs beside the reference (absent without its wasm).
    #[serde(rename = "peer_ic_sqlite_vfs", skip_serializing_if = "Option::is_none")]
    pub peer: Option<crate::peer::PeerResults>,
}

/// What one update call costs beyond the work canbench measures for it (Candid decoding and
/// encoding, the CDK entry point, heap dirty pages).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CallOverhead {
    /// The method.
    pub method: String,
    /// Mean instructions per call on the engine (performance counter).
    pub message_instructions: u64,
    /// Mean billed instructions per call (plus heap dirty pages).
    pub message_billed: u64,
    /// The same work per op inside a canbench bench.
    pub canbench_per_op: u64,
    /// The canbench bench (and scope) it comes from.
    pub canbench_source: String,
}

/// Mean (instructions, billed) of the ingress calls of the largest run of `mode`.
fn mean_call(runs: &[ModeRun], mode: Mode) -> Option<(u64, u64)> {
    let run = runs.iter().filter(|r| r.mode == mode).max_by_key(|r| r.n)?;
    let calls: Vec<_> = run
        .messages
        .iter()
        .filter(|m| matches!(m.kind, MessageKind::Ingress { .. }))
        .collect();
    let n = calls.len() as u64;
    (n > 0).then(|| {
        (
            calls.iter().map(|m| m.instructions).sum::<u64>() / n,
            calls.iter().map(|m| m.billed_instructions).sum::<u64>() / n,
        )
    })
}

/// The overhead rows for `create_order` and `submit_create_order` (N = 1000 canbench figures).
pub fn call_overheads(runs: &[ModeRun], canbench: &CanbenchRun) -> Vec<CallOverhead> {
    let mut out = Vec::new();
    if let (Some((i, b)), Some(c)) = (
        mean_call(runs, Mode::Unbatched),
        canbench.benches.get("unbatched_insert_1000"),
    ) {
        out.push(CallOverhead {
            method: "create_order".into(),
            message_instructions: i,
            message_billed: b,
            canbench_per_op: c.total.instructions / 1_000,
            canbench_source: "unbatched_insert_1000 / 1000".into(),
        });
    }
    if let (Some((i, b)), Some(s)) = (
        mean_call(runs, Mode::SubmitAndTimer),
        canbench
            .benches
            .get("batched_insert_1000")
            .and_then(|c| c.scopes.get("submit_and_size_flushes")),
    ) {
        out.push(CallOverhead {
            method: "submit_create_order".into(),
            message_instructions: i,
            message_billed: b,
            canbench_per_op: s.instructions / 1_000,
            canbench_source: "batched_insert_1000, scope submit_and_size_flushes / 1000".into(),
        });
    }
    out
}

/// Derives the load model's per-call costs from the message runs: the mean unbatched call and
/// submit call of the largest N (instructions and ingress bytes), least-squares lines through
/// the flush (self-call) cost vs N and through the `execute_batch` call's cost and bytes vs N,
/// and the mean timer-task + callback cost. `None` without runs of every mode.
pub fn derive_call_costs(runs: &[ModeRun]) -> Option<CallCosts> {
    let largest = |mode: Mode| runs.iter().filter(|r| r.mode == mode).max_by_key(|r| r.n);
    let mean_ingress = |run: &ModeRun| {
        let v: Vec<u64> = run
            .messages
            .iter()
            .filter(|m| matches!(m.kind, MessageKind::Ingress { .. }))
            .map(|m| m.billed_instructions)
            .collect();
        (!v.is_empty()).then(|| v.iter().sum::<u64>() / v.len() as u64)
    };
    let unbatched_call = mean_ingress(largest(Mode::Unbatched)?)?;
    let submit_call = mean_ingress(largest(Mode::SubmitAndTimer)?)?;
    let mean_bytes = |run: &ModeRun| {
        let v: Vec<u64> = run
            .messages
            .iter()
            .filter_map(|m| match m.kind {
                MessageKind::Ingress { bytes, .. } => Some(bytes),
                _ => None,
            })
            .collect();
        (!v.is_empty()).then(|| v.iter().sum::<u64>() / v.len() as u64)
    };
    // One execute_batch call per client-batch run: lines through its cost and bytes vs N.
    let client: Vec<&ModeRun> = runs
        .iter()
        .filter(|r| r.mode == Mode::ClientBatch)
        .collect();
    let line = |f: &dyn Fn(&ModeRun) -> u64| {
        let points: Vec<(f64, f64)> = client.iter().map(|r| (r.n as f64, f(r) as f64)).collect();
        load_model::fit_line(&points)
            .map(|(a, b)| (a.max(0.0).round() as u64, b.max(0.0).round() as u64))
    };
    let (client_batch_fixed, client_batch_per_op) =
        line(&|r| r.messages.iter().map(|m| m.billed_instructions).sum())?;
    let (client_batch_bytes_fixed, client_batch_bytes_per_op) =
        line(&|r| mean_bytes(r).unwrap_or(0))?;
    let batched: Vec<&ModeRun> = runs
        .iter()
        .filter(|r| r.mode == Mode::SubmitAndTimer)
        .collect();
    let sum_of = |r: &ModeRun, f: &dyn Fn(&MessageKind) -> bool| {
        r.messages
            .iter()
            .filter(|m| f(&m.kind))
            .map(|m| m.billed_instructions)
            .sum::<u64>()
    };
    let points: Vec<(f64, f64)> = batched
        .iter()
        .map(|r| {
            (
                r.n as f64,
                sum_of(r, &|k| matches!(k, MessageKind::SelfCall)) as f64,
            )
        })
        .collect();
    let (a, b) = load_model::fit_line(&points)?;
    let overhead: u64 = batched
        .iter()
        .map(|r| {
            sum_of(r, &|k| {
                matches!(k, MessageKind::Timer { .. } | MessageKind::Callback)
            })
        })
        .sum::<u64>()
        / batched.len() as u64;
    Some(CallCosts {
        unbatched_call,
        submit_call,
        flush_fixed: a.max(0.0).round() as u64,
        flush_per_op: b.max(0.0).round() as u64,
        timer_overhead: overhead,
        unbatched_bytes: mean_bytes(largest(Mode::Unbatched)?)?,
        submit_bytes: mean_bytes(largest(Mode::SubmitAndTimer)?)?,
        client_batch_fixed,
        client_batch_per_op,
        client_batch_bytes_fixed,
        client_batch_bytes_per_op,
    })
}

/// Runs the load model for both write paths at every concurrency.
pub fn run_load(model: &RoundModel, costs: &CallCosts) -> Vec<LoadResult> {
    let mut out = Vec::new();
    for c in LOAD_CONCURRENCIES {
        for mode in LoadMode::ALL {
            out.push(load_model::simulate(model, costs, mode, c));
        }
    }
    out
}

/// Today's date (UTC) as YYYY-MM-DD.
pub fn today() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    civil_date(secs / 86_400)
}

pub use offline_engine::civil::civil_date;

/// Runs the whole suite on the offline engine: every table under the rules of PocketIC 13, and
/// the canbench benches and message-level runs again under the replica's deterministic memory
/// tracker ([`crate::profiles`]). The runs are independent of each other (`Job`): they run on
/// as many threads as the machine has cores, the longest first.
pub fn run(config: &SuiteConfig, progress: &mut Progress) -> Result<SuiteResults> {
    for (path, hint) in [
        (&config.canbench_wasm, BUILD_HINT_CANBENCH),
        (&config.deployable_wasm, BUILD_HINT_DEPLOYABLE),
    ] {
        anyhow::ensure!(
            path.is_file(),
            "{} does not exist; build it first with `{hint}`",
            path.display()
        );
    }
    let engine = engine_runs::engine()?;
    progress.step(&format!("loading {}", config.deployable_wasm.display()));
    let deployable = engine_runs::load(&engine, &config.deployable_wasm, BUILD_HINT_DEPLOYABLE)?;
    let lab = Lab {
        config,
        engine: &engine,
        deployable: &deployable,
    };
    let jobs = Job::all(config);
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(jobs.len());
    progress.step(&format!(
        "{} independent runs on {threads} thread{}",
        jobs.len(),
        if threads == 1 { "" } else { "s" }
    ));
    let done = run_jobs(&lab, &jobs, threads, progress)?;
    let mut results = None;
    let mut parts = Parts::default();
    for d in done {
        match d {
            Done::Canbench(c) => results = Some(c),
            Done::Messages(runs) => parts.message_runs = runs,
            Done::FullScale(runs) => parts.full_scale = runs,
            Done::CallProfiles(p) => parts.call_profiles = p,
            Done::Reliability(r, w) => {
                parts.reliability = r;
                parts.worst_case_flush = Some(w);
            }
            Done::Peer(p) => parts.peer = p,
            Done::PeerPages(p) => parts.peer_pages = Some(p),
            Done::TrackerCanbench(c, end) => parts.tracker_canbench = Some((c, end)),
            Done::TrackerMessages(m, end) => parts.tracker_messages = Some((m, end)),
        }
    }
    let canbench = results.ok_or_else(|| anyhow!("the canbench run did not report"))?;
    progress.step("load model, report tables");
    let mut results = assemble(
        config.scale,
        WasmInfo {
            path: config.deployable_wasm.display().to_string(),
            sha256: deployable.sha256_hex(),
        },
        WasmInfo {
            path: config.canbench_wasm.display().to_string(),
            sha256: canbench.wasm_sha256.clone(),
        },
        canbench,
        parts.message_runs,
    );
    results.messages_full_scale = parts
        .full_scale
        .iter()
        .map(|r| message_bench::summarize(&IC_2025, r))
        .collect();
    results.targets = analysis::targets(&results.canbench.benches);
    results.targets.extend(analysis::message_targets(
        &results.messages,
        &results.messages_full_scale,
    ));
    results.call_profiles = parts.call_profiles;
    results.reliability = parts.reliability;
    results.worst_case_flush = parts.worst_case_flush;
    results.peer = parts.peer.map(|mut peer| {
        peer.pages = parts.peer_pages;
        peer
    });
    if let (Some((canbench, a)), Some((messages, b))) =
        (parts.tracker_canbench, parts.tracker_messages)
    {
        results.tracker = Some(crate::profiles::join(
            crate::profiles::LEAD,
            &IC_2025,
            canbench,
            messages,
            a.max(b),
        ));
    }
    results.wall_seconds = progress.elapsed();
    Ok(results)
}

/// What every job of [`run`] shares: the configuration, and the deployable wasm loaded under
/// the rules of PocketIC 13.
struct Lab<'a> {
    config: &'a SuiteConfig,
    engine: &'a offline_engine::Engine,
    deployable: &'a offline_engine::Program,
}

/// One of the suite's independent runs. [`Job::all`] lists them longest first (roughly, on a
/// 2-core machine at full scale).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Job {
    /// The canbench benches under the tracker ([`crate::profiles::canbench`]).
    TrackerCanbench,
    /// The message-level runs and pages by region under the tracker
    /// ([`crate::profiles::messages`]).
    TrackerMessages,
    /// The peer on ic-sqlite-vfs ([`crate::peer::run`]).
    Peer,
    /// The workloads of where the pages go on the peer's deployable wasm
    /// ([`crate::peer::pages`]).
    PeerPages,
    /// The reliability scenarios and the worst-case flush.
    Reliability,
    /// The call profiles, on the named twin of the deployable wasm.
    CallProfiles,
    /// The message-level runs on the small fixture.
    Messages,
    /// The canbench benches.
    Canbench,
    /// The message-level runs on the full-scale fixture.
    FullScale,
}

/// What a [`Job`] measured.
enum Done {
    /// With the seconds from the suite's start to the job's end.
    TrackerCanbench(CanbenchRun, f64),
    /// With the seconds from the suite's start to the job's end.
    TrackerMessages(TrackerMessages, f64),
    Peer(Option<crate::peer::PeerResults>),
    PeerPages(crate::peer::PeerPages),
    Reliability(
        Vec<crate::reliability::ScenarioResult>,
        crate::reliability::WorstCaseFlush,
    ),
    CallProfiles(Vec<crate::call_profile::CallProfile>),
    Messages(Vec<ModeRun>),
    Canbench(CanbenchRun),
    FullScale(Vec<ModeRun>),
}

/// The results of the jobs other than canbench's, as [`run`] collects them.
#[derive(Default)]
struct Parts {
    message_runs: Vec<ModeRun>,
    full_scale: Vec<ModeRun>,
    call_profiles: Vec<crate::call_profile::CallProfile>,
    reliability: Vec<crate::reliability::ScenarioResult>,
    worst_case_flush: Option<crate::reliability::WorstCaseFlush>,
    peer: Option<crate::peer::PeerResults>,
    peer_pages: Option<crate::peer::PeerPages>,
    tracker_canbench: Option<(CanbenchRun, f64)>,
    tracker_messages: Option<(TrackerMessages, f64)>,
}

/// The tracker's message-level runs and pages by region ([`crate::profiles::messages`]).
type TrackerMessages = (Vec<ModeRun>, Vec<crate::regions::WorkloadPages>);

impl Job {
    /// Every job of a run of `config`, longest first.
    fn all(config: &SuiteConfig) -> Vec<Job> {
        let mut jobs = vec![Job::TrackerCanbench, Job::TrackerMessages];
        if config.peer_canbench_wasm.is_some() {
            jobs.push(Job::Peer);
            if config.peer_wasm.is_some() {
                jobs.push(Job::PeerPages);
            }
        }
        jobs.push(Job::Reliability);
        if !config.scale.full_fixture_message_sizes().is_empty() {
            jobs.push(Job::FullScale);
        }
        jobs.extend([Job::CallProfiles, Job::Messages, Job::Canbench]);
        jobs
    }

    fn run(self, lab: &Lab, progress: &mut Progress) -> Result<Done> {
        let config = lab.config;
        Ok(match self {
            Job::TrackerCanbench => {
                let mut beside = progress.beside(crate::profiles::LEAD.name);
                let run = crate::profiles::canbench(config, crate::profiles::LEAD, &mut beside)?;
                Done::TrackerCanbench(run, beside.elapsed())
            }
            Job::TrackerMessages => {
                let mut beside = progress.beside(crate::profiles::LEAD.name);
                let runs = crate::profiles::messages(
                    config,
                    crate::profiles::LEAD,
                    &IC_2025,
                    &mut beside,
                )?;
                Done::TrackerMessages(runs, beside.elapsed())
            }
            Job::Peer => Done::Peer(
                config
                    .peer_canbench_wasm
                    .as_deref()
                    .map(|wasm| {
                        crate::peer::run(lab.engine, wasm, lab.deployable, config.scale, progress)
                    })
                    .transpose()?,
            ),
            Job::PeerPages => {
                let wasm = config.peer_wasm.as_deref().ok_or_else(|| {
                    anyhow!("the peer's pages without the peer's deployable wasm")
                })?;
                let mut beside = progress.beside(crate::peer::PEER);
                Done::PeerPages(crate::peer::pages(wasm, &mut beside)?)
            }
            Job::Reliability => {
                let reliability = crate::reliability::run_all(&config.deployable_wasm, progress)?;
                let worst =
                    crate::reliability::worst_case_flush(&config.deployable_wasm, progress)?;
                Done::Reliability(reliability, worst)
            }
            Job::CallProfiles => Done::CallProfiles(call_profiles(lab, progress)?),
            Job::Messages => {
                let mut fixtures = engine_runs::Fixtures::new(
                    lab.engine,
                    lab.deployable,
                    engine_runs::Fixture::Small,
                );
                Done::Messages(fixtures.run_modes(
                    config.scale.message_sizes(),
                    "message-level",
                    progress,
                )?)
            }
            Job::Canbench => {
                progress.step(&format!("loading {}", config.canbench_wasm.display()));
                let program =
                    engine_runs::load(lab.engine, &config.canbench_wasm, BUILD_HINT_CANBENCH)?;
                let canbench = engine_runs::run_canbench(
                    lab.engine,
                    &program,
                    &config.canbench_init_arg,
                    None,
                    &|_| true,
                    progress,
                )?;
                check_scale(config.scale, &canbench)?;
                Done::Canbench(canbench)
            }
            Job::FullScale => {
                let mut fixtures = engine_runs::Fixtures::new(
                    lab.engine,
                    lab.deployable,
                    engine_runs::Fixture::FullScale,
                );
                Done::FullScale(fixtures.run_modes(
                    config.scale.full_fixture_message_sizes(),
                    "message-level at full scale (100,000 users, 1,000,000 orders)",
                    progress,
                )?)
            }
        })
    }
}

/// Runs `jobs` on `threads` threads, each taking the next job not yet taken; after a job fails
/// no other starts. The results come back in the order of `jobs`; the first failure in that
/// order is the error.
fn run_jobs(lab: &Lab, jobs: &[Job], threads: usize, progress: &Progress) -> Result<Vec<Done>> {
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    let next = AtomicUsize::new(0);
    let failed = AtomicBool::new(false);
    let slots: Mutex<Vec<Option<Result<Done>>>> = Mutex::new(jobs.iter().map(|_| None).collect());
    std::thread::scope(|s| {
        for _ in 0..threads {
            let mut progress = progress.clone();
            let (next, failed, slots) = (&next, &failed, &slots);
            s.spawn(move || {
                while !failed.load(Ordering::SeqCst) {
                    let i = next.fetch_add(1, Ordering::SeqCst);
                    let Some(job) = jobs.get(i) else { break };
                    let out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        job.run(lab, &mut progress)
                    }))
                    .unwrap_or_else(|_| Err(anyhow!("the {job:?} run panicked")));
                    if out.is_err() {
                        failed.store(true, Ordering::SeqCst);
                    }
                    slots.lock().expect("no job panics holding the lock")[i] = Some(out);
                }
            });
        }
    });
    let slots = slots.into_inner().expect("no job panics holding the lock");
    let mut done = Vec::new();
    for (job, slot) in jobs.iter().zip(slots) {
        match slot {
            Some(out) => done.push(out.with_context(|| format!("the {job:?} run"))?),
            None => anyhow::bail!("the {job:?} run did not start: another run failed first"),
        }
    }
    Ok(done)
}

/// The call profiles on the small fixture, and at full scale the client batches' on the
/// full-scale fixture, on the named twin scripts/build.sh writes beside the deployable wasm
/// (same code, same counts); none when that file is missing.
fn call_profiles(
    lab: &Lab,
    progress: &mut Progress,
) -> Result<Vec<crate::call_profile::CallProfile>> {
    let config = lab.config;
    let named = config.deployable_wasm.with_extension("named.wasm");
    if !named.is_file() {
        progress.step(&format!(
            "no {}: the call profiles are skipped (scripts/build.sh writes it)",
            named.display()
        ));
        return Ok(Vec::new());
    }
    progress.step(&format!("profiling the client calls ({})", named.display()));
    let program = lab
        .engine
        .load_file_profiled(&named)
        .with_context(|| format!("loading {} with the profiler", named.display()))?;
    let mut profiles = engine_runs::profile_calls(
        lab.engine,
        &program,
        CALL_PROFILE_BATCH,
        engine_runs::Fixture::Small,
    )?;
    if !config.scale.full_fixture_message_sizes().is_empty() {
        progress.step("profiling the client batches at full scale");
        profiles.extend(engine_runs::profile_calls(
            lab.engine,
            &program,
            CALL_PROFILE_BATCH,
            engine_runs::Fixture::FullScale,
        )?);
    }
    Ok(profiles)
}

/// Builds the results from the measured figures (no engine involved).
pub fn assemble(
    scale: Scale,
    deployable_wasm: WasmInfo,
    canbench_wasm: WasmInfo,
    canbench: CanbenchRun,
    message_runs: Vec<ModeRun>,
) -> SuiteResults {
    let fees = IC_2025;
    let b = &canbench.benches;
    let messages: Vec<ModeSummary> = message_runs
        .iter()
        .map(|r| message_bench::summarize(&fees, r))
        .collect();
    let mut targets = analysis::targets(b);
    targets.extend(analysis::message_targets(&messages, &[]));
    let call_costs = derive_call_costs(&message_runs);
    let load_model = RoundModel::default();
    let load = call_costs
        .map(|c| run_load(&load_model, &c))
        .unwrap_or_default();
    SuiteResults {
        engine: engine_runs::profile_label(&offline_engine::Metering::POCKET_IC_13),
        date: today(),
        scale,
        scale_divisor: scale.divisor(),
        deployable_wasm,
        canbench_wasm,
        fee_schedule: fees,
        users_orders: analysis::users_orders_rows(b, scale == Scale::Full),
        gains: analysis::gain_rows(b),
        floor: analysis::floor_rows(b),
        errors: analysis::error_rows(b),
        flush: analysis::flush_rows(b),
        targets,
        call_overhead: call_overheads(&message_runs, &canbench),
        canbench,
        message_runs,
        messages,
        messages_full_scale: Vec::new(),
        call_profiles: Vec::new(),
        call_costs,
        load_model,
        load,
        reliability: Vec::new(),
        worst_case_flush: None,
        wall_seconds: 0.0,
        tracker: None,
        peer: None,
    }
}

/// The figures the regression check compares: canbench totals (`canbench/<name>`) and the billed
/// instructions of every message-level run (`message/<mode>/<n>`) under the rules of PocketIC
/// 13, and the same under the deterministic memory tracker, prefixed with its profile's name
/// (`ic-dmt-0441fbd7/canbench/<name>`, `ic-dmt-0441fbd7/message/<mode>/<n>`).
pub fn regression_figures(results: &SuiteResults) -> BTreeMap<String, u64> {
    let mut m = BTreeMap::new();
    let mut add = |prefix: &str, canbench: &CanbenchRun, messages: &[ModeSummary]| {
        for (k, v) in &canbench.benches {
            m.insert(format!("{prefix}canbench/{k}"), v.total.instructions);
        }
        for s in messages {
            m.insert(
                format!("{prefix}message/{}/{}", s.mode.key(), s.n),
                s.billed_instructions,
            );
        }
    };
    add("", &results.canbench, &results.messages);
    if let Some(t) = &results.tracker {
        add(&format!("{}/", t.metering), &t.canbench, &t.messages);
    }
    m
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::engine_runs::{CanbenchFigures, Measured};
    use crate::message_bench::MessageRecord;

    #[test]
    fn dates() {
        assert_eq!(civil_date(0), "1970-01-01");
        assert_eq!(civil_date(20_230), "2025-05-22");
        assert_eq!(civil_date(11_016), "2000-02-29");
    }

    fn rec(kind: MessageKind, billed: u64) -> MessageRecord {
        MessageRecord {
            kind,
            entry: String::new(),
            instructions: billed,
            billed_instructions: billed,
            heap_dirty_pages: 0,
            stable_dirty_pages: 0,
            tracked: Default::default(),
        }
    }

    /// Synthetic runs for unit tests of the arithmetic and rendering (never written to a report).
    pub(crate) fn synthetic_runs() -> Vec<ModeRun> {
        let ing = |b| {
            rec(
                MessageKind::Ingress {
                    method: "m".into(),
                    bytes: 40,
                },
                b,
            )
        };
        let mut runs = Vec::new();
        for n in [1u64, 10, 100] {
            runs.push(ModeRun {
                mode: Mode::Unbatched,
                n,
                committed: n,
                messages: (0..n).map(|_| ing(500_000)).collect(),
            });
            let mut msgs: Vec<MessageRecord> = (0..n).map(|_| ing(50_000)).collect();
            msgs.push(rec(
                MessageKind::Timer {
                    self_call_bytes: 41,
                },
                20_000,
            ));
            msgs.push(rec(MessageKind::SelfCall, 700_000 + 20_000 * n));
            msgs.push(rec(MessageKind::Callback, 10_000));
            runs.push(ModeRun {
                mode: Mode::SubmitAndTimer,
                n,
                committed: n,
                messages: msgs,
            });
            runs.push(ModeRun {
                mode: Mode::ClientBatch,
                n,
                committed: n,
                messages: vec![rec(
                    MessageKind::Ingress {
                        method: "m".into(),
                        bytes: 100 + 17 * n,
                    },
                    700_000 + 22_000 * n,
                )],
            });
            runs.push(ModeRun {
                mode: Mode::ClientBatchPacked,
                n,
                committed: n,
                messages: vec![rec(
                    MessageKind::Ingress {
                        method: "m".into(),
                        bytes: 40 + 10 * n,
                    },
                    600_000 + 15_000 * n,
                )],
            });
        }
        runs
    }

    pub(crate) fn synthetic_canbench() -> CanbenchRun {
        let mut benches = BTreeMap::new();
        let b = |i| CanbenchFigures {
            total: Measured {
                calls: 1,
                instructions: i,
                ..Measured::default()
            },
            scopes: BTreeMap::new(),
        };
        for n in analysis::BATCH_SIZES {
            for k in analysis::OP_KINDS {
                benches.insert(format!("unbatched_{k}_{n}"), b(400_000 * n));
                benches.insert(format!("batched_{k}_{n}"), b(700_000 + 20_000 * n));
            }
        }
        let mut batched = b(210_000_000);
        batched.scopes.insert(
            "final_flush".into(),
            Measured {
                calls: 1,
                instructions: 200_000_000,
                ..Measured::default()
            },
        );
        benches.insert("batched_insert_10000".into(), batched);
        benches.insert("floor_insert_10000".into(), b(150_000_000));
        benches.insert("errors_0pct".into(), b(200_000_000));
        benches.insert("errors_1pct".into(), b(198_000_000));
        benches.insert("errors_2pct".into(), b(196_000_000));
        for f in analysis::FLUSH_SIZES {
            benches.insert(
                format!("flush_size_{f}"),
                b(200_000_000 + 100_000_000_000 / f),
            );
        }
        benches.insert("users_orders_add_users".into(), b(1_900_000_000));
        CanbenchRun {
            wasm_sha256: "ab".repeat(32),
            benches,
            wall_seconds: 1.0,
        }
    }

    pub(crate) fn synthetic_results() -> SuiteResults {
        let w = |p: &str| WasmInfo {
            path: p.into(),
            sha256: "cd".repeat(32),
        };
        let mut r = assemble(
            Scale::Ci,
            w("d.wasm"),
            w("c.wasm"),
            synthetic_canbench(),
            synthetic_runs(),
        );
        // Full-scale runs of N = 10 at 10% more per message.
        r.messages_full_scale = synthetic_runs()
            .into_iter()
            .filter(|run| run.n == 10)
            .map(|mut run| {
                for m in &mut run.messages {
                    m.billed_instructions = m.billed_instructions * 11 / 10;
                }
                message_bench::summarize(&IC_2025, &run)
            })
            .collect();
        r.tracker = Some(crate::profiles::tests::synthetic_tracker());
        r.call_profiles = vec![crate::call_profile::CallProfile {
            method: "create_order".into(),
            full_scale: false,
            self_by_function: Default::default(),
            ops: 1,
            instructions: 1_000,
            parts: vec![500, 100, 50, 200, 50, 50, 50],
        }];
        r
    }

    #[test]
    fn scale_mismatch_is_refused() {
        let c = synthetic_canbench(); // users_orders_add_users: 1.9 B, full-scale-like
        assert!(check_scale(Scale::Full, &c).is_ok());
        assert!(check_scale(Scale::Ci, &c).is_err());
        let mut small = c.clone();
        small
            .benches
            .get_mut("users_orders_add_users")
            .unwrap()
            .total
            .instructions = 18_000_000;
        assert!(check_scale(Scale::Ci, &small).is_ok());
        assert!(check_scale(Scale::Full, &small).is_err());
    }

    #[test]
    fn call_costs_come_from_the_runs() {
        let c = derive_call_costs(&synthetic_runs()).unwrap();
        assert_eq!(c.unbatched_call, 500_000);
        assert_eq!(c.submit_call, 50_000);
        assert_eq!(c.flush_fixed, 700_000);
        assert_eq!(c.flush_per_op, 20_000);
        assert_eq!(c.timer_overhead, 30_000);
        assert_eq!((c.unbatched_bytes, c.submit_bytes), (40, 40));
        assert_eq!(
            (c.client_batch_fixed, c.client_batch_per_op),
            (700_000, 22_000)
        );
        assert_eq!(
            (c.client_batch_bytes_fixed, c.client_batch_bytes_per_op),
            (100, 17)
        );
        assert!(derive_call_costs(&[]).is_none());
    }

    #[test]
    fn assembled_results_hold_every_table() {
        let r = synthetic_results();
        assert_eq!(r.messages.len(), 12);
        assert_eq!(r.load.len(), LoadMode::ALL.len() * LOAD_CONCURRENCIES.len());
        assert_eq!(r.gains.len(), 15);
        assert_eq!(r.flush.len(), 4);
        assert_eq!(r.call_overhead.len(), 1); // no scopes in the synthetic batched_insert_1000
        assert_eq!(r.call_overhead[0].message_instructions, 500_000);
        assert_eq!(r.call_overhead[0].canbench_per_op, 400_000);
        let figs = regression_figures(&r);
        assert!(figs.contains_key("canbench/floor_insert_10000"));
        assert!(figs.contains_key("message/submit_timer/100"));
        assert_eq!(figs["message/unbatched/10"], 5_000_000);
        // The tracker's figures beside them, under its profile's name.
        assert_eq!(
            figs["ic-dmt-0441fbd7/message/unbatched/10"],
            5_000_000 + 10 * 9 * 80_000
        );
        assert!(figs.contains_key("ic-dmt-0441fbd7/canbench/floor_insert_10000"));
    }
}
