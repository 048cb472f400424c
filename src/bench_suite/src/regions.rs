//! Where the pages go: the memory pages three workloads touch (one `create_order` per message,
//! a packed batch of 1,000 and one of 10,000), by region of the canister's memory, under both
//! metering profiles, and their share of the bill.
//!
//! Heap regions come from the deployable wasm's layout: the stack below the initial
//! `__stack_pointer` (Rust places it first), the static data and bss up to the initial memory
//! size, and above it the allocator's heap (SQLite's page cache, its prepared statements, the
//! library's state and the Candid buffers of each message: one allocator, so not told apart
//! here). Stable-memory regions come from ic-stable-structures' `MemoryManager` (its header,
//! then buckets of Wasm pages each owned by a virtual memory, read from the canister's stable
//! memory after the workload) and from who owns each virtual memory: ic-rusqlite mounts the
//! database file on memory 120 and gives stable-fs memories 101–119, whose ninth
//! (`FileChunksMemoryV2`, 108) holds the chunks of unmounted files such as the rollback
//! journal (stable-fs 0.13 `storage/stable.rs`, `StorageMemoryIdx`).

use std::collections::BTreeMap;
use std::fmt::Write;

use anyhow::{Context, Result, bail};
use offline_engine::{Metering, PageUse};
use serde::{Deserialize, Serialize};

use crate::analysis::fmt_u;
use crate::fees::FeeSchedule;
use crate::message_bench::{self, MessageRecord};

/// The three workloads: messages of one `create_order` (the mean of this many), and packed
/// batches of 1,000 and 10,000 writes in one message.
pub const UNBATCHED_MESSAGES: usize = 20;
/// Packed batch sizes traced.
pub const PACKED_SIZES: [usize; 2] = [1_000, 10_000];

/// Where the heap's regions lie in a wasm (64 KiB Wasm pages).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeapLayout {
    /// Pages below the initial stack pointer (the stack, placed first).
    pub stack_pages: u64,
    /// The initial memory size: static data and bss end here; the allocator's heap follows.
    pub initial_pages: u64,
}

impl HeapLayout {
    /// Reads the layout of `wasm`: its first mutable i32 global (`__stack_pointer`), its
    /// lowest active data segment and its memory's initial size.
    pub fn of(wasm: &[u8]) -> Result<HeapLayout> {
        use wasmparser::{DataKind, Operator, Parser, Payload};
        let (mut sp, mut data_start, mut initial) = (None, None::<u64>, None);
        let const_of = |expr: &wasmparser::ConstExpr| -> Option<u64> {
            match expr.get_operators_reader().read().ok()? {
                Operator::I32Const { value } => Some(value as u32 as u64),
                _ => None,
            }
        };
        for payload in Parser::new(0).parse_all(wasm) {
            match payload.context("parsing the deployable wasm")? {
                Payload::GlobalSection(r) => {
                    for g in r {
                        let g = g?;
                        if sp.is_none()
                            && g.ty.mutable
                            && g.ty.content_type == wasmparser::ValType::I32
                        {
                            sp = const_of(&g.init_expr);
                        }
                    }
                }
                Payload::MemorySection(r) => {
                    if let Some(m) = r.into_iter().next() {
                        initial = Some(m?.initial);
                    }
                }
                Payload::DataSection(r) => {
                    for d in r {
                        if let DataKind::Active { offset_expr, .. } = d?.kind
                            && let Some(o) = const_of(&offset_expr)
                        {
                            data_start = Some(data_start.map_or(o, |s| s.min(o)));
                        }
                    }
                }
                _ => {}
            }
        }
        let (Some(sp), Some(initial)) = (sp, initial) else {
            bail!("the wasm has no stack pointer global or no memory");
        };
        if data_start.is_some_and(|d| d < sp) {
            bail!("the stack is not placed first (data at {data_start:?}, stack pointer {sp})");
        }
        Ok(HeapLayout {
            stack_pages: sp.div_ceil(WASM_PAGE),
            initial_pages: initial,
        })
    }

    /// The region of heap Wasm page `page`.
    pub fn region(&self, page: u64) -> &'static str {
        if page < self.stack_pages {
            "heap: stack"
        } else if page < self.initial_pages {
            "heap: static data and bss"
        } else {
            "heap: allocator (SQLite page cache and statements, library state, Candid buffers)"
        }
    }
}

const WASM_PAGE: u64 = 65_536;
const OS_PAGES_PER_WASM_PAGE: u64 = 16;

