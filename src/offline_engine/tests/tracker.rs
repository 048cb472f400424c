//! The deterministic memory tracker (`METERING.md` §10): the replica's own tests of it run on
//! the engine, then one test per rule the engine implements.
//!
//! The replica's tests are those of `rs/embedders/tests/instrumentation.rs` and the module
//! `stable_api_charges` of `rs/embedders/tests/wasmtime_random_memory_writes.rs` in dfinity/ic at
//! commit 0441fbd7f97b339d7013b9eadc74f9340f56a541, the version that counts the tracker's
//! charges (pull request #9894 adapted them; #10789 made the tracker charge 5,000 instructions
//! per OS page): the same WAT, run as the same update, and the expected count built by the same
//! formula from the replica's parameters. The operator weights come from the engine's copy of
//! the replica's `instruction_to_cost` and the System API overheads from its copy of
//! `system_api_complexity.rs`, as the replica's test takes them from the originals.

mod common;
use common::*;
use offline_engine::instrument::operator_weight;
use offline_engine::metering::{ExecutionLimits, Metering, Tracker};
use offline_engine::system_api::complexity::{BYTE, overhead_native};
use offline_engine::{Canister, Execution, InstructionLimits, MessageResult, Settings, SubnetKind};
use wasmparser::{MemArg, Operator};

/// `SchedulerConfig::application_subnet().page_overhead` of the replica: 5,000 instructions per
/// OS page (pull request #10789).
const PAGE_OVERHEAD: u64 = 5_000;
/// `WASM_PAGE_SIZE_IN_BYTES / PAGE_SIZE` on the replica's Linux nodes.
const OS_PAGES_PER_WASM_PAGE: u64 = 65_536 / 4_096;
/// Instructions of one tracker event (first access or first write) of a Wasm page.
const EVENT: u64 = PAGE_OVERHEAD * OS_PAGES_PER_WASM_PAGE;

/// The replica test's `dmt_write_charged_os_pages`: a first write to a Wasm page triggers both
/// `mark_wasm_page_accessed` and `mark_wasm_page_dirty`, every OS page it covers charged twice.
fn dmt_write_charged_os_pages(n_heap_wasm_pages: u64, n_stable_wasm_pages: u64) -> u64 {
    n_heap_wasm_pages * 2 * OS_PAGES_PER_WASM_PAGE
        + n_stable_wasm_pages * 2 * OS_PAGES_PER_WASM_PAGE
}

fn cost(op: Operator<'static>, wasm64: bool) -> u64 {
    operator_weight(&op, wasm64)
}

fn memarg() -> MemArg {
    MemArg {
        align: 0,
        max_align: 0,
        offset: 0,
        memory: 0,
    }
}

fn limits(limit: u64) -> Settings {
    Settings {
        subnet: SubnetKind::Custom(InstructionLimits {
            update: limit,
            query: limit,
            install: limit,
            inspect: limit,
        }),
        debug_print_enabled: false,
        ..Settings::default()
    }
}

/// Installs `wat` on an engine metering by `metering`.
fn install_metered(metering: Metering, wat: &str, settings: Settings) -> (Canister, Execution) {
    let engine = engine_metering(metering);
    let p = program(&engine, wat);
    Canister::install(&engine, &p, &[], settings).expect("installs")
}

/// Runs update `test` of `wat` with an instruction limit of `limit`.
fn run_metered(metering: Metering, wat: &str, limit: u64) -> Execution {
    let (mut c, _) = install_metered(metering, wat, limits(limit));
    c.update("test", &[]).expect("engine ok")
}

fn dmt() -> Metering {
    Metering::IC_DMT
}

#[test]
fn the_profile_has_the_replica_parameters() {
    let t = dmt().tracker.expect("the tracker");
    assert_eq!(t.page_overhead, PAGE_OVERHEAD);
    assert_eq!(t.os_pages_per_wasm_page, OS_PAGES_PER_WASM_PAGE);
    assert_eq!(t.wasm_page_charge(false), EVENT);
}

// ---------------------------------------------------------------- the replica's tests

