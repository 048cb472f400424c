//! The write queue ([`BatchQueue`]): accepts ops, decides when a flush is due, flushes them in one
//! transaction under an instruction budget, and keeps their outcomes.

use std::collections::VecDeque;

use rusqlite::Connection;
use serde::{Deserialize, Serialize};

use crate::config::{Config, ConfigError};
use crate::executor::{Budget, FlushError, run_batch};
use crate::meter::InstructionMeter;
use crate::op::{OpOutcome, Ticket, WriteOp};
use crate::outcome_store::OutcomeStore;

#[cfg(test)]
mod proptests;
#[cfg(test)]
mod tests;

/// A bounded FIFO of write ops with the outcomes of the flushed ones.
///
/// The queue holds no connection and no clock: callers pass the time to
/// [`submit`](Self::submit) and [`next_due`](Self::next_due), and a connection and an
/// [`InstructionMeter`] to [`flush`](Self::flush). All of its state is plain data
/// ([`to_state`](Self::to_state)), so a canister can keep it across upgrades.
#[derive(Debug)]
pub struct BatchQueue {
    config: Config,
    pending: VecDeque<PendingOp>,
    next_ticket: Ticket,
    outcomes: OutcomeStore,
    stats: Stats,
}

/// The answer to an accepted [`BatchQueue::submit`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Submitted {
    /// The op's ticket, for [`BatchQueue::status`].
    pub ticket: Ticket,
    /// The size trigger is reached (`len() >= flush_size`): flush now, in this message.
    pub flush_due: bool,
}

/// Why [`BatchQueue::submit`] rejected an op. The op was not queued and got no ticket.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SubmitError {
    /// The queue holds `max_pending` ops: flush first, or retry later. Nothing queued is dropped
    /// to make room.
    #[error("queue full: {capacity} ops pending")]
    QueueFull {
        /// The queue's capacity, [`Config::max_pending`].
        capacity: usize,
    },
    /// A [`WriteOp::Unit`] without statements.
    #[error("unit has no statements")]
    EmptyUnit,
}

/// What a successful [`BatchQueue::flush`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlushReport {
    /// Ops executed and removed from the queue (`committed + failed`).
    pub executed: usize,
    /// Executed ops that took effect.
    pub committed: usize,
    /// Executed ops that failed (and had no effect).
    pub failed: usize,
    /// Ops still queued.
    pub remaining: usize,
    /// The flush stopped at its instruction budget with ops left (this is `remaining > 0`, since
    /// a flush otherwise takes everything pending). Keep a timer armed for
    /// [`BatchQueue::next_due`], which is "now" if `flush_size` or more ops are left.
    pub more_due: bool,
    /// Instructions the flush used, from its first to its last meter read (after `COMMIT`).
    pub instructions: u64,
}

/// Where an op is, by ticket.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum OpStatus {
    /// Queued, not yet flushed.
    Pending,
    /// Flushed: its outcome.
    Done(OpOutcome),
    /// Flushed, but its outcome was evicted from the bounded outcome store.
    Evicted,
    /// No such ticket was ever issued.
    Unknown,
}

/// Counters of a [`BatchQueue`], since it was created (they survive
/// [`to_state`](BatchQueue::to_state) / [`from_state`](BatchQueue::from_state)).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stats {
    /// Ops queued now.
    pub pending: u64,
    /// Ops accepted by `submit` (tickets issued).
    pub submitted: u64,
    /// Flushed ops that took effect.
    pub committed: u64,
    /// Flushed ops that failed.
    pub failed: u64,
    /// Submits rejected (`QueueFull` or `EmptyUnit`).
    pub rejected: u64,
    /// Successful flushes that executed at least one op (flushing an empty queue does not count).
    pub flushes: u64,
    /// Ops executed by the last successful flush.
    pub last_flush_ops: u64,
    /// Instructions used by the last successful flush ([`FlushReport::instructions`]).
    pub last_flush_instructions: u64,
    /// Flushes that failed with a [`FlushError`] (the queue was left unchanged).
    pub flush_errors: u64,
}

/// A queued op, as kept in [`QueueState`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PendingOp {
    /// The op's ticket.
    pub ticket: Ticket,
    /// When it was submitted (the `now_ns` passed to `submit`).
    pub enqueued_ns: u64,
    /// The op.
    pub op: WriteOp,
}

/// A kept outcome, as stored in [`QueueState`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StoredOutcome {
    /// The op's ticket.
    pub ticket: Ticket,
    /// Its outcome.
    pub outcome: OpOutcome,
}

