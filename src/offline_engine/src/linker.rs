//! The `ic0` imports as wasmtime host functions, in the shape of the replica's
//! `rs/embedders/src/wasmtime_embedder/linker.rs`: every registration charges the named cost of
//! [`crate::system_api::complexity`] (plus its per-byte part) against the instrumented counter
//! global, trapping when the message's limit is exceeded, then delegates to the System API
//! (`SystemApi` in `crate::system_api`), which checks where the function may be called and does
//! the work. Host writes to the heap are marked in the written-page map ([`crate::heap`]); in
//! profiles with the memory tracker, the heap ranges the System API reads and writes and the
//! stable memory it accesses are charged as the tracker charges them ([`crate::tracker`]).

use std::collections::HashMap;

use wasmtime::{Caller, Global, Linker, Memory, Val, WasmTy};

use crate::heap::DirtyMap;
use crate::instrument::{INJECTED_MODULE, OUT_OF_INSTRUCTIONS};
use crate::profile::{ProfState, Profiled};
use crate::stable::OS_PAGE;
use crate::system_api::complexity::{overhead, overhead_native, with_bytes, with_transmission};
use crate::system_api::{Heap, HeapTouch, SystemApi, TrapCause, u128_of};
use crate::tracker::{StablePages, TrackerMap, Tracking};

/// The written-page map of the instance's heap (`crate::heap`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct DirtyMapMemory {
    pub memory: Memory,
    pub layout: DirtyMap,
}

/// The tracker map of the instance's heap (`crate::tracker`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct TrackerMemory {
    pub memory: Memory,
    pub layout: TrackerMap,
}

/// The deterministic memory tracker's host side, in profiles that have it: the heap's map
/// (which the injected code also uses) and stable memory's states.
#[derive(Debug)]
pub(crate) struct PageTracker {
    /// The heap's tracker map (`None` for a module without memory).
    pub heap: Option<TrackerMemory>,
    /// Instructions per tracker event of a heap Wasm page, and of a stable-memory one.
    pub heap_charge: u64,
    pub stable_charge: u64,
    /// Stable memory's states in the current execution.
    pub stable: StablePages,
    /// How the current execution is tracked (stable memory; the heap's map has its own byte).
    pub tracking: Tracking,
    /// Stable-memory OS pages the current execution may access.
    pub stable_accessed_limit: u64,
}

/// The limits on heap growth (`memory.grow`), which wasmtime consults through
/// [`wasmtime::ResourceLimiter`]: the canister's `wasm_memory_limit` in the executions the
/// replica enforces it in, and its memory allocation (heap, stable memory and module together).
/// A growth beyond either traps, with the replica's error, as `memory.grow` does there; a
/// growth beyond the module's own maximum (4 GiB for a 32-bit heap) returns -1.
#[derive(Debug, Default)]
pub(crate) struct MemoryLimiter {
    /// Enforce the limits (during a message; not when the engine restores a heap).
    pub active: bool,
    /// `wasm_memory_limit` in bytes (0: none), enforced when `enforce_wasm_limit` is set.
    pub wasm_memory_limit: u64,
    pub enforce_wasm_limit: bool,
    /// Memory allocation in bytes (0: none).
    pub memory_allocation: u64,
    /// Stable memory and module bytes, which share the allocation with the heap.
    pub other_bytes: u64,
    /// Why the last growth trapped.
    pub trap: Option<TrapCause>,
}

impl wasmtime::ResourceLimiter for MemoryLimiter {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        // Instantiation creates the memories (from 0); the module's maximum is wasmtime's.
        if !self.active || current == 0 || maximum.is_some_and(|m| desired > m) {
            return Ok(true);
        }
        let desired = desired as u64;
        let limit = self.wasm_memory_limit;
        let cause = if self.enforce_wasm_limit && limit != 0 && desired > limit {
            TrapCause::WasmMemoryLimitExceeded {
                bytes: desired,
                limit,
            }
        } else if self.memory_allocation != 0
            && desired.saturating_add(self.other_bytes) > self.memory_allocation
        {
            TrapCause::OutOfMemory
        } else {
            return Ok(true);
        };
        let message = cause.to_string();
        self.trap = Some(cause);
        Err(wasmtime::Error::msg(message))
    }

    fn table_growing(
        &mut self,
        _current: usize,
        _desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(true)
    }
}

/// The wasmtime store data: the instance's handles, the System API and the profiler.
pub(crate) struct StoreData {
    pub counter: Option<Global>,
    pub memory: Option<Memory>,
    /// The written-page map, which host functions writing the heap mark.
    pub dirty_map: Option<DirtyMapMemory>,
    /// The heap ranges the current System API call read and wrote (`crate::tracker`).
    pub heap_touches: Vec<HeapTouch>,
    /// The memory tracker, in profiles that have it.
    pub pages: Option<PageTracker>,
    /// Instructions per 4 KiB stable page a write dirties for the first time in a message (the
    /// program's metering profile, [`crate::metering::Metering::stable_new_dirty_page`]).
    pub stable_new_dirty_page: u64,
    /// What the current execution was charged for such pages so far.
    pub stable_dirty_charged: u64,
    /// The current message's profile, when the program is profiled.
    pub profiler: Option<Box<ProfState>>,
    pub api: SystemApi,
    /// The limits on heap growth.
    pub limiter: MemoryLimiter,
    /// Exported functions of the current instance, by export name.
    pub funcs: HashMap<String, wasmtime::Func>,
}

impl Profiled for StoreData {
    fn counter(&self) -> Option<Global> {
        self.counter
    }
    fn limit(&self) -> u64 {
        self.api.msg.limit
    }
    fn profiler(&mut self) -> Option<&mut ProfState> {
        self.profiler.as_deref_mut()
    }
}

