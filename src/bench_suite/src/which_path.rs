//! "Which path when": every way to write, side by side: cycles and US$ per op (per million
//! writes), latency in rounds, and whether a retry is safe.
//!
//! The suite's own paths (one call per op, submit + timer, client batch, packed client batch)
//! come from its message-level runs (`engine: offline (wasmtime, IC metering)`) and its load
//! simulation over measured costs. The client paths come from the markdown the end-to-end
//! commands commit next to the report (figures of the offline replica through a real agent):
//!
//! | file | command |
//! |---|---|
//! | `load.md` | `cargo run --release -p client_e2e --example load -- 2000 3 5000 2000 bench/load.md` |
//! | `overhead.md` | `cargo run --release -p client_e2e --example overhead -- 1000 bench/overhead.md` |
//! | `app_canister.md` | `cargo run --release -p client_e2e --example app_canister -- 1000 50 bench/app_canister.md` |
//!
//! A figure whose file or row is missing is shown as not measured, with the command that
//! measures it; nothing is filled in.

use std::fmt::Write;
use std::path::Path;

use crate::fees::FeeSchedule;
use crate::load_model::LoadMode;
use crate::message_bench::Mode;
use crate::suite::SuiteResults;

/// The batch size the table prices the suite's paths at (ops per message, or per flush).
pub const PRICED_N: u64 = 1_000;

/// The command that writes `load.md`.
pub const LOAD_COMMAND: &str =
    "cargo run --release -p client_e2e --example load -- 2000 3 5000 2000 bench/load.md";
/// The command that writes `overhead.md`.
pub const OVERHEAD_COMMAND: &str =
    "cargo run --release -p client_e2e --example overhead -- 1000 bench/overhead.md";
/// The command that writes `app_canister.md`.
pub const APP_COMMAND: &str =
    "cargo run --release -p client_e2e --example app_canister -- 1000 50 bench/app_canister.md";

/// The committed markdown of the end-to-end commands, as read from the report's directory.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClientFigures {
    /// `load.md`, if present.
    pub load: Option<String>,
    /// `overhead.md`, if present.
    pub overhead: Option<String>,
    /// `app_canister.md`, if present.
    pub app_canister: Option<String>,
}

impl ClientFigures {
    /// Reads the three files from `dir` (a missing or unreadable file is `None`), keeping of
    /// each the figures under the rules of PocketIC 13, the profile of the suite's rows beside
    /// them ([`under_profile`]).
    pub fn read(dir: &Path) -> ClientFigures {
        let profile = offline_engine::Metering::POCKET_IC_13.name;
        let read = |name: &str| {
            std::fs::read_to_string(dir.join(name))
                .ok()
                .map(|t| under_profile(&t, profile))
        };
        ClientFigures {
            load: read("load.md"),
            overhead: read("overhead.md"),
            app_canister: read("app_canister.md"),
        }
    }
}

