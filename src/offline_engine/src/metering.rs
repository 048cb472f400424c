//! Metering profiles: the replica's rules for memory pages, one table per profile
//! (`METERING.md` §10).
//!
//! Everything else the engine meters (operator weights, System API costs, limits) is the same in
//! every profile. What differs is how a message pays for the heap and stable-memory pages it
//! touches:
//!
//! - [`Metering::POCKET_IC_13`]: the rules of the replica that PocketIC 13.0.0 and canbench
//!   0.7.0 run. Reading memory is free; a 4 KiB heap page whose bytes changed costs 1,000
//!   instructions (4,000 in wasm64), billed after the message; a 4 KiB stable page written for
//!   the first time in the message costs 1,000 in the call that writes it.
//! - [`Metering::IC_DMT`]: dfinity/ic with the deterministic memory tracker (pull request
//!   #10789, the only handler since #11180). The tracker charges 5,000 instructions per 4 KiB
//!   OS page of every 64 KiB Wasm page a message accesses, heap or stable memory, once at the
//!   first access and once more at the first write, at the moment of the access
//!   ([`crate::tracker`]).
//!
//! A profile is chosen per engine ([`crate::EngineConfig::metering`]); a [`crate::Program`]
//! loaded by that engine is instrumented for it, and every canister installed from the program
//! is metered by it.

use crate::stable::OS_PAGE;

/// Which rules for memory pages the engine meters by: one row of the table in `METERING.md`
/// §10. The two profiles are [`Metering::POCKET_IC_13`] and [`Metering::IC_DMT`]; a test may
/// build its own (say, the tracker with another page overhead).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Metering {
    /// The profile's name on command lines (`--metering`) and in reports.
    pub name: &'static str,
    /// The replica code the rules follow.
    pub source: &'static str,
    /// Instructions per 4 KiB heap page whose bytes the message changed, billed after the
    /// message (the canister's `performance_counter` does not see them): `dirty_page_overhead`
    /// of the replica's `rs/config/src/subnet_config.rs` before the tracker.
    pub heap_changed_page: u64,
    /// The same for a 64-bit heap (`WASM64_DIRTY_PAGE_OVERHEAD_MULTIPLIER` = 4 in the replica's
    /// `rs/config/src/embedders.rs`).
    pub heap_changed_page_wasm64: u64,
    /// Instructions per 4 KiB stable-memory page a `stable_write` dirties for the first time in
    /// the message, charged in that call (the replica's stable-memory System API replacements).
    pub stable_new_dirty_page: u64,
    /// The deterministic memory tracker, in the profiles that have it.
    pub tracker: Option<Tracker>,
}

/// The deterministic memory tracker's parameters (`METERING.md` §10).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tracker {
    /// Instructions per OS page of a Wasm page, charged when a message first accesses the Wasm
    /// page and once more when it first writes to it (`page_overhead` of the replica's
    /// `SchedulerConfig::application_subnet()`: 5,000).
    pub page_overhead: u64,
    /// OS pages per 64 KiB Wasm page: 16 on the replica's Linux nodes (4 KiB pages).
    pub os_pages_per_wasm_page: u64,
    /// Multiplier of the page charges for a 64-bit heap: 1 (the replica's instrumentation test
    /// `metering_wasm64_load_store_canister` charges a wasm64 page as a wasm32 one).
    pub heap_wasm64_multiplier: u64,
    /// Stable-memory OS pages a message may access (read or write), by kind of execution; the
    /// replica's `stable_memory_accessed_page_limit` (`rs/config/src/embedders.rs`).
    pub stable_accessed_limit: ExecutionLimits,
}

/// A limit by kind of execution, as the replica's `StableMemoryPageLimit` sets it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExecutionLimits {
    /// Updates, callbacks, cleanup and system tasks.
    pub message: u64,
    /// Install, upgrade and their entry points.
    pub upgrade: u64,
    /// Queries: replicated, non-replicated and composite (and `canister_inspect_message`).
    pub query: u64,
}

const GIB: u64 = 1 << 30;

impl Metering {
    /// The rules of the replica PocketIC 13.0.0 runs (canbench 0.7.0 pins that server): what
    /// the engine metered before it had profiles, and what `VALIDATION.md` checks against the
    /// published canbench figures.
    pub const POCKET_IC_13: Metering = Metering {
        name: "pocketic-13",
        source: "the replica of PocketIC 13.0.0 (canbench 0.7.0): dirty heap pages billed after \
                 the message, new dirty stable pages in the call, reads free",
        heap_changed_page: 1_000,
        heap_changed_page_wasm64: 4_000,
        stable_new_dirty_page: 1_000,
        tracker: None,
    };

