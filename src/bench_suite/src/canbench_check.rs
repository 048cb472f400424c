//! The CI gate of the committed canbench results, as canbench's own CI has it
//! (dfinity/canbench `scripts/ci_run_benchmark.sh`): run the real canbench with
//! `--persist --csv --show-summary` and fail unless the results file was up to date.
//!
//! "Up to date" is judged against the file as committed at `HEAD` (`git show HEAD:<file>`),
//! read before canbench runs: `--persist` rewrites the working tree's copy, so comparing with
//! that copy would let a second run pass a regression nobody committed.
//!
//! Here canbench runs through `offline-pocket-ic`, so its results are the offline engine's
//! (`canbench_results.offline.yml`, named by `canbench.offline.yml`). Every figure canbench
//! prints a change for counts, with the repository's one rule ([`crate::regression::classify`]):
//! total and scope instructions, heap and stable-memory increases and scope calls; new and
//! removed benchmarks fail too. Then the same benchmarks run in-process on the engine
//! (`offline_engine::canbench`) and every figure must equal what canbench received through the
//! server, exactly. Optionally a second canbench run with `--instruction-tracing` must write a
//! flamegraph per traced benchmark.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Instant, SystemTime};

use anyhow::{Context, Result, bail};
use serde::Deserialize;

use crate::engine_runs::{self, CanbenchFigures};
use crate::progress::Progress;
use crate::regression::{self, Change};
use offline_engine::Metering;

/// The parts of a canbench configuration (`canbench.yml` schema) the gate reads.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct CanbenchConfig {
    /// The benchmark wasm (relative to the working directory, as canbench reads it).
    pub wasm_path: PathBuf,
    /// Where canbench writes its results (default `canbench_results.yml`).
    #[serde(default)]
    pub results_path: Option<PathBuf>,
    /// Candid init argument, hex.
    #[serde(default)]
    pub init_args: Option<InitArgs>,
    /// Stable memory loaded after install.
    #[serde(default)]
    pub stable_memory: Option<StableMemory>,
}

/// `init_args` of a canbench configuration.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct InitArgs {
    /// Hex of the Candid init argument.
    pub hex: String,
}

/// `stable_memory` of a canbench configuration.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct StableMemory {
    /// File whose bytes become the stable memory.
    pub file: PathBuf,
}

impl CanbenchConfig {
    /// The install argument canbench sends: `init_args.hex` decoded, or empty bytes.
    pub fn init_arg(&self) -> Result<Vec<u8>> {
        match &self.init_args {
            Some(a) => hex::decode(a.hex.trim()).context("init_args.hex"),
            None => Ok(Vec::new()),
        }
    }

    /// Reads a canbench configuration file.
    pub fn read(path: &Path) -> Result<CanbenchConfig> {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        serde_yaml::from_str(&text).with_context(|| format!("parsing {}", path.display()))
    }

    /// canbench's results file for this configuration.
    pub fn results_path(&self) -> PathBuf {
        self.results_path
            .clone()
            .unwrap_or_else(|| PathBuf::from("canbench_results.yml"))
    }
}

/// A canbench results file (`benches` by name, and the canbench version that wrote it).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct CanbenchResults {
    /// Results by benchmark.
    pub benches: BTreeMap<String, CanbenchFigures>,
    /// The canbench version that wrote the file.
    pub version: String,
}

impl CanbenchResults {
    /// Reads a results file canbench wrote.
    pub fn read(path: &Path) -> Result<CanbenchResults> {
        let text = std::fs::read_to_string(path).with_context(|| {
            format!(
                "reading {} (create it with `scripts/canbench.sh --persist` and commit it)",
                path.display()
            )
        })?;
        serde_yaml::from_str(&text).with_context(|| format!("parsing {}", path.display()))
    }
}

