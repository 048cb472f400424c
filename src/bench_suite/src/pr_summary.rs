//! The short Markdown summary a CI job posts on a pull request, as canbench's CI does: a
//! verdict line, the figures that changed (regressions first), the count of the rest, and a
//! link to the full table. Both gates write one (`bench-suite check --summary`,
//! `bench-suite canbench-check --summary`).

use std::fmt::Write;
use std::path::Path;

use anyhow::{Context, Result};

use crate::analysis::fmt_u;
use crate::regression::{Change, Status};

/// Rows of changed figures shown before the rest are only counted.
pub const MAX_ROWS: usize = 20;

/// What one gate found, for its summary.
#[derive(Debug, Clone, PartialEq)]
pub struct GateSummary<'a> {
    /// The gate's name, e.g. `Instruction check` or `canbench gate`.
    pub gate: &'a str,
    /// Where the figures come from (engine label) and what they were compared with.
    pub context: &'a str,
    /// Every figure's comparison.
    pub changes: &'a [Change],
    /// Noise threshold in percent.
    pub threshold_pct: f64,
    /// Other reasons the gate failed (e.g. figures that differ from the engine's direct run).
    pub other_failures: &'a [String],
    /// Where the full table is (a URL, or a command that prints it).
    pub full_table: &'a str,
    /// The command that updates the committed figures after an intended change.
    pub update_hint: &'a str,
}

fn order(s: Status) -> u8 {
    match s {
        Status::Regressed => 0,
        Status::Removed => 1,
        Status::New => 2,
        Status::Improved => 3,
        Status::WithinThreshold => 4,
        Status::Unchanged => 5,
    }
}

/// Renders the summary.
pub fn render(g: &GateSummary) -> String {
    let count = |st: Status| g.changes.iter().filter(|c| c.status == st).count();
    let (reg, imp, new, rem, noise, same) = (
        count(Status::Regressed),
        count(Status::Improved),
        count(Status::New),
        count(Status::Removed),
        count(Status::WithinThreshold),
        count(Status::Unchanged),
    );
    let failed = crate::regression::fails(g.changes) || !g.other_failures.is_empty();
    let mut parts = Vec::new();
    for (n, what) in [
        (reg, "regressed"),
        (imp, "improved"),
        (new, "new"),
        (rem, "removed"),
    ] {
        if n > 0 {
            parts.push(format!("{n} {what}"));
        }
    }
    if !g.other_failures.is_empty() {
        parts.push(format!("{} other failure(s)", g.other_failures.len()));
    }
    let mut o = String::new();
    if failed {
        let _ = writeln!(
            o,
            "**{}: ❌ failed** — {} of {} figures ({}% threshold).",
            g.gate,
            parts.join(", "),
            g.changes.len(),
            g.threshold_pct
        );
    } else {
        let _ = writeln!(
            o,
            "**{}: ✅ passed** — {} figures: {noise} within the {}% noise threshold, {same} unchanged.",
            g.gate,
            g.changes.len(),
            g.threshold_pct
        );
    }
    let _ = writeln!(o, "\n{}", g.context);
    let mut changed: Vec<&Change> = g
        .changes
        .iter()
        .filter(|c| c.status != Status::Unchanged)
        .collect();
    changed.sort_by(|a, b| {
        order(a.status).cmp(&order(b.status)).then_with(|| {
            b.delta_pct
                .unwrap_or(f64::INFINITY)
                .abs()
                .total_cmp(&a.delta_pct.unwrap_or(f64::INFINITY).abs())
        })
    });
    if !changed.is_empty() {
        let _ = writeln!(
            o,
            "\n| figure | committed | now | Δ | |\n|---|---:|---:|---:|---|"
        );
        let cell = |v: Option<u64>| v.map(fmt_u).unwrap_or_else(|| "—".into());
        for c in changed.iter().take(MAX_ROWS) {
            let delta = c
                .delta_pct
                .map(|d| format!("{d:+.2}%"))
                .unwrap_or_else(|| "—".into());
            let mark = match c.status {
                Status::Regressed => "🔴 regressed",
                Status::Improved => "🟢 improved",
                Status::New => "🆕 new",
                Status::Removed => "⚪ removed",
                Status::WithinThreshold => "noise",
                Status::Unchanged => "",
            };
            let _ = writeln!(
                o,
                "| `{}` | {} | {} | {delta} | {mark} |",
                c.name,
                cell(c.baseline),
                cell(c.new)
            );
        }
        if changed.len() > MAX_ROWS {
            let _ = writeln!(
                o,
                "\n… and {} more changed figures in the full table.",
                changed.len() - MAX_ROWS
            );
        }
    }
    if !g.other_failures.is_empty() {
        let _ = writeln!(o);
        for f in g.other_failures {
            let _ = writeln!(o, "- {f}");
        }
    }
    let _ = writeln!(o, "\nFull table: {}", g.full_table);
    if failed {
        let _ = writeln!(
            o,
            "\nIf the change is intended, run `{}` and commit the result with it.",
            g.update_hint
        );
    }
    o
}

/// Writes the summary to `path` (creating its directory).
pub fn write(path: &Path, text: &str) -> Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}

