#![doc = include_str!("../README.md")]
#![deny(rustdoc::broken_intra_doc_links)]
#![warn(missing_docs)]

pub use rusqlite;

mod clock;
mod config;
mod executor;
mod meter;
mod op;
mod outcome_store;
mod queue;
#[cfg(test)]
mod testing;

pub use clock::{Clock, ManualClock};
pub use config::{Config, ConfigError};
pub use executor::{FlushError, execute_autocommit, execute_batch};
pub use meter::{CountingMeter, InstructionMeter};
pub use op::{OpOutcome, SqlValue, Statement, Ticket, WriteOp};
pub use queue::{
    BatchQueue, FlushReport, OpStatus, PendingOp, QueueState, Stats, StoredOutcome, SubmitError,
    Submitted,
};
