//! Saving a whole queue as bytes and restoring it: how a canister keeps its queue across an
//! upgrade ([`BatchQueue::save`], [`BatchQueue::restore`]).
//!
//! # Format
//!
//! `b"BQS"`, a format version byte ([`FORMAT_VERSION`]), then the queue in
//! [postcard](https://docs.rs/postcard) (serde's compact binary encoding: varint integers,
//! length-prefixed strings and bytes, floats as their 8 IEEE-754 bytes): the [`Config`], the
//! first and the next ticket, the `COMMIT` limit, the [`Stats`], the pending ops (ticket,
//! submit time, op), their owners (as bytes: 8 little-endian bytes per op, one write rather
//! than a varint per op), the kept outcomes (ticket, owner, outcome), oldest first, and the
//! history (its first ticket, then its records as bytes: 8 little-endian bytes per ticket).
//! Every value comes back bit for bit: any `f64` (NaN payloads, ±inf, −0.0, subnormals), `i64`
//! extremes, text with NUL or emoji, blobs. A later format gets a new version byte;
//! [`BatchQueue::restore`] reads every version it knows.
//!
//! Versions: 1 (the [`Config`] without `coalesce_rows`; restored with its default), 2 (no
//! owners, first ticket or history: ops and outcomes are restored as [`Owner::NONE`]'s, the
//! first ticket as 1, the history empty), 3 (the current format).

use std::collections::VecDeque;
use std::io::Write;

use serde::ser::SerializeSeq;
use serde::{Deserialize, Serialize, Serializer};

use crate::config::{Config, ConfigError, DEFAULT_COALESCE_ROWS, DEFAULT_HISTORY_CAPACITY};
use crate::op::{Outcome, Owner, Ticket, WriteOp};
use crate::queue::{BatchQueue, PendingOp, QueueState, Stats, StoredOutcome};

#[cfg(test)]
mod tests;

/// The first bytes of a saved queue.
pub const MAGIC: &[u8; 3] = b"BQS";
/// The format version [`BatchQueue::save`] writes.
pub const FORMAT_VERSION: u8 = 3;

/// Why [`BatchQueue::save`] failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SaveError {
    /// Writing to the destination failed.
    #[error("writing the saved queue failed: {0}")]
    Write(#[source] std::io::Error),
    /// Encoding failed (a value postcard cannot encode; not expected for a queue).
    #[error("encoding the queue failed: {0}")]
    Encode(#[source] postcard::Error),
}

/// Why [`BatchQueue::restore`] rejected its bytes. The bytes were not changed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RestoreError {
    /// The bytes do not start with [`MAGIC`]: not a saved queue.
    #[error("not a saved batch_core queue (the first bytes are not \"BQS\")")]
    NotASavedQueue,
    /// The format version is newer than this library knows.
    #[error("saved queue format version {0} is not supported (this batch_core reads 1 to 3)")]
    UnsupportedVersion(u8),
    /// The bytes are truncated or corrupt.
    #[error("decoding the saved queue failed: {0}")]
    Decode(#[source] postcard::Error),
    /// The decoded queue is inconsistent, or its configuration invalid.
    #[error(transparent)]
    Invalid(#[from] ConfigError),
}

/// The saved fields, borrowed from the queue (the order of the fields is the format).
#[derive(Serialize)]
struct SavedRef<'a> {
    config: &'a Config,
    first_ticket: Ticket,
    next_ticket: Ticket,
    commit_limit: Option<u64>,
    stats: &'a Stats,
    pending: PendingOps<'a>,
    #[serde(with = "serde_bytes")]
    pending_owners: Vec<u8>,
    outcomes: KeptOutcomes<'a>,
    history_base: Ticket,
    #[serde(with = "serde_bytes")]
    history: Vec<u8>,
}

/// The pending ops, serialized as a sequence of `(ticket, submit time, op)` (their owners go
/// separately, as bytes).
struct PendingOps<'a>(&'a VecDeque<PendingOp>);

impl Serialize for PendingOps<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut seq = serializer.serialize_seq(Some(self.0.len()))?;
        for op in self.0 {
            seq.serialize_element(&(op.ticket, op.enqueued_ns, &op.op))?;
        }
        seq.end()
    }
}

/// The kept outcomes of a queue, serialized as a sequence of `(ticket, owner, outcome)`.
struct KeptOutcomes<'a>(&'a BatchQueue);

impl Serialize for KeptOutcomes<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let store = self.0.outcome_store();
        let mut seq = serializer.serialize_seq(Some(store.len()))?;
        for kept in store.iter() {
            seq.serialize_element(&kept)?;
        }
        seq.end()
    }
}