/// `text` without the sections (`### ` headings up to the next heading) headed by another
/// metering profile than `profile` (a heading names its profile as `` (`name`) ``); text with
/// no such heading is kept whole.
pub fn under_profile(text: &str, profile: &str) -> String {
    let others: Vec<String> = offline_engine::Metering::names()
        .into_iter()
        .filter(|n| *n != profile)
        .map(|n| format!("(`{n}`)"))
        .collect();
    let mut out = String::new();
    let mut skipping = false;
    for line in text.lines() {
        if line.starts_with("## ") || line.starts_with("### ") {
            skipping = line.starts_with("### ") && others.iter().any(|o| line.contains(o));
        }
        if !skipping {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

/// The cells of the first markdown table row of `text` whose first cell starts with
/// `prefix` (surrounding spaces trimmed).
pub fn row<'a>(text: &'a str, prefix: &str) -> Option<Vec<&'a str>> {
    text.lines().find_map(|line| {
        let inner = line.trim().strip_prefix('|')?.strip_suffix('|')?;
        let cells: Vec<&str> = inner.split('|').map(str::trim).collect();
        cells.first()?.starts_with(prefix).then_some(cells)
    })
}

/// The index of the column headed `name` in the first markdown table row of `text` that has
/// such a cell.
pub fn column(text: &str, name: &str) -> Option<usize> {
    text.lines().find_map(|line| {
        let inner = line.trim().strip_prefix('|')?.strip_suffix('|')?;
        inner.split('|').map(str::trim).position(|c| c == name)
    })
}

/// The first number of `cell` (digits, a dot; thousands commas dropped).
pub fn number(cell: &str) -> Option<f64> {
    let start = cell.find(|c: char| c.is_ascii_digit())?;
    let text: String = cell[start..]
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.' || *c == ',')
        .filter(|c| *c != ',')
        .collect();
    text.parse().ok()
}

/// The number in parentheses in `cell` (`"5021 (1.00)"` → 1.00).
pub fn parenthesized(cell: &str) -> Option<f64> {
    let open = cell.find('(')?;
    number(&cell[open..])
}

/// One row of the table.
#[derive(Debug, Clone, PartialEq)]
pub struct PathRow {
    /// The path.
    pub path: String,
    /// Cycles per op (13 nodes), if measured.
    pub cycles_per_op: Option<f64>,
    /// Where the cycles come from (engine and run).
    pub cost_source: String,
    /// Latency in rounds, as text (it says what it measured).
    pub latency: String,
    /// Retry safety.
    pub retry: &'static str,
}

const UNKEYED: &str = "unkeyed: a retry after a lost answer may apply the write twice";
const KEYED_OR_NOT: &str =
    "keyed (a batch key): exactly once; unkeyed: a retry may apply the batch twice";
const KEYED: &str = "keyed: exactly once (every retry carries the batch's key)";

fn suite_cycles(r: &SuiteResults, mode: Mode) -> Option<f64> {
    r.messages
        .iter()
        .find(|m| m.mode == mode && m.n == PRICED_N)
        .map(|m| m.cycles_per_million_ops[0] as f64 / 1e6)
}

fn simulated_latency(r: &SuiteResults, mode: LoadMode) -> String {
    // The highest offered load the block still takes in one round for this path, and the
    // first beyond it.
    let mut runs: Vec<_> = r.load.iter().filter(|l| l.mode == mode).collect();
    runs.sort_by_key(|l| l.concurrency);
    let mut parts = Vec::new();
    for l in runs
        .iter()
        .filter(|l| l.concurrency == 500 || l.concurrency == 2_000)
    {
        parts.push(format!(
            "p99 {} at {} ops/round",
            l.p99_rounds_to_commit,
            crate::analysis::fmt_u(l.concurrency)
        ));
    }
    if parts.is_empty() {
        "not simulated".into()
    } else {
        format!("{} (simulation)", parts.join(", "))
    }
}

fn load_latency(load: Option<&str>, prefix: &str) -> Option<String> {
    let cells = row(load?, prefix)?;
    let p50 = parenthesized(cells.get(4)?)?;
    let p99 = parenthesized(cells.get(5)?)?;
    let committed = cells.get(1)?;
    Some(format!(
        "p50 {p50:.2}, p99 {p99:.2} at 2,000 ops/round, {committed} committed (load.md)"
    ))
}

/// Builds the rows from the suite's results and the client figures.
pub fn rows(r: &SuiteResults, client: &ClientFigures) -> Vec<PathRow> {
    let engine = format!("{}, N = {}", r.engine, crate::analysis::fmt_u(PRICED_N));
    let load = client.load.as_deref();
    let not_measured = |command: &str| format!("not measured: `{command}`");
    let mut rows = Vec::new();
    let suite_row =
        |mode: Mode, load_mode: LoadMode, retry: &'static str, measured: Option<String>| {
            let latency = match measured {
                Some(m) => format!("{m}; {}", simulated_latency(r, load_mode)),
                None => simulated_latency(r, load_mode),
            };
            let cycles_per_op = suite_cycles(r, mode);
            PathRow {
                path: mode.label().to_string(),
                cycles_per_op,
                cost_source: if cycles_per_op.is_some() {
                    engine.clone()
                } else {
                    format!(
                        "not measured at N = {} (`bench-suite run`)",
                        crate::analysis::fmt_u(PRICED_N)
                    )
                },
                latency,
                retry,
            }
        };
    rows.push(suite_row(
        Mode::Unbatched,
        LoadMode::Unbatched,
        UNKEYED,
        load_latency(load, "(a)"),
    ));
    // Submit + timer under load, with the canister's timer period at one round (its default's
    // scale on the IC) and at two.
    let submit_measured: Vec<String> = ["1 round", "2 rounds"]
        .into_iter()
        .filter_map(|period| {
            let prefix = format!("(b) `submit_create_user` + timer, `max_delay_ms` = {period}");
            load_latency(load, &prefix).map(|l| format!("timer period {period}: {l}"))
        })
        .collect();
    rows.push(suite_row(
        Mode::SubmitAndTimer,
        LoadMode::Batched,
        UNKEYED,
        (!submit_measured.is_empty()).then(|| submit_measured.join("; ")),
    ));
    rows.push(suite_row(
        Mode::ClientBatch,
        LoadMode::ClientBatch,
        KEYED_OR_NOT,
        None,
    ));
    rows.push(suite_row(
        Mode::ClientBatchPacked,
        LoadMode::ClientBatch,
        KEYED_OR_NOT,
        None,
    ));
    // The Rust batcher: its cycles per op in one 1,000-op batch (overhead.md) and under load
    // (load.md).
    let batcher_cycles = client.overhead.as_deref().and_then(|t| {
        // Its table has a column pair per profile: PocketIC 13's, as the suite's rows.
        let pocket_ic_13 = format!(
            "cycles per op ({})",
            offline_engine::Metering::POCKET_IC_13.name
        );
        let column = column(t, &pocket_ic_13).or_else(|| column(t, "cycles per op"))?;
        number(row(t, "the Rust batcher")?.get(column)?)
    });
    rows.push(PathRow {
        path: "Rust batcher (`ic-batch-client`) through ic-agent".into(),
        cycles_per_op: batcher_cycles,
        cost_source: if batcher_cycles.is_some() {
            "offline replica through a real agent, one keyed packed batch of 1,000 (overhead.md)"
                .into()
        } else {
            not_measured(OVERHEAD_COMMAND)
        },
        latency: load_latency(load, "(c)").unwrap_or_else(|| not_measured(LOAD_COMMAND)),
        retry: KEYED,
    });
    // The application canister: cycles per user write, both canisters, end to end.
    let app_cycles = client
        .app_canister
        .as_deref()
        .and_then(|t| row(t, "through the batcher"))
        .and_then(|cells| cells.get(2).and_then(|c| number(c)));
    rows.push(PathRow {
        path: "application canister batching its inter-canister calls".into(),
        cycles_per_op: app_cycles,
        cost_source: if app_cycles.is_some() {
            "offline replica through a real agent, per user write end to end: the user's ingress, the app canister, the call, the database canister (app_canister.md)".into()
        } else {
            not_measured(APP_COMMAND)
        },
        latency: "not measured (the user's call is answered when the op is queued; the write commits at the app canister's next flush)".into(),
        retry: "keyed between the canisters (exactly once); the user's own call to the app canister is unkeyed",
    });
    rows
}

