//! `bench-suite estimate`: what one's own write load would cost on each measured path, from the
//! per-op costs of a suite run (`bench/results.json`).
//!
//! Per path and op kind, the cost of one write at N writes per message (or per flush) is read
//! off the message-level runs (cycles per op of `create_order`, an insert) by linear
//! interpolation in 1/N between the two measured N around it — exact when a run costs a fixed
//! part plus a part per op, as messages do — and held at the nearest measured N outside them.
//! One call per op sends every write alone and is priced at its largest run (its per-op cost no
//! longer depends on N there). Updates and deletes add the difference in instructions per op
//! between that kind and an insert in the canbench benches at the same N (`unbatched_*` for one
//! call per op, `batched_*` for the batched paths), priced at the fee per instruction. Nothing is
//! estimated for a path the results do not hold.

use std::fmt::Write;
use std::path::Path;

use anyhow::{Context, Result, bail, ensure};
use serde::Deserialize;

use crate::analysis::{GainRow, fmt_f, fmt_u};
use crate::message_bench::{Mode, ModeSummary};
use crate::suite::{Scale, WasmInfo};
use crate::summary::{cycles_text, padded_table};

/// Days in the month the estimate prices (365.25 / 12).
pub const DAYS_PER_MONTH: f64 = 30.4375;

/// The most ops one client batch carries (`execute_batch`'s limit).
pub const MAX_BATCH: u64 = 10_000;

/// The op kinds of a mix.
pub const KINDS: [&str; 3] = ["insert", "update", "delete"];

/// The fee figures the estimate needs, as `results.json` holds them.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Fees {
    /// The schedule's date.
    pub date: String,
    /// Subnet size the fees are given for.
    pub reference_nodes: u64,
    /// Cycles per 10 instructions.
    pub ten_update_instructions_execution_fee: u64,
    /// US dollars per XDR (1 T cycles).
    pub usd_per_xdr: f64,
    /// The date of the rate.
    pub usd_rate_date: String,
}

/// The parts of a suite run (`results.json`) an estimate is made of.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Measured {
    /// The engine the figures came from.
    pub engine: String,
    /// The run's date.
    pub date: String,
    /// Its scale.
    pub scale: Scale,
    /// The deployable wasm measured.
    pub deployable_wasm: WasmInfo,
    /// The fee schedule.
    pub fee_schedule: Fees,
    /// Message-level summaries: cycles per op by path and N.
    pub messages: Vec<ModeSummary>,
    /// canbench instructions per op by kind and N (unbatched and batched).
    pub gains: Vec<GainRow>,
}

impl Measured {
    /// Reads the figures of metering profile `profile` (`pocketic-13` or `ic-dmt-0441fbd7`,
    /// `METERING.md` §10) from `results.json`.
    pub fn read(path: &Path, profile: &str) -> Result<Measured> {
        let text = std::fs::read_to_string(path).with_context(|| {
            format!(
                "reading {} (write it with `scripts/bench.sh`)",
                path.display()
            )
        })?;
        let value: serde_json::Value =
            serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
        Measured::of_profile(value, profile).with_context(|| format!("reading {}", path.display()))
    }

    /// The figures of `profile` in the results `value`: the top level holds those of the rules
    /// of PocketIC 13, `ic_dmt` the same runs under the deterministic memory tracker.
    pub fn of_profile(mut value: serde_json::Value, profile: &str) -> Result<Measured> {
        let lead = crate::profiles::LEAD.name;
        if profile == lead {
            let Some(t) = value.get("ic_dmt").cloned() else {
                bail!(
                    "the results hold no figures under {lead} (written before the suite measured it): \
                     rerun scripts/bench.sh, or pass --profile {}",
                    offline_engine::Metering::POCKET_IC_13.name
                );
            };
            for key in ["engine", "messages", "gains"] {
                value[key] = t[key].clone();
            }
        } else if profile != offline_engine::Metering::POCKET_IC_13.name {
            bail!(
                "unknown metering profile `{profile}` (the suite measures {})",
                offline_engine::Metering::names().join(", ")
            );
        }
        Ok(serde_json::from_value(value)?)
    }
}

