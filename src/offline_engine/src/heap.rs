//! Heap (wasm memory) shadow copy: dirty-page detection and rollback.
//!
//! The shadow holds the heap as it was at the end of the last committed message. A 4 KiB page
//! is dirty when its bytes differ from the shadow (pages written with identical bytes do not
//! count, as in the replica after speculative-page validation; `METERING.md` §5).
//! Committing copies only the dirty pages; rolling back copies them the other way.

use crate::stable::OS_PAGE;

const PAGE: usize = OS_PAGE as usize;

/// The heap as of the last commit.
#[derive(Debug, Clone, Default)]
pub struct HeapShadow {
    bytes: Vec<u8>,
}

fn page_differs(a: &[u8], b: &[u8]) -> bool {
    a != b
}

fn is_zero(p: &[u8]) -> bool {
    // Compare in 8-byte words; the optimizer turns this into wide loads.
    p.chunks_exact(8)
        .all(|w| u64::from_ne_bytes([w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]]) == 0)
        && p.chunks_exact(8).remainder().iter().all(|&b| b == 0)
}

impl HeapShadow {
    /// A shadow of `heap` as it is now (e.g. right after instantiation).
    pub fn new(heap: &[u8]) -> Self {
        HeapShadow {
            bytes: heap.to_vec(),
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

    /// Counts the dirty pages of `heap` (which may have grown) without changing anything.
    pub fn dirty_pages(&self, heap: &[u8]) -> u64 {
        let common = self.bytes.len().min(heap.len());
        let mut n = heap[..common]
            .chunks(PAGE)
            .zip(self.bytes[..common].chunks(PAGE))
            .filter(|(a, b)| page_differs(a, b))
            .count() as u64;
        n += heap[common..].chunks(PAGE).filter(|p| !is_zero(p)).count() as u64;
        n
    }

    /// Makes `heap` the new committed state; returns the number of dirty pages.
    pub fn commit(&mut self, heap: &[u8]) -> u64 {
        let common = self.bytes.len().min(heap.len());
        let mut n = 0u64;
        for (new, old) in heap[..common]
            .chunks(PAGE)
            .zip(self.bytes[..common].chunks_mut(PAGE))
        {
            if page_differs(new, old) {
                old.copy_from_slice(new);
                n += 1;
            }
        }
        if heap.len() > common {
            n += heap[common..].chunks(PAGE).filter(|p| !is_zero(p)).count() as u64;
            self.bytes.extend_from_slice(&heap[common..]);
        }
        n
    }

    /// Restores `heap` (of the same size as the shadow) to the committed state; returns the
    /// number of pages that were dirty. Callers re-create the memory when its size changed.
    pub fn restore(&self, heap: &mut [u8]) -> u64 {
        debug_assert_eq!(heap.len(), self.bytes.len());
        let mut n = 0u64;
        for (cur, old) in heap.chunks_mut(PAGE).zip(self.bytes.chunks(PAGE)) {
            if page_differs(cur, old) {
                cur.copy_from_slice(old);
                n += 1;
            }
        }
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dirty_commit_restore() {
        let mut heap = vec![0u8; 4 * PAGE];
        let mut shadow = HeapShadow::new(&heap);
        heap[10] = 1;
        heap[3 * PAGE + 5] = 2;
        assert_eq!(shadow.dirty_pages(&heap), 2);
        assert_eq!(shadow.commit(&heap), 2);
        assert_eq!(shadow.dirty_pages(&heap), 0);
        // Writing identical bytes is not dirty.
        heap[10] = 1;
        assert_eq!(shadow.dirty_pages(&heap), 0);
        heap[PAGE] = 9;
        assert_eq!(shadow.restore(&mut heap), 1);
        assert_eq!(heap[PAGE], 0);
        // Growth: zero pages are clean, written ones dirty.
        let mut grown = heap.clone();
        grown.resize(8 * PAGE, 0);
        grown[6 * PAGE] = 7;
        assert_eq!(shadow.commit(&grown), 1);
        assert_eq!(shadow.len(), 8 * PAGE);
    }
}
