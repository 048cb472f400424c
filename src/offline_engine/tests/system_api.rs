//! Each System API function: its exact charge (`METERING.md` §3–4) and behaviour.

mod common;
use common::*;
use offline_engine::{ANONYMOUS, DEFAULT_CANISTER_ID, MessageResult, Settings};

/// A module whose update `test` runs `body` once; `imports` declares `$f`.
fn one_call(imports: &str, body: &str) -> String {
    format!(r#"(module {imports} (memory 1) (func (export "canister_update test") {body}))"#)
}

fn cost(imports: &str, body: &str, arg: &[u8], settings: Settings) -> (u64, MessageResult) {
    let (_, mut c, _) = install_with(&one_call(imports, body), settings);
    let e = c.update("test", arg).unwrap();
    (e.instructions, e.result)
}

fn quiet() -> Settings {
    Settings {
        debug_print_enabled: false,
        ..Settings::default()
    }
}

#[test]
fn fixed_and_per_byte_charges() {
    // (import, body, arg, expected instructions). Block costs: entry 1, const 1, call 5, drop 1.
    let cases: &[(&str, &str, &[u8], u64)] = &[
        (
            "(func $f (import \"ic0\" \"msg_arg_data_size\") (result i32))",
            "(drop (call $f))",
            b"abc",
            507,
        ),
        (
            "(func $f (import \"ic0\" \"msg_arg_data_copy\") (param i32 i32 i32))",
            "(call $f (i32.const 0) (i32.const 0) (i32.const 3))",
            b"abc",
            512,
        ),
        (
            "(func $f (import \"ic0\" \"msg_caller_size\") (result i32))",
            "(drop (call $f))",
            b"",
            507,
        ),
        (
            "(func $f (import \"ic0\" \"msg_caller_copy\") (param i32 i32 i32))",
            "(call $f (i32.const 0) (i32.const 0) (i32.const 1))",
            b"",
            510,
        ),
        (
            "(func $f (import \"ic0\" \"canister_self_size\") (result i32))",
            "(drop (call $f))",
            b"",
            507,
        ),
        (
            "(func $f (import \"ic0\" \"canister_self_copy\") (param i32 i32 i32))",
            "(call $f (i32.const 0) (i32.const 0) (i32.const 10))",
            b"",
            519,
        ),
        (
            "(func $f (import \"ic0\" \"time\") (result i64))",
            "(drop (call $f))",
            b"",
            507,
        ),
        (
            "(func $f (import \"ic0\" \"global_timer_set\") (param i64) (result i64))",
            "(drop (call $f (i64.const 5)))",
            b"",
            508,
        ),
        (
            "(func $f (import \"ic0\" \"performance_counter\") (param i32) (result i64))",
            "(drop (call $f (i32.const 0)))",
            b"",
            208,
        ),
        (
            "(func $f (import \"ic0\" \"canister_cycle_balance128\") (param i32))",
            "(call $f (i32.const 0))",
            b"",
            507,
        ),
        (
            "(func $f (import \"ic0\" \"canister_liquid_cycle_balance128\") (param i32))",
            "(call $f (i32.const 0))",
            b"",
            507,
        ),
        (
            "(func $f (import \"ic0\" \"msg_cycles_available128\") (param i32))",
            "(call $f (i32.const 0))",
            b"",
            507,
        ),
        (
            "(func $f (import \"ic0\" \"msg_cycles_accept128\") (param i64 i64 i32))",
            "(call $f (i64.const 0) (i64.const 0) (i32.const 0))",
            b"",
            509,
        ),
        (
            "(func $f (import \"ic0\" \"cycles_burn128\") (param i64 i64 i32))",
            "(call $f (i64.const 0) (i64.const 0) (i32.const 0))",
            b"",
            509,
        ),
        (
            "(func $f (import \"ic0\" \"canister_version\") (result i64))",
            "(drop (call $f))",
            b"",
            507,
        ),
        (
            "(func $f (import \"ic0\" \"canister_status\") (result i32))",
            "(drop (call $f))",
            b"",
            507,
        ),
        (
            "(func $f (import \"ic0\" \"in_replicated_execution\") (result i32))",
            "(drop (call $f))",
            b"",
            507,
        ),
        (
            "(func $f (import \"ic0\" \"is_controller\") (param i32 i32) (result i32))",
            "(drop (call $f (i32.const 0) (i32.const 1)))",
            b"",
            1_010,
        ),
        (
            "(func $f (import \"ic0\" \"certified_data_set\") (param i32 i32))",
            "(call $f (i32.const 0) (i32.const 4))",
            b"",
            512,
        ),
        (
            "(func $f (import \"ic0\" \"data_certificate_present\") (result i32))",
            "(drop (call $f))",
            b"",
            507,
        ),
        (
            "(func $f (import \"ic0\" \"msg_reply_data_append\") (param i32 i32))",
            "(call $f (i32.const 0) (i32.const 2))",
            b"",
            608,
        ),
        (
            "(func $f (import \"ic0\" \"msg_reply\"))",
            "(call $f)",
            b"",
            506,
        ),
        (
            "(func $f (import \"ic0\" \"msg_reject\") (param i32 i32))",
            "(call $f (i32.const 0) (i32.const 2))",
            b"",
            608,
        ),
        (
            "(func $f (import \"ic0\" \"msg_deadline\") (result i64))",
            "(drop (call $f))",
            b"",
            507,
        ),
        (
            "(func $f (import \"ic0\" \"cost_call\") (param i64 i64 i32))",
            "(call $f (i64.const 1) (i64.const 2) (i32.const 0))",
            b"",
            509,
        ),
        (
            "(func $f (import \"ic0\" \"cost_create_canister\") (param i32))",
            "(call $f (i32.const 0))",
            b"",
            507,
        ),
        (
            "(func $f (import \"ic0\" \"env_var_count\") (result i32))",
            "(drop (call $f))",
            b"",
            507,
        ),
        (
            "(func $f (import \"ic0\" \"subnet_self_size\") (result i32))",
            "(drop (call $f))",
            b"",
            507,
        ),
        (
            "(func $f (import \"ic0\" \"root_key_size\") (result i32))",
            "(drop (call $f))",
            b"",
            507,
        ),
        (
            "(func $f (import \"ic0\" \"stable64_size\") (result i64))",
            "(drop (call $f))",
            b"",
            7,
        ),
        (
            "(func $f (import \"ic0\" \"stable_size\") (result i32))",
            "(drop (call $f))",
            b"",
            7,
        ),
        (
            "(func $f (import \"ic0\" \"stable64_grow\") (param i64) (result i64))",
            "(drop (call $f (i64.const 1)))",
            b"",
            108,
        ),
        // debug_print of 3 bytes, debug printing off: 100 + 2*3 + 50*3.
        (
            "(func $f (import \"ic0\" \"debug_print\") (param i32 i32))",
            "(call $f (i32.const 0) (i32.const 3))",
            b"",
            264,
        ),
    ];
    for (imports, body, arg, want) in cases {
        let (got, result) = cost(imports, body, arg, quiet());
        assert!(!result.is_trap(), "{imports}: {result:?}");
        assert_eq!(got, *want, "{imports}");
    }
}

#[test]
fn the_charge_precedes_the_availability_check() {
    // As in the replica, a function is charged before it checks where it is called: an update
    // calling `msg_cycles_refunded128` (callbacks only) pays its 500 and traps.
    let (got, result) = cost(
        "(func $f (import \"ic0\" \"msg_cycles_refunded128\") (param i32))",
        "(call $f (i32.const 0))",
        b"",
        quiet(),
    );
    assert_eq!(got, 507);
    assert_eq!(
        result,
        MessageResult::Trap(
            "Canister violated contract: \"ic0_msg_cycles_refunded128\" cannot be executed in update mode".into()
        )
    );
}

#[test]
fn method_name_charges_in_inspect_message() {
    // The method name is available only to `canister_inspect_message` (ingress "test", 4 bytes);
    // `ic0.accept_message` adds its call (5) and 500.
    let cases: &[(&str, &str, u64)] = &[
        (
            "(func $f (import \"ic0\" \"msg_method_name_size\") (result i32))",
            "(drop (call $f))",
            507 + 505,
        ),
        (
            "(func $f (import \"ic0\" \"msg_method_name_copy\") (param i32 i32 i32))",
            "(call $f (i32.const 0) (i32.const 0) (i32.const 4))",
            513 + 505,
        ),
    ];
    for (imports, body, want) in cases {
        let wat = format!(
            r#"(module {imports}
                 (import "ic0" "accept_message" (func $accept))
                 (memory 1)
                 (func (export "canister_inspect_message") {body} (call $accept))
                 (func (export "canister_update test")))"#
        );
        let (_, mut c, _) = install_with(&wat, quiet());
        let e = c.inspect_message(ANONYMOUS, "test", b"").unwrap().unwrap();
        assert_eq!(e.result, MessageResult::NoReply, "{imports}");
        assert_eq!(e.instructions, *want, "{imports}");
    }
}

