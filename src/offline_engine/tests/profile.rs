//! The profiler: exact attribution on small modules (nested calls, recursion, a loop, System
//! API calls, tail calls, bulk memory, traps), totals equal to the execution's instructions, and
//! profiling that changes no count.

mod common;
use common::*;
use offline_engine::{Canister, Execution, FunctionCost, MessageResult, Profile, Settings};

const MODULE: &str = r#"
(module
  (import "ic0" "msg_reply" (func $reply))
  (import "ic0" "msg_arg_data_size" (func $arg_size (result i32)))
  (import "ic0" "trap" (func $ic0_trap (param i32 i32)))
  (memory 1)
  (data (i32.const 100) "bad")
  ;; entry 1 + const 1 = 2
  (func $leaf (result i32) (i32.const 7))
  ;; entry 1 + call 5 + call 5 + add 1 = 12
  (func $mid (result i32) (i32.add (call $leaf) (call $leaf)))
  ;; entry 1, then 10 iterations of a 9-instruction loop body
  (func $looper (local $i i32)
    (loop $l
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br_if $l (i32.lt_u (local.get $i) (i32.const 10)))))
  ;; entry 1 + call 5 + drop 1 + call 5 + call 5 + drop 1 + call 5 = 23
  (func $nested (export "canister_update nested")
    (drop (call $mid))
    (call $looper)
    (drop (call $arg_size))
    (call $reply))
  ;; n > 1: entry 6 + else arm 10 = 16; n <= 1: 6 + then arm 1 = 7
  (func $fact (param $n i32) (result i32)
    (if (result i32) (i32.le_u (local.get $n) (i32.const 1))
      (then (i32.const 1))
      (else (i32.mul (local.get $n) (call $fact (i32.sub (local.get $n) (i32.const 1)))))))
  ;; entry 1 + const 1 + call 5 + drop 1 + call 5 = 13
  (func $rec (export "canister_update rec") (export "canister_query rec")
    (drop (call $fact (i32.const 5)))
    (call $reply))
  ;; entry 1 + return_call 3 = 4
  (func $hop (return_call $land))
  ;; entry 1 + nop 1 = 2
  (func $land (nop))
  ;; entry 1 + call 5 + call 5 = 11
  (func $tail (export "canister_update tail") (call $hop) (call $reply))
  ;; entry 1 + 3 consts + 100 + 1,000 bytes = 1,104
  (func $fill (memory.fill (i32.const 0) (i32.const 0) (i32.const 1000)))
  ;; entry 1 + call 5 + call 5 = 11
  (func $bulk (export "canister_update bulk") (call $fill) (call $reply))
  ;; entry 1 + const 1 + const 1 + store 1 + unreachable 1 = 5
  (func $inner (i32.store (i32.const 0) (i32.const 1)) unreachable)
  ;; entry 1 + call 5 = 6
  (func $boom (export "canister_update boom") (call $inner))
  ;; entry 1 + const 1 + const 1 + call 5 = 8; ic0.trap: 500 + 3 + logging 2*3 + 50*3 = 659
  (func $refuse (export "canister_update refuse") (call $ic0_trap (i32.const 100) (i32.const 3))))
"#;

fn profiled() -> Canister {
    let engine = engine();
    let wasm = wat::parse_str(MODULE).expect("wat");
    let program = engine.load_profiled(&wasm).expect("loads");
    assert!(program.is_profiled());
    let settings = Settings {
        debug_print_enabled: false,
        ..Settings::default()
    };
    Canister::install(&engine, &program, &[], settings)
        .expect("installs")
        .0
}

fn cost(name: &str, self_: u64, inclusive: u64, calls: u64) -> (String, u64, u64, u64) {
    (name.to_string(), self_, inclusive, calls)
}

fn table(p: &Profile) -> Vec<(String, u64, u64, u64)> {
    p.functions()
        .into_iter()
        .map(|f: FunctionCost| {
            (
                f.name,
                f.self_instructions,
                f.inclusive_instructions,
                f.calls,
            )
        })
        .collect()
}

