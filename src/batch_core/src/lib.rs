#![doc = include_str!("../README.md")]
#![deny(rustdoc::broken_intra_doc_links)]
#![warn(missing_docs)]

pub use rusqlite;

mod clock;
mod config;
mod connection_state;
mod dedup;
mod executor;
mod meter;
mod op;
mod outcome_store;
mod persist;
mod queue;
#[cfg(test)]
mod testing;

pub use clock::{Clock, ManualClock};
pub use config::{Config, ConfigError, DEFAULT_COALESCE_ROWS, DEFAULT_HISTORY_CAPACITY};
pub use dedup::{
    Admitted, BatchDigest, BatchKey, CALLERS_TABLE, DEFAULT_MAX_BYTES,
    DEFAULT_MAX_BYTES_PER_CALLER, DEFAULT_MAX_KEYS, DEFAULT_MAX_KEYS_PER_CALLER,
    DEFAULT_PERMITTED_DRIFT_NS, DEFAULT_WINDOW_NS, DedupConfig, DedupConfigError, DedupCounters,
    DedupError, DedupStats, Deduplicator, KEY_OVERHEAD_BYTES, KEYS_TABLE, KeyedOutcomes, Lookup,
    MAX_CALLER_BYTES, META_TABLE, PruneReport, StoreShare,
};
pub use executor::{
    FlushError, PROGRESS_PERIOD_OPS, execute_autocommit, execute_autocommit_within, execute_batch,
    execute_batch_within,
};
pub use meter::{Budget, CountingMeter, InstructionMeter};
pub use op::{OpError, Outcome, Owner, SqlValue, Statement, Ticket, WriteOp};
pub use persist::{FORMAT_VERSION, MAGIC, RestoreError, SaveError};
pub use queue::{
    BatchQueue, FlushReport, MAX_ERROR_BYTES, OpStatus, PendingOp, QueueState, Stats,
    StoredOutcome, SubmitError, Submitted,
};