/// `run_charge_for_heap_pages` of the replica: two stores to Wasm page 0 and a load.
fn charge_for_heap_pages(wasm64: bool) {
    let (memory, address) = if wasm64 {
        (r#"(memory (export "memory") i64 10)"#, "i64.const")
    } else {
        (r#"(memory (export "memory") 10)"#, "i32.const")
    };
    let wat = format!(
        r#"
        (module
            (global $g1 (export "g1") (mut i64) (i64.const 0))
            (func $test (export "canister_update test")
                (i64.store ({address} 0) (i64.const 17))
                (i64.store ({address} 4096) (i64.const 117))
                (i64.load ({address} 0))
                global.set $g1
            )
            {memory}
        )"#
    );
    let e = run_metered(dmt(), &wat, 1_000_000);
    assert!(!e.result.is_trap(), "{:?}", e.result);
    let cc = cost(Operator::I64Const { value: 1 }, wasm64);
    let cg = cost(Operator::GlobalSet { global_index: 0 }, wasm64);
    let cs = cost(Operator::I64Store { memarg: memarg() }, wasm64);
    let cl = cost(Operator::I64Load { memarg: memarg() }, wasm64);
    let cd = PAGE_OVERHEAD;
    // Both stores target Wasm page 0, so only one heap page-first-write event occurs.
    let dmt_pages = dmt_write_charged_os_pages(1, 0);
    assert_eq!(
        e.instructions,
        1 + 5 * cc + cg + 2 * cs + cl + dmt_pages * cd
    );
    // Charged during the message: nothing is billed after it.
    assert_eq!(e.billed_instructions, e.instructions);
    assert_eq!(e.pages.heap.accessed, vec![0]);
    assert_eq!(e.pages.heap.dirty, vec![0]);
    assert_eq!(e.pages.heap.written, vec![0, 1]);
    assert_eq!(e.pages.instructions, dmt_pages * cd);
    // "Now run the same with insufficient instructions. We should still succeed": the tracker
    // charges without checking the counter, and no check follows.
    let e = run_metered(dmt(), &wat, 100);
    assert!(!e.result.is_trap(), "{:?}", e.result);
    assert_eq!(
        e.instructions,
        1 + 5 * cc + cg + 2 * cs + cl + dmt_pages * cd
    );
}

#[test]
fn replica_charge_for_heap_pages() {
    charge_for_heap_pages(false);
}

#[test]
fn replica_charge_for_heap_pages_wasm64() {
    charge_for_heap_pages(true);
}

/// `run_charge_for_stable64_pages_test` and `run_charge_for_stable_pages_test` of the replica.
fn charge_for_stable_pages(api64: bool) {
    let (p, t, grow, read, write, store, load) = if api64 {
        (
            "64",
            "i64",
            "stable64_grow",
            "stable64_read",
            "stable64_write",
            "i64.store",
            "i64.load",
        )
    } else {
        (
            "",
            "i32",
            "stable_grow",
            "stable_read",
            "stable_write",
            "i32.store",
            "i32.load",
        )
    };
    let wat = format!(
        r#"
        (module
            (import "ic0" "{grow}"
                (func $ic0_stable{p}_grow (param $pages {t}) (result {t})))
            (import "ic0" "{read}"
                (func $ic0_stable{p}_read (param $dst {t}) (param $offset {t}) (param $size {t})))
            (import "ic0" "{write}"
                (func $ic0_stable{p}_write (param $offset {t}) (param $src {t}) (param $size {t})))
            (global $g1 (export "g1") (mut {t}) ({t}.const 0))
            (func $test (export "canister_update test")
                (drop (call $ic0_stable{p}_grow ({t}.const 1)))
                ({store} (i32.const 0) ({t}.const 117))
                ({store} (i32.const 1) ({t}.const 17))
                (call $ic0_stable{p}_write ({t}.const 0) ({t}.const 0) ({t}.const 1))
                (call $ic0_stable{p}_write ({t}.const 4096) ({t}.const 1) ({t}.const 1))
                (call $ic0_stable{p}_read ({t}.const 7) ({t}.const 4096) ({t}.const 1))
                ({load} (i32.const 7))
                global.set $g1
            )
            (memory (export "memory") 10)
        )"#
    );
    let e = run_metered(dmt(), &wat, 10_000_000);
    assert!(!e.result.is_trap(), "{:?}", e.result);
    let (cc, cs, cl) = if api64 {
        (
            cost(Operator::I64Const { value: 1 }, false),
            cost(Operator::I64Store { memarg: memarg() }, false),
            cost(Operator::I64Load { memarg: memarg() }, false),
        )
    } else {
        (
            cost(Operator::I32Const { value: 1 }, false),
            cost(Operator::I32Store { memarg: memarg() }, false),
            cost(Operator::I32Load { memarg: memarg() }, false),
        )
    };
    let cg = cost(Operator::GlobalSet { global_index: 0 }, false);
    let ccall = cost(Operator::Call { function_index: 0 }, false);
    let cdrop = cost(Operator::Drop, false);
    let cd = PAGE_OVERHEAD;
    let csg = overhead_native::STABLE_GROW;
    let (write_fixed, read_fixed) = if api64 {
        (
            overhead_native::STABLE64_WRITE,
            overhead_native::STABLE64_READ,
        )
    } else {
        (overhead_native::STABLE_WRITE, overhead_native::STABLE_READ)
    };
    let csw = write_fixed + BYTE;
    let csr = read_fixed + BYTE;
    // Both stores hit heap Wasm page 0; the first stable write hits stable Wasm page 0 (bytes 0
    // and 4096 are both within the 64 KiB page).
    let dmt_pages = dmt_write_charged_os_pages(1, 1);
    // One heap and one stable Wasm page, each accessed and dirtied.
    assert_eq!(
        e.instructions,
        1 + cdrop + ccall * 4 + csg + cc * 15 + cs * 2 + csw * 2 + csr + cl + cg + dmt_pages * cd
    );
    assert_eq!(e.pages.heap.accessed, vec![0]);
    assert_eq!(e.pages.stable.accessed, vec![0]);
    assert_eq!(e.pages.stable.dirty, vec![0]);
    assert_eq!(e.pages.stable.written, vec![0, 1]);
}

#[test]
fn replica_charge_for_stable64_pages_native() {
    charge_for_stable_pages(true);
}

#[test]
fn replica_charge_for_stable_pages_native() {
    charge_for_stable_pages(false);
}

/// `metering_wasm64_load_store_canister` of the replica: a page overhead of 1,000, and the
/// page charges the same in wasm64 as in wasm32.
#[test]
fn replica_metering_wasm64_load_store_canister() {
    let page_overhead = 1_000;
    let mut tracker: Tracker = dmt().tracker.expect("the tracker");
    tracker.page_overhead = page_overhead;
    let metering = Metering {
        tracker: Some(tracker),
        ..dmt()
    };
    let total = |wasm64: bool| {
        let c = |value| cost(Operator::I64Const { value }, wasm64);
        let store = cost(Operator::I64Store { memarg: memarg() }, wasm64);
        let load = cost(Operator::I64Load { memarg: memarg() }, wasm64);
        let drop = cost(Operator::Drop, wasm64);
        // Both stores hit Wasm page 0, so only one heap page-first-write event occurs.
        let dmt_pages = dmt_write_charged_os_pages(1, 0);
        1 + 2 * c(0)
            + c(17)
            + c(117)
            + c(4096)
            + 2 * store
            + load
            + drop
            + dmt_pages * page_overhead
    };
    let wat = |address: &str, memory: &str| {
        format!(
            r#"
        (module
            (func $test (export "canister_update test")
                (i64.store ({address} 0) (i64.const 17))
                (i64.store ({address} 4096) (i64.const 117))
                (i64.load ({address} 0))
                (drop)
            )
            (memory {memory})
        )"#
        )
    };
    let wasm64 = run_metered(metering, &wat("i64.const", "i64 1000"), 1_000_000);
    assert_eq!(wasm64.instructions, total(true));
    let wasm32 = run_metered(metering, &wat("i32.const", "1000"), 1_000_000);
    assert_eq!(wasm32.instructions, total(false));
    // The cost in wasm64 mode is higher than in wasm32 mode.
    assert!(wasm64.instructions > wasm32.instructions);
}

/// The stable-memory System API module of the replica's `wasmtime_random_memory_writes.rs`
/// (`make_module_wat(2 * TEST_NUM_PAGES)`, TEST_NUM_PAGES = 800), its stable functions: each
/// grows stable memory by one page and makes one `stable_read` or `stable_write` of
/// `STABLE_OP_BYTES` (37) between heap address 0 and stable offset 0. As in the replica's module,
/// the export `test_stable64_read_nonzero` runs the 32-bit read; the 64-bit one is exported here
/// as well, under a name of the engine's test.
fn stable_api_module() -> String {
    let heap_size = 2 * 800;
    format!(
        r#"
    (module
      (import "ic0" "stable_grow" (func $ic0_stable_grow (param $pages i32) (result i32)))
      (import "ic0" "stable_read"
        (func $ic0_stable_read (param $dst i32) (param $offset i32) (param $size i32)))
      (import "ic0" "stable64_read"
        (func $ic0_stable64_read (param $dst i64) (param $offset i64) (param $size i64)))
      (import "ic0" "stable_write"
        (func $ic0_stable_write (param $offset i32) (param $src i32) (param $size i32)))
      (import "ic0" "stable64_write"
        (func $ic0_stable64_write (param $offset i64) (param $src i64) (param $size i64)))
      (func $test_stable_read
        (drop (call $ic0_stable_grow (i32.const 1)))
        (call $ic0_stable_read (i32.const 0) (i32.const 0) (i32.const 0)))
      (func $test_stable_read_nonzero
        (drop (call $ic0_stable_grow (i32.const 1)))
        (call $ic0_stable_read (i32.const 0) (i32.const 0) (i32.const {STABLE_OP_BYTES})))
      (func $test_stable64_read_nonzero
        (drop (call $ic0_stable_grow (i32.const 1)))
        (call $ic0_stable64_read (i64.const 0) (i64.const 0) (i64.const {STABLE_OP_BYTES})))
      (func $test_stable_write_nonzero
        (drop (call $ic0_stable_grow (i32.const 1)))
        (call $ic0_stable_write (i32.const 0) (i32.const 0) (i32.const {STABLE_OP_BYTES})))
      (func $test_stable64_write_nonzero
        (drop (call $ic0_stable_grow (i32.const 1)))
        (call $ic0_stable64_write (i64.const 0) (i64.const 0) (i64.const {STABLE_OP_BYTES})))
      (memory $memory {heap_size})
      (export "memory" (memory $memory))
      (export "canister_update test_stable_read" (func $test_stable_read))
      (export "canister_update test_stable_read_nonzero" (func $test_stable_read_nonzero))
      (export "canister_update test_stable64_read_nonzero" (func $test_stable_read_nonzero))
      (export "canister_update engine_stable64_read_nonzero" (func $test_stable64_read_nonzero))
      (export "canister_update test_stable_write_nonzero" (func $test_stable_write_nonzero))
      (export "canister_update test_stable64_write_nonzero" (func $test_stable64_write_nonzero))
    )"#
    )
}

/// `STABLE_OP_BYTES` of the replica's test.
const STABLE_OP_BYTES: u64 = 37;

/// The instructions of update `method` of [`stable_api_module`] on a fresh canister under the
/// tracker, with the replica test's limit of 1,000,000,000.
fn stable_api_instructions(method: &str) -> Execution {
    let (mut c, _) = install_metered(dmt(), &stable_api_module(), limits(1_000_000_000));
    let e = c.update(method, &[]).expect("engine ok");
    assert!(!e.result.is_trap(), "{method}: {:?}", e.result);
    e
}

/// The replica test's `setup_instruction_overhead`: `(drop (call $ic0_stable_grow (i32.const
/// 1)))` and the call of the stable read or write with its three constants, in a function of 1.
fn stable_api_setup() -> u64 {
    cost(Operator::Drop, false)
        + cost(Operator::Call { function_index: 0 }, false)
        + overhead_native::STABLE_GROW
        + cost(Operator::I32Const { value: 1 }, false)
        + cost(Operator::Call { function_index: 0 }, false)
        + 3 * cost(Operator::I32Const { value: 1 }, false)
        + 1
}

/// `stable_api_charges::empty_stable_read_charge`: an empty read costs its overhead alone, no
/// page charged.
#[test]
fn replica_empty_stable_read_charge() {
    let e = stable_api_instructions("test_stable_read");
    assert_eq!(
        e.instructions,
        stable_api_setup() + overhead_native::STABLE_READ
    );
    assert!(e.pages.heap.accessed.is_empty() && e.pages.stable.accessed.is_empty());
}

/// `nonempty_stable_read_charge` and `nonempty_stable64_read_charge` (which runs the same
/// 32-bit read, by the module's export): a byte each, and the destination heap page accessed
/// and dirtied; reading stable memory through the System API charges no stable page.
#[test]
fn replica_nonempty_stable_read_charge() {
    for (method, fixed) in [
        ("test_stable_read_nonzero", overhead_native::STABLE_READ),
        ("test_stable64_read_nonzero", overhead_native::STABLE64_READ),
    ] {
        let e = stable_api_instructions(method);
        assert_eq!(
            e.instructions,
            stable_api_setup() + fixed + STABLE_OP_BYTES * BYTE + EVENT + EVENT,
            "{method}"
        );
        assert_eq!(e.pages.heap.accessed, vec![0], "{method}");
        assert_eq!(e.pages.heap.dirty, vec![0], "{method}");
        assert!(e.pages.stable.accessed.is_empty(), "{method}");
    }
    // The 64-bit read itself, which the replica's module does not export: the same charge.
    let e = stable_api_instructions("engine_stable64_read_nonzero");
    assert_eq!(
        e.instructions,
        stable_api_setup() + overhead_native::STABLE64_READ + STABLE_OP_BYTES * BYTE + 2 * EVENT
    );
}

/// `nonempty_stable_write_charge` and `nonempty_stable64_write_charge`: a byte each, the stable
/// page's first write (accessed and dirtied) and the source heap page's access: three events.
#[test]
fn replica_nonempty_stable_write_charge() {
    for (method, fixed) in [
        ("test_stable_write_nonzero", overhead_native::STABLE_WRITE),
        (
            "test_stable64_write_nonzero",
            overhead_native::STABLE64_WRITE,
        ),
    ] {
        let e = stable_api_instructions(method);
        assert_eq!(
            e.instructions,
            stable_api_setup() + fixed + STABLE_OP_BYTES * BYTE + 3 * EVENT,
            "{method}"
        );
        assert_eq!(e.pages.heap.accessed, vec![0], "{method}");
        assert!(e.pages.heap.dirty.is_empty(), "{method}");
        assert_eq!(e.pages.stable.accessed, vec![0], "{method}");
        assert_eq!(e.pages.stable.dirty, vec![0], "{method}");
    }
}

// ---------------------------------------------------------------- the engine's rules

/// A module with a heap of four Wasm pages, imports `imports`, and `body` in update `test`.
fn module(imports: &str, body: &str) -> String {
    format!(
        r#"(module
             {imports}
             (memory 4)
             (func (export "canister_update test") {body}))"#
    )
}

/// The instructions of update `test` of `wat` under the rules of PocketIC 13 and under the
/// tracker, with their page uses.
fn both(wat: &str) -> (Execution, Execution) {
    let old = run_metered(Metering::POCKET_IC_13, wat, 1_000_000_000);
    let new = run_metered(dmt(), wat, 1_000_000_000);
    (old, new)
}

#[test]
fn reads_are_charged_once_per_wasm_page_and_writes_once_more() {
    // Page 0 read twice, page 1 read then written, page 2 written, page 3 untouched.
    let body = "(drop (i32.load (i32.const 8))) (drop (i32.load8_u (i32.const 60000)))
                (drop (i32.load (i32.const 65536))) (i32.store (i32.const 70000) (i32.const 1))
                (i64.store (i32.const 131072) (i64.const 2))";
    let (old, new) = both(&module("", body));
    // Events: page 0 access, page 1 access + write, page 2 access + write.
    assert_eq!(new.instructions, old.instructions + 5 * EVENT);
    assert_eq!(new.pages.heap.accessed, vec![0, 1, 2]);
    assert_eq!(new.pages.heap.dirty, vec![1, 2]);
    assert_eq!(new.pages.instructions, 5 * EVENT);
    // The old rules: reads free, the two changed 4 KiB pages billed after the message.
    assert_eq!(old.pages.heap.accessed, Vec::<u64>::new());
    assert_eq!(old.pages.heap.written, vec![17, 32]);
    assert_eq!(old.billed_instructions, old.instructions + 2 * 1_000);
    assert_eq!(new.pages.heap.written, old.pages.heap.written);
    assert_eq!(new.billed_instructions, new.instructions);
}

#[test]
fn an_access_across_a_wasm_page_boundary_touches_both_pages() {
    let (old, new) = both(&module("", "(drop (i64.load offset=65530 (i32.const 0)))"));
    assert_eq!(new.instructions, old.instructions + 2 * EVENT);
    assert_eq!(new.pages.heap.accessed, vec![0, 1]);
    let (old, new) = both(&module(
        "",
        "(i32.store16 (i32.const 131071) (i32.const 7)) (i32.store8 (i32.const 131071) (i32.const 7))",
    ));
    assert_eq!(new.instructions, old.instructions + 4 * EVENT);
    assert_eq!(new.pages.heap.dirty, vec![1, 2]);
}

#[test]
fn simd_lane_loads_and_stores_are_tracked() {
    let body = "(drop (v128.load8_lane 3 (i32.const 65536) (v128.const i64x2 0 0)))
                (v128.store64_lane 1 (i32.const 131070) (v128.const i64x2 1 2))";
    let (old, new) = both(&module("", body));
    // Page 1 read; the 8 bytes at 131070 write pages 1 (already read: its write) and 2.
    assert_eq!(new.instructions, old.instructions + 4 * EVENT);
    assert_eq!(new.pages.heap.accessed, vec![1, 2]);
    assert_eq!(new.pages.heap.dirty, vec![1, 2]);
}

/// The instrumentation skips the check of an access that an earlier check of the same address
/// local covers on every path (`redundant_checks` in `src/instrument/pages.rs`). Each case here
/// is one where a check must not be skipped, and one where it may: the pages charged must be
/// those the rules give either way.
#[test]
fn skipped_checks_never_skip_a_page() {
    let page = 65_536;
    let cases: [(&str, String, &[u64], &[u64]); 6] = [
        // Checks of $p no more than a Wasm page apart cover the bytes between them; two further
        // apart do not: the untouched middle page is charged.
        (
            "hull",
            format!(
                "(local.set $p (i32.const 1000))
                 (drop (i32.load (local.get $p)))
                 (drop (i32.load offset=4000 (local.get $p)))
                 (drop (i32.load offset={} (local.get $p)))
                 (drop (i32.load offset={} (local.get $p)))",
                2 * page,
                page + 50
            ),
            &[0, 1, 2],
            &[],
        ),
        // $p assigned between two accesses at the same offset.
        (
            "assigned",
            format!(
                "(local.set $p (i32.const 8))
                 (i32.store (local.get $p) (i32.const 1))
                 (local.set $p (i32.const {}))
                 (i32.store (local.get $p) (i32.const 1))",
                3 * page
            ),
            &[0, 3],
            &[0, 3],
        ),
        // The `then` arm's check does not cover the `else` arm.
        (
            "if-else",
            format!(
                "(local.set $p (i32.const {}))
                 (if (i32.eqz (local.get $q))
                   (then (drop (i32.load (local.get $p))))
                   (else (drop (i32.load (local.get $p)))))
                 (drop (i32.load (local.get $p)))",
                page
            ),
            &[1],
            &[],
        ),
        // A branch out of the block before the check: after the block, the page is not known.
        (
            "br_if",
            format!(
                "(local.set $p (i32.const {}))
                 (block $b
                   (br_if $b (i32.eqz (local.get $q)))
                   (i32.store (local.get $p) (i32.const 1)))
                 (i32.store (local.get $p) (i32.const 1))",
                2 * page
            ),
            &[2],
            &[2],
        ),
        // $p moves by a page each iteration: every iteration's page is charged.
        (
            "loop",
            format!(
                "(local.set $p (i32.const 16))
                 (loop $l
                   (i32.store offset=4 (local.get $p) (i32.const 1))
                   (local.set $p (i32.add (local.get $p) (i32.const {page})))
                   (br_if $l (i32.lt_u (local.get $p) (i32.const {}))))",
                4 * page
            ),
            &[0, 1, 2, 3],
            &[0, 1, 2, 3],
        ),
        // A read's check does not cover a write; a write's covers a read.
        (
            "need",
            format!(
                "(local.set $p (i32.const {}))
                 (drop (i32.load (local.get $p)))
                 (i32.store (local.get $p) (i32.const 1))
                 (drop (i32.load offset=2 (local.get $p)))",
                page + 10
            ),
            &[1],
            &[1],
        ),
    ];
    for (name, body, accessed, dirty) in cases {
        for q in [0, 1] {
            let wat = format!(
                r#"(module
                     (import "ic0" "msg_arg_data_size" (func $size (result i32)))
                     (memory 5)
                     (func (export "canister_update test") (local $p i32) (local $q i32)
                       (local.set $q (call $size))
                       {body}))"#
            );
            let run = |metering: Metering| {
                let (mut c, _) = install_metered(metering, &wat, limits(1_000_000_000));
                c.update("test", &vec![0; q]).unwrap()
            };
            let (old, new) = (run(Metering::POCKET_IC_13), run(dmt()));
            // The paths that skip an access: the `then` arm (q = 0) reads $p once, the `else`
            // arm once; the branch out (q = 0) skips the first store.
            assert!(!new.result.is_trap(), "{name} q={q}: {:?}", new.result);
            assert_eq!(new.pages.heap.accessed, accessed, "{name} q={q}");
            assert_eq!(new.pages.heap.dirty, dirty, "{name} q={q}");
            let events = (accessed.len() + dirty.len()) as u64;
            assert_eq!(
                new.instructions,
                old.instructions + events * EVENT,
                "{name} q={q}"
            );
        }
    }
}