/// How the writes are grouped.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Grouping {
    /// N writes per message (client batch) or per flush (submit + timer).
    Batch(u64),
    /// The writes that arrive within this many milliseconds go together.
    FlushDelayMs(f64),
}

/// The load to price.
#[derive(Debug, Clone, PartialEq)]
pub struct Load {
    /// Writes per day.
    pub ops_per_day: f64,
    /// Share of inserts, updates and deletes (sums to 1).
    pub mix: [f64; 3],
    /// How writes are grouped on the batched paths.
    pub grouping: Grouping,
    /// Nodes of the subnet (13 or 34; others scale the 13-node fees by n/13).
    pub nodes: u64,
}

/// Parses `insert=70,update=20,delete=10` (weights, normalized to shares).
pub fn parse_mix(text: &str) -> Result<[f64; 3]> {
    let mut w = [0.0; 3];
    for part in text.split(',').filter(|p| !p.trim().is_empty()) {
        let (k, v) = part
            .split_once('=')
            .with_context(|| format!("--mix: `{part}` is not kind=weight"))?;
        let i = KINDS.iter().position(|x| *x == k.trim()).with_context(|| {
            format!(
                "--mix: unknown op kind `{}` (insert, update, delete)",
                k.trim()
            )
        })?;
        let v: f64 = v
            .trim()
            .parse()
            .with_context(|| format!("--mix: `{}` is not a number", v.trim()))?;
        ensure!(v.is_finite() && v >= 0.0, "--mix: weights are ≥ 0");
        w[i] += v;
    }
    let sum: f64 = w.iter().sum();
    ensure!(sum > 0.0, "--mix: the weights add up to 0");
    Ok(w.map(|x| x / sum))
}

/// The estimate for one path.
#[derive(Debug, Clone, PartialEq)]
pub struct PathEstimate {
    /// The path.
    pub mode: Mode,
    /// Writes per message or flush priced (1 for one call per op).
    pub n: u64,
    /// Which measured runs the figure comes from.
    pub note: Option<String>,
    /// Cycles per write, mix-weighted.
    pub cycles_per_op: f64,
    /// Cycles per day.
    pub cycles_per_day: f64,
    /// US dollars per month.
    pub usd_per_month: f64,
}

/// The whole estimate.
#[derive(Debug, Clone, PartialEq)]
pub struct Estimate {
    /// The load priced.
    pub load: Load,
    /// Writes per message or flush on the batched paths, before clamping to the measured runs.
    pub batch: u64,
    /// One row per measured path.
    pub paths: Vec<PathEstimate>,
}

/// Linear interpolation in 1/N through measured (N, value) points, held outside them; the note
/// says which runs the value comes from.
fn interpolate(points: &[(u64, f64)], n: u64) -> Option<(f64, Option<String>)> {
    let mut pts = points.to_vec();
    pts.sort_by_key(|p| p.0);
    let (first, last) = (*pts.first()?, *pts.last()?);
    if let Some(p) = pts.iter().find(|p| p.0 == n) {
        return Some((p.1, Some(format!("the run of N = {}", fmt_u(n)))));
    }
    if n < first.0 {
        let note = format!("held at the smallest run (N = {})", fmt_u(first.0));
        return Some((first.1, Some(note)));
    }
    if n > last.0 {
        let note = format!("held at the largest run (N = {})", fmt_u(last.0));
        return Some((last.1, Some(note)));
    }
    let i = pts.iter().position(|p| p.0 >= n)?;
    let (a, b) = (pts[i - 1], pts[i]);
    let (ia, ib, x) = (1.0 / a.0 as f64, 1.0 / b.0 as f64, 1.0 / n as f64);
    let t = (x - ia) / (ib - ia);
    Some((
        a.1 + t * (b.1 - a.1),
        Some(format!(
            "between the runs of N = {} and {}",
            fmt_u(a.0),
            fmt_u(b.0)
        )),
    ))
}

