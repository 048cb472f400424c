//! Message semantics: trap and query rollback, upgrade, the global timer, self-calls with
//! callbacks and cleanup, the instruction limit, load errors.

mod common;
use common::*;
use offline_engine::{
    Canister, EngineError, InstructionLimits, MessageResult, Settings, SubnetKind, reject_code,
};

const STATE: &str = r#"
(module
  (import "ic0" "msg_reply" (func $reply))
  (import "ic0" "msg_reply_data_append" (func $append (param i32 i32)))
  (import "ic0" "stable64_grow" (func $sgrow (param i64) (result i64)))
  (import "ic0" "stable64_write" (func $swrite (param i64 i64 i64)))
  (import "ic0" "stable64_read" (func $sread (param i64 i64 i64)))
  (memory 1)
  (global $g (mut i32) (i32.const 0))
  (data (i32.const 300) "init")
  (data (i32.const 310) "pre!")
  (func (export "canister_init")
    (drop (call $sgrow (i64.const 1)))
    (call $swrite (i64.const 0) (i64.const 300) (i64.const 4)))
  (func (export "canister_pre_upgrade")
    (call $swrite (i64.const 4) (i64.const 310) (i64.const 4)))
  (func $mutate
    (i32.store (i32.const 100) (i32.const 42))
    (global.set $g (i32.const 7))
    (i32.store (i32.const 400) (i32.const 0x21212121))
    (call $swrite (i64.const 0) (i64.const 400) (i64.const 4))
    (drop (memory.grow (i32.const 1))))
  (func (export "canister_update set") (call $mutate) (call $reply))
  (func (export "canister_update set_trap") (call $mutate) unreachable)
  (func (export "canister_query mutate") (call $mutate) (call $reply))
  (func (export "canister_update spin") (call $mutate) (loop $l (br $l)))
  (func (export "canister_query get")
    (call $sread (i64.const 200) (i64.const 0) (i64.const 4))
    (i32.store (i32.const 204) (global.get $g))
    (i32.store (i32.const 208) (memory.size))
    (call $append (i32.const 100) (i32.const 4))
    (call $append (i32.const 200) (i32.const 12))
    (call $reply)))
"#;

fn get(c: &mut Canister) -> Vec<u8> {
    let e = c.query("get", &[]).unwrap();
    e.result.reply().expect("reply").to_vec()
}

fn state(heap: [u8; 4], stable: &[u8; 4], global: u8, pages: u8) -> Vec<u8> {
    let mut v = heap.to_vec();
    v.extend_from_slice(stable);
    v.extend_from_slice(&[global, 0, 0, 0, pages, 0, 0, 0]);
    v
}

#[test]
fn trap_rolls_back_heap_globals_stable_and_growth() {
    let mut c = install(STATE);
    let initial = state([0; 4], b"init", 0, 1);
    assert_eq!(get(&mut c), initial);
    let e = c.update("set_trap", &[]).unwrap();
    assert_eq!(
        e.result,
        MessageResult::Trap("Canister trapped: unreachable".into())
    );
    assert_eq!(get(&mut c), initial);
    assert_eq!(c.heap_size_bytes(), 65536);
    let e = c.update("set", &[]).unwrap();
    assert_eq!(e.result, MessageResult::Reply(vec![]));
    // Heap pages 0 (offsets 100, 400) changed: one dirty page. Stable: one page.
    assert_eq!(e.heap_dirty_pages, 1);
    assert_eq!(e.stable_dirty_pages, 1);
    assert_eq!(e.billed_instructions, e.instructions + 1_000);
    assert_eq!(get(&mut c), state([42, 0, 0, 0], b"!!!!", 7, 2));
    // Same bytes again: nothing dirty.
    let e = c.update("set", &[]).unwrap();
    assert_eq!(e.heap_dirty_pages, 0);
}