/// ic-stable-structures 0.7 `memory_manager.rs`: the header's size (magic, version, bucket
/// count, bucket size, 32 reserved bytes, 255 memory sizes), after which each bucket's owner is
/// one byte; the buckets start at Wasm page 1.
const MM_BUCKET_SIZE_OFFSET: usize = 6;
const MM_ALLOCATIONS_OFFSET: usize = 3 + 1 + 2 + 2 + 32 + 255 * 8;
const MM_UNALLOCATED: u8 = 255;

/// The owner of each stable Wasm page, read from ic-stable-structures' `MemoryManager` in the
/// canister's stable memory.
#[derive(Debug, Clone)]
pub struct StableLayout {
    bucket_pages: u64,
    owners: Vec<u8>,
}

impl StableLayout {
    /// Reads the memory manager's header at the start of `stable`.
    pub fn of(stable: &[u8]) -> Result<StableLayout> {
        if stable.len() < MM_ALLOCATIONS_OFFSET || &stable[..3] != b"MGR" {
            bail!("stable memory does not start with a MemoryManager header");
        }
        let bucket_pages = u16::from_le_bytes([
            stable[MM_BUCKET_SIZE_OFFSET],
            stable[MM_BUCKET_SIZE_OFFSET + 1],
        ]) as u64;
        let end = stable.len().min(MM_ALLOCATIONS_OFFSET + 32_768);
        Ok(StableLayout {
            bucket_pages: bucket_pages.max(1),
            owners: stable[MM_ALLOCATIONS_OFFSET..end].to_vec(),
        })
    }

    /// The region of stable Wasm page `page`.
    pub fn region(&self, page: u64) -> String {
        if page == 0 {
            return "stable: MemoryManager header".into();
        }
        let bucket = ((page - 1) / self.bucket_pages) as usize;
        match self.owners.get(bucket).copied() {
            None | Some(MM_UNALLOCATED) => "stable: unallocated".into(),
            Some(id) => format!("stable: {} (memory {id})", memory_name(id)),
        }
    }
}

/// Who owns virtual memory `id` in the reference canister (ic-rusqlite 0.5: stable-fs on
/// 101..119, the database on 120; the library's saved queue on the canister's `memory_id`, 1).
fn memory_name(id: u8) -> &'static str {
    match id {
        101 => "stable-fs header",
        102 => "stable-fs metadata",
        103 => "stable-fs directory entries",
        104 => "stable-fs file chunks v1",
        105 => "stable-fs mounted-file metadata",
        106 => "stable-fs chunk pointers",
        107 => "stable-fs chunk allocator",
        108 => "stable-fs file chunks (the journal)",
        109 => "stable-fs cache journal",
        110 => "stable-fs directory lookup",
        111..=119 => "stable-fs",
        120 => "database file",
        1 => "library's saved queue",
        _ => "other",
    }
}

/// One region's pages in one workload, per message, under both profiles.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RegionPages {
    /// Wasm pages the tracker charged a first access for.
    pub accessed: f64,
    /// Wasm pages the tracker charged a first write for.
    pub dirty: f64,
    /// Instructions the tracker charged for them.
    pub tracker_instructions: f64,
    /// 4 KiB pages changed (heap) or written (stable) under the rules of PocketIC 13.
    pub changed: f64,
    /// Instructions those cost under those rules.
    pub old_instructions: f64,
}

/// One workload's pages by region.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkloadPages {
    /// What ran.
    pub workload: String,
    /// Writes per message.
    pub writes_per_message: u64,
    /// Cycles of one message (13 nodes) under the tracker's rules and under PocketIC 13's.
    pub cycles_per_message: [f64; 2],
    /// Region → pages per message.
    pub regions: BTreeMap<String, RegionPages>,
}

/// One workload's executions under one profile, with the canister's stable memory after them.
#[derive(Debug, Clone)]
pub struct Trace {
    /// The workload's messages: what they cost, and their pages.
    pub messages: Vec<(MessageRecord, PageUse)>,
    /// Stable memory after the workload.
    pub stable: Vec<u8>,
}

