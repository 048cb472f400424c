use wasmparser::{ExternalKind, Operator, Parser, Payload};

use super::*;

fn accept_all(_: &str, _: &str) -> Result<(), String> {
    Ok(())
}

fn ops_of_first_body(wasm: &[u8]) -> Vec<Operator<'_>> {
    for payload in Parser::new(0).parse_all(wasm) {
        if let Ok(Payload::CodeSectionEntry(body)) = payload {
            let mut r = body.get_operators_reader().unwrap();
            let mut ops = Vec::new();
            while !r.eof() {
                ops.push(r.read().unwrap());
            }
            return ops;
        }
    }
    panic!("no code");
}

fn exports(wasm: &[u8]) -> Vec<(String, ExternalKind, u32)> {
    let mut v = Vec::new();
    for payload in Parser::new(0).parse_all(wasm) {
        if let Ok(Payload::ExportSection(r)) = payload {
            for e in r {
                let e = e.unwrap();
                v.push((e.name.to_string(), e.kind, e.index));
            }
        }
    }
    v
}

#[test]
fn basic_blocks_follow_the_replica_rule() {
    // entry: 1 + block 0 + const 1 + br_if 2 = 4 | nop nop nop end = 3 | end (dropped)
    let wasm =
        wat::parse_str("(module (func (block (br_if 0 (i32.const 1)) nop nop nop)))").unwrap();
    assert_eq!(
        block_costs(&ops_of_first_body(&wasm), false),
        vec![(0, 4), (3, 3)]
    );
    // loop header is re-entrant and always injected, even with cost 0.
    let wasm = wat::parse_str("(module (func (loop nop)))").unwrap();
    assert_eq!(
        block_costs(&ops_of_first_body(&wasm), false),
        vec![(0, 1), (1, 1)]
    );
    // if/else: entry 1 + const 1 + if 2 | then: nop + else 0 | else: nop nop end.
    let wasm =
        wat::parse_str("(module (func (if (i32.const 1) (then nop) (else nop nop))))").unwrap();
    assert_eq!(
        block_costs(&ops_of_first_body(&wasm), false),
        vec![(0, 4), (2, 1), (4, 2)]
    );
    // call is not a boundary; return is.
    let wasm = wat::parse_str("(module (func $f (call $f) (return) nop))").unwrap();
    assert_eq!(
        block_costs(&ops_of_first_body(&wasm), false),
        vec![(0, 7), (2, 1)]
    );
}

#[test]
fn instrumented_module_is_valid_and_exports_what_the_engine_needs() {
    let wat = r#"(module
        (import "ic0" "msg_reply" (func $reply))
        (memory (export "mem") 1)
        (table 2 funcref)
        (elem (i32.const 0) $a $b)
        (global $m (mut i32) (i32.const 0))
        (global $e (export "exported") (mut i64) (i64.const 0))
        (global $c i32 (i32.const 5))
        (func $a (memory.fill (i32.const 0) (i32.const 0) (i32.const 10)) (call $reply))
        (func $b (param i32) (drop (memory.grow (i32.const 1))))
        (start $a)
        (data (i32.const 0) "hi"))"#;
    let wasm = wat::parse_str(wat).unwrap();
    let out = instrument(&wasm, &accept_all).unwrap();
    wasmparser::Validator::new_with_features(wasmparser::WasmFeatures::all())
        .validate_all(&out.wasm)
        .unwrap();
    let ex = exports(&out.wasm);
    let names: Vec<&str> = ex.iter().map(|e| e.0.as_str()).collect();
    for want in [
        MEMORY_EXPORT,
        TABLE_EXPORT,
        COUNTER_EXPORT,
        START_EXPORT,
        "exported",
        "__persistent_mutable_global_0",
    ] {
        assert!(names.contains(&want), "{want} missing from {names:?}");
    }
    assert!(!names.contains(&"mem"));
    // canister_start points to $a, shifted by the injected import (ic0 import 0 -> 1, $a 1 -> 2).
    assert!(ex.iter().any(|e| e.0 == START_EXPORT && e.2 == 2));
    assert!(out.info.has_start && out.info.has_table && out.info.has_memory && !out.info.memory64);
    assert_eq!(
        out.info.mutable_globals,
        vec![
            "__persistent_mutable_global_0".to_string(),
            "exported".to_string()
        ]
    );
    assert_eq!(out.info.ic0_imports, vec!["msg_reply".to_string()]);
    // No start section remains.
    assert!(
        !Parser::new(0)
            .parse_all(&out.wasm)
            .any(|p| matches!(p, Ok(Payload::StartSection { .. })))
    );
}

