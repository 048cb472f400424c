//! "ic-sqlite-vfs beside ic-rusqlite": the peer canister's canbench benches beside the
//! reference's ([`crate::peer`]), priced at the 13-node fees, the stable memory after the
//! fixture, the chart, and which binding to choose from these figures.

use std::fmt::Write;

use super::inputs::Inputs;
use crate::analysis::{fmt_f, fmt_u};
use crate::peer::{self, NODES, PEER, REFERENCE, SideBySide, cycles_per_write, usd_per_million};
use crate::regions::WorkloadPages;

/// The section (empty when the suite ran without the peer's wasm).
pub(super) fn peer_vfs(p: &Inputs) -> String {
    let mut o = String::new();
    let r = p.results;
    let Some(vfs) = &r.peer else {
        return o;
    };
    let f = &r.fee_schedule;
    let l = &p.label;
    let rows = peer::side_by_side(&r.canbench.benches, &vfs.canbench.benches);
    // The messages on both deployable wasms: the reference's under the tracker's run, the peer's.
    let both = r.tracker.as_ref().zip(vfs.pages.as_ref());
    let messages = both.map_or_else(String::new, |(t, pages)| per_message(p, t, pages));
    let _ = writeln!(
        o,
        "\n## {PEER} beside {REFERENCE}\n\n\
         The peer canister on {PEER} (`canisters/vfs_canister`: SQLite in one stable-memory region through the crate's \
         VFS, no WASI) is measured beside the reference{}. `bench/peer_vfs.md` explains where the instructions go.\n",
        if messages.is_empty() {
            " by the reference's canbench benches"
        } else {
            " twice: real messages on both deployable wasms under both metering profiles, then the reference's \
             canbench benches"
        }
    );
    o.push_str(&messages);
    if !messages.is_empty() {
        let _ = writeln!(
            o,
            "\n### The write path inside the canister (canbench, `pocketic-13`)\n"
        );
    }
    let _ = writeln!(
        o,
        "The peer runs the reference's canbench benches under the same names, from the same fixture (10,000 users, \
         20,000 orders, two indexes): its canbench wasm `{}` (sha256 `{}…`), built by `scripts/build_vfs.sh \
         canbench`. (a) is `unbatched_<op>_<N>` / N: each write in its own transaction; (b) is `batched_<op>_<N>` / N: \
         N writes in one transaction (the reference's queue and one flush, the peer's client batch, which is \
         unkeyed). Both are the write path inside the canister, without a message's Candid work.\n\n{l}\n",
        vfs.canbench_wasm.path,
        &vfs.canbench_wasm.sha256[..vfs.canbench_wasm.sha256.len().min(12)],
    );
    let _ = writeln!(
        o,
        "Instructions per write:\n\n\
         | op | N | (a) {REFERENCE} | (a) {PEER} | (b) {REFERENCE} | (b) {PEER} | (b) {PEER} / {REFERENCE} |\n\
         |---|---:|---:|---:|---:|---:|---:|"
    );
    for row in &rows {
        let per = |t: u64| t as f64 / row.n as f64;
        let _ = writeln!(
            o,
            "| {} | {} | {} | {} | {} | {} | {:.2} |",
            row.kind,
            fmt_u(row.n),
            fmt_f(per(row.unbatched.0)),
            fmt_f(per(row.unbatched.1)),
            fmt_f(per(row.batched.0)),
            fmt_f(per(row.batched.1)),
            row.batched.1 as f64 / row.batched.0.max(1) as f64
        );
    }
    let _ = writeln!(
        o,
        "\nCycles per write and US$ per million writes ({NODES}-node subnet, execution only): (a) one update message \
         per write, its base fee each time; (b) one message for the N writes, one base fee shared. {}; 1 T cycles = \
         1 XDR = US$ {:.5} ({}). Ingress reception and the Candid decoding of the message are not in these figures (the \
         message-level sections price them for the reference).\n\n{l}\n",
        f.execution_formula(),
        f.usd_per_xdr,
        f.usd_rate_date
    );
    let _ = writeln!(
        o,
        "| op | N | (a) {REFERENCE} | (a) {PEER} | (b) {REFERENCE} | (b) {PEER} |\n|---|---:|---:|---:|---:|---:|"
    );
    for row in &rows {
        let cell = |total: u64, batched: bool| {
            let c = cycles_per_write(f, total, row.n, batched, NODES);
            format!("{} (US$ {:.4})", fmt_f(c), usd_per_million(f, c))
        };
        let _ = writeln!(
            o,
            "| {} | {} | {} | {} | {} | {} |",
            row.kind,
            fmt_u(row.n),
            cell(row.unbatched.0, false),
            cell(row.unbatched.1, false),
            cell(row.batched.0, true),
            cell(row.batched.1, true)
        );
    }
    let s = vfs.stable_memory;
    let _ = writeln!(
        o,
        "\nStable memory after the fixture (loaded into each canister by `execute_batch` and `execute_sql`, as every \
         message-level run does):\n\n{l}\n\n| binding | stable memory |\n|---|---:|\n\
         | {REFERENCE} (stable-fs) | {} bytes ({}) |\n| {PEER} | {} bytes ({}) |",
        fmt_u(s.reference_bytes),
        mib(s.reference_bytes),
        fmt_u(s.peer_bytes),
        mib(s.peer_bytes)
    );
    for c in p.charts.iter().filter(|c| c.file == peer::CHART_FILE) {
        let _ = writeln!(
            o,
            "\n![{}]({})\n\n([PNG]({}))",
            c.title,
            c.file,
            c.file.replace(".svg", ".png")
        );
    }
    let workloads = both.map(|(t, pages)| (t.regions.as_slice(), pages.workloads.as_slice()));
    o.push_str(&choose(&rows, f, s, workloads));
    o
}

