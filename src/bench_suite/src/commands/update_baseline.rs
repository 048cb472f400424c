//! `bench-suite update-baseline`: the reduced-scale suite, written as the CI baseline.

use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, Result};

use super::Wasms;
use crate::progress::Progress;
use crate::regression::Baseline;
use crate::suite::{self, Scale};

/// Runs the CI-scale suite on `wasms` and writes its figures to `baseline`.
pub fn run(baseline: &Path, wasms: &Wasms, progress: &mut Progress) -> Result<ExitCode> {
    let results = suite::run(&wasms.config(Scale::Ci)?, progress)?;
    let b = Baseline {
        engine: results.engine.clone(),
        scale: Scale::Ci.label().into(),
        date: results.date.clone(),
        canbench_wasm_sha256: results.canbench_wasm.sha256.clone(),
        deployable_wasm_sha256: results.deployable_wasm.sha256.clone(),
        benches: suite::regression_figures(&results),
    };
    if let Some(dir) = baseline.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    b.write(baseline)?;
    println!(
        "wrote {} ({} benchmarks)",
        baseline.display(),
        b.benches.len()
    );
    Ok(ExitCode::SUCCESS)
}
