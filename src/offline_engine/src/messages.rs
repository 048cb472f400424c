//! Messages between canisters: requests, responses, and the ingress messages a subnet inducts.
//!
//! They follow the replica's `Request` and `Response` (`rs/types/types/src/messages`): a request
//! names its sender and receiver, the method and payload, the cycles it carries, the sender's
//! callback and, for a call with a best-effort response, its deadline; a response names the
//! callback it answers, carries the reply or the reject, and refunds the cycles the callee did
//! not accept.

/// The answer a response carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Payload {
    /// The callee replied with these bytes.
    Reply(Vec<u8>),
    /// The call was rejected: reject code ([`crate::reject_code`]) and message.
    Reject(u32, String),
}

/// A call from one canister to another (or to itself).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// The calling canister's id.
    pub sender: Vec<u8>,
    /// The called canister's id.
    pub receiver: Vec<u8>,
    /// The method called.
    pub method: String,
    /// The argument.
    pub payload: Vec<u8>,
    /// Cycles attached (`ic0.call_cycles_add128`).
    pub cycles: u128,
    /// The sender's callback that the response goes to.
    pub callback: u64,
    /// For a call with a best-effort response, when it times out (ns since the epoch, a whole
    /// second); 0 for a call with a guaranteed response.
    pub deadline: u64,
}

impl Request {
    /// Bytes the request fee is charged for: method name and payload.
    pub fn billed_bytes(&self) -> u64 {
        (self.method.len() + self.payload.len()) as u64
    }
}

/// The answer to a [`Request`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    /// The canister that made the call (the receiver of the response).
    pub originator: Vec<u8>,
    /// The canister that was called.
    pub respondent: Vec<u8>,
    /// The originator's callback.
    pub callback: u64,
    /// Reply or reject.
    pub payload: Payload,
    /// Cycles given back to the originator (attached and not accepted).
    pub refund: u128,
    /// The request's deadline (0 for a guaranteed response).
    pub deadline: u64,
}

impl Response {
    /// Bytes of the response the caller's transmission fee covers: the reply data or the
    /// reject message.
    pub fn payload_bytes(&self) -> u64 {
        match &self.payload {
            Payload::Reply(b) => b.len() as u64,
            Payload::Reject(_, m) => m.len() as u64,
        }
    }
}

/// A message between canisters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CanisterMessage {
    /// A call.
    Request(Request),
    /// The answer to a call.
    Response(Response),
}

impl CanisterMessage {
    /// The canister the message goes to.
    pub fn receiver(&self) -> &[u8] {
        match self {
            CanisterMessage::Request(r) => &r.receiver,
            CanisterMessage::Response(r) => &r.originator,
        }
    }

    /// The canister the message comes from.
    pub fn sender(&self) -> &[u8] {
        match self {
            CanisterMessage::Request(r) => &r.sender,
            CanisterMessage::Response(r) => &r.respondent,
        }
    }
}

/// An ingress message a subnet inducts into a canister's queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ingress {
    /// An id the submitter chose (the request id), by which its outcome is reported.
    pub id: Vec<u8>,
    /// The user (principal bytes).
    pub sender: Vec<u8>,
    /// The canister called.
    pub receiver: Vec<u8>,
    /// The update (or query) method.
    pub method: String,
    /// The argument.
    pub payload: Vec<u8>,
}

impl Ingress {
    /// Bytes the message takes in a block: method name and argument (the replica also counts
    /// the envelope; `METERING.md` §9).
    pub fn block_bytes(&self) -> u64 {
        (self.method.len() + self.payload.len()) as u64
    }
}
