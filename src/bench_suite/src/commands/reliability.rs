//! `bench-suite reliability`: the reliability scenarios and the worst-case flush, printed as a
//! table; fails if an acknowledged op was lost or altered, or an op failed without a cause.

use std::path::Path;
use std::process::ExitCode;

use anyhow::Result;

use crate::progress::Progress;
use crate::reliability::{self, ScenarioResult, WorstCaseFlush};

/// Runs every scenario and the worst-case flush on `wasm` and prints them.
pub fn run(wasm: &Path, progress: &mut Progress) -> Result<ExitCode> {
    let results = reliability::run_all(wasm, progress)?;
    print!("{}", scenario_table(&results));
    let w = reliability::worst_case_flush(wasm, progress)?;
    print!("{}", worst_case_lines(&w));
    println!("(engine: {})", crate::engine_runs::ENGINE_LABEL);
    if reliability::all_safe(&results) {
        Ok(ExitCode::SUCCESS)
    } else {
        println!(
            "FAILED: an acknowledged op was lost or altered, or an op failed without a cause of its own"
        );
        Ok(ExitCode::from(1))
    }
}

/// The scenarios' table as the command prints it (figures without separators).
fn scenario_table(results: &[ScenarioResult]) -> String {
    let mut o = String::from(
        "| scenario | acknowledged | committed | failed | failed without a cause | lost | altered | applied twice | refused | trapped | timer runs to drain |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for x in results {
        o.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
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
        ));
    }
    o
}

/// The worst-case flush and the varying-cost run, one line each.
fn worst_case_lines(w: &WorstCaseFlush) -> String {
    format!(
        "\nworst-case flush, budget {}: {} ops then a heavy op: {} instructions ({:.2}× budget); the heavy op alone: {} ({:.2}×)\n\
         varying cost: {} ops at budget {} for a {} limit: {} flushes, {} capped at 3 × budget, {} trapped; the largest message {} instructions ({:.3}× budget)\n",
        w.budget,
        w.ops_before,
        w.mixed_flush_instructions,
        w.mixed_flush_instructions as f64 / w.budget as f64,
        w.alone_flush_instructions,
        w.alone_flush_instructions as f64 / w.budget as f64,
        w.varying_ops,
        w.varying_budget,
        w.varying_limit,
        w.varying_flushes,
        w.varying_capped,
        w.varying_trapped,
        w.varying_most,
        w.varying_most as f64 / w.varying_budget.max(1) as f64
    )
}
