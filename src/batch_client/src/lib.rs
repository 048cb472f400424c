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
pub use codec::{BatchCodec, BatchKey, PackedUserOrders, RefusalKind, Reply};
pub use config::{
    BatcherConfig, ConfigError, DEFAULT_MAX_BATCH_OPS, ENVELOPE_RESERVE_BYTES, IC_MAX_MESSAGE_BYTES,
};
pub use transport::{RejectCode, SendError, Transport};
