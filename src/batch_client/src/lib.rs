#![doc = include_str!("../README.md")]
#![deny(rustdoc::broken_intra_doc_links)]
#![warn(missing_docs)]

mod batcher;
mod codec;
mod config;
mod transport;

#[cfg(feature = "ic-agent")]
pub mod agent;
#[cfg(feature = "ic-cdk")]
pub mod canister;
#[cfg(feature = "pocket-ic")]
pub mod pocket_ic;
#[cfg(feature = "tokio")]
pub mod tokio_driver;

pub use batcher::{
    BatchError, Batcher, BatcherStats, Due, InFlight, Next, OpFuture, OpResult, SubmitError,
};
pub use codec::{
    BatchCodec, BatchKey, CANDID_BLOB_FRAMING_BYTES, Declared, RefusalKind, Reply, encode_blob_arg,
    is_not_executed,
};
pub use config::{
    BatcherConfig, ConfigError, DEFAULT_MAX_BATCH_OPS, ENVELOPE_RESERVE_BYTES, IC_MAX_MESSAGE_BYTES,
};
pub use transport::{RejectCode, SendError, Transport};

/// The types of a declared canister's replies, from `ic-rusqlite-batch-types` (the canister's
/// own crate re-exports the same): what [`Declared`]'s ops get.
pub use batch_types::declare::{BatchRefusal, Writes};
pub use batch_types::{OpError, Outcome, WriteError};
