//! The reference canister's replies to the single-op write methods and the ticket queries,
//! decoded in one place: the load test and anything else here that calls these methods by
//! hand read them through this module, so a change of the canister's reply types changes only
//! this file.
//!
//! A single-op write (`create_user`, ...) answers a `WriteResult` (its [`Outcome`], or the
//! [`WriteError`] it was refused with), a submit (`submit_create_user`, ...) a `SubmitResult`
//! (its [`Ticket`], or the refusal). A reject is never a refusal: it is a trap, a stopped
//! canister, an ingress filter.

use bench_api::{Outcome, Stats, Ticket, TicketStatus, WriteError};
use candid::{Decode, Encode};

/// Why a write got no outcome from the canister.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum ReplyError {
    /// The canister refused the call (its typed `Err`).
    #[error("refused: {0}")]
    Refused(WriteError),
    /// The call was rejected for another reason (a trap, a stopped canister, ...).
    #[error("rejected: {0}")]
    Rejected(String),
    /// The agent failed (transport, verification, expiry).
    #[error("agent: {0}")]
    Agent(String),
    /// The reply was not what the method's interface says.
    #[error("undecodable reply: {0}")]
    Undecodable(String),
}

impl ReplyError {
    /// A reject: a trap, a stopped canister, an ingress filter (never a refusal, which is typed).
    pub fn from_reject(message: &str) -> ReplyError {
        ReplyError::Rejected(message.to_owned())
    }
}

/// The argument of `create_user` and `submit_create_user`.
pub fn create_user_arg(username: &str, email: &str) -> Result<Vec<u8>, ReplyError> {
    Encode!(&username, &email).map_err(|e| ReplyError::Undecodable(e.to_string()))
}

/// The argument of `ticket_statuses`.
pub fn ticket_statuses_arg(first: Ticket, count: u32) -> Result<Vec<u8>, ReplyError> {
    Encode!(&first, &count).map_err(|e| ReplyError::Undecodable(e.to_string()))
}

/// A single-op write's reply (`WriteResult`): the op's outcome, or the refusal.
pub fn outcome(reply: &[u8]) -> Result<Outcome, ReplyError> {
    Decode!(reply, Result<Outcome, WriteError>)
        .map_err(|e| ReplyError::Undecodable(e.to_string()))?
        .map_err(ReplyError::Refused)
}

/// A submit's reply (`SubmitResult`): the op's ticket, or the refusal.
pub fn ticket(reply: &[u8]) -> Result<Ticket, ReplyError> {
    Decode!(reply, Result<Ticket, WriteError>)
        .map_err(|e| ReplyError::Undecodable(e.to_string()))?
        .map_err(ReplyError::Refused)
}

/// `ticket_statuses`'s reply: one status per ticket of the range, in order.
pub fn ticket_statuses(reply: &[u8]) -> Result<Vec<TicketStatus>, ReplyError> {
    Decode!(reply, Vec<TicketStatus>).map_err(|e| ReplyError::Undecodable(e.to_string()))
}

/// The argument of a method without arguments (`stats`).
pub fn no_arg() -> Result<Vec<u8>, ReplyError> {
    Encode!().map_err(|e| ReplyError::Undecodable(e.to_string()))
}

/// `stats`'s reply: the queue's counters.
pub fn stats(reply: &[u8]) -> Result<Stats, ReplyError> {
    Decode!(reply, Stats).map_err(|e| ReplyError::Undecodable(e.to_string()))
}

/// Whether a ticket's status is final, and if so whether the op committed.
pub fn ticket_final(status: &TicketStatus) -> Option<bool> {
    match status {
        TicketStatus::Pending => None,
        TicketStatus::Committed { .. } => Some(true),
        TicketStatus::Evicted { committed } => Some(*committed == Some(true)),
        TicketStatus::Failed(_) | TicketStatus::NotYours | TicketStatus::Unknown => Some(false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_typed_refusal_is_refused_and_a_reject_stays_text() {
        let full = WriteError::QueueFull { capacity: 10_000 };
        let refused = Encode!(&bench_api::SubmitResult::Err(full.clone())).unwrap();
        assert_eq!(ticket(&refused), Err(ReplyError::Refused(full.clone())));
        let refused = Encode!(&bench_api::WriteResult::Err(full.clone())).unwrap();
        assert_eq!(outcome(&refused), Err(ReplyError::Refused(full)));
        assert_eq!(
            ReplyError::from_reject("IC0508: Canister is stopped"),
            ReplyError::Rejected("IC0508: Canister is stopped".into())
        );
    }

    #[test]
    fn replies_decode_and_a_wrong_type_is_an_error() {
        let committed = Outcome::Committed {
            rows_changed: 1,
            last_insert_rowid: 7,
        };
        // As the canister encodes them (the `Ok` case alone), and as candid does.
        let bytes = bench_api::wire::encode_write_result(Ok(committed.clone()));
        assert_eq!(outcome(&bytes), Ok(committed.clone()));
        let full = Encode!(&bench_api::WriteResult::Ok(committed.clone())).unwrap();
        assert_eq!(outcome(&full), Ok(committed));
        assert_eq!(
            ticket(&bench_api::wire::encode_submit_result(Ok(42))),
            Ok(42)
        );
        assert!(matches!(ticket(&bytes), Err(ReplyError::Undecodable(_))));
        // A bare ticket (the replies before typed results) is not a submit's reply.
        assert!(matches!(
            ticket(&Encode!(&42u64).unwrap()),
            Err(ReplyError::Undecodable(_))
        ));
        let statuses = vec![TicketStatus::Pending, TicketStatus::Unknown];
        assert_eq!(
            ticket_statuses(&Encode!(&statuses).unwrap()),
            Ok(statuses.clone())
        );
        assert_eq!(ticket_final(&statuses[0]), None);
        assert_eq!(ticket_final(&statuses[1]), Some(false));
        assert_eq!(
            ticket_final(&TicketStatus::Evicted {
                committed: Some(true)
            }),
            Some(true)
        );
    }
}
