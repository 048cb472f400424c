#![doc = include_str!("../README.md")]
#![warn(missing_docs)]

pub mod access;
pub mod args;
#[cfg(target_arch = "wasm32")]
pub mod canister;
pub mod declared;
pub mod encode;
#[cfg(target_arch = "wasm32")]
pub mod keyed;
mod macros;
#[cfg(target_arch = "wasm32")]
pub mod message;
pub mod persist;
pub mod settings;
mod setup;
#[cfg(target_arch = "wasm32")]
mod state;
#[cfg(target_arch = "wasm32")]
pub mod timer;

pub use batch_core;
pub use batch_types;

// The crate's root: what a canister author needs for declared writes, client batches and the
// queue. Everything else is in the modules above. The macros (`update!`, `query!`,
// `canister_methods!`, `client_batches!`, `single_writes!`) are exported here too.
pub use batch_types::writes;
pub use batch_types::{MethodClass, QueryError, Ticket, WriteError};
#[cfg(target_arch = "wasm32")]
pub use declared::submit;
pub use setup::Setup;
#[cfg(target_arch = "wasm32")]
pub use state::with_connection;
