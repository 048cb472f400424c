//! Heap dirty pages from the written-page map against two oracles: a model of the heap kept by
//! the test (the pages whose bytes a message changed), and the engine's own comparison of the
//! whole heap with its shadow (`Canister::set_dirty_page_check`, which also requires the heap to
//! equal the shadow after every commit and rollback). Randomized stores of every width, bulk
//! operations, growth, System API writes, traps, queries and upgrades, in wasm32 and wasm64;
//! then the project's canister. Both metering profiles: with the memory tracker the pages to
//! compare come from its map instead of the written-page map.

mod common;
use common::*;
use offline_engine::{Canister, MessageResult, Metering, Settings};

/// An interpreter of 16-byte ops `[op, x, y, z]` (u32 little-endian) read from the argument,
/// which `canister_update run` / `canister_query run` first copy to address 0.
const INTERPRETER: &str = r#"
(module
  (import "ic0" "msg_arg_data_size" (func $arg_size (result ADDR)))
  (import "ic0" "msg_arg_data_copy" (func $arg_copy (param ADDR ADDR ADDR)))
  (import "ic0" "msg_reply" (func $reply))
  (import "ic0" "msg_reply_data_append" (func $append (param ADDR ADDR)))
  (import "ic0" "stable64_grow" (func $sgrow (param i64) (result i64)))
  (import "ic0" "stable64_read" (func $sread (param i64 i64 i64)))
  (import "ic0" "stable64_write" (func $swrite (param i64 i64 i64)))
  (memory MEMTYPE 1)
  (data (ADDR.const 0x8000) "the initial image")
  (data $seg "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ+/")
  (func $a (param i32) (result ADDR) (local.get 0) EXTEND)
  (func $u (param ADDR) (result i32) (local.get 0) WRAP)
  (func $field (param $i i32) (param $k i32) (result i32)
    (i32.load (call $a (i32.add (i32.mul (local.get $i) (i32.const 16))
                                (i32.mul (local.get $k) (i32.const 4))))))
  (func $wide (param $y i32) (param $z i32) (result i64)
    (i64.or (i64.extend_i32_u (local.get $y))
            (i64.shl (i64.extend_i32_u (local.get $z)) (i64.const 32))))
  (func $run (local $i i32) (local $n i32) (local $op i32) (local $x i32) (local $y i32) (local $z i32)
    (call $arg_copy (ADDR.const 0) (ADDR.const 0) (call $arg_size))
    (local.set $n (i32.div_u (call $u (call $arg_size)) (i32.const 16)))
    (block $done
      (loop $next
        (br_if $done (i32.ge_u (local.get $i) (local.get $n)))
        (local.set $op (call $field (local.get $i) (i32.const 0)))
        (local.set $x (call $field (local.get $i) (i32.const 1)))
        (local.set $y (call $field (local.get $i) (i32.const 2)))
        (local.set $z (call $field (local.get $i) (i32.const 3)))
        (block $cont
         (block $b16 (block $b15 (block $b14 (block $b13 (block $b12 (block $b11 (block $b10
         (block $b9 (block $b8 (block $b7 (block $b6 (block $b5 (block $b4 (block $b3 (block $b2
         (block $b1 (block $b0
           (br_table $b0 $b1 $b2 $b3 $b4 $b5 $b6 $b7 $b8 $b9 $b10 $b11 $b12 $b13 $b14 $b15 $b16
                     $cont (local.get $op)))
          (i32.store8 (call $a (local.get $x)) (local.get $y)) (br $cont))
         (i32.store16 (call $a (local.get $x)) (local.get $y)) (br $cont))
         (i64.store (call $a (local.get $x)) (call $wide (local.get $y) (local.get $z))) (br $cont))
         (f64.store (call $a (local.get $x))
                    (f64.reinterpret_i64 (call $wide (local.get $y) (local.get $z)))) (br $cont))
         (v128.store (call $a (local.get $x)) (i64x2.splat (call $wide (local.get $y) (local.get $z))))
         (br $cont))
         (v128.store32_lane 1 (call $a (local.get $x)) (i32x4.splat (local.get $y))) (br $cont))
         (i64.store32 offset=4093 (call $a (local.get $x)) (i64.extend_i32_u (local.get $y)))
         (br $cont))
         (memory.fill (call $a (local.get $x)) (local.get $y) (call $a (local.get $z))) (br $cont))
         (memory.copy (call $a (local.get $x)) (call $a (local.get $y)) (call $a (local.get $z)))
         (br $cont))
         (memory.init $seg (call $a (local.get $x)) (local.get $y) (local.get $z)) (br $cont))
         (drop (memory.grow (call $a (local.get $y)))) (br $cont))
         (i32.store (call $a (local.get $x)) (i32.load (call $a (local.get $x)))) (br $cont))
         (call $arg_copy (call $a (local.get $x)) (ADDR.const 0) (call $a (local.get $z))) (br $cont))
         (call $sread (i64.extend_i32_u (local.get $x)) (i64.extend_i32_u (local.get $y))
                      (i64.extend_i32_u (local.get $z))) (br $cont))
         (call $swrite (i64.extend_i32_u (local.get $y)) (i64.extend_i32_u (local.get $x))
                       (i64.extend_i32_u (local.get $z))) (br $cont))
         unreachable)
         (i32.store (call $a (local.get $x)) (i32.const 1)))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $next)))
    (call $reply))
  (func (export "canister_init") (drop (call $sgrow (i64.const 1))))
  (func (export "canister_pre_upgrade") (i32.store (ADDR.const 0x9000) (i32.const 7)))
  (func (export "canister_update run") (call $run))
  (func (export "canister_query run_query") (call $run))
  ;; A hash of the whole heap: h = h * 31 + byte.
  (func (export "canister_query hash") (local $p ADDR) (local $end ADDR) (local $h i64)
    (local.set $end (ADDR.mul (memory.size) (ADDR.const 65536)))
    (block $done
      (loop $l
        (br_if $done (ADDR.ge_u (local.get $p) (local.get $end)))
        (local.set $h (i64.add (i64.mul (local.get $h) (i64.const 31))
                               (i64.load8_u (local.get $p))))
        (local.set $p (ADDR.add (local.get $p) (ADDR.const 1)))
        (br $l)))
    (i64.store (ADDR.const 0) (local.get $h))
    (call $append (ADDR.const 0) (ADDR.const 8))
    (call $reply)))
