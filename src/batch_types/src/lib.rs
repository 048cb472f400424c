#![doc = include_str!("../README.md")]
#![warn(missing_docs)]

pub mod declare;
pub mod packed;
pub mod reply;
pub mod retry;

use candid::{CandidType, Deserialize};
use serde::Serialize;

/// The identifier of a queued write; ask [`TicketStatus`] with it. Issued consecutively from the
/// time of the install in nanoseconds since the Unix epoch (`ic0.time`), so never reused: not
/// across upgrades, which keep the counter, and not across reinstalls, which start past every
/// ticket issued before (a canister issues far fewer than one ticket per nanosecond).
pub type Ticket = u64;

/// Who may call the write methods.
#[derive(CandidType, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum WriteAccess {
    /// Controllers, and the writer principals controllers register (`add_writers`).
    #[default]
    Restricted,
    /// Anyone (for public benchmarking): every caller pays with the canister's cycles.
    Open,
}

/// Settings given at install or upgrade. Every field is optional: at install an absent field
/// takes its default, at upgrade it keeps the current value (so does an absent argument).
#[derive(CandidType, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct InitArgs {
    /// Ops per flush: a submit that fills the queue to this size flushes in the same call
    /// (default 100).
    pub flush_size: Option<u64>,
    /// Longest time an op waits before the timer flushes it, in milliseconds (default 1,000;
    /// the timer fires at most once per second, about once per round; at most 86,400,000, one
    /// day).
    pub max_delay_ms: Option<u64>,
    /// Queue capacity in ops: a submit beyond it is answered `QueueFull` (default 10,000; at
    /// most 500,000).
    pub max_pending: Option<u64>,
    /// Queue capacity in bytes of SQL and parameters (default 128 MiB, at most 256 MiB; at least
    /// the canister's floor, the bytes of the largest op of its typed API).
    pub max_pending_bytes: Option<u64>,
    /// Instructions one flush may spend before it starts no further op; a running op is
    /// interrupted at twice this, and a flush ends by three times it (default 10 billion). At
    /// most 10.6 billion: three times it plus an 8 billion margin must fit the 40 billion
    /// instructions of a message. At least the canister's floor (a multiple of its dearest single
    /// op, so that no ordinary op is interrupted).
    pub flush_instruction_budget: Option<u64>,
    /// Outcomes kept for `ticket_status` (default 10,000, at most 500,000; at least
    /// `max_pending`, so that a flush of a full queue keeps every outcome it records). When full, the oldest outcome of
    /// the caller keeping the most is evicted: a caller's outcomes make room only for its own.
    pub outcome_capacity: Option<u64>,
    /// Most rows per multi-row INSERT when a flush coalesces consecutive single-row INSERTs of
    /// one shape (default 128, at most 1,024; 0 or 1 turns coalescing off).
    pub coalesce_rows: Option<u64>,
    /// Who may write (default `Restricted`).
    pub write_access: Option<WriteAccess>,
}

/// The settings in effect.
#[derive(CandidType, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Settings {
    /// Ops per flush.
    pub flush_size: u64,
    /// Longest wait before the timer flushes, in milliseconds.
    pub max_delay_ms: u64,
    /// Queue capacity in ops.
    pub max_pending: u64,
    /// Queue capacity in bytes.
    pub max_pending_bytes: u64,
    /// Instructions per flush before no further op starts.
    pub flush_instruction_budget: u64,
    /// Outcomes kept.
    pub outcome_capacity: u64,
    /// Most rows per coalesced INSERT (0 or 1: off).
    pub coalesce_rows: u64,
    /// Who may write.
    pub write_access: WriteAccess,
    /// The database is read-only (`set_read_only`): queued ops wait, unbatched writes fail.
    pub read_only: bool,
}

// ---------------------------------------------------------------- outcomes

