//! Load over rounds: a simulation over per-call instruction costs measured on the engine (the
//! analogue of the `ab -c 100` / `-c 500` runs of a Go HTTP example that batches its database
//! writes).
//!
//! The model, per round (one round ≈ 1 s on the IC):
//! 1. **Timer** (batched only): if ops were pending at the end of the previous round, the flush
//!    timer (due after `max_delay` = 1 s, i.e. the next round) runs first: timer task + self-call +
//!    callback, flushing pending ops in arrival order. The flush stops at its instruction budget
//!    and at what is left of the round (the replica would continue a longer one in the next round
//!    with DTS; the model splits it instead).
//! 2. **Arrivals**: C new ops arrive, as C calls (unbatched, batched) or as client batches of up
//!    to `client_batch_ops` ops each; they join the ingress pool. Calls arriving when
//!    `ingress_capacity` calls wait (in the pool or inducted) are rejected (a model bound, not an
//!    IC constant).
//! 3. **Consensus**: the round's block takes calls from the pool in arrival order up to
//!    `block_max_messages` messages and `block_max_bytes` ingress bytes (the IC's defaults:
//!    1,000 messages and 4 MiB per block, at most 2 MiB per message on an application subnet,
//!    `rs/limits/src/lib.rs` of the replica; one block per round, the rate that file assumes).
//!    The subnet's other canisters share these limits: the model gives them all to this one.
//! 4. **Execution**: inducted calls run in arrival order while the round has instructions left (a message
//!    starts while the remaining budget is positive, as the scheduler does). Each execution also
//!    counts the scheduler's per-execution overhead against the round, and each round with work
//!    the per-canister overhead (the replica's `rs/config/src/subnet_config.rs`: 2 M and 8 M). Unbatched calls commit in their
//!    round. A batched submit is queued (or answered `QueueFull` when `max_pending` ops are
//!    pending); the submit that fills a batch of `flush_size` flushes it in the same call. A
//!    client batch commits its ops in the call.
//!
//! "Rounds until committed" counts the round an op arrived as round 1.

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

/// Per-call instruction costs measured on the engine (billed instructions).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CallCosts {
    /// One unbatched `create_order` call.
    pub unbatched_call: u64,
    /// One `submit_create_order` call that does not flush.
    pub submit_call: u64,
    /// Fixed part of a flush (transaction begin/commit, queue bookkeeping).
    pub flush_fixed: u64,
    /// Per-op part of a flush.
    pub flush_per_op: u64,
    /// Timer task plus response callback around a timer flush (the self-call runs the flush).
    pub timer_overhead: u64,
    /// Ingress bytes of one unbatched call.
    pub unbatched_bytes: u64,
    /// Ingress bytes of one submit call.
    pub submit_bytes: u64,
    /// Fixed part of one `execute_batch` call (billed instructions).
    pub client_batch_fixed: u64,
    /// Per-op part of one `execute_batch` call.
    pub client_batch_per_op: u64,
    /// Fixed part of one `execute_batch` call's ingress bytes.
    pub client_batch_bytes_fixed: u64,
    /// Per-op part of one `execute_batch` call's ingress bytes.
    pub client_batch_bytes_per_op: u64,
}

impl CallCosts {
    /// Ingress bytes and billed instructions of one call of `mode` carrying `ops` ops (1 for
    /// unbatched and batched calls).
    fn call(&self, mode: LoadMode, ops: u64) -> (u64, u64) {
        match mode {
            LoadMode::Unbatched => (self.unbatched_bytes, self.unbatched_call),
            LoadMode::Batched => (self.submit_bytes, self.submit_call),
            LoadMode::ClientBatch => (
                self.client_batch_bytes_fixed + self.client_batch_bytes_per_op * ops,
                self.client_batch_fixed + self.client_batch_per_op * ops,
            ),
        }
    }
}

