//! The write queue ([`BatchQueue`]): accepts ops, decides when a flush is due, flushes them in one
//! transaction under an instruction budget, and keeps their outcomes.

use std::collections::VecDeque;

use rusqlite::Connection;
use serde::{Deserialize, Serialize};

use crate::config::{Config, ConfigError};
use crate::executor::{BatchRun, CoalesceCache, FlushError, OnInterrupt, error_code, run_batch};
use crate::meter::{Budget, InstructionMeter};
use crate::op::{OpError, Outcome, Owner, Ticket, WriteOp};
use crate::outcome_store::{History, OutcomeStore};

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
    /// Sum of the pending ops' [`WriteOp::size_bytes`].
    pending_bytes: usize,
    /// The first ticket this queue issued (tickets below it are `Unknown`).
    first_ticket: Ticket,
    next_ticket: Ticket,
    outcomes: OutcomeStore,
    stats: Stats,
    /// After a `COMMIT` that an op made fail, or a flush stopped at its total instruction limit:
    /// the most ops the next flush may execute.
    commit_limit: Option<usize>,
    /// What statement coalescing learned about SQL texts and tables (not saved: rebuilt after
    /// an upgrade).
    coalesce_cache: CoalesceCache,
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
    /// The pending ops would exceed [`Config::max_pending_bytes`] with this op: flush first, or
    /// retry later.
    #[error("queue full: {pending_bytes} of {capacity_bytes} bytes pending, the op has {op_bytes}")]
    QueueBytesFull {
        /// Bytes pending now.
        pending_bytes: usize,
        /// The op's [`WriteOp::size_bytes`].
        op_bytes: usize,
        /// [`Config::max_pending_bytes`].
        capacity_bytes: usize,
    },
    /// The op alone is larger than [`Config::max_pending_bytes`]: it can never be queued.
    #[error("op too large: {op_bytes} bytes, the queue holds at most {capacity_bytes}")]
    OpTooLarge {
        /// The op's [`WriteOp::size_bytes`].
        op_bytes: usize,
        /// [`Config::max_pending_bytes`].
        capacity_bytes: usize,
    },
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
    /// Failed ops that the instruction guard interrupted (included in `failed`).
    pub interrupted: usize,
    /// Committed ops that ran as rows of multi-row INSERTs (statement coalescing, see
    /// [`Config::coalesce_rows`]; included in `committed`).
    pub coalesced: usize,
    /// Ops still queued.
    pub remaining: usize,
    /// Ops are left (this is `remaining > 0`): the flush stopped at its instruction budget, left
    /// an interrupted op for the next flush, or was limited after a failed `COMMIT`. Keep a
    /// timer armed for [`BatchQueue::next_due`], which is "now" if `flush_size` or more ops are
    /// left.
    pub more_due: bool,
    /// Instructions the flush used, from its first to its last meter read (after `COMMIT`).
    pub instructions: u64,
    /// The flush reached its total instruction limit ([`Budget::flush_limit`], 3 × the budget)
    /// while it re-applied ops after an interrupt, and was rolled back: nothing was executed,
    /// every op stays queued, and the next flush executes at most half as many ops.
    pub capped: bool,
}

/// Where an op is, by ticket.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum OpStatus {
    /// Queued, not yet flushed.
    Pending,
    /// Flushed: its outcome.
    Done(Outcome),
    /// Flushed, but its outcome was evicted from the bounded outcome store (see
    /// [`Config::outcome_capacity`]).
    Evicted {
        /// Whether the op committed, from the history of the last
        /// [`Config::history_capacity`] flushed tickets; `None` for an older ticket.
        committed: Option<bool>,
    },
    /// Issued to another submitter ([`BatchQueue::status_for`]): only its submitter may see it.
    NotYours,
    /// No such ticket was ever issued by this queue.
    Unknown,
}

/// A flush's report as a canister's interface answers it (`flush`).
impl From<FlushReport> for batch_types::FlushSummary {
    fn from(r: FlushReport) -> Self {
        batch_types::FlushSummary {
            executed: r.executed as u64,
            committed: r.committed as u64,
            failed: r.failed as u64,
            interrupted: r.interrupted as u64,
            remaining: r.remaining as u64,
            more_due: r.more_due,
            instructions: r.instructions,
        }
    }
}