"#;

const SEGMENT: &[u8] = b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ+/";
const WASM_PAGE: usize = 65536;
const MAX_PAGES: usize = 24;

fn interpreter(wasm64: bool) -> String {
    let (addr, memtype, extend, wrap) = if wasm64 {
        ("i64", "i64", "i64.extend_i32_u", "i32.wrap_i64")
    } else {
        ("i32", "", "", "")
    };
    INTERPRETER
        .replace("MEMTYPE", memtype)
        .replace("ADDR", addr)
        .replace("EXTEND", extend)
        .replace("WRAP", wrap)
}

/// xorshift64*: the test's deterministic randomness.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

#[derive(Debug, Clone, Copy)]
struct Op {
    op: u32,
    x: u32,
    y: u32,
    z: u32,
}

/// The heap and stable memory as the test expects them.
#[derive(Clone)]
struct Model {
    heap: Vec<u8>,
    stable: Vec<u8>,
}

impl Model {
    fn fresh_heap() -> Vec<u8> {
        let mut heap = vec![0u8; WASM_PAGE];
        heap[0x8000..0x8000 + 17].copy_from_slice(b"the initial image");
        heap
    }

    fn new() -> Model {
        Model {
            heap: Model::fresh_heap(),
            stable: vec![0u8; WASM_PAGE],
        }
    }

