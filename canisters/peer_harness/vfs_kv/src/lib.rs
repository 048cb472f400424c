//! The KV insert workload of ic-sqlite-vfs's own benchmark canister (`benchmarks/kv-canister`,
//! `bench_insert_only`), as canbench benches: the whole loop in one `Db::update` (one
//! transaction), one prepared statement, `execute_text_text` per row. The table is reset before
//! `bench_fn`, outside the measurement, as there.
use canbench_rs::{bench, bench_fn, BenchResult};
use ic_sqlite_vfs::{Db, DefaultMemoryImpl, MemoryId, MemoryManager};
use std::cell::RefCell;

thread_local! {
    static MM: RefCell<MemoryManager<DefaultMemoryImpl>> =
        RefCell::new(MemoryManager::init(DefaultMemoryImpl::default()));
}

#[ic_cdk::init]
fn init() {
    MM.with(|m| Db::init(m.borrow().get(MemoryId::new(120)))).unwrap();
    Db::update(|c| {
        c.execute_batch(
            "CREATE TABLE IF NOT EXISTS bench (key TEXT PRIMARY KEY NOT NULL, value TEXT NOT NULL) WITHOUT ROWID;",
        )
    })
    .unwrap();
}

fn reset() {
    Db::update(|c| {
        c.execute_batch(
            "DROP TABLE IF EXISTS bench;
             CREATE TABLE bench (key TEXT PRIMARY KEY NOT NULL, value TEXT NOT NULL) WITHOUT ROWID;",
        )
    })
    .unwrap();
}

fn insert_one_update(from: u32, rows: u32) {
    Db::update(|c| {
        let mut s = c.prepare("INSERT INTO bench(key, value) VALUES (?1, ?2)")?;
        for i in from..from + rows {
            s.execute_text_text(&format!("k{i:08}"), &format!("value-{i:08}-stable-vfs"))?;
        }
        Ok(())
    })
    .unwrap();
}

/// The same rows, each in its own `Db::update` (its own transaction and commit).
fn insert_update_per_row(from: u32, rows: u32) {
    for i in from..from + rows {
        Db::update(|c| {
            c.execute_text_text(
                "INSERT INTO bench(key, value) VALUES (?1, ?2)",
                &format!("k{i:08}"),
                &format!("value-{i:08}-stable-vfs"),
            )
        })
        .unwrap();
    }
}

#[bench(raw)]
fn kv_insert_only_1000_one_tx() -> BenchResult {
    reset();
    bench_fn(|| insert_one_update(0, 1000))
}

#[bench(raw)]
fn kv_insert_only_5000_one_tx() -> BenchResult {
    reset();
    bench_fn(|| insert_one_update(0, 5000))
}

#[bench(raw)]
fn kv_append_insert_5000_1000_one_tx() -> BenchResult {
    reset();
    insert_one_update(0, 5000);
    bench_fn(|| insert_one_update(5000, 1000))
}

/// The same, with the statement from the connection's cache (no SQL compile per row).
fn insert_update_per_row_cached(from: u32, rows: u32) {
    for i in from..from + rows {
        Db::update(|c| {
            let mut s = c.prepare_cached("INSERT INTO bench(key, value) VALUES (?1, ?2)")?;
            s.execute_text_text(&format!("k{i:08}"), &format!("value-{i:08}-stable-vfs"))
        })
        .unwrap();
    }
}

#[bench(raw)]
fn kv_insert_only_1000_per_row_tx_cached() -> BenchResult {
    reset();
    bench_fn(|| insert_update_per_row_cached(0, 1000))
}

#[bench(raw)]
fn kv_insert_only_1000_per_row_tx() -> BenchResult {
    reset();
    bench_fn(|| insert_update_per_row(0, 1000))
}

/// Stable memory after install (the table created by `init`), in bytes.
#[ic_cdk::update]
fn stable_bytes() -> u64 {
    ic_cdk::api::stable_size() * 65_536
}

/// Their `bench_reset(1000)` (reset and 1,000 inserts in one `Db::update`), then the stable
/// memory in bytes.
#[ic_cdk::update]
fn reset_1000_stable_bytes() -> u64 {
    Db::update(|c| {
        c.execute_batch(
            "DROP TABLE IF EXISTS bench;
             CREATE TABLE bench (key TEXT PRIMARY KEY NOT NULL, value TEXT NOT NULL) WITHOUT ROWID;",
        )?;
        let mut s = c.prepare("INSERT INTO bench(key, value) VALUES (?1, ?2)")?;
        for i in 0..1000u32 {
            s.execute_text_text(&format!("k{i:08}"), &format!("value-{i:08}-stable-vfs"))?;
        }
        Ok(())
    })
    .unwrap();
    ic_cdk::api::stable_size() * 65_536
}

/// With `bench-profile`: after their `bench_reset(1000)`, the raw stable memory and, as their
/// README reports it, the size of the database's virtual memory (`bench_support::memory::size_pages`), in bytes.
#[cfg(feature = "bench-profile")]
#[ic_cdk::update]
fn reset_1000_raw_and_virtual_bytes() -> (u64, u64) {
    let raw = reset_1000_stable_bytes();
    (raw, ic_sqlite_vfs::bench_support::memory::size_pages() * 65_536)
}

/// Writes `index` as 8 decimal digits into `out` (no allocation), as their benchmark's key and
/// value buffers do.
fn digits8(index: u32, out: &mut [u8]) {
    let mut v = index;
    for b in out.iter_mut().rev() {
        *b = b'0' + (v % 10) as u8;
        v /= 10;
    }
}

/// As `insert_one_update`, with the key and value written into stack buffers instead of
/// `format!` (their kv-canister's `bench_key` / `bench_value`).
fn insert_one_update_stack(from: u32, rows: u32) {
    Db::update(|c| {
        let mut s = c.prepare("INSERT INTO bench(key, value) VALUES (?1, ?2)")?;
        for i in from..from + rows {
            let mut key = *b"k00000000";
            let mut value = *b"value-00000000-stable-vfs";
            digits8(i, &mut key[1..9]);
            digits8(i, &mut value[6..14]);
            let key = std::str::from_utf8(&key).unwrap();
            let value = std::str::from_utf8(&value).unwrap();
            s.execute_text_text(key, value)?;
        }
        Ok(())
    })
    .unwrap();
}

#[bench(raw)]
fn kv_insert_only_1000_one_tx_stack_keys() -> BenchResult {
    reset();
    bench_fn(|| insert_one_update_stack(0, 1000))
}

#[bench(raw)]
fn kv_insert_only_5000_one_tx_stack_keys() -> BenchResult {
    reset();
    bench_fn(|| insert_one_update_stack(0, 5000))
}

#[bench(raw)]
fn kv_append_insert_5000_1000_one_tx_stack_keys() -> BenchResult {
    reset();
    insert_one_update_stack(0, 5000);
    bench_fn(|| insert_one_update_stack(5000, 1000))
}
