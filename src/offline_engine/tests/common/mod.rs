//! Helpers shared by the integration tests: an engine, WAT canisters, the replica's benchmark
//! loop template.
#![allow(dead_code)]

use offline_engine::{
    Canister, Engine, EngineConfig, Execution, MessageResult, Metering, PageUse, Program, Settings,
};

/// An engine without the on-disk cache (test modules compile in milliseconds).
pub fn engine() -> Engine {
    engine_metering(Metering::default())
}

/// An engine without the on-disk cache that meters by `metering`.
pub fn engine_metering(metering: Metering) -> Engine {
    Engine::new(EngineConfig {
        cache: false,
        cache_dir: None,
        metering,
    })
    .expect("engine")
}

/// Compiles WAT text into a program.
pub fn program(engine: &Engine, wat: &str) -> Program {
    let wasm = wat::parse_str(wat).expect("valid wat");
    engine.load(&wasm).expect("loads")
}

/// Installs a WAT canister with the given settings.
pub fn install_with(wat: &str, settings: Settings) -> (Engine, Canister, Execution) {
    let engine = engine();
    let p = program(&engine, wat);
    let (c, e) = Canister::install(&engine, &p, &[], settings).expect("installs");
    (engine, c, e)
}

/// Installs a WAT canister with default settings, debug printing disabled (mainnet default).
pub fn install(wat: &str) -> Canister {
    install_with(
        wat,
        Settings {
            debug_print_enabled: false,
            ..Settings::default()
        },
    )
    .1
}

/// The replica's benchmark loop (`rs/execution_environment/benches/lib/src/wat.rs`): runs
/// `body` `iterations` times inside `(loop (if (i < N) (then i++ BODY (br loop))))`.
pub fn loop_body(body: &str, iterations: u32) -> String {
    format!(
        r#"(loop $loop
             (if (i32.lt_s (local.get $i) (i32.const {iterations}))
               (then
                 (local.set $i (i32.add (local.get $i) (i32.const 1)))
                 {body}
                 (br $loop))))"#
    )
}

/// A module with one update method `test` running `body` in the benchmark loop.
pub fn loop_module(imports: &str, body: &str, iterations: u32) -> String {
    format!(
        r#"(module
             {imports}
             (memory 1)
             (func $test (export "canister_update test")
               (local $i i32) (local $s i32)
               {loop_}))"#,
        loop_ = loop_body(body, iterations)
    )
}

/// Like [`loop_module`] but first grows stable memory by one page (the replica's StableTest).
pub fn stable_loop_module(imports: &str, body: &str, iterations: u32) -> String {
    format!(
        r#"(module
             (import "ic0" "stable_grow" (func $ic0_stable_grow (param i32) (result i32)))
             {imports}
             (memory 1)
             (func $test (export "canister_update test")
               (local $i i32) (local $s i32)
               (drop (call $ic0_stable_grow (i32.const 1)))
               {loop_}))"#,
        loop_ = loop_body(body, iterations)
    )
}

/// Runs update `test` with `arg` and returns the execution (panics on trap).
pub fn run_test(canister: &mut Canister, arg: &[u8]) -> Execution {
    let e = canister.update("test", arg).expect("engine ok");
    assert!(!e.result.is_trap(), "trapped: {:?}", e.result);
    e
}

/// What a message did, without its wall time: entry, result, instructions, billed instructions,
/// heap and stable dirty pages, the pages the memory tracker charged, logs.
pub type Figures = (
    String,
    MessageResult,
    u64,
    u64,
    u64,
    u64,
    PageUse,
    Vec<String>,
);

/// The [`Figures`] of `e`.
pub fn figures(e: &Execution) -> Figures {
    (
        e.entry.clone(),
        e.result.clone(),
        e.instructions,
        e.billed_instructions,
        e.heap_dirty_pages,
        e.stable_dirty_pages,
        e.pages.clone(),
        e.logs.clone(),
    )
}