#[test]
fn stable_memory_charges() {
    let imports = r#"(import "ic0" "stable64_grow" (func $grow (param i64) (result i64)))
                     (import "ic0" "stable64_write" (func $w (param i64 i64 i64)))
                     (import "ic0" "stable64_read" (func $r (param i64 i64 i64)))"#;
    let grow = "(drop (call $grow (i64.const 1)))"; // 1 + 5 + 1 + 100
    // Write 10 bytes: 3 + 5 + 20 + 10 + one new dirty page 1,000.
    let (n, _) = cost(
        imports,
        &format!("{grow} (call $w (i64.const 0) (i64.const 0) (i64.const 10))"),
        b"",
        quiet(),
    );
    assert_eq!(n, 1 + 107 + 8 + 30 + 1_000);
    // Writing the same page twice pays the page once; a range across two pages pays two.
    let body = format!(
        "{grow} (call $w (i64.const 0) (i64.const 0) (i64.const 10)) (call $w (i64.const 4090) (i64.const 0) (i64.const 10))"
    );
    let (n, _) = cost(imports, &body, b"", quiet());
    assert_eq!(n, 1 + 107 + 8 + 30 + 1_000 + 8 + 30 + 1_000);
    let (n, _) = cost(
        imports,
        &format!("{grow} (call $r (i64.const 0) (i64.const 0) (i64.const 10))"),
        b"",
        quiet(),
    );
    assert_eq!(n, 1 + 107 + 8 + 30);
    // Zero-length accesses cost 20 and never trap, even out of bounds.
    let (n, r) = cost(
        imports,
        "(call $r (i64.const 0) (i64.const 99999999) (i64.const 0))",
        b"",
        quiet(),
    );
    assert_eq!((n, r.is_trap()), (1 + 8 + 20, false));
    // Out of bounds traps.
    let (_, r) = cost(
        imports,
        "(call $r (i64.const 0) (i64.const 0) (i64.const 1))",
        b"",
        quiet(),
    );
    assert_eq!(
        r,
        MessageResult::Trap("Canister trapped: stable memory out of bounds".into())
    );
}

