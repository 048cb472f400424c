//! Exactly-once client batches: [`Deduplicator`] (its documentation states the rules, the
//! storage and the costs), the key, the digest, and the stored form of outcomes.

use rusqlite::{Connection, ErrorCode, OptionalExtension, TransactionBehavior, params};
use serde::{Deserialize, Serialize};
use xxhash_rust::xxh3::{Xxh3, xxh3_128};

use crate::executor::{FlushError, execute_batch_within_then};
use crate::meter::{Budget, InstructionMeter};
use crate::op::{Outcome, SqlValue, WriteOp};

#[cfg(test)]
mod proptests;
mod stored;
#[cfg(test)]
mod tests;

/// The default deduplication window: 24 hours, in nanoseconds (the ICP and ICRC ledgers' window).
pub const DEFAULT_WINDOW_NS: u64 = 24 * 60 * 60 * 1_000_000_000;
/// The default permitted drift between a client's clock and the database's: 60 seconds, in
/// nanoseconds (the replica's `PERMITTED_DRIFT`, which the ledgers use).
pub const DEFAULT_PERMITTED_DRIFT_NS: u64 = 60 * 1_000_000_000;
/// The default most keys held: one million.
pub const DEFAULT_MAX_KEYS: u64 = 1_000_000;
/// The default most bytes held: 256 MiB.
pub const DEFAULT_MAX_BYTES: u64 = 256 << 20;
/// The default most keys one caller holds: an eighth of [`DEFAULT_MAX_KEYS`] (125,000).
pub const DEFAULT_MAX_KEYS_PER_CALLER: u64 = DEFAULT_MAX_KEYS / 8;
/// The default most bytes one caller holds: an eighth of [`DEFAULT_MAX_BYTES`] (32 MiB).
pub const DEFAULT_MAX_BYTES_PER_CALLER: u64 = DEFAULT_MAX_BYTES / 8;
/// The longest caller, in bytes (a principal has at most 29).
pub const MAX_CALLER_BYTES: usize = 64;
/// Bytes counted per key on top of its caller, id, digest and encoded outcomes (its creation
/// time and SQLite's record header).
pub const KEY_OVERHEAD_BYTES: u64 = 16;

/// The table of keys.
pub const KEYS_TABLE: &str = "batch_core_dedup_keys";
/// The table of the store's counters.
pub const META_TABLE: &str = "batch_core_dedup_meta";
/// The table of each caller's keys and bytes held (a row per caller holding keys).
pub const CALLERS_TABLE: &str = "batch_core_dedup_callers";
/// Expired keys a prune step reads per query, before removing them one at a time.
const PRUNE_CHUNK_KEYS: u64 = 64;

const SCHEMA: &str = "CREATE TABLE IF NOT EXISTS batch_core_dedup_keys (
  created_at INTEGER NOT NULL,
  caller BLOB NOT NULL,
  id BLOB NOT NULL,
  digest BLOB NOT NULL,
  outcomes BLOB NOT NULL,
  PRIMARY KEY (created_at, caller, id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS batch_core_dedup_meta (
  id INTEGER PRIMARY KEY CHECK (id = 0),
  keys INTEGER NOT NULL,
  bytes INTEGER NOT NULL
);
INSERT OR IGNORE INTO batch_core_dedup_meta (id, keys, bytes) VALUES (0, 0, 0);";
/// The per-caller counts.
const CALLERS_SCHEMA: &str = "CREATE TABLE batch_core_dedup_callers (
  caller BLOB PRIMARY KEY,
  keys INTEGER NOT NULL,
  bytes INTEGER NOT NULL
) WITHOUT ROWID;";
/// The migration of a store written before the per-caller counts: each caller's keys and
/// bytes aggregated once from the keys held (run only when the table is created beside them).
const CALLERS_MIGRATION: &str = "INSERT INTO batch_core_dedup_callers (caller, keys, bytes)
  SELECT caller, count(*), sum(length(caller) + length(id) + length(digest) + length(outcomes) + 16)
  FROM batch_core_dedup_keys GROUP BY caller;";
// The migration above counts each key's bytes as `key_bytes` does.
const _: () = assert!(KEY_OVERHEAD_BYTES == 16);
/// Whether the table of keys and the table of per-caller counts exist.
const STORE_TABLES: &str = "SELECT \
    EXISTS (SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = 'batch_core_dedup_keys'), \
    EXISTS (SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = 'batch_core_dedup_callers')";
/// The key's digest and outcomes (NULL if it is not recorded), the store's counts and the
/// caller's (0 for a caller holding no key), in one read.
const LOOKUP: &str = "SELECT k.digest, k.outcomes, m.keys, m.bytes, \
    coalesce(c.keys, 0), coalesce(c.bytes, 0) \
    FROM batch_core_dedup_meta AS m \
    LEFT JOIN batch_core_dedup_keys AS k ON k.created_at = ?1 AND k.caller = ?2 AND k.id = ?3 \
    LEFT JOIN batch_core_dedup_callers AS c ON c.caller = ?2 \
    WHERE m.id = 0";
const READ_META: &str = "SELECT keys, bytes FROM batch_core_dedup_meta WHERE id = 0";
const READ_CALLER: &str = "SELECT keys, bytes FROM batch_core_dedup_callers WHERE caller = ?1";
/// Counts a key of ?2 bytes for caller ?1 if its share has room (?3 keys, ?4 bytes); changes
/// no row otherwise. (The `WHERE` of the `SELECT` also keeps SQLite's parser from reading
/// `ON CONFLICT` as a join constraint.)
const RESERVE_CALLER: &str = "INSERT INTO batch_core_dedup_callers (caller, keys, bytes) \
    SELECT ?1, 1, ?2 WHERE ?2 <= ?4 \
    ON CONFLICT (caller) DO UPDATE SET keys = keys + 1, bytes = bytes + ?2 \
    WHERE keys + 1 <= ?3 AND bytes + ?2 <= ?4";
const RESERVE: &str = "UPDATE batch_core_dedup_meta SET keys = keys + 1, bytes = bytes + ?1 \
    WHERE id = 0 AND keys + 1 <= ?2 AND bytes + ?1 <= ?3";