    /// Applies a message's ops; `false` if it traps.
    fn run(&mut self, ops: &[Op], arg: &[u8]) -> bool {
        self.heap[..arg.len()].copy_from_slice(arg);
        for o in ops {
            let (x, y, z) = (o.x as usize, o.y, o.z);
            let wide = (y as u64 | (z as u64) << 32).to_le_bytes();
            match o.op {
                0 => self.heap[x] = y as u8,
                1 => self.heap[x..x + 2].copy_from_slice(&(y as u16).to_le_bytes()),
                2 | 3 => self.heap[x..x + 8].copy_from_slice(&wide),
                4 => {
                    self.heap[x..x + 8].copy_from_slice(&wide);
                    self.heap[x + 8..x + 16].copy_from_slice(&wide);
                }
                5 => self.heap[x..x + 4].copy_from_slice(&y.to_le_bytes()),
                6 => self.heap[x + 4093..x + 4097].copy_from_slice(&y.to_le_bytes()),
                7 => self.heap[x..x + z as usize].fill(y as u8),
                8 => self
                    .heap
                    .copy_within(y as usize..y as usize + z as usize, x),
                9 => self.heap[x..x + z as usize]
                    .copy_from_slice(&SEGMENT[y as usize..(y + z) as usize]),
                10 => self
                    .heap
                    .resize(self.heap.len() + y as usize * WASM_PAGE, 0),
                11 => {}
                12 => self.heap[x..x + z as usize].copy_from_slice(&arg[..z as usize]),
                13 => self.heap[x..x + z as usize]
                    .copy_from_slice(&self.stable[y as usize..(y + z) as usize]),
                14 => self.stable[y as usize..(y + z) as usize]
                    .copy_from_slice(&self.heap[x..x + z as usize]),
                _ => return false,
            }
        }
        true
    }

    fn hash(&self) -> u64 {
        self.heap
            .iter()
            .fold(0u64, |h, &b| h.wrapping_mul(31).wrapping_add(b as u64))
    }
}

/// Pages of `after` that differ from `before` (zero beyond `before`).
fn changed_pages(before: &[u8], after: &[u8]) -> u64 {
    after
        .chunks(4096)
        .enumerate()
        .filter(|(i, page)| {
            let start = i * 4096;
            let old = before.get(start..start + 4096);
            match old {
                Some(old) => old != *page,
                None => page.iter().any(|&b| b != 0),
            }
        })
        .count() as u64
}

/// A random message of up to `max_ops` ops that stays within the heap (`pages` wasm pages at
/// the start) unless `trap` asks for a trap at the end.
fn message(rng: &mut Rng, max_ops: u64, pages: usize, trap: bool) -> Vec<Op> {
    let n = 1 + rng.below(max_ops) as usize;
    let arg_len = 16 * (n + usize::from(trap)) as u32;
    let mut size = pages * WASM_PAGE;
    let mut ops = Vec::new();
    for _ in 0..n {
        let addr = |rng: &mut Rng, len: usize| address(rng, size, len);
        let op = rng.below(15) as u32;
        let o = match op {
            0..=5 => Op {
                op,
                x: addr(rng, 16),
                y: rng.next() as u32,
                z: rng.next() as u32 & 0x3fff_ffff,
            },
            6 => Op {
                op,
                x: addr(rng, 4097),
                y: rng.next() as u32,
                z: 0,
            },
            7 => {
                let len = rng.below(3 * 4096) as u32;
                Op {
                    op,
                    x: addr(rng, len as usize),
                    y: if rng.chance(30) {
                        0
                    } else {
                        rng.below(256) as u32
                    },
                    z: len,
                }
            }
            8 => {
                let len = rng.below(2 * 4096) as u32;
                Op {
                    op,
                    x: addr(rng, len as usize),
                    y: addr(rng, len as usize),
                    z: len,
                }
            }
            9 => {
                let from = rng.below(64) as u32;
                let len = rng.below(64 - from as u64 + 1) as u32;
                Op {
                    op,
                    x: addr(rng, len as usize),
                    y: from,
                    z: len,
                }
            }
            10 => {
                let grow = if size / WASM_PAGE < MAX_PAGES {
                    rng.below(3) as u32
                } else {
                    0
                };
                size += grow as usize * WASM_PAGE;
                Op {
                    op,
                    x: 0,
                    y: grow,
                    z: 0,
                }
            }
            11 => Op {
                op,
                x: addr(rng, 4),
                y: 0,
                z: 0,
            },
            12 => {
                let len = rng.below(arg_len as u64 + 1) as u32;
                Op {
                    op,
                    x: addr(rng, len as usize),
                    y: 0,
                    z: len,
                }
            }
            _ => {
                let len = rng.below(6000) as u32;
                let from = rng.below((WASM_PAGE - len as usize) as u64) as u32;
                Op {
                    op,
                    x: addr(rng, len as usize),
                    y: from,
                    z: len,
                }
            }
        };
        ops.push(o);
    }
    if trap {
        // Either `unreachable` or a store straddling the end of the heap.
        ops.push(if rng.chance(50) {
            Op {
                op: 15,
                x: 0,
                y: 0,
                z: 0,
            }
        } else {
            Op {
                op: 16,
                x: (size - 2) as u32,
                y: 0,
                z: 0,
            }
        });
    }
    ops
}

