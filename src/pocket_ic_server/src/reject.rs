//! The IC's reject responses: reject code, error code (`IC0xxx`) and the user-facing message the
//! replica builds, from the offline engine's message results and from the server's own checks.
//!
//! A canister error reads `Error from Canister <id>: <what happened>.` followed, for the kinds
//! the replica documents, by a line of advice and a link to the execution-errors reference
//! (`Consider gracefully handling failures ... See documentation: ...#trapped-explicitly`).

use candid::Principal;
use offline_engine::{MessageResult, reject_code};
use pocket_ic::{ErrorCode, RejectCode, RejectResponse};

/// Base address of the execution-errors reference the replica links to.
pub const EXECUTION_ERRORS_DOC: &str = offline_engine::user_error::EXECUTION_ERRORS_DOC;

/// The reject code an error code belongs to (its most significant digit).
pub fn reject_code_of(code: ErrorCode) -> RejectCode {
    match code as u64 / 100 {
        1 => RejectCode::SysFatal,
        2 => RejectCode::SysTransient,
        3 => RejectCode::DestinationInvalid,
        4 => RejectCode::CanisterReject,
        6 => RejectCode::SysUnknown,
        _ => RejectCode::CanisterError,
    }
}

/// A reject response with error code `code` and message `message`.
pub fn reject(code: ErrorCode, message: impl Into<String>, certified: bool) -> RejectResponse {
    RejectResponse {
        reject_code: reject_code_of(code),
        reject_message: message.into(),
        error_code: code,
        certified,
    }
}

/// The reject response for a canister error the engine described as `text` (a trap, a
/// missing method, ...), as the replica words it for canister `canister`: the engine's one copy
/// of the wording ([`offline_engine::user_error::canister_error`]).
pub fn canister_error(canister: &Principal, text: &str, certified: bool) -> RejectResponse {
    let e = offline_engine::user_error::canister_error(&canister.to_text(), text);
    let code = ErrorCode::try_from(e.code).unwrap_or(ErrorCode::CanisterTrapped);
    reject(code, e.description, certified)
}

/// The caller's view of a message's outcome: the reply bytes, or the reject response
/// (`certified` is true for update calls, false for queries).
pub fn outcome(
    canister: &Principal,
    result: &MessageResult,
    certified: bool,
) -> Result<Vec<u8>, RejectResponse> {
    match result {
        MessageResult::Reply(bytes) => Ok(bytes.clone()),
        MessageResult::Reject(code, message) if *code == reject_code::CANISTER_REJECT => {
            Err(reject(
                ErrorCode::CanisterRejectedMessage,
                message.clone(),
                certified,
            ))
        }
        MessageResult::Reject(code, message) if *code == reject_code::DESTINATION_INVALID => Err(
            reject(ErrorCode::CanisterNotFound, message.clone(), certified),
        ),
        // A stopping canister refuses the ingress messages it still had queued.
        MessageResult::Reject(_, message)
            if *message == format!("Canister {canister} is stopping") =>
        {
            Err(stopping(canister, certified))
        }
        MessageResult::Reject(_, message) | MessageResult::Trap(message) => {
            Err(canister_error(canister, message, certified))
        }
        MessageResult::NoReply => Err(canister_error(
            canister,
            "Canister did not reply to the call",
            certified,
        )),
    }
}

/// `Canister <id> not found` (IC0301).
pub fn canister_not_found(canister: &Principal, certified: bool) -> RejectResponse {
    reject(
        ErrorCode::CanisterNotFound,
        format!("Canister {canister} not found"),
        certified,
    )
}

/// The canister has no Wasm module (IC0537).
pub fn no_wasm_module(canister: &Principal, certified: bool) -> RejectResponse {
    reject(
        ErrorCode::CanisterWasmModuleNotFound,
        format!(
            "Error from Canister {canister}: Attempted to execute a message, but the canister contains no Wasm module.."
        ),
        certified,
    )
}

/// The canister is stopping (IC0509): it takes no new calls.
pub fn stopping(canister: &Principal, certified: bool) -> RejectResponse {
    reject(
        ErrorCode::CanisterStopping,
        format!("Canister {canister} is stopping"),
        certified,
    )
}

/// The canister is stopped (IC0508).
pub fn stopped(canister: &Principal, certified: bool) -> RejectResponse {
    reject(
        ErrorCode::CanisterStopped,
        format!("Canister {canister} is stopped"),
        certified,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id() -> Principal {
        crate::topology::canister_id(crate::topology::FIRST_APPLICATION_RANGE_START)
    }

    #[test]
    fn called_trap_reads_like_the_replica() {
        let r = canister_error(
            &id(),
            "Canister called `ic0.trap` with message: 'boom'",
            true,
        );
        assert_eq!(r.reject_code, RejectCode::CanisterError);
        assert_eq!(r.error_code, ErrorCode::CanisterCalledTrap);
        assert_eq!(
            r.reject_message,
            "Error from Canister lxzze-o7777-77777-aaaaa-cai: Canister called `ic0.trap` with message: 'boom'.\n\
             Consider gracefully handling failures from this canister or altering the canister to handle exceptions. \
             See documentation: https://docs.internetcomputer.org/references/execution-errors#trapped-explicitly"
        );
        assert!(r.certified);
    }

    #[test]
    fn every_engine_outcome_has_its_code() {
        let code = |r: MessageResult| outcome(&id(), &r, false).unwrap_err().error_code;
        assert_eq!(
            code(MessageResult::Trap("Canister trapped: unreachable".into())),
            ErrorCode::CanisterTrapped
        );
        assert_eq!(
            code(MessageResult::Trap(
                "Canister exceeded the limit of 5 instructions for single message execution."
                    .into()
            )),
            ErrorCode::CanisterInstructionLimitExceeded
        );
        assert_eq!(
            code(MessageResult::Reject(
                5,
                "Canister has no update method 'x'.".into()
            )),
            ErrorCode::CanisterMethodNotFound
        );
        assert_eq!(
            code(MessageResult::Trap(
                "Canister violated contract: ic0.msg_reply: ...".into()
            )),
            ErrorCode::CanisterContractViolation
        );
        assert_eq!(
            code(MessageResult::Reject(4, "no thanks".into())),
            ErrorCode::CanisterRejectedMessage
        );
        assert_eq!(code(MessageResult::NoReply), ErrorCode::CanisterDidNotReply);
        let r = outcome(&id(), &MessageResult::Reject(4, "no thanks".into()), true).unwrap_err();
        assert_eq!(r.reject_code, RejectCode::CanisterReject);
        assert_eq!(r.reject_message, "no thanks");
        assert_eq!(
            outcome(&id(), &MessageResult::Reply(vec![1]), true),
            Ok(vec![1])
        );
        assert_eq!(
            reject_code_of(ErrorCode::CanisterNotFound),
            RejectCode::DestinationInvalid
        );
    }
}
