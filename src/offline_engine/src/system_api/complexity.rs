//! The System API cost table: the fixed overhead of every `ic0` function in instructions, line by
//! line as the replica's `rs/embedders/src/wasmtime_embedder/system_api_complexity.rs` states it
//! (its `overhead` module; `overhead_native` for stable memory, which the engine runs natively as
//! the replica runs it inside the module), and the per-byte parts that `linker.rs` in the same
//! directory adds to them. The registrations (`src/linker.rs`) charge exactly these amounts
//! before they delegate to the System API (`SystemApi`); `METERING.md` §3 and §4.

/// Fixed overheads, one per `ic0` function.
pub mod overhead {
    /// `ic0.accept_message`.
    pub const ACCEPT_MESSAGE: u64 = 500;
    /// `ic0.call_cycles_add`.
    pub const CALL_CYCLES_ADD: u64 = 500;
    /// `ic0.call_cycles_add128`.
    pub const CALL_CYCLES_ADD128: u64 = 500;
    /// `ic0.call_data_append`.
    pub const CALL_DATA_APPEND: u64 = 500;
    /// `ic0.call_new`.
    pub const CALL_NEW: u64 = 1_500;
    /// `ic0.call_on_cleanup`.
    pub const CALL_ON_CLEANUP: u64 = 500;
    /// `ic0.call_perform`.
    pub const CALL_PERFORM: u64 = 5_000;
    /// `ic0.call_with_best_effort_response`.
    pub const CALL_WITH_BEST_EFFORT_RESPONSE: u64 = 500;
    /// `ic0.cycles_burn128`.
    pub const CYCLES_BURN128: u64 = 500;
    /// `ic0.canister_cycle_balance`.
    pub const CANISTER_CYCLE_BALANCE: u64 = 500;
    /// `ic0.canister_cycle_balance128`.
    pub const CANISTER_CYCLE_BALANCE128: u64 = 500;
    /// `ic0.canister_liquid_cycle_balance128`.
    pub const CANISTER_LIQUID_CYCLE_BALANCE128: u64 = 500;
    /// `ic0.canister_self_copy`.
    pub const CANISTER_SELF_COPY: u64 = 500;
    /// `ic0.canister_self_size`.
    pub const CANISTER_SELF_SIZE: u64 = 500;
    /// `ic0.canister_status`.
    pub const CANISTER_STATUS: u64 = 500;
    /// `ic0.canister_version`.
    pub const CANISTER_VERSION: u64 = 500;
    /// `ic0.root_key_size`.
    pub const ROOT_KEY_SIZE: u64 = 500;
    /// `ic0.root_key_copy`.
    pub const ROOT_KEY_COPY: u64 = 500;
    /// `ic0.certified_data_set`.
    pub const CERTIFIED_DATA_SET: u64 = 500;
    /// `ic0.cost_call`.
    pub const COST_CALL: u64 = 500;
    /// `ic0.cost_create_canister`.
    pub const COST_CREATE_CANISTER: u64 = 500;
    /// `ic0.cost_http_request`.
    pub const COST_HTTP_REQUEST: u64 = 500;
    /// `ic0.cost_http_request_v2`.
    pub const COST_HTTP_REQUEST_V2: u64 = 10_000;
    /// `ic0.cost_sign_with_ecdsa`.
    pub const COST_ECDSA: u64 = 500;
    /// `ic0.cost_sign_with_schnorr`.
    pub const COST_SCHNORR: u64 = 500;
    /// `ic0.cost_vetkd_derive_key`.
    pub const COST_VETKD: u64 = 500;
    /// `ic0.data_certificate_copy`.
    pub const DATA_CERTIFICATE_COPY: u64 = 500;
    /// `ic0.data_certificate_present`.
    pub const DATA_CERTIFICATE_PRESENT: u64 = 500;
    /// `ic0.data_certificate_size`.
    pub const DATA_CERTIFICATE_SIZE: u64 = 500;
    /// `ic0.debug_print`.
    pub const DEBUG_PRINT: u64 = 100;
    /// `ic0.global_timer_set`.
    pub const GLOBAL_TIMER_SET: u64 = 500;
    /// `ic0.is_controller`.
    pub const IS_CONTROLLER: u64 = 1_000;
    /// `ic0.in_replicated_execution`.
    pub const IN_REPLICATED_EXECUTION: u64 = 500;
    /// `ic0.msg_arg_data_copy`.
    pub const MSG_ARG_DATA_COPY: u64 = 500;
    /// `ic0.msg_arg_data_size`.
    pub const MSG_ARG_DATA_SIZE: u64 = 500;
    /// `ic0.msg_caller_copy`.
    pub const MSG_CALLER_COPY: u64 = 500;
    /// `ic0.msg_caller_info_data_copy`.
    pub const MSG_CALLER_INFO_DATA_COPY: u64 = 500;
    /// `ic0.msg_caller_info_data_size`.
    pub const MSG_CALLER_INFO_DATA_SIZE: u64 = 500;
    /// `ic0.msg_caller_info_signer_copy`.
    pub const MSG_CALLER_INFO_SIGNER_COPY: u64 = 500;
    /// `ic0.msg_caller_info_signer_size`.
    pub const MSG_CALLER_INFO_SIGNER_SIZE: u64 = 500;
    /// `ic0.msg_caller_size`.
    pub const MSG_CALLER_SIZE: u64 = 500;
    /// `ic0.msg_cycles_accept`.
    pub const MSG_CYCLES_ACCEPT: u64 = 500;
    /// `ic0.msg_cycles_accept128`.
    pub const MSG_CYCLES_ACCEPT128: u64 = 500;
    /// `ic0.msg_cycles_available`.
    pub const MSG_CYCLES_AVAILABLE: u64 = 500;
    /// `ic0.msg_cycles_available128`.
    pub const MSG_CYCLES_AVAILABLE128: u64 = 500;
    /// `ic0.msg_cycles_refunded`.
    pub const MSG_CYCLES_REFUNDED: u64 = 500;
    /// `ic0.msg_cycles_refunded128`.
    pub const MSG_CYCLES_REFUNDED128: u64 = 500;
    /// `ic0.msg_deadline`.
    pub const MSG_DEADLINE: u64 = 500;
    /// `ic0.msg_method_name_copy`.
    pub const MSG_METHOD_NAME_COPY: u64 = 500;
    /// `ic0.msg_method_name_size`.
    pub const MSG_METHOD_NAME_SIZE: u64 = 500;
    /// `ic0.msg_reject_code`.
    pub const MSG_REJECT_CODE: u64 = 500;
    /// `ic0.msg_reject_msg_copy`.
    pub const MSG_REJECT_MSG_COPY: u64 = 500;
    /// `ic0.msg_reject_msg_size`.
    pub const MSG_REJECT_MSG_SIZE: u64 = 500;
    /// `ic0.msg_reject`.
    pub const MSG_REJECT: u64 = 500;
    /// `ic0.msg_reply_data_append`.
    pub const MSG_REPLY_DATA_APPEND: u64 = 500;
    /// `ic0.msg_reply`.
    pub const MSG_REPLY: u64 = 500;
    /// `ic0.performance_counter`.
    pub const PERFORMANCE_COUNTER: u64 = 200;
    /// `ic0.subnet_self_size`.
    pub const SUBNET_SELF_SIZE: u64 = 500;
    /// `ic0.subnet_self_copy`.
    pub const SUBNET_SELF_COPY: u64 = 500;
    /// Not in the replica's table (a function of the interface specification's draft); charged
    /// as the other identity functions are.
    pub const SUBNET_SELF_NODE_COUNT: u64 = 500;
    /// `ic0.env_var_count`.
    pub const ENV_VAR_COUNT: u64 = 500;
    /// `ic0.env_var_name_size`.
    pub const ENV_VAR_NAME_SIZE: u64 = 500;
    /// `ic0.env_var_name_copy`.
    pub const ENV_VAR_NAME_COPY: u64 = 500;
    /// `ic0.env_var_name_exists`.
    pub const ENV_VAR_NAME_EXISTS: u64 = 500;
    /// `ic0.env_var_value_size`.
    pub const ENV_VAR_VALUE_SIZE: u64 = 500;
    /// `ic0.env_var_value_copy`.
    pub const ENV_VAR_VALUE_COPY: u64 = 500;
    /// `ic0.time`.
    pub const TIME: u64 = 500;
    /// `ic0.trap`.
    pub const TRAP: u64 = 500;
    /// `mint_cycles128` charges nothing (the replica's table has no entry for it).
    pub const MINT_CYCLES128: u64 = 0;
}

