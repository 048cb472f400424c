//! `bench-suite`: runs the benchmark suite on the offline engine and writes the report, or checks
//! the instruction counts against the committed CI baseline.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};
use bench_suite::canbench_check;
use bench_suite::progress::Progress;
use bench_suite::regression::{self, Baseline, DEFAULT_THRESHOLD_PCT};
use bench_suite::suite::{self, Scale, SuiteConfig};
use clap::{Args, Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "bench-suite",
    version,
    about = "Benchmark suite of the batched SQLite canister on the offline engine (wasmtime, IC metering)"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Args, Clone)]
struct Wasms {
    /// The deployable canister wasm (built by scripts/build.sh).
    #[arg(long, default_value = "target/canister/bench_canister.wasm")]
    wasm: PathBuf,
    /// The canbench flavour of the wasm (built by `BENCH_SCALE_DIVISOR=<1|100> scripts/build.sh canbench`).
    #[arg(long, default_value = "target/canister/bench_canister_canbench.wasm")]
    canbench_wasm: PathBuf,
    /// The canbench configuration whose install argument (`init_args`) the benches get.
    #[arg(long, default_value = "canbench.yml")]
    canbench_config: PathBuf,
}

#[derive(Subcommand)]
enum Command {
    /// Runs the whole suite and writes REPORT.md, results.json and the SVG charts.
    Run {
        /// full: the scale of the ic-rusqlite users/orders benchmark (canbench wasm built with BENCH_SCALE_DIVISOR=1); ci: reduced (100).
        #[arg(long, value_enum, default_value = "full")]
        scale: Scale,
        /// Output directory.
        #[arg(long, default_value = "bench")]
        out: PathBuf,
        #[command(flatten)]
        wasms: Wasms,
    },
    /// Runs the reduced-scale suite and fails (exit 1) when any figure moved by the threshold or
    /// more in either direction, or a benchmark was added or removed.
    Check {
        /// The committed baseline.
        #[arg(long, default_value = "bench/baseline-ci.json")]
        baseline: PathBuf,
        /// Noise threshold in percent.
        #[arg(long, default_value_t = DEFAULT_THRESHOLD_PCT)]
        threshold: f64,
        /// Also write a short Markdown summary for a pull request here (verdict, changed
        /// figures, link to the full table).
        #[arg(long)]
        summary: Option<PathBuf>,
        #[command(flatten)]
        wasms: Wasms,
    },
    /// Prices one's own write load on every measured path from a suite run's per-op costs:
    /// cycles per day and US$ per month.
    Estimate {
        /// The suite's results (`scripts/bench.sh` writes them).
        #[arg(long, default_value = "bench/results.json")]
        results: PathBuf,
        /// Writes per day.
        #[arg(
            long,
            conflicts_with = "ops_per_second",
            required_unless_present = "ops_per_second"
        )]
        ops_per_day: Option<f64>,
        /// Writes per second (instead of per day).
        #[arg(long)]
        ops_per_second: Option<f64>,
        /// The op mix as weights, e.g. `insert=70,update=20,delete=10`.
        #[arg(long, default_value = "insert=1")]
        mix: String,
        /// Writes per message (client batch) or per flush (submit + timer).
        #[arg(
            long,
            conflicts_with = "flush_delay_ms",
            required_unless_present = "flush_delay_ms"
        )]
        batch: Option<u64>,
        /// Group the writes that arrive within this many milliseconds instead.
        #[arg(long)]
        flush_delay_ms: Option<f64>,
        /// Nodes of the subnet (13 or 34 are measured; other sizes scale the 13-node fees).
        #[arg(long, default_value_t = 13)]
        subnet: u64,
    },
    /// Runs only the reliability scenarios and prints their table (exit 1 if an op was lost or
    /// altered).
    Reliability {
        /// The deployable canister wasm (built by scripts/build.sh).
        #[arg(long, default_value = "target/canister/bench_canister.wasm")]
        wasm: PathBuf,
    },
    /// Measures what each op of the users/orders API costs alone (batched and unbatched, warm
    /// and as the first write after an upgrade) on the canister's own schema at the smallest
    /// flush budget it accepts, filled with the full scale of the ic-rusqlite benchmark; also
    /// the ops without the index on orders.user_id and the upgrade that creates it. Prints
    /// the tables; exits 1 if the most expensive op times the margin exceeds the smallest budget.
    BudgetFloor {
        /// The deployable canister wasm (built by scripts/build.sh).
        #[arg(long, default_value = "target/canister/bench_canister.wasm")]
        wasm: PathBuf,
        /// Divide the full scale (100,000 users, 1,000,000 orders) by this: 10 measures on
        /// 10,000 users and 100,000 orders, in seconds.
        #[arg(long, default_value_t = 1)]
        divisor: usize,
    },
    /// The CI gate of the canbench results: runs the real canbench through offline-pocket-ic
    /// with --persist --csv --show-summary, fails if any figure of the committed results moved
    /// by the threshold or more (either way) or a benchmark was added or removed, checks that
    /// every figure equals the engine's direct run, and optionally that --instruction-tracing
    /// writes flamegraphs.
    CanbenchCheck {
        /// The canbench configuration of the offline runs.
        #[arg(long, default_value = "canbench.offline.yml")]
        config: PathBuf,
        /// The command that runs canbench through the server with the flags it is given.
        #[arg(long, default_value = "scripts/canbench.sh")]
        runner: PathBuf,
        /// Noise threshold in percent (canbench's default).
        #[arg(long, default_value_t = DEFAULT_THRESHOLD_PCT)]
        threshold: f64,
        /// Also run canbench --instruction-tracing on the benchmarks whose name contains this.
        #[arg(long)]
        trace: Option<String>,
        /// Also write a short Markdown summary for a pull request here.
        #[arg(long)]
        summary: Option<PathBuf>,
    },
    /// The message-level runs (unbatched, submit + timer, client batch) through the pocket-ic
    /// client, beside the in-process runs of the same modes: prints a Markdown table labelled
    /// with the runtime the figures came from. Against offline-pocket-ic it fails (exit 1) when
    /// the cycles charged differ from the in-process fee model.
    Messages {
        /// offline: the server `--server` (default target/release/offline-pocket-ic); pocketic:
        /// the PocketIC server binary POCKET_IC_BIN names.
        #[arg(long, value_enum)]
        runtime: RuntimeArg,
        /// Ops per run, comma-separated.
        #[arg(long, value_delimiter = ',', default_value = "10,100,1000")]
        n: Vec<usize>,
        /// The deployable canister wasm (built by scripts/build.sh).
        #[arg(long, default_value = "target/canister/bench_canister.wasm")]
        wasm: PathBuf,
        /// The offline server binary (`cargo build --release -p pocket_ic_server`).
        #[arg(long, default_value = bench_suite::pocket_ic_runs::OFFLINE_BINARY)]
        server: PathBuf,
    },
    /// Runs the reduced-scale suite and rewrites the baseline.
    UpdateBaseline {
        /// The baseline to write.
        #[arg(long, default_value = "bench/baseline-ci.json")]
        baseline: PathBuf,
        #[command(flatten)]
        wasms: Wasms,
    },
}

