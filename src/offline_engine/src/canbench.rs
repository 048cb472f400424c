//! canbench compatibility: run a canister's `__canbench__*` benchmarks offline.
//!
//! Modelled on dfinity/canbench's `canbench-bin`: reads `canbench.yml` (`build_cmd`,
//! `wasm_path`, `init_args.hex`, `results_path`, `stable_memory.file`), optionally runs the
//! build command, installs the wasm on a benchmarking-subnet configuration, runs every
//! `canister_query __canbench__<name>` export (optionally filtered by a substring) as a
//! non-replicated query — so, as in canbench, every benchmark starts from the post-install
//! state — decodes canbench-rs's `BenchResult`, prints results with the change against the
//! stored baseline, and writes canbench's YAML schema to its own results file (never
//! `canbench_results.yml`, which belongs to real canbench), stating the engine.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// `Encode!(&())`: the argument canbench passes to every benchmark query.
const EMPTY_CANDID_ARGS: &[u8] = b"DIDL\x00\x00";

use candid::{CandidType, Deserialize};
use serde::Serialize;

use crate::{Canister, Engine, EngineError, MessageResult, Settings};

/// What the engine writes into results files (`engine:` field and header comment).
pub const ENGINE_LABEL: &str = "offline (wasmtime, IC metering)";
/// Default results file name.
pub const DEFAULT_RESULTS_FILE: &str = "canbench_results.offline.yml";
/// canbench's own results file, which this engine never writes.
pub const CANBENCH_RESULTS_FILE: &str = "canbench_results.yml";

/// Errors of a canbench run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CanbenchError {
    /// Reading or writing a file failed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// `canbench.yml` or a results file is not valid YAML of the expected shape.
    #[error("{path}: {source}")]
    Yaml {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: serde_yaml::Error,
    },
    /// `init_args.hex` is not valid hex.
    #[error("init_args.hex: {0}")]
    InitArgs(#[from] hex::FromHexError),
    /// The build command failed.
    #[error("build command `{cmd}` failed with {status}")]
    Build {
        /// The command.
        cmd: String,
        /// Its exit status.
        status: std::process::ExitStatus,
    },
    /// The engine failed (load, install).
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// A benchmark did not return a decodable `BenchResult`.
    #[error("benchmark {name}: {message}")]
    Bench {
        /// The benchmark.
        name: String,
        /// What went wrong.
        message: String,
    },
    /// Refusing to overwrite canbench's own results file.
    #[error(
        "refusing to write {0}: that file belongs to real canbench (PocketIC); use another name"
    )]
    ForeignResultsFile(PathBuf),
}

