//! Exactly-once client batches, through batch_core's [`Deduplicator`] (its documentation
//! states the window rules, the storage and the costs).
//!
//! A keyed batch is looked up by the caller's principal and its key; a recorded key with the
//! same ops is answered with the recorded outcomes and runs nothing; a new key runs the batch
//! and records the key, the ops' digest and the outcomes inside the batch's transaction (a
//! trap rolls both back). The canister computes the digest from the ops as the client sent
//! them ([`BatchDigest::of_bytes`] of a canonical encoding), so the same ops digest alike
//! whichever of its methods carries them.
//!
//! Expired keys are pruned by a timer of their own, never while a batch runs and never in a
//! message that flushed the queue: a one-shot timer set for the moment the oldest recorded key
//! expires, armed by the update that records a key (again if that key expires before the armed
//! moment), after an upgrade, and by the flush timer if a prune timer was lost (its message
//! trapped: [`PRUNE_TIMER_LOST_NS`] after its moment). Each prune timer runs one step in its own
//! message: at most [`PRUNE_STEP_KEYS`] keys, and no key after the first once the message has
//! used [`PRUNE_STEP_INSTRUCTIONS`]; when expired keys are left, it arms itself again for right
//! away (the next round, another message). A prune message thus uses at most
//! [`PRUNE_MESSAGE_MAX_INSTRUCTIONS`] (1.25 B): [`PRUNE_STEP_INSTRUCTIONS`], plus the removal
//! of the key in hand and the step's `COMMIT`; it logs what it removed and the message's
//! instructions before and after.
//!
//! Each caller holds at most its share of the store (batch_core's `DedupConfig`: an eighth of
//! the keys and bytes by default), so one writer cannot fill the store and leave the others
//! refused for a whole window; a refusal names whose share is full (`WriteError::StoreFull`'s
//! `share`). A store written by a version without per-caller counts is migrated in
//! `post_upgrade` ([`restore`]): each caller's keys and bytes are aggregated once from the keys
//! held. The deduplicator's counters are saved across upgrades (`persist`); the keys
//! themselves live in SQLite.

use std::cell::{Cell, RefCell};
use std::time::Duration;

pub use batch_core::KeyedOutcomes;
use batch_core::{
    BatchDigest, BatchKey, Budget, DedupConfig, DedupCounters, DedupError, Deduplicator,
    InstructionMeter, KEYS_TABLE, Lookup, META_TABLE, WriteOp,
};
use batch_types::WriteError;
use ic_cdk_timers::TimerId;

use crate::message::MessageMeter;
use crate::state::{SETTINGS, with_connection};

/// Most expired keys one prune message removes.
pub const PRUNE_STEP_KEYS: u64 = 10_000;
/// The instructions after which a prune message removes no further key (1 B): its key in
/// hand is the last.
pub const PRUNE_STEP_INSTRUCTIONS: u64 = 1_000_000_000;
/// The most instructions a prune message uses (1.25 B): [`PRUNE_STEP_INSTRUCTIONS`], plus the
/// removal of the key in hand when the budget ran out, which grows with its record (about 7.5
/// instructions per byte measured, so at most about 250 M for a record as large as a caller's
/// whole 32 MiB share), plus the step's `COMMIT`. Measured on the offline engine with a full
/// store (256 MiB in 690 records of 390 KB, each the outcomes of 10,000 failed ops): 3
/// messages of 1,001,763,133, 1,003,048,384 and 453,433,877 instructions.
pub const PRUNE_MESSAGE_MAX_INSTRUCTIONS: u64 = 1_250_000_000;
/// After a failed prune, the next attempt waits this long (one minute).
const PRUNE_RETRY_NS: u64 = 60_000_000_000;
/// A prune timer that has not run this long after its moment is taken as lost (its message
/// trapped, which rolled back its bookkeeping) and armed again (ten minutes).
pub const PRUNE_TIMER_LOST_NS: u64 = 600_000_000_000;

