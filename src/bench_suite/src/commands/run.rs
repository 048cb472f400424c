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
    println!(
        "\nWhat a million writes cost ({}):",
        out.join("REPORT.md").display()
    );
    // The replica's rules with the tracker first, as the report leads with them.
    let mut profiles = Vec::new();
    if let Some(t) = &results.tracker {
        profiles.push((&t.engine, &t.messages));
    }
    profiles.push((&results.engine, &results.messages));
    for (engine, messages) in profiles {
        let summary = crate::summary::summarize(messages, &results.fee_schedule);
        let source = format!(
            "engine: {} · {} · scale {} · fee schedule of {}, 1 T cycles = 1 XDR = US$ {:.5}",
            engine,
            results.date,
            scale.label(),
            results.fee_schedule.date,
            results.fee_schedule.usd_per_xdr
        );
        println!();
        print!("{}", crate::summary::render_markdown(&summary, &source));
    }
    Ok(ExitCode::SUCCESS)
}
