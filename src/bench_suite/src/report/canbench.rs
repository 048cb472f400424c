//! The canbench sections: gains, the floor, error isolation, flush size and the ic-rusqlite users/orders benchmark.

use std::fmt::Write;

use super::inputs::Inputs;
use crate::analysis::{fmt_f, fmt_u, human};
use crate::engine_runs::CanbenchFigures;
use crate::suite::Scale;

/// Performance gains: unbatched against batched instructions per op.
pub(super) fn gains(p: &Inputs) -> String {
    let mut o = String::new();
    let r = p.results;
    let l = &p.label;
    let _ = writeln!(
        o,
        "\n## Performance gains (canbench, instructions per op)\n\nUnbatched: N ops each through the unbatched update path \
         (own autocommit transaction). Batched: N submissions through batch_core and one flush. Like the \
         \"Performance gains\" table of Marlin.BatchOps (a .NET batching library for SQLite), in instructions instead of milliseconds.\n\n{l}\n"
    );
    let _ = writeln!(
        o,
        "| op | N | unbatched instructions/op | batched instructions/op | gain × |\n|---|---:|---:|---:|---:|"
    );
    for g in &r.gains {
        let _ = writeln!(
            o,
            "| {} | {} | {} | {} | {:.1}× |",
            g.kind,
            fmt_u(g.n),
            fmt_f(g.unbatched_per_op),
            fmt_f(g.batched_per_op),
            g.gain
        );
    }
    o
}

/// The floor: a batched insert against the same INSERT in one transaction.
pub(super) fn floor(p: &Inputs) -> String {
    let mut o = String::new();
    let r = p.results;
    let l = &p.label;
    let _ = writeln!(
        o,
        "\n## Floor: batched insert vs the same INSERT in one transaction (10,000 ops)\n\n{l}\n"
    );
    let _ = writeln!(
        o,
        "| bench | step | instructions/op | × floor |\n|---|---|---:|---:|"
    );
    for row in &r.floor {
        let _ = writeln!(
            o,
            "| `{}` | {} | {} | {:.3}× |",
            row.bench,
            row.what,
            fmt_f(row.per_op),
            row.vs_floor
        );
    }
    if let Some(b) = r.canbench.benches.get("batched_insert_10000") {
        scopes(&mut o, "batched_insert_10000", b);
    }
    o
}

/// Error isolation: 10,000 batched inserts with p% failing.
pub(super) fn errors(p: &Inputs) -> String {
    let mut o = String::new();
    let r = p.results;
    let l = &p.label;
    let _ = writeln!(
        o,
        "\n## Error isolation (10,000 batched inserts, p% failing)\n\n{l}\n"
    );
    let _ = writeln!(
        o,
        "| failing | instructions | successful ops | instructions per successful op | vs 0% |\n|---:|---:|---:|---:|---:|"
    );
    for e in &r.errors {
        let d = e
            .delta_pct
            .map(|d| format!("{d:+.2}%"))
            .unwrap_or_else(|| "-".into());
        let _ = writeln!(
            o,
            "| {}% | {} | {} | {} | {d} |",
            e.pct,
            fmt_u(e.instructions),
            fmt_u(e.successful),
            fmt_f(e.per_successful_op)
        );
    }
    o
}

/// Flush size: 10,000 batched inserts at each flush size.
pub(super) fn flush_size(p: &Inputs) -> String {
    let mut o = String::new();
    let r = p.results;
    let l = &p.label;
    let _ = writeln!(o, "\n## Flush size (10,000 batched inserts)\n\n{l}\n");
    let _ = writeln!(
        o,
        "| flush size | flushes | instructions | instructions/op |\n|---:|---:|---:|---:|"
    );
    for row in &r.flush {
        let _ = writeln!(
            o,
            "| {} | {} | {} | {} |",
            fmt_u(row.flush_size),
            fmt_u(10_000u64.div_ceil(row.flush_size)),
            fmt_u(row.instructions),
            fmt_f(row.per_op)
        );
    }
    o
}

/// The ic-rusqlite users/orders benchmark against its published figures.
pub(super) fn users_orders(p: &Inputs) -> String {
    let mut o = String::new();
    let r = p.results;
    let l = &p.label;
    let _ = writeln!(
        o,
        "\n## The ic-rusqlite users/orders benchmark\n\nPublished figures: ic-rusqlite's benchmark page (canbench on PocketIC; <https://github.com/wasm-forge/benchmarks/tree/main/sql-users-orders>). {}\n\n{l}\n",
        if r.scale == Scale::Full {
            "Same data shapes, full scale (100,000 users, 1,000,000 orders)."
        } else {
            "This run is at reduced scale (row counts divided by the divisor), so no ratio is given."
        }
    );
    let _ = writeln!(
        o,
        "| benchmark | bench | published (PocketIC) | ours | ours / published |\n|---|---|---:|---:|---:|"
    );
    for s in &r.users_orders {
        let ours = s.measured.map(human).unwrap_or_else(|| "not run".into());
        let ratio = s
            .ratio
            .map(|x| format!("{x:.2}"))
            .unwrap_or_else(|| "—".into());
        let _ = writeln!(
            o,
            "| {} | `{}` | {} | {ours} | {ratio} |",
            s.description,
            s.bench,
            human(s.published)
        );
    }
    o
}

/// The scopes of bench `name`: its total, and a table of its scopes with their share of it.
pub(super) fn scopes(out: &mut String, name: &str, b: &CanbenchFigures) {
    let _ = writeln!(
        out,
        "\n`{name}`: total {} instructions",
        fmt_u(b.total.instructions)
    );
    if b.scopes.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "\n| scope | calls | instructions | share of total |\n|---|---:|---:|---:|"
    );
    for (s, m) in &b.scopes {
        let share = m.instructions as f64 / b.total.instructions.max(1) as f64 * 100.0;
        let _ = writeln!(
            out,
            "| {s} | {} | {} | {share:.1}% |",
            m.calls,
            fmt_u(m.instructions)
        );
    }
}