#[test]
fn query_changes_are_discarded() {
    let mut c = install(STATE);
    let initial = state([0; 4], b"init", 0, 1);
    let e = c.query("mutate", &[]).unwrap();
    assert_eq!(e.result, MessageResult::Reply(vec![]));
    assert_eq!(e.heap_dirty_pages, 1);
    assert_eq!(get(&mut c), initial);
    assert_eq!(c.heap_size_bytes(), 65536);
    assert_eq!(&c.stable_memory()[..4], b"init");
    // A query method called as an update runs replicated but its changes are discarded too.
    c.update("mutate", &[]).unwrap();
    assert_eq!(get(&mut c), initial);
}

#[test]
fn instruction_limit_traps_with_the_ic_message_and_rolls_back() {
    let limits = InstructionLimits {
        update: 1_000_000,
        query: 1_000_000,
        install: 1_000_000,
        inspect: 1_000_000,
    };
    let (_, mut c, _) = install_with(
        STATE,
        Settings {
            subnet: SubnetKind::Custom(limits),
            ..Settings::default()
        },
    );
    let e = c.update("spin", &[]).unwrap();
    assert_eq!(
        e.result,
        MessageResult::Trap(
            "Canister exceeded the limit of 1000000 instructions for single message execution."
                .into()
        )
    );
    assert_eq!(e.instructions, 1_000_000);
    assert_eq!(get(&mut c), state([0; 4], b"init", 0, 1));
    assert_eq!(SubnetKind::Application.update_limit(), 40_000_000_000);
    assert_eq!(SubnetKind::Application.query_limit(), 5_000_000_000);
    assert_eq!(SubnetKind::Application.install_limit(), 300_000_000_000);
    assert_eq!(SubnetKind::Benchmarking.query_limit(), 99_999_999_999_999);
}

const V2: &str = r#"
(module
  (import "ic0" "msg_reply" (func $reply))
  (import "ic0" "msg_reply_data_append" (func $append (param i32 i32)))
  (import "ic0" "stable64_read" (func $sread (param i64 i64 i64)))
  (memory 1)
  (global $g (mut i32) (i32.const 5))
  (func (export "canister_post_upgrade") (call $sread (i64.const 100) (i64.const 4) (i64.const 4)))
  (func (export "canister_query get")
    (call $sread (i64.const 200) (i64.const 0) (i64.const 4))
    (i32.store (i32.const 204) (global.get $g))
    (i32.store (i32.const 208) (memory.size))
    (call $append (i32.const 100) (i32.const 4))
    (call $append (i32.const 200) (i32.const 12))
    (call $reply)))
"#;

#[test]
fn upgrade_keeps_stable_memory_and_resets_heap() {
    let (engine, mut c, _) = install_with(STATE, Settings::default());
    c.update("set", &[]).unwrap();
    let v2 = program(&engine, V2);
    let e = c.upgrade(&v2, &[]).unwrap();
    assert_eq!(e.result, MessageResult::NoReply, "{e:?}");
    // post_upgrade copied the bytes pre_upgrade wrote to stable memory into the fresh heap.
    assert_eq!(get(&mut c), state(*b"pre!", b"!!!!", 5, 1));
    assert_eq!(c.heap_size_bytes(), 65536);
}

#[test]
fn failed_upgrade_keeps_the_old_canister() {
    let (engine, mut c, _) = install_with(STATE, Settings::default());
    c.update("set", &[]).unwrap();
    let before = get(&mut c);
    let bad = program(
        &engine,
        r#"(module (memory 1) (func (export "canister_post_upgrade") unreachable))"#,
    );
    let e = c.upgrade(&bad, &[]).unwrap();
    assert!(e.result.is_trap());
    assert_eq!(get(&mut c), before);
    // pre_upgrade's stable write was undone too.
    assert_eq!(&c.stable_memory()[..8], b"!!!!\0\0\0\0");
}

const TIMER: &str = r#"
(module
  (import "ic0" "msg_reply" (func $reply))
  (import "ic0" "msg_reply_data_append" (func $append (param i32 i32)))
  (import "ic0" "global_timer_set" (func $timer_set (param i64) (result i64)))
  (import "ic0" "time" (func $time (result i64)))
  (memory 1)
  (global $g (mut i32) (i32.const 0))
  (func (export "canister_update arm")
    (drop (call $timer_set (i64.add (call $time) (i64.const 1000)))) (call $reply))
  (func (export "canister_global_timer") (global.set $g (i32.add (global.get $g) (i32.const 1))))
  (func (export "canister_query count")
    (i32.store (i32.const 0) (global.get $g)) (call $append (i32.const 0) (i32.const 4)) (call $reply)))