/// An address for `len` bytes within a heap of `size` bytes, above the argument's copy; mostly
/// next to a page boundary, so that stores straddle pages.
fn address(rng: &mut Rng, size: usize, len: usize) -> u32 {
    let lo = 1024;
    let hi = size - len.max(1);
    let a = if rng.chance(60) {
        let boundary = 4096 * (1 + rng.below((hi / 4096) as u64) as usize);
        boundary - rng.below(17) as usize
    } else {
        lo + rng.below((hi - lo) as u64) as usize
    };
    a.clamp(lo, hi) as u32
}

fn encode(ops: &[Op]) -> Vec<u8> {
    ops.iter()
        .flat_map(|o| [o.op, o.x, o.y, o.z])
        .flat_map(u32::to_le_bytes)
        .collect()
}

fn randomized(wasm64: bool, seed: u64, messages: usize, metering: Metering) {
    let engine = engine_metering(metering);
    let p = program(&engine, &interpreter(wasm64));
    let (mut c, _) = Canister::install(&engine, &p, &[], Settings::default()).expect("installs");
    c.set_dirty_page_check(true);
    let program = c.program().clone();
    let mut model = Model::new();
    let mut rng = Rng(seed);
    let mut seen = [0u64; 4];
    for step in 0..messages {
        let pages = model.heap.len() / WASM_PAGE;
        let kind = rng.below(100);
        if kind < 4 {
            // Upgrade to the same module: the pre-upgrade hook's page is charged, the heap is new.
            let mut pre = model.heap.clone();
            pre[0x9000..0x9004].copy_from_slice(&7u32.to_le_bytes());
            let expected = changed_pages(&model.heap, &pre);
            let e = c.upgrade(&program, &[]).expect("engine");
            assert_eq!(e.result, MessageResult::NoReply, "step {step}");
            assert_eq!(e.heap_dirty_pages, expected, "step {step}: upgrade");
            model.heap = Model::fresh_heap();
            continue;
        }
        if kind < 10 {
            let e = c.query("hash", &[]).expect("engine");
            let reply = e.result.reply().expect("hash reply");
            assert_eq!(
                reply,
                model.hash().to_le_bytes(),
                "step {step}: heap contents"
            );
            continue;
        }
        let trap = kind < 25;
        let query = !trap && kind < 45;
        let ops = message(&mut rng, 30, pages, trap);
        let arg = encode(&ops);
        let mut next = model.clone();
        let ok = next.run(&ops, &arg);
        let e = if query {
            c.query("run_query", &arg)
        } else {
            c.update("run", &arg)
        }
        .expect("engine");
        assert_eq!(ok, !e.result.is_trap(), "step {step}: {:?}", e.result);
        if ok {
            let expected = changed_pages(&model.heap, &next.heap);
            assert_eq!(e.heap_dirty_pages, expected, "step {step}: {ops:?}");
            seen[usize::from(query)] += expected;
            if !query {
                model = next;
            }
        } else {
            assert_eq!(e.heap_dirty_pages, 0);
            seen[2] += 1;
            // Stable writes are rolled back with the rest.
        }
        if ops.iter().any(|o| o.op == 10 && o.y > 0) {
            seen[3] += 1;
        }
        assert_eq!(
            c.heap_size_bytes(),
            model.heap.len() as u64,
            "step {step}: heap size"
        );
    }
    // The run covered commits, queries, traps and growth.
    assert!(seen.iter().all(|&n| n > 0), "{seen:?}");
    drop(engine);
}