/// Cycles of one instruction on `nodes` nodes.
fn cycles_per_instruction(f: &Fees, nodes: u64) -> f64 {
    f.ten_update_instructions_execution_fee as f64 / 10.0 * nodes as f64 / f.reference_nodes as f64
}

/// Prices `load` on every path of `m`.
pub fn estimate(m: &Measured, load: &Load) -> Result<Estimate> {
    ensure!(
        load.ops_per_day.is_finite() && load.ops_per_day > 0.0,
        "the load must be more than 0 writes"
    );
    ensure!(load.nodes > 0, "a subnet has at least one node");
    let batch = match load.grouping {
        Grouping::Batch(n) => {
            ensure!(n > 0, "--batch must be at least 1");
            n
        }
        Grouping::FlushDelayMs(ms) => {
            ensure!(
                ms.is_finite() && ms > 0.0,
                "--flush-delay-ms must be more than 0"
            );
            (load.ops_per_day / 86_400.0 * ms / 1_000.0)
                .floor()
                .max(1.0) as u64
        }
    };
    let priced = batch.min(MAX_BATCH);
    // Column 0 of the message summaries is 13 nodes, 1 is 34; other sizes scale the 13-node figure.
    let per_op = |s: &ModeSummary| -> f64 {
        let c = match load.nodes {
            34 => s.cycles_per_million_ops[1],
            13 => s.cycles_per_million_ops[0],
            n => s.cycles_per_million_ops[0] * n as u128 / 13,
        };
        c as f64 / 1e6
    };
    let instruction = cycles_per_instruction(&m.fee_schedule, load.nodes);
    let mut paths = Vec::new();
    for mode in crate::summary::paths(&m.messages) {
        let runs: Vec<(u64, f64)> = m
            .messages
            .iter()
            .filter(|s| s.mode == mode)
            .map(|s| (s.n, per_op(s)))
            .collect();
        let alone = mode == Mode::Unbatched;
        let n = if alone {
            runs.iter().map(|r| r.0).max().unwrap_or(1)
        } else {
            priced
        };
        let Some((insert, note)) = interpolate(&runs, n) else {
            continue;
        };
        let mut cycles = 0.0;
        for (i, kind) in KINDS.iter().enumerate() {
            if load.mix[i] == 0.0 {
                continue;
            }
            let delta = if *kind == "insert" {
                0.0
            } else {
                let per = |k: &str| -> Vec<(u64, f64)> {
                    m.gains
                        .iter()
                        .filter(|g| g.kind == k)
                        .map(|g| {
                            (
                                g.n,
                                if alone {
                                    g.unbatched_per_op
                                } else {
                                    g.batched_per_op
                                },
                            )
                        })
                        .collect()
                };
                let (Some((k, _)), Some((ins, _))) =
                    (interpolate(&per(kind), n), interpolate(&per("insert"), n))
                else {
                    bail!(
                        "the results hold no canbench figures for {kind}: estimate inserts only (--mix insert=1)"
                    );
                };
                (k - ins) * instruction
            };
            cycles += load.mix[i] * (insert + delta).max(0.0);
        }
        let per_day = cycles * load.ops_per_day;
        let usd_per_month = per_day * DAYS_PER_MONTH / 1e12 * m.fee_schedule.usd_per_xdr;
        paths.push(PathEstimate {
            mode,
            n: if alone { 1 } else { n },
            note: if alone {
                Some(format!(
                    "each write its own message (run of N = {})",
                    fmt_u(n)
                ))
            } else {
                note
            },
            cycles_per_op: cycles,
            cycles_per_day: per_day,
            usd_per_month,
        });
    }
    ensure!(
        !paths.is_empty(),
        "the results hold no message-level runs to price"
    );
    Ok(Estimate {
        load: load.clone(),
        batch,
        paths,
    })
}

fn rate_text(per_day: f64) -> String {
    let per_second = per_day / 86_400.0;
    if per_second >= 1.0 {
        format!(
            "{} writes/day ({:.1} per second)",
            fmt_f(per_day),
            per_second
        )
    } else {
        format!("{} writes/day ({per_second:.4} per second)", fmt_f(per_day))
    }
}