/// Everything a [`BatchQueue`] knows except its [`Config`]: what a canister writes to stable
/// memory in `pre_upgrade` and gives to [`BatchQueue::from_state`] in `post_upgrade`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct QueueState {
    /// Queued ops, oldest first (tickets increasing).
    pub pending: Vec<PendingOp>,
    /// The ticket the next accepted op gets.
    pub next_ticket: Ticket,
    /// Kept outcomes, oldest first (tickets increasing, all below the pending ones).
    pub outcomes: Vec<StoredOutcome>,
    /// The counters.
    pub stats: Stats,
}

impl BatchQueue {
    /// An empty queue. Fails if `config` is invalid ([`Config::validate`]).
    pub fn new(config: Config) -> Result<Self, ConfigError> {
        config.validate()?;
        Ok(BatchQueue {
            outcomes: OutcomeStore::new(config.outcome_capacity),
            config,
            pending: VecDeque::new(),
            next_ticket: 1,
            stats: Stats::default(),
        })
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Queues `op`, submitted at `now_ns`, and returns its ticket. O(1); nothing is executed.
    ///
    /// Fails with [`SubmitError::QueueFull`] when `max_pending` ops are queued and with
    /// [`SubmitError::EmptyUnit`] for a unit without statements; both count in
    /// [`Stats::rejected`] and leave the queue unchanged.
    pub fn submit(&mut self, op: WriteOp, now_ns: u64) -> Result<Submitted, SubmitError> {
        if self.pending.len() >= self.config.max_pending {
            self.stats.rejected += 1;
            return Err(SubmitError::QueueFull {
                capacity: self.config.max_pending,
            });
        }
        if matches!(&op, WriteOp::Unit(statements) if statements.is_empty()) {
            self.stats.rejected += 1;
            return Err(SubmitError::EmptyUnit);
        }
        let ticket = self.next_ticket;
        self.next_ticket += 1;
        self.pending.push_back(PendingOp {
            ticket,
            enqueued_ns: now_ns,
            op,
        });
        self.stats.submitted += 1;
        Ok(Submitted {
            ticket,
            flush_due: self.pending.len() >= self.config.flush_size,
        })
    }

    /// Number of queued ops.
    pub fn len(&self) -> usize {
        self.pending.len()
    }

    /// Whether no op is queued.
    pub fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }

    /// When the next flush must run, as an absolute time: `None` if the queue is empty;
    /// `now_ns` if the size trigger is reached (`len() >= flush_size`); otherwise the oldest
    /// queued op's submit time plus `max_delay_ns` (saturating), which may already be past.
    ///
    /// A canister arms its timer for `next_due(now).saturating_sub(now)` when the queue goes
    /// from empty to non-empty, and again after a flush that leaves ops queued.
    pub fn next_due(&self, now_ns: u64) -> Option<u64> {
        let oldest = self.pending.front()?;
        if self.pending.len() >= self.config.flush_size {
            Some(now_ns)
        } else {
            Some(oldest.enqueued_ns.saturating_add(self.config.max_delay_ns))
        }
    }

    /// Executes queued ops, oldest first, in ONE transaction (`BEGIN IMMEDIATE` ... `COMMIT`)
    /// with cached prepared statements, and records one outcome per executed op.
    ///
    /// **What runs**: everything queued, not just `flush_size` ops, unless the instruction
    /// budget stops it earlier. The meter is read once before `BEGIN`, once before each op
    /// after the first, and once after `COMMIT`; an op starts only while fewer than
    /// [`Config::flush_instruction_budget`] instructions have been used. The first op always
    /// runs, so every flush makes progress. The ops not reached stay queued, in order, and
    /// [`FlushReport::more_due`] is set. The budget bounds when the last op *starts*: leave
    /// headroom under the message's instruction limit for that op and for `COMMIT`. (With
    /// [`CountingMeter::new(s)`](crate::CountingMeter::new), a flush of n queued ops executes
    /// `min(n, max(1, ceil(budget / s)))` ops.)
    ///
    /// **Failures of ops** are outcomes, never errors or panics: a failing statement is undone
    /// by SQLite alone and the others keep their effects; see [`execute_batch`](crate::execute_batch)
    /// for units and for errors that abort the whole transaction.
    ///
    /// **Errors**: if `BEGIN` or `COMMIT` fails, the transaction is rolled back, the error is
    /// returned, and the queue is unchanged (no op is lost; [`Stats::flush_errors`] counts it).
    /// Ops leave the queue and get outcomes only after `COMMIT` succeeded.
    ///
    /// An empty queue returns an all-zero report without reading the meter or touching the
    /// connection.
    pub fn flush(
        &mut self,
        conn: &Connection,
        meter: &dyn InstructionMeter,
    ) -> Result<FlushReport, FlushError> {
        if self.pending.is_empty() {
            return Ok(FlushReport::default());
        }
        let start = meter.instructions();
        let budget = Budget {
            meter,
            start,
            limit: self.config.flush_instruction_budget,
        };
        let pending = &self.pending;
        let outcomes = match run_batch(conn, pending.len(), |i| &pending[i].op, Some(&budget)) {
            Ok(outcomes) => outcomes,
            Err(error) => {
                self.stats.flush_errors += 1;
                return Err(error);
            }
        };
        let instructions = meter.instructions().saturating_sub(start);
        let executed = outcomes.len();
        let mut committed = 0;
        for (op, outcome) in self.pending.drain(..executed).zip(outcomes) {
            if outcome.is_committed() {
                committed += 1;
            }
            self.outcomes.insert(op.ticket, outcome);
        }
        let failed = executed - committed;
        self.stats.committed += committed as u64;
        self.stats.failed += failed as u64;
        self.stats.flushes += 1;
        self.stats.last_flush_ops = executed as u64;
        self.stats.last_flush_instructions = instructions;
        let remaining = self.pending.len();
        Ok(FlushReport {
            executed,
            committed,
            failed,
            remaining,
            more_due: remaining > 0,
            instructions,
        })
    }

