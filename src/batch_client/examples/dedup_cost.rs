//! What deduplication adds to a keyed batch, natively: a 1,000-op batch of orders on the
//! reference schema and pragmas, in a database file, run with and without a key
//! (`Deduplicator::execute_keyed_within` against `execute_batch_within`), in steady state.
//!
//! It reports, per batch: the SQLite pages written to the database file (the IC charges a
//! canister for every byte it writes to stable memory, so pages written are what COMMIT
//! costs there), the bytes the store keeps per key, and the native time (this machine, not
//! IC instructions: those are measured on the offline engine once the canister's keyed method
//! exists).
//!
//! `cargo run --release -p ic-batch-client --example dedup_cost`

use std::time::Instant;

use batch_core::rusqlite::{Connection, ffi};
use batch_core::{
    BatchDigest, BatchKey, Budget, CountingMeter, DedupConfig, Deduplicator, SqlValue, WriteOp,
    execute_batch_within,
};

// The reference canister's schema, pragmas and statements (`bench_api::schema`).
const PRAGMAS: [(&str, &str); 6] = [
    ("journal_mode", "PERSIST"),
    ("synchronous", "NORMAL"),
    ("page_size", "4096"),
    ("locking_mode", "EXCLUSIVE"),
    ("temp_store", "MEMORY"),
    ("cache_size", "1000000"),
];
const SCHEMA: &str = "
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
const INSERT_USER: &str = "INSERT INTO users (username, email) VALUES (?1, ?2)";
const INSERT_ORDER: &str = "INSERT INTO orders (user_id, amount) VALUES (?1, ?2)";

const OPS: usize = 1_000;
const WARMUP: usize = 20;
const MEASURED: usize = 50;

fn open(path: &std::path::Path) -> Connection {
    let _ = std::fs::remove_file(path);
    let conn = Connection::open(path).expect("open");
    for (name, value) in PRAGMAS {
        conn.pragma_update(None, name, value).expect("pragma");
    }
    // No fsync: stable memory has none, and the disk of this machine would dominate the time.
    {
        conn.pragma_update(None, "synchronous", "OFF")
            .expect("pragma");
    }
    conn.execute_batch(SCHEMA).expect("schema");
    conn.execute(INSERT_USER, ["owner", "owner@x"])
        .expect("user");
    conn
}

fn pages_written(conn: &Connection) -> i64 {
    let (mut current, mut highest) = (0, 0);
    // SAFETY: the handle is valid while `conn` lives; the call only reads a counter.
    let rc = unsafe {
        ffi::sqlite3_db_status(
            conn.handle(),
            ffi::SQLITE_DBSTATUS_CACHE_WRITE,
            &mut current,
            &mut highest,
            1,
        )
    };
    assert_eq!(rc, ffi::SQLITE_OK);
    i64::from(current)
}

fn batch(n: usize) -> Vec<WriteOp> {
    (0..OPS)
        .map(|i| {
            WriteOp::single(
                INSERT_ORDER,
                vec![1.into(), SqlValue::Real((n * OPS + i) as f64)],
            )
        })
        .collect()
}

struct Measure {
    pages: f64,
    micros: f64,
}

fn measure(keyed: bool) -> (Measure, u64) {
    let path =
        std::env::temp_dir().join(format!("dedup_cost_{}_{keyed}.sqlite", std::process::id()));
    let conn = open(&path);
    let mut dedup = Deduplicator::new(DedupConfig::default()).expect("config");
    let budget = Budget::new(CountingMeter::new(0), u64::MAX / 4);
    let (mut pages, mut times) = (0i64, Vec::new());
    for n in 0..WARMUP + MEASURED {
        let ops = batch(n);
        // The canister digests the request's ops bytes: about 10 per order.
        let request = vec![0u8; OPS * 10];
        pages_written(&conn);
        let start = Instant::now();
        if keyed {
            let key = BatchKey {
                created_at_time: 1_700_000_000_000_000_000 + n as u64,
                id: [7; 16],
            };
            let digest = BatchDigest::of_bytes(&request);
            dedup
                .execute_keyed_within(
                    &conn,
                    b"caller",
                    &key,
                    &digest,
                    &ops,
                    &budget,
                    key.created_at_time,
                )
                .expect("keyed batch");
        } else {
            execute_batch_within(&conn, &ops, &budget).expect("batch");
        }
        let elapsed = start.elapsed();
        let written = pages_written(&conn);
        if n >= WARMUP {
            pages += written;
            times.push(elapsed.as_secs_f64() * 1e6);
        }
    }
    times.sort_by(f64::total_cmp);
    let held = if keyed {
        let stats = dedup.stats(&conn).expect("stats");
        stats.bytes_held / stats.keys_held
    } else {
        0
    };
    drop(conn);
    let _ = std::fs::remove_file(&path);
    (
        Measure {
            pages: pages as f64 / MEASURED as f64,
            micros: times[times.len() / 2],
        },
        held,
    )
}

fn main() {
    let (plain, _) = measure(false);
    let (keyed, per_key) = measure(true);
    println!(
        "native (this machine; SQLite {}), {OPS}-op batches of orders, steady state over {MEASURED} batches:",
        batch_core::rusqlite::version()
    );
    println!("| | pages written per batch | median time per batch |");
    println!("|---|---:|---:|");
    println!("| unkeyed | {:.2} | {:.0} µs |", plain.pages, plain.micros);
    println!("| keyed | {:.2} | {:.0} µs |", keyed.pages, keyed.micros);
    println!(
        "dedup adds {:+.2} pages ({:+.1} %) and {:+.1} % time per batch; the store keeps {per_key} bytes per key",
        keyed.pages - plain.pages,
        100.0 * (keyed.pages - plain.pages) / plain.pages,
        100.0 * (keyed.micros - plain.micros) / plain.micros,
    );
}
