//! How a [`Batcher`](crate::Batcher) forms, sends and retries batches.

/// The IC's largest ingress message and inter-canister payload: 2 MiB.
pub const IC_MAX_MESSAGE_BYTES: usize = 2 * 1024 * 1024;
/// Bytes left for the envelope of an ingress message (sender, signature, public key, delegations,
/// nonce, expiry, method name, CBOR framing): 32 KiB, more than a long delegation chain takes.
pub const ENVELOPE_RESERVE_BYTES: usize = 32 * 1024;
/// The default most ops per batch: ic-rusqlite-batch's limit per batch of declared writes
/// (`MAX_DECLARED_BATCH_OPS`), also the reference canister's.
pub const DEFAULT_MAX_BATCH_OPS: usize = 10_000;
/// Nanoseconds per millisecond.
const MS: u64 = 1_000_000;

/// How a [`Batcher`](crate::Batcher) forms, sends and retries batches: every setting with its
/// default is in the crate documentation's [settings table](crate#settings).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BatcherConfig {
    /// Ops per batch: once this many are queued a batch is due now; no batch holds more. At
    /// least 1.
    pub max_batch_ops: usize,
    /// Bytes per request ([`BatchCodec::header_len`](crate::BatchCodec::header_len) plus the
    /// ops): a batch is due once the queue holds this many, and no request is larger. An op
    /// that alone does not fit is refused at submit.
    pub max_request_bytes: usize,
    /// Nanoseconds the oldest queued op waits before its batch is due.
    pub max_delay_ns: u64,
    /// Most ops queued and not yet sent; at least `max_batch_ops`.
    pub max_queued_ops: usize,
    /// Most bytes of ops queued and not yet sent; at least `max_request_bytes`.
    pub max_queued_bytes: usize,
    /// Most batches in flight; at least 1. Batches in flight may run in any order.
    pub max_in_flight: usize,
    /// Wait before the first retry, in nanoseconds; doubled per attempt up to `max_backoff_ns`.
    pub initial_backoff_ns: u64,
    /// Longest wait between attempts, in nanoseconds.
    pub max_backoff_ns: u64,
    /// Retries stop once this many nanoseconds have passed since the key was created: the
    /// ops then get [`BatchError::Unknown`](crate::BatchError::Unknown) if an attempt may have
    /// run, or the last error otherwise.
    pub retry_for_ns: u64,
    /// An attempt still unanswered after this many nanoseconds is abandoned as unknown and
    /// retried (drivers apply it; `None`: the transport's own timeouts).
    pub attempt_timeout_ns: Option<u64>,
    /// Times an op the canister reports not executed is queued again (each time in a new
    /// batch, under a new key, at the front of the queue); after that its outcome is
    /// delivered as it is.
    pub max_resubmits: u32,
    /// The first 8 bytes of every key id; the other 8 count batches. Drivers fill it with
    /// random bytes (off-chain) or the canister's time (in a canister), so that two batchers
    /// of one caller do not reuse a key.
    pub key_prefix: [u8; 8],
}

impl Default for BatcherConfig {
    fn default() -> Self {
        BatcherConfig {
            max_batch_ops: DEFAULT_MAX_BATCH_OPS,
            max_request_bytes: IC_MAX_MESSAGE_BYTES - ENVELOPE_RESERVE_BYTES,
            max_delay_ns: 50 * MS,
            max_queued_ops: 100_000,
            max_queued_bytes: 64 << 20,
            max_in_flight: 4,
            initial_backoff_ns: 100 * MS,
            max_backoff_ns: 10_000 * MS,
            retry_for_ns: 24 * 60 * 60 * 1_000 * MS,
            attempt_timeout_ns: None,
            max_resubmits: 8,
            key_prefix: [0; 8],
        }
    }
}

/// Why a [`BatcherConfig`] was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// A bound that must be at least 1 is 0.
    #[error("{0} must be at least 1")]
    Zero(&'static str),
    /// The queue cannot hold one full batch.
    #[error("max_queued_ops ({queued}) must be at least max_batch_ops ({batch})")]
    QueueSmallerThanBatch {
        /// `max_queued_ops`.
        queued: usize,
        /// `max_batch_ops`.
        batch: usize,
    },
    /// The queue cannot hold one full request.
    #[error("max_queued_bytes ({queued}) must be at least max_request_bytes ({request})")]
    QueueBytesSmallerThanRequest {
        /// `max_queued_bytes`.
        queued: usize,
        /// `max_request_bytes`.
        request: usize,
    },
    /// A request cannot hold its own framing.
    #[error("max_request_bytes ({request}) must exceed the codec's header ({header} bytes)")]
    RequestSmallerThanHeader {
        /// `max_request_bytes`.
        request: usize,
        /// The codec's header length.
        header: usize,
    },
}

impl BatcherConfig {
    /// Checks the bounds documented on each field, for a codec whose header takes
    /// `header_len` bytes.
    pub fn validate(&self, header_len: usize) -> Result<(), ConfigError> {
        for (value, name) in [
            (self.max_batch_ops, "max_batch_ops"),
            (self.max_queued_ops, "max_queued_ops"),
            (self.max_in_flight, "max_in_flight"),
        ] {
            if value == 0 {
                return Err(ConfigError::Zero(name));
            }
        }
        if self.retry_for_ns == 0 {
            return Err(ConfigError::Zero("retry_for_ns"));
        }
        if self.max_queued_ops < self.max_batch_ops {
            return Err(ConfigError::QueueSmallerThanBatch {
                queued: self.max_queued_ops,
                batch: self.max_batch_ops,
            });
        }
        if self.max_request_bytes <= header_len {
            return Err(ConfigError::RequestSmallerThanHeader {
                request: self.max_request_bytes,
                header: header_len,
            });
        }
        if self.max_queued_bytes < self.max_request_bytes {
            return Err(ConfigError::QueueBytesSmallerThanRequest {
                queued: self.max_queued_bytes,
                request: self.max_request_bytes,
            });
        }
        Ok(())
    }
}
