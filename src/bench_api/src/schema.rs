//! The users/orders schema of the ic-rusqlite users/orders benchmark
//! (<https://github.com/wasm-forge/benchmarks/tree/main/sql-users-orders>), the pragmas the
//! canister opens it with, and the SQL of each write of the Candid API.

/// The pragmas of the ic-rusqlite users/orders benchmark, applied on every connection.
///
/// `journal_mode=PERSIST` keeps the rollback journal file and zeroes its header at commit instead
/// of deleting it; `locking_mode=EXCLUSIVE` avoids a lock/unlock per transaction. `page_size`
/// takes effect only when the database file is created (in `canister_init`).
pub const PRAGMAS: [(&str, &str); 6] = [
    ("journal_mode", "PERSIST"),
    ("synchronous", "NORMAL"),
    ("page_size", "4096"),
    ("locking_mode", "EXCLUSIVE"),
    ("temp_store", "MEMORY"),
    ("cache_size", "1000000"),
];

/// The schema: the tables of the ic-rusqlite benchmark verbatim (AUTOINCREMENT keys,
/// `created_at` defaults, `orders.user_id` foreign key) and the index on `orders.user_id` of its
/// indexed variant ([`ORDERS_USER_ID_INDEX`]). The canister runs it at every install and upgrade;
/// `IF NOT EXISTS` makes that idempotent.
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
CREATE INDEX IF NOT EXISTS idx_orders_user_id ON orders(user_id);
";

/// The name of the index on `orders.user_id` that [`SCHEMA`] creates (`bench_api::fixture`'s
/// `INDEXES` name it the same, so theirs is then a no-op).
///
/// Without it, [`DELETE_USER_ORDERS`] reads every order: a user's 10 among 1,000,000 cost
/// 718 M instructions, where the smallest flush budget lets an op run 40 M alone in a flush and
/// 60 M unbatched; so does SQLite's foreign-key check when a controller deletes a user. A
/// canister installed before the schema had it gets it at its next upgrade: `post_upgrade`
/// runs [`SCHEMA`], which builds the index over the existing orders in that one message, 5.64 B
/// instructions for 1,000,000 orders (`bench-suite budget-floor`), about 5,600 per order. The
/// 300 B instructions of an upgrade hold about 50 million orders; beyond that the upgrade fails
/// and the canister keeps its previous version and data, and the orders would have to move, in
/// chunks of controller SQL, into a table that has the index.
pub const ORDERS_USER_ID_INDEX: &str = "idx_orders_user_id";

/// `create_user`: inserts a user; `created_at` takes its default.
pub const INSERT_USER: &str = "INSERT INTO users (username, email) VALUES (?1, ?2)";
/// `create_order`: inserts an order; `created_at` takes its default.
pub const INSERT_ORDER: &str = "INSERT INTO orders (user_id, amount) VALUES (?1, ?2)";
/// `update_order_amount`: sets the amount of one order.
pub const UPDATE_ORDER_AMOUNT: &str = "UPDATE orders SET amount = ?2 WHERE order_id = ?1";
/// `delete_user_orders`: deletes all orders of one user.
pub const DELETE_USER_ORDERS: &str = "DELETE FROM orders WHERE user_id = ?1";