#[test]
fn bulk_operations_touch_their_ranges() {
    // fill: pages 0-2 written; copy: page 3 read, page 0 (written already) nothing more.
    let body = "(memory.fill (i32.const 100) (i32.const 1) (i32.const 140000))
                (memory.copy (i32.const 0) (i32.const 200000) (i32.const 10))
                (memory.fill (i32.const 0) (i32.const 1) (i32.const 0))";
    let (old, new) = both(&module("", body));
    assert_eq!(new.instructions, old.instructions + 7 * EVENT);
    assert_eq!(new.pages.heap.accessed, vec![0, 1, 2, 3]);
    assert_eq!(new.pages.heap.dirty, vec![0, 1, 2]);
}

#[test]
fn an_access_that_traps_for_its_bounds_charges_nothing() {
    // A copy whose destination lies beyond the heap reads nothing either.
    for body in [
        "(drop (i64.load (i32.const 262140)))",
        "(memory.fill (i32.const 200000) (i32.const 1) (i32.const 70000))",
        "(memory.copy (i32.const 262000) (i32.const 0) (i32.const 1000))",
    ] {
        let (old, new) = both(&module("", body));
        assert!(new.result.is_trap(), "{body}");
        assert_eq!(new.instructions, old.instructions, "{body}");
        assert_eq!(new.pages.heap.accessed, Vec::<u64>::new(), "{body}");
    }
}

