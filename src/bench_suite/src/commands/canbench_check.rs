//! `bench-suite canbench-check`: the CI gate of the canbench results, run by the real canbench
//! through offline-pocket-ic ([`crate::canbench_check`] does the work; this prints it).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Result;

use super::{exit_code, write_gate_summary};
use crate::canbench_check::{CheckOptions, CheckOutcome};
use offline_engine::Metering;

use crate::engine_runs::profile_label;
use crate::pr_summary::{GateSummary, full_table_link};
use crate::progress::Progress;
use crate::regression;

/// Runs the gate on the repository in the working directory with canbench configuration
/// `config` through `runner` (also `--instruction-tracing` of the benchmarks named by `trace`),
/// prints its table and verdict, and writes the pull request's summary to `summary` if given.
pub fn run(
    config: PathBuf,
    runner: PathBuf,
    threshold: f64,
    trace: Option<String>,
    summary: Option<&Path>,
    metering: Metering,
    progress: &mut Progress,
) -> Result<ExitCode> {
    let engine = profile_label(&metering);
    // What the summary and the verdict name: this configuration's results file, and the command
    // that rewrites it (scripts/canbench.sh reads the configuration from CANBENCH_CFG_FILE).
    let results = crate::canbench_check::CanbenchConfig::read(&config)?.results_path();
    let update = persist_command(&config, &metering);
    let options = CheckOptions {
        repo: PathBuf::from("."),
        config,
        runner,
        threshold,
        trace,
        metering,
    };
    let outcome = crate::canbench_check::run(&options, progress)?;
    println!(
        "\ncanbench results against the committed ones (engine: {engine}, noise threshold {threshold}%):\n"
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
    if let Some(path) = summary {
        let other = other_failures(&outcome);
        let context = format!(
            "canbench 0.7.0 through offline-pocket-ic (engine: {engine}), every figure it reports against the \
             `{}` committed at HEAD.",
            results.display()
        );
        write_gate_summary(
            path,
            &GateSummary {
                gate: "canbench gate",
                context: &context,
                changes: &outcome.changes,
                threshold_pct: threshold,
                other_failures: &other,
                full_table: &full_table_link("the output of `scripts/check_canbench.sh`"),
                update_hint: &update,
            },
        )?;
    }
    println!(
        "Wall time: canbench through offline-pocket-ic {:.1} s (including its build_cmd); \
         the engine's direct run of the same benchmarks {:.1} s.",
        outcome.canbench_seconds, outcome.direct_seconds
    );
    if outcome.passed() {
        println!("OK: the committed canbench results are up to date.");
    } else {
        println!(
            "FAILED: the committed canbench results ({}) are not up to date. If the change is intended, \
             run `{update}` and commit the results file with it.",
            results.display()
        );
    }
    Ok(exit_code(outcome.passed()))
}

/// The command that rewrites the results of `config`: `scripts/canbench.sh --persist`, with
/// `CANBENCH_CFG_FILE` when the configuration is not its default and `OFFLINE_ENGINE_METERING`
/// when the profile is not.
fn persist_command(config: &Path, metering: &Metering) -> String {
    let mut env = String::new();
    if *metering != Metering::default() {
        env.push_str(&format!("OFFLINE_ENGINE_METERING={} ", metering.name));
    }
    if config != Path::new("canbench.offline.yml") {
        env.push_str(&format!("CANBENCH_CFG_FILE={} ", config.display()));
    }
    format!("{env}scripts/canbench.sh --persist")
}

/// The gate's failures besides moved figures, one line each.
fn other_failures(outcome: &CheckOutcome) -> Vec<String> {
    outcome
        .mismatches
        .iter()
        .map(|m| format!("differs from the engine's direct run: {m}"))
        .chain(
            outcome
                .missing_flamegraphs
                .iter()
                .map(|f| format!("no fresh flamegraph: {f}")),
        )
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_update_command_names_a_configuration_other_than_the_default() {
        let old = Metering::POCKET_IC_13;
        assert_eq!(
            persist_command(Path::new("canbench.offline.yml"), &old),
            "scripts/canbench.sh --persist"
        );
        assert_eq!(
            persist_command(Path::new("canbench.vfs.offline.yml"), &old),
            "CANBENCH_CFG_FILE=canbench.vfs.offline.yml scripts/canbench.sh --persist"
        );
        assert_eq!(
            persist_command(Path::new("canbench.ic-dmt.offline.yml"), &Metering::IC_DMT),
            "OFFLINE_ENGINE_METERING=ic-dmt-0441fbd7 CANBENCH_CFG_FILE=canbench.ic-dmt.offline.yml \
             scripts/canbench.sh --persist"
        );
    }
}
