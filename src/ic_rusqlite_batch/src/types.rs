//! The Candid types of a batched canister's generic methods: settings, outcomes, tickets,
//! flushes, stats and errors, with conversions from `batch_core`'s types. Use them as your
//! methods' argument and result types (`Result<T, WriteError>` is Candid's
//! `variant { Ok : T; Err : WriteError }`), or convert them to your own.

use batch_core::{FlushReport, OpOutcome, OpStatus};
use candid::{CandidType, Deserialize};

pub use batch_core::Ticket;

/// Who may call the write methods.
#[derive(CandidType, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum WriteAccess {
    /// Controllers, and the writer principals controllers register.
    #[default]
    Restricted,
    /// Anyone: every caller pays with the canister's cycles.
    Open,
}

/// Settings given at install or upgrade. Every field is optional: at install an absent field
/// takes its default, at upgrade it keeps the current value (so does an absent argument).
#[derive(CandidType, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct InitArgs {
    /// Ops per flush: a submit that fills the queue to this size flushes in the same call
    /// (default 100).
    pub flush_size: Option<u64>,
    /// Longest time an op waits before the timer flushes it, in milliseconds (default 1,000;
    /// the timer fires at most once per second).
    pub max_delay_ms: Option<u64>,
    /// Queue capacity in ops (default 10,000).
    pub max_pending: Option<u64>,
    /// Queue capacity in bytes of SQL and parameters (default 128 MiB).
    pub max_pending_bytes: Option<u64>,
    /// Instructions one flush may spend before it starts no further op; a running op is
    /// interrupted at twice this, and a flush ends by three times it (default 10 billion, at
    /// most [`MAX_FLUSH_BUDGET`](crate::settings::MAX_FLUSH_BUDGET)).
    pub flush_instruction_budget: Option<u64>,
    /// Outcomes kept for ticket queries (default 10,000; at least `max_pending`).
    pub outcome_capacity: Option<u64>,
    /// Most rows per multi-row INSERT when a flush coalesces consecutive single-row INSERTs of
    /// one shape (default 128; 0 or 1 turns coalescing off).
    pub coalesce_rows: Option<u64>,
    /// Who may write (default `Restricted`).
    pub write_access: Option<WriteAccess>,
}

/// The settings in effect.
#[derive(CandidType, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Settings {
    /// Ops per flush.
    pub flush_size: u64,
    /// Longest wait before the timer flushes, in milliseconds.
    pub max_delay_ms: u64,
    /// Queue capacity in ops.
    pub max_pending: u64,
    /// Queue capacity in bytes.
    pub max_pending_bytes: u64,
    /// Instructions per flush before no further op starts.
    pub flush_instruction_budget: u64,
    /// Outcomes kept.
    pub outcome_capacity: u64,
    /// Most rows per coalesced INSERT (0 or 1: off).
    pub coalesce_rows: u64,
    /// Who may write.
    pub write_access: WriteAccess,
    /// The database is read-only: queued ops wait, immediate writes fail.
    pub read_only: bool,
}

/// Why an operation failed.
#[derive(CandidType, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct OpError {
    /// SQLite's extended result code (2067 `SQLITE_CONSTRAINT_UNIQUE`, 9 `SQLITE_INTERRUPT`
    /// for an op stopped at its instruction limit, ...).
    pub code: i32,
    /// SQLite's error message (at most 1 KiB).
    pub message: String,
}

/// The result of one write.
#[derive(CandidType, Deserialize, Clone, Debug, PartialEq)]
pub enum Outcome {
    /// The write committed.
    Committed {
        /// Rows it inserted, updated or deleted.
        rows_changed: u64,
        /// Rowid of the row it inserted last (0 if none).
        last_insert_rowid: i64,
    },
    /// The write failed and changed nothing.
    Failed(OpError),
}

impl From<OpOutcome> for Outcome {
    fn from(o: OpOutcome) -> Self {
        match o {
            OpOutcome::Committed {
                rows_changed,
                last_insert_rowid,
            } => Outcome::Committed {
                rows_changed,
                last_insert_rowid,
            },
            OpOutcome::Failed { code, error } => Outcome::Failed(OpError {
                code,
                message: error,
            }),
        }
    }
}

/// What one flush did.
#[derive(CandidType, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct FlushSummary {
    /// Ops executed (committed + failed).
    pub executed: u64,
    /// Ops that committed.
    pub committed: u64,
    /// Ops that failed.
    pub failed: u64,
    /// Failed ops stopped at their instruction limit (included in `failed`).
    pub interrupted: u64,
    /// Ops still queued.
    pub remaining: u64,
    /// Ops are left for the timer.
    pub more_due: bool,
    /// Instructions the flush used.
    pub instructions: u64,
}

impl From<FlushReport> for FlushSummary {
    fn from(r: FlushReport) -> Self {
        FlushSummary {
            executed: r.executed as u64,
            committed: r.committed as u64,
            failed: r.failed as u64,
            interrupted: r.interrupted as u64,
            remaining: r.remaining as u64,
            more_due: r.more_due,
            instructions: r.instructions,
        }
    }
}

