//! The availability matrix, cell by cell: every `ic0` function is called in every kind of
//! execution (start, init, pre-upgrade, update, replicated and non-replicated query, composite
//! query, reply and reject callback, cleanup, inspect message, heartbeat, global timer). Where
//! the matrix forbids the call the execution traps with exactly the replica's message; where it
//! allows it, it does not trap with that message (it may trap for another reason, such as
//! `ic0.call_perform` without a call being built, which is what the replica does too).

mod common;
use common::*;
use offline_engine::system_api::{ApiType, MATRIX, not_available_message};
use offline_engine::{Canister, EngineError, MessageResult, Settings};

/// Signature (params, results) and arguments of every function, for a wasm32 module whose
/// heap is one page. Sizes are 0 and offsets 0, so that an allowed call succeeds where it can.
fn signature(function: &str) -> (&'static str, &'static str, &'static str) {
    const COPY: (&str, &str, &str) = (
        "i32 i32 i32",
        "",
        "(i32.const 0) (i32.const 0) (i32.const 0)",
    );
    const SIZE: (&str, &str, &str) = ("", "i32", "");
    const DST: (&str, &str, &str) = ("i32", "", "(i32.const 0)");
    const SRC: (&str, &str, &str) = ("i32 i32", "", "(i32.const 0) (i32.const 0)");
    const NONE: (&str, &str, &str) = ("", "", "");
    const AMOUNT128: (&str, &str, &str) = (
        "i64 i64 i32",
        "",
        "(i64.const 0) (i64.const 0) (i32.const 0)",
    );
    const COST_KEY: (&str, &str, &str) = (
        "i32 i32 i32 i32",
        "i32",
        "(i32.const 0) (i32.const 0) (i32.const 0) (i32.const 0)",
    );
    match function {
        "msg_arg_data_size"
        | "msg_caller_size"
        | "msg_caller_info_data_size"
        | "msg_caller_info_signer_size"
        | "msg_reject_msg_size"
        | "msg_method_name_size"
        | "canister_self_size"
        | "subnet_self_size"
        | "root_key_size"
        | "data_certificate_size"
        | "env_var_count" => SIZE,
        "msg_arg_data_copy"
        | "msg_caller_copy"
        | "msg_caller_info_data_copy"
        | "msg_caller_info_signer_copy"
        | "msg_reject_msg_copy"
        | "msg_method_name_copy"
        | "canister_self_copy"
        | "subnet_self_copy"
        | "root_key_copy"
        | "data_certificate_copy" => COPY,
        "msg_reject_code"
        | "canister_status"
        | "subnet_self_node_count"
        | "in_replicated_execution"
        | "data_certificate_present" => ("", "i32", ""),
        "msg_deadline"
        | "canister_version"
        | "time"
        | "msg_cycles_available"
        | "msg_cycles_refunded"
        | "canister_cycle_balance" => ("", "i64", ""),
        "msg_reply_data_append" | "msg_reject" | "certified_data_set" | "debug_print" | "trap" => {
            SRC
        }
        "msg_reply" | "accept_message" => NONE,
        "msg_cycles_available128"
        | "msg_cycles_refunded128"
        | "canister_cycle_balance128"
        | "canister_liquid_cycle_balance128"
        | "cost_create_canister" => DST,
        "msg_cycles_accept128" | "cycles_burn128" | "mint_cycles128" => AMOUNT128,
        "msg_cycles_accept" => ("i64", "i64", "(i64.const 0)"),
        "call_new" => (
            "i32 i32 i32 i32 i32 i32 i32 i32",
            "",
            "(i32.const 0) (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 0)",
        ),
        "call_on_cleanup" => ("i32 i32", "", "(i32.const 0) (i32.const 0)"),
        "call_data_append" => SRC,
        "call_with_best_effort_response" => ("i32", "", "(i32.const 1)"),
        "call_cycles_add128" => ("i64 i64", "", "(i64.const 0) (i64.const 0)"),
        "call_cycles_add" => ("i64", "", "(i64.const 0)"),
        "call_perform" => ("", "i32", ""),
        "stable_size" => ("", "i32", ""),
        "stable_grow" => ("i32", "i32", "(i32.const 0)"),
        "stable_read" | "stable_write" => COPY,
        "stable64_size" => ("", "i64", ""),
        "stable64_grow" => ("i64", "i64", "(i64.const 0)"),
        "stable64_read" | "stable64_write" => (
            "i64 i64 i64",
            "",
            "(i64.const 0) (i64.const 0) (i64.const 0)",
        ),
        "global_timer_set" => ("i64", "i64", "(i64.const 0)"),
        "performance_counter" => ("i32", "i64", "(i32.const 0)"),
        "is_controller" => ("i32 i32", "i32", "(i32.const 0) (i32.const 0)"),
        "cost_call" | "cost_http_request" => (
            "i64 i64 i32",
            "",
            "(i64.const 0) (i64.const 0) (i32.const 0)",
        ),
        "cost_http_request_v2" => COPY,
        "cost_sign_with_ecdsa" | "cost_sign_with_schnorr" | "cost_vetkd_derive_key" => COST_KEY,
        "env_var_name_size" => ("i32", "i32", "(i32.const 0)"),
        "env_var_name_copy" => (
            "i32 i32 i32 i32",
            "",
            "(i32.const 0) (i32.const 0) (i32.const 0) (i32.const 0)",
        ),
        "env_var_name_exists" => ("i32 i32", "i32", "(i32.const 0) (i32.const 0)"),
        "env_var_value_size" => ("i32 i32", "i32", "(i32.const 0) (i32.const 0)"),
        "env_var_value_copy" => (
            "i32 i32 i32 i32 i32",
            "",
            "(i32.const 0) (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 0)",
        ),
        other => panic!("no signature for ic0.{other}: add it to the test"),
    }
}