/// Why an operation failed.
#[derive(CandidType, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct OpError {
    /// SQLite's extended result code (<https://sqlite.org/rescode.html>: for example 2067
    /// `SQLITE_CONSTRAINT_UNIQUE`, 787 `SQLITE_CONSTRAINT_FOREIGNKEY`, 1299
    /// `SQLITE_CONSTRAINT_NOTNULL`, 13 `SQLITE_FULL`). `batch_core`'s own refusals use the codes
    /// SQLite would: 9 `SQLITE_INTERRUPT` for an op its instruction guard interrupted, 21
    /// `SQLITE_MISUSE` for a statement that is not a write or an empty unit, 25 `SQLITE_RANGE`
    /// for a wrong parameter count.
    pub code: i32,
    /// SQLite's error message (or rusqlite's, for errors it detects), at most 1 KiB (less in a
    /// large batch: `reply::max_error_bytes`); for a unit, prefixed with the index of the
    /// failing statement (`statement 2: ...`).
    pub message: String,
}

/// The result of one write: what the canister answers for each op (in Candid, and in every
/// packed reply as the `packed` module's outcome records), what `batch_core` makes and records,
/// and what a client reads. A client may send an op again only if it is `NotExecuted` (the
/// `retry` module's table).
#[derive(CandidType, Serialize, Deserialize, Clone, Debug, PartialEq)]
pub enum Outcome {
    /// The write committed.
    Committed {
        /// Rows it inserted, updated or deleted directly (SQLite's `changes()`, summed over the
        /// statements of a unit; rows changed by triggers or foreign-key actions are not
        /// counted; 0 for DDL).
        rows_changed: u64,
        /// Rowid of the row it inserted last (for a unit: its last inserting statement); 0 if
        /// it inserted nothing. Unlike SQLite's connection-wide `last_insert_rowid()`, never a
        /// rowid of an earlier op.
        last_insert_rowid: i64,
    },
    /// The write failed and changed nothing.
    Failed(OpError),
    /// The write did not run: its batch's instruction budget was used up before it started.
    /// Nothing of it was applied; unlike every other outcome, it may be sent again, in a later
    /// batch under a new key.
    NotExecuted,
}

impl Outcome {
    /// Whether the write took effect.
    pub fn is_committed(&self) -> bool {
        matches!(self, Outcome::Committed { .. })
    }

    /// The extended result code of a failed write.
    pub fn code(&self) -> Option<i32> {
        match self {
            Outcome::Failed(error) => Some(error.code),
            Outcome::Committed { .. } | Outcome::NotExecuted => None,
        }
    }

    /// The error message of a failed write.
    pub fn message(&self) -> Option<&str> {
        match self {
            Outcome::Failed(error) => Some(&error.message),
            Outcome::Committed { .. } | Outcome::NotExecuted => None,
        }
    }

    /// A failed write's outcome.
    pub fn failed(code: i32, message: impl Into<String>) -> Outcome {
        Outcome::Failed(OpError {
            code,
            message: message.into(),
        })
    }

    /// Cuts a failed write's message to `max_bytes` ([`reply::truncate_message`]); the code is
    /// kept.
    pub fn truncate_message(&mut self, max_bytes: usize) {
        if let Outcome::Failed(error) = self {
            reply::truncate_message(&mut error.message, max_bytes);
        }
    }
}

/// What one flush did.
#[derive(CandidType, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct FlushSummary {
    /// Ops executed (committed + failed).
    pub executed: u64,
    /// Ops that committed.
    pub committed: u64,
    /// Ops that failed.
    pub failed: u64,
    /// Failed ops stopped at their instruction limit (included in `failed`).
    pub interrupted: u64,
    /// Ops still queued.
    pub remaining: u64,
    /// Ops are left for the timer.
    pub more_due: bool,
    /// Instructions the flush used.
    pub instructions: u64,
}