#[test]
fn stable_grow_limits() {
    let imports = r#"(import "ic0" "stable_grow" (func $g (param i32) (result i32)))
                     (import "ic0" "stable64_grow" (func $g64 (param i64) (result i64)))
                     (import "ic0" "msg_reply" (func $reply))
                     (import "ic0" "msg_reply_data_append" (func $append (param i32 i32)))"#;
    let body = "(i32.store (i32.const 0) (call $g (i32.const 65537)))
                (i32.store (i32.const 4) (call $g (i32.const 2)))
                (i64.store (i32.const 8) (call $g64 (i64.const 9000000)))
                (call $append (i32.const 0) (i32.const 16)) (call $reply)";
    let (_, r) = cost(imports, body, b"", quiet());
    let mut want = (-1i32).to_le_bytes().to_vec();
    want.extend_from_slice(&0i32.to_le_bytes());
    want.extend_from_slice(&(-1i64).to_le_bytes());
    assert_eq!(r, MessageResult::Reply(want));
}

const ECHO: &str = r#"
(module
  (import "ic0" "msg_reply" (func $reply))
  (import "ic0" "msg_reply_data_append" (func $append (param i32 i32)))
  (import "ic0" "msg_reject" (func $reject (param i32 i32)))
  (import "ic0" "msg_arg_data_size" (func $arg_size (result i32)))
  (import "ic0" "msg_arg_data_copy" (func $arg_copy (param i32 i32 i32)))
  (import "ic0" "msg_caller_size" (func $caller_size (result i32)))
  (import "ic0" "msg_caller_copy" (func $caller_copy (param i32 i32 i32)))
  (import "ic0" "msg_method_name_size" (func $name_size (result i32)))
  (import "ic0" "msg_method_name_copy" (func $name_copy (param i32 i32 i32)))
  (import "ic0" "accept_message" (func $accept))
  (import "ic0" "canister_self_size" (func $self_size (result i32)))
  (import "ic0" "canister_self_copy" (func $self_copy (param i32 i32 i32)))
  (import "ic0" "time" (func $time (result i64)))
  (import "ic0" "is_controller" (func $is_controller (param i32 i32) (result i32)))
  (import "ic0" "in_replicated_execution" (func $replicated (result i32)))
  (import "ic0" "data_certificate_present" (func $cert_present (result i32)))
  (import "ic0" "certified_data_set" (func $cert_set (param i32 i32)))
  (import "ic0" "canister_cycle_balance128" (func $balance (param i32)))
  (import "ic0" "performance_counter" (func $pc (param i32) (result i64)))
  (import "ic0" "debug_print" (func $print (param i32 i32)))
  (import "ic0" "trap" (func $trap (param i32 i32)))
  (import "ic0" "call_new" (func $call_new (param i32 i32 i32 i32 i32 i32 i32 i32)))
  (memory 1)
  (data (i32.const 500) "hello")
  (func $reply_bytes (param $src i32) (param $len i32) (call $append (local.get $src) (local.get $len)) (call $reply))
  (func (export "canister_update arg")
    (call $arg_copy (i32.const 0) (i32.const 0) (call $arg_size)) (call $reply_bytes (i32.const 0) (call $arg_size)))
  (func (export "canister_update caller")
    (call $caller_copy (i32.const 0) (i32.const 0) (call $caller_size)) (call $reply_bytes (i32.const 0) (call $caller_size)))
  (func (export "canister_query method_name")
    (call $name_copy (i32.const 0) (i32.const 0) (call $name_size)) (call $reply_bytes (i32.const 0) (call $name_size)))
  (func (export "canister_inspect_message")
    (call $name_copy (i32.const 0) (i32.const 0) (call $name_size)) (call $print (i32.const 0) (call $name_size))
    (call $accept))
  (func (export "canister_update self")
    (call $self_copy (i32.const 0) (i32.const 0) (call $self_size)) (call $reply_bytes (i32.const 0) (call $self_size)))
  (func (export "canister_update time") (i64.store (i32.const 0) (call $time)) (call $reply_bytes (i32.const 0) (i32.const 8)))
  (func (export "canister_update controller")
    (call $arg_copy (i32.const 0) (i32.const 0) (call $arg_size))
    (i32.store (i32.const 100) (call $is_controller (i32.const 0) (call $arg_size)))
    (call $reply_bytes (i32.const 100) (i32.const 4)))
  (func $flags
    (i32.store8 (i32.const 0) (call $replicated))
    (i32.store8 (i32.const 1) (call $cert_present))
    (call $reply_bytes (i32.const 0) (i32.const 2)))
  (func (export "canister_update flags") (call $flags))
  (func (export "canister_query flags_q") (call $flags))
  (func (export "canister_update certify") (call $cert_set (i32.const 500) (i32.const 5)) (call $reply))
  (func (export "canister_query certify_q") (call $cert_set (i32.const 500) (i32.const 5)) (call $reply))
  (func (export "canister_update balance") (call $balance (i32.const 0)) (call $reply_bytes (i32.const 0) (i32.const 16)))
  (func (export "canister_update counters")
    (i64.store (i32.const 0) (call $pc (i32.const 0)))
    (i64.store (i32.const 8) (call $pc (i32.const 1)))
    (call $reply_bytes (i32.const 0) (i32.const 16)))
  (func (export "canister_update print") (call $print (i32.const 500) (i32.const 5)) (call $print (i32.const 500) (i32.const 2)) (call $reply))
  (func (export "canister_update trap") (call $print (i32.const 500) (i32.const 5)) (call $trap (i32.const 500) (i32.const 5)))
  (func (export "canister_update reject") (call $reject (i32.const 500) (i32.const 5)))
  (func (export "canister_update reply_twice") (call $reply) (call $reply))
  (func (export "canister_query call_in_query")
    (call $call_new (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 0))))
