//! The `ic0` System API: what every function does, in the replica's shape. The host functions
//! themselves are thin registrations (`src/linker.rs`): each charges the named cost of
//! [`complexity`] and delegates to a method of `SystemApi` here, which first checks that the
//! kind of execution may call the function ([`mod@availability`]) and then does its work on the
//! message's and the canister's state and on the heap it is given. Nothing here touches
//! wasmtime, the instruction counter or the profiler.
//!
//! Stable memory is kept in [`crate::stable::StableMemory`] (charged as the replica's
//! Wasm-native stable memory: `len + 20`, plus 1,000 per newly dirtied 4 KiB page for writes,
//! 100 for grow, 0 for size).

pub mod availability;
pub mod complexity;

use std::collections::VecDeque;

use availability::allowed;
pub use availability::{ApiType, Kinds, MATRIX, availability, not_available_message};

use crate::fees::{FeeSchedule, IC_2025};
use crate::stable::{MAX_32BIT_WASM_PAGES, OS_PAGE, OutOfBounds, StableMemory};
use crate::types::{MessageResult, reject_code};

/// Every `ic0` function the engine provides. A module importing anything else fails at load.
pub fn ic0_functions() -> impl Iterator<Item = &'static str> {
    MATRIX.iter().map(|(name, _)| *name)
}

/// Accepts `ic0.<known function>` imports; refuses everything else with a hint.
pub fn check_import(module: &str, name: &str) -> Result<(), String> {
    if module == "ic0" {
        if availability(name).is_some() {
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

/// Canister log capacity used for the logging charge of `debug_print` and `trap`.
const LOG_CAPACITY: usize = 4096;
/// Bytes a log record takes besides its content (index and timestamp).
const LOG_RECORD_OVERHEAD: usize = 16;
/// Largest certified data.
const MAX_CERTIFIED_DATA: usize = 32;
/// Longest timeout of a call with a best-effort response (`MAX_CALL_TIMEOUT_SECONDS`).
pub const MAX_CALL_TIMEOUT_SECONDS: u32 = 300;
/// The subnet id `ic0.subnet_self_copy` answers (the engine's own).
const SUBNET_ID: &[u8] = &[0x2a; 29];
/// The root key `ic0.root_key_copy` answers (not a real BLS key).
const ROOT_KEY: &[u8] = b"offline-engine root key (not a real BLS key)";
/// The fee schedule the `ic0.cost_*` functions answer with: a 13-node application subnet.
const FEES: FeeSchedule = IC_2025;
/// Nodes of the subnet the engine imitates, for the `ic0.cost_*` answers.
const NODES: u64 = 13;
/// Instructions a response callback may use, which a call prepays (the update limit).
const CALLBACK_INSTRUCTIONS: u64 = 40_000_000_000;

/// Why a message trapped, with the IC's wording.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum TrapCause {
    CalledTrap(String),
    InstructionLimit(u64),
    Contract(String),
    StableOutOfBounds,
    StableTooBigFor32Bit,
    MemoryAccessLimit(String),
    /// The heap grew beyond the canister's `wasm_memory_limit` (`bytes` the size it asked for).
    WasmMemoryLimitExceeded {
        bytes: u64,
        limit: u64,
    },
    /// The heap grew beyond what the canister's memory allocation leaves.
    OutOfMemory,
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
            // `HypervisorError::WasmMemoryLimitExceeded` and `OutOfMemory` in the replica's
            // `rs/interfaces/src/execution_environment/errors.rs`.
            TrapCause::WasmMemoryLimitExceeded { bytes, limit } => write!(
                f,
                "Canister exceeded its current Wasm memory limit of {limit} bytes. \
                 The peak Wasm memory usage was {bytes} bytes. \
                 If the canister reaches 4GiB, then it may stop functioning and may become unrecoverable. \
                 Please reach out to the canister owner to investigate the reason for the increased memory usage. \
                 It might be necessary to move data from the Wasm memory to the stable memory. \
                 If such high Wasm memory usage is expected and safe, then the developer can increase \
                 the Wasm memory limit in the canister settings."
            ),
            TrapCause::OutOfMemory => write!(f, "Canister cannot grow its memory usage."),
        }
    }
}

type Api<T> = Result<T, TrapCause>;

fn contract(msg: impl Into<String>) -> TrapCause {
    TrapCause::Contract(msg.into())
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
    pub api_type: ApiType,
    pub method_name: String,
    pub arg: Vec<u8>,
    pub caller: Vec<u8>,
    /// Reject code and message visible to a reject callback.
    pub reject: Option<(u32, String)>,
    /// The call context was answered by an earlier execution.
    pub already_replied: bool,
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
}