/// Why a call was refused. Nothing was queued or executed. The single-op methods refuse with a
/// reject (code 4, `CANISTER_REJECT`) whose message is this error's text ([`std::fmt::Display`]),
/// starting with the variant's name.
#[derive(CandidType, Deserialize, Clone, Debug, PartialEq, Eq)]
pub enum WriteError {
    /// The queue holds `capacity` ops; retry after a flush.
    QueueFull {
        /// The queue's capacity in ops.
        capacity: u64,
    },
    /// The queue's bytes would exceed its capacity; retry after a flush.
    QueueBytesFull {
        /// Bytes queued now.
        pending_bytes: u64,
        /// The queue's capacity in bytes.
        capacity_bytes: u64,
    },
    /// An argument breaks a limit of the interface (batch size, text length, an empty unit).
    Invalid(String),
    /// The caller may not call this method.
    NotAuthorized,
    /// The transaction could not begin or commit; nothing of it was applied.
    Database(String),
    /// A keyed batch's key was created before `now − window − permitted drift`: whether a batch
    /// with this key ran is no longer answered, and nothing ran now.
    TooOld {
        /// The key's `created_at_time`, in nanoseconds since the Unix epoch.
        created_at_time: u64,
        /// The canister's time.
        now: u64,
        /// The oldest `created_at_time` accepted at `now`.
        oldest_accepted: u64,
    },
    /// A keyed batch's key was created after `now + permitted drift`: the client's clock is
    /// ahead. Nothing ran.
    CreatedInFuture {
        /// The key's `created_at_time`, in nanoseconds since the Unix epoch.
        created_at_time: u64,
        /// The canister's time (ICRC-1's `ledger_time`).
        now: u64,
        /// The newest `created_at_time` accepted at `now`.
        newest_accepted: u64,
    },
    /// The caller already used this key for a batch of other ops: never answered with another
    /// batch's outcomes. Nothing ran.
    DigestMismatch {
        /// The key's `created_at_time`.
        created_at_time: u64,
    },
    /// The caller's share of the deduplication store, or the whole store, is full of keys still
    /// within their window: a new key is refused rather than one forgotten. `share` says which,
    /// and the counts are that share's (the caller's keys and bytes against its share, or the
    /// store's against its bounds). Nothing ran and nothing was recorded; send the batch again
    /// with the same key after expired keys are pruned.
    StoreFull {
        /// Keys held (by the caller, or in the store).
        keys_held: u64,
        /// The most keys of that share.
        max_keys: u64,
        /// Bytes held (by the caller, or in the store).
        bytes_held: u64,
        /// The most bytes of that share.
        max_bytes: u64,
        /// Whose share is full.
        share: StoreShare,
    },
}

/// Whose share of the deduplication store is full ([`WriteError::StoreFull`]).
#[derive(CandidType, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StoreShare {
    /// The caller holds its most keys or bytes (one caller may hold only a share of the store,
    /// an eighth by default): other callers may still record keys.
    Caller,
    /// The store holds its most keys or bytes.
    Store,
}

impl std::fmt::Display for StoreShare {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            StoreShare::Caller => "the caller's share of the deduplication store",
            StoreShare::Store => "the deduplication store",
        })
    }
}

impl std::fmt::Display for WriteError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WriteError::QueueFull { capacity } => {
                write!(
                    f,
                    "QueueFull: {capacity} ops are queued; retry after a flush"
                )
            }
            WriteError::QueueBytesFull {
                pending_bytes,
                capacity_bytes,
            } => write!(
                f,
                "QueueBytesFull: {pending_bytes} of {capacity_bytes} bytes are queued; retry after a flush"
            ),
            WriteError::Invalid(reason) => write!(f, "Invalid: {reason}"),
            WriteError::NotAuthorized => write!(
                f,
                "NotAuthorized: only controllers and registered writers may call this method"
            ),
            WriteError::Database(reason) => write!(f, "Database: {reason}"),
            WriteError::TooOld {
                created_at_time,
                now,
                oldest_accepted,
            } => write!(
                f,
                "TooOld: created_at_time {created_at_time} ns is before the oldest accepted {oldest_accepted} ns (now {now} ns minus the window and the permitted drift)"
            ),
            WriteError::CreatedInFuture {
                created_at_time,
                now,
                newest_accepted,
            } => write!(
                f,
                "CreatedInFuture: created_at_time {created_at_time} ns is after the newest accepted {newest_accepted} ns (now {now} ns plus the permitted drift)"
            ),
            WriteError::DigestMismatch { created_at_time } => write!(
                f,
                "DigestMismatch: created_at_time {created_at_time} ns: this key was already used for a batch of other ops"
            ),
            WriteError::StoreFull {
                keys_held,
                max_keys,
                bytes_held,
                max_bytes,
                share,
            } => write!(
                f,
                "StoreFull: {} keys {keys_held} of {max_keys}, bytes {bytes_held} of {max_bytes}; send the batch again with the same key after expired keys are pruned",
                match share {
                    StoreShare::Caller => "the caller's share:",
                    StoreShare::Store => "the store:",
                }
            ),
        }
    }
}

