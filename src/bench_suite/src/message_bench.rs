//! Message-level benchmarks: what a client's calls cost, message overhead included, and what
//! that costs in cycles and US dollars (the arithmetic; the runs are in [`crate::engine_runs`]).

use serde::{Deserialize, Serialize};

use crate::fees::{FeeSchedule, SUBNET_SIZES};

/// How the ops reach the canister.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Mode {
    /// N `create_order` update calls, each its own autocommit transaction.
    Unbatched,
    /// N `submit_create_order` calls, then the timer flushes them in one transaction.
    SubmitAndTimer,
    /// One `execute_batch` call with N ops (one transaction).
    ClientBatch,
    /// One `execute_batch_packed` call with the same N ops, packed (one transaction).
    ClientBatchPacked,
}

impl Mode {
    /// All modes in report order.
    pub const ALL: [Mode; 4] = [
        Mode::Unbatched,
        Mode::SubmitAndTimer,
        Mode::ClientBatch,
        Mode::ClientBatchPacked,
    ];

    /// The path's name in tables and charts (what a user chooses between).
    pub fn label(self) -> &'static str {
        match self {
            Mode::Unbatched => "one call per op",
            Mode::SubmitAndTimer => "submit + timer",
            Mode::ClientBatch => "client batch",
            Mode::ClientBatchPacked => "packed client batch",
        }
    }

    /// Identifier used in result and baseline keys.
    pub fn key(self) -> &'static str {
        match self {
            Mode::Unbatched => "unbatched",
            Mode::SubmitAndTimer => "submit_timer",
            Mode::ClientBatch => "client_batch",
            Mode::ClientBatchPacked => "client_batch_packed",
        }
    }

    /// What the mode sends.
    pub fn describe(self) -> &'static str {
        match self {
            Mode::Unbatched => "N × `create_order` (update, own transaction each)",
            Mode::SubmitAndTimer => {
                "N × `submit_create_order` + timer flush (timer task, its self-call, the callback)"
            }
            Mode::ClientBatch => "1 × `execute_batch` with N ops",
            Mode::ClientBatchPacked => {
                "1 × `execute_batch_packed` with the same N ops, packed in a blob (`bench_api::packed`)"
            }
        }
    }
}

/// What kind of message an execution was, with what its fees depend on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum MessageKind {
    /// An ingress update call: billed ingress bytes (argument + method name + nonce).
    Ingress {
        /// Method called.
        method: String,
        /// Billed ingress bytes.
        bytes: u64,
    },
    /// The global-timer task; it sends one self-call of `self_call_bytes` (method + payload).
    Timer {
        /// Bytes of the self-call request it sends (0 if none).
        self_call_bytes: u64,
    },
    /// The self-call request executing (ic-cdk-timers' `timer_executor`).
    SelfCall,
    /// A response callback (or cleanup).
    Callback,
}

/// One executed message and its instruction counts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MessageRecord {
    /// What it was.
    pub kind: MessageKind,
    /// The engine's entry point name.
    pub entry: String,
    /// Instructions as `performance_counter(0)` sees them.
    pub instructions: u64,
    /// Instructions the IC bills (plus 1,000 per dirty 4 KiB heap page).
    pub billed_instructions: u64,
    /// 4 KiB heap pages the message dirtied.
    #[serde(default)]
    pub heap_dirty_pages: u64,
    /// 4 KiB stable-memory pages the message wrote.
    #[serde(default)]
    pub stable_dirty_pages: u64,
    /// 64 KiB Wasm pages the memory tracker charged (zero in a profile without it) and what the
    /// pages cost.
    #[serde(default)]
    pub tracked: TrackedPages,
}

/// The 64 KiB Wasm pages the deterministic memory tracker charged a first access and a first
/// write for, and what the pages cost under the run's profile (`offline_engine::PageUse`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct TrackedPages {
    /// Heap Wasm pages first accessed.
    pub heap_accessed: u64,
    /// Heap Wasm pages first written.
    pub heap_dirty: u64,
    /// Stable-memory Wasm pages first accessed.
    pub stable_accessed: u64,
    /// Stable-memory Wasm pages first written.
    pub stable_dirty: u64,
    /// Instructions the memory pages cost under the profile: the tracker's charges, or in the
    /// rules of PocketIC 13 the new dirty stable pages and the changed heap pages.
    pub instructions: u64,
}

impl std::ops::Add for TrackedPages {
    type Output = TrackedPages;

    fn add(self, o: TrackedPages) -> TrackedPages {
        TrackedPages {
            heap_accessed: self.heap_accessed + o.heap_accessed,
            heap_dirty: self.heap_dirty + o.heap_dirty,
            stable_accessed: self.stable_accessed + o.stable_accessed,
            stable_dirty: self.stable_dirty + o.stable_dirty,
            instructions: self.instructions + o.instructions,
        }
    }
}

/// All messages of one mode at one N.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModeRun {
    /// The mode.
    pub mode: Mode,
    /// Ops sent.
    pub n: u64,
    /// Ops committed (checked against the replies and `stats`).
    pub committed: u64,
    /// Every executed message in order.
    pub messages: Vec<MessageRecord>,
}