impl MessageCtx {
    /// A fresh context for an execution of kind `api_type` with instruction limit `limit`.
    pub fn new(api_type: ApiType, limit: u64) -> Self {
        // The start function runs in the install message, whose limit it shares.
        let stable_dirty_limit = match api_type {
            ApiType::Init | ApiType::PreUpgrade | ApiType::Start => 8 << 30,
            ApiType::NonReplicatedQuery | ApiType::CompositeQuery => 1 << 30,
            _ => 2 << 30,
        } / OS_PAGE;
        MessageCtx {
            api_type,
            method_name: String::new(),
            arg: Vec::new(),
            caller: Vec::new(),
            reject: None,
            already_replied: false,
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
        }
    }

    /// Logging charge (`2·min(len, capacity) + 50·min(len, remaining)`) of a record of `len` bytes.
    pub fn logging_charge(&self, len: usize) -> u64 {
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
#[derive(Debug, Clone)]
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
    /// Most stable memory the canister may have, in 64 KiB pages.
    pub max_stable_pages: u64,
    /// The memory allocation in bytes (0: none): heap, stable memory and module together may
    /// not grow beyond it.
    pub memory_allocation: u64,
    /// Size of the installed module, which counts towards the memory allocation.
    pub module_bytes: u64,
}

/// The System API of one canister: its state, the current message's, and why the message
/// trapped (if it did).
#[derive(Debug)]
pub(crate) struct SystemApi {
    pub sys: SystemState,
    pub msg: MessageCtx,
    pub trap: Option<TrapCause>,
}

/// Byte ranges inside a buffer of `size` bytes.
fn range(start: u64, len: u64, size: usize) -> Option<std::ops::Range<usize>> {
    let end = start.checked_add(len)?;
    if end > size as u64 {
        return None;
    }
    Some(start as usize..end as usize)
}

/// A range of the heap a System API function read or wrote (its bytes, not its bounds check):
/// what the deterministic memory tracker charges when the host touches the heap
/// (`crate::tracker`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct HeapTouch {
    pub start: u64,
    pub len: u64,
    pub write: bool,
}

/// The heap as the System API functions see it: its bytes, and the record of the ranges they
/// read and write ([`HeapTouch`]).
pub(crate) struct Heap<'a> {
    bytes: &'a mut [u8],
    touches: &'a mut Vec<HeapTouch>,
}

impl<'a> Heap<'a> {
    /// `bytes`, recording into `touches`.
    pub fn new(bytes: &'a mut [u8], touches: &'a mut Vec<HeapTouch>) -> Self {
        Heap { bytes, touches }
    }

    fn touch(&mut self, start: u64, len: u64, write: bool) {
        self.touches.push(HeapTouch { start, len, write });
    }

    /// The `len` bytes at `src`, if they lie within the heap (recorded as read).
    fn get(&mut self, src: u64, len: u64) -> Option<&[u8]> {
        let r = range(src, len, self.bytes.len())?;
        self.touch(src, len, false);
        Some(&self.bytes[r])
    }

    /// The `len` bytes at `dst` to write, if they lie within the heap (recorded as written).
    fn get_mut(&mut self, dst: u64, len: u64) -> Option<&mut [u8]> {
        let r = range(dst, len, self.bytes.len())?;
        self.touch(dst, len, true);
        Some(&mut self.bytes[r])
    }

    /// Reads `len` bytes at `src` from the heap.
    fn read(&mut self, api: &str, src: u64, len: u64) -> Api<&[u8]> {
        let size = self.bytes.len();
        self.get(src, len).ok_or_else(|| {
            contract(format!(
                "{api}: src={src} + length={len} exceeds the heap size {size}"
            ))
        })
    }

    /// Copies `source[offset..offset+size]` to the heap at `dst`.
    fn copy_in(&mut self, api: &str, dst: u64, offset: u64, size: u64, source: &[u8]) -> Api<()> {
        let Some(sr) = range(offset, size, source.len()) else {
            return Err(contract(format!(
                "{api}: offset={offset} + size={size} exceeds the source length {}",
                source.len()
            )));
        };
        let heap_size = self.bytes.len();
        let Some(d) = self.get_mut(dst, size) else {
            return Err(contract(format!(
                "{api}: dst={dst} + size={size} exceeds the heap size {heap_size}"
            )));
        };
        d.copy_from_slice(&source[sr]);
        Ok(())
    }