/// Attributes the pages of one workload run under both profiles (`tracker` and `old`, the same
/// messages) to regions, per message.
pub fn attribute(
    workload: &str,
    writes_per_message: u64,
    heap: &HeapLayout,
    tracker: &Trace,
    old: &Trace,
    fees: &FeeSchedule,
) -> Result<WorkloadPages> {
    let stable = StableLayout::of(&tracker.stable)?;
    let n = tracker.messages.len().max(1) as f64;
    let charge = Metering::IC_DMT
        .tracker
        .map_or(0, |t| t.page_overhead * t.os_pages_per_wasm_page) as f64;
    let old_rules = Metering::POCKET_IC_13;
    let mut regions: BTreeMap<String, RegionPages> = BTreeMap::new();
    for (_, pages) in &tracker.messages {
        for (list, dirty) in [(&pages.heap.accessed, false), (&pages.heap.dirty, true)] {
            for &p in list {
                let r = regions.entry(heap.region(p).to_string()).or_default();
                *(if dirty { &mut r.dirty } else { &mut r.accessed }) += 1.0 / n;
                r.tracker_instructions += charge / n;
            }
        }
        for (list, dirty) in [(&pages.stable.accessed, false), (&pages.stable.dirty, true)] {
            for &p in list {
                let r = regions.entry(stable.region(p)).or_default();
                *(if dirty { &mut r.dirty } else { &mut r.accessed }) += 1.0 / n;
                r.tracker_instructions += charge / n;
            }
        }
    }
    let old_stable = StableLayout::of(&old.stable)?;
    let m = old.messages.len().max(1) as f64;
    for (_, pages) in &old.messages {
        for &p in &pages.heap.written {
            let r = regions
                .entry(heap.region(p / OS_PAGES_PER_WASM_PAGE).to_string())
                .or_default();
            r.changed += 1.0 / m;
            r.old_instructions += old_rules.heap_changed_page as f64 / m;
        }
        for &p in &pages.stable.written {
            let r = regions
                .entry(old_stable.region(p / OS_PAGES_PER_WASM_PAGE))
                .or_default();
            r.changed += 1.0 / m;
            r.old_instructions += old_rules.stable_new_dirty_page as f64 / m;
        }
    }
    let cycles = |t: &Trace| {
        t.messages
            .iter()
            .map(|(rec, _)| message_bench::message_cycles(fees, rec, 13) as f64)
            .sum::<f64>()
            / t.messages.len().max(1) as f64
    };
    Ok(WorkloadPages {
        workload: workload.to_string(),
        writes_per_message,
        cycles_per_message: [cycles(tracker), cycles(old)],
        regions,
    })
}

/// Renders the section: one table per workload.
pub fn render(workloads: &[WorkloadPages], label_lead: &str, label_old: &str) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "\n## Where the pages go\n\nThe memory pages each message touches, by region of the canister's memory, under the \
         tracker's rules (64 KiB Wasm pages charged a first access and a first write, 80,000 instructions each) and \
         under PocketIC 13's (4 KiB pages changed: 1,000 instructions each for heap pages after the message and for new \
         stable pages), with their share of the message's cycles on a 13-node subnet. Heap regions: the stack below \
         the initial stack pointer, the static data and bss up to the initial memory, the allocator's heap above \
         (SQLite's page cache and statements, the library's state and each message's Candid buffers share one \
         allocator and are not told apart). Stable regions: ic-stable-structures' virtual memories, read from the \
         `MemoryManager` in stable memory after the workload. Written by `bench-suite run` \
         (`bench_suite::regions`).\n\n*{label_lead}; {label_old}*\n"
    );
    for w in workloads {
        let _ = writeln!(
            o,
            "### {} ({} write{} per message)\n\nCycles per message: {} under the tracker's rules, {} under PocketIC 13's.\n",
            w.workload,
            fmt_u(w.writes_per_message),
            if w.writes_per_message == 1 { "" } else { "s" },
            fmt_u(w.cycles_per_message[0] as u64),
            fmt_u(w.cycles_per_message[1] as u64),
        );
        let header = [
            "region",
            "Wasm pages accessed",
            "Wasm pages dirty",
            "tracker instructions",
            "share (tracker)",
            "4 KiB pages changed (PocketIC 13)",
            "share (PocketIC 13)",
        ];
        let mut rows: Vec<(&String, &RegionPages)> = w.regions.iter().collect();
        rows.sort_by(|a, b| {
            b.1.tracker_instructions
                .total_cmp(&a.1.tracker_instructions)
        });
        let mut total = RegionPages::default();
        let mut body = Vec::new();
        let share = |i: f64, c: f64| format!("{:.1} %", i / c.max(1.0) * 100.0);
        for (name, r) in rows {
            total.accessed += r.accessed;
            total.dirty += r.dirty;
            total.tracker_instructions += r.tracker_instructions;
            total.changed += r.changed;
            total.old_instructions += r.old_instructions;
            body.push(row(name, r, &share, w));
        }
        body.push(row("all regions", &total, &share, w));
        o.push_str(&crate::summary::padded_table(
            &header,
            &[false, true, true, true, true, true, true],
            &body,
        ));
        o.push('\n');
    }
    o
}

