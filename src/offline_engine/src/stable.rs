//! Stable memory: 64 KiB wasm pages stored as sparse 4 KiB OS pages, with a per-message undo
//! log so a trapped message or a query leaves it exactly as before (`METERING.md` §4).
//!
//! Costs are charged by the System API layer; this module only reports how many pages of a
//! write range are not yet dirty in the current message.

use std::collections::HashMap;

/// Size of a wasm page (stable memory is counted in these).
pub const WASM_PAGE: u64 = 64 * 1024;
/// Size of an OS page (dirty pages are counted in these).
pub const OS_PAGE: u64 = 4096;
const PAGES_PER_WASM_PAGE: u64 = WASM_PAGE / OS_PAGE;
/// Largest stable memory the IC allows (500 GiB), in wasm pages.
pub const MAX_STABLE_WASM_PAGES: u64 = 500 * 1024 * 1024 * 1024 / WASM_PAGE;
/// Largest stable memory the 32-bit API may address (4 GiB), in wasm pages.
pub const MAX_32BIT_WASM_PAGES: u64 = 65_536;

type Page = Box<[u8; OS_PAGE as usize]>;

/// A stable memory access beyond the current size.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("stable memory out of bounds")]
pub struct OutOfBounds;

/// Stable memory with copy-on-write undo.
#[derive(Debug, Default, Clone)]
pub struct StableMemory {
    pages: Vec<Option<Page>>,
    size_wasm_pages: u64,
    /// Original contents of the OS pages written in the current message.
    undo: HashMap<u64, Option<Page>>,
    saved_size: u64,
}

impl StableMemory {
    /// Current size in wasm pages.
    pub fn size_pages(&self) -> u64 {
        self.size_wasm_pages
    }

    /// Current size in bytes.
    pub fn size_bytes(&self) -> u64 {
        self.size_wasm_pages * WASM_PAGE
    }

    /// Starts a message: forget the previous undo log.
    pub fn begin(&mut self) {
        self.undo.clear();
        self.saved_size = self.size_wasm_pages;
    }

    /// Number of OS pages written since [`Self::begin`].
    pub fn dirty_pages(&self) -> u64 {
        self.undo.len() as u64
    }

    /// The OS pages written since [`Self::begin`], in increasing order.
    pub fn written_pages(&self) -> Vec<u64> {
        let mut pages: Vec<u64> = self.undo.keys().copied().collect();
        pages.sort_unstable();
        pages
    }

    /// Keeps the changes of the current message; returns its dirty pages.
    pub fn commit(&mut self) -> Vec<u64> {
        let pages = self.written_pages();
        self.undo.clear();
        self.saved_size = self.size_wasm_pages;
        pages
    }

    /// Discards the changes of the current message; returns its dirty pages.
    pub fn rollback(&mut self) -> Vec<u64> {
        let pages = self.written_pages();
        for (index, original) in self.undo.drain() {
            if let Some(slot) = self.pages.get_mut(index as usize) {
                *slot = original;
            }
        }
        self.size_wasm_pages = self.saved_size;
        self.pages
            .truncate((self.saved_size * PAGES_PER_WASM_PAGE) as usize);
        pages
    }

    /// Grows by `new_pages` wasm pages if the result stays within `max_pages`; returns the
    /// previous size, or -1 (as the System API does) without growing.
    pub fn grow(&mut self, new_pages: u64, max_pages: u64) -> i64 {
        let old = self.size_wasm_pages;
        match old.checked_add(new_pages) {
            Some(n) if n <= max_pages => {
                self.size_wasm_pages = n;
                self.pages
                    .resize_with((n * PAGES_PER_WASM_PAGE) as usize, || None);
                old as i64
            }
            _ => -1,
        }
    }

    fn check(&self, offset: u64, len: u64) -> Result<(), OutOfBounds> {
        match offset.checked_add(len) {
            Some(end) if end <= self.size_bytes() => Ok(()),
            _ => Err(OutOfBounds),
        }
    }