    fn write(&mut self, api: &str, dst: u64, bytes: &[u8]) -> Api<()> {
        let heap_size = self.bytes.len();
        match self.get_mut(dst, bytes.len() as u64) {
            Some(d) => {
                d.copy_from_slice(bytes);
                Ok(())
            }
            None => Err(contract(format!(
                "{api}: dst={dst} exceeds the heap size {heap_size}"
            ))),
        }
    }
}

/// Cycles helper: a u128 from its high and low halves.
pub(crate) fn u128_of(high: u64, low: u64) -> u128 {
    ((high as u128) << 64) | low as u128
}

fn closure(fun: u64, env: u64) -> (u32, u64) {
    (fun.min(u32::MAX as u64) as u32, env)
}

fn certificate(sys: &SystemState) -> Vec<u8> {
    let mut v = b"offline-engine certificate:".to_vec();
    v.extend_from_slice(&sys.certified_data);
    v
}

impl SystemApi {
    /// Traps with the replica's message unless the current kind of execution may call
    /// `function`.
    fn require(&self, function: &str, kinds: Kinds) -> Api<()> {
        let kind = self.msg.api_type;
        if kinds.contains(kind) {
            Ok(())
        } else {
            Err(contract(not_available_message(function, kind)))
        }
    }

    /// The cycle balance as the canister sees it during the message.
    fn balance(&self) -> u128 {
        (self.sys.cycles + self.msg.cycles_accepted)
            .saturating_sub(self.msg.cycles_burned + self.msg.cycles_sent)
    }

    // ---- message arguments, caller, method name, rejects ----

    pub fn msg_arg_data_size(&self) -> Api<u64> {
        self.require("msg_arg_data_size", allowed::MSG_ARG_DATA)?;
        Ok(self.msg.arg.len() as u64)
    }

    pub fn msg_arg_data_copy(&self, dst: u64, off: u64, size: u64, heap: &mut Heap<'_>) -> Api<()> {
        self.require("msg_arg_data_copy", allowed::MSG_ARG_DATA)?;
        heap.copy_in("ic0.msg_arg_data_copy", dst, off, size, &self.msg.arg)
    }

    pub fn msg_caller_size(&self) -> Api<u64> {
        self.require("msg_caller_size", allowed::MSG_CALLER)?;
        Ok(self.msg.caller.len() as u64)
    }

    pub fn msg_caller_copy(&self, dst: u64, off: u64, size: u64, heap: &mut Heap<'_>) -> Api<()> {
        self.require("msg_caller_copy", allowed::MSG_CALLER)?;
        heap.copy_in("ic0.msg_caller_copy", dst, off, size, &self.msg.caller)
    }

    /// `msg_caller_info_data_size` and `msg_caller_info_signer_size`: no caller information.
    pub fn msg_caller_info_size(&self, function: &str) -> Api<u64> {
        self.require(function, allowed::MSG_CALLER_INFO)?;
        Ok(0)
    }

    /// `msg_caller_info_data_copy` and `msg_caller_info_signer_copy`.
    pub fn msg_caller_info_copy(
        &self,
        function: &str,
        dst: u64,
        off: u64,
        size: u64,
        heap: &mut Heap<'_>,
    ) -> Api<()> {
        self.require(function, allowed::MSG_CALLER_INFO)?;
        heap.copy_in("ic0.msg_caller_info_copy", dst, off, size, &[])
    }

    pub fn msg_reject_code(&self) -> Api<u32> {
        self.require("msg_reject_code", allowed::MSG_REJECT_CODE)?;
        Ok(self.msg.reject.as_ref().map(|r| r.0).unwrap_or(0))
    }

    fn reject_message(&self) -> &[u8] {
        self.msg
            .reject
            .as_ref()
            .map(|r| r.1.as_bytes())
            .unwrap_or(&[])
    }

    pub fn msg_reject_msg_size(&self) -> Api<u64> {
        self.require("msg_reject_msg_size", allowed::MSG_REJECT_MSG)?;
        Ok(self.reject_message().len() as u64)
    }

    pub fn msg_reject_msg_copy(
        &self,
        dst: u64,
        off: u64,
        size: u64,
        heap: &mut Heap<'_>,
    ) -> Api<()> {
        self.require("msg_reject_msg_copy", allowed::MSG_REJECT_MSG)?;
        let source = self.reject_message();
        heap.copy_in("ic0.msg_reject_msg_copy", dst, off, size, source)
    }

    pub fn msg_method_name_size(&self) -> Api<u64> {
        self.require("msg_method_name_size", allowed::INSPECT_MESSAGE)?;
        Ok(self.msg.method_name.len() as u64)
    }

