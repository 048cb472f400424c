//! Public value types: settings, subnet kinds, message results and executions.

use std::time::Duration;

/// The principal of the anonymous caller (`2vxsx-fae`), as canbench and ingress tests use.
pub const ANONYMOUS: &[u8] = &[0x04];

/// The canister id PocketIC gives the first canister of an application subnet
/// (`lxzze-o7777-77777-aaaaa-cai`); only its length (10 bytes) influences metering.
pub const DEFAULT_CANISTER_ID: &[u8] =
    &[0xff, 0xff, 0xff, 0xff, 0xff, 0x90, 0x00, 0x00, 0x01, 0x01];

/// Instruction limit PocketIC's benchmarking subnets use for every message kind.
pub const BENCHMARKING_LIMIT: u64 = 99_999_999_999_999;

/// Per-message instruction limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InstructionLimits {
    /// Update calls, timers, callbacks and cleanup.
    pub update: u64,
    /// Non-replicated queries.
    pub query: u64,
    /// Install and upgrade (all entry points of one install_code together).
    pub install: u64,
    /// `canister_inspect_message` of an ingress message.
    pub inspect: u64,
}

/// Byte limits on messages, as an application subnet enforces them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SizeLimits {
    /// Largest argument of an ingress message (the IC refuses the whole message beyond its
    /// limit of 2 MiB, `max_ingress_bytes_per_message` of application subnets in the replica's
    /// `rs/config/src/subnet_config.rs`; the argument is part of it).
    pub ingress_arg_bytes: u64,
    /// Largest reply of a replicated execution (update, callback): 2 MiB,
    /// `MAX_INTER_CANISTER_PAYLOAD_IN_BYTES` in the replica's `rs/types/types/src/messages.rs`.
    pub reply_bytes: u64,
    /// Largest reply of a non-replicated query: 3 MiB (`MAX_NON_REPLICATED_QUERY_REPLY_SIZE` in
    /// the replica's `rs/embedders/src/wasmtime_embedder/system_api.rs`).
    pub query_reply_bytes: u64,
}

impl Default for SizeLimits {
    fn default() -> Self {
        SizeLimits {
            ingress_arg_bytes: 2 << 20,
            reply_bytes: 2 << 20,
            query_reply_bytes: 3 << 20,
        }
    }
}

/// Which subnet configuration the engine imitates (instruction limits, `METERING.md` §6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SubnetKind {
    /// Application subnet: update/timer/callback 40 B, query 5 B, install/upgrade 300 B,
    /// inspect message 200 M instructions.
    #[default]
    Application,
    /// PocketIC benchmarking subnet (what canbench uses): every limit is 99,999,999,999,999.
    Benchmarking,
    /// Explicit limits (tests of the limit itself).
    Custom(InstructionLimits),
}

impl SubnetKind {
    /// The limits of this configuration.
    pub fn limits(self) -> InstructionLimits {
        match self {
            SubnetKind::Application => InstructionLimits {
                update: 40_000_000_000,
                query: 5_000_000_000,
                install: 300_000_000_000,
                inspect: 200_000_000,
            },
            SubnetKind::Benchmarking => InstructionLimits {
                update: BENCHMARKING_LIMIT,
                query: BENCHMARKING_LIMIT,
                install: BENCHMARKING_LIMIT,
                inspect: BENCHMARKING_LIMIT,
            },
            SubnetKind::Custom(l) => l,
        }
    }
    /// Instruction limit of update calls, timers, callbacks and cleanup.
    pub fn update_limit(self) -> u64 {
        self.limits().update
    }
    /// Instruction limit of (non-replicated) queries.
    pub fn query_limit(self) -> u64 {
        self.limits().query
    }
    /// Instruction limit of install and upgrade (all entry points of one install_code together).
    pub fn install_limit(self) -> u64 {
        self.limits().install
    }
}

