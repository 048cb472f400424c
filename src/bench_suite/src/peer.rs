//! The peer canister on ic-sqlite-vfs (`canisters/vfs_canister`, built by
//! `scripts/build_vfs.sh canbench`) beside the reference on ic-rusqlite: the same canbench
//! benches (same names, same fixture, same ops) run on the peer's canbench wasm on the offline
//! engine, the stable memory each canister holds after the batched/unbatched fixture, and what a
//! write costs on each at the 13-node fees the report prices the reference with
//! ([`crate::fees`]). `bench/peer_vfs.md` explains the figures (where the instructions go).
//!
//! The peer's `batched_<op>_<n>` run its client-batch path (one transaction of n ops); the
//! reference's run its queue (n submissions, one flush in one transaction). Both are the write
//! path inside the canister, without a message's Candid decoding and reply.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result, anyhow, ensure};
use bench_api::{BatchResult, Outcome, WriteResult};
use candid::{Decode, Encode};
use offline_engine::{Canister, Engine, Execution, MessageResult, Program, Settings};
use serde::Serialize;

use crate::analysis::{BATCH_SIZES, OP_KINDS};
use crate::charts::{Chart, SecondaryAxis, Series};
use crate::engine_runs::{self, CanbenchFigures, CanbenchRun};
use crate::fees::{CYCLES_PER_XDR, FeeSchedule};
use crate::progress::Progress;
use crate::scale::{Scale, WasmInfo};

/// The reference's binding, as the tables name it.
pub const REFERENCE: &str = "ic-rusqlite";
/// The peer's binding, as the tables name it.
pub const PEER: &str = "ic-sqlite-vfs";
/// Build hint of the peer's canbench wasm.
pub const BUILD_HINT: &str = "BENCH_SCALE_DIVISOR=<1|100> scripts/build_vfs.sh canbench";
/// The subnet size the side-by-side table prices (the report's first).
pub const NODES: u64 = 13;
/// The chart of cycles per write by N, both bindings.
pub const CHART_FILE: &str = "peer_cycles_per_write.svg";

/// The peer's figures in `results.json` (key `peer_ic_sqlite_vfs`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PeerResults {
    /// The peer's canbench wasm.
    pub canbench_wasm: WasmInfo,
    /// Its canbench benches on the engine (same names as the reference's).
    pub canbench: CanbenchRun,
    /// The workloads of where the pages go on its deployable wasm ([`pages`]); none: not
    /// measured.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pages: Option<PeerPages>,
    /// Stable memory of both canisters after the batched/unbatched fixture.
    pub stable_memory: StableAfterFixture,
}

/// Stable memory after the fixture of the batched/unbatched benches (10,000 users, 20,000
/// orders through `execute_batch`, the two indexes through `execute_sql`), bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct StableAfterFixture {
    /// The reference (its deployable wasm: ic-rusqlite on stable-fs).
    pub reference_bytes: u64,
    /// The peer (its canbench wasm, whose canister methods are the deployable's).
    pub peer_bytes: u64,
}

/// The peer's install argument: the empty Candid tuple `()` (`canbench.vfs.offline.yml`).
pub fn init_arg() -> Vec<u8> {
    Encode!().expect("the empty tuple encodes")
}

fn reply<'a>(method: &str, exec: &'a Execution) -> Result<&'a [u8]> {
    match &exec.result {
        MessageResult::Reply(b) => Ok(b),
        other => Err(anyhow!("{method}: no reply: {other:?}")),
    }
}

