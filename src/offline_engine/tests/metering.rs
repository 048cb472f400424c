//! Exact instruction counts: the replica's calibration vectors (dfinity/ic
//! `rs/execution_environment/benches/system_api/execute_update.rs`) and one test per metering rule
//! of `METERING.md`.

mod common;
use common::*;

const MI: u32 = 1_000_000;

fn count(wat: &str, arg: &[u8]) -> (u64, u64) {
    let mut c = install(wat);
    let e = run_test(&mut c, arg);
    (e.instructions, e.billed_instructions)
}

/// Total of the replica's loop for `per_iteration` instructions per iteration: one function
/// entry (1) and the final loop-header check (5).
fn loop_total(per_iteration: u64, iterations: u32) -> u64 {
    per_iteration * iterations as u64 + 6
}

#[test]
fn drop_const() {
    let wat = r#"(module (memory 1) (func (export "canister_update test") (drop (i32.const 0))))"#;
    assert_eq!(count(wat, &[]).0, 3);
}

#[test]
fn empty_loop() {
    assert_eq!(count(&loop_module("", "", MI), &[]).0, 11_000_006);
}

#[test]
fn add_and_load() {
    let body = "(local.set $s (i32.add (local.get $s) (i32.load (i32.const 0))))";
    assert_eq!(count(&loop_module("", body, MI), &[]).0, 16_000_006);
}

#[test]
fn msg_caller_size() {
    let imports = r#"(import "ic0" "msg_caller_size" (func $ic0_msg_caller_size (result i32)))"#;
    let (ins, billed) = count(
        &loop_module(imports, "(drop (call $ic0_msg_caller_size))", MI),
        &[],
    );
    assert_eq!(ins, 517_000_006);
    assert_eq!(billed, 517_000_006);
}

#[test]
fn msg_arg_data_copy() {
    let imports =
        r#"(import "ic0" "msg_arg_data_copy" (func $ic0_msg_arg_data_copy (param i32 i32 i32)))"#;
    let arg = vec![7u8; 1024];
    for (size, per) in [(1u32, 520u64), (1024, 1543)] {
        let body =
            format!("(call $ic0_msg_arg_data_copy (i32.const 0) (i32.const 0) (i32.const {size}))");
        assert_eq!(
            count(&loop_module(imports, &body, MI), &arg).0,
            loop_total(per, MI),
            "size {size}"
        );
    }
}

#[test]
fn msg_reply_data_append() {
    let imports = r#"(import "ic0" "msg_reply_data_append" (func $ic0_msg_reply_data_append (param i32 i32)))"#;
    for (size, per) in [(1u32, 568u64), (2, 618)] {
        let body = format!("(call $ic0_msg_reply_data_append (i32.const 0) (i32.const {size}))");
        assert_eq!(
            count(&loop_module(imports, &body, 100_000), &[]).0,
            loop_total(per, 100_000),
            "size {size}"
        );
    }
}

#[test]
fn performance_counter_time_timer() {
    let cases = [
        (
            r#"(import "ic0" "performance_counter" (func $f (param i32) (result i64)))"#,
            "(drop (call $f (i32.const 0)))",
            218,
        ),
        (
            r#"(import "ic0" "time" (func $f (result i64)))"#,
            "(drop (call $f))",
            517,
        ),
        (
            r#"(import "ic0" "global_timer_set" (func $f (param i64) (result i64)))"#,
            "(drop (call $f (i64.const 1)))",
            518,
        ),
        (
            r#"(import "ic0" "stable64_size" (func $f (result i64)))"#,
            "(drop (call $f))",
            17,
        ),
        (
            r#"(import "ic0" "stable_grow" (func $f (param i32) (result i32)))"#,
            "(drop (call $f (i32.const 0)))",
            118,
        ),
    ];
    for (imports, body, per) in cases {
        assert_eq!(
            count(&loop_module(imports, body, MI), &[]).0,
            loop_total(per, MI),
            "{imports}"
        );
    }
}

#[test]
fn debug_print_without_and_with_debug_printing() {
    let imports = r#"(import "ic0" "debug_print" (func $f (param i32 i32)))"#;
    let wat = loop_module(imports, "(call $f (i32.const 0) (i32.const 1))", 10_000);
    // Rate-limited (mainnet default): 18 + 100 + 52 logging charge.
    assert_eq!(count(&wat, &[]).0, loop_total(170, 10_000));
    // PocketIC enables debug printing: + len.
    let (_, mut c, _) = install_with(&wat, offline_engine::Settings::default());
    assert_eq!(run_test(&mut c, &[]).instructions, loop_total(171, 10_000));
}

#[test]
fn call_new_and_perform() {
    let imports = r#"(import "ic0" "call_new" (func $call_new (param i32 i32 i32 i32 i32 i32 i32 i32)))
                     (import "ic0" "call_perform" (func $call_perform (result i32)))"#;
    let call_new = "(call $call_new (i32.const 0) (i32.const 10) (i32.const 100) (i32.const 18)
                                    (i32.const 11) (i32.const 0) (i32.const 22) (i32.const 0))";
    assert_eq!(
        count(&loop_module(imports, call_new, 100_000), &[]).0,
        loop_total(1_552, 100_000)
    );
    let both = format!("{call_new} (drop (call $call_perform))");
    assert_eq!(
        count(&loop_module(imports, &both, 1_000), &[]).0,
        loop_total(6_558, 1_000)
    );
}