fn row(
    name: &str,
    r: &RegionPages,
    share: &dyn Fn(f64, f64) -> String,
    w: &WorkloadPages,
) -> Vec<String> {
    let f = |x: f64| {
        if x >= 100.0 {
            fmt_u(x.round() as u64)
        } else {
            format!("{x:.2}")
        }
    };
    vec![
        name.to_string(),
        f(r.accessed),
        f(r.dirty),
        fmt_u(r.tracker_instructions.round() as u64),
        share(r.tracker_instructions, w.cycles_per_message[0]),
        f(r.changed),
        share(r.old_instructions, w.cycles_per_message[1]),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use offline_engine::MemoryPages;

    #[test]
    fn the_layouts_name_each_page() {
        let heap = HeapLayout {
            stack_pages: 16,
            initial_pages: 23,
        };
        assert_eq!(heap.region(0), "heap: stack");
        assert_eq!(heap.region(15), "heap: stack");
        assert_eq!(heap.region(16), "heap: static data and bss");
        assert!(heap.region(23).starts_with("heap: allocator"));
        let mut stable = vec![0u8; 70_000];
        stable[..4].copy_from_slice(b"MGR\x01");
        stable[MM_BUCKET_SIZE_OFFSET..MM_BUCKET_SIZE_OFFSET + 2]
            .copy_from_slice(&128u16.to_le_bytes());
        stable[MM_ALLOCATIONS_OFFSET..MM_ALLOCATIONS_OFFSET + 4]
            .copy_from_slice(&[120, 108, 1, 255]);
        let s = StableLayout::of(&stable).unwrap();
        assert_eq!(s.region(0), "stable: MemoryManager header");
        assert_eq!(s.region(1), "stable: database file (memory 120)");
        assert_eq!(s.region(128), "stable: database file (memory 120)");
        assert_eq!(
            s.region(129),
            "stable: stable-fs file chunks (the journal) (memory 108)"
        );
        assert_eq!(s.region(257), "stable: library's saved queue (memory 1)");
        assert_eq!(s.region(385), "stable: unallocated");
        assert!(StableLayout::of(&[0u8; 4096]).is_err());
    }

    #[test]
    fn pages_are_attributed_and_priced_per_message() {
        let heap = HeapLayout {
            stack_pages: 16,
            initial_pages: 23,
        };
        let mut stable = vec![0u8; 70_000];
        stable[..3].copy_from_slice(b"MGR");
        stable[MM_BUCKET_SIZE_OFFSET..MM_BUCKET_SIZE_OFFSET + 2]
            .copy_from_slice(&1u16.to_le_bytes());
        stable[MM_ALLOCATIONS_OFFSET] = 120;
        let rec = MessageRecord {
            kind: crate::message_bench::MessageKind::SelfCall,
            entry: String::new(),
            instructions: 1_000_000,
            billed_instructions: 1_000_000,
            heap_dirty_pages: 0,
            stable_dirty_pages: 0,
            tracked: Default::default(),
        };
        let pages = PageUse {
            heap: MemoryPages {
                accessed: vec![15, 30],
                dirty: vec![30],
                written: vec![15 * 16, 30 * 16, 30 * 16 + 1],
            },
            stable: MemoryPages {
                accessed: vec![1],
                dirty: vec![1],
                written: vec![16],
            },
            instructions: 0,
        };
        let trace = Trace {
            messages: vec![(rec.clone(), pages.clone()), (rec, pages)],
            stable,
        };
        let fees = crate::fees::IC_2025;
        let w = attribute("test", 1, &heap, &trace, &trace, &fees).unwrap();
        let stack = &w.regions["heap: stack"];
        assert_eq!(
            (stack.accessed, stack.dirty, stack.changed),
            (1.0, 0.0, 1.0)
        );
        assert_eq!(stack.tracker_instructions, 80_000.0);
        let db = &w.regions["stable: database file (memory 120)"];
        assert_eq!((db.accessed, db.dirty, db.changed), (1.0, 1.0, 1.0));
        assert_eq!(
            (db.tracker_instructions, db.old_instructions),
            (160_000.0, 1_000.0)
        );
        let alloc = w
            .regions
            .iter()
            .find(|(k, _)| k.contains("allocator"))
            .unwrap()
            .1;
        assert_eq!((alloc.changed, alloc.old_instructions), (2.0, 2_000.0));
        let md = render(&[w], "lead", "old");
        assert!(md.contains("| all regions"), "{md}");
    }
}
