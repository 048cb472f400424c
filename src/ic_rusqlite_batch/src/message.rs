//! The running message (wasm32 only): its arguments, its reply and its instruction meter. A
//! leaf, like `state`: the timer and the canister's methods use it without importing each
//! other.

use batch_core::InstructionMeter;

use crate::access::Refusal;

/// `ic0.performance_counter(0)`: instructions used so far by this message.
#[derive(Clone, Copy, Debug)]
pub struct MessageMeter;

impl InstructionMeter for MessageMeter {
    fn instructions(&self) -> u64 {
        ic_cdk::api::performance_counter(0)
    }
}

/// The arguments of the running method, decoded as `A` (a tuple) as ic-cdk decodes them;
/// traps on arguments of another type. Call it inside [`authorized`](crate::authorized)'s body.
pub fn arguments<A: for<'a> candid::utils::ArgumentDecoder<'a>>() -> A {
    let bytes = ic_cdk::api::msg_arg_data();
    let bytes: &[u8] = if bytes.is_empty() {
        b"DIDL\x00\x00"
    } else {
        &bytes
    };
    let mut config = candid::DecoderConfig::new();
    config.set_skipping_quota(10_000);
    candid::utils::decode_args_with_config(bytes, &config)
        .unwrap_or_else(|e| ic_cdk::trap(format!("failed to decode call arguments: {e}")))
}

/// Replies with `value`, Candid-encoded (a method exported with `manual_reply`), of a type
/// with a typed refusal (as [`authorized`](crate::authorized) answers it); the type's table is
/// built at its first reply only (`crate::encode`).
pub fn reply<T: candid::CandidType + Refusal + 'static>(value: &T) {
    let bytes = crate::encode::encode_one(value)
        .unwrap_or_else(|e| ic_cdk::trap(format!("failed to encode the reply: {e}")));
    ic_cdk::api::msg_reply(bytes);
}
