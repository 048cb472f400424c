//! The `ic0` System API as wasmtime host functions.
//!
//! Every function first charges its fixed overhead plus its per-byte cost
//! (`METERING.md` §3, §4) against the instrumented counter global, calling the
//! out-of-instructions path when it goes negative, then does its work on the message context.
//! Stable memory is kept in [`crate::stable::StableMemory`] (charged as the replica's
//! Wasm-native stable memory: `len + 20`, plus 1,000 per newly dirtied 4 KiB page for writes,
//! 100 for grow, 0 for size).

use std::collections::VecDeque;

use wasmtime::{Caller, Global, Linker, Memory, Val, WasmTy};

use crate::heap::DirtyMap;
use crate::instrument::{INJECTED_MODULE, OUT_OF_INSTRUCTIONS};
use crate::profile::ProfState;
use crate::stable::{
    MAX_32BIT_WASM_PAGES, MAX_STABLE_WASM_PAGES, OS_PAGE, OutOfBounds, StableMemory,
};
use crate::types::MessageResult;

/// Every `ic0` function the engine provides. A module importing anything else fails at load.
pub const IC0_FUNCTIONS: &[&str] = &[
    "msg_arg_data_size",
    "msg_arg_data_copy",
    "msg_caller_size",
    "msg_caller_copy",
    "msg_caller_info_data_size",
    "msg_caller_info_data_copy",
    "msg_caller_info_signer_size",
    "msg_caller_info_signer_copy",
    "msg_reject_code",
    "msg_reject_msg_size",
    "msg_reject_msg_copy",
    "msg_deadline",
    "msg_reply_data_append",
    "msg_reply",
    "msg_reject",
    "msg_method_name_size",
    "msg_method_name_copy",
    "msg_cycles_available128",
    "msg_cycles_refunded128",
    "msg_cycles_accept128",
    "msg_cycles_available",
    "msg_cycles_refunded",
    "msg_cycles_accept",
    "cycles_burn128",
    "canister_self_size",
    "canister_self_copy",
    "canister_cycle_balance128",
    "canister_cycle_balance",
    "canister_liquid_cycle_balance128",
    "canister_status",
    "canister_version",
    "subnet_self_size",
    "subnet_self_copy",
    "subnet_self_node_count",
    "accept_message",
    "call_new",
    "call_on_cleanup",
    "call_data_append",
    "call_with_best_effort_response",
    "call_cycles_add128",
    "call_cycles_add",
    "call_perform",
    "stable_size",
    "stable_grow",
    "stable_read",
    "stable_write",
    "stable64_size",
    "stable64_grow",
    "stable64_read",
    "stable64_write",
    "root_key_size",
    "root_key_copy",
    "certified_data_set",
    "data_certificate_present",
    "data_certificate_size",
    "data_certificate_copy",
    "time",
    "global_timer_set",
    "performance_counter",
    "is_controller",
    "in_replicated_execution",
    "cost_call",
    "cost_create_canister",
    "cost_http_request",
    "cost_http_request_v2",
    "cost_sign_with_ecdsa",
    "cost_sign_with_schnorr",
    "cost_vetkd_derive_key",
    "env_var_count",
    "env_var_name_size",
    "env_var_name_copy",
    "env_var_name_exists",
    "env_var_value_size",
    "env_var_value_copy",
    "debug_print",
    "trap",
    "mint_cycles128",
];

/// Accepts `ic0.<known function>` imports; refuses everything else with a hint.
pub fn check_import(module: &str, name: &str) -> Result<(), String> {
    if module == "ic0" {
        if IC0_FUNCTIONS.contains(&name) {
            Ok(())
        } else {
            Err(" (unknown ic0 function)".into())
        }
    } else if module.starts_with("wasi") {
        Err(" (WASI imports must be rewired with wasi2ic before running on the IC)".into())
    } else {
        Err(" (only ic0 functions can be imported)".into())
    }
}

/// Fixed overheads in instructions.
mod overhead {
    pub const DEFAULT: u64 = 500;
    pub const DEBUG_PRINT: u64 = 100;
    pub const IS_CONTROLLER: u64 = 1_000;
    pub const CALL_NEW: u64 = 1_500;
    pub const CALL_PERFORM: u64 = 5_000;
    pub const PERFORMANCE_COUNTER: u64 = 200;
    pub const COST_HTTP_REQUEST_V2: u64 = 10_000;
    pub const STABLE_READ_WRITE: u64 = 20;
    pub const STABLE_GROW: u64 = 100;
    pub const STABLE_DIRTY_PAGE: u64 = 1_000;
    /// Per-byte factor of reply/reject/call payloads.
    pub const BYTE_TRANSMISSION: u64 = 50;
}

/// Canister log capacity used for the logging charge of `debug_print` and `trap`.
const LOG_CAPACITY: usize = 4096;
/// Bytes a log record takes besides its content (index and timestamp).
const LOG_RECORD_OVERHEAD: usize = 16;
/// Largest certified data.
const MAX_CERTIFIED_DATA: usize = 32;

/// The kind of execution, which decides what the System API allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ApiMode {
    Start,
    Init,
    PreUpgrade,
    PostUpgrade,
    Update,
    ReplicatedQuery,
    Query,
    ReplyCallback,
    RejectCallback,
    Cleanup,
    Timer,
    /// `canister_inspect_message` of an ingress message (its changes are discarded).
    InspectMessage,
}

impl ApiMode {
    fn name(self) -> &'static str {
        match self {
            ApiMode::Start => "start",
            ApiMode::Init => "init",
            ApiMode::PreUpgrade => "pre upgrade",
            ApiMode::PostUpgrade => "init",
            ApiMode::Update => "update",
            ApiMode::ReplicatedQuery => "replicated query",
            ApiMode::Query => "non replicated query",
            ApiMode::ReplyCallback => "reply callback",
            ApiMode::RejectCallback => "reject callback",
            ApiMode::Cleanup => "cleanup",
            ApiMode::Timer => "system task",
            ApiMode::InspectMessage => "inspect message",
        }
    }
    fn can_call(self) -> bool {
        matches!(
            self,
            ApiMode::Update | ApiMode::ReplyCallback | ApiMode::RejectCallback | ApiMode::Timer
        )
    }
    fn has_arg(self) -> bool {
        matches!(
            self,
            ApiMode::Init
                | ApiMode::PostUpgrade
                | ApiMode::Update
                | ApiMode::ReplicatedQuery
                | ApiMode::Query
                | ApiMode::ReplyCallback
                | ApiMode::InspectMessage
        )
    }
    fn is_callback(self) -> bool {
        matches!(self, ApiMode::ReplyCallback | ApiMode::RejectCallback)
    }
    /// Whether this execution's changes are kept (not a query, not inspect message).
    pub(crate) fn replicated(self) -> bool {
        !matches!(self, ApiMode::Query | ApiMode::InspectMessage)
    }
}