"#;

#[test]
fn global_timer_fires_when_engine_time_passes_the_deadline() {
    let mut c = install(TIMER);
    let t0 = c.time();
    c.update("arm", &[]).unwrap();
    assert_eq!(c.global_timer(), t0 + 1000);
    assert!(c.tick().unwrap().is_empty());
    c.advance_time(999);
    assert!(c.tick().unwrap().is_empty());
    c.advance_time(1);
    let runs = c.tick().unwrap();
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].entry, "canister_global_timer");
    assert_eq!(c.global_timer(), 0, "the timer deactivates when it fires");
    assert_eq!(
        c.query("count", &[]).unwrap().result,
        MessageResult::Reply(vec![1, 0, 0, 0])
    );
    assert!(c.tick().unwrap().is_empty());
}

const CALLS: &str = r#"
(module
  (import "ic0" "call_new" (func $call_new (param i32 i32 i32 i32 i32 i32 i32 i32)))
  (import "ic0" "call_perform" (func $call_perform (result i32)))
  (import "ic0" "call_data_append" (func $call_data_append (param i32 i32)))
  (import "ic0" "call_on_cleanup" (func $call_on_cleanup (param i32 i32)))
  (import "ic0" "canister_self_size" (func $self_size (result i32)))
  (import "ic0" "canister_self_copy" (func $self_copy (param i32 i32 i32)))
  (import "ic0" "msg_arg_data_size" (func $arg_size (result i32)))
  (import "ic0" "msg_arg_data_copy" (func $arg_copy (param i32 i32 i32)))
  (import "ic0" "msg_reply" (func $reply))
  (import "ic0" "msg_reply_data_append" (func $append (param i32 i32)))
  (import "ic0" "msg_reject_code" (func $reject_code (result i32)))
  (import "ic0" "msg_caller_size" (func $caller_size (result i32)))
  (memory 1)
  (table 4 funcref)
  (elem (i32.const 0) $on_reply $on_reject $cleanup $bad_reply)
  (global $cleaned (mut i32) (i32.const 0))
  (data (i32.const 1000) "pong")
  (data (i32.const 1010) "nope")
  (data (i32.const 1020) "ping!")
  (data (i32.const 1030) "\01\02\03")
  (func $call (param $callee i32) (param $callee_len i32) (param $name i32) (param $len i32) (param $on_reply i32)
    (call $call_new (local.get $callee) (local.get $callee_len) (local.get $name) (local.get $len)
                    (local.get $on_reply) (i32.const 77) (i32.const 1) (i32.const 78))
    (call $call_on_cleanup (i32.const 2) (i32.const 79))
    (call $call_data_append (i32.const 1020) (i32.const 5))
    (drop (call $call_perform)))
  (func $self (result i32)
    (call $self_copy (i32.const 2000) (i32.const 0) (call $self_size))
    (call $self_size))
  (func (export "canister_update ping")
    (call $call (i32.const 2000) (call $self) (i32.const 1000) (i32.const 4) (i32.const 0)))
  (func (export "canister_update ping_missing")
    (call $call (i32.const 2000) (call $self) (i32.const 1010) (i32.const 4) (i32.const 0)))
  (func (export "canister_update ping_bad")
    (call $call (i32.const 2000) (call $self) (i32.const 1000) (i32.const 4) (i32.const 3)))
  (func (export "canister_update ping_other")
    (call $call (i32.const 1030) (i32.const 3) (i32.const 1000) (i32.const 4) (i32.const 0)))
  (func $echo
    (call $arg_copy (i32.const 3000) (i32.const 0) (call $arg_size))
    (call $append (i32.const 3000) (call $arg_size))
    (call $reply))
  (func (export "canister_update pong")
    ;; the caller is the canister itself (10 bytes)
    (if (i32.ne (call $caller_size) (i32.const 10)) (then unreachable))
    (call $echo))
  (func $on_reply (param $env i32)
    (if (i32.ne (local.get $env) (i32.const 77)) (then unreachable))
    (call $echo))
  (func $on_reject (param $env i32)
    (if (i32.ne (local.get $env) (i32.const 78)) (then unreachable))
    (i32.store (i32.const 3000) (call $reject_code))
    (call $append (i32.const 3000) (i32.const 4))
    (call $reply))
  (func $cleanup (param $env i32)
    (if (i32.ne (local.get $env) (i32.const 79)) (then unreachable))
    (global.set $cleaned (i32.const 1)))
  (func $bad_reply (param $env i32) (global.set $cleaned (i32.const 2)) unreachable)
  (func (export "canister_query cleaned")
    (i32.store (i32.const 0) (global.get $cleaned)) (call $append (i32.const 0) (i32.const 4)) (call $reply)))
