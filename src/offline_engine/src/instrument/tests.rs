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