/// Parameters of the round model.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RoundModel {
    /// Instructions per round (application subnet: 4 B, `rs/config/src/subnet_config.rs` of the replica).
    pub round_limit: u64,
    /// Scheduler overhead counted per execution (2 M).
    pub overhead_per_execution: u64,
    /// Scheduler overhead counted per canister per round with work (8 M).
    pub overhead_per_canister: u64,
    /// Calls the ingress backlog holds; more are rejected (model assumption).
    pub ingress_capacity: usize,
    /// batch_core `flush_size` (canister default 100).
    pub flush_size: usize,
    /// batch_core `max_pending` (canister default 10,000).
    pub max_pending: usize,
    /// batch_core `flush_instruction_budget` (canister default 10 B).
    pub flush_budget: u64,
    /// Ingress messages per block (the IC's default: 1,000).
    pub block_max_messages: usize,
    /// Ingress bytes per block (the IC's default: 4 MiB).
    pub block_max_bytes: u64,
    /// Ingress bytes per message (application subnet: 2 MiB).
    pub message_max_bytes: u64,
    /// Ops per client batch (fewer if the message would exceed `message_max_bytes`).
    pub client_batch_ops: u64,
    /// Rounds during which calls arrive.
    pub arrival_rounds: u64,
    /// Give up draining after this many rounds.
    pub max_rounds: u64,
}

impl Default for RoundModel {
    fn default() -> Self {
        RoundModel {
            round_limit: 4_000_000_000,
            overhead_per_execution: 2_000_000,
            overhead_per_canister: 8_000_000,
            ingress_capacity: 10_000,
            flush_size: 100,
            max_pending: 10_000,
            flush_budget: 10_000_000_000,
            block_max_messages: 1_000,
            block_max_bytes: 4 << 20,
            message_max_bytes: 2 << 20,
            client_batch_ops: 1_000,
            arrival_rounds: 20,
            max_rounds: 10_000,
        }
    }
}

/// Which write path the calls take.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum LoadMode {
    /// `create_order`: commit in the call.
    Unbatched,
    /// `submit_create_order`: queued, flushed by size or timer.
    Batched,
    /// `execute_batch`: the client sends its ops in batches, each committed in its call.
    ClientBatch,
}

impl LoadMode {
    /// All modes in report order.
    pub const ALL: [LoadMode; 3] = [
        LoadMode::Unbatched,
        LoadMode::Batched,
        LoadMode::ClientBatch,
    ];

    /// Short label for tables.
    pub fn label(self) -> &'static str {
        match self {
            LoadMode::Unbatched => "unbatched",
            LoadMode::Batched => "submit+timer",
            LoadMode::ClientBatch => "client batch",
        }
    }
}

/// What the simulation found for one mode and concurrency.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoadResult {
    /// Write path.
    pub mode: LoadMode,
    /// Ops arriving per round.
    pub concurrency: u64,
    /// Ops offered in total.
    pub offered: u64,
    /// Ops per call (1, or the client batch size).
    pub ops_per_call: u64,
    /// Ops committed.
    pub committed: u64,
    /// Ops rejected (ingress pool full, or `QueueFull`).
    pub rejected: u64,
    /// Rounds whose block was full (messages or bytes) while calls waited in the pool.
    pub rounds_block_full: u64,
    /// Ops committed per round while calls arrive.
    pub ops_per_round: f64,
    /// Mean rounds until an op is committed.
    pub mean_rounds_to_commit: f64,
    /// 99th percentile of rounds until committed.
    pub p99_rounds_to_commit: u64,
    /// Largest backlog at a round's end, in ops (ingress pool + inducted calls + pending ops).
    pub max_backlog: u64,
    /// Rounds until every accepted op was committed.
    pub rounds_total: u64,
    /// Share of the round limit used, mean over the arrival rounds.
    pub round_utilization: f64,
}

