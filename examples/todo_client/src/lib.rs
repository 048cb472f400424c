//! A native Rust client of the todo store (`examples/todo_canister`), as a service that sends
//! it writes would be: it depends on the canister's own crate, natively, for the declaration of
//! its writes ([`TodoWrite`]), and packs batches with
//! `ic-batch-client`'s codec of any declared canister. Nothing here, nor in the canister's crate,
//! is split by target by hand: the library's macros define the canister's methods on wasm32 and
//! nothing elsewhere. The repository builds it natively in `cargo test`, and its tests hold it,
//! the todo store and the notes store to the root names of the crates they use.

use ic_batch_client::{BatchCodec, BatchKey, Declared, Reply};
pub use todo_canister::TodoWrite;

/// The codec of the todo store's client batches (`execute_writes_packed`).
pub const TODO_BATCHES: Declared<TodoWrite> = Declared::new();

/// The Candid argument of `execute_writes_packed` for `ops` under `key`.
pub fn batch_argument(key: &BatchKey, ops: &[TodoWrite]) -> Vec<u8> {
    TODO_BATCHES.encode(key, ops)
}

/// The canister's reply to a batch of `ops` ops: one outcome per op, or the batch's refusal.
pub fn batch_reply(
    reply: &[u8],
    ops: usize,
) -> Result<Reply<ic_batch_client::Outcome, ic_batch_client::BatchRefusal>, String> {
    TODO_BATCHES.decode(reply, ops)
}
