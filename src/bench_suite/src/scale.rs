//! The suite's scale and the wasms it measures: what every run, the peer's among them, reads
//! before it starts (a leaf: it imports neither the suite nor the peer, which both use it).

use anyhow::Result;
use serde::{Deserialize, Serialize};

use crate::analysis;
use crate::engine_runs::CanbenchRun;

/// Suite scale.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
pub enum Scale {
    /// The scale of the ic-rusqlite users/orders benchmark (100k users, 1M orders; canbench wasm built with BENCH_SCALE_DIVISOR=1);
    /// message benchmarks up to N = 10,000.
    Full,
    /// CI scale (canbench wasm built with BENCH_SCALE_DIVISOR=100); message benchmarks up to 1,000.
    Ci,
}

impl Scale {
    /// Label.
    pub fn label(self) -> &'static str {
        match self {
            Scale::Full => "full",
            Scale::Ci => "ci",
        }
    }
    /// BENCH_SCALE_DIVISOR the canbench wasm is expected to be built with.
    pub fn divisor(self) -> u64 {
        match self {
            Scale::Full => 1,
            Scale::Ci => 100,
        }
    }
    /// N of the message-level benchmarks.
    pub fn message_sizes(self) -> &'static [u64] {
        match self {
            Scale::Full => &[1, 10, 100, 1_000, 10_000],
            Scale::Ci => &[1, 10, 100, 1_000],
        }
    }

    /// N of the message-level runs on the full-scale fixture (none at CI scale: each run
    /// builds 1,000,000 orders first).
    pub fn full_fixture_message_sizes(self) -> &'static [u64] {
        match self {
            Scale::Full => &[1, 10, 100, 1_000],
            Scale::Ci => &[],
        }
    }
}

/// A wasm that was measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WasmInfo {
    /// Path as given.
    pub path: String,
    /// SHA-256 of the file.
    pub sha256: String,
}

/// Refuses a canbench wasm built at another scale than requested, judged by `users_orders_add_users`
/// (100,000 users at full scale; 1,000 at CI scale): below 10% of the published figure at full
/// scale, or above it at CI scale, the wasm was built with another BENCH_SCALE_DIVISOR, and
/// its figures would be mislabelled.
pub fn check_scale(scale: Scale, canbench: &CanbenchRun) -> Result<()> {
    let Some(users) = canbench
        .benches
        .get("users_orders_add_users")
        .map(|b| b.total.instructions)
    else {
        return Ok(());
    };
    let published = analysis::USERS_ORDERS_BENCHMARK[0].2;
    let full_like = users >= published / 10;
    anyhow::ensure!(
        full_like == (scale == Scale::Full),
        "the canbench wasm does not match --scale {}: users_orders_add_users took {users} instructions (published at full \
         scale: {published}); rebuild it with `BENCH_SCALE_DIVISOR={} scripts/build.sh canbench`",
        scale.label(),
        scale.divisor()
    );
    Ok(())
}