/// Why a call was refused. Nothing was queued or executed.
#[derive(CandidType, Deserialize, Clone, Debug, PartialEq, Eq)]
pub enum WriteError {
    /// The queue holds `capacity` ops; retry after a flush.
    QueueFull {
        /// The queue's capacity in ops.
        capacity: u64,
    },
    /// The queue's bytes would exceed its capacity; retry after a flush.
    QueueBytesFull {
        /// Bytes queued now.
        pending_bytes: u64,
        /// The queue's capacity in bytes.
        capacity_bytes: u64,
    },
    /// An argument breaks a limit of the interface.
    Invalid(String),
    /// The caller may not call this method.
    NotAuthorized,
    /// The transaction could not begin or commit; nothing of it was applied.
    Database(String),
}

impl std::fmt::Display for WriteError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WriteError::QueueFull { capacity } => {
                write!(
                    f,
                    "QueueFull: {capacity} ops are queued; retry after a flush"
                )
            }
            WriteError::QueueBytesFull {
                pending_bytes,
                capacity_bytes,
            } => write!(
                f,
                "QueueBytesFull: {pending_bytes} of {capacity_bytes} bytes are queued; retry after a flush"
            ),
            WriteError::Invalid(reason) => write!(f, "Invalid: {reason}"),
            WriteError::NotAuthorized => write!(
                f,
                "NotAuthorized: only controllers and registered writers may call this method"
            ),
            WriteError::Database(reason) => write!(f, "Database: {reason}"),
        }
    }
}

impl std::error::Error for WriteError {}

/// Where a queued write is.
#[derive(CandidType, Deserialize, Clone, Debug, PartialEq)]
pub enum TicketStatus {
    /// Queued, not yet flushed.
    Pending,
    /// Flushed and committed.
    Committed {
        /// Rows it inserted, updated or deleted.
        rows_changed: u64,
        /// Rowid of the row it inserted last (0 if none).
        last_insert_rowid: i64,
    },
    /// Flushed, failed, changed nothing.
    Failed(OpError),
    /// Flushed, but the outcome was evicted from the bounded store.
    Evicted {
        /// Whether it committed, while the ticket is in the queue's history; `None` for an
        /// older one.
        committed: Option<bool>,
    },
    /// Issued to another caller: only its submitter and controllers may see it.
    NotYours,
    /// Never issued by this install.
    Unknown,
}

impl From<OpStatus> for TicketStatus {
    fn from(status: OpStatus) -> Self {
        match status {
            OpStatus::Pending => TicketStatus::Pending,
            OpStatus::Done(OpOutcome::Committed {
                rows_changed,
                last_insert_rowid,
            }) => TicketStatus::Committed {
                rows_changed,
                last_insert_rowid,
            },
            OpStatus::Done(OpOutcome::Failed { code, error }) => TicketStatus::Failed(OpError {
                code,
                message: error,
            }),
            OpStatus::Evicted { committed } => TicketStatus::Evicted { committed },
            OpStatus::NotYours => TicketStatus::NotYours,
            OpStatus::Unknown => TicketStatus::Unknown,
        }
    }
}

/// Queue counters since install (kept across upgrades), and what the watchdog sees.
#[derive(CandidType, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Stats {
    /// Ops queued now.
    pub pending: u64,
    /// Bytes of SQL and parameters queued now.
    pub pending_bytes: u64,
    /// Ops accepted (tickets issued).
    pub submitted: u64,
    /// Flushed ops that committed.
    pub committed: u64,
    /// Flushed ops that failed.
    pub failed: u64,
    /// Failed ops stopped at their instruction limit (included in `failed`).
    pub interrupted: u64,
    /// Submits refused (queue full, op too large, empty unit).
    pub rejected: u64,
    /// Flushes that executed at least one op.
    pub flushes: u64,
    /// Flushes whose transaction could not begin or commit (the queue was kept).
    pub flush_errors: u64,
    /// Flushes rolled back at their total instruction limit (the queue was kept).
    pub capped_flushes: u64,
    /// Ops the last flush executed.
    pub last_flush_ops: u64,
    /// Instructions the last flush used.
    pub last_flush_instructions: u64,
    /// The last flush error or interrupted op, as text.
    pub last_error: Option<String>,
    /// What keeps the queue from draining now, if anything: flushes failing outside any op,
    /// or flushes trapping (careful flushes are looking for the op that makes them trap).
    pub alarm: Option<String>,
    /// A timer will flush what is queued (true whenever ops are pending).
    pub timer_armed: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversions_keep_every_field() {
        let summary = FlushSummary::from(FlushReport {
            executed: 5,
            committed: 3,
            failed: 2,
            interrupted: 1,
            coalesced: 2,
            remaining: 7,
            more_due: true,
            instructions: 12_345,
            capped: false,
        });
        assert_eq!(
            summary,
            FlushSummary {
                executed: 5,
                committed: 3,
                failed: 2,
                interrupted: 1,
                remaining: 7,
                more_due: true,
                instructions: 12_345,
            }
        );
        assert_eq!(
            TicketStatus::from(OpStatus::Done(OpOutcome::Failed {
                code: 2067,
                error: "UNIQUE".into()
            })),
            TicketStatus::Failed(OpError {
                code: 2067,
                message: "UNIQUE".into()
            })
        );
        assert_eq!(
            Outcome::from(OpOutcome::Committed {
                rows_changed: 2,
                last_insert_rowid: -9
            }),
            Outcome::Committed {
                rows_changed: 2,
                last_insert_rowid: -9
            }
        );
        assert_eq!(
            TicketStatus::from(OpStatus::Evicted {
                committed: Some(false)
            }),
            TicketStatus::Evicted {
                committed: Some(false)
            }
        );
    }
}
