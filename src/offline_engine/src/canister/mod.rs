//! An installed canister and its message semantics: install, update, query, global timer,
//! self-calls with callbacks, upgrade, and rollback of traps and queries.
//!
//! One wasmtime instance is kept across messages. A shadow copy of the heap (as of the last
//! committed message) gives the dirty-page count of each message and lets a trapped message or
//! a query be undone page by page; only the pages the written-page map names (with the memory
//! tracker: the Wasm pages it saw written) are compared
//! (`crate::heap`). When the memory grew in such a message, the instance is re-created and the
//! pages committed since instantiation are copied back from the shadow (the IC itself
//! re-instantiates for every message, so tables are not persistent there either). Stable memory
//! has its own undo log, mutable globals a snapshot.

mod calls;

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

use wasmtime::{Func, Global, Instance, Memory, Store, Table, Val};

use calls::{CallContext, Callback, Origin};

use crate::engine::{EXECUTION_STACK, Engine, Program};
use crate::error::EngineError;
use crate::fees::{IC_2025, ingress_bytes};
use crate::heap::{DirtyMap, HeapShadow, take_written_pages};
use crate::instrument::{
    COUNTER_EXPORT, DIRTY_MAP_EXPORT, MEMORY_EXPORT, START_EXPORT, TABLE_EXPORT, TRACKER_EXPORT,
};
use crate::linker::{DirtyMapMemory, MemoryLimiter, PageTracker, StoreData, TrackerMemory};
use crate::messages::CanisterMessage;
use crate::profile::{ProfState, Profile};
use crate::queues::InputQueues;
use crate::stable::{MAX_STABLE_WASM_PAGES, OS_PAGE, StableMemory, WASM_PAGE};
use crate::system_api::{ApiType, MessageCtx, SystemApi, SystemState, TrapCause};
use crate::tracker::{StablePages, TrackerMap, Tracking};
use crate::types::{ANONYMOUS, Execution, MessageResult, PageUse, Settings, reject_code};

/// Handles into the current instance.
struct Handles {
    memory: Option<Memory>,
    dirty_map: Option<DirtyMapMemory>,
    table: Option<Table>,
    counter: Global,
    globals: Vec<Global>,
}

/// A canister installed in the engine.
pub struct Canister {
    engine: wasmtime::Engine,
    program: Program,
    store: Store<StoreData>,
    handles: Handles,
    shadow: HeapShadow,
    globals_snapshot: Vec<Val>,
    settings: Settings,
    inputs: InputQueues,
    outputs: VecDeque<CanisterMessage>,
    contexts: HashMap<u64, CallContext>,
    callbacks: HashMap<u64, Callback>,
    /// Answers to ingress messages run directly ([`Canister::update`]), by call context.
    ingress_results: HashMap<u64, MessageResult>,
    /// Answers to inducted ingress messages, by message id, not yet taken.
    completed_ingress: Vec<(Vec<u8>, MessageResult)>,
    next_id: u64,
    /// Cross-check the tracked dirty pages with a full comparison (`set_dirty_page_check`).
    check_dirty_pages: bool,
    /// The profile of the last execution (profiled programs).
    last_profile: Option<Profile>,
    /// The pages the memory tracker charged in the current message so far (all its entry
    /// points).
    pages: PageUse,
    /// With the memory tracker: the heap's Wasm pages the message may have written (those it
    /// charged a write for; in an execution that ignores modifications, every page it touched),
    /// which commit and rollback compare instead of the written-page map's.
    written_wasm_pages: Vec<u64>,
}

impl std::fmt::Debug for Canister {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Canister")
            .field("program", &self.program)
            .field("settings", &self.settings)
            .field("queued", &self.inputs.len())
            .finish_non_exhaustive()
    }
}

fn placeholder_data() -> StoreData {
    StoreData {
        counter: None,
        memory: None,
        dirty_map: None,
        heap_touches: Vec::new(),
        pages: None,
        stable_new_dirty_page: 0,
        stable_dirty_charged: 0,
        profiler: None,
        api: SystemApi {
            sys: SystemState {
                canister_id: Vec::new(),
                controllers: Vec::new(),
                time: 0,
                timer: 0,
                cycles: 0,
                certified_data: Vec::new(),
                version: 0,
                debug_print_enabled: false,
                stable: StableMemory::default(),
                max_stable_pages: MAX_STABLE_WASM_PAGES,
                memory_allocation: 0,
                module_bytes: 0,
            },
            msg: MessageCtx::new(ApiType::Update, 0),
            trap: None,
        },
        limiter: MemoryLimiter::default(),
        funcs: HashMap::new(),
    }
}

fn instantiate(
    engine: &wasmtime::Engine,
    program: &Program,
    data: StoreData,
) -> Result<(Store<StoreData>, Handles), EngineError> {
    let mut store = Store::new(engine, data);
    store.limiter(|data| &mut data.limiter);
    let instance: Instance = program.inner.pre.instantiate(&mut store)?;
    let memory = instance.get_memory(&mut store, MEMORY_EXPORT);
    let dirty_map = instance
        .get_memory(&mut store, DIRTY_MAP_EXPORT)
        .map(|memory| DirtyMapMemory {
            memory,
            layout: DirtyMap::for_memory(program.inner.info.memory64),
        });
    // With the memory tracker its map names the written pages instead.
    if memory.is_some() && dirty_map.is_none() && program.inner.metering.tracker.is_none() {
        return Err(EngineError::Module(
            "instrumented module lacks its written-page map".into(),
        ));
    }
    let memory64 = program.inner.info.memory64;
    let pages = match program.inner.metering.tracker {
        Some(t) => {
            let heap = instance
                .get_memory(&mut store, TRACKER_EXPORT)
                .map(|memory| TrackerMemory {
                    memory,
                    layout: TrackerMap::for_memory(memory64),
                });
            if memory.is_some() && heap.is_none() {
                return Err(EngineError::Module(
                    "instrumented module lacks its tracker map".into(),
                ));
            }
            Some(PageTracker {
                heap,
                heap_charge: t.wasm_page_charge(memory64),
                stable_charge: t.wasm_page_charge(false),
                stable: StablePages::default(),
                tracking: Tracking::Track,
                stable_accessed_limit: t.stable_accessed_limit.message,
            })
        }
        None => None,
    };
    let table = instance.get_table(&mut store, TABLE_EXPORT);
    let counter = instance
        .get_global(&mut store, COUNTER_EXPORT)
        .ok_or_else(|| EngineError::Module("instrumented module lacks its counter".into()))?;
    let mut globals = Vec::new();
    for name in &program.inner.info.mutable_globals {
        let g = instance
            .get_global(&mut store, name)
            .ok_or_else(|| EngineError::Module(format!("mutable global `{name}` not exported")))?;
        globals.push(g);
    }
    store.data_mut().counter = Some(counter);
    store.data_mut().memory = memory;
    store.data_mut().dirty_map = dirty_map;
    store.data_mut().pages = pages;
    store.data_mut().stable_new_dirty_page = program.inner.metering.stable_new_dirty_page;
    // Keep the functions of this instance reachable by name.
    let funcs: HashMap<String, Func> = program
        .inner
        .info
        .function_exports
        .iter()
        .chain(std::iter::once(&START_EXPORT.to_string()))
        .filter_map(|n| instance.get_func(&mut store, n).map(|f| (n.clone(), f)))
        .collect();
    store.data_mut().funcs = funcs;
    Ok((
        store,
        Handles {
            memory,
            dirty_map,
            table,
            counter,
            globals,
        },
    ))
}

