//! `bench-suite`: runs the benchmark suite on the offline engine and writes the report, or checks
//! the instruction counts against the committed CI baseline. This file parses the command line;
//! each command is a module of [`bench_suite::commands`].

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
#[cfg(feature = "pocket-ic")]
use bench_suite::commands::messages::RuntimeArg;
use bench_suite::commands::{self, Wasms, estimate::LoadArgs};
use bench_suite::progress::Progress;
use bench_suite::regression::DEFAULT_THRESHOLD_PCT;
use bench_suite::suite::Scale;
use clap::{Parser, Subcommand};
use offline_engine::Metering;

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
        #[command(flatten)]
        load: LoadArgs,
    },
    /// Lists every measured figure quoted in a hand-written doc (`path:line: figure — status`):
    /// checked (in a generated block equal to its command's output), constant, timing, history
    /// or unchecked; exits 1 if any is unchecked or its block is stale.
    DocFigures {
        /// The repository's root.
        #[arg(long, default_value = ".")]
        root: PathBuf,
        /// First rewrite every generated block from its command's output.
        #[arg(long)]
        write: bool,
    },
    /// Prints a section of a generated Markdown file (or one of its blocks: a paragraph, a table,
    /// a list), as the file has it: what a doc's generated block quotes.
    Excerpt {
        /// The file, e.g. bench/REPORT.md.
        file: PathBuf,
        /// The section's heading, without its `#`s.
        #[arg(long)]
        section: String,
        /// Only the section's n-th block (1-based; blocks are separated by blank lines).
        #[arg(long)]
        block: Option<usize>,
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
        /// The metering profile (`src/offline_engine/METERING.md` §10) of canbench's server
        /// (passed to it as `OFFLINE_ENGINE_METERING`) and of the direct run.
        #[arg(long, env = "OFFLINE_ENGINE_METERING", default_value = "pocketic-13")]
        metering: Metering,
    },
    /// Where the pages of one create_order per message and of packed batches of 1,000 and
    /// 10,000 go on a deployable wasm, by region, under both metering profiles (how a lever is
    /// measured against the reference).
    Pages {
        /// The deployable canister wasm (built by scripts/build.sh).
        #[arg(long, default_value = "target/canister/bench_canister.wasm")]
        wasm: PathBuf,
    },
    /// Builds of the reference canister that differ in one setting (scripts/levers.sh), against
    /// the reference: cycles per write and pages per message of the same workloads as `pages`,
    /// under both metering profiles; prints Markdown.
    Levers {
        /// The reference's deployable wasm (built by scripts/build.sh).
        #[arg(long, default_value = "target/canister/bench_canister.wasm")]
        reference: PathBuf,
        /// The levers' wasms (scripts/build.sh lever), each named by its file stem.
        #[arg(required = true)]
        levers: Vec<PathBuf>,
        /// Each canister holds the full-scale fixture (100,000 users, 1,000,000 orders) instead
        /// of the small one (10,000 users, 20,000 orders).
        #[arg(long)]
        full_scale: bool,
    },
    /// The message-level runs (unbatched, submit + timer, client batch) through the pocket-ic
    /// client, beside the in-process runs of the same modes: prints a Markdown table labelled
    /// with the runtime the figures came from. Against offline-pocket-ic it fails (exit 1) when
    /// the cycles charged differ from the in-process fee model. Built with the feature
    /// `pocket-ic` (`cargo build --release -p bench_suite --features pocket-ic`).
    #[cfg(feature = "pocket-ic")]
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

fn main() -> ExitCode {
    match real_main() {
        Ok(code) => code,
        Err(e) => {
            eprintln!("bench-suite: error: {e:#}");
            ExitCode::from(2)
        }
    }
}

/// Parses the command line and runs the command.
fn real_main() -> Result<ExitCode> {
    let cli = Cli::parse();
    let mut progress = Progress::stderr();
    let p = &mut progress;
    match cli.command {
        Command::Run { scale, out, wasms } => commands::run::run(scale, &out, &wasms, p),
        Command::Check {
            baseline,
            threshold,
            summary,
            wasms,
        } => commands::check::run(&baseline, threshold, summary.as_deref(), &wasms, p),
        Command::Estimate { results, load } => commands::estimate::run(&results, &load),
        Command::DocFigures { root, write } => commands::doc_figures::run(&root, write),
        Command::Excerpt {
            file,
            section,
            block,
        } => commands::excerpt::run(&file, &section, block),
        Command::Pages { wasm } => commands::pages::run(&wasm, p),
        Command::Levers {
            reference,
            levers,
            full_scale,
        } => {
            let fixture = if full_scale {
                bench_suite::engine_runs::Fixture::FullScale
            } else {
                bench_suite::engine_runs::Fixture::Small
            };
            commands::levers::run(&reference, &levers, fixture, p)
        }
        Command::Reliability { wasm } => commands::reliability::run(&wasm, p),
        Command::BudgetFloor { wasm, divisor } => commands::budget_floor::run(&wasm, divisor, p),
        Command::CanbenchCheck {
            config,
            runner,
            threshold,
            trace,
            summary,
            metering,
        } => commands::canbench_check::run(
            config,
            runner,
            threshold,
            trace,
            summary.as_deref(),
            metering,
            p,
        ),
        #[cfg(feature = "pocket-ic")]
        Command::Messages {
            runtime,
            n,
            wasm,
            server,
        } => commands::messages::run(runtime, &n, &wasm, &server, p),
        Command::UpdateBaseline { baseline, wasms } => {
            commands::update_baseline::run(&baseline, &wasms, p)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }

    /// The peer's messages are shown in its section, which its canbench wasm makes: a
    /// deployable wasm alone would be measured for nothing, so it is refused.
    #[test]
    fn the_peers_deployable_wasm_needs_its_canbench_wasm() {
        let run = |args: &[&str]| Cli::try_parse_from(["bench-suite", "run"].iter().chain(args));
        assert!(run(&["--peer-wasm", "p.wasm"]).is_err());
        assert!(run(&["--peer-wasm", "p.wasm", "--peer-canbench-wasm", "c.wasm"]).is_ok());
        assert!(run(&["--peer-canbench-wasm", "c.wasm"]).is_ok());
    }
}
