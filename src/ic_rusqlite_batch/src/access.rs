//! Who may call what: controllers, the writer principals they register, and everyone in
//! [`WriteAccess::Open`]. Two decisions read the interface's method classes: the
//! `canister_inspect_message` policy ([`Interface::accepts`]), which refuses disallowed and
//! oversized ingress messages, and queries called as updates, before the canister pays for
//! them; and the methods' own ([`admits`]), taken before a method reads its argument, for the
//! calls inspection never sees (those of other canisters).

use std::collections::BTreeSet;

use candid::Principal;

use batch_types::declare::{PackedWritesResult, WritesResult};

use batch_types::{
    AdminResult, BatchResult, FlushResult, MethodClass, SubmitResult, WriteAccess, WriteError,
    WriteResult,
};

/// Most writer principals a controller may register (each costs a little heap and a little
/// upgrade time).
pub const MAX_WRITERS: usize = 1_000;

/// The methods of a canister's interface, by class: what [`Interface::accepts`] lets through
/// ingress. Queries, methods not listed and the internal `__*` methods (which only the
/// canister itself calls) are refused ingress.
#[derive(Clone, Copy, Debug)]
pub struct Interface {
    /// Every method of the interface with its [`MethodClass`] (one declaration, which the
    /// canister's tests can check against its `.did`).
    pub methods: &'static [(&'static str, MethodClass)],
    /// The largest argument, in bytes, of a [`MethodClass::SmallWrite`] call.
    pub max_small_arg_bytes: usize,
    /// The canister exports the methods of `canister_methods!`:
    /// `flush` is a write method with a small argument, [`STANDARD_CONTROLLER_METHODS`] are
    /// controller methods; and those of `client_batches!` ([`DECLARED_BATCH_METHODS`], write
    /// methods) and `single_writes!` ([`DECLARED_SINGLE_METHODS`], write methods with a small
    /// argument) are classed too, whichever of them it exports, so that a canister lists only
    /// its own methods.
    pub standard_methods: bool,
}

/// The controller methods `canister_methods!` exports.
pub const STANDARD_CONTROLLER_METHODS: &[&str] =
    &["add_writers", "remove_writers", "set_read_only"];
/// The write method `canister_methods!` exports.
pub const STANDARD_WRITE_METHOD: &str = "flush";
/// The write methods `client_batches!` exports (a batch of up to 10,000 ops).
pub const DECLARED_BATCH_METHODS: &[&str] = &["execute_writes", "execute_writes_packed"];
/// The write methods `single_writes!` exports (one op: a small argument).
pub const DECLARED_SINGLE_METHODS: &[&str] = &["execute_write", "submit_write"];

impl Interface {
    /// The class of `method`: as [`Self::methods`] lists it, else the standard methods'
    /// (when [`Self::standard_methods`]); `None` for any other name.
    pub fn class_of(&self, method: &str) -> Option<MethodClass> {
        self.methods
            .iter()
            .find(|(name, _)| *name == method)
            .map(|(_, class)| *class)
            .or_else(|| {
                let standard = self.standard_methods;
                if standard && STANDARD_CONTROLLER_METHODS.contains(&method) {
                    Some(MethodClass::Controller)
                } else if standard
                    && (method == STANDARD_WRITE_METHOD
                        || DECLARED_SINGLE_METHODS.contains(&method))
                {
                    Some(MethodClass::SmallWrite)
                } else if standard && DECLARED_BATCH_METHODS.contains(&method) {
                    Some(MethodClass::Write)
                } else {
                    None
                }
            })
    }

    /// What `canister_inspect_message` decides for an ingress call of `method` with an
    /// argument of `arg_bytes` by a caller who `is_controller` and `may_write` (each asked only
    /// when needed: a System API call costs about 500 instructions): accept only what the
    /// method itself would accept. The methods check again: calls from other canisters do not
    /// pass through inspection.
    pub fn accepts(
        &self,
        method: &str,
        arg_bytes: usize,
        is_controller: impl FnOnce() -> bool,
        may_write: impl FnOnce() -> bool,
    ) -> bool {
        match self.class_of(method) {
            Some(MethodClass::Controller) => is_controller(),
            Some(MethodClass::SmallWrite) if arg_bytes > self.max_small_arg_bytes => false,
            Some(MethodClass::SmallWrite | MethodClass::Write) => may_write(),
            Some(MethodClass::Query) | None => false,
        }
    }
}