/// The heap limits of a canister with `settings`.
fn limiter_for(settings: &Settings) -> MemoryLimiter {
    MemoryLimiter {
        wasm_memory_limit: settings.wasm_memory_limit,
        memory_allocation: settings.memory_allocation,
        ..MemoryLimiter::default()
    }
}

/// Runs `f` on a thread with a large native stack (canister code may use up to 5 MiB of wasm stack).
fn on_big_stack<T: Send>(f: impl FnOnce() -> T + Send) -> Result<T, EngineError> {
    std::thread::scope(|s| {
        let handle = std::thread::Builder::new()
            .name("canister".into())
            .stack_size(EXECUTION_STACK)
            .spawn_scoped(s, f)
            .map_err(|e| EngineError::io("<thread>", e))?;
        handle.join().map_err(|p| {
            let msg = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            EngineError::Panic(msg)
        })
    })
}

fn trap_code_text(t: &wasmtime::Trap) -> &'static str {
    use wasmtime::Trap as T;
    match t {
        T::StackOverflow => "stack overflow",
        T::MemoryOutOfBounds | T::HeapMisaligned => "heap out of bounds",
        T::TableOutOfBounds | T::IndirectCallToNull => "table out of bounds",
        T::BadSignature => "function signature mismatch",
        T::IntegerOverflow => "integer overflow",
        T::IntegerDivisionByZero => "integer division by 0",
        T::BadConversionToInteger => "invalid conversion to integer",
        T::UnreachableCodeReached => "unreachable",
        _ => "unknown",
    }
}

fn principal_text(bytes: &[u8]) -> String {
    candid::Principal::try_from_slice(bytes)
        .map(|p| p.to_text())
        .unwrap_or_else(|_| hex::encode(bytes))
}

impl Canister {
    /// Instantiates `program`, runs `canister_start` (if the module had a start function) and
    /// `canister_init` with `init_arg` (Candid bytes) as one install message (300 B instruction
    /// limit on application subnets). The caller is the first controller.
    ///
    /// Errors: instantiation failures, or [`EngineError::InstallFailed`] when init traps.
    pub fn install(
        engine: &Engine,
        program: &Program,
        init_arg: &[u8],
        settings: Settings,
    ) -> Result<(Canister, Execution), EngineError> {
        let data = StoreData {
            counter: None,
            memory: None,
            dirty_map: None,
            heap_touches: Vec::new(),
            pages: None,
            stable_new_dirty_page: 0,
            stable_dirty_charged: 0,
            profiler: None,
            api: SystemApi {
                sys: SystemState {
                    canister_id: settings.canister_id.clone(),
                    controllers: settings.controllers.clone(),
                    time: settings.time_ns,
                    timer: 0,
                    cycles: settings.cycles,
                    certified_data: Vec::new(),
                    version: 0,
                    debug_print_enabled: settings.debug_print_enabled,
                    stable: StableMemory::default(),
                    max_stable_pages: MAX_STABLE_WASM_PAGES,
                    memory_allocation: settings.memory_allocation,
                    module_bytes: program.wasm_size(),
                },
                msg: MessageCtx::new(ApiType::Init, 0),
                trap: None,
            },
            limiter: limiter_for(&settings),
            funcs: HashMap::new(),
        };
        let (mut store, handles) = instantiate(&engine.wasmtime, program, data)?;
        let shadow = match handles.memory {
            Some(m) => HeapShadow::new(m.data(&store)),
            None => HeapShadow::default(),
        };
        let globals_snapshot = handles.globals.iter().map(|g| g.get(&mut store)).collect();
        let mut canister = Canister {
            engine: engine.wasmtime.clone(),
            program: program.clone(),
            store,
            handles,
            shadow,
            globals_snapshot,
            settings,
            inputs: InputQueues::default(),
            outputs: VecDeque::new(),
            contexts: HashMap::new(),
            callbacks: HashMap::new(),
            ingress_results: HashMap::new(),
            completed_ingress: Vec::new(),
            next_id: 1,
            check_dirty_pages: false,
            last_profile: None,
            pages: PageUse::default(),
            written_wasm_pages: Vec::new(),
        };
        let exec =
            canister.run_install_entry_points(init_arg, "canister_init", "canister_init", 0)?;
        if exec.result.is_trap() {
            return Err(EngineError::InstallFailed(Box::new(exec)));
        }
        canister.charge_execution(ApiType::Init, &exec);
        canister.store.data_mut().api.sys.version += 1;
        Ok((canister, exec))
    }

    /// A second canister in this one's state, as a canister snapshot taken now and loaded
    /// into a new canister would give it: the committed heap, mutable globals, stable memory,
    /// certified data, global timer, time, cycles, controllers and settings. Nothing of the
    /// instance's own state survives, as on the IC, which re-creates the instance for every
    /// message. Every later message runs, and is metered, on the fork as on the original.
    /// What it saves is the messages that built the state (a fixture of a million rows takes
    /// seconds to build, a fork of it milliseconds).
    ///
    /// Errors: [`EngineError::NotQuiescent`] while anything is in flight (queued or unsent
    /// messages, open call contexts, answers not yet taken), which a snapshot would not carry.
    pub fn fork(&self) -> Result<Canister, EngineError> {
        if self.has_pending_work()
            || !self.contexts.is_empty()
            || !self.ingress_results.is_empty()
            || !self.completed_ingress.is_empty()
        {
            return Err(EngineError::NotQuiescent);
        }
        let old = self.store.data();
        let mut data = placeholder_data();
        data.api.sys = old.api.sys.clone();
        data.stable_new_dirty_page = old.stable_new_dirty_page;
        data.limiter = limiter_for(&self.settings);
        let (store, handles) = self.instantiate_committed(data)?;
        Ok(Canister {
            engine: self.engine.clone(),
            program: self.program.clone(),
            store,
            handles,
            shadow: self.shadow.clone(),
            globals_snapshot: self.globals_snapshot.clone(),
            settings: self.settings.clone(),
            inputs: InputQueues::default(),
            outputs: VecDeque::new(),
            contexts: HashMap::new(),
            callbacks: HashMap::new(),
            ingress_results: HashMap::new(),
            completed_ingress: Vec::new(),
            next_id: self.next_id,
            check_dirty_pages: self.check_dirty_pages,
            last_profile: None,
            pages: PageUse::default(),
            written_wasm_pages: Vec::new(),
        })
    }

    /// The installed program.
    pub fn program(&self) -> &Program {
        &self.program
    }

    /// The canister settings.
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// Current engine time (ns since the epoch).
    pub fn time(&self) -> u64 {
        self.store.data().api.sys.time
    }

    /// Moves the engine time forward by `ns` nanoseconds. Nothing runs until [`Self::tick`].
    pub fn advance_time(&mut self, ns: u64) {
        let t = &mut self.store.data_mut().api.sys.time;
        *t = t.saturating_add(ns);
    }

    /// Deadline of the global timer (0 = inactive).
    pub fn global_timer(&self) -> u64 {
        self.store.data().api.sys.timer
    }

    /// Current cycle balance.
    pub fn cycles(&self) -> u128 {
        self.store.data().api.sys.cycles
    }

    /// Certified data last set by the canister.
    pub fn certified_data(&self) -> &[u8] {
        &self.store.data().api.sys.certified_data
    }

    /// Stable memory size in bytes.
    pub fn stable_size_bytes(&self) -> u64 {
        self.store.data().api.sys.stable.size_bytes()
    }

    /// Heap (wasm memory) size in bytes.
    pub fn heap_size_bytes(&self) -> u64 {
        self.handles
            .memory
            .map(|m| m.data_size(&self.store) as u64)
            .unwrap_or(0)
    }

