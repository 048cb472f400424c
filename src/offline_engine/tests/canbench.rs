//! The shared canbench runner: install as canbench does, and each benchmark a query with
//! canbench's argument whose reply decodes as canbench-rs's `BenchResult`.

mod common;
use common::*;
use offline_engine::canbench::{self, BENCH_ARG, BenchResult, CanbenchError};

/// A canister with two benchmarks: `ok` replies `reply` (a `BenchResult`) if its argument is
/// `Encode!(&())` and traps otherwise; `bad` replies bytes that are no `BenchResult`. Init
/// writes its argument's length to stable memory byte 0.
fn bench_canister(reply: &[u8]) -> String {
    let escaped: String = reply.iter().map(|b| format!("\\{b:02x}")).collect();
    format!(
        r#"(module
  (import "ic0" "msg_reply" (func $reply))
  (import "ic0" "msg_reply_data_append" (func $append (param i32 i32)))
  (import "ic0" "msg_arg_data_size" (func $arg_size (result i32)))
  (import "ic0" "msg_arg_data_copy" (func $arg_copy (param i32 i32 i32)))
  (import "ic0" "stable64_grow" (func $sgrow (param i64) (result i64)))
  (import "ic0" "stable64_write" (func $swrite (param i64 i64 i64)))
  (import "ic0" "stable64_read" (func $sread (param i64 i64 i64)))
  (memory 1)
  (data (i32.const 0) "{escaped}")
  (data (i32.const 4000) "DIDL\00\00")
  (func (export "canister_init")
    (drop (call $sgrow (i64.const 1)))
    (i32.store8 (i32.const 5000) (call $arg_size))
    (call $swrite (i64.const 0) (i64.const 5000) (i64.const 1)))
  (func (export "canister_query __canbench__ok")
    (if (i32.ne (call $arg_size) (i32.const 6)) (then unreachable))
    (call $arg_copy (i32.const 4100) (i32.const 0) (i32.const 6))
    (if (i64.ne (i64.load (i32.const 4100)) (i64.load (i32.const 4000))) (then unreachable))
    (call $append (i32.const 0) (i32.const {len}))
    (call $reply))
  (func (export "canister_query __canbench__bad")
    (call $append (i32.const 4000) (i32.const 3))
    (call $reply))
  (func (export "canister_query stable_byte")
    (call $sread (i64.const 6000) (i64.const 0) (i64.const 1))
    (call $append (i32.const 6000) (i32.const 1))
    (call $reply)))"#,
        len = reply.len()
    )
}

#[test]
fn runs_benchmarks_with_canbench_s_argument_and_decodes_their_result() {
    #[derive(candid::CandidType)]
    struct M {
        calls: u64,
        instructions: u64,
        heap_increase: u64,
        stable_memory_increase: u64,
    }
    #[derive(candid::CandidType)]
    struct B {
        total: M,
        scopes: std::collections::BTreeMap<String, M>,
    }
    let reply = candid::encode_one(B {
        total: M {
            calls: 1,
            instructions: 1_234,
            heap_increase: 2,
            stable_memory_increase: 3,
        },
        scopes: Default::default(),
    })
    .unwrap();
    let engine = engine();
    let program = program(&engine, &bench_canister(&reply));
    assert_eq!(program.canbench_benchmarks(), ["bad", "ok"]);
    let mut c = canbench::install(&engine, &program, b"abc", None).unwrap();
    assert_eq!(
        c.settings().subnet,
        offline_engine::SubnetKind::Benchmarking
    );
    assert_eq!(c.cycles(), 1_000_000_000_000_000);
    let run = canbench::run_benchmark(&mut c, "ok").unwrap();
    let expected: BenchResult = candid::decode_one(&reply).unwrap();
    assert_eq!(run.result, expected);
    assert_eq!(run.result.total.instructions(), 1_234);
    assert_eq!(BENCH_ARG, b"DIDL\x00\x00");
    assert!(matches!(
        canbench::run_benchmark(&mut c, "bad"),
        Err(CanbenchError::Bench { name, .. }) if name == "bad"
    ));
    assert!(matches!(
        canbench::run_benchmark(&mut c, "missing"),
        Err(CanbenchError::Bench { name, .. }) if name == "missing"
    ));
    // Init saw the 3-byte argument; stable memory given to install replaces what init wrote.
    let byte = |c: &mut offline_engine::Canister| {
        c.query("stable_byte", &[])
            .unwrap()
            .result
            .reply()
            .unwrap()
            .to_vec()
    };
    assert_eq!(byte(&mut c), [3]);
    let mut c = canbench::install(&engine, &program, b"abc", Some(&[9, 9])).unwrap();
    assert_eq!(byte(&mut c), [9]);
}
