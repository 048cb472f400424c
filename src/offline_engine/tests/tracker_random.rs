//! The memory tracker's pages and charges on random messages, against a model of its rules kept
//! by the test (`METERING.md` §10): loads and stores of every width at random addresses (across
//! Wasm-page boundaries too), bulk operations, System API reads and writes of the heap, stable
//! memory reads and writes, growth, out-of-bounds accesses (which trap), updates and queries.
//! For every message the engine's lists of charged Wasm pages must equal the model's, and its
//! instructions must equal those of the same message under the rules of PocketIC 13 with the old
//! stable charge taken out and the model's tracker charge put in.

mod common;
use common::*;
use offline_engine::{Canister, Execution, Metering, Settings};
use std::collections::{HashMap, HashSet};

/// An interpreter of 16-byte ops `[op, x, y, z]` (u32 little-endian) read from the argument,
/// which `canister_update run` / `canister_query run_query` first copy to address 0.
const INTERPRETER: &str = r#"
(module
  (import "ic0" "msg_arg_data_size" (func $arg_size (result ADDR)))
  (import "ic0" "msg_arg_data_copy" (func $arg_copy (param ADDR ADDR ADDR)))
  (import "ic0" "msg_reply" (func $reply))
  (import "ic0" "msg_reply_data_append" (func $append (param ADDR ADDR)))
  (import "ic0" "stable64_grow" (func $sgrow (param i64) (result i64)))
  (import "ic0" "stable64_read" (func $sread (param i64 i64 i64)))
  (import "ic0" "stable64_write" (func $swrite (param i64 i64 i64)))
  (memory MEMTYPE 4)
  (func $a (param i32) (result ADDR) (local.get 0) EXTEND)
  (func $field (param $i i32) (param $k i32) (result i32)
    (i32.load (call $a (i32.add (i32.mul (local.get $i) (i32.const 16))
                                (i32.mul (local.get $k) (i32.const 4))))))
  (func $run (local $i i32) (local $n i32) (local $x i32) (local $y i32) (local $z i32)
    (call $arg_copy (ADDR.const 0) (ADDR.const 0) (call $arg_size))
    (local.set $n (i32.div_u WRAP_ARG_SIZE (i32.const 16)))
    (block $done
      (loop $next
        (br_if $done (i32.ge_u (local.get $i) (local.get $n)))
        (local.set $x (call $field (local.get $i) (i32.const 1)))
        (local.set $y (call $field (local.get $i) (i32.const 2)))
        (local.set $z (call $field (local.get $i) (i32.const 3)))
        (block $cont
         (block $b16 (block $b15 (block $b14 (block $b13 (block $b12 (block $b11 (block $b10
         (block $b9 (block $b8 (block $b7 (block $b6 (block $b5 (block $b4 (block $b3 (block $b2
         (block $b1 (block $b0
           (br_table $b0 $b1 $b2 $b3 $b4 $b5 $b6 $b7 $b8 $b9 $b10 $b11 $b12 $b13 $b14 $b15 $b16
                     $cont (call $field (local.get $i) (i32.const 0))))
          (drop (i32.load8_u (call $a (local.get $x)))) (br $cont))
         (drop (i32.load16_u (call $a (local.get $x)))) (br $cont))
         (drop (i32.load (call $a (local.get $x)))) (br $cont))
         (drop (i64.load (call $a (local.get $x)))) (br $cont))
         (drop (v128.load (call $a (local.get $x)))) (br $cont))
         (i32.store8 (call $a (local.get $x)) (local.get $y)) (br $cont))
         (i32.store16 (call $a (local.get $x)) (local.get $y)) (br $cont))
         (i32.store (call $a (local.get $x)) (local.get $y)) (br $cont))
         (i64.store (call $a (local.get $x)) (i64.extend_i32_u (local.get $y))) (br $cont))
         (v128.store (call $a (local.get $x)) (i32x4.splat (local.get $y))) (br $cont))
         (memory.fill (call $a (local.get $x)) (i32.const 9) (call $a (local.get $z))) (br $cont))
         (memory.copy (call $a (local.get $x)) (call $a (local.get $y)) (call $a (local.get $z)))
         (br $cont))
         (call $arg_copy (call $a (local.get $x)) (ADDR.const 0) (call $a (local.get $z)))
         (br $cont))
         (call $append (call $a (local.get $x)) (call $a (local.get $z))) (br $cont))
         (call $sread (i64.extend_i32_u (local.get $x)) (i64.extend_i32_u (local.get $y))
                      (i64.extend_i32_u (local.get $z))) (br $cont))
         (call $swrite (i64.extend_i32_u (local.get $y)) (i64.extend_i32_u (local.get $x))
                       (i64.extend_i32_u (local.get $z))) (br $cont))
         (drop (memory.grow (call $a (local.get $y)))))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $next)))
    (call $reply))
  (func (export "canister_init") (drop (call $sgrow (i64.const 4))))
  (func (export "canister_update run") (call $run))
  (func (export "canister_query run_query") (call $run)))
