//! Instruction meters: how a flush measures its own cost ([`InstructionMeter`]), and the budget
//! an execution runs within ([`Budget`]).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

#[cfg(test)]
mod tests;

/// A monotonic instruction counter read by [`BatchQueue::flush`](crate::BatchQueue::flush) and
/// the `*_within` executors to stay within their instruction budget.
///
/// In a canister, return `ic_cdk::api::performance_counter(0)` (instructions executed in the
/// current message). Only differences between reads are used, so any starting value works.
///
/// The meter is read in two ways: by the executor before and between ops
/// ([`instructions`](Self::instructions)), and while an execution is under way
/// ([`instructions_while_running`](Self::instructions_while_running)): from SQLite's progress
/// handler while a statement runs, to interrupt a statement that would exceed its limit, and
/// when a transaction restarts. The progress handler outlives any borrow, so an
/// executor keeps its own clone of the meter while it runs: meters are `Clone + Send + 'static`,
/// and clones must read the same counter.
pub trait InstructionMeter: Clone + Send + 'static {
    /// The current counter value; never smaller than a previous read.
    fn instructions(&self) -> u64;

    /// The counter as read while an execution is under way: from SQLite's progress handler,
    /// every [`PROGRESS_PERIOD_OPS`](crate::PROGRESS_PERIOD_OPS) virtual-machine operations of a
    /// running statement, and when a transaction restarts. Defaults to
    /// [`instructions`](Self::instructions).
    fn instructions_while_running(&self) -> u64 {
        self.instructions()
    }
}

impl<F: Fn() -> u64 + Clone + Send + 'static> InstructionMeter for F {
    fn instructions(&self) -> u64 {
        self()
    }
}

/// An instruction budget for one execution: a meter and a number of instructions.
///
/// What the number means depends on the executor:
/// [`execute_autocommit_within`](crate::execute_autocommit_within) interrupts the op once it has
/// used `instructions`; [`execute_batch_within`](crate::execute_batch_within) and
/// [`BatchQueue::flush`](crate::BatchQueue::flush) start no new op after `instructions` and
/// interrupt a running op at [`Budget::op_limit`] (twice as many).
#[derive(Clone, Debug)]
pub struct Budget<M> {
    /// Where instructions are read.
    pub meter: M,
    /// The budget, in the meter's instructions.
    pub instructions: u64,
}

impl<M: InstructionMeter> Budget<M> {
    /// A budget of `instructions` read from `meter`.
    pub fn new(meter: M, instructions: u64) -> Self {
        Budget {
            meter,
            instructions,
        }
    }

    /// Instructions a batch pass may use before the running op is interrupted:
    /// `2 × instructions` (saturating). An op that starts just before the soft budget is used
    /// up still has `instructions` to finish.
    pub fn op_limit(&self) -> u64 {
        self.instructions.saturating_mul(2)
    }

    /// Instructions a whole execution may use: `3 × instructions` (saturating). After an
    /// interrupt (at [`op_limit`](Self::op_limit)) or any error that rolls back the
    /// transaction, the earlier ops are re-applied within this limit, counted from the
    /// execution's start, not from the restart: the ops admitted before the budget was used up
    /// took less than `instructions` the first time, so re-applying them normally fits, and an
    /// op whose cost varies cannot push the execution further.
    pub fn flush_limit(&self) -> u64 {
        self.instructions.saturating_mul(3)
    }
}

/// A deterministic meter for native tests: the first read returns 0 and every
/// [`instructions`](InstructionMeter::instructions) read advances the counter by `step`, so the
/// k-th such read (counting from 0) returns `k * step` plus what statements added. Reads while
/// an execution runs ([`instructions_while_running`](InstructionMeter::instructions_while_running))
/// advance the counter by `statement_step` (0 unless set with
/// [`with_statement_step`](Self::with_statement_step)) and return the last `instructions` read
/// plus the statement steps since, so a statement that runs many virtual-machine operations
/// costs instructions in proportion to them.
///
/// Clones share the counter (the executor's progress handler holds a clone).
#[derive(Clone, Debug, Default)]
pub struct CountingMeter {
    inner: Arc<CountingInner>,
}

#[derive(Debug, Default)]
struct CountingInner {
    /// What the next `instructions()` read returns.
    next: AtomicU64,
    /// What the last `instructions()` read returned, plus statement steps since.
    last: AtomicU64,
    step: u64,
    statement_step: u64,
    reads: AtomicU64,
    statement_reads: AtomicU64,
}

impl CountingMeter {
    /// A meter starting at 0 that advances by `step` per read.
    pub fn new(step: u64) -> Self {
        Self::with_statement_step(step, 0)
    }

    /// A meter starting at 0 that advances by `step` per executor read and by `statement_step`
    /// per progress-handler read.
    pub fn with_statement_step(step: u64, statement_step: u64) -> Self {
        CountingMeter {
            inner: Arc::new(CountingInner {
                step,
                statement_step,
                ..CountingInner::default()
            }),
        }
    }

    /// Number of [`instructions`](InstructionMeter::instructions) reads so far.
    pub fn reads(&self) -> u64 {
        self.inner.reads.load(Ordering::Relaxed)
    }

    /// Number of progress-handler reads so far.
    pub fn statement_reads(&self) -> u64 {
        self.inner.statement_reads.load(Ordering::Relaxed)
    }

    /// The value the next read will return (does not count as a read).
    pub fn peek(&self) -> u64 {
        self.inner.next.load(Ordering::Relaxed)
    }

    /// Adds `instructions` to the counter, as if work had been done between reads.
    pub fn advance(&self, instructions: u64) {
        saturating_add(&self.inner.next, instructions);
        saturating_add(&self.inner.last, instructions);
    }
}

fn saturating_add(counter: &AtomicU64, by: u64) -> u64 {
    let old = counter.load(Ordering::Relaxed);
    let new = old.saturating_add(by);
    counter.store(new, Ordering::Relaxed);
    new
}

impl InstructionMeter for CountingMeter {
    fn instructions(&self) -> u64 {
        let inner = &self.inner;
        let value = inner.next.load(Ordering::Relaxed);
        inner.last.store(value, Ordering::Relaxed);
        inner
            .next
            .store(value.saturating_add(inner.step), Ordering::Relaxed);
        inner.reads.fetch_add(1, Ordering::Relaxed);
        value
    }

    fn instructions_while_running(&self) -> u64 {
        let inner = &self.inner;
        inner.statement_reads.fetch_add(1, Ordering::Relaxed);
        saturating_add(&inner.next, inner.statement_step);
        saturating_add(&inner.last, inner.statement_step)
    }
}