/// The `messages` runtimes.
#[derive(Clone, Copy, clap::ValueEnum)]
enum RuntimeArg {
    /// offline-pocket-ic (the offline engine behind PocketIC's REST protocol).
    Offline,
    /// A real PocketIC server (POCKET_IC_BIN).
    Pocketic,
}

fn messages(
    runtime: RuntimeArg,
    ns: &[usize],
    wasm_path: &Path,
    server: &Path,
    progress: &mut Progress,
) -> Result<ExitCode> {
    use bench_suite::engine_runs;
    use bench_suite::message_bench::Mode;
    use bench_suite::pocket_ic_runs::{self, Row, Runtime, Server};

    // The client starts the server with this process's stdout and stderr unless muted; muted,
    // a pipe reading this process's output ends when it does, not at the server's TTL.
    if std::env::var_os("POCKET_IC_MUTE_SERVER").is_none() {
        // SAFETY: no other thread runs yet (the engine and the client start theirs below).
        unsafe { std::env::set_var("POCKET_IC_MUTE_SERVER", "1") };
    }
    let binary = match runtime {
        RuntimeArg::Offline => server.to_path_buf(),
        RuntimeArg::Pocketic => PathBuf::from(std::env::var_os("POCKET_IC_BIN").context(
            "--runtime pocketic: set POCKET_IC_BIN to the PocketIC server binary (pocket-ic 13 protocol)",
        )?),
    };
    let server = Server::at(&binary)?;
    let wasm = std::fs::read(wasm_path).with_context(|| {
        format!(
            "{}: build it first with `scripts/build.sh`",
            wasm_path.display()
        )
    })?;
    progress.step(&format!(
        "bench-suite messages: {} through the pocket-ic client (engine: {}), N = {ns:?}",
        binary.display(),
        server.runtime.label()
    ));
    let engine = engine_runs::engine()?;
    let program = engine_runs::load(&engine, wasm_path, "scripts/build.sh")?;
    let mut rows = Vec::new();
    for &n in ns {
        for mode in Mode::ALL {
            let run = pocket_ic_runs::run_mode(&server, &wasm, mode, n, progress)?;
            progress.step(&format!(
                "{} N={n}: {} cycles through the client; in-process run",
                mode.label(),
                run.cycles
            ));
            let local = engine_runs::run_mode(&engine, &program, mode, n)?;
            let model = pocket_ic_runs::expected_cycles(&bench_suite::fees::IC_2025, &local);
            let ingress = local
                .messages
                .iter()
                .filter(|m| {
                    matches!(
                        m.kind,
                        bench_suite::message_bench::MessageKind::Ingress { .. }
                    )
                })
                .count() as u64;
            rows.push(Row {
                run,
                in_process: Some((model, ingress)),
            });
        }
    }
    println!("{}", pocket_ic_runs::render_table(server.runtime, &rows));
    let differs = rows.iter().any(|r| {
        r.in_process
            .is_some_and(|(c, ingress)| c != r.run.cycles || ingress != r.run.ingress_messages)
    });
    match (server.runtime, differs) {
        (Runtime::Offline, true) => {
            println!(
                "FAILED: offline-pocket-ic charged other cycles (or counted other ingress messages) than the in-process fee model of the same runs."
            );
            Ok(ExitCode::from(1))
        }
        (Runtime::Offline, false) => {
            println!(
                "OK: offline-pocket-ic charged exactly the in-process fee model's cycles for every run."
            );
            Ok(ExitCode::SUCCESS)
        }
        (Runtime::PocketIc, _) => {
            println!(
                "The differences are PocketIC's charges against the offline engine's fee model \
                 (its instruction counts, and fees the engine does not charge, such as storage)."
            );
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn config(scale: Scale, w: &Wasms) -> Result<SuiteConfig> {
    Ok(SuiteConfig {
        scale,
        deployable_wasm: w.wasm.clone(),
        canbench_wasm: w.canbench_wasm.clone(),
        canbench_init_arg: canbench_check::CanbenchConfig::read(&w.canbench_config)?.init_arg()?,
    })
}

fn main() -> ExitCode {
    match real_main() {
        Ok(code) => code,
        Err(e) => {
            eprintln!("bench-suite: error: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn real_main() -> Result<ExitCode> {
    let cli = Cli::parse();
    let mut progress = Progress::stderr();
    match cli.command {
        Command::Run { scale, out, wasms } => {
            progress.step(&format!(
                "bench-suite run --scale {} (engine: {})",
                scale.label(),
                bench_suite::engine_runs::ENGINE_LABEL
            ));
            let results = suite::run(&config(scale, &wasms)?, &mut progress)?;
            let files = bench_suite::output::write_all(&results, &out)?;
            for f in &files {
                println!("wrote {}", f.display());
            }
            progress.step(&format!(
                "done: suite wall time {:.1} s",
                results.wall_seconds
            ));
            let summary = bench_suite::summary::summarize(&results.messages, &results.fee_schedule);
            println!(
                "\nWhat a million writes cost ({}):\n",
                out.join("REPORT.md").display()
            );
            let source = format!(
                "engine: {} · {} · scale {} · fee schedule of {}, 1 T cycles = 1 XDR = US$ {:.5}",
                results.engine,
                results.date,
                scale.label(),
                results.fee_schedule.date,
                results.fee_schedule.usd_per_xdr
            );
            print!(
                "{}",
                bench_suite::summary::render_markdown(&summary, &source)
            );
            Ok(ExitCode::SUCCESS)
        }
        Command::Check {
            baseline,
            threshold,
            summary,
            wasms,
        } => {
            let base = Baseline::read(&baseline)?;
            let results = suite::run(&config(Scale::Ci, &wasms)?, &mut progress)?;
            let changes = regression::compare(
                &base.benches,
                &suite::regression_figures(&results),
                threshold,
            );
            println!(
                "Instruction check (engine: {}; baseline {} of {}, noise threshold {threshold}%)\n",
                results.engine,
                baseline.display(),
                base.date
            );
            println!("{}", regression::render_table(&changes, threshold));
            if let Some(path) = &summary {
                let context = format!(
                    "Instructions of every canbench bench (CI scale) and message-level run, engine: {}, against `{}` \
                     (written {}).",
                    results.engine,
                    baseline.display(),
                    base.date
                );
                let text = bench_suite::pr_summary::render(&bench_suite::pr_summary::GateSummary {
                    gate: "Instruction check",
                    context: &context,
                    changes: &changes,
                    threshold_pct: threshold,
                    other_failures: &[],
                    full_table: &bench_suite::pr_summary::full_table_link(
                        "the output of `scripts/check_regressions.sh`",
                    ),
                    update_hint: "scripts/check_regressions.sh --update",
                });
                bench_suite::pr_summary::write(path, &text)?;
                println!("wrote {}", path.display());
            }
            if regression::fails(&changes) {
                println!(
                    "FAILED: the figures moved by {threshold}% or more (either way), or benchmarks were added or removed. \
                     If intended, run `scripts/check_regressions.sh --update` and commit the baseline with the change."
                );
                Ok(ExitCode::from(1))
            } else {
                println!("OK: every figure is within {threshold}% of the baseline.");
                Ok(ExitCode::SUCCESS)
            }
        }
        Command::BudgetFloor { wasm, divisor } => {
            let f = bench_suite::reliability::budget_floor(&wasm, divisor, &mut progress)?;
            print!("{}", bench_suite::reliability::render_budget_floor(&f));
            println!("(engine: {})", bench_suite::engine_runs::ENGINE_LABEL);
            Ok(if f.fits() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            })
        }
        Command::Reliability { wasm } => {
            let results = bench_suite::reliability::run_all(&wasm, &mut progress)?;
            println!(
                "| scenario | acknowledged | committed | failed | failed without a cause | lost | altered | applied twice | refused | trapped | timer runs to drain |"
            );
            println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
            for x in &results {
                println!(
                    "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                    x.name,
                    x.acknowledged,
                    x.committed,
                    x.failed,
                    x.failed_without_cause,
                    x.lost,
                    x.altered,
                    x.applied_twice,
                    x.refused,
                    x.trapped,
                    x.rounds_to_drain
                );
            }
            let w = bench_suite::reliability::worst_case_flush(&wasm, &mut progress)?;
            println!(
                "\nworst-case flush, budget {}: {} ops then a heavy op: {} instructions ({:.2}× budget); the heavy op alone: {} ({:.2}×)",
                w.budget,
                w.ops_before,
                w.mixed_flush_instructions,
                w.mixed_flush_instructions as f64 / w.budget as f64,
                w.alone_flush_instructions,
                w.alone_flush_instructions as f64 / w.budget as f64
            );
            println!(
                "varying cost: {} ops at budget {} for a {} limit: {} flushes, {} capped at 3 × budget, {} trapped; the largest message {} instructions ({:.3}× budget)",
                w.varying_ops,
                w.varying_budget,
                w.varying_limit,
                w.varying_flushes,
                w.varying_capped,
                w.varying_trapped,
                w.varying_most,
                w.varying_most as f64 / w.varying_budget.max(1) as f64
            );
            println!("(engine: {})", bench_suite::engine_runs::ENGINE_LABEL);
            if bench_suite::reliability::all_safe(&results) {
                Ok(ExitCode::SUCCESS)
            } else {
                println!(
                    "FAILED: an acknowledged op was lost or altered, or an op failed without a cause of its own"
                );
                Ok(ExitCode::from(1))
            }
        }
        Command::CanbenchCheck {
            config,
            runner,
            threshold,
            trace,
            summary,
        } => {
            let options = canbench_check::CheckOptions {
                repo: PathBuf::from("."),
                config,
                runner,
                threshold,
                trace,
            };
            let outcome = canbench_check::run(&options, &mut progress)?;
            println!(
                "\ncanbench results against the committed ones (engine: {}, noise threshold {threshold}%):\n",
                bench_suite::engine_runs::ENGINE_LABEL
            );
            println!("{}", regression::render_table(&outcome.changes, threshold));
            if outcome.mismatches.is_empty() {
                println!("Every figure equals the engine's direct run of the same benchmarks.");
            } else {
                println!("Figures that differ from the engine's direct run:");
                for m in &outcome.mismatches {
                    println!("  {m}");
                }
            }
            for svg in &outcome.missing_flamegraphs {
                println!("No fresh flamegraph: {svg}");
            }
            if let Some(path) = &summary {
                let other: Vec<String> = outcome
                    .mismatches
                    .iter()
                    .map(|m| format!("differs from the engine's direct run: {m}"))
                    .chain(
                        outcome
                            .missing_flamegraphs
                            .iter()
                            .map(|f| format!("no fresh flamegraph: {f}")),
                    )
                    .collect();
                let context = format!(
                    "canbench 0.7.0 through offline-pocket-ic (engine: {}), every figure it reports against the \
                     `canbench_results.offline.yml` committed at HEAD.",
                    bench_suite::engine_runs::ENGINE_LABEL
                );
                let text = bench_suite::pr_summary::render(&bench_suite::pr_summary::GateSummary {
                    gate: "canbench gate",
                    context: &context,
                    changes: &outcome.changes,
                    threshold_pct: threshold,
                    other_failures: &other,
                    full_table: &bench_suite::pr_summary::full_table_link(
                        "the output of `scripts/check_canbench.sh`",
                    ),
                    update_hint: "scripts/canbench.sh --persist",
                });
                bench_suite::pr_summary::write(path, &text)?;
                println!("wrote {}", path.display());
            }
            println!(
                "Wall time: canbench through offline-pocket-ic {:.1} s (including its build_cmd); \
                 the engine's direct run of the same benchmarks {:.1} s.",
                outcome.canbench_seconds, outcome.direct_seconds
            );
            if outcome.passed() {
                println!("OK: the committed canbench results are up to date.");
                Ok(ExitCode::SUCCESS)
            } else {
                println!(
                    "FAILED: the committed canbench results are not up to date. If the change is intended, \
                     run `scripts/canbench.sh --persist` and commit the results file with it."
                );
                Ok(ExitCode::from(1))
            }
        }
        Command::Messages {
            runtime,
            n,
            wasm,
            server,
        } => messages(runtime, &n, &wasm, &server, &mut progress),
        Command::Estimate {
            results,
            ops_per_day,
            ops_per_second,
            mix,
            batch,
            flush_delay_ms,
            subnet,
        } => {
            use bench_suite::estimate::{self, Grouping, Load, Measured};
            let measured = Measured::read(&results)?;
            let ops_per_day = match (ops_per_day, ops_per_second) {
                (Some(d), _) => d,
                (None, Some(s)) => s * 86_400.0,
                (None, None) => anyhow::bail!("give --ops-per-day or --ops-per-second"),
            };
            let grouping = match (batch, flush_delay_ms) {
                (Some(n), _) => Grouping::Batch(n),
                (None, Some(ms)) => Grouping::FlushDelayMs(ms),
                (None, None) => anyhow::bail!("give --batch or --flush-delay-ms"),
            };
            let load = Load {
                ops_per_day,
                mix: estimate::parse_mix(&mix)?,
                grouping,
                nodes: subnet,
            };
            let e = estimate::estimate(&measured, &load)?;
            print!("{}", estimate::render(&measured, &e));
            Ok(ExitCode::SUCCESS)
        }
        Command::UpdateBaseline { baseline, wasms } => {
            let results = suite::run(&config(Scale::Ci, &wasms)?, &mut progress)?;
            let b = Baseline {
                engine: results.engine.clone(),
                scale: Scale::Ci.label().into(),
                date: results.date.clone(),
                canbench_wasm_sha256: results.canbench_wasm.sha256.clone(),
                deployable_wasm_sha256: results.deployable_wasm.sha256.clone(),
                benches: suite::regression_figures(&results),
            };
            if let Some(dir) = baseline.parent().filter(|d| !d.as_os_str().is_empty()) {
                std::fs::create_dir_all(dir)
                    .with_context(|| format!("creating {}", dir.display()))?;
            }
            b.write(&baseline)?;
            println!(
                "wrote {} ({} benchmarks)",
                baseline.display(),
                b.benches.len()
            );
            Ok(ExitCode::SUCCESS)
        }
    }
}