    pub fn msg_method_name_copy(
        &self,
        dst: u64,
        off: u64,
        size: u64,
        heap: &mut Heap<'_>,
    ) -> Api<()> {
        self.require("msg_method_name_copy", allowed::INSPECT_MESSAGE)?;
        let name = self.msg.method_name.as_bytes();
        heap.copy_in("ic0.msg_method_name_copy", dst, off, size, name)
    }

    pub fn msg_deadline(&self) -> Api<u64> {
        self.require("msg_deadline", allowed::MSG_DEADLINE)?;
        Ok(self.msg.deadline)
    }

    pub fn accept_message(&mut self) -> Api<()> {
        self.require("accept_message", allowed::INSPECT_MESSAGE)?;
        if self.msg.accepted {
            return Err(contract(
                "ic0.accept_message: the function was already called.",
            ));
        }
        self.msg.accepted = true;
        Ok(())
    }

    // ---- replies ----

    /// Traps unless the call context can still be answered.
    fn require_not_replied(&self, function: &str) -> Api<()> {
        if self.msg.already_replied || self.msg.response.is_some() {
            Err(contract(format!(
                "ic0.{function}: the call is already replied"
            )))
        } else {
            Ok(())
        }
    }

    pub fn msg_reply_data_append(&mut self, src: u64, size: u64, heap: &mut Heap<'_>) -> Api<()> {
        self.require("msg_reply_data_append", allowed::MSG_REPLY)?;
        self.require_not_replied("msg_reply_data_append")?;
        let payload = (self.msg.reply_buf.len() as u64).saturating_add(size);
        let max = self.msg.max_reply_bytes;
        if payload > max {
            return Err(contract(format!(
                "ic0.msg_reply_data_append: application payload size ({payload}) cannot be larger than {max}"
            )));
        }
        let bytes = heap.read("ic0.msg_reply_data_append", src, size)?;
        self.msg.reply_buf.extend_from_slice(bytes);
        Ok(())
    }

    pub fn msg_reply(&mut self) -> Api<()> {
        self.require("msg_reply", allowed::MSG_REPLY)?;
        self.require_not_replied("msg_reply")?;
        let data = std::mem::take(&mut self.msg.reply_buf);
        self.msg.response = Some(MessageResult::Reply(data));
        Ok(())
    }

    pub fn msg_reject(&mut self, src: u64, size: u64, heap: &mut Heap<'_>) -> Api<()> {
        self.require("msg_reject", allowed::MSG_REPLY)?;
        self.require_not_replied("msg_reject")?;
        let bytes = heap.read("ic0.msg_reject", src, size)?;
        let text = String::from_utf8(bytes.to_vec())
            .map_err(|_| contract("ic0.msg_reject: the message is not valid UTF-8"))?;
        self.msg.response = Some(MessageResult::Reject(reject_code::CANISTER_REJECT, text));
        Ok(())
    }

    // ---- cycles ----

    pub fn msg_cycles_available(&self, function: &str) -> Api<u128> {
        self.require(function, allowed::MSG_CYCLES_AVAILABLE)?;
        Ok(self.msg.cycles_available - self.msg.cycles_accepted)
    }

    pub fn msg_cycles_refunded(&self, function: &str) -> Api<u128> {
        self.require(function, allowed::MSG_CYCLES_REFUNDED)?;
        Ok(self.msg.cycles_refunded)
    }

    /// Accepts up to `max` of the cycles the message carries; returns the amount accepted.
    pub fn msg_cycles_accept(&mut self, function: &str, max: u128) -> Api<u128> {
        self.require(function, allowed::MSG_CYCLES_AVAILABLE)?;
        let n = max.min(self.msg.cycles_available - self.msg.cycles_accepted);
        self.msg.cycles_accepted += n;
        Ok(n)
    }

    /// Burns up to `amount` cycles of the balance; returns the amount burned.
    pub fn cycles_burn128(&mut self, amount: u128) -> Api<u128> {
        self.require("cycles_burn128", allowed::CYCLES_BURN)?;
        let liquid = self
            .sys
            .cycles
            .saturating_sub(self.msg.cycles_burned + self.msg.cycles_sent);
        let n = amount.min(liquid);
        self.msg.cycles_burned += n;
        Ok(n)
    }

    pub fn mint_cycles128(&self) -> Api<()> {
        self.require("mint_cycles128", allowed::MINT_CYCLES)?;
        Err(contract(
            "ic0.mint_cycles128 may only be called by the cycles minting canister",
        ))
    }

