//! The database: ic-rusqlite's connection opened with the pragmas of the ic-rusqlite users/orders
//! benchmark (<https://github.com/wasm-forge/benchmarks/tree/main/sql-users-orders>), and that
//! benchmark's schema.

use std::collections::HashMap;

use ic_rusqlite::{ConnectionConfig, rusqlite::Connection};

/// The pragmas of the ic-rusqlite users/orders benchmark, applied on every connection.
///
/// `journal_mode=PERSIST` keeps the rollback journal file and zeroes its header at commit instead of
/// deleting it; `locking_mode=EXCLUSIVE` avoids a lock/unlock per transaction. `page_size` takes
/// effect only when the database file is created (in `canister_init`).
pub const PRAGMAS: [(&str, &str); 6] = [
    ("journal_mode", "PERSIST"),
    ("synchronous", "NORMAL"),
    ("page_size", "4096"),
    ("locking_mode", "EXCLUSIVE"),
    ("temp_store", "MEMORY"),
    ("cache_size", "1000000"),
];

/// The schema of the ic-rusqlite users/orders benchmark, verbatim (AUTOINCREMENT keys,
/// `created_at` defaults, `orders.user_id` foreign key). `IF NOT EXISTS` makes it safe to run
/// after an upgrade.
pub const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS users (
  user_id INTEGER PRIMARY KEY AUTOINCREMENT,
  username TEXT NOT NULL,
  email TEXT NOT NULL,
  created_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP
);
CREATE TABLE IF NOT EXISTS orders (
  order_id INTEGER PRIMARY KEY AUTOINCREMENT,
  user_id INTEGER NOT NULL,
  amount REAL NOT NULL,
  created_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP,
  FOREIGN KEY (user_id) REFERENCES users(user_id)
);
";

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
    with(|conn| conn.execute_batch(SCHEMA)).expect("creating the users/orders schema");
}

/// Runs `f` with the canister's connection.
pub fn with<R>(f: impl FnOnce(&Connection) -> R) -> R {
    ic_rusqlite::with_connection(|conn| f(&conn))
}