impl std::error::Error for WriteError {}

/// Where a queued write is.
#[derive(CandidType, Deserialize, Clone, Debug, PartialEq)]
pub enum TicketStatus {
    /// Queued, not yet flushed.
    Pending,
    /// Flushed and committed.
    Committed {
        /// Rows it inserted, updated or deleted.
        rows_changed: u64,
        /// Rowid of the row it inserted last (0 if none).
        last_insert_rowid: i64,
    },
    /// Flushed, failed, changed nothing.
    Failed(OpError),
    /// Flushed, but the outcome was evicted from the bounded store (the oldest of the caller
    /// keeping the most go first).
    Evicted {
        /// Whether it committed, while the ticket is among the last 1,048,576 flushed; `None`
        /// for an older one.
        committed: Option<bool>,
    },
    /// Issued to another caller: only the caller that submitted it and controllers may see it.
    NotYours,
    /// Never issued by this install.
    Unknown,
}

/// Queue counters since install (kept across upgrades).
#[derive(CandidType, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Stats {
    /// Ops queued now.
    pub pending: u64,
    /// Bytes of SQL and parameters queued now.
    pub pending_bytes: u64,
    /// Ops accepted (tickets issued).
    pub submitted: u64,
    /// Flushed ops that committed.
    pub committed: u64,
    /// Flushed ops that failed.
    pub failed: u64,
    /// Failed ops stopped at their instruction limit (included in `failed`).
    pub interrupted: u64,
    /// Submits refused (queue full, op too large, empty unit).
    pub rejected: u64,
    /// Flushes that executed at least one op.
    pub flushes: u64,
    /// Flushes whose transaction could not begin or commit (the queue was kept).
    pub flush_errors: u64,
    /// Flushes rolled back at their total instruction limit (3 × the budget) while re-applying
    /// ops after an interrupt (the queue was kept; the next flush runs fewer ops).
    pub capped_flushes: u64,
    /// Ops the last flush executed.
    pub last_flush_ops: u64,
    /// Instructions the last flush used.
    pub last_flush_instructions: u64,
    /// The last flush error or interrupted op, as text.
    pub last_error: Option<String>,
    /// What keeps the queue from draining now, if anything: flushes failing outside any op
    /// (a read-only or full database; every op stays queued and the timer retries once per
    /// period), or flushes trapping (careful flushes are looking for the op that makes them
    /// trap).
    pub alarm: Option<String>,
    /// A timer will flush what is queued (true whenever ops are pending).
    pub timer_armed: bool,
    /// Keyed client batches that ran and were recorded.
    pub keyed_batches: u64,
    /// Repeated keys answered with their recorded outcomes (nothing ran).
    pub duplicates_answered: u64,
    /// Keyed batches refused by the window rules, a reused key or a full store.
    pub keys_refused: u64,
    /// Keys held now (recorded and not yet pruned).
    pub keys_held: u64,
    /// Bytes of keys held now (caller, id, digest, outcomes, overhead).
    pub key_bytes_held: u64,
    /// Expired keys pruned.
    pub keys_pruned: u64,
}

/// Why a query failed (the database answered an error).
#[derive(CandidType, Deserialize, Clone, Debug, PartialEq, Eq)]
pub enum QueryError {
    /// SQLite's error running the query, as text.
    Database(String),
}

impl std::fmt::Display for QueryError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            QueryError::Database(reason) => write!(f, "Database: {reason}"),
        }
    }
}

impl std::error::Error for QueryError {}

// ---------------------------------------------------------------- the interface

/// Who may call a method of a canister's interface, and how: the one declaration that the
/// canister's `inspect_message`, its interface checks and its tests read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MethodClass {
    /// An update that writes (or spends the canister's cycles on writing): controllers and
    /// writers, or anyone in [`WriteAccess::Open`].
    Write,
    /// A [`Write`](Self::Write) whose argument is small (a single op): an ingress message with a
    /// larger argument than the canister's limit is refused before it is paid for.
    SmallWrite,
    /// An update only controllers may call.
    Controller,
    /// A query: never accepted as an ingress update (a replicated query the canister would pay
    /// for like an update).
    Query,
}

// ---------------------------------------------------------------- controller SQL

