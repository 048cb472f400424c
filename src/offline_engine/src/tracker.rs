//! The deterministic memory tracker's page rules (`METERING.md` §10), for profiles that have
//! it ([`crate::metering::Tracker`]).
//!
//! The replica maps a canister's memories without access rights and lets the first access to
//! each 64 KiB Wasm page fault (`rs/memory_tracker/src/deterministic.rs`): a read maps the Wasm
//! page readable and marks it accessed, a write marks it dirty as well (a write to a page that
//! was only read marks it dirty). Each mark charges every OS page of the Wasm page, in the
//! message, when it happens. Executions whose changes the replica discards
//! (`ModificationTracking::Ignore`: replicated and non-replicated queries, inspect message)
//! map the page readable and writable at once, so they pay the access only.
//!
//! The engine cannot take faults inside wasmtime, so it keeps the same states explicitly:
//!
//! - the heap's: a third memory of the instrumented module, the *tracker map* ([`TrackerMap`]),
//!   one state byte per heap Wasm page plus the lists of pages that changed state. Before every
//!   load and store the injected code compares the state of the Wasm page with what the access
//!   needs and calls an unmetered helper when it falls short (or when the access crosses into
//!   the next Wasm page); the helper charges the counter and records the page
//!   ([`crate::instrument`]). The host applies the same rule ([`TrackerMap::touch`]) to the heap
//!   ranges the System API reads and writes.
//! - stable memory's: [`StablePages`], on the host, which runs stable memory.
//!
//! After each execution the engine takes the lists ([`TrackerMap::take`],
//! [`StablePages::take`]) and clears the states: the next execution starts untouched, as it
//! starts with a fresh tracker in the replica.

use std::collections::{HashMap, HashSet};

use crate::stable::{OS_PAGE, WASM_PAGE};

/// log2 of the Wasm page size (64 KiB): the tracker's granularity.
pub const WASM_PAGE_SHIFT: u32 = 16;

/// A page not accessed yet in this execution.
pub const UNTOUCHED: u8 = 0;
/// A page accessed (read) but not written.
pub const ACCESSED: u8 = 1;
/// A page written (or, in an execution that ignores modifications, accessed).
pub const WRITTEN: u8 = 2;

/// Whether the current execution tracks modifications (the replica's `ModificationTracking`,
/// by kind of execution in `ApiType::modification_tracking`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tracking {
    /// Accesses and writes are charged separately (updates, callbacks, cleanup, system tasks,
    /// install and upgrade entry points, composite queries).
    Track,
    /// Every access is charged once, read or write (replicated and non-replicated queries,
    /// `canister_inspect_message`).
    Ignore,
}

/// What one access does to the state of one Wasm page: the new state and the tracker events it
/// charges (0, 1 or 2 times the page's charge), or `None` when the page needs nothing.
pub(crate) fn transition(state: u8, write: bool, tracking: Tracking) -> Option<(u8, u64)> {
    match (tracking, state, write) {
        (Tracking::Ignore, UNTOUCHED, _) => Some((WRITTEN, 1)),
        (Tracking::Track, UNTOUCHED, true) => Some((WRITTEN, 2)),
        (Tracking::Track, UNTOUCHED, false) => Some((ACCESSED, 1)),
        (Tracking::Track, ACCESSED, true) => Some((WRITTEN, 1)),
        _ => None,
    }
}

/// Layout of the tracker map memory of an instrumented module with a heap.
///
/// Bytes `[0, entries]` hold one state per heap Wasm page ([`UNTOUCHED`], [`ACCESSED`],
/// [`WRITTEN`]; entry `entries` is always untouched); then the *pair states*, one per page: the
/// lower of its state and the next page's, which lets the injected code clear an access of up
/// to 16 bytes with one comparison, wherever in the page it starts; then the mode byte (1:
/// [`Tracking::Ignore`]); then two lists, each a `u32` count followed by `u32` page indices:
/// the pages whose first access was charged, and the pages whose first write was. A wasm32 heap
/// has 2^16 Wasm pages; the map has 2^17 entries so that the page of any address plus static
/// offset (below 2^33) indexes it without a bound check (pages beyond the heap are never
/// charged: such an access traps). A wasm64 heap is tracked page by page up to 2^20 Wasm pages
/// (64 GiB); every page beyond shares the last entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TrackerMap {
    /// Number of state entries.
    pub entries: u64,
    /// For a wasm64 heap, the shared entry of the pages at or beyond it (`entries - 1`).
    pub overflow: Option<u64>,
}

