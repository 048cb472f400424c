//! Which refusals and outcomes a client may send again: the one retry rule of the library's
//! clients, as a table ([`RULES`]) that the Rust client reads through [`of_write_error`],
//! [`of_batch_refusal`] and [`of_outcome`], and that the TypeScript client is checked against
//! (`testdata/retry_rules.json`, written from it by this crate's tests).
//!
//! A keyed batch may always be sent again under its own key while the key is in the canister's
//! window: a batch that ran is answered with its recorded outcomes, never run twice. What the
//! table says is what a client does with an *answer*: which refusals leave nothing run and may
//! succeed later under the same key, and which outcome is the one op that may be sent again in
//! another batch ([`Outcome::NotExecuted`]: it did not run).

use crate::declare::BatchRefusal;
use crate::{Outcome, WriteError};

/// What a client does with a refusal of a whole batch, or with one op's outcome.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Retry {
    /// Final: deliver it. Sending the same ops again would be refused again (or, for an
    /// outcome, apply them twice).
    Never,
    /// Nothing ran, and a later attempt may succeed: send the same batch again, under the same
    /// key, after a backoff (a full queue or key store, a transaction that could not begin).
    SameKey,
    /// The key is outside the canister's window (too old): whether an earlier attempt under it
    /// ran is no longer known. A client that may have sent it before reports its ops' outcome
    /// unknown; one whose every attempt was refused before running knows nothing ran.
    Expired,
    /// The op did not run (its batch's instruction budget ended before it started): send it
    /// again in a later batch, under a new key.
    NewBatch,
}

impl Retry {
    /// The rule's name, as [`RULES`]' JSON export writes it.
    pub fn name(self) -> &'static str {
        match self {
            Retry::Never => "Never",
            Retry::SameKey => "SameKey",
            Retry::Expired => "Expired",
            Retry::NewBatch => "NewBatch",
        }
    }
}

/// The retry rule of every case a client can be answered, by the Candid names of its type and
/// variant: every [`WriteError`], every [`BatchRefusal`] but `Refused` (which carries a
/// `WriteError`, whose rule it follows), and every [`Outcome`].
pub const RULES: &[(&str, &str, Retry)] = &[
    ("WriteError", "QueueFull", Retry::SameKey),
    ("WriteError", "QueueBytesFull", Retry::SameKey),
    ("WriteError", "Invalid", Retry::Never),
    ("WriteError", "NotAuthorized", Retry::Never),
    ("WriteError", "Database", Retry::SameKey),
    ("WriteError", "TooOld", Retry::Expired),
    ("WriteError", "CreatedInFuture", Retry::Never),
    ("WriteError", "DigestMismatch", Retry::Never),
    ("WriteError", "StoreFull", Retry::SameKey),
    ("BatchRefusal", "NotAuthorized", Retry::Never),
    ("BatchRefusal", "InvalidParam", Retry::Never),
    ("BatchRefusal", "DeclarationMismatch", Retry::Never),
    ("BatchRefusal", "Malformed", Retry::Never),
    ("Outcome", "Committed", Retry::Never),
    ("Outcome", "Failed", Retry::Never),
    ("Outcome", "NotExecuted", Retry::NewBatch),
];

fn rule(ty: &str, variant: &str) -> Retry {
    RULES
        .iter()
        .find(|(t, v, _)| *t == ty && *v == variant)
        .map(|(_, _, retry)| *retry)
        .unwrap_or_else(|| {
            unreachable!("{ty}::{variant} has no retry rule (the tests check every case)")
        })
}

/// The Candid name of `error`'s variant.
pub fn write_error_name(error: &WriteError) -> &'static str {
    match error {
        WriteError::QueueFull { .. } => "QueueFull",
        WriteError::QueueBytesFull { .. } => "QueueBytesFull",
        WriteError::Invalid(_) => "Invalid",
        WriteError::NotAuthorized => "NotAuthorized",
        WriteError::Database(_) => "Database",
        WriteError::TooOld { .. } => "TooOld",
        WriteError::CreatedInFuture { .. } => "CreatedInFuture",
        WriteError::DigestMismatch { .. } => "DigestMismatch",
        WriteError::StoreFull { .. } => "StoreFull",
    }
}

/// The Candid name of `refusal`'s variant.
pub fn batch_refusal_name(refusal: &BatchRefusal) -> &'static str {
    match refusal {
        BatchRefusal::NotAuthorized => "NotAuthorized",
        BatchRefusal::Refused(_) => "Refused",
        BatchRefusal::InvalidParam(_) => "InvalidParam",
        BatchRefusal::DeclarationMismatch { .. } => "DeclarationMismatch",
        BatchRefusal::Malformed { .. } => "Malformed",
    }
}

/// The Candid name of `outcome`'s variant.
pub fn outcome_name(outcome: &Outcome) -> &'static str {
    match outcome {
        Outcome::Committed { .. } => "Committed",
        Outcome::Failed(_) => "Failed",
        Outcome::NotExecuted => "NotExecuted",
    }
}

