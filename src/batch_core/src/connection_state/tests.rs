//! Statements that would change the connection are refused before they take effect, in every
//! path that runs ops (a queue's flush, a client batch, an op alone), and the refusal is true:
//! the flag they would have set is not set.

use rusqlite::Connection;

use crate::op::{OpOutcome, Statement, WriteOp};
use crate::testing::{count, insert_order, insert_user, open_db};
use crate::{
    BatchQueue, Budget, Config, CountingMeter, OpStatus, execute_autocommit,
    execute_autocommit_within, execute_batch, execute_batch_within,
};

const SQLITE_AUTH: i32 = 23;

fn sql(text: &str) -> WriteOp {
    WriteOp::single(text.to_owned(), vec![])
}

fn refused_pragma(name: &str) -> OpOutcome {
    OpOutcome::Failed {
        code: SQLITE_AUTH,
        error: format!(
            "refused, nothing happened: PRAGMA {name} with an argument changes the connection while it is compiled, outside any transaction (an op may only set user_version and application_id)"
        ),
    }
}

fn foreign_key_failure() -> OpOutcome {
    OpOutcome::Failed {
        code: rusqlite::ffi::SQLITE_CONSTRAINT_FOREIGNKEY,
        error: "FOREIGN KEY constraint failed".into(),
    }
}

fn pragma(conn: &Connection, name: &str) -> i64 {
    conn.query_row(&format!("PRAGMA {name}"), [], |row| row.get(0))
        .unwrap()
}

/// Every way of running an op: alone, alone within a budget, in a client batch, in a client
/// batch within a budget, through a queue's flush. Returns the op's outcome.
fn run_each_way(conn: &Connection, op: &WriteOp) -> Vec<OpOutcome> {
    let budget = Budget::new(CountingMeter::new(1), 1_000_000);
    let mut queue = BatchQueue::new(Config::default()).unwrap();
    let ticket = queue.submit(op.clone(), 0).unwrap().ticket;
    queue.flush(conn, &CountingMeter::new(1)).unwrap();
    let OpStatus::Done(queued) = queue.status(ticket) else {
        panic!("{:?}", queue.status(ticket))
    };
    vec![
        execute_autocommit(conn, op),
        execute_autocommit_within(conn, op, &budget),
        execute_batch(conn, std::slice::from_ref(op))
            .unwrap()
            .remove(0),
        execute_batch_within(conn, std::slice::from_ref(op), &budget)
            .unwrap()
            .remove(0),
        queued,
    ]
}

#[test]
fn foreign_keys_off_is_refused_and_orders_of_missing_users_still_fail() {
    let conn = open_db();
    // The statement cached for orders, compiled while foreign keys are on.
    assert_eq!(
        execute_autocommit(&conn, &insert_order(99, 1.0)),
        foreign_key_failure()
    );
    for outcome in run_each_way(&conn, &sql("PRAGMA foreign_keys = OFF")) {
        assert_eq!(outcome, refused_pragma("foreign_keys"));
    }
    assert_eq!(pragma(&conn, "foreign_keys"), 1);
    for outcome in run_each_way(&conn, &insert_order(99, 1.0)) {
        assert_eq!(outcome, foreign_key_failure());
    }
    // Then `= ON` (refused too) does not leave a statement compiled without the check.
    for outcome in run_each_way(&conn, &sql("PRAGMA foreign_keys = ON")) {
        assert_eq!(outcome, refused_pragma("foreign_keys"));
    }
    assert_eq!(
        execute_autocommit(&conn, &insert_order(99, 2.0)),
        foreign_key_failure()
    );
    assert_eq!(count(&conn, "orders"), 0);
}

#[test]
fn writable_schema_is_refused_and_the_schema_stays_read_only() {
    let conn = open_db();
    for outcome in run_each_way(&conn, &sql("PRAGMA writable_schema = 1")) {
        assert_eq!(outcome, refused_pragma("writable_schema"));
    }
    let update = sql("UPDATE sqlite_master SET sql = sql WHERE name = 'users'");
    for outcome in run_each_way(&conn, &update) {
        assert_eq!(
            outcome,
            OpOutcome::Failed {
                code: 1,
                error: "table sqlite_master may not be modified".into()
            }
        );
    }
}