    /// dfinity/ic with the deterministic memory tracker, as its source reads at commit
    /// 0441fbd7f97b339d7013b9eadc74f9340f56a541 (`rs/embedders/tests/instrumentation.rs`) and
    /// the pull requests #10789 and #11180: every page a message touches, heap or stable, read
    /// or write, charged when touched. Which replica release carries it to mainnet cannot be
    /// checked offline.
    pub const IC_DMT: Metering = Metering {
        name: "ic-dmt-0441fbd7",
        source: "dfinity/ic with the deterministic memory tracker (pull requests #10789, \
                 #11180; source read at 0441fbd7f97b339d7013b9eadc74f9340f56a541): 5,000 \
                 instructions per 4 KiB page of each 64 KiB Wasm page a message first accesses \
                 and again at its first write, heap or stable, during the message",
        heap_changed_page: 0,
        heap_changed_page_wasm64: 0,
        stable_new_dirty_page: 0,
        tracker: Some(Tracker {
            page_overhead: 5_000,
            os_pages_per_wasm_page: crate::stable::WASM_PAGE / OS_PAGE,
            heap_wasm64_multiplier: 1,
            stable_accessed_limit: ExecutionLimits {
                message: 2 * GIB / OS_PAGE,
                upgrade: 8 * GIB / OS_PAGE,
                query: GIB / OS_PAGE,
            },
        }),
    };

    /// Every profile, the default first.
    pub const ALL: [Metering; 2] = [Metering::POCKET_IC_13, Metering::IC_DMT];

    /// The profile called `name` ([`Self::name`]).
    pub fn by_name(name: &str) -> Option<Metering> {
        Self::ALL.into_iter().find(|m| m.name == name)
    }

    /// The names of every profile, for error messages and help texts.
    pub fn names() -> Vec<&'static str> {
        Self::ALL.iter().map(|m| m.name).collect()
    }

    /// Instructions per changed 4 KiB heap page billed after the message, for a 64-bit heap
    /// (`memory64`) or a 32-bit one.
    pub fn heap_changed_page_cost(&self, memory64: bool) -> u64 {
        if memory64 {
            self.heap_changed_page_wasm64
        } else {
            self.heap_changed_page
        }
    }
}

impl Default for Metering {
    /// [`Metering::POCKET_IC_13`], what the engine metered before it had profiles.
    fn default() -> Self {
        Metering::POCKET_IC_13
    }
}

impl std::str::FromStr for Metering {
    type Err = String;

    /// A profile by its name; the error lists the names.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Metering::by_name(s).ok_or_else(|| {
            format!(
                "unknown metering profile `{s}`; the profiles are: {}",
                Metering::names().join(", ")
            )
        })
    }
}

impl std::fmt::Display for Metering {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name)
    }
}

impl Tracker {
    /// Instructions one tracker event (first access or first write) of a 64 KiB Wasm page
    /// costs: `page_overhead` for each of its OS pages (times the wasm64 multiplier for a
    /// 64-bit heap; stable memory is charged as a 32-bit heap would be).
    pub fn wasm_page_charge(&self, wasm64_heap: bool) -> u64 {
        let per_page = self.page_overhead * self.os_pages_per_wasm_page;
        if wasm64_heap {
            per_page * self.heap_wasm64_multiplier
        } else {
            per_page
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_the_default_is_the_old_profile() {
        for m in Metering::ALL {
            assert_eq!(m.name.parse::<Metering>(), Ok(m));
            assert_eq!(m.to_string(), m.name);
        }
        assert_eq!(Metering::default(), Metering::POCKET_IC_13);
        let err = "pocketic".parse::<Metering>().unwrap_err();
        assert!(err.contains("pocketic-13, ic-dmt-0441fbd7"), "{err}");
    }

    #[test]
    fn a_wasm_page_event_costs_sixteen_os_pages() {
        let t = Metering::IC_DMT.tracker.unwrap();
        assert_eq!(t.wasm_page_charge(false), 80_000);
        assert_eq!(t.wasm_page_charge(true), 80_000);
        assert_eq!(t.stable_accessed_limit.message, 524_288);
    }
}
