//! The running message (wasm32 only): its arguments, decoded strictly, its reply, and its
//! instruction meter; for methods with a codec or a reply of their own (`update!` is made of
//! them). A leaf, like the crate's state: the timer and the canister's methods use it without
//! importing each other.

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

/// The arguments of the running method, decoded as `A` (a tuple) after their types are checked
/// strictly ([`crate::args`]: a value of another type than `A` takes is refused, never read as
/// `null`); `names` are the arguments' names, for the refusal. Call it inside
/// [`authorized`](crate::canister::authorized)'s body.
pub fn strict_arguments<A>(names: &[&str]) -> Result<A, crate::args::ArgumentError>
where
    A: crate::args::ArgumentTypes + for<'a> candid::utils::ArgumentDecoder<'a>,
{
    crate::args::decode(&ic_cdk::api::msg_arg_data(), names)
}

/// [`strict_arguments`] for a method without a typed refusal: traps (rejecting the call, which
/// then changes nothing) on arguments of another type, with the refusal's text.
pub fn arguments<A>() -> A
where
    A: crate::args::ArgumentTypes + for<'a> candid::utils::ArgumentDecoder<'a>,
{
    strict_arguments(&[])
        .unwrap_or_else(|e| ic_cdk::trap(format!("failed to decode call arguments: {e}")))
}

/// Replies with `value`, Candid-encoded (a method exported with `manual_reply`), of a type
/// with a typed refusal (as [`authorized`](crate::canister::authorized) answers it); the type's table is
/// built at its first reply only (`crate::encode`).
pub fn reply<T: candid::CandidType + Refusal + 'static>(value: &T) {
    let bytes = crate::encode::encode_one(value)
        .unwrap_or_else(|e| ic_cdk::trap(format!("failed to encode the reply: {e}")));
    ic_cdk::api::msg_reply(bytes);
}