    pub fn canister_cycle_balance(&self, function: &str) -> Api<u128> {
        self.require(function, allowed::EVERYWHERE_BUT_START)?;
        Ok(self.balance())
    }

    // ---- canister and subnet identity ----

    pub fn canister_self_size(&self) -> Api<u64> {
        self.require("canister_self_size", allowed::EVERYWHERE_BUT_START)?;
        Ok(self.sys.canister_id.len() as u64)
    }

    pub fn canister_self_copy(
        &self,
        dst: u64,
        off: u64,
        size: u64,
        heap: &mut Heap<'_>,
    ) -> Api<()> {
        self.require("canister_self_copy", allowed::EVERYWHERE_BUT_START)?;
        let id = &self.sys.canister_id;
        heap.copy_in("ic0.canister_self_copy", dst, off, size, id)
    }

    pub fn canister_status(&self) -> Api<u32> {
        self.require("canister_status", allowed::EVERYWHERE_BUT_START)?;
        Ok(1)
    }

    pub fn canister_version(&self) -> Api<u64> {
        self.require("canister_version", allowed::EVERYWHERE_BUT_START)?;
        Ok(self.sys.version)
    }

    pub fn subnet_self_size(&self) -> Api<u64> {
        self.require("subnet_self_size", allowed::EVERYWHERE_BUT_START)?;
        Ok(SUBNET_ID.len() as u64)
    }

    pub fn subnet_self_copy(&self, dst: u64, off: u64, size: u64, heap: &mut Heap<'_>) -> Api<()> {
        self.require("subnet_self_copy", allowed::EVERYWHERE_BUT_START)?;
        heap.copy_in("ic0.subnet_self_copy", dst, off, size, SUBNET_ID)
    }

    pub fn subnet_self_node_count(&self) -> Api<u32> {
        self.require("subnet_self_node_count", allowed::EVERYWHERE_BUT_START)?;
        Ok(NODES as u32)
    }

    pub fn root_key_size(&self) -> Api<u64> {
        self.require("root_key_size", allowed::ROOT_KEY)?;
        Ok(ROOT_KEY.len() as u64)
    }

    pub fn root_key_copy(&self, dst: u64, off: u64, size: u64, heap: &mut Heap<'_>) -> Api<()> {
        self.require("root_key_copy", allowed::ROOT_KEY)?;
        heap.copy_in("ic0.root_key_copy", dst, off, size, ROOT_KEY)
    }

    pub fn is_controller(&self, src: u64, size: u64, heap: &mut Heap<'_>) -> Api<u32> {
        self.require("is_controller", allowed::EVERYWHERE)?;
        let p = heap.read("ic0.is_controller", src, size)?;
        if p.len() > 29 {
            return Err(contract(
                "ic0.is_controller: the argument is not a valid principal",
            ));
        }
        Ok(self.sys.controllers.iter().any(|c| c == p) as u32)
    }

    pub fn in_replicated_execution(&self) -> Api<u32> {
        self.require("in_replicated_execution", allowed::EVERYWHERE)?;
        Ok(self.msg.api_type.replicated() as u32)
    }

    // ---- certified data ----

    pub fn certified_data_set(&mut self, src: u64, size: u64, heap: &mut Heap<'_>) -> Api<()> {
        self.require("certified_data_set", allowed::CERTIFIED_DATA_SET)?;
        if size > MAX_CERTIFIED_DATA as u64 {
            return Err(contract(format!(
                "ic0.certified_data_set: the certified data is larger than {MAX_CERTIFIED_DATA} bytes"
            )));
        }
        let bytes = heap.read("ic0.certified_data_set", src, size)?;
        self.msg.certified_data = Some(bytes.to_vec());
        Ok(())
    }

    pub fn data_certificate_present(&self) -> Api<u32> {
        self.require("data_certificate_present", allowed::EVERYWHERE_BUT_START)?;
        Ok(allowed::DATA_CERTIFICATE.contains(self.msg.api_type) as u32)
    }

    pub fn data_certificate_size(&self) -> Api<u64> {
        self.require("data_certificate_size", allowed::DATA_CERTIFICATE)?;
        Ok(certificate(&self.sys).len() as u64)
    }

    pub fn data_certificate_copy(
        &self,
        dst: u64,
        off: u64,
        size: u64,
        heap: &mut Heap<'_>,
    ) -> Api<()> {
        self.require("data_certificate_copy", allowed::DATA_CERTIFICATE)?;
        let cert = certificate(&self.sys);
        heap.copy_in("ic0.data_certificate_copy", dst, off, size, &cert)
    }

    // ---- time, timer, performance counter ----

