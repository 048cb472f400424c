//! Keeps the canister's state across upgrades in stable memory: who may write, the database's
//! read-only mode, which pending ops are controller SQL, and the whole write queue with its
//! configuration (batch_core's versioned binary format, exact for every value).
//!
//! ic-rusqlite owns virtual memories 101–119 (file system) and 120 (the database) of its
//! `MemoryManager`; the saved state lives in [`STATE_MEMORY_ID`] of the same manager. Layout: an
//! 8-byte little-endian length (0: nothing saved), then `b"BCS"`, a format version byte, the
//! canister's part in postcard ([`Saved`]), and the queue as
//! [`batch_core::BatchQueue::save`] writes it. Format 1 had no read-only mode and no SQL
//! tickets: it restores as writable, with every pending op counted as controller SQL (so that
//! no caller's flush runs an op of the previous version that could trap). Format 2 had no
//! counters of keyed client batches: they restore as zero (the keys are in SQLite either way).
//!
//! `pre_upgrade` only writes; it never flushes. Its work is linear in the bytes written, which
//! the queue's `max_pending_bytes` (and the 1 KiB cap on each kept error text) bound.

use std::io::Write;

use batch_core::{BatchQueue, DedupCounters};
use bench_api::WriteAccess;
use candid::Principal;
use ic_stable_structures::Memory;
use ic_stable_structures::memory_manager::MemoryId;
use ic_stable_structures::writer::{BufferedWriter, Writer};
use serde::{Deserialize, Serialize};

/// The virtual memory that holds the saved state (outside ic-rusqlite's 101–120).
pub const STATE_MEMORY_ID: u8 = 1;

const MAGIC: &[u8; 3] = b"BCS";
const FORMAT_VERSION: u8 = 3;
/// Bytes buffered before each stable-memory write (postcard writes field by field).
const WRITE_BUFFER: usize = 64 * 1024;

/// The canister's part of the saved state, format 3 (the order of the fields is the format).
#[derive(Serialize, Deserialize)]
struct Saved {
    open: bool,
    writers: Vec<Principal>,
    read_only: bool,
    sql_tickets: Vec<u64>,
    dedup: DedupCounters,
}

/// The canister's part of format 2: no deduplication counters (they restore as zero).
#[derive(Deserialize)]
struct SavedV2 {
    open: bool,
    writers: Vec<Principal>,
    read_only: bool,
    sql_tickets: Vec<u64>,
}

/// The canister's part of format 1.
#[derive(Deserialize)]
struct SavedV1 {
    open: bool,
    writers: Vec<Principal>,
}

/// The canister's state besides the queue.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CanisterState {
    /// Who may write.
    pub write_access: WriteAccess,
    /// The registered writers.
    pub writers: Vec<Principal>,
    /// The database is read-only.
    pub read_only: bool,
    /// Tickets of the pending controller SQL ops.
    pub sql_tickets: Vec<u64>,
    /// The counters of the keyed client batches (the keys themselves are in SQLite).
    pub dedup: DedupCounters,
}

/// What [`take`] restores.
pub struct Restored {
    /// The canister's state.
    pub state: CanisterState,
    /// The queue, with the configuration it was saved with.
    pub queue: BatchQueue,
}

fn memory() -> impl Memory {
    ic_rusqlite::MEMORY_MANAGER.with_borrow(|m| m.get(MemoryId::new(STATE_MEMORY_ID)))
}

/// Counts the bytes passing to the stable-memory writer.
struct Counting<W> {
    inner: W,
    written: u64,
}