impl TrackerMap {
    /// The map of a 64-bit (`memory64`) or 32-bit heap.
    pub const fn for_memory(memory64: bool) -> TrackerMap {
        if memory64 {
            TrackerMap {
                entries: (1 << 20) + 1,
                overflow: Some(1 << 20),
            }
        } else {
            TrackerMap {
                entries: 1 << 17,
                overflow: None,
            }
        }
    }

    /// Offset of the pair states.
    pub const fn pair_offset(self) -> u64 {
        (self.entries + 1).div_ceil(8) * 8
    }

    /// Offset of the mode byte.
    pub const fn mode_offset(self) -> u64 {
        self.pair_offset() + self.entries.div_ceil(8) * 8
    }

    /// Offset of the list of pages charged for their first access (its count; the indices
    /// follow).
    pub const fn accessed_list(self) -> u64 {
        self.mode_offset() + 8
    }

    /// Offset of the list of pages charged for their first write.
    pub const fn dirty_list(self) -> u64 {
        self.accessed_list() + 4 + 4 * self.entries
    }

    /// Size of the map memory in 64 KiB wasm pages.
    pub const fn wasm_pages(self) -> u64 {
        (self.dirty_list() + 4 + 4 * self.entries).div_ceil(WASM_PAGE)
    }

    /// The state entry of Wasm page `page`.
    pub fn entry(self, page: u64) -> u64 {
        match self.overflow {
            Some(o) => page.min(o),
            None => page,
        }
    }

    /// Sets the tracking of the next execution (the injected code and [`Self::touch`] read it).
    pub fn set_mode(self, map: &mut [u8], tracking: Tracking) {
        map[self.mode_offset() as usize] = u8::from(tracking == Tracking::Ignore);
    }

    fn tracking(self, map: &[u8]) -> Tracking {
        if map[self.mode_offset() as usize] == 0 {
            Tracking::Track
        } else {
            Tracking::Ignore
        }
    }

    /// Sets the state of entry `page` and the pair states that depend on it.
    fn set_state(self, map: &mut [u8], page: u64, state: u8) {
        let p = page as usize;
        map[p] = state;
        let pairs = self.pair_offset() as usize;
        map[pairs + p] = state.min(map[p + 1]);
        if p > 0 {
            map[pairs + p - 1] = map[p - 1].min(state);
        }
    }

    fn push(map: &mut [u8], list: u64, page: u64) {
        let at = list as usize;
        let n = u32::from_le_bytes(map[at..at + 4].try_into().unwrap_or_default());
        let slot = at + 4 + 4 * n as usize;
        map[slot..slot + 4].copy_from_slice(&(page as u32).to_le_bytes());
        map[at..at + 4].copy_from_slice(&(n + 1).to_le_bytes());
    }

    /// Applies an access of `len` bytes at `start` to a heap of `heap_len` bytes, as the injected
    /// helper does for wasm code: returns the number of tracker events it charges (each costs
    /// [`crate::metering::Tracker::wasm_page_charge`]). An empty range, or one that does not lie
    /// within the heap (the access traps), charges nothing.
    pub fn touch(self, map: &mut [u8], start: u64, len: u64, write: bool, heap_len: u64) -> u64 {
        let Some(end) = start.checked_add(len) else {
            return 0;
        };
        if len == 0 || end > heap_len {
            return 0;
        }
        let tracking = self.tracking(map);
        let first = self.entry(start >> WASM_PAGE_SHIFT);
        let last = self.entry((end - 1) >> WASM_PAGE_SHIFT);
        let mut events = 0;
        for page in first..=last {
            let state = map[page as usize];
            let Some((new, n)) = transition(state, write, tracking) else {
                continue;
            };
            if state == UNTOUCHED {
                Self::push(map, self.accessed_list(), page);
            }
            if new == WRITTEN && tracking == Tracking::Track {
                Self::push(map, self.dirty_list(), page);
            }
            self.set_state(map, page, new);
            events += n;
        }
        events
    }