/// What a method of `class` decides for its caller before it reads its argument (the calls of
/// other canisters skip `canister_inspect_message`, so this is their only check): controller
/// methods run for controllers; write methods for whoever may write (controllers, registered
/// writers, everyone in [`WriteAccess::Open`]); queries for everyone, except in replicated
/// execution (called as an update, and paid like one), where they run for whoever may write;
/// a method of no class for no one. `replicated`, `is_controller` and `may_write` are each
/// asked only when needed (a System API call costs 500 to 1,000 instructions).
pub fn admits(
    class: Option<MethodClass>,
    replicated: impl FnOnce() -> bool,
    is_controller: impl FnOnce() -> bool,
    may_write: impl FnOnce() -> bool,
) -> bool {
    match class {
        Some(MethodClass::Controller) => is_controller(),
        Some(MethodClass::Write | MethodClass::SmallWrite) => may_write(),
        Some(MethodClass::Query) => !replicated() || may_write(),
        None => false,
    }
}

/// The reject message of a query method called as an update (replicated execution) by a
/// caller who may not write (queries have no typed refusal).
pub const REPLICATED_QUERY_REFUSED: &str = "NotAuthorized: a query method called as an update \
    (replicated, paid like an update) runs only for controllers and writers; call it as a query";

/// Why the anonymous principal's keyed batches are refused (`Invalid`).
pub const ANONYMOUS_KEYED_REFUSED: &str = "a keyed batch needs a caller of its own: every call \
    without an identity comes from the anonymous principal, which has no key scope to \
    deduplicate in; sign the call, or send the batch without a key";

/// The reply to a call refused [`WriteError::NotAuthorized`], in Candid:
/// `variant { Err = variant { NotAuthorized } }`. It is a subtype of every reply type whose `Err`
/// case is a [`WriteError`] ([`Refusal`]), which decodes it as its own `Err(NotAuthorized)`.
/// Precomputed: encoding the refusal with `candid` builds `WriteError`'s type table, about
/// 200,000 instructions, where a refused caller must cost a few thousand.
pub const NOT_AUTHORIZED_REPLY: &[u8] = &[
    0x44, 0x49, 0x44, 0x4c, 0x02, 0x6b, 0x01, 0xc5, 0xfe, 0xd2, 0x01, 0x01, 0x6b, 0x01, 0xee, 0x82,
    0xc1, 0xea, 0x07, 0x7f, 0x01, 0x00, 0x00, 0x00,
];

/// A reply type with a typed refusal: its `Err` case is a [`WriteError`], so it decodes
/// [`NOT_AUTHORIZED_REPLY`] as `Self::refusal(WriteError::NotAuthorized)`. The methods of
/// `update!` must reply with such a type.
pub trait Refusal {
    /// The reply that refuses the call with `error`.
    fn refusal(error: WriteError) -> Self;
}

impl<T> Refusal for Result<T, WriteError> {
    fn refusal(error: WriteError) -> Self {
        Err(error)
    }
}

macro_rules! refused_as_err {
    ($($result:ty),*) => {
        $(
            impl Refusal for $result {
                fn refusal(error: WriteError) -> Self {
                    Self::Err(error)
                }
            }
        )*
    };
}

/// The declared batch methods' results: their `Err` is a
/// [`BatchRefusal`](batch_types::declare::BatchRefusal), which has a
/// `NotAuthorized` case of its own (and carries any other [`WriteError`] as `Refused`).
impl Refusal for WritesResult {
    fn refusal(error: WriteError) -> Self {
        Self::Err(error.into())
    }
}

impl Refusal for PackedWritesResult {
    fn refusal(error: WriteError) -> Self {
        Self::Err(error.into())
    }
}

refused_as_err!(
    WriteResult,
    SubmitResult,
    FlushResult,
    AdminResult,
    BatchResult
);

/// The registered writers.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Writers(BTreeSet<Principal>);

impl Writers {
    /// The writers of a saved list.
    pub fn from_list(list: Vec<Principal>) -> Self {
        Writers(list.into_iter().collect())
    }