/// Canister settings given at install time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// Subnet configuration (instruction limits).
    pub subnet: SubnetKind,
    /// Controllers as raw principal bytes (what `ic0.is_controller` compares against).
    pub controllers: Vec<Vec<u8>>,
    /// Initial engine time in nanoseconds since the epoch (`ic0.time`). Time only moves when
    /// the engine's caller advances it.
    pub time_ns: u64,
    /// Initial cycle balance.
    pub cycles: u128,
    /// The canister's own principal bytes (`ic0.canister_self_*`).
    pub canister_id: Vec<u8>,
    /// Byte limits of ingress arguments and replies.
    pub sizes: SizeLimits,
    /// Debug printing enabled (PocketIC: yes; mainnet application subnets: no). When enabled,
    /// `ic0.debug_print` costs `len` more instructions (`METERING.md` §3).
    pub debug_print_enabled: bool,
    /// Whether the engine charges the canister's balance the IC's fees for what it executes
    /// (`METERING.md` §8). `None` (the default): the balance moves only by the canister's own
    /// cycle operations and [`Canister::add_cycles`](crate::Canister::add_cycles).
    pub charging: Option<Charging>,
    /// The canister's `wasm_memory_limit` setting in bytes (0: none). A heap growth beyond it
    /// in an update, replicated query, callback, cleanup or system task traps with the
    /// replica's `Canister exceeded its current Wasm memory limit ...`; install, upgrade and
    /// non-replicated executions are not limited (the replica's `effective_wasm_memory_limit`).
    pub wasm_memory_limit: u64,
    /// The canister's memory allocation in bytes (0: none, as a canister without allocation
    /// on a subnet with memory to spare). The heap, stable memory and the module together may
    /// not exceed it: a heap growth beyond traps with `Canister cannot grow its memory usage.`,
    /// a stable memory growth beyond returns -1 (`METERING.md` §6).
    pub memory_allocation: u64,
}

/// The fees the engine charges a canister, as the replica does on a subnet of `subnet_nodes`
/// nodes with the normal cost schedule: every replicated execution (install, upgrade, update,
/// replicated query, timer task, callback) its execution cost, every ingress message it accepts
/// its reception cost, every call it makes the request fee and the transmission of the response
/// that comes back. Amounts follow [`crate::fees::IC_2025`], the one copy of the schedule.
/// Storage, creation and the other fees are not charged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Charging {
    /// Subnet size every fee is scaled by (`fee × n / 13`).
    pub subnet_nodes: u64,
}

impl Charging {
    /// A 13-node application subnet (PocketIC's application subnets have this size).
    pub const APPLICATION: Charging = Charging { subnet_nodes: 13 };
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            subnet: SubnetKind::Application,
            controllers: vec![ANONYMOUS.to_vec()],
            time_ns: 1_700_000_000_000_000_000,
            cycles: 1_000_000_000_000_000,
            canister_id: DEFAULT_CANISTER_ID.to_vec(),
            sizes: SizeLimits::default(),
            debug_print_enabled: true,
            charging: None,
            wasm_memory_limit: 0,
            memory_allocation: 0,
        }
    }
}

impl Settings {
    /// Settings of a canbench run: benchmarking subnet, PocketIC defaults otherwise.
    pub fn benchmarking() -> Self {
        Settings {
            subnet: SubnetKind::Benchmarking,
            ..Settings::default()
        }
    }
}

/// Reject codes of the IC interface specification.
pub mod reject_code {
    /// Fatal system error.
    pub const SYS_FATAL: u32 = 1;
    /// Transient system error.
    pub const SYS_TRANSIENT: u32 = 2;
    /// The destination is invalid (e.g. no such canister).
    pub const DESTINATION_INVALID: u32 = 3;
    /// Explicit reject by the canister.
    pub const CANISTER_REJECT: u32 = 4;
    /// The canister failed (trapped, no such method, did not reply).
    pub const CANISTER_ERROR: u32 = 5;
    /// The response did not arrive in time (best-effort calls).
    pub const SYS_UNKNOWN: u32 = 6;
}