    /// Where the op with `ticket` is. O(log n) in the number of kept outcomes.
    pub fn status(&self, ticket: Ticket) -> OpStatus {
        if ticket == 0 || ticket >= self.next_ticket {
            return OpStatus::Unknown;
        }
        if self
            .pending
            .front()
            .is_some_and(|oldest| ticket >= oldest.ticket)
        {
            return OpStatus::Pending;
        }
        match self.outcomes.get(ticket) {
            Some(outcome) => OpStatus::Done(outcome.clone()),
            None => OpStatus::Evicted,
        }
    }

    /// The counters, with [`Stats::pending`] set to [`len`](Self::len).
    pub fn stats(&self) -> Stats {
        Stats {
            pending: self.pending.len() as u64,
            ..self.stats.clone()
        }
    }

    /// The queued ops, oldest first.
    pub fn pending(&self) -> impl ExactSizeIterator<Item = &PendingOp> {
        self.pending.iter()
    }

    /// A copy of the whole state (queued ops with tickets and submit times, next ticket, kept
    /// outcomes, counters), for [`from_state`](Self::from_state). O(n) in queued ops and kept
    /// outcomes.
    pub fn to_state(&self) -> QueueState {
        QueueState {
            pending: self.pending.iter().cloned().collect(),
            next_ticket: self.next_ticket,
            outcomes: self
                .outcomes
                .iter()
                .map(|(ticket, outcome)| StoredOutcome {
                    ticket: *ticket,
                    outcome: outcome.clone(),
                })
                .collect(),
            stats: self.stats(),
        }
    }

    /// Restores a queue from [`to_state`](Self::to_state), possibly with a new `config`.
    ///
    /// Every queued op is kept, even beyond a smaller `max_pending` (submits are then rejected
    /// until flushes drain the queue below it); outcomes beyond a smaller `outcome_capacity` are
    /// evicted, oldest first. Fails if `config` is invalid or the state's tickets are
    /// inconsistent ([`ConfigError::InvalidState`]).
    pub fn from_state(config: Config, state: QueueState) -> Result<Self, ConfigError> {
        config.validate()?;
        let invalid = |reason: &str| {
            Err(ConfigError::InvalidState {
                reason: reason.to_owned(),
            })
        };
        if state.next_ticket == 0 {
            return invalid("next_ticket is 0");
        }
        let pending_increasing = state.pending.windows(2).all(|w| w[0].ticket < w[1].ticket);
        if !pending_increasing || state.pending.first().is_some_and(|op| op.ticket == 0) {
            return invalid("pending tickets are not increasing from 1");
        }
        if state
            .pending
            .last()
            .is_some_and(|op| op.ticket >= state.next_ticket)
        {
            return invalid("a pending ticket is not below next_ticket");
        }
        let outcomes_increasing = state.outcomes.windows(2).all(|w| w[0].ticket < w[1].ticket);
        if !outcomes_increasing || state.outcomes.first().is_some_and(|o| o.ticket == 0) {
            return invalid("outcome tickets are not increasing from 1");
        }
        let first_unflushed = state
            .pending
            .first()
            .map_or(state.next_ticket, |op| op.ticket);
        if state
            .outcomes
            .last()
            .is_some_and(|o| o.ticket >= first_unflushed)
        {
            return invalid("an outcome ticket is not below the pending tickets");
        }
        let mut outcomes = OutcomeStore::new(config.outcome_capacity);
        for stored in state.outcomes {
            outcomes.insert(stored.ticket, stored.outcome);
        }
        let pending: VecDeque<PendingOp> = state.pending.into();
        let stats = Stats {
            pending: pending.len() as u64,
            ..state.stats
        };
        Ok(BatchQueue {
            config,
            pending,
            next_ticket: state.next_ticket,
            outcomes,
            stats,
        })
    }
}
