//! The CI instruction-regression check: compare a run's instruction counts with a committed
//! baseline and classify each benchmark, as canbench's CI script does.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::path::Path;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

/// Default threshold: a rise of more than this many percent fails the check.
pub const DEFAULT_THRESHOLD_PCT: f64 = 2.0;

/// The committed baseline (`bench/baseline-ci.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Baseline {
    /// Which engine produced the figures.
    pub engine: String,
    /// Scale label (`ci` or `full`).
    pub scale: String,
    /// Date (UTC) the baseline was written.
    pub date: String,
    /// SHA-256 of the canbench wasm measured.
    pub canbench_wasm_sha256: String,
    /// SHA-256 of the deployable wasm measured.
    pub deployable_wasm_sha256: String,
    /// Benchmark name → instructions (canbench totals; billed instructions of message runs).
    pub benches: BTreeMap<String, u64>,
}

impl Baseline {
    /// Reads a baseline file.
    pub fn read(path: &Path) -> Result<Baseline> {
        let text = std::fs::read_to_string(path).with_context(|| {
            format!(
                "reading baseline {} (create it with `bench-suite update-baseline`)",
                path.display()
            )
        })?;
        serde_json::from_str(&text).with_context(|| format!("parsing baseline {}", path.display()))
    }

    /// Writes the baseline as pretty JSON.
    pub fn write(&self, path: &Path) -> Result<()> {
        let text = serde_json::to_string_pretty(self).context("serializing the baseline")?;
        std::fs::write(path, text + "\n").with_context(|| format!("writing {}", path.display()))
    }
}

/// How one benchmark moved.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Status {
    /// Rose by more than the threshold: the check fails.
    Regressed,
    /// Fell by more than the threshold (update the baseline to lock it in).
    Improved,
    /// Changed, but by no more than the threshold.
    WithinThreshold,
    /// Identical.
    Unchanged,
    /// Not in the baseline.
    New,
    /// In the baseline, not in this run.
    Removed,
}

impl Status {
    /// Label for the table.
    pub fn label(self) -> &'static str {
        match self {
            Status::Regressed => "REGRESSED",
            Status::Improved => "improved",
            Status::WithinThreshold => "within threshold",
            Status::Unchanged => "unchanged",
            Status::New => "new",
            Status::Removed => "removed",
        }
    }
}

/// One row of the comparison.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Change {
    /// Benchmark name.
    pub name: String,
    /// Baseline instructions.
    pub baseline: Option<u64>,
    /// New instructions.
    pub new: Option<u64>,
    /// (new − baseline) / baseline × 100.
    pub delta_pct: Option<f64>,
    /// Classification.
    pub status: Status,
}

/// Compares `new` against `baseline`: a rise of more than `threshold_pct` percent is a regression.
pub fn compare(
    baseline: &BTreeMap<String, u64>,
    new: &BTreeMap<String, u64>,
    threshold_pct: f64,
) -> Vec<Change> {
    let mut names: Vec<&String> = baseline.keys().chain(new.keys()).collect();
    names.sort();
    names.dedup();
    names
        .into_iter()
        .map(|name| {
            let (old, cur) = (baseline.get(name).copied(), new.get(name).copied());
            let (delta_pct, status) = match (old, cur) {
                (None, _) => (None, Status::New),
                (Some(_), None) => (None, Status::Removed),
                (Some(o), Some(c)) if o == c => (Some(0.0), Status::Unchanged),
                (Some(0), Some(_)) => (None, Status::Regressed),
                (Some(o), Some(c)) => {
                    let d = (c as f64 - o as f64) / o as f64 * 100.0;
                    let s = if d > threshold_pct {
                        Status::Regressed
                    } else if d < -threshold_pct {
                        Status::Improved
                    } else {
                        Status::WithinThreshold
                    };
                    (Some(d), s)
                }
            };
            Change {
                name: name.clone(),
                baseline: old,
                new: cur,
                delta_pct,
                status,
            }
        })
        .collect()
}

