//! The repository's one rule for comparing benchmark figures with a committed baseline, as
//! canbench classifies them and its CI script gates on them.
//!
//! A figure changed when |Δ%| ≥ the threshold, Δ% = (new − old) / old × 100 (canbench's formula;
//! from 0 any change counts). A change in either direction fails, as do new and removed
//! figures: the committed baseline must be updated with the change, so it can neither drift
//! downward (and let a later regression back in) nor go stale. Changes below the threshold are
//! noise and pass.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::path::Path;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

/// Default noise threshold in percent (canbench's default).
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
    /// Rose by at least the threshold (or from 0): the check fails.
    Regressed,
    /// Fell by at least the threshold: the check fails until the baseline is updated.
    Improved,
    /// Changed by less than the threshold (noise).
    WithinThreshold,
    /// Identical.
    Unchanged,
    /// Not in the baseline: the check fails until the baseline is updated.
    New,
    /// In the baseline, not in this run: the check fails until the baseline is updated.
    Removed,
}

impl Status {
    /// True if this status fails the check.
    pub fn fails(self) -> bool {
        matches!(
            self,
            Status::Regressed | Status::Improved | Status::New | Status::Removed
        )
    }

    /// Label for the table.
    pub fn label(self) -> &'static str {
        match self {
            Status::Regressed => "REGRESSED",
            Status::Improved => "IMPROVED",
            Status::WithinThreshold => "within threshold",
            Status::Unchanged => "unchanged",
            Status::New => "NEW",
            Status::Removed => "REMOVED",
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

/// Classifies `new` against `old` with canbench's rule: unchanged if equal; from 0 any change
/// is a regression; else Δ% = (new − old) / old × 100 counts when |Δ%| ≥ `threshold_pct`.
pub fn classify(old: u64, new: u64, threshold_pct: f64) -> (Option<f64>, Status) {
    if old == new {
        return (Some(0.0), Status::Unchanged);
    }
    if old == 0 {
        return (None, Status::Regressed);
    }
    let d = ((new as f64 - old as f64) / old as f64) * 100.0;
    let status = if d.abs() < threshold_pct {
        Status::WithinThreshold
    } else if d > 0.0 {
        Status::Regressed
    } else {
        Status::Improved
    };
    (Some(d), status)
}

/// Compares `new` against `baseline` figure by figure with [`classify`].
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
                (Some(o), Some(c)) => classify(o, c, threshold_pct),
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

/// True if any change fails the check (regressed, improved, new or removed).
pub fn fails(changes: &[Change]) -> bool {
    changes.iter().any(|c| c.status.fails())
}

/// A markdown table of the figures that are not unchanged, plus a summary line over all.
pub fn render_table(changes: &[Change], threshold_pct: f64) -> String {
    let mut s = String::new();
    let cell = |v: Option<u64>| v.map(crate::analysis::fmt_u).unwrap_or_else(|| "-".into());
    let _ = writeln!(s, "| benchmark | baseline | new | Δ% | status |");
    let _ = writeln!(s, "|---|---:|---:|---:|---|");
    for c in changes.iter().filter(|c| c.status != Status::Unchanged) {
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
        "\n{} figures: {} regressed (≥ +{threshold_pct}%), {} improved (≤ -{threshold_pct}%), {} new, {} removed, {} within the noise threshold, {} unchanged",
        changes.len(),
        count(Status::Regressed),
        count(Status::Improved),
        count(Status::New),
        count(Status::Removed),
        count(Status::WithinThreshold),
        count(Status::Unchanged)
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
            ("edge_up", 1_000),
            ("edge_down", 1_000),
            ("zero", 0),
        ]);
        let new = map(&[
            ("reg", 1_021),
            ("imp", 970),
            ("within", 1_019),
            ("same", 7),
            ("fresh", 9),
            ("edge_up", 1_020),
            ("edge_down", 980),
            ("zero", 1),
        ]);
        let ch = compare(&old, &new, DEFAULT_THRESHOLD_PCT);
        let st = |n: &str| ch.iter().find(|c| c.name == n).unwrap().status;
        assert_eq!(st("reg"), Status::Regressed);
        assert_eq!(st("imp"), Status::Improved);
        assert_eq!(st("within"), Status::WithinThreshold);
        // |Δ| = 2.00 % is a change (canbench: `diff.abs() < noise_threshold` is noise).
        assert_eq!(st("edge_up"), Status::Regressed);
        assert_eq!(st("edge_down"), Status::Improved);
        assert_eq!(st("same"), Status::Unchanged);
        assert_eq!(st("fresh"), Status::New);
        assert_eq!(st("gone"), Status::Removed);
        assert_eq!(st("zero"), Status::Regressed);
        assert!(fails(&ch));
        for only in ["imp", "fresh", "gone", "reg"] {
            let one: Vec<Change> = ch.iter().filter(|c| c.name == only).cloned().collect();
            assert!(fails(&one), "{only} fails the check");
        }
        let noise: Vec<Change> = ch
            .iter()
            .filter(|c| c.name == "within" || c.name == "same")
            .cloned()
            .collect();
        assert!(!fails(&noise), "noise and unchanged pass");
    }

    #[test]
    fn classify_matches_canbench_s_formula() {
        assert_eq!(classify(100, 100, 2.0), (Some(0.0), Status::Unchanged));
        assert_eq!(classify(0, 0, 2.0), (Some(0.0), Status::Unchanged));
        assert_eq!(classify(0, 5, 2.0), (None, Status::Regressed));
        assert_eq!(classify(200, 196, 2.0), (Some(-2.0), Status::Improved));
        assert_eq!(
            classify(200, 197, 2.0),
            (Some(-1.5), Status::WithinThreshold)
        );
        assert_eq!(classify(3, 4, 50.0).1, Status::WithinThreshold);
    }

    #[test]
    fn table_lists_the_changed_rows_and_a_summary() {
        let ch = compare(
            &map(&[("a", 100), ("same", 3)]),
            &map(&[("a", 110), ("b", 1), ("same", 3)]),
            2.0,
        );
        let t = render_table(&ch, 2.0);
        assert!(t.contains("| benchmark | baseline | new | Δ% | status |"));
        assert!(t.contains("| a | 100 | 110 | +10.00% | REGRESSED |"));
        assert!(t.contains("| b | - | 1 | - | NEW |"));
        assert!(!t.contains("| same |"));
        assert!(t.contains(
            "3 figures: 1 regressed (≥ +2%), 0 improved (≤ -2%), 1 new, 0 removed, 0 within the noise threshold, 1 unchanged"
        ));
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
