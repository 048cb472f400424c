//! canbench benchmarks of the peer (compiled only with the `canbench-rs` feature), named as the
//! reference canister's (`src/bench_canister/src/benches.rs`) so that the two results files
//! (`canbench_results.offline.yml`, `canbench_results.vfs.offline.yml`) compare bench by bench.
//!
//! Every bench is a query on the freshly installed canister (canbench discards each bench's
//! state), so each one builds its own fixture before `bench_fn` measures, with the same rows
//! and statements as the reference's (`bench_api::fixture`, `bench_api::schema`).
//!
//! Scale: `BENCH_SCALE_DIVISOR` at build time divides the row counts of the ic-rusqlite
//! users/orders benchmark (1 = its 100,000 users and 1,000,000 orders), as the reference's.
//!
//! Groups:
//! - `users_orders_*`: the nine benchmarks of the ic-rusqlite users/orders benchmark, as the
//!   reference implements them; each transaction is one `Db::update`.
//! - `unbatched_<op>_<n>`: n writes through the canister's one-call-per-write path (`write_now`:
//!   each op alone in its own `Db::update` transaction).
//! - `batched_<op>_<n>`: the same n writes through the client-batch path (`run_batch`: one
//!   `Db::update` transaction). The reference's `batched_*` go through its write queue
//!   (batch_core: submit, then a flush in one transaction); the peer has no queue, so this is
//!   its one-transaction path, the counterpart of the reference's `breakdown_execute_batch_*`
//!   and `client_batch_packed_1000`.
//! - `floor_insert_10000`: the same INSERT 10,000 times in one transaction with a cached
//!   statement, nothing else.
//! - `client_batch_packed_1000`: 1,000 orders through `execute_batch_packed`'s handler (decode,
//!   validate, one transaction, encode the reply), unkeyed.

use bench_api::UserOrderOp;
use bench_api::fixture::{self, Workload};
use bench_api::schema::{INSERT_ORDER, INSERT_USER};
use canbench_rs::{BenchResult, bench, bench_fn};
use ic_sqlite_vfs::db::connection::Connection;
use ic_sqlite_vfs::{Db, DbError, params};

use crate::{packed_batch, run_batch, write_now};

/// Divides the row counts of the ic-rusqlite benchmark (set at build time; 1 when unset).
fn scale_divisor() -> usize {
    option_env!("BENCH_SCALE_DIVISOR")
        .and_then(|s| s.parse().ok())
        .filter(|d| *d > 0)
        .unwrap_or(1)
}

/// 1,000,000 orders at full scale.
fn order_count() -> usize {
    fixture::FULL_SCALE_ORDERS / scale_divisor()
}

/// 100,000 users at full scale.
fn user_count() -> usize {
    fixture::FULL_SCALE_USERS / scale_divisor()
}

/// Runs `sql` in a transaction of its own.
fn exec(sql: &str) {
    Db::update(|c| c.execute_batch(sql)).unwrap_or_else(|e| panic!("{sql}: {e}"));
}

/// Inserts users `offset+1 ..= offset+count` in one transaction with a cached statement, as the
/// ic-rusqlite benchmark does ([`fixture::user`]).
fn add_users(offset: usize, count: usize) {
    Db::update(|c| {
        let mut stmt = c.prepare_cached(INSERT_USER)?;
        for id in offset + 1..=offset + count {
            let (name, email) = fixture::user(id);
            stmt.execute(params![name.as_str(), email.as_str()])?;
        }
        Ok(())
    })
    .expect("users inserted");
}

/// Inserts orders `offset+1 ..= offset+count` in one transaction with a cached statement.
fn add_orders(offset: usize, count: usize, users: usize) {
    Db::update(|c| {
        let mut stmt = c.prepare_cached(INSERT_ORDER)?;
        for i in offset + 1..=offset + count {
            let (user_id, amount) = fixture::order(i, users);
            stmt.execute(params![user_id, amount])?;
        }
        Ok(())
    })
    .expect("orders inserted");
}

fn create_indices() {
    for sql in fixture::INDEXES {
        exec(sql);
    }
}

