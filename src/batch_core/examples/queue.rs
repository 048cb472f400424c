//! batch_core on plain rusqlite: a queue of writes flushed in one transaction, each op with its
//! own outcome, as a canister would run it (there the meter is the performance counter and the
//! clock the IC's time; here they are a counting meter and a fixed clock).
//!
//! `cargo run --release -p ic-rusqlite-batch-core --example queue`

use batch_core::rusqlite::Connection;
use batch_core::{
    BatchQueue, Config, CountingMeter, OpError, OpStatus, Outcome, SqlValue, Statement, WriteOp,
};

const SCHEMA: &str = "
    CREATE TABLE users (
        user_id INTEGER PRIMARY KEY AUTOINCREMENT,
        username TEXT NOT NULL,
        email TEXT NOT NULL UNIQUE
    );
    CREATE TABLE orders (
        order_id INTEGER PRIMARY KEY AUTOINCREMENT,
        user_id INTEGER NOT NULL REFERENCES users(user_id),
        amount REAL NOT NULL
    );";
const INSERT_USER: &str = "INSERT INTO users (username, email) VALUES (?1, ?2)";
const INSERT_ORDER: &str = "INSERT INTO orders (user_id, amount) VALUES (?1, ?2)";

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let conn = Connection::open_in_memory()?;
    conn.execute_batch(SCHEMA)?;
    conn.pragma_update(None, "foreign_keys", true)?;

    let mut queue = BatchQueue::new(Config {
        flush_size: 1_000,
        ..Config::default()
    })?;
    let now_ns = 1_700_000_000_000_000_000;
    let user = |name: &str| {
        WriteOp::single(
            INSERT_USER,
            vec![name.into(), SqlValue::Text(format!("{name}@example.org"))],
        )
    };
    let mut tickets = Vec::new();
    for name in ["alice", "bob", "alice"] {
        // The second "alice" violates the UNIQUE email: it fails alone.
        tickets.push(queue.submit(user(name), now_ns)?.ticket);
    }
    // Consecutive orders run as one multi-row INSERT (statement coalescing), each with its
    // own rowid.
    for amount in [10.0, 20.0, 30.0] {
        let op = WriteOp::single(INSERT_ORDER, vec![1.into(), SqlValue::Real(amount)]);
        tickets.push(queue.submit(op, now_ns)?.ticket);
    }
    // A unit applies together or not at all: its second statement fails (no user 99), so
    // its first statement is undone too.
    let unit = WriteOp::Unit(vec![
        Statement::new(INSERT_ORDER, vec![2.into(), SqlValue::Real(5.0)]),
        Statement::new(INSERT_ORDER, vec![99.into(), SqlValue::Real(5.0)]),
    ]);
    tickets.push(queue.submit(unit, now_ns)?.ticket);

    // One transaction for every pending op.
    let report = queue.flush(&conn, &CountingMeter::new(1))?;
    println!(
        "flush: {} committed, {} failed, {} coalesced, {} remaining",
        report.committed, report.failed, report.coalesced, report.remaining
    );
    for ticket in &tickets {
        match queue.status(*ticket) {
            OpStatus::Done(Outcome::Committed {
                rows_changed,
                last_insert_rowid,
            }) => println!(
                "op {ticket:?}: committed, {rows_changed} row(s), rowid {last_insert_rowid}"
            ),
            OpStatus::Done(Outcome::Failed(OpError {
                code,
                message: error,
            })) => {
                println!("op {ticket:?}: failed with SQLite code {code}: {error}")
            }
            other => println!("op {ticket:?}: {other:?}"),
        }
    }
    assert_eq!(
        (report.committed, report.failed, report.remaining),
        (5, 2, 0)
    );
    assert_eq!(report.coalesced, 3);

    let count = |table: &str| -> Result<i64, batch_core::rusqlite::Error> {
        conn.query_row(&format!("SELECT count(*) FROM {table}"), [], |row| {
            row.get(0)
        })
    };
    assert_eq!((count("users")?, count("orders")?), (2, 3));
    println!("tables: 2 users, 3 orders");

    // Across an upgrade: pre_upgrade saves the queue, post_upgrade restores it.
    let saved = queue.save(Vec::new())?;
    let restored = BatchQueue::restore(&saved)?;
    for ticket in &tickets {
        assert_eq!(restored.status(*ticket), queue.status(*ticket));
    }
    println!(
        "saved the queue in {} bytes; restored, it answers the same",
        saved.len()
    );
    Ok(())
}