type C<'a> = Caller<'a, StoreData>;
type R<T> = wasmtime::Result<T>;

/// Records the cause and returns the error that unwinds the wasm call.
fn fail(c: &mut C<'_>, cause: TrapCause) -> wasmtime::Error {
    let msg = cause.to_string();
    let trap = &mut c.data_mut().api.trap;
    if trap.is_none() {
        *trap = Some(cause);
    }
    wasmtime::Error::msg(msg)
}

fn contract(c: &mut C<'_>, msg: &str) -> wasmtime::Error {
    fail(c, TrapCause::Contract(msg.to_string()))
}

fn counter(c: &mut C<'_>) -> R<(Global, i64)> {
    let g = match c.data().counter {
        Some(g) => g,
        None => return Err(contract(c, "instruction counter missing")),
    };
    let v = g.get(&mut *c).i64().unwrap_or(0);
    Ok((g, v))
}

/// Charges `amount` instructions; traps when the message limit is exceeded. A function that
/// costs nothing (`stable_size`, `stable64_size`, `mint_cycles128`) does not touch the counter.
fn charge(c: &mut C<'_>, amount: u64) -> R<()> {
    if amount == 0 {
        return Ok(());
    }
    let (g, v) = counter(c)?;
    let limit = c.data().api.msg.limit;
    if v < 0 {
        return Err(fail(c, TrapCause::InstructionLimit(limit)));
    }
    let new = v.saturating_sub(i64::try_from(amount).unwrap_or(i64::MAX));
    g.set(&mut *c, Val::I64(new))?;
    if new < 0 {
        return Err(fail(c, TrapCause::InstructionLimit(limit)));
    }
    Ok(())
}

/// Charges `amount` instructions of memory pages: the counter goes down and nothing is
/// checked, as the replica's memory tracker charges in its fault handler; the next check of the
/// counter traps when the limit is passed.
fn charge_pages(c: &mut C<'_>, amount: u64) -> R<()> {
    if amount == 0 {
        return Ok(());
    }
    let (g, v) = counter(c)?;
    let new = v.saturating_sub(i64::try_from(amount).unwrap_or(i64::MAX));
    g.set(&mut *c, Val::I64(new))?;
    Ok(())
}

/// Charges the heap ranges the last System API call read and wrote, as the memory tracker
/// charges them (nothing without a tracker), and clears the record.
fn charge_heap_touches(c: &mut C<'_>) -> R<()> {
    let mut touches = std::mem::take(&mut c.data_mut().heap_touches);
    let tracker = c
        .data()
        .pages
        .as_ref()
        .and_then(|p| p.heap.map(|h| (h, p.heap_charge)));
    let mut events = 0;
    if let (Some((map, _)), Some(memory)) = (tracker, c.data().memory) {
        let heap_len = memory.data_size(&*c) as u64;
        let bytes = map.memory.data_mut(&mut *c);
        for t in &touches {
            events += map.layout.touch(bytes, t.start, t.len, t.write, heap_len);
        }
    }
    touches.clear();
    c.data_mut().heap_touches = touches;
    match tracker {
        Some((_, charge)) => charge_pages(c, events * charge),
        None => Ok(()),
    }
}

/// Instructions executed so far in this message.
fn executed(c: &mut C<'_>) -> R<u64> {
    let (_, v) = counter(c)?;
    let limit = c.data().api.msg.limit as i64;
    Ok(limit.saturating_sub(v).max(0) as u64)
}

fn memory(c: &mut C<'_>) -> R<Memory> {
    match c.data().memory {
        Some(m) => Ok(m),
        None => Err(contract(c, "WebAssembly module must define memory")),
    }
}

/// Runs `f` on the System API.
fn with_api<T>(c: &mut C<'_>, f: impl FnOnce(&mut SystemApi) -> Result<T, TrapCause>) -> R<T> {
    let result = f(&mut c.data_mut().api);
    result.map_err(|cause| fail(c, cause))
}

/// Runs `f` on the System API and the heap; the memory tracker charges the ranges it read and
/// wrote.
fn with_heap<T>(
    c: &mut C<'_>,
    f: impl FnOnce(&mut SystemApi, &mut Heap<'_>) -> Result<T, TrapCause>,
) -> R<T> {
    let mem = memory(c)?;
    let (bytes, data) = mem.data_and_store_mut(&mut *c);
    let mut heap = Heap::new(bytes, &mut data.heap_touches);
    let result = f(&mut data.api, &mut heap);
    charge_heap_touches(c)?;
    result.map_err(|cause| fail(c, cause))
}

/// Marks `[start, start + len)` of the heap in the written-page map (host writes).
fn mark_written(c: &mut C<'_>, start: u64, len: u64) {
    if let Some(map) = c.data().dirty_map {
        map.layout
            .mark_range(map.memory.data_mut(&mut *c), start, len);
    }
}

/// Runs `f`, which writes `[dst, dst + len)` of the heap, and marks the range written.
fn write_heap(
    c: &mut C<'_>,
    dst: u64,
    len: u64,
    f: impl FnOnce(&mut SystemApi, &mut Heap<'_>) -> Result<(), TrapCause>,
) -> R<()> {
    with_heap(c, f)?;
    mark_written(c, dst, len);
    Ok(())
}

/// Writes a 128-bit amount that `f` computes to the heap at `dst`.
fn write_cycles(
    c: &mut C<'_>,
    function: &'static str,
    dst: u64,
    f: impl FnOnce(&mut SystemApi) -> Result<u128, TrapCause>,
) -> R<()> {
    write_heap(c, dst, 16, |api, heap| {
        let amount = f(api)?;
        api.write_cycles(function, dst, amount, heap)
    })
}

/// Address-sized System API parameters: i32 in wasm32, i64 in wasm64.
pub(crate) trait Addr: WasmTy + Copy + Send + Sync + 'static {
    fn get(self) -> u64;
    fn from_u64(v: u64) -> Self;
}
impl Addr for u32 {
    fn get(self) -> u64 {
        self as u64
    }
    fn from_u64(v: u64) -> Self {
        v as u32
    }
}
impl Addr for u64 {
    fn get(self) -> u64 {
        self
    }
    fn from_u64(v: u64) -> Self {
        v
    }
}

fn define<Params, Results>(
    linker: &mut Linker<StoreData>,
    name: &str,
    f: impl wasmtime::IntoFunc<StoreData, Params, Results>,
) -> wasmtime::Result<()> {
    linker.func_wrap("ic0", name, f)?;
    Ok(())
}

/// Adds the out-of-instructions import and every `ic0` function to `linker`;
/// `I` is the address type (u32 for wasm32, u64 for wasm64).
pub(crate) fn add_to_linker<I: Addr>(linker: &mut Linker<StoreData>) -> wasmtime::Result<()> {
    linker.func_wrap(
        INJECTED_MODULE,
        OUT_OF_INSTRUCTIONS,
        |mut c: C<'_>| -> R<()> {
            let limit = c.data().api.msg.limit;
            Err(fail(&mut c, TrapCause::InstructionLimit(limit)))
        },
    )?;
    add_message_functions::<I>(linker)?;
    add_cycles_functions::<I>(linker)?;
    add_identity_functions::<I>(linker)?;
    add_call_functions::<I>(linker)?;
    add_cost_and_env_functions::<I>(linker)?;
    add_log_functions::<I>(linker)?;
    add_stable_functions(linker)?;
    Ok(())
}

