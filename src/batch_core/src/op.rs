//! Write operations ([`WriteOp`]), their statements and values, and their outcomes
//! ([`Outcome`], `ic-rusqlite-batch-types`' type: the one outcome of the library, which the
//! canister answers and the clients read as it is).

use std::borrow::Cow;

use rusqlite::ToSql;
use rusqlite::types::{FromSql, FromSqlResult, ToSqlOutput, Value, ValueRef};
use serde::{Deserialize, Serialize};

pub use batch_types::{OpError, Outcome};

#[cfg(test)]
mod tests;

/// Identifier of an accepted op: issued by [`BatchQueue::submit`](crate::BatchQueue::submit),
/// starting at 1, increasing by one per accepted op, never reused (also across upgrades when the
/// queue is restored with [`BatchQueue::from_state`](crate::BatchQueue::from_state)).
/// Ticket 0 is never issued. A queue may start at a larger ticket
/// ([`BatchQueue::with_first_ticket`](crate::BatchQueue::with_first_ticket)), so that tickets
/// stay unique across queues (a canister seeds it with the time of its install).
pub type Ticket = u64;

/// Who submitted an op, as the queue keeps it: a 64-bit digest of the submitter's identity
/// bytes (an Internet Computer principal, say), so that each queued op, kept outcome and history
/// record carries 8 bytes rather than the identity.
///
/// [`BatchQueue::status_for`](crate::BatchQueue::status_for) compares owners to answer only the
/// submitter, so two identities with the same digest would see each other's outcomes. The
/// digest is FNV-1a over the bytes with a final 64-bit mix and its lowest bit cleared (63 bits
/// count): identities that are themselves hashes of keys, as principals of users are, cannot be
/// chosen to collide with a given one short of about 2^63 attempts. Do not use identities a
/// caller can pick freely.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
pub struct Owner(u64);

impl Owner {
    /// No submitter: the owner of ops queued with [`BatchQueue::submit`](crate::BatchQueue::submit).
    pub const NONE: Owner = Owner(0);