/// Reads every row of `sql` into strings, as the reference's generic query does (the facade
/// reads a column only as its declared type, so `columns` names each one's).
fn query_all(sql: &str, columns: &[Column]) -> usize {
    Db::query(|c| {
        let mut stmt = c.prepare(sql)?;
        let mut rows = stmt.query(&[])?;
        let mut out: Vec<Vec<String>> = Vec::new();
        while let Some(row) = rows.next_row()? {
            out.push(
                columns
                    .iter()
                    .enumerate()
                    .map(|(i, column)| match column {
                        Column::Integer => row.get::<i64>(i).map(|v| v.to_string()),
                        Column::Real => row.get::<f64>(i).map(|v| v.to_string()),
                        Column::Text => row.get::<String>(i),
                    })
                    .collect::<Result<_, _>>()?,
            );
        }
        Ok(out.len())
    })
    .expect("the query runs")
}

/// The type of a column [`query_all`] reads.
enum Column {
    Integer,
    Real,
    Text,
}

fn count_in(c: &Connection, table: &str) -> Result<usize, DbError> {
    c.query_scalar::<i64>(&format!("SELECT COUNT(*) FROM {table}"), &[])
        .map(|n| n as usize)
}

fn count(table: &str) -> usize {
    Db::query(|c| count_in(c, table)).expect("counted")
}

/// The index the schema creates at install, dropped so that the ic-rusqlite benchmarks start,
/// as the reference's, from tables without indexes.
fn drop_schema_index() {
    exec(&format!(
        "DROP INDEX IF EXISTS {}",
        bench_api::schema::ORDERS_USER_ID_INDEX
    ));
}

/// The ic-rusqlite benchmark's data: users, orders, and (optionally) the two indexes.
fn users_orders_fixture(indexes: bool) {
    drop_schema_index();
    add_users(0, user_count());
    add_orders(0, order_count(), user_count());
    if indexes {
        create_indices();
    }
}

// ---------------------------------------------------------------- the ic-rusqlite benchmark

#[bench(raw)]
fn users_orders_add_users() -> BenchResult {
    bench_fn(|| add_users(0, user_count()))
}

#[bench(raw)]
fn users_orders_add_orders() -> BenchResult {
    drop_schema_index();
    add_users(0, user_count());
    bench_fn(|| add_orders(0, order_count(), user_count()))
}

#[bench(raw)]
fn users_orders_create_indexes() -> BenchResult {
    users_orders_fixture(false);
    bench_fn(create_indices)
}

#[bench(raw)]
fn users_orders_select_join() -> BenchResult {
    users_orders_fixture(true);
    bench_fn(|| {
        query_all(
            "SELECT u.user_id, u.username, o.order_id, o.amount FROM users u \
             JOIN orders o ON u.user_id = o.user_id WHERE u.user_id < 1000 \
             ORDER BY o.created_at DESC",
            &[Column::Integer, Column::Text, Column::Integer, Column::Real],
        )
    })
}

#[bench(raw)]
fn users_orders_select_like() -> BenchResult {
    users_orders_fixture(true);
    bench_fn(|| {
        query_all(
            "SELECT * FROM users WHERE email LIKE 'user%'",
            &[Column::Integer, Column::Text, Column::Text, Column::Text],
        )
    })
}

#[bench(raw)]
fn users_orders_add_100_orders_indexed() -> BenchResult {
    users_orders_fixture(true);
    bench_fn(|| add_orders(0, 100, user_count()))
}

#[bench(raw)]
fn users_orders_delete_orders_of_100_users() -> BenchResult {
    users_orders_fixture(true);
    bench_fn(|| exec("DELETE FROM orders WHERE user_id <= 100"))
}

#[bench(raw)]
fn users_orders_add_orders_indexed() -> BenchResult {
    users_orders_fixture(true);
    exec("DELETE FROM orders");
    bench_fn(|| add_orders(0, order_count(), user_count()))
}

/// The reference runs `BEGIN`, the delete, a count and `ROLLBACK`; here the update closure
/// returns an error after the count, which makes `Db::update` roll the transaction back.
#[bench(raw)]
fn users_orders_delete_tenth_rollback() -> BenchResult {
    users_orders_fixture(true);
    let orders = order_count();
    assert_eq!(count("orders"), orders);
    let result = bench_fn(|| {
        let rolled_back = Db::update(|c| {
            c.execute_batch(&format!(
                "DELETE FROM orders WHERE order_id > {}",
                orders / 10 * 9
            ))?;
            assert_eq!(count_in(c, "orders")?, orders / 10 * 9);
            Err::<(), _>(DbError::NotFound)
        });
        assert!(matches!(rolled_back, Err(DbError::NotFound)));
    });
    assert_eq!(count("orders"), orders);
    result
}

// ---------------------------------------------------------------- batched vs unbatched

