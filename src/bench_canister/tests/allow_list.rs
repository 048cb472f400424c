//! Controller SQL runs under an allow-list, tried on the canister as an attacker or a careless
//! operator would: a temp table that would shadow `orders` (every later write acknowledged,
//! then lost at the next upgrade) is refused however it is spelled, and the orders written
//! after it survive the upgrade, exactly; the library's own tables (the keys of exactly-once
//! batches) are out of reach, so a resent keyed batch is answered with its original outcomes
//! and never runs twice. Every assertion is exact. Build the wasm first with scripts/build.sh.

use bench_api::*;
use bench_suite::client::{CONTROLLER, Client};

/// The columns of `orders` (`bench_api::schema`), for a table that would shadow it.
const ORDERS_COLUMNS: &str = "(order_id INTEGER PRIMARY KEY AUTOINCREMENT, user_id INTEGER NOT NULL, \
     amount REAL NOT NULL, created_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP)";

fn failed(code: i32, message: &str) -> Outcome {
    Outcome::Failed(OpError {
        code,
        message: message.into(),
    })
}

fn temp(object: &str) -> Outcome {
    failed(
        23,
        &format!(
            "refused, nothing happened: {object} is in the temp schema, which belongs to the connection, not to the database, and vanishes when the connection is reopened (at every upgrade of a canister)"
        ),
    )
}

fn virtual_table(object: &str, module: &str) -> Outcome {
    failed(
        23,
        &format!(
            "refused, nothing happened: {object} is a virtual table (module {module}): an op may not create or drop one, as its module runs code of its own on the connection"
        ),
    )
}

fn library(name: &str) -> Outcome {
    failed(
        23,
        &format!(
            "refused, nothing happened: {name} belongs to the library (the prefix batch_core_ is reserved: its tables change only through the library)"
        ),
    )
}

fn committed(rowid: i64) -> Outcome {
    Outcome::Committed {
        rows_changed: 1,
        last_insert_rowid: rowid,
    }
}

/// `execute_sql` of `statements` by the controller.
fn execute_all(c: &mut Client, statements: Vec<SqlStatement>) -> Outcome {
    Result::from(c.update::<WriteResult, _>("execute_sql", (statements,)))
        .expect("a controller's SQL is executed")
}

fn statement(sql: &str, params: Vec<SqlParam>) -> SqlStatement {
    SqlStatement {
        sql: sql.into(),
        params,
    }
}

/// `execute_sql` of one statement without parameters by the controller.
fn execute(c: &mut Client, sql: &str) -> Outcome {
    execute_all(c, vec![statement(sql, vec![])])
}

/// The outcome of a flushed ticket.
fn outcome_of(c: &mut Client, ticket: Ticket) -> Outcome {
    match c.ticket(ticket) {
        TicketStatus::Committed {
            rows_changed,
            last_insert_rowid,
        } => Outcome::Committed {
            rows_changed,
            last_insert_rowid,
        },
        TicketStatus::Failed(e) => Outcome::Failed(e),
        other => panic!("ticket {ticket}: {other:?}"),
    }
}

fn flush(c: &mut Client) {
    Result::from(c.update::<FlushResult, _>("flush", ())).expect("flushed");
}

/// `submit_sql` of one statement by the controller, flushed: its outcome.
fn submit_and_flush(c: &mut Client, sql: &str) -> Outcome {
    let ticket = c.submit_sql(sql);
    flush(c);
    outcome_of(c, ticket)
}

fn orders(user_id: i64, first_amount: f64, n: usize) -> Vec<UserOrderOp> {
    (0..n)
        .map(|i| UserOrderOp::CreateOrder {
            user_id,
            amount: first_amount + i as f64,
        })
        .collect()
}

fn keyed(c: &mut Client, ops: &[UserOrderOp], key: &BatchKey) -> BatchResult {
    c.update_as(CONTROLLER, "execute_batch", (ops.to_vec(), Some(key)))
}

