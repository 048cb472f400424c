//! Test fixtures: the users/orders schema of the ic-rusqlite benchmark, with constraints and
//! triggers that make ops fail in every way the executor distinguishes.

use rusqlite::Connection;

use crate::op::{SqlValue, Statement, WriteOp};

/// The schema of the ic-rusqlite users/orders benchmark plus:
/// - a UNIQUE index on `users.email` (constraint violations),
/// - foreign keys enforced (deleting a user with orders, orders of missing users),
/// - a trigger that aborts the statement on a negative order amount (`RAISE(ABORT)`),
/// - a trigger that rolls back the whole transaction on an amount above 1 000 000
///   (`RAISE(ROLLBACK)`).
pub(crate) const SCHEMA: &str = "
PRAGMA foreign_keys = ON;
CREATE TABLE users (
  user_id INTEGER PRIMARY KEY AUTOINCREMENT,
  username TEXT NOT NULL,
  email TEXT NOT NULL,
  created_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP
);
CREATE TABLE orders (
  order_id INTEGER PRIMARY KEY AUTOINCREMENT,
  user_id INTEGER NOT NULL,
  amount REAL NOT NULL,
  created_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP,
  FOREIGN KEY (user_id) REFERENCES users(user_id)
);
CREATE UNIQUE INDEX idx_users_email ON users(email);
CREATE INDEX idx_orders_user_id ON orders(user_id);
CREATE TRIGGER orders_amount_not_negative BEFORE UPDATE OF amount ON orders
  WHEN NEW.amount < 0 BEGIN SELECT RAISE(ABORT, 'negative amount'); END;
CREATE TRIGGER orders_amount_limit BEFORE INSERT ON orders
  WHEN NEW.amount > 1000000 BEGIN SELECT RAISE(ROLLBACK, 'amount over limit'); END;
";

/// An in-memory database with [`SCHEMA`].
pub(crate) fn open_db() -> Connection {
    let conn = Connection::open_in_memory().expect("open in-memory database");
    conn.execute_batch(SCHEMA).expect("create schema");
    conn
}

/// Every row that matters, in a canonical order: users and orders without the
/// `CURRENT_TIMESTAMP` column, and the AUTOINCREMENT counters.
pub(crate) fn dump(conn: &Connection) -> Vec<Vec<SqlValue>> {
    let mut rows = Vec::new();
    for sql in [
        "SELECT 'user', user_id, username, email FROM users ORDER BY user_id",
        "SELECT 'order', order_id, user_id, amount FROM orders ORDER BY order_id",
        "SELECT 'seq', name, seq, NULL FROM sqlite_sequence ORDER BY name",
    ] {
        let mut stmt = conn.prepare(sql).expect("prepare dump");
        let mapped = stmt
            .query_map([], |row| {
                (0..4).map(|i| row.get::<_, SqlValue>(i)).collect()
            })
            .expect("query dump");
        for row in mapped {
            rows.push(row.expect("read dump row"));
        }
    }
    rows
}

pub(crate) const INSERT_USER: &str = "INSERT INTO users (username, email) VALUES (?1, ?2)";
pub(crate) const INSERT_ORDER: &str = "INSERT INTO orders (user_id, amount) VALUES (?1, ?2)";

/// A statement inserting a user.
pub(crate) fn insert_user_stmt(name: &str, email: &str) -> Statement {
    Statement::new(INSERT_USER, vec![name.into(), email.into()])
}

/// An op inserting a user.
pub(crate) fn insert_user(name: &str, email: &str) -> WriteOp {
    WriteOp::Single(insert_user_stmt(name, email))
}

/// A statement inserting an order.
pub(crate) fn insert_order_stmt(user_id: i64, amount: f64) -> Statement {
    Statement::new(INSERT_ORDER, vec![user_id.into(), amount.into()])
}

/// An op inserting an order.
pub(crate) fn insert_order(user_id: i64, amount: f64) -> WriteOp {
    WriteOp::Single(insert_order_stmt(user_id, amount))
}

/// Number of rows in `table`.
pub(crate) fn count(conn: &Connection, table: &str) -> i64 {
    conn.query_row(&format!("SELECT COUNT(*) FROM {table}"), [], |row| {
        row.get(0)
    })
    .expect("count rows")
}