const INSERT: &str = "INSERT INTO batch_core_dedup_keys (created_at, caller, id, digest, outcomes) \
    VALUES (?1, ?2, ?3, ?4, ?5)";
/// The oldest expired keys (`length()` of a blob reads its header, not its pages).
const EXPIRED: &str = "SELECT created_at, caller, id, \
    length(caller) + length(id) + length(digest) + length(outcomes) \
    FROM batch_core_dedup_keys WHERE created_at < ?1 ORDER BY created_at LIMIT ?2";
const DELETE_KEY: &str =
    "DELETE FROM batch_core_dedup_keys WHERE created_at = ?1 AND caller = ?2 AND id = ?3";
const RELEASE_CALLER: &str = "UPDATE batch_core_dedup_callers \
    SET keys = keys - ?2, bytes = bytes - ?3 WHERE caller = ?1 RETURNING keys";
const FORGET_CALLER: &str = "DELETE FROM batch_core_dedup_callers WHERE caller = ?1";
const RELEASE: &str =
    "UPDATE batch_core_dedup_meta SET keys = keys - ?1, bytes = bytes - ?2 WHERE id = 0";
const EXPIRED_LEFT: &str =
    "SELECT EXISTS (SELECT 1 FROM batch_core_dedup_keys WHERE created_at < ?1)";

/// A batch's key (`ic-rusqlite-batch-types`' type: the library's one key, which Candid and
/// the packed formats carry and the clients make), scoped to a caller.
pub use batch_types::BatchKey;
/// Whose share of the key store is full ([`DedupError::StoreFull`]): the caller's
/// ([`DedupConfig::max_keys_per_caller`], [`DedupConfig::max_bytes_per_caller`]) or the
/// store's ([`DedupConfig::max_keys`], [`DedupConfig::max_bytes`]).
pub use batch_types::StoreShare;

/// The XXH3-128 of a batch's ops (canonical big-endian bytes): what tells a retry of a batch
/// from another batch sent with the same key.
///
/// Not a cryptographic hash, and it need not be: keys are scoped to the caller, so both
/// batches a digest tells apart come from the same caller, who chose the key and the ops of
/// each. A caller that forged a collision would only be answered with the outcomes of its own
/// first batch; no other caller's batch can collide with it. Accidental collisions of a
/// 128-bit hash of this quality are out of reach (about 2^-128 per pair of batches). What the
/// choice buys is cost: XXH3 hashes a 1,000-op request in a few instructions per byte, where
/// SHA-256 took about 75 per byte in a canister (wasm32 without SIMD), most of what
/// deduplication cost per batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BatchDigest(pub [u8; 16]);

impl BatchDigest {
    /// The XXH3-128 of `bytes`: in a canister, of the request's encoded ops, which is cheaper
    /// than hashing the ops they decode to. Cost: linear in `bytes`.
    pub fn of_bytes(bytes: &[u8]) -> Self {
        BatchDigest(xxh3_128(bytes).to_be_bytes())
    }

    /// The XXH3-128 of a canonical encoding of `ops` (every SQL text, every parameter, floats
    /// by their bits). Cost: linear in the ops' SQL and parameters.
    pub fn of_ops(ops: &[WriteOp]) -> Self {
        let mut hasher = Xxh3::new();
        let len = |hasher: &mut Xxh3, n: usize| hasher.update(&(n as u64).to_le_bytes());
        len(&mut hasher, ops.len());
        for op in ops {
            let statements = match op {
                WriteOp::Single(statement) => {
                    hasher.update(&[0]);
                    std::slice::from_ref(statement)
                }
                WriteOp::Unit(statements) => {
                    hasher.update(&[1]);
                    len(&mut hasher, statements.len());
                    statements.as_slice()
                }
            };
            for statement in statements {
                len(&mut hasher, statement.sql.len());
                hasher.update(statement.sql.as_bytes());
                len(&mut hasher, statement.params.len());
                for param in &statement.params {
                    match param {
                        SqlValue::Null => hasher.update(&[0]),
                        SqlValue::Integer(i) => {
                            hasher.update(&[1]);
                            hasher.update(&i.to_le_bytes());
                        }
                        SqlValue::Real(f) => {
                            hasher.update(&[2]);
                            hasher.update(&f.to_bits().to_le_bytes());
                        }
                        SqlValue::Text(text) => {
                            hasher.update(&[3]);
                            len(&mut hasher, text.len());
                            hasher.update(text.as_bytes());
                        }
                        SqlValue::Blob(blob) => {
                            hasher.update(&[4]);
                            len(&mut hasher, blob.len());
                            hasher.update(blob);
                        }
                    }
                }
            }
        }
        BatchDigest(hasher.digest128().to_be_bytes())
    }
}

/// The rules and bounds of a [`Deduplicator`].
///
/// | field | default | meaning |
/// |---|---|---|
/// | `window_ns` | [`DEFAULT_WINDOW_NS`] (24 h) | how long a key is answered |
/// | `permitted_drift_ns` | [`DEFAULT_PERMITTED_DRIFT_NS`] (60 s) | how far a client's clock may be off |
/// | `max_keys` | [`DEFAULT_MAX_KEYS`] | most keys held |
/// | `max_bytes` | [`DEFAULT_MAX_BYTES`] | most bytes held |
/// | `max_keys_per_caller` | [`DEFAULT_MAX_KEYS_PER_CALLER`] (an eighth of `max_keys`) | most keys one caller holds |
/// | `max_bytes_per_caller` | [`DEFAULT_MAX_BYTES_PER_CALLER`] (an eighth of `max_bytes`) | most bytes one caller holds |
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DedupConfig {
    /// A key is refused as too old once it was created more than `window_ns +
    /// permitted_drift_ns` ago; until then it is answered. At least 1.
    pub window_ns: u64,
    /// A key created more than this after the database's time is refused; it also extends the
    /// window into the past.
    pub permitted_drift_ns: u64,
    /// Most keys held; at least 1.
    pub max_keys: u64,
    /// Most bytes held (see [`KEY_OVERHEAD_BYTES`]); at least 1.
    pub max_bytes: u64,
    /// Most keys one caller holds (its share): so that one caller cannot fill the store and
    /// leave every other caller refused for a whole window. At least 1; a share as large as
    /// `max_keys` turns it off.
    pub max_keys_per_caller: u64,
    /// Most bytes one caller holds (its share); at least 1.
    pub max_bytes_per_caller: u64,
}