/// The saved fields of format version 3, owned (same order and encoding as [`SavedRef`]).
#[derive(Deserialize)]
struct Saved {
    config: Config,
    first_ticket: Ticket,
    next_ticket: Ticket,
    commit_limit: Option<u64>,
    stats: Stats,
    pending: Vec<PendingOpV2>,
    #[serde(with = "serde_bytes")]
    pending_owners: Vec<u8>,
    outcomes: Vec<StoredOutcome>,
    history_base: Ticket,
    #[serde(with = "serde_bytes")]
    history: Vec<u8>,
}

/// The 8-byte little-endian words of `bytes`, or an error naming `what`.
fn words(bytes: &[u8], what: &str) -> Result<impl Iterator<Item = u64>, RestoreError> {
    if !bytes.len().is_multiple_of(8) {
        return Err(RestoreError::Invalid(ConfigError::InvalidState {
            reason: format!("{what} are not a whole number of 8-byte records"),
        }));
    }
    Ok(bytes.chunks_exact(8).map(|word| {
        let mut le = [0u8; 8];
        le.copy_from_slice(word);
        u64::from_le_bytes(le)
    }))
}

impl Saved {
    fn into_queue(self) -> Result<BatchQueue, RestoreError> {
        let history = words(&self.history, "the history records")?
            .map(|record| (Owner::from_digest(record), record & 1 == 1))
            .collect();
        if self.pending_owners.len() != 8 * self.pending.len() {
            return Err(RestoreError::Invalid(ConfigError::InvalidState {
                reason: "the pending ops and their owners differ in number".to_owned(),
            }));
        }
        let pending = self
            .pending
            .into_iter()
            .zip(words(
                &self.pending_owners,
                "the owners of the pending ops",
            )?)
            .map(|(op, owner)| PendingOp {
                ticket: op.ticket,
                enqueued_ns: op.enqueued_ns,
                owner: Owner::from_digest(owner),
                op: op.op,
            })
            .collect();
        let state = QueueState {
            pending,
            first_ticket: self.first_ticket,
            next_ticket: self.next_ticket,
            outcomes: self.outcomes,
            history_base: self.history_base,
            history,
            stats: self.stats,
            commit_limit: self.commit_limit,
        };
        Ok(BatchQueue::from_state(self.config, state)?)
    }
}

/// The saved fields of format versions 1 and 2; `C` is the saved configuration's format.
#[derive(Deserialize)]
struct SavedV2<C> {
    config: C,
    next_ticket: Ticket,
    commit_limit: Option<u64>,
    stats: StatsV2,
    pending: Vec<PendingOpV2>,
    outcomes: Vec<(Ticket, Outcome)>,
}

/// The [`Stats`] of format versions 1 and 2, before `capped_flushes`.
#[derive(Deserialize)]
struct StatsV2 {
    pending: u64,
    submitted: u64,
    committed: u64,
    failed: u64,
    rejected: u64,
    flushes: u64,
    last_flush_ops: u64,
    last_flush_instructions: u64,
    flush_errors: u64,
    interrupted: u64,
    last_error: Option<String>,
}

/// A [`PendingOp`] without its owner (format versions 1 and 2; in version 3 the owners follow
/// the ops).
#[derive(Deserialize)]
struct PendingOpV2 {
    ticket: Ticket,
    enqueued_ns: u64,
    op: WriteOp,
}

/// The [`Config`] of format version 1, before `coalesce_rows`.
#[derive(Deserialize)]
struct ConfigV1 {
    flush_size: usize,
    max_delay_ns: u64,
    max_pending: usize,
    max_pending_bytes: usize,
    flush_instruction_budget: u64,
    outcome_capacity: usize,
}

/// The [`Config`] of format version 2, before `history_capacity`.
#[derive(Deserialize)]
struct ConfigV2 {
    flush_size: usize,
    max_delay_ns: u64,
    max_pending: usize,
    max_pending_bytes: usize,
    flush_instruction_budget: u64,
    outcome_capacity: usize,
    coalesce_rows: usize,
}

impl From<ConfigV1> for Config {
    fn from(v1: ConfigV1) -> Self {
        Config {
            flush_size: v1.flush_size,
            max_delay_ns: v1.max_delay_ns,
            max_pending: v1.max_pending,
            max_pending_bytes: v1.max_pending_bytes,
            flush_instruction_budget: v1.flush_instruction_budget,
            outcome_capacity: v1.outcome_capacity,
            history_capacity: DEFAULT_HISTORY_CAPACITY,
            coalesce_rows: DEFAULT_COALESCE_ROWS,
        }
    }
}

impl From<ConfigV2> for Config {
    fn from(v2: ConfigV2) -> Self {
        Config {
            flush_size: v2.flush_size,
            max_delay_ns: v2.max_delay_ns,
            max_pending: v2.max_pending,
            max_pending_bytes: v2.max_pending_bytes,
            flush_instruction_budget: v2.flush_instruction_budget,
            outcome_capacity: v2.outcome_capacity,
            history_capacity: DEFAULT_HISTORY_CAPACITY,
            coalesce_rows: v2.coalesce_rows,
        }
    }
}