/// Runs the model for `mode` at `concurrency` calls per round.
pub fn simulate(
    model: &RoundModel,
    costs: &CallCosts,
    mode: LoadMode,
    concurrency: u64,
) -> LoadResult {
    let ops_per_call = match mode {
        LoadMode::ClientBatch => {
            let room = model
                .message_max_bytes
                .saturating_sub(costs.client_batch_bytes_fixed);
            let fit = room / costs.client_batch_bytes_per_op.max(1);
            model.client_batch_ops.min(fit).min(concurrency).max(1)
        }
        _ => 1,
    };
    // Calls as (arrival round, ops): waiting in the pool, then inducted into the canister.
    let mut pool: VecDeque<(u64, u64)> = VecDeque::new();
    let mut inducted: VecDeque<(u64, u64)> = VecDeque::new();
    let mut pending: VecDeque<u64> = VecDeque::new(); // arrival round of each queued op
    let mut latencies: Vec<u64> = Vec::new();
    let (mut rejected, mut max_backlog, mut committed_in_arrivals) = (0u64, 0u64, 0u64);
    let mut rounds_block_full = 0u64;
    let mut used_in_arrivals = 0u128;
    let mut round = 0u64;
    let offered = concurrency * model.arrival_rounds;
    let limit = model.round_limit as i128;
    let commit = |latencies: &mut Vec<u64>, round: u64, arrived: u64, ops: u64| {
        latencies.extend(std::iter::repeat_n(round - arrived + 1, ops as usize));
    };
    while round < model.max_rounds {
        round += 1;
        let arriving = round <= model.arrival_rounds;
        if !arriving && pool.is_empty() && inducted.is_empty() && pending.is_empty() {
            round -= 1;
            break;
        }
        let mut budget = limit;
        let mut worked = false;
        let before = latencies.len();
        // 1. The timer flush of what was pending at the end of the previous round.
        if mode == LoadMode::Batched && !pending.is_empty() {
            worked = true;
            let allowed = (model.flush_budget as i128).min(budget - costs.timer_overhead as i128);
            let k = flushable(allowed, costs, pending.len());
            for _ in 0..k {
                if let Some(a) = pending.pop_front() {
                    latencies.push(round - a + 1);
                }
            }
            budget -= (costs.timer_overhead + costs.flush_fixed + costs.flush_per_op * k as u64)
                as i128
                + 3 * model.overhead_per_execution as i128;
        }
        // 2. Arrivals.
        if arriving {
            let mut left = concurrency;
            while left > 0 {
                let ops = left.min(ops_per_call);
                left -= ops;
                if pool.len() + inducted.len() < model.ingress_capacity {
                    pool.push_back((round, ops));
                } else {
                    rejected += ops;
                }
            }
        }
        // 3. The block: messages and bytes.
        let (mut messages, mut bytes) = (0usize, 0u64);
        while let Some(&(arrived, ops)) = pool.front() {
            let (size, _) = costs.call(mode, ops);
            if messages == model.block_max_messages || bytes + size > model.block_max_bytes {
                rounds_block_full += 1;
                break;
            }
            messages += 1;
            bytes += size;
            inducted.push_back((arrived, ops));
            pool.pop_front();
        }
        // 4. Executions in arrival order while the round lasts.
        if !inducted.is_empty() {
            worked = true;
        }
        if worked {
            budget -= model.overhead_per_canister as i128;
        }
        while budget > 0 {
            let Some((arrived, ops)) = inducted.pop_front() else {
                break;
            };
            budget -= model.overhead_per_execution as i128;
            budget -= costs.call(mode, ops).1 as i128;
            match mode {
                LoadMode::Unbatched | LoadMode::ClientBatch => {
                    commit(&mut latencies, round, arrived, ops);
                }
                LoadMode::Batched => {
                    if pending.len() >= model.max_pending {
                        rejected += 1;
                        continue;
                    }
                    pending.push_back(arrived);
                    if pending.len() >= model.flush_size {
                        let k = flushable(model.flush_budget as i128, costs, pending.len());
                        for _ in 0..k {
                            if let Some(a) = pending.pop_front() {
                                latencies.push(round - a + 1);
                            }
                        }
                        budget -= (costs.flush_fixed + costs.flush_per_op * k as u64) as i128;
                    }
                }
            }
        }
        if arriving {
            committed_in_arrivals += (latencies.len() - before) as u64;
            used_in_arrivals += (limit - budget.max(0)) as u128;
        }
        let waiting: u64 = pool.iter().chain(&inducted).map(|&(_, ops)| ops).sum();
        max_backlog = max_backlog.max(waiting + pending.len() as u64);
    }
    let committed = latencies.len() as u64;
    let mean = if committed > 0 {
        latencies.iter().sum::<u64>() as f64 / committed as f64
    } else {
        0.0
    };
    LoadResult {
        mode,
        concurrency,
        offered,
        ops_per_call,
        committed,
        rejected,
        rounds_block_full,
        ops_per_round: committed_in_arrivals as f64 / model.arrival_rounds.max(1) as f64,
        mean_rounds_to_commit: mean,
        p99_rounds_to_commit: percentile(&mut latencies, 99.0),
        max_backlog,
        rounds_total: round,
        round_utilization: used_in_arrivals as f64
            / (model.round_limit as f64 * model.arrival_rounds.max(1) as f64),
    }
}