/// A ticket's status as a canister's interface answers it (`ticket_status`).
impl From<OpStatus> for batch_types::TicketStatus {
    fn from(status: OpStatus) -> Self {
        use batch_types::TicketStatus;
        match status {
            OpStatus::Pending => TicketStatus::Pending,
            OpStatus::Done(Outcome::Committed {
                rows_changed,
                last_insert_rowid,
            }) => TicketStatus::Committed {
                rows_changed,
                last_insert_rowid,
            },
            OpStatus::Done(Outcome::Failed(error)) => TicketStatus::Failed(error),
            // A flush leaves the ops it does not reach queued: a queue records no such outcome.
            // Were one restored, it says what happened, as the failure of a flush's budget.
            OpStatus::Done(Outcome::NotExecuted) => TicketStatus::Failed(OpError {
                code: rusqlite::ffi::SQLITE_INTERRUPT,
                message: "not executed".into(),
            }),
            OpStatus::Evicted { committed } => TicketStatus::Evicted { committed },
            OpStatus::NotYours => TicketStatus::NotYours,
            OpStatus::Unknown => TicketStatus::Unknown,
        }
    }
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
    /// Flushes stopped at their total instruction limit while re-applying ops
    /// ([`FlushReport::capped`]; the queue was left unchanged).
    pub capped_flushes: u64,
    /// Ops that failed because the instruction guard interrupted them (included in `failed`).
    pub interrupted: u64,
    /// The most recent flush error, or failure of an op by the instruction guard, as text
    /// (with the op's ticket); `None` if there was none.
    pub last_error: Option<String>,
}

/// A queued op, as kept in [`QueueState`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PendingOp {
    /// The op's ticket.
    pub ticket: Ticket,
    /// When it was submitted (the `now_ns` passed to `submit`).
    pub enqueued_ns: u64,
    /// Who submitted it ([`Owner::NONE`] through [`BatchQueue::submit`]).
    pub owner: Owner,
    /// The op.
    pub op: WriteOp,
}

/// A kept outcome, as stored in [`QueueState`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StoredOutcome {
    /// The op's ticket.
    pub ticket: Ticket,
    /// Who submitted it.
    pub owner: Owner,
    /// Its outcome.
    pub outcome: Outcome,
}

/// Everything a [`BatchQueue`] knows except its [`Config`], as plain data (see
/// [`BatchQueue::to_state`]; a canister keeps a queue across upgrades with the cheaper
/// [`BatchQueue::save`] / [`BatchQueue::restore`], which write the same fields).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct QueueState {
    /// Queued ops, oldest first (tickets increasing).
    pub pending: Vec<PendingOp>,
    /// The first ticket the queue issued.
    pub first_ticket: Ticket,
    /// The ticket the next accepted op gets.
    pub next_ticket: Ticket,
    /// Kept outcomes, oldest first (tickets increasing, all below the pending ones).
    pub outcomes: Vec<StoredOutcome>,
    /// The first ticket of `history`.
    pub history_base: Ticket,
    /// Who submitted each flushed ticket from `history_base` on, and whether it committed.
    pub history: Vec<(Owner, bool)>,
    /// The counters.
    pub stats: Stats,
    /// After a `COMMIT` that an op made fail, or a flush stopped at its total limit: the most
    /// ops the next flush may execute.
    pub commit_limit: Option<u64>,
}

impl BatchQueue {
    /// An empty queue issuing tickets 1, 2, 3, ... Fails if `config` is invalid
    /// ([`Config::validate`]).
    pub fn new(config: Config) -> Result<Self, ConfigError> {
        Self::with_first_ticket(config, 1)
    }

