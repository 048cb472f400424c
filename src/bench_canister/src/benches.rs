//! canbench benchmarks (compiled only with the `canbench-rs` feature).
//!
//! Every bench is a query on the freshly installed canister (canbench discards each bench's state),
//! so each one builds its own fixture before `bench_fn` measures. Timers never fire inside a query:
//! batched benches enqueue and then flush themselves.
//!
//! Scale: `BENCH_SCALE_DIVISOR` at build time divides the row counts of the ic-rusqlite
//! users/orders benchmark (1 = its 100,000 users and 1,000,000 orders; the CI baseline uses 100).
//!
//! Groups:
//! - `users_orders_*`: the nine benchmarks of the ic-rusqlite users/orders benchmark
//!   (<https://github.com/wasm-forge/benchmarks/tree/main/sql-users-orders>), same data shapes.
//! - `unbatched_<op>_<n>` / `batched_<op>_<n>`: n writes through the exact unbatched code path of an
//!   update call (one autocommit transaction each) against n submissions through batch_core and the
//!   flush. `floor_insert_<n>`: the same INSERT n times inside one transaction, without batch_core.
//! - `errors_<p>pct`: 10,000 batched inserts of which p% fail (NOT NULL constraint).
//! - `flush_size_<f>`: 10,000 batched inserts with flush size f.
//! - `upgrade_*`: what keeping 10,000 pending ops across an upgrade costs: saving and restoring
//!   the heap queue (what the canister does), against appending each op to a stable-memory log
//!   as it is submitted (the alternative design).

use batch_core::{BatchQueue, Budget, Config, SqlValue, Statement, WriteOp};
use bench_api::fixture::{self, Workload};
use canbench_rs::{BenchResult, bench, bench_fn, bench_scope};

use crate::workload::{INSERT_ORDER, INSERT_USER, to_write_op};
use crate::{Origin, enqueue, execute_now, flush_now};
use ic_rusqlite_batch::canister::{with_queue, with_queue_mut};
use ic_rusqlite_batch::message::MessageMeter;
use ic_rusqlite_batch::persist::{SavedState, save_to, take_from};
use ic_rusqlite_batch::with_connection;

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

fn exec(sql: &str) {
    with_connection(|conn| conn.execute_batch(sql)).unwrap_or_else(|e| panic!("{sql}: {e}"));
}

/// Inserts users `offset+1 ..= offset+count` in one transaction with a cached statement, as the
/// ic-rusqlite benchmark does ([`fixture::user`]).
fn add_users(offset: usize, count: usize) {
    with_connection(|conn| {
        conn.execute_batch("BEGIN").unwrap();
        {
            let mut stmt = conn.prepare_cached(INSERT_USER).unwrap();
            for id in offset + 1..=offset + count {
                stmt.execute(fixture::user(id)).unwrap();
            }
        }
        conn.execute_batch("COMMIT").unwrap();
    });
}

/// Inserts orders `offset+1 ..= offset+count` in one transaction with a cached statement.
fn add_orders(offset: usize, count: usize, users: usize) {
    with_connection(|conn| {
        conn.execute_batch("BEGIN").unwrap();
        {
            let mut stmt = conn.prepare_cached(INSERT_ORDER).unwrap();
            for i in offset + 1..=offset + count {
                stmt.execute(fixture::order(i, users)).unwrap();
            }
        }
        conn.execute_batch("COMMIT").unwrap();
    });
}

fn create_indices() {
    for sql in fixture::INDEXES {
        exec(sql);
    }
}

/// Reads every row of `sql` into strings, as a generic query endpoint would.
fn query_all(sql: &str) -> usize {
    with_connection(|conn| {
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
    with_connection(|conn| {
        conn.query_row(&format!("SELECT COUNT(*) FROM {table}"), [], |r| {
            r.get::<_, i64>(0)
        })
    })
    .unwrap() as usize
}

/// The index the canister's schema creates at install, dropped so that the ic-rusqlite
/// benchmarks start, as its own do, from tables without indexes (the batched/unbatched fixture
/// keeps it, as the deployed canister has it).
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
        )
    })
}