#[test]
fn system_api_reads_and_writes_of_the_heap_are_charged() {
    let imports = r#"(import "ic0" "msg_arg_data_copy" (func $copy (param i32 i32 i32)))
                     (import "ic0" "msg_reply_data_append" (func $append (param i32 i32)))
                     (import "ic0" "msg_reply" (func $reply))"#;
    // Copies the 3-byte argument into page 1 and replies 8 bytes read from page 2.
    let wat = module(
        imports,
        "(call $copy (i32.const 65536) (i32.const 0) (i32.const 3))
         (call $append (i32.const 131072) (i32.const 8)) (call $reply)",
    );
    let run = |metering: Metering| {
        let (mut c, _) = install_metered(metering, &wat, limits(1_000_000_000));
        c.update("test", b"abc").unwrap()
    };
    let (old, new) = (run(Metering::POCKET_IC_13), run(dmt()));
    assert_eq!(new.instructions, old.instructions + 3 * EVENT);
    assert_eq!(new.pages.heap.accessed, vec![1, 2]);
    assert_eq!(new.pages.heap.dirty, vec![1]);
}

#[test]
fn queries_pay_one_access_per_page_and_composite_queries_track_writes() {
    let wat = |kind: &str| {
        format!(
            r#"(module
                 (import "ic0" "msg_reply" (func $reply))
                 (memory 2)
                 (func (export "{kind} q")
                   (i32.store (i32.const 0) (i32.const 1))
                   (drop (i32.load (i32.const 65536)))
                   (i32.store (i32.const 65536) (i32.const 1))
                   (call $reply)))"#
        )
    };
    let run = |metering: Metering, kind: &str| {
        let (mut c, _) = install_metered(metering, &wat(kind), limits(1_000_000_000));
        c.query("q", &[]).unwrap()
    };
    let old = run(Metering::POCKET_IC_13, "canister_query");
    let new = run(dmt(), "canister_query");
    // A query ignores modifications: page 0 and page 1 once each.
    assert_eq!(new.instructions, old.instructions + 2 * EVENT);
    assert_eq!(new.pages.heap.accessed, vec![0, 1]);
    assert_eq!(new.pages.heap.dirty, Vec::<u64>::new());
    let old = run(Metering::POCKET_IC_13, "canister_composite_query");
    let new = run(dmt(), "canister_composite_query");
    // A composite query tracks them: page 0 access + write, page 1 access, then write.
    assert_eq!(new.instructions, old.instructions + 4 * EVENT);
    assert_eq!(new.pages.heap.dirty, vec![0, 1]);
}