"#;

/// The interpreter with a 64-bit heap or a 32-bit one.
fn interpreter(wasm64: bool) -> String {
    let (addr, memtype, extend, wrap) = if wasm64 {
        (
            "i64",
            "i64",
            "i64.extend_i32_u",
            "(i32.wrap_i64 (call $arg_size))",
        )
    } else {
        ("i32", "", "", "(call $arg_size)")
    };
    INTERPRETER
        .replace("WRAP_ARG_SIZE", wrap)
        .replace("ADDR", addr)
        .replace("MEMTYPE", memtype)
        .replace("EXTEND", extend)
}

const WASM_PAGE: u64 = 65_536;
const STABLE_BYTES: u64 = 4 * WASM_PAGE;
const EVENT: u64 = 80_000;

/// xorshift64*: deterministic randomness without a dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// One memory's tracker states in the model, with the events of the current message.
#[derive(Default)]
struct Pages {
    states: HashMap<u64, u8>,
    accessed: Vec<u64>,
    dirty: Vec<u64>,
    /// Stable memory: the OS pages the message read or wrote through the System API (the
    /// bytemap of the replica's stable-memory replacements).
    os_pages: HashSet<u64>,
}

impl Pages {
    /// The tracker's rule for an access of `len` bytes at `at` (known to be within the memory).
    fn touch(&mut self, at: u64, len: u64, write: bool, track: bool) {
        if len == 0 {
            return;
        }
        for page in at / WASM_PAGE..=(at + len - 1) / WASM_PAGE {
            let state = self.states.get(&page).copied().unwrap_or(0);
            let new = match (track, state, write) {
                (false, 0, _) => 2,
                (true, 0, true) | (true, 1, true) => 2,
                (true, 0, false) => 1,
                _ => continue,
            };
            if state == 0 {
                self.accessed.push(page);
            }
            if new == 2 && track {
                self.dirty.push(page);
            }
            self.states.insert(page, new);
        }
    }

    /// A System API access of stable memory: a read none of whose OS pages the message has
    /// accessed is served by the host (no page charged); any other access goes through the
    /// tracked memory.
    fn stable_access(&mut self, at: u64, len: u64, write: bool, track: bool) {
        if len == 0 {
            return;
        }
        let os_pages = at / 4_096..=(at + len - 1) / 4_096;
        let first_read = !write && os_pages.clone().all(|p| !self.os_pages.contains(&p));
        self.os_pages.extend(os_pages);
        if !first_read {
            self.touch(at, len, write, track);
        }
    }

    fn events(&self) -> u64 {
        (self.accessed.len() + self.dirty.len()) as u64
    }

    fn sorted(&self) -> (Vec<u64>, Vec<u64>) {
        let (mut a, mut d) = (self.accessed.clone(), self.dirty.clone());
        a.sort_unstable();
        d.sort_unstable();
        (a, d)
    }
}