    pub fn time(&self) -> Api<u64> {
        self.require("time", allowed::EVERYWHERE_BUT_START)?;
        Ok(self.sys.time)
    }

    pub fn global_timer_set(&mut self, t: u64) -> Api<u64> {
        self.require("global_timer_set", allowed::GLOBAL_TIMER_SET)?;
        let previous = self.msg.timer.unwrap_or(self.sys.timer);
        self.msg.timer = Some(t);
        Ok(previous)
    }

    /// Counter `kind` when `executed` instructions ran in the message so far.
    pub fn performance_counter(&self, kind: u32, executed: u64) -> Api<u64> {
        self.require("performance_counter", allowed::EVERYWHERE)?;
        match kind {
            0 => Ok(executed),
            1 => Ok(self.msg.context_instructions + executed),
            other => Err(contract(format!(
                "Error getting performance counter type {other}"
            ))),
        }
    }

    // ---- inter-canister calls ----

    #[allow(clippy::too_many_arguments)]
    pub fn call_new(
        &mut self,
        callee_src: u64,
        callee_size: u64,
        name_src: u64,
        name_len: u64,
        reply: (u64, u64),
        reject: (u64, u64),
        heap: &mut Heap<'_>,
    ) -> Api<()> {
        self.require("call_new", allowed::CALL)?;
        let callee = heap.read("ic0.call_new", callee_src, callee_size)?.to_vec();
        let name = heap.read("ic0.call_new", name_src, name_len)?.to_vec();
        let method = String::from_utf8(name)
            .map_err(|_| contract("ic0.call_new: the method name is not valid UTF-8"))?;
        // A call being built and not performed is dropped: its cycles go back to the balance.
        if let Some(previous) = self.msg.building.take() {
            self.msg.cycles_sent -= previous.cycles;
        }
        self.msg.building = Some(OutgoingCall {
            callee,
            method,
            arg: Vec::new(),
            on_reply: closure(reply.0, reply.1),
            on_reject: closure(reject.0, reject.1),
            on_cleanup: None,
            cycles: 0,
            timeout_seconds: None,
        });
        Ok(())
    }

    fn building(&mut self, function: &str) -> Api<&mut OutgoingCall> {
        self.msg.building.as_mut().ok_or_else(|| {
            contract(format!(
                "ic0.{function} called when no call is under construction."
            ))
        })
    }

    pub fn call_data_append(&mut self, src: u64, size: u64, heap: &mut Heap<'_>) -> Api<()> {
        self.require("call_data_append", allowed::CALL)?;
        self.building("call_data_append")?;
        let bytes = heap.read("ic0.call_data_append", src, size)?;
        self.building("call_data_append")?
            .arg
            .extend_from_slice(bytes);
        Ok(())
    }

    pub fn call_on_cleanup(&mut self, fun: u64, env: u64) -> Api<()> {
        self.require("call_on_cleanup", allowed::CALL)?;
        let call = self.building("call_on_cleanup")?;
        if call.on_cleanup.is_some() {
            return Err(contract(
                "ic0.call_on_cleanup: called twice for the same call",
            ));
        }
        call.on_cleanup = Some(closure(fun, env));
        Ok(())
    }

    pub fn call_with_best_effort_response(&mut self, timeout_seconds: u32) -> Api<()> {
        self.require("call_with_best_effort_response", allowed::CALL)?;
        let call = self.building("call_with_best_effort_response")?;
        if call.timeout_seconds.is_some() {
            return Err(contract(
                "ic0_call_with_best_effort_response failed because a timeout is already set.",
            ));
        }
        call.timeout_seconds = Some(timeout_seconds.min(MAX_CALL_TIMEOUT_SECONDS));
        Ok(())
    }

    pub fn call_cycles_add(&mut self, function: &str, amount: u128) -> Api<()> {
        self.require(function, allowed::CALL_CYCLES_ADD)?;
        self.building(function)?;
        if amount > self.balance() {
            return Err(contract(format!("ic0.{function}: not enough cycles")));
        }
        self.msg.cycles_sent += amount;
        self.building(function)?.cycles += amount;
        Ok(())
    }

    /// Queues the call being built; 0 when it was queued.
    pub fn call_perform(&mut self) -> Api<u32> {
        self.require("call_perform", allowed::CALL)?;
        self.building("call_perform")?;
        match self.msg.building.take() {
            // A composite query's calls are not executed by the engine (`METERING.md` §9): the
            // call fails as a call the system cannot queue does, and its cycles stay.
            Some(call) if self.msg.api_type == ApiType::CompositeQuery => {
                self.msg.cycles_sent -= call.cycles;
                Ok(reject_code::SYS_TRANSIENT)
            }
            Some(call) => {
                self.msg.calls.push(call);
                Ok(0)
            }
            None => Err(contract(
                "ic0.call_perform called when no call is under construction.",
            )),
        }
    }

