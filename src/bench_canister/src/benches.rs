//! canbench benchmarks (compiled only with the `canbench-rs` feature).
//!
//! Every bench is a query on the freshly installed canister (canbench discards each bench's state),
//! so each one builds its own fixture before `bench_fn` measures. Timers never fire inside a query:
//! batched benches enqueue and then flush themselves.
//!
//! Scale: `BENCH_SCALE_DIVISOR` at build time divides the seed-004 row counts (1 = the seed's
//! 100,000 users and 1,000,000 orders; the CI baseline uses 100).
//!
//! Groups:
//! - `seed_*`: the nine users/orders benchmarks of ic-rusqlite (seed 004), same data shapes.
//! - `unbatched_<op>_<n>` / `batched_<op>_<n>`: n writes through the exact unbatched code path of an
//!   update call (one autocommit transaction each) against n submissions through batch_core and the
//!   flush. `floor_insert_<n>`: the same INSERT n times inside one transaction, without batch_core.
//! - `errors_<p>pct`: 10,000 batched inserts of which p% fail (NOT NULL constraint).
//! - `flush_size_<f>`: 10,000 batched inserts with flush size f.

use batch_core::{BatchQueue, Config, SqlValue, Statement, WriteOp};
use canbench_rs::{BenchResult, bench, bench_fn, bench_scope};

use crate::workload::{INSERT_ORDER, INSERT_USER, UserOrderOp};
use crate::{db, enqueue, execute_now, flush_now};

/// Divides the seed-004 row counts (set at build time; 1 when unset).
fn scale_divisor() -> usize {
    option_env!("BENCH_SCALE_DIVISOR")
        .and_then(|s| s.parse().ok())
        .filter(|d| *d > 0)
        .unwrap_or(1)
}

/// Seed 004: 1,000,000 orders.
fn order_count() -> usize {
    1_000_000 / scale_divisor()
}

/// Seed 004: 100,000 users.
fn user_count() -> usize {
    order_count() / 10
}

fn exec(sql: &str) {
    db::with(|conn| conn.execute_batch(sql)).unwrap_or_else(|e| panic!("{sql}: {e}"));
}

/// Inserts users `offset+1 ..= offset+count` in one transaction with a cached statement
/// (`user<id>`, `user<id>@example.com`), as seed 004 does.
fn add_users(offset: usize, count: usize) {
    db::with(|conn| {
        conn.execute_batch("BEGIN").unwrap();
        {
            let mut stmt = conn.prepare_cached(INSERT_USER).unwrap();
            for id in offset + 1..=offset + count {
                stmt.execute((format!("user{id}"), format!("user{id}@example.com")))
                    .unwrap();
            }
        }
        conn.execute_batch("COMMIT").unwrap();
    });
}

/// Seed 004's order shape: the i-th order belongs to user `i*13 % users + 1`, amount
/// `(id*100 + id*17) / 15` (integer arithmetic, stored as REAL).
fn order(i: usize, users: usize) -> (i64, f64) {
    let id = i * 13 % users + 1;
    (id as i64, ((id * 100 + id * 17) / 15) as f64)
}

/// Inserts orders `offset+1 ..= offset+count` in one transaction with a cached statement.
fn add_orders(offset: usize, count: usize, users: usize) {
    db::with(|conn| {
        conn.execute_batch("BEGIN").unwrap();
        {
            let mut stmt = conn.prepare_cached(INSERT_ORDER).unwrap();
            for i in offset + 1..=offset + count {
                stmt.execute(order(i, users)).unwrap();
            }
        }
        conn.execute_batch("COMMIT").unwrap();
    });
}

fn create_indices() {
    exec("CREATE INDEX IF NOT EXISTS idx_users_email ON users(email);");
    exec("CREATE INDEX IF NOT EXISTS idx_orders_user_id ON orders(user_id);");
}