#[test]
fn performance_counter_sees_the_charge_when_it_lands() {
    let wat = r#"(module
        (import "ic0" "performance_counter" (func $pc (param i32) (result i64)))
        (import "ic0" "msg_reply_data_append" (func $append (param i32 i32)))
        (import "ic0" "msg_reply" (func $reply))
        (memory 2)
        (func (export "canister_update test") (local $before i64)
          (local.set $before (call $pc (i32.const 0)))
          (i32.store (i32.const 65536) (i32.const 1))
          (i64.store (i32.const 0) (i64.sub (call $pc (i32.const 0)) (local.get $before)))
          (call $append (i32.const 0) (i32.const 8))
          (call $reply)))"#;
    let counter_delta = |metering: Metering| {
        let e = run_metered(metering, wat, 1_000_000_000);
        u64::from_le_bytes(e.result.reply().unwrap().try_into().unwrap())
    };
    // Between the two counters: the store's page (access + write) and the first page, which
    // the answer is stored into after the second counter was read.
    assert_eq!(
        counter_delta(dmt()),
        counter_delta(Metering::POCKET_IC_13) + 2 * EVENT
    );
}

#[test]
fn a_page_charge_can_make_a_message_run_out_of_instructions() {
    // A store to a fresh page, then a loop of 10 iterations: the loop header's check traps
    // once the page charge has taken the counter below zero.
    let wat = module(
        "",
        "(local $i i32) (i32.store (i32.const 0) (i32.const 1))
         (loop $l (br_if $l (i32.lt_u (local.tee $i (i32.add (local.get $i) (i32.const 1)))
                                      (i32.const 10))))",
    );
    // A limit below the page charge: the old rules run the message in a few hundred
    // instructions; with the tracker the entry check passes, the store's charge takes the
    // counter below zero, and the loop header traps.
    let limit = 2 * EVENT - 1;
    let old = run_metered(Metering::POCKET_IC_13, &wat, limit);
    assert!(!old.result.is_trap(), "{:?}", old.result);
    let new = run_metered(dmt(), &wat, limit);
    assert_eq!(
        new.result,
        MessageResult::Trap(format!(
            "Canister exceeded the limit of {limit} instructions for single message execution."
        ))
    );
    assert_eq!(new.instructions, limit);
    let enough = run_metered(dmt(), &wat, old.instructions + 2 * EVENT);
    assert!(!enough.result.is_trap(), "{:?}", enough.result);
    assert_eq!(enough.instructions, old.instructions + 2 * EVENT);
}