fn io(path: &Path, source: std::io::Error) -> CanbenchError {
    CanbenchError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// `init_args` of `canbench.yml`.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Deserialize)]
pub struct InitArgs {
    /// Candid-encoded init argument, hex.
    #[serde(default)]
    pub hex: String,
}

/// `stable_memory` of `canbench.yml`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
pub struct StableMemoryFile {
    /// File whose bytes become the stable memory after install.
    pub file: PathBuf,
}

/// The parts of `canbench.yml` the engine uses.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
pub struct CanbenchConfig {
    /// Shell command that builds the wasm.
    #[serde(default)]
    pub build_cmd: Option<String>,
    /// Path of the wasm (relative to the config file's directory).
    pub wasm_path: PathBuf,
    /// Init argument.
    #[serde(default)]
    pub init_args: Option<InitArgs>,
    /// canbench's results path; ours is derived from it (see [`results_path_for`]).
    #[serde(default)]
    pub results_path: Option<PathBuf>,
    /// Stable memory preloaded after install.
    #[serde(default)]
    pub stable_memory: Option<StableMemoryFile>,
}

impl CanbenchConfig {
    /// Reads and parses `canbench.yml`.
    pub fn read(path: &Path) -> Result<Self, CanbenchError> {
        let text = std::fs::read_to_string(path).map_err(|e| io(path, e))?;
        serde_yaml::from_str(&text).map_err(|source| CanbenchError::Yaml {
            path: path.to_path_buf(),
            source,
        })
    }
}

/// canbench-rs's `Measurement` (fields optional so results of older canbench-rs decode too).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, CandidType, Deserialize, Serialize)]
pub struct Measurement {
    /// Number of calls (1 for the total).
    #[serde(default)]
    pub calls: Option<u64>,
    /// Instructions (performance counter delta).
    #[serde(default)]
    pub instructions: Option<u64>,
    /// Heap growth in 64 KiB pages.
    #[serde(default)]
    pub heap_increase: Option<u64>,
    /// Stable memory growth in 64 KiB pages.
    #[serde(default)]
    pub stable_memory_increase: Option<u64>,
}

impl Measurement {
    /// Instructions, 0 when absent.
    pub fn instructions(&self) -> u64 {
        self.instructions.unwrap_or(0)
    }
}

/// canbench-rs's `BenchResult`.
#[derive(Debug, Clone, Default, PartialEq, Eq, CandidType, Deserialize, Serialize)]
pub struct BenchResult {
    /// The whole benchmark.
    pub total: Measurement,
    /// Named scopes (`bench_scope`).
    #[serde(default)]
    pub scopes: BTreeMap<String, Measurement>,
}

/// Results file contents (canbench's schema plus the `engine` field).
#[derive(Debug, Clone, Default, PartialEq, Serialize, serde::Deserialize)]
pub struct ResultsFile {
    /// Results per benchmark.
    pub benches: BTreeMap<String, BenchResult>,
    /// Which engine produced the figures.
    #[serde(default)]
    pub engine: Option<String>,
    /// Version of the writer.
    #[serde(default)]
    pub version: String,
}

impl ResultsFile {
    /// Reads a results file; a missing file gives empty results.
    pub fn read(path: &Path) -> Result<Self, CanbenchError> {
        match std::fs::read_to_string(path) {
            Ok(text) => serde_yaml::from_str(&text).map_err(|source| CanbenchError::Yaml {
                path: path.to_path_buf(),
                source,
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(ResultsFile::default()),
            Err(e) => Err(io(path, e)),
        }
    }

    /// Writes the file with a header comment naming the engine. Refuses `canbench_results.yml`.
    pub fn write(&self, path: &Path) -> Result<(), CanbenchError> {
        if path.file_name().is_some_and(|n| n == CANBENCH_RESULTS_FILE) {
            return Err(CanbenchError::ForeignResultsFile(path.to_path_buf()));
        }
        let body = serde_yaml::to_string(self).map_err(|source| CanbenchError::Yaml {
            path: path.to_path_buf(),
            source,
        })?;
        let text = format!(
            "# engine: {ENGINE_LABEL}; written by offline_engine {}, not by canbench/PocketIC.\n{body}",
            env!("CARGO_PKG_VERSION")
        );
        std::fs::write(path, text).map_err(|e| io(path, e))
    }
}

/// Our results path: `explicit`, else canbench's `results_path` with `.offline` inserted
/// before the extension, else [`DEFAULT_RESULTS_FILE`] next to the config.
pub fn results_path_for(
    config_dir: &Path,
    config: &CanbenchConfig,
    explicit: Option<&Path>,
) -> PathBuf {
    if let Some(p) = explicit {
        return p.to_path_buf();
    }
    match &config.results_path {
        Some(p) => {
            let stem = p
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_else(|| "canbench_results".into());
            let ext = p
                .extension()
                .map(|e| e.to_string_lossy().into_owned())
                .unwrap_or_else(|| "yml".into());
            config_dir.join(p.with_file_name(format!("{stem}.offline.{ext}")))
        }
        None => config_dir.join(DEFAULT_RESULTS_FILE),
    }
}

/// Options of a run.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Only benchmarks whose name contains this.
    pub pattern: Option<String>,
    /// Noise threshold in percent (canbench's default is 2).
    pub noise_threshold: f64,
    /// Write the results file (the new baseline).
    pub persist: bool,
    /// Skip `build_cmd`.
    pub skip_build: bool,
    /// Override of the results file.
    pub results_file: Option<PathBuf>,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            pattern: None,
            noise_threshold: 2.0,
            persist: false,
            skip_build: false,
            results_file: None,
        }
    }
}

/// How a value compares with the baseline.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Change {
    /// No baseline for this benchmark.
    New,
    /// Identical.
    Unchanged,
    /// Changed by less than the noise threshold (percent).
    WithinNoise(f64),
    /// Grew by this many percent (beyond the threshold).
    Regressed(f64),
    /// Shrank by this many percent (beyond the threshold; negative).
    Improved(f64),
    /// Grew from zero.
    RegressedFromZero,
}

impl Change {
    /// Classifies `new` against `old` with `threshold` percent.
    pub fn of(old: Option<u64>, new: u64, threshold: f64) -> Change {
        let Some(old) = old else { return Change::New };
        if old == new {
            return Change::Unchanged;
        }
        if old == 0 {
            return Change::RegressedFromZero;
        }
        let pct = (new as f64 - old as f64) / old as f64 * 100.0;
        if pct.abs() < threshold {
            Change::WithinNoise(pct)
        } else if pct > 0.0 {
            Change::Regressed(pct)
        } else {
            Change::Improved(pct)
        }
    }

