//! Queue configuration ([`Config`]) and its validation errors ([`ConfigError`]).

use serde::{Deserialize, Serialize};

#[cfg(test)]
mod tests;

/// How a [`BatchQueue`](crate::BatchQueue) batches and bounds its work.
///
/// | field | default | meaning |
/// |---|---|---|
/// | `flush_size` | 100 | size trigger: once this many ops are pending, a flush is due now |
/// | `max_delay_ns` | 1 s | timer trigger: the oldest pending op waits at most this long |
/// | `max_pending` | 10 000 | queue capacity; a full queue rejects submits with `QueueFull` |
/// | `max_pending_bytes` | 128 MiB | queue capacity in bytes of SQL and parameters ([`WriteOp::size_bytes`](crate::WriteOp::size_bytes)) |
/// | `flush_instruction_budget` | 10 billion | a flush starts no new op after this many instructions, and interrupts the running op at twice as many |
/// | `outcome_capacity` | 10 000 | outcomes kept for [`status`](crate::BatchQueue::status), evicted per submitter |
/// | `history_capacity` | [`DEFAULT_HISTORY_CAPACITY`] | flushed tickets whose submitter and "committed" flag are kept after their outcome is evicted |
/// | `coalesce_rows` | [`DEFAULT_COALESCE_ROWS`] | most rows per multi-row INSERT when consecutive single-row INSERTs are coalesced; 0 or 1 turns coalescing off |
///
/// The defaults suit an update or timer message on the Internet Computer (40 billion
/// instructions per message): a flush uses at most [`max_flush_instructions`](Self::max_flush_instructions)
/// (30 billion) on ops, whatever they are, leaving headroom for rollback, `COMMIT` (which writes
/// the dirty pages) and the rest of the message.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Config {
    /// Number of pending ops at which a flush is due immediately
    /// ([`Submitted::flush_due`](crate::Submitted::flush_due)). A flush is not limited to this
    /// many ops: it executes everything pending, subject to the instruction budget. At least 1
    /// and at most `max_pending`.
    pub flush_size: usize,
    /// Maximum time in nanoseconds an op waits before a timer flush is due
    /// ([`BatchQueue::next_due`](crate::BatchQueue::next_due)). 0 means "as soon as possible".
    pub max_delay_ns: u64,
    /// Maximum number of pending ops. A submit to a full queue fails with
    /// [`SubmitError::QueueFull`](crate::SubmitError::QueueFull); nothing is dropped. At least 1.
    pub max_pending: usize,
    /// Maximum total [`WriteOp::size_bytes`](crate::WriteOp::size_bytes) of the pending ops. A
    /// submit that would exceed it fails with
    /// [`SubmitError::QueueBytesFull`](crate::SubmitError::QueueBytesFull) (or
    /// [`SubmitError::OpTooLarge`](crate::SubmitError::OpTooLarge) if the op alone exceeds it).
    /// It bounds the heap the queue takes, and the work of saving and restoring it across an
    /// upgrade. At least 1.
    pub max_pending_bytes: usize,
    /// Instructions (as read from the [`InstructionMeter`](crate::InstructionMeter)) after which
    /// a flush starts no further op. The op running when the budget is reached may continue
    /// until the flush has used twice the budget, when the instruction guard interrupts it
    /// (see [`BatchQueue::flush`](crate::BatchQueue::flush)). At least 1.
    pub flush_instruction_budget: u64,
    /// Number of outcomes kept. When full, the oldest outcome of the submitter that keeps the
    /// most is evicted (among those keeping as many, the one that added an outcome last), so a
    /// submitter's outcomes make room only for its own, never for another's (see
    /// [`BatchQueue::submit_as`](crate::BatchQueue::submit_as)). 0 keeps none (every
    /// [`status`](crate::BatchQueue::status) after a flush is `Evicted`).
    pub outcome_capacity: usize,
    /// Number of flushed tickets whose submitter and whether they committed are kept after
    /// their outcome is evicted (8 bytes each): [`OpStatus::Evicted`](crate::OpStatus::Evicted)
    /// says whether such an op committed, to its submitter only. 0 keeps none.
    pub history_capacity: usize,
    /// Statement coalescing: consecutive ops with the same single-row
    /// `INSERT INTO t (cols) VALUES (?, ...)` run as multi-row INSERTs of at most this many rows
    /// (rounded down to a power of two, and within SQLite's bind-parameter limit), with each op's
    /// own outcome and rowid, exactly as op by op (see [`execute_batch`](crate::execute_batch)).
    /// 0 or 1 turns it off.
    pub coalesce_rows: usize,
}