/// The section: the table (after `label`, the suite's engine and date line) and what it says.
pub fn render(r: &SuiteResults, client: &ClientFigures, fees: &FeeSchedule, label: &str) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "\n## Which path when\n");
    let _ = writeln!(
        o,
        "Every write path side by side. Cycles per op on a 13-node subnet, US$ per million writes at US$ {:.5} per XDR \
         ({}). The suite's paths are priced at N = {} ops per message or flush; the client paths come from the \
         end-to-end commands, whose markdown is committed beside this report (`load.md`, `overhead.md`, `app_canister.md`; \
         engine: offline replica through a real agent). Latency in rounds (one round is about one second on the IC): \
         measured through a real agent where `load.md` has it, and from the load simulation over measured costs below.\n",
        fees.usd_per_xdr,
        fees.usd_rate_date,
        crate::analysis::fmt_u(PRICED_N)
    );
    let _ = writeln!(o, "{label}\n");
    let _ = writeln!(
        o,
        "| path | cycles per op | US$ per 1M writes | cost measured by | latency (rounds) | retry safety |\n|---|---:|---:|---|---|---|"
    );
    let rows = rows(r, client);
    for row in &rows {
        let (cycles, usd) = match row.cycles_per_op {
            Some(c) => (
                crate::analysis::fmt_u(c.round() as u64),
                format!(
                    "{:.4}",
                    c * 1e6 / crate::fees::CYCLES_PER_XDR * fees.usd_per_xdr
                ),
            ),
            None => ("–".into(), "–".into()),
        };
        let _ = writeln!(
            o,
            "| {} | {cycles} | {usd} | {} | {} | {} |",
            row.path, row.cost_source, row.latency, row.retry
        );
    }
    // How much cheaper a write is in a batch, from the rows above.
    let cost = |path: &str| {
        rows.iter()
            .find(|x| x.path == path)
            .and_then(|x| x.cycles_per_op)
    };
    let cheaper = match (
        cost(Mode::Unbatched.label()),
        cost(Mode::ClientBatchPacked.label()),
    ) {
        (Some(one), Some(packed)) if packed > 0.0 => {
            format!(
                " ({:.0}× cheaper per write than one call per op, packed)",
                one / packed
            )
        }
        _ => String::new(),
    };
    let _ = writeln!(
        o,
        "\nWhen: one call per op (or submit + timer) for a few writes per round from many independent users, \
         where each answer must say at once what happened, and where a lost answer can be checked before retrying; \
         a client batch when one client holds many writes, as a service or a sync job does{cheaper}, exactly once only with a key; \
         the Rust batcher when a service writes continuously: it forms keyed batches, retries them with their key, and \
         answers each write on its own future; an application canister that batches its calls to the database canister \
         when writes reach it as user calls (each user call is still its own ingress message). One call per op, and each \
         submit, is one of the at most {} ingress messages a block takes; a batch carries up to {} ops in one message.\n",
        crate::analysis::fmt_u(r.load_model.block_max_messages as u64),
        crate::analysis::fmt_u(bench_api::MAX_CLIENT_BATCH as u64)
    );
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rows_of_another_profile_are_left_out() {
        let text = "# t\n\nintro\n\n### Under the tracker (`ic-dmt-0441fbd7`)\n\n| (c) x | 91138 |\n\n\
                    ### Under PocketIC 13 (`pocketic-13`)\n\n| (c) x | 86923 |\n\n## Next\n\n| (d) y | 1 |\n";
        let kept = under_profile(text, "pocketic-13");
        assert_eq!(row(&kept, "(c)"), Some(vec!["(c) x", "86923"]));
        assert_eq!(row(&kept, "(d)"), Some(vec!["(d) y", "1"]));
        assert!(!kept.contains("91138"));
        let kept = under_profile(text, "ic-dmt-0441fbd7");
        assert_eq!(row(&kept, "(c)"), Some(vec!["(c) x", "91138"]));
        let pairs = "| how | cycles per op (ic-dmt-0441fbd7) | cycles per op (pocketic-13) |\n|---|---:|---:|\n";
        assert_eq!(column(pairs, "cycles per op (pocketic-13)"), Some(2));
        assert_eq!(column(pairs, "cycles per op"), None);
        // A file without profile headings is kept whole.
        assert_eq!(
            under_profile("| (c) x | 5 |\n", "pocketic-13"),
            "| (c) x | 5 |\n"
        );
    }

    const LOAD: &str = "\
| path | committed / offered | failures | ops/s | p50 ms (rounds) | p99 ms (rounds) | ingress messages | most per block | cycles per op (ingress) | US$ per 1M ops |
|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|
| (a) one call per op (`create_user`) | 6000 / 6000 | 0 | 160 | 17067 (3.41) | 25941 (5.19) | 6000 | 1000 | 6498540 (1324000) | 8.804 |
| (c) the Rust batcher (`ic-batch-client`, keyed packed) | 6000 / 6000 | 0 | 400 | 4997 (1.00) | 5021 (1.00) | 3 | 1 | 89476 (72665) | 0.121 |
";

    #[test]
    fn rows_and_numbers_are_read_from_markdown_tables() {
        let cells = row(LOAD, "(c)").expect("the batcher's row");
        assert_eq!(cells[1], "6000 / 6000");
        assert_eq!(parenthesized(cells[5]), Some(1.00));
        assert_eq!(number(cells[8]), Some(89_476.0));
        assert_eq!(number("1,234,567 cycles"), Some(1_234_567.0));
        assert_eq!(row(LOAD, "(b)"), None);
        assert_eq!(
            load_latency(Some(LOAD), "(a)").as_deref(),
            Some("p50 3.41, p99 5.19 at 2,000 ops/round, 6000 / 6000 committed (load.md)")
        );
        assert_eq!(load_latency(None, "(a)"), None);
    }

    #[test]
    fn a_missing_client_figure_is_shown_as_not_measured_with_its_command() {
        let r = crate::suite::tests::synthetic_results();
        let rows = rows(&r, &ClientFigures::default());
        let batcher = rows
            .iter()
            .find(|x| x.path.starts_with("Rust batcher"))
            .expect("the batcher's row");
        assert_eq!(batcher.cycles_per_op, None);
        assert!(batcher.cost_source.contains(OVERHEAD_COMMAND));
        assert!(batcher.latency.contains(LOAD_COMMAND));
        let md = render(&r, &ClientFigures::default(), &r.fee_schedule, "*label*");
        assert!(md.contains("## Which path when"));
        assert!(md.contains("| application canister batching its inter-canister calls | – | – |"));
    }

    #[test]
    fn client_figures_fill_their_rows() {
        let r = crate::suite::tests::synthetic_results();
        let client = ClientFigures {
            load: Some(LOAD.into()),
            overhead: Some(
                "| how | cycles | cycles per op | vs hand-built |\n|---|---:|---:|---:|\n\
                 | the Rust batcher through ic-agent (keyed) | 47000000 | 47000 | +1.20 % |\n"
                    .into(),
            ),
            app_canister: Some(
                "| app canister forwards | writes committed | per write | app | db | vs |\n|---|---:|---:|---:|---:|---:|\n\
                 | through the batcher (one call per flush) | 1000 / 1000 | 7500000 | 7000000 (1300000) | 500000 | -50.0 % |\n"
                    .into(),
            ),
        };
        let rows = rows(&r, &client);
        let find = |p: &str| rows.iter().find(|x| x.path.starts_with(p)).expect(p);
        assert_eq!(find("Rust batcher").cycles_per_op, Some(47_000.0));
        assert!(
            find("Rust batcher")
                .latency
                .starts_with("p50 1.00, p99 1.00")
        );
        assert_eq!(
            find("application canister").cycles_per_op,
            Some(7_500_000.0)
        );
        assert!(
            find("one call per op")
                .latency
                .starts_with("p50 3.41, p99 5.19")
        );
        let md = render(&r, &client, &r.fee_schedule, "*label*");
        // 47,000 cycles per op = 0.047 XDR per million writes.
        let usd = format!("{:.4}", 0.047 * r.fee_schedule.usd_per_xdr);
        assert!(md.contains(&format!("| 47,000 | {usd} |")), "{md}");
    }
}
