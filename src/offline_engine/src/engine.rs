//! The wasmtime engine, module loading (instrumentation + compilation) and the compiled-module
//! cache.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use sha2::{Digest, Sha256};
use wasmtime::{InstancePre, Linker, Module};

use crate::error::EngineError;
use crate::instrument::{self, ModuleInfo};
use crate::linker::{self, StoreData};
use crate::metering::Metering;
use crate::profile;
use crate::system_api;

/// Native stack of the threads that run canister code (wasm stack limit plus room for the host).
pub(crate) const EXECUTION_STACK: usize = 64 << 20;
/// Wasm stack limit (the replica allows 5 MiB).
const MAX_WASM_STACK: usize = 5 << 20;

/// Identifies everything that influences a compiled module, besides the instrumented bytes.
const CACHE_VERSION: &str = concat!(
    "offline_engine-",
    env!("CARGO_PKG_VERSION"),
    "-wasmtime-48.0.8-v1"
);

/// Engine configuration.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// Cache compiled modules on disk.
    pub cache: bool,
    /// Cache directory; `None` means `$OFFLINE_ENGINE_CACHE`, else `<cargo target dir>/offline-engine-cache`,
    /// else `<temp dir>/offline-engine-cache`.
    pub cache_dir: Option<PathBuf>,
    /// The rules for memory pages the engine meters by (`METERING.md` §10): every program it
    /// loads is instrumented for them, and every canister installed from such a program is
    /// metered by them. Default: [`Metering::POCKET_IC_13`].
    pub metering: Metering,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            cache: true,
            cache_dir: None,
            metering: Metering::default(),
        }
    }
}

/// The default cache directory (see [`EngineConfig::cache_dir`]).
pub fn default_cache_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("OFFLINE_ENGINE_CACHE") {
        return PathBuf::from(dir);
    }
    if let Some(dir) = std::env::var_os("CARGO_TARGET_DIR") {
        return PathBuf::from(dir).join("offline-engine-cache");
    }
    // The running binary lives somewhere under the target directory, which cargo marks with
    // CACHEDIR.TAG.
    if let Ok(exe) = std::env::current_exe() {
        for dir in exe.ancestors().skip(1) {
            if dir.join("CACHEDIR.TAG").is_file() {
                return dir.join("offline-engine-cache");
            }
        }
    }
    std::env::temp_dir().join("offline-engine-cache")
}

/// A wasmtime engine configured like the replica, plus the System API linkers.
pub struct Engine {
    pub(crate) wasmtime: wasmtime::Engine,
    linker32: Linker<StoreData>,
    linker64: Linker<StoreData>,
    cache_dir: Option<PathBuf>,
    metering: Metering,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("cache_dir", &self.cache_dir)
            .field("metering", &self.metering.name)
            .finish_non_exhaustive()
    }
}

/// A loaded (instrumented and compiled) canister module, ready to install.
#[derive(Clone)]
pub struct Program {
    pub(crate) inner: Arc<ProgramInner>,
}

pub(crate) struct ProgramInner {
    pub(crate) pre: InstancePre<StoreData>,
    pub(crate) info: ModuleInfo,
    pub(crate) sha256: [u8; 32],
    /// Size of the input wasm (what the IC counts as the module's memory).
    pub(crate) wasm_size: u64,
    pub(crate) from_cache: bool,
    /// Function names for the profiler, when loaded with [`Engine::load_profiled`].
    pub(crate) profile_names: Option<Arc<[String]>>,
    /// The rules the program was instrumented for and its canisters are metered by.
    pub(crate) metering: Metering,
}

impl std::fmt::Debug for Program {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Program")
            .field("sha256", &self.sha256_hex())
            .field("info", &self.inner.info)
            .finish()
    }
}

impl Program {
    /// Facts about the module (exports, memory type, imports, metadata).
    pub fn info(&self) -> &ModuleInfo {
        &self.inner.info
    }

    /// SHA-256 of the input wasm, hex encoded (the module hash the IC reports).
    pub fn sha256_hex(&self) -> String {
        hex::encode(self.inner.sha256)
    }