/// Installs `program` with `init` (the anonymous caller is the engine's default controller, so
/// it may write on both canisters), loads the batched/unbatched fixture as every message-level
/// run does, and returns the stable memory it then holds.
pub fn stable_after_fixture(engine: &Engine, program: &Program, init: &[u8]) -> Result<u64> {
    let (mut c, _) = Canister::install(engine, program, init, Settings::default())
        .context("installing for the fixture")?;
    for ops in engine_runs::fixture_batches() {
        let exec = c.update("execute_batch", &Encode!(&ops)?)?;
        let outcomes = Result::from(Decode!(reply("execute_batch", &exec)?, BatchResult)?)
            .map_err(|e| anyhow!("fixture execute_batch: {e:?}"))?;
        ensure!(
            outcomes.len() == ops.len()
                && outcomes
                    .iter()
                    .all(|o| matches!(o, Outcome::Committed { .. })),
            "fixture execute_batch: not every op committed"
        );
    }
    let exec = c.update("execute_sql", &Encode!(&engine_runs::fixture_indexes())?)?;
    Result::from(Decode!(reply("execute_sql", &exec)?, WriteResult)?)
        .map_err(|e| anyhow!("fixture indexes: {e:?}"))?;
    Ok(c.stable_size_bytes())
}

/// Runs the peer's canbench benches from `peer_wasm` (refused when built at another scale than
/// `scale`) and measures both canisters' stable memory after the fixture (`reference` is the
/// reference's deployable wasm, installed with its default settings as every message-level run).
pub fn run(
    engine: &Engine,
    peer_wasm: &Path,
    reference: &Program,
    scale: Scale,
    progress: &mut Progress,
) -> Result<PeerResults> {
    progress.step(&format!(
        "loading the peer ({PEER}) {}",
        peer_wasm.display()
    ));
    let program = engine_runs::load(engine, peer_wasm, BUILD_HINT)?;
    let canbench =
        engine_runs::run_canbench(engine, &program, &init_arg(), None, &|_| true, progress)?;
    crate::scale::check_scale(scale, &canbench)
        .with_context(|| format!("the peer's canbench wasm ({BUILD_HINT})"))?;
    progress.step("stable memory after the fixture, both canisters");
    let stable_memory = StableAfterFixture {
        reference_bytes: stable_after_fixture(
            engine,
            reference,
            &Encode!(&Some(bench_api::InitArgs::default()))?,
        )?,
        peer_bytes: stable_after_fixture(engine, &program, &init_arg())?,
    };
    Ok(PeerResults {
        canbench_wasm: WasmInfo {
            path: peer_wasm.display().to_string(),
            sha256: canbench.wasm_sha256.clone(),
        },
        canbench,
        pages: None,
        stable_memory,
    })
}

/// The peer's deployable wasm and the workloads of where the pages go on it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PeerPages {
    /// The peer's deployable wasm.
    pub wasm: WasmInfo,
    /// One `create_order` per message and packed batches of 1,000 and 10,000, under the tracker
    /// and the rules of PocketIC 13 ([`crate::profiles::page_regions`]).
    pub workloads: Vec<crate::regions::WorkloadPages>,
}

/// The workloads of the report's section on where the pages go (one `create_order` per
/// message, packed batches of 1,000 and 10,000), on the peer's deployable wasm at `peer_wasm`
/// holding the small fixture, under the tracker and the rules of PocketIC 13: the peer measured
/// as the reference is. Its `create_order` and `execute_batch_packed` take the reference's
/// arguments; its `init` takes none, and ignores the reference's install argument.
pub fn pages(peer_wasm: &Path, progress: &mut Progress) -> Result<PeerPages> {
    let engine = engine_runs::engine_with(crate::profiles::LEAD)?;
    let build = crate::levers::measure(
        &engine,
        PEER.into(),
        peer_wasm,
        engine_runs::Fixture::Small,
        "scripts/build_vfs.sh",
        progress,
    )
    .with_context(|| format!("the peer's pages ({})", peer_wasm.display()))?;
    Ok(PeerPages {
        wasm: WasmInfo {
            path: peer_wasm.display().to_string(),
            sha256: build.sha256,
        },
        workloads: build.workloads,
    })
}

/// Instructions per write of one op kind and N on both bindings, both paths.
#[derive(Debug, Clone, PartialEq)]
pub struct SideBySide {
    /// insert, update or delete.
    pub kind: &'static str,
    /// Writes.
    pub n: u64,
    /// Total instructions of `unbatched_<kind>_<n>`: reference, peer.
    pub unbatched: (u64, u64),
    /// Total instructions of `batched_<kind>_<n>`: reference, peer.
    pub batched: (u64, u64),
}