#[test]
fn a_trapped_message_pays_the_pages_it_touched() {
    let (old, new) = both(&module(
        "",
        "(i32.store (i32.const 0) (i32.const 1)) unreachable",
    ));
    assert!(new.result.is_trap());
    assert_eq!(new.instructions, old.instructions + 2 * EVENT);
    assert_eq!(new.pages.heap.dirty, vec![0]);
    assert_eq!(new.pages.heap.written, Vec::<u64>::new());
}

#[test]
fn every_entry_point_of_an_install_is_tracked_afresh() {
    let wat = r#"(module
        (memory 1)
        (func $start (i32.store (i32.const 0) (i32.const 1)))
        (start $start)
        (func (export "canister_init") (i32.store (i32.const 4) (i32.const 1))))"#;
    let (_, old) = install_metered(Metering::POCKET_IC_13, wat, limits(1_000_000_000));
    let (_, new) = install_metered(dmt(), wat, limits(1_000_000_000));
    // canister_start and canister_init each write page 0 with a fresh tracker.
    assert_eq!(new.instructions, old.instructions + 4 * EVENT);
    assert_eq!(new.pages.heap.accessed, vec![0, 0]);
}

#[test]
fn stable_memory_accesses_are_limited_per_os_page() {
    let mut tracker = dmt().tracker.expect("the tracker");
    tracker.stable_accessed_limit = ExecutionLimits {
        message: 16,
        upgrade: 16,
        query: 16,
    };
    let metering = Metering {
        tracker: Some(tracker),
        ..dmt()
    };
    let wat = |len: u32| {
        module(
            r#"(import "ic0" "stable_grow" (func $grow (param i32) (result i32)))
               (import "ic0" "stable_read" (func $read (param i32 i32 i32)))"#,
            &format!(
                "(drop (call $grow (i32.const 2))) (call $read (i32.const 0) (i32.const 100) (i32.const {len}))"
            ),
        )
    };
    // 16 OS pages: bytes 100 .. 100 + 65436.
    let ok = run_metered(metering, &wat(65_436), 1_000_000_000);
    assert!(!ok.result.is_trap(), "{:?}", ok.result);
    // A first read: served by the host, no stable page charged (yet counted for the limit).
    assert_eq!(ok.pages.stable.accessed, Vec::<u64>::new());
    let over = run_metered(metering, &wat(65_437), 1_000_000_000);
    assert_eq!(
        over.result,
        MessageResult::Trap(
            "Canister exceeded memory access limits: Exceeded the limit for the number of \
             accessed pages in the stable memory in a single execution: limit 64 KB"
                .into()
        )
    );
    // The read that would pass the limit touched nothing.
    assert_eq!(over.pages.stable.accessed, Vec::<u64>::new());
}

