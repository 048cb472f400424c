//! The appendices: internal targets, reliability, what was measured; and how to reproduce.

use std::fmt::Write;

use super::canbench::scopes;
use super::inputs::Inputs;
use crate::analysis::fmt_u;

/// Appendix A: the internal targets, and the scopes of those missed.
pub(super) fn targets(p: &Inputs) -> String {
    let mut o = String::new();
    let r = p.results;
    let l = &p.label;
    let _ = writeln!(
        o,
        "\n## Appendix A: internal targets\n\nThe project's own goals for instructions per op and their breakdowns when missed; \
         what a user pays is the table at the top.\n\n{l}\n"
    );
    let _ = writeln!(o, "| target | measured | met |\n|---|---|---|");
    for t in &r.targets {
        let met = match t.met {
            Some(true) => "✅ yes",
            Some(false) => "❌ no",
            None => "— not measured",
        };
        let _ = writeln!(o, "| {} | {} | {met} |", t.target, t.measured);
    }
    let missed: Vec<_> = r.targets.iter().filter(|t| t.met == Some(false)).collect();
    if !missed.is_empty() {
        let _ = writeln!(o, "\n### Cost breakdown of missed targets\n\n{l}");
        let mut shown = std::collections::BTreeSet::new();
        for t in missed {
            for name in &t.breakdown_benches {
                if shown.insert(name.clone())
                    && let Some(b) = r.canbench.benches.get(name)
                {
                    scopes(&mut o, name, b);
                }
            }
        }
        o.push('\n');
    }
    o
}

/// Appendix B: the reliability scenarios and the worst-case flush.
pub(super) fn reliability(p: &Inputs) -> String {
    let mut o = String::new();
    let r = p.results;
    let l = &p.label;
    let _ = writeln!(o, "\n## Appendix B: reliability");
    if !r.reliability.is_empty() {
        let _ = writeln!(
            o,
            "\n### Reliability: nothing lost, nothing altered, nothing stuck, no false outcome\n\n\
             Each scenario tries to stop, alter or empty the batched write queue of the deployable canister, or to \
             make it say something false (`src/bench_suite/src/reliability.rs`). *Failed without a cause*: ordinary \
             ops (every op but the scenario's culprits) that failed; *lost*: acknowledged ops without an outcome once \
             the queue drained (an evicted outcome that still says whether it committed is not lost); *altered*: \
             committed orders stored with other bits than submitted (or gone after an upgrade); *applied twice*: ops \
             that ran again when their keyed batch was resent; *trapped*: messages whose changes were rolled \
             back; *timer runs*: flush-timer runs (about one per round) until the queue was empty again.\n\n{l}\n"
        );
        let _ = writeln!(
            o,
            "| scenario | what | acknowledged | committed | failed | failed without a cause | lost | altered | applied twice | refused | trapped | timer runs to drain |\n\
             |---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
        );
        for x in &r.reliability {
            let _ = writeln!(
                o,
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                x.name,
                x.description,
                fmt_u(x.acknowledged),
                fmt_u(x.committed),
                fmt_u(x.failed),
                x.failed_without_cause,
                x.lost,
                x.altered,
                x.applied_twice,
                fmt_u(x.refused),
                x.trapped,
                x.rounds_to_drain
            );
        }
    }

    if let Some(w) = &r.worst_case_flush {
        let _ = writeln!(
            o,
            "\n### The worst-case flush\n\nA flush starts no op after `flush_instruction_budget` and interrupts a running op at \
             twice it; when that op is not the first, the ops before it are re-applied. With a budget of {} instructions, \
             {} queued inserts (about one budget) and an endless insert behind them:\n\n{l}\n",
            fmt_u(w.budget),
            fmt_u(w.ops_before)
        );
        let _ = writeln!(o, "| flush | instructions | × budget |\n|---|---:|---:|");
        let _ = writeln!(
            o,
            "| commits the {} inserts, interrupts the heavy op behind them, re-applies them | {} | {:.2}× |",
            fmt_u(w.ops_before),
            fmt_u(w.mixed_flush_instructions),
            w.mixed_flush_instructions as f64 / w.budget as f64
        );
        let _ = writeln!(
            o,
            "| runs the heavy op alone, interrupts and rolls it back | {} | {:.2}× |\n\n\
             The canister refuses a budget B unless 3·B plus an 8 B margin fits the 40 B instructions of a message.",
            fmt_u(w.alone_flush_instructions),
            w.alone_flush_instructions as f64 / w.budget as f64
        );
        if w.varying_ops > 0 {
            let _ = writeln!(
                o,
                "\nOps whose cost varies (a recursive CTE of a random length) cost more when an interrupt makes a flush \
                 re-apply them; the re-application keeps the flush's deadline (3·B from its start). {} such ops at the \
                 largest budget for a message limit of {} instructions (B = {}, the canister's rule scaled down): {} \
                 flushes, {} rolled back at 3·B and retried with fewer ops, {} trapped messages; the largest message \
                 used {} instructions ({:.3}× B).",
                fmt_u(w.varying_ops),
                fmt_u(w.varying_limit),
                fmt_u(w.varying_budget),
                fmt_u(w.varying_flushes),
                w.varying_capped,
                w.varying_trapped,
                fmt_u(w.varying_most),
                w.varying_most as f64 / w.varying_budget.max(1) as f64
            );
        }
    }
    o
}

/// Appendix C: the wasms measured (paths and sha256).
pub(super) fn measured(p: &Inputs) -> String {
    let mut o = String::new();
    let r = p.results;
    let _ = writeln!(o, "\n## Appendix C: what was measured\n");
    let _ = writeln!(o, "| wasm | path | sha256 |\n|---|---|---|");
    let _ = writeln!(
        o,
        "| deployable | `{}` | `{}` |",
        r.deployable_wasm.path, r.deployable_wasm.sha256
    );
    let _ = writeln!(
        o,
        "| canbench | `{}` | `{}` |\n",
        r.canbench_wasm.path, r.canbench_wasm.sha256
    );
    o
}

/// How to reproduce the figures.
pub(super) fn reproduce(_: &Inputs) -> String {
    let mut o = String::new();

    let _ = writeln!(
        o,
        "\n## How to reproduce\n\n`scripts/bench.sh` (full scale) or `scripts/bench.sh ci`; with PocketIC, `canbench` runs the same \
         `__canbench__*` benches from `canbench.yml`. The CI check: `bench-suite check --baseline bench/baseline-ci.json`.\n"
    );
    o
}