    /// Reads and clears the lists and the states they name: the pages charged for their first
    /// access and those charged for their first write, each in increasing order.
    pub fn take(self, map: &mut [u8]) -> (Vec<u64>, Vec<u64>) {
        let mut read = |list: u64| {
            let at = list as usize;
            let n = u32::from_le_bytes(map[at..at + 4].try_into().unwrap_or_default()) as usize;
            let mut pages: Vec<u64> = map[at + 4..at + 4 + 4 * n]
                .chunks_exact(4)
                .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as u64)
                .collect();
            map[at..at + 4].fill(0);
            pages.sort_unstable();
            pages
        };
        let accessed = read(self.accessed_list());
        let dirty = read(self.dirty_list());
        // Every page that left UNTOUCHED is in the accessed list.
        for &p in &accessed {
            self.set_state(map, p, UNTOUCHED);
        }
        (accessed, dirty)
    }
}

/// The tracker's states of stable memory, which the engine runs on the host (the replica runs
/// it as a second Wasm memory, tracked like the heap), and the OS pages the execution accessed,
/// which the replica's stable-memory System API replacements count for the accessed-page
/// limit.
#[derive(Debug, Default)]
pub struct StablePages {
    states: HashMap<u64, u8>,
    accessed: Vec<u64>,
    dirty: Vec<u64>,
    accessed_os_pages: HashSet<u64>,
}

/// The OS pages of `len > 0` bytes at `offset`.
fn os_pages(offset: u64, len: u64) -> std::ops::RangeInclusive<u64> {
    offset / OS_PAGE..=(offset + len - 1) / OS_PAGE
}

impl StablePages {
    /// OS pages accessed in this execution if `[offset, offset + len)` is accessed too.
    pub fn accessed_os_pages_with(&self, offset: u64, len: u64) -> u64 {
        if len == 0 {
            return self.accessed_os_pages.len() as u64;
        }
        let new = os_pages(offset, len)
            .filter(|p| !self.accessed_os_pages.contains(p))
            .count();
        (self.accessed_os_pages.len() + new) as u64
    }

    /// Applies a System API read of `len` bytes at `offset` (within stable memory); returns the
    /// number of tracker events it charges. The replica's `stable_read` replacement
    /// (`system_api_replacements.rs`) serves a read none of whose OS pages the execution has
    /// accessed yet (its bytemap of stable memory) through the host (`stable_read_first_access`,
    /// which copies from the page map): the tracker sees no access of stable memory, and only the
    /// heap's destination is charged. Any other read copies from the stable memory the tracker
    /// maps (`memory.copy`) and is charged as any access ([`Self::touch`]).
    pub fn read(&mut self, offset: u64, len: u64, tracking: Tracking) -> u64 {
        if len == 0 {
            return 0;
        }
        let pages = os_pages(offset, len);
        if pages.clone().all(|p| !self.accessed_os_pages.contains(&p)) {
            self.accessed_os_pages.extend(pages);
            return 0;
        }
        self.touch(offset, len, false, tracking)
    }

    /// Applies an access of `len` bytes at `offset` (within stable memory) through the memory
    /// the tracker maps; returns the number of tracker events it charges.
    pub fn touch(&mut self, offset: u64, len: u64, write: bool, tracking: Tracking) -> u64 {
        if len == 0 {
            return 0;
        }
        let last_byte = offset + len - 1;
        self.accessed_os_pages.extend(os_pages(offset, len));
        let mut events = 0;
        for page in offset >> WASM_PAGE_SHIFT..=last_byte >> WASM_PAGE_SHIFT {
            let state = self.states.get(&page).copied().unwrap_or(UNTOUCHED);
            let Some((new, n)) = transition(state, write, tracking) else {
                continue;
            };
            if state == UNTOUCHED {
                self.accessed.push(page);
            }
            if new == WRITTEN && tracking == Tracking::Track {
                self.dirty.push(page);
            }
            self.states.insert(page, new);
            events += n;
        }
        events
    }

