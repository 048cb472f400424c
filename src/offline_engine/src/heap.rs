//! Heap (wasm memory) dirty pages: the written-page map, the shadow copy, commit and rollback.
//!
//! The shadow holds the heap as it was at the end of the last committed message. A 4 KiB page
//! is dirty when its bytes differ from the shadow (pages written with identical bytes do not
//! count, as in the replica after speculative-page validation; `METERING.md` §5).
//!
//! To find the candidates without comparing the whole heap, the instrumentation
//! ([`crate::instrument`]) gives the module a second, unmetered memory, the *written-page map*
//! ([`DirtyMap`]), and every store, `memory.fill`, `memory.copy` and `memory.init` first sets the
//! map's byte of the 4 KiB page it writes (as the replica does for stable memory with its
//! Wasm-native bytemap). System API functions that write the heap mark the map from the host.
//! After a message the engine reads and clears the map ([`take_written_pages`]) and compares,
//! commits or restores only those pages ([`HeapShadow::commit_pages`],
//! [`HeapShadow::restore_pages`]): the host work per message follows the pages the message
//! wrote, not the heap size. The whole-heap comparison ([`HeapShadow::dirty_pages`],
//! [`HeapShadow::matches`]) remains as the oracle that tests and
//! [`crate::Canister::set_dirty_page_check`] compare the tracked counts with.

use crate::stable::OS_PAGE;

const PAGE: usize = OS_PAGE as usize;
/// log2 of the heap page size the map tracks (4 KiB).
pub const PAGE_SHIFT: u32 = 12;
/// log2 of the number of map entries one summary byte covers (64).
pub const SUMMARY_SHIFT: u32 = 6;

/// Layout of the written-page map memory.
///
/// Bytes `[0, tracked]` hold one entry per heap page `0..tracked` plus the overflow entry
/// `tracked` ("some page at or beyond `tracked` was written"); the summary starts at
/// [`Self::summary_offset`] with one byte per 64 entries, so that the host finds the written
/// entries by reading `tracked / 64` summary bytes. A non-zero byte means "written".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DirtyMap {
    /// Heap pages tracked one by one: 2^20 (4 GiB, the whole wasm32 address space) for a 32-bit
    /// heap, 2^24 (64 GiB) for a 64-bit one. Writes beyond mark the overflow entry, and the host
    /// then compares every page beyond `tracked` (never in practice).
    pub tracked: u64,
}

impl DirtyMap {
    /// The map of a module whose heap is 64-bit (`memory64`) or 32-bit.
    pub const fn for_memory(memory64: bool) -> DirtyMap {
        DirtyMap {
            tracked: if memory64 { 1 << 24 } else { 1 << 20 },
        }
    }

    /// Offset of the summary bytes in the map memory.
    pub const fn summary_offset(self) -> u64 {
        self.tracked + 64
    }

    /// Number of summary bytes (covering entries `0..=tracked`).
    pub const fn summary_len(self) -> u64 {
        (self.tracked >> SUMMARY_SHIFT) + 1
    }

    /// Size of the map memory in 64 KiB wasm pages.
    pub const fn wasm_pages(self) -> u64 {
        (self.summary_offset() + self.summary_len()).div_ceil(65536)
    }

    /// Marks the heap pages of the byte range `[start, start + len)` as written (host writes;
    /// the same rule as the injected helper: ranges reaching past `tracked` set the overflow
    /// entry). `map` is the map memory.
    pub fn mark_range(self, map: &mut [u8], start: u64, len: u64) {
        if len == 0 {
            return;
        }
        let first = (start >> PAGE_SHIFT).min(self.tracked);
        let last = match start.checked_add(len - 1) {
            Some(end) => (end >> PAGE_SHIFT).min(self.tracked),
            None => self.tracked,
        };
        let summary = self.summary_offset();
        for p in first..=last {
            if let Some(b) = map.get_mut(p as usize) {
                *b = 1;
            }
            if let Some(b) = map.get_mut((summary + (p >> SUMMARY_SHIFT)) as usize) {
                *b = 1;
            }
        }
    }
}

