//! Checks on the wasm that `scripts/build.sh` produces (run it first; `scripts/test.sh` does).

use std::collections::BTreeSet;
use std::path::PathBuf;

use candid_parser::IDLProg;
use candid_parser::syntax::IDLType;

fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read_wasm(name: &str) -> Vec<u8> {
    let path = workspace().join("target/canister").join(name);
    std::fs::read(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; build it with scripts/build.sh (scripts/test.sh does)",
            path.display()
        )
    })
}

struct Interface {
    imports: Vec<(String, String)>,
    exports: BTreeSet<String>,
    custom_sections: BTreeSet<String>,
}

fn interface(wasm: &[u8]) -> Interface {
    let mut out = Interface {
        imports: vec![],
        exports: BTreeSet::new(),
        custom_sections: BTreeSet::new(),
    };
    for payload in wasmparser::Parser::new(0).parse_all(wasm) {
        match payload.expect("valid wasm") {
            wasmparser::Payload::ImportSection(reader) => {
                for import in reader.into_imports() {
                    let import = import.expect("valid import");
                    out.imports
                        .push((import.module.to_string(), import.name.to_string()));
                }
            }
            wasmparser::Payload::ExportSection(reader) => {
                for export in reader {
                    out.exports
                        .insert(export.expect("valid export").name.to_string());
                }
            }
            wasmparser::Payload::CustomSection(section) => {
                out.custom_sections.insert(section.name().to_string());
            }
            _ => {}
        }
    }
    out
}

/// `(name, is_query)` of every method in the committed .did.
fn did_methods() -> Vec<(String, bool)> {
    let did = std::fs::read_to_string(workspace().join("src/bench_canister/bench_canister.did"))
        .expect("reading bench_canister.did");
    let prog: IDLProg = did.parse().expect("the .did parses");
    let actor = prog.actor.expect("the .did has a service");
    let service = match actor.typ {
        IDLType::ClassT(_, service) => *service,
        other => other,
    };
    let IDLType::ServT(methods) = service else {
        panic!("not a service: {service:?}")
    };
    methods
        .into_iter()
        .map(|m| {
            let IDLType::FuncT(func) = m.typ else {
                panic!("{} is not a function", m.id)
            };
            let is_query = func
                .modes
                .iter()
                .any(|mode| format!("{mode:?}").contains("Query"));
            (m.id, is_query)
        })
        .collect()
}

fn check_common(name: &str) -> Interface {
    let wasm = read_wasm(name);
    let iface = interface(&wasm);
    let foreign: Vec<_> = iface
        .imports
        .iter()
        .filter(|(module, _)| module != "ic0")
        .collect();
    assert!(
        foreign.is_empty(),
        "{name} imports from outside ic0 (wasi2ic left them): {foreign:?}"
    );
    assert!(!iface.imports.is_empty(), "{name} imports nothing from ic0");
    for (method, is_query) in did_methods() {
        let export = format!(
            "{} {method}",
            if is_query {
                "canister_query"
            } else {
                "canister_update"
            }
        );
        assert!(
            iface.exports.contains(&export),
            "{name} does not export `{export}`"
        );
    }
    for hook in [
        "canister_init",
        "canister_pre_upgrade",
        "canister_post_upgrade",
        "canister_global_timer",
    ] {
        assert!(
            iface.exports.contains(hook),
            "{name} does not export {hook}"
        );
    }
    assert!(
        iface.custom_sections.contains("icp:public candid:service"),
        "{name} lacks the candid:service metadata: {:?}",
        iface.custom_sections
    );
    iface
}

#[test]
fn deployable_wasm_imports_only_ic0_and_exports_the_did() {
    let iface = check_common("bench_canister.wasm");
    let benches: Vec<_> = iface
        .exports
        .iter()
        .filter(|e| e.contains("__canbench__"))
        .collect();
    assert!(
        benches.is_empty(),
        "bench endpoints must not ship in the deployable wasm: {benches:?}"
    );
}

#[test]
fn canbench_wasm_imports_only_ic0_and_exports_benches() {
    let iface = check_common("bench_canister_canbench.wasm");
    let benches = iface
        .exports
        .iter()
        .filter(|e| e.starts_with("canister_query __canbench__"))
        .count();
    assert!(
        benches >= 9 + 31 + 7,
        "expected every bench exported, found {benches}"
    );
}