// ---- message arguments, caller, method name, rejects, replies ----
fn add_message_functions<I: Addr>(linker: &mut Linker<StoreData>) -> wasmtime::Result<()> {
    define(linker, "msg_arg_data_size", |mut c: C<'_>| -> R<I> {
        charge(&mut c, overhead::MSG_ARG_DATA_SIZE)?;
        with_api(&mut c, |api| api.msg_arg_data_size()).map(I::from_u64)
    })?;
    define(
        linker,
        "msg_arg_data_copy",
        |mut c: C<'_>, dst: I, off: I, size: I| -> R<()> {
            charge(&mut c, with_bytes(overhead::MSG_ARG_DATA_COPY, size.get()))?;
            write_heap(&mut c, dst.get(), size.get(), |api, heap| {
                api.msg_arg_data_copy(dst.get(), off.get(), size.get(), heap)
            })
        },
    )?;
    define(linker, "msg_caller_size", |mut c: C<'_>| -> R<I> {
        charge(&mut c, overhead::MSG_CALLER_SIZE)?;
        with_api(&mut c, |api| api.msg_caller_size()).map(I::from_u64)
    })?;
    define(
        linker,
        "msg_caller_copy",
        |mut c: C<'_>, dst: I, off: I, size: I| -> R<()> {
            charge(&mut c, with_bytes(overhead::MSG_CALLER_COPY, size.get()))?;
            write_heap(&mut c, dst.get(), size.get(), |api, heap| {
                api.msg_caller_copy(dst.get(), off.get(), size.get(), heap)
            })
        },
    )?;
    define(
        linker,
        "msg_caller_info_data_size",
        |mut c: C<'_>| -> R<I> {
            charge(&mut c, overhead::MSG_CALLER_INFO_DATA_SIZE)?;
            with_api(&mut c, |api| {
                api.msg_caller_info_size("msg_caller_info_data_size")
            })
            .map(I::from_u64)
        },
    )?;
    define(
        linker,
        "msg_caller_info_signer_size",
        |mut c: C<'_>| -> R<I> {
            charge(&mut c, overhead::MSG_CALLER_INFO_SIGNER_SIZE)?;
            with_api(&mut c, |api| {
                api.msg_caller_info_size("msg_caller_info_signer_size")
            })
            .map(I::from_u64)
        },
    )?;
    define(
        linker,
        "msg_caller_info_data_copy",
        |mut c: C<'_>, dst: I, off: I, size: I| -> R<()> {
            charge(
                &mut c,
                with_bytes(overhead::MSG_CALLER_INFO_DATA_COPY, size.get()),
            )?;
            write_heap(&mut c, dst.get(), size.get(), |api, heap| {
                let f = "msg_caller_info_data_copy";
                api.msg_caller_info_copy(f, dst.get(), off.get(), size.get(), heap)
            })
        },
    )?;
    define(
        linker,
        "msg_caller_info_signer_copy",
        |mut c: C<'_>, dst: I, off: I, size: I| -> R<()> {
            charge(
                &mut c,
                with_bytes(overhead::MSG_CALLER_INFO_SIGNER_COPY, size.get()),
            )?;
            write_heap(&mut c, dst.get(), size.get(), |api, heap| {
                let f = "msg_caller_info_signer_copy";
                api.msg_caller_info_copy(f, dst.get(), off.get(), size.get(), heap)
            })
        },
    )?;
    define(linker, "msg_reject_code", |mut c: C<'_>| -> R<u32> {
        charge(&mut c, overhead::MSG_REJECT_CODE)?;
        with_api(&mut c, |api| api.msg_reject_code())
    })?;
    define(linker, "msg_reject_msg_size", |mut c: C<'_>| -> R<I> {
        charge(&mut c, overhead::MSG_REJECT_MSG_SIZE)?;
        with_api(&mut c, |api| api.msg_reject_msg_size()).map(I::from_u64)
    })?;
    define(
        linker,
        "msg_reject_msg_copy",
        |mut c: C<'_>, dst: I, off: I, size: I| -> R<()> {
            charge(
                &mut c,
                with_bytes(overhead::MSG_REJECT_MSG_COPY, size.get()),
            )?;
            write_heap(&mut c, dst.get(), size.get(), |api, heap| {
                api.msg_reject_msg_copy(dst.get(), off.get(), size.get(), heap)
            })
        },
    )?;
    define(linker, "msg_method_name_size", |mut c: C<'_>| -> R<I> {
        charge(&mut c, overhead::MSG_METHOD_NAME_SIZE)?;
        with_api(&mut c, |api| api.msg_method_name_size()).map(I::from_u64)
    })?;
    define(
        linker,
        "msg_method_name_copy",
        |mut c: C<'_>, dst: I, off: I, size: I| -> R<()> {
            charge(
                &mut c,
                with_bytes(overhead::MSG_METHOD_NAME_COPY, size.get()),
            )?;
            write_heap(&mut c, dst.get(), size.get(), |api, heap| {
                api.msg_method_name_copy(dst.get(), off.get(), size.get(), heap)
            })
        },
    )?;
    define(linker, "msg_deadline", |mut c: C<'_>| -> R<u64> {
        charge(&mut c, overhead::MSG_DEADLINE)?;
        with_api(&mut c, |api| api.msg_deadline())
    })?;
    define(linker, "accept_message", |mut c: C<'_>| -> R<()> {
        charge(&mut c, overhead::ACCEPT_MESSAGE)?;
        with_api(&mut c, |api| api.accept_message())
    })?;
    define(
        linker,
        "msg_reply_data_append",
        |mut c: C<'_>, src: I, size: I| -> R<()> {
            charge(
                &mut c,
                with_transmission(overhead::MSG_REPLY_DATA_APPEND, size.get()),
            )?;
            with_heap(&mut c, |api, heap| {
                api.msg_reply_data_append(src.get(), size.get(), heap)
            })
        },
    )?;
    define(linker, "msg_reply", |mut c: C<'_>| -> R<()> {
        charge(&mut c, overhead::MSG_REPLY)?;
        with_api(&mut c, |api| api.msg_reply())
    })?;
    define(
        linker,
        "msg_reject",
        |mut c: C<'_>, src: I, size: I| -> R<()> {
            charge(&mut c, with_transmission(overhead::MSG_REJECT, size.get()))?;
            with_heap(&mut c, |api, heap| {
                api.msg_reject(src.get(), size.get(), heap)
            })
        },
    )?;
    Ok(())
}