/// Reads and clears the written-page map `map` of a heap of `heap_pages` 4 KiB pages; returns
/// the candidate pages in increasing order. Each marked page `p` yields `p` and `p + 1` (a store
/// marks the page of its first byte; an unaligned store of up to 16 bytes may reach into the
/// next page), limited to the heap. Costs one read per 64 tracked pages of the heap plus the
/// work on the marked pages. Marks beyond the heap (left by stores that trapped) stay; they
/// only add candidates should the heap grow over them.
pub fn take_written_pages(layout: DirtyMap, map: &mut [u8], heap_pages: u64) -> Vec<u64> {
    let mut pages: Vec<u64> = Vec::new();
    let mut push = |p: u64| {
        if p < heap_pages && pages.last().is_none_or(|&l| l < p) {
            pages.push(p);
        }
    };
    let summary = layout.summary_offset() as usize;
    let entries = heap_pages.min(layout.tracked);
    let groups = entries.div_ceil(1 << SUMMARY_SHIFT) as usize;
    let mut g = 0usize;
    while g < groups {
        // Skip eight clear summary bytes at a time.
        if g + 8 <= groups {
            let word = &map[summary + g..summary + g + 8];
            if word.iter().all(|&b| b == 0) {
                g += 8;
                continue;
            }
        }
        if map[summary + g] != 0 {
            map[summary + g] = 0;
            let lo = g << SUMMARY_SHIFT;
            let hi = ((g + 1) << SUMMARY_SHIFT).min(layout.tracked as usize);
            for (p, entry) in map[lo..hi].iter_mut().enumerate() {
                if *entry != 0 {
                    *entry = 0;
                    let p = (lo + p) as u64;
                    push(p);
                    push(p + 1);
                }
            }
        }
        g += 1;
    }
    let overflow = layout.tracked as usize;
    if heap_pages > layout.tracked && map[overflow] != 0 {
        map[overflow] = 0;
        map[summary + (overflow >> SUMMARY_SHIFT)] = 0;
        for p in layout.tracked..heap_pages {
            push(p);
        }
    }
    pages
}

/// The heap as of the last commit.
#[derive(Debug, Clone, Default)]
pub struct HeapShadow {
    bytes: Vec<u8>,
    /// Pages committed as dirty since the shadow was taken of a fresh instance (a bit per
    /// page): the only pages in which the committed heap can differ from a fresh instance of
    /// the same module, grown to the same size.
    modified: Vec<u64>,
}

fn is_zero(p: &[u8]) -> bool {
    // Compare in 8-byte words; the optimizer turns this into wide loads.
    p.chunks_exact(8)
        .all(|w| u64::from_ne_bytes([w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]]) == 0)
        && p.chunks_exact(8).remainder().iter().all(|&b| b == 0)
}

fn page_range(p: u64, len: usize) -> std::ops::Range<usize> {
    let start = (p as usize).saturating_mul(PAGE).min(len);
    start..(start + PAGE).min(len)
}

impl HeapShadow {
    /// A shadow of `heap` as it is now, right after instantiation (no page modified yet).
    pub fn new(heap: &[u8]) -> Self {
        HeapShadow {
            bytes: heap.to_vec(),
            modified: Vec::new(),
        }
    }

    /// Size of the shadowed heap in bytes.
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// True if the shadowed heap is empty (module without memory).
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// The shadowed bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// Whether page `p` of `heap` differs from the shadow (a page beyond the shadow, in memory
    /// grown since, from zero).
    fn differs(&self, heap: &[u8], p: u64) -> bool {
        let r = page_range(p, heap.len());
        let old = page_range(p, self.bytes.len());
        let (common, grown) = heap[r].split_at(old.len());
        common != &self.bytes[old] || !is_zero(grown)
    }

    /// Counts the dirty pages of `heap` (which may have grown) by comparing all of it with the
    /// shadow: the full-scan oracle of the written-page map. Changes nothing.
    pub fn dirty_pages(&self, heap: &[u8]) -> u64 {
        (0..heap.len().div_ceil(PAGE) as u64)
            .filter(|&p| self.differs(heap, p))
            .count() as u64
    }

    /// True if `heap` equals the shadow byte for byte (a full comparison, for checks).
    pub fn matches(&self, heap: &[u8]) -> bool {
        heap == self.bytes.as_slice()
    }

    /// The dirty pages among `pages` (increasing, from [`take_written_pages`]), without
    /// changing anything. Every page of `heap` outside `pages` must equal the shadow.
    pub fn dirty_pages_among(&self, heap: &[u8], pages: &[u64]) -> Vec<u64> {
        pages
            .iter()
            .copied()
            .filter(|&p| self.differs(heap, p))
            .collect()
    }

    /// Makes `heap` the new committed state, given that only `pages` may differ from the
    /// shadow; returns the dirty pages. Growth extends the shadow with zeros.
    pub fn commit_pages(&mut self, heap: &[u8], pages: &[u64]) -> Vec<u64> {
        if heap.len() > self.bytes.len() {
            self.bytes.resize(heap.len(), 0);
        }
        let mut dirty = Vec::new();
        for &p in pages {
            let r = page_range(p, heap.len());
            if self.bytes[r.clone()] != heap[r.clone()] {
                self.bytes[r.clone()].copy_from_slice(&heap[r]);
                let (word, bit) = ((p / 64) as usize, p % 64);
                if self.modified.len() <= word {
                    self.modified.resize(word + 1, 0);
                }
                self.modified[word] |= 1 << bit;
                dirty.push(p);
            }
        }
        dirty
    }

