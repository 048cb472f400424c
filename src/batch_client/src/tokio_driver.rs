//! The off-chain driver (feature `tokio`): one task that takes due batches, sends up to
//! `max_in_flight` at a time, waits out backoffs and the delay trigger on tokio's clock, and
//! stops when the batcher is closed and everything is answered.
//!
//! ```no_run
//! # batch_types::writes! { pub enum TodoWrite {
//! #     complete = "UPDATE todos SET done = 1 WHERE id = ?1" { id: i64 },
//! # } }
//! # async fn example(transport: impl ic_batch_client::Transport) {
//! use ic_batch_client::{Batcher, BatcherConfig, Declared, tokio_driver};
//!
//! let config = tokio_driver::with_random_key_prefix(BatcherConfig::default());
//! let batcher = Batcher::new(Declared::<TodoWrite>::new(), config).expect("valid config");
//! let driver = tokio_driver::run(batcher.clone(), transport, tokio_driver::system_clock);
//! let client = async {
//!     let op = TodoWrite::complete { id: 7 };
//!     let outcome = batcher.submit(op, tokio_driver::system_clock()).await.expect("queued");
//!     let _ = outcome.await;
//!     batcher.close();
//! };
//! // Or `tokio::spawn(driver)` with a concrete transport whose calls are `Send`.
//! tokio::join!(driver, client);
//! # }
//! ```

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures_util::stream::{FuturesUnordered, StreamExt};

use crate::batcher::{Batcher, Due, InFlight, Next};
use crate::codec::BatchCodec;
use crate::config::BatcherConfig;
use crate::transport::{SendError, Transport};

/// Nanoseconds since the Unix epoch by the system clock (what a key's `created_at_time`
/// must be close to: the canister accepts keys within its permitted drift).
pub fn system_clock() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| {
            u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX)
        })
}

/// `config` with 8 random bytes (from the operating system) as its key prefix, so that two
/// processes of one identity never form the same key.
pub fn with_random_key_prefix(mut config: BatcherConfig) -> BatcherConfig {
    let mut prefix = [0u8; 8];
    if getrandom::fill(&mut prefix).is_err() {
        // No randomness: the time and the process id still tell processes apart.
        let mixed = system_clock() ^ (u64::from(std::process::id()) << 32);
        prefix = mixed.to_be_bytes();
    }
    config.key_prefix = prefix;
    config
}

/// Drives `batcher` over `transport` until the batcher is closed and every batch answered.
/// `clock` gives nanoseconds since the Unix epoch (keys' creation times, the delay trigger,
/// retry deadlines); sleeping uses tokio's timer. Spawn it (`tokio::spawn` when the
/// transport's futures are `Send`, as ic-agent's are) or await it.
///
/// Each attempt is bounded by `attempt_timeout_ns` when set: an attempt still unanswered then
/// is abandoned as [`SendError::Unknown`] and retried with the same key (its reply, if it ever
/// comes, is dropped; the canister answers the retry from its record).
pub async fn run<C, T, K>(batcher: Batcher<C>, transport: T, clock: K)
where
    C: BatchCodec,
    T: Transport,
    K: Fn() -> u64,
{
    let notify = Arc::new(tokio::sync::Notify::new());
    {
        let notify = Arc::clone(&notify);
        batcher.set_notifier(move || notify.notify_one());
    }
    let timeout = batcher
        .config()
        .attempt_timeout_ns
        .map(Duration::from_nanos);
    let transport = &transport;
    let mut sends = FuturesUnordered::new();
    loop {
        let now = clock();
        while let Some(batch) = batcher.take_batch(now) {
            sends.push(attempt(transport, batch, 0, timeout));
        }
        if sends.is_empty() && batcher.is_finished() {
            return;
        }
        let wake_in = match batcher.due(now) {
            Due::At(at) => Some(Duration::from_nanos(at.saturating_sub(now))),
            Due::Now => Some(Duration::ZERO),
            Due::Idle => None,
        };
        tokio::select! {
            Some((batch, result)) = sends.next(), if !sends.is_empty() => {
                if let Next::Retry { batch, delay_ns } = batcher.finish(batch, result, clock()) {
                    sends.push(attempt(transport, batch, delay_ns, timeout));
                }
            }
            () = notify.notified() => {}
            () = sleep_for(wake_in) => {}
        }
    }
}

async fn sleep_for(duration: Option<Duration>) {
    match duration {
        Some(duration) => tokio::time::sleep(duration).await,
        None => std::future::pending().await,
    }
}

/// One attempt: wait `delay_ns`, send, and give the batch back with what happened.
async fn attempt<C: BatchCodec, T: Transport>(
    transport: &T,
    batch: InFlight<C>,
    delay_ns: u64,
    timeout: Option<Duration>,
) -> (InFlight<C>, Result<Vec<u8>, SendError>) {
    if delay_ns > 0 {
        tokio::time::sleep(Duration::from_nanos(delay_ns)).await;
    }
    let call = transport.call(batch.request().to_vec());
    let result = match timeout {
        Some(timeout) => match tokio::time::timeout(timeout, call).await {
            Ok(result) => result,
            Err(_) => Err(SendError::Unknown(format!(
                "no answer within {} ms",
                timeout.as_millis()
            ))),
        },
        None => call.await,
    };
    (batch, result)
}
