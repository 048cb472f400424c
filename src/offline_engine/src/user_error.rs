//! The IC's user-facing errors: an error code (`IC0503`) and the description the replica builds
//! for a failed execution (`Error from Canister <id>: <what happened>.`, followed for the kinds
//! the replica documents by a line of advice and a link to the execution-errors reference).
//!
//! Source: `HypervisorError::into_user_error` in dfinity/ic `rs/interfaces/src/execution_environment/errors.rs`
//! and `ErrorCode` / `UserError` in `rs/types/error_types/src/lib.rs`. A calling canister sees
//! such an error as the reject message of its call, rendered as the replica renders a
//! `UserError` (`IC0503: Error from Canister ...`); an ingress caller sees the code and the
//! description apart ([`UserError::code`], [`UserError::description`]).

/// The error codes of the IC the engine produces (the number after `IC`).
pub mod error_code {
    /// `IC0301`: the destination canister does not exist.
    pub const CANISTER_NOT_FOUND: u64 = 301;
    /// `IC0406`: the canister rejected the message (`ic0.msg_reject`).
    pub const CANISTER_REJECTED_MESSAGE: u64 = 406;
    /// `IC0502`: the canister trapped (a Wasm trap).
    pub const CANISTER_TRAPPED: u64 = 502;
    /// `IC0503`: the canister called `ic0.trap`.
    pub const CANISTER_CALLED_TRAP: u64 = 503;
    /// `IC0504`: the canister violated the System API's contract.
    pub const CANISTER_CONTRACT_VIOLATION: u64 = 504;
    /// `IC0506`: the canister did not reply.
    pub const CANISTER_DID_NOT_REPLY: u64 = 506;
    /// `IC0508`: the canister is stopped.
    pub const CANISTER_STOPPED: u64 = 508;
    /// `IC0509`: the canister is stopping.
    pub const CANISTER_STOPPING: u64 = 509;
    /// `IC0513`: a callback names a function the table does not hold.
    pub const CANISTER_FUNCTION_NOT_FOUND: u64 = 513;
    /// `IC0522`: the message exceeded its instruction limit.
    pub const CANISTER_INSTRUCTION_LIMIT_EXCEEDED: u64 = 522;
    /// `IC0524`: the message wrote more stable memory than one message may.
    pub const CANISTER_MEMORY_ACCESS_LIMIT_EXCEEDED: u64 = 524;
    /// `IC0536`: the canister has no such method.
    pub const CANISTER_METHOD_NOT_FOUND: u64 = 536;
    /// `IC0537`: the canister has no Wasm module.
    pub const CANISTER_WASM_MODULE_NOT_FOUND: u64 = 537;
    /// `IC0539`: the heap grew beyond the canister's `wasm_memory_limit`.
    pub const CANISTER_WASM_MEMORY_LIMIT_EXCEEDED: u64 = 539;
    /// `IC0507`: the canister's memory allocation (or the subnet's memory) is exhausted.
    pub const CANISTER_OUT_OF_MEMORY: u64 = 507;
}

/// Base address of the execution-errors reference the replica links to.
pub const EXECUTION_ERRORS_DOC: &str =
    "https://docs.internetcomputer.org/references/execution-errors";

const HANDLE_FAILURES: &str = "Consider gracefully handling failures from this canister or altering the canister to handle exceptions.";

/// An error as the IC reports it to whoever made the call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserError {
    /// The error code (`503` for `IC0503`).
    pub code: u64,
    /// The description.
    pub description: String,
}

impl UserError {
    /// The reject code the error belongs to: the code's most significant digit (1 SYS_FATAL,
    /// 2 SYS_TRANSIENT, 3 DESTINATION_INVALID, 4 CANISTER_REJECT, 5 CANISTER_ERROR,
    /// 6 SYS_UNKNOWN).
    pub fn reject_code(&self) -> u32 {
        (self.code / 100) as u32
    }
}

impl std::fmt::Display for UserError {
    /// `IC0503: <description>`, as the replica renders a `UserError` (and hence a calling
    /// canister's reject message).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "IC{:04}: {}", self.code, self.description)
    }
}