"#;

fn reply(c: &mut offline_engine::Canister, method: &str, arg: &[u8], query: bool) -> MessageResult {
    let e = if query {
        c.query(method, arg)
    } else {
        c.update(method, arg)
    }
    .unwrap();
    e.result
}

#[test]
fn message_data_identity_and_time() {
    let mut c = install(ECHO);
    assert_eq!(
        reply(&mut c, "arg", b"xyz", false),
        MessageResult::Reply(b"xyz".to_vec())
    );
    assert_eq!(
        reply(&mut c, "caller", b"", false),
        MessageResult::Reply(ANONYMOUS.to_vec())
    );
    let e = c.update_as(&[9, 9, 9], "caller", b"").unwrap();
    assert_eq!(e.result, MessageResult::Reply(vec![9, 9, 9]));
    // The method name is for `canister_inspect_message` only (which sees the ingress
    // message's method); elsewhere it traps with the replica's message.
    let inspected = c
        .inspect_message(ANONYMOUS, "caller", b"")
        .unwrap()
        .unwrap();
    assert_eq!(inspected.logs, vec!["caller".to_string()]);
    assert_eq!(
        reply(&mut c, "method_name", b"", true),
        MessageResult::Trap(
            "Canister violated contract: \"ic0_msg_method_name_size\" cannot be executed in non replicated query mode".into()
        )
    );
    assert_eq!(
        reply(&mut c, "self", b"", false),
        MessageResult::Reply(DEFAULT_CANISTER_ID.to_vec())
    );
    let t = c.time();
    assert_eq!(
        reply(&mut c, "time", b"", false),
        MessageResult::Reply(t.to_le_bytes().to_vec())
    );
    c.advance_time(5);
    assert_eq!(
        reply(&mut c, "time", b"", false),
        MessageResult::Reply((t + 5).to_le_bytes().to_vec())
    );
    assert_eq!(
        reply(&mut c, "controller", ANONYMOUS, false),
        MessageResult::Reply(vec![1, 0, 0, 0])
    );
    assert_eq!(
        reply(&mut c, "controller", &[1, 2], false),
        MessageResult::Reply(vec![0, 0, 0, 0])
    );
    let balance = Settings::default().cycles;
    assert_eq!(
        reply(&mut c, "balance", b"", false),
        MessageResult::Reply(balance.to_le_bytes().to_vec())
    );
}