/// Reads every row of `sql` into strings, as a generic query endpoint would.
fn query_all(sql: &str) -> usize {
    db::with(|conn| {
        let mut stmt = conn.prepare(sql).unwrap();
        let columns = stmt.column_count();
        let mut rows = stmt.query([]).unwrap();
        let mut out: Vec<Vec<String>> = Vec::new();
        while let Some(row) = rows.next().unwrap() {
            out.push(
                (0..columns)
                    .map(|i| match row.get_ref_unwrap(i) {
                        batch_core::rusqlite::types::ValueRef::Null => String::new(),
                        batch_core::rusqlite::types::ValueRef::Integer(v) => v.to_string(),
                        batch_core::rusqlite::types::ValueRef::Real(v) => v.to_string(),
                        batch_core::rusqlite::types::ValueRef::Text(v) => {
                            String::from_utf8_lossy(v).into_owned()
                        }
                        batch_core::rusqlite::types::ValueRef::Blob(v) => format!("{v:?}"),
                    })
                    .collect(),
            );
        }
        out.len()
    })
}

fn count(table: &str) -> usize {
    db::with(|conn| {
        conn.query_row(&format!("SELECT COUNT(*) FROM {table}"), [], |r| {
            r.get::<_, i64>(0)
        })
    })
    .unwrap() as usize
}

/// The seed-004 fixture: users, orders, and (optionally) the two indexes.
fn seed_fixture(indexes: bool) {
    add_users(0, user_count());
    add_orders(0, order_count(), user_count());
    if indexes {
        create_indices();
    }
}

// ---------------------------------------------------------------- seed 004 parity

#[bench(raw)]
fn seed_add_users() -> BenchResult {
    bench_fn(|| add_users(0, user_count()))
}

#[bench(raw)]
fn seed_add_orders() -> BenchResult {
    add_users(0, user_count());
    bench_fn(|| add_orders(0, order_count(), user_count()))
}

#[bench(raw)]
fn seed_add_indices() -> BenchResult {
    seed_fixture(false);
    bench_fn(create_indices)
}

#[bench(raw)]
fn seed_select_join() -> BenchResult {
    seed_fixture(true);
    bench_fn(|| {
        query_all(
            "SELECT u.user_id, u.username, o.order_id, o.amount FROM users u \
             JOIN orders o ON u.user_id = o.user_id WHERE u.user_id < 1000 \
             ORDER BY o.created_at DESC",
        )
    })
}

#[bench(raw)]
fn seed_select_like() -> BenchResult {
    seed_fixture(true);
    bench_fn(|| query_all("SELECT * FROM users WHERE email LIKE 'user%'"))
}

#[bench(raw)]
fn seed_add_100_indexed_orders() -> BenchResult {
    seed_fixture(true);
    bench_fn(|| add_orders(0, 100, user_count()))
}

#[bench(raw)]
fn seed_remove_1000_indexed_orders() -> BenchResult {
    seed_fixture(true);
    bench_fn(|| exec("DELETE FROM orders WHERE user_id <= 100"))
}

#[bench(raw)]
fn seed_add_1m_indexed_orders() -> BenchResult {
    seed_fixture(true);
    exec("DELETE FROM orders");
    bench_fn(|| add_orders(0, order_count(), user_count()))
}

#[bench(raw)]
fn seed_delete_100k_rollback() -> BenchResult {
    seed_fixture(true);
    let orders = order_count();
    assert_eq!(count("orders"), orders);
    let result = bench_fn(|| {
        exec("BEGIN TRANSACTION");
        exec(&format!(
            "DELETE FROM orders WHERE order_id > {}",
            orders / 10 * 9
        ));
        assert_eq!(count("orders"), orders / 10 * 9);
        exec("ROLLBACK");
    });
    assert_eq!(count("orders"), orders);
    result
}

// ---------------------------------------------------------------- batched vs unbatched

/// Users and orders present before a batched/unbatched bench: 10,000 users with 2 orders each,
/// and seed 004's two indexes (without `idx_orders_user_id`, every "delete a user's orders"
/// scans the whole table and the scan, not the transaction, dominates).
const FIXTURE_USERS: usize = 10_000;

fn batch_fixture() {
    add_users(0, FIXTURE_USERS);
    add_orders(0, 2 * FIXTURE_USERS, FIXTURE_USERS);
    create_indices();
}