// ---- cycles ----
fn add_cycles_functions<I: Addr>(linker: &mut Linker<StoreData>) -> wasmtime::Result<()> {
    define(
        linker,
        "msg_cycles_available128",
        |mut c: C<'_>, dst: I| -> R<()> {
            charge(&mut c, overhead::MSG_CYCLES_AVAILABLE128)?;
            write_cycles(&mut c, "msg_cycles_available128", dst.get(), |api| {
                api.msg_cycles_available("msg_cycles_available128")
            })
        },
    )?;
    define(linker, "msg_cycles_available", |mut c: C<'_>| -> R<u64> {
        charge(&mut c, overhead::MSG_CYCLES_AVAILABLE)?;
        with_api(&mut c, |api| {
            api.msg_cycles_available("msg_cycles_available")
        })
        .map(|v| v.min(u64::MAX as u128) as u64)
    })?;
    define(
        linker,
        "msg_cycles_refunded128",
        |mut c: C<'_>, dst: I| -> R<()> {
            charge(&mut c, overhead::MSG_CYCLES_REFUNDED128)?;
            write_cycles(&mut c, "msg_cycles_refunded128", dst.get(), |api| {
                api.msg_cycles_refunded("msg_cycles_refunded128")
            })
        },
    )?;
    define(linker, "msg_cycles_refunded", |mut c: C<'_>| -> R<u64> {
        charge(&mut c, overhead::MSG_CYCLES_REFUNDED)?;
        with_api(&mut c, |api| api.msg_cycles_refunded("msg_cycles_refunded"))
            .map(|v| v.min(u64::MAX as u128) as u64)
    })?;
    define(
        linker,
        "msg_cycles_accept128",
        |mut c: C<'_>, high: u64, low: u64, dst: I| -> R<()> {
            charge(&mut c, overhead::MSG_CYCLES_ACCEPT128)?;
            write_cycles(&mut c, "msg_cycles_accept128", dst.get(), |api| {
                api.msg_cycles_accept("msg_cycles_accept128", u128_of(high, low))
            })
        },
    )?;
    define(
        linker,
        "msg_cycles_accept",
        |mut c: C<'_>, max: u64| -> R<u64> {
            charge(&mut c, overhead::MSG_CYCLES_ACCEPT)?;
            with_api(&mut c, |api| {
                api.msg_cycles_accept("msg_cycles_accept", max as u128)
            })
            .map(|v| v as u64)
        },
    )?;
    define(
        linker,
        "cycles_burn128",
        |mut c: C<'_>, high: u64, low: u64, dst: I| -> R<()> {
            charge(&mut c, overhead::CYCLES_BURN128)?;
            write_cycles(&mut c, "cycles_burn128", dst.get(), |api| {
                api.cycles_burn128(u128_of(high, low))
            })
        },
    )?;
    define(
        linker,
        "mint_cycles128",
        |mut c: C<'_>, _high: u64, _low: u64, _dst: I| -> R<()> {
            charge(&mut c, overhead::MINT_CYCLES128)?;
            with_api(&mut c, |api| api.mint_cycles128())
        },
    )?;
    define(
        linker,
        "canister_cycle_balance128",
        |mut c: C<'_>, dst: I| -> R<()> {
            charge(&mut c, overhead::CANISTER_CYCLE_BALANCE128)?;
            write_cycles(&mut c, "canister_cycle_balance128", dst.get(), |api| {
                api.canister_cycle_balance("canister_cycle_balance128")
            })
        },
    )?;
    define(
        linker,
        "canister_liquid_cycle_balance128",
        |mut c: C<'_>, dst: I| -> R<()> {
            charge(&mut c, overhead::CANISTER_LIQUID_CYCLE_BALANCE128)?;
            write_cycles(
                &mut c,
                "canister_liquid_cycle_balance128",
                dst.get(),
                |api| api.canister_cycle_balance("canister_liquid_cycle_balance128"),
            )
        },
    )?;
    define(linker, "canister_cycle_balance", |mut c: C<'_>| -> R<u64> {
        charge(&mut c, overhead::CANISTER_CYCLE_BALANCE)?;
        with_api(&mut c, |api| {
            api.canister_cycle_balance("canister_cycle_balance")
        })
        .map(|v| v.min(u64::MAX as u128) as u64)
    })?;
    Ok(())
}

