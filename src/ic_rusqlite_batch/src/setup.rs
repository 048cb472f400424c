//! The one declaration a canister makes ([`Setup`], a `static`): its database (memory, pragmas,
//! schema, statement cache), the floors of its settings and the classes of its methods. Plain
//! data, on every target: a canister's crate that its native Rust clients depend on compiles it
//! as it is.

use batch_types::MethodClass;

use crate::access::Interface;
use crate::settings::Floors;

/// What a canister declares once, as a `static`, and hands to `canister_methods!` (or to
/// `canister::init` and `canister::post_upgrade`).
#[derive(Debug)]
pub struct Setup {
    /// The virtual memory (of ic-rusqlite's `MemoryManager`) where `pre_upgrade` saves the
    /// queue: any id from 0 to 100 or 121 to 254 that the canister uses for nothing else
    /// (ic-rusqlite owns 101–120). `init` traps on another.
    pub memory_id: u8,
    /// `PRAGMA`s of the connection (ic-rusqlite applies them when it opens it). They replace
    /// ic-rusqlite's own defaults: a pragma not named keeps SQLite's default (its page cache of
    /// 2,000 KiB, where ic-rusqlite's `ConnectionConfig` sets 500,000 pages).
    pub pragmas: &'static [(&'static str, &'static str)],
    /// SQL run at every install and upgrade, before anything else (`CREATE TABLE IF NOT EXISTS`
    /// ...): it must be idempotent.
    pub schema: &'static str,
    /// Prepared statements the connection keeps: room for every statement the canister repeats
    /// (its writes, batch_core's transaction control, the coalescer's chunks: up to 8 sizes per
    /// INSERT shape). Too small a cache re-prepares statements on every flush.
    pub statement_cache_capacity: usize,
    /// The smallest flush budget and queue bytes the canister accepts.
    pub floors: Floors,
    /// The canister's methods by class: `inspect_message` and every method's access check
    /// (`update!`, `query!`) read it.
    pub interface: Interface,
}

impl Setup {
    /// The setup of a canister whose writes are small (one statement on a row or a few, with
    /// parameters of at most a few KiB) and which exports the standard methods
    /// (`canister_methods!`): queue memory 1, `journal_mode` PERSIST and `locking_mode`
    /// EXCLUSIVE (ic-rusqlite's recommendation) and SQLite's default page cache (under the
    /// replica's deterministic memory tracker, a cache of hundreds of thousands of pages costs
    /// a batch more than it saves: every Wasm page a message touches is charged, and a `COMMIT`
    /// after a page split walks the cache's whole hash table, each cached page's header with
    /// it), 32 cached statements,
    /// [`Floors::SMALL_WRITES`], single-op arguments of at most 1 KiB, and `methods`: the
    /// canister's own methods (those of [`client_batches!`](crate::client_batches) and
    /// [`single_writes!`](crate::single_writes) are classed without being listed, as the
    /// standard ones: see [`Interface::standard_methods`]).
    pub const fn small_writes(
        schema: &'static str,
        methods: &'static [(&'static str, MethodClass)],
    ) -> Setup {
        Setup {
            memory_id: 1,
            pragmas: &[("journal_mode", "PERSIST"), ("locking_mode", "EXCLUSIVE")],
            schema,
            statement_cache_capacity: 32,
            floors: Floors::SMALL_WRITES,
            interface: Interface {
                methods,
                max_small_arg_bytes: 1_024,
                standard_methods: true,
            },
        }
    }
}
