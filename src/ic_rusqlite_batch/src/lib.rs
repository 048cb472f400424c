#![doc = include_str!("../README.md")]
#![warn(missing_docs)]

pub mod access;
pub mod persist;
pub mod settings;
pub mod types;

#[cfg(target_arch = "wasm32")]
mod canister;
#[cfg(target_arch = "wasm32")]
pub mod keyed;
#[cfg(target_arch = "wasm32")]
pub mod timer;

#[cfg(target_arch = "wasm32")]
pub use canister::*;

pub use access::Interface;
pub use batch_core;
pub use batch_core::{OpOutcome, OpStatus, Owner, SqlValue, Statement, WriteOp};
#[cfg(target_arch = "wasm32")]
pub use keyed::{KeyedBatch, KeyedOutcomes};
pub use settings::Floors;
pub use types::{
    AdminResult, BatchKey, BatchResult, FlushResult, FlushSummary, InitArgs, MethodClass, OpError,
    Outcome, QueryError, Settings, SqlParam, SqlStatement, Stats, SubmitResult, Ticket,
    TicketStatus, WriteAccess, WriteError, WriteResult,
};

/// Defines a batched canister's lifecycle hooks and its standard methods, all thin calls into
/// this crate with `$setup` (a `static` [`Setup`]): `init`, `pre_upgrade`, `post_upgrade` and
/// `inspect_message`; the updates `flush` (writers), `add_writers`, `remove_writers` and
/// `set_read_only` (controllers); the queries `ticket_status`, `ticket_statuses` (at most 1,000),
/// `stats`, `settings` and `writers`. Each update answers `Result<_, WriteError>`. Set
/// [`Interface::standard_methods`] so that `inspect_message` classes them. The canister
/// depends on `ic-cdk` and `candid` itself (ic-cdk's macros name them).
#[cfg(target_arch = "wasm32")]
#[macro_export]
macro_rules! canister_methods {
    ($setup:path) => {
        // ic-cdk's export_candid! reads the signatures' types as text, where `$crate` does not
        // parse: the types are named through imports.
        use $crate::{
            FlushSummary as __BatchFlushSummary, InitArgs as __BatchInitArgs,
            Settings as __BatchSettings, Stats as __BatchStats, Ticket as __BatchTicket,
            TicketStatus as __BatchTicketStatus, WriteError as __BatchWriteError,
        };
        #[::ic_cdk::init]
        fn init(args: Option<__BatchInitArgs>) {
            $crate::init(&$setup, args)
        }
        #[::ic_cdk::pre_upgrade]
        fn pre_upgrade() {
            $crate::pre_upgrade()
        }
        #[::ic_cdk::post_upgrade]
        fn post_upgrade(args: Option<__BatchInitArgs>) {
            $crate::post_upgrade(&$setup, args)
        }
        #[::ic_cdk::inspect_message]
        fn inspect_message() {
            $crate::inspect_message()
        }
        #[::ic_cdk::update]
        fn flush() -> Result<__BatchFlushSummary, __BatchWriteError> {
            $crate::flush().map($crate::types::summary)
        }
        #[::ic_cdk::update]
        fn add_writers(writers: Vec<::candid::Principal>) -> Result<(), __BatchWriteError> {
            $crate::add_writers(writers)
        }
        #[::ic_cdk::update]
        fn remove_writers(writers: Vec<::candid::Principal>) -> Result<(), __BatchWriteError> {
            $crate::remove_writers(&writers)
        }
        #[::ic_cdk::update]
        fn set_read_only(read_only: bool) -> Result<(), __BatchWriteError> {
            $crate::set_read_only(read_only)
        }
        #[::ic_cdk::query]
        fn ticket_status(ticket: __BatchTicket) -> __BatchTicketStatus {
            $crate::types::status($crate::ticket_status(ticket))
        }
        #[::ic_cdk::query]
        fn ticket_statuses(first: __BatchTicket, count: u32) -> Vec<__BatchTicketStatus> {
            let count = u64::from(count.min(1_000));
            $crate::ticket_statuses(first, count)
                .into_iter()
                .map($crate::types::status)
                .collect()
        }
        #[::ic_cdk::query]
        fn stats() -> __BatchStats {
            $crate::stats()
        }
        #[::ic_cdk::query]
        fn settings() -> __BatchSettings {
            $crate::settings()
        }
        #[::ic_cdk::query]
        fn writers() -> Vec<::candid::Principal> {
            $crate::writers()
        }
    };
}