impl Default for DedupConfig {
    fn default() -> Self {
        DedupConfig {
            window_ns: DEFAULT_WINDOW_NS,
            permitted_drift_ns: DEFAULT_PERMITTED_DRIFT_NS,
            max_keys: DEFAULT_MAX_KEYS,
            max_bytes: DEFAULT_MAX_BYTES,
            max_keys_per_caller: DEFAULT_MAX_KEYS_PER_CALLER,
            max_bytes_per_caller: DEFAULT_MAX_BYTES_PER_CALLER,
        }
    }
}

impl DedupConfig {
    /// Checks the bounds documented on each field.
    pub fn validate(&self) -> Result<(), DedupConfigError> {
        if self.window_ns == 0 {
            return Err(DedupConfigError::ZeroWindow);
        }
        if self.max_keys == 0 {
            return Err(DedupConfigError::ZeroMaxKeys);
        }
        if self.max_bytes == 0 {
            return Err(DedupConfigError::ZeroMaxBytes);
        }
        if self.max_keys_per_caller == 0 || self.max_bytes_per_caller == 0 {
            return Err(DedupConfigError::ZeroCallerShare);
        }
        let bounds = [
            self.max_keys,
            self.max_bytes,
            self.max_keys_per_caller,
            self.max_bytes_per_caller,
        ];
        if bounds.iter().any(|bound| i64::try_from(*bound).is_err()) {
            return Err(DedupConfigError::BoundTooLarge);
        }
        Ok(())
    }

    /// The oldest creation time a key may have at `now_ns`: `now − window − drift`
    /// (saturating at 0).
    pub fn oldest_accepted_ns(&self, now_ns: u64) -> u64 {
        now_ns
            .saturating_sub(self.window_ns)
            .saturating_sub(self.permitted_drift_ns)
    }

    /// The newest creation time a key may have at `now_ns`: `now + drift` (saturating).
    pub fn newest_accepted_ns(&self, now_ns: u64) -> u64 {
        now_ns.saturating_add(self.permitted_drift_ns)
    }
}

/// Why a [`DedupConfig`] was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DedupConfigError {
    /// `window_ns` is 0: no key could be answered.
    #[error("window_ns must be at least 1")]
    ZeroWindow,
    /// `max_keys` is 0: no key could be held.
    #[error("max_keys must be at least 1")]
    ZeroMaxKeys,
    /// `max_bytes` is 0: no key could be held.
    #[error("max_bytes must be at least 1")]
    ZeroMaxBytes,
    /// `max_keys_per_caller` or `max_bytes_per_caller` is 0: no caller could hold a key.
    #[error("max_keys_per_caller and max_bytes_per_caller must be at least 1")]
    ZeroCallerShare,
    /// A bound does not fit SQLite's 64-bit signed integers.
    #[error("max_keys, max_bytes and the per-caller shares must be below 2^63")]
    BoundTooLarge,
}