impl<C: Into<Config>> SavedV2<C> {
    fn into_queue(self) -> Result<BatchQueue, ConfigError> {
        let s = self.stats;
        let first_unflushed = self
            .pending
            .first()
            .map_or(self.next_ticket, |op| op.ticket);
        let state = QueueState {
            pending: self
                .pending
                .into_iter()
                .map(|op| PendingOp {
                    ticket: op.ticket,
                    enqueued_ns: op.enqueued_ns,
                    owner: Owner::NONE,
                    op: op.op,
                })
                .collect(),
            first_ticket: 1,
            next_ticket: self.next_ticket,
            outcomes: self
                .outcomes
                .into_iter()
                .map(|(ticket, outcome)| StoredOutcome {
                    ticket,
                    owner: Owner::NONE,
                    outcome,
                })
                .collect(),
            history_base: first_unflushed,
            history: Vec::new(),
            stats: Stats {
                pending: s.pending,
                submitted: s.submitted,
                committed: s.committed,
                failed: s.failed,
                rejected: s.rejected,
                flushes: s.flushes,
                last_flush_ops: s.last_flush_ops,
                last_flush_instructions: s.last_flush_instructions,
                flush_errors: s.flush_errors,
                capped_flushes: 0,
                interrupted: s.interrupted,
                last_error: s.last_error,
            },
            commit_limit: self.commit_limit,
        };
        BatchQueue::from_state(self.config.into(), state)
    }
}

fn decode<'a, T: Deserialize<'a>>(payload: &'a [u8]) -> Result<T, RestoreError> {
    let (saved, _rest) = postcard::take_from_bytes(payload).map_err(RestoreError::Decode)?;
    Ok(saved)
}

impl BatchQueue {
    /// Writes the whole queue (configuration, pending ops, tickets, kept outcomes, history,
    /// counters) to `out` in the versioned binary format of this module. Returns `out`.
    ///
    /// Cost: linear in the bytes written (the ops' SQL text and parameters, the kept outcomes'
    /// error texts, 8 bytes per history record, which are copied once), a few instructions per
    /// byte. In a canister, write to stable memory in `pre_upgrade`; that is all `pre_upgrade`
    /// needs to do.
    pub fn save<W: Write>(&self, mut out: W) -> Result<W, SaveError> {
        out.write_all(MAGIC).map_err(SaveError::Write)?;
        out.write_all(&[FORMAT_VERSION]).map_err(SaveError::Write)?;
        let stats = self.stats();
        let history = self.outcome_store().history();
        let mut history_bytes = Vec::with_capacity(history.records().len() * 8);
        for record in history.records() {
            history_bytes.extend_from_slice(&record.to_le_bytes());
        }
        let pending = self.pending_deque();
        let mut pending_owners = Vec::with_capacity(pending.len() * 8);
        for op in pending {
            pending_owners.extend_from_slice(&op.owner.digest().to_le_bytes());
        }
        let saved = SavedRef {
            config: self.config(),
            first_ticket: self.first_ticket(),
            next_ticket: self.next_ticket(),
            commit_limit: self.commit_limit().map(|limit| limit as u64),
            stats: &stats,
            pending: PendingOps(pending),
            pending_owners,
            outcomes: KeptOutcomes(self),
            history_base: history.base(),
            history: history_bytes,
        };
        postcard::to_io(&saved, out).map_err(|error| match error {
            postcard::Error::SerializeBufferFull => {
                SaveError::Write(std::io::Error::other("the destination refused the write"))
            }
            other => SaveError::Encode(other),
        })
    }

    /// The queue [`save`](Self::save) wrote, with its configuration (change it with
    /// [`reconfigure`](Self::reconfigure)). Reads every format version this library knows;
    /// trailing bytes after the queue are ignored (a canister may keep the length elsewhere).
    pub fn restore(bytes: &[u8]) -> Result<Self, RestoreError> {
        let rest = bytes
            .strip_prefix(MAGIC.as_slice())
            .ok_or(RestoreError::NotASavedQueue)?;
        let (&version, payload) = rest.split_first().ok_or(RestoreError::NotASavedQueue)?;
        Ok(match version {
            1 => decode::<SavedV2<ConfigV1>>(payload)?.into_queue()?,
            2 => decode::<SavedV2<ConfigV2>>(payload)?.into_queue()?,
            FORMAT_VERSION => decode::<Saved>(payload)?.into_queue()?,
            _ => return Err(RestoreError::UnsupportedVersion(version)),
        })
    }
}