    /// A copy of the whole stable memory.
    pub fn stable_memory(&self) -> Vec<u8> {
        self.store.data().api.sys.stable.to_bytes()
    }

    /// Replaces the stable memory with `bytes` (grown to whole 64 KiB pages), outside any
    /// message (as canbench's `stable_memory.file` option does after install).
    pub fn set_stable_memory(&mut self, bytes: &[u8]) {
        let mut s = StableMemory::default();
        let pages = (bytes.len() as u64).div_ceil(WASM_PAGE);
        s.begin();
        s.grow(pages, crate::stable::MAX_STABLE_WASM_PAGES);
        // In bounds by construction.
        let _ = s.write(0, bytes);
        s.commit();
        self.store.data_mut().api.sys.stable = s;
    }

    /// Adds `amount` cycles to the balance outside any message (what the management canister's
    /// `provisional_top_up_canister` and PocketIC's `add_cycles` do); saturates at `u128::MAX`.
    /// Returns the new balance.
    pub fn add_cycles(&mut self, amount: u128) -> u128 {
        let cycles = &mut self.store.data_mut().api.sys.cycles;
        *cycles = cycles.saturating_add(amount);
        *cycles
    }

    /// Replaces the controllers outside any message (the management canister's
    /// `update_settings`): `ic0.is_controller` checks them from the next message on, and the
    /// first one is the caller of the next upgrade's `canister_pre_upgrade` and
    /// `canister_post_upgrade`.
    pub fn set_controllers(&mut self, controllers: Vec<Vec<u8>>) {
        self.store.data_mut().api.sys.controllers = controllers.clone();
        self.settings.controllers = controllers;
    }

    /// Sets the canister's `wasm_memory_limit` and memory allocation in bytes (0: none) from the
    /// next message on, as the management canister's `update_settings` does
    /// ([`Settings::wasm_memory_limit`], [`Settings::memory_allocation`]).
    pub fn set_memory_limits(&mut self, wasm_memory_limit: u64, memory_allocation: u64) {
        self.settings.wasm_memory_limit = wasm_memory_limit;
        self.settings.memory_allocation = memory_allocation;
        let data = self.store.data_mut();
        data.api.sys.memory_allocation = memory_allocation;
        data.limiter.wasm_memory_limit = wasm_memory_limit;
        data.limiter.memory_allocation = memory_allocation;
    }

    /// The memory the canister uses, as the memory allocation counts it: heap, stable memory
    /// and the module.
    pub fn memory_usage(&self) -> u64 {
        self.heap_size_bytes()
            .saturating_add(self.stable_size_bytes())
            .saturating_add(self.program.wasm_size())
    }

    /// Cross-checks the heap dirty-page tracking on every later message: the count of the
    /// pages the written-page map names is compared with a comparison of the whole heap with
    /// its shadow, and after each commit or rollback the heap must equal the shadow byte for
    /// byte; a difference fails the message with [`EngineError::DirtyPageCheck`]. This costs
    /// a pass over the heap per message (as the engine did before the map): for tests.
    pub fn set_dirty_page_check(&mut self, on: bool) {
        self.check_dirty_pages = on;
    }

    /// The profile of the last execution, if the program was loaded with
    /// [`Engine::load_profiled`] (taken: a second call returns `None`). Executions are the
    /// ones [`Execution`]s describe (an update with `canister_inspect_message` is two); an
    /// upgrade is not profiled.
    pub fn take_profile(&mut self) -> Option<Profile> {
        self.last_profile.take()
    }

    /// Like [`Self::update`], returning the execution's [`Profile`] too. Errors if the program
    /// was not loaded with [`Engine::load_profiled`].
    pub fn update_profiled(
        &mut self,
        method: &str,
        arg: &[u8],
    ) -> Result<(Execution, Profile), EngineError> {
        self.require_profiled()?;
        self.last_profile = None;
        let exec = self.update(method, arg)?;
        Ok(self.profile_of(exec))
    }

    /// Like [`Self::query`], returning the execution's [`Profile`] too. Errors if the program
    /// was not loaded with [`Engine::load_profiled`].
    pub fn query_profiled(
        &mut self,
        method: &str,
        arg: &[u8],
    ) -> Result<(Execution, Profile), EngineError> {
        self.require_profiled()?;
        self.last_profile = None;
        let exec = self.query(method, arg)?;
        Ok(self.profile_of(exec))
    }

    fn require_profiled(&self) -> Result<(), EngineError> {
        if self.program.is_profiled() {
            Ok(())
        } else {
            Err(EngineError::Module(
                "the program was not loaded with Engine::load_profiled".into(),
            ))
        }
    }

    /// `exec` with its profile (an empty one when nothing ran).
    fn profile_of(&mut self, exec: Execution) -> (Execution, Profile) {
        let profile = match self.last_profile.take() {
            Some(p) => p,
            None => Profile::empty(&exec.entry, self.profile_names()),
        };
        (exec, profile)
    }

    fn profile_names(&self) -> std::sync::Arc<[String]> {
        self.program
            .inner
            .profile_names
            .clone()
            .unwrap_or_else(|| std::sync::Arc::from(Vec::new()))
    }

    /// Moves the current message's profile (if profiling) to `last_profile`.
    fn capture_profile(&mut self, entry: &str) {
        if let Some(state) = self.store.data_mut().profiler.take() {
            self.last_profile = Some(state.finish(entry.to_string(), self.profile_names()));
        }
    }

    /// The export a `call` of `method` runs ([`Self::method_not_found`] if none).
    fn find_method(&self, method: &str, call: Call) -> Option<Method> {
        call.exports().into_iter().find_map(|(kind, mode)| {
            let name = format!("{kind} {method}");
            self.func(&name).map(|func| Method { name, func, mode })
        })
    }

    /// A message context in `mode`, with its instruction limit, from `caller`.
    fn message(&self, mode: ApiType, caller: Vec<u8>) -> MessageCtx {
        let mut msg = MessageCtx::new(mode, self.limit_for(mode));
        msg.caller = caller;
        msg
    }

    /// The message context of a call of `method` by `caller` with `arg`.
    fn call_message(
        &self,
        mode: ApiType,
        caller: Vec<u8>,
        method: String,
        arg: Vec<u8>,
    ) -> MessageCtx {
        let mut msg = self.message(mode, caller);
        msg.method_name = method;
        msg.arg = arg;
        msg
    }

    /// Runs `method` as the first message of a new call context (from `origin`, the caller of
    /// `msg`, with `cycles` attached) and settles the context. Updates, queries, requests from
    /// canisters and system tasks all start so; callbacks run in the context of their call.
    fn execute_in_new_context(
        &mut self,
        method: Method,
        msg: MessageCtx,
        origin: Origin,
        cycles: u128,
        expects_reply: bool,
    ) -> Result<(u64, Execution), EngineError> {
        let context = self.open_context(origin, &msg.caller, cycles);
        let mut exec = self.execute(method.name, method.func, &[], msg, context)?;
        self.settle(context, &mut exec, expects_reply);
        Ok((context, exec))
    }

    fn func(&self, name: &str) -> Option<Func> {
        self.store.data().funcs.get(name).copied()
    }

    // ---------------------------------------------------------------- low-level execution

    /// Prepares a message: context, counter, stable undo log.
    fn begin(&mut self, mut msg: MessageCtx) -> Result<(), EngineError> {
        let limit = msg.limit;
        let sizes = self.settings.sizes;
        msg.max_reply_bytes = if matches!(
            msg.api_type,
            ApiType::NonReplicatedQuery | ApiType::CompositeQuery
        ) {
            sizes.query_reply_bytes
        } else {
            sizes.reply_bytes
        };
        let profiled = self.program.is_profiled();
        self.last_profile = None;
        self.pages = PageUse::default();
        self.written_wasm_pages.clear();
        let data = self.store.data_mut();
        data.api.msg = msg;
        data.api.trap = None;
        data.api.sys.stable.begin();
        data.profiler = profiled.then(|| Box::new(ProfState::new()));
        self.handles.counter.set(
            &mut self.store,
            Val::I64(i64::try_from(limit).unwrap_or(i64::MAX)),
        )?;
        Ok(())
    }