/// Why a keyed batch was not run (or not answered). In every case nothing of the batch took
/// effect; only [`DedupError::Flush`] and [`DedupError::Store`] can come from a failure of the
/// database itself.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DedupError {
    /// The caller has more than [`MAX_CALLER_BYTES`] bytes.
    #[error("the caller has {len} bytes; the limit is {max}")]
    CallerTooLong {
        /// The caller's length.
        len: usize,
        /// [`MAX_CALLER_BYTES`].
        max: usize,
    },
    /// The key was created before `now − window − drift`: whether a batch with this key ran is
    /// no longer answered.
    #[error(
        "TooOld: the key was created at {created_at_time} ns, before the oldest accepted time {oldest_accepted_ns} ns (now {now_ns} ns minus the window and the permitted drift)"
    )]
    TooOld {
        /// The key's creation time.
        created_at_time: u64,
        /// The database's time.
        now_ns: u64,
        /// `now − window − drift`.
        oldest_accepted_ns: u64,
    },
    /// The key was created after `now + drift`: the client's clock is ahead.
    #[error(
        "CreatedInFuture: the key was created at {created_at_time} ns, after the newest accepted time {newest_accepted_ns} ns (now {now_ns} ns plus the permitted drift)"
    )]
    CreatedInFuture {
        /// The key's creation time.
        created_at_time: u64,
        /// The database's time (ICRC-1's `ledger_time`).
        now_ns: u64,
        /// `now + drift`.
        newest_accepted_ns: u64,
    },
    /// The caller already used this key for a batch with other ops.
    #[error("DigestMismatch: the key {key} was already used for a batch with other ops")]
    DigestMismatch {
        /// The key.
        key: BatchKey,
    },
    /// The caller's share of the store, or the whole store, holds its most keys or bytes of
    /// keys still within their window (or not yet pruned): a new key is refused rather than
    /// one forgotten. `share` says which is full, and the counts are that share's: the
    /// caller's keys and bytes against [`DedupConfig::max_keys_per_caller`] and
    /// [`DedupConfig::max_bytes_per_caller`], or the store's against [`DedupConfig::max_keys`]
    /// and [`DedupConfig::max_bytes`]. When both are full the caller's share is named (the
    /// store's room would not help it). Nothing ran; the same key may be sent again after the
    /// store is pruned.
    #[error(
        "StoreFull: {share} holds {keys_held} of {max_keys} keys and {bytes_held} of {max_bytes} bytes; this key needs {needed_bytes} bytes"
    )]
    StoreFull {
        /// Whose share is full: the caller's, or the whole store.
        share: StoreShare,
        /// Keys held (by the caller, or in the store).
        keys_held: u64,
        /// The most keys of that share.
        max_keys: u64,
        /// Bytes held (by the caller, or in the store).
        bytes_held: u64,
        /// The most bytes of that share.
        max_bytes: u64,
        /// Bytes the refused key would have taken (0 when refused before running).
        needed_bytes: u64,
    },
    /// The batch's transaction could not begin or commit, or its record could not be written:
    /// it was rolled back and nothing took effect.
    #[error("the batch was rolled back: {0}")]
    Flush(#[from] FlushError),
    /// The store could not be created or read (outside the batch's transaction): nothing ran.
    #[error("the deduplication store failed: {0}")]
    Store(#[source] rusqlite::Error),
    /// A record could not be decoded (the store was changed by something else).
    #[error("the record of key {key} cannot be decoded: {reason}")]
    CorruptRecord {
        /// The key.
        key: BatchKey,
        /// What is wrong with it.
        reason: String,
    },
}

/// What a keyed batch's refusal tells a canister's caller: the window rules, a reused key and a
/// full store (naming whose share is full) as their own variants, a caller too long as
/// `Invalid`, anything else (the store's or the transaction's failure) as `Database`.
impl From<DedupError> for batch_types::WriteError {
    fn from(error: DedupError) -> Self {
        use batch_types::WriteError;
        match error {
            DedupError::TooOld {
                created_at_time,
                now_ns,
                oldest_accepted_ns,
            } => WriteError::TooOld {
                created_at_time,
                now: now_ns,
                oldest_accepted: oldest_accepted_ns,
            },
            DedupError::CreatedInFuture {
                created_at_time,
                now_ns,
                newest_accepted_ns,
            } => WriteError::CreatedInFuture {
                created_at_time,
                now: now_ns,
                newest_accepted: newest_accepted_ns,
            },
            DedupError::DigestMismatch { key } => WriteError::DigestMismatch {
                created_at_time: key.created_at_time,
            },
            DedupError::StoreFull {
                share,
                keys_held,
                max_keys,
                bytes_held,
                max_bytes,
                ..
            } => WriteError::StoreFull {
                keys_held,
                max_keys,
                bytes_held,
                max_bytes,
                share,
            },
            DedupError::CallerTooLong { .. } => WriteError::Invalid(error.to_string()),
            other => WriteError::Database(other.to_string()),
        }
    }
}

/// The outcomes of a keyed batch.
#[derive(Clone, Debug, PartialEq)]
pub struct KeyedOutcomes {
    /// One outcome per op, in order: as the batch ran, or as recorded when it first ran.
    pub outcomes: Vec<Outcome>,
    /// The key was already recorded: nothing ran now, and `outcomes` are the recorded ones.
    pub duplicate: bool,
}

/// What [`Deduplicator::lookup`] found.
#[derive(Debug)]
pub enum Lookup {
    /// The key is recorded with the same digest: the recorded outcomes (`duplicate` is set).
    Duplicate(KeyedOutcomes),
    /// The key is new and the store has room: run the batch with
    /// [`Deduplicator::execute_admitted_within`].
    New(Admitted),
}

/// A key that [`Deduplicator::lookup`] found new, to run its batch with
/// [`Deduplicator::execute_admitted_within`] in the same message (in a canister: before any
/// other call could record the same key).
#[derive(Debug)]
pub struct Admitted {
    caller: Vec<u8>,
    key: BatchKey,
    created_at: i64,
    digest: BatchDigest,
}

impl Admitted {
    /// The admitted key.
    pub fn key(&self) -> &BatchKey {
        &self.key
    }
}

/// Counters of a [`Deduplicator`], kept in its memory (a duplicate answer writes nothing):
/// a canister saves them with its other state across upgrades
/// ([`Deduplicator::with_counters`]).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DedupCounters {
    /// Keyed batches run and recorded.
    pub executed: u64,
    /// Repeated keys answered with their recorded outcomes.
    pub duplicates_answered: u64,
    /// Keys refused as too old.
    pub too_old: u64,
    /// Keys refused as created in the future.
    pub created_in_future: u64,
    /// Keys refused because their digest differed from the recorded one.
    pub digest_mismatches: u64,
    /// Keys refused because the store was full.
    pub store_full: u64,
    /// Expired keys removed by [`Deduplicator::prune`].
    pub pruned: u64,
}

/// What the store holds and what it answered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DedupStats {
    /// The counters.
    pub counters: DedupCounters,
    /// Keys held now.
    pub keys_held: u64,
    /// Bytes held now (see [`KEY_OVERHEAD_BYTES`]).
    pub bytes_held: u64,
}

/// What one [`Deduplicator::prune`] step removed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PruneReport {
    /// Keys removed.
    pub removed: u64,
    /// Their bytes.
    pub bytes_freed: u64,
    /// Expired keys are left for another step.
    pub more: bool,
    /// The step stopped because it had used its instruction budget (expired keys may be left
    /// below its key bound).
    pub budget_used: bool,
}