    /// The writers, sorted.
    pub fn list(&self) -> Vec<Principal> {
        self.0.iter().copied().collect()
    }

    /// Whether `p` is a registered writer (O(log n)).
    pub fn contains(&self, p: &Principal) -> bool {
        self.0.contains(p)
    }

    /// Adds writers, refusing (and adding none) if the list would exceed [`MAX_WRITERS`].
    pub fn add(&mut self, new: Vec<Principal>) -> Result<(), WriteError> {
        let added = new
            .iter()
            .filter(|p| !self.0.contains(p))
            .collect::<BTreeSet<_>>();
        if self.0.len() + added.len() > MAX_WRITERS {
            return Err(WriteError::Invalid(format!(
                "{} writers would exceed the limit of {MAX_WRITERS}",
                self.0.len() + added.len()
            )));
        }
        self.0.extend(new);
        Ok(())
    }

    /// Removes writers (absent ones are ignored).
    pub fn remove(&mut self, gone: &[Principal]) {
        for p in gone {
            self.0.remove(p);
        }
    }

    /// Whether a caller who `is_controller` and is `caller` may write under `access`.
    pub fn may_write(
        &self,
        caller: &Principal,
        access: WriteAccess,
        is_controller: impl FnOnce() -> bool,
    ) -> bool {
        // The set first: a writer's check then makes no System API call.
        access == WriteAccess::Open || self.contains(caller) || is_controller()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const API: Interface = Interface {
        methods: &[
            ("put", MethodClass::SmallWrite),
            ("put_many", MethodClass::Write),
            ("flush", MethodClass::Write),
            ("set_read_only", MethodClass::Controller),
            ("get", MethodClass::Query),
        ],
        max_small_arg_bytes: 100,
        standard_methods: false,
    };

    #[test]
    fn inspection_accepts_only_what_the_method_would() {
        let never = || -> bool { panic!("not asked") };
        // Controller methods: controllers only, whatever the write access.
        assert!(API.accepts("set_read_only", 5, || true, never));
        assert!(!API.accepts("set_read_only", 5, || false, never));
        // Write methods: writers only; the small ones up to their size.
        assert!(API.accepts("put", 100, never, || true));
        assert!(!API.accepts("put", 100, never, || false));
        assert!(!API.accepts("put", 101, never, never));
        assert!(API.accepts("put_many", 100_000, never, || true));
        // Queries called as updates, internal methods, unknown names: never.
        for method in ["get", "__careful_flush", "", "PUT", "add_writers"] {
            assert!(!API.accepts(method, 0, never, never), "{method}");
        }
    }

    #[test]
    fn the_standard_methods_are_classed_only_when_exported() {
        let never = || -> bool { panic!("not asked") };
        let api = Interface {
            methods: &[
                ("put_many", MethodClass::Write),
                ("get", MethodClass::Query),
            ],
            standard_methods: true,
            ..API
        };
        for method in STANDARD_CONTROLLER_METHODS {
            assert!(api.accepts(method, 5, || true, never));
            assert!(!api.accepts(method, 5, || false, never));
            // Without the standard methods, only those the canister lists itself are classed.
            let listed = API.methods.contains(&(method, MethodClass::Controller));
            assert_eq!(API.accepts(method, 5, || true, never), listed, "{method}");
        }
        assert!(api.accepts("flush", 100, never, || true));
        assert!(!api.accepts("flush", 100, never, || false));
        assert!(!api.accepts("flush", 101, never, never));
        // The declared writes' methods: batches of any size, single writes small; writers only.
        for method in DECLARED_BATCH_METHODS {
            assert!(api.accepts(method, 1_000_000, never, || true), "{method}");
            assert!(!api.accepts(method, 10, never, || false), "{method}");
            assert!(!API.accepts(method, 10, never, never), "{method}");
        }
        for method in DECLARED_SINGLE_METHODS {
            assert!(api.accepts(method, 100, never, || true), "{method}");
            assert!(!api.accepts(method, 100, never, || false), "{method}");
            assert!(!api.accepts(method, 101, never, never), "{method}");
            assert!(!API.accepts(method, 10, never, never), "{method}");
        }
        assert!(!api.accepts("put", 1, never, never));
    }

    #[test]
    fn methods_admit_by_their_class_before_reading_their_argument() {
        let never = || -> bool { panic!("not asked") };
        let (yes, no) = (|| true, || false);
        // Controller methods: controllers only, replicated or not.
        let controller = API.class_of("set_read_only");
        assert_eq!(controller, Some(MethodClass::Controller));
        assert!(admits(controller, never, yes, never));
        assert!(!admits(controller, never, no, never));
        // Write methods, small or not: whoever may write (the size is inspection's business).
        for method in ["put", "put_many", "flush"] {
            let class = API.class_of(method);
            assert!(admits(class, never, never, yes), "{method}");
            assert!(!admits(class, never, never, no), "{method}");
        }
        // Queries: anyone as queries; as updates (replicated), whoever may write.
        let query = API.class_of("get");
        assert_eq!(query, Some(MethodClass::Query));
        assert!(admits(query, no, never, never));
        assert!(admits(query, yes, never, yes));
        assert!(!admits(query, yes, never, no));
        // Names of no class (internal, unknown, standard but not exported): no one.
        for method in ["__careful_flush", "", "PUT", "add_writers"] {
            assert_eq!(API.class_of(method), None, "{method}");
            assert!(
                !admits(API.class_of(method), never, never, never),
                "{method}"
            );
        }
    }

    /// The precomputed refusal is what `candid` encodes for it, and every reply type with a
    /// typed refusal decodes it as its own `Err(NotAuthorized)`.
    #[test]
    fn the_precomputed_refusal_is_every_write_methods_own_typed_error() {
        #[derive(candid::CandidType)]
        enum Reply {
            Err(Error),
        }
        #[derive(candid::CandidType)]
        enum Error {
            NotAuthorized,
        }
        let encoded = candid::encode_one(Reply::Err(Error::NotAuthorized)).unwrap();
        assert_eq!(encoded, NOT_AUTHORIZED_REPLY);

        fn decodes_as_refusal<R>()
        where
            R: Refusal + candid::CandidType + for<'de> candid::Deserialize<'de> + PartialEq,
            R: std::fmt::Debug,
        {
            let decoded: R = candid::decode_one(NOT_AUTHORIZED_REPLY).unwrap();
            assert_eq!(decoded, R::refusal(WriteError::NotAuthorized));
        }
        decodes_as_refusal::<Result<u64, WriteError>>();
        decodes_as_refusal::<Result<(), WriteError>>();
        decodes_as_refusal::<Result<batch_types::FlushSummary, WriteError>>();
        decodes_as_refusal::<WriteResult>();
        decodes_as_refusal::<SubmitResult>();
        decodes_as_refusal::<FlushResult>();
        decodes_as_refusal::<AdminResult>();
        decodes_as_refusal::<BatchResult>();
        assert_eq!(
            AdminResult::refusal(WriteError::NotAuthorized),
            AdminResult::Err(WriteError::NotAuthorized)
        );
    }

    #[test]
    fn the_writer_list_is_bounded_and_all_or_nothing() {
        let p = |i: u32| Principal::from_slice(&i.to_be_bytes());
        let mut w = Writers::default();
        w.add((0..MAX_WRITERS as u32).map(p).collect()).unwrap();
        // Re-adding present writers is not growth.
        w.add(vec![p(0), p(1)]).unwrap();
        let refused = w.add(vec![p(0), p(MAX_WRITERS as u32)]).unwrap_err();
        assert_eq!(
            refused,
            WriteError::Invalid(format!(
                "{} writers would exceed the limit of {MAX_WRITERS}",
                MAX_WRITERS + 1
            ))
        );
        assert!(!w.contains(&p(MAX_WRITERS as u32)));
        w.remove(&[p(0), p(123_456)]);
        assert_eq!(w.list().len(), MAX_WRITERS - 1);
        assert!(!w.may_write(&p(0), WriteAccess::Restricted, || false));
        assert!(w.may_write(&p(0), WriteAccess::Restricted, || true));
        assert!(w.may_write(&p(0), WriteAccess::Open, || false));
        assert!(w.may_write(&p(1), WriteAccess::Restricted, || false));
    }
}