/// The batched/unbatched fixture ([`fixture::USERS`] users, [`fixture::ORDERS`] orders, the two
/// indexes), as the reference's.
fn batch_fixture() {
    add_users(0, fixture::USERS);
    add_orders(0, fixture::ORDERS, fixture::USERS);
    create_indices();
}

fn ops(kind: Workload, n: usize) -> Vec<UserOrderOp> {
    (0..n).map(|i| kind.op(i)).collect()
}

/// n ops, each through the one-call-per-write path (its own transaction).
fn unbatched(kind: Workload, n: usize) -> BenchResult {
    batch_fixture();
    let ops = ops(kind, n);
    bench_fn(|| {
        for op in &ops {
            let outcome = write_now(op).expect("the transaction commits");
            assert!(
                matches!(outcome, bench_api::Outcome::Committed { .. }),
                "{outcome:?}"
            );
        }
    })
}

/// n ops through the client-batch path, in one transaction.
fn batched(kind: Workload, n: usize) -> BenchResult {
    batch_fixture();
    let ops = ops(kind, n);
    bench_fn(|| {
        let outcomes = run_batch(&ops).expect("the batch commits");
        assert_eq!(outcomes.len(), n);
        assert!(
            outcomes
                .iter()
                .all(|o| matches!(o, bench_api::Outcome::Committed { .. }))
        );
    })
}

/// The floor: the same INSERT n times in one transaction with a cached statement.
fn floor_insert(n: usize) -> BenchResult {
    batch_fixture();
    bench_fn(|| {
        Db::update(|c| {
            let mut stmt = c.prepare_cached(INSERT_ORDER)?;
            for i in 0..n {
                let UserOrderOp::CreateOrder { user_id, amount } = Workload::Insert.op(i) else {
                    unreachable!()
                };
                stmt.execute(params![user_id, amount])?;
            }
            Ok(())
        })
        .expect("committed")
    })
}

/// A client batch of 1,000 orders through `execute_batch_packed`'s handler, unkeyed: decode,
/// validate, run in one transaction, encode the reply.
#[bench(raw)]
fn client_batch_packed_1000() -> BenchResult {
    batch_fixture();
    let arg = bench_api::packed::encode_ops(&ops(Workload::Insert, 1_000));
    bench_fn(|| {
        let reply = packed_batch(&arg).expect("the batch runs");
        std::hint::black_box(reply);
    })
}

/// Declares one bench `$name` whose body is `$body`.
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
    unbatched_insert_1 => unbatched(Workload::Insert, 1);
    unbatched_insert_10 => unbatched(Workload::Insert, 10);
    unbatched_insert_100 => unbatched(Workload::Insert, 100);
    unbatched_insert_1000 => unbatched(Workload::Insert, 1_000);
    unbatched_insert_10000 => unbatched(Workload::Insert, 10_000);
    batched_insert_1 => batched(Workload::Insert, 1);
    batched_insert_10 => batched(Workload::Insert, 10);
    batched_insert_100 => batched(Workload::Insert, 100);
    batched_insert_1000 => batched(Workload::Insert, 1_000);
    batched_insert_10000 => batched(Workload::Insert, 10_000);
    unbatched_update_1 => unbatched(Workload::Update, 1);
    unbatched_update_10 => unbatched(Workload::Update, 10);
    unbatched_update_100 => unbatched(Workload::Update, 100);
    unbatched_update_1000 => unbatched(Workload::Update, 1_000);
    unbatched_update_10000 => unbatched(Workload::Update, 10_000);
    batched_update_1 => batched(Workload::Update, 1);
    batched_update_10 => batched(Workload::Update, 10);
    batched_update_100 => batched(Workload::Update, 100);
    batched_update_1000 => batched(Workload::Update, 1_000);
    batched_update_10000 => batched(Workload::Update, 10_000);
    unbatched_delete_1 => unbatched(Workload::Delete, 1);
    unbatched_delete_10 => unbatched(Workload::Delete, 10);
    unbatched_delete_100 => unbatched(Workload::Delete, 100);
    unbatched_delete_1000 => unbatched(Workload::Delete, 1_000);
    unbatched_delete_10000 => unbatched(Workload::Delete, 10_000);
    batched_delete_1 => batched(Workload::Delete, 1);
    batched_delete_10 => batched(Workload::Delete, 10);
    batched_delete_100 => batched(Workload::Delete, 100);
    batched_delete_1000 => batched(Workload::Delete, 1_000);
    batched_delete_10000 => batched(Workload::Delete, 10_000);
    floor_insert_10000 => floor_insert(10_000);
}
