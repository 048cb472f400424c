//! Keeping the queue across upgrades: who may write, the database's read-only mode, which
//! pending ops are controller SQL, and the whole write queue with its configuration
//! (batch_core's versioned binary format, exact for every value), in one virtual memory.
//!
//! ic-rusqlite owns virtual memories 101–119 (file system) and 120 (the database) of its
//! `MemoryManager`; the saved state lives in the memory id the canister chooses
//! (`Setup::memory_id`, outside that range). Layout: an 8-byte
//! little-endian length (0: nothing saved), then `b"BCS"`, a format version byte, the
//! canister's part in postcard, and the queue as [`BatchQueue::save`] writes it. Format 1 had
//! no read-only mode and no SQL tickets: it restores as writable, with every pending op counted
//! as controller SQL (so that no caller's flush runs an op of the previous version that could
//! trap). Format 2 had no counters of keyed client batches: they restore as zero (the keys
//! themselves are in SQLite either way).
//!
//! Saving only writes; it never flushes. Its work is linear in the bytes written, which the
//! queue's `max_pending_bytes` (and the 1 KiB cap on each kept error text) bound.

use std::io::Write;

use batch_core::{BatchQueue, DedupCounters};
use candid::Principal;
use ic_stable_structures::Memory;
use ic_stable_structures::writer::{BufferedWriter, Writer};
use serde::{Deserialize, Serialize};

use batch_types::WriteAccess;

const MAGIC: &[u8; 3] = b"BCS";
/// The format [`save_to`] writes.
pub const FORMAT_VERSION: u8 = 3;
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

/// The state kept besides the queue.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SavedState {
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

/// What [`take_from`] restores.
pub struct Restored {
    /// The state besides the queue.
    pub state: SavedState,
    /// The queue, with the configuration it was saved with.
    pub queue: BatchQueue,
}

/// Why the state could not be saved or restored (the text says what and why).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct PersistError(pub String);

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

/// Writes `state` and `queue` to `mem`. Fails only if the memory cannot grow (the subnet is out
/// of memory): the caller (`pre_upgrade`) must then trap, which keeps the old canister running
/// with its queue rather than dropping acknowledged operations.
pub fn save_to<M: Memory>(
    mem: &mut M,
    state: SavedState,
    queue: &BatchQueue,
) -> Result<(), PersistError> {
    let failed = |what: &str, e: &dyn std::fmt::Display| PersistError(format!("{what}: {e}"));
    let written = {
        let writer = BufferedWriter::new(WRITE_BUFFER, Writer::new(mem, 8));
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
            .map_err(|e| failed("saving the canister state", &e))?;
        let out =
            postcard::to_io(&saved, out).map_err(|e| failed("saving the canister state", &e))?;
        let mut out = queue
            .save(out)
            .map_err(|e| failed("saving the write queue", &e))?;
        out.flush()
            .map_err(|e| failed("saving the write queue", &e))?;
        out.written
    };
    mem.write(0, &written.to_le_bytes());
    Ok(())
}