/// Exactly-once client batches: a batch carries a key chosen by its client, and the database
/// records the key and the batch's outcomes in the same transaction as the batch's writes, so
/// a client that does not know whether its batch ran (a timeout, a lost reply) can send it
/// again, with the same key, as often as it needs: the batch runs at most once, and every
/// repeat is answered with the original outcomes.
///
/// # The key
///
/// A [`BatchKey`] is the time the client created the batch (`created_at_time`, nanoseconds
/// since the Unix epoch, as in ICRC-1's `created_at_time`) and 16 bytes the client chooses so
/// that its keys differ (a counter, random bytes). Keys are scoped to a caller: an opaque byte
/// string of at most [`MAX_CALLER_BYTES`] (in a canister, the caller's principal), so two
/// callers never see each other's batches. A [`BatchDigest`] of the batch's ops travels with
/// the key: the same key with another digest is refused ([`DedupError::DigestMismatch`]), never
/// answered with the outcomes of a different batch.
///
/// # The rules
///
/// [`Deduplicator::lookup`] and [`Deduplicator::execute_keyed_within`] apply, in this order,
/// the rules of ICRC-1's transaction deduplication (the ICRC-1 standard, "Transaction
/// deduplication"; the ICP and ICRC ledgers implement it in `rs/ledger_suite` of the replica's
/// repository) with the window `W` and the permitted drift `D` of [`DedupConfig`] (defaults 24
/// hours and 60 seconds, as the ledgers use):
///
/// 1. a key created before `now − W − D` is refused: [`DedupError::TooOld`];
/// 2. a key created after `now + D` is refused: [`DedupError::CreatedInFuture`];
/// 3. a key already recorded for this caller with the same digest is answered with the
///    recorded outcomes, marked duplicate, and nothing runs; with another digest it is
///    refused ([`DedupError::DigestMismatch`]);
/// 4. otherwise the batch runs ([`execute_batch_within`](crate::execute_batch_within)) and its
///    key, digest and outcomes are inserted inside the batch's transaction, just before
///    `COMMIT`: the batch commits with its record or not at all. If the record cannot be
///    written (a full store, an I/O error), the transaction is rolled back and nothing of the
///    batch took effect.
///
/// The window rules come first, so a key's answer does not depend on when pruning ran: once a
/// key is too old it is refused whether or not its record is still there, and a record can be
/// pruned exactly when its key is too old. (The ledgers prune by the time a transaction was
/// executed, in insertion order; here records are ordered by their key's creation time, which
/// is what decides when they expire.)
///
/// # Storage
///
/// Three tables of batch_core's own, created on first use: `batch_core_dedup_keys` (one row per
/// key: creation time, caller, id, digest, encoded outcomes; primary key `(created_at, caller,
/// id)`, `WITHOUT ROWID`, so pruning reads the oldest keys first), `batch_core_dedup_meta` (one
/// row: keys held, bytes held) and `batch_core_dedup_callers` (a row per caller holding keys:
/// its keys and bytes; removed when its last key is pruned). The ops of a batch must not write
/// these tables. A store written before the per-caller table existed (keys and meta only) is
/// migrated once, when a deduplicator first opens it: each caller's keys and bytes are
/// aggregated from the keys held, in one transaction (a scan of the keys, linear in them).
///
/// The store is bounded by [`DedupConfig::max_keys`] and [`DedupConfig::max_bytes`] (a key's
/// bytes: its caller, id, digest and encoded outcomes plus [`KEY_OVERHEAD_BYTES`]; SQLite's page
/// overhead comes on top), and each caller by its share, [`DedupConfig::max_keys_per_caller`]
/// and [`DedupConfig::max_bytes_per_caller`] (an eighth of the store by default: 125,000 keys
/// and 32 MiB), so that one caller cannot fill the store and leave every other caller refused
/// for a whole window. A caller sending one keyed batch per second all day holds 86,460 keys,
/// within its share; eight callers at their share fill the store (where anyone may write,
/// eight identities still can). Expired keys are removed by [`Deduplicator::prune`], in steps
/// bounded by keys and by instructions, which the canister calls from a timer of their own,
/// never from the path that runs a batch. When the caller's share or the store is full of keys
/// that are still within their window, a new key is refused with [`DedupError::StoreFull`],
/// naming which ([`StoreShare`]), and its batch does not run: forgetting a key inside its
/// window could apply a retried batch twice, so the store never does. A client can send the
/// batch again later with the same key (the refusal recorded nothing); duplicates of recorded
/// keys are still answered. Size `max_keys` for the most batches the canister accepts in a
/// window (the ledgers accept up to 3,000,000 transactions per window and throttle past half of
/// it; this store refuses only when full).
///
/// # Cost
///
/// Per keyed batch, besides the batch: an XXH3-128 of the request (by the caller), one read
/// (the key, the meta row and the caller's row, each by primary key), the encoding of the
/// outcomes (linear in outcomes, a run of inserts encodes in a few bytes), and inside the
/// batch's transaction one INSERT, one UPDATE (the store's counts) and one upsert (the
/// caller's). A duplicate costs the read and decoding its outcomes.
///
/// A `Deduplicator` holds the rules, the bounds and the counters; the keys themselves live in
/// the database. Cloning copies the counters: a test that simulates a trap restores a clone
/// together with the database.
#[derive(Clone, Debug)]
pub struct Deduplicator {
    config: DedupConfig,
    counters: DedupCounters,
    /// The tables were created (or found) on this connection's database.
    schema_ready: bool,
}

impl Deduplicator {
    /// A deduplicator with `config` and zero counters.
    pub fn new(config: DedupConfig) -> Result<Self, DedupConfigError> {
        Self::with_counters(config, DedupCounters::default())
    }

    /// A deduplicator with `config` and saved `counters` (after an upgrade).
    pub fn with_counters(
        config: DedupConfig,
        counters: DedupCounters,
    ) -> Result<Self, DedupConfigError> {
        config.validate()?;
        Ok(Deduplicator {
            config,
            counters,
            schema_ready: false,
        })
    }

    /// The rules and bounds in effect.
    pub fn config(&self) -> &DedupConfig {
        &self.config
    }

    /// The counters.
    pub fn counters(&self) -> &DedupCounters {
        &self.counters
    }

    /// Changes the rules and bounds. Keys already held stay; a lower bound refuses new keys
    /// until pruning brings the store under it.
    pub fn reconfigure(&mut self, config: DedupConfig) -> Result<(), DedupConfigError> {
        config.validate()?;
        self.config = config;
        Ok(())
    }

    /// Checks the window rules alone (rules 1 and 2 of [`Deduplicator`]): no database access.
    pub fn check_window(&mut self, key: &BatchKey, now_ns: u64) -> Result<(), DedupError> {
        let created_at_time = key.created_at_time;
        let oldest_accepted_ns = self.config.oldest_accepted_ns(now_ns);
        if created_at_time < oldest_accepted_ns {
            self.counters.too_old += 1;
            return Err(DedupError::TooOld {
                created_at_time,
                now_ns,
                oldest_accepted_ns,
            });
        }
        let newest_accepted_ns = self.config.newest_accepted_ns(now_ns);
        // Creation times are stored as SQLite integers: a time past 2^63 ns (the year 2262)
        // is in the future of any database time.
        if created_at_time > newest_accepted_ns || i64::try_from(created_at_time).is_err() {
            self.counters.created_in_future += 1;
            return Err(DedupError::CreatedInFuture {
                created_at_time,
                now_ns,
                newest_accepted_ns,
            });
        }
        Ok(())
    }

