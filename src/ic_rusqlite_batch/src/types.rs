//! The Candid types of a batched canister's methods (the `ic-rusqlite-batch-types` crate,
//! re-exported: clients decode them without compiling SQLite), and the conversions from
//! `batch_core`'s results. Use them as your methods' argument and result types
//! (`Result<T, WriteError>` is Candid's `variant { Ok : T; Err : WriteError }`, as are the named
//! results `WriteResult`, `SubmitResult`, ...), or convert them to your own.

use batch_core::{DedupError, FlushReport, OpOutcome, OpStatus};

pub use batch_types::*;

/// An op's outcome as the interface answers it.
pub fn outcome(o: OpOutcome) -> Outcome {
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

/// A flush's report as the interface answers it.
pub fn summary(r: FlushReport) -> FlushSummary {
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

/// A ticket's status as the interface answers it.
pub fn status(status: OpStatus) -> TicketStatus {
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

/// What a keyed batch's refusal tells the caller: the window rules, a reused key and a full
/// store (naming whose share is full) as their own variants, a key's caller too long as
/// `Invalid`, anything else (the store's or the transaction's failure) as `Database`.
pub fn dedup_refusal(error: DedupError) -> WriteError {
    match error {
        DedupError::TooOld {
            created_at_time_ns,
            now_ns,
            oldest_accepted_ns,
        } => WriteError::TooOld {
            created_at_time: created_at_time_ns,
            now: now_ns,
            oldest_accepted: oldest_accepted_ns,
        },
        DedupError::CreatedInFuture {
            created_at_time_ns,
            now_ns,
            newest_accepted_ns,
        } => WriteError::CreatedInFuture {
            created_at_time: created_at_time_ns,
            now: now_ns,
            newest_accepted: newest_accepted_ns,
        },
        DedupError::DigestMismatch { key } => WriteError::DigestMismatch {
            created_at_time: key.created_at_time_ns,
        },
        DedupError::StoreFull {
            share,
            keys_held,
            max_keys,
            bytes_held,
            max_bytes,
            ..
        } => WriteError::StoreFull {
            keys_held,
            max_keys,
            bytes_held,
            max_bytes,
            share: match share {
                batch_core::StoreShare::Caller => StoreShare::Caller,
                batch_core::StoreShare::Store => StoreShare::Store,
            },
        },
        DedupError::CallerTooLong { .. } => WriteError::Invalid(error.to_string()),
        other => WriteError::Database(other.to_string()),
    }
}
