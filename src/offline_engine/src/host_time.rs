//! The engine's own time per message against the heap size: a canister whose heap is grown to
//! a given size (every 4 KiB page written once at install) runs messages that write eight
//! pages, and the wall time of each message is measured. The canister's code is a few hundred
//! instructions, so the time is the engine's: entering the canister (on a thread of its own),
//! finding and committing (or, for the query, rolling back) the dirty pages. The fastest of the
//! measured messages is reported besides the median, since on a loaded machine the median also
//! holds the wait for the thread to be scheduled. `offline-engine host-time` prints the table;
//! the benchmark suite can call [`measure`].

use std::io::Write;
use std::time::{Duration, Instant};

use crate::{Canister, Engine, EngineError, MessageResult, Settings};

/// The canister: `canister_init` grows the heap by `GROW` wasm pages and writes a byte in every
/// 4 KiB page; `write` (update) and `read` (query) store a new value into eight pages spread over
/// the heap and reply.
const CANISTER: &str = r#"
(module
  (import "ic0" "msg_reply" (func $reply))
  (memory 1)
  (global $n (mut i32) (i32.const 0))
  (func (export "canister_init") (local $i i32) (local $pages i32)
    (drop (memory.grow (i32.const GROW)))
    (local.set $pages (i32.mul (memory.size) (i32.const 16)))
    (loop $l
      (i32.store8 (i32.mul (local.get $i) (i32.const 4096)) (i32.const 1))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br_if $l (i32.lt_u (local.get $i) (local.get $pages)))))
  (func $write_pages (local $i i32) (local $stride i32)
    (global.set $n (i32.add (global.get $n) (i32.const 1)))
    (local.set $stride (i32.mul (i32.div_u (memory.size) (i32.const 8)) (i32.const 65536)))
    (loop $l
      (i32.store (i32.add (i32.mul (local.get $i) (local.get $stride)) (i32.const 64))
                 (global.get $n))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br_if $l (i32.lt_u (local.get $i) (i32.const 8)))))
  (func (export "canister_update write") (call $write_pages) (call $reply))
  (func (export "canister_query read") (call $write_pages) (call $reply)))
"#;

/// The engine's time per message for one heap size.
#[derive(Debug, Clone, PartialEq)]
pub struct HostTime {
    /// Heap size in MiB.
    pub heap_mib: u64,
    /// Fastest wall time of an update that writes eight pages (committed).
    pub update_min: Duration,
    /// Median wall time of such an update.
    pub update_median: Duration,
    /// Fastest wall time of a query that writes eight pages (rolled back).
    pub query_min: Duration,
    /// Median wall time of such a query.
    pub query_median: Duration,
    /// Instructions of one update (the same for every heap size).
    pub update_instructions: u64,
    /// Dirty heap pages of one update (eight).
    pub update_dirty_pages: u64,
}

/// The fastest and the median of `v`.
fn min_median(mut v: Vec<Duration>) -> (Duration, Duration) {
    v.sort();
    (
        v.first().copied().unwrap_or_default(),
        v.get(v.len() / 2).copied().unwrap_or_default(),
    )
}

/// Installs the benchmark canister with a heap of `heap_mib` MiB (a multiple of 8 between 8
/// and 4088) and measures `messages` updates and `messages` queries.
pub fn measure(engine: &Engine, heap_mib: u64, messages: u32) -> Result<HostTime, EngineError> {
    if !(8..=4088).contains(&heap_mib) || !heap_mib.is_multiple_of(8) {
        return Err(EngineError::Module(format!(
            "heap size {heap_mib} MiB: choose a multiple of 8 MiB between 8 and 4088"
        )));
    }
    let grow = heap_mib * 16 - 1;
    let wat = CANISTER.replace("GROW", &grow.to_string());
    let wasm = wat::parse_str(&wat).map_err(|e| EngineError::Module(format!("wat: {e}")))?;
    let program = engine.load(&wasm)?;
    let (mut canister, _) = Canister::install(engine, &program, &[], Settings::default())?;
    if canister.heap_size_bytes() != heap_mib << 20 {
        return Err(EngineError::Module(format!(
            "the heap is {} bytes, not {heap_mib} MiB",
            canister.heap_size_bytes()
        )));
    }
    let mut updates = Vec::new();
    let mut queries = Vec::new();
    let (mut instructions, mut dirty) = (0, 0);
    // One warm-up message of each kind first.
    for i in 0..=messages {
        let started = Instant::now();
        let e = canister.update("write", &[])?;
        let took = started.elapsed();
        if !matches!(e.result, MessageResult::Reply(_)) {
            return Err(EngineError::Module(format!("write: {:?}", e.result)));
        }
        let started = Instant::now();
        let q = canister.query("read", &[])?;
        let took_query = started.elapsed();
        if !matches!(q.result, MessageResult::Reply(_)) {
            return Err(EngineError::Module(format!("read: {:?}", q.result)));
        }
        if i > 0 {
            updates.push(took);
            queries.push(took_query);
        }
        (instructions, dirty) = (e.instructions, e.heap_dirty_pages);
    }
    let (update_min, update_median) = min_median(updates);
    let (query_min, query_median) = min_median(queries);
    Ok(HostTime {
        heap_mib,
        update_min,
        update_median,
        query_min,
        query_median,
        update_instructions: instructions,
        update_dirty_pages: dirty,
    })
}

/// Writes `rows` as a Markdown table.
pub fn write_table(out: &mut dyn Write, rows: &[HostTime]) -> std::io::Result<()> {
    writeln!(
        out,
        "| heap | update µs (min / median) | query µs (min / median) | instructions | dirty pages |"
    )?;
    writeln!(out, "|---:|---:|---:|---:|---:|")?;
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    for r in rows {
        writeln!(
            out,
            "| {} MiB | {:.0} / {:.0} | {:.0} / {:.0} | {} | {} |",
            r.heap_mib,
            us(r.update_min),
            us(r.update_median),
            us(r.query_min),
            us(r.query_median),
            r.update_instructions,
            r.update_dirty_pages
        )?;
    }
    Ok(())
}