#[test]
fn query_only_is_refused_and_writes_go_on() {
    let conn = open_db();
    // In a unit too: the unit fails whole, naming the statement.
    let unit = WriteOp::unit(vec![
        Statement::new(crate::testing::INSERT_USER, vec!["a".into(), "a@x".into()]),
        Statement::new("PRAGMA query_only = 1", vec![]),
    ]);
    let refused = refused_pragma("query_only");
    let OpOutcome::Failed { error, .. } = &refused else {
        unreachable!()
    };
    for outcome in run_each_way(&conn, &unit) {
        assert_eq!(
            outcome,
            OpOutcome::Failed {
                code: SQLITE_AUTH,
                error: format!("statement 1: {error}")
            }
        );
    }
    for outcome in run_each_way(&conn, &sql("PRAGMA query_only = 1")) {
        assert_eq!(outcome, refused);
    }
    assert_eq!(pragma(&conn, "query_only"), 0);
    assert_eq!(
        count(&conn, "users"),
        0,
        "the refused unit inserted nothing"
    );
    let mut queue = BatchQueue::new(Config::default()).unwrap();
    for i in 0..3 {
        queue
            .submit(insert_user(&format!("u{i}"), &format!("{i}@x")), 0)
            .unwrap();
    }
    let report = queue.flush(&conn, &CountingMeter::new(1)).unwrap();
    assert_eq!((report.committed, report.failed), (3, 0));
}

#[test]
fn attach_detach_and_temporary_objects_are_refused() {
    let conn = open_db();
    let attach = OpOutcome::Failed {
        code: SQLITE_AUTH,
        error: "refused, nothing happened: ATTACH and DETACH change the databases of the connection, not the data".into(),
    };
    let temp = OpOutcome::Failed {
        code: SQLITE_AUTH,
        error: "refused, nothing happened: temporary tables, indexes, views and triggers belong to the connection, not to the database, and vanish when it is reopened".into(),
    };
    for outcome in run_each_way(&conn, &sql("ATTACH ':memory:' AS other")) {
        assert_eq!(outcome, attach);
    }
    for outcome in run_each_way(&conn, &sql("DETACH main")) {
        assert_eq!(outcome, attach);
    }
    for text in [
        "CREATE TEMP TABLE users (x)",
        "CREATE TEMPORARY VIEW v AS SELECT 1",
        "CREATE TEMP TRIGGER t AFTER INSERT ON users BEGIN DELETE FROM users; END",
    ] {
        for outcome in run_each_way(&conn, &sql(text)) {
            assert_eq!(outcome, temp, "{text}");
        }
    }
    let databases: i64 = conn
        .query_row("SELECT count(*) FROM pragma_database_list", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(databases, 1, "nothing was attached");
    let temp_objects: i64 = conn
        .query_row("SELECT count(*) FROM temp.sqlite_schema", [], |r| r.get(0))
        .unwrap();
    assert_eq!(temp_objects, 0);
    // Inserts still reach the main table.
    assert!(execute_autocommit(&conn, &insert_user("u", "u@x")).is_committed());
    assert_eq!(count(&conn, "main.users"), 1);
}

#[test]
fn header_pragmas_and_pragma_queries_are_not_refused() {
    let conn = open_db();
    assert_eq!(
        execute_autocommit(&conn, &sql("PRAGMA user_version = 7")),
        OpOutcome::Committed {
            rows_changed: 0,
            last_insert_rowid: 0
        }
    );
    assert_eq!(pragma(&conn, "user_version"), 7);
    // A query is not refused as a change, but it is not a write either.
    assert_eq!(
        execute_autocommit(&conn, &sql("PRAGMA foreign_keys")),
        OpOutcome::Failed {
            code: rusqlite::ffi::SQLITE_MISUSE,
            error: crate::executor::NOT_A_WRITE_ERROR.into()
        }
    );
    // The application's own pragmas, outside ops, are its business.
    conn.execute_batch("PRAGMA foreign_keys = OFF").unwrap();
    assert_eq!(pragma(&conn, "foreign_keys"), 0);
}

/// The authorizer belongs to one connection: a new connection, even at the address of a closed
/// one, gets its own.
#[test]
fn every_connection_is_guarded() {
    for _ in 0..3 {
        let conn = open_db();
        assert_eq!(
            execute_autocommit(&conn, &sql("PRAGMA foreign_keys = OFF")),
            refused_pragma("foreign_keys")
        );
        drop(conn);
    }
    // Replacing the authorizer removes batch_core's; the next execution installs it again.
    let conn = open_db();
    assert_eq!(
        execute_autocommit(&conn, &sql("PRAGMA foreign_keys = OFF")),
        refused_pragma("foreign_keys")
    );
    conn.authorizer(Some(|_: rusqlite::hooks::AuthContext<'_>| {
        rusqlite::hooks::Authorization::Allow
    }))
    .unwrap();
    assert_eq!(
        execute_autocommit(&conn, &sql("PRAGMA foreign_keys = OFF")),
        refused_pragma("foreign_keys")
    );
    assert_eq!(pragma(&conn, "foreign_keys"), 1);
}