    /// Applies rules 1 to 3 of [`Deduplicator`] to `key` of `caller` at the database's time `now_ns`, without
    /// running anything: the recorded outcomes of a duplicate, or an [`Admitted`] key when the
    /// key is new and both the caller's share and the store have room for it (else
    /// [`DedupError::StoreFull`] naming the full one). Creates the store's tables on first use.
    ///
    /// Cost: one read (three rows by primary key), plus decoding a duplicate's outcomes. `ops` is the
    /// number of ops of the batch (a duplicate's record must hold that many outcomes).
    pub fn lookup(
        &mut self,
        conn: &Connection,
        caller: &[u8],
        key: &BatchKey,
        digest: &BatchDigest,
        ops: usize,
        now_ns: u64,
    ) -> Result<Lookup, DedupError> {
        if caller.len() > MAX_CALLER_BYTES {
            return Err(DedupError::CallerTooLong {
                len: caller.len(),
                max: MAX_CALLER_BYTES,
            });
        }
        self.check_window(key, now_ns)?;
        let created_at = i64::try_from(key.created_at_time).unwrap_or(i64::MAX);
        self.ensure_schema(conn)?;
        // One read: the key's record, if any, and the store's and the caller's counts.
        type Held = (Option<Vec<u8>>, Option<Vec<u8>>, [i64; 4]);
        let (recorded_digest, outcomes, held): Held = conn
            .prepare_cached(LOOKUP)
            .and_then(|mut lookup| {
                lookup.query_row(params![created_at, caller, &key.id[..]], |row| {
                    Ok((
                        row.get(0)?,
                        row.get(1)?,
                        [row.get(2)?, row.get(3)?, row.get(4)?, row.get(5)?],
                    ))
                })
            })
            .map_err(DedupError::Store)?;
        if let (Some(recorded_digest), Some(outcomes)) = (recorded_digest, outcomes) {
            if recorded_digest != digest.0 {
                self.counters.digest_mismatches += 1;
                return Err(DedupError::DigestMismatch { key: *key });
            }
            let outcomes = stored::decode(&outcomes, ops)
                .map_err(|reason| DedupError::CorruptRecord { key: *key, reason })?;
            self.counters.duplicates_answered += 1;
            return Ok(Lookup::Duplicate(KeyedOutcomes {
                outcomes,
                duplicate: true,
            }));
        }
        let [store_keys, store_bytes, caller_keys, caller_bytes] =
            held.map(|count| u64::try_from(count).unwrap_or(0));
        let full = if caller_keys >= self.config.max_keys_per_caller
            || caller_bytes >= self.config.max_bytes_per_caller
        {
            Some((StoreShare::Caller, caller_keys, caller_bytes))
        } else if store_keys >= self.config.max_keys || store_bytes >= self.config.max_bytes {
            Some((StoreShare::Store, store_keys, store_bytes))
        } else {
            None
        };
        if let Some((share, keys_held, bytes_held)) = full {
            self.counters.store_full += 1;
            return Err(self.store_full(share, keys_held, bytes_held, 0));
        }
        Ok(Lookup::New(Admitted {
            caller: caller.to_vec(),
            key: *key,
            created_at,
            digest: *digest,
        }))
    }

    /// Runs the batch of an [`Admitted`] key with
    /// [`execute_batch_within`](crate::execute_batch_within)'s budget rules and records its
    /// key, digest and outcomes inside its transaction, just before `COMMIT` (also after the
    /// executor re-applied ops following an interrupt). If the record does not fit the caller's
    /// share or the store's bounds, the transaction is rolled back and the batch is refused
    /// with [`DedupError::StoreFull`] naming which; if the same key was recorded since the
    /// lookup (another connection), the batch is rolled back and answered as that record says.
    ///
    /// An empty batch records its key in a transaction of its own.
    pub fn execute_admitted_within<M: InstructionMeter>(
        &mut self,
        conn: &Connection,
        admitted: Admitted,
        ops: &[WriteOp],
        budget: &Budget<M>,
    ) -> Result<KeyedOutcomes, DedupError> {
        let len = ops.len();
        let config = self.config.clone();
        // Set by the record step when it refuses the batch, read after the rollback.
        let mut refused: Option<Refusal> = None;
        let mut record = |conn: &Connection, executed: &[Outcome]| -> rusqlite::Result<()> {
            let blob = stored::encode(executed, len - executed.len());
            let bytes = key_bytes(admitted.caller.len(), blob.len());
            let caller_reserved = conn.prepare_cached(RESERVE_CALLER)?.execute(params![
                &admitted.caller[..],
                bytes as i64,
                config.max_keys_per_caller as i64,
                config.max_bytes_per_caller as i64
            ])?;
            if caller_reserved == 0 {
                refused = Some(Refusal::Full {
                    share: StoreShare::Caller,
                    needed: bytes,
                });
                return Err(refusal_error(
                    "the caller's share of the deduplication store is full",
                ));
            }
            let reserved = conn.prepare_cached(RESERVE)?.execute(params![
                bytes as i64,
                config.max_keys as i64,
                config.max_bytes as i64
            ])?;
            if reserved == 0 {
                refused = Some(Refusal::Full {
                    share: StoreShare::Store,
                    needed: bytes,
                });
                return Err(refusal_error("the deduplication store is full"));
            }
            let inserted = conn.prepare_cached(INSERT)?.execute(params![
                admitted.created_at,
                &admitted.caller[..],
                &admitted.key.id[..],
                &admitted.digest.0[..],
                blob
            ]);
            match inserted {
                Ok(_) => Ok(()),
                Err(error) if error.sqlite_error_code() == Some(ErrorCode::ConstraintViolation) => {
                    refused = Some(Refusal::Recorded);
                    Err(error)
                }
                Err(error) => Err(error),
            }
        };
        let result = if ops.is_empty() {
            record_alone(conn, &mut record)
        } else {
            execute_batch_within_then(conn, ops, budget, Some(&mut record))
        };
        match (result, refused) {
            (Ok(outcomes), _) => {
                self.counters.executed += 1;
                Ok(KeyedOutcomes {
                    outcomes,
                    duplicate: false,
                })
            }
            (Err(FlushError::BeforeCommit(_)), Some(Refusal::Full { share, needed })) => {
                self.counters.store_full += 1;
                let (keys_held, bytes_held) = match share {
                    StoreShare::Caller => read_caller(conn, &admitted.caller)?,
                    StoreShare::Store => read_meta(conn)?,
                };
                Err(self.store_full(share, keys_held, bytes_held, needed))
            }
            (Err(FlushError::BeforeCommit(_)), Some(Refusal::Recorded)) => {
                match self.lookup(
                    conn,
                    &admitted.caller,
                    &admitted.key,
                    &admitted.digest,
                    len,
                    // The key passed the window rules at the lookup that admitted it.
                    admitted.key.created_at_time,
                )? {
                    Lookup::Duplicate(batch) => Ok(batch),
                    Lookup::New(_) => Err(DedupError::Store(refusal_error(
                        "the key was recorded and then removed while its batch ran",
                    ))),
                }
            }
            (Err(error), _) => Err(DedupError::Flush(error)),
        }
    }

