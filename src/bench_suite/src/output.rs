//! Writes the suite's files: `REPORT.md`, `results.json` and the SVG charts, all in one directory.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::analysis::{BATCH_SIZES, OP_KINDS};
use crate::charts::{self, Chart, SecondaryAxis, Series};
use crate::fees::{CYCLES_PER_XDR, SUBNET_SIZES};
use crate::report::{self, ChartLink};
use crate::suite::SuiteResults;

/// The footer of every chart: engine, date, scale and the fee schedule (or that the figures are
/// instructions, which no fee applies to).
fn footer(r: &SuiteResults, priced: bool) -> String {
    let f = &r.fee_schedule;
    let fees = if priced {
        format!(
            "fees: IC application subnet, schedule of {}; 1 T cycles = 1 XDR = US$ {:.5} ({})",
            f.date, f.usd_per_xdr, f.usd_rate_date
        )
    } else {
        "instructions as the IC meters them (no fees applied)".to_string()
    };
    format!(
        "engine: {} · {} · scale {}\n{fees}",
        r.engine,
        r.date,
        r.scale.label()
    )
}

/// The charts of a result set (only those with data): cycles (and US$) per op by path on a 13-
/// and a 34-node subnet, billed instructions per op by path, canbench instructions per op of
/// each op kind, and instructions per op against the flush size.
pub fn charts(r: &SuiteResults) -> Vec<(String, Chart)> {
    let mut out = Vec::new();
    let paths = crate::summary::paths(&r.messages);
    for (i, nodes) in SUBNET_SIZES.into_iter().enumerate() {
        let series: Vec<Series> = paths
            .iter()
            .map(|m| Series {
                label: m.label().into(),
                points: r
                    .messages
                    .iter()
                    .filter(|s| s.mode == *m)
                    .map(|s| (s.n as f64, s.cycles_per_million_ops[i] as f64 / 1e6))
                    .collect(),
            })
            .collect();
        if series.iter().any(|s| !s.points.is_empty()) {
            out.push((
                format!("cost_per_op_{nodes}_nodes.svg"),
                Chart {
                    title: format!(
                        "What one create_order write costs, by path ({nodes}-node subnet)"
                    ),
                    footer: footer(r, true),
                    x_label: "N: writes per run (per message or per flush)".into(),
                    y_label: "cycles per write".into(),
                    secondary: Some(SecondaryAxis {
                        label: "US$ per million writes".into(),
                        factor: 1e6 * r.fee_schedule.usd_per_xdr / CYCLES_PER_XDR,
                    }),
                    series,
                },
            ));
        }
    }
    let modes: Vec<Series> = paths
        .iter()
        .map(|m| Series {
            label: m.label().into(),
            points: r
                .messages
                .iter()
                .filter(|s| s.mode == *m)
                .map(|s| (s.n as f64, s.instructions_per_op))
                .collect(),
        })
        .filter(|s| !s.points.is_empty())
        .collect();
    if !modes.is_empty() {
        out.push((
            "message_modes.svg".into(),
            Chart {
                title: "create_order: billed instructions per write, message overhead included"
                    .into(),
                footer: footer(r, false),
                x_label: "N: writes per run (per message or per flush)".into(),
                y_label: "billed instructions per write".into(),
                secondary: None,
                series: modes,
            },
        ));
    }
    for kind in OP_KINDS {
        let series = |prefix: &str, label: &str| Series {
            label: label.to_string(),
            points: BATCH_SIZES
                .iter()
                .filter_map(|n| {
                    let b = r.canbench.benches.get(&format!("{prefix}_{kind}_{n}"))?;
                    Some((*n as f64, b.total.instructions as f64 / *n as f64))
                })
                .collect(),
        };
        let s = vec![
            series("unbatched", "unbatched (own transaction each)"),
            series("batched", "batched (queue + one flush)"),
        ];
        if s.iter().any(|x| !x.points.is_empty()) {
            out.push((
                format!("per_op_{kind}.svg"),
                Chart {
                    title: format!("{kind}: instructions per op inside the canister (canbench)"),
                    footer: footer(r, false),
                    x_label: "N (ops)".into(),
                    y_label: "instructions per op".into(),
                    secondary: None,
                    series: s.into_iter().filter(|x| !x.points.is_empty()).collect(),
                },
            ));
        }
    }
    if !r.flush.is_empty() {
        out.push((
            "flush_size.svg".into(),
            Chart {
                title: "10,000 batched inserts: instructions per op against the flush size".into(),
                footer: footer(r, false),
                x_label: "flush size (ops per flush)".into(),
                y_label: "instructions per op".into(),
                secondary: None,
                series: vec![Series {
                    label: "batched insert".into(),
                    points: r
                        .flush
                        .iter()
                        .map(|f| (f.flush_size as f64, f.per_op))
                        .collect(),
                }],
            },
        ));
    }
    out.extend(crate::peer::chart(
        &r.canbench,
        r.peer.as_ref(),
        &r.fee_schedule,
        footer(r, true),
    ));
    out
}