    /// Copies `dst.len()` bytes starting at `offset` into `dst`.
    pub fn read(&self, offset: u64, dst: &mut [u8]) -> Result<(), OutOfBounds> {
        self.check(offset, dst.len() as u64)?;
        for (page, in_page, buf) in page_chunks(offset, dst.len()) {
            match self.pages.get(page as usize).and_then(|p| p.as_ref()) {
                Some(p) => dst[buf.clone()].copy_from_slice(&p[in_page..in_page + buf.len()]),
                None => dst[buf].fill(0),
            }
        }
        Ok(())
    }

    /// OS pages of `[offset, offset + len)` not yet written in the current message
    /// (each costs 1,000 instructions when written). Zero for an empty range.
    pub fn new_dirty_pages(&self, offset: u64, len: u64) -> u64 {
        if len == 0 {
            return 0;
        }
        let first = offset / OS_PAGE;
        let last = (offset + len - 1) / OS_PAGE;
        (first..=last)
            .filter(|p| !self.undo.contains_key(p))
            .count() as u64
    }

    /// Writes `src` at `offset`, recording the original pages for rollback.
    pub fn write(&mut self, offset: u64, src: &[u8]) -> Result<(), OutOfBounds> {
        self.check(offset, src.len() as u64)?;
        for (page, in_page, buf) in page_chunks(offset, src.len()) {
            let slot = &mut self.pages[page as usize];
            self.undo.entry(page).or_insert_with(|| slot.clone());
            let p = slot.get_or_insert_with(|| Box::new([0u8; OS_PAGE as usize]));
            p[in_page..in_page + buf.len()].copy_from_slice(&src[buf]);
        }
        Ok(())
    }

    /// The whole stable memory as bytes (for tests and snapshots; allocates its full size).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut v = vec![0u8; self.size_bytes() as usize];
        // The range is within bounds by construction.
        let _ = self.read(0, &mut v);
        v
    }
}

/// Splits the byte range `[offset, offset + len)` at OS-page boundaries: for each piece, its
/// page index, its start within that page, and its range within the caller's buffer.
fn page_chunks(
    offset: u64,
    len: usize,
) -> impl Iterator<Item = (u64, usize, std::ops::Range<usize>)> {
    let mut done = 0usize;
    std::iter::from_fn(move || {
        if done >= len {
            return None;
        }
        let pos = offset + done as u64;
        let in_page = (pos % OS_PAGE) as usize;
        let n = (OS_PAGE as usize - in_page).min(len - done);
        let piece = (pos / OS_PAGE, in_page, done..done + n);
        done += n;
        Some(piece)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grow_read_write_rollback() {
        let mut s = StableMemory::default();
        s.begin();
        assert_eq!(s.grow(1, 10), 0);
        assert_eq!(s.grow(20, 10), -1);
        assert_eq!(s.new_dirty_pages(4090, 10), 2);
        s.write(4090, b"0123456789").unwrap();
        assert_eq!(s.new_dirty_pages(4090, 10), 0);
        assert_eq!(s.dirty_pages(), 2);
        assert_eq!(s.commit(), vec![0, 1]);
        let mut buf = [0u8; 10];
        s.read(4090, &mut buf).unwrap();
        assert_eq!(&buf, b"0123456789");
        s.begin();
        s.write(4090, b"abcdefghij").unwrap();
        assert_eq!(s.grow(2, 10), 1);
        assert_eq!(s.rollback(), vec![0, 1]);
        assert_eq!(s.size_pages(), 1);
        s.read(4090, &mut buf).unwrap();
        assert_eq!(&buf, b"0123456789");
        assert_eq!(s.read(WASM_PAGE - 1, &mut buf), Err(OutOfBounds));
        assert_eq!(s.write(WASM_PAGE, b""), Ok(()));
    }
}
