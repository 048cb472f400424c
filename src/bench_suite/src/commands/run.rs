//! `bench-suite run`: the whole suite at a scale; writes REPORT.md, results.json and the charts,
//! then prints what a million writes cost.

use std::path::Path;
use std::process::ExitCode;

use anyhow::Result;

use super::Wasms;
use crate::progress::Progress;
use crate::suite::{self, Scale};

/// Runs the suite at `scale` on `wasms` and writes its files under `out`.
pub fn run(scale: Scale, out: &Path, wasms: &Wasms, progress: &mut Progress) -> Result<ExitCode> {
    progress.step(&format!(
        "bench-suite run --scale {} (engine: {})",
        scale.label(),
        crate::engine_runs::ENGINE_LABEL
    ));
    let results = suite::run(&wasms.config(scale)?, progress)?;
    let files = crate::output::write_all(&results, out)?;
    for f in &files {
        println!("wrote {}", f.display());
    }
    progress.step(&format!(
        "done: suite wall time {:.1} s",
        results.wall_seconds
    ));
    let summary = crate::summary::summarize(&results.messages, &results.fee_schedule);
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
    print!("{}", crate::summary::render_markdown(&summary, &source));
    Ok(ExitCode::SUCCESS)
}
