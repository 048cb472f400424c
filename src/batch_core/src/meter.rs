//! Instruction meters: how a flush measures its own cost ([`InstructionMeter`]).

use std::cell::Cell;

#[cfg(test)]
mod tests;

/// A monotonic instruction counter read by [`BatchQueue::flush`](crate::BatchQueue::flush) to
/// stay within [`Config::flush_instruction_budget`](crate::Config::flush_instruction_budget).
///
/// In a canister, return `ic_cdk::api::performance_counter(0)` (instructions executed in the
/// current message). Only differences between reads are used, so any starting value works.
pub trait InstructionMeter {
    /// The current counter value; never smaller than a previous read.
    fn instructions(&self) -> u64;
}

impl<F: Fn() -> u64> InstructionMeter for F {
    fn instructions(&self) -> u64 {
        self()
    }
}

/// A deterministic meter for native tests: the first read returns 0 and every read advances the
/// counter by `step`, so the k-th read (counting from 0) returns `k * step`.
///
/// With it a flush's cost is a pure function of the number of ops it runs; see
/// [`BatchQueue::flush`](crate::BatchQueue::flush) for the exact reads.
#[derive(Debug, Default)]
pub struct CountingMeter {
    next: Cell<u64>,
    step: u64,
    reads: Cell<u64>,
}

impl CountingMeter {
    /// A meter starting at 0 that advances by `step` per read.
    pub fn new(step: u64) -> Self {
        CountingMeter {
            next: Cell::new(0),
            step,
            reads: Cell::new(0),
        }
    }

    /// Number of reads so far.
    pub fn reads(&self) -> u64 {
        self.reads.get()
    }

    /// The value the next read will return (does not count as a read).
    pub fn peek(&self) -> u64 {
        self.next.get()
    }

    /// Adds `instructions` to the counter, as if work had been done between reads.
    pub fn advance(&self, instructions: u64) {
        self.next.set(self.next.get().saturating_add(instructions));
    }
}

impl InstructionMeter for CountingMeter {
    fn instructions(&self) -> u64 {
        let value = self.next.get();
        self.next.set(value.saturating_add(self.step));
        self.reads.set(self.reads.get() + 1);
        value
    }
}
