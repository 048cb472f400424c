//! The macros a canister is written with, exported at the crate's root. Each compiles on every
//! target: on wasm32 it expands to the canister's methods, elsewhere to nothing (or to a check
//! of its argument's type), so that the crate of a canister is also what its native Rust clients
//! depend on for its declaration, without a `cfg` of the author's.

/// Defines update methods whose caller is checked before their argument is read: the same
/// functions as under `#[ic_cdk::update]` (one or more per invocation), whose reply types
/// have a typed refusal (`Result<_, WriteError>`, `WriteResult`, `SubmitResult`, ...: see
/// [`access::Refusal`](crate::access::Refusal)).
///
/// ```rust,ignore
/// ic_rusqlite_batch::update! {
///     /// Queues a note.
///     fn add_note(text: String) -> Result<Ticket, WriteError> {
///         ic_rusqlite_batch::submit(NoteWrite::add { text })
///     }
/// }
/// ```
///
/// Each method runs through `canister::authorized` with its name: a caller its class (in the
/// [`Setup`](crate::Setup)'s interface) does not admit is answered `Err(NotAuthorized)` before
/// the argument is decoded, for a few thousand instructions whatever its size; an admitted call
/// decodes the argument strictly (`message::strict_arguments`, see [`args`](crate::args): a
/// value of another type than the method takes, an `opt` included, is answered `Invalid`
/// naming the argument, the field and the type sent, and nothing runs), runs the body and
/// replies (`message::reply`: the reply type must have a typed refusal, which the compiler
/// checks). The Candid signature is declared for `ic_cdk::export_candid!` as `#[ic_cdk::update]`
/// would (in a module of the method's name), so the argument and reply types must be named by
/// paths that resolve where `export_candid!` is called (the crate root). No `async` bodies. The
/// canister depends on `ic-cdk` and `candid` itself (the expansion names them). On targets other
/// than wasm32, expands to nothing.
#[macro_export]
macro_rules! update {
    ($($(#[$meta:meta])* fn $name:ident($($arg:ident : $ty:ty),* $(,)?) -> $ret:ty $body:block)*) => {
        $(
            #[cfg(target_arch = "wasm32")]
            $(#[$meta])*
            #[::ic_cdk::update(hidden = true, manual_reply = true)]
            fn $name() {
                fn __method_body($($arg: $ty),*) -> $ret $body
                $crate::canister::authorized(::core::stringify!($name), || {
                    match $crate::message::strict_arguments::<($($ty,)*)>(
                        &[$(::core::stringify!($arg)),*],
                    ) {
                        ::core::result::Result::Ok(($($arg,)*)) => {
                            $crate::message::reply(&__method_body($($arg),*))
                        }
                        ::core::result::Result::Err(e) => $crate::message::reply(
                            &<$ret as $crate::access::Refusal>::refusal($crate::WriteError::Invalid(
                                ::std::string::ToString::to_string(&e),
                            )),
                        ),
                    }
                });
            }
            /// The method's Candid signature, for `ic_cdk::export_candid!`.
            #[cfg(target_arch = "wasm32")]
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

/// Defines query methods guarded as the library's own: the same functions as under
/// `#[ic_cdk::query(guard = ...)]` with `canister::query_guard` as their guard (one or more per
/// invocation). A query runs for everyone; called as an update (replicated, which the canister
/// pays like an update) it runs only for whoever may write, and is rejected for anyone else
/// before its argument is decoded. Read the database with `with_connection` (the crate's root).
///
/// ```rust,ignore
/// ic_rusqlite_batch::query! {
///     /// The number of notes.
///     fn note_count() -> Result<u64, QueryError> {
///         ic_rusqlite_batch::with_connection(|conn| { /* SELECT count(*) ... */ })
///     }
/// }
/// ```
///
/// Each method is defined in a module of its name (its body sees the items of the module where
/// the macro is called, as `use super::*` brings them), so its argument and reply types must
/// be named by paths that resolve at the crate root, where `ic_cdk::export_candid!` reads them.
/// The canister depends on `ic-cdk` itself. On targets other than wasm32, expands to nothing.
#[macro_export]
macro_rules! query {
    ($($(#[$meta:meta])* fn $name:ident($($arg:ident : $ty:ty),* $(,)?) -> $ret:ty $body:block)*) => {
        $(
            #[cfg(target_arch = "wasm32")]
            #[doc(hidden)]
            mod $name {
                #[allow(unused_imports)]
                use super::*;
                fn __batch_query_guard() -> ::core::result::Result<(), ::std::string::String> {
                    $crate::canister::query_guard()
                }
                $(#[$meta])*
                #[::ic_cdk::query(guard = "__batch_query_guard")]
                fn $name($($arg: $ty),*) -> $ret $body
            }
        )*
    };
}

/// Defines a batched canister's lifecycle hooks and its standard methods, all thin calls into
/// the `canister` module with `$setup` (a `static` [`Setup`](crate::Setup)): `init`,
/// `pre_upgrade`, `post_upgrade` and `inspect_message`; the updates `flush` (writers),
/// `add_writers`, `remove_writers` and `set_read_only` (controllers), each through
/// [`update!`](crate::update) (the caller is checked before the argument is read); the queries
/// `ticket_status`, `ticket_statuses` (at most 1,000), `stats`, `settings` and `writers`,
/// guarded as [`query!`](crate::query)'s. Each update answers `Result<_, WriteError>`. Set
/// `Interface::standard_methods` (as `Setup::small_writes` does) so that `inspect_message` and
/// the updates class them. The canister depends on `ic-cdk` and `candid` itself (ic-cdk's
/// macros name them). On targets other than wasm32, expands to a use of `$setup` (whose type is
/// checked).
#[macro_export]
macro_rules! canister_methods {
    ($setup:path) => {
        // ic-cdk's export_candid! reads the signatures' types as text, where `$crate` does not
        // parse: the types are named through imports.
        #[cfg(target_arch = "wasm32")]
        use $crate::batch_types::{
            FlushSummary as __BatchFlushSummary, InitArgs as __BatchInitArgs,
            Settings as __BatchSettings, Stats as __BatchStats, Ticket as __BatchTicket,
            TicketStatus as __BatchTicketStatus, WriteError as __BatchWriteError,
        };
        #[cfg(target_arch = "wasm32")]
        #[::ic_cdk::init]
        fn init(args: Option<__BatchInitArgs>) {
            $crate::canister::init(&$setup, args)
        }
        #[cfg(target_arch = "wasm32")]
        #[::ic_cdk::pre_upgrade]
        fn pre_upgrade() {
            $crate::canister::pre_upgrade()
        }
        #[cfg(target_arch = "wasm32")]
        #[::ic_cdk::post_upgrade]
        fn post_upgrade(args: Option<__BatchInitArgs>) {
            $crate::canister::post_upgrade(&$setup, args)
        }
        #[cfg(target_arch = "wasm32")]
        #[::ic_cdk::inspect_message]
        fn inspect_message() {
            $crate::canister::inspect_message()
        }
        $crate::update! {
            fn flush() -> Result<__BatchFlushSummary, __BatchWriteError> {
                $crate::canister::flush().map(::core::convert::Into::into)
            }
            fn add_writers(writers: Vec<::candid::Principal>) -> Result<(), __BatchWriteError> {
                $crate::canister::add_writers(writers)
            }
            fn remove_writers(writers: Vec<::candid::Principal>) -> Result<(), __BatchWriteError> {
                $crate::canister::remove_writers(&writers)
            }
            fn set_read_only(read_only: bool) -> Result<(), __BatchWriteError> {
                $crate::canister::set_read_only(read_only)
            }
        }
        $crate::query! {
            fn ticket_status(ticket: __BatchTicket) -> __BatchTicketStatus {
                $crate::canister::ticket_status(ticket)
            }
            fn ticket_statuses(first: __BatchTicket, count: u32) -> Vec<__BatchTicketStatus> {
                $crate::canister::ticket_statuses(first, u64::from(count.min(1_000)))
            }
            fn stats() -> __BatchStats {
                $crate::canister::stats()
            }
            fn settings() -> __BatchSettings {
                $crate::canister::settings()
            }
            fn writers() -> Vec<::candid::Principal> {
                $crate::canister::writers()
            }
        }
        /// The setup, used where no canister is built.
        #[cfg(not(target_arch = "wasm32"))]
        #[allow(dead_code)]
        fn __batch_setup() -> &'static $crate::Setup {
            &$setup
        }
    };
}

/// Exports the batch methods of a canister's declared writes (`$writes`, the enum of
/// [`writes!`](crate::writes)): `execute_writes(key, ops)` (Candid: the writes by name with
/// named fields), `execute_writes_packed(blob)` (the generic packed format) and the query
/// `batch_declaration()` (what a client needs to pack ops without code of its own). The
/// updates run through [`update!`](crate::update) (the caller is checked before the argument
/// is read); with `Interface::standard_methods`, `execute_writes` and `execute_writes_packed`
/// are classed `MethodClass::Write` without being listed (else list them, and
/// `batch_declaration` as `MethodClass::Query`). See [`declared`](crate::declared) for what is
/// refused. On targets other than wasm32, expands to a check that `$writes` is a declaration.
#[macro_export]
macro_rules! client_batches {
    ($writes:ident) => {
        #[cfg(target_arch = "wasm32")]
        use $crate::batch_types::{
            BatchKey as __BatchKey,
            declare::{
                Blob as __BatchBlob, DeclarationView as __BatchDeclarationView,
                PackedWritesResult as __BatchPackedWritesResult,
                WritesResult as __BatchWritesResult,
            },
        };
        $crate::update! {
            /// Runs a batch of writes exactly once under the caller's key, in one transaction.
            fn execute_writes(key: __BatchKey, ops: Vec<$writes>) -> __BatchWritesResult {
                $crate::declared::execute_writes(key, ops).into()
            }
            /// The same, packed (`ic-rusqlite-batch-types`' generic format).
            fn execute_writes_packed(request: __BatchBlob) -> __BatchPackedWritesResult {
                $crate::declared::execute_writes_packed::<$writes>(&request)
                    .map(__BatchBlob::from)
                    .into()
            }
        }
        $crate::query! {
            /// The canister's declared writes and their digest.
            fn batch_declaration() -> __BatchDeclarationView {
                <$writes as $crate::batch_types::declare::Writes>::declaration().view()
            }
        }
        $crate::__declared!($writes);
    };
}

/// Exports one declared write per call (`$writes`, the enum of [`writes!`](crate::writes)),
/// where the author wants them beside the client batches: `execute_write(op)` runs it now in
/// its own transaction and answers its outcome (`WriteResult`), `submit_write(op)` queues it
/// and answers a ticket (`SubmitResult`); each checks its parameters against the declaration
/// first (`Invalid`, naming the write and the parameter; nothing queued or run) and refuses a
/// write for controllers only to anyone else (`NotAuthorized`). What `icp canister call`
/// users see is the write's name and its named fields: `(variant { add = record { ... } })`.
/// Both run through [`update!`](crate::update); with `Interface::standard_methods` they are
/// classed `MethodClass::SmallWrite` without being listed. Each is one message per write: the
/// path that saves instructions (the queue), not messages (see the crate's README). On targets
/// other than wasm32, expands to a check that `$writes` is a declaration.
#[macro_export]
macro_rules! single_writes {
    ($writes:ident) => {
        #[cfg(target_arch = "wasm32")]
        use $crate::batch_types::{
            SubmitResult as __BatchSubmitResult, WriteResult as __BatchWriteResult,
        };
        $crate::update! {
            /// Runs one write now, in its own transaction.
            fn execute_write(op: $writes) -> __BatchWriteResult {
                $crate::declared::execute(op).into()
            }
            /// Queues one write for the next flush; its ticket tells its outcome.
            fn submit_write(op: $writes) -> __BatchSubmitResult {
                $crate::submit(op).into()
            }
        }
        $crate::__declared!($writes);
    };
}

/// Where no canister is built: checks that `$writes` is a declaration of writes.
#[doc(hidden)]
#[macro_export]
macro_rules! __declared {
    ($writes:ident) => {
        #[cfg(not(target_arch = "wasm32"))]
        const _: fn() = || {
            fn declared<W: $crate::batch_types::declare::Writes>() {}
            declared::<$writes>();
        };
    };
}