#[test]
fn replicated_flags_and_certified_data() {
    let mut c = install(ECHO);
    assert_eq!(
        reply(&mut c, "flags", b"", false),
        MessageResult::Reply(vec![1, 0])
    );
    assert_eq!(
        reply(&mut c, "flags_q", b"", true),
        MessageResult::Reply(vec![0, 1])
    );
    assert_eq!(
        reply(&mut c, "certify", b"", false),
        MessageResult::Reply(vec![])
    );
    assert_eq!(c.certified_data(), b"hello");
    assert!(reply(&mut c, "certify_q", b"", true).is_trap());
}

#[test]
fn performance_counters_include_the_prepaid_block() {
    let mut c = install(ECHO);
    let e = c.update("counters", b"").unwrap();
    let r = e.result.reply().unwrap().to_vec();
    let pc0 = u64::from_le_bytes(r[0..8].try_into().unwrap());
    let pc1 = u64::from_le_bytes(r[8..16].try_into().unwrap());
    // The whole function body is one block (calls are not boundaries), prepaid at entry:
    // 1 + 2 stores (i32.const 1 + const 1 + call 5 + store 1 = 8 each) + 2 consts + call 5
    // (call $reply_bytes) = 24, then +200 for the first counter.
    assert_eq!(pc0, 24 + 200);
    // Type 1 adds nothing in a single-execution context; this call adds its 200.
    assert_eq!(pc1, 24 + 400);
    // $reply_bytes: entry 1 + get 1 + get 1 + call 5 + call 5 = 13, + 500 + 50*16 + 500.
    assert_eq!(e.instructions, 24 + 400 + 13 + 500 + 800 + 500);
}

#[test]
fn debug_print_trap_reject_and_contract_violations() {
    let mut c = install(ECHO);
    let e = c.update("print", b"").unwrap();
    assert_eq!(e.logs, vec!["hello".to_string(), "he".to_string()]);
    let e = c.update("trap", b"").unwrap();
    assert_eq!(
        e.result,
        MessageResult::Trap("Canister called `ic0.trap` with message: 'hello'".into())
    );
    assert_eq!(
        e.logs,
        vec!["hello".to_string(), "[TRAP]: hello".to_string()]
    );
    assert_eq!(
        reply(&mut c, "reject", b"", false),
        MessageResult::Reject(4, "hello".into())
    );
    match reply(&mut c, "reply_twice", b"", false) {
        MessageResult::Trap(m) => assert!(m.starts_with("Canister violated contract:"), "{m}"),
        other => panic!("{other:?}"),
    }
    match reply(&mut c, "call_in_query", b"", true) {
        MessageResult::Trap(m) => assert!(
            m.contains("cannot be executed in non replicated query mode"),
            "{m}"
        ),
        other => panic!("{other:?}"),
    }
}