    /// Calls `func` within the current message; returns the trap message if it trapped.
    fn call(&mut self, func: Func, params: &[Val]) -> Result<Option<String>, EngineError> {
        {
            let data = self.store.data_mut();
            let enforce = matches!(
                data.api.msg.api_type,
                ApiType::Update
                    | ApiType::ReplicatedQuery
                    | ApiType::ReplyCallback
                    | ApiType::RejectCallback
                    | ApiType::Cleanup
                    | ApiType::Heartbeat
                    | ApiType::GlobalTimer
            );
            let other = data
                .api
                .sys
                .stable
                .size_bytes()
                .saturating_add(data.api.sys.module_bytes);
            let limiter = &mut data.limiter;
            limiter.active = true;
            limiter.enforce_wasm_limit = enforce;
            limiter.other_bytes = other;
            limiter.trap = None;
        }
        self.start_tracking();
        let store = &mut self.store;
        let result = on_big_stack(move || func.call(store, params, &mut []))?;
        self.take_tracked_pages();
        let grow_trap = {
            let limiter = &mut self.store.data_mut().limiter;
            limiter.active = false;
            limiter.trap.take()
        };
        if let Some(cause) = grow_trap
            && self.store.data().api.trap.is_none()
        {
            self.store.data_mut().api.trap = Some(cause);
        }
        if self.store.data().profiler.is_some() {
            let used = self.used();
            if let Some(p) = self.store.data_mut().profiler.as_mut() {
                p.close(used);
            }
        }
        match result {
            Ok(()) => Ok(None),
            Err(e) => {
                let text = match &self.store.data().api.trap {
                    Some(cause) => cause.to_string(),
                    None => match e.downcast_ref::<wasmtime::Trap>() {
                        Some(t) => format!("Canister trapped: {}", trap_code_text(t)),
                        None => format!("Canister trapped: {e}"),
                    },
                };
                Ok(Some(text))
            }
        }
    }

    /// Prepares the memory tracker for an execution (an entry point): the replica tracks each
    /// with a fresh tracker, in the mode its kind of execution asks for.
    fn start_tracking(&mut self) {
        let mode = self.store.data().api.msg.api_type;
        let tracking = match mode {
            ApiType::ReplicatedQuery | ApiType::NonReplicatedQuery | ApiType::InspectMessage => {
                Tracking::Ignore
            }
            _ => Tracking::Track,
        };
        let Some(t) = self.program.inner.metering.tracker else {
            return;
        };
        let limits = t.stable_accessed_limit;
        let stable_limit = match mode {
            ApiType::Start | ApiType::Init | ApiType::PreUpgrade => limits.upgrade,
            ApiType::ReplicatedQuery
            | ApiType::NonReplicatedQuery
            | ApiType::CompositeQuery
            | ApiType::InspectMessage => limits.query,
            _ => limits.message,
        };
        let heap = match self.store.data_mut().pages.as_mut() {
            Some(p) => {
                p.tracking = tracking;
                p.stable_accessed_limit = stable_limit;
                p.heap
            }
            None => None,
        };
        if let Some(h) = heap {
            h.layout
                .set_mode(h.memory.data_mut(&mut self.store), tracking);
        }
    }

    /// Takes the pages charged in the execution that just ran into the message's [`PageUse`]:
    /// the new dirty stable pages (the rules of PocketIC 13), the memory tracker's pages
    /// (clearing its states).
    fn take_tracked_pages(&mut self) {
        self.pages.instructions += std::mem::take(&mut self.store.data_mut().stable_dirty_charged);
        let heap = match self.store.data_mut().pages.as_mut() {
            Some(p) => {
                let (accessed, dirty) = p.stable.take();
                let charge = (accessed.len() + dirty.len()) as u64 * p.stable_charge;
                self.pages.instructions += charge;
                self.pages.stable.accessed.extend(accessed);
                self.pages.stable.dirty.extend(dirty);
                p.heap.map(|h| (h, p.heap_charge, p.tracking))
            }
            None => None,
        };
        if let Some((h, charge, tracking)) = heap {
            let (accessed, dirty) = h.layout.take(h.memory.data_mut(&mut self.store));
            self.pages.instructions += (accessed.len() + dirty.len()) as u64 * charge;
            self.written_wasm_pages.extend(match tracking {
                Tracking::Track => &dirty,
                Tracking::Ignore => &accessed,
            });
            self.pages.heap.accessed.extend(accessed);
            self.pages.heap.dirty.extend(dirty);
        }
        for m in [&mut self.pages.heap, &mut self.pages.stable] {
            m.accessed.sort_unstable();
            m.dirty.sort_unstable();
        }
    }

    /// Instructions executed in the current message so far. Without the memory tracker the
    /// count is capped at the limit (a message ends at its limit); the tracker charges pages
    /// without checking the counter, so with it a message that ends before the next check may
    /// have used more (the replica's instrumentation test `charge_for_heap_pages` succeeds with
    /// a limit of 100 instructions and a page charge of 160,000).
    fn used(&mut self) -> u64 {
        let limit = self.store.data().api.msg.limit;
        if matches!(
            self.store.data().api.trap,
            Some(TrapCause::InstructionLimit(_))
        ) {
            return limit;
        }
        let v = self.handles.counter.get(&mut self.store).i64().unwrap_or(0);
        let used = i64::try_from(limit).unwrap_or(i64::MAX).saturating_sub(v);
        let cap = if self.program.inner.metering.tracker.is_some() {
            i64::MAX
        } else {
            limit as i64
        };
        used.clamp(0, cap) as u64
    }

    /// Instructions per changed 4 KiB heap page billed after the message.
    fn dirty_page_cost(&self) -> u64 {
        self.program
            .inner
            .metering
            .heap_changed_page_cost(self.program.inner.info.memory64)
    }

    /// Reads and clears the written-page map: the heap pages the message may have changed.
    /// With the memory tracker, the OS pages of the Wasm pages it saw written instead (its
    /// Wasm pages cover every byte an access wrote, across page boundaries too).
    fn written_pages(&mut self) -> Vec<u64> {
        let Some(m) = self.handles.memory else {
            return Vec::new();
        };
        let heap_pages = m.data_size(&self.store) as u64 / OS_PAGE;
        if self.program.inner.metering.tracker.is_some() {
            let mut wasm_pages = std::mem::take(&mut self.written_wasm_pages);
            wasm_pages.sort_unstable();
            wasm_pages.dedup();
            let per = WASM_PAGE / OS_PAGE;
            return wasm_pages
                .into_iter()
                .flat_map(|p| p * per..(p + 1) * per)
                .filter(|&p| p < heap_pages)
                .collect();
        }
        let Some(map) = self.handles.dirty_map else {
            return Vec::new();
        };
        take_written_pages(map.layout, map.memory.data_mut(&mut self.store), heap_pages)
    }

    /// With [`Self::set_dirty_page_check`]: the full comparison's count, before the change.
    fn full_scan_count(&self) -> Option<u64> {
        match (self.check_dirty_pages, self.handles.memory) {
            (true, Some(m)) => Some(self.shadow.dirty_pages(m.data(&self.store))),
            _ => None,
        }
    }