/// The default of [`Config::coalesce_rows`], also used by [`execute_batch`](crate::execute_batch)
/// and [`execute_batch_within`](crate::execute_batch_within). Chosen by measurement: see the
/// crate's README.
pub const DEFAULT_COALESCE_ROWS: usize = 128;

/// The default of [`Config::history_capacity`]: 1,048,576 tickets (8 MiB once full).
pub const DEFAULT_HISTORY_CAPACITY: usize = 1 << 20;

impl Default for Config {
    fn default() -> Self {
        Config {
            flush_size: 100,
            max_delay_ns: 1_000_000_000,
            max_pending: 10_000,
            max_pending_bytes: 128 << 20,
            flush_instruction_budget: 10_000_000_000,
            outcome_capacity: 10_000,
            history_capacity: DEFAULT_HISTORY_CAPACITY,
            coalesce_rows: DEFAULT_COALESCE_ROWS,
        }
    }
}

impl Config {
    /// The most instructions a flush spends on ops, whatever the ops:
    /// `3 × flush_instruction_budget` (saturating). An op is interrupted at twice the budget;
    /// the ops before it, which all started under the budget, are then re-applied. Rollback,
    /// `COMMIT` and the rest of the message come on top.
    pub fn max_flush_instructions(&self) -> u64 {
        self.flush_instruction_budget.saturating_mul(3)
    }

    /// Checks the invariants documented on each field.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.flush_size == 0 {
            return Err(ConfigError::ZeroFlushSize);
        }
        if self.max_pending == 0 {
            return Err(ConfigError::ZeroMaxPending);
        }
        if self.flush_size > self.max_pending {
            return Err(ConfigError::FlushSizeAboveMaxPending {
                flush_size: self.flush_size,
                max_pending: self.max_pending,
            });
        }
        if self.max_pending_bytes == 0 {
            return Err(ConfigError::ZeroMaxPendingBytes);
        }
        if self.flush_instruction_budget == 0 {
            return Err(ConfigError::ZeroInstructionBudget);
        }
        Ok(())
    }
}

/// Why a [`Config`] (or a restored [`QueueState`](crate::QueueState)) was rejected.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// `flush_size` is 0: the size trigger would always be reached.
    #[error("flush_size must be at least 1")]
    ZeroFlushSize,
    /// `max_pending` is 0: the queue could accept nothing.
    #[error("max_pending must be at least 1")]
    ZeroMaxPending,
    /// `flush_size` exceeds `max_pending`: the size trigger could never be reached.
    #[error("flush_size ({flush_size}) must not exceed max_pending ({max_pending})")]
    FlushSizeAboveMaxPending {
        /// The configured flush size.
        flush_size: usize,
        /// The configured queue capacity.
        max_pending: usize,
    },
    /// `max_pending_bytes` is 0: the queue could accept nothing.
    #[error("max_pending_bytes must be at least 1")]
    ZeroMaxPendingBytes,
    /// `flush_instruction_budget` is 0.
    #[error("flush_instruction_budget must be at least 1")]
    ZeroInstructionBudget,
    /// The [`QueueState`](crate::QueueState) given to
    /// [`BatchQueue::from_state`](crate::BatchQueue::from_state) is inconsistent (tickets out of
    /// order, or not below `next_ticket`).
    #[error("inconsistent queue state: {reason}")]
    InvalidState {
        /// Which invariant does not hold.
        reason: String,
    },
}