/// A controller's `CREATE TABLE temp.orders` with the columns of `orders` shadowed it: every
/// later write, unbatched, queued or keyed, answered `Committed` and went to the temp table,
/// gone at the next upgrade. Every spelling of a temp object (and every temp virtual table) is
/// refused, through `execute_sql` and `submit_sql`; then 30 orders written every way are all in
/// `orders`, before and after an upgrade, and a keyed resend answers outcomes that are true.
#[test]
fn no_temp_object_shadows_orders_and_every_acknowledged_order_survives_an_upgrade() {
    let mut c = Client::install(InitArgs::default());
    assert_eq!(c.create_user("alice"), 1);
    for (sql, object) in [
        (
            format!("CREATE TABLE temp.orders {ORDERS_COLUMNS}"),
            "temp.orders",
        ),
        (
            format!("CREATE TEMP TABLE orders {ORDERS_COLUMNS}"),
            "temp.orders",
        ),
        (
            format!("CREATE TABLE \"temp\".orders {ORDERS_COLUMNS}"),
            "temp.orders",
        ),
        (
            format!("CREATE TABLE TEMP.\"orders\" {ORDERS_COLUMNS}"),
            "temp.orders",
        ),
        (
            "CREATE TABLE temp.orders AS SELECT * FROM main.orders".to_owned(),
            "temp.orders",
        ),
        (
            "CREATE VIEW temp.orders AS SELECT * FROM main.orders".to_owned(),
            "temp.orders",
        ),
        (
            // It would delete every order as soon as it was acknowledged.
            "CREATE TRIGGER temp.t AFTER INSERT ON main.orders \
             BEGIN DELETE FROM orders WHERE order_id = NEW.order_id; END"
                .to_owned(),
            "temp.t",
        ),
    ] {
        assert_eq!(execute(&mut c, &sql), temp(object), "{sql}");
        assert_eq!(submit_and_flush(&mut c, &sql), temp(object), "{sql}");
    }
    for (module, args) in [
        ("dbstat", ""),
        ("rtree", "(id, x0, x1)"),
        ("fts5vocab", "(main, orders, row)"),
        ("fts4aux", "(orders)"),
    ] {
        let sql = format!("CREATE VIRTUAL TABLE temp.v USING {module}{args}");
        assert_eq!(
            execute(&mut c, &sql),
            virtual_table("temp.v", module),
            "{sql}"
        );
        assert_eq!(
            submit_and_flush(&mut c, &sql),
            virtual_table("temp.v", module),
            "{sql}"
        );
    }

    // A transaction left open would make every later write join it, acknowledged and never
    // committed: BEGIN is refused too, alone and queued.
    let begin = failed(
        23,
        "refused, nothing happened: BEGIN would open a transaction that outlives the op (an op runs inside the transaction of its batch, or of its own)",
    );
    for sql in ["BEGIN IMMEDIATE", "BEGIN EXCLUSIVE TRANSACTION"] {
        assert_eq!(execute(&mut c, sql), begin, "{sql}");
        assert_eq!(submit_and_flush(&mut c, sql), begin, "{sql}");
    }

    // 30 orders: 10 unbatched, 10 queued, 10 in a keyed client batch.
    for i in 0..10i64 {
        let r = c.write_as(CONTROLLER, "create_order", (1i64, i as f64));
        assert_eq!(Result::from(r), Ok(committed(i + 1)));
    }
    let tickets: Vec<Ticket> = (0..10)
        .map(|i| c.submit_order(1, 10.0 + i as f64).unwrap())
        .collect();
    flush(&mut c);
    for (i, ticket) in tickets.into_iter().enumerate() {
        assert_eq!(outcome_of(&mut c, ticket), committed(11 + i as i64));
    }
    let key = BatchKey {
        created_at_time: c.canister.time(),
        id: [5; 16],
    };
    let ops = orders(1, 20.0, 10);
    let outcomes: Vec<Outcome> = (21..=30).map(committed).collect();
    assert_eq!(keyed(&mut c, &ops, &key), BatchResult::Ok(outcomes.clone()));

    let before = c.orders_of(1);
    assert_eq!(
        before.iter().map(|o| o.order_id).collect::<Vec<_>>(),
        (1..=30).collect::<Vec<_>>()
    );
    assert_eq!(c.counts().orders, 30);
    let upgrade = c.upgrade(None);
    assert!(!upgrade.result.is_trap(), "{:?}", upgrade.result);
    assert_eq!(c.counts().orders, 30);
    assert_eq!(c.orders_of(1), before);
    // The resend is answered with the recorded outcomes, which are still true.
    assert_eq!(keyed(&mut c, &ops, &key), BatchResult::Duplicate(outcomes));
    assert_eq!(c.counts().orders, 30);
    let s = c.stats();
    assert_eq!((s.pending, s.flush_errors, s.alarm), (0, 0, None));
    assert!(c.traps().is_empty(), "{:?}", c.traps());
}