/// "What a message costs on each binding": the workloads of where the pages go on both
/// canisters' deployable wasms, under both profiles (empty if they did not run the same
/// workloads).
fn per_message(
    p: &Inputs,
    t: &crate::profiles::ProfileRun,
    pages: &crate::peer::PeerPages,
) -> String {
    use crate::levers::{Build, fixture_words, tables};
    let r = p.results;
    let builds = [
        Build {
            name: REFERENCE.into(),
            sha256: r.deployable_wasm.sha256.clone(),
            workloads: t.regions.clone(),
        },
        Build {
            name: PEER.into(),
            sha256: pages.wasm.sha256.clone(),
            workloads: pages.workloads.clone(),
        },
    ];
    let Ok(tables) = tables(&builds, "binding", "#### Both bindings:") else {
        return String::new();
    };
    let short = |h: &str| h[..h.len().min(12)].to_string();
    let mut o = String::new();
    let _ = write!(
        o,
        "### What a message costs on each binding, under both profiles\n\n\
         The workloads of the section on where the pages go (one `create_order` per message, packed batches of \
         1,000 and 10,000) run on the peer's deployable wasm (`{}`, sha256 `{}…`, built by `scripts/build_vfs.sh`) \
         as on the reference's (`{}`, sha256 `{}…`), each on a fresh canister holding {}: real update messages, \
         their Candid work included. Cycles per write on a {NODES}-node subnet under the replica's rules with the \
         deterministic memory tracker (`{}`) and under PocketIC 13's (`pocketic-13`); the change is against \
         {REFERENCE}. Wasm pages: 64 KiB pages the tracker charged a first access / a first write, per message; \
         4 KiB pages: those changed under PocketIC 13's rules.\n\n{}\n\n{}\n",
        pages.wasm.path,
        short(&pages.wasm.sha256),
        r.deployable_wasm.path,
        short(&r.deployable_wasm.sha256),
        fixture_words(crate::engine_runs::Fixture::Small),
        t.metering,
        p.label.replace(&r.engine, &t.engine),
        p.label
    );
    o.push_str(&tables);
    o
}

/// One line per metering profile: US$ per million writes of one write per message and of the
/// largest packed batch, on both bindings (none when the workloads differ).
fn message_lines(
    f: &crate::fees::FeeSchedule,
    reference: &[WorkloadPages],
    vfs: &[WorkloadPages],
) -> Option<String> {
    let names = |w: &[WorkloadPages]| w.iter().map(|w| w.workload.clone()).collect::<Vec<_>>();
    if reference.is_empty() || names(reference) != names(vfs) {
        return None;
    }
    let (one, big) = (0, reference.len() - 1);
    let usd = |w: &WorkloadPages, profile: usize| {
        usd_per_million(f, crate::levers::per_write(w, profile))
    };
    let mut o = String::new();
    for (profile, rules) in [
        (
            0,
            format!(
                "under the tracker's rules (`{}`)",
                crate::profiles::LEAD.name
            ),
        ),
        (1, "under PocketIC 13's rules (`pocketic-13`)".to_string()),
    ] {
        let _ = write!(
            o,
            "- **{rules}**: {}, {REFERENCE} US$ {:.4} and {PEER} US$ {:.4}",
            reference[one].workload,
            usd(&reference[one], profile),
            usd(&vfs[one], profile),
        );
        if big != one {
            let _ = write!(
                o,
                "; {}, US$ {:.4} and US$ {:.4}",
                reference[big].workload,
                usd(&reference[big], profile),
                usd(&vfs[big], profile),
            );
        }
        o.push_str(".\n");
    }
    Some(o)
}

