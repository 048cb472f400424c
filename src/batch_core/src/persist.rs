//! Saving a whole queue as bytes and restoring it: how a canister keeps its queue across an
//! upgrade ([`BatchQueue::save`], [`BatchQueue::restore`]).
//!
//! # Format
//!
//! `b"BQS"`, a format version byte ([`FORMAT_VERSION`]), then the queue in
//! [postcard](https://docs.rs/postcard) (serde's compact binary encoding: varint integers,
//! length-prefixed strings and bytes, floats as their 8 IEEE-754 bytes): the [`Config`], the
//! next ticket, the `COMMIT` limit, the [`Stats`], the pending ops (ticket, submit time, op) and
//! the kept outcomes (ticket, outcome), oldest first. Every value comes back bit for bit: any
//! `f64` (NaN payloads, ±inf, −0.0, subnormals), `i64` extremes, text with NUL or emoji, blobs.
//! A later format gets a new version byte; [`BatchQueue::restore`] reads every version it knows.

use std::collections::VecDeque;
use std::io::Write;

use serde::{Deserialize, Serialize};

use crate::config::{Config, ConfigError};
use crate::op::{OpOutcome, Ticket};
use crate::queue::{BatchQueue, PendingOp, QueueState, Stats, StoredOutcome};

#[cfg(test)]
mod tests;

/// The first bytes of a saved queue.
pub const MAGIC: &[u8; 3] = b"BQS";
/// The format version [`BatchQueue::save`] writes.
pub const FORMAT_VERSION: u8 = 1;

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
    #[error("saved queue format version {0} is not supported (this batch_core reads 1)")]
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
    next_ticket: Ticket,
    commit_limit: Option<u64>,
    stats: &'a Stats,
    pending: &'a VecDeque<PendingOp>,
    outcomes: &'a VecDeque<(Ticket, OpOutcome)>,
}

/// The saved fields, owned (same order and encoding as [`SavedRef`]).
#[derive(Deserialize)]
struct Saved {
    config: Config,
    next_ticket: Ticket,
    commit_limit: Option<u64>,
    stats: Stats,
    pending: Vec<PendingOp>,
    outcomes: Vec<StoredOutcome>,
}

impl BatchQueue {
    /// Writes the whole queue (configuration, pending ops, next ticket, kept outcomes,
    /// counters) to `out` in the versioned binary format of this module, without copying the
    /// queue first. Returns `out`.
    ///
    /// Cost: linear in the bytes written (the ops' SQL text and parameters and the kept
    /// outcomes' error texts), a few instructions per byte. In a canister, write to stable
    /// memory in `pre_upgrade`; that is all `pre_upgrade` needs to do.
    pub fn save<W: Write>(&self, mut out: W) -> Result<W, SaveError> {
        out.write_all(MAGIC).map_err(SaveError::Write)?;
        out.write_all(&[FORMAT_VERSION]).map_err(SaveError::Write)?;
        let stats = self.stats();
        let saved = SavedRef {
            config: self.config(),
            next_ticket: self.next_ticket(),
            commit_limit: self.commit_limit().map(|limit| limit as u64),
            stats: &stats,
            pending: self.pending_deque(),
            outcomes: self.outcome_entries(),
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
        if version != FORMAT_VERSION {
            return Err(RestoreError::UnsupportedVersion(version));
        }
        let (saved, _rest): (Saved, &[u8]) =
            postcard::take_from_bytes(payload).map_err(RestoreError::Decode)?;
        let state = QueueState {
            pending: saved.pending,
            next_ticket: saved.next_ticket,
            outcomes: saved.outcomes,
            stats: saved.stats,
            commit_limit: saved.commit_limit,
        };
        Ok(BatchQueue::from_state(saved.config, state)?)
    }
}
