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
//!
//! Versions: 1 (the [`Config`] without `coalesce_rows`; restored with its default), 2 (the
//! current format).

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
pub const FORMAT_VERSION: u8 = 2;

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
    #[error("saved queue format version {0} is not supported (this batch_core reads 1 and 2)")]
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

/// The saved fields, owned (same order and encoding as [`SavedRef`]); `C` is the saved
/// configuration's format.
#[derive(Deserialize)]
struct Saved<C> {
    config: C,
    next_ticket: Ticket,
    commit_limit: Option<u64>,
    stats: Stats,
    pending: Vec<PendingOp>,
    outcomes: Vec<StoredOutcome>,
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

impl From<ConfigV1> for Config {
    fn from(v1: ConfigV1) -> Self {
        Config {
            flush_size: v1.flush_size,
            max_delay_ns: v1.max_delay_ns,
            max_pending: v1.max_pending,
            max_pending_bytes: v1.max_pending_bytes,
            flush_instruction_budget: v1.flush_instruction_budget,
            outcome_capacity: v1.outcome_capacity,
            ..Config::default()
        }
    }
}

impl<C: Into<Config>> Saved<C> {
    fn into_queue(self) -> Result<BatchQueue, ConfigError> {
        let state = QueueState {
            pending: self.pending,
            next_ticket: self.next_ticket,
            outcomes: self.outcomes,
            stats: self.stats,
            commit_limit: self.commit_limit,
        };
        BatchQueue::from_state(self.config.into(), state)
    }
}

fn decode<'a, C: Deserialize<'a>>(payload: &'a [u8]) -> Result<Saved<C>, RestoreError> {
    let (saved, _rest) = postcard::take_from_bytes(payload).map_err(RestoreError::Decode)?;
    Ok(saved)
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
        Ok(match version {
            1 => decode::<ConfigV1>(payload)?.into_queue()?,
            FORMAT_VERSION => decode::<Config>(payload)?.into_queue()?,
            _ => return Err(RestoreError::UnsupportedVersion(version)),
        })
    }
}