/// Reads and clears the saved state in `mem`, if any. A state [`save_to`] wrote always
/// restores; anything else is refused with the reason (the caller, `post_upgrade`, then traps:
/// the upgrade is refused and the old version keeps running).
pub fn take_from<M: Memory>(mem: &M) -> Result<Option<Restored>, PersistError> {
    if mem.size() == 0 {
        return Ok(None);
    }
    let mut len = [0u8; 8];
    mem.read(0, &mut len);
    let len = u64::from_le_bytes(len);
    if len == 0 {
        return Ok(None);
    }
    let len =
        usize::try_from(len).map_err(|_| PersistError(format!("saved state of {len} bytes")))?;
    let mut bytes = vec![0u8; len];
    mem.read(8, &mut bytes);
    let restored = decode(&bytes).map_err(PersistError)?;
    mem.write(0, &0u64.to_le_bytes());
    Ok(Some(restored))
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
        state: SavedState {
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

#[cfg(test)]
mod tests {
    use batch_core::{Config, Owner, SqlValue, Statement, WriteOp};
    use ic_stable_structures::VectorMemory;

    use super::*;

    fn queue_with(n: i64) -> BatchQueue {
        let mut q = BatchQueue::with_first_ticket(Config::default(), 1_000).unwrap();
        for i in 0..n {
            let op = WriteOp::Single(Statement::new(
                "INSERT INTO t VALUES (?1, ?2)",
                vec![
                    SqlValue::Integer(i),
                    SqlValue::Real(f64::from_bits(0x7ff8_0000_0000_0001)),
                ],
            ));
            q.submit_as(op, 5, Owner::of(&[i as u8 + 1])).unwrap();
        }
        q
    }

    #[test]
    fn a_saved_state_restores_exactly_once() {
        let mut mem = VectorMemory::default();
        assert!(
            take_from(&mem).unwrap().is_none(),
            "empty memory: nothing saved"
        );
        let state = SavedState {
            write_access: WriteAccess::Open,
            writers: vec![Principal::from_slice(&[1, 2, 3])],
            read_only: true,
            sql_tickets: vec![1_001],
            dedup: DedupCounters {
                executed: 7,
                duplicates_answered: 3,
                too_old: 1,
                created_in_future: 2,
                digest_mismatches: 4,
                store_full: 5,
                pruned: 6,
            },
        };
        let queue = queue_with(3);
        save_to(&mut mem, state.clone(), &queue).unwrap();
        let restored = take_from(&mem).unwrap().expect("a saved state");
        assert_eq!(restored.state, state);
        // Bit for bit, NaN payload included (NaN != NaN, so the bytes are compared).
        assert_eq!(
            restored.queue.save(Vec::new()).unwrap(),
            queue.save(Vec::new()).unwrap()
        );
        assert_eq!(restored.queue.len(), 3);
        // Taken: a second upgrade without a save restores nothing (no op is replayed twice).
        assert!(take_from(&mem).unwrap().is_none());
    }

    #[test]
    fn foreign_and_future_states_are_refused_not_misread() {
        let mut mem = VectorMemory::default();
        save_to(&mut mem, SavedState::default(), &queue_with(1)).unwrap();
        // Another format version.
        let mut version = [0u8; 1];
        mem.read(11, &mut version);
        assert_eq!(version[0], FORMAT_VERSION);
        mem.write(11, &[9]);
        let e = take_from(&mem).err().expect("refused").0;
        assert_eq!(
            e,
            "saved state format 9 is not supported (this version reads 1 to 3)"
        );
        // Not our header at all.
        mem.write(8, b"XYZ");
        let e = take_from(&mem).err().expect("refused").0;
        assert!(e.contains("no BCS header"), "{e}");
        // A refused state is left in place: the old version, still running, keeps it.
        let mut len = [0u8; 8];
        mem.read(0, &mut len);
        assert_ne!(u64::from_le_bytes(len), 0);
    }

    #[test]
    fn format_one_counts_every_pending_op_as_controller_sql() {
        let queue = queue_with(2);
        let mut bytes = MAGIC.to_vec();
        bytes.push(1);
        #[derive(Serialize)]
        struct V1 {
            open: bool,
            writers: Vec<Principal>,
        }
        bytes.extend(
            postcard::to_allocvec(&V1 {
                open: true,
                writers: vec![],
            })
            .unwrap(),
        );
        bytes = queue.save(bytes).unwrap();
        let restored = decode(&bytes).unwrap();
        assert_eq!(restored.state.sql_tickets, vec![1_000, 1_001]);
        assert_eq!(restored.state.write_access, WriteAccess::Open);
        assert!(!restored.state.read_only);
        assert_eq!(restored.state.dedup, DedupCounters::default());
    }

    #[test]
    fn format_two_restores_with_zero_dedup_counters() {
        let queue = queue_with(1);
        let mut bytes = MAGIC.to_vec();
        bytes.push(2);
        #[derive(Serialize)]
        struct V2 {
            open: bool,
            writers: Vec<Principal>,
            read_only: bool,
            sql_tickets: Vec<u64>,
        }
        bytes.extend(
            postcard::to_allocvec(&V2 {
                open: false,
                writers: vec![Principal::from_slice(&[9])],
                read_only: true,
                sql_tickets: vec![1_000],
            })
            .unwrap(),
        );
        bytes = queue.save(bytes).unwrap();
        let restored = decode(&bytes).unwrap();
        assert_eq!(
            restored.state,
            SavedState {
                write_access: WriteAccess::Restricted,
                writers: vec![Principal::from_slice(&[9])],
                read_only: true,
                sql_tickets: vec![1_000],
                dedup: DedupCounters::default(),
            }
        );
        assert_eq!(restored.queue.len(), 1);
    }
}