/// What kind of failure an engine trap text describes: its code and, where the replica has
/// them, its line of advice and documentation anchor.
fn classify(text: &str) -> (u64, Option<(&'static str, &'static str)>) {
    use error_code::*;
    if text.starts_with("Canister called `ic0.trap`") {
        (
            CANISTER_CALLED_TRAP,
            Some((HANDLE_FAILURES, "trapped-explicitly")),
        )
    } else if text.starts_with("Canister exceeded the limit of")
        || text.contains("exceeded the instruction limit")
    {
        (
            CANISTER_INSTRUCTION_LIMIT_EXCEEDED,
            Some((
                "Try optimizing this method to consume fewer instructions or split the work across multiple messages.",
                "instruction-limit-exceeded",
            )),
        )
    } else if text.starts_with("Canister has no ") {
        (
            CANISTER_METHOD_NOT_FOUND,
            Some((
                "Check that the method being called is exported by the target canister.",
                "method-not-found",
            )),
        )
    } else if text.starts_with("Canister violated contract")
        && text.contains("cannot be executed in")
    {
        (
            CANISTER_CONTRACT_VIOLATION,
            Some((
                "Check the ICP documentation to make sure APIs are being called in the correct message types.",
                "calling-a-system-api-from-the-wrong-mode",
            )),
        )
    } else if text.starts_with("Canister violated contract") {
        (CANISTER_CONTRACT_VIOLATION, None)
    } else if text.starts_with("Canister exceeded memory access limits") {
        (CANISTER_MEMORY_ACCESS_LIMIT_EXCEEDED, None)
    } else if text.starts_with("Canister exceeded its current Wasm memory limit") {
        (
            CANISTER_WASM_MEMORY_LIMIT_EXCEEDED,
            Some((
                "Try checking the canister for a possible memory leak or modifying it to use more stable memory instead of Wasm memory.",
                "wasm-memory-limit-exceeded",
            )),
        )
    } else if text.starts_with("Canister cannot grow its memory usage") {
        (
            CANISTER_OUT_OF_MEMORY,
            Some((
                "Check the canister's memory usage against its allocation and the system wide limits to determine why more memory cannot be allocated.",
                "out-of-memory",
            )),
        )
    } else if text.starts_with("Canister requested to invoke a non-existent Wasm function") {
        (CANISTER_FUNCTION_NOT_FOUND, None)
    } else {
        (CANISTER_TRAPPED, Some((HANDLE_FAILURES, "trapped")))
    }
}

/// The error for a canister failure the engine described as `text` (a trap, a missing method,
/// a contract violation, ...), as the replica words it for canister `canister` (its textual
/// principal): `Error from Canister <canister>: <text>.` and the advice line where the replica
/// has one. A canister that did not reply gets the replica's own sentence.
pub fn canister_error(canister: &str, text: &str) -> UserError {
    if text.starts_with("Canister did not reply") {
        return UserError {
            code: error_code::CANISTER_DID_NOT_REPLY,
            description: format!("Canister {canister} did not reply to the call"),
        };
    }
    let (code, help) = classify(text);
    let mut description = format!("Error from Canister {canister}: {text}.");
    if let Some((advice, anchor)) = help {
        description.push_str(&format!(
            "\n{advice} See documentation: {EXECUTION_ERRORS_DOC}#{anchor}"
        ));
    }
    UserError { code, description }
}

/// The error for a message to a canister that has no Wasm module, as the replica's execution
/// reports it (`HypervisorError::WasmModuleNotFound` with its advice).
pub fn no_wasm_module(canister: &str) -> UserError {
    UserError {
        code: error_code::CANISTER_WASM_MODULE_NOT_FOUND,
        description: format!(
            "Error from Canister {canister}: Attempted to execute a message, but the canister contains no Wasm module..\n\
             Please install code to this canister before calling it. See documentation: {EXECUTION_ERRORS_DOC}#wasm-module-not-found"
        ),
    }
}

/// The textual form of principal `bytes` (hex when they are not a principal).
pub fn principal_text(bytes: &[u8]) -> String {
    candid::Principal::try_from_slice(bytes)
        .map(|p| p.to_text())
        .unwrap_or_else(|_| hex::encode(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_called_trap_reads_like_the_replica() {
        let e = canister_error(
            "lxzze-o7777-77777-aaaaa-cai",
            "Canister called `ic0.trap` with message: 'boom'",
        );
        assert_eq!(e.code, 503);
        assert_eq!(e.reject_code(), 5);
        assert_eq!(
            e.to_string(),
            "IC0503: Error from Canister lxzze-o7777-77777-aaaaa-cai: Canister called `ic0.trap` with message: 'boom'.\n\
             Consider gracefully handling failures from this canister or altering the canister to handle exceptions. \
             See documentation: https://docs.internetcomputer.org/references/execution-errors#trapped-explicitly"
        );
    }

    #[test]
    fn every_kind_has_its_code() {
        let code = |t: &str| canister_error("x", t).code;
        assert_eq!(code("Canister trapped: unreachable"), 502);
        assert_eq!(
            code("Canister exceeded the limit of 5 instructions for single message execution."),
            522
        );
        assert_eq!(code("Canister has no update method 'x'."), 536);
        assert_eq!(code("Canister violated contract: ic0.msg_reply: ..."), 504);
        assert_eq!(code("Canister did not reply to the call"), 506);
        assert_eq!(no_wasm_module("x").code, 537);
        let wrong_mode = canister_error(
            "x",
            "Canister violated contract: \"ic0_msg_reply\" cannot be executed in init mode",
        );
        assert!(
            wrong_mode
                .description
                .ends_with("#calling-a-system-api-from-the-wrong-mode"),
            "{}",
            wrong_mode.description
        );
    }
}
