//! The answer first: what a million writes cost on each path a client can take, in cycles and
//! US dollars on a 13- and a 34-node subnet, and the factor against one call per op.
//!
//! The table is built from the message-level runs present in the results
//! ([`crate::message_bench::ModeSummary`]): every measured path appears, in the order the
//! results hold them, and a path that was not measured has no row (nothing is invented). The
//! reference path is one call per op ([`Mode::Unbatched`]); without it the factor column says so.
//! [`render_markdown`] is what `bench/REPORT.md` opens with and what `bench-suite run` prints
//! last.

use std::fmt::Write;

use crate::fees::{FeeSchedule, SUBNET_SIZES};
use crate::message_bench::{Mode, ModeSummary};

/// The N values the summary shows when measured: a hundred, a thousand and ten thousand ops per
/// message (or per flush). Runs of 1 and 10 ops are in the full message-level table.
pub const SUMMARY_NS: [u64; 3] = [100, 1_000, 10_000];

/// One row: one path at one N.
#[derive(Debug, Clone, PartialEq)]
pub struct SummaryRow {
    /// The path.
    pub mode: Mode,
    /// Ops per run: per message for a client batch, per flush for submit + timer.
    pub n: u64,
    /// Cycles per 1,000,000 ops on a 13- and a 34-node subnet.
    pub cycles_per_million_ops: [u128; 2],
    /// US dollars per 1,000,000 ops on a 13- and a 34-node subnet.
    pub usd_per_million_ops: [f64; 2],
    /// Billed instructions per op.
    pub instructions_per_op: f64,
    /// Cycles of one call per op at the same N divided by this path's (13 nodes); `None`
    /// without a one-call-per-op run at this N.
    pub factor: Option<f64>,
}

/// The summary: rows grouped by N, and the sentences that say what they mean.
#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    /// The N values shown (ascending).
    pub ns: Vec<u64>,
    /// Rows, by N then in the order of the results.
    pub rows: Vec<SummaryRow>,
    /// Two or three sentences: the finding, in cycles and dollars.
    pub sentences: Vec<String>,
}

/// The N values to show: those of [`SUMMARY_NS`] that were measured; else the largest N measured.
fn chosen_ns(messages: &[ModeSummary]) -> Vec<u64> {
    let mut ns: Vec<u64> = SUMMARY_NS
        .into_iter()
        .filter(|n| messages.iter().any(|m| m.n == *n))
        .collect();
    if ns.is_empty()
        && let Some(max) = messages.iter().map(|m| m.n).max()
    {
        ns.push(max);
    }
    ns
}

/// The paths in the order the results hold them, each once.
pub fn paths(messages: &[ModeSummary]) -> Vec<Mode> {
    let mut out: Vec<Mode> = Vec::new();
    for m in messages {
        if !out.contains(&m.mode) {
            out.push(m.mode);
        }
    }
    out
}

/// Builds the summary from the message-level summaries of a run.
pub fn summarize(messages: &[ModeSummary], fees: &FeeSchedule) -> Summary {
    let ns = chosen_ns(messages);
    let find = |mode: Mode, n: u64| messages.iter().find(|m| m.mode == mode && m.n == n);
    let mut rows = Vec::new();
    for &n in &ns {
        let reference = find(Mode::Unbatched, n);
        for mode in paths(messages) {
            let Some(m) = find(mode, n) else { continue };
            let factor = reference.and_then(|r| {
                (m.cycles_per_million_ops[0] > 0).then(|| {
                    r.cycles_per_million_ops[0] as f64 / m.cycles_per_million_ops[0] as f64
                })
            });
            rows.push(SummaryRow {
                mode,
                n,
                cycles_per_million_ops: m.cycles_per_million_ops,
                usd_per_million_ops: m.usd_per_million_ops,
                instructions_per_op: m.instructions_per_op,
                factor,
            });
        }
    }
    let sentences = sentences(&rows, &ns, fees);
    Summary {
        ns,
        rows,
        sentences,
    }
}

/// `−2.7 %` style percent change of `new` against `old`.
fn pct(new: f64, old: f64) -> String {
    let d = (new / old - 1.0) * 100.0;
    let sign = if d < 0.0 { "−" } else { "+" };
    format!("{sign}{:.1} %", d.abs())
}

