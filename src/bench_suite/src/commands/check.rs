//! `bench-suite check`: the reduced-scale suite against the committed CI baseline; fails when a
//! figure moved by the threshold or more, or a benchmark was added or removed.

use std::path::Path;
use std::process::ExitCode;

use anyhow::Result;

use super::{Wasms, exit_code, write_gate_summary};
use crate::pr_summary::{GateSummary, full_table_link};
use crate::progress::Progress;
use crate::regression::{self, Baseline};
use crate::suite::{self, Scale};

/// Checks the figures of a CI-scale run of `wasms` against `baseline`; also writes the pull
/// request's summary to `summary` if given.
pub fn run(
    baseline: &Path,
    threshold: f64,
    summary: Option<&Path>,
    wasms: &Wasms,
    progress: &mut Progress,
) -> Result<ExitCode> {
    let base = Baseline::read(baseline)?;
    let results = suite::run(&wasms.config(Scale::Ci)?, progress)?;
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
    if let Some(path) = summary {
        let context = format!(
            "Instructions of every canbench bench (CI scale) and message-level run, engine: {}, against `{}` \
             (written {}).",
            results.engine,
            baseline.display(),
            base.date
        );
        write_gate_summary(
            path,
            &GateSummary {
                gate: "Instruction check",
                context: &context,
                changes: &changes,
                threshold_pct: threshold,
                other_failures: &[],
                full_table: &full_table_link("the output of `scripts/check_regressions.sh`"),
                update_hint: "scripts/check_regressions.sh --update",
            },
        )?;
    }
    let fails = regression::fails(&changes);
    if fails {
        println!(
            "FAILED: the figures moved by {threshold}% or more (either way), or benchmarks were added or removed. \
             If intended, run `scripts/check_regressions.sh --update` and commit the baseline with the change."
        );
    } else {
        println!("OK: every figure is within {threshold}% of the baseline.");
    }
    Ok(exit_code(!fails))
}