    /// The owner of `identity` (never [`Owner::NONE`]). A few instructions per byte.
    pub fn of(identity: &[u8]) -> Owner {
        let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
        for &byte in identity {
            hash ^= u64::from(byte);
            hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
        }
        // The finalizer of splitmix64: every input bit moves every output bit.
        hash = (hash ^ (hash >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        hash = (hash ^ (hash >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        hash ^= hash >> 31;
        match hash & !1 {
            0 => Owner(2),
            digest => Owner(digest),
        }
    }

    /// The digest (its lowest bit is 0).
    pub fn digest(self) -> u64 {
        self.0
    }

    /// The owner with digest `digest` (its lowest bit is ignored).
    pub fn from_digest(digest: u64) -> Owner {
        Owner(digest & !1)
    }
}

/// A value bound to a statement parameter: SQLite's five storage classes.
///
/// Binding costs one `sqlite3_bind_*` call; text and blobs are bound without copying.
/// A `Real(NaN)` is bound as SQL `NULL` (SQLite has no NaN). Every value, NaN payloads
/// included, survives [`BatchQueue::save`](crate::BatchQueue::save) /
/// [`BatchQueue::restore`](crate::BatchQueue::restore) bit for bit.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum SqlValue {
    /// SQL `NULL`.
    Null,
    /// A 64-bit signed integer.
    Integer(i64),
    /// A 64-bit float.
    Real(f64),
    /// UTF-8 text.
    Text(String),
    /// Bytes.
    Blob(#[serde(with = "serde_bytes")] Vec<u8>),
}

impl ToSql for SqlValue {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(ToSqlOutput::Borrowed(match self {
            SqlValue::Null => ValueRef::Null,
            SqlValue::Integer(i) => ValueRef::Integer(*i),
            SqlValue::Real(f) => ValueRef::Real(*f),
            SqlValue::Text(s) => ValueRef::Text(s.as_bytes()),
            SqlValue::Blob(b) => ValueRef::Blob(b),
        }))
    }
}

/// Reads any column as a `SqlValue` (text that is not UTF-8 is an error).
impl FromSql for SqlValue {
    fn column_result(value: ValueRef<'_>) -> FromSqlResult<Self> {
        Ok(match value {
            ValueRef::Null => SqlValue::Null,
            ValueRef::Integer(i) => SqlValue::Integer(i),
            ValueRef::Real(f) => SqlValue::Real(f),
            ValueRef::Text(_) => SqlValue::Text(value.as_str()?.to_owned()),
            ValueRef::Blob(b) => SqlValue::Blob(b.to_vec()),
        })
    }
}

impl From<Value> for SqlValue {
    fn from(value: Value) -> Self {
        match value {
            Value::Null => SqlValue::Null,
            Value::Integer(i) => SqlValue::Integer(i),
            Value::Real(f) => SqlValue::Real(f),
            Value::Text(s) => SqlValue::Text(s),
            Value::Blob(b) => SqlValue::Blob(b),
        }
    }
}

impl From<SqlValue> for Value {
    fn from(value: SqlValue) -> Self {
        match value {
            SqlValue::Null => Value::Null,
            SqlValue::Integer(i) => Value::Integer(i),
            SqlValue::Real(f) => Value::Real(f),
            SqlValue::Text(s) => Value::Text(s),
            SqlValue::Blob(b) => Value::Blob(b),
        }
    }
}

impl From<i64> for SqlValue {
    fn from(value: i64) -> Self {
        SqlValue::Integer(value)
    }
}

impl From<i32> for SqlValue {
    fn from(value: i32) -> Self {
        SqlValue::Integer(value.into())
    }
}

impl From<u32> for SqlValue {
    fn from(value: u32) -> Self {
        SqlValue::Integer(value.into())
    }
}

impl From<bool> for SqlValue {
    fn from(value: bool) -> Self {
        SqlValue::Integer(value.into())
    }
}

impl From<f64> for SqlValue {
    fn from(value: f64) -> Self {
        SqlValue::Real(value)
    }
}

impl From<&str> for SqlValue {
    fn from(value: &str) -> Self {
        SqlValue::Text(value.to_owned())
    }
}

impl From<String> for SqlValue {
    fn from(value: String) -> Self {
        SqlValue::Text(value)
    }
}

impl From<Vec<u8>> for SqlValue {
    fn from(value: Vec<u8>) -> Self {
        SqlValue::Blob(value)
    }
}

impl From<&[u8]> for SqlValue {
    fn from(value: &[u8]) -> Self {
        SqlValue::Blob(value.to_vec())
    }
}

/// `None` is `NULL`.
impl<T: Into<SqlValue>> From<Option<T>> for SqlValue {
    fn from(value: Option<T>) -> Self {
        value.map_or(SqlValue::Null, Into::into)
    }
}

/// One SQL statement with its positional parameters (`?`, `?NNN`; named parameters bind by
/// position too).
///
/// The SQL text is the key of the connection's prepared-statement cache, so submit the same text
/// with different parameters rather than formatting values into the SQL. It must be exactly one
/// statement that writes (`INSERT`, `UPDATE`, `DELETE`, `REPLACE`, DDL): read-only statements
/// (`SELECT`) and transaction control (`BEGIN`, `COMMIT`, `ROLLBACK`, `SAVEPOINT`, `RELEASE`) are
/// rejected when executed, because they would break the batch's transaction.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Statement {
    /// The SQL text of one statement: borrowed when it is a constant (`&'static str`), which
    /// is what a canister's write methods have, so that queueing an op copies no SQL text and
    /// consecutive ops of the same constant are recognised by address when they are coalesced.
    pub sql: Cow<'static, str>,
    /// Values for the statement's parameters, in order; the count must match.
    pub params: Vec<SqlValue>,
}

impl Statement {
    /// A statement from its SQL text and parameters.
    pub fn new(sql: impl Into<Cow<'static, str>>, params: Vec<SqlValue>) -> Self {
        Statement {
            sql: sql.into(),
            params,
        }
    }
}

/// A write operation: what [`BatchQueue::submit`](crate::BatchQueue::submit) accepts and what gets
/// one [`Outcome`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum WriteOp {
    /// One statement. If it fails, SQLite undoes its partial effects (statement-level atomicity)
    /// and the other ops of the batch are unaffected.
    Single(Statement),
    /// Statements that apply together or not at all: they run inside a `SAVEPOINT`, and if any
    /// of them fails the savepoint is rolled back and the whole unit fails. Must not be empty.
    Unit(Vec<Statement>),
}

impl WriteOp {
    /// A [`WriteOp::Single`] from SQL text and parameters.
    pub fn single(sql: impl Into<Cow<'static, str>>, params: Vec<SqlValue>) -> Self {
        WriteOp::Single(Statement::new(sql, params))
    }

    /// A [`WriteOp::Unit`] of the given statements.
    pub fn unit(statements: Vec<Statement>) -> Self {
        WriteOp::Unit(statements)
    }

    /// The op's size as the queue counts it against
    /// [`Config::max_pending_bytes`](crate::Config::max_pending_bytes): per statement its SQL
    /// text plus 16, and per parameter its text or blob length, or 8. O(statements + params).
    pub fn size_bytes(&self) -> usize {
        let statement_size = |statement: &Statement| {
            statement
                .params
                .iter()
                .map(|param| match param {
                    SqlValue::Text(text) => text.len(),
                    SqlValue::Blob(blob) => blob.len(),
                    SqlValue::Null | SqlValue::Integer(_) | SqlValue::Real(_) => 8,
                })
                .fold(
                    statement.sql.len().saturating_add(16),
                    usize::saturating_add,
                )
        };
        match self {
            WriteOp::Single(statement) => statement_size(statement),
            WriteOp::Unit(statements) => statements
                .iter()
                .map(statement_size)
                .fold(0, usize::saturating_add),
        }
    }

    /// Number of statements in the op (1 for a single statement).
    pub fn statement_count(&self) -> usize {
        match self {
            WriteOp::Single(_) => 1,
            WriteOp::Unit(statements) => statements.len(),
        }
    }
}

impl From<Statement> for WriteOp {
    fn from(statement: Statement) -> Self {
        WriteOp::Single(statement)
    }
}
