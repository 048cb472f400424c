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
pub const EXECUTION_ERRORS_DOC: &str =
    "https://docs.internetcomputer.org/references/execution-errors";

const HANDLE_FAILURES: &str = "Consider gracefully handling failures from this canister or altering the canister to handle exceptions.";

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

/// What kind of canister error an engine message describes, with the replica's advice line and
/// documentation anchor where it has one.
fn classify(text: &str) -> (ErrorCode, Option<(&'static str, &'static str)>) {
    if text.starts_with("Canister called `ic0.trap`") {
        (
            ErrorCode::CanisterCalledTrap,
            Some((HANDLE_FAILURES, "trapped-explicitly")),
        )
    } else if text.starts_with("Canister exceeded the limit of")
        || text.contains("exceeded the instruction limit")
    {
        (
            ErrorCode::CanisterInstructionLimitExceeded,
            Some((
                "Try optimizing this method to consume fewer instructions or split the work across multiple messages.",
                "instruction-limit-exceeded",
            )),
        )
    } else if text.starts_with("Canister has no ") {
        (
            ErrorCode::CanisterMethodNotFound,
            Some((
                "Check that the method being called is exported by the target canister.",
                "method-not-found",
            )),
        )
    } else if text.starts_with("Canister violated contract") {
        (ErrorCode::CanisterContractViolation, None)
    } else if text.starts_with("Canister exceeded memory access limits") {
        (ErrorCode::CanisterMemoryAccessLimitExceeded, None)
    } else if text.starts_with("Canister requested to invoke a non-existent Wasm function") {
        (ErrorCode::CanisterFunctionNotFound, None)
    } else {
        (
            ErrorCode::CanisterTrapped,
            Some((HANDLE_FAILURES, "trapped")),
        )
    }
}

/// The reject response for a canister error the engine described as `text` (a trap, a
/// missing method, ...), as the replica words it for canister `canister`.
pub fn canister_error(canister: &Principal, text: &str, certified: bool) -> RejectResponse {
    if text.starts_with("Canister did not reply") {
        return reject(
            ErrorCode::CanisterDidNotReply,
            format!("Canister {canister} did not reply to the call"),
            certified,
        );
    }
    let (code, help) = classify(text);
    let mut message = format!("Error from Canister {canister}: {text}.");
    if let Some((advice, anchor)) = help {
        message.push_str(&format!(
            "\n{advice} See documentation: {EXECUTION_ERRORS_DOC}#{anchor}"
        ));
    }
    reject(code, message, certified)
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