/// The rows both runs have every bench of, by op kind then N.
pub fn side_by_side(
    reference: &BTreeMap<String, CanbenchFigures>,
    peer: &BTreeMap<String, CanbenchFigures>,
) -> Vec<SideBySide> {
    let total = |b: &BTreeMap<String, CanbenchFigures>, name: &str| {
        b.get(name).map(|f| f.total.instructions)
    };
    let mut rows = Vec::new();
    for kind in OP_KINDS {
        for n in BATCH_SIZES {
            let (u, b) = (
                format!("unbatched_{kind}_{n}"),
                format!("batched_{kind}_{n}"),
            );
            if let (Some(ur), Some(up), Some(br), Some(bp)) = (
                total(reference, &u),
                total(peer, &u),
                total(reference, &b),
                total(peer, &b),
            ) {
                rows.push(SideBySide {
                    kind,
                    n,
                    unbatched: (ur, up),
                    batched: (br, bp),
                });
            }
        }
    }
    rows
}

/// Cycles per write of `total` instructions for `n` writes at `nodes`: unbatched, each write is
/// one update message (`execution_cost` of its share of the instructions: the base fee plus one
/// cycle per instruction); batched, the `n` writes are one message (one base fee for all).
/// Execution only: ingress reception and the message's Candid work are not in canbench's figure.
pub fn cycles_per_write(fees: &FeeSchedule, total: u64, n: u64, batched: bool, nodes: u64) -> f64 {
    let n = n.max(1);
    if batched {
        fees.execution_cost(total, nodes) as f64 / n as f64
    } else {
        fees.execution_cost(total / n, nodes) as f64
    }
}

/// US dollars per million writes at `cycles` per write.
pub fn usd_per_million(fees: &FeeSchedule, cycles: f64) -> f64 {
    fees.usd((cycles * 1e6).round() as u128)
}