thread_local! {
    static DEDUP: RefCell<Deduplicator> = RefCell::new(
        Deduplicator::new(DedupConfig::default()).expect("the default deduplication config is valid"),
    );
    /// When the oldest recorded key expires (`None`: no key recorded, as far as this heap knows).
    static NEXT_PRUNE_NS: Cell<Option<u64>> = const { Cell::new(None) };
    /// The one-shot prune timer, while armed: its id, the expiry it was armed for, and the
    /// moment it fires.
    static PRUNE_TIMER: Cell<Option<(TimerId, u64, u64)>> = const { Cell::new(None) };
}

/// A keyed batch as the canister decoded it: what
/// [`execute_batch_keyed`](crate::canister::execute_batch_keyed) runs.
pub struct KeyedBatch {
    /// The caller's key.
    pub key: BatchKey,
    /// The digest of the ops as the client sent them, in a canonical encoding
    /// ([`BatchDigest::of_bytes`]): a key reused for other ops is refused.
    pub digest: BatchDigest,
    /// The ops, validated.
    pub ops: Vec<WriteOp>,
}

/// Runs `batch` (its ops already checked) under its key of `caller` at `now_ns`, or answers
/// the recorded outcomes of a duplicate. No access check, and arms no timer:
/// [`execute_batch_keyed`](crate::canister::execute_batch_keyed) does both; a measurement hook
/// of the reference canister's benches (which run in queries, where no timer may be set).
#[doc(hidden)]
pub fn run(caller: &[u8], batch: KeyedBatch, now_ns: u64) -> Result<KeyedOutcomes, WriteError> {
    let KeyedBatch { key, digest, ops } = batch;
    let budget = Budget::new(
        MessageMeter,
        SETTINGS.with_borrow(|s| s.config.flush_instruction_budget),
    );
    let batch = DEDUP.with_borrow_mut(|dedup| {
        with_connection(|conn| {
            match dedup.lookup(conn, caller, &key, &digest, ops.len(), now_ns)? {
                Lookup::Duplicate(batch) => Ok(batch),
                Lookup::New(admitted) => {
                    dedup.execute_admitted_within(conn, admitted, &ops, &budget)
                }
            }
        })
    });
    let batch = batch.map_err(WriteError::from)?;
    if !batch.duplicate {
        recorded(key.created_at_time);
    }
    Ok(batch)
}

/// The moment a key created at `created_at_ns` becomes too old (and may be pruned).
fn expiry_of(created_at_ns: u64) -> u64 {
    let config = DEDUP.with_borrow(|d| d.config().clone());
    created_at_ns
        .saturating_add(config.window_ns)
        .saturating_add(config.permitted_drift_ns)
        .saturating_add(1)
}

/// Notes a key recorded at `created_at_ns` for the pruning timers.
fn recorded(created_at_ns: u64) {
    let expiry = expiry_of(created_at_ns);
    NEXT_PRUNE_NS.set(Some(
        NEXT_PRUNE_NS.get().map_or(expiry, |next| next.min(expiry)),
    ));
}

/// Arms the one-shot prune timer for the oldest key's expiry, unless no key is recorded or a
/// timer is armed for that expiry or an earlier one (and is not lost: see
/// [`PRUNE_TIMER_LOST_NS`]). A few `Cell` reads when nothing is to be armed. Called by the
/// update methods after a keyed batch, by the flush timer, and after an upgrade.
pub fn ensure_prune_timer() {
    let Some(due) = NEXT_PRUNE_NS.get() else {
        return;
    };
    let now = ic_cdk::api::time();
    if let Some((id, armed_for, fires_at)) = PRUNE_TIMER.get() {
        let lost = now >= fires_at.saturating_add(PRUNE_TIMER_LOST_NS);
        if armed_for <= due && !lost {
            return;
        }
        ic_cdk_timers::clear_timer(id);
    }
    let fires_at = due.max(now);
    let id = ic_cdk_timers::set_timer(Duration::from_nanos(fires_at - now), async {
        PRUNE_TIMER.set(None);
        prune_due(ic_cdk::api::time());
        ensure_prune_timer();
    });
    PRUNE_TIMER.set(Some((id, due, fires_at)));
}

