//! The `bench-suite` commands, one module each: `main.rs` parses the command line and calls the
//! command's `run`, which does the work, prints what the command prints and returns its exit
//! code (0, or 1 when the command's check fails).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Result;

use crate::suite::{Scale, SuiteConfig};

pub mod budget_floor;
pub mod canbench_check;
pub mod check;
pub mod doc_figures;
pub mod estimate;
pub mod excerpt;
pub mod levers;
#[cfg(feature = "pocket-ic")]
pub mod messages;
pub mod pages;
pub mod reliability;
pub mod run;
pub mod update_baseline;

/// The wasms a suite run measures, and the canbench configuration of the benches.
#[derive(clap::Args, Clone, Debug)]
pub struct Wasms {
    /// The deployable canister wasm (built by scripts/build.sh).
    #[arg(long, default_value = "target/canister/bench_canister.wasm")]
    pub wasm: PathBuf,
    /// The canbench flavour of the wasm (built by `BENCH_SCALE_DIVISOR=<1|100> scripts/build.sh canbench`).
    #[arg(long, default_value = "target/canister/bench_canister_canbench.wasm")]
    pub canbench_wasm: PathBuf,
    /// The canbench configuration whose install argument (`init_args`) the benches get.
    #[arg(long, default_value = "canbench.yml")]
    pub canbench_config: PathBuf,
    /// The canbench wasm of the peer on ic-sqlite-vfs (`BENCH_SCALE_DIVISOR=<1|100> scripts/build_vfs.sh canbench`): its benches run beside the reference's.
    #[arg(long)]
    pub peer_canbench_wasm: Option<PathBuf>,
    /// The deployable wasm of the peer on ic-sqlite-vfs (`scripts/build_vfs.sh`): the report's workloads of where the pages go run on it beside the reference's, under both metering profiles (with `--peer-canbench-wasm`, whose section shows them).
    #[arg(long, requires = "peer_canbench_wasm")]
    pub peer_wasm: Option<PathBuf>,
}

impl Wasms {
    /// The suite's configuration at `scale` (reads the canbench configuration).
    pub fn config(&self, scale: Scale) -> Result<SuiteConfig> {
        Ok(SuiteConfig {
            scale,
            deployable_wasm: self.wasm.clone(),
            canbench_wasm: self.canbench_wasm.clone(),
            canbench_init_arg: crate::canbench_check::CanbenchConfig::read(&self.canbench_config)?
                .init_arg()?,
            peer_canbench_wasm: self.peer_canbench_wasm.clone(),
            peer_wasm: self.peer_wasm.clone(),
        })
    }
}

/// Exit code 0 if `ok`, else 1 (a check failed).
fn exit_code(ok: bool) -> ExitCode {
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

/// Writes a gate's short Markdown summary for a pull request to `path` and says so.
fn write_gate_summary(path: &Path, summary: &crate::pr_summary::GateSummary) -> Result<()> {
    crate::pr_summary::write(path, &crate::pr_summary::render(summary))?;
    println!("wrote {}", path.display());
    Ok(())
}
