//! The database: ic-rusqlite's connection opened with the pragmas of the ic-rusqlite users/orders
//! benchmark (<https://github.com/wasm-forge/benchmarks/tree/main/sql-users-orders>), and that
//! benchmark's schema.

use std::collections::HashMap;

use ic_rusqlite::{ConnectionConfig, rusqlite::Connection};

use bench_api::schema::{PRAGMAS, SCHEMA};

/// Prepared statements the connection keeps.
pub const STATEMENT_CACHE_CAPACITY: usize = 64;

/// Configures ic-rusqlite so that its (lazily created) connection uses [`PRAGMAS`], opens it, and
/// creates the schema. Called from `canister_init` and `canister_post_upgrade`.
///
/// Traps (via `expect`) if SQLite cannot open the database or create the schema: a canister without
/// its database must not accept writes.
pub fn open() {
    let config = ConnectionConfig {
        pragma_settings: PRAGMAS
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect::<HashMap<_, _>>(),
        ..ConnectionConfig::default()
    };
    // ic-rusqlite creates its connection on first use, with the configuration set here; init and
    // post_upgrade both start with a fresh heap, so this runs before that first use.
    ic_rusqlite::set_connection_config(config);
    with(|conn| {
        // Room for every statement the canister repeats: the writes of its API, batch_core's
        // transaction control, and the coalescer's chunks (up to 8 sizes per INSERT shape) and
        // schema reads. rusqlite's default of 16 would evict and re-prepare them every flush.
        conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE_CAPACITY);
        conn.execute_batch(SCHEMA)
    })
    .expect("creating the users/orders schema");
}

thread_local! {
    /// The database is read-only (`set_read_only`).
    static READ_ONLY: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Whether the database is read-only.
pub fn read_only() -> bool {
    READ_ONLY.get()
}

/// Makes the database read-only (`PRAGMA query_only = 1`) or writable again. The pragma runs as
/// the canister's own statement (batch_core refuses it in ops), and running it expires every
/// prepared statement, as SQLite does for flag pragmas. Fails with SQLite's error.
pub fn set_read_only(read_only: bool) -> Result<(), String> {
    with(|conn| conn.pragma_update(None, "query_only", read_only))
        .map_err(|e| format!("PRAGMA query_only: {e}"))?;
    READ_ONLY.set(read_only);
    Ok(())
}

/// Runs `f` with the canister's connection.
pub fn with<R>(f: impl FnOnce(&Connection) -> R) -> R {
    ic_rusqlite::with_connection(|conn| f(&conn))
}