/// `83,951,616` bytes as `80.1 MiB`.
fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1u64 << 20) as f64)
}

/// The row of `kind` at `n`, if measured.
fn at<'a>(rows: &'a [SideBySide], kind: &str, n: u64) -> Option<&'a SideBySide> {
    rows.iter().find(|r| r.kind == kind && r.n == n)
}

/// "Which to choose", from the largest N measured of each op kind.
fn choose(
    rows: &[SideBySide],
    f: &crate::fees::FeeSchedule,
    stable: crate::peer::StableAfterFixture,
    messages: Option<(&[WorkloadPages], &[WorkloadPages])>,
) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "\n### Which to choose\n");
    if let Some(lines) = messages.and_then(|(reference, vfs)| message_lines(f, reference, vfs)) {
        let _ = writeln!(
            o,
            "Real messages (the first tables: the small fixture, their Candid work included), US$ per million writes \
             on a {NODES}-node subnet:\n\n{lines}\nThe write path inside the canister (canbench, the tables above; \
             each figure: the bench named, on this engine):\n"
        );
    } else {
        let _ = writeln!(
            o,
            "From the tables above (each figure: the bench named, on this engine):\n"
        );
    }
    for kind in crate::analysis::OP_KINDS {
        let Some(n) = rows.iter().filter(|r| r.kind == kind).map(|r| r.n).max() else {
            continue;
        };
        let (Some(big), Some(one)) = (at(rows, kind, n), at(rows, kind, 1)) else {
            continue;
        };
        let usd = |total: u64, n: u64, batched: bool| {
            usd_per_million(f, cycles_per_write(f, total, n, batched, NODES))
        };
        let _ = writeln!(
            o,
            "- **{kind}**: one per message, {REFERENCE} US$ {:.4} and {PEER} US$ {:.4} per million writes \
             (`unbatched_{kind}_1`, {} against {} instructions per write); {} in one transaction, {REFERENCE} US$ {:.4} \
             and {PEER} US$ {:.4} (`batched_{kind}_{}`, {} against {} per write, {PEER} / {REFERENCE} {:.2}).",
            usd(one.unbatched.0, 1, false),
            usd(one.unbatched.1, 1, false),
            fmt_u(one.unbatched.0),
            fmt_u(one.unbatched.1),
            fmt_u(n),
            usd(big.batched.0, n, true),
            usd(big.batched.1, n, true),
            n,
            fmt_f(big.batched.0 as f64 / n as f64),
            fmt_f(big.batched.1 as f64 / n as f64),
            big.batched.1 as f64 / big.batched.0.max(1) as f64
        );
    }
    let _ = writeln!(
        o,
        "\nBatch first, whichever the binding: N writes in one transaction and one message cost a fraction of one \
         message per write on both, where the base fee of each message is most of the cost. Between the bindings, on \
         this workload (a table with an AUTOINCREMENT key and a secondary index), {PEER} is not cheaper per write \
         (`bench/peer_vfs.md` traces why): one write in its own transaction costs more on it (16 KiB \
         pages copied into its in-memory journal, its heap overlay and stable memory, and a new superblock at each \
         commit), and in a batch it costs about what {REFERENCE} costs for updates and more for inserts, because the \
         reference's executor (batch_core) coalesces consecutive inserts into multi-row INSERTs. That executor is \
         rusqlite's and is not ported to {PEER}: the peer's batched inserts run one cached statement per op, which \
         is what the reference costs without coalescing (`breakdown_prepare_cached_10000`, `bench/peer_vfs.md`). {PEER} \
         holds the fixture in {:.2} times the stable memory {REFERENCE} uses (table above).\n\n\
         Limits of each: {PEER} cannot open an existing {REFERENCE} image (a stable-fs file): moving means exporting \
         the rows and loading them again. Its API is the crate's (`Db::update` / `Db::query` closures over its own \
         connection type), not rusqlite, and it has no batch_core queue (`submit_*`, `flush`) nor the exactly-once key store, so \
         its batches are unkeyed. Durability: {PEER} keeps its journal in memory with `synchronous=OFF`, writes the \
         dirty 16 KiB pages at `COMMIT` and publishes them with a new superblock (a trap rolls the whole message \
         back); {REFERENCE} here runs `journal_mode=PERSIST`, `locking_mode=EXCLUSIVE`, `synchronous=NORMAL` with 4 KiB \
         pages, its rollback journal a stable-fs file.",
        stable.peer_bytes as f64 / stable.reference_bytes.max(1) as f64
    );
    o
}
