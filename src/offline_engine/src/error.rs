//! The engine's error type.

use std::path::PathBuf;

use crate::instrument::InstrumentError;
use crate::types::Execution;

/// Errors of the engine (not of canister code: traps and rejects are [`crate::MessageResult`]s).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EngineError {
    /// The wasm could not be instrumented (invalid module, unsupported import, ...).
    #[error(transparent)]
    Instrument(#[from] InstrumentError),
    /// wasmtime could not configure, compile, link or instantiate the module.
    #[error("wasmtime: {}", chain(.0))]
    Wasmtime(wasmtime::Error),
    /// Reading or writing a file (module cache, wasm, results) failed.
    #[error("{path}: {source}")]
    Io {
        /// The file involved.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// `canister_init` (or `canister_start`) trapped, so nothing was installed.
    #[error("install failed: {}", failure_message(.0))]
    InstallFailed(Box<Execution>),
    /// The module lacks something the engine needs (memory, an export, a table entry).
    #[error("{0}")]
    Module(String),
    /// [`crate::Canister::fork`] while messages or calls were in flight.
    #[error("the canister has messages or calls in flight: a fork would not carry them")]
    NotQuiescent,
    /// The message queue did not drain (a canister calling itself forever).
    #[error("message queue did not drain after {0} executions")]
    QueueDidNotDrain(usize),
    /// The heap dirty-page tracking disagreed with a comparison of the whole heap (only with
    /// [`crate::Canister::set_dirty_page_check`]; a bug in the engine).
    #[error("dirty page check failed: {0}")]
    DirtyPageCheck(String),
    /// The executing thread panicked (a bug in the engine).
    #[error("engine thread panicked: {0}")]
    Panic(String),
}

fn chain(e: &wasmtime::Error) -> String {
    e.chain()
        .map(|c| c.to_string())
        .collect::<Vec<_>>()
        .join(": ")
}

fn failure_message(e: &Execution) -> String {
    match &e.result {
        crate::MessageResult::Trap(m) => m.clone(),
        other => format!("{other:?}"),
    }
}

impl EngineError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        EngineError::Io {
            path: path.into(),
            source,
        }
    }
}

impl From<wasmtime::Error> for EngineError {
    fn from(e: wasmtime::Error) -> Self {
        EngineError::Wasmtime(e)
    }
}
