//! `bench-suite estimate`: one's own write load priced on every measured path from a suite run's
//! per-op costs ([`crate::estimate`] does the work).

use std::path::Path;
use std::process::ExitCode;

use anyhow::Result;

use crate::estimate::{self, Grouping, Load, Measured};

/// The load as the command line gives it: writes per day or per second, the op mix, writes per
/// batch or a flush delay, and the subnet's nodes.
#[derive(clap::Args, Debug, Clone)]
pub struct LoadArgs {
    /// Writes per day.
    #[arg(
        long,
        conflicts_with = "ops_per_second",
        required_unless_present = "ops_per_second"
    )]
    pub ops_per_day: Option<f64>,
    /// Writes per second (instead of per day).
    #[arg(long)]
    pub ops_per_second: Option<f64>,
    /// The op mix as weights, e.g. `insert=70,update=20,delete=10`.
    #[arg(long, default_value = "insert=1")]
    pub mix: String,
    /// Writes per message (client batch) or per flush (submit + timer).
    #[arg(
        long,
        conflicts_with = "flush_delay_ms",
        required_unless_present = "flush_delay_ms"
    )]
    pub batch: Option<u64>,
    /// Group the writes that arrive within this many milliseconds instead.
    #[arg(long)]
    pub flush_delay_ms: Option<f64>,
    /// Nodes of the subnet (13 or 34 are measured; other sizes scale the 13-node fees).
    #[arg(long, default_value_t = 13)]
    pub subnet: u64,
    /// The metering profile whose figures price the load: `ic-dmt-0441fbd7` (the replica's
    /// deterministic memory tracker) or `pocketic-13` (the rules of PocketIC 13 and canbench
    /// 0.7.0); see `src/offline_engine/METERING.md` §10.
    #[arg(long, default_value = crate::profiles::LEAD.name)]
    pub profile: String,
}

impl LoadArgs {
    /// The load these arguments describe.
    pub fn load(&self) -> Result<Load> {
        let ops_per_day = match (self.ops_per_day, self.ops_per_second) {
            (Some(d), _) => d,
            (None, Some(s)) => s * 86_400.0,
            (None, None) => anyhow::bail!("give --ops-per-day or --ops-per-second"),
        };
        let grouping = match (self.batch, self.flush_delay_ms) {
            (Some(n), _) => Grouping::Batch(n),
            (None, Some(ms)) => Grouping::FlushDelayMs(ms),
            (None, None) => anyhow::bail!("give --batch or --flush-delay-ms"),
        };
        Ok(Load {
            ops_per_day,
            mix: estimate::parse_mix(&self.mix)?,
            grouping,
            nodes: self.subnet,
        })
    }
}

/// Prices `load` from the suite's results at `results` and prints the estimate.
pub fn run(results: &Path, load: &LoadArgs) -> Result<ExitCode> {
    let measured = Measured::read(results, &load.profile)?;
    let e = estimate::estimate(&measured, &load.load()?)?;
    print!("{}", estimate::render(&measured, &e));
    Ok(ExitCode::SUCCESS)
}