impl<W: Write> Write for Counting<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.written += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// Writes the state to stable memory. Traps only if stable memory cannot grow (the subnet is
/// out of memory): `pre_upgrade` must not drop acknowledged operations silently, and the trap
/// leaves the old canister running with its queue.
pub fn save(state: CanisterState, queue: &BatchQueue) {
    let mut mem = memory();
    let written = {
        let writer = BufferedWriter::new(WRITE_BUFFER, Writer::new(&mut mem, 8));
        let mut out = Counting {
            inner: writer,
            written: 0,
        };
        let saved = Saved {
            open: state.write_access == WriteAccess::Open,
            writers: state.writers,
            read_only: state.read_only,
            sql_tickets: state.sql_tickets,
            dedup: state.dedup,
        };
        out.write_all(MAGIC)
            .and_then(|()| out.write_all(&[FORMAT_VERSION]))
            .unwrap_or_else(|e| ic_cdk::trap(format!("saving the canister state: {e}")));
        let mut out = postcard::to_io(&saved, out)
            .unwrap_or_else(|e| ic_cdk::trap(format!("saving the canister state: {e}")));
        out = queue
            .save(out)
            .unwrap_or_else(|e| ic_cdk::trap(format!("saving the write queue: {e}")));
        out.flush()
            .unwrap_or_else(|e| ic_cdk::trap(format!("saving the write queue: {e}")));
        out.written
    };
    mem.write(0, &written.to_le_bytes());
}

/// Reads and clears the saved state, if any. A state this canister saved always restores;
/// anything else traps with the reason (the upgrade is then refused and the old version keeps
/// running).
pub fn take() -> Option<Restored> {
    let mem = memory();
    if mem.size() == 0 {
        return None;
    }
    let mut len = [0u8; 8];
    mem.read(0, &mut len);
    let len = u64::from_le_bytes(len);
    if len == 0 {
        return None;
    }
    let len = usize::try_from(len)
        .unwrap_or_else(|_| ic_cdk::trap(format!("saved state of {len} bytes")));
    let mut bytes = vec![0u8; len];
    mem.read(8, &mut bytes);
    let restored = decode(&bytes).unwrap_or_else(|e| ic_cdk::trap(e));
    mem.write(0, &0u64.to_le_bytes());
    Some(restored)
}

fn decode(bytes: &[u8]) -> Result<Restored, String> {
    let rest = bytes
        .strip_prefix(MAGIC.as_slice())
        .ok_or("the saved state was not written by this canister (no BCS header)")?;
    let (&version, payload) = rest.split_first().ok_or("the saved state is empty")?;
    let decoding = |e: postcard::Error| format!("decoding the saved canister state: {e}");
    let (saved, queue_bytes): (Saved, &[u8]) = match version {
        1 => {
            let (v1, rest): (SavedV1, &[u8]) =
                postcard::take_from_bytes(payload).map_err(decoding)?;
            let saved = Saved {
                open: v1.open,
                writers: v1.writers,
                read_only: false,
                // Filled in below with every pending ticket.
                sql_tickets: Vec::new(),
                dedup: DedupCounters::default(),
            };
            (saved, rest)
        }
        2 => {
            let (v2, rest): (SavedV2, &[u8]) =
                postcard::take_from_bytes(payload).map_err(decoding)?;
            let saved = Saved {
                open: v2.open,
                writers: v2.writers,
                read_only: v2.read_only,
                sql_tickets: v2.sql_tickets,
                dedup: DedupCounters::default(),
            };
            (saved, rest)
        }
        FORMAT_VERSION => postcard::take_from_bytes(payload).map_err(decoding)?,
        _ => {
            return Err(format!(
                "saved state format {version} is not supported (this version reads 1 to {FORMAT_VERSION})"
            ));
        }
    };
    let queue =
        BatchQueue::restore(queue_bytes).map_err(|e| format!("restoring the write queue: {e}"))?;
    let sql_tickets = if version == 1 {
        queue.pending().map(|op| op.ticket).collect()
    } else {
        saved.sql_tickets
    };
    Ok(Restored {
        state: CanisterState {
            write_access: if saved.open {
                WriteAccess::Open
            } else {
                WriteAccess::Restricted
            },
            writers: saved.writers,
            read_only: saved.read_only,
            sql_tickets,
            dedup: saved.dedup,
        },
        queue,
    })
}