    /// [`lookup`](Self::lookup), then [`execute_admitted_within`](Self::execute_admitted_within)
    /// for a new key: a keyed batch in one call. `digest` should be the digest of `ops` (for
    /// example [`BatchDigest::of_ops`], or of the request they were decoded from).
    #[allow(clippy::too_many_arguments)]
    pub fn execute_keyed_within<M: InstructionMeter>(
        &mut self,
        conn: &Connection,
        caller: &[u8],
        key: &BatchKey,
        digest: &BatchDigest,
        ops: &[WriteOp],
        budget: &Budget<M>,
        now_ns: u64,
    ) -> Result<KeyedOutcomes, DedupError> {
        match self.lookup(conn, caller, key, digest, ops.len(), now_ns)? {
            Lookup::Duplicate(batch) => Ok(batch),
            Lookup::New(admitted) => self.execute_admitted_within(conn, admitted, ops, budget),
        }
    }

    /// Removes keys that are too old at `now_ns` (created before `now − window − drift`), oldest
    /// first, one at a time, in one transaction of their own, and stops at the first of: no
    /// expired key left, `max_keys` removed, or `budget.instructions` used. The budget is read
    /// from `budget.meter` before each key after the first (a step always removes one expired
    /// key, so that steps make progress whatever the budget), so a step uses at most the budget
    /// plus the removal of one key (which grows with its record's bytes), the update of its
    /// caller's count, the update of the store's, a check for expired keys left, and `COMMIT`.
    /// Call it from a message of its own (a timer), with bounds that fit the message;
    /// `more` says whether expired keys are left, `budget_used` whether the budget stopped it
    /// (then `more` is set).
    /// The connection must have no transaction open.
    ///
    /// Cost per key: one read of the oldest expired keys per 64 keys, one
    /// delete by primary key, and one update of the caller's row per run of keys of one caller
    /// (in primary-key order); per step, one update of the meta row and one indexed read.
    pub fn prune<M: InstructionMeter>(
        &mut self,
        conn: &Connection,
        now_ns: u64,
        max_keys: u64,
        budget: &Budget<M>,
    ) -> Result<PruneReport, DedupError> {
        self.ensure_schema(conn)?;
        let cutoff = i64::try_from(self.config.oldest_accepted_ns(now_ns)).unwrap_or(i64::MAX);
        let start = budget.meter.instructions();
        let step = || -> rusqlite::Result<PruneReport> {
            let tx = rusqlite::Transaction::new_unchecked(conn, TransactionBehavior::Immediate)?;
            let (mut removed, mut bytes_freed, mut budget_used) = (0u64, 0u64, false);
            // The caller whose removed keys are not yet subtracted from its row: (caller,
            // keys, bytes).
            let mut pending: Option<(Vec<u8>, u64, u64)> = None;
            let mut candidates = std::collections::VecDeque::new();
            while removed < max_keys {
                if candidates.is_empty() {
                    let chunk = (max_keys - removed).min(PRUNE_CHUNK_KEYS) as i64;
                    let mut expired = tx.prepare_cached(EXPIRED)?;
                    let rows = expired.query_map(params![cutoff, chunk], |row| {
                        Ok((
                            row.get::<_, i64>(0)?,
                            row.get::<_, Vec<u8>>(1)?,
                            row.get::<_, Vec<u8>>(2)?,
                            u64::try_from(row.get::<_, i64>(3)?).unwrap_or(0) + KEY_OVERHEAD_BYTES,
                        ))
                    })?;
                    for row in rows {
                        candidates.push_back(row?);
                    }
                }
                let Some((created_at, caller, id, bytes)) = candidates.pop_front() else {
                    break;
                };
                if removed > 0
                    && budget.meter.instructions().saturating_sub(start) >= budget.instructions
                {
                    budget_used = true;
                    break;
                }
                tx.prepare_cached(DELETE_KEY)?.execute(params![
                    created_at,
                    &caller[..],
                    &id[..]
                ])?;
                removed += 1;
                bytes_freed += bytes;
                match pending.as_mut() {
                    Some((held_by, keys, held)) if *held_by == caller => {
                        *keys += 1;
                        *held += bytes;
                    }
                    _ => {
                        if let Some((done, keys, held)) = pending.replace((caller, 1, bytes)) {
                            release_caller(&tx, &done, keys, held)?;
                        }
                    }
                }
            }
            if let Some((caller, keys, bytes)) = pending {
                release_caller(&tx, &caller, keys, bytes)?;
            }
            if removed > 0 {
                tx.prepare_cached(RELEASE)?
                    .execute(params![removed as i64, bytes_freed as i64])?;
            }
            let more: bool = tx
                .prepare_cached(EXPIRED_LEFT)?
                .query_row(params![cutoff], |row| row.get(0))?;
            tx.commit()?;
            Ok(PruneReport {
                removed,
                bytes_freed,
                more,
                budget_used,
            })
        };
        let report = step().map_err(DedupError::Store)?;
        self.counters.pruned += report.removed;
        Ok(report)
    }