/// The replica's `stable_read` replacement serves a read none of whose 4 KiB pages the
/// execution has accessed through the host, from the page map: the tracker charges the heap's
/// destination only. A read that reaches a page already accessed (read or written) copies from
/// the mapped stable memory, and its Wasm pages are charged as any access.
#[test]
fn a_first_read_of_stable_pages_charges_the_heap_only() {
    let wat = |body: &str| {
        module(
            r#"(import "ic0" "stable_grow" (func $grow (param i32) (result i32)))
               (import "ic0" "stable_read" (func $read (param i32 i32 i32)))
               (import "ic0" "stable_write" (func $write (param i32 i32 i32)))"#,
            &format!("(drop (call $grow (i32.const 4))) {body}"),
        )
    };
    let run = |body: &str| {
        let e = run_metered(dmt(), &wat(body), 1_000_000_000);
        assert!(!e.result.is_trap(), "{body}: {:?}", e.result);
        e
    };
    // Two first reads of different 4 KiB pages of stable Wasm page 1: no stable page charged;
    // heap page 0 accessed and written.
    let e = run(
        "(call $read (i32.const 0) (i32.const 65536) (i32.const 8)) \
                 (call $read (i32.const 8) (i32.const 69632) (i32.const 8))",
    );
    assert_eq!(e.pages.stable.accessed, Vec::<u64>::new());
    assert_eq!(e.pages.heap.dirty, vec![0]);
    assert_eq!(e.pages.instructions, 2 * EVENT);
    // Reading a page again goes through the mapped memory: one access of stable Wasm page 1.
    let e = run(
        "(call $read (i32.const 0) (i32.const 65536) (i32.const 8)) \
                 (call $read (i32.const 8) (i32.const 65540) (i32.const 8))",
    );
    assert_eq!(e.pages.stable.accessed, vec![1]);
    assert_eq!(e.pages.stable.dirty, Vec::<u64>::new());
    assert_eq!(e.pages.instructions, 3 * EVENT);
    // A read that spans a page accessed before and a fresh one is not a first read either.
    let e = run("(call $read (i32.const 0) (i32.const 4090) (i32.const 4)) \
                 (call $read (i32.const 8) (i32.const 4092) (i32.const 8))");
    assert_eq!(e.pages.stable.accessed, vec![0]);
    // A write after a first read of its page: the tracker's first access and first write.
    let e = run(
        "(call $read (i32.const 0) (i32.const 131072) (i32.const 8)) \
                 (call $write (i32.const 131072) (i32.const 0) (i32.const 8))",
    );
    assert_eq!(e.pages.stable.accessed, vec![2]);
    assert_eq!(e.pages.stable.dirty, vec![2]);
    assert_eq!(e.pages.instructions, 4 * EVENT);
    // A read after a write of its page: the page is mapped, nothing more.
    let e = run(
        "(call $write (i32.const 196608) (i32.const 0) (i32.const 8)) \
                 (call $read (i32.const 64) (i32.const 196608) (i32.const 8))",
    );
    assert_eq!(e.pages.stable.accessed, vec![3]);
    assert_eq!(e.pages.instructions, 2 * EVENT + 2 * EVENT);
}