/// Every figure canbench reports a change for, by `<bench>: <metric>` or
/// `<bench> / <scope>: <metric>`: instructions, heap and stable-memory increases of totals and
/// scopes, and the calls of scopes (canbench does not print the calls of totals, always 1).
pub fn figures(benches: &BTreeMap<String, CanbenchFigures>) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for (name, f) in benches {
        let t = &f.total;
        out.insert(format!("{name}: instructions"), t.instructions);
        out.insert(format!("{name}: heap_increase"), t.heap_increase);
        out.insert(
            format!("{name}: stable_memory_increase"),
            t.stable_memory_increase,
        );
        for (scope, m) in &f.scopes {
            out.insert(format!("{name} / {scope}: calls"), m.calls);
            out.insert(format!("{name} / {scope}: instructions"), m.instructions);
            out.insert(format!("{name} / {scope}: heap_increase"), m.heap_increase);
            out.insert(
                format!("{name} / {scope}: stable_memory_increase"),
                m.stable_memory_increase,
            );
        }
    }
    out
}

/// Where `canbench` and the direct run disagree: benchmarks only one of them ran, and
/// benchmarks whose figures differ (every field of the total and of every scope).
pub fn mismatches(
    canbench: &BTreeMap<String, CanbenchFigures>,
    direct: &BTreeMap<String, CanbenchFigures>,
) -> Vec<String> {
    let mut out = Vec::new();
    for name in canbench.keys().chain(direct.keys()) {
        match (canbench.get(name), direct.get(name)) {
            (Some(_), None) => out.push(format!("{name}: in canbench's results only")),
            (None, Some(_)) => out.push(format!("{name}: in the direct run only")),
            (Some(a), Some(b)) if a != b => {
                out.push(format!("{name}: canbench {a:?} != direct {b:?}"))
            }
            _ => {}
        }
    }
    out.sort();
    out.dedup();
    out
}