    /// An empty queue issuing tickets `first_ticket`, `first_ticket + 1`, ...: a queue that
    /// replaces another (a canister reinstalled with its state wiped) starts past every ticket
    /// the other issued, so that a client's old ticket is `Unknown` rather than someone else's
    /// op. Fails if `config` is invalid or `first_ticket` is 0.
    pub fn with_first_ticket(config: Config, first_ticket: Ticket) -> Result<Self, ConfigError> {
        config.validate()?;
        if first_ticket == 0 {
            return Err(ConfigError::InvalidState {
                reason: "the first ticket is 0".to_owned(),
            });
        }
        Ok(BatchQueue {
            outcomes: OutcomeStore::new(config.outcome_capacity, config.history_capacity),
            config,
            pending: VecDeque::new(),
            pending_bytes: 0,
            first_ticket,
            next_ticket: first_ticket,
            stats: Stats::default(),
            commit_limit: None,
            coalesce_cache: CoalesceCache::default(),
        })
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Queues `op`, submitted at `now_ns` without a submitter ([`Owner::NONE`]), and returns its
    /// ticket: [`submit_as`](Self::submit_as).
    pub fn submit(&mut self, op: WriteOp, now_ns: u64) -> Result<Submitted, SubmitError> {
        self.submit_as(op, now_ns, Owner::NONE)
    }

    /// Queues `op`, submitted at `now_ns` by `owner`, and returns its ticket. O(1); nothing is
    /// executed. The owner decides who sees the op's status ([`status_for`](Self::status_for))
    /// and whose outcomes make room when the store is full (see [`Config::outcome_capacity`]).
    ///
    /// Fails with [`SubmitError::QueueFull`] when `max_pending` ops are queued, with
    /// [`SubmitError::QueueBytesFull`] or [`SubmitError::OpTooLarge`] when the op does not fit
    /// in `max_pending_bytes`, and with [`SubmitError::EmptyUnit`] for a unit without
    /// statements; all count in [`Stats::rejected`] and leave the queue unchanged.
    pub fn submit_as(
        &mut self,
        op: WriteOp,
        now_ns: u64,
        owner: Owner,
    ) -> Result<Submitted, SubmitError> {
        let op_bytes = op.size_bytes();
        let capacity_bytes = self.config.max_pending_bytes;
        let refusal = if self.pending.len() >= self.config.max_pending {
            Some(SubmitError::QueueFull {
                capacity: self.config.max_pending,
            })
        } else if matches!(&op, WriteOp::Unit(statements) if statements.is_empty()) {
            Some(SubmitError::EmptyUnit)
        } else if op_bytes > capacity_bytes {
            Some(SubmitError::OpTooLarge {
                op_bytes,
                capacity_bytes,
            })
        } else if self.pending_bytes.saturating_add(op_bytes) > capacity_bytes {
            Some(SubmitError::QueueBytesFull {
                pending_bytes: self.pending_bytes,
                op_bytes,
                capacity_bytes,
            })
        } else {
            None
        };
        if let Some(error) = refusal {
            self.stats.rejected += 1;
            return Err(error);
        }
        let ticket = self.next_ticket;
        self.next_ticket += 1;
        self.pending_bytes += op_bytes;
        self.pending.push_back(PendingOp {
            ticket,
            enqueued_ns: now_ns,
            owner,
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

    /// Total [`WriteOp::size_bytes`] of the queued ops.
    pub fn pending_bytes(&self) -> usize {
        self.pending_bytes
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
    /// with prepared statements held for the batch, and records one outcome per executed op.
    ///
    /// **What runs**: everything queued, not just `flush_size` ops, unless the instruction
    /// budget stops it earlier. `meter` is read once before `BEGIN`, once before each op after
    /// the first, and once after `COMMIT` (plus the progress handler's reads while statements
    /// run); an op starts only while fewer than [`Config::flush_instruction_budget`]
    /// instructions have been used. The first op always runs, so every flush makes progress.
    /// The ops not reached stay queued, in order, and [`FlushReport::more_due`] is set. (With
    /// [`CountingMeter::new(s)`](crate::CountingMeter::new) and short statements, a flush of n
    /// queued ops executes `min(n, max(1, ceil(budget / s)))` ops.)
    ///
    /// **No op can stop the queue.** SQLite's progress handler interrupts the running statement
    /// once the flush's transaction has used `2 × flush_instruction_budget` instructions
    /// ([`Budget::op_limit`]). SQLite then rolls back the whole transaction: the ops before the
    /// interrupted one are re-applied and committed, and the interrupted op:
    /// - if it was not the first op of the flush, stays queued, now first: the next flush gives
    ///   it the whole limit before anything else;
    /// - if it was the first, it had the whole limit alone and fails for good, with
    ///   `SQLITE_INTERRUPT` and "interrupted: ..." ([`Stats::interrupted`]).
    ///
    /// The re-application runs within the flush's total limit, `3 × flush_instruction_budget`
    /// ([`Budget::flush_limit`]) counted from the flush's start. Re-applied ops normally fit
    /// (they all started under the budget); if one runs longer this time (its cost varies), the
    /// flush stops there, is rolled back and leaves every op queued ([`FlushReport::capped`]),
    /// and the next flush executes at most half as many ops, so that it has less to re-apply.
    ///
    /// A flush therefore uses at most `3 × flush_instruction_budget` instructions on ops, plus
    /// what a statement runs between two reads of the meter, rollback and `COMMIT`, whatever the
    /// ops: choose the budget so that this fits in the message's instruction limit.
    ///
    /// **Failures of ops** are outcomes, never errors or panics: a failing statement is undone
    /// by SQLite alone and the others keep their effects; see [`execute_batch`](crate::execute_batch)
    /// for units and for errors that abort the whole transaction.
    ///
    /// **Errors**: if `BEGIN` or `COMMIT` fails, the transaction is rolled back, the error is
    /// returned, and the queue is unchanged (no op is lost; [`Stats::flush_errors`] counts it).
    /// Such a failure is not an op's (a read-only or full database, an I/O error): no op is
    /// failed for it, however long it lasts. The one `COMMIT` error an op causes is a deferred
    /// foreign key it violates (`SQLITE_CONSTRAINT_FOREIGNKEY`, 787): after such a failed
    /// `COMMIT` of n > 1 ops the next flush executes at most n / 2 of them, halving again on
    /// each failure, until a `COMMIT` succeeds (the limit is lifted) or a single op fails to
    /// commit alone, which then fails with `COMMIT`'s error and leaves the queue. So a flush
    /// that an op keeps from committing never blocks the queue for more than log2(n) + 1
    /// flushes.
    ///
    /// Ops leave the queue and get outcomes only after `COMMIT` succeeded. An empty queue
    /// returns an all-zero report without reading the meter or touching the connection.
    pub fn flush<M: InstructionMeter>(
        &mut self,
        conn: &Connection,
        meter: &M,
    ) -> Result<FlushReport, FlushError> {
        self.flush_at_most(conn, meter, usize::MAX)
    }

    /// [`flush`](Self::flush), executing at most `max_ops` ops (at least 1 if any is queued).
    /// A canister that suspects an op of making its flushes trap flushes fewer and fewer ops
    /// to find it (see [`fail_first`](Self::fail_first)).
    pub fn flush_at_most<M: InstructionMeter>(
        &mut self,
        conn: &Connection,
        meter: &M,
        max_ops: usize,
    ) -> Result<FlushReport, FlushError> {
        if self.pending.is_empty() {
            return Ok(FlushReport::default());
        }
        let budget = Budget::new(meter.clone(), self.config.flush_instruction_budget);
        let start = meter.instructions();
        let len = self
            .commit_limit
            .unwrap_or(usize::MAX)
            .min(max_ops.max(1))
            .min(self.pending.len());
        let pending = &self.pending;
        let result = run_batch(
            conn,
            len,
            |i| &pending[i].op,
            Some((&budget, start)),
            OnInterrupt::LeavePending,
            self.config.coalesce_rows,
            &mut self.coalesce_cache,
        );
        let mut run = match result {
            Ok(run) if run.capped.is_some() => {
                let admitted = run.capped.unwrap_or(1);
                let limit = (admitted / 2).max(1);
                self.commit_limit = Some(limit);
                self.stats.capped_flushes += 1;
                self.stats.last_error = Some(format!(
                    "a flush reached its limit of {} instructions while re-applying {admitted} ops after an interrupt and was rolled back; every op stays queued and the next flush runs at most {limit}",
                    budget.flush_limit()
                ));
                let remaining = self.pending.len();
                return Ok(FlushReport {
                    remaining,
                    more_due: true,
                    instructions: meter.instructions().saturating_sub(start),
                    capped: true,
                    ..FlushReport::default()
                });
            }
            Ok(run) => run,
            Err(FlushError::Commit(error)) if len == 1 && commit_failed_by_op(&error) => {
                // The op cannot commit even alone: it fails, and the queue moves on.
                let mut failure = Outcome::Failed(OpError {
                    code: error_code(&error),
                    message: format!("COMMIT failed: {error}"),
                });
                failure.truncate_message(MAX_ERROR_BYTES);
                self.stats.flush_errors += 1;
                self.stats.last_error = Some(format!(
                    "ticket {}: COMMIT failed: {error}",
                    self.pending[0].ticket
                ));
                BatchRun {
                    outcomes: vec![failure],
                    ..Default::default()
                }
            }
            Err(error) => {
                if let FlushError::Commit(commit) = &error
                    && commit_failed_by_op(commit)
                {
                    self.commit_limit = Some(len / 2);
                }
                self.stats.flush_errors += 1;
                self.stats.last_error = Some(error.to_string());
                return Err(error);
            }
        };
        self.commit_limit = None;
        let instructions = meter.instructions().saturating_sub(start);
        let executed = run.outcomes.len();
        let mut committed = 0;
        for (op, outcome) in self.pending.drain(..executed).zip(run.outcomes.drain(..)) {
            let owner = op.owner;
            self.pending_bytes -= op.op.size_bytes();
            if outcome.is_committed() {
                committed += 1;
            } else if outcome.code() == Some(rusqlite::ffi::SQLITE_INTERRUPT) {
                self.stats.last_error = Some(format!(
                    "ticket {}: {}",
                    op.ticket,
                    outcome.message().unwrap_or_default()
                ));
            }
            self.outcomes.insert(op.ticket, owner, outcome);
        }
        let failed = executed - committed;
        self.stats.committed += committed as u64;
        self.stats.failed += failed as u64;
        self.stats.interrupted += run.interrupted as u64;
        self.stats.flushes += 1;
        self.stats.last_flush_ops = executed as u64;
        self.stats.last_flush_instructions = instructions;
        let remaining = self.pending.len();
        Ok(FlushReport {
            executed,
            committed,
            failed,
            interrupted: run.interrupted,
            coalesced: run.coalesced,
            remaining,
            more_due: remaining > 0,
            instructions,
            capped: false,
        })
    }

    /// Removes the first queued op without executing it, recording it as failed with
    /// `SQLITE_ABORT` (4) and `error`; returns its ticket (`None` if nothing is queued).
    ///
    /// For a canister that found the op makes every flush trap (a trap undoes the whole
    /// message, so the queue cannot record the failure itself): without this, such an op would
    /// stop the queue for good. It counts in [`Stats::failed`] and sets [`Stats::last_error`].
    pub fn fail_first(&mut self, error: impl Into<String>) -> Option<Ticket> {
        let op = self.pending.pop_front()?;
        self.pending_bytes -= op.op.size_bytes();
        let mut outcome = Outcome::Failed(OpError {
            code: rusqlite::ffi::SQLITE_ABORT,
            message: error.into(),
        });
        outcome.truncate_message(MAX_ERROR_BYTES);
        self.stats.last_error = Some(format!(
            "ticket {}: {}",
            op.ticket,
            outcome.message().unwrap_or_default()
        ));
        self.stats.failed += 1;
        self.outcomes.insert(op.ticket, op.owner, outcome);
        Some(op.ticket)
    }

    /// Where the op with `ticket` is, whoever submitted it (for an operator; a submitter asks
    /// [`status_for`](Self::status_for)). O(log n) in the number of kept outcomes.
    ///
    /// An op whose outcome was evicted is [`OpStatus::Evicted`], with whether it committed while
    /// the ticket is among the last [`Config::history_capacity`] flushed ones.
    pub fn status(&self, ticket: Ticket) -> OpStatus {
        self.lookup(ticket).0
    }

    /// [`status`](Self::status) as `owner` may see it: [`OpStatus::NotYours`] for an op that
    /// another owner submitted (pending, done, or evicted within the history). A ticket older
    /// than the history, whose submitter is no longer known, is `Evicted { committed: None }`
    /// for everyone; `Unknown` tickets are `Unknown` for everyone.
    pub fn status_for(&self, ticket: Ticket, owner: Owner) -> OpStatus {
        match self.lookup(ticket) {
            (_, Some(submitter)) if submitter != owner => OpStatus::NotYours,
            (status, _) => status,
        }
    }

    /// The submitter of `ticket`, while it is pending, kept or in the history.
    pub fn owner_of(&self, ticket: Ticket) -> Option<Owner> {
        self.lookup(ticket).1
    }

    fn lookup(&self, ticket: Ticket) -> (OpStatus, Option<Owner>) {
        if ticket < self.first_ticket || ticket >= self.next_ticket {
            return (OpStatus::Unknown, None);
        }
        if let Some(oldest) = self.pending.front()
            && ticket >= oldest.ticket
        {
            // Pending tickets are consecutive: ops leave the queue from its front.
            let index = usize::try_from(ticket - oldest.ticket).unwrap_or(usize::MAX);
            let owner = self
                .pending
                .get(index)
                .filter(|op| op.ticket == ticket)
                .map(|op| op.owner);
            return (OpStatus::Pending, owner);
        }
        if let Some((owner, outcome)) = self.outcomes.get(ticket) {
            return (OpStatus::Done(outcome.clone()), Some(owner));
        }
        match self.outcomes.history().get(ticket) {
            Some((owner, committed)) => (
                OpStatus::Evicted {
                    committed: Some(committed),
                },
                Some(owner),
            ),
            None => (OpStatus::Evicted { committed: None }, None),
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

    /// The ticket the next accepted op gets.
    pub fn next_ticket(&self) -> Ticket {
        self.next_ticket
    }

    /// The first ticket this queue issued (or will issue).
    pub fn first_ticket(&self) -> Ticket {
        self.first_ticket
    }

    /// After a `COMMIT` that an op made fail, or a flush stopped at its total limit: the most
    /// ops the next flush executes.
    pub fn commit_limit(&self) -> Option<usize> {
        self.commit_limit
    }

    pub(crate) fn pending_deque(&self) -> &VecDeque<PendingOp> {
        &self.pending
    }

    pub(crate) fn outcome_store(&self) -> &OutcomeStore {
        &self.outcomes
    }

    /// A copy of the whole state (queued ops with tickets and submit times, next ticket, kept
    /// outcomes, counters), for [`from_state`](Self::from_state). O(n) in queued ops and kept
    /// outcomes.
    pub fn to_state(&self) -> QueueState {
        let history = self.outcomes.history();
        QueueState {
            pending: self.pending.iter().cloned().collect(),
            first_ticket: self.first_ticket,
            next_ticket: self.next_ticket,
            outcomes: self
                .outcomes
                .iter()
                .map(|(ticket, owner, outcome)| StoredOutcome {
                    ticket,
                    owner,
                    outcome: outcome.clone(),
                })
                .collect(),
            history_base: history.base(),
            history: history
                .records()
                .iter()
                .map(|&record| (Owner::from_digest(record), record & 1 == 1))
                .collect(),
            stats: self.stats(),
            commit_limit: self.commit_limit.map(|limit| limit as u64),
        }
    }

    /// Replaces the configuration, keeping everything queued and the outcomes (beyond a
    /// smaller `outcome_capacity` the oldest are evicted; beyond a smaller `max_pending`,
    /// submits are rejected until flushes drain the queue below it). Fails, changing nothing,
    /// if `config` is invalid.
    pub fn reconfigure(&mut self, config: Config) -> Result<(), ConfigError> {
        config.validate()?;
        self.outcomes
            .set_capacity(config.outcome_capacity, config.history_capacity);
        self.config = config;
        Ok(())
    }

    /// Restores a queue from [`to_state`](Self::to_state), possibly with a new `config`.
    ///
    /// Every queued op is kept, even beyond a smaller `max_pending` (submits are then rejected
    /// until flushes drain the queue below it); outcomes beyond a smaller `outcome_capacity` are
    /// evicted per submitter, and history beyond a smaller `history_capacity` oldest first.
    /// Fails if `config` is invalid or the state's tickets are inconsistent
    /// ([`ConfigError::InvalidState`]).
    pub fn from_state(config: Config, state: QueueState) -> Result<Self, ConfigError> {
        config.validate()?;
        let invalid = |reason: &str| {
            Err(ConfigError::InvalidState {
                reason: reason.to_owned(),
            })
        };
        if state.first_ticket == 0 {
            return invalid("first_ticket is 0");
        }
        if state.next_ticket < state.first_ticket {
            return invalid("next_ticket is below first_ticket");
        }
        let pending_increasing = state.pending.windows(2).all(|w| w[0].ticket < w[1].ticket);
        if !pending_increasing
            || state
                .pending
                .first()
                .is_some_and(|op| op.ticket < state.first_ticket)
        {
            return invalid("pending tickets are not increasing from first_ticket");
        }
        if state
            .pending
            .last()
            .is_some_and(|op| op.ticket >= state.next_ticket)
        {
            return invalid("a pending ticket is not below next_ticket");
        }
        let outcomes_increasing = state.outcomes.windows(2).all(|w| w[0].ticket < w[1].ticket);
        if !outcomes_increasing
            || state
                .outcomes
                .first()
                .is_some_and(|o| o.ticket < state.first_ticket)
        {
            return invalid("outcome tickets are not increasing from first_ticket");
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
        if !state.history.is_empty()
            && (state.history_base < state.first_ticket
                || state
                    .history_base
                    .checked_add(state.history.len() as u64)
                    .is_none_or(|end| end > first_unflushed))
        {
            return invalid(
                "the history does not lie between first_ticket and the pending tickets",
            );
        }
        let mut outcomes = OutcomeStore::new(config.outcome_capacity, config.history_capacity);
        for stored in state.outcomes {
            outcomes.keep(stored.ticket, stored.owner, stored.outcome);
        }
        outcomes.set_history(History::restore(
            state.history_base,
            state
                .history
                .into_iter()
                .map(|(owner, committed)| owner.digest() | u64::from(committed))
                .collect(),
            config.history_capacity,
        ));
        let pending: VecDeque<PendingOp> = state.pending.into();
        let pending_bytes = pending
            .iter()
            .map(|op| op.op.size_bytes())
            .fold(0, usize::saturating_add);
        let stats = Stats {
            pending: pending.len() as u64,
            ..state.stats
        };
        let commit_limit = match state.commit_limit {
            None => None,
            Some(limit) => match usize::try_from(limit) {
                Ok(limit) if limit > 0 => Some(limit),
                _ => return invalid("commit_limit is 0 or too large"),
            },
        };
        Ok(BatchQueue {
            config,
            pending,
            pending_bytes,
            first_ticket: state.first_ticket,
            next_ticket: state.next_ticket,
            outcomes,
            stats,
            commit_limit,
            coalesce_cache: CoalesceCache::default(),
        })
    }
}

/// Whether a failed `COMMIT` is an op's doing: a deferred foreign key it violates, the only
/// constraint SQLite checks at `COMMIT`. Any other error (a read-only or full database, an I/O
/// error, a busy lock) is not: the ops stay queued.
fn commit_failed_by_op(error: &rusqlite::Error) -> bool {
    error_code(error) == rusqlite::ffi::SQLITE_CONSTRAINT_FOREIGNKEY
}

/// Longest error text an outcome keeps (SQLite's syntax errors quote the whole statement):
/// `batch_types::reply::MAX_ERROR_BYTES`, the cap of every outcome the library makes.
pub const MAX_ERROR_BYTES: usize = batch_types::reply::MAX_ERROR_BYTES;