    /// With [`Self::set_dirty_page_check`]: fails unless `tracked` equals the full comparison's
    /// count `full` and the heap now equals the shadow.
    fn check_dirty(&self, what: &str, tracked: u64, full: Option<u64>) -> Result<(), EngineError> {
        let (Some(full), Some(m)) = (full, self.handles.memory) else {
            return Ok(());
        };
        if tracked != full {
            return Err(EngineError::DirtyPageCheck(format!(
                "{what}: {tracked} dirty pages tracked, {full} found by comparing the whole heap"
            )));
        }
        if !self.shadow.matches(m.data(&self.store)) {
            return Err(EngineError::DirtyPageCheck(format!(
                "{what}: the heap differs from its shadow after the message"
            )));
        }
        Ok(())
    }

    /// Keeps the message's heap, globals and stable changes; returns the heap and stable pages
    /// it changed.
    fn commit(&mut self) -> Result<(Vec<u64>, Vec<u64>), EngineError> {
        let heap = match self.handles.memory {
            Some(m) => {
                let pages = self.written_pages();
                let full = self.full_scan_count();
                let dirty = self.shadow.commit_pages(m.data(&self.store), &pages);
                self.check_dirty("commit", dirty.len() as u64, full)?;
                dirty
            }
            None => Vec::new(),
        };
        self.globals_snapshot = self
            .handles
            .globals
            .iter()
            .map(|g| g.get(&mut self.store))
            .collect();
        let stable = self.store.data_mut().api.sys.stable.commit();
        Ok((heap, stable))
    }

    /// Undoes the message's heap, globals and stable changes; returns the heap and stable pages
    /// the message had changed.
    fn rollback(&mut self) -> Result<(Vec<u64>, Vec<u64>), EngineError> {
        let stable = self.store.data_mut().api.sys.stable.rollback();
        let pages = self.written_pages();
        let heap = self.restore_heap(&pages, "rollback")?;
        for (g, v) in self
            .handles
            .globals
            .iter()
            .zip(self.globals_snapshot.clone())
        {
            g.set(&mut self.store, v)?;
        }
        Ok((heap, stable))
    }

    /// Undoes the heap changes of the message whose candidate pages are `pages`; returns the
    /// pages that were dirty.
    fn restore_heap(&mut self, pages: &[u64], what: &str) -> Result<Vec<u64>, EngineError> {
        let full = self.full_scan_count();
        let dirty = match self.handles.memory {
            Some(m) if m.data_size(&self.store) == self.shadow.len() => {
                let data = m.data_mut(&mut self.store);
                self.shadow.restore_pages(data, pages)
            }
            Some(m) => {
                let dirty = self.shadow.dirty_pages_among(m.data(&self.store), pages);
                self.reinstantiate()?;
                dirty
            }
            None => Vec::new(),
        };
        self.check_dirty(what, dirty.len() as u64, full)?;
        Ok(dirty)
    }

    /// A new instance of the program holding `data`, with the committed heap and mutable
    /// globals: the fresh instance holds the module's initial heap, so only the pages committed
    /// since the shadow was taken are copied.
    fn instantiate_committed(
        &self,
        data: StoreData,
    ) -> Result<(Store<StoreData>, Handles), EngineError> {
        let (mut store, handles) = instantiate(&self.engine, &self.program, data)?;
        if let Some(m) = handles.memory {
            let have = m.data_size(&store) as u64;
            let want = self.shadow.len() as u64;
            if want > have {
                m.grow(&mut store, (want - have) / WASM_PAGE)?;
            }
            self.shadow.restore_fresh(m.data_mut(&mut store));
        }
        for (g, v) in handles.globals.iter().zip(self.globals_snapshot.clone()) {
            g.set(&mut store, v)?;
        }
        Ok((store, handles))
    }

    /// Re-creates the instance with the committed heap (used when a rolled-back message grew
    /// the memory, which wasm cannot shrink; [`Self::instantiate_committed`]).
    fn reinstantiate(&mut self) -> Result<(), EngineError> {
        let old = std::mem::replace(
            &mut self.store,
            Store::new(&self.engine, placeholder_data()),
        );
        let data = old.into_data();
        let (store, handles) = self.instantiate_committed(data)?;
        self.store = store;
        self.handles = handles;
        Ok(())
    }

    // ---------------------------------------------------------------- install and upgrade

    /// Runs start + `init_entry` (canister_init or canister_post_upgrade) as one message.
    fn run_install_entry_points(
        &mut self,
        arg: &[u8],
        init_entry: &str,
        entry_label: &str,
        already_used: u64,
    ) -> Result<Execution, EngineError> {
        let started = Instant::now();
        let limit = self.settings.subnet.install_limit();
        let mut msg = MessageCtx::new(ApiType::Start, limit);
        msg.arg = arg.to_vec();
        msg.caller = self
            .settings
            .controllers
            .first()
            .cloned()
            .unwrap_or_else(|| ANONYMOUS.to_vec());
        self.begin(msg)?;
        if already_used > 0 {
            let v = (limit as i64).saturating_sub(already_used as i64);
            self.handles.counter.set(&mut self.store, Val::I64(v))?;
        }
        let mut trap = None;
        if let Some(f) = self.func(START_EXPORT) {
            trap = self.call(f, &[])?;
        }
        if trap.is_none()
            && let Some(f) = self.func(init_entry)
        {
            // `canister_init` and `canister_post_upgrade` both run as the replica's `Init`.
            self.store.data_mut().api.msg.api_type = ApiType::Init;
            trap = self.call(f, &[])?;
        }
        let instructions = self.used();
        self.finish(entry_label.to_string(), trap, instructions, started, None)
    }

    /// Reinstalls the canister with `program` (install_code's `reinstall` mode): a fresh instance
    /// with an empty stable memory runs `canister_start` and `canister_init(arg)` as one install
    /// message; heap, globals, stable memory, certified data and the global timer of the old
    /// code are gone. The canister keeps its id, controllers, cycles, settings and the calls in
    /// flight (their callbacks run in the new code's table, as after an upgrade). No
    /// `canister_pre_upgrade` runs. If init traps, the canister keeps its old code and state and
    /// the returned execution has a `Trap` result. Charged as an install.
    pub fn reinstall(
        &mut self,
        engine: &Engine,
        program: &Program,
        arg: &[u8],
    ) -> Result<Execution, EngineError> {
        let settings = Settings {
            cycles: self.cycles(),
            time_ns: self.time(),
            ..self.settings.clone()
        };
        match Canister::install(engine, program, arg, settings) {
            Ok((mut fresh, exec)) => {
                let version = self.store.data().api.sys.version;
                // The new state, with this canister's calls in flight and ids.
                fresh.store.data_mut().api.sys.version = version + 1;
                fresh.inputs = std::mem::take(&mut self.inputs);
                fresh.outputs = std::mem::take(&mut self.outputs);
                fresh.contexts = std::mem::take(&mut self.contexts);
                fresh.callbacks = std::mem::take(&mut self.callbacks);
                fresh.ingress_results = std::mem::take(&mut self.ingress_results);
                fresh.completed_ingress = std::mem::take(&mut self.completed_ingress);
                fresh.next_id = self.next_id;
                fresh.check_dirty_pages = self.check_dirty_pages;
                *self = fresh;
                Ok(exec)
            }
            Err(EngineError::InstallFailed(exec)) => {
                // The IC charges a failed install's instructions too.
                self.charge_execution(ApiType::Init, &exec);
                Ok(*exec)
            }
            Err(e) => Err(e),
        }
    }

