//! Statements that would change the connection's state are refused before they take effect.
//!
//! SQLite applies some statements while it *compiles* them, before any step: a flag `PRAGMA`
//! (`foreign_keys`, `query_only`, `writable_schema`, `recursive_triggers`, ...) sets the flag in
//! `sqlite3_prepare` (`sqlite3Pragma` in SQLite's `pragma.c`), outside any transaction, and the
//! statements already compiled keep the code generated under the old value. An op that is
//! refused after it was compiled ("not a write statement") would therefore have changed the
//! connection for every later op and call. Others change the connection when they run but not
//! the database: `ATTACH` / `DETACH`, and temporary tables, indexes, views and triggers (they
//! live in the connection's `temp` schema, shadow the main tables and vanish when the
//! connection is reopened, at an upgrade).
//!
//! SQLite asks the connection's authorizer about each of these while it compiles a statement
//! (`sqlite3_set_authorizer`; for a `PRAGMA` before it looks at the pragma at all). batch_core
//! installs one authorizer per connection, the first time it executes ops on it, and keeps it:
//! installing an authorizer expires every prepared statement of the connection, so installing
//! it per execution would re-compile the whole statement cache each time. The authorizer allows
//! everything, except while an op runs ([`OpScope`]); then it denies the statements above, and
//! the op fails with `SQLITE_AUTH` (23) and a message saying that it was refused and that
//! nothing happened. A `PRAGMA` without an argument (a query) is allowed, and so are
//! `user_version` and `application_id`, which are stored in the database header and written
//! inside the transaction.
//!
//! Refused before it is compiled, such a statement never changes a flag, so no statement
//! compiled under one value of a flag outlives it. (A flag the application changes itself, by
//! *running* a pragma, as `Connection::pragma_update` does, expires every prepared statement:
//! SQLite's pragma code ends with `OP_Expire`, and an expired statement is compiled again
//! before its next step. The flaw was a pragma compiled and never run.)
//!
//! Replacing the connection's authorizer (rusqlite's `Connection::authorizer`) removes this
//! one; batch_core installs it again at its next execution.

use std::cell::{Cell, RefCell};
use std::sync::Mutex;

use rusqlite::Connection;
use rusqlite::hooks::{AuthAction, AuthContext, Authorization};

#[cfg(test)]
mod tests;

/// Pragmas an op may set: values in the database header, written inside the transaction like
/// any page.
const TRANSACTIONAL_PRAGMAS: [&str; 2] = ["user_version", "application_id"];

/// The connections (by handle) that have batch_core's authorizer. An entry is removed when its
/// authorizer is dropped (the connection closes, or its authorizer is replaced), so a handle
/// reused by a new connection is not mistaken for a guarded one.
static GUARDED: Mutex<Vec<usize>> = Mutex::new(Vec::new());

thread_local! {
    /// An op is running on this thread: the authorizer refuses what would change the connection.
    static IN_OP: Cell<bool> = const { Cell::new(false) };
    /// Why the authorizer refused the last statement, since the running op started.
    static REFUSED: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Owned by the installed authorizer: removes the connection from [`GUARDED`] when SQLite's
/// authorizer is dropped.
struct Registration(usize);

impl Drop for Registration {
    fn drop(&mut self) {
        let mut guarded = GUARDED
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        guarded.retain(|&handle| handle != self.0);
    }
}

/// Installs batch_core's authorizer on `conn` unless it has it already. Cost: a lock and a scan
/// of the guarded connections (usually one); the first time, SQLite also expires the
/// connection's prepared statements (they are compiled again when next used).
///
/// Fails only on a connection rusqlite does not own (one made from a raw handle).
pub(crate) fn ensure_guarded(conn: &Connection) -> rusqlite::Result<()> {
    // SAFETY: the handle is only compared, never dereferenced.
    let handle = unsafe { conn.handle() } as usize;
    {
        let mut guarded = GUARDED
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if guarded.contains(&handle) {
            return Ok(());
        }
        guarded.push(handle);
    }
    // Created after the push, so that a failure below (which drops the closure) removes it
    // again; the lock is released first, as replacing an authorizer drops the old one.
    let registration = Registration(handle);
    conn.authorizer(Some(move |context: AuthContext<'_>| {
        let _owner = &registration;
        decide(&context)
    }))
}

/// The authorizer's decision (see the module documentation).
fn decide(context: &AuthContext<'_>) -> Authorization {
    if !IN_OP.get() {
        return Authorization::Allow;
    }
    let reason = match context.action {
        AuthAction::Pragma {
            pragma_name,
            pragma_value: Some(_),
        } if !TRANSACTIONAL_PRAGMAS
            .iter()
            .any(|p| p.eq_ignore_ascii_case(pragma_name)) =>
        {
            format!(
                "refused, nothing happened: PRAGMA {pragma_name} with an argument changes the connection while it is compiled, outside any transaction (an op may only set user_version and application_id)"
            )
        }
        AuthAction::Attach { .. } | AuthAction::Detach { .. } => {
            "refused, nothing happened: ATTACH and DETACH change the databases of the connection, not the data".to_owned()
        }
        AuthAction::CreateTempIndex { .. }
        | AuthAction::CreateTempTable { .. }
        | AuthAction::CreateTempTrigger { .. }
        | AuthAction::CreateTempView { .. }
        | AuthAction::DropTempIndex { .. }
        | AuthAction::DropTempTable { .. }
        | AuthAction::DropTempTrigger { .. }
        | AuthAction::DropTempView { .. } => {
            "refused, nothing happened: temporary tables, indexes, views and triggers belong to the connection, not to the database, and vanish when it is reopened".to_owned()
        }
        _ => return Authorization::Allow,
    };
    REFUSED.with_borrow_mut(|refused| *refused = Some(reason));
    Authorization::Deny
}

/// While alive, an op runs on this thread: the authorizer refuses statements that would change
/// the connection. Nests (restores the previous state when dropped).
pub(crate) struct OpScope {
    previous: bool,
}

impl OpScope {
    /// Starts an op: forgets an earlier refusal.
    pub(crate) fn enter() -> Self {
        REFUSED.with_borrow_mut(|refused| *refused = None);
        OpScope {
            previous: IN_OP.replace(true),
        }
    }
}

impl Drop for OpScope {
    fn drop(&mut self) {
        IN_OP.set(self.previous);
    }
}

/// Why the authorizer refused a statement of the running op, if it did (taken: asked once).
pub(crate) fn take_refusal() -> Option<String> {
    REFUSED.with_borrow_mut(Option::take)
}