/// A module that calls `function` from the entry point of `kind` only; the other entry points
/// it exports are there to reach that one (a self-call for the callbacks, the timer armed in
/// `canister_init` for the global timer).
fn module(function: &str, kind: ApiType) -> String {
    let (params, results, args) = signature(function);
    let result = if results.is_empty() {
        String::new()
    } else {
        format!("(result {results})")
    };
    let call_f = if results.is_empty() {
        format!("(call $f {args})")
    } else {
        format!("(drop (call $f {args}))")
    };
    let at = |k: ApiType| if k == kind { call_f.as_str() } else { "" };
    let timer = if kind == ApiType::GlobalTimer {
        "(drop (call $timer_set (i64.const 1)))"
    } else {
        ""
    };
    let start = if kind == ApiType::Start {
        "(start $start)"
    } else {
        ""
    };
    format!(
        r#"(module
  (import "ic0" "{function}" (func $f (param {params}) {result}))
  (import "ic0" "call_new" (func $call_new (param i32 i32 i32 i32 i32 i32 i32 i32)))
  (import "ic0" "call_on_cleanup" (func $call_on_cleanup (param i32 i32)))
  (import "ic0" "call_perform" (func $call_perform (result i32)))
  (import "ic0" "canister_self_size" (func $self_size (result i32)))
  (import "ic0" "canister_self_copy" (func $self_copy (param i32 i32 i32)))
  (import "ic0" "msg_reply" (func $reply))
  (import "ic0" "accept_message" (func $accept))
  (import "ic0" "global_timer_set" (func $timer_set (param i64) (result i64)))
  (memory 1)
  (table 3 funcref)
  (elem (i32.const 0) $on_reply $on_reject $on_cleanup)
  (data (i32.const 1000) "pongnope")
  (func $start {start_body})
  {start}
  (func (export "canister_init") {timer} {init})
  (func (export "canister_pre_upgrade") {pre})
  (func (export "canister_update f") {update})
  (func (export "canister_query q") {query})
  (func (export "canister_composite_query cq") {cq})
  (func (export "canister_inspect_message") {inspect} (call $accept))
  (func (export "canister_heartbeat") {heartbeat})
  (func (export "canister_global_timer") {global_timer})
  (func (export "canister_update pong") (call $reply))
  (func $self_call (param $name i32) (param $len i32)
    (call $self_copy (i32.const 2000) (i32.const 0) (call $self_size))
    (call $call_new (i32.const 2000) (call $self_size) (local.get $name) (local.get $len)
                    (i32.const 0) (i32.const 0) (i32.const 1) (i32.const 0))
    (call $call_on_cleanup (i32.const 2) (i32.const 0))
    (drop (call $call_perform)))
  (func (export "canister_update go") (call $self_call (i32.const 1000) (i32.const 4)))
  (func (export "canister_update go_missing") (call $self_call (i32.const 1004) (i32.const 4)))
  (func $on_reply (param i32) {reply} {reply_trap})
  (func $on_reject (param i32) {reject})
  (func $on_cleanup (param i32) {cleanup}))"#,
        start_body = at(ApiType::Start),
        init = at(ApiType::Init),
        pre = at(ApiType::PreUpgrade),
        update = at(ApiType::Update),
        query = if kind == ApiType::ReplicatedQuery || kind == ApiType::NonReplicatedQuery {
            call_f.as_str()
        } else {
            ""
        },
        cq = at(ApiType::CompositeQuery),
        inspect = at(ApiType::InspectMessage),
        heartbeat = at(ApiType::Heartbeat),
        global_timer = at(ApiType::GlobalTimer),
        reply = at(ApiType::ReplyCallback),
        // The cleanup runs when a callback traps: the reply callback traps when cleanup is tested.
        reply_trap = if kind == ApiType::Cleanup {
            "unreachable"
        } else {
            ""
        },
        reject = at(ApiType::RejectCallback),
        cleanup = at(ApiType::Cleanup),
    )
}