    /// Upgrades to `program`: `canister_pre_upgrade` on the old instance, then a fresh instance
    /// (new heap and globals, stable memory kept) running `canister_start` and
    /// `canister_post_upgrade(arg)`, all within one install limit. The global timer is
    /// deactivated. If any step traps, the canister keeps its old code and state and the
    /// returned execution has a `Trap` result.
    pub fn upgrade(&mut self, program: &Program, arg: &[u8]) -> Result<Execution, EngineError> {
        let exec = self.run_upgrade(program, arg)?;
        // The IC charges an upgrade's instructions whether it completed or not.
        self.charge_execution(ApiType::Init, &exec);
        Ok(exec)
    }

    fn run_upgrade(&mut self, program: &Program, arg: &[u8]) -> Result<Execution, EngineError> {
        let started = Instant::now();
        let limit = self.settings.subnet.install_limit();
        let mut msg = MessageCtx::new(ApiType::PreUpgrade, limit);
        msg.caller = self
            .settings
            .controllers
            .first()
            .cloned()
            .unwrap_or_else(|| ANONYMOUS.to_vec());
        self.begin(msg)?;
        let mut trap = None;
        if let Some(f) = self.func("canister_pre_upgrade") {
            trap = self.call(f, &[])?;
        }
        let used = self.used();
        if trap.is_some() {
            return self.finish("canister_pre_upgrade".into(), trap, used, started, None);
        }
        // The pre-upgrade hook's log lines come first in the upgrade's logs.
        let pre_upgrade_logs = std::mem::take(&mut self.store.data_mut().api.msg.logs);
        // Heap pages the pre-upgrade hook dirtied are charged too.
        let pre_pages = self.written_pages();
        let pre_dirty = match self.handles.memory {
            Some(m) => {
                let full = self.full_scan_count();
                let dirty = self
                    .shadow
                    .dirty_pages_among(m.data(&self.store), &pre_pages);
                let n = dirty.len() as u64;
                if let Some(full) = full.filter(|&f| f != n) {
                    return Err(EngineError::DirtyPageCheck(format!(
                        "pre-upgrade: {n} dirty pages tracked, {full} found by comparing the whole heap"
                    )));
                }
                dirty
            }
            None => Vec::new(),
        };
        // Move the system state (with the pending stable changes) to a fresh instance.
        let sys = std::mem::replace(
            &mut self.store.data_mut().api.sys,
            placeholder_data().api.sys,
        );
        let mut data = placeholder_data();
        data.api.sys = sys;
        let old_timer = data.api.sys.timer;
        let old_module_bytes = data.api.sys.module_bytes;
        data.api.sys.timer = 0;
        data.api.sys.module_bytes = program.wasm_size();
        data.limiter = limiter_for(&self.settings);
        let old_program = std::mem::replace(&mut self.program, program.clone());
        let (new_store, new_handles) = match instantiate(&self.engine, program, data) {
            Ok(x) => x,
            Err(e) => {
                self.program = old_program;
                return Err(e);
            }
        };
        let old_store = std::mem::replace(&mut self.store, new_store);
        let old_handles = std::mem::replace(&mut self.handles, new_handles);
        let old_shadow = std::mem::replace(
            &mut self.shadow,
            match self.handles.memory {
                Some(m) => HeapShadow::new(m.data(&self.store)),
                None => HeapShadow::default(),
            },
        );
        let old_globals = std::mem::replace(
            &mut self.globals_snapshot,
            self.handles
                .globals
                .iter()
                .map(|g| g.get(&mut self.store))
                .collect(),
        );
        // The stable undo log must survive into the post-upgrade phase: begin() would clear
        // it, so run the entry points with the log intact.
        let mut exec = self.run_post_upgrade(arg, used, started)?;
        exec.logs.splice(0..0, pre_upgrade_logs);
        if exec.result.is_trap() {
            // Restore the old instance and undo everything (stable changes were rolled back
            // by the failed post-upgrade message already).
            let sys = std::mem::replace(
                &mut self.store.data_mut().api.sys,
                placeholder_data().api.sys,
            );
            self.store = old_store;
            self.handles = old_handles;
            self.shadow = old_shadow;
            self.globals_snapshot = old_globals;
            self.program = old_program;
            self.store.data_mut().api.sys = sys;
            self.store.data_mut().api.sys.timer = old_timer;
            self.store.data_mut().api.sys.module_bytes = old_module_bytes;
            // Undo the pre-upgrade heap changes.
            self.restore_heap(&pre_pages, "failed upgrade")?;
            for (g, v) in self
                .handles
                .globals
                .iter()
                .zip(self.globals_snapshot.clone())
            {
                g.set(&mut self.store, v)?;
            }
            exec.entry = "canister_post_upgrade".into();
            return Ok(exec);
        }
        // The pre-upgrade hook changed the old heap; the new heap's pages are another memory.
        let pre_charge = pre_dirty.len() as u64 * self.dirty_page_cost();
        exec.heap_dirty_pages += pre_dirty.len() as u64;
        exec.billed_instructions += pre_charge;
        exec.pages.instructions += pre_charge;
        exec.pages.heap.written.extend(pre_dirty);
        exec.pages.heap.written.sort_unstable();
        self.store.data_mut().api.sys.version += 1;
        Ok(exec)
    }

    fn run_post_upgrade(
        &mut self,
        arg: &[u8],
        used: u64,
        started: Instant,
    ) -> Result<Execution, EngineError> {
        let limit = self.settings.subnet.install_limit();
        let mut msg = MessageCtx::new(ApiType::Start, limit);
        msg.arg = arg.to_vec();
        msg.caller = self
            .settings
            .controllers
            .first()
            .cloned()
            .unwrap_or_else(|| ANONYMOUS.to_vec());
        {
            let data = self.store.data_mut();
            data.api.msg = msg;
            data.api.trap = None;
        }
        let v = (limit as i64).saturating_sub(used as i64);
        self.handles.counter.set(&mut self.store, Val::I64(v))?;
        let mut trap = None;
        if let Some(f) = self.func(START_EXPORT) {
            trap = self.call(f, &[])?;
        }
        if trap.is_none()
            && let Some(f) = self.func("canister_post_upgrade")
        {
            self.store.data_mut().api.msg.api_type = ApiType::Init;
            trap = self.call(f, &[])?;
        }
        let instructions = self.used();
        self.finish(
            "canister_post_upgrade".into(),
            trap,
            instructions,
            started,
            None,
        )
    }

    // ---------------------------------------------------------------- finishing a message

    /// Commits or rolls back the current message and builds its [`Execution`]. `context` is
    /// the call context the message ran in (for replies and call bookkeeping).
    fn finish(
        &mut self,
        entry: String,
        trap: Option<String>,
        instructions: u64,
        started: Instant,
        context: Option<u64>,
    ) -> Result<Execution, EngineError> {
        let mode = self.store.data().api.msg.api_type;
        let logs = std::mem::take(&mut self.store.data_mut().api.msg.logs);
        self.capture_profile(&entry);
        let mut pages = std::mem::take(&mut self.pages);
        if let Some(message) = trap {
            self.rollback()?;
            return Ok(Execution {
                entry,
                result: MessageResult::Trap(message),
                instructions,
                billed_instructions: instructions,
                heap_dirty_pages: 0,
                stable_dirty_pages: 0,
                pages,
                logs,
                wall_time: started.elapsed(),
            });
        }
        let (heap, stable) = if mode.replicated() && mode != ApiType::ReplicatedQuery {
            let changed = self.commit()?;
            self.apply_effects(context);
            changed
        } else {
            self.rollback()?
        };
        let heap_charge = heap.len() as u64 * self.dirty_page_cost();
        pages.instructions += heap_charge;
        let (heap_dirty_pages, stable_dirty_pages) = (heap.len() as u64, stable.len() as u64);
        pages.heap.written = heap;
        pages.stable.written = stable;
        let result = self
            .store
            .data_mut()
            .api
            .msg
            .response
            .take()
            .unwrap_or(MessageResult::NoReply);
        Ok(Execution {
            entry,
            result,
            instructions,
            billed_instructions: instructions + heap_charge,
            heap_dirty_pages,
            stable_dirty_pages,
            pages,
            logs,
            wall_time: started.elapsed(),
        })
    }