/// Fixed overheads of stable memory, which the replica runs inside the module (its
/// `overhead_native`; `stable_size` and `stable64_size` cost only their `call`).
pub mod overhead_native {
    /// Both `stable_grow` and `stable64_grow`.
    pub const STABLE_GROW: u64 = 100;
    /// `ic0.stable_read`.
    pub const STABLE_READ: u64 = 20;
    /// `ic0.stable_write`.
    pub const STABLE_WRITE: u64 = 20;
    /// `ic0.stable64_read`.
    pub const STABLE64_READ: u64 = 20;
    /// `ic0.stable64_write`.
    pub const STABLE64_WRITE: u64 = 20;
    /// `ic0.stable_size`.
    pub const STABLE_SIZE: u64 = 0;
    /// `ic0.stable64_size`.
    pub const STABLE64_SIZE: u64 = 0;
}

/// Instructions per byte copied between the heap and the system (`*_copy`, `certified_data_set`,
/// `is_controller`, `call_new`'s callee and method name, `trap`'s message, stable reads and
/// writes): the replica's `get_num_instructions_from_bytes`, one per byte.
pub const BYTE: u64 = 1;

/// Instructions per byte a message sends (`msg_reply_data_append`, `msg_reject`,
/// `call_data_append`).
pub const BYTE_TRANSMISSION: u64 = 50;

/// `fixed` plus `bytes` copied at [`BYTE`] each (saturating).
pub const fn with_bytes(fixed: u64, bytes: u64) -> u64 {
    fixed.saturating_add(bytes.saturating_mul(BYTE))
}

/// `fixed` plus `bytes` sent at [`BYTE_TRANSMISSION`] each (saturating).
pub const fn with_transmission(fixed: u64, bytes: u64) -> u64 {
    fixed.saturating_add(bytes.saturating_mul(BYTE_TRANSMISSION))
}