/// Renders the estimate: where the figures come from, the load, and a table by path.
pub fn render(m: &Measured, e: &Estimate) -> String {
    let mut o = String::new();
    let f = &m.fee_schedule;
    let _ = writeln!(
        o,
        "Estimate from the run of {} (scale {}; engine: {}; deployable wasm sha256 {}…), fee schedule of {}, \
         1 T cycles = 1 XDR = US$ {:.5} ({}).",
        m.date,
        m.scale.label(),
        m.engine,
        &m.deployable_wasm.sha256[..m.deployable_wasm.sha256.len().min(12)],
        f.date,
        f.usd_per_xdr,
        f.usd_rate_date
    );
    let mix: Vec<String> = KINDS
        .iter()
        .zip(e.load.mix)
        .filter(|(_, s)| *s > 0.0)
        .map(|(k, s)| format!("{:.0}% {k}", s * 100.0))
        .collect();
    let grouping = match e.load.grouping {
        Grouping::Batch(n) => format!("{} writes per message or flush", fmt_u(n)),
        Grouping::FlushDelayMs(ms) => format!(
            "the writes of {} ms together: {} per message or flush",
            fmt_f(ms),
            fmt_u(e.batch)
        ),
    };
    let _ = writeln!(
        o,
        "Load: {}; {}; {grouping}{}; {}-node subnet.\n",
        rate_text(e.load.ops_per_day),
        mix.join(", "),
        if e.batch > MAX_BATCH {
            format!(
                " (priced at {}, the most one client batch carries)",
                fmt_u(MAX_BATCH)
            )
        } else {
            String::new()
        },
        e.load.nodes
    );
    let reference = e
        .paths
        .iter()
        .find(|p| p.mode == Mode::Unbatched)
        .map(|p| p.usd_per_month);
    let rows: Vec<Vec<String>> = e
        .paths
        .iter()
        .map(|p| {
            vec![
                p.mode.label().to_string(),
                fmt_u(p.n),
                cycles_text(p.cycles_per_op.round() as u128),
                cycles_text(p.cycles_per_day.round() as u128),
                format!("{:.2}", p.usd_per_month),
                match reference {
                    Some(r) if p.usd_per_month > 0.0 => format!("{:.1}×", r / p.usd_per_month),
                    _ => "—".to_string(),
                },
                p.note.clone().unwrap_or_default(),
            ]
        })
        .collect();
    o.push_str(&padded_table(
        &[
            "path",
            "writes per message",
            "cycles per write",
            "cycles per day",
            "US$ per month",
            "vs one call per op",
            "priced from",
        ],
        &[false, true, true, true, true, true, false],
        &rows,
    ));
    let _ = writeln!(
        o,
        "\nA month is {DAYS_PER_MONTH} days. Updates and deletes: the insert's measured message cost plus their \
         difference in instructions per op in the canbench benches. Storage and queries are not included."
    );
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::suite::tests::synthetic_results;

    pub(crate) fn measured() -> Measured {
        measured_under("pocketic-13").unwrap()
    }

    fn measured_under(profile: &str) -> Result<Measured> {
        let mut r = synthetic_results();
        r.date = "2026-01-01".into();
        Measured::of_profile(serde_json::to_value(&r).unwrap(), profile)
    }

    #[test]
    fn reads_what_the_suite_writes() {
        let m = measured();
        assert_eq!(m.engine, "offline (wasmtime, IC metering: pocketic-13)");
        assert_eq!(m.messages.len(), 12);
        assert_eq!(m.fee_schedule.reference_nodes, 13);
        let t = measured_under("ic-dmt-0441fbd7").unwrap();
        assert_eq!(t.engine, "offline (wasmtime, IC metering: ic-dmt-0441fbd7)");
        assert_eq!(t.messages.len(), 12);
        // The same runs, each message 9 tracked Wasm pages (720,000 instructions) dearer.
        assert_eq!(
            t.messages[0].billed_instructions,
            m.messages[0].billed_instructions + 720_000 * m.messages[0].messages
        );
        let err = measured_under("pocketic-14").unwrap_err().to_string();
        assert!(
            err.contains("unknown metering profile `pocketic-14`"),
            "{err}"
        );
        let mut old = synthetic_results();
        old.tracker = None;
        let err = Measured::of_profile(serde_json::to_value(&old).unwrap(), "ic-dmt-0441fbd7")
            .unwrap_err()
            .to_string();
        assert!(err.contains("no figures under ic-dmt-0441fbd7"), "{err}");
    }

    #[test]
    fn interpolation_is_exact_for_fixed_plus_per_op_costs() {
        // cost per op = 1,000,000 / N + 20: exact between the runs.
        let f = |n: u64| 1e6 / n as f64 + 20.0;
        let pts: Vec<(u64, f64)> = [1, 10, 100].iter().map(|n| (*n, f(*n))).collect();
        let (v, note) = interpolate(&pts, 40).unwrap();
        assert!((v - f(40)).abs() < 1e-9, "{v} vs {}", f(40));
        assert_eq!(note.as_deref(), Some("between the runs of N = 10 and 100"));
        assert_eq!(
            interpolate(&pts, 100).unwrap(),
            (f(100), Some("the run of N = 100".to_string()))
        );
        let (v, note) = interpolate(&pts, 5_000).unwrap();
        assert_eq!(v, f(100));
        assert!(note.unwrap().contains("largest run"));
    }

    #[test]
    fn a_batch_of_a_measured_n_costs_what_the_run_cost() {
        let m = measured();
        let load = Load {
            ops_per_day: 1_000_000.0,
            mix: [1.0, 0.0, 0.0],
            grouping: Grouping::Batch(100),
            nodes: 13,
        };
        let e = estimate(&m, &load).unwrap();
        for p in &e.paths {
            // One call per op: its largest run (N = 100 here too); the others: the run of N = 100.
            let run = m
                .messages
                .iter()
                .find(|s| s.mode == p.mode && s.n == 100)
                .unwrap();
            let per_op = run.cycles_per_million_ops[0] as f64 / 1e6;
            assert_eq!(p.cycles_per_op, per_op, "{:?}", p.mode);
            assert_eq!(p.cycles_per_day, per_op * 1e6);
        }
        // 34 nodes: the 34-node column.
        let e34 = estimate(
            &m,
            &Load {
                nodes: 34,
                ..load.clone()
            },
        )
        .unwrap();
        assert!(e34.paths[0].cycles_per_op > e.paths[0].cycles_per_op * 2.5);
        // A flush delay groups the writes that arrive within it: 1,000,000/day for 8.64 s = 100.
        let d = estimate(
            &m,
            &Load {
                grouping: Grouping::FlushDelayMs(8_640.0),
                ..load
            },
        )
        .unwrap();
        assert_eq!(d.batch, 100);
        assert_eq!(d.paths, e.paths);
    }

    #[test]
    fn bad_input_is_refused() {
        assert!(parse_mix("insert=1,upsert=2").is_err());
        assert!(parse_mix("insert=0").is_err());
        assert!(parse_mix("insert").is_err());
        assert_eq!(parse_mix("insert=3,delete=1").unwrap(), [0.75, 0.0, 0.25]);
        let m = measured();
        let load = Load {
            ops_per_day: 0.0,
            mix: [1.0, 0.0, 0.0],
            grouping: Grouping::Batch(10),
            nodes: 13,
        };
        assert!(estimate(&m, &load).is_err());
        let mut empty = m.clone();
        empty.messages.clear();
        let load = Load {
            ops_per_day: 10.0,
            ..load
        };
        assert!(estimate(&empty, &load).is_err());
    }

    #[test]
    fn the_estimate_renders_as_expected() {
        let m = measured();
        let load = Load {
            ops_per_day: 2_000_000.0,
            mix: parse_mix("insert=70,update=20,delete=10").unwrap(),
            grouping: Grouping::Batch(40),
            nodes: 13,
        };
        let text = render(&m, &estimate(&m, &load).unwrap());
        crate::report::tests::golden("estimate.txt", &text);
    }
}