    /// Applies the committed side effects of the current message: timer, certified data,
    /// cycles, outgoing calls.
    fn apply_effects(&mut self, context: Option<u64>) {
        let data = self.store.data_mut();
        let msg = &mut data.api.msg;
        if let Some(t) = msg.timer.take() {
            data.api.sys.timer = t;
        }
        if let Some(c) = msg.certified_data.take() {
            data.api.sys.certified_data = c;
        }
        data.api.sys.cycles = (data.api.sys.cycles + msg.cycles_accepted)
            .saturating_sub(msg.cycles_burned + msg.cycles_sent);
        let calls = std::mem::take(&mut msg.calls);
        let accepted = msg.cycles_accepted;
        let Some(context) = context else { return };
        if let Some(ctx) = self.contexts.get_mut(&context) {
            ctx.available_cycles = ctx.available_cycles.saturating_sub(accepted);
        }
        self.register_calls(context, calls);
    }

    fn limit_for(&self, mode: ApiType) -> u64 {
        match mode {
            ApiType::NonReplicatedQuery | ApiType::CompositeQuery => {
                self.settings.subnet.query_limit()
            }
            ApiType::InspectMessage => self.settings.subnet.limits().inspect,
            ApiType::Init | ApiType::PreUpgrade | ApiType::Start => {
                self.settings.subnet.install_limit()
            }
            _ => self.settings.subnet.update_limit(),
        }
    }

    /// Runs `func(params)` as a whole message in `context`.
    fn execute(
        &mut self,
        entry: String,
        func: Func,
        params: &[Val],
        mut msg: MessageCtx,
        context: u64,
    ) -> Result<Execution, EngineError> {
        let started = Instant::now();
        if let Some(ctx) = self.contexts.get(&context) {
            msg.context_instructions = ctx.instructions;
            msg.already_replied = ctx.replied;
            msg.cycles_available = ctx.available_cycles;
        }
        let mode = msg.api_type;
        self.begin(msg)?;
        let trap = self.call(func, params)?;
        let instructions = self.used();
        if let Some(ctx) = self.contexts.get_mut(&context) {
            ctx.instructions += instructions;
        }
        let exec = self.finish(entry, trap, instructions, started, Some(context))?;
        self.charge_execution(mode, &exec);
        Ok(exec)
    }

    // ---------------------------------------------------------------- fees

    /// Takes `cycles` from the balance. The engine never stops a message for lack of cycles
    /// (`METERING.md` §9), so the balance saturates at 0.
    fn charge(&mut self, cycles: u128) {
        let balance = &mut self.store.data_mut().api.sys.cycles;
        *balance = balance.saturating_sub(cycles);
    }

    /// Charges the execution of `exec` (run in `mode`) when charging is on: the base fee and
    /// the billed instructions of a replicated message; the instructions alone of a cleanup
    /// callback (it runs within the response's execution, whose base fee the callback paid);
    /// nothing for non-replicated queries and `canister_inspect_message`.
    fn charge_execution(&mut self, mode: ApiType, exec: &Execution) {
        let Some(charging) = self.settings.charging else {
            return;
        };
        let nodes = charging.subnet_nodes;
        let cycles = match mode {
            ApiType::NonReplicatedQuery | ApiType::CompositeQuery | ApiType::InspectMessage => 0,
            ApiType::Cleanup => IC_2025.instructions_cost(exec.billed_instructions, nodes),
            ApiType::Start
            | ApiType::Init
            | ApiType::PreUpgrade
            | ApiType::Update
            | ApiType::ReplicatedQuery
            | ApiType::ReplyCallback
            | ApiType::RejectCallback
            | ApiType::Heartbeat
            | ApiType::GlobalTimer => IC_2025.execution_cost(exec.billed_instructions, nodes),
        };
        self.charge(cycles);
    }

    /// The execution that says the canister has no method a `call` of `method` may run.
    fn method_not_found(method: &str, call: Call) -> Execution {
        Execution {
            entry: format!("{} {method}", call.exports()[0].0),
            result: MessageResult::Reject(
                reject_code::CANISTER_ERROR,
                format!("Canister has no {} method '{method}'.", call.kind()),
            ),
            instructions: 0,
            billed_instructions: 0,
            heap_dirty_pages: 0,
            stable_dirty_pages: 0,
            pages: PageUse::default(),
            logs: Vec::new(),
            wall_time: Duration::ZERO,
        }
    }

    // ---------------------------------------------------------------- public messages

    /// Calls update method `method` with `arg` as the anonymous principal.
    pub fn update(&mut self, method: &str, arg: &[u8]) -> Result<Execution, EngineError> {
        self.update_as(ANONYMOUS, method, arg)
    }

    /// Calls update method `method` with `arg` as `caller` (principal bytes), as an ingress
    /// message. Calls the method made are queued for [`Self::tick`]. A query method called this
    /// way runs as a replicated query (its changes are discarded). An unknown method yields a
    /// `Reject`.
    ///
    /// As on the IC, an argument larger than [`SizeLimits::ingress_arg_bytes`](crate::SizeLimits)
    /// is refused before anything runs, and a canister that exports `canister_inspect_message`
    /// decides first whether it accepts the message ([`Self::inspect_message`]); a refused
    /// message is not executed and costs the canister nothing. The returned execution is then
    /// the refusal (`entry` `canister_inspect_message`, a `Reject`, no instructions billed).
    pub fn update_as(
        &mut self,
        caller: &[u8],
        method: &str,
        arg: &[u8],
    ) -> Result<Execution, EngineError> {
        self.run_update(caller, method, arg, true)
    }

    /// Calls update method `method` with `arg` as another canister `caller` would: the IC runs
    /// neither `canister_inspect_message` nor the ingress size check for inter-canister calls,
    /// so the method itself must refuse what it does not allow. Otherwise as
    /// [`Self::update_as`].
    pub fn update_from_canister(
        &mut self,
        caller: &[u8],
        method: &str,
        arg: &[u8],
    ) -> Result<Execution, EngineError> {
        self.run_update(caller, method, arg, false)
    }

    fn run_update(
        &mut self,
        caller: &[u8],
        method: &str,
        arg: &[u8],
        ingress: bool,
    ) -> Result<Execution, EngineError> {
        let Some(mut found) = self.find_method(method, Call::Update) else {
            return Ok(Self::method_not_found(method, Call::Update));
        };
        if ingress {
            if let Some(refusal) = self.refuse_ingress(caller, method, arg)? {
                return Ok(refusal);
            }
            // Rolling back the inspection may have re-created the instance: look the export
            // up again in the current one.
            found = self
                .find_method(method, Call::Update)
                .ok_or_else(|| EngineError::Module(format!("export of `{method}` vanished")))?;
            // The accepted message is inducted: its reception is charged before it runs.
            if let Some(charging) = self.settings.charging {
                let bytes = ingress_bytes(arg.len(), method);
                self.charge(IC_2025.ingress_cost(bytes, charging.subnet_nodes));
            }
        }
        let msg = self.call_message(found.mode, caller.to_vec(), method.into(), arg.to_vec());
        let (context, exec) =
            self.execute_in_new_context(found, msg, Origin::Ingress { id: None }, 0, true)?;
        if exec.result != MessageResult::NoReply {
            self.ingress_results.remove(&context);
        }
        // The calls it made wait in the queue for `tick`.
        self.route_alone();
        Ok(exec)
    }