// ---- canister and subnet identity, certified data, time, timer, performance counter ----
fn add_identity_functions<I: Addr>(linker: &mut Linker<StoreData>) -> wasmtime::Result<()> {
    define(linker, "canister_self_size", |mut c: C<'_>| -> R<I> {
        charge(&mut c, overhead::CANISTER_SELF_SIZE)?;
        with_api(&mut c, |api| api.canister_self_size()).map(I::from_u64)
    })?;
    define(
        linker,
        "canister_self_copy",
        |mut c: C<'_>, dst: I, off: I, size: I| -> R<()> {
            charge(&mut c, with_bytes(overhead::CANISTER_SELF_COPY, size.get()))?;
            write_heap(&mut c, dst.get(), size.get(), |api, heap| {
                api.canister_self_copy(dst.get(), off.get(), size.get(), heap)
            })
        },
    )?;
    define(linker, "canister_status", |mut c: C<'_>| -> R<u32> {
        charge(&mut c, overhead::CANISTER_STATUS)?;
        with_api(&mut c, |api| api.canister_status())
    })?;
    define(linker, "canister_version", |mut c: C<'_>| -> R<u64> {
        charge(&mut c, overhead::CANISTER_VERSION)?;
        with_api(&mut c, |api| api.canister_version())
    })?;
    define(linker, "subnet_self_size", |mut c: C<'_>| -> R<I> {
        charge(&mut c, overhead::SUBNET_SELF_SIZE)?;
        with_api(&mut c, |api| api.subnet_self_size()).map(I::from_u64)
    })?;
    define(
        linker,
        "subnet_self_copy",
        |mut c: C<'_>, dst: I, off: I, size: I| -> R<()> {
            charge(&mut c, with_bytes(overhead::SUBNET_SELF_COPY, size.get()))?;
            write_heap(&mut c, dst.get(), size.get(), |api, heap| {
                api.subnet_self_copy(dst.get(), off.get(), size.get(), heap)
            })
        },
    )?;
    define(linker, "subnet_self_node_count", |mut c: C<'_>| -> R<u32> {
        charge(&mut c, overhead::SUBNET_SELF_NODE_COUNT)?;
        with_api(&mut c, |api| api.subnet_self_node_count())
    })?;
    define(linker, "root_key_size", |mut c: C<'_>| -> R<I> {
        charge(&mut c, overhead::ROOT_KEY_SIZE)?;
        with_api(&mut c, |api| api.root_key_size()).map(I::from_u64)
    })?;
    define(
        linker,
        "root_key_copy",
        |mut c: C<'_>, dst: I, off: I, size: I| -> R<()> {
            charge(&mut c, with_bytes(overhead::ROOT_KEY_COPY, size.get()))?;
            write_heap(&mut c, dst.get(), size.get(), |api, heap| {
                api.root_key_copy(dst.get(), off.get(), size.get(), heap)
            })
        },
    )?;
    define(
        linker,
        "is_controller",
        |mut c: C<'_>, src: I, size: I| -> R<u32> {
            charge(&mut c, with_bytes(overhead::IS_CONTROLLER, size.get()))?;
            with_heap(&mut c, |api, heap| {
                api.is_controller(src.get(), size.get(), heap)
            })
        },
    )?;
    define(
        linker,
        "in_replicated_execution",
        |mut c: C<'_>| -> R<u32> {
            charge(&mut c, overhead::IN_REPLICATED_EXECUTION)?;
            with_api(&mut c, |api| api.in_replicated_execution())
        },
    )?;
    define(
        linker,
        "certified_data_set",
        |mut c: C<'_>, src: I, size: I| -> R<()> {
            charge(&mut c, with_bytes(overhead::CERTIFIED_DATA_SET, size.get()))?;
            with_heap(&mut c, |api, heap| {
                api.certified_data_set(src.get(), size.get(), heap)
            })
        },
    )?;
    define(
        linker,
        "data_certificate_present",
        |mut c: C<'_>| -> R<u32> {
            charge(&mut c, overhead::DATA_CERTIFICATE_PRESENT)?;
            with_api(&mut c, |api| api.data_certificate_present())
        },
    )?;
    define(linker, "data_certificate_size", |mut c: C<'_>| -> R<I> {
        charge(&mut c, overhead::DATA_CERTIFICATE_SIZE)?;
        with_api(&mut c, |api| api.data_certificate_size()).map(I::from_u64)
    })?;
    define(
        linker,
        "data_certificate_copy",
        |mut c: C<'_>, dst: I, off: I, size: I| -> R<()> {
            charge(
                &mut c,
                with_bytes(overhead::DATA_CERTIFICATE_COPY, size.get()),
            )?;
            write_heap(&mut c, dst.get(), size.get(), |api, heap| {
                api.data_certificate_copy(dst.get(), off.get(), size.get(), heap)
            })
        },
    )?;
    define(linker, "time", |mut c: C<'_>| -> R<u64> {
        charge(&mut c, overhead::TIME)?;
        with_api(&mut c, |api| api.time())
    })?;
    define(
        linker,
        "global_timer_set",
        |mut c: C<'_>, t: u64| -> R<u64> {
            charge(&mut c, overhead::GLOBAL_TIMER_SET)?;
            with_api(&mut c, |api| api.global_timer_set(t))
        },
    )?;
    define(
        linker,
        "performance_counter",
        |mut c: C<'_>, kind: u32| -> R<u64> {
            charge(&mut c, overhead::PERFORMANCE_COUNTER)?;
            let n = executed(&mut c)?;
            with_api(&mut c, |api| api.performance_counter(kind, n))
        },
    )?;
    Ok(())
}