    /// A regression beyond the threshold.
    pub fn is_regression(self) -> bool {
        matches!(self, Change::Regressed(_) | Change::RegressedFromZero)
    }
}

impl std::fmt::Display for Change {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Change::New => write!(f, "(new)"),
            Change::Unchanged => write!(f, "(no change)"),
            Change::WithinNoise(p) => write!(f, "({p:+.2}%, change within noise threshold)"),
            Change::Regressed(p) => write!(f, "(regressed by {p:.2}%)"),
            Change::Improved(p) => write!(f, "(improved by {:.2}%)", -p),
            Change::RegressedFromZero => write!(f, "(regressed from 0)"),
        }
    }
}

/// Formats an instruction count like canbench (`1.23 M`).
pub fn human(n: u64) -> String {
    let v = n as f64;
    if n >= 1_000_000_000_000 {
        format!("{:.2} T", v / 1e12)
    } else if n >= 1_000_000_000 {
        format!("{:.2} B", v / 1e9)
    } else if n >= 1_000_000 {
        format!("{:.2} M", v / 1e6)
    } else if n >= 1_000 {
        format!("{:.2} K", v / 1e3)
    } else {
        format!("{n}")
    }
}

/// One benchmark's outcome.
#[derive(Debug, Clone)]
pub struct BenchOutcome {
    /// Benchmark name.
    pub name: String,
    /// What the benchmark reported.
    pub result: BenchResult,
    /// Instructions the whole query took (engine's count, includes the bench harness).
    pub query_instructions: u64,
    /// Wall time of the query.
    pub wall_time: Duration,
    /// Change of total instructions against the baseline.
    pub change: Change,
}

/// Summary of a run.
#[derive(Debug, Clone)]
pub struct RunSummary {
    /// Per-benchmark outcomes, in run order.
    pub outcomes: Vec<BenchOutcome>,
    /// Where results were (or would be) written.
    pub results_path: PathBuf,
    /// Metered instructions per second of wall time over all benchmarks.
    pub instructions_per_second: f64,
}

impl RunSummary {
    /// Benchmarks whose total instructions regressed beyond the threshold.
    pub fn regressions(&self) -> Vec<&BenchOutcome> {
        self.outcomes
            .iter()
            .filter(|o| o.change.is_regression())
            .collect()
    }
}

fn print_measurement(
    out: &mut dyn Write,
    indent: &str,
    m: &Measurement,
    old: Option<&Measurement>,
    threshold: f64,
    with_calls: bool,
) -> std::io::Result<()> {
    if with_calls {
        let c = m.calls.unwrap_or(0);
        writeln!(
            out,
            "{indent}calls: {c} {}",
            Change::of(old.map(|o| o.calls.unwrap_or(0)), c, threshold)
        )?;
    }
    let i = m.instructions();
    writeln!(
        out,
        "{indent}instructions: {} {}",
        human(i),
        Change::of(old.map(|o| o.instructions()), i, threshold)
    )?;
    let h = m.heap_increase.unwrap_or(0);
    writeln!(
        out,
        "{indent}heap_increase: {h} pages {}",
        Change::of(old.map(|o| o.heap_increase.unwrap_or(0)), h, threshold)
    )?;
    let s = m.stable_memory_increase.unwrap_or(0);
    writeln!(
        out,
        "{indent}stable_memory_increase: {s} pages {}",
        Change::of(
            old.map(|o| o.stable_memory_increase.unwrap_or(0)),
            s,
            threshold
        )
    )
}