/// Prunes one step of expired keys if the oldest recorded key has expired at `now_ns` (a
/// `Cell` read otherwise): at most [`PRUNE_STEP_KEYS`] keys, none after the first once the
/// message has used [`PRUNE_STEP_INSTRUCTIONS`]. Run only by the prune timer, in a message of
/// its own; logs what it removed and the message's instructions before and after.
fn prune_due(now_ns: u64) {
    if NEXT_PRUNE_NS.get().is_none_or(|at| now_ns < at) {
        return;
    }
    let before = MessageMeter.instructions();
    // The message's counter: what ran before in this message counts against the budget.
    let budget = Budget::new(MessageMeter, PRUNE_STEP_INSTRUCTIONS.saturating_sub(before));
    let pruned = DEDUP.with_borrow_mut(|dedup| {
        with_connection(|conn| {
            let report = dedup.prune(conn, now_ns, PRUNE_STEP_KEYS, &budget)?;
            Ok::<_, DedupError>((report, oldest_key(conn)))
        })
    });
    if let Ok((report, _)) = &pruned {
        ic_cdk::println!(
            "prune: removed {} expired batch keys ({} bytes); expired keys left: {}; instructions before {before}, after {}",
            report.removed,
            report.bytes_freed,
            report.more,
            MessageMeter.instructions()
        );
    }
    NEXT_PRUNE_NS.set(match pruned {
        // Expired keys are left: again right away, in another message.
        Ok((report, _)) if report.more => Some(now_ns),
        Ok((_, oldest)) => oldest.map(expiry_of),
        Err(e) => {
            ic_cdk::println!("pruning expired batch keys failed: {e}");
            Some(now_ns.saturating_add(PRUNE_RETRY_NS))
        }
    });
}

/// The creation time of the oldest recorded key (`None` if none, or no key was ever recorded).
fn oldest_key(conn: &ic_rusqlite::rusqlite::Connection) -> Option<u64> {
    conn.query_row(
        &format!("SELECT min(created_at) FROM {KEYS_TABLE}"),
        [],
        |row| row.get::<_, Option<i64>>(0),
    )
    .ok()
    .flatten()
    .and_then(|t| u64::try_from(t).ok())
}

/// The deduplicator's counters (saved across upgrades).
pub fn counters() -> DedupCounters {
    DEDUP.with_borrow(|d| d.counters().clone())
}

/// Restores the saved counters and the pruning schedule after an upgrade, migrates a store
/// written without per-caller counts (once: a scan of its keys, in `post_upgrade`'s larger
/// instruction limit rather than in the first keyed batch), and arms the prune timer if keys
/// are held. Traps (refusing the upgrade) if the store exists and cannot be migrated.
pub fn restore(counters: DedupCounters) {
    DEDUP.with_borrow_mut(|d| {
        *d = Deduplicator::with_counters(d.config().clone(), counters)
            .expect("the deduplication config in effect is valid");
        with_connection(|conn| {
            let store = conn
                .query_row(
                    "SELECT EXISTS (SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = ?1)",
                    [KEYS_TABLE],
                    |row| row.get::<_, bool>(0),
                )
                .map_err(DedupError::Store)?;
            if store { d.prepare(conn) } else { Ok(()) }
        })
        .unwrap_or_else(|e| ic_cdk::trap(format!("opening the deduplication store: {e}")));
    });
    NEXT_PRUNE_NS.set(with_connection(oldest_key).map(expiry_of));
    ensure_prune_timer();
}

/// What `stats` shows: (keyed batches, duplicates answered, keys refused, keys held, bytes
/// held, keys pruned). Keys and bytes held are read from the store's meta row (0 before the
/// first keyed batch created it).
pub(crate) fn stats() -> [u64; 6] {
    let c = counters();
    let (keys, bytes) = with_connection(|conn| {
        conn.query_row(
            &format!("SELECT keys, bytes FROM {META_TABLE} WHERE id = 0"),
            [],
            |row| Ok((row.get::<_, i64>(0)?, row.get::<_, i64>(1)?)),
        )
    })
    .unwrap_or((0, 0));
    [
        c.executed,
        c.duplicates_answered,
        c.too_old + c.created_in_future + c.digest_mismatches + c.store_full,
        keys.max(0) as u64,
        bytes.max(0) as u64,
        c.pruned,
    ]
}