fn sentences(rows: &[SummaryRow], ns: &[u64], fees: &FeeSchedule) -> Vec<String> {
    let mut out = Vec::new();
    // The finding at N = 1,000 (else the largest N shown), in dollars on a 13-node subnet.
    let Some(&n) = ns.iter().find(|n| **n == 1_000).or(ns.last()) else {
        return out;
    };
    let at = |mode: Mode| rows.iter().find(|r| r.mode == mode && r.n == n);
    let Some(reference) = at(Mode::Unbatched) else {
        out.push(format!(
            "No one-call-per-op run at N = {}: the factors are not given.",
            crate::analysis::fmt_u(n)
        ));
        return out;
    };
    let mut parts = Vec::new();
    for r in rows
        .iter()
        .filter(|r| r.n == n && r.mode != Mode::Unbatched)
    {
        let (usd, factor) = (r.usd_per_million_ops[0], r.factor.unwrap_or(f64::NAN));
        let how = if factor >= 1.5 {
            format!("{} ({factor:.0}× less)", usd_text(usd))
        } else {
            format!(
                "{} ({})",
                usd_text(usd),
                pct(usd, reference.usd_per_million_ops[0])
            )
        };
        parts.push(format!("{} {how}", r.mode.label()));
    }
    out.push(format!(
        "At N = {} writes, one call per op costs {} per million writes on a 13-node subnet; {}.",
        crate::analysis::fmt_u(n),
        usd_text(reference.usd_per_million_ops[0]),
        parts.join(", ")
    ));
    if let Some(q) = at(Mode::SubmitAndTimer) {
        let fixed = fees.update_message_execution_fee + fees.ingress_message_reception_fee;
        let compare = if fixed as f64 >= 10.0 * q.instructions_per_op {
            "far more than"
        } else {
            "against"
        };
        out.push(format!(
            "The server-side queue (submit + timer) cuts the instructions per write {:.1}× ({} → {}) but not the bill: \
             every write still arrives as its own ingress message, and each one pays {} cycles to be executed and {} \
             cycles plus {} per byte to be received before its first instruction runs, {compare} the {} instructions \
             (1 cycle each) a queued write takes.",
            reference.instructions_per_op / q.instructions_per_op.max(1.0),
            crate::analysis::fmt_f(reference.instructions_per_op),
            crate::analysis::fmt_f(q.instructions_per_op),
            fee_text(fees.update_message_execution_fee),
            fee_text(fees.ingress_message_reception_fee),
            fee_text(fees.ingress_byte_reception_fee),
            crate::analysis::fmt_f(q.instructions_per_op),
        ));
    }
    if rows
        .iter()
        .any(|r| r.n == n && r.factor.is_some_and(|f| f >= 10.0))
    {
        out.push(
            "What cuts cycles is fewer messages: batch before the message (one call carrying many writes), not after it."
                .to_string(),
        );
    }
    out
}

/// A fee in cycles: `5 M`, `1.2 M`, `2,000`.
fn fee_text(c: u128) -> String {
    if c >= 1_000_000 {
        let m = c as f64 / 1e6;
        if c.is_multiple_of(1_000_000) {
            format!("{m:.0} M")
        } else {
            format!("{m:.1} M")
        }
    } else {
        crate::analysis::fmt_u(c as u64)
    }
}

/// `US$ 8.84`, `US$ 0.065`: two decimals, three significant digits below 0.10.
pub fn usd_text(usd: f64) -> String {
    if usd >= 0.1 || usd == 0.0 {
        format!("US$ {usd:.2}")
    } else {
        let digits = (2 - usd.log10().floor() as i32).max(2) as usize;
        format!("US$ {usd:.digits$}")
    }
}

/// Cycles in short form: `6.52 T`, `47.6 B`, `860 M` (three significant digits).
pub fn cycles_text(c: u128) -> String {
    let v = c as f64;
    let (x, unit) = if v >= 1e12 {
        (v / 1e12, " T")
    } else if v >= 1e9 {
        (v / 1e9, " B")
    } else if v >= 1e6 {
        (v / 1e6, " M")
    } else if v >= 1e3 {
        (v / 1e3, " K")
    } else {
        (v, "")
    };
    let s = if x >= 100.0 {
        format!("{x:.0}")
    } else if x >= 10.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.2}")
    };
    format!("{s}{unit}")
}

/// A Markdown table whose columns are padded to their widths, so it reads in a terminal as it
/// renders on a page. `right[i]` right-aligns column `i` (numbers).
pub fn padded_table(header: &[&str], right: &[bool], rows: &[Vec<String>]) -> String {
    let width = |i: usize| {
        rows.iter()
            .map(|r| r[i].chars().count())
            .chain([header[i].chars().count(), 3])
            .max()
            .unwrap_or(3)
    };
    let widths: Vec<usize> = (0..header.len()).map(width).collect();
    let cell = |text: &str, i: usize| {
        let pad = widths[i] - text.chars().count();
        if right[i] {
            format!("{}{text}", " ".repeat(pad))
        } else {
            format!("{text}{}", " ".repeat(pad))
        }
    };
    let line = |cells: Vec<String>| format!("| {} |\n", cells.join(" | "));
    let mut s = line(header.iter().enumerate().map(|(i, h)| cell(h, i)).collect());
    s.push_str(&line(
        widths
            .iter()
            .enumerate()
            .map(|(i, w)| {
                if right[i] {
                    format!("{}:", "-".repeat(w - 1))
                } else {
                    "-".repeat(*w)
                }
            })
            .collect(),
    ));
    for r in rows {
        s.push_str(&line(
            r.iter().enumerate().map(|(i, c)| cell(c, i)).collect(),
        ));
    }
    s
}