/// Runs `function` in `kind` and returns the trap message, if the execution trapped.
fn trap_in(function: &str, kind: ApiType) -> Option<String> {
    let engine = engine();
    let wat = module(function, kind);
    let program = program(&engine, &wat);
    let settings = Settings {
        debug_print_enabled: false,
        ..Settings::default()
    };
    let trap_of = |r: &MessageResult| match r {
        MessageResult::Trap(m) => Some(m.clone()),
        _ => None,
    };
    let installed = Canister::install(&engine, &program, &[], settings);
    let mut c = match (kind, installed) {
        (ApiType::Start | ApiType::Init, Err(EngineError::InstallFailed(e))) => {
            return trap_of(&e.result);
        }
        (ApiType::Start | ApiType::Init, Ok(_)) => return None,
        (_, Ok((c, _))) => c,
        (_, Err(e)) => panic!("{function} in {kind}: install failed: {e}"),
    };
    let find = |execs: &[offline_engine::Execution], entry: &str| {
        let e = execs
            .iter()
            .find(|e| e.entry == entry)
            .unwrap_or_else(|| panic!("{function} in {kind}: no {entry} in {execs:?}"));
        trap_of(&e.result)
    };
    match kind {
        ApiType::Start | ApiType::Init => unreachable!(),
        ApiType::PreUpgrade => {
            let e = c.upgrade(&program, &[]).expect("upgrade runs");
            trap_of(&e.result)
        }
        ApiType::Update => trap_of(&c.update("f", &[]).unwrap().result),
        ApiType::ReplicatedQuery => trap_of(&c.update("q", &[]).unwrap().result),
        ApiType::NonReplicatedQuery => trap_of(&c.query("q", &[]).unwrap().result),
        ApiType::CompositeQuery => trap_of(&c.query("cq", &[]).unwrap().result),
        ApiType::ReplyCallback => find(&c.update_and_wait("go", &[]).unwrap().1, "reply_callback"),
        ApiType::RejectCallback => find(
            &c.update_and_wait("go_missing", &[]).unwrap().1,
            "reject_callback",
        ),
        ApiType::Cleanup => find(&c.update_and_wait("go", &[]).unwrap().1, "cleanup"),
        ApiType::InspectMessage => {
            let e = c
                .inspect_message(offline_engine::ANONYMOUS, "f", &[])
                .unwrap()
                .expect("the module exports canister_inspect_message");
            match e.result {
                MessageResult::Reject(5, m) => Some(m),
                _ => None,
            }
        }
        ApiType::Heartbeat => find(&c.tick().unwrap(), "canister_heartbeat"),
        ApiType::GlobalTimer => {
            let runs = c.tick().unwrap();
            find(&runs, "canister_global_timer")
        }
    }
}