// ---- inter-canister calls ----
fn add_call_functions<I: Addr>(linker: &mut Linker<StoreData>) -> wasmtime::Result<()> {
    define(
        linker,
        "call_new",
        |mut c: C<'_>,
         callee_src: I,
         callee_size: I,
         name_src: I,
         name_len: I,
         reply_fun: I,
         reply_env: I,
         reject_fun: I,
         reject_env: I|
         -> R<()> {
            let bytes = callee_size.get().saturating_add(name_len.get());
            charge(&mut c, with_bytes(overhead::CALL_NEW, bytes))?;
            with_heap(&mut c, |api, heap| {
                api.call_new(
                    callee_src.get(),
                    callee_size.get(),
                    name_src.get(),
                    name_len.get(),
                    (reply_fun.get(), reply_env.get()),
                    (reject_fun.get(), reject_env.get()),
                    heap,
                )
            })
        },
    )?;
    define(
        linker,
        "call_data_append",
        |mut c: C<'_>, src: I, size: I| -> R<()> {
            charge(
                &mut c,
                with_transmission(overhead::CALL_DATA_APPEND, size.get()),
            )?;
            with_heap(&mut c, |api, heap| {
                api.call_data_append(src.get(), size.get(), heap)
            })
        },
    )?;
    define(
        linker,
        "call_on_cleanup",
        |mut c: C<'_>, fun: I, env: I| -> R<()> {
            charge(&mut c, overhead::CALL_ON_CLEANUP)?;
            with_api(&mut c, |api| api.call_on_cleanup(fun.get(), env.get()))
        },
    )?;
    define(
        linker,
        "call_with_best_effort_response",
        |mut c: C<'_>, timeout: u32| -> R<()> {
            charge(&mut c, overhead::CALL_WITH_BEST_EFFORT_RESPONSE)?;
            with_api(&mut c, |api| api.call_with_best_effort_response(timeout))
        },
    )?;
    define(
        linker,
        "call_cycles_add128",
        |mut c: C<'_>, high: u64, low: u64| -> R<()> {
            charge(&mut c, overhead::CALL_CYCLES_ADD128)?;
            with_api(&mut c, |api| {
                api.call_cycles_add("call_cycles_add128", u128_of(high, low))
            })
        },
    )?;
    define(
        linker,
        "call_cycles_add",
        |mut c: C<'_>, amount: u64| -> R<()> {
            charge(&mut c, overhead::CALL_CYCLES_ADD)?;
            with_api(&mut c, |api| {
                api.call_cycles_add("call_cycles_add", amount as u128)
            })
        },
    )?;
    define(linker, "call_perform", |mut c: C<'_>| -> R<u32> {
        charge(&mut c, overhead::CALL_PERFORM)?;
        with_api(&mut c, |api| api.call_perform())
    })?;
    Ok(())
}