/// Runs the benchmarks of `config_path` on `engine`. Human-readable results go to `out`,
/// progress lines to `progress`.
pub fn run(
    engine: &Engine,
    config_path: &Path,
    options: &RunOptions,
    out: &mut dyn Write,
    progress: &mut dyn Write,
) -> Result<RunSummary, CanbenchError> {
    let config = CanbenchConfig::read(config_path)?;
    let dir = config_path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let results_path = results_path_for(dir, &config, options.results_file.as_deref());
    if results_path
        .file_name()
        .is_some_and(|n| n == CANBENCH_RESULTS_FILE)
    {
        return Err(CanbenchError::ForeignResultsFile(results_path));
    }
    let w = |e: std::io::Error| io(Path::new("<output>"), e);

    if let (Some(cmd), false) = (&config.build_cmd, options.skip_build) {
        let _ = writeln!(progress, "building: {cmd}");
        let status = std::process::Command::new("sh")
            .arg("-c")
            .arg(cmd)
            .current_dir(dir)
            .status()
            .map_err(|e| io(Path::new("sh"), e))?;
        if !status.success() {
            return Err(CanbenchError::Build {
                cmd: cmd.clone(),
                status,
            });
        }
    }
    let wasm_path = dir.join(&config.wasm_path);
    let loading = Instant::now();
    let program = engine.load_file(&wasm_path)?;
    let _ = writeln!(
        progress,
        "loaded {} ({}, {:.1} s)",
        wasm_path.display(),
        if program.from_cache() {
            "compiled module from cache"
        } else {
            "compiled"
        },
        loading.elapsed().as_secs_f64()
    );
    let init_arg = match &config.init_args {
        Some(a) => hex::decode(a.hex.trim())?,
        None => Vec::new(),
    };
    let (mut canister, _) =
        Canister::install(engine, &program, &init_arg, Settings::benchmarking())?;
    if let Some(sm) = &config.stable_memory {
        let p = dir.join(&sm.file);
        let bytes = std::fs::read(&p).map_err(|e| io(&p, e))?;
        canister.set_stable_memory(&bytes);
    }

    let baseline = ResultsFile::read(&results_path)?;
    let names: Vec<String> = program
        .canbench_benchmarks()
        .into_iter()
        .filter(|n| options.pattern.as_deref().is_none_or(|p| n.contains(p)))
        .collect();
    let started = Instant::now();
    let mut outcomes = Vec::new();
    let mut total_instructions = 0u64;
    let mut total_wall = Duration::ZERO;
    for (i, name) in names.iter().enumerate() {
        let _ = writeln!(
            progress,
            "[{}/{}] {name} (elapsed {:.1} s)",
            i + 1,
            names.len(),
            started.elapsed().as_secs_f64()
        );
        // canbench sends the Candid encoding of `()`; benches of canbench-rs 0.2 decode it and
        // trap on an empty argument.
        let exec = canister.query(&format!("__canbench__{name}"), EMPTY_CANDID_ARGS)?;
        let bytes = match &exec.result {
            MessageResult::Reply(b) => b.clone(),
            other => {
                return Err(CanbenchError::Bench {
                    name: name.clone(),
                    message: format!("{other:?}"),
                });
            }
        };
        let result =
            candid::decode_one::<BenchResult>(&bytes).map_err(|e| CanbenchError::Bench {
                name: name.clone(),
                message: format!("cannot decode BenchResult: {e}"),
            })?;
        let old = baseline.benches.get(name);
        let change = Change::of(
            old.map(|o| o.total.instructions()),
            result.total.instructions(),
            options.noise_threshold,
        );
        total_instructions += exec.instructions;
        total_wall += exec.wall_time;

        writeln!(out, "---------------------------------------------------\n").map_err(w)?;
        writeln!(
            out,
            "Benchmark: {name}{}",
            if old.is_none() { " (new)" } else { "" }
        )
        .map_err(w)?;
        writeln!(out, "  total:").map_err(w)?;
        print_measurement(
            out,
            "    ",
            &result.total,
            old.map(|o| &o.total),
            options.noise_threshold,
            false,
        )
        .map_err(w)?;
        for (scope, m) in &result.scopes {
            writeln!(out, "\n  {scope} (scope):").map_err(w)?;
            let old_scope = old.and_then(|o| o.scopes.get(scope));
            print_measurement(out, "    ", m, old_scope, options.noise_threshold, true)
                .map_err(w)?;
        }
        writeln!(
            out,
            "\n  engine: {:.2} s, {:.2} G instructions/s\n",
            exec.wall_time.as_secs_f64(),
            exec.instructions_per_second() / 1e9
        )
        .map_err(w)?;
        outcomes.push(BenchOutcome {
            name: name.clone(),
            result,
            query_instructions: exec.instructions,
            wall_time: exec.wall_time,
            change,
        });
    }
    writeln!(out, "---------------------------------------------------").map_err(w)?;
    let ips = if total_wall.as_secs_f64() > 0.0 {
        total_instructions as f64 / total_wall.as_secs_f64()
    } else {
        0.0
    };
    writeln!(
        out,
        "\n{} benchmarks, {} instructions in {:.2} s of execution: {:.2} G instructions/s (engine: {ENGINE_LABEL})",
        outcomes.len(),
        human(total_instructions),
        total_wall.as_secs_f64(),
        ips / 1e9
    )
    .map_err(w)?;

    if options.persist {
        // Keep benchmarks filtered out by the pattern.
        let mut file = baseline.clone();
        if options.pattern.is_none() {
            file.benches.clear();
        }
        for o in &outcomes {
            file.benches.insert(o.name.clone(), o.result.clone());
        }
        file.engine = Some(ENGINE_LABEL.to_string());
        file.version = env!("CARGO_PKG_VERSION").to_string();
        file.write(&results_path)?;
        writeln!(
            out,
            "Successfully persisted results to {}",
            results_path.display()
        )
        .map_err(w)?;
    }
    Ok(RunSummary {
        outcomes,
        results_path,
        instructions_per_second: ips,
    })
}

