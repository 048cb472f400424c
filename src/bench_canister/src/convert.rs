//! `ic_rusqlite_batch`'s types as `bench_api`'s: the same Candid shapes, declared once more in
//! `bench_api` for the canister's interface, its tests and the benchmark suite.

use batch_core::{FlushReport, OpOutcome, OpStatus};
use bench_api::{
    FlushSummary, InitArgs, OpError, Outcome, Settings, Stats, TicketStatus, WriteAccess,
    WriteError,
};
use ic_rusqlite_batch as batch;

fn access_in(a: WriteAccess) -> batch::WriteAccess {
    match a {
        WriteAccess::Restricted => batch::WriteAccess::Restricted,
        WriteAccess::Open => batch::WriteAccess::Open,
    }
}

pub fn init_args(a: InitArgs) -> batch::InitArgs {
    batch::InitArgs {
        flush_size: a.flush_size,
        max_delay_ms: a.max_delay_ms,
        max_pending: a.max_pending,
        max_pending_bytes: a.max_pending_bytes,
        flush_instruction_budget: a.flush_instruction_budget,
        outcome_capacity: a.outcome_capacity,
        coalesce_rows: a.coalesce_rows,
        write_access: a.write_access.map(access_in),
    }
}

pub fn write_error(e: batch::WriteError) -> WriteError {
    match e {
        batch::WriteError::QueueFull { capacity } => WriteError::QueueFull { capacity },
        batch::WriteError::QueueBytesFull {
            pending_bytes,
            capacity_bytes,
        } => WriteError::QueueBytesFull {
            pending_bytes,
            capacity_bytes,
        },
        batch::WriteError::Invalid(reason) => WriteError::Invalid(reason),
        batch::WriteError::NotAuthorized => WriteError::NotAuthorized,
        batch::WriteError::Database(reason) => WriteError::Database(reason),
    }
}

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

pub fn status(s: OpStatus) -> TicketStatus {
    match s {
        OpStatus::Pending => TicketStatus::Pending,
        OpStatus::Done(o) => match outcome(o) {
            Outcome::Committed {
                rows_changed,
                last_insert_rowid,
            } => TicketStatus::Committed {
                rows_changed,
                last_insert_rowid,
            },
            Outcome::Failed(e) => TicketStatus::Failed(e),
        },
        OpStatus::Evicted { committed } => TicketStatus::Evicted { committed },
        OpStatus::NotYours => TicketStatus::NotYours,
        OpStatus::Unknown => TicketStatus::Unknown,
    }
}

pub fn stats(s: batch::Stats) -> Stats {
    Stats {
        pending: s.pending,
        pending_bytes: s.pending_bytes,
        submitted: s.submitted,
        committed: s.committed,
        failed: s.failed,
        interrupted: s.interrupted,
        rejected: s.rejected,
        flushes: s.flushes,
        flush_errors: s.flush_errors,
        capped_flushes: s.capped_flushes,
        last_flush_ops: s.last_flush_ops,
        last_flush_instructions: s.last_flush_instructions,
        last_error: s.last_error,
        alarm: s.alarm,
        timer_armed: s.timer_armed,
    }
}

pub fn settings(s: batch::Settings) -> Settings {
    Settings {
        flush_size: s.flush_size,
        max_delay_ms: s.max_delay_ms,
        max_pending: s.max_pending,
        max_pending_bytes: s.max_pending_bytes,
        flush_instruction_budget: s.flush_instruction_budget,
        outcome_capacity: s.outcome_capacity,
        coalesce_rows: s.coalesce_rows,
        write_access: match s.write_access {
            batch::WriteAccess::Restricted => WriteAccess::Restricted,
            batch::WriteAccess::Open => WriteAccess::Open,
        },
        read_only: s.read_only,
    }
}