    /// Size of the wasm module in bytes (as loaded, before instrumentation).
    pub fn wasm_size(&self) -> u64 {
        self.inner.wasm_size
    }

    /// True if the compiled module came from the on-disk cache.
    pub fn from_cache(&self) -> bool {
        self.inner.from_cache
    }

    /// True if the program was loaded with [`Engine::load_profiled`]: its canisters record a
    /// [`crate::Profile`] of every message.
    pub fn is_profiled(&self) -> bool {
        self.inner.profile_names.is_some()
    }

    /// The function names the profiler uses (by function index, imports first; see
    /// [`crate::profile::function_names`]), if the program was loaded with
    /// [`Engine::load_profiled`].
    pub fn function_names(&self) -> Option<&[String]> {
        self.inner.profile_names.as_deref()
    }

    /// The metering profile the program was loaded for (its engine's,
    /// [`EngineConfig::metering`]).
    pub fn metering(&self) -> Metering {
        self.inner.metering
    }

    /// True if the module exports the function `name` (e.g. `canister_update foo`).
    pub fn exports(&self, name: &str) -> bool {
        self.inner.info.function_exports.iter().any(|e| e == name)
    }

    /// Contents of the custom section `icp:public <name>` or `icp:private <name>`.
    pub fn metadata(&self, name: &str) -> Option<&[u8]> {
        self.inner
            .info
            .metadata
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, d)| d.as_slice())
    }

    /// Names of the canbench benchmarks (`canister_query __canbench__<name>` exports), sorted.
    pub fn canbench_benchmarks(&self) -> Vec<String> {
        let mut v: Vec<String> = self
            .inner
            .info
            .function_exports
            .iter()
            .filter_map(|e| {
                e.strip_prefix("canister_query __canbench__")
                    .map(str::to_string)
            })
            .collect();
        v.sort();
        v
    }
}

impl Engine {
    /// Creates the engine. Costs a few milliseconds (no compilation happens here).
    pub fn new(config: EngineConfig) -> Result<Engine, EngineError> {
        let mut cfg = wasmtime::Config::new();
        cfg.cranelift_opt_level(wasmtime::OptLevel::Speed)
            .wasm_memory64(true)
            .wasm_bulk_memory(true)
            .wasm_multi_value(true)
            .wasm_simd(true)
            .wasm_tail_call(true)
            // The written-page map is a second memory (`heap`, `instrument`).
            .wasm_multi_memory(true)
            .max_wasm_stack(MAX_WASM_STACK)
            .async_stack_size(MAX_WASM_STACK + (1 << 20))
            .cranelift_nan_canonicalization(true)
            .parallel_compilation(true);
        let wasmtime = wasmtime::Engine::new(&cfg)?;
        let mut linker32 = Linker::new(&wasmtime);
        linker::add_to_linker::<u32>(&mut linker32)?;
        profile::add_to_linker(&mut linker32)?;
        let mut linker64 = Linker::new(&wasmtime);
        linker::add_to_linker::<u64>(&mut linker64)?;
        profile::add_to_linker(&mut linker64)?;
        let cache_dir = if config.cache {
            Some(config.cache_dir.unwrap_or_else(default_cache_dir))
        } else {
            None
        };
        Ok(Engine {
            wasmtime,
            linker32,
            linker64,
            cache_dir,
            metering: config.metering,
        })
    }

    /// The metering profile of the programs this engine loads.
    pub fn metering(&self) -> Metering {
        self.metering
    }

    /// The directory compiled modules are cached in, if caching is on.
    pub fn cache_dir(&self) -> Option<&Path> {
        self.cache_dir.as_deref()
    }

    /// Instruments and compiles `wasm` (gzip-compressed wasm is not accepted: decompress first).
    /// The compiled module is taken from, or written to, the cache; the cache key is the
    /// SHA-256 of the instrumented wasm plus the engine version, so any change to the input or
    /// to the instrumentation recompiles. Compiling a large canister takes seconds; a cache hit
    /// milliseconds. Errors: invalid wasm, unsupported imports (named in the message),
    /// compilation or linking failures.
    pub fn load(&self, wasm: &[u8]) -> Result<Program, EngineError> {
        self.load_with(wasm, false)
    }