/// A value bound to a `?N` parameter of controller SQL.
#[derive(CandidType, Deserialize, Clone, Debug, PartialEq)]
pub enum SqlParam {
    /// SQL `NULL`.
    Null,
    /// A 64-bit integer.
    Integer(i64),
    /// A 64-bit float (NaN is bound as `NULL`).
    Real(f64),
    /// UTF-8 text.
    Text(String),
    /// Bytes.
    Blob(#[serde(with = "serde_bytes")] Vec<u8>),
}

/// One SQL statement with its parameters (controller only).
#[derive(CandidType, Deserialize, Clone, Debug, PartialEq)]
pub struct SqlStatement {
    /// The statement's text (one statement).
    pub sql: String,
    /// Its parameters, in order.
    pub params: Vec<SqlParam>,
}

// ---------------------------------------------------------------- named results

/// Declares Candid `Result` variants with names (`variant { Ok : T; Err : E }`, converting to and
/// from Rust's `Result`): `named_results! { /// docs\n CountsResult(Counts, QueryError); }`. The
/// crate using it depends on `candid` (the derives name it).
#[macro_export]
macro_rules! named_results {
    ($($(#[$doc:meta])* $name:ident($ok:ty, $err:ty);)*) => {
        $(
            $(#[$doc])*
            #[derive(::candid::CandidType, ::candid::Deserialize, Clone, Debug, PartialEq)]
            pub enum $name {
                /// Success.
                Ok($ok),
                /// Refused or failed.
                Err($err),
            }

            impl From<Result<$ok, $err>> for $name {
                fn from(result: Result<$ok, $err>) -> Self {
                    match result {
                        Ok(value) => $name::Ok(value),
                        Err(error) => $name::Err(error),
                    }
                }
            }

            impl From<$name> for Result<$ok, $err> {
                fn from(result: $name) -> Self {
                    match result {
                        $name::Ok(value) => Ok(value),
                        $name::Err(error) => Err(error),
                    }
                }
            }
        )*
    };
}

named_results! {
    /// The result of an unbatched write (`execute_sql`, and a canister's typed writes).
    WriteResult(Outcome, WriteError);
    /// The result of a batched write (`submit_sql`, and a canister's typed submits). A submit
    /// that filled a batch has flushed it; `stats` and `ticket_status` tell what that flush did.
    SubmitResult(Ticket, WriteError);
    /// The result of `flush`.
    FlushResult(FlushSummary, WriteError);
    /// The result of a controller's settings call (`add_writers`, `remove_writers`,
    /// `set_read_only`).
    AdminResult((), WriteError);
}

/// The result of `execute_batch`: one outcome per op, in order.
#[derive(CandidType, Deserialize, Clone, Debug, PartialEq)]
pub enum BatchResult {
    /// The batch ran now: one outcome per op, in order.
    Ok(Vec<Outcome>),
    /// The batch was refused whole; nothing of it ran.
    Err(WriteError),
    /// The batch's key was already recorded for this caller with the same ops: nothing ran
    /// now, and these are the outcomes recorded when it first ran. Only keyed calls get it.
    Duplicate(Vec<Outcome>),
}

impl BatchResult {
    /// The outcomes, whether the batch ran now or is a duplicate; the error if refused.
    pub fn outcomes(self) -> Result<Vec<Outcome>, WriteError> {
        match self {
            BatchResult::Ok(outcomes) | BatchResult::Duplicate(outcomes) => Ok(outcomes),
            BatchResult::Err(error) => Err(error),
        }
    }
}

impl From<Result<Vec<Outcome>, WriteError>> for BatchResult {
    fn from(result: Result<Vec<Outcome>, WriteError>) -> Self {
        match result {
            Ok(outcomes) => BatchResult::Ok(outcomes),
            Err(error) => BatchResult::Err(error),
        }
    }
}

/// An unkeyed `execute_batch`'s result as a `Result` (a [`BatchResult::Duplicate`], which only
/// keyed calls get, converts to its outcomes, as [`BatchResult::outcomes`] does).
impl From<BatchResult> for Result<Vec<Outcome>, WriteError> {
    fn from(result: BatchResult) -> Self {
        result.outcomes()
    }
}

/// The key of an exactly-once client batch: when its client created it, and 16 bytes that tell
/// the client's batches apart; scoped to the caller. The canister records the key with the
/// batch's outcomes in the batch's transaction, and answers a repeated key with those outcomes
/// without running anything. The window rules are ICRC-1's transaction deduplication: a key is
/// accepted from `now − 24 h − 60 s` to `now + 60 s`.
///
/// The library's one key type: Candid carries it as `record { created_at_time : nat64; id :
/// blob }` (an id of another length than 16 is refused when the argument is decoded, naming
/// its length), both packed formats as 8 bytes of `created_at_time` little-endian and the 16
/// id bytes, `batch_core` records it as it is, and the clients make it.
#[derive(
    CandidType, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord,
)]
pub struct BatchKey {
    /// Nanoseconds since the Unix epoch when the client created the batch (ICRC-1's
    /// `created_at_time`).
    pub created_at_time: u64,
    /// Chosen by the client so that its keys differ.
    #[serde(with = "key_id")]
    pub id: [u8; 16],
}

impl std::fmt::Display for BatchKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/", self.created_at_time)?;
        self.id.iter().try_for_each(|b| write!(f, "{b:02x}"))
    }
}

