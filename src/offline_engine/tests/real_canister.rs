//! The project's real canister wasm (built by `scripts/build.sh` into `target/canister/`), if
//! load (compiled-module cache), install, Candid interface, a canbench benchmark.
//! Build the wasms first (`scripts/test.sh` does); a missing wasm fails the test.

use std::path::PathBuf;

use offline_engine::{Canister, Engine, EngineConfig, Settings, canbench};

fn wasm(name: &str) -> Vec<u8> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../target/canister")
        .join(name);
    std::fs::read(&path)
        .unwrap_or_else(|e| panic!("{}: {e}; build it with scripts/build.sh", path.display()))
}

#[test]
fn bench_canister_installs_and_reports_candid() {
    let bytes = wasm("bench_canister.wasm");
    let engine = Engine::new(EngineConfig::default()).unwrap();
    let program = engine.load(&bytes).unwrap();
    assert!(
        program
            .info()
            .ic0_imports
            .iter()
            .all(|i| offline_engine::system_api::availability(i).is_some())
    );
    let (mut c, init) =
        Canister::install(&engine, &program, b"DIDL\x00\x00", Settings::default()).unwrap();
    assert!(!init.result.is_trap(), "{init:?}");
    let candid = c.candid_interface().unwrap().expect("candid");
    assert!(candid.contains("service"), "{candid}");
}

#[test]
fn bench_canister_canbench_query_decodes() {
    let bytes = wasm("bench_canister_canbench.wasm");
    let engine = Engine::new(EngineConfig::default()).unwrap();
    let program = engine.load(&bytes).unwrap();
    let benches = program.canbench_benchmarks();
    assert!(!benches.is_empty());
    let mut c = canbench::install(&engine, &program, &[], None).unwrap();
    let heap = c.heap_size_bytes();
    // The cheapest-looking benchmark; any that replies will do.
    let name = benches
        .iter()
        .find(|b| b.contains("unbatched_insert_1"))
        .unwrap_or(&benches[0]);
    let run = canbench::run_benchmark(&mut c, name).unwrap();
    let total = run.result.total.instructions();
    assert!(total > 0 && total <= run.execution.instructions);
    // Query state is discarded, including memory growth: the same bench measures the same.
    assert_eq!(c.heap_size_bytes(), heap);
    assert_eq!(
        canbench::run_benchmark(&mut c, name).unwrap().result,
        run.result
    );
}
