//! Who may call what: controllers, the writer principals they register, and everyone in
//! [`WriteAccess::Open`]; and `canister_inspect_message`, which refuses disallowed and oversized
//! ingress messages, and queries called as updates, before the canister pays for them.

use std::cell::RefCell;
use std::collections::BTreeSet;

use bench_api::{
    CONTROLLER_METHODS, MAX_SINGLE_OP_ARG_BYTES, MAX_WRITERS, WRITE_METHODS, WriteAccess,
    WriteError,
};
use candid::Principal;

thread_local! {
    /// Principals that may write besides the controllers.
    static WRITERS: RefCell<BTreeSet<Principal>> = const { RefCell::new(BTreeSet::new()) };
}

/// The registered writers, sorted.
pub fn writers() -> Vec<Principal> {
    WRITERS.with_borrow(|w| w.iter().copied().collect())
}

/// Replaces the registered writers (after an upgrade).
pub fn set_writers(writers: Vec<Principal>) {
    WRITERS.with_borrow_mut(|w| *w = writers.into_iter().collect());
}

/// Adds writers, refusing (and adding none) if the list would exceed [`MAX_WRITERS`].
pub fn add_writers(new: Vec<Principal>) -> Result<(), WriteError> {
    WRITERS.with_borrow_mut(|w| {
        let added = new
            .iter()
            .filter(|p| !w.contains(p))
            .collect::<BTreeSet<_>>();
        if w.len() + added.len() > MAX_WRITERS {
            return Err(WriteError::Invalid(format!(
                "{} writers would exceed the limit of {MAX_WRITERS}",
                w.len() + added.len()
            )));
        }
        w.extend(new);
        Ok(())
    })
}

/// Removes writers (absent ones are ignored).
pub fn remove_writers(gone: &[Principal]) {
    WRITERS.with_borrow_mut(|w| {
        for p in gone {
            w.remove(p);
        }
    });
}

fn is_controller(caller: &Principal) -> bool {
    ic_cdk::api::is_controller(caller)
}

/// Whether `caller` may call the write methods.
fn may_write(caller: &Principal, access: WriteAccess) -> bool {
    access == WriteAccess::Open
        || is_controller(caller)
        || WRITERS.with_borrow(|w| w.contains(caller))
}

/// The caller may write, or [`WriteError::NotAuthorized`].
pub fn require_writer(access: WriteAccess) -> Result<(), WriteError> {
    require_writer_as(&ic_cdk::api::msg_caller(), access)
}

/// `caller` (the message's caller, already read) may write, or [`WriteError::NotAuthorized`].
pub fn require_writer_as(caller: &Principal, access: WriteAccess) -> Result<(), WriteError> {
    if may_write(caller, access) {
        Ok(())
    } else {
        Err(WriteError::NotAuthorized)
    }
}

/// Whether the caller is a controller.
pub fn caller_is_controller() -> bool {
    is_controller(&ic_cdk::api::msg_caller())
}

/// The caller is a controller, or [`WriteError::NotAuthorized`].
pub fn require_controller() -> Result<(), WriteError> {
    if is_controller(&ic_cdk::api::msg_caller()) {
        Ok(())
    } else {
        Err(WriteError::NotAuthorized)
    }
}

/// The single-operation methods, whose arguments are small.
const SINGLE_OP_METHODS: &[&str] = &[
    "create_user",
    "create_order",
    "update_order_amount",
    "delete_user_orders",
    "submit_create_user",
    "submit_create_order",
    "submit_update_order_amount",
    "submit_delete_user_orders",
    "flush",
];

/// What `canister_inspect_message` decides for an ingress call of `method` by `caller` with an
/// argument of `arg_bytes`: accept only what the method itself would accept. The update methods
/// of the interface are [`WRITE_METHODS`] (for callers who may write; single-op ones up to
/// [`MAX_SINGLE_OP_ARG_BYTES`]) and [`CONTROLLER_METHODS`] (for controllers); everything else
/// is refused: a query method called as an update (a replicated query, which the canister would
/// pay for like an update: `user_orders` can run for hundreds of millions of instructions), the
/// canister's internal methods (`__*`, which only the canister itself calls), and the canbench
/// queries of the benchmark build. The methods check again: calls from other canisters do not
/// pass through here.
pub fn accepts(method: &str, caller: &Principal, arg_bytes: usize, access: WriteAccess) -> bool {
    if CONTROLLER_METHODS.contains(&method) {
        return is_controller(caller);
    }
    if WRITE_METHODS.contains(&method) {
        if SINGLE_OP_METHODS.contains(&method) && arg_bytes > MAX_SINGLE_OP_ARG_BYTES {
            return false;
        }
        return may_write(caller, access);
    }
    false
}