#[test]
fn empty_module_instruments() {
    let out = instrument(&wat::parse_str("(module)").unwrap(), &accept_all).unwrap();
    wasmparser::validate(&out.wasm).unwrap();
}

#[test]
fn refuses_imports_it_cannot_provide() {
    let wasm = wat::parse_str(r#"(module (import "env" "memory" (memory 1)))"#).unwrap();
    let err = instrument(&wasm, &accept_all).unwrap_err();
    assert!(err.to_string().contains("env.memory"), "{err}");
    let wasm = wat::parse_str(r#"(module (import "foo" "bar" (func)))"#).unwrap();
    let err = instrument(&wasm, &|m, _| {
        if m == "ic0" {
            Ok(())
        } else {
            Err(" (nope)".into())
        }
    })
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "module imports `foo.bar`, which the offline engine does not provide (nope)"
    );
}

#[test]
fn custom_sections_and_metadata_survive() {
    let mut wasm = wat::parse_str("(module (func))").unwrap();
    let mut section = wasm_encoder::Module::new();
    section.section(&wasm_encoder::CustomSection {
        name: "icp:public candid:service".into(),
        data: b"service : {}".into(),
    });
    wasm.extend_from_slice(&section.finish()[8..]);
    let out = instrument(&wasm, &accept_all).unwrap();
    assert_eq!(
        out.info.metadata,
        vec![("candid:service".to_string(), b"service : {}".to_vec())]
    );
    wasmparser::validate(&out.wasm).unwrap();
}

/// A module exercising every kind of injected code: stores of every width (with and without a
/// static offset), `memory.fill/copy/init`, `table.fill/copy/init`, loops and branches, calls of
/// an import, indirect and tail calls, a start function and mutable globals. `ADDR` is the
/// address type (`i32` or `i64`); `TABLE_OPS` is [`TABLE_OPS`] in wasm32 and nothing in wasm64,
/// where the size operand of a table operation is charged as an i64 although tables stay 32-bit
/// (the module would not validate).
const EVERY_INJECTION: &str = r#"(module
  (import "ic0" "msg_reply" (func $reply))
  (type $t (func (param ADDR)))
  (memory ADDR 1)
  (table 4 funcref)
  (elem declare func $stores)
  (global $g (mut i32) (i32.const 0))
  (data $d "abcd")
  (func $stores (param $a ADDR) (local $v v128)
    (i32.store (local.get $a) (i32.const 1))
    (i32.store8 offset=1 (local.get $a) (i32.const 2))
    (i32.store16 offset=4097 (local.get $a) (i32.const 3))
    (i64.store (local.get $a) (i64.const 4))
    (i64.store8 offset=2 (local.get $a) (i64.const 5))
    (i64.store16 (local.get $a) (i64.const 6))
    (i64.store32 offset=65536 (local.get $a) (i64.const 7))
    (f32.store (local.get $a) (f32.const 8))
    (f64.store offset=8 (local.get $a) (f64.const 9))
    (v128.store (local.get $a) (local.get $v))
    (v128.store8_lane 3 (local.get $a) (local.get $v))
    (v128.store64_lane offset=16 1 (local.get $a) (local.get $v)))
  (func $bulk (param $a ADDR)
    (memory.fill (local.get $a) (i32.const 7) (ADDR.const 100))
    (memory.copy (local.get $a) (ADDR.const 0) (ADDR.const 9000))
    (memory.init $d (local.get $a) (i32.const 0) (i32.const 4))
    TABLE_OPS
    (global.set $g (i32.add (global.get $g) (i32.const 1))))
  (func $control (param $a ADDR) (local $i i32)
    (loop $l
      (call $stores (local.get $a))
      (call $reply)
      (call_indirect (type $t) (local.get $a) (i32.const 0))
      (br_if $l (i32.lt_u (local.tee $i (i32.add (local.get $i) (i32.const 1))) (i32.const 3))))
    (if (i32.eqz (local.get $i)) (then (unreachable)) (else nop))
    (return_call $bulk (local.get $a)))
  (func $tail_import (return_call $reply))
  (func $start (call $control (ADDR.const 0)))
  (start $start))"#;