/// Ops a flush with `allowed` instructions can commit (at most `pending`, at least 0).
fn flushable(allowed: i128, costs: &CallCosts, pending: usize) -> usize {
    let room = allowed - costs.flush_fixed as i128;
    if room <= 0 {
        return 0;
    }
    let per_op = costs.flush_per_op.max(1) as i128;
    ((room / per_op) as usize).min(pending)
}

/// Nearest-rank percentile (`p` in percent) of `values`; 0 for none.
pub fn percentile(values: &mut [u64], p: f64) -> u64 {
    if values.is_empty() {
        return 0;
    }
    values.sort_unstable();
    let rank = ((p / 100.0) * values.len() as f64).ceil() as usize;
    values[rank.clamp(1, values.len()) - 1]
}

/// Least-squares line `y = a + b·x` through `points`; `None` with fewer than two distinct x.
pub fn fit_line(points: &[(f64, f64)]) -> Option<(f64, f64)> {
    let n = points.len() as f64;
    if points.len() < 2 {
        return None;
    }
    let (sx, sy) = points
        .iter()
        .fold((0.0, 0.0), |(a, b), (x, y)| (a + x, b + y));
    let (mx, my) = (sx / n, sy / n);
    let sxx: f64 = points.iter().map(|(x, _)| (x - mx) * (x - mx)).sum();
    if sxx == 0.0 {
        return None;
    }
    let sxy: f64 = points.iter().map(|(x, y)| (x - mx) * (y - my)).sum();
    let b = sxy / sxx;
    Some((my - b * mx, b))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn costs() -> CallCosts {
        CallCosts {
            unbatched_call: 498_000_000,
            submit_call: 8_000_000,
            flush_fixed: 90_000_000,
            flush_per_op: 10_000_000,
            timer_overhead: 0,
            unbatched_bytes: 40,
            submit_bytes: 50,
            client_batch_fixed: 100_000_000,
            client_batch_per_op: 1_000_000,
            client_batch_bytes_fixed: 100,
            client_batch_bytes_per_op: 10,
        }
    }

    fn model() -> RoundModel {
        RoundModel {
            round_limit: 1_000_000_000,
            overhead_per_execution: 2_000_000,
            overhead_per_canister: 0,
            ingress_capacity: 10,
            flush_size: 1_000,
            max_pending: 1_000,
            flush_budget: 10_000_000_000,
            block_max_messages: 1_000,
            block_max_bytes: 1 << 20,
            message_max_bytes: 1 << 20,
            client_batch_ops: 1_000,
            arrival_rounds: 3,
            max_rounds: 100,
        }
    }

    #[test]
    fn unbatched_runs_two_calls_per_round_and_queues_the_rest() {
        // 500 M per call (498 M + 2 M overhead), 1 B per round: a call starts while budget > 0,
        // so two calls fit exactly and the third waits.
        let r = simulate(&model(), &costs(), LoadMode::Unbatched, 4);
        assert_eq!(r.offered, 12);
        assert_eq!(r.rejected, 0);
        assert_eq!(r.committed, 12);
        // Backlog grows by 2 per arrival round: 2, 4, 6; then drains 2 per round.
        assert_eq!(r.max_backlog, 6);
        assert_eq!(r.rounds_total, 6);
        assert_eq!(r.ops_per_round, 2.0);
        // Rounds 1..=6 commit the calls of arrival rounds 1,1 | 1,1 | 2,2 | 2,2 | 3,3 | 3,3.
        let expected_mean = (1 + 1 + 2 + 2 + 2 + 2 + 3 + 3 + 3 + 3 + 4 + 4) as f64 / 12.0;
        assert!((r.mean_rounds_to_commit - expected_mean).abs() < 1e-9);
        assert_eq!(r.p99_rounds_to_commit, 4);
    }

    #[test]
    fn ingress_capacity_rejects_the_overflow() {
        let r = simulate(&model(), &costs(), LoadMode::Unbatched, 20);
        // Round 1: 10 accepted, 10 rejected; 2 run. Round 2: 2 free slots... and so on.
        assert_eq!(r.rejected, 10 + 18 + 18);
        assert_eq!(r.committed + r.rejected, r.offered);
    }

    #[test]
    fn batched_ops_commit_at_the_next_round_timer() {
        // 10 submits per round (100 M), far below the flush size: the timer flushes them next round.
        let r = simulate(&model(), &costs(), LoadMode::Batched, 10);
        assert_eq!(r.rejected, 0);
        assert_eq!(r.committed, 30);
        assert_eq!(r.p99_rounds_to_commit, 2);
        assert!((r.mean_rounds_to_commit - 2.0).abs() < 1e-9);
        assert_eq!(r.rounds_total, 4);
        // Arrival rounds 2 and 3 each commit the previous round's 10 ops.
        assert!((r.ops_per_round - 20.0 / 3.0).abs() < 1e-9);
    }

    #[test]
    fn size_trigger_flushes_in_the_submitting_call() {
        let m = RoundModel {
            flush_size: 5,
            ..model()
        };
        let r = simulate(&m, &costs(), LoadMode::Batched, 10);
        assert_eq!(r.committed, 30);
        assert_eq!(r.p99_rounds_to_commit, 1);
    }

    #[test]
    fn full_queue_answers_queue_full() {
        let m = RoundModel {
            max_pending: 4,
            flush_size: 4,
            flush_budget: 1,
            ..model()
        };
        // A flush budget below the fixed cost commits nothing: the queue stays full.
        let r = simulate(&m, &costs(), LoadMode::Batched, 10);
        assert_eq!(r.committed, 0);
        assert_eq!(r.rejected, r.offered - 4);
    }

    #[test]
    fn the_block_limits_calls_per_round() {
        // Cheap calls: only the block's 3 messages per round get in; the rest wait in the pool.
        let cheap = CallCosts {
            unbatched_call: 1_000,
            ..costs()
        };
        let m = RoundModel {
            block_max_messages: 3,
            ingress_capacity: 100,
            ..model()
        };
        let r = simulate(&m, &cheap, LoadMode::Unbatched, 5);
        assert_eq!((r.committed, r.rejected), (15, 0));
        assert_eq!(r.ops_per_round, 3.0);
        // 15 calls at 3 per round: rounds 1..=5; the pool was left waiting in rounds 1 to 4.
        assert_eq!(r.rounds_total, 5);
        assert_eq!(r.rounds_block_full, 4);
        // Bytes: 40 bytes per call and 100 bytes per block admit two calls per round.
        let m = RoundModel {
            block_max_bytes: 100,
            ..m
        };
        let r = simulate(&m, &cheap, LoadMode::Unbatched, 5);
        assert_eq!(r.ops_per_round, 2.0);
    }

    #[test]
    fn client_batches_carry_many_ops_per_message() {
        // 50 ops per round in batches of at most 20 (bytes: 100 + 10 per op within 300 bytes):
        // 3 calls of 20, 20 and 10 ops, 100 M + 1 M per op each, all in the round they arrive.
        let m = RoundModel {
            message_max_bytes: 300,
            block_max_messages: 3,
            ..model()
        };
        let r = simulate(&m, &costs(), LoadMode::ClientBatch, 50);
        assert_eq!(r.ops_per_call, 20);
        assert_eq!((r.committed, r.rejected), (150, 0));
        assert_eq!(r.p99_rounds_to_commit, 1);
        assert_eq!(r.rounds_block_full, 0);
        // Round use: 3 executions (2 M each) + 300 M fixed + 50 M per-op of 1 B.
        assert!((r.round_utilization - 0.356).abs() < 1e-9);
    }

    #[test]
    fn percentile_and_fit() {
        let mut v: Vec<u64> = (1..=100).collect();
        assert_eq!(percentile(&mut v, 99.0), 99);
        assert_eq!(percentile(&mut v, 50.0), 50);
        assert_eq!(percentile(&mut [], 99.0), 0);
        let (a, b) = fit_line(&[(1.0, 12.0), (10.0, 30.0), (100.0, 210.0)]).unwrap();
        assert!((a - 10.0).abs() < 1e-9 && (b - 2.0).abs() < 1e-9);
        assert!(fit_line(&[(1.0, 1.0)]).is_none());
    }
}
