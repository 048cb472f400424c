//! The KV insert workload of ic-sqlite-vfs's ic-rusqlite comparison canister
//! (`benchmarks/ic-rusqlite-kv-canister/src/lib.rs`, `bench_insert_only`), as canbench benches.
//! Schema, SQL, keys and values as there; ic-rusqlite's default pragmas (PERSIST, synchronous
//! OFF, EXCLUSIVE, 4 KiB pages). The table is reset before `bench_fn` (outside the measurement,
//! as their `bench_insert_only` starts its counter after the reset).
use canbench_rs::{bench, bench_fn, BenchResult};
use ic_rusqlite::{params, with_connection, Connection};

const TABLE: &str = "CREATE TABLE IF NOT EXISTS bench (
    key TEXT PRIMARY KEY NOT NULL,
    value TEXT NOT NULL
) WITHOUT ROWID";

#[ic_cdk::init]
fn init() {
    with_connection(|c| c.execute_batch(TABLE)).unwrap();
}

fn reset(c: &Connection) {
    c.execute_batch(
        "DROP TABLE IF EXISTS bench;
         CREATE TABLE bench (key TEXT PRIMARY KEY NOT NULL, value TEXT NOT NULL) WITHOUT ROWID;",
    )
    .unwrap();
}

fn seed(rows: u32) {
    with_connection(|c| {
        reset(&c);
        let mut s = c.prepare("INSERT INTO bench(key, value) VALUES (?1, ?2)").unwrap();
        for i in 0..rows {
            s.execute(params![format!("k{i:08}"), format!("value-{i:08}-stable-vfs")]).unwrap();
        }
    });
}

/// Their loop: one prepared statement, `execute` per row, no BEGIN: each row is its own
/// autocommit transaction.
fn insert(from: u32, rows: u32, one_tx: bool) {
    with_connection(|c| {
        if one_tx {
            c.execute_batch("BEGIN").unwrap();
        }
        let mut s = c.prepare("INSERT INTO bench(key, value) VALUES (?1, ?2)").unwrap();
        for i in from..from + rows {
            s.execute(params![format!("k{i:08}"), format!("value-{i:08}-stable-vfs")]).unwrap();
        }
        drop(s);
        if one_tx {
            c.execute_batch("COMMIT").unwrap();
        }
    });
}

#[bench(raw)]
fn kv_insert_only_1000_autocommit() -> BenchResult {
    seed(0);
    bench_fn(|| insert(0, 1000, false))
}

#[bench(raw)]
fn kv_insert_only_1000_one_tx() -> BenchResult {
    seed(0);
    bench_fn(|| insert(0, 1000, true))
}

#[bench(raw)]
fn kv_insert_only_5000_autocommit() -> BenchResult {
    seed(0);
    bench_fn(|| insert(0, 5000, false))
}

#[bench(raw)]
fn kv_insert_only_5000_one_tx() -> BenchResult {
    seed(0);
    bench_fn(|| insert(0, 5000, true))
}

#[bench(raw)]
fn kv_append_insert_5000_1000_autocommit() -> BenchResult {
    seed(5000);
    bench_fn(|| insert(5000, 1000, false))
}

#[bench(raw)]
fn kv_append_insert_5000_1000_one_tx() -> BenchResult {
    seed(5000);
    bench_fn(|| insert(5000, 1000, true))
}

#[bench(raw)]
fn kv_insert_one_row() -> BenchResult {
    seed(0);
    bench_fn(|| insert(0, 1, false))
}

/// Stable memory after install (the table created by `init`), in bytes.
#[ic_cdk::update]
fn stable_bytes() -> u64 {
    ic_cdk::api::stable_size() * 65_536
}

/// Their `bench_reset(1000)` (reset, then 1,000 autocommit inserts), then the stable memory in
/// bytes, as their README's "Stable memory after the 1000-row clean reset".
#[ic_cdk::update]
fn reset_1000_stable_bytes() -> u64 {
    seed(1000);
    ic_cdk::api::stable_size() * 65_536
}
