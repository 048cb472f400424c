//! The message-level sections: what a client's calls cost, at full scale too, where their instructions go, and what wire shapes cost.

use std::fmt::Write;

use super::inputs::Inputs;
use crate::analysis::{fmt_f, fmt_u};
use crate::engine_runs::TIMER_SELF_CALL_BYTES;
use crate::fees::{NONCE_BYTES, SUBNET_SIZES};
use crate::message_bench::Mode;

/// What a client's calls cost: the message-level runs per mode and N, with the fee model.
pub(super) fn message_level(p: &Inputs) -> String {
    let mut o = String::new();
    let r = p.results;
    let f = &r.fee_schedule;
    let l = &p.label;
    let _ = writeln!(
        o,
        "\n## Message level: what a client's calls cost (deployable wasm, real update calls)\n\n\
         Fixture per run: fresh install, 10,000 users with 2 orders each and the two indexes. Instructions are \
         **billed** instructions (what `performance_counter` sees plus 1,000 per dirty 4 KiB heap page, `src/offline_engine/METERING.md` §5). \
         Ingress bytes = Candid argument + method name + {NONCE_BYTES}-byte nonce. Cycles per message: \
         `{}` for every executed message (updates, the timer task, its self-call, the \
         callback), plus `{}` per ingress message, plus `{}` with bytes = {TIMER_SELF_CALL_BYTES} \
         for the self-call each timer task sends (ic-cdk-timers runs every timer through one). Fee schedule: {} \
         (13-node values, 34-node by integer `·34/13` of each summed fee), 1 T cycles = 1 XDR = US${:.6} ({}). \
         Per-1M-ops figures extrapolate the run linearly.\n",
        f.execution_formula(),
        f.ingress_formula(),
        f.call_formula(),
        f.date,
        f.usd_per_xdr,
        f.usd_rate_date
    );
    for m in Mode::ALL {
        let _ = writeln!(o, "- **{}**: {}", m.label(), m.describe());
    }
    let _ = writeln!(o, "\n{l}\n");
    let _ = writeln!(
        o,
        "| mode | N | messages | billed instructions | ingress bytes | instructions/op | cycles/1M ops (13 nodes) | cycles/1M ops (34 nodes) | US$/1M ops (13) | US$/1M ops (34) |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    );
    for s in &r.messages {
        let _ = writeln!(
            o,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {:.2} | {:.2} |",
            s.mode.label(),
            fmt_u(s.n),
            fmt_u(s.messages),
            fmt_u(s.billed_instructions),
            fmt_u(s.ingress_bytes),
            fmt_f(s.instructions_per_op),
            fmt_u(s.cycles_per_million_ops[0] as u64),
            fmt_u(s.cycles_per_million_ops[1] as u64),
            s.usd_per_million_ops[0],
            s.usd_per_million_ops[1]
        );
    }
    debug_assert_eq!(SUBNET_SIZES, [13, 34]);
    o
}

/// The message-level runs on the full-scale fixture beside the 10,000-user ones.
pub(super) fn full_scale(p: &Inputs) -> String {
    let mut o = String::new();
    let r = p.results;
    let l = &p.label;
    if !r.messages_full_scale.is_empty() {
        let _ = writeln!(
            o,
            "\n### At full scale: 100,000 users and 1,000,000 orders\n\n\
             The same runs on the full-scale fixture of the ic-rusqlite users/orders benchmark (fresh install, \
             100,000 users, 1,000,000 orders, the two indexes), beside the 10,000-user fixture above.\n\n{l}\n"
        );
        let _ = writeln!(
            o,
            "| mode | N | billed instructions | instructions/op (full scale) | instructions/op (10k users) | full vs 10k | cycles/1M ops (13 nodes) |\n|---|---:|---:|---:|---:|---:|---:|"
        );
        for s in &r.messages_full_scale {
            let small = r
                .messages
                .iter()
                .find(|x| x.mode == s.mode && x.n == s.n)
                .map(|x| x.instructions_per_op);
            let (small_text, delta) = match small {
                Some(v) if v > 0.0 => (
                    fmt_f(v),
                    format!("{:+.1}%", (s.instructions_per_op / v - 1.0) * 100.0),
                ),
                _ => ("–".to_string(), "–".to_string()),
            };
            let _ = writeln!(
                o,
                "| {} | {} | {} | {} | {} | {} | {} |",
                s.mode.label(),
                fmt_u(s.n),
                fmt_u(s.billed_instructions),
                fmt_f(s.instructions_per_op),
                small_text,
                delta,
                fmt_u(s.cycles_per_million_ops[0] as u64)
            );
        }
    }
    o
}

/// Where a call's instructions go: the message against the same work in canbench.
pub(super) fn call_overhead(p: &Inputs) -> String {
    let mut o = String::new();
    let r = p.results;
    let l = &p.label;
    if !r.call_overhead.is_empty() {
        let _ = writeln!(
            o,
            "\nWhere a call's instructions go: the same work measured inside a canbench bench vs a whole update call \
             (the difference is the message: CDK entry point, Candid decoding of the argument and encoding of the reply; \
             billed adds the dirty heap pages).\n\n{l}\n"
        );
        let _ = writeln!(
            o,
            "| method | per call (performance counter) | per call (billed) | same work in canbench | message overhead | canbench source |\n|---|---:|---:|---:|---:|---|"
        );
        for c in &r.call_overhead {
            let _ = writeln!(
                o,
                "| `{}` | {} | {} | {} | {} | {} |",
                c.method,
                fmt_u(c.message_instructions),
                fmt_u(c.message_billed),
                fmt_u(c.canbench_per_op),
                fmt_u(c.message_billed.saturating_sub(c.canbench_per_op)),
                c.canbench_source
            );
        }
    }
    o
}

/// Where a call's instructions go, function by function, and what grows at full scale.
pub(super) fn call_profiles(p: &Inputs) -> String {
    let mut o = String::new();
    let r = p.results;
    let l = &p.label;
    if !r.call_profiles.is_empty() {
        let _ = writeln!(
            o,
            "\n### Where a call's instructions go, function by function\n\n\
             Exact profiles of one call each (the second of its kind, after the 10,000-user fixture, and for the client \
             batches also after the full-scale one; `offline-engine profile`, \
             `src/offline_engine/PROFILING.md`; the deployable wasm's `.named.wasm` twin, same counts). Each function's \
             self instructions go to the innermost frame of its stack that names a part: `ic0.*` (System API), \
             `stable_fs`/`ic_wasi_polyfill` (SQLite's file in stable memory), `sqlite3*` (SQLite), `candid`/`serde` and the \
             canister's hand codecs (encoding), `batch_core`, the allocator; the rest is the CDK and the canister's own code. \
             The parts add up to the performance counter exactly. Percent of the call; instructions per op in the last column.\n\n{l}\n"
        );
        let mut header = String::from("| call | fixture | ops |");
        let mut rule = String::from("|---|---|---:|");
        for p in crate::call_profile::PARTS {
            header.push_str(&format!(" {p} |"));
            rule.push_str("---:|");
        }
        let _ = writeln!(o, "{header} instructions | per op |\n{rule}---:|---:|");
        for c in &r.call_profiles {
            let total = c.instructions.max(1) as f64;
            let fixture = if c.full_scale {
                "full scale"
            } else {
                "10k users"
            };
            let mut row = format!("| `{}` | {fixture} | {} |", c.method, fmt_u(c.ops));
            for &part in &c.parts {
                row.push_str(&format!(" {:.1}% |", part as f64 * 100.0 / total));
            }
            let _ = writeln!(
                o,
                "{row} {} | {} |",
                fmt_u(c.instructions),
                fmt_u(c.instructions / c.ops.max(1))
            );
        }
        for method in ["execute_batch_packed"] {
            let find = |full: bool| {
                r.call_profiles
                    .iter()
                    .find(|c| c.method == method && c.full_scale == full)
                    .filter(|c| !c.self_by_function.is_empty())
            };
            let (Some(small), Some(full)) = (find(false), find(true)) else {
                continue;
            };
            let per_op = |c: &crate::call_profile::CallProfile| c.instructions / c.ops.max(1);
            let _ = writeln!(
                o,
                "\nWhat grows at full scale: the functions of `{method}` ({} orders) whose self instructions per op grew most \
                 from the 10,000-user fixture ({} per op) to the full-scale one ({} per op). Deeper B-trees make every \
                 search and page split dearer; `pcache1TruncateUnsafe` is SQLite scanning its whole page cache at `COMMIT` \
                 (see [\"SQLite's page cache at COMMIT\"](../docs/benchmarks.md#sqlites-page-cache-at-commit)).\n\n{l}\n",
                fmt_u(small.ops),
                fmt_u(per_op(small)),
                fmt_u(per_op(full))
            );
            let _ = writeln!(
                o,
                "| function | per op (10k users) | per op (full scale) | growth per op |\n|---|---:|---:|---:|"
            );
            for (function, a, b) in crate::call_profile::growth(small, full, 10) {
                let _ = writeln!(
                    o,
                    "| `{function}` | {} | {} | {:+} |",
                    fmt_f(a),
                    fmt_f(b),
                    (b - a).round() as i64
                );
            }
        }
    }
    o
}

/// What wire shapes cost: the canbench `codec_*` benches.
pub(super) fn wire_shapes(p: &Inputs) -> String {
    let mut o = String::new();
    let r = p.results;
    let l = &p.label;
    let codecs = crate::analysis::codec_rows(&r.canbench.benches);
    if !codecs.is_empty() {
        let _ = writeln!(
            o,
            "\n### What wire shapes cost\n\n\
             Encoding a reply or decoding an argument inside the canister (canbench `codec_*` benches: 1,000 calls each, \
             or one call of 1,000 ops), and its bytes. Every reply byte also costs 50 instructions \
             (`ic0.msg_reply_data_append`) and every ingress byte 2,000 cycles. `candid` rebuilds a type's table on every \
             call, which is most of a small typed reply's cost; the canister's hand codecs (`bench_api::wire`) emit the same \
             bytes from a fixed prefix.\n\n{l}\n"
        );
        let _ = writeln!(
            o,
            "| shape | codec | instructions | bytes | per | bench |\n|---|---|---:|---:|---|---|"
        );
        for c in &codecs {
            let _ = writeln!(
                o,
                "| {} | {} | {} | {:.1} | {} | `{}` |",
                c.shape,
                c.codec,
                fmt_u(c.per_unit),
                c.bytes_per_unit,
                c.unit,
                c.bench
            );
        }
    }
    o
}