#[test]
fn stable_read_write() {
    let read = r#"(import "ic0" "stable_read" (func $f (param i32 i32 i32)))"#;
    let write = r#"(import "ic0" "stable_write" (func $f (param i32 i32 i32)))"#;
    for (size, per) in [(1u32, 40u64), (1024, 1_063)] {
        let body = format!("(call $f (i32.const 0) (i32.const 0) (i32.const {size}))");
        assert_eq!(
            count(&stable_loop_module(read, &body, MI), &[]).0,
            per * MI as u64 + 113,
            "read {size}"
        );
        // The first write of the one page costs 1,000 more.
        assert_eq!(
            count(&stable_loop_module(write, &body, MI), &[]).0,
            per * MI as u64 + 1_113,
            "write {size}"
        );
    }
}

#[test]
fn cycle_balance_dirty_page_is_billed_not_counted() {
    let imports = r#"(import "ic0" "canister_cycle_balance128" (func $f (param i32)))"#;
    let (ins, billed) = count(&loop_module(imports, "(call $f (i32.const 0))", MI), &[]);
    assert_eq!(ins, 517_000_006);
    assert_eq!(billed, 517_001_006);
}

fn body_count(body: &str) -> (u64, u64) {
    let wat = format!(
        r#"(module (memory 1) (type $t (func))
             (table 1 funcref) (elem (i32.const 0) $g)
             (func $g)
             (data $d "abcdefgh")
             (func (export "canister_update test") (local $i i32) {body}))"#
    );
    count(&wat, &[])
}

#[test]
fn taken_branch_skips_the_fall_through_block() {
    // entry 1 + block 0 + const 1 + br_if 2 = 4; fall-through block nop×3 = 3.
    assert_eq!(
        body_count("(block (br_if 0 (i32.const 1)) nop nop nop)").0,
        4
    );
    assert_eq!(
        body_count("(block (br_if 0 (i32.const 0)) nop nop nop)").0,
        7
    );
}

#[test]
fn if_else_arms_are_their_own_blocks() {
    assert_eq!(
        body_count("(if (i32.const 1) (then nop) (else nop nop))").0,
        5
    );
    assert_eq!(
        body_count("(if (i32.const 0) (then nop) (else nop nop))").0,
        6
    );
}

#[test]
fn loop_body_is_charged_per_iteration() {
    // loop body: get, const, add, set, get, const, lt_u (7) + br_if 2 = 9 per iteration.
    let body = "(loop $l (local.set $i (i32.add (local.get $i) (i32.const 1)))
                          (br_if $l (i32.lt_u (local.get $i) (i32.const 10))))";
    assert_eq!(body_count(body).0, 1 + 90);
}

#[test]
fn calls_cost_5_and_10_plus_the_callee_entry() {
    assert_eq!(body_count("(call $g)").0, 1 + 5 + 1);
    assert_eq!(
        body_count("(call_indirect (type $t) (i32.const 0))").0,
        1 + 1 + 10 + 1
    );
}

#[test]
fn code_after_return_is_not_charged() {
    assert_eq!(body_count("(return) nop nop nop").0, 2);
}

#[test]
fn bulk_memory_charges_its_size_operand() {
    // 1 + 3 consts + 100 static + 1000 dynamic. Filling zeros over zeros dirties nothing.
    assert_eq!(
        body_count("(memory.fill (i32.const 0) (i32.const 0) (i32.const 1000))"),
        (1_104, 1_104)
    );
    // Filling 1s over 5000 bytes dirties two 4 KiB pages (billed, not counted).
    assert_eq!(
        body_count("(memory.fill (i32.const 0) (i32.const 1) (i32.const 5000))"),
        (5_104, 7_104)
    );
    assert_eq!(
        body_count("(memory.copy (i32.const 100) (i32.const 0) (i32.const 0))").0,
        104
    );
    // memory.init 100 + 8 bytes, data.drop 300.
    assert_eq!(
        body_count("(memory.init $d (i32.const 0) (i32.const 0) (i32.const 8)) (data.drop $d)").0,
        1 + 3 + 100 + 8 + 300
    );
}

#[test]
fn memory_grow_and_size() {
    assert_eq!(
        body_count("(drop (memory.grow (i32.const 1)))").0,
        1 + 1 + 300 + 1
    );
    assert_eq!(body_count("(drop (memory.size))").0, 1 + 20 + 1);
}

#[test]
fn globals_divisions_and_floats() {
    let wat = r#"(module (memory 1) (global $g (mut i32) (i32.const 0))
        (func (export "canister_update test")
          (global.set $g (i32.div_u (global.get $g) (i32.const 3)))
          (drop (f64.sqrt (f64.const 2)))
          (drop (i64.trunc_f64_s (f64.const 2)))))"#;
    // 1 + (2 + 1 + 10 + 2) + (1 + 8 + 1) + (1 + 20 + 1)
    assert_eq!(count(wat, &[]).0, 1 + 15 + 10 + 22);
}
