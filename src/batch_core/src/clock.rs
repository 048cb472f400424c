//! Time sources ([`Clock`]) for the timer trigger.

use std::cell::Cell;

#[cfg(test)]
mod tests;

/// Current time in nanoseconds, passed to [`BatchQueue::submit`](crate::BatchQueue::submit) and
/// [`BatchQueue::next_due`](crate::BatchQueue::next_due).
///
/// In a canister, return `ic_cdk::api::time()` (nanoseconds since the Unix epoch, constant
/// within a message). The queue itself only takes plain `u64` times; this trait lets glue code
/// and tests swap the source.
pub trait Clock {
    /// Nanoseconds since an arbitrary fixed origin; should not go backwards.
    fn now_ns(&self) -> u64;
}

impl<F: Fn() -> u64> Clock for F {
    fn now_ns(&self) -> u64 {
        self()
    }
}

/// A clock that only moves when told to: for testing timer logic.
#[derive(Debug, Default)]
pub struct ManualClock {
    now: Cell<u64>,
}

impl ManualClock {
    /// A clock reading `start_ns`.
    pub fn new(start_ns: u64) -> Self {
        ManualClock {
            now: Cell::new(start_ns),
        }
    }

    /// Sets the time to `now_ns`.
    pub fn set(&self, now_ns: u64) {
        self.now.set(now_ns);
    }

    /// Moves the time forward by `delta_ns` (saturating).
    pub fn advance(&self, delta_ns: u64) {
        self.now.set(self.now.get().saturating_add(delta_ns));
    }
}

impl Clock for ManualClock {
    fn now_ns(&self) -> u64 {
        self.now.get()
    }
}