/// Where each function may be called, transcribed function by function from the interface
/// specification's "Overview of imports" (its comment after each import), without the kinds
/// the engine never runs (`TQ`, `CRy`, `CRt`, `CC`), and with the replica's deviations:
/// `msg_reject_code` is refused in cleanup; `mint_cycles128` (not in the overview) is available
/// where the replica's `ic0_mint_cycles128` is; `subnet_self_node_count` (not in the overview)
/// everywhere but the start function. `Q` in the specification is `RQ NRQ`.
const SPECIFICATION: &[(&str, &str)] = &[
    ("msg_arg_data_size", "I U RQ NRQ CQ Ry F"),
    ("msg_arg_data_copy", "I U RQ NRQ CQ Ry F"),
    ("msg_caller_size", "*"),
    ("msg_caller_copy", "*"),
    ("msg_caller_info_data_size", "U RQ NRQ CQ Ry Rt C F"),
    ("msg_caller_info_data_copy", "U RQ NRQ CQ Ry Rt C F"),
    ("msg_caller_info_signer_size", "U RQ NRQ CQ Ry Rt C F"),
    ("msg_caller_info_signer_copy", "U RQ NRQ CQ Ry Rt C F"),
    ("msg_reject_code", "Ry Rt"),
    ("msg_reject_msg_size", "Rt"),
    ("msg_reject_msg_copy", "Rt"),
    ("msg_deadline", "U RQ NRQ CQ Ry Rt"),
    ("msg_reply_data_append", "U RQ NRQ CQ Ry Rt"),
    ("msg_reply", "U RQ NRQ CQ Ry Rt"),
    ("msg_reject", "U RQ NRQ CQ Ry Rt"),
    ("msg_cycles_available128", "U RQ Rt Ry"),
    ("msg_cycles_refunded128", "Rt Ry"),
    ("msg_cycles_accept128", "U RQ Rt Ry"),
    ("cycles_burn128", "I G U RQ Ry Rt C T"),
    ("canister_self_size", "*"),
    ("canister_self_copy", "*"),
    ("canister_cycle_balance128", "*"),
    ("canister_liquid_cycle_balance128", "*"),
    ("canister_status", "*"),
    ("canister_version", "*"),
    ("subnet_self_size", "*"),
    ("subnet_self_copy", "*"),
    ("subnet_self_node_count", "*"),
    ("msg_method_name_size", "F"),
    ("msg_method_name_copy", "F"),
    ("accept_message", "F"),
    ("call_new", "U CQ Ry Rt T"),
    ("call_on_cleanup", "U CQ Ry Rt T"),
    ("call_data_append", "U CQ Ry Rt T"),
    ("call_with_best_effort_response", "U CQ Ry Rt T"),
    ("call_cycles_add128", "U Ry Rt T"),
    ("call_perform", "U CQ Ry Rt T"),
    ("stable64_size", "* s"),
    ("stable64_grow", "* s"),
    ("stable64_write", "* s"),
    ("stable64_read", "* s"),
    ("root_key_size", "I G U RQ Ry Rt C T"),
    ("root_key_copy", "I G U RQ Ry Rt C T"),
    ("certified_data_set", "I G U Ry Rt T"),
    ("data_certificate_present", "*"),
    ("data_certificate_size", "NRQ CQ"),
    ("data_certificate_copy", "NRQ CQ"),
    ("time", "*"),
    ("global_timer_set", "I G U Ry Rt C T"),
    ("performance_counter", "* s"),
    ("is_controller", "* s"),
    ("in_replicated_execution", "* s"),
    ("cost_call", "* s"),
    ("cost_create_canister", "* s"),
    ("cost_http_request", "* s"),
    ("cost_http_request_v2", "* s"),
    ("cost_sign_with_ecdsa", "* s"),
    ("cost_sign_with_schnorr", "* s"),
    ("cost_vetkd_derive_key", "* s"),
    ("env_var_count", "*"),
    ("env_var_name_size", "*"),
    ("env_var_name_copy", "*"),
    ("env_var_name_exists", "*"),
    ("env_var_value_size", "*"),
    ("env_var_value_copy", "*"),
    ("debug_print", "* s"),
    ("trap", "* s"),
    ("msg_cycles_available", "U RQ Rt Ry"),
    ("msg_cycles_refunded", "Rt Ry"),
    ("msg_cycles_accept", "U RQ Rt Ry"),
    ("canister_cycle_balance", "*"),
    ("call_cycles_add", "U Ry Rt T"),
    ("stable_size", "* s"),
    ("stable_grow", "* s"),
    ("stable_write", "* s"),
    ("stable_read", "* s"),
    ("mint_cycles128", "U Ry Rt T"),
];