/// What a client does with a batch refused with `error` (every batch method of ic-rusqlite-batch
/// refuses with one, the declared ones inside `BatchRefusal::Refused`).
pub fn of_write_error(error: &WriteError) -> Retry {
    rule("WriteError", write_error_name(error))
}

/// What a client does with a batch of declared writes refused with `refusal`.
pub fn of_batch_refusal(refusal: &BatchRefusal) -> Retry {
    match refusal {
        BatchRefusal::Refused(error) => of_write_error(error),
        other => rule("BatchRefusal", batch_refusal_name(other)),
    }
}

/// What a client does with an op whose batch ran and answered `outcome`: only an op not
/// executed may be sent again (in another batch).
pub fn of_outcome(outcome: &Outcome) -> Retry {
    rule("Outcome", outcome_name(outcome))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::declare::InvalidParam;
    use crate::{OpError, StoreShare};

    /// One value of every variant (a new variant fails to compile in the names' matches, and
    /// then here until it is listed).
    fn every_write_error() -> Vec<WriteError> {
        vec![
            WriteError::QueueFull { capacity: 1 },
            WriteError::QueueBytesFull {
                pending_bytes: 1,
                capacity_bytes: 1,
            },
            WriteError::Invalid("x".into()),
            WriteError::NotAuthorized,
            WriteError::Database("x".into()),
            WriteError::TooOld {
                created_at_time: 1,
                now: 2,
                oldest_accepted: 2,
            },
            WriteError::CreatedInFuture {
                created_at_time: 3,
                now: 1,
                newest_accepted: 2,
            },
            WriteError::DigestMismatch { created_at_time: 1 },
            WriteError::StoreFull {
                keys_held: 1,
                max_keys: 1,
                bytes_held: 1,
                max_bytes: 1,
                share: StoreShare::Caller,
            },
        ]
    }

    fn every_refusal() -> Vec<BatchRefusal> {
        vec![
            BatchRefusal::NotAuthorized,
            BatchRefusal::InvalidParam(InvalidParam {
                op: 0,
                write: "w".into(),
                param: "p".into(),
                reason: "r".into(),
            }),
            BatchRefusal::DeclarationMismatch {
                canister: vec![1].into(),
                request: vec![2].into(),
            },
            BatchRefusal::Malformed {
                offset: 0,
                what: "x".into(),
            },
        ]
    }

    fn every_outcome() -> Vec<Outcome> {
        vec![
            Outcome::Committed {
                rows_changed: 1,
                last_insert_rowid: 1,
            },
            Outcome::Failed(OpError {
                code: 9,
                message: "interrupted: the op reached its limit".into(),
            }),
            Outcome::NotExecuted,
        ]
    }

    /// The table has one row per case, and no row for a case that does not exist.
    #[test]
    fn every_case_has_exactly_one_rule() {
        let mut cases: Vec<(&str, &str)> = every_write_error()
            .iter()
            .map(|e| ("WriteError", write_error_name(e)))
            .chain(
                every_refusal()
                    .iter()
                    .map(|r| ("BatchRefusal", batch_refusal_name(r))),
            )
            .chain(every_outcome().iter().map(|o| ("Outcome", outcome_name(o))))
            .collect();
        let mut rows: Vec<(&str, &str)> = RULES.iter().map(|(t, v, _)| (*t, *v)).collect();
        cases.sort_unstable();
        rows.sort_unstable();
        assert_eq!(rows, cases);
    }

    /// The rule as the clients applied it before it was a table: a full queue or store and a
    /// database error are retried under the same key, `TooOld` is its own case, every other
    /// refusal is final; `Refused` follows its error; only `NotExecuted` is sent again.
    #[test]
    fn the_rules() {
        let retried: Vec<_> = every_write_error()
            .into_iter()
            .filter(|e| of_write_error(e) == Retry::SameKey)
            .map(|e| write_error_name(&e))
            .collect();
        assert_eq!(
            retried,
            ["QueueFull", "QueueBytesFull", "Database", "StoreFull"]
        );
        let too_old = WriteError::TooOld {
            created_at_time: 1,
            now: 2,
            oldest_accepted: 2,
        };
        assert_eq!(of_write_error(&too_old), Retry::Expired);
        assert_eq!(
            of_batch_refusal(&BatchRefusal::Refused(too_old)),
            Retry::Expired
        );
        assert_eq!(
            of_batch_refusal(&BatchRefusal::Refused(WriteError::Database("x".into()))),
            Retry::SameKey
        );
        assert!(
            every_refusal()
                .iter()
                .all(|r| of_batch_refusal(r) == Retry::Never)
        );
        let resent: Vec<_> = every_outcome()
            .into_iter()
            .filter(|o| of_outcome(o) != Retry::Never)
            .collect();
        assert_eq!(resent, [Outcome::NotExecuted]);
    }
}