/// The results file as committed at `HEAD` in the repository at `repo` (`path` relative to it),
/// whatever the working tree holds. Fails when the file is not committed.
pub fn committed_results(repo: &Path, path: &Path) -> Result<CanbenchResults> {
    let spec = format!("HEAD:./{}", path.display());
    let out = Command::new("git")
        .arg("-C")
        .arg(repo)
        .args(["show", &spec])
        .output()
        .with_context(|| format!("running `git show {spec}` in {}", repo.display()))?;
    if !out.status.success() {
        bail!(
            "{} is not committed at HEAD (`git show {spec}`: {}); create it with \
             `scripts/canbench.sh --persist` and commit it",
            path.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    let text = String::from_utf8(out.stdout)
        .with_context(|| format!("{} at HEAD is not UTF-8", path.display()))?;
    serde_yaml::from_str(&text).with_context(|| format!("parsing {} at HEAD", path.display()))
}

/// What canbench's `--persist` run changed against the committed results: the committed file
/// is read from `HEAD` first, then `runner --persist --csv --show-summary` runs in `repo`, then
/// the file it wrote is compared with it. Returns the fresh results, the changes and the
/// runner's wall seconds.
/// canbench's server meters by `metering` (`OFFLINE_ENGINE_METERING`).
pub fn persisted_changes(
    repo: &Path,
    results_path: &Path,
    runner: &Path,
    threshold: f64,
    metering: &Metering,
) -> Result<(CanbenchResults, Vec<Change>, f64)> {
    let committed = committed_results(repo, results_path)?;
    let seconds = run_canbench(
        repo,
        runner,
        &["--persist", "--csv", "--show-summary"],
        metering,
    )?;
    let fresh = CanbenchResults::read(&repo.join(results_path))?;
    let changes = regression::compare(
        &figures(&committed.benches),
        &figures(&fresh.benches),
        threshold,
    );
    Ok((fresh, changes, seconds))
}

/// Options of [`run`].
#[derive(Debug, Clone)]
pub struct CheckOptions {
    /// The repository's working directory: the other paths are relative to it, and the
    /// committed results are read from its `HEAD`.
    pub repo: PathBuf,
    /// The canbench configuration canbench runs with (`canbench.offline.yml`).
    pub config: PathBuf,
    /// The command that runs canbench through the server with the given flags
    /// (`scripts/canbench.sh`).
    pub runner: PathBuf,
    /// Noise threshold in percent.
    pub threshold: f64,
    /// Benchmarks (substring) to trace with `--instruction-tracing` afterwards.
    pub trace: Option<String>,
    /// The metering profile of canbench's server (`OFFLINE_ENGINE_METERING`, which
    /// `offline-pocket-ic` reads) and of the direct run.
    pub metering: Metering,
}

/// What [`run`] found.
#[derive(Debug, Clone)]
pub struct CheckOutcome {
    /// Figure changes against the committed results.
    pub changes: Vec<Change>,
    /// Disagreements between canbench and the direct run.
    pub mismatches: Vec<String>,
    /// Traced benchmarks without a fresh flamegraph.
    pub missing_flamegraphs: Vec<String>,
    /// Wall seconds of the canbench run through the server (including canbench's build_cmd).
    pub canbench_seconds: f64,
    /// Wall seconds of the direct run of the same benchmarks (load, install, benchmarks).
    pub direct_seconds: f64,
}

impl CheckOutcome {
    /// True if the gate passes.
    pub fn passed(&self) -> bool {
        !regression::fails(&self.changes)
            && self.mismatches.is_empty()
            && self.missing_flamegraphs.is_empty()
    }
}

fn run_canbench(repo: &Path, runner: &Path, args: &[&str], metering: &Metering) -> Result<f64> {
    let started = Instant::now();
    let program = if runner.is_relative() {
        repo.join(runner)
    } else {
        runner.to_path_buf()
    };
    let status = Command::new(&program)
        .current_dir(repo)
        .args(args)
        .env("OFFLINE_ENGINE_METERING", metering.name)
        .status()
        .with_context(|| format!("starting {}", runner.display()))?;
    if !status.success() {
        bail!("`{} {}` failed: {status}", runner.display(), args.join(" "));
    }
    Ok(started.elapsed().as_secs_f64())
}

/// Runs the gate: canbench with `--persist --csv --show-summary`, the comparison with the
/// committed results, the direct run, and the optional tracing run.
pub fn run(options: &CheckOptions, progress: &mut Progress) -> Result<CheckOutcome> {
    let repo = options.repo.as_path();
    let config = CanbenchConfig::read(&repo.join(&options.config))?;
    let results_path = config.results_path();

    progress.step(&format!(
        "canbench --persist --csv --show-summary through {}, compared with {} as committed at HEAD",
        options.runner.display(),
        results_path.display()
    ));
    let (fresh, changes, canbench_seconds) = persisted_changes(
        repo,
        &results_path,
        &options.runner,
        options.threshold,
        &options.metering,
    )?;

    progress.step("the same benchmarks on the engine, in-process");
    let started = Instant::now();
    let engine = engine_runs::engine_with(options.metering)?;
    let program = engine_runs::load(
        &engine,
        &repo.join(&config.wasm_path),
        "the canbench build_cmd",
    )?;
    let init_arg = config.init_arg()?;
    let stable = match &config.stable_memory {
        Some(s) => {
            let file = repo.join(&s.file);
            Some(std::fs::read(&file).with_context(|| format!("reading {}", file.display()))?)
        }
        None => None,
    };
    let direct = engine_runs::run_canbench(
        &engine,
        &program,
        &init_arg,
        stable.as_deref(),
        &|_| true,
        progress,
    )?;
    let direct_seconds = started.elapsed().as_secs_f64();
    let mismatches = mismatches(&fresh.benches, &direct.benches);

    let mut missing_flamegraphs = Vec::new();
    if let Some(pattern) = &options.trace {
        progress.step(&format!("canbench --instruction-tracing {pattern}"));
        let since = SystemTime::now();
        run_canbench(
            repo,
            &options.runner,
            &["--instruction-tracing", pattern],
            &options.metering,
        )?;
        for name in fresh
            .benches
            .keys()
            .filter(|n| n.contains(pattern.as_str()))
        {
            let svg = repo.join(results_path.with_file_name(format!("{name}.svg")));
            let fresh_svg = std::fs::metadata(&svg)
                .ok()
                .filter(|m| m.len() > 0 && m.modified().is_ok_and(|t| t >= since));
            if fresh_svg.is_none() {
                missing_flamegraphs.push(svg.display().to_string());
            }
        }
    }
    Ok(CheckOutcome {
        changes,
        mismatches,
        missing_flamegraphs,
        canbench_seconds,
        direct_seconds,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine_runs::Measured;
    use crate::regression::Status;

    const RESULTS: &str = "benches:
  a:
    total:
      calls: 1
      instructions: 1000
      heap_increase: 2
      stable_memory_increase: 128
    scopes:
      s:
        calls: 10
        instructions: 400
        heap_increase: 0
        stable_memory_increase: 0
  b:
    total:
      instructions: 50
    scopes: {}
version: 0.7.0
";

    fn results() -> CanbenchResults {
        serde_yaml::from_str(RESULTS).unwrap()
    }

    #[test]
    fn reads_canbench_s_results_file() {
        let r = results();
        assert_eq!(r.version, "0.7.0");
        assert_eq!(r.benches["a"].total.stable_memory_increase, 128);
        assert_eq!(r.benches["a"].scopes["s"].calls, 10);
        // Fields canbench leaves out (older files) read as 0.
        assert_eq!(
            r.benches["b"].total,
            Measured {
                calls: 0,
                instructions: 50,
                heap_increase: 0,
                stable_memory_increase: 0
            }
        );
        let f = figures(&r.benches);
        assert_eq!(f.len(), 3 + 4 + 3);
        assert_eq!(f["a / s: calls"], 10);
        assert_eq!(f["a: stable_memory_increase"], 128);
    }

    #[test]
    fn heap_stable_scope_new_and_removed_changes_fail() {
        let old = results();
        let status = |edit: &dyn Fn(&mut CanbenchResults)| {
            let mut new = old.clone();
            edit(&mut new);
            let ch = regression::compare(&figures(&old.benches), &figures(&new.benches), 2.0);
            ch.into_iter()
                .filter(|c| c.status != Status::Unchanged)
                .map(|c| (c.name, c.status))
                .collect::<Vec<_>>()
        };
        let heap = |r: &mut CanbenchResults| {
            r.benches.get_mut("a").unwrap().total.heap_increase = 3;
        };
        assert_eq!(
            status(&heap),
            [("a: heap_increase".to_string(), Status::Regressed)]
        );
        let stable_down = |r: &mut CanbenchResults| {
            r.benches.get_mut("a").unwrap().total.stable_memory_increase = 0;
        };
        assert_eq!(
            status(&stable_down),
            [("a: stable_memory_increase".to_string(), Status::Improved)]
        );
        let noise = |r: &mut CanbenchResults| {
            r.benches.get_mut("a").unwrap().total.instructions = 1_019;
        };
        assert_eq!(
            status(&noise),
            [("a: instructions".to_string(), Status::WithinThreshold)]
        );
        let scope = |r: &mut CanbenchResults| {
            r.benches
                .get_mut("a")
                .unwrap()
                .scopes
                .get_mut("s")
                .unwrap()
                .calls = 11;
        };
        assert_eq!(
            status(&scope),
            [("a / s: calls".to_string(), Status::Regressed)]
        );
        let removed = |r: &mut CanbenchResults| {
            r.benches.remove("b");
        };
        assert!(
            status(&removed)
                .iter()
                .all(|(n, s)| n.starts_with("b:") && *s == Status::Removed)
        );
        let added = |r: &mut CanbenchResults| {
            let b = r.benches["b"].clone();
            r.benches.insert("c".into(), b);
        };
        assert!(
            status(&added)
                .iter()
                .all(|(n, s)| n.starts_with("c:") && *s == Status::New)
        );
    }

    #[test]
    fn mismatches_name_every_difference() {
        let a = results().benches;
        assert!(mismatches(&a, &a).is_empty());
        let mut b = a.clone();
        b.get_mut("a")
            .unwrap()
            .scopes
            .get_mut("s")
            .unwrap()
            .instructions = 401;
        b.remove("b");
        let m = mismatches(&a, &b);
        assert_eq!(m.len(), 2, "{m:?}");
        assert!(m[0].starts_with("a: canbench"));
        assert_eq!(m[1], "b: in canbench's results only");
    }

    #[test]
    fn offline_config_is_canbench_yml_with_its_own_results_files() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let read = |name: &str| -> serde_yaml::Mapping {
            let text = std::fs::read_to_string(root.join(name)).unwrap();
            serde_yaml::from_str(&text).unwrap()
        };
        let canbench = read("canbench.yml");
        let mut offline = read("canbench.offline.yml");
        assert_eq!(
            offline.remove("results_path"),
            Some("canbench_results.offline.yml".into())
        );
        assert_eq!(
            offline.remove("csv_results_path"),
            Some("canbench_results.offline.csv".into())
        );
        assert!(!canbench.contains_key("results_path"));
        assert_eq!(offline, canbench);
    }

    /// A deliberate regression fails the gate, and fails it again when run at once a second
    /// time with nothing committed: `--persist` rewrote the working tree's results file, but the
    /// gate compares with the one committed at HEAD.
    #[test]
    fn a_regression_fails_the_gate_twice_in_a_row() {
        let repo = std::env::temp_dir().join(format!("bench_suite_gate_{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&repo);
        std::fs::create_dir_all(&repo).unwrap();
        let git = |args: &[&str]| {
            let out = Command::new("git")
                .arg("-C")
                .arg(&repo)
                .args([
                    "-c",
                    "user.name=gate",
                    "-c",
                    "user.email=gate@example.invalid",
                ])
                .args(args)
                .output()
                .unwrap();
            assert!(out.status.success(), "git {args:?}: {out:?}");
        };
        git(&["init", "-q"]);
        let results = Path::new("results.yml");
        std::fs::write(repo.join(results), RESULTS).unwrap();
        git(&["add", "results.yml"]);
        git(&["commit", "-q", "-m", "results"]);
        // The runner stands in for `canbench --persist`: it rewrites the results file with `a`
        // 89.6 % dearer, as a deliberate regression would.
        let runner = repo.join("persist.sh");
        let regressed = RESULTS.replace("instructions: 1000", "instructions: 1896");
        std::fs::write(
            &runner,
            format!("#!/bin/sh\ncat > results.yml <<'EOF'\n{regressed}EOF\n"),
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&runner, std::fs::Permissions::from_mode(0o755)).unwrap();
        for attempt in 1..=2 {
            let (fresh, changes, _) =
                persisted_changes(&repo, results, &runner, 2.0, &Metering::POCKET_IC_13).unwrap();
            assert_eq!(fresh.benches["a"].total.instructions, 1_896);
            let failing: Vec<_> = changes.iter().filter(|c| c.status.fails()).collect();
            assert_eq!(failing.len(), 1, "attempt {attempt}: {changes:?}");
            assert_eq!(failing[0].name, "a: instructions");
            assert_eq!(failing[0].status, Status::Regressed);
        }
        // The working tree now holds the regressed figures; HEAD still the committed ones.
        assert_eq!(
            committed_results(&repo, results).unwrap().benches["a"]
                .total
                .instructions,
            1_000
        );
        // Once committed, the same figures pass.
        git(&["commit", "-q", "-am", "accept"]);
        let (_, changes, _) =
            persisted_changes(&repo, results, &runner, 2.0, &Metering::POCKET_IC_13).unwrap();
        assert!(!regression::fails(&changes));
        // A results file that was never committed is an error, not a pass.
        assert!(committed_results(&repo, Path::new("other.yml")).is_err());
        std::fs::remove_dir_all(&repo).unwrap();
    }

    #[test]
    fn config_names_the_results_file() {
        let c: CanbenchConfig = serde_yaml::from_str(
            "build_cmd: make\nwasm_path: x.wasm\nresults_path: canbench_results.offline.yml\n",
        )
        .unwrap();
        assert_eq!(c.results_path(), Path::new("canbench_results.offline.yml"));
        let c: CanbenchConfig = serde_yaml::from_str("wasm_path: x.wasm\n").unwrap();
        assert_eq!(c.results_path(), Path::new("canbench_results.yml"));
    }
}