/// The link to the full table: `$GITHUB_SERVER_URL/$GITHUB_REPOSITORY/actions/runs/$GITHUB_RUN_ID`
/// inside GitHub Actions (the job's log holds the table), else `fallback`.
pub fn full_table_link(fallback: &str) -> String {
    let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    match (
        var("GITHUB_SERVER_URL"),
        var("GITHUB_REPOSITORY"),
        var("GITHUB_RUN_ID"),
    ) {
        (Some(server), Some(repo), Some(run)) => {
            format!("[the job's log]({server}/{repo}/actions/runs/{run})")
        }
        _ => fallback.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::regression::compare;
    use std::collections::BTreeMap;

    fn map(items: &[(&str, u64)]) -> BTreeMap<String, u64> {
        items.iter().map(|(k, v)| (k.to_string(), *v)).collect()
    }

    const BASE: &[(&str, u64)] = &[
        ("canbench/batched_insert_1000", 20_041_019),
        ("canbench/unbatched_insert_1000", 192_697_522),
        ("message/client_batch_packed/1000", 12_063_000),
    ];

    fn summary(gate: &str, new: &[(&str, u64)], other: &[String]) -> String {
        let changes = compare(&map(BASE), &map(new), 2.0);
        let canbench = gate == "canbench gate";
        render(&GateSummary {
            gate,
            context: if canbench {
                "engine: offline (wasmtime, IC metering); compared with the results committed at HEAD."
            } else {
                "engine: offline (wasmtime, IC metering); compared with the committed baseline."
            },
            changes: &changes,
            threshold_pct: 2.0,
            other_failures: other,
            full_table: "[the job's log](https://example.invalid/run/1)",
            update_hint: if canbench {
                "scripts/canbench.sh --persist"
            } else {
                "scripts/check_regressions.sh --update"
            },
        })
    }

    /// One golden file per situation, as canbench's CLI tests have expected outputs.
    #[test]
    fn summaries_render_as_expected_in_every_situation() {
        let golden = crate::report::tests::golden;
        golden(
            "pr_summary/regression.md",
            &summary(
                "Instruction check",
                &[
                    ("canbench/batched_insert_1000", 38_000_000),
                    ("canbench/unbatched_insert_1000", 192_697_522),
                    ("message/client_batch_packed/1000", 12_100_000),
                ],
                &[],
            ),
        );
        golden(
            "pr_summary/improvement.md",
            &summary(
                "Instruction check",
                &[
                    ("canbench/batched_insert_1000", 15_000_000),
                    ("canbench/unbatched_insert_1000", 192_697_522),
                    ("message/client_batch_packed/1000", 12_063_000),
                ],
                &[],
            ),
        );
        golden(
            "pr_summary/noise.md",
            &summary(
                "Instruction check",
                &[
                    ("canbench/batched_insert_1000", 20_300_000),
                    ("canbench/unbatched_insert_1000", 192_697_522),
                    ("message/client_batch_packed/1000", 11_900_000),
                ],
                &[],
            ),
        );
        golden(
            "pr_summary/new_removed.md",
            &summary(
                "Instruction check",
                &[
                    ("canbench/batched_insert_1000", 20_041_019),
                    ("canbench/unbatched_insert_1000", 192_697_522),
                    ("message/client_library/1000", 9_000_000),
                ],
                &[],
            ),
        );
        golden(
            "pr_summary/canbench_mismatch.md",
            &summary(
                "canbench gate",
                BASE,
                &["batched_insert_1000: canbench differs from the engine's direct run".into()],
            ),
        );
    }

    #[test]
    fn the_verdict_follows_the_gate_s_rule() {
        let passed = summary("g", BASE, &[]);
        assert!(passed.starts_with(
            "**g: ✅ passed** — 3 figures: 0 within the 2% noise threshold, 3 unchanged."
        ));
        assert!(!passed.contains("| figure |"), "nothing changed, no table");
        let noise = summary(
            "g",
            &[
                ("canbench/batched_insert_1000", 20_041_020),
                ("canbench/unbatched_insert_1000", 192_697_522),
                ("message/client_batch_packed/1000", 12_063_000),
            ],
            &[],
        );
        assert!(noise.contains("✅ passed") && noise.contains("| noise |"));
        let regressed = summary("g", &[("canbench/batched_insert_1000", 40_000_000)], &[]);
        assert!(regressed.starts_with("**g: ❌ failed** — 1 regressed, 2 removed of 3 figures"));
        assert!(
            regressed
                .contains("If the change is intended, run `scripts/check_regressions.sh --update`")
        );
        // Other failures alone fail the gate.
        let other = summary("g", BASE, &["x".into()]);
        assert!(other.contains("❌ failed** — 1 other failure(s)"));
    }

    #[test]
    fn long_lists_are_cut_and_counted() {
        let base: BTreeMap<String, u64> = (0..30).map(|i| (format!("b{i:02}"), 100)).collect();
        let new: BTreeMap<String, u64> = (0..30).map(|i| (format!("b{i:02}"), 200 + i)).collect();
        let changes = compare(&base, &new, 2.0);
        let text = render(&GateSummary {
            gate: "g",
            context: "c",
            changes: &changes,
            threshold_pct: 2.0,
            other_failures: &[],
            full_table: "t",
            update_hint: "u",
        });
        assert_eq!(text.matches("🔴 regressed").count(), MAX_ROWS);
        assert!(text.contains("… and 10 more changed figures in the full table."));
        // Largest change first.
        assert!(text.find("`b29`").unwrap() < text.find("`b00`").unwrap_or(usize::MAX));
    }
}