/// The chart of cycles per insert by N on a 13-node subnet, one line per binding and path
/// (absent without the peer's results).
pub fn chart(
    reference: &CanbenchRun,
    peer: Option<&PeerResults>,
    fees: &FeeSchedule,
    footer: String,
) -> Option<(String, Chart)> {
    let peer = peer?;
    let rows = side_by_side(&reference.benches, &peer.canbench.benches);
    let series = |label: String, pick: &dyn Fn(&SideBySide) -> u64, batched: bool| Series {
        label,
        points: rows
            .iter()
            .filter(|row| row.kind == "insert")
            .map(|row| {
                (
                    row.n as f64,
                    cycles_per_write(fees, pick(row), row.n, batched, NODES),
                )
            })
            .collect(),
    };
    let series = vec![
        series(
            format!("{REFERENCE}, one message per write"),
            &|row| row.unbatched.0,
            false,
        ),
        series(
            format!("{PEER}, one message per write"),
            &|row| row.unbatched.1,
            false,
        ),
        series(
            format!("{REFERENCE}, N writes in one transaction (queue + flush)"),
            &|row| row.batched.0,
            true,
        ),
        series(
            format!("{PEER}, N writes in one transaction (client batch)"),
            &|row| row.batched.1,
            true,
        ),
    ];
    if series.iter().all(|s| s.points.is_empty()) {
        return None;
    }
    Some((
        CHART_FILE.to_string(),
        Chart {
            title: format!(
                "{PEER} beside {REFERENCE}: cycles per insert by N ({NODES}-node subnet, execution)"
            ),
            footer,
            x_label: "N: writes per run".into(),
            y_label: "cycles per write".into(),
            secondary: Some(SecondaryAxis {
                label: "US$ per million writes".into(),
                factor: 1e6 * fees.usd_per_xdr / CYCLES_PER_XDR,
            }),
            series,
        },
    ))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::engine_runs::Measured;
    use crate::fees::IC_2025;

    fn figures(total: u64) -> CanbenchFigures {
        CanbenchFigures {
            total: Measured {
                calls: 1,
                instructions: total,
                ..Default::default()
            },
            scopes: Default::default(),
        }
    }

    /// The peer's figures of the golden tests: the committed CI-scale results of
    /// `canbench_results.vfs.offline.yml` for inserts at N = 1 and 1,000 (two points per line),
    /// and the synthetic tracker's workload of where the pages go with dearer messages and one
    /// heap page more accessed and written.
    pub(crate) fn synthetic_peer() -> PeerResults {
        let mut workloads = crate::profiles::tests::synthetic_tracker().regions;
        for w in &mut workloads {
            w.cycles_per_message = [
                w.cycles_per_message[0] * 1.25,
                w.cycles_per_message[1] * 1.1,
            ];
            let stack = w
                .regions
                .get_mut("heap: stack")
                .expect("the synthetic stack region");
            stack.accessed += 1.0;
            stack.dirty += 1.0;
        }
        let benches = [
            ("unbatched_insert_1", 375_005),
            ("batched_insert_1", 375_322),
            ("unbatched_insert_1000", 349_848_000),
            ("batched_insert_1000", 38_392_000),
        ]
        .into_iter()
        .map(|(n, t)| (n.to_string(), figures(t)))
        .collect();
        PeerResults {
            canbench_wasm: WasmInfo {
                path: "v.wasm".into(),
                sha256: "ef".repeat(32),
            },
            canbench: CanbenchRun {
                wasm_sha256: "ef".repeat(32),
                benches,
                wall_seconds: 1.0,
            },
            pages: Some(PeerPages {
                wasm: WasmInfo {
                    path: "target/canister/vfs_canister.wasm".into(),
                    sha256: "ab".repeat(32),
                },
                workloads,
            }),
            stable_memory: StableAfterFixture {
                reference_bytes: 83_951_616,
                peer_bytes: 8_454_144,
            },
        }
    }

    #[test]
    fn the_peer_installs_with_the_empty_tuple_of_its_canbench_configuration() {
        // canbench.vfs.offline.yml: init_args.hex 4449444c0000.
        assert_eq!(hex::encode(init_arg()), "4449444c0000");
    }

    #[test]
    fn one_message_per_write_pays_the_base_fee_each_time_a_batch_once() {
        let f = IC_2025;
        // 13 nodes: 5 M base + 1 cycle per instruction.
        assert_eq!(cycles_per_write(&f, 200_000, 1, false, 13), 5_200_000.0);
        assert_eq!(
            cycles_per_write(&f, 200_000_000, 1_000, false, 13),
            5_200_000.0
        );
        assert_eq!(cycles_per_write(&f, 20_000_000, 1_000, true, 13), 25_000.0);
        // 34 nodes scale by 34/13.
        assert_eq!(
            cycles_per_write(&f, 20_000_000, 1_000, true, 34),
            (25_000_000u128 * 34 / 13) as f64 / 1_000.0
        );
        // A million writes at 25,000 cycles: 25 G cycles = 0.025 XDR.
        let usd = usd_per_million(&f, 25_000.0);
        assert!((usd - 0.025 * f.usd_per_xdr).abs() < 1e-12, "{usd}");
    }

    #[test]
    fn rows_need_all_four_benches() {
        let reference: BTreeMap<String, CanbenchFigures> = [
            ("unbatched_insert_1", 243_589),
            ("batched_insert_1", 274_794),
            ("unbatched_insert_1000", 195_886_000),
            ("batched_insert_1000", 21_225_000),
            ("unbatched_update_1", 132_544),
            ("batched_update_1", 164_087),
        ]
        .into_iter()
        .map(|(n, t)| (n.to_string(), figures(t)))
        .collect();
        let rows = side_by_side(&reference, &synthetic_peer().canbench.benches);
        // The peer has no update benches here: only the two insert rows.
        assert_eq!(rows.len(), 2);
        assert_eq!(
            rows[1],
            SideBySide {
                kind: "insert",
                n: 1_000,
                unbatched: (195_886_000, 349_848_000),
                batched: (21_225_000, 38_392_000),
            }
        );
    }
}
