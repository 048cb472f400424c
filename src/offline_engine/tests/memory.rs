//! Memory limits (the wasm32 heap's 4 GiB, `wasm_memory_limit`, the memory allocation) and the
//! reinstall mode.

mod common;
use common::*;
use offline_engine::{Canister, MessageResult, Settings};

const PAGE: u64 = 65_536;

const GROWER: &str = include_str!("canisters/grower.wat");

fn pages(n: u32) -> Vec<u8> {
    n.to_le_bytes().to_vec()
}

fn grower(settings: Settings) -> Canister {
    install_with(
        GROWER,
        Settings {
            debug_print_enabled: false,
            ..settings
        },
    )
    .1
}

#[test]
fn a_32_bit_heap_stops_at_4_gib() {
    let mut c = grower(Settings::default());
    // 65,536 pages is the most a 32-bit memory holds: growing past it answers -1.
    let r = c.update("grow", &pages(65_536)).unwrap();
    assert_eq!(
        r.result,
        MessageResult::Reply((-1i32).to_le_bytes().to_vec())
    );
    assert_eq!(c.heap_size_bytes(), PAGE);
}

#[test]
fn the_wasm_memory_limit_traps_heap_growth_in_updates_only() {
    let limit = 3 * PAGE;
    let mut c = grower(Settings {
        wasm_memory_limit: limit,
        ..Settings::default()
    });
    let r = c.update("grow", &pages(1)).unwrap();
    assert_eq!(r.result, MessageResult::Reply(1i32.to_le_bytes().to_vec()));
    let r = c.update("grow", &pages(2)).unwrap();
    assert_eq!(
        r.result,
        MessageResult::Trap(format!(
            "Canister exceeded its current Wasm memory limit of {limit} bytes. \
             The peak Wasm memory usage was {} bytes. \
             If the canister reaches 4GiB, then it may stop functioning and may become unrecoverable. \
             Please reach out to the canister owner to investigate the reason for the increased memory usage. \
             It might be necessary to move data from the Wasm memory to the stable memory. \
             If such high Wasm memory usage is expected and safe, then the developer can increase \
             the Wasm memory limit in the canister settings.",
            4 * PAGE
        ))
    );
    assert_eq!(
        c.heap_size_bytes(),
        2 * PAGE,
        "the trapped growth is undone"
    );
    // A non-replicated query is not limited (its growth is discarded anyway).
    let q = c.query("grow_q", &pages(2)).unwrap();
    assert_eq!(q.result, MessageResult::Reply(2i32.to_le_bytes().to_vec()));
    // Raising the limit lets the update grow.
    c.set_memory_limits(0, 0);
    let r = c.update("grow", &pages(2)).unwrap();
    assert_eq!(r.result, MessageResult::Reply(2i32.to_le_bytes().to_vec()));
}

#[test]
fn the_memory_allocation_bounds_heap_stable_memory_and_module_together() {
    let mut c = grower(Settings::default());
    let module = c.program().wasm_size();
    assert_eq!(c.memory_usage(), PAGE + module);
    // Room for two more 64 KiB pages.
    c.set_memory_limits(0, PAGE + module + 2 * PAGE);
    let r = c.update("stable_grow", &pages(1)).unwrap();
    assert_eq!(r.result, MessageResult::Reply(0i64.to_le_bytes().to_vec()));
    // Two more stable pages do not fit: -1, as the replica's stable memory growth fails.
    let r = c.update("stable_grow", &pages(2)).unwrap();
    assert_eq!(
        r.result,
        MessageResult::Reply((-1i64).to_le_bytes().to_vec())
    );
    // One heap page fits; the next traps.
    let r = c.update("grow", &pages(1)).unwrap();
    assert_eq!(r.result, MessageResult::Reply(1i32.to_le_bytes().to_vec()));
    let r = c.update("grow", &pages(1)).unwrap();
    assert_eq!(
        r.result,
        MessageResult::Trap("Canister cannot grow its memory usage.".into())
    );
    assert_eq!(c.memory_usage(), 2 * PAGE + module + PAGE);
    let r = c.update("stable_grow", &pages(1)).unwrap();
    assert_eq!(
        r.result,
        MessageResult::Reply((-1i64).to_le_bytes().to_vec())
    );
}