#[bench(raw)]
fn users_orders_select_like() -> BenchResult {
    users_orders_fixture(true);
    bench_fn(|| query_all("SELECT * FROM users WHERE email LIKE 'user%'"))
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

#[bench(raw)]
fn users_orders_delete_tenth_rollback() -> BenchResult {
    users_orders_fixture(true);
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

/// The batched/unbatched fixture ([`fixture::USERS`] users, [`fixture::ORDERS`] orders, the two
/// indexes).
pub(crate) fn batch_fixture() {
    add_users(0, fixture::USERS);
    add_orders(0, fixture::ORDERS, fixture::USERS);
    create_indices();
}

/// n ops, each through the unbatched update path (its own autocommit transaction).
fn unbatched(kind: Workload, n: usize) -> BenchResult {
    batch_fixture();
    let ops: Vec<WriteOp> = (0..n).map(|i| to_write_op(&kind.op(i))).collect();
    bench_fn(|| {
        for op in ops {
            let outcome = execute_now(op);
            assert!(
                matches!(outcome, bench_api::Outcome::Committed { .. }),
                "{outcome:?}"
            );
        }
    })
}

/// The owner the submit path records for the bench's caller (read once per message there too).
fn bench_owner() -> batch_core::Owner {
    batch_core::Owner::of(ic_cdk::api::msg_caller().as_slice())
}

/// Replaces the canister's queue with one configured by `config`.
fn reset_queue(config: Config) {
    with_queue_mut(|q| *q = BatchQueue::new(config).expect("valid bench config"));
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
    let owner = bench_owner();
    let result = bench_fn(|| {
        {
            let _scope = bench_scope("submit_and_size_flushes");
            for op in ops {
                enqueue(op, Origin::Typed, owner).expect("queue has room");
            }
        }
        let _scope = bench_scope("final_flush");
        flush_now(usize::MAX).expect("flush commits");
    });
    let stats = with_queue(|q| q.stats());
    assert_eq!(
        stats.committed + stats.failed,
        n as u64,
        "every op has an outcome"
    );
    assert_eq!(stats.pending, 0);
    result
}

fn batched(kind: Workload, n: usize) -> BenchResult {
    batch_fixture();
    let ops = (0..n).map(|i| to_write_op(&kind.op(i))).collect();
    // One batch of n ops: the flush size is never reached before the final flush.
    batched_ops(ops, n + 1)
}

/// The floor: the same INSERT n times in one transaction with a cached statement, no batch_core.
fn floor_insert(n: usize) -> BenchResult {
    batch_fixture();
    bench_fn(|| {
        with_connection(|conn| {
            conn.execute_batch("BEGIN").unwrap();
            {
                let mut stmt = conn.prepare_cached(INSERT_ORDER).unwrap();
                for i in 0..n {
                    let bench_api::UserOrderOp::CreateOrder { user_id, amount } =
                        Workload::Insert.op(i)
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

/// Where the per-op cost of a batched insert goes, step by step from the floor: the same n
/// inserts in one transaction, each through `prepare_cached` with `SqlValue` parameters (what any
/// generic executor pays), then through `batch_core::execute_batch` (the executor without the
/// queue). With `floor_insert_10000` and `batched_insert_10000` they split the batched cost into
/// statement lookup, executor bookkeeping, and queue (submit, meter, outcome store).
fn breakdown_prepare_cached(n: usize) -> BenchResult {
    batch_fixture();
    let ops: Vec<WriteOp> = (0..n)
        .map(|i| to_write_op(&Workload::Insert.op(i)))
        .collect();
    bench_fn(|| {
        with_connection(|conn| {
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
        .map(|i| to_write_op(&Workload::Insert.op(i)))
        .collect();
    bench_fn(|| {
        let outcomes = with_connection(|conn| batch_core::execute_batch(conn, &ops)).unwrap();
        assert!(outcomes.iter().all(|o| o.is_committed()));
    })
}

/// The same batch through `execute_batch_within`: the difference to `breakdown_execute_batch`
/// is the instruction guard (SQLite's progress handler reading the performance counter).
fn breakdown_execute_batch_within(n: usize) -> BenchResult {
    batch_fixture();
    let ops: Vec<WriteOp> = (0..n)
        .map(|i| to_write_op(&Workload::Insert.op(i)))
        .collect();
    let budget = Budget::new(MessageMeter, u64::MAX / 4);
    bench_fn(|| {
        let outcomes =
            with_connection(|conn| batch_core::execute_batch_within(conn, &ops, &budget)).unwrap();
        assert!(outcomes.iter().all(|o| o.is_committed()));
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
    breakdown_prepare_cached_10000 => breakdown_prepare_cached(10_000);
    breakdown_execute_batch_10000 => breakdown_execute_batch(10_000);
    breakdown_execute_batch_within_10000 => breakdown_execute_batch_within(10_000);
    upgrade_save_10000_pending => upgrade_save(10_000);
    upgrade_restore_10000_pending => upgrade_restore(10_000);
    upgrade_alternative_stable_log_10000 => upgrade_alternative_stable_log(10_000);
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
                to_write_op(&Workload::Insert.op(i))
            }
        })
        .collect();
    let result = batched_ops(ops, ERROR_BENCH_OPS + 1);
    let stats = with_queue(|q| q.stats());
    assert_eq!(stats.failed as usize, ERROR_BENCH_OPS * pct / 100);
    result
}

/// 10,000 batched inserts with flush size `f`: each submit that fills a batch flushes it.
fn flush_size(f: usize) -> BenchResult {
    batch_fixture();
    let ops = (0..ERROR_BENCH_OPS)
        .map(|i| to_write_op(&Workload::Insert.op(i)))
        .collect();
    batched_ops(ops, f)
}

// ---------------------------------------------------------------- keeping pending ops across upgrades

/// A queue holding `n` pending inserts (the submits are not measured).
fn queue_with_pending(n: usize) {
    reset_queue(Config {
        flush_size: n + 1,
        max_pending: n + 1,
        ..Config::default()
    });
    for i in 0..n {
        enqueue(
            to_write_op(&Workload::Insert.op(i)),
            Origin::Typed,
            bench_owner(),
        )
        .expect("queue has room");
    }
}

/// The virtual memory the canister saves its state in.
fn state_memory() -> impl ic_stable_structures::Memory {
    use ic_stable_structures::memory_manager::MemoryId;
    ic_rusqlite::MEMORY_MANAGER.with_borrow(|m| m.get(MemoryId::new(crate::SETUP.memory_id)))
}

/// What `pre_upgrade` does with `n` pending ops: write the queue to stable memory.
fn upgrade_save(n: usize) -> BenchResult {
    queue_with_pending(n);
    bench_fn(|| {
        let mut mem = state_memory();
        with_queue(|q| save_to(&mut mem, SavedState::default(), q)).expect("saved")
    })
}

/// What `post_upgrade` does with `n` saved pending ops: read and decode them.
fn upgrade_restore(n: usize) -> BenchResult {
    queue_with_pending(n);
    let mut mem = state_memory();
    with_queue(|q| save_to(&mut mem, SavedState::default(), q)).expect("saved");
    bench_fn(|| {
        let restored = take_from(&state_memory())
            .expect("readable")
            .expect("a saved state");
        assert_eq!(restored.queue.len(), n);
    })
}

/// The alternative design, measured for comparison: every submit also appends its op to a
/// log in stable memory (ic-stable-structures' `Log`), so `pre_upgrade` has nothing to write.
/// This is the extra cost per submit of that design (the in-heap queue is still needed to run
/// the flush).
fn upgrade_alternative_stable_log(n: usize) -> BenchResult {
    use ic_stable_structures::log::Log;
    use ic_stable_structures::memory_manager::MemoryId;
    let ops: Vec<WriteOp> = (0..n)
        .map(|i| to_write_op(&Workload::Insert.op(i)))
        .collect();
    let (index, data) = ic_rusqlite::MEMORY_MANAGER
        .with_borrow(|m| (m.get(MemoryId::new(2)), m.get(MemoryId::new(3))));
    let log: Log<Vec<u8>, _, _> = Log::init(index, data);
    bench_fn(|| {
        for op in &ops {
            let bytes = postcard::to_allocvec(op).expect("encoding an op");
            log.append(&bytes).expect("stable memory grows");
        }
    })
}

// ---------------------------------------------------------------- what wire shapes cost

/// Calls per codec bench: the figure per call is the total / 1,000.
const CODEC_CALLS: usize = 1_000;
/// Ops of the client-batch codec benches.
const CODEC_BATCH: usize = 1_000;

fn codec_bench(f: impl Fn() -> usize) -> BenchResult {
    bench_fn(|| {
        let mut bytes = 0;
        for _ in 0..CODEC_CALLS {
            bytes += std::hint::black_box(f());
        }
        std::hint::black_box(bytes);
    })
}

fn codec_orders() -> Vec<bench_api::UserOrderOp> {
    (0..CODEC_BATCH).map(|i| Workload::Insert.op(i)).collect()
}

fn codec_outcomes() -> Vec<bench_api::Outcome> {
    (0..CODEC_BATCH as i64)
        .map(|i| bench_api::Outcome::Committed {
            rows_changed: 1,
            last_insert_rowid: 20_000 + i,
        })
        .collect()
}

/// A `submit_*` reply as the typed result `SubmitResult` (`variant { Ok : Ticket; Err : WriteError }`), with candid.
#[bench(raw)]
fn codec_reply_submit_result_candid() -> BenchResult {
    codec_bench(|| {
        candid::encode_one(bench_api::SubmitResult::Ok(42))
            .expect("encodes")
            .len()
    })
}

/// A `submit_*` reply as a bare `Ticket` (`nat64`), with candid.
#[bench(raw)]
fn codec_reply_ticket_candid() -> BenchResult {
    codec_bench(|| candid::encode_one(42u64).expect("encodes").len())
}

/// The typed reply of a `submit_*` method, `SubmitResult::Ok(ticket)`, with the canister's hand
/// codec (`bench_api::wire`: the `Ok` case alone from a fixed prefix).
#[bench(raw)]
fn codec_reply_submit_result_wire() -> BenchResult {
    codec_bench(|| bench_api::wire::encode_submit_result(Ok(42)).len())
}

/// An unbatched write's reply, `Outcome::Committed`, with candid.
#[bench(raw)]
fn codec_reply_outcome_candid() -> BenchResult {
    codec_bench(|| {
        candid::encode_one(bench_api::Outcome::Committed {
            rows_changed: 1,
            last_insert_rowid: 42,
        })
        .expect("encodes")
        .len()
    })
}

/// The typed reply of an unbatched write, `WriteResult::Ok(Outcome::Committed)`, with the hand
/// codec.
#[bench(raw)]
fn codec_reply_write_result_wire() -> BenchResult {
    codec_bench(|| {
        bench_api::wire::encode_write_result(Ok(bench_api::Outcome::Committed {
            rows_changed: 1,
            last_insert_rowid: 42,
        }))
        .len()
    })
}

/// The argument `(int64, float64)` of `create_order` / `submit_create_order`, with candid.
#[bench(raw)]
fn codec_arg_i64_f64_candid() -> BenchResult {
    let arg = candid::encode_args((7i64, 9.5f64)).expect("encodes");
    codec_bench(|| {
        let (a, _b): (i64, f64) = candid::decode_args(&arg).expect("decodes");
        a as usize
    })
}

/// The same with the hand codec.
#[bench(raw)]
fn codec_arg_i64_f64_wire() -> BenchResult {
    let arg = candid::encode_args((7i64, 9.5f64)).expect("encodes");
    codec_bench(|| bench_api::wire::decode_i64_f64(&arg).expect("decodes").0 as usize)
}

/// `execute_batch`'s argument, 1,000 orders (`vec UserOrderOp`), decoded with candid (once).
#[bench(raw)]
fn codec_arg_batch_1000_candid() -> BenchResult {
    let arg = candid::encode_one(codec_orders()).expect("encodes");
    bench_fn(|| {
        let ops: Vec<bench_api::UserOrderOp> = candid::decode_one(&arg).expect("decodes");
        std::hint::black_box(ops);
    })
}

/// The same 1,000 orders packed (`execute_batch_packed`): the blob's Candid frame, then the ops.
#[bench(raw)]
fn codec_arg_batch_1000_packed() -> BenchResult {
    let arg = bench_api::wire::encode_blob(&bench_api::packed::encode_ops(&codec_orders()));
    bench_fn(|| {
        let blob = bench_api::wire::decode_blob(&arg).expect("a blob");
        let ops = bench_api::packed::decode_ops(&blob, CODEC_BATCH).expect("decodes");
        std::hint::black_box(ops);
    })
}

/// `execute_batch`'s reply for 1,000 committed orders (`BatchResult`), with candid (once).
#[bench(raw)]
fn codec_reply_batch_1000_candid() -> BenchResult {
    let reply = bench_api::BatchResult::Ok(codec_outcomes());
    bench_fn(|| {
        let bytes = candid::encode_one(&reply).expect("encodes");
        std::hint::black_box(bytes);
    })
}

/// The same outcomes packed (`execute_batch_packed`'s reply, `PackedResult::Ok`).
#[bench(raw)]
fn codec_reply_batch_1000_packed() -> BenchResult {
    let outcomes = codec_outcomes();
    bench_fn(|| {
        let bytes = bench_api::wire::encode_packed_result(Ok(bench_api::packed::encode_outcomes(
            &outcomes,
        )));
        std::hint::black_box(bytes);
    })
}

// ---------------------------------------------------------------- exactly-once client batches

/// The orders of the client-batch benches, on the batch fixture's users.
fn client_batch_orders() -> Vec<bench_api::UserOrderOp> {
    batch_fixture();
    codec_orders()
}

/// A client batch of 1,000 orders through `execute_batch_packed`'s handler, unkeyed: decode,
/// validate, run in one transaction, encode the reply.
#[bench(raw)]
fn client_batch_packed_1000() -> BenchResult {
    let arg = bench_api::packed::encode_ops(&client_batch_orders());
    let caller = ic_cdk::api::msg_caller();
    bench_fn(|| {
        let reply = crate::packed_batch(&arg, keyed_run(caller)).expect("the batch runs");
        std::hint::black_box(reply);
    })
}

/// Runs a keyed request under `caller`'s key as `execute_batch_keyed` does, without its
/// writer check and prune timer.
pub(crate) fn keyed_run(
    caller: candid::Principal,
) -> impl FnOnce(
    ic_rusqlite_batch::keyed::KeyedBatch,
) -> Result<ic_rusqlite_batch::keyed::KeyedOutcomes, bench_api::WriteError> {
    move |request| ic_rusqlite_batch::keyed::run(caller.as_slice(), request, ic_cdk::api::time())
}

/// The key of the keyed client-batch benches.
fn bench_key() -> bench_api::BatchKey {
    bench_api::BatchKey {
        created_at_time: ic_cdk::api::time(),
        id: [7; 16],
    }
}

/// The same batch keyed (request version 2): the same work plus the digest of the ops, the
/// key's lookup, and its record (key, digest, outcomes) in the batch's transaction. The
/// difference to `client_batch_packed_1000` is what exactly-once costs per batch.
#[bench(raw)]
fn client_batch_packed_keyed_1000() -> BenchResult {
    let arg = bench_api::packed::encode_keyed_ops(&bench_key(), &client_batch_orders());
    let caller = ic_cdk::api::msg_caller();
    bench_fn(|| {
        let reply = crate::packed_batch(&arg, keyed_run(caller)).expect("the batch runs");
        assert_eq!(reply[..2], [bench_api::packed::KEYED_REPLY_VERSION, 0]);
        std::hint::black_box(reply);
    })
}

/// A repeat of that keyed batch: the digest, the lookup, and the recorded outcomes decoded
/// and re-encoded; nothing runs.
#[bench(raw)]
fn client_batch_packed_keyed_duplicate_1000() -> BenchResult {
    let arg = bench_api::packed::encode_keyed_ops(&bench_key(), &client_batch_orders());
    let caller = ic_cdk::api::msg_caller();
    crate::packed_batch(&arg, keyed_run(caller)).expect("the batch runs");
    bench_fn(|| {
        let reply = crate::packed_batch(&arg, keyed_run(caller)).expect("answered");
        assert_eq!(
            reply[..2],
            [
                bench_api::packed::KEYED_REPLY_VERSION,
                bench_api::packed::FLAG_DUPLICATE
            ]
        );
        std::hint::black_box(reply);
    })
}