#[test]
fn randomized_messages_wasm32() {
    randomized(false, 0x5eed_0001, 400, Metering::POCKET_IC_13);
}

#[test]
fn randomized_messages_wasm64() {
    randomized(true, 0x5eed_0064, 400, Metering::POCKET_IC_13);
}

#[test]
fn randomized_messages_wasm32_with_the_memory_tracker() {
    randomized(false, 0x5eed_0101, 400, Metering::IC_DMT);
}

#[test]
fn randomized_messages_wasm64_with_the_memory_tracker() {
    randomized(true, 0x5eed_0164, 400, Metering::IC_DMT);
}

/// The host-time benchmark's canister: its update writes eight pages in 688 instructions, at
/// every heap size.
#[test]
fn host_time_benchmark_measures_the_same_message_at_every_size() {
    let engine = engine();
    for mib in [8, 64] {
        let r = offline_engine::host_time::measure(&engine, mib, 2).expect("runs");
        assert_eq!((r.update_instructions, r.update_dirty_pages), (688, 8));
    }
    assert!(offline_engine::host_time::measure(&engine, 12, 1).is_err());
}

/// The project's canister (built by `scripts/build.sh`) through installs, users, batched and
/// unbatched writes, a flush by the timer, queries and an upgrade, with the full comparison on.
#[test]
fn bench_canister_dirty_pages_match_the_full_comparison() {
    bench_canister_dirty_pages(Metering::POCKET_IC_13);
}

#[test]
fn bench_canister_dirty_pages_match_the_full_comparison_with_the_memory_tracker() {
    bench_canister_dirty_pages(Metering::IC_DMT);
}

fn bench_canister_dirty_pages(metering: Metering) {
    let path = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../target/canister/bench_canister.wasm");
    let wasm = std::fs::read(&path)
        .unwrap_or_else(|e| panic!("{}: {e}; build it with scripts/build.sh", path.display()));
    let engine = engine_metering(metering);
    let program = engine.load(&wasm).expect("loads");
    // `(opt record {})`: default settings.
    let init = hex_decode("4449444c026e016c00010001");
    let (mut c, install) =
        Canister::install(&engine, &program, &init, Settings::default()).expect("installs");
    assert!(install.heap_dirty_pages > 0);
    c.set_dirty_page_check(true);
    let mut dirty = 0;
    for (i, name) in ["alice", "bob", "carol"].iter().enumerate() {
        let arg = candid::encode_args((name.to_string(), format!("{name}@example.com"))).unwrap();
        let e = c.update("create_user", &arg).expect("engine");
        assert!(matches!(e.result, MessageResult::Reply(_)), "{e:?}");
        dirty += e.heap_dirty_pages;
        let arg = candid::encode_args((i as i64 + 1, 12.5f64)).unwrap();
        for _ in 0..4 {
            let e = c.update("submit_create_order", &arg).expect("engine");
            assert!(matches!(e.result, MessageResult::Reply(_)), "{e:?}");
            dirty += e.heap_dirty_pages;
        }
    }
    assert!(dirty > 0);
    let e = c
        .query("counts", &candid::encode_args(()).unwrap())
        .unwrap();
    assert!(matches!(e.result, MessageResult::Reply(_)), "{e:?}");
    c.advance_time(2_000_000_000);
    let runs = c.tick().expect("engine");
    assert!(!runs.is_empty());
    let e = c
        .query(
            "user_orders",
            &candid::encode_args((10i64, 100u32)).unwrap(),
        )
        .unwrap();
    assert!(matches!(e.result, MessageResult::Reply(_)), "{e:?}");
    let e = c.upgrade(&program, &init).expect("engine");
    assert!(!e.result.is_trap(), "{e:?}");
    c.set_dirty_page_check(true);
    let e = c
        .update("flush", &candid::encode_args(()).unwrap())
        .unwrap();
    assert!(matches!(e.result, MessageResult::Reply(_)), "{e:?}");
}

fn hex_decode(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
        .collect()
}
