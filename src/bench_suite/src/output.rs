//! Writes the suite's files: `REPORT.md`, `results.json` and the SVG charts, all in one directory.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::analysis::{BATCH_SIZES, OP_KINDS};
use crate::charts::{self, Chart, Series};
use crate::message_bench::Mode;
use crate::report::{self, ChartLink};
use crate::suite::SuiteResults;

/// The charts of a result set (only those with data).
pub fn charts(r: &SuiteResults) -> Vec<(String, Chart)> {
    let tag = format!("{} · {}", r.engine, r.date);
    let mut out = Vec::new();
    for kind in OP_KINDS {
        let series = |prefix: &str| Series {
            label: prefix.to_string(),
            points: BATCH_SIZES
                .iter()
                .filter_map(|n| {
                    let b = r.canbench.benches.get(&format!("{prefix}_{kind}_{n}"))?;
                    Some((*n as f64, b.total.instructions as f64 / *n as f64))
                })
                .collect(),
        };
        let s = vec![series("unbatched"), series("batched")];
        if s.iter().any(|x| !x.points.is_empty()) {
            out.push((
                format!("per_op_{kind}.svg"),
                Chart {
                    title: format!("{kind}: instructions per op vs N (canbench; {tag})"),
                    x_label: "N (ops)".into(),
                    y_label: "instructions per op".into(),
                    series: s,
                },
            ));
        }
    }
    if !r.flush.is_empty() {
        out.push((
            "flush_size.svg".into(),
            Chart {
                title: format!("10,000 batched inserts: instructions per op vs flush size ({tag})"),
                x_label: "flush size".into(),
                y_label: "instructions per op".into(),
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
    let modes: Vec<Series> = Mode::ALL
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
                title: format!(
                    "create_order: billed instructions per op incl. message overhead ({tag})"
                ),
                x_label: "N (ops)".into(),
                y_label: "billed instructions per op".into(),
                series: modes,
            },
        ));
    }
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
        let path = charts::draw(&chart, &dir.join(&file))?;
        links.push(ChartLink {
            title: chart.title.clone(),
            file,
        });
        written.push(path);
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
    std::fs::write(&md, report::render(r, &links))
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
        assert_eq!(json["engine"], "offline (wasmtime, IC metering)");
        assert!(
            json.get("message_runs").is_none(),
            "kept out of results.json"
        );
        assert_eq!(json["scale"], "Ci");
        assert!(json["canbench_wasm"]["sha256"].as_str().unwrap().len() == 64);
        let md = std::fs::read_to_string(dir.join("REPORT.md")).unwrap();
        assert!(md.contains("](flush_size.svg)"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