/// Writes a table of the total-instruction changes (for `--fail-on-regression`).
pub fn write_change_table(
    out: &mut dyn Write,
    summary: &RunSummary,
    baseline: &ResultsFile,
) -> std::io::Result<()> {
    writeln!(out, "| status | benchmark | baseline | current | change |")?;
    writeln!(out, "|--------|-----------|---------:|--------:|-------:|")?;
    for o in &summary.outcomes {
        let old = baseline
            .benches
            .get(&o.name)
            .map(|b| b.total.instructions());
        let status = match o.change {
            Change::Regressed(_) | Change::RegressedFromZero => "regressed",
            Change::Improved(_) => "improved",
            Change::New => "new",
            _ => "unchanged",
        };
        let pct = match old {
            Some(0) | None => "-".to_string(),
            Some(old) => format!(
                "{:+.2}%",
                (o.result.total.instructions() as f64 - old as f64) / old as f64 * 100.0
            ),
        };
        writeln!(
            out,
            "| {status} | {} | {} | {} | {pct} |",
            o.name,
            old.map(|v| v.to_string()).unwrap_or_else(|| "-".into()),
            o.result.total.instructions()
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn change_classification() {
        assert_eq!(Change::of(None, 5, 2.0), Change::New);
        assert_eq!(Change::of(Some(100), 100, 2.0), Change::Unchanged);
        assert!(matches!(
            Change::of(Some(100), 101, 2.0),
            Change::WithinNoise(_)
        ));
        assert!(matches!(
            Change::of(Some(100), 103, 2.0),
            Change::Regressed(_)
        ));
        assert!(matches!(
            Change::of(Some(100), 97, 2.0),
            Change::Improved(_)
        ));
        assert_eq!(Change::of(Some(0), 1, 2.0), Change::RegressedFromZero);
        assert!(Change::of(Some(100), 103, 2.0).is_regression());
        assert_eq!(human(1_234_567), "1.23 M");
        assert_eq!(human(999), "999");
    }

    #[test]
    fn results_paths() {
        let cfg = CanbenchConfig {
            build_cmd: None,
            wasm_path: "x.wasm".into(),
            init_args: None,
            results_path: None,
            stable_memory: None,
        };
        assert_eq!(
            results_path_for(Path::new("d"), &cfg, None),
            Path::new("d/canbench_results.offline.yml")
        );
        let cfg = CanbenchConfig {
            results_path: Some("r/canbench_results.yml".into()),
            ..cfg
        };
        assert_eq!(
            results_path_for(Path::new("d"), &cfg, None),
            Path::new("d/r/canbench_results.offline.yml")
        );
        let err = ResultsFile::default()
            .write(Path::new("never-written/canbench_results.yml"))
            .unwrap_err();
        assert!(matches!(err, CanbenchError::ForeignResultsFile(_)));
    }

    #[test]
    fn decodes_canbench_rs_bench_result() {
        // The candid type canbench-rs 0.7 replies with.
        #[derive(CandidType)]
        struct M {
            calls: u64,
            instructions: u64,
            heap_increase: u64,
            stable_memory_increase: u64,
        }
        #[derive(CandidType)]
        struct B {
            total: M,
            scopes: BTreeMap<String, M>,
        }
        let m = || M {
            calls: 1,
            instructions: 42,
            heap_increase: 2,
            stable_memory_increase: 3,
        };
        let bytes = candid::encode_one(B {
            total: m(),
            scopes: [("s".to_string(), m())].into(),
        })
        .unwrap();
        let r: BenchResult = candid::decode_one(&bytes).unwrap();
        assert_eq!(r.total.instructions, Some(42));
        assert_eq!(r.scopes["s"].stable_memory_increase, Some(3));
    }

    #[test]
    fn config_parses() {
        let c: CanbenchConfig = serde_yaml::from_str(
            "build_cmd: make\nwasm_path: a.wasm\ninit_args:\n  hex: 4449444c0000\n",
        )
        .unwrap();
        assert_eq!(c.init_args.unwrap().hex, "4449444c0000");
    }
}
