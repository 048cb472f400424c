//! Which `ic0` function each kind of execution may call: one matrix, written in the interface
//! specification's notation (the comment after each import in "Overview of imports": `I U RQ NRQ
//! CQ Ry Rt C F T`, `*` for every kind but the start function, `* s` for every kind) and checked
//! against the replica's `rs/embedders/src/wasmtime_embedder/system_api.rs`, which decides it
//! per function with a `match` on its `ApiType`. Where the two differ the engine follows the
//! replica (noted in [`MATRIX`]). A call from anywhere else traps with the replica's message
//! `"ic0_<function>" cannot be executed in <kind> mode` ([`ApiType::name`]).
//!
//! The engine never runs a composite query's calls (`METERING.md` §9), so the composite reply,
//! reject and cleanup callbacks of the specification (`CRy`, `CRt`, `CC`) never occur here.

/// The kinds of execution the System API tells apart: the replica's `ApiType`. The engine runs
/// `canister_post_upgrade` as [`ApiType::Init`], as the replica does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ApiType {
    /// The module's start function (`s`).
    Start,
    /// `canister_init` or `canister_post_upgrade` (`I`).
    Init,
    /// `canister_pre_upgrade` (`G`).
    PreUpgrade,
    /// `canister_update <name>` (`U`).
    Update,
    /// `canister_query <name>` called as an update or by another canister (`RQ`).
    ReplicatedQuery,
    /// `canister_query <name>` called as a query (`NRQ`).
    NonReplicatedQuery,
    /// `canister_composite_query <name>` (`CQ`).
    CompositeQuery,
    /// A reply callback (`Ry`).
    ReplyCallback,
    /// A reject callback (`Rt`).
    RejectCallback,
    /// A cleanup callback (`C`).
    Cleanup,
    /// `canister_inspect_message` (`F`).
    InspectMessage,
    /// `canister_heartbeat`, a system task (`T`).
    Heartbeat,
    /// `canister_global_timer`, a system task (`T`).
    GlobalTimer,
}

impl ApiType {
    /// Every kind, in the order of the specification's legend.
    pub const ALL: [ApiType; 13] = [
        ApiType::Start,
        ApiType::Init,
        ApiType::PreUpgrade,
        ApiType::Update,
        ApiType::ReplicatedQuery,
        ApiType::NonReplicatedQuery,
        ApiType::CompositeQuery,
        ApiType::ReplyCallback,
        ApiType::RejectCallback,
        ApiType::Cleanup,
        ApiType::InspectMessage,
        ApiType::Heartbeat,
        ApiType::GlobalTimer,
    ];

    /// The name the replica's error messages use (`ApiType::as_str` there).
    pub const fn name(self) -> &'static str {
        match self {
            ApiType::Start => "start",
            ApiType::Init => "init",
            ApiType::PreUpgrade => "pre upgrade",
            ApiType::Update => "update",
            ApiType::ReplicatedQuery => "replicated query",
            ApiType::NonReplicatedQuery => "non replicated query",
            ApiType::CompositeQuery => "composite query",
            ApiType::ReplyCallback => "reply callback",
            ApiType::RejectCallback => "reject callback",
            ApiType::Cleanup => "cleanup",
            ApiType::InspectMessage => "inspect message",
            ApiType::Heartbeat => "heartbeat",
            ApiType::GlobalTimer => "global timer",
        }
    }

    /// The specification's letter code of the kind (`s`, `I`, `G`, `U`, `RQ`, `NRQ`, `CQ`,
    /// `Ry`, `Rt`, `C`, `F`, `T`).
    pub const fn code(self) -> &'static str {
        match self {
            ApiType::Start => "s",
            ApiType::Init => "I",
            ApiType::PreUpgrade => "G",
            ApiType::Update => "U",
            ApiType::ReplicatedQuery => "RQ",
            ApiType::NonReplicatedQuery => "NRQ",
            ApiType::CompositeQuery => "CQ",
            ApiType::ReplyCallback => "Ry",
            ApiType::RejectCallback => "Rt",
            ApiType::Cleanup => "C",
            ApiType::InspectMessage => "F",
            ApiType::Heartbeat | ApiType::GlobalTimer => "T",
        }
    }

    /// Whether the execution's changes are kept or could be (everything but a non-replicated
    /// or composite query and `canister_inspect_message`): what `ic0.in_replicated_execution`
    /// answers.
    pub const fn replicated(self) -> bool {
        !matches!(
            self,
            ApiType::NonReplicatedQuery | ApiType::CompositeQuery | ApiType::InspectMessage
        )
    }

    const fn bit(self) -> u16 {
        1 << self as u16
    }
}