const STATEFUL: &str = r#"
(module
  (import "ic0" "msg_arg_data_copy" (func $arg_copy (param i32 i32 i32)))
  (import "ic0" "msg_arg_data_size" (func $arg_size (result i32)))
  (import "ic0" "msg_reply" (func $reply))
  (import "ic0" "msg_reply_data_append" (func $append (param i32 i32)))
  (import "ic0" "stable64_grow" (func $stable_grow (param i64) (result i64)))
  (import "ic0" "stable64_size" (func $stable_size (result i64)))
  (import "ic0" "stable64_write" (func $stable_write (param i64 i64 i64)))
  (import "ic0" "global_timer_set" (func $timer_set (param i64) (result i64)))
  (import "ic0" "trap" (func $trap (param i32 i32)))
  (memory 1)
  (global $init (mut i32) (i32.const 0))
  (global $writes (mut i32) (i32.const 0))
  ;; init(x): remembers x (a byte); x = 0xff traps.
  (func (export "canister_init")
    (call $arg_copy (i32.const 0) (i32.const 0) (i32.const 1))
    (if (i32.eq (i32.load8_u (i32.const 0)) (i32.const 255))
      (then (call $trap (i32.const 0) (i32.const 0))))
    (global.set $init (i32.load8_u (i32.const 0))))
  (func (export "canister_update write")
    (global.set $writes (i32.add (global.get $writes) (i32.const 1)))
    (i32.store (i32.const 100) (i32.const 0x12345678))
    (drop (call $stable_grow (i64.const 1)))
    (call $stable_write (i64.const 0) (i64.const 100) (i64.const 4))
    (drop (call $timer_set (i64.const 99)))
    (call $reply))
  ;; state: init byte, writes, heap word at 100, stable size in pages.
  (func (export "canister_query state")
    (i32.store (i32.const 200) (global.get $init))
    (i32.store (i32.const 204) (global.get $writes))
    (i32.store (i32.const 208) (i32.load (i32.const 100)))
    (i32.store (i32.const 212) (i32.wrap_i64 (call $stable_size)))
    (call $append (i32.const 200) (i32.const 16))
    (call $reply)))
"#;

fn state(c: &mut Canister) -> [u32; 4] {
    let r = c.query("state", &[]).unwrap();
    let b = r.result.reply().unwrap().to_vec();
    std::array::from_fn(|i| u32::from_le_bytes(b[i * 4..i * 4 + 4].try_into().unwrap()))
}

#[test]
fn reinstall_wipes_heap_stable_memory_and_timer_and_runs_init() {
    let engine = engine();
    let p = program(&engine, STATEFUL);
    let settings = Settings {
        debug_print_enabled: false,
        controllers: vec![vec![7, 7]],
        cycles: 5_000,
        ..Settings::default()
    };
    let (mut c, _) = Canister::install(&engine, &p, &[1], settings).unwrap();
    c.update("write", &[]).unwrap();
    assert_eq!(state(&mut c), [1, 1, 0x12345678, 1]);
    assert_eq!(c.global_timer(), 99);
    c.set_memory_limits(0, 1 << 30);

    // A failed reinstall (init traps) keeps everything.
    let failed = c.reinstall(&engine, &p, &[255]).unwrap();
    assert!(failed.result.is_trap(), "{:?}", failed.result);
    assert_eq!(state(&mut c), [1, 1, 0x12345678, 1]);
    assert_eq!(c.global_timer(), 99);

    let done = c.reinstall(&engine, &p, &[2]).unwrap();
    assert_eq!(done.entry, "canister_init");
    assert_eq!(done.result, MessageResult::NoReply);
    // New init argument, writes and heap reset, stable memory empty, timer off.
    assert_eq!(state(&mut c), [2, 0, 0, 0]);
    assert_eq!(c.global_timer(), 0);
    assert!(c.stable_memory().is_empty());
    // Id, controllers, cycles and settings stay.
    assert_eq!(c.settings().controllers, vec![vec![7, 7]]);
    assert_eq!(c.cycles(), 5_000);
    assert_eq!(c.settings().memory_allocation, 1 << 30);
    c.update("write", &[]).unwrap();
    assert_eq!(state(&mut c), [2, 1, 0x12345678, 1]);
}