/// A random message: ops and the model's pages for it. `heap` is the heap size in bytes before
/// the message (updated when the message grows it and does not trap).
fn message(rng: &mut Rng, heap: &mut u64, track: bool) -> (Vec<u8>, Pages, Pages) {
    let n = 1 + rng.below(24);
    let arg_len = n * 16;
    let (mut h, mut s) = (Pages::default(), Pages::default());
    // The interpreter copies its argument to address 0, then reads it.
    h.touch(0, arg_len, true, track);
    let mut size = *heap;
    let mut ops = Vec::new();
    // An address, often near a Wasm-page boundary, now and then beyond the heap; never in the
    // ops themselves (the first 384 bytes), which the interpreter reads as it goes.
    let address = |rng: &mut Rng, size: u64, len: u64| -> u64 {
        if rng.below(40) == 0 {
            return size - len.min(size) + 1 + rng.below(8);
        }
        let page = rng.below(size / WASM_PAGE);
        let off = if rng.below(3) == 0 {
            WASM_PAGE - 1 - rng.below(16)
        } else {
            rng.below(WASM_PAGE)
        };
        (page * WASM_PAGE + off).max(512).min(size - len)
    };
    let mut trapped = false;
    for _ in 0..n {
        let op = rng.below(17);
        let (mut x, mut y, mut z) = (0u64, 0u64, 0u64);
        let width = [1, 2, 4, 8, 16][(op % 5) as usize];
        match op {
            0..=9 => {
                x = address(rng, size, width);
                y = rng.below(1000);
                if x + width > size {
                    trapped = true;
                } else if !trapped {
                    h.touch(x, width, op >= 5, track);
                }
            }
            10 => {
                z = rng.below(3 * WASM_PAGE / 2);
                x = address(rng, size, z);
                if x + z > size {
                    trapped = true;
                } else if !trapped {
                    h.touch(x, z, true, track);
                }
            }
            11 => {
                z = rng.below(WASM_PAGE);
                x = address(rng, size, z);
                y = address(rng, size, z);
                if x + z > size || y + z > size {
                    trapped = true;
                } else if !trapped {
                    h.touch(y, z, false, track);
                    h.touch(x, z, true, track);
                }
            }
            12 | 13 => {
                z = rng.below(arg_len + 1);
                x = address(rng, size, z);
                if x + z > size {
                    trapped = true;
                } else if !trapped {
                    h.touch(x, z, op == 12, track);
                }
            }
            14 | 15 => {
                z = rng.below(2 * WASM_PAGE);
                x = address(rng, size, z);
                y = rng.below(STABLE_BYTES - z + 1);
                if z > 0 && x + z > size {
                    trapped = true;
                } else if !trapped {
                    s.stable_access(y, z, op == 15, track);
                    h.touch(x, z, op == 14, track);
                }
            }
            _ => {
                y = rng.below(2);
                if !trapped {
                    size += y * WASM_PAGE;
                }
            }
        }
        for v in [op, x, y, z] {
            ops.extend_from_slice(&(v as u32).to_le_bytes());
        }
    }
    if !trapped && track {
        *heap = size;
    }
    (ops, h, s)
}

fn install(metering: Metering, wasm64: bool) -> Canister {
    let engine = engine_metering(metering);
    let p = program(&engine, &interpreter(wasm64));
    let settings = Settings {
        debug_print_enabled: false,
        ..Settings::default()
    };
    Canister::install(&engine, &p, &[], settings)
        .expect("installs")
        .0
}

/// What the rules of PocketIC 13 charged `e` for new dirty stable pages (its page charges
/// without the changed heap pages billed after it).
fn old_stable_charge(e: &Execution, wasm64: bool) -> u64 {
    let heap_page = Metering::POCKET_IC_13.heap_changed_page_cost(wasm64);
    e.pages.instructions - e.heap_dirty_pages * heap_page
}

fn random_messages(wasm64: bool, seed: u64) {
    let mut rng = Rng(seed);
    let mut old = install(Metering::POCKET_IC_13, wasm64);
    let mut new = install(Metering::IC_DMT, wasm64);
    let mut heap = 4 * WASM_PAGE;
    let (mut traps, mut events) = (0, 0);
    for i in 0..300 {
        let query = i % 5 == 4;
        let (arg, h, s) = message(&mut rng, &mut heap, !query);
        let (o, n) = if query {
            (
                old.query("run_query", &arg).unwrap(),
                new.query("run_query", &arg).unwrap(),
            )
        } else {
            (
                old.update("run", &arg).unwrap(),
                new.update("run", &arg).unwrap(),
            )
        };
        assert_eq!(o.result.is_trap(), n.result.is_trap(), "message {i}");
        traps += u64::from(n.result.is_trap());
        let (ha, hd) = h.sorted();
        let (sa, sd) = s.sorted();
        assert_eq!(n.pages.heap.accessed, ha, "message {i}: heap accessed");
        assert_eq!(n.pages.heap.dirty, hd, "message {i}: heap dirty");
        assert_eq!(n.pages.stable.accessed, sa, "message {i}: stable accessed");
        assert_eq!(n.pages.stable.dirty, sd, "message {i}: stable dirty");
        let charge = (h.events() + s.events()) * EVENT;
        events += h.events() + s.events();
        assert_eq!(n.pages.instructions, charge, "message {i}");
        assert_eq!(
            n.instructions,
            o.instructions - old_stable_charge(&o, wasm64) + charge,
            "message {i}"
        );
        assert_eq!(n.billed_instructions, n.instructions, "message {i}");
        assert_eq!(n.pages.heap.written, o.pages.heap.written, "message {i}");
        assert_eq!(
            n.pages.stable.written, o.pages.stable.written,
            "message {i}"
        );
    }
    // The messages exercised what they should.
    assert!(traps > 10 && traps < 200, "{traps} traps");
    assert!(events > 1_000, "{events} events");
}

#[test]
fn random_messages_charge_the_pages_the_model_charges_wasm32() {
    random_messages(false, 0x9e37_79b9_7f4a_7c15);
}

#[test]
fn random_messages_charge_the_pages_the_model_charges_wasm64() {
    random_messages(true, 0x2545_f491_4f6c_dd1d);
}
