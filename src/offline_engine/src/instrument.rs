//! Instruction-metering instrumentation, following the replica's rules (`METERING.md` §1).
//!
//! The module is rewritten with wasmparser + wasm-encoder:
//! - an imported host function `__.out_of_instructions` is prepended (function index 0, all other
//!   function indices shift by one);
//! - an exported mutable i64 global [`COUNTER_EXPORT`] holds the remaining budget; every basic
//!   block subtracts its prepaid cost (the sum of [`operator_weight`]s) when entered; re-entrant
//!   blocks (function entry, loop headers) then check `counter < 0` and call `out_of_instructions`;
//! - before `memory.fill/copy/init` and `table.fill/copy/init` an injected, unmetered helper
//!   subtracts the size operand (saturating) and checks the counter;
//! - the start section is removed and its function exported as `canister_start`;
//! - memory 0 and table 0 are exported as `memory` and `table`, and every mutable global is
//!   exported (`__persistent_mutable_global_<i>` when it had no export), so the engine can
//!   snapshot and restore them;
//! - a module with a memory gets a second memory, the written-page map
//!   ([`crate::heap::DirtyMap`], exported as [`DIRTY_MAP_EXPORT`]): before every store to the
//!   heap the injected code sets the map's byte of the 4 KiB page of the store's first byte (and
//!   a summary byte per 64 pages), and before `memory.fill/copy/init` an injected helper marks
//!   every page of the destination range, so that the engine compares only those pages with its
//!   shadow of the heap ([`crate::heap`]);
//! - with [`Options::tracker`] (profiles with the deterministic memory tracker), the tracker map
//!   ([`crate::tracker::TrackerMap`], exported as [`TRACKER_EXPORT`]) instead of the written-page
//!   map: before every load and store of the heap the injected code checks the state of its
//!   64 KiB Wasm page and calls an unmetered helper that charges the page's tracker events and
//!   records it when the state falls short (a check that an earlier one covers on every path
//!   is left out); before `memory.fill/copy/init` it calls the helper for their ranges. The
//!   pages the tracker saw written are those the engine compares;
//! - with [`Options::profile`], hooks for the profiler ([`crate::profile`]): an imported host
//!   function called at function entry (before the entry block's charge), after every call
//!   returns, before every tail call, and around calls of imported (`ic0`) functions.
//!
//! The injected code is never metered itself: it changes no instruction count.

mod body;
mod dirty;
mod indices;
mod metering;
mod pages;
mod redundant;
mod scan;
mod sections;
mod weights;

pub use metering::block_costs;
pub use weights::operator_weight;

/// Name of the exported instruction counter global.
pub const COUNTER_EXPORT: &str = "canister counter_instructions";
/// Module name of the injected host imports.
pub const INJECTED_MODULE: &str = "__";
/// Name of the injected out-of-instructions host import.
pub const OUT_OF_INSTRUCTIONS: &str = "out_of_instructions";
/// Export name of the canister's main memory after instrumentation.
pub const MEMORY_EXPORT: &str = "memory";
/// Export name of the canister's function table after instrumentation.
pub const TABLE_EXPORT: &str = "table";
/// Export name of the former start function.
pub const START_EXPORT: &str = "canister_start";
/// Export name of the written-page map memory ([`crate::heap::DirtyMap`]).
pub const DIRTY_MAP_EXPORT: &str = "__dirty_pages";
/// Export name of the tracker map memory ([`crate::tracker::TrackerMap`]).
pub const TRACKER_EXPORT: &str = "__tracked_pages";
/// Name of the profiler's function-entry hook `(func index: i32) -> (stack depth: i32)`.
pub const PROFILE_ENTER: &str = "profile_enter";
/// Name of the profiler's call-return hook `(stack depth of the caller: i32)`.
pub const PROFILE_RETURN: &str = "profile_return";
/// Name of the profiler's tail-call hook `(stack depth of the calling function: i32)`.
pub const PROFILE_TAIL: &str = "profile_tail";

