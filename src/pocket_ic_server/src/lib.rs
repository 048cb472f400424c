//! `offline-pocket-ic`: a server that speaks PocketIC's REST protocol, as the `pocket-ic` 13
//! client (and hence `canbench` 0.7) drives it, and runs every canister on the offline engine
//! (`offline_engine`: wasmtime with the replica's instruction metering and message semantics).
//!
//! It also serves the IC's own HTTP interface ([`http_interface`]: status, calls, queries,
//! read_state, certified by keys each instance generates), per instance and, with `--replica`,
//! at the root, so ic-agent, the JS agent and icp-cli deploy and call canisters on it with their
//! verification on. It is not PocketIC: there is no replica and no consensus. Canisters of
//! subnets with the normal cost schedule are charged the IC's execution, ingress and call fees
//! as the engine computes them (`offline_engine::Charging`); storage is not charged.
//! What it implements, what it answers with an error and what it leaves out is listed in the
//! crate's README (`src/pocket_ic_server/README.md`). The protocol types are `pocket-ic`'s own
//! ([`pocket_ic::common::rest`]); the management canister's Candid types are
//! `ic-management-canister-types`'.
//!
//! Layout, from the leaves up (no two modules import each other): [`error`] and [`response`]
//! (the REST protocol's JSON answers and errors); [`topology`] assigns subnet and canister ids;
//! [`reject`] builds the IC's reject responses from the engine's results; [`management`] names
//! the management canister's methods ([`management::ManagementMethod`]) and words the rejects of
//! those users may not call; [`blob_store`] is the server-wide blob store; [`instance`] holds an
//! instance's subnets, canisters, time and ingress messages, runs its rounds and executes the
//! management canister's methods (its canister manager); [`http_interface`] is the IC's HTTP
//! interface and [`faults`] its fault-injection test hooks; [`state`] is what every handler
//! shares; [`http_gateway`] mounts the IC HTTP interface's one route table (per instance, at the
//! root, on gateways) and the test hooks; [`routes`] maps PocketIC's REST endpoints onto all of
//! that; [`server`] binds, writes the port file and enforces the TTLs.
#![deny(missing_docs)]

pub mod blob_store;
pub mod error;
pub mod faults;
pub mod http_gateway;
pub mod http_interface;
pub mod instance;
pub mod management;
pub mod reject;
pub mod response;
pub mod routes;
pub mod server;
pub mod state;
pub mod topology;

pub use error::ServerError;

/// What this server is called in its logs, HTTP `server` header and documentation.
pub const SERVER_NAME: &str = "offline-pocket-ic";

/// The engine label every figure produced through this server carries.
pub const ENGINE_LABEL: &str = offline_engine::canbench::ENGINE_LABEL;

/// The `pocket-ic` client version whose protocol this server speaks.
pub const PROTOCOL_VERSION: &str = "13.0.0";

/// The line `--version` prints: exactly what the `pocket-ic` 13 client's version check accepts
/// (`pocket-ic-server <x.y.z>` with `13.0.0 <= x.y.z < 14`). Everywhere else the server names
/// itself [`SERVER_NAME`].
pub const VERSION_LINE: &str = "pocket-ic-server 13.0.0";

/// One line saying what this server is (logs, `/status`, the HTTP `server` header).
pub fn identity() -> String {
    format!(
        "{SERVER_NAME} {} (engine: {ENGINE_LABEL}; PocketIC REST protocol of pocket-ic {PROTOCOL_VERSION})",
        env!("CARGO_PKG_VERSION")
    )
}