"#;

#[test]
fn self_call_reply_callback() {
    let mut c = install(CALLS);
    let first = c.update("ping", &[]).unwrap();
    assert_eq!(first.result, MessageResult::NoReply);
    assert_eq!(c.queued(), 1);
    let runs = c.tick().unwrap();
    let entries: Vec<&str> = runs.iter().map(|e| e.entry.as_str()).collect();
    assert_eq!(entries, ["canister_update pong", "reply_callback"]);
    assert_eq!(runs[0].result, MessageResult::Reply(b"ping!".to_vec()));
    assert_eq!(runs[1].result, MessageResult::Reply(b"ping!".to_vec()));
    let (r, _) = c.update_and_wait("ping", &[]).unwrap();
    assert_eq!(r, MessageResult::Reply(b"ping!".to_vec()));
}

#[test]
fn self_call_rejects_reach_the_reject_callback() {
    let mut c = install(CALLS);
    let (r, runs) = c.update_and_wait("ping_missing", &[]).unwrap();
    assert_eq!(
        r,
        MessageResult::Reply(vec![reject_code::CANISTER_ERROR as u8, 0, 0, 0]),
        "{runs:?}"
    );
    let (r, _) = c.update_and_wait("ping_other", &[]).unwrap();
    assert_eq!(
        r,
        MessageResult::Reply(vec![reject_code::DESTINATION_INVALID as u8, 0, 0, 0])
    );
}

#[test]
fn trapping_callback_runs_cleanup_on_the_state_before_it() {
    let mut c = install(CALLS);
    let (r, runs) = c.update_and_wait("ping_bad", &[]).unwrap();
    let entries: Vec<&str> = runs.iter().map(|e| e.entry.as_str()).collect();
    assert_eq!(
        entries,
        [
            "canister_update ping_bad",
            "canister_update pong",
            "reply_callback",
            "cleanup"
        ]
    );
    assert!(matches!(r, MessageResult::Reject(5, _)), "{r:?}");
    assert_eq!(
        c.query("cleaned", &[]).unwrap().result,
        MessageResult::Reply(vec![1, 0, 0, 0])
    );
}