    // ---- costs ----

    pub fn cost_call(&self, method_len: u64, payload_len: u64) -> Api<u128> {
        self.require("cost_call", allowed::EVERYWHERE)?;
        Ok(FEES.cost_call(method_len, payload_len, CALLBACK_INSTRUCTIONS, NODES))
    }

    pub fn cost_create_canister(&self) -> Api<u128> {
        self.require("cost_create_canister", allowed::EVERYWHERE)?;
        Ok(FEES.scale(FEES.canister_creation_fee, NODES))
    }

    pub fn cost_http_request(&self, request: u64, max_response: u64) -> Api<u128> {
        self.require("cost_http_request", allowed::EVERYWHERE)?;
        Ok(FEES.http_request_cost(request, max_response, NODES))
    }

    pub fn cost_http_request_v2(&self) -> Api<u128> {
        self.require("cost_http_request_v2", allowed::EVERYWHERE)?;
        Ok(FEES.http_request_cost(0, 0, NODES))
    }

    /// `cost_sign_with_ecdsa`, `cost_sign_with_schnorr` and `cost_vetkd_derive_key`.
    pub fn cost_threshold_key(&self, function: &str) -> Api<u128> {
        self.require(function, allowed::EVERYWHERE)?;
        Ok(FEES.scale(FEES.threshold_signature_fee, NODES))
    }

    /// Writes a `cost_*` answer (or any 128-bit amount) to the heap at `dst`.
    pub fn write_cycles(
        &self,
        function: &str,
        dst: u64,
        amount: u128,
        heap: &mut Heap<'_>,
    ) -> Api<()> {
        heap.write(&format!("ic0.{function}"), dst, &amount.to_le_bytes())
    }

    // ---- environment variables (none are set) ----

    pub fn env_var_count(&self) -> Api<u64> {
        self.require("env_var_count", allowed::EVERYWHERE_BUT_START)?;
        Ok(0)
    }

    /// `env_var_name_size` and `env_var_name_copy`: no variable has an index.
    pub fn env_var_name(&self, function: &str, index: u64) -> Api<()> {
        self.require(function, allowed::EVERYWHERE_BUT_START)?;
        Err(contract(format!(
            "Environment variable index {index} is out of bounds. The number of environment variables is 0."
        )))
    }

    pub fn env_var_name_exists(&self) -> Api<u32> {
        self.require("env_var_name_exists", allowed::EVERYWHERE_BUT_START)?;
        Ok(0)
    }

    /// `env_var_value_size` and `env_var_value_copy`: no variable has a value.
    pub fn env_var_value(
        &self,
        function: &str,
        src: u64,
        size: u64,
        heap: &mut Heap<'_>,
    ) -> Api<()> {
        self.require(function, allowed::EVERYWHERE_BUT_START)?;
        let name = heap.read(&format!("ic0.{function}"), src, size)?;
        Err(contract(format!(
            "Environment variable {} not found.",
            String::from_utf8_lossy(name)
        )))
    }

    // ---- debug_print and trap ----

    /// Instructions `debug_print` of `len` bytes costs besides its fixed overhead.
    pub fn debug_print_charge(&self, len: usize) -> u64 {
        let mut n = self.msg.logging_charge(len);
        if self.sys.debug_print_enabled {
            n += len as u64;
        }
        n
    }

    /// Instructions `trap` with a message of `len` bytes costs besides its fixed overhead.
    pub fn trap_charge(&self, len: usize) -> u64 {
        (len as u64).saturating_add(self.msg.logging_charge(len))
    }

    pub fn debug_print(&mut self, src: u64, size: u64, heap: &mut Heap<'_>) -> Api<()> {
        self.require("debug_print", allowed::EVERYWHERE)?;
        let len = size.min(usize::MAX as u64) as usize;
        // The replica ignores out-of-bounds debug prints rather than trapping.
        let text = match heap.get(src, size) {
            Some(bytes) => String::from_utf8_lossy(bytes).into_owned(),
            None => String::from("(debug_print: out of bounds)"),
        };
        self.msg.log(text, len);
        Ok(())
    }