/// Why a message trapped, with the IC's wording.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum TrapCause {
    CalledTrap(String),
    InstructionLimit(u64),
    Contract(String),
    StableOutOfBounds,
    StableTooBigFor32Bit,
    MemoryAccessLimit(String),
}

impl std::fmt::Display for TrapCause {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TrapCause::CalledTrap(m) => write!(f, "Canister called `ic0.trap` with message: '{m}'"),
            TrapCause::InstructionLimit(l) => {
                write!(
                    f,
                    "Canister exceeded the limit of {l} instructions for single message execution."
                )
            }
            TrapCause::Contract(e) => write!(f, "Canister violated contract: {e}"),
            TrapCause::StableOutOfBounds => {
                write!(f, "Canister trapped: stable memory out of bounds")
            }
            TrapCause::StableTooBigFor32Bit => {
                write!(
                    f,
                    "Canister trapped: 32 bit stable memory api used on a memory larger than 4GB"
                )
            }
            TrapCause::MemoryAccessLimit(s) => {
                write!(f, "Canister exceeded memory access limits: {s}")
            }
        }
    }
}

/// A call being assembled (`call_new` .. `call_perform`) or performed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct OutgoingCall {
    pub callee: Vec<u8>,
    pub method: String,
    pub arg: Vec<u8>,
    pub on_reply: (u32, u64),
    pub on_reject: (u32, u64),
    pub on_cleanup: Option<(u32, u64)>,
    pub cycles: u128,
    pub timeout_seconds: Option<u32>,
}

/// Per-message state of the System API.
#[derive(Debug, Clone)]
pub(crate) struct MessageCtx {
    pub mode: ApiMode,
    pub method_name: String,
    pub arg: Vec<u8>,
    pub caller: Vec<u8>,
    /// Reject code and message visible to a reject callback.
    pub reject: Option<(u32, String)>,
    /// The call context can still be replied to.
    pub can_reply: bool,
    pub reply_buf: Vec<u8>,
    /// Largest reply this execution may build (`msg_reply_data_append` traps beyond it).
    pub max_reply_bytes: u64,
    /// `canister_inspect_message` called `ic0.accept_message`.
    pub accepted: bool,
    /// `Reply` or `Reject` once the message answered.
    pub response: Option<MessageResult>,
    pub building: Option<OutgoingCall>,
    pub calls: Vec<OutgoingCall>,
    pub cycles_available: u128,
    pub cycles_accepted: u128,
    pub cycles_refunded: u128,
    pub cycles_burned: u128,
    pub cycles_sent: u128,
    pub limit: u64,
    /// Instructions of earlier executions in the same call context (performance counter 1).
    pub context_instructions: u64,
    pub deadline: u64,
    pub timer: Option<u64>,
    pub certified_data: Option<Vec<u8>>,
    pub logs: Vec<String>,
    log_sizes: VecDeque<usize>,
    log_used: usize,
    /// Largest number of 4 KiB stable pages this message may dirty.
    pub stable_dirty_limit: u64,
    /// Bytes a host function computes and then copies to the heap.
    scratch: Vec<u8>,
}

impl MessageCtx {
    /// A fresh context for an execution of `mode` with instruction limit `limit`.
    pub fn new(mode: ApiMode, limit: u64) -> Self {
        let stable_dirty_limit = match mode {
            ApiMode::Init | ApiMode::PreUpgrade | ApiMode::PostUpgrade | ApiMode::Start => 8 << 30,
            ApiMode::Query => 1 << 30,
            _ => 2 << 30,
        } / OS_PAGE;
        MessageCtx {
            mode,
            method_name: String::new(),
            arg: Vec::new(),
            caller: Vec::new(),
            reject: None,
            can_reply: false,
            reply_buf: Vec::new(),
            max_reply_bytes: u64::MAX,
            accepted: false,
            response: None,
            building: None,
            calls: Vec::new(),
            cycles_available: 0,
            cycles_accepted: 0,
            cycles_refunded: 0,
            cycles_burned: 0,
            cycles_sent: 0,
            limit,
            context_instructions: 0,
            deadline: 0,
            timer: None,
            certified_data: None,
            logs: Vec::new(),
            log_sizes: VecDeque::new(),
            log_used: 0,
            stable_dirty_limit,
            scratch: Vec::new(),
        }
    }

    /// Logging charge (`2·min(len, capacity) + 50·min(len, remaining)`) of a record of `len` bytes.
    fn logging_charge(&self, len: usize) -> u64 {
        let remaining = LOG_CAPACITY - self.log_used;
        (2 * len.min(LOG_CAPACITY) + 50 * len.min(remaining)) as u64
    }

    /// Appends a record to the message's delta log, evicting old records to stay within capacity.
    fn log(&mut self, line: String, len: usize) {
        let size = (len + LOG_RECORD_OVERHEAD).min(LOG_CAPACITY);
        while self.log_used + size > LOG_CAPACITY {
            match self.log_sizes.pop_front() {
                Some(s) => self.log_used -= s,
                None => break,
            }
        }
        self.log_sizes.push_back(size);
        self.log_used += size;
        self.logs.push(line);
    }
}

/// Canister state the System API reads and (on commit) changes.
#[derive(Debug)]
pub(crate) struct SystemState {
    pub canister_id: Vec<u8>,
    pub controllers: Vec<Vec<u8>>,
    pub time: u64,
    /// Global timer deadline; 0 = inactive.
    pub timer: u64,
    pub cycles: u128,
    pub certified_data: Vec<u8>,
    pub version: u64,
    pub debug_print_enabled: bool,
    pub stable: StableMemory,
}

/// The written-page map of the instance's heap (`crate::heap`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct DirtyMapMemory {
    pub memory: Memory,
    pub layout: DirtyMap,
}

/// The wasmtime store data.
pub(crate) struct StoreData {
    pub counter: Option<Global>,
    pub memory: Option<Memory>,
    /// The written-page map, which host functions writing the heap mark.
    pub dirty_map: Option<DirtyMapMemory>,
    /// The current message's profile, when the program is profiled.
    pub profiler: Option<Box<ProfState>>,
    pub sys: SystemState,
    pub msg: MessageCtx,
    pub trap: Option<TrapCause>,
    /// Exported functions of the current instance, by export name.
    pub funcs: std::collections::HashMap<String, wasmtime::Func>,
}

type C<'a> = Caller<'a, StoreData>;
type R<T> = wasmtime::Result<T>;

/// Records the cause and returns the error that unwinds the wasm call.
fn fail(c: &mut C<'_>, cause: TrapCause) -> wasmtime::Error {
    let msg = cause.to_string();
    if c.data().trap.is_none() {
        c.data_mut().trap = Some(cause);
    }
    wasmtime::Error::msg(msg)
}

