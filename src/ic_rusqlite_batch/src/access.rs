//! Who may call what: controllers, the writer principals they register, and everyone in
//! [`WriteAccess::Open`]; and the `canister_inspect_message` policy ([`Interface::accepts`]),
//! which refuses disallowed and oversized ingress messages, and queries called as updates,
//! before the canister pays for them.

use std::collections::BTreeSet;

use candid::Principal;

use crate::types::{MethodClass, WriteAccess, WriteError};

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
    /// controller methods.
    pub standard_methods: bool,
}

/// The controller methods `canister_methods!` exports.
pub const STANDARD_CONTROLLER_METHODS: &[&str] =
    &["add_writers", "remove_writers", "set_read_only"];
/// The write method `canister_methods!` exports.
pub const STANDARD_WRITE_METHOD: &str = "flush";

impl Interface {
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
        let class = self
            .methods
            .iter()
            .find(|(name, _)| *name == method)
            .map(|(_, class)| *class)
            .or_else(|| {
                let standard = self.standard_methods;
                if standard && STANDARD_CONTROLLER_METHODS.contains(&method) {
                    Some(MethodClass::Controller)
                } else if standard && method == STANDARD_WRITE_METHOD {
                    Some(MethodClass::SmallWrite)
                } else {
                    None
                }
            });
        match class {
            Some(MethodClass::Controller) => is_controller(),
            Some(MethodClass::SmallWrite) if arg_bytes > self.max_small_arg_bytes => false,
            Some(MethodClass::SmallWrite | MethodClass::Write) => may_write(),
            Some(MethodClass::Query) | None => false,
        }
    }
}

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
        access == WriteAccess::Open || is_controller() || self.contains(caller)
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
        assert!(!api.accepts("put", 1, never, never));
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
