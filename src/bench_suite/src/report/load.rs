//! The load-over-rounds section: the simulation over measured costs.

use std::fmt::Write;

use super::inputs::Inputs;
use crate::analysis::{fmt_u, human, human_bytes};
use crate::suite::LOAD_CONCURRENCIES;

/// Load over rounds: the simulation over measured costs, with its assumptions.
pub(super) fn load(p: &Inputs) -> String {
    let mut o = String::new();
    let r = p.results;
    let l = &p.label;
    let _ = writeln!(
        o,
        "\n## Load over rounds (simulation over measured costs)\n"
    );
    match &r.call_costs {
        None => {
            let _ = writeln!(
                o,
                "Not run: the message-level runs did not yield per-call costs.\n"
            );
        }
        Some(c) => {
            let m = &r.load_model;
            let _ = writeln!(
                o,
                "The analogue of the `ab -c 100` / `-c 500` runs of a Go HTTP example that batches its database writes, as a **simulation over per-call costs \
                 measured on the engine** (not a replica run). Each round C new ops arrive for {} rounds, as C calls (unbatched: \
                 `create_order`; submit+timer: `submit_create_order`) or as client batches of up to {} ops (`execute_batch`). \
                 The round's block takes waiting calls in arrival order up to {} messages and {} of ingress bytes (at most {} per message): \
                 the IC's defaults on an application subnet, `rs/limits/src/lib.rs` of the replica, at one block per round (the rate that \
                 file assumes); other canisters of the subnet share these limits, the model gives them all to this one. The canister runs \
                 inducted calls in arrival order while the round's {} instructions last (a message starts while budget remains; \
                 the scheduler's {} per execution and {} per canister and round count against it, the replica's `rs/config/src/subnet_config.rs`); \
                 calls arriving when {} calls wait are rejected (a model bound, not an IC constant). Submit+timer: the timer \
                 flushes once per round, first, what was pending at the end of the previous round; a submit that fills \
                 a batch of {} flushes it in the call; a submit finding {} ops pending gets `QueueFull` (rejected). \
                 \"Rounds to commit\" counts the arrival round as 1; \"block full\" counts rounds whose block left calls waiting.\n",
                m.arrival_rounds,
                fmt_u(m.client_batch_ops),
                fmt_u(m.block_max_messages as u64),
                human_bytes(m.block_max_bytes),
                human_bytes(m.message_max_bytes),
                human(m.round_limit),
                human(m.overhead_per_execution),
                human(m.overhead_per_canister),
                fmt_u(m.ingress_capacity as u64),
                m.flush_size,
                fmt_u(m.max_pending as u64)
            );
            let _ = writeln!(
                o,
                "Measured costs (billed instructions; ingress bytes): unbatched call {} ({} bytes); submit call {} ({} bytes); \
                 flush {} + {} per op; timer task + callback {}; `execute_batch` {} + {} per op ({} + {} bytes per op).\n",
                fmt_u(c.unbatched_call),
                fmt_u(c.unbatched_bytes),
                fmt_u(c.submit_call),
                fmt_u(c.submit_bytes),
                fmt_u(c.flush_fixed),
                fmt_u(c.flush_per_op),
                fmt_u(c.timer_overhead),
                fmt_u(c.client_batch_fixed),
                fmt_u(c.client_batch_per_op),
                fmt_u(c.client_batch_bytes_fixed),
                fmt_u(c.client_batch_bytes_per_op)
            );
            let _ = writeln!(o, "{l}\n");
            let _ = writeln!(
                o,
                "| C (ops/round) | mode | ops/call | offered | committed | rejected | ops/round | rounds to commit (mean) | p99 | max backlog | block full | rounds total | round use |\n|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
            );
            for c in LOAD_CONCURRENCIES {
                for x in r.load.iter().filter(|x| x.concurrency == c) {
                    let _ = writeln!(
                        o,
                        "| {} | {} | {} | {} | {} | {} | {:.0} | {:.2} | {} | {} | {} | {} | {:.0}% |",
                        fmt_u(c),
                        x.mode.label(),
                        fmt_u(x.ops_per_call),
                        fmt_u(x.offered),
                        fmt_u(x.committed),
                        fmt_u(x.rejected),
                        x.ops_per_round,
                        x.mean_rounds_to_commit,
                        x.p99_rounds_to_commit,
                        fmt_u(x.max_backlog),
                        x.rounds_block_full,
                        x.rounds_total,
                        x.round_utilization * 100.0
                    );
                }
            }
        }
    }
    o
}