fn contract(c: &mut C<'_>, msg: String) -> wasmtime::Error {
    fail(c, TrapCause::Contract(msg))
}

fn counter(c: &mut C<'_>) -> R<(Global, i64)> {
    let g = match c.data().counter {
        Some(g) => g,
        None => return Err(contract(c, "instruction counter missing".into())),
    };
    let v = g.get(&mut *c).i64().unwrap_or(0);
    Ok((g, v))
}

/// Charges `amount` instructions; traps when the message limit is exceeded.
fn charge(c: &mut C<'_>, amount: u64) -> R<()> {
    let (g, v) = counter(c)?;
    let limit = c.data().msg.limit;
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

/// Instructions executed so far in this message.
fn executed(c: &mut C<'_>) -> R<u64> {
    let (_, v) = counter(c)?;
    let limit = c.data().msg.limit as i64;
    Ok(limit.saturating_sub(v).max(0) as u64)
}

fn require(c: &mut C<'_>, api: &str, allowed: bool) -> R<()> {
    if allowed {
        Ok(())
    } else {
        let mode = c.data().msg.mode.name();
        Err(contract(
            c,
            format!("\"ic0_{api}\" cannot be executed in {mode} mode"),
        ))
    }
}

/// Byte ranges inside the heap.
fn range(start: u64, len: u64, size: usize) -> Option<std::ops::Range<usize>> {
    let end = start.checked_add(len)?;
    if end > size as u64 {
        return None;
    }
    Some(start as usize..end as usize)
}

fn memory(c: &mut C<'_>) -> R<Memory> {
    match c.data().memory {
        Some(m) => Ok(m),
        None => Err(contract(c, "WebAssembly module must define memory".into())),
    }
}

/// Reads `len` bytes at `src` from the heap.
fn read_heap(c: &mut C<'_>, api: &str, src: u64, len: u64) -> R<Vec<u8>> {
    let mem = memory(c)?;
    let data = mem.data(&*c);
    match range(src, len, data.len()) {
        Some(r) => Ok(data[r].to_vec()),
        None => {
            let size = data.len();
            Err(contract(
                c,
                format!("{api}: src={src} + length={len} exceeds the heap size {size}"),
            ))
        }
    }
}

/// Marks `[start, start + len)` of the heap in the written-page map (host writes).
fn mark_written(c: &mut C<'_>, start: u64, len: u64) {
    if let Some(map) = c.data().dirty_map {
        map.layout
            .mark_range(map.memory.data_mut(&mut *c), start, len);
    }
}

/// Copies `source(data)[offset..offset+size]` to the heap at `dst`.
fn copy_to_heap(
    c: &mut C<'_>,
    api: &str,
    dst: u64,
    offset: u64,
    size: u64,
    source: impl Fn(&StoreData) -> &[u8],
) -> R<()> {
    let mem = memory(c)?;
    let (heap, data) = mem.data_and_store_mut(&mut *c);
    let src = source(data);
    let Some(sr) = range(offset, size, src.len()) else {
        let len = src.len();
        return Err(contract(
            c,
            format!("{api}: offset={offset} + size={size} exceeds the source length {len}"),
        ));
    };
    let Some(dr) = range(dst, size, heap.len()) else {
        let hl = heap.len();
        return Err(contract(
            c,
            format!("{api}: dst={dst} + size={size} exceeds the heap size {hl}"),
        ));
    };
    heap[dr].copy_from_slice(&src[sr]);
    mark_written(c, dst, size);
    Ok(())
}

fn write_heap(c: &mut C<'_>, api: &str, dst: u64, bytes: &[u8]) -> R<()> {
    let mem = memory(c)?;
    let heap = mem.data_mut(&mut *c);
    match range(dst, bytes.len() as u64, heap.len()) {
        Some(r) => {
            heap[r].copy_from_slice(bytes);
            mark_written(c, dst, bytes.len() as u64);
            Ok(())
        }
        None => {
            let hl = heap.len();
            Err(contract(
                c,
                format!("{api}: dst={dst} exceeds the heap size {hl}"),
            ))
        }
    }
}

fn write_u128(c: &mut C<'_>, api: &str, dst: u64, v: u128) -> R<()> {
    write_heap(c, api, dst, &v.to_le_bytes())
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

/// Cycles helper: a u128 from its high and low halves.
fn u128_of(high: u64, low: u64) -> u128 {
    ((high as u128) << 64) | low as u128
}

/// The fee schedule the `ic0.cost_*` functions answer with: a 13-node application subnet.
const FEES: crate::fees::FeeSchedule = crate::fees::IC_2025;
/// Nodes of the subnet the engine imitates, for the `ic0.cost_*` answers.
const NODES: u64 = 13;
/// Instructions a response callback may use, which a call prepays (the update limit).
const CALLBACK_INSTRUCTIONS: u64 = 40_000_000_000;

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
            let limit = c.data().msg.limit;
            Err(fail(&mut c, TrapCause::InstructionLimit(limit)))
        },
    )?;

    // ---- message arguments, caller, method name, rejects ----
    define(linker, "msg_arg_data_size", |mut c: C<'_>| -> R<I> {
        charge(&mut c, overhead::DEFAULT)?;
        let ok = c.data().msg.mode.has_arg();
        require(&mut c, "msg_arg_data_size", ok)?;
        Ok(I::from_u64(c.data().msg.arg.len() as u64))
    })?;
    define(
        linker,
        "msg_arg_data_copy",
        |mut c: C<'_>, dst: I, off: I, size: I| -> R<()> {
            charge(&mut c, overhead::DEFAULT.saturating_add(size.get()))?;
            let ok = c.data().msg.mode.has_arg();
            require(&mut c, "msg_arg_data_copy", ok)?;
            copy_to_heap(
                &mut c,
                "ic0.msg_arg_data_copy",
                dst.get(),
                off.get(),
                size.get(),
                |d| &d.msg.arg,
            )
        },
    )?;
    define(linker, "msg_caller_size", |mut c: C<'_>| -> R<I> {
        charge(&mut c, overhead::DEFAULT)?;
        let ok = c.data().msg.mode != ApiMode::Start;
        require(&mut c, "msg_caller_size", ok)?;
        Ok(I::from_u64(c.data().msg.caller.len() as u64))
    })?;
    define(
        linker,
        "msg_caller_copy",
        |mut c: C<'_>, dst: I, off: I, size: I| -> R<()> {
            charge(&mut c, overhead::DEFAULT.saturating_add(size.get()))?;
            let ok = c.data().msg.mode != ApiMode::Start;
            require(&mut c, "msg_caller_copy", ok)?;
            copy_to_heap(
                &mut c,
                "ic0.msg_caller_copy",
                dst.get(),
                off.get(),
                size.get(),
                |d| &d.msg.caller,
            )
        },
    )?;
    for name in ["msg_caller_info_data_size", "msg_caller_info_signer_size"] {
        define(linker, name, |mut c: C<'_>| -> R<I> {
            charge(&mut c, overhead::DEFAULT)?;
            Ok(I::from_u64(0))
        })?;
    }
    for name in ["msg_caller_info_data_copy", "msg_caller_info_signer_copy"] {
        define(
            linker,
            name,
            |mut c: C<'_>, dst: I, off: I, size: I| -> R<()> {
                charge(&mut c, overhead::DEFAULT.saturating_add(size.get()))?;
                copy_to_heap(
                    &mut c,
                    "ic0.msg_caller_info_copy",
                    dst.get(),
                    off.get(),
                    size.get(),
                    |_| &[],
                )
            },
        )?;
    }
    define(linker, "msg_reject_code", |mut c: C<'_>| -> R<u32> {
        charge(&mut c, overhead::DEFAULT)?;
        let ok = c.data().msg.mode.is_callback();
        require(&mut c, "msg_reject_code", ok)?;
        Ok(c.data().msg.reject.as_ref().map(|r| r.0).unwrap_or(0))
    })?;
    define(linker, "msg_reject_msg_size", |mut c: C<'_>| -> R<I> {
        charge(&mut c, overhead::DEFAULT)?;
        let ok = c.data().msg.mode == ApiMode::RejectCallback;
        require(&mut c, "msg_reject_msg_size", ok)?;
        Ok(I::from_u64(
            c.data().msg.reject.as_ref().map(|r| r.1.len()).unwrap_or(0) as u64,
        ))
    })?;
    define(
        linker,
        "msg_reject_msg_copy",
        |mut c: C<'_>, dst: I, off: I, size: I| -> R<()> {
            charge(&mut c, overhead::DEFAULT.saturating_add(size.get()))?;
            let ok = c.data().msg.mode == ApiMode::RejectCallback;
            require(&mut c, "msg_reject_msg_copy", ok)?;
            copy_to_heap(
                &mut c,
                "ic0.msg_reject_msg_copy",
                dst.get(),
                off.get(),
                size.get(),
                |d| d.msg.reject.as_ref().map(|r| r.1.as_bytes()).unwrap_or(&[]),
            )
        },
    )?;
    define(linker, "msg_method_name_size", |mut c: C<'_>| -> R<I> {
        charge(&mut c, overhead::DEFAULT)?;
        let m = c.data().msg.mode;
        require(
            &mut c,
            "msg_method_name_size",
            matches!(
                m,
                ApiMode::Update
                    | ApiMode::Query
                    | ApiMode::ReplicatedQuery
                    | ApiMode::InspectMessage
            ),
        )?;
        Ok(I::from_u64(c.data().msg.method_name.len() as u64))
    })?;
    define(
        linker,
        "msg_method_name_copy",
        |mut c: C<'_>, dst: I, off: I, size: I| -> R<()> {
            charge(&mut c, overhead::DEFAULT.saturating_add(size.get()))?;
            let m = c.data().msg.mode;
            require(
                &mut c,
                "msg_method_name_copy",
                matches!(
                    m,
                    ApiMode::Update
                        | ApiMode::Query
                        | ApiMode::ReplicatedQuery
                        | ApiMode::InspectMessage
                ),
            )?;
            copy_to_heap(
                &mut c,
                "ic0.msg_method_name_copy",
                dst.get(),
                off.get(),
                size.get(),
                |d| d.msg.method_name.as_bytes(),
            )
        },
    )?;
    define(linker, "msg_deadline", |mut c: C<'_>| -> R<u64> {
        charge(&mut c, overhead::DEFAULT)?;
        Ok(c.data().msg.deadline)
    })?;
    define(linker, "accept_message", |mut c: C<'_>| -> R<()> {
        charge(&mut c, overhead::DEFAULT)?;
        let inspecting = c.data().msg.mode == ApiMode::InspectMessage;
        require(&mut c, "accept_message", inspecting)?;
        if c.data().msg.accepted {
            return Err(contract(
                &mut c,
                "ic0.accept_message: the function was already called.".into(),
            ));
        }
        c.data_mut().msg.accepted = true;
        Ok(())
    })?;

    // ---- replies ----
    define(
        linker,
        "msg_reply_data_append",
        |mut c: C<'_>, src: I, size: I| -> R<()> {
            charge(
                &mut c,
                overhead::DEFAULT
                    .saturating_add(overhead::BYTE_TRANSMISSION.saturating_mul(size.get())),
            )?;
            let ok = c.data().msg.can_reply;
            require(&mut c, "msg_reply_data_append", ok)?;
            let payload = (c.data().msg.reply_buf.len() as u64).saturating_add(size.get());
            let max = c.data().msg.max_reply_bytes;
            if payload > max {
                return Err(contract(
                    &mut c,
                    format!(
                        "ic0.msg_reply_data_append: application payload size ({payload}) cannot be larger than {max}"
                    ),
                ));
            }
            let bytes = read_heap(&mut c, "ic0.msg_reply_data_append", src.get(), size.get())?;
            c.data_mut().msg.reply_buf.extend_from_slice(&bytes);
            Ok(())
        },
    )?;
    define(linker, "msg_reply", |mut c: C<'_>| -> R<()> {
        charge(&mut c, overhead::DEFAULT)?;
        let ok = c.data().msg.can_reply;
        require(&mut c, "msg_reply", ok)?;
        let msg = &mut c.data_mut().msg;
        msg.can_reply = false;
        msg.response = Some(MessageResult::Reply(std::mem::take(&mut msg.reply_buf)));
        Ok(())
    })?;
    define(
        linker,
        "msg_reject",
        |mut c: C<'_>, src: I, size: I| -> R<()> {
            charge(
                &mut c,
                overhead::DEFAULT
                    .saturating_add(overhead::BYTE_TRANSMISSION.saturating_mul(size.get())),
            )?;
            let ok = c.data().msg.can_reply;
            require(&mut c, "msg_reject", ok)?;
            let bytes = read_heap(&mut c, "ic0.msg_reject", src.get(), size.get())?;
            let text = match String::from_utf8(bytes) {
                Ok(t) => t,
                Err(_) => {
                    return Err(contract(
                        &mut c,
                        "ic0.msg_reject: the message is not valid UTF-8".into(),
                    ));
                }
            };
            let msg = &mut c.data_mut().msg;
            msg.can_reply = false;
            msg.response = Some(MessageResult::Reject(
                crate::types::reject_code::CANISTER_REJECT,
                text,
            ));
            Ok(())
        },
    )?;

    // ---- cycles ----
    define(
        linker,
        "msg_cycles_available128",
        |mut c: C<'_>, dst: I| -> R<()> {
            charge(&mut c, overhead::DEFAULT)?;
            let v = c.data().msg.cycles_available - c.data().msg.cycles_accepted;
            write_u128(&mut c, "ic0.msg_cycles_available128", dst.get(), v)
        },
    )?;
    define(linker, "msg_cycles_available", |mut c: C<'_>| -> R<u64> {
        charge(&mut c, overhead::DEFAULT)?;
        let v = c.data().msg.cycles_available - c.data().msg.cycles_accepted;
        Ok(v.min(u64::MAX as u128) as u64)
    })?;
    define(
        linker,
        "msg_cycles_refunded128",
        |mut c: C<'_>, dst: I| -> R<()> {
            charge(&mut c, overhead::DEFAULT)?;
            let v = c.data().msg.cycles_refunded;
            write_u128(&mut c, "ic0.msg_cycles_refunded128", dst.get(), v)
        },
    )?;
    define(linker, "msg_cycles_refunded", |mut c: C<'_>| -> R<u64> {
        charge(&mut c, overhead::DEFAULT)?;
        Ok(c.data().msg.cycles_refunded.min(u64::MAX as u128) as u64)
    })?;
    define(
        linker,
        "msg_cycles_accept128",
        |mut c: C<'_>, high: u64, low: u64, dst: I| -> R<()> {
            charge(&mut c, overhead::DEFAULT)?;
            let msg = &mut c.data_mut().msg;
            let n = u128_of(high, low).min(msg.cycles_available - msg.cycles_accepted);
            msg.cycles_accepted += n;
            write_u128(&mut c, "ic0.msg_cycles_accept128", dst.get(), n)
        },
    )?;
    define(
        linker,
        "msg_cycles_accept",
        |mut c: C<'_>, max: u64| -> R<u64> {
            charge(&mut c, overhead::DEFAULT)?;
            let msg = &mut c.data_mut().msg;
            let n = (max as u128).min(msg.cycles_available - msg.cycles_accepted);
            msg.cycles_accepted += n;
            Ok(n as u64)
        },
    )?;
    define(
        linker,
        "cycles_burn128",
        |mut c: C<'_>, high: u64, low: u64, dst: I| -> R<()> {
            charge(&mut c, overhead::DEFAULT)?;
            let d = c.data_mut();
            let liquid = d
                .sys
                .cycles
                .saturating_sub(d.msg.cycles_burned + d.msg.cycles_sent);
            let n = u128_of(high, low).min(liquid);
            d.msg.cycles_burned += n;
            write_u128(&mut c, "ic0.cycles_burn128", dst.get(), n)
        },
    )?;
    define(
        linker,
        "mint_cycles128",
        |mut c: C<'_>, _high: u64, _low: u64, _dst: I| -> R<()> {
            Err(contract(
                &mut c,
                "ic0.mint_cycles128 may only be called by the cycles minting canister".into(),
            ))
        },
    )?;
    fn balance(d: &StoreData) -> u128 {
        (d.sys.cycles + d.msg.cycles_accepted)
            .saturating_sub(d.msg.cycles_burned + d.msg.cycles_sent)
    }
    define(
        linker,
        "canister_cycle_balance128",
        |mut c: C<'_>, dst: I| -> R<()> {
            charge(&mut c, overhead::DEFAULT)?;
            let v = balance(c.data());
            write_u128(&mut c, "ic0.canister_cycle_balance128", dst.get(), v)
        },
    )?;
    define(
        linker,
        "canister_liquid_cycle_balance128",
        |mut c: C<'_>, dst: I| -> R<()> {
            charge(&mut c, overhead::DEFAULT)?;
            let v = balance(c.data());
            write_u128(&mut c, "ic0.canister_liquid_cycle_balance128", dst.get(), v)
        },
    )?;
    define(linker, "canister_cycle_balance", |mut c: C<'_>| -> R<u64> {
        charge(&mut c, overhead::DEFAULT)?;
        Ok(balance(c.data()).min(u64::MAX as u128) as u64)
    })?;

    // ---- canister and subnet identity ----
    define(linker, "canister_self_size", |mut c: C<'_>| -> R<I> {
        charge(&mut c, overhead::DEFAULT)?;
        Ok(I::from_u64(c.data().sys.canister_id.len() as u64))
    })?;
    define(
        linker,
        "canister_self_copy",
        |mut c: C<'_>, dst: I, off: I, size: I| -> R<()> {
            charge(&mut c, overhead::DEFAULT.saturating_add(size.get()))?;
            copy_to_heap(
                &mut c,
                "ic0.canister_self_copy",
                dst.get(),
                off.get(),
                size.get(),
                |d| &d.sys.canister_id,
            )
        },
    )?;
    define(linker, "canister_status", |mut c: C<'_>| -> R<u32> {
        charge(&mut c, overhead::DEFAULT)?;
        Ok(1)
    })?;
    define(linker, "canister_version", |mut c: C<'_>| -> R<u64> {
        charge(&mut c, overhead::DEFAULT)?;
        Ok(c.data().sys.version)
    })?;
    const SUBNET_ID: &[u8] = &[0x2a; 29];
    define(linker, "subnet_self_size", |mut c: C<'_>| -> R<I> {
        charge(&mut c, overhead::DEFAULT)?;
        Ok(I::from_u64(SUBNET_ID.len() as u64))
    })?;
    define(
        linker,
        "subnet_self_copy",
        |mut c: C<'_>, dst: I, off: I, size: I| -> R<()> {
            charge(&mut c, overhead::DEFAULT.saturating_add(size.get()))?;
            copy_to_heap(
                &mut c,
                "ic0.subnet_self_copy",
                dst.get(),
                off.get(),
                size.get(),
                |_| SUBNET_ID,
            )
        },
    )?;
    define(linker, "subnet_self_node_count", |mut c: C<'_>| -> R<u32> {
        charge(&mut c, overhead::DEFAULT)?;
        Ok(13)
    })?;
    const ROOT_KEY: &[u8] = b"offline-engine root key (not a real BLS key)";
    define(linker, "root_key_size", |mut c: C<'_>| -> R<I> {
        charge(&mut c, overhead::DEFAULT)?;
        Ok(I::from_u64(ROOT_KEY.len() as u64))
    })?;
    define(
        linker,
        "root_key_copy",
        |mut c: C<'_>, dst: I, off: I, size: I| -> R<()> {
            charge(&mut c, overhead::DEFAULT.saturating_add(size.get()))?;
            copy_to_heap(
                &mut c,
                "ic0.root_key_copy",
                dst.get(),
                off.get(),
                size.get(),
                |_| ROOT_KEY,
            )
        },
    )?;
    define(
        linker,
        "is_controller",
        |mut c: C<'_>, src: I, size: I| -> R<u32> {
            charge(&mut c, overhead::IS_CONTROLLER.saturating_add(size.get()))?;
            let p = read_heap(&mut c, "ic0.is_controller", src.get(), size.get())?;
            if p.len() > 29 {
                return Err(contract(
                    &mut c,
                    "ic0.is_controller: the argument is not a valid principal".into(),
                ));
            }
            Ok(c.data().sys.controllers.contains(&p) as u32)
        },
    )?;
    define(
        linker,
        "in_replicated_execution",
        |mut c: C<'_>| -> R<u32> {
            charge(&mut c, overhead::DEFAULT)?;
            Ok(c.data().msg.mode.replicated() as u32)
        },
    )?;

    // ---- certified data ----
    define(
        linker,
        "certified_data_set",
        |mut c: C<'_>, src: I, size: I| -> R<()> {
            charge(&mut c, overhead::DEFAULT.saturating_add(size.get()))?;
            let ok = c.data().msg.mode.replicated();
            require(&mut c, "certified_data_set", ok)?;
            if size.get() > MAX_CERTIFIED_DATA as u64 {
                return Err(contract(
                    &mut c,
                    format!(
                        "ic0.certified_data_set: the certified data is larger than {MAX_CERTIFIED_DATA} bytes"
                    ),
                ));
            }
            let bytes = read_heap(&mut c, "ic0.certified_data_set", src.get(), size.get())?;
            c.data_mut().msg.certified_data = Some(bytes);
            Ok(())
        },
    )?;
    fn certificate(d: &StoreData) -> Vec<u8> {
        let mut v = b"offline-engine certificate:".to_vec();
        v.extend_from_slice(&d.sys.certified_data);
        v
    }
    define(
        linker,
        "data_certificate_present",
        |mut c: C<'_>| -> R<u32> {
            charge(&mut c, overhead::DEFAULT)?;
            Ok((c.data().msg.mode == ApiMode::Query) as u32)
        },
    )?;
    define(linker, "data_certificate_size", |mut c: C<'_>| -> R<I> {
        charge(&mut c, overhead::DEFAULT)?;
        let ok = c.data().msg.mode == ApiMode::Query;
        require(&mut c, "data_certificate_size", ok)?;
        Ok(I::from_u64(certificate(c.data()).len() as u64))
    })?;
    define(
        linker,
        "data_certificate_copy",
        |mut c: C<'_>, dst: I, off: I, size: I| -> R<()> {
            charge(&mut c, overhead::DEFAULT.saturating_add(size.get()))?;
            let ok = c.data().msg.mode == ApiMode::Query;
            require(&mut c, "data_certificate_copy", ok)?;
            let cert = certificate(c.data());
            c.data_mut().msg.scratch = cert;
            copy_to_heap(
                &mut c,
                "ic0.data_certificate_copy",
                dst.get(),
                off.get(),
                size.get(),
                |d| &d.msg.scratch,
            )
        },
    )?;

    // ---- time, timer, performance counter ----
    define(linker, "time", |mut c: C<'_>| -> R<u64> {
        charge(&mut c, overhead::DEFAULT)?;
        Ok(c.data().sys.time)
    })?;
    define(
        linker,
        "global_timer_set",
        |mut c: C<'_>, t: u64| -> R<u64> {
            charge(&mut c, overhead::DEFAULT)?;
            let ok = c.data().msg.mode != ApiMode::Start;
            require(&mut c, "global_timer_set", ok)?;
            let d = c.data_mut();
            let previous = d.msg.timer.unwrap_or(d.sys.timer);
            d.msg.timer = Some(t);
            Ok(previous)
        },
    )?;
    define(
        linker,
        "performance_counter",
        |mut c: C<'_>, kind: u32| -> R<u64> {
            charge(&mut c, overhead::PERFORMANCE_COUNTER)?;
            let n = executed(&mut c)?;
            match kind {
                0 => Ok(n),
                1 => Ok(c.data().msg.context_instructions + n),
                other => Err(contract(
                    &mut c,
                    format!("Error getting performance counter type {other}"),
                )),
            }
        },
    )?;

    // ---- inter-canister calls ----
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
            charge(
                &mut c,
                overhead::CALL_NEW
                    .saturating_add(callee_size.get())
                    .saturating_add(name_len.get()),
            )?;
            let ok = c.data().msg.mode.can_call();
            require(&mut c, "call_new", ok)?;
            let callee = read_heap(&mut c, "ic0.call_new", callee_src.get(), callee_size.get())?;
            let name = read_heap(&mut c, "ic0.call_new", name_src.get(), name_len.get())?;
            let method = match String::from_utf8(name) {
                Ok(m) => m,
                Err(_) => {
                    return Err(contract(
                        &mut c,
                        "ic0.call_new: the method name is not valid UTF-8".into(),
                    ));
                }
            };
            c.data_mut().msg.building = Some(OutgoingCall {
                callee,
                method,
                arg: Vec::new(),
                on_reply: (reply_fun.get().min(u32::MAX as u64) as u32, reply_env.get()),
                on_reject: (
                    reject_fun.get().min(u32::MAX as u64) as u32,
                    reject_env.get(),
                ),
                on_cleanup: None,
                cycles: 0,
                timeout_seconds: None,
            });
            Ok(())
        },
    )?;
    define(
        linker,
        "call_data_append",
        |mut c: C<'_>, src: I, size: I| -> R<()> {
            charge(
                &mut c,
                overhead::DEFAULT
                    .saturating_add(overhead::BYTE_TRANSMISSION.saturating_mul(size.get())),
            )?;
            if c.data().msg.building.is_none() {
                return Err(contract(
                    &mut c,
                    "ic0.call_data_append: no call is being built".into(),
                ));
            }
            let bytes = read_heap(&mut c, "ic0.call_data_append", src.get(), size.get())?;
            if let Some(b) = c.data_mut().msg.building.as_mut() {
                b.arg.extend_from_slice(&bytes);
            }
            Ok(())
        },
    )?;
    define(
        linker,
        "call_on_cleanup",
        |mut c: C<'_>, fun: I, env: I| -> R<()> {
            charge(&mut c, overhead::DEFAULT)?;
            match c.data_mut().msg.building.as_mut() {
                Some(b) if b.on_cleanup.is_none() => {
                    b.on_cleanup = Some((fun.get().min(u32::MAX as u64) as u32, env.get()));
                    Ok(())
                }
                Some(_) => Err(contract(
                    &mut c,
                    "ic0.call_on_cleanup: called twice for the same call".into(),
                )),
                None => Err(contract(
                    &mut c,
                    "ic0.call_on_cleanup: no call is being built".into(),
                )),
            }
        },
    )?;
    define(
        linker,
        "call_with_best_effort_response",
        |mut c: C<'_>, timeout: u32| -> R<()> {
            charge(&mut c, overhead::DEFAULT)?;
            match c.data_mut().msg.building.as_mut() {
                Some(b) if b.timeout_seconds.is_none() => {
                    b.timeout_seconds = Some(timeout.clamp(1, 300));
                    Ok(())
                }
                Some(_) => Err(contract(
                    &mut c,
                    "ic0.call_with_best_effort_response: called twice".into(),
                )),
                None => Err(contract(
                    &mut c,
                    "ic0.call_with_best_effort_response: no call is being built".into(),
                )),
            }
        },
    )?;
    fn add_cycles(c: &mut C<'_>, amount: u128) -> R<()> {
        let d = c.data_mut();
        let liquid = (d.sys.cycles + d.msg.cycles_accepted)
            .saturating_sub(d.msg.cycles_burned + d.msg.cycles_sent);
        if d.msg.building.is_none() {
            return Err(contract(
                c,
                "ic0.call_cycles_add: no call is being built".into(),
            ));
        }
        if amount > liquid {
            return Err(contract(c, "ic0.call_cycles_add: not enough cycles".into()));
        }
        d.msg.cycles_sent += amount;
        if let Some(b) = d.msg.building.as_mut() {
            b.cycles += amount;
        }
        Ok(())
    }
    define(
        linker,
        "call_cycles_add128",
        |mut c: C<'_>, high: u64, low: u64| -> R<()> {
            charge(&mut c, overhead::DEFAULT)?;
            add_cycles(&mut c, u128_of(high, low))
        },
    )?;
    define(
        linker,
        "call_cycles_add",
        |mut c: C<'_>, amount: u64| -> R<()> {
            charge(&mut c, overhead::DEFAULT)?;
            add_cycles(&mut c, amount as u128)
        },
    )?;
    define(linker, "call_perform", |mut c: C<'_>| -> R<u32> {
        charge(&mut c, overhead::CALL_PERFORM)?;
        let ok = c.data().msg.mode.can_call();
        require(&mut c, "call_perform", ok)?;
        match c.data_mut().msg.building.take() {
            Some(call) => {
                c.data_mut().msg.calls.push(call);
                Ok(0)
            }
            None => Err(contract(
                &mut c,
                "ic0.call_perform: no call is being built".into(),
            )),
        }
    })?;
    define(
        linker,
        "cost_call",
        |mut c: C<'_>, method_len: u64, payload_len: u64, dst: I| -> R<()> {
            charge(&mut c, overhead::DEFAULT)?;
            write_u128(
                &mut c,
                "ic0.cost_call",
                dst.get(),
                FEES.cost_call(method_len, payload_len, CALLBACK_INSTRUCTIONS, NODES),
            )
        },
    )?;
    define(
        linker,
        "cost_create_canister",
        |mut c: C<'_>, dst: I| -> R<()> {
            charge(&mut c, overhead::DEFAULT)?;
            write_u128(
                &mut c,
                "ic0.cost_create_canister",
                dst.get(),
                FEES.scale(FEES.canister_creation_fee, NODES),
            )
        },
    )?;
    define(
        linker,
        "cost_http_request",
        |mut c: C<'_>, request: u64, max_response: u64, dst: I| -> R<()> {
            charge(&mut c, overhead::DEFAULT)?;
            let cost = FEES.http_request_cost(request, max_response, NODES);
            write_u128(&mut c, "ic0.cost_http_request", dst.get(), cost)
        },
    )?;
    define(
        linker,
        "cost_http_request_v2",
        |mut c: C<'_>, _src: I, _size: I, dst: I| -> R<()> {
            charge(&mut c, overhead::COST_HTTP_REQUEST_V2)?;
            write_u128(
                &mut c,
                "ic0.cost_http_request_v2",
                dst.get(),
                FEES.http_request_cost(0, 0, NODES),
            )
        },
    )?;
    for name in [
        "cost_sign_with_ecdsa",
        "cost_sign_with_schnorr",
        "cost_vetkd_derive_key",
    ] {
        define(
            linker,
            name,
            |mut c: C<'_>, _src: I, size: I, _curve: u32, dst: I| -> R<u32> {
                charge(&mut c, overhead::DEFAULT.saturating_add(size.get()))?;
                write_u128(
                    &mut c,
                    "ic0.cost_sign",
                    dst.get(),
                    FEES.scale(FEES.threshold_signature_fee, NODES),
                )?;
                Ok(0)
            },
        )?;
    }

    // ---- environment variables (none are set) ----
    define(linker, "env_var_count", |mut c: C<'_>| -> R<I> {
        charge(&mut c, overhead::DEFAULT)?;
        Ok(I::from_u64(0))
    })?;
    define(
        linker,
        "env_var_name_size",
        |mut c: C<'_>, index: I| -> R<I> {
            charge(&mut c, overhead::DEFAULT)?;
            Err(contract(
                &mut c,
                format!(
                    "Environment variable index {} is out of bounds. The number of environment variables is 0.",
                    index.get()
                ),
            ))
        },
    )?;
    define(
        linker,
        "env_var_name_copy",
        |mut c: C<'_>, index: I, _dst: I, _off: I, size: I| -> R<()> {
            charge(&mut c, overhead::DEFAULT.saturating_add(size.get()))?;
            Err(contract(
                &mut c,
                format!(
                    "Environment variable index {} is out of bounds. The number of environment variables is 0.",
                    index.get()
                ),
            ))
        },
    )?;
    define(
        linker,
        "env_var_name_exists",
        |mut c: C<'_>, _src: I, _size: I| -> R<u32> {
            charge(&mut c, overhead::DEFAULT)?;
            Ok(0)
        },
    )?;
    define(
        linker,
        "env_var_value_size",
        |mut c: C<'_>, src: I, size: I| -> R<I> {
            charge(&mut c, overhead::DEFAULT)?;
            let name = read_heap(&mut c, "ic0.env_var_value_size", src.get(), size.get())?;
            Err(contract(
                &mut c,
                format!(
                    "Environment variable {} not found.",
                    String::from_utf8_lossy(&name)
                ),
            ))
        },
    )?;
    define(
        linker,
        "env_var_value_copy",
        |mut c: C<'_>, src: I, name_size: I, _dst: I, _off: I, size: I| -> R<()> {
            charge(&mut c, overhead::DEFAULT.saturating_add(size.get()))?;
            let name = read_heap(&mut c, "ic0.env_var_value_copy", src.get(), name_size.get())?;
            Err(contract(
                &mut c,
                format!(
                    "Environment variable {} not found.",
                    String::from_utf8_lossy(&name)
                ),
            ))
        },
    )?;

    // ---- debug_print and trap ----
    define(
        linker,
        "debug_print",
        |mut c: C<'_>, src: I, size: I| -> R<()> {
            let len = size.get().min(usize::MAX as u64) as usize;
            let mut n = c.data().msg.logging_charge(len);
            if c.data().sys.debug_print_enabled {
                n += len as u64;
            }
            charge(&mut c, overhead::DEBUG_PRINT.saturating_add(n))?;
            // The replica ignores out-of-bounds debug prints rather than trapping.
            let mem = memory(&mut c)?;
            let text = {
                let heap = mem.data(&c);
                match range(src.get(), size.get(), heap.len()) {
                    Some(r) => String::from_utf8_lossy(&heap[r]).into_owned(),
                    None => String::from("(debug_print: out of bounds)"),
                }
            };
            c.data_mut().msg.log(text, len);
            Ok(())
        },
    )?;
    define(linker, "trap", |mut c: C<'_>, src: I, size: I| -> R<()> {
        let len = size.get().min(usize::MAX as u64) as usize;
        let n = (len as u64).saturating_add(c.data().msg.logging_charge(len));
        charge(&mut c, overhead::DEFAULT.saturating_add(n))?;
        let bytes = read_heap(&mut c, "ic0.trap", src.get(), size.get())?;
        let text = String::from_utf8_lossy(&bytes).into_owned();
        c.data_mut().msg.log(format!("[TRAP]: {text}"), len);
        Err(fail(&mut c, TrapCause::CalledTrap(text)))
    })?;

    // ---- stable memory ----
    fn stable_read(c: &mut C<'_>, dst: u64, offset: u64, len: u64, api32: bool) -> R<()> {
        charge(c, overhead::STABLE_READ_WRITE.saturating_add(len))?;
        if len == 0 {
            return Ok(());
        }
        if api32 && c.data().sys.stable.size_pages() > MAX_32BIT_WASM_PAGES {
            return Err(fail(c, TrapCause::StableTooBigFor32Bit));
        }
        let mem = memory(c)?;
        let (heap, data) = mem.data_and_store_mut(&mut *c);
        let Some(r) = range(dst, len, heap.len()) else {
            return Err(fail(
                c,
                TrapCause::Contract(format!(
                    "ic0.stable_read: dst={dst} + size={len} exceeds the heap size"
                )),
            ));
        };
        match data.sys.stable.read(offset, &mut heap[r]) {
            Ok(()) => {
                mark_written(c, dst, len);
                Ok(())
            }
            Err(OutOfBounds) => Err(fail(c, TrapCause::StableOutOfBounds)),
        }
    }
    fn stable_write(c: &mut C<'_>, offset: u64, src: u64, len: u64, api32: bool) -> R<()> {
        charge(c, overhead::STABLE_READ_WRITE.saturating_add(len))?;
        if len == 0 {
            return Ok(());
        }
        if api32 && c.data().sys.stable.size_pages() > MAX_32BIT_WASM_PAGES {
            return Err(fail(c, TrapCause::StableTooBigFor32Bit));
        }
        let in_bounds = offset
            .checked_add(len)
            .is_some_and(|e| e <= c.data().sys.stable.size_bytes());
        if !in_bounds {
            return Err(fail(c, TrapCause::StableOutOfBounds));
        }
        let new_pages = c.data().sys.stable.new_dirty_pages(offset, len);
        let total = c.data().sys.stable.dirty_pages() + new_pages;
        if total > c.data().msg.stable_dirty_limit {
            let limit = c.data().msg.stable_dirty_limit * OS_PAGE / 1024;
            return Err(fail(
                c,
                TrapCause::MemoryAccessLimit(format!(
                    "Exceeded the limit for the number of modified pages in the stable memory in a single execution: limit {limit} KB"
                )),
            ));
        }
        charge(c, overhead::STABLE_DIRTY_PAGE.saturating_mul(new_pages))?;
        let mem = memory(c)?;
        let (heap, data) = mem.data_and_store_mut(&mut *c);
        let Some(r) = range(src, len, heap.len()) else {
            return Err(fail(
                c,
                TrapCause::Contract(format!(
                    "ic0.stable_write: src={src} + size={len} exceeds the heap size"
                )),
            ));
        };
        match data.sys.stable.write(offset, &heap[r]) {
            Ok(()) => Ok(()),
            Err(OutOfBounds) => Err(fail(c, TrapCause::StableOutOfBounds)),
        }
    }
    define(linker, "stable_size", |mut c: C<'_>| -> R<u32> {
        let n = c.data().sys.stable.size_pages();
        if n > MAX_32BIT_WASM_PAGES {
            return Err(fail(&mut c, TrapCause::StableTooBigFor32Bit));
        }
        Ok(n as u32)
    })?;
    define(linker, "stable64_size", |c: C<'_>| -> R<u64> {
        Ok(c.data().sys.stable.size_pages())
    })?;
    define(
        linker,
        "stable_grow",
        |mut c: C<'_>, pages: u32| -> R<i32> {
            charge(&mut c, overhead::STABLE_GROW)?;
            let stable = &mut c.data_mut().sys.stable;
            if stable.size_pages() > MAX_32BIT_WASM_PAGES {
                return Err(fail(&mut c, TrapCause::StableTooBigFor32Bit));
            }
            Ok(stable.grow(pages as u64, MAX_32BIT_WASM_PAGES) as i32)
        },
    )?;
    define(
        linker,
        "stable64_grow",
        |mut c: C<'_>, pages: u64| -> R<i64> {
            charge(&mut c, overhead::STABLE_GROW)?;
            Ok(c.data_mut().sys.stable.grow(pages, MAX_STABLE_WASM_PAGES))
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

    #[test]
    fn linker_defines_every_listed_function() {
        let engine = wasmtime::Engine::default();
        let mut linker: Linker<StoreData> = Linker::new(&engine);
        add_to_linker::<u32>(&mut linker).unwrap();
        let defined: Vec<String> = linker
            .iter(&mut wasmtime::Store::new(&engine, test_data()))
            .filter(|(m, _, _)| *m == "ic0")
            .map(|(_, n, _)| n.to_string())
            .collect();
        for f in IC0_FUNCTIONS {
            assert!(defined.iter().any(|d| d == f), "{f} listed but not defined");
        }
        for d in &defined {
            assert!(
                IC0_FUNCTIONS.contains(&d.as_str()),
                "{d} defined but not listed"
            );
        }
        let mut linker64: Linker<StoreData> = Linker::new(&engine);
        add_to_linker::<u64>(&mut linker64).unwrap();
    }

    fn test_data() -> StoreData {
        StoreData {
            counter: None,
            memory: None,
            dirty_map: None,
            profiler: None,
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
            },
            msg: MessageCtx::new(ApiMode::Update, 0),
            trap: None,
            funcs: Default::default(),
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