    /// Restores `heap` (of the same size as the shadow) to the committed state, given that only
    /// `pages` may differ; returns the pages that were dirty. Callers re-create the memory when
    /// its size changed.
    pub fn restore_pages(&self, heap: &mut [u8], pages: &[u64]) -> Vec<u64> {
        debug_assert_eq!(heap.len(), self.bytes.len());
        let mut dirty = Vec::new();
        for &p in pages {
            let r = page_range(p, heap.len());
            if heap[r.clone()] != self.bytes[r.clone()] {
                heap[r.clone()].copy_from_slice(&self.bytes[r]);
                dirty.push(p);
            }
        }
        dirty
    }

    /// Copies the committed state into `heap`, the memory of a fresh instance of the same
    /// module grown to the shadow's size: only the pages committed as modified since the
    /// shadow was taken differ there.
    pub fn restore_fresh(&self, heap: &mut [u8]) {
        for (word, bits) in self.modified.iter().enumerate() {
            let mut bits = *bits;
            while bits != 0 {
                let p = word as u64 * 64 + bits.trailing_zeros() as u64;
                bits &= bits - 1;
                let r = page_range(p, heap.len().min(self.bytes.len()));
                heap[r.clone()].copy_from_slice(&self.bytes[r]);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAP: DirtyMap = DirtyMap { tracked: 256 };

    fn map() -> Vec<u8> {
        vec![0u8; (MAP.summary_offset() + MAP.summary_len()) as usize]
    }

    #[test]
    fn layout_sizes() {
        let m32 = DirtyMap::for_memory(false);
        assert_eq!(m32.tracked, 1 << 20);
        assert_eq!(m32.summary_len(), (1 << 14) + 1);
        assert_eq!(m32.wasm_pages(), 17);
        assert_eq!(DirtyMap::for_memory(true).wasm_pages(), 261);
    }

    #[test]
    fn marks_are_read_once_and_include_the_next_page() {
        let mut m = map();
        MAP.mark_range(&mut m, 10, 1);
        MAP.mark_range(&mut m, 3 * OS_PAGE - 1, 2);
        MAP.mark_range(&mut m, 200 * OS_PAGE, 0);
        assert_eq!(take_written_pages(MAP, &mut m, 100), vec![0, 1, 2, 3, 4]);
        assert!(m.iter().all(|&b| b == 0));
        assert_eq!(take_written_pages(MAP, &mut m, 100), Vec::<u64>::new());
        // Pages beyond the heap are not candidates; the last page has no successor.
        MAP.mark_range(&mut m, 99 * OS_PAGE, 1);
        assert_eq!(take_written_pages(MAP, &mut m, 100), vec![99]);
        // A range past `tracked` sets the overflow entry: every page beyond is a candidate.
        MAP.mark_range(&mut m, 255 * OS_PAGE, 10 * OS_PAGE);
        assert_eq!(
            take_written_pages(MAP, &mut m, 259),
            vec![255, 256, 257, 258]
        );
        MAP.mark_range(&mut m, u64::MAX - 5, 10);
        assert_eq!(m[MAP.tracked as usize], 1);
    }

    #[test]
    fn dirty_commit_restore() {
        let mut heap = vec![0u8; 4 * PAGE];
        let mut shadow = HeapShadow::new(&heap);
        let all: Vec<u64> = (0..4).collect();
        heap[10] = 1;
        heap[3 * PAGE + 5] = 2;
        assert_eq!(shadow.dirty_pages(&heap), 2);
        assert_eq!(shadow.dirty_pages_among(&heap, &[0, 1]), vec![0]);
        assert_eq!(shadow.commit_pages(&heap, &all), vec![0, 3]);
        assert_eq!(shadow.dirty_pages(&heap), 0);
        assert!(shadow.matches(&heap));
        // Writing identical bytes is not dirty.
        heap[10] = 1;
        assert_eq!(shadow.dirty_pages(&heap), 0);
        heap[PAGE] = 9;
        assert_eq!(shadow.restore_pages(&mut heap, &[1, 2]), vec![1]);
        assert_eq!(heap[PAGE], 0);
        // Growth: zero pages are clean, written ones dirty.
        let mut grown = heap.clone();
        grown.resize(8 * PAGE, 0);
        grown[6 * PAGE] = 7;
        assert_eq!(shadow.dirty_pages(&grown), 1);
        assert_eq!(shadow.dirty_pages_among(&grown, &[5, 6, 7]), vec![6]);
        assert_eq!(shadow.commit_pages(&grown, &[6, 7]), vec![6]);
        assert_eq!(shadow.len(), 8 * PAGE);
        assert!(shadow.matches(&grown));
        // A fresh instance (zeros) grown to the size gets exactly the modified pages back.
        let mut fresh = vec![0u8; 8 * PAGE];
        shadow.restore_fresh(&mut fresh);
        assert_eq!(fresh, grown);
    }
}
