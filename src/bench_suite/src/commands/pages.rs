//! `bench-suite pages`: where the pages of one `create_order` per message and of packed batches
//! of 1,000 and 10,000 go on a deployable wasm, under both metering profiles
//! ([`crate::regions`]); how a lever (a build with other pragmas, another allocator...) is
//! measured against the reference.

use std::path::Path;
use std::process::ExitCode;

use anyhow::Result;

use crate::engine_runs;
use crate::fees::IC_2025;
use crate::profiles::{self, LEAD};
use crate::progress::Progress;

/// Prints the pages by region of `wasm`, and one line per workload with its cycles per write.
pub fn run(wasm: &Path, progress: &mut Progress) -> Result<ExitCode> {
    let engine = engine_runs::engine_with(LEAD)?;
    let program = engine_runs::load(&engine, wasm, crate::suite::BUILD_HINT_DEPLOYABLE)?;
    let workloads = profiles::page_regions(
        wasm,
        &engine,
        &program,
        engine_runs::Fixture::Small,
        &IC_2025,
        progress,
    )?;
    let lead = format!("engine: {}", engine_runs::profile_label(&LEAD));
    let old = format!(
        "engine: {} · {} (sha256 {})",
        engine_runs::profile_label(&offline_engine::Metering::POCKET_IC_13),
        wasm.display(),
        program.sha256_hex()
    );
    print!("{}", crate::regions::render(&workloads, &lead, &old));
    println!("\ncycles per write (13 nodes), tracker / PocketIC 13:");
    for w in &workloads {
        let n = w.writes_per_message.max(1) as f64;
        println!(
            "  {}: {:.0} / {:.0}",
            w.workload,
            w.cycles_per_message[0] / n,
            w.cycles_per_message[1] / n
        );
    }
    Ok(ExitCode::SUCCESS)
}