// ---- costs and environment variables (none are set) ----
fn add_cost_and_env_functions<I: Addr>(linker: &mut Linker<StoreData>) -> wasmtime::Result<()> {
    define(
        linker,
        "cost_call",
        |mut c: C<'_>, method_len: u64, payload_len: u64, dst: I| -> R<()> {
            charge(&mut c, overhead::COST_CALL)?;
            write_cycles(&mut c, "cost_call", dst.get(), |api| {
                api.cost_call(method_len, payload_len)
            })
        },
    )?;
    define(
        linker,
        "cost_create_canister",
        |mut c: C<'_>, dst: I| -> R<()> {
            charge(&mut c, overhead::COST_CREATE_CANISTER)?;
            write_cycles(&mut c, "cost_create_canister", dst.get(), |api| {
                api.cost_create_canister()
            })
        },
    )?;
    define(
        linker,
        "cost_http_request",
        |mut c: C<'_>, request: u64, max_response: u64, dst: I| -> R<()> {
            charge(&mut c, overhead::COST_HTTP_REQUEST)?;
            write_cycles(&mut c, "cost_http_request", dst.get(), |api| {
                api.cost_http_request(request, max_response)
            })
        },
    )?;
    define(
        linker,
        "cost_http_request_v2",
        |mut c: C<'_>, _src: I, _size: I, dst: I| -> R<()> {
            charge(&mut c, overhead::COST_HTTP_REQUEST_V2)?;
            write_cycles(&mut c, "cost_http_request_v2", dst.get(), |api| {
                api.cost_http_request_v2()
            })
        },
    )?;
    for (name, fixed) in [
        ("cost_sign_with_ecdsa", overhead::COST_ECDSA),
        ("cost_sign_with_schnorr", overhead::COST_SCHNORR),
        ("cost_vetkd_derive_key", overhead::COST_VETKD),
    ] {
        define(
            linker,
            name,
            move |mut c: C<'_>, _src: I, size: I, _curve: u32, dst: I| -> R<u32> {
                charge(&mut c, with_bytes(fixed, size.get()))?;
                write_cycles(&mut c, name, dst.get(), |api| api.cost_threshold_key(name))?;
                Ok(0)
            },
        )?;
    }
    define(linker, "env_var_count", |mut c: C<'_>| -> R<I> {
        charge(&mut c, overhead::ENV_VAR_COUNT)?;
        with_api(&mut c, |api| api.env_var_count()).map(I::from_u64)
    })?;
    define(
        linker,
        "env_var_name_size",
        |mut c: C<'_>, index: I| -> R<I> {
            charge(&mut c, overhead::ENV_VAR_NAME_SIZE)?;
            with_api(&mut c, |api| {
                api.env_var_name("env_var_name_size", index.get())
            })?;
            Ok(I::from_u64(0))
        },
    )?;
    define(
        linker,
        "env_var_name_copy",
        |mut c: C<'_>, index: I, _dst: I, _off: I, size: I| -> R<()> {
            charge(&mut c, with_bytes(overhead::ENV_VAR_NAME_COPY, size.get()))?;
            with_api(&mut c, |api| {
                api.env_var_name("env_var_name_copy", index.get())
            })
        },
    )?;
    define(
        linker,
        "env_var_name_exists",
        |mut c: C<'_>, _src: I, _size: I| -> R<u32> {
            charge(&mut c, overhead::ENV_VAR_NAME_EXISTS)?;
            with_api(&mut c, |api| api.env_var_name_exists())
        },
    )?;
    define(
        linker,
        "env_var_value_size",
        |mut c: C<'_>, src: I, size: I| -> R<I> {
            charge(&mut c, overhead::ENV_VAR_VALUE_SIZE)?;
            with_heap(&mut c, |api, heap| {
                api.env_var_value("env_var_value_size", src.get(), size.get(), heap)
            })?;
            Ok(I::from_u64(0))
        },
    )?;
    define(
        linker,
        "env_var_value_copy",
        |mut c: C<'_>, src: I, name_size: I, _dst: I, _off: I, size: I| -> R<()> {
            charge(&mut c, with_bytes(overhead::ENV_VAR_VALUE_COPY, size.get()))?;
            with_heap(&mut c, |api, heap| {
                api.env_var_value("env_var_value_copy", src.get(), name_size.get(), heap)
            })
        },
    )?;
    Ok(())
}

// ---- debug_print and trap ----
fn add_log_functions<I: Addr>(linker: &mut Linker<StoreData>) -> wasmtime::Result<()> {
    define(
        linker,
        "debug_print",
        |mut c: C<'_>, src: I, size: I| -> R<()> {
            let len = size.get().min(usize::MAX as u64) as usize;
            let extra = c.data().api.debug_print_charge(len);
            charge(&mut c, overhead::DEBUG_PRINT.saturating_add(extra))?;
            with_heap(&mut c, |api, heap| {
                api.debug_print(src.get(), size.get(), heap)
            })
        },
    )?;
    define(linker, "trap", |mut c: C<'_>, src: I, size: I| -> R<()> {
        let len = size.get().min(usize::MAX as u64) as usize;
        let extra = c.data().api.trap_charge(len);
        charge(&mut c, overhead::TRAP.saturating_add(extra))?;
        with_heap(&mut c, |api, heap| {
            Err(api.trap(src.get(), size.get(), heap))
        })
    })?;
    Ok(())
}

// ---- stable memory ----

/// With the memory tracker: traps when an access of `len` bytes at `offset` of stable memory
/// (which the caller checked to lie within it) would pass the execution's limit of accessed
/// stable pages (the replica's stable-memory System API replacements count them per OS page).
fn check_stable_access(c: &mut C<'_>, offset: u64, len: u64) -> R<()> {
    let Some(p) = c.data().pages.as_ref() else {
        return Ok(());
    };
    let limit = p.stable_accessed_limit;
    if p.stable.accessed_os_pages_with(offset, len) <= limit {
        return Ok(());
    }
    let kb = limit * OS_PAGE / 1024;
    Err(fail(
        c,
        TrapCause::MemoryAccessLimit(format!(
            "Exceeded the limit for the number of accessed pages in the stable memory in a single execution: limit {kb} KB"
        )),
    ))
}

/// With the memory tracker: charges a System API read (`write` false: a first read of its
/// pages is served by the host and charges nothing, [`crate::tracker::StablePages::read`]) or
/// write of `len` bytes at `offset` of stable memory (after it happened).
fn touch_stable(c: &mut C<'_>, offset: u64, len: u64, write: bool) -> R<()> {
    let Some(p) = c.data_mut().pages.as_mut() else {
        return Ok(());
    };
    let events = if write {
        p.stable.touch(offset, len, true, p.tracking)
    } else {
        p.stable.read(offset, len, p.tracking)
    };
    let charge = events * p.stable_charge;
    charge_pages(c, charge)
}

/// Whether `len` bytes at `at` lie within a memory of `size` bytes.
fn within(at: u64, len: u64, size: u64) -> bool {
    at.checked_add(len).is_some_and(|end| end <= size)
}

fn stable_read(c: &mut C<'_>, dst: u64, offset: u64, len: u64, api32: bool) -> R<()> {
    let fixed = if api32 {
        overhead_native::STABLE_READ
    } else {
        overhead_native::STABLE64_READ
    };
    charge(c, with_bytes(fixed, len))?;
    if len == 0 {
        return Ok(());
    }
    with_api(c, |api| api.stable_size(api32))?;
    // The accessed-page limit applies to a read that would take place (else it traps for its
    // bounds, below).
    let heap_len = c.data().memory.map_or(0, |m| m.data_size(&*c) as u64);
    let stable_len = c.data().api.sys.stable.size_bytes();
    if within(dst, len, heap_len) && within(offset, len, stable_len) {
        check_stable_access(c, offset, len)?;
    }
    write_heap(c, dst, len, |api, heap| {
        api.stable_read(dst, offset, len, api32, heap)
    })?;
    touch_stable(c, offset, len, false)
}

