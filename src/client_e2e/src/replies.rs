//! The reference canister's replies to the single-op write methods and the ticket queries,
//! decoded in one place: the load test and anything else here that calls these methods by
//! hand read them through this module, so a change of the canister's reply types changes only
//! this file.
//!
//! Today a single-op write (`create_user`, ...) replies with an [`Outcome`] and refuses with a
//! reject whose message is a [`WriteError`]'s text; a submit (`submit_create_user`, ...)
//! replies with a [`Ticket`] and refuses the same way.

use bench_api::{Outcome, Stats, Ticket, TicketStatus, WriteError};
use candid::{Decode, Encode};

/// Why a write got no outcome from the canister.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum ReplyError {
    /// The canister refused the call (a reject carrying a [`WriteError`]'s text).
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
    /// The error a reject message stands for: a [`WriteError`] if it is one's text.
    pub fn from_reject(message: &str) -> ReplyError {
        match WriteError::from_reject(message) {
            Some(error) => ReplyError::Refused(error),
            None => ReplyError::Rejected(message.to_owned()),
        }
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

/// A single-op write's reply: the op's outcome.
pub fn outcome(reply: &[u8]) -> Result<Outcome, ReplyError> {
    Decode!(reply, Outcome).map_err(|e| ReplyError::Undecodable(e.to_string()))
}

/// A submit's reply: the op's ticket.
pub fn ticket(reply: &[u8]) -> Result<Ticket, ReplyError> {
    Decode!(reply, Ticket).map_err(|e| ReplyError::Undecodable(e.to_string()))
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
    fn a_refusal_reject_decodes_to_its_write_error_and_anything_else_stays_text() {
        let full = WriteError::QueueFull { capacity: 10_000 };
        assert_eq!(
            ReplyError::from_reject(&full.to_string()),
            ReplyError::Refused(full)
        );
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
        let bytes = Encode!(&committed).unwrap();
        assert_eq!(outcome(&bytes), Ok(committed));
        assert_eq!(ticket(&Encode!(&42u64).unwrap()), Ok(42));
        assert!(matches!(ticket(&bytes), Err(ReplyError::Undecodable(_))));
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