/// Figures of one mode at one N.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModeSummary {
    /// The mode.
    pub mode: Mode,
    /// Ops.
    pub n: u64,
    /// Executed messages (ingress updates, timer tasks, self-calls, callbacks).
    pub messages: u64,
    /// Ingress update calls.
    pub ingress_messages: u64,
    /// Messages the timer flush added (tasks, self-calls, callbacks).
    pub timer_messages: u64,
    /// Sum of billed instructions.
    pub billed_instructions: u64,
    /// Sum of instructions as the performance counter sees them.
    pub instructions: u64,
    /// Billed ingress bytes.
    pub ingress_bytes: u64,
    /// Billed instructions per op, message overhead included.
    pub instructions_per_op: f64,
    /// Cycles of the whole run on a 13- and a 34-node subnet.
    pub cycles: [u128; 2],
    /// Cycles per 1,000,000 ops on a 13- and a 34-node subnet.
    pub cycles_per_million_ops: [u128; 2],
    /// US dollars per 1,000,000 ops on a 13- and a 34-node subnet.
    pub usd_per_million_ops: [f64; 2],
    /// 4 KiB heap and stable pages changed, summed over the messages.
    #[serde(default)]
    pub changed_pages: u64,
    /// The tracker's Wasm pages, summed over the messages (zero without the tracker).
    #[serde(default)]
    pub tracked: TrackedPages,
}

/// Cycles one message costs on an `nodes`-node subnet: execution (base fee + billed
/// instructions), plus ingress reception for ingress calls, plus the request fee for the
/// self-call a timer task sends.
pub fn message_cycles(fees: &FeeSchedule, m: &MessageRecord, nodes: u64) -> u128 {
    let exec = fees.execution_cost(m.billed_instructions, nodes);
    match &m.kind {
        MessageKind::Ingress { bytes, .. } => exec + fees.ingress_cost(*bytes, nodes),
        MessageKind::Timer { self_call_bytes } if *self_call_bytes > 0 => {
            exec + fees.call_cost(*self_call_bytes, nodes)
        }
        _ => exec,
    }
}

/// Summarizes one run under `fees`.
pub fn summarize(fees: &FeeSchedule, run: &ModeRun) -> ModeSummary {
    let n = run.n.max(1);
    let sum = |f: &dyn Fn(&MessageRecord) -> u64| run.messages.iter().map(f).sum::<u64>();
    let billed = sum(&|m| m.billed_instructions);
    let ingress_messages = run
        .messages
        .iter()
        .filter(|m| matches!(m.kind, MessageKind::Ingress { .. }))
        .count() as u64;
    let cycles = SUBNET_SIZES.map(|nodes| {
        run.messages
            .iter()
            .map(|m| message_cycles(fees, m, nodes))
            .sum::<u128>()
    });
    let per_million = cycles.map(|c| c * 1_000_000 / n as u128);
    ModeSummary {
        mode: run.mode,
        n: run.n,
        messages: run.messages.len() as u64,
        ingress_messages,
        timer_messages: run.messages.len() as u64 - ingress_messages,
        billed_instructions: billed,
        instructions: sum(&|m| m.instructions),
        ingress_bytes: sum(&|m| match &m.kind {
            MessageKind::Ingress { bytes, .. } => *bytes,
            _ => 0,
        }),
        instructions_per_op: billed as f64 / n as f64,
        cycles,
        cycles_per_million_ops: per_million,
        usd_per_million_ops: per_million.map(|c| fees.usd(c)),
        changed_pages: sum(&|m| m.heap_dirty_pages + m.stable_dirty_pages),
        tracked: run
            .messages
            .iter()
            .fold(TrackedPages::default(), |a, m| a + m.tracked),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fees::IC_2025;

    fn msg(kind: MessageKind, billed: u64) -> MessageRecord {
        MessageRecord {
            kind,
            entry: "x".into(),
            instructions: billed - 10,
            billed_instructions: billed,
            heap_dirty_pages: 0,
            stable_dirty_pages: 0,
            tracked: TrackedPages::default(),
        }
    }

    #[test]
    fn summary_adds_execution_ingress_and_call_fees() {
        let f = IC_2025;
        let run = ModeRun {
            mode: Mode::SubmitAndTimer,
            n: 2,
            committed: 2,
            messages: vec![
                msg(
                    MessageKind::Ingress {
                        method: "m".into(),
                        bytes: 30,
                    },
                    1_000,
                ),
                msg(
                    MessageKind::Ingress {
                        method: "m".into(),
                        bytes: 30,
                    },
                    1_000,
                ),
                msg(
                    MessageKind::Timer {
                        self_call_bytes: 41,
                    },
                    500,
                ),
                msg(MessageKind::SelfCall, 70_000),
                msg(MessageKind::Callback, 300),
            ],
        };
        let s = summarize(&f, &run);
        assert_eq!(s.messages, 5);
        assert_eq!(s.ingress_messages, 2);
        assert_eq!(s.timer_messages, 3);
        assert_eq!(s.billed_instructions, 72_800);
        assert_eq!(s.ingress_bytes, 60);
        for (i, nodes) in SUBNET_SIZES.into_iter().enumerate() {
            let expected = 2 * (f.execution_cost(1_000, nodes) + f.ingress_cost(30, nodes))
                + f.execution_cost(500, nodes)
                + f.call_cost(41, nodes)
                + f.execution_cost(70_000, nodes)
                + f.execution_cost(300, nodes);
            assert_eq!(s.cycles[i], expected);
            assert_eq!(s.cycles_per_million_ops[i], expected * 1_000_000 / 2);
        }
        assert!((s.instructions_per_op - 36_400.0).abs() < 1e-9);
    }
}