/// The i-th op (0-based) of a batched/unbatched bench of kind `kind`.
fn workload_op(kind: &str, i: usize) -> UserOrderOp {
    let user_id = (i % FIXTURE_USERS + 1) as i64;
    match kind {
        "insert" => UserOrderOp::CreateOrder {
            user_id,
            amount: (i % 1000) as f64 + 0.5,
        },
        "update" => UserOrderOp::UpdateOrderAmount {
            order_id: (i + 1) as i64,
            amount: i as f64,
        },
        "delete" => UserOrderOp::DeleteUserOrders { user_id },
        other => unreachable!("unknown workload {other}"),
    }
}

/// n ops, each through the unbatched update path (its own autocommit transaction).
fn unbatched(kind: &str, n: usize) -> BenchResult {
    batch_fixture();
    let ops: Vec<WriteOp> = (0..n).map(|i| workload_op(kind, i).to_write_op()).collect();
    bench_fn(|| {
        for op in &ops {
            let outcome = execute_now(op);
            assert!(
                matches!(outcome, crate::Outcome::Committed { .. }),
                "{outcome:?}"
            );
        }
    })
}

/// Replaces the canister's queue with one configured by `config`.
fn reset_queue(config: Config) {
    crate::QUEUE.with_borrow_mut(|q| *q = BatchQueue::new(config).expect("valid bench config"));
}

/// n submissions through the batched path, then the flush of whatever is left.
fn batched_ops(ops: Vec<WriteOp>, flush_size: usize) -> BenchResult {
    reset_queue(Config {
        flush_size,
        max_pending: ops.len().max(flush_size),
        flush_instruction_budget: u64::MAX / 2,
        ..Config::default()
    });
    let n = ops.len();
    let result = bench_fn(|| {
        {
            let _scope = bench_scope("submit_and_size_flushes");
            for op in ops {
                enqueue(op).expect("queue has room");
            }
        }
        let _scope = bench_scope("final_flush");
        flush_now().expect("flush commits");
    });
    let stats = crate::QUEUE.with_borrow(|q| q.stats());
    assert_eq!(
        stats.committed + stats.failed,
        n as u64,
        "every op has an outcome"
    );
    assert_eq!(stats.pending, 0);
    result
}

fn batched(kind: &str, n: usize) -> BenchResult {
    batch_fixture();
    let ops = (0..n).map(|i| workload_op(kind, i).to_write_op()).collect();
    // One batch of n ops: the flush size is never reached before the final flush.
    batched_ops(ops, n + 1)
}

/// The floor: the same INSERT n times in one transaction with a cached statement, no batch_core.
fn floor_insert(n: usize) -> BenchResult {
    batch_fixture();
    bench_fn(|| {
        db::with(|conn| {
            conn.execute_batch("BEGIN").unwrap();
            {
                let mut stmt = conn.prepare_cached(INSERT_ORDER).unwrap();
                for i in 0..n {
                    let UserOrderOp::CreateOrder { user_id, amount } = workload_op("insert", i)
                    else {
                        unreachable!()
                    };
                    stmt.execute((user_id, amount)).unwrap();
                }
            }
            conn.execute_batch("COMMIT").unwrap();
        })
    })
}

/// Declares one bench `$name` whose body is `$body`.
/// Where the per-op cost of a batched insert goes, step by step from the floor: the same n
/// inserts in one transaction, each through `prepare_cached` with `SqlValue` parameters (what any
/// generic executor pays), then through `batch_core::execute_batch` (the executor without the
/// queue). With `floor_insert_10000` and `batched_insert_10000` they split the batched cost into
/// statement lookup, executor bookkeeping, and queue (submit, meter, outcome store).
fn breakdown_prepare_cached(n: usize) -> BenchResult {
    batch_fixture();
    let ops: Vec<WriteOp> = (0..n)
        .map(|i| workload_op("insert", i).to_write_op())
        .collect();
    bench_fn(|| {
        db::with(|conn| {
            conn.execute_batch("BEGIN").unwrap();
            for op in &ops {
                let WriteOp::Single(statement) = op else {
                    unreachable!()
                };
                let mut stmt = conn.prepare_cached(&statement.sql).unwrap();
                stmt.execute(batch_core::rusqlite::params_from_iter(&statement.params))
                    .unwrap();
            }
            conn.execute_batch("COMMIT").unwrap();
        })
    })
}