/// The library's tables are out of reach of a controller's SQL: after `DELETE FROM
/// batch_core_dedup_keys` a resent batch ran again (applied twice); after `DROP TABLE` of it
/// keyed batches failed until an upgrade, then an old key ran again; after `DELETE FROM
/// batch_core_dedup_meta` every keyed batch failed. Each is refused, alone or in a unit, also
/// when its text is one the library compiled itself (with the controller's parameters); a
/// refused op fails alone in its flush; resent batches are answered with their original
/// outcomes and never run twice, before and after an upgrade; new keys are still recorded.
#[test]
fn the_library_tables_are_out_of_reach_and_a_resent_batch_never_runs_twice() {
    let mut c = Client::install(InitArgs::default());
    assert_eq!(c.create_user("alice"), 1);
    let now = c.canister.time();
    let first_key = BatchKey {
        created_at_time: now,
        id: [1; 16],
    };
    let first_ops = orders(1, 0.5, 5);
    let first: Vec<Outcome> = (1..=5).map(committed).collect();
    assert_eq!(
        keyed(&mut c, &first_ops, &first_key),
        BatchResult::Ok(first.clone())
    );

    for (sql, name) in [
        ("DELETE FROM batch_core_dedup_keys", "batch_core_dedup_keys"),
        ("DROP TABLE batch_core_dedup_keys", "batch_core_dedup_keys"),
        ("DELETE FROM batch_core_dedup_meta", "batch_core_dedup_meta"),
        (
            "UPDATE batch_core_dedup_meta SET keys = 1000000",
            "batch_core_dedup_meta",
        ),
        (
            "ALTER TABLE batch_core_dedup_keys RENAME TO old_keys",
            "batch_core_dedup_keys",
        ),
        (
            "DELETE FROM main.\"BATCH_CORE_DEDUP_KEYS\"",
            "BATCH_CORE_DEDUP_KEYS",
        ),
    ] {
        assert_eq!(execute(&mut c, sql), library(name), "{sql}");
        assert_eq!(submit_and_flush(&mut c, sql), library(name), "{sql}");
    }
    // In a unit, the whole unit fails: its order is not inserted.
    let unit = vec![
        statement(
            "INSERT INTO orders (user_id, amount) VALUES (1, 99.0)",
            vec![],
        ),
        statement("DELETE FROM batch_core_dedup_keys", vec![]),
    ];
    let Outcome::Failed(OpError { message, .. }) = library("batch_core_dedup_keys") else {
        unreachable!()
    };
    assert_eq!(
        execute_all(&mut c, unit),
        failed(23, &format!("statement 1: {message}"))
    );
    // The library's own statements, sent with parameters of the controller's choosing: the
    // statement cache holds them compiled, but the text is refused before it reaches the cache.
    let forged_key = statement(
        "INSERT INTO batch_core_dedup_keys (created_at, caller, id, digest, outcomes) \
         VALUES (?1, ?2, ?3, ?4, ?5)",
        vec![
            SqlParam::Integer(now as i64),
            SqlParam::Blob(CONTROLLER.to_vec()),
            SqlParam::Blob(vec![2; 16]),
            SqlParam::Blob(vec![0; 16]),
            SqlParam::Blob(vec![]),
        ],
    );
    assert_eq!(
        execute_all(&mut c, vec![forged_key]),
        library("batch_core_dedup_keys")
    );
    let reserve_all = statement(
        "UPDATE batch_core_dedup_meta SET keys = keys + 1, bytes = bytes + ?1 \
         WHERE id = 0 AND keys + 1 <= ?2 AND bytes + ?1 <= ?3",
        vec![
            SqlParam::Integer(1 << 40),
            SqlParam::Integer(i64::MAX),
            SqlParam::Integer(i64::MAX),
        ],
    );
    assert_eq!(
        execute_all(&mut c, vec![reserve_all]),
        library("batch_core_dedup_meta")
    );
    // A refused op fails alone in its flush: the orders around it commit.
    let mut tickets: Vec<Ticket> = (0..3)
        .map(|i| c.submit_order(1, i as f64).unwrap())
        .collect();
    let refused = c.submit_sql("DELETE FROM batch_core_dedup_keys");
    tickets.extend((0..3).map(|i| c.submit_order(1, 3.0 + i as f64).unwrap()));
    flush(&mut c);
    assert_eq!(
        outcome_of(&mut c, refused),
        library("batch_core_dedup_keys")
    );
    for (i, ticket) in tickets.into_iter().enumerate() {
        assert_eq!(outcome_of(&mut c, ticket), committed(6 + i as i64));
    }
    assert_eq!(c.counts().orders, 11);

    // The resent batch is a duplicate and runs nothing.
    assert_eq!(
        keyed(&mut c, &first_ops, &first_key),
        BatchResult::Duplicate(first.clone())
    );
    assert_eq!(c.counts().orders, 11);
    // The counters are intact: a new key runs and is recorded.
    let second_key = BatchKey {
        created_at_time: now,
        id: [2; 16],
    };
    let second_ops = orders(1, 50.0, 5);
    let second: Vec<Outcome> = (12..=16).map(committed).collect();
    assert_eq!(
        keyed(&mut c, &second_ops, &second_key),
        BatchResult::Ok(second.clone())
    );
    assert_eq!(c.counts().orders, 16);
    let s = c.stats();
    assert_eq!(
        (s.keyed_batches, s.duplicates_answered, s.keys_held),
        (2, 1, 2)
    );

    // Across an upgrade: both keys are still answered, nothing runs twice.
    let upgrade = c.upgrade(None);
    assert!(!upgrade.result.is_trap(), "{:?}", upgrade.result);
    assert_eq!(
        keyed(&mut c, &first_ops, &first_key),
        BatchResult::Duplicate(first)
    );
    assert_eq!(
        keyed(&mut c, &second_ops, &second_key),
        BatchResult::Duplicate(second)
    );
    assert_eq!(c.counts().orders, 16);
    let s = c.stats();
    assert_eq!((s.keyed_batches, s.keys_held), (2, 2));
    assert!(c.traps().is_empty(), "{:?}", c.traps());
}