/// The reference canister under a memory allocation: what a write that needs more memory than
/// the allocation leaves gets. Its database lives in stable memory managed by
/// ic-stable-structures' `MemoryManager` (through ic-wasi-polyfill), which grows in buckets of
/// 128 pages and panics when `ic0.stable64_grow` answers -1 (`memory_manager.rs`), and SQLite's
/// page cache lives in the heap, whose growth beyond the allocation traps. So a write that does
/// not fit traps (and changes nothing) rather than failing with SQLite's `SQLITE_FULL`; it is
/// what the replica does with the same module. Raising the allocation lets the same write
/// commit.
mod reference_canister {
    use candid::{CandidType, Deserialize, Encode};
    use offline_engine::{Canister, Engine, EngineConfig, MessageResult, Settings};

    #[derive(CandidType, Deserialize, Debug)]
    #[allow(dead_code)]
    enum SqlParam {
        Null,
        Integer(i64),
        Real(f64),
        Text(String),
        Blob(Vec<u8>),
    }

    #[derive(CandidType, Deserialize, Debug)]
    struct SqlStatement {
        sql: String,
        params: Vec<SqlParam>,
    }

    #[derive(CandidType, Deserialize, Debug, PartialEq)]
    struct Counts {
        users: u64,
        orders: u64,
    }

    #[derive(CandidType, Deserialize, Debug, PartialEq)]
    enum CountsResult {
        Ok(Counts),
        Err(String),
    }

    fn users(c: &mut Canister) -> u64 {
        let r = c.query("counts", &Encode!().unwrap()).unwrap();
        match candid::decode_one::<CountsResult>(r.result.reply().unwrap()).unwrap() {
            CountsResult::Ok(counts) => counts.users,
            CountsResult::Err(e) => panic!("counts: {e}"),
        }
    }

    /// An `execute_sql` inserting `n` users of about 220 bytes each in one statement.
    fn insert_users(n: u32) -> Vec<u8> {
        let sql = format!(
            "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT {n}) \
             INSERT INTO users (username, email) SELECT 'u_' || x, printf('%0200d', x) FROM c"
        );
        Encode!(&vec![SqlStatement {
            sql,
            params: vec![]
        }])
        .unwrap()
    }

    fn fresh(engine: &Engine) -> Canister {
        let path = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../target/canister/bench_canister.wasm");
        let wasm = std::fs::read(&path)
            .unwrap_or_else(|e| panic!("{}: {e}; build it with scripts/build.sh", path.display()));
        let p = engine.load(&wasm).unwrap();
        let arg = Encode!(&Option::<()>::None).unwrap();
        Canister::install(engine, &p, &arg, Settings::default())
            .unwrap()
            .0
    }

    #[test]
    fn a_write_beyond_the_memory_allocation_traps_and_changes_nothing() {
        let engine = Engine::new(EngineConfig::default()).unwrap();
        // 40,000 users need a new 8 MiB bucket of stable memory; 12 MiB of room: the heap
        // grows first, then the bucket does not fit.
        let mut c = fresh(&engine);
        let usage = c.memory_usage();
        c.set_memory_limits(0, usage + (12 << 20));
        let e = c.update("execute_sql", &insert_users(40_000)).unwrap();
        match &e.result {
            MessageResult::Trap(m) => assert!(
                m.starts_with(
                    "Canister called `ic0.trap` with message: 'Panicked at 'MemoryId(120): grow failed'"
                ),
                "{m}"
            ),
            other => panic!("{other:?}"),
        }
        assert_eq!(users(&mut c), 0, "nothing committed");
        assert_eq!(c.memory_usage(), usage, "the message's growth is undone");
        // With room for the bucket, the same write commits.
        c.set_memory_limits(0, usage + (64 << 20));
        let e = c.update("execute_sql", &insert_users(40_000)).unwrap();
        assert!(
            matches!(e.result, MessageResult::Reply(_)),
            "{:?}",
            e.result
        );
        assert_eq!(users(&mut c), 40_000);

        // 9 MiB of room: the page cache in the heap hits the allocation first.
        let mut c = fresh(&engine);
        let usage = c.memory_usage();
        c.set_memory_limits(0, usage + (9 << 20));
        let e = c.update("execute_sql", &insert_users(40_000)).unwrap();
        assert_eq!(
            e.result,
            MessageResult::Trap("Canister cannot grow its memory usage.".into())
        );
        assert_eq!(users(&mut c), 0);
    }
}