/// The profile's self instructions add up to the execution's instructions.
fn assert_exact(e: &Execution, p: &Profile) {
    assert_eq!(p.instructions(), e.instructions);
    let sum: u64 = p.functions().iter().map(|f| f.self_instructions).sum();
    assert_eq!(sum, e.instructions);
    let folded: u64 = p
        .folded()
        .lines()
        .map(|l| l.rsplit_once(' ').expect("count").1.parse::<u64>().unwrap())
        .sum();
    assert_eq!(folded, e.instructions);
    assert_eq!(p.entry(), e.entry);
}

#[test]
fn nested_calls_a_loop_and_system_api_calls() {
    let mut c = profiled();
    let (e, p) = c.update_profiled("nested", &[]).unwrap();
    assert_eq!(e.result, MessageResult::Reply(vec![]));
    assert_eq!(e.instructions, 23 + 12 + 2 * 2 + 91 + 500 + 500);
    assert_exact(&e, &p);
    assert_eq!(
        table(&p),
        [
            cost("ic0.msg_arg_data_size", 500, 500, 1),
            cost("ic0.msg_reply", 500, 500, 1),
            cost("looper", 91, 91, 1),
            cost("nested", 23, 1130, 1),
            cost("mid", 12, 16, 1),
            cost("leaf", 4, 4, 2),
        ]
    );
    assert_eq!(
        p.folded(),
        "nested 23\nnested;ic0.msg_arg_data_size 500\nnested;ic0.msg_reply 500\n\
         nested;looper 91\nnested;mid 12\nnested;mid;leaf 4\n"
    );
}

#[test]
fn recursion_counts_inclusive_once() {
    let mut c = profiled();
    let (e, p) = c.update_profiled("rec", &[]).unwrap();
    assert_eq!(e.instructions, 13 + 4 * 16 + 7 + 500);
    assert_exact(&e, &p);
    assert_eq!(
        table(&p),
        [
            cost("ic0.msg_reply", 500, 500, 1),
            cost("fact", 71, 71, 5),
            cost("rec", 13, 584, 1),
        ]
    );
    assert_eq!(
        p.folded(),
        "rec 13\nrec;fact 16\nrec;fact;fact 16\nrec;fact;fact;fact 16\n\
         rec;fact;fact;fact;fact 16\nrec;fact;fact;fact;fact;fact 7\nrec;ic0.msg_reply 500\n"
    );
    let top = p.top_table(2);
    assert!(top.contains("(1 other functions)"), "{top}");
    assert!(top.contains("584"), "{top}");
    let svg = p.flamegraph_svg("rec").unwrap();
    assert!(svg.starts_with("<?xml") && svg.contains("fact"), "{svg}");
}

#[test]
fn a_tail_call_replaces_the_caller_frame() {
    let mut c = profiled();
    let (e, p) = c.update_profiled("tail", &[]).unwrap();
    assert_eq!(e.instructions, 11 + 4 + 2 + 500);
    assert_exact(&e, &p);
    assert_eq!(
        p.folded(),
        "tail 11\ntail;hop 4\ntail;ic0.msg_reply 500\ntail;land 2\n"
    );
}

#[test]
fn bulk_memory_length_charges_go_to_the_function() {
    let mut c = profiled();
    let (e, p) = c.update_profiled("bulk", &[]).unwrap();
    assert_eq!(e.instructions, 11 + 1_104 + 500);
    assert_exact(&e, &p);
    assert_eq!(
        p.folded(),
        "bulk 11\nbulk;fill 1104\nbulk;ic0.msg_reply 500\n"
    );
}

