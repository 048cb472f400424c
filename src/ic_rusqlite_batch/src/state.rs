//! The canister's heap state that the library's modules share (wasm32 only): the queue, its
//! settings, and the database connection. A leaf: it imports none of the modules that use it
//! (`canister`, `timer`, `keyed`), so they read it without importing each other.

use std::cell::RefCell;

use batch_core::BatchQueue;
use ic_rusqlite::rusqlite::Connection;

use crate::settings::CanisterSettings;

thread_local! {
    /// The queue of submitted ops.
    pub(crate) static QUEUE: RefCell<BatchQueue> =
        RefCell::new(BatchQueue::new(batch_core::Config::default()).expect("default config is valid"));
    /// The settings in effect.
    pub(crate) static SETTINGS: RefCell<CanisterSettings> = RefCell::new(CanisterSettings::default());
}

/// Runs `f` with the canister's database connection (ic-rusqlite's `with_connection`): what a
/// canister's queries read, inside [`query!`](crate::query). Writes go through the queue or a
/// batch, which keep them within an instruction budget and give each op its outcome.
pub fn with_connection<R>(f: impl FnOnce(&Connection) -> R) -> R {
    ic_rusqlite::with_connection(|conn| f(&conn))
}