    /// Always ends the message: the cause is `ic0.trap` with the message at `src`.
    pub fn trap(&mut self, src: u64, size: u64, heap: &mut Heap<'_>) -> TrapCause {
        if let Err(e) = self.require("trap", allowed::EVERYWHERE) {
            return e;
        }
        let len = size.min(usize::MAX as u64) as usize;
        let bytes = match heap.read("ic0.trap", src, size) {
            Ok(b) => b,
            Err(e) => return e,
        };
        let text = String::from_utf8_lossy(bytes).into_owned();
        self.msg.log(format!("[TRAP]: {text}"), len);
        TrapCause::CalledTrap(text)
    }

    // ---- stable memory ----

    /// Traps when the 32-bit API is used on a stable memory larger than 4 GiB.
    fn check_32bit(&self, api32: bool) -> Api<()> {
        if api32 && self.sys.stable.size_pages() > MAX_32BIT_WASM_PAGES {
            Err(TrapCause::StableTooBigFor32Bit)
        } else {
            Ok(())
        }
    }

    pub fn stable_size(&self, api32: bool) -> Api<u64> {
        self.check_32bit(api32)?;
        Ok(self.sys.stable.size_pages())
    }

    /// Grows stable memory by `pages`; the previous size in pages, or -1 when it would pass
    /// its maximum or what the memory allocation leaves besides `heap_bytes` and the module (the
    /// replica's `StableGrowOutcome::Failure`).
    pub fn stable_grow(&mut self, pages: u64, api32: bool, heap_bytes: u64) -> Api<i64> {
        self.check_32bit(api32)?;
        let mut max = if api32 {
            MAX_32BIT_WASM_PAGES.min(self.sys.max_stable_pages)
        } else {
            self.sys.max_stable_pages
        };
        let allocation = self.sys.memory_allocation;
        if allocation != 0 {
            let others = heap_bytes.saturating_add(self.sys.module_bytes);
            max = max.min(allocation.saturating_sub(others) / crate::stable::WASM_PAGE);
        }
        Ok(self.sys.stable.grow(pages, max))
    }

    pub fn stable_read(
        &self,
        dst: u64,
        offset: u64,
        len: u64,
        api32: bool,
        heap: &mut Heap<'_>,
    ) -> Api<()> {
        if len == 0 {
            return Ok(());
        }
        self.check_32bit(api32)?;
        if range(dst, len, heap.bytes.len()).is_none() {
            return Err(contract(format!(
                "ic0.stable_read: dst={dst} + size={len} exceeds the heap size"
            )));
        }
        let in_bounds = offset
            .checked_add(len)
            .is_some_and(|e| e <= self.sys.stable.size_bytes());
        if !in_bounds {
            return Err(TrapCause::StableOutOfBounds);
        }
        let d = heap.get_mut(dst, len).expect("checked above");
        self.sys
            .stable
            .read(offset, d)
            .map_err(|OutOfBounds| TrapCause::StableOutOfBounds)
    }

    /// The 4 KiB pages a write of `len` bytes at `offset` dirties for the first time in this
    /// message, after the checks that precede its charge (32-bit size, bounds, the message's
    /// limit of dirty pages). `None` for an empty write, which does nothing.
    pub fn stable_write_new_pages(&self, offset: u64, len: u64, api32: bool) -> Api<Option<u64>> {
        if len == 0 {
            return Ok(None);
        }
        self.check_32bit(api32)?;
        let in_bounds = offset
            .checked_add(len)
            .is_some_and(|e| e <= self.sys.stable.size_bytes());
        if !in_bounds {
            return Err(TrapCause::StableOutOfBounds);
        }
        let new_pages = self.sys.stable.new_dirty_pages(offset, len);
        let total = self.sys.stable.dirty_pages() + new_pages;
        if total > self.msg.stable_dirty_limit {
            let limit = self.msg.stable_dirty_limit * OS_PAGE / 1024;
            return Err(TrapCause::MemoryAccessLimit(format!(
                "Exceeded the limit for the number of modified pages in the stable memory in a single execution: limit {limit} KB"
            )));
        }
        Ok(Some(new_pages))
    }

    /// Writes `len` bytes from the heap at `src` to stable memory at `offset` (after
    /// [`Self::stable_write_new_pages`] and its charge).
    pub fn stable_write(
        &mut self,
        offset: u64,
        src: u64,
        len: u64,
        heap: &mut Heap<'_>,
    ) -> Api<()> {
        let Some(bytes) = heap.get(src, len) else {
            return Err(contract(format!(
                "ic0.stable_write: src={src} + size={len} exceeds the heap size"
            )));
        };
        self.sys
            .stable
            .write(offset, bytes)
            .map_err(|OutOfBounds| TrapCause::StableOutOfBounds)
    }
}