/// True if any benchmark regressed.
pub fn has_regression(changes: &[Change]) -> bool {
    changes.iter().any(|c| c.status == Status::Regressed)
}

/// A markdown table of the changes plus a summary line.
pub fn render_table(changes: &[Change], threshold_pct: f64) -> String {
    let mut s = String::new();
    let cell = |v: Option<u64>| v.map(crate::analysis::fmt_u).unwrap_or_else(|| "-".into());
    let _ = writeln!(s, "| benchmark | baseline | new | Δ% | status |");
    let _ = writeln!(s, "|---|---:|---:|---:|---|");
    for c in changes {
        let d = c
            .delta_pct
            .map(|d| format!("{d:+.2}%"))
            .unwrap_or_else(|| "-".into());
        let _ = writeln!(
            s,
            "| {} | {} | {} | {d} | {} |",
            c.name,
            cell(c.baseline),
            cell(c.new),
            c.status.label()
        );
    }
    let count = |st: Status| changes.iter().filter(|c| c.status == st).count();
    let _ = writeln!(
        s,
        "\n{} benchmarks: {} regressed (> +{threshold_pct}%), {} improved (< -{threshold_pct}%), {} within threshold, {} unchanged, {} new, {} removed",
        changes.len(),
        count(Status::Regressed),
        count(Status::Improved),
        count(Status::WithinThreshold),
        count(Status::Unchanged),
        count(Status::New),
        count(Status::Removed)
    );
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(items: &[(&str, u64)]) -> BTreeMap<String, u64> {
        items.iter().map(|(k, v)| (k.to_string(), *v)).collect()
    }

    #[test]
    fn classifies_every_case() {
        let old = map(&[
            ("reg", 1_000),
            ("imp", 1_000),
            ("within", 1_000),
            ("same", 7),
            ("gone", 5),
            ("edge", 1_000),
            ("zero", 0),
        ]);
        let new = map(&[
            ("reg", 1_021),
            ("imp", 970),
            ("within", 1_019),
            ("same", 7),
            ("fresh", 9),
            ("edge", 1_020),
            ("zero", 1),
        ]);
        let ch = compare(&old, &new, DEFAULT_THRESHOLD_PCT);
        let st = |n: &str| ch.iter().find(|c| c.name == n).unwrap().status;
        assert_eq!(st("reg"), Status::Regressed);
        assert_eq!(st("imp"), Status::Improved);
        assert_eq!(st("within"), Status::WithinThreshold);
        assert_eq!(st("edge"), Status::WithinThreshold); // exactly +2.00 % is not "more than 2 %"
        assert_eq!(st("same"), Status::Unchanged);
        assert_eq!(st("fresh"), Status::New);
        assert_eq!(st("gone"), Status::Removed);
        assert_eq!(st("zero"), Status::Regressed);
        assert!(has_regression(&ch));
        let ok = compare(&old, &map(&[("imp", 1)]), 2.0);
        assert!(
            !has_regression(&ok),
            "new, removed and improved do not fail"
        );
    }

    #[test]
    fn table_lists_every_row_and_a_summary() {
        let ch = compare(&map(&[("a", 100)]), &map(&[("a", 110), ("b", 1)]), 2.0);
        let t = render_table(&ch, 2.0);
        assert!(t.contains("| benchmark | baseline | new | Δ% | status |"));
        assert!(t.contains("| a | 100 | 110 | +10.00% | REGRESSED |"));
        assert!(t.contains("| b | - | 1 | - | new |"));
        assert!(t.contains("1 regressed"));
    }

    #[test]
    fn baseline_round_trips() {
        let b = Baseline {
            engine: "e".into(),
            scale: "ci".into(),
            date: "2026-01-01".into(),
            canbench_wasm_sha256: "aa".into(),
            deployable_wasm_sha256: "bb".into(),
            benches: map(&[("x", 3)]),
        };
        let dir = std::env::temp_dir().join(format!("bench_suite_baseline_{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("b.json");
        b.write(&p).unwrap();
        assert_eq!(Baseline::read(&p).unwrap(), b);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
