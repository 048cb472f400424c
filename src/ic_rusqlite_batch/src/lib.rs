#![doc = include_str!("../README.md")]
#![warn(missing_docs)]

pub mod access;
pub mod args;
pub mod declared;
pub mod encode;
pub mod persist;
pub mod settings;
pub mod types;

#[cfg(target_arch = "wasm32")]
mod canister;
#[cfg(target_arch = "wasm32")]
pub mod keyed;
#[cfg(target_arch = "wasm32")]
mod message;
#[cfg(target_arch = "wasm32")]
mod state;
#[cfg(target_arch = "wasm32")]
pub mod timer;

#[cfg(target_arch = "wasm32")]
pub use canister::*;

pub use access::{Interface, Refusal};
pub use batch_core;
pub use batch_core::{OpOutcome, OpStatus, Owner, SqlValue, Statement, WriteOp};
pub use batch_types;
pub use batch_types::declare::{
    BatchRefusal, Blob, DeclarationView, PackedWritesResult, Writes, WritesReply, WritesResult,
};
pub use batch_types::writes;
#[cfg(target_arch = "wasm32")]
pub use keyed::{KeyedBatch, KeyedOutcomes};
pub use settings::Floors;
pub use types::{
    AdminResult, BatchKey, BatchResult, FlushResult, FlushSummary, InitArgs, MethodClass, OpError,
    Outcome, QueryError, Settings, SqlParam, SqlStatement, Stats, SubmitResult, Ticket,
    TicketStatus, WriteAccess, WriteError, WriteResult,
};

/// Defines update methods whose caller is checked before their argument is read: the same
/// functions as under `#[ic_cdk::update]` (one or more per invocation), whose reply types
/// have a typed refusal ([`Refusal`]: `Result<_, WriteError>`, `WriteResult`, `SubmitResult`,
/// ...).
///
/// ```rust,ignore
/// ic_rusqlite_batch::update! {
///     /// Queues a note.
///     fn add_note(text: String) -> Result<Ticket, WriteError> {
///         ic_rusqlite_batch::submit(note_op(text))
///     }
/// }
/// ```
///
/// Each method runs through [`authorized`] with its name: a caller its class (in the
/// [`Setup`]'s [`Interface`]) does not admit is answered `Err(NotAuthorized)` before the
/// argument is decoded, for a few thousand instructions whatever its size; an admitted call
/// decodes the argument strictly ([`strict_arguments`]: a value of another type than the
/// method takes, an `opt` included, is answered `Invalid` naming the argument, the field and
/// the type sent, and nothing runs), runs the body and replies ([`reply`]: the reply type
/// must have a typed refusal, [`Refusal`], which the compiler checks). The Candid
/// signature is declared for `ic_cdk::export_candid!` as `#[ic_cdk::update]` would (in a module
/// of the method's name), so the argument and reply types must be named by paths that resolve
/// where `export_candid!` is called (the crate root). No `async` bodies. The canister depends
/// on `ic-cdk` and `candid` itself (the expansion names them).
#[cfg(target_arch = "wasm32")]
#[macro_export]
macro_rules! update {
    ($($(#[$meta:meta])* fn $name:ident($($arg:ident : $ty:ty),* $(,)?) -> $ret:ty $body:block)*) => {
        $(
            $(#[$meta])*
            #[::ic_cdk::update(hidden = true, manual_reply = true)]
            fn $name() {
                fn __method_body($($arg: $ty),*) -> $ret $body
                $crate::authorized(::core::stringify!($name), || {
                    match $crate::strict_arguments::<($($ty,)*)>(&[$(::core::stringify!($arg)),*]) {
                        ::core::result::Result::Ok(($($arg,)*)) => {
                            $crate::reply(&__method_body($($arg),*))
                        }
                        ::core::result::Result::Err(e) => $crate::reply(
                            &<$ret as $crate::Refusal>::refusal($crate::WriteError::Invalid(
                                ::std::string::ToString::to_string(&e),
                            )),
                        ),
                    }
                });
            }
            /// The method's Candid signature, for `ic_cdk::export_candid!`.
            mod $name {
                #[allow(unused_imports)]
                use super::*;
                #[::candid::candid_method(update)]
                #[allow(dead_code, unused_variables, clippy::too_many_arguments)]
                fn $name($($arg: $ty),*) -> $ret {
                    ::core::unreachable!("interface only")
                }
            }
        )*
    };
}

/// Defines a batched canister's lifecycle hooks and its standard methods, all thin calls into
/// this crate with `$setup` (a `static` [`Setup`]): `init`, `pre_upgrade`, `post_upgrade` and
/// `inspect_message`; the updates `flush` (writers), `add_writers`, `remove_writers` and
/// `set_read_only` (controllers), each through [`update!`] (the caller is checked before the
/// argument is read); the queries `ticket_status`, `ticket_statuses` (at most 1,000), `stats`,
/// `settings` and `writers`, guarded by [`query_guard`]. Each update answers
/// `Result<_, WriteError>`. Set [`Interface::standard_methods`] so that `inspect_message` and
/// the updates class them. The canister depends on `ic-cdk` and `candid` itself (ic-cdk's
/// macros name them).
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
        $crate::update! {
            fn flush() -> Result<__BatchFlushSummary, __BatchWriteError> {
                $crate::flush().map($crate::types::summary)
            }
            fn add_writers(writers: Vec<::candid::Principal>) -> Result<(), __BatchWriteError> {
                $crate::add_writers(writers)
            }
            fn remove_writers(writers: Vec<::candid::Principal>) -> Result<(), __BatchWriteError> {
                $crate::remove_writers(&writers)
            }
            fn set_read_only(read_only: bool) -> Result<(), __BatchWriteError> {
                $crate::set_read_only(read_only)
            }
        }
        fn __batch_query_guard() -> Result<(), String> {
            $crate::query_guard()
        }
        #[::ic_cdk::query(guard = "__batch_query_guard")]
        fn ticket_status(ticket: __BatchTicket) -> __BatchTicketStatus {
            $crate::types::status($crate::ticket_status(ticket))
        }
        #[::ic_cdk::query(guard = "__batch_query_guard")]
        fn ticket_statuses(first: __BatchTicket, count: u32) -> Vec<__BatchTicketStatus> {
            let count = u64::from(count.min(1_000));
            $crate::ticket_statuses(first, count)
        }
        #[::ic_cdk::query(guard = "__batch_query_guard")]
        fn stats() -> __BatchStats {
            $crate::stats()
        }
        #[::ic_cdk::query(guard = "__batch_query_guard")]
        fn settings() -> __BatchSettings {
            $crate::settings()
        }
        #[::ic_cdk::query(guard = "__batch_query_guard")]
        fn writers() -> Vec<::candid::Principal> {
            $crate::writers()
        }
    };
}