/// Options of the instrumentation pass.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Options {
    /// Inject the profiler's hooks ([`PROFILE_ENTER`], [`PROFILE_RETURN`], [`PROFILE_TAIL`],
    /// imported from [`INJECTED_MODULE`]). They read the counter and never change it.
    pub profile: bool,
    /// Inject the deterministic memory tracker's heap checks ([`crate::tracker`]) with these
    /// parameters (a profile with the tracker, [`crate::metering::Metering::tracker`]).
    pub tracker: Option<crate::metering::Tracker>,
}

/// Errors of the instrumentation pass.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum InstrumentError {
    /// The input is not a valid WebAssembly module.
    #[error("invalid wasm module: {0}")]
    Parse(#[from] wasmparser::BinaryReaderError),
    /// Re-encoding the module failed.
    #[error("cannot re-encode wasm module: {0}")]
    Reencode(String),
    /// The module imports something the engine does not provide.
    #[error("module imports `{module}.{name}`, which the offline engine does not provide{hint}")]
    UnsupportedImport {
        /// Import module name.
        module: String,
        /// Import field name.
        name: String,
        /// Extra explanation (may be empty).
        hint: String,
    },
    /// The module uses a feature the IC does not allow (several memories, a component, ...).
    #[error("unsupported module: {0}")]
    Unsupported(String),
}

impl<E: std::fmt::Debug> From<wasm_encoder::reencode::Error<E>> for InstrumentError {
    fn from(e: wasm_encoder::reencode::Error<E>) -> Self {
        InstrumentError::Reencode(format!("{e:?}"))
    }
}

/// What the engine needs to know about an instrumented module.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ModuleInfo {
    /// The main memory is 64-bit (wasm64): loads/stores weigh 2, dirty pages cost 4,000.
    pub memory64: bool,
    /// The module defines a memory (exported as [`MEMORY_EXPORT`]).
    pub has_memory: bool,
    /// The module defines a table (exported as [`TABLE_EXPORT`]).
    pub has_table: bool,
    /// The module had a start section (now exported as [`START_EXPORT`]).
    pub has_start: bool,
    /// Names of the exported functions of the original module (e.g. `canister_update foo`).
    pub function_exports: Vec<String>,
    /// `ic0` functions the module imports.
    pub ic0_imports: Vec<String>,
    /// Export names of every mutable global (persisted across messages, restored on traps).
    pub mutable_globals: Vec<String>,
    /// Custom sections named `icp:public <name>` / `icp:private <name>`: (name, contents).
    pub metadata: Vec<(String, Vec<u8>)>,
}

/// The instrumented module and its description.
#[derive(Debug, Clone)]
pub struct Instrumented {
    /// The instrumented wasm binary.
    pub wasm: Vec<u8>,
    /// Facts about the module.
    pub info: ModuleInfo,
}

/// Instruments `wasm` for metering (no profiling hooks). `check_import(module, name)` accepts a
/// function import or returns a hint explaining the refusal; any non-function import is refused.
pub fn instrument(
    wasm: &[u8],
    check_import: &dyn Fn(&str, &str) -> Result<(), String>,
) -> Result<Instrumented, InstrumentError> {
    instrument_with(wasm, check_import, Options::default())
}

/// Instruments `wasm` with `options` (see [`instrument`]).
pub fn instrument_with(
    wasm: &[u8],
    check_import: &dyn Fn(&str, &str) -> Result<(), String>,
    options: Options,
) -> Result<Instrumented, InstrumentError> {
    let s = scan::scan(wasm, check_import)?;
    let layout = sections::Layout::new(&s, options);
    let wasm_out = sections::write(wasm, &s, &layout)?;
    Ok(Instrumented {
        wasm: wasm_out,
        info: ModuleInfo {
            memory64: s.memory64,
            has_memory: s.num_memories > 0,
            has_table: s.num_tables > 0,
            has_start: s.start.is_some(),
            function_exports: s.function_exports,
            ic0_imports: s.ic0_imports,
            mutable_globals: layout.mutable_global_names,
            metadata: s.metadata,
        },
    })
}

#[cfg(test)]
mod tests;
