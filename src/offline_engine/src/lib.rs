//! An embedded offline engine that runs a real Internet Computer canister wasm (after
//! `wasi2ic`) on wasmtime with the IC's instruction metering and message semantics.
//!
//! It is a test and benchmark engine, not a replica: no consensus, no networking. A
//! [`Canister`] runs alone (its calls to itself are answered within [`Canister::tick`]); a
//! [`Subnet`] holds several canisters and executes rounds as the replica's scheduler does, with
//! calls between them ([`subnet`], [`messages`]). Metering follows the replica's rules exactly
//! (`METERING.md` in this crate, with the replica's sources): the module is instrumented per basic
//! block with the replica's weight table ([`instrument`]), System API calls charge the costs of
//! one table and may be made where one matrix allows ([`system_api`]), and memory pages are
//! charged by the rules of a metering profile chosen per engine ([`metering`]): those of
//! PocketIC 13 (stable memory per dirty page, [`stable`]; dirty heap pages billed after each
//! message, [`heap`]) or the replica's deterministic memory tracker ([`tracker`]). A program loaded with [`Engine::load_profiled`] also records an exact
//! per-function instruction [`Profile`] of every message ([`profile`], `PROFILING.md`).
//!
//! ```no_run
//! use offline_engine::{Canister, Engine, EngineConfig, Settings};
//! # fn main() -> Result<(), offline_engine::EngineError> {
//! let engine = Engine::new(EngineConfig::default())?;
//! let program = engine.load(&std::fs::read("canister.wasm").unwrap())?;
//! let (mut canister, _init) = Canister::install(&engine, &program, &[], Settings::default())?;
//! let exec = canister.update("add", b"DIDL\x00\x00")?;
//! println!("{:?} in {} instructions", exec.result, exec.instructions);
//! # Ok(()) }
//! ```
#![deny(missing_docs)]

pub mod canbench;
pub mod canister;
pub mod civil;
pub mod engine;
pub mod error;
pub mod fees;
pub mod heap;
pub mod host_time;
pub mod instrument;
pub(crate) mod linker;
pub mod messages;
pub mod metering;
pub mod profile;
pub(crate) mod queues;
pub mod stable;
pub mod subnet;
pub mod system_api;
pub mod tracker;
pub mod types;
pub mod user_error;
pub mod validation;

pub use canister::Canister;
pub use engine::{Engine, EngineConfig, Program, default_cache_dir};
pub use error::EngineError;
pub use metering::Metering;
pub use profile::{FunctionCost, Profile};
pub use subnet::{CanisterStatus, Subnet, SubnetConfig};
pub use types::{
    ANONYMOUS, BENCHMARKING_LIMIT, Charging, DEFAULT_CANISTER_ID, Execution, InstructionLimits,
    MemoryPages, MessageResult, PageUse, Settings, SizeLimits, SubnetKind, reject_code,
};