/// Whether the specification's notation `spec` includes `kind`.
fn listed(spec: &str, kind: ApiType) -> bool {
    let codes: Vec<&str> = spec.split_whitespace().collect();
    (codes.contains(&"*") && kind != ApiType::Start) || codes.contains(&kind.code())
}

#[test]
fn every_cell_of_the_matrix_holds() {
    // The engine provides exactly the functions of the transcription, and its matrix agrees
    // with it cell by cell.
    let mut engine_functions: Vec<&str> = MATRIX.iter().map(|(f, _)| *f).collect();
    let mut spec_functions: Vec<&str> = SPECIFICATION.iter().map(|(f, _)| *f).collect();
    engine_functions.sort();
    spec_functions.sort();
    assert_eq!(engine_functions, spec_functions);
    let mut checked = 0;
    let mut wrong = Vec::new();
    for (function, spec) in SPECIFICATION {
        let (_, engine_kinds) = MATRIX.iter().find(|(f, _)| f == function).unwrap();
        for kind in ApiType::ALL {
            let allowed = listed(spec, kind);
            if engine_kinds.contains(kind) != allowed {
                wrong.push(format!(
                    "ic0.{function} in {kind}: the engine's matrix says {}",
                    !allowed
                ));
            }
            // What an execution of that kind calling the function actually does.
            let refusal = format!(
                "Canister violated contract: {}",
                not_available_message(function, kind)
            );
            let trap = trap_in(function, kind);
            let refused = trap.as_deref() == Some(refusal.as_str());
            if refused == allowed {
                wrong.push(format!(
                    "ic0.{function} in {kind}: allowed {allowed} but the execution gave {trap:?}"
                ));
            }
            checked += 1;
        }
    }
    assert_eq!(checked, SPECIFICATION.len() * ApiType::ALL.len());
    assert!(
        wrong.is_empty(),
        "{} wrong cells:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}

#[test]
fn metering_md_shows_the_matrix() {
    let doc = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("METERING.md"),
    )
    .unwrap();
    let table = offline_engine::system_api::availability::markdown_table();
    assert!(
        doc.contains(&table),
        "METERING.md lacks the current matrix; put this table in §3:\n{table}"
    );
}