    /// The Wasm pages charged for their first access and for their first write (increasing),
    /// and a fresh start for the next execution.
    pub fn take(&mut self) -> (Vec<u64>, Vec<u64>) {
        self.states.clear();
        self.accessed_os_pages.clear();
        let mut accessed = std::mem::take(&mut self.accessed);
        let mut dirty = std::mem::take(&mut self.dirty);
        accessed.sort_unstable();
        dirty.sort_unstable();
        (accessed, dirty)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map_of(layout: TrackerMap) -> Vec<u8> {
        vec![0u8; (layout.wasm_pages() * WASM_PAGE) as usize]
    }

    #[test]
    fn layouts_fit_their_memory() {
        let m32 = TrackerMap::for_memory(false);
        assert_eq!(m32.pair_offset(), (1 << 17) + 8);
        assert_eq!(m32.mode_offset(), (2 << 17) + 8);
        assert_eq!(m32.wasm_pages(), 21);
        let m64 = TrackerMap::for_memory(true);
        assert_eq!(m64.entry(5 << 20), 1 << 20);
        assert_eq!(m64.wasm_pages(), 161);
    }

    #[test]
    fn reads_then_writes_charge_access_then_dirty() {
        let layout = TrackerMap::for_memory(false);
        let mut map = map_of(layout);
        let heap = 4 * WASM_PAGE;
        layout.set_mode(&mut map, Tracking::Track);
        assert_eq!(layout.touch(&mut map, 10, 8, false, heap), 1);
        // Page 0 read, page 1 not: the pair state of page 0 is untouched.
        let pairs = layout.pair_offset() as usize;
        assert_eq!(map[pairs], UNTOUCHED);
        assert_eq!(layout.touch(&mut map, 100, 8, false, heap), 0);
        assert_eq!(layout.touch(&mut map, 100, 8, true, heap), 1);
        assert_eq!(layout.touch(&mut map, 100, 8, true, heap), 0);
        // A write to an untouched page: access and write. Crossing into page 2 counts it too.
        assert_eq!(layout.touch(&mut map, WASM_PAGE + 65_530, 8, true, heap), 4);
        assert_eq!(&map[pairs..pairs + 3], &[WRITTEN, WRITTEN, UNTOUCHED]);
        // Beyond the heap or empty: nothing (the access traps).
        assert_eq!(
            layout.touch(&mut map, 3 * WASM_PAGE + 1, WASM_PAGE, true, heap),
            0
        );
        assert_eq!(layout.touch(&mut map, 0, 0, true, heap), 0);
        assert_eq!(layout.touch(&mut map, u64::MAX, 2, true, heap), 0);
        assert_eq!(layout.take(&mut map), (vec![0, 1, 2], vec![0, 1, 2]));
        // The states and pair states are untouched again, the lists empty.
        assert!(map[..layout.mode_offset() as usize].iter().all(|&b| b == 0));
        assert_eq!(layout.take(&mut map), (vec![], vec![]));
        // Ignoring modifications: one charge per page, write or not.
        layout.set_mode(&mut map, Tracking::Ignore);
        assert_eq!(layout.touch(&mut map, 0, 1, false, heap), 1);
        assert_eq!(layout.touch(&mut map, 0, 1, true, heap), 0);
        assert_eq!(layout.touch(&mut map, WASM_PAGE, 1, true, heap), 1);
        assert_eq!(layout.take(&mut map), (vec![0, 1], vec![]));
    }

    #[test]
    fn stable_pages_count_os_pages_for_the_limit() {
        let mut s = StablePages::default();
        assert_eq!(s.accessed_os_pages_with(4095, 2), 2);
        assert_eq!(s.touch(4095, 2, false, Tracking::Track), 1);
        assert_eq!(s.touch(0, 1, true, Tracking::Track), 1);
        assert_eq!(s.touch(WASM_PAGE, 1, true, Tracking::Track), 2);
        assert_eq!(s.accessed_os_pages_with(0, 8192), 3);
        assert_eq!(s.take(), (vec![0, 1], vec![0, 1]));
        assert_eq!(s.accessed_os_pages_with(0, 1), 1);
    }
}
