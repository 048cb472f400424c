//! Keeps the write queue across upgrades in stable memory.
//!
//! ic-rusqlite owns virtual memories 101–119 (file system) and 120 (the database) of its
//! `MemoryManager`; the queue lives in [`QUEUE_MEMORY_ID`] of the same manager. Layout: an 8-byte
//! little-endian length, then the queue state as JSON. A length of 0 means "no saved queue".

use batch_core::QueueState;
use ic_stable_structures::Memory;
use ic_stable_structures::memory_manager::MemoryId;

/// The virtual memory that holds the saved queue (outside ic-rusqlite's 101–120).
pub const QUEUE_MEMORY_ID: u8 = 1;

const WASM_PAGE: u64 = 65_536;

fn memory() -> impl Memory {
    ic_rusqlite::MEMORY_MANAGER.with_borrow(|m| m.get(MemoryId::new(QUEUE_MEMORY_ID)))
}

/// Writes `state` to stable memory. Traps if stable memory cannot grow: pre_upgrade must not
/// silently drop acknowledged operations.
pub fn save(state: &QueueState) {
    let bytes = serde_json::to_vec(state).expect("serializing the queue state");
    let mem = memory();
    let needed = 8 + bytes.len() as u64;
    let have = mem.size() * WASM_PAGE;
    if needed > have {
        let pages = (needed - have).div_ceil(WASM_PAGE);
        assert!(
            mem.grow(pages) >= 0,
            "stable memory full: cannot save {} pending bytes",
            bytes.len()
        );
    }
    mem.write(0, &(bytes.len() as u64).to_le_bytes());
    mem.write(8, &bytes);
}

/// Reads and clears the saved queue state, if any.
pub fn take() -> Option<QueueState> {
    let mem = memory();
    if mem.size() == 0 {
        return None;
    }
    let mut len = [0u8; 8];
    mem.read(0, &mut len);
    let len = u64::from_le_bytes(len) as usize;
    if len == 0 {
        return None;
    }
    let mut bytes = vec![0u8; len];
    mem.read(8, &mut bytes);
    let state = serde_json::from_slice(&bytes).expect("decoding the saved queue state");
    mem.write(0, &0u64.to_le_bytes());
    Some(state)
}