fn stable_write(c: &mut C<'_>, offset: u64, src: u64, len: u64, api32: bool) -> R<()> {
    let fixed = if api32 {
        overhead_native::STABLE_WRITE
    } else {
        overhead_native::STABLE64_WRITE
    };
    charge(c, with_bytes(fixed, len))?;
    let Some(new_pages) = with_api(c, |api| api.stable_write_new_pages(offset, len, api32))? else {
        return Ok(());
    };
    check_stable_access(c, offset, len)?;
    let amount = c.data().stable_new_dirty_page.saturating_mul(new_pages);
    c.data_mut().stable_dirty_charged += amount;
    charge(c, amount)?;
    with_heap(c, |api, heap| api.stable_write(offset, src, len, heap))?;
    touch_stable(c, offset, len, true)
}

/// Grows stable memory within the allocation left by the heap and the module, and tells the
/// heap's limiter the new size.
fn stable_grow(c: &mut C<'_>, pages: u64, api32: bool) -> R<i64> {
    let heap_bytes = match c.data().memory {
        Some(m) => m.data_size(&*c) as u64,
        None => 0,
    };
    let result = with_api(c, |api| api.stable_grow(pages, api32, heap_bytes))?;
    let data = c.data_mut();
    data.limiter.other_bytes = data
        .api
        .sys
        .stable
        .size_bytes()
        .saturating_add(data.api.sys.module_bytes);
    Ok(result)
}

fn add_stable_functions(linker: &mut Linker<StoreData>) -> wasmtime::Result<()> {
    define(linker, "stable_size", |mut c: C<'_>| -> R<u32> {
        charge(&mut c, overhead_native::STABLE_SIZE)?;
        with_api(&mut c, |api| api.stable_size(true)).map(|n| n as u32)
    })?;
    define(linker, "stable64_size", |mut c: C<'_>| -> R<u64> {
        charge(&mut c, overhead_native::STABLE64_SIZE)?;
        with_api(&mut c, |api| api.stable_size(false))
    })?;
    define(
        linker,
        "stable_grow",
        |mut c: C<'_>, pages: u32| -> R<i32> {
            charge(&mut c, overhead_native::STABLE_GROW)?;
            stable_grow(&mut c, pages as u64, true).map(|n| n as i32)
        },
    )?;
    define(
        linker,
        "stable64_grow",
        |mut c: C<'_>, pages: u64| -> R<i64> {
            charge(&mut c, overhead_native::STABLE_GROW)?;
            stable_grow(&mut c, pages, false)
        },
    )?;
    define(
        linker,
        "stable_read",
        |mut c: C<'_>, dst: u32, off: u32, size: u32| -> R<()> {
            stable_read(&mut c, dst as u64, off as u64, size as u64, true)
        },
    )?;
    define(
        linker,
        "stable64_read",
        |mut c: C<'_>, dst: u64, off: u64, size: u64| -> R<()> {
            stable_read(&mut c, dst, off, size, false)
        },
    )?;
    define(
        linker,
        "stable_write",
        |mut c: C<'_>, off: u32, src: u32, size: u32| -> R<()> {
            stable_write(&mut c, off as u64, src as u64, size as u64, true)
        },
    )?;
    define(
        linker,
        "stable64_write",
        |mut c: C<'_>, off: u64, src: u64, size: u64| -> R<()> {
            stable_write(&mut c, off, src, size, false)
        },
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stable::{MAX_STABLE_WASM_PAGES, StableMemory};
    use crate::system_api::{ApiType, MessageCtx, SystemState, check_import, ic0_functions};

    fn test_data() -> StoreData {
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
                    canister_id: vec![],
                    controllers: vec![],
                    time: 0,
                    timer: 0,
                    cycles: 0,
                    certified_data: vec![],
                    version: 0,
                    debug_print_enabled: true,
                    stable: StableMemory::default(),
                    max_stable_pages: MAX_STABLE_WASM_PAGES,
                    memory_allocation: 0,
                    module_bytes: 0,
                },
                msg: MessageCtx::new(ApiType::Update, 0),
                trap: None,
            },
            limiter: MemoryLimiter::default(),
            funcs: Default::default(),
        }
    }

    #[test]
    fn linker_defines_every_function_of_the_matrix() {
        let engine = wasmtime::Engine::default();
        for wasm64 in [false, true] {
            let mut linker: Linker<StoreData> = Linker::new(&engine);
            if wasm64 {
                add_to_linker::<u64>(&mut linker).unwrap();
            } else {
                add_to_linker::<u32>(&mut linker).unwrap();
            }
            let defined: Vec<String> = linker
                .iter(&mut wasmtime::Store::new(&engine, test_data()))
                .filter(|(m, _, _)| *m == "ic0")
                .map(|(_, n, _)| n.to_string())
                .collect();
            for f in ic0_functions() {
                assert!(defined.iter().any(|d| d == f), "{f} listed but not defined");
            }
            for d in &defined {
                assert!(
                    ic0_functions().any(|f| f == d),
                    "{d} defined but not listed"
                );
            }
        }
    }

    #[test]
    fn import_check() {
        assert!(check_import("ic0", "msg_reply").is_ok());
        assert!(check_import("ic0", "no_such_fn").is_err());
        assert!(
            check_import("wasi_snapshot_preview1", "fd_write")
                .unwrap_err()
                .contains("wasi2ic")
        );
    }
}