#[test]
fn traps_end_the_profile_where_they_happen() {
    let mut c = profiled();
    let (e, p) = c.update_profiled("boom", &[]).unwrap();
    assert_eq!(
        e.result,
        MessageResult::Trap("Canister trapped: unreachable".into())
    );
    assert_eq!(e.instructions, 6 + 5);
    assert_exact(&e, &p);
    assert_eq!(p.folded(), "boom 6\nboom;inner 5\n");
    // A System API function that traps is charged in its own frame.
    let (e, p) = c.update_profiled("refuse", &[]).unwrap();
    assert!(e.result.is_trap(), "{:?}", e.result);
    assert_eq!(e.instructions, 8 + 659);
    assert_exact(&e, &p);
    assert_eq!(p.folded(), "refuse 8\nrefuse;ic0.trap 659\n");
    // A method that does not exist runs nothing.
    let (e, p) = c.update_profiled("nothing", &[]).unwrap();
    assert_eq!(e.instructions, 0);
    assert_exact(&e, &p);
    assert_eq!(p.folded(), "");
}

#[test]
fn queries_and_installs_are_profiled_and_unprofiled_programs_refuse() {
    let mut c = profiled();
    let (e, p) = c.query_profiled("rec", &[]).unwrap();
    assert_eq!(e.instructions, 584);
    assert_exact(&e, &p);
    assert_eq!(p.entry(), "canister_query rec");
    let mut plain = install(MODULE);
    let err = plain.update_profiled("rec", &[]).unwrap_err();
    assert!(err.to_string().contains("load_profiled"), "{err}");
    assert!(plain.take_profile().is_none());
}

#[test]
fn profiling_changes_no_count() {
    let mut p = profiled();
    let mut plain = install(MODULE);
    for method in ["nested", "rec", "tail", "bulk", "boom", "refuse", "nothing"] {
        let a = p.update(method, &[]).unwrap();
        let b = plain.update(method, &[]).unwrap();
        assert_eq!(figures(&a), figures(&b), "{method}");
        let profile = p.take_profile();
        assert_eq!(
            profile.map(|x| x.instructions()).unwrap_or(0),
            a.instructions
        );
    }
}

/// The project's canister (built by `scripts/build.sh`): the same messages profiled and not
/// give the same figures, and every profile adds up exactly.
#[test]
fn bench_canister_profiled_and_unprofiled_agree() {
    let path = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../target/canister/bench_canister.wasm");
    let wasm = std::fs::read(&path)
        .unwrap_or_else(|e| panic!("{}: {e}; build it with scripts/build.sh", path.display()));
    let engine = engine();
    let init = [
        0x44, 0x49, 0x44, 0x4c, 0x02, 0x6e, 0x01, 0x6c, 0x00, 0x01, 0x00, 0x01,
    ];
    let mut runs: Vec<Vec<Figures>> = Vec::new();
    for profiled in [false, true] {
        let program = if profiled {
            engine.load_profiled(&wasm)
        } else {
            engine.load(&wasm)
        }
        .expect("loads");
        let (mut c, install) =
            Canister::install(&engine, &program, &init, Settings::default()).expect("installs");
        let mut out = vec![figures(&install)];
        if profiled {
            let p = c.take_profile().expect("install profile");
            assert_exact(&install, &p);
        }
        let mut calls: Vec<(&str, Vec<u8>, bool)> = Vec::new();
        for name in ["alice", "bob"] {
            calls.push((
                "create_user",
                candid::encode_args((name.to_string(), format!("{name}@example.com"))).unwrap(),
                false,
            ));
        }
        for user in [1i64, 2] {
            calls.push((
                "submit_create_order",
                candid::encode_args((user, 9.75f64)).unwrap(),
                false,
            ));
        }
        calls.push(("flush", candid::encode_args(()).unwrap(), false));
        calls.push((
            "user_orders",
            candid::encode_args((10i64, 100u32)).unwrap(),
            true,
        ));
        for (method, arg, query) in calls {
            let e = if query {
                c.query(method, &arg)
            } else {
                c.update(method, &arg)
            }
            .expect("engine");
            assert!(matches!(e.result, MessageResult::Reply(_)), "{e:?}");
            if profiled {
                let p = c.take_profile().expect("profile");
                assert_exact(&e, &p);
            }
            out.push(figures(&e));
        }
        runs.push(out);
    }
    assert_eq!(runs[0], runs[1]);
}