/// Loads of every width, for the tracker's checks (added to [`EVERY_INJECTION`] in the cases
/// with the tracker, so that the digests without it stay those of before the tracker).
const LOADS: &str = r#"(func $loads (param $a ADDR)
    (drop (i32.load8_u (local.get $a)))
    (drop (i32.load16_s offset=65535 (local.get $a)))
    (drop (i32.load (local.get $a)))
    (drop (i64.load offset=8 (local.get $a)))
    (drop (f32.load (local.get $a)))
    (drop (f64.load (local.get $a)))
    (drop (v128.load offset=16 (local.get $a)))
    (drop (v128.load32_zero (local.get $a)))
    (drop (v128.load8_lane 1 (local.get $a) (v128.const i64x2 0 0))))
  (func $tail_import"#;

const TABLE_OPS: &str = "(table.fill (i32.const 0) (ref.func $stores) (i32.const 2))
    (table.copy (i32.const 1) (i32.const 0) (i32.const 1))";

/// SHA-256 of the instrumented module, hex.
fn instrumented_sha256(wat: &str, profile: bool, tracker: bool) -> String {
    use sha2::Digest;
    let wasm = wat::parse_str(wat).unwrap();
    wasmparser::Validator::new_with_features(wasmparser::WasmFeatures::all())
        .validate_all(&wasm)
        .unwrap();
    let tracker = tracker
        .then_some(crate::metering::Metering::IC_DMT.tracker)
        .flatten();
    let out = instrument_with(&wasm, &accept_all, Options { profile, tracker }).unwrap();
    wasmparser::Validator::new_with_features(wasmparser::WasmFeatures::all())
        .validate_all(&out.wasm)
        .unwrap();
    hex::encode(sha2::Sha256::digest(&out.wasm))
}

/// The instrumented bytes are pinned: a change to the injected code (a charge, a local, the
/// order of the injected calls or sections) changes what the canister pays or how the engine
/// reads it, so it must show here and be deliberate. Update the digests only with a change that
/// means to move them.
#[test]
fn instrumented_bytes_are_pinned() {
    // (address type, profiler hooks, memory tracker, digest). Without the tracker the digests
    // are those of the engine before it had metering profiles: the rules of PocketIC 13 are
    // instrumented byte for byte as before.
    let cases = [
        (
            "i32",
            false,
            false,
            "e9bda9360fdaf6e0d01ef9529594dc64c9ed63805d579883f760402c7382dec1",
        ),
        (
            "i32",
            true,
            false,
            "3236f6aa069ff8b6bb57ba5817a7cae6a27f30cef5d659b473115005bddd8679",
        ),
        (
            "i64",
            false,
            false,
            "4463ca6a2e1476bdb015b853e198fc29d074d427f8567bbcc599138bd510cad7",
        ),
        (
            "i64",
            true,
            false,
            "399b676c0ceb55908967ca321e88135599885b00375f841594bfc425cbc0ca03",
        ),
        (
            "i32",
            false,
            true,
            "eb688a87444786c608bd8cae923c35018fc089cbd8001e3be652985791992e0a",
        ),
        (
            "i32",
            true,
            true,
            "4c2c84ebb4b22ce6b3b77f33b4f4159b43e1cc2dd0615c9bb9c19c6666f21a74",
        ),
        (
            "i64",
            false,
            true,
            "8fcc4a71e892d3859a6a13eab5317877e95d0695bc29b28491b2fe6b5749a914",
        ),
        (
            "i64",
            true,
            true,
            "7448c472e9a9d3946186963d07b95e2e3575b8271d14048e1d39916115485716",
        ),
    ];
    let got: Vec<(&str, bool, bool, String)> = cases
        .iter()
        .map(|&(addr, profile, tracker, _)| {
            let table_ops = if addr == "i32" { TABLE_OPS } else { "" };
            let mut wat = EVERY_INJECTION.to_string();
            if tracker {
                wat = wat.replace("(func $tail_import", LOADS);
            }
            let wat = wat.replace("ADDR", addr).replace("TABLE_OPS", table_ops);
            (
                addr,
                profile,
                tracker,
                instrumented_sha256(&wat, profile, tracker),
            )
        })
        .collect();
    let want: Vec<(&str, bool, bool, String)> = cases
        .iter()
        .map(|&(addr, profile, tracker, digest)| (addr, profile, tracker, digest.to_string()))
        .collect();
    assert_eq!(got, want);
}

/// The heap accesses of the first function body of `wat`, in order: whether each one's check is
/// skipped (`redundant::redundant_checks`).
fn skipped(wat: &str) -> Vec<bool> {
    let wasm = wat::parse_str(wat).unwrap();
    let ops = ops_of_first_body(&wasm);
    let redundant = super::redundant::redundant_checks(&ops);
    ops.iter()
        .zip(redundant)
        .filter(|(op, _)| super::pages::heap_access(op).is_some())
        .map(|(_, r)| r)
        .collect()
}

#[test]
fn checks_covered_on_every_path_are_skipped() {
    let f = |body: &str| {
        format!("(module (memory 1) (func (param $p i32) (param $q i32) (local $v i32) {body}))")
    };
    // The same local: a read covers a read within the range checked, not a write; a write
    // covers both.
    assert_eq!(
        skipped(&f("(drop (i32.load offset=8 (local.get $p)))
                    (drop (i32.load offset=8 (local.get $p)))
                    (i32.store offset=8 (local.get $p) (i32.const 1))
                    (drop (i32.load16_u offset=10 (local.get $p)))
                    (drop (i32.load offset=12 (local.get $p)))
                    (i32.store8 offset=8 (local.get $p) (local.get $v))")),
        [false, true, false, true, false, true]
    );
    // Assigning the local forgets it; another local is another address.
    assert_eq!(
        skipped(&f("(drop (i32.load (local.get $p)))
                    (drop (i32.load (local.get $q)))
                    (local.set $p (local.get $q))
                    (drop (i32.load (local.get $p)))
                    (drop (i32.load (local.get $q)))")),
        [false, false, false, true]
    );
    // Ranges at most a Wasm page apart merge; further apart they replace each other.
    assert_eq!(
        skipped(&f("(drop (i32.load (local.get $p)))
                    (drop (i32.load offset=65532 (local.get $p)))
                    (drop (i32.load offset=30000 (local.get $p)))
                    (drop (i32.load offset=65536 (local.get $p)))
                    (drop (i32.load offset=30000 (local.get $p)))")),
        [false, false, true, false, false]
    );
    // Where paths meet: both arms of an `if` checked it; a `br_if` out of a block before the
    // check did not; a loop header knows what held before it unless the loop assigns the local.
    assert_eq!(
        skipped(&f(
            "(if (local.get $q)
                      (then (drop (i32.load (local.get $p))))
                      (else (drop (i32.load (local.get $p)))))
                    (drop (i32.load (local.get $p)))
                    (block $b (br_if $b (local.get $q)) (drop (i32.load offset=100 (local.get $p))))
                    (drop (i32.load offset=100 (local.get $p)))
                    (loop $l (drop (i32.load (local.get $p))) (br_if $l (local.get $q)))
                    (loop $m (drop (i32.load (local.get $p)))
                      (local.set $p (local.get $q)) (br_if $m (local.get $q)))"
        )),
        [false, false, true, false, false, true, false]
    );
}