#[test]
fn unknown_imports_fail_at_load_naming_the_import() {
    let engine = engine();
    let wasi = wat::parse_str(r#"(module (import "wasi_snapshot_preview1" "fd_write" (func (param i32 i32 i32 i32) (result i32))))"#).unwrap();
    let err = engine.load(&wasi).unwrap_err().to_string();
    assert!(err.contains("wasi_snapshot_preview1.fd_write"), "{err}");
    let unknown = wat::parse_str(r#"(module (import "ic0" "frobnicate" (func)))"#).unwrap();
    let err = engine.load(&unknown).unwrap_err().to_string();
    assert!(err.contains("ic0.frobnicate"), "{err}");
}

#[test]
fn install_trap_is_an_error_and_unknown_methods_reject() {
    let engine = engine();
    let p = program(
        &engine,
        r#"(module (func (export "canister_init") unreachable))"#,
    );
    match Canister::install(&engine, &p, &[], Settings::default()) {
        Err(EngineError::InstallFailed(e)) => assert!(e.result.is_trap()),
        other => panic!("{other:?}"),
    }
    let mut c = install(STATE);
    let e = c.update("nothing", &[]).unwrap();
    assert_eq!(
        e.result,
        MessageResult::Reject(5, "Canister has no update method 'nothing'.".into())
    );
}

#[test]
fn start_function_runs_before_init_within_one_budget() {
    let wat = r#"(module
        (import "ic0" "msg_reply" (func $reply))
        (import "ic0" "msg_reply_data_append" (func $append (param i32 i32)))
        (memory 1) (global $g (mut i32) (i32.const 0))
        (func $start (global.set $g (i32.const 3)))
        (start $start)
        (func (export "canister_init") (global.set $g (i32.mul (global.get $g) (i32.const 2))))
        (func (export "canister_query g") (i32.store (i32.const 0) (global.get $g))
          (call $append (i32.const 0) (i32.const 4)) (call $reply)))"#;
    let (_, mut c, init) = install_with(wat, Settings::default());
    // start: entry 1 + const 1 + global.set 2 = 4; init: entry 1 + get 2 + const 1 + mul 1 + set 2 = 7.
    assert_eq!(init.instructions, 11);
    assert_eq!(
        c.query("g", &[]).unwrap().result,
        MessageResult::Reply(vec![6, 0, 0, 0])
    );
}

#[test]
fn charging_takes_the_ic_s_fees_from_the_balance() {
    use offline_engine::Charging;
    use offline_engine::fees::{IC_2025, ingress_bytes};
    let f = IC_2025;
    let nodes = 13;
    let start = 1_000_000_000_000_000u128;
    let settings = Settings {
        debug_print_enabled: false,
        cycles: start,
        charging: Some(Charging::APPLICATION),
        ..Settings::default()
    };
    let (_engine, mut c, install) = install_with(CALLS, settings.clone());
    let mut expected = start - f.execution_cost(install.billed_instructions, nodes);
    assert_eq!(c.cycles(), expected, "the install's execution");

    // An ingress update making a self-call: its reception and execution, the request
    // ("pong" + 5 bytes), the callee's execution, the 5-byte reply's transmission, the callback.
    let (r, runs) = c.update_and_wait("ping", &[]).unwrap();
    assert_eq!(r, MessageResult::Reply(b"ping!".to_vec()));
    let [ping, pong, callback] = &runs[..] else {
        panic!("{runs:?}")
    };
    expected -= f.ingress_cost(ingress_bytes(0, "ping"), nodes)
        + f.execution_cost(ping.billed_instructions, nodes)
        + f.call_cost(4 + 5, nodes)
        + f.execution_cost(pong.billed_instructions, nodes)
        + f.response_transmission_cost(5, nodes)
        + f.execution_cost(callback.billed_instructions, nodes);
    assert_eq!(c.cycles(), expected);

    // A trapping callback and its cleanup: the cleanup pays its instructions only.
    let (_, runs) = c.update_and_wait("ping_bad", &[]).unwrap();
    let [ping, pong, callback, cleanup] = &runs[..] else {
        panic!("{runs:?}")
    };
    expected -= f.ingress_cost(ingress_bytes(0, "ping_bad"), nodes)
        + f.execution_cost(ping.billed_instructions, nodes)
        + f.call_cost(4 + 5, nodes)
        + f.execution_cost(pong.billed_instructions, nodes)
        + f.response_transmission_cost(5, nodes)
        + f.execution_cost(callback.billed_instructions, nodes)
        + f.instructions_cost(cleanup.billed_instructions, nodes);
    assert_eq!(c.cycles(), expected);

    // Non-replicated queries are free.
    c.query("cleaned", &[]).unwrap();
    assert_eq!(c.cycles(), expected);

    // Without charging the balance does not move.
    let (_engine, mut free, _) = install_with(
        CALLS,
        Settings {
            charging: None,
            ..settings
        },
    );
    free.update_and_wait("ping", &[]).unwrap();
    assert_eq!(free.cycles(), start);
}