    /// The refusal of an ingress message to this canister that the IC's ingress filter would
    /// not accept: an argument over [`crate::SizeLimits::ingress_arg_bytes`], or a message
    /// `canister_inspect_message` does not accept (or traps on). `None` if it would be
    /// accepted. The inspection's changes are discarded.
    pub(crate) fn check_ingress(
        &mut self,
        caller: &[u8],
        method: &str,
        arg: &[u8],
    ) -> Result<Option<Execution>, EngineError> {
        self.refuse_ingress(caller, method, arg)
    }

    /// The refusal of an ingress message the IC would not execute: an argument over the size
    /// limit, or a message `canister_inspect_message` does not accept. `None` if it would run.
    fn refuse_ingress(
        &mut self,
        caller: &[u8],
        method: &str,
        arg: &[u8],
    ) -> Result<Option<Execution>, EngineError> {
        let limit = self.settings.sizes.ingress_arg_bytes;
        if arg.len() as u64 > limit {
            return Ok(Some(Execution {
                entry: format!("canister_update {method}"),
                result: MessageResult::Reject(
                    reject_code::SYS_FATAL,
                    format!(
                        "ingress message refused: its argument of {} bytes exceeds the limit of {limit} bytes",
                        arg.len()
                    ),
                ),
                instructions: 0,
                billed_instructions: 0,
                heap_dirty_pages: 0,
                stable_dirty_pages: 0,
                pages: PageUse::default(),
                logs: Vec::new(),
                wall_time: Duration::ZERO,
            }));
        }
        let inspection = self.inspect_message(caller, method, arg)?;
        Ok(match inspection {
            Some(exec) if exec.result != MessageResult::NoReply => Some(exec),
            _ => None,
        })
    }

    /// Runs `canister_inspect_message` for an ingress call of `method` by `caller` with `arg`,
    /// as the IC does before accepting an ingress message: a non-replicated execution (its
    /// changes are discarded, 200 M instruction limit on application subnets, not billed).
    /// Returns `None` if the canister does not export it; otherwise its execution, whose
    /// result is `NoReply` if it accepted the message (called `ic0.accept_message`), and a
    /// `Reject` if it did not accept it or trapped.
    pub fn inspect_message(
        &mut self,
        caller: &[u8],
        method: &str,
        arg: &[u8],
    ) -> Result<Option<Execution>, EngineError> {
        let Some(func) = self.func("canister_inspect_message") else {
            return Ok(None);
        };
        let started = Instant::now();
        let msg = self.call_message(
            ApiType::InspectMessage,
            caller.to_vec(),
            method.into(),
            arg.to_vec(),
        );
        self.begin(msg)?;
        let trap = self.call(func, &[])?;
        let instructions = self.used();
        let accepted = self.store.data().api.msg.accepted;
        let logs = std::mem::take(&mut self.store.data_mut().api.msg.logs);
        self.capture_profile("canister_inspect_message");
        self.rollback()?;
        let canister = principal_text(&self.store.data().api.sys.canister_id);
        let result = match trap {
            Some(message) => MessageResult::Reject(reject_code::CANISTER_ERROR, message),
            None if accepted => MessageResult::NoReply,
            None => MessageResult::Reject(
                reject_code::CANISTER_REJECT,
                format!("Canister {canister} rejected the message"),
            ),
        };
        Ok(Some(Execution {
            entry: "canister_inspect_message".into(),
            result,
            instructions,
            billed_instructions: 0,
            heap_dirty_pages: 0,
            stable_dirty_pages: 0,
            pages: PageUse::default(),
            logs,
            wall_time: started.elapsed(),
        }))
    }

    /// Calls query method `method` with `arg` as the anonymous principal (non-replicated: its
    /// changes to heap, globals and stable memory are discarded; 5 B instruction limit on
    /// application subnets).
    pub fn query(&mut self, method: &str, arg: &[u8]) -> Result<Execution, EngineError> {
        self.query_as(ANONYMOUS, method, arg)
    }

    /// Like [`Self::query`] with an explicit caller.
    pub fn query_as(
        &mut self,
        caller: &[u8],
        method: &str,
        arg: &[u8],
    ) -> Result<Execution, EngineError> {
        let Some(found) = self.find_method(method, Call::Query) else {
            return Ok(Self::method_not_found(method, Call::Query));
        };
        let msg = self.call_message(found.mode, caller.to_vec(), method.into(), arg.to_vec());
        let (context, exec) =
            self.execute_in_new_context(found, msg, Origin::Ingress { id: None }, 0, true)?;
        self.contexts.remove(&context);
        self.ingress_results.remove(&context);
        Ok(exec)
    }

    /// The Candid interface the canister reports: calls the exported `get_candid_pointer`
    /// (`ic_cdk::export_candid!`) as a query (changes discarded) and reads the NUL-terminated
    /// string it points to; falls back to the `candid:service` metadata section. `None` if
    /// neither exists.
    pub fn candid_interface(&mut self) -> Result<Option<String>, EngineError> {
        if let Some(func) = self.func("get_candid_pointer") {
            let limit = self.limit_for(ApiType::NonReplicatedQuery);
            self.begin(MessageCtx::new(ApiType::NonReplicatedQuery, limit))?;
            let mut results = [if self.program.inner.info.memory64 {
                Val::I64(0)
            } else {
                Val::I32(0)
            }];
            let store = &mut self.store;
            let r = on_big_stack(|| func.call(store, &[], &mut results))?;
            let text = match (r, self.handles.memory) {
                (Ok(()), Some(m)) => {
                    let ptr = match results[0] {
                        Val::I32(p) => p as u32 as usize,
                        Val::I64(p) => p as usize,
                        _ => usize::MAX,
                    };
                    let heap = m.data(&self.store);
                    heap.get(ptr..).and_then(|tail| {
                        let end = tail.iter().position(|&b| b == 0)?;
                        String::from_utf8(tail[..end].to_vec()).ok()
                    })
                }
                _ => None,
            };
            self.rollback()?;
            if text.is_some() {
                return Ok(text);
            }
        }
        Ok(self
            .program
            .metadata("candid:service")
            .map(|d| String::from_utf8_lossy(d).into_owned()))
    }
}

/// Which methods a call may run.
#[derive(Debug, Clone, Copy)]
enum Call {
    /// An update method, or a query method run as a replicated query.
    Update,
    /// A query method, or a composite query.
    Query,
}

impl Call {
    /// The export prefixes of the methods it may run, with the mode each runs in, in the order
    /// they are looked up.
    fn exports(self) -> [(&'static str, ApiType); 2] {
        match self {
            Call::Update => [
                ("canister_update", ApiType::Update),
                ("canister_query", ApiType::ReplicatedQuery),
            ],
            Call::Query => [
                ("canister_query", ApiType::NonReplicatedQuery),
                ("canister_composite_query", ApiType::CompositeQuery),
            ],
        }
    }

    /// How a missing method is named ("Canister has no update method ...").
    fn kind(self) -> &'static str {
        match self {
            Call::Update => "update",
            Call::Query => "query",
        }
    }
}

/// The export a message runs and the mode it runs in.
struct Method {
    name: String,
    func: Func,
    mode: ApiType,
}

fn trap_text(r: &MessageResult) -> String {
    match r {
        MessageResult::Trap(m) => m.clone(),
        other => format!("{other:?}"),
    }
}

#[allow(dead_code)]
fn _assert_send() {
    fn is_send<T: Send>() {}
    is_send::<StoreData>();
}
