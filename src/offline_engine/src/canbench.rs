//! canbench benchmarks run in-process: the one place the offline path installs a canbench wasm
//! and calls its `__canbench__<name>` queries as canbench 0.7 does.
//!
//! The canbench CLI itself is the real one (`canbench --runtime-path <offline-pocket-ic>`), which
//! reaches this engine through the `pocket_ic_server` crate. What runs the benchmarks without a
//! server (the bench suite, tests) shares [`install`] and [`run_benchmark`], so it sends what
//! canbench sends: one canister on a benchmarking subnet installed with the configured init
//! argument (empty by default), stable memory loaded after install if configured, and every
//! benchmark a non-replicated query (its changes discarded, so each starts from the post-install
//! state) with the argument `Encode!(&())`.

use std::collections::BTreeMap;

use candid::{CandidType, Deserialize};
use serde::Serialize;

use crate::{Canister, Engine, EngineError, Execution, MessageResult, Program, Settings};

/// The label of every figure this engine produces (reports, results, the server's logs).
pub const ENGINE_LABEL: &str = "offline (wasmtime, IC metering)";

/// `Encode!(&())`: the argument canbench passes to every benchmark query.
pub const BENCH_ARG: &[u8] = b"DIDL\x00\x00";

/// Prefix of the query exports canbench runs.
pub const BENCH_PREFIX: &str = "__canbench__";

/// Errors of a benchmark run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CanbenchError {
    /// The engine failed (load, install, execution).
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// A benchmark did not reply with a decodable `BenchResult`.
    #[error("benchmark {name}: {message}")]
    Bench {
        /// The benchmark.
        name: String,
        /// What went wrong.
        message: String,
    },
}

/// canbench-rs's `Measurement` (fields optional so results of older canbench-rs decode too).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, CandidType, Deserialize, Serialize)]
pub struct Measurement {
    /// Number of calls (1 for the total).
    #[serde(default)]
    pub calls: Option<u64>,
    /// Instructions (performance counter delta).
    #[serde(default)]
    pub instructions: Option<u64>,
    /// Heap growth in 64 KiB pages.
    #[serde(default)]
    pub heap_increase: Option<u64>,
    /// Stable memory growth in 64 KiB pages.
    #[serde(default)]
    pub stable_memory_increase: Option<u64>,
}

impl Measurement {
    /// Instructions, 0 when absent.
    pub fn instructions(&self) -> u64 {
        self.instructions.unwrap_or(0)
    }
}

/// canbench-rs's `BenchResult`.
#[derive(Debug, Clone, Default, PartialEq, Eq, CandidType, Deserialize, Serialize)]
pub struct BenchResult {
    /// The whole benchmark.
    pub total: Measurement,
    /// Named scopes (`bench_scope`).
    #[serde(default)]
    pub scopes: BTreeMap<String, Measurement>,
}

/// One benchmark's result and the query that produced it.
#[derive(Debug, Clone)]
pub struct BenchRun {
    /// What the benchmark reported.
    pub result: BenchResult,
    /// The query (the engine's own count includes canbench-rs's harness; wall time).
    pub execution: Execution,
}

/// Installs `program` as canbench does: a benchmarking subnet (PocketIC's limits), 10^15
/// cycles, `init_arg` as the install argument, then `stable_memory` (canbench's
/// `stable_memory.file`) replacing whatever init wrote. Errors: init traps, instantiation.
pub fn install(
    engine: &Engine,
    program: &Program,
    init_arg: &[u8],
    stable_memory: Option<&[u8]>,
) -> Result<Canister, EngineError> {
    let (mut canister, _) = Canister::install(engine, program, init_arg, Settings::benchmarking())?;
    if let Some(bytes) = stable_memory {
        canister.set_stable_memory(bytes);
    }
    Ok(canister)
}

/// Runs benchmark `name` (the export `canister_query __canbench__<name>`) as canbench does: a
/// non-replicated query with [`BENCH_ARG`] as the anonymous caller, whose reply decodes as
/// [`BenchResult`]. Errors: the engine fails, or the query does not reply with a `BenchResult`.
pub fn run_benchmark(canister: &mut Canister, name: &str) -> Result<BenchRun, CanbenchError> {
    let execution = canister.query(&format!("{BENCH_PREFIX}{name}"), BENCH_ARG)?;
    let bytes = match &execution.result {
        MessageResult::Reply(b) => b,
        other => {
            return Err(CanbenchError::Bench {
                name: name.to_string(),
                message: format!("no reply: {other:?}"),
            });
        }
    };
    let result = candid::decode_one::<BenchResult>(bytes).map_err(|e| CanbenchError::Bench {
        name: name.to_string(),
        message: format!("cannot decode BenchResult: {e}"),
    })?;
    Ok(BenchRun { result, execution })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bench_arg_is_the_candid_encoding_of_unit() {
        assert_eq!(BENCH_ARG, candid::encode_args(()).unwrap());
    }

    #[test]
    fn decodes_canbench_rs_bench_result() {
        // The candid type canbench-rs 0.7 replies with.
        #[derive(CandidType)]
        struct M {
            calls: u64,
            instructions: u64,
            heap_increase: u64,
            stable_memory_increase: u64,
        }
        #[derive(CandidType)]
        struct B {
            total: M,
            scopes: BTreeMap<String, M>,
        }
        let m = || M {
            calls: 1,
            instructions: 42,
            heap_increase: 2,
            stable_memory_increase: 3,
        };
        let bytes = candid::encode_one(B {
            total: m(),
            scopes: [("s".to_string(), m())].into(),
        })
        .unwrap();
        let r: BenchResult = candid::decode_one(&bytes).unwrap();
        assert_eq!(r.total.instructions, Some(42));
        assert_eq!(r.scopes["s"].stable_memory_increase, Some(3));
    }
}