/// The table alone (Markdown, padded).
pub fn render_table(s: &Summary) -> String {
    debug_assert_eq!(SUBNET_SIZES, [13, 34]);
    let header = [
        "path",
        "N",
        "cycles / 1M ops (13 nodes)",
        "US$ / 1M ops (13 nodes)",
        "cycles / 1M ops (34 nodes)",
        "US$ / 1M ops (34 nodes)",
        "vs one call per op",
    ];
    let rows: Vec<Vec<String>> = s
        .rows
        .iter()
        .map(|r| {
            vec![
                r.mode.label().to_string(),
                crate::analysis::fmt_u(r.n),
                cycles_text(r.cycles_per_million_ops[0]),
                format!("{:.2}", r.usd_per_million_ops[0]),
                cycles_text(r.cycles_per_million_ops[1]),
                format!("{:.2}", r.usd_per_million_ops[1]),
                match r.factor {
                    None => "not measured".to_string(),
                    Some(f) if r.mode == Mode::Unbatched => format!("{f:.0}×"),
                    Some(f) if f >= 10.0 => format!("{f:.0}× less"),
                    Some(f) if f >= 1.0 => format!("{f:.2}× less"),
                    Some(f) => format!("{:.2}× more", 1.0 / f),
                },
            ]
        })
        .collect();
    padded_table(&header, &[false, true, true, true, true, true, true], &rows)
}

/// The sentences, the table and the line saying where the figures come from.
pub fn render_markdown(s: &Summary, source: &str) -> String {
    let mut o = String::new();
    for line in &s.sentences {
        let _ = writeln!(o, "{line}");
    }
    let _ = writeln!(o, "\n{source}\n");
    o.push_str(&render_table(s));
    let _ = writeln!(
        o,
        "\nN: writes per run, in one message for a client batch, in one flush for submit + timer (one call per op \
         sends N messages). Each write is one `create_order` (an insert) on the 10,000-user fixture."
    );
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fees::IC_2025;
    use crate::suite::tests::synthetic_results;

    #[test]
    fn every_measured_path_appears_and_nothing_is_invented() {
        let r = synthetic_results(); // N = 1, 10, 100 for four paths
        let s = summarize(&r.messages, &IC_2025);
        assert_eq!(s.ns, [100]);
        let modes: Vec<Mode> = s.rows.iter().map(|r| r.mode).collect();
        assert_eq!(modes, Mode::ALL);
        // Drop one path: its row disappears, the others stay.
        let without: Vec<ModeSummary> = r
            .messages
            .iter()
            .filter(|m| m.mode != Mode::ClientBatch)
            .cloned()
            .collect();
        let s = summarize(&without, &IC_2025);
        assert!(s.rows.iter().all(|r| r.mode != Mode::ClientBatch));
        assert_eq!(s.rows.len(), 3);
        // Without the reference path, no factor is made up.
        let no_ref: Vec<ModeSummary> = r
            .messages
            .iter()
            .filter(|m| m.mode != Mode::Unbatched)
            .cloned()
            .collect();
        let s = summarize(&no_ref, &IC_2025);
        assert!(s.rows.iter().all(|r| r.factor.is_none()));
        assert!(render_table(&s).contains("not measured"));
        assert!(s.sentences[0].starts_with("No one-call-per-op run"));
    }

    #[test]
    fn factors_are_cycles_of_one_call_per_op_over_the_path_s() {
        let r = synthetic_results();
        let s = summarize(&r.messages, &IC_2025);
        let at = |m: Mode| {
            r.messages
                .iter()
                .find(|x| x.mode == m && x.n == 100)
                .unwrap()
        };
        let packed = s
            .rows
            .iter()
            .find(|x| x.mode == Mode::ClientBatchPacked)
            .unwrap();
        let expected = at(Mode::Unbatched).cycles_per_million_ops[0] as f64
            / at(Mode::ClientBatchPacked).cycles_per_million_ops[0] as f64;
        assert_eq!(packed.factor, Some(expected));
        assert_eq!(
            packed.cycles_per_million_ops,
            at(Mode::ClientBatchPacked).cycles_per_million_ops
        );
        let unbatched = s.rows.iter().find(|x| x.mode == Mode::Unbatched).unwrap();
        assert_eq!(unbatched.factor, Some(1.0));
    }

    #[test]
    fn short_forms() {
        assert_eq!(cycles_text(6_522_209_198_900), "6.52 T");
        assert_eq!(cycles_text(47_647_197_000), "47.6 B");
        assert_eq!(cycles_text(860_178_200), "860 M");
        assert_eq!(cycles_text(999), "999");
        assert_eq!(usd_text(8.836), "US$ 8.84");
        assert_eq!(usd_text(0.06455), "US$ 0.0645");
        assert_eq!(usd_text(0.0054), "US$ 0.00540");
        assert_eq!(pct(8.6045, 8.8375), "−2.6 %");
    }

    #[test]
    fn padded_table_aligns_columns() {
        let t = padded_table(
            &["a", "num"],
            &[false, true],
            &[
                vec!["xx".into(), "1".into()],
                vec!["y".into(), "1,000".into()],
            ],
        );
        assert_eq!(
            t,
            "| a   |   num |\n| --- | ----: |\n| xx  |     1 |\n| y   | 1,000 |\n"
        );
    }
}