/// How a message ended, as the caller of the engine sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MessageResult {
    /// The message replied with these bytes.
    Reply(Vec<u8>),
    /// The message (or the engine on its behalf) rejected: reject code and message.
    Reject(u32, String),
    /// The execution ended without replying (e.g. an update awaiting a call, or a system task).
    NoReply,
    /// The message trapped; its changes to heap, globals and stable memory were rolled back.
    Trap(String),
}

impl MessageResult {
    /// The reply bytes, if the message replied.
    pub fn reply(&self) -> Option<&[u8]> {
        match self {
            MessageResult::Reply(b) => Some(b),
            _ => None,
        }
    }
    /// True if the message trapped.
    pub fn is_trap(&self) -> bool {
        matches!(self, MessageResult::Trap(_))
    }
}

/// One executed message (or system task) and what it cost.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Execution {
    /// What ran: `canister_init`, `canister_update <name>`, `canister_query <name>`,
    /// `canister_global_timer`, `reply_callback`, `reject_callback`, `cleanup`, `canister_upgrade`...
    pub entry: String,
    /// The outcome.
    pub result: MessageResult,
    /// Instructions as `ic0.performance_counter(0)` would show at the end of the message
    /// (everything charged in the message, without the heap dirty-page charge).
    pub instructions: u64,
    /// `instructions` plus the charge for the heap pages the message changed, billed after it
    /// (in the rules of PocketIC 13, 1,000 per 4 KiB page, 4,000 in wasm64; nothing with the
    /// memory tracker, which charges during the message), i.e. what the IC bills. For queries
    /// and traps this equals what would have been billed had the changes been kept (queries) or
    /// `instructions` (traps).
    pub billed_instructions: u64,
    /// 4 KiB heap pages whose contents changed in the message.
    pub heap_dirty_pages: u64,
    /// 4 KiB stable-memory pages written in the message.
    pub stable_dirty_pages: u64,
    /// Which memory pages the message touched and what they cost under the engine's metering
    /// profile (`METERING.md` §10).
    pub pages: PageUse,
    /// `ic0.debug_print` output (and trap messages) in order.
    pub logs: Vec<String>,
    /// Wall-clock time spent executing the message.
    pub wall_time: Duration,
}

/// The memory pages one execution touched, and what they cost (`METERING.md` §10).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PageUse {
    /// The heap's pages.
    pub heap: MemoryPages,
    /// Stable memory's pages.
    pub stable: MemoryPages,
    /// Instructions the pages cost: with the memory tracker, its charges (part of
    /// [`Execution::instructions`]); in the rules of PocketIC 13, the new dirty stable pages
    /// (part of `instructions`) plus, for a message whose changes count, the changed heap pages
    /// (part of [`Execution::billed_instructions`] only).
    pub instructions: u64,
}

/// The pages of one memory an execution touched.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MemoryPages {
    /// 64 KiB Wasm pages the memory tracker charged a first access for, in increasing order
    /// (install and upgrade run several entry points, each tracked afresh as in the replica, so a
    /// page may appear once per entry point). Empty in profiles without the tracker.
    pub accessed: Vec<u64>,
    /// 64 KiB Wasm pages the memory tracker charged a first write for (likewise).
    pub dirty: Vec<u64>,
    /// 4 KiB pages the message changed, in increasing order: for the heap, the pages whose bytes
    /// differ from before the message ([`Execution::heap_dirty_pages`] counts them); for stable
    /// memory, the pages it wrote ([`Execution::stable_dirty_pages`]). Empty for a trapped
    /// message, whose changes were undone.
    pub written: Vec<u64>,
}

impl Execution {
    /// Metered instructions per second of wall time for this execution.
    pub fn instructions_per_second(&self) -> f64 {
        let secs = self.wall_time.as_secs_f64();
        if secs > 0.0 {
            self.instructions as f64 / secs
        } else {
            0.0
        }
    }
}