/// A key's id as bytes (Candid's `blob`), refusing another length than 16 with its length.
mod key_id {
    use serde::de::{Error, Visitor};
    use serde::{Deserializer, Serializer};

    pub fn serialize<S: Serializer>(id: &[u8; 16], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(id)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<[u8; 16], D::Error> {
        d.deserialize_bytes(Id)
    }

    struct Id;

    impl Visitor<'_> for Id {
        type Value = [u8; 16];

        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("16 bytes")
        }

        fn visit_bytes<E: Error>(self, bytes: &[u8]) -> Result<[u8; 16], E> {
            bytes.try_into().map_err(|_| {
                E::custom(format!(
                    "the batch key's id has {} bytes; it must have 16",
                    bytes.len()
                ))
            })
        }

        fn visit_byte_buf<E: Error>(self, bytes: Vec<u8>) -> Result<[u8; 16], E> {
            self.visit_bytes(&bytes)
        }
    }
}

#[cfg(test)]
mod tests {
    use candid::{CandidType, Decode, Deserialize, Encode};

    use super::{BatchKey, WriteError};

    /// What Candid's error says first (its text is the decoder's state).
    fn cause(error: candid::Error) -> String {
        match error {
            candid::Error::Custom(e) => e.root_cause().to_string(),
            other => panic!("{other}"),
        }
    }

    /// The key as Candid carried it before it was the one key type (the id a `Vec<u8>`).
    #[derive(CandidType, Deserialize)]
    struct CandidKey {
        created_at_time: u64,
        #[serde(with = "serde_bytes")]
        id: Vec<u8>,
    }

    /// The one key is Candid's `record { created_at_time : nat64; id : blob }`, byte for byte
    /// as before; an id of another length than 16 is refused when it is decoded, naming its
    /// length, inside an `opt` too (never read as `null`, which would run a keyed batch
    /// unkeyed).
    #[test]
    fn the_key_is_the_candid_record_and_refuses_another_id_length() {
        let key = BatchKey {
            created_at_time: 7,
            id: [3; 16],
        };
        let old = CandidKey {
            created_at_time: 7,
            id: vec![3; 16],
        };
        assert_eq!(Encode!(&key).unwrap(), Encode!(&old).unwrap());
        assert_eq!(Decode!(&Encode!(&old).unwrap(), BatchKey).unwrap(), key);
        assert_eq!(key.to_string(), "7/03030303030303030303030303030303");
        for len in [0, 15, 17] {
            let short = CandidKey {
                created_at_time: 7,
                id: vec![3; len],
            };
            let err = Decode!(&Encode!(&short).unwrap(), BatchKey).unwrap_err();
            assert_eq!(
                cause(err),
                format!("Deserialize error: the batch key's id has {len} bytes; it must have 16")
            );
            let err = Decode!(&Encode!(&Some(short)).unwrap(), Option<BatchKey>).unwrap_err();
            assert!(cause(err).ends_with("must have 16"));
        }
        // The error of a key refused by the canister still names the key's time.
        let refused = WriteError::DigestMismatch {
            created_at_time: key.created_at_time,
        };
        assert!(refused.to_string().contains("created_at_time 7 ns"));
    }
}