fn breakdown_execute_batch(n: usize) -> BenchResult {
    batch_fixture();
    let ops: Vec<WriteOp> = (0..n)
        .map(|i| workload_op("insert", i).to_write_op())
        .collect();
    bench_fn(|| {
        let outcomes = db::with(|conn| batch_core::execute_batch(conn, &ops)).unwrap();
        assert!(outcomes.iter().all(|o| o.is_committed()));
    })
}

macro_rules! benches {
    ($($name:ident => $body:expr;)*) => {
        $(
            #[bench(raw)]
            fn $name() -> BenchResult {
                $body
            }
        )*
    };
}

benches! {
    unbatched_insert_1 => unbatched("insert", 1);
    unbatched_insert_10 => unbatched("insert", 10);
    unbatched_insert_100 => unbatched("insert", 100);
    unbatched_insert_1000 => unbatched("insert", 1_000);
    unbatched_insert_10000 => unbatched("insert", 10_000);
    batched_insert_1 => batched("insert", 1);
    batched_insert_10 => batched("insert", 10);
    batched_insert_100 => batched("insert", 100);
    batched_insert_1000 => batched("insert", 1_000);
    batched_insert_10000 => batched("insert", 10_000);
    unbatched_update_1 => unbatched("update", 1);
    unbatched_update_10 => unbatched("update", 10);
    unbatched_update_100 => unbatched("update", 100);
    unbatched_update_1000 => unbatched("update", 1_000);
    unbatched_update_10000 => unbatched("update", 10_000);
    batched_update_1 => batched("update", 1);
    batched_update_10 => batched("update", 10);
    batched_update_100 => batched("update", 100);
    batched_update_1000 => batched("update", 1_000);
    batched_update_10000 => batched("update", 10_000);
    unbatched_delete_1 => unbatched("delete", 1);
    unbatched_delete_10 => unbatched("delete", 10);
    unbatched_delete_100 => unbatched("delete", 100);
    unbatched_delete_1000 => unbatched("delete", 1_000);
    unbatched_delete_10000 => unbatched("delete", 10_000);
    batched_delete_1 => batched("delete", 1);
    batched_delete_10 => batched("delete", 10);
    batched_delete_100 => batched("delete", 100);
    batched_delete_1000 => batched("delete", 1_000);
    batched_delete_10000 => batched("delete", 10_000);
    floor_insert_10000 => floor_insert(10_000);
    breakdown_prepare_cached_10000 => breakdown_prepare_cached(10_000);
    breakdown_execute_batch_10000 => breakdown_execute_batch(10_000);
    errors_0pct => errors(0);
    errors_1pct => errors(1);
    errors_2pct => errors(2);
    flush_size_10 => flush_size(10);
    flush_size_100 => flush_size(100);
    flush_size_1000 => flush_size(1_000);
    flush_size_10000 => flush_size(10_000);
}

// ---------------------------------------------------------------- error isolation, flush size

/// Ops in the error-isolation and flush-size benches.
const ERROR_BENCH_OPS: usize = 10_000;

/// 10,000 batched inserts; every (100/pct)-th fails with a NOT NULL constraint violation.
fn errors(pct: usize) -> BenchResult {
    batch_fixture();
    let ops = (0..ERROR_BENCH_OPS)
        .map(|i| {
            if pct > 0 && i % (100 / pct) == 100 / pct - 1 {
                WriteOp::Single(Statement::new(
                    INSERT_ORDER,
                    vec![SqlValue::Integer(1), SqlValue::Null],
                ))
            } else {
                workload_op("insert", i).to_write_op()
            }
        })
        .collect();
    let result = batched_ops(ops, ERROR_BENCH_OPS + 1);
    let stats = crate::QUEUE.with_borrow(|q| q.stats());
    assert_eq!(stats.failed as usize, ERROR_BENCH_OPS * pct / 100);
    result
}

/// 10,000 batched inserts with flush size `f`: each submit that fills a batch flushes it.
fn flush_size(f: usize) -> BenchResult {
    batch_fixture();
    let ops = (0..ERROR_BENCH_OPS)
        .map(|i| workload_op("insert", i).to_write_op())
        .collect();
    batched_ops(ops, f)
}