    /// The counters and what the store holds. Cost: one read by primary key.
    pub fn stats(&mut self, conn: &Connection) -> Result<DedupStats, DedupError> {
        self.ensure_schema(conn)?;
        let (keys_held, bytes_held) = read_meta(conn)?;
        Ok(DedupStats {
            counters: self.counters.clone(),
            keys_held,
            bytes_held,
        })
    }

    /// Creates the store's tables if they do not exist, or migrates a store written before
    /// the per-caller counts (see "Storage" in [`Deduplicator`]). Done on first use; call it
    /// earlier to choose the message that pays for a migration (in a canister,
    /// `post_upgrade`). The connection must have no transaction open.
    ///
    /// Cost: a few statements once per deduplicator; the first time on a store written before
    /// the per-caller counts, also a scan of its keys.
    pub fn prepare(&mut self, conn: &Connection) -> Result<(), DedupError> {
        self.ensure_schema(conn)
    }

    /// Creates the store's tables if they do not exist (once per deduplicator).
    fn ensure_schema(&mut self, conn: &Connection) -> Result<(), DedupError> {
        if !self.schema_ready {
            if !conn.is_autocommit() {
                return Err(DedupError::Store(rusqlite::Error::SqliteFailure(
                    rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_MISUSE),
                    Some("a transaction is open on the connection".to_owned()),
                )));
            }
            let tables = |conn: &Connection| -> rusqlite::Result<(bool, bool)> {
                conn.query_row(STORE_TABLES, [], |row| Ok((row.get(0)?, row.get(1)?)))
            };
            let create = || -> rusqlite::Result<()> {
                if tables(conn)? == (true, true) {
                    return Ok(());
                }
                let tx =
                    rusqlite::Transaction::new_unchecked(conn, TransactionBehavior::Immediate)?;
                // Again inside the transaction: another connection may have created them.
                let (keys, callers) = tables(&tx)?;
                tx.execute_batch(SCHEMA)?;
                if !callers {
                    tx.execute_batch(CALLERS_SCHEMA)?;
                    if keys {
                        tx.execute_batch(CALLERS_MIGRATION)?;
                    }
                }
                tx.commit()
            };
            create().map_err(DedupError::Store)?;
            self.schema_ready = true;
        }
        Ok(())
    }

    fn store_full(
        &self,
        share: StoreShare,
        keys_held: u64,
        bytes_held: u64,
        needed_bytes: u64,
    ) -> DedupError {
        let (max_keys, max_bytes) = match share {
            StoreShare::Caller => (
                self.config.max_keys_per_caller,
                self.config.max_bytes_per_caller,
            ),
            StoreShare::Store => (self.config.max_keys, self.config.max_bytes),
        };
        DedupError::StoreFull {
            share,
            keys_held,
            max_keys,
            bytes_held,
            max_bytes,
            needed_bytes,
        }
    }
}

/// Why the record step refused a batch.
enum Refusal {
    /// Recording the key would pass the bound of `share`.
    Full { share: StoreShare, needed: u64 },
    /// The key was recorded since the lookup.
    Recorded,
}

/// The bytes counted for a key of a caller of `caller_len` bytes with `outcomes_len` bytes of
/// encoded outcomes: the caller, the 16-byte id, the digest and the outcomes, plus the overhead.
fn key_bytes(caller_len: usize, outcomes_len: usize) -> u64 {
    (caller_len + 16 + std::mem::size_of::<BatchDigest>() + outcomes_len) as u64
        + KEY_OVERHEAD_BYTES
}

/// An error the record step returns to make the executor roll back (the typed cause is kept
/// beside it).
fn refusal_error(message: &str) -> rusqlite::Error {
    rusqlite::Error::SqliteFailure(
        rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_FULL),
        Some(message.to_owned()),
    )
}

/// Subtracts `keys` keys and `bytes` bytes from `caller`'s row, and removes the row once it
/// holds no key (a row whose caller is missing, in a store changed by something else, is left
/// alone).
fn release_caller(conn: &Connection, caller: &[u8], keys: u64, bytes: u64) -> rusqlite::Result<()> {
    let left: Option<i64> = conn
        .prepare_cached(RELEASE_CALLER)?
        .query_row(params![caller, keys as i64, bytes as i64], |row| row.get(0))
        .optional()?;
    if left.is_some_and(|left| left <= 0) {
        conn.prepare_cached(FORGET_CALLER)?.execute([caller])?;
    }
    Ok(())
}

/// The keys and bytes `caller` holds (0 and 0 if none).
fn read_caller(conn: &Connection, caller: &[u8]) -> Result<(u64, u64), DedupError> {
    let held: Option<(i64, i64)> = conn
        .prepare_cached(READ_CALLER)
        .and_then(|mut read| {
            read.query_row([caller], |row| Ok((row.get(0)?, row.get(1)?)))
                .optional()
        })
        .map_err(DedupError::Store)?;
    let (keys, bytes) = held.unwrap_or((0, 0));
    Ok((
        u64::try_from(keys).unwrap_or(0),
        u64::try_from(bytes).unwrap_or(0),
    ))
}

fn read_meta(conn: &Connection) -> Result<(u64, u64), DedupError> {
    let (keys, bytes): (i64, i64) = conn
        .prepare_cached(READ_META)
        .and_then(|mut read| read.query_row([], |row| Ok((row.get(0)?, row.get(1)?))))
        .map_err(DedupError::Store)?;
    Ok((
        u64::try_from(keys).unwrap_or(0),
        u64::try_from(bytes).unwrap_or(0),
    ))
}

/// Records the key of an empty batch in a transaction of its own.
fn record_alone(
    conn: &Connection,
    record: &mut dyn FnMut(&Connection, &[Outcome]) -> rusqlite::Result<()>,
) -> Result<Vec<Outcome>, FlushError> {
    let tx = rusqlite::Transaction::new_unchecked(conn, TransactionBehavior::Immediate)
        .map_err(FlushError::Begin)?;
    record(conn, &[]).map_err(FlushError::BeforeCommit)?;
    tx.commit().map_err(FlushError::Commit)?;
    Ok(Vec::new())
}
