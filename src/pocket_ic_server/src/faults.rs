//! Fault-injection test hooks: what a real network does to a client, on demand, so client
//! libraries can test their handling of it. They are not part of the IC's protocol, are
//! served under their own path (`/test_hooks/...`), and only when the server was started with
//! `--test-hooks`:
//!
//! | endpoint (`POST`, JSON body) | effect |
//! |---|---|
//! | `/test_hooks/instances/{id}/drop_replies` `{"count": n}` | the next `n` calls execute and commit, but their HTTP answer is never sent (the agent sees its own timeout) |
//! | `/test_hooks/instances/{id}/delay_replies` `{"count": n, "ms": d}` | the next `n` calls' answers are sent `d` ms late |
//! | `/test_hooks/instances/{id}/stop_canister` `{"canister_id": "<text>"}` | stops the canister as its controller would (`stop_canister`); calls are then refused (IC0508) |
//! | `/test_hooks/instances/{id}/start_canister` `{"canister_id": "<text>"}` | starts it again |
//! | `/test_hooks/instances/{id}/block_interval` `{"ms": d}` | from now on one round (one block) every `d` ms and no other; `0`: a round whenever a call arrives |
//! | `/test_hooks/instances/{id}/rounds` `{}` | answers `{"block_interval_ms", "rounds": [{"round", "started_ms", "inducted_ingress", "waiting_ingress"}]}`: what every round's block held |
//!
//! The same paths without `instances/{id}` act on the replica instance (`--replica`). Every
//! hook answers `{"ok": true}` or a 4xx with `{"message": ...}`.

use std::sync::Mutex;
use std::time::Duration;

use axum::response::Response;
use serde::Deserialize;

/// How long a dropped reply is held before the server aborts the connection without an
/// answer: longer than agents wait for a call by default.
pub const DROP_HOLD: Duration = Duration::from_secs(120);

#[derive(Debug, Default)]
struct State {
    drop: u32,
    delay: u32,
    delay_by: Duration,
}

/// The pending faults of one instance.
#[derive(Debug, Default)]
pub struct Faults {
    state: Mutex<State>,
}

/// What happens to one call's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallFault {
    /// Answered normally.
    None,
    /// Never answered.
    Drop,
    /// Answered this late.
    Delay(Duration),
}

impl CallFault {
    /// Sends `response` as this fault dictates: at once, late, or never (held for
    /// [`DROP_HOLD`], then the connection is aborted: the body fails before its first byte).
    pub async fn apply(self, response: Response) -> Response {
        match self {
            CallFault::None => response,
            CallFault::Delay(d) => {
                tokio::time::sleep(d).await;
                response
            }
            CallFault::Drop => {
                tokio::time::sleep(DROP_HOLD).await;
                drop(response);
                let aborted = futures_util::stream::once(async {
                    Err::<axum::body::Bytes, std::io::Error>(std::io::Error::other(
                        "the answer was dropped (test hook drop_replies)",
                    ))
                });
                Response::new(axum::body::Body::from_stream(aborted))
            }
        }
    }
}

/// Body of `drop_replies`.
#[derive(Debug, Deserialize)]
pub struct DropReplies {
    /// How many call answers to drop.
    pub count: u32,
}

/// Body of `delay_replies`.
#[derive(Debug, Deserialize)]
pub struct DelayReplies {
    /// How many call answers to delay.
    pub count: u32,
    /// By how many milliseconds.
    pub ms: u64,
}

/// Body of `block_interval`.
#[derive(Debug, Deserialize)]
pub struct BlockInterval {
    /// Milliseconds between rounds; 0 runs a round whenever a call arrives.
    pub ms: u64,
}

/// Body of `stop_canister` / `start_canister`.
#[derive(Debug, Deserialize)]
pub struct CanisterHook {
    /// The canister, as text.
    pub canister_id: String,
}

impl Faults {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Drops the next `count` call answers.
    pub fn drop_replies(&self, count: u32) {
        self.lock().drop = count;
    }

    /// Delays the next `count` call answers by `by`.
    pub fn delay_replies(&self, count: u32, by: Duration) {
        let mut s = self.lock();
        s.delay = count;
        s.delay_by = by;
    }

    /// The fault for the call being answered now (a drop takes precedence over a delay).
    pub fn take_call_fault(&self) -> CallFault {
        let mut s = self.lock();
        if s.drop > 0 {
            s.drop -= 1;
            CallFault::Drop
        } else if s.delay > 0 {
            s.delay -= 1;
            CallFault::Delay(s.delay_by)
        } else {
            CallFault::None
        }
    }
}