impl std::fmt::Display for ApiType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A set of [`ApiType`]s: where one function may be called.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Kinds(u16);

impl Kinds {
    /// Whether `kind` is in the set.
    pub const fn contains(self, kind: ApiType) -> bool {
        self.0 & kind.bit() != 0
    }
}

const fn token_is(spec: &[u8], start: usize, end: usize, token: &str) -> bool {
    let t = token.as_bytes();
    if end - start != t.len() {
        return false;
    }
    let mut i = 0;
    while i < t.len() {
        if spec[start + i] != t[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// Parses the specification's notation (space-separated codes; `*` is every kind but `s`).
/// An unknown code fails compilation (every use is a constant).
pub const fn kinds(spec: &str) -> Kinds {
    let bytes = spec.as_bytes();
    let mut mask: u16 = 0;
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b' ' {
            i += 1;
            continue;
        }
        let start = i;
        while i < bytes.len() && bytes[i] != b' ' {
            i += 1;
        }
        if token_is(bytes, start, i, "*") {
            mask |= !ApiType::Start.bit() & ((1 << ApiType::ALL.len()) - 1);
            continue;
        }
        let mut k = 0;
        let mut found = false;
        while k < ApiType::ALL.len() {
            if token_is(bytes, start, i, ApiType::ALL[k].code()) {
                mask |= ApiType::ALL[k].bit();
                found = true;
            }
            k += 1;
        }
        assert!(found, "unknown kind code in an availability spec");
    }
    Kinds(mask)
}

/// Where each `ic0` function may be called.
pub mod allowed {
    use super::{Kinds, kinds};

    /// `ic0.msg_arg_data_size` and `ic0.msg_arg_data_copy`.
    pub const MSG_ARG_DATA: Kinds = kinds("I U RQ NRQ CQ Ry F");
    /// `ic0.msg_caller_size` and `ic0.msg_caller_copy`.
    pub const MSG_CALLER: Kinds = kinds("*");
    /// `ic0.msg_caller_info_*`.
    pub const MSG_CALLER_INFO: Kinds = kinds("U RQ NRQ CQ Ry Rt C F");
    /// `ic0.msg_reject_code` (the specification adds `C`; the replica refuses it there).
    pub const MSG_REJECT_CODE: Kinds = kinds("Ry Rt");
    /// `ic0.msg_reject_msg_size` and `ic0.msg_reject_msg_copy`.
    pub const MSG_REJECT_MSG: Kinds = kinds("Rt");
    /// `ic0.msg_deadline`.
    pub const MSG_DEADLINE: Kinds = kinds("U RQ NRQ CQ Ry Rt");
    /// `ic0.msg_reply_data_append`, `ic0.msg_reply` and `ic0.msg_reject`.
    pub const MSG_REPLY: Kinds = kinds("U RQ NRQ CQ Ry Rt");
    /// `ic0.msg_cycles_available*` and `ic0.msg_cycles_accept*`.
    pub const MSG_CYCLES_AVAILABLE: Kinds = kinds("U RQ Ry Rt");
    /// `ic0.msg_cycles_refunded*`.
    pub const MSG_CYCLES_REFUNDED: Kinds = kinds("Ry Rt");
    /// `ic0.cycles_burn128`.
    pub const CYCLES_BURN: Kinds = kinds("I G U RQ Ry Rt C T");
    /// `ic0.mint_cycles128` (which then fails for every canister but the cycles minting canister).
    pub const MINT_CYCLES: Kinds = kinds("U Ry Rt T");
    /// `ic0.canister_self_*`, `ic0.canister_*cycle_balance*`, `ic0.canister_status`,
    /// `ic0.canister_version`, `ic0.subnet_self_*`, `ic0.time`, `ic0.env_var_*`,
    /// `ic0.data_certificate_present`.
    pub const EVERYWHERE_BUT_START: Kinds = kinds("*");
    /// `ic0.msg_method_name_size`, `ic0.msg_method_name_copy` and `ic0.accept_message`.
    pub const INSPECT_MESSAGE: Kinds = kinds("F");
    /// `ic0.call_new`, `ic0.call_on_cleanup`, `ic0.call_data_append`,
    /// `ic0.call_with_best_effort_response` and `ic0.call_perform`.
    pub const CALL: Kinds = kinds("U CQ Ry Rt T");
    /// `ic0.call_cycles_add` and `ic0.call_cycles_add128`.
    pub const CALL_CYCLES_ADD: Kinds = kinds("U Ry Rt T");
    /// `ic0.root_key_size` and `ic0.root_key_copy`.
    pub const ROOT_KEY: Kinds = kinds("I G U RQ Ry Rt C T");
    /// `ic0.certified_data_set`.
    pub const CERTIFIED_DATA_SET: Kinds = kinds("I G U Ry Rt T");
    /// `ic0.data_certificate_size` and `ic0.data_certificate_copy`.
    pub const DATA_CERTIFICATE: Kinds = kinds("NRQ CQ");
    /// `ic0.global_timer_set`.
    pub const GLOBAL_TIMER_SET: Kinds = kinds("I G U Ry Rt C T");
    /// Stable memory, `ic0.performance_counter`, `ic0.is_controller`,
    /// `ic0.in_replicated_execution`, `ic0.cost_*`, `ic0.debug_print`, `ic0.trap`.
    pub const EVERYWHERE: Kinds = kinds("* s");
}

/// The matrix: every `ic0` function the engine provides and where it may be called.
pub const MATRIX: &[(&str, Kinds)] = &[
    ("msg_arg_data_size", allowed::MSG_ARG_DATA),
    ("msg_arg_data_copy", allowed::MSG_ARG_DATA),
    ("msg_caller_size", allowed::MSG_CALLER),
    ("msg_caller_copy", allowed::MSG_CALLER),
    ("msg_caller_info_data_size", allowed::MSG_CALLER_INFO),
    ("msg_caller_info_data_copy", allowed::MSG_CALLER_INFO),
    ("msg_caller_info_signer_size", allowed::MSG_CALLER_INFO),
    ("msg_caller_info_signer_copy", allowed::MSG_CALLER_INFO),
    ("msg_reject_code", allowed::MSG_REJECT_CODE),
    ("msg_reject_msg_size", allowed::MSG_REJECT_MSG),
    ("msg_reject_msg_copy", allowed::MSG_REJECT_MSG),
    ("msg_deadline", allowed::MSG_DEADLINE),
    ("msg_reply_data_append", allowed::MSG_REPLY),
    ("msg_reply", allowed::MSG_REPLY),
    ("msg_reject", allowed::MSG_REPLY),
    ("msg_method_name_size", allowed::INSPECT_MESSAGE),
    ("msg_method_name_copy", allowed::INSPECT_MESSAGE),
    ("msg_cycles_available128", allowed::MSG_CYCLES_AVAILABLE),
    ("msg_cycles_refunded128", allowed::MSG_CYCLES_REFUNDED),
    ("msg_cycles_accept128", allowed::MSG_CYCLES_AVAILABLE),
    ("msg_cycles_available", allowed::MSG_CYCLES_AVAILABLE),
    ("msg_cycles_refunded", allowed::MSG_CYCLES_REFUNDED),
    ("msg_cycles_accept", allowed::MSG_CYCLES_AVAILABLE),
    ("cycles_burn128", allowed::CYCLES_BURN),
    ("canister_self_size", allowed::EVERYWHERE_BUT_START),
    ("canister_self_copy", allowed::EVERYWHERE_BUT_START),
    ("canister_cycle_balance128", allowed::EVERYWHERE_BUT_START),
    ("canister_cycle_balance", allowed::EVERYWHERE_BUT_START),
    (
        "canister_liquid_cycle_balance128",
        allowed::EVERYWHERE_BUT_START,
    ),
    ("canister_status", allowed::EVERYWHERE_BUT_START),
    ("canister_version", allowed::EVERYWHERE_BUT_START),
    ("subnet_self_size", allowed::EVERYWHERE_BUT_START),
    ("subnet_self_copy", allowed::EVERYWHERE_BUT_START),
    ("subnet_self_node_count", allowed::EVERYWHERE_BUT_START),
    ("accept_message", allowed::INSPECT_MESSAGE),
    ("call_new", allowed::CALL),
    ("call_on_cleanup", allowed::CALL),
    ("call_data_append", allowed::CALL),
    ("call_with_best_effort_response", allowed::CALL),
    ("call_cycles_add128", allowed::CALL_CYCLES_ADD),
    ("call_cycles_add", allowed::CALL_CYCLES_ADD),
    ("call_perform", allowed::CALL),
    ("stable_size", allowed::EVERYWHERE),
    ("stable_grow", allowed::EVERYWHERE),
    ("stable_read", allowed::EVERYWHERE),
    ("stable_write", allowed::EVERYWHERE),
    ("stable64_size", allowed::EVERYWHERE),
    ("stable64_grow", allowed::EVERYWHERE),
    ("stable64_read", allowed::EVERYWHERE),
    ("stable64_write", allowed::EVERYWHERE),
    ("root_key_size", allowed::ROOT_KEY),
    ("root_key_copy", allowed::ROOT_KEY),
    ("certified_data_set", allowed::CERTIFIED_DATA_SET),
    ("data_certificate_present", allowed::EVERYWHERE_BUT_START),
    ("data_certificate_size", allowed::DATA_CERTIFICATE),
    ("data_certificate_copy", allowed::DATA_CERTIFICATE),
    ("time", allowed::EVERYWHERE_BUT_START),
    ("global_timer_set", allowed::GLOBAL_TIMER_SET),
    ("performance_counter", allowed::EVERYWHERE),
    ("is_controller", allowed::EVERYWHERE),
    ("in_replicated_execution", allowed::EVERYWHERE),
    ("cost_call", allowed::EVERYWHERE),
    ("cost_create_canister", allowed::EVERYWHERE),
    ("cost_http_request", allowed::EVERYWHERE),
    ("cost_http_request_v2", allowed::EVERYWHERE),
    ("cost_sign_with_ecdsa", allowed::EVERYWHERE),
    ("cost_sign_with_schnorr", allowed::EVERYWHERE),
    ("cost_vetkd_derive_key", allowed::EVERYWHERE),
    ("env_var_count", allowed::EVERYWHERE_BUT_START),
    ("env_var_name_size", allowed::EVERYWHERE_BUT_START),
    ("env_var_name_copy", allowed::EVERYWHERE_BUT_START),
    ("env_var_name_exists", allowed::EVERYWHERE_BUT_START),
    ("env_var_value_size", allowed::EVERYWHERE_BUT_START),
    ("env_var_value_copy", allowed::EVERYWHERE_BUT_START),
    ("debug_print", allowed::EVERYWHERE),
    ("trap", allowed::EVERYWHERE),
    ("mint_cycles128", allowed::MINT_CYCLES),
];

/// Where `function` (an `ic0` name without the prefix) may be called; `None` for a function
/// the engine does not provide.
pub fn availability(function: &str) -> Option<Kinds> {
    MATRIX
        .iter()
        .find(|(name, _)| *name == function)
        .map(|(_, kinds)| *kinds)
}

/// The replica's message for calling `function` in a kind of execution that may not call it.
pub fn not_available_message(function: &str, kind: ApiType) -> String {
    format!("\"ic0_{function}\" cannot be executed in {kind} mode")
}

/// The matrix as a Markdown table (the one in `METERING.md`): one row per set of functions
/// available in the same kinds of execution, one column per kind (`✓` where available).
pub fn markdown_table() -> String {
    let mut groups: Vec<(Kinds, Vec<&str>)> = Vec::new();
    for (name, kinds) in MATRIX {
        match groups.iter_mut().find(|(k, _)| k == kinds) {
            Some((_, names)) => names.push(name),
            None => groups.push((*kinds, vec![name])),
        }
    }
    let header: Vec<String> = ApiType::ALL
        .iter()
        .map(|k| k.name().replace(' ', "&nbsp;"))
        .collect();
    let mut out = format!("| `ic0` functions | {} |\n", header.join(" | "));
    out.push_str(&format!("|---|{}\n", ":-:|".repeat(ApiType::ALL.len())));
    for (kinds, names) in groups {
        let names: Vec<String> = names.iter().map(|n| format!("`{n}`")).collect();
        let cells: Vec<&str> = ApiType::ALL
            .iter()
            .map(|k| if kinds.contains(*k) { "✓" } else { "" })
            .collect();
        out.push_str(&format!(
            "| {} | {} |\n",
            names.join(", "),
            cells.join(" | ")
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_notation_parses_as_the_specification_defines_it() {
        let all_but_start = kinds("*");
        assert!(!all_but_start.contains(ApiType::Start));
        for kind in &ApiType::ALL[1..] {
            assert!(all_but_start.contains(*kind), "{kind}");
        }
        assert!(kinds("* s").contains(ApiType::Start));
        let t = kinds("T");
        assert!(t.contains(ApiType::Heartbeat) && t.contains(ApiType::GlobalTimer));
        assert!(!t.contains(ApiType::Update));
        let k = kinds("Ry Rt");
        assert!(k.contains(ApiType::ReplyCallback) && k.contains(ApiType::RejectCallback));
        assert!(!k.contains(ApiType::Cleanup));
    }

    #[test]
    fn every_function_is_listed_once() {
        for (i, (name, _)) in MATRIX.iter().enumerate() {
            assert!(
                MATRIX[i + 1..].iter().all(|(other, _)| other != name),
                "{name} listed twice"
            );
        }
        assert_eq!(availability("no_such_function"), None);
        assert_eq!(
            not_available_message("msg_reply", ApiType::Init),
            "\"ic0_msg_reply\" cannot be executed in init mode"
        );
    }
}