    /// Like [`Self::load`], with the profiler's hooks: every message of a canister installed
    /// from this program records a [`crate::Profile`] (instructions per function and call
    /// stack; `PROFILING.md`). The hooks are unmetered, so every instruction count equals that
    /// of [`Self::load`]; they slow execution down (a host call per function entry and per
    /// call return). Function names come from the wasm's `name` section (demangled) and its
    /// imports.
    pub fn load_profiled(&self, wasm: &[u8]) -> Result<Program, EngineError> {
        self.load_with(wasm, true)
    }

    fn load_with(&self, wasm: &[u8], profiled: bool) -> Result<Program, EngineError> {
        let sha256: [u8; 32] = Sha256::digest(wasm).into();
        let options = instrument::Options {
            profile: profiled,
            tracker: self.metering.tracker,
        };
        let instrumented = instrument::instrument_with(wasm, &system_api::check_import, options)?;
        let profile_names = if profiled {
            Some(profile::function_names(wasm)?.into())
        } else {
            None
        };
        let mut key = Sha256::new();
        key.update(CACHE_VERSION.as_bytes());
        key.update(&instrumented.wasm);
        let key = hex::encode(key.finalize());

        let (module, from_cache) = match &self.cache_dir {
            Some(dir) => self.load_cached(dir, &key, &instrumented.wasm)?,
            None => (Module::new(&self.wasmtime, &instrumented.wasm)?, false),
        };
        let linker = if instrumented.info.memory64 {
            &self.linker64
        } else {
            &self.linker32
        };
        let pre = linker.instantiate_pre(&module)?;
        Ok(Program {
            inner: Arc::new(ProgramInner {
                pre,
                info: instrumented.info,
                sha256,
                wasm_size: wasm.len() as u64,
                from_cache,
                profile_names,
                metering: self.metering,
            }),
        })
    }

    fn load_cached(
        &self,
        dir: &Path,
        key: &str,
        wasm: &[u8],
    ) -> Result<(Module, bool), EngineError> {
        let path = dir.join(format!("{key}.cwasm"));
        if path.is_file() {
            // SAFETY: the file was written by `Module::serialize` of this engine version into our
            // own cache directory; wasmtime checks that it matches the engine's configuration
            // and rejects incompatible files (then we recompile below).
            if let Ok(m) = unsafe { Module::deserialize_file(&self.wasmtime, &path) } {
                return Ok((m, true));
            }
        }
        let module = Module::new(&self.wasmtime, wasm)?;
        // A failure to write the cache is not fatal: the module is compiled either way.
        if std::fs::create_dir_all(dir).is_ok()
            && let Ok(bytes) = module.serialize()
        {
            let tmp = dir.join(format!("{key}.{}.tmp", std::process::id()));
            if std::fs::write(&tmp, bytes).is_ok() {
                let _ = std::fs::rename(&tmp, &path);
            }
        }
        Ok((module, false))
    }

    /// Reads a wasm file and loads it (gzip-compressed files are refused with a clear error).
    pub fn load_file(&self, path: &Path) -> Result<Program, EngineError> {
        self.load(&read_wasm(path)?)
    }

    /// Reads a wasm file and loads it with [`Self::load_profiled`].
    pub fn load_file_profiled(&self, path: &Path) -> Result<Program, EngineError> {
        self.load_profiled(&read_wasm(path)?)
    }
}

fn read_wasm(path: &Path) -> Result<Vec<u8>, EngineError> {
    let bytes = std::fs::read(path).map_err(|e| EngineError::io(path, e))?;
    if bytes.starts_with(&[0x1f, 0x8b]) {
        return Err(EngineError::Module(format!(
            "{}: gzip-compressed wasm; decompress it first",
            path.display()
        )));
    }
    Ok(bytes)
}