/// Writes `REPORT.md`, `results.json` (the figures and their summaries), the charts, and
/// `message_runs.json` (every message of the message-level runs, kept out of version control)
/// into `dir` (created if needed); returns the paths written.
pub fn write_all(r: &SuiteResults, dir: &Path) -> Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut written = Vec::new();
    let mut links = Vec::new();
    for (file, chart) in charts(r) {
        let paths = charts::draw(&chart, &dir.join(&file))?;
        links.push(ChartLink {
            title: chart.title.clone(),
            file,
        });
        written.extend(paths);
    }
    let json = serde_json::to_string_pretty(r).context("serializing results")?;
    let results = dir.join("results.json");
    std::fs::write(&results, json + "\n")
        .with_context(|| format!("writing {}", results.display()))?;
    written.push(results);
    let runs = dir.join("message_runs.json");
    let json = serde_json::to_string(&r.message_runs).context("serializing the message runs")?;
    std::fs::write(&runs, json + "\n").with_context(|| format!("writing {}", runs.display()))?;
    written.push(runs);
    let md = dir.join("REPORT.md");
    let client = crate::which_path::ClientFigures::read(dir);
    std::fs::write(&md, report::render(r, &links, &client))
        .with_context(|| format!("writing {}", md.display()))?;
    written.push(md);
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::suite::tests::synthetic_results;

    #[test]
    fn writes_report_results_and_charts() {
        let dir = std::env::temp_dir().join(format!("bench_suite_out_{}", std::process::id()));
        let r = synthetic_results();
        let files = write_all(&r, &dir).unwrap();
        let names: Vec<String> = files
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        for n in [
            "cost_per_op_13_nodes.svg",
            "cost_per_op_13_nodes.png",
            "cost_per_op_34_nodes.svg",
            "per_op_insert.png",
            "flush_size.png",
            "per_op_insert.svg",
            "per_op_update.svg",
            "per_op_delete.svg",
            "flush_size.svg",
            "message_modes.svg",
            "results.json",
            "message_runs.json",
            "REPORT.md",
        ] {
            assert!(names.iter().any(|x| x == n), "{n} not written: {names:?}");
        }
        let json: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("results.json")).unwrap())
                .unwrap();
        assert_eq!(
            json["engine"],
            "offline (wasmtime, IC metering: pocketic-13)"
        );
        assert_eq!(
            json["ic_dmt"]["engine"],
            "offline (wasmtime, IC metering: ic-dmt-0441fbd7)"
        );
        assert!(json["ic_dmt"]["messages"][0]["tracked"]["heap_accessed"].as_u64() > Some(0));
        assert!(
            json.get("message_runs").is_none(),
            "kept out of results.json"
        );
        assert_eq!(json["scale"], "Ci");
        assert!(json["canbench_wasm"]["sha256"].as_str().unwrap().len() == 64);
        let md = std::fs::read_to_string(dir.join("REPORT.md")).unwrap();
        assert!(md.contains("](flush_size.svg)"));
        // Every chart written passes the reader's check.
        for f in files
            .iter()
            .filter(|f| f.extension().is_some_and(|e| e == "svg"))
        {
            let svg = std::fs::read_to_string(f).unwrap();
            charts::check_svg(&svg).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
            assert!(
                svg.contains("engine: offline (wasmtime, IC metering: pocketic-13)"),
                "{}",
                f.display()
            );
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
