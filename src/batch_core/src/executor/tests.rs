use super::*;
use crate::meter::{Budget, CountingMeter};
use crate::op::SqlValue;
use crate::testing::{
    count, dump, insert_order, insert_order_stmt, insert_user, insert_user_stmt, open_db,
};
use rusqlite::ffi::{
    SQLITE_CONSTRAINT_FOREIGNKEY as FOREIGN_KEY, SQLITE_CONSTRAINT_NOTNULL as NOT_NULL,
    SQLITE_CONSTRAINT_TRIGGER as TRIGGER, SQLITE_CONSTRAINT_UNIQUE as UNIQUE,
    SQLITE_ERROR as ERROR, SQLITE_FULL as FULL, SQLITE_INTERRUPT as INTERRUPT,
    SQLITE_MISUSE as MISUSE, SQLITE_RANGE as RANGE,
};

fn committed(rows_changed: u64, last_insert_rowid: i64) -> Outcome {
    Outcome::Committed {
        rows_changed,
        last_insert_rowid,
    }
}

fn failed(code: i32, error: &str) -> Outcome {
    Outcome::Failed(OpError {
        code,
        message: error.to_owned(),
    })
}

/// Runs `ops` batched on one database and one by one in autocommit mode on another; asserts
/// both give the same outcomes and contents, and returns the outcomes.
fn batched_equals_autocommit(
    setup: &[WriteOp],
    ops: &[WriteOp],
) -> (Vec<Outcome>, rusqlite::Connection) {
    let batched = open_db();
    let reference = open_db();
    for op in setup {
        assert!(execute_autocommit(&batched, op).is_committed());
        assert!(execute_autocommit(&reference, op).is_committed());
    }
    let outcomes = execute_batch(&batched, ops).expect("batch");
    let expected: Vec<Outcome> = ops
        .iter()
        .map(|op| execute_autocommit(&reference, op))
        .collect();
    assert_eq!(outcomes, expected);
    assert_eq!(dump(&batched), dump(&reference));
    assert!(batched.is_autocommit());
    (outcomes, batched)
}

#[test]
fn single_statement_outcomes() {
    let conn = open_db();
    assert_eq!(
        execute_autocommit(&conn, &insert_user("a", "a@x")),
        committed(1, 1)
    );
    assert_eq!(
        execute_autocommit(&conn, &insert_user("b", "b@x")),
        committed(1, 2)
    );
    assert_eq!(
        execute_autocommit(&conn, &insert_order(1, 5.0)),
        committed(1, 1)
    );
    // An UPDATE reports its rows and no rowid (not the connection's stale last insert rowid).
    let update = WriteOp::single("UPDATE users SET username = username || '!'", vec![]);
    assert_eq!(execute_autocommit(&conn, &update), committed(2, 0));
    let update_none = WriteOp::single(
        "UPDATE users SET username = 'z' WHERE user_id = ?1",
        vec![99.into()],
    );
    assert_eq!(execute_autocommit(&conn, &update_none), committed(0, 0));
    // DDL changes no rows, although SQLite's changes() still says 2 from the UPDATE.
    let ddl = WriteOp::single("CREATE TABLE extra (x INTEGER)", vec![]);
    assert_eq!(execute_autocommit(&conn, &ddl), committed(0, 0));
    let delete = WriteOp::single("DELETE FROM orders WHERE user_id = ?1", vec![1.into()]);
    assert_eq!(execute_autocommit(&conn, &delete), committed(1, 0));
    // RETURNING rows are discarded; the insert happens once.
    let returning = WriteOp::single(
        "INSERT INTO users (username, email) VALUES (?1, ?2) RETURNING user_id",
        vec!["c".into(), "c@x".into()],
    );
    assert_eq!(execute_autocommit(&conn, &returning), committed(1, 3));
    assert_eq!(count(&conn, "users"), 3);
}

#[test]
fn error_texts_are_sqlite_messages() {
    let conn = open_db();
    execute_autocommit(&conn, &insert_user("a", "a@x"));
    let cases: Vec<(WriteOp, i32, &str)> = vec![
        (
            insert_user("b", "a@x"),
            UNIQUE,
            "UNIQUE constraint failed: users.email",
        ),
        (
            insert_order(42, 1.0),
            FOREIGN_KEY,
            "FOREIGN KEY constraint failed",
        ),
        (
            WriteOp::single(
                crate::testing::INSERT_USER,
                vec![SqlValue::Null, "n@x".into()],
            ),
            NOT_NULL,
            "NOT NULL constraint failed: users.username",
        ),
        (
            WriteOp::single("INSRT INTO users VALUES (1)", vec![]),
            ERROR,
            "near \"INSRT\": syntax error in INSRT INTO users VALUES (1) at offset 0",
        ),
        (
            WriteOp::single("UPDATE users SET nickname = ?1", vec!["x".into()]),
            ERROR,
            "no such column: nickname",
        ),
        (
            WriteOp::single(crate::testing::INSERT_USER, vec!["only one".into()]),
            RANGE,
            "Wrong number of parameters passed to query. Got 1, needed 2",
        ),
        (
            WriteOp::single("DELETE FROM users; DELETE FROM orders", vec![]),
            MISUSE,
            "Multiple statements provided",
        ),
        (
            WriteOp::single("SELECT * FROM users", vec![]),
            MISUSE,
            NOT_A_WRITE_ERROR,
        ),
        (
            WriteOp::single("BEGIN", vec![]),
            rusqlite::ffi::SQLITE_AUTH,
            "refused, nothing happened: BEGIN would open a transaction that outlives the op (an op runs inside the transaction of its batch, or of its own)",
        ),
        (WriteOp::single("COMMIT", vec![]), MISUSE, NOT_A_WRITE_ERROR),
        (
            WriteOp::single("SAVEPOINT mine", vec![]),
            MISUSE,
            NOT_A_WRITE_ERROR,
        ),
        (
            WriteOp::single("  -- nothing", vec![]),
            MISUSE,
            NOT_A_WRITE_ERROR,
        ),
        (WriteOp::Unit(vec![]), MISUSE, EMPTY_UNIT_ERROR),
    ];
    for (op, code, error) in cases {
        assert_eq!(
            execute_autocommit(&conn, &op),
            failed(code, error),
            "{op:?}"
        );
        assert!(conn.is_autocommit(), "{op:?}");
    }
    assert_eq!(count(&conn, "users"), 1);
}

#[test]
fn failing_op_does_not_undo_the_others() {
    let ops = vec![
        insert_user("a", "a@x"),
        insert_user("b", "a@x"),
        WriteOp::single("INSRT", vec![]),
        WriteOp::single("SELECT 1", vec![]),
        insert_user("c", "c@x"),
        insert_order(2, 7.5),
        WriteOp::single("UPDATE orders SET amount = -1", vec![]),
    ];
    let (outcomes, conn) = batched_equals_autocommit(&[], &ops);
    assert_eq!(outcomes[0], committed(1, 1));
    assert_eq!(
        outcomes[1],
        failed(UNIQUE, "UNIQUE constraint failed: users.email")
    );
    assert_eq!(outcomes[4], committed(1, 2));
    assert_eq!(outcomes[5], committed(1, 1));
    assert_eq!(outcomes[6], failed(TRIGGER, "negative amount"));
    assert_eq!(count(&conn, "users"), 2);
}

#[test]
fn unit_applies_together() {
    let unit = WriteOp::Unit(vec![
        insert_user_stmt("a", "a@x"),
        insert_order_stmt(1, 3.0),
    ]);
    let (outcomes, conn) = batched_equals_autocommit(&[], &[unit]);
    assert_eq!(outcomes, vec![committed(2, 1)]);
    assert_eq!((count(&conn, "users"), count(&conn, "orders")), (1, 1));
}

#[test]
fn unit_savepoint_rollback() {
    let ops = vec![
        insert_user("a", "a@x"),
        WriteOp::Unit(vec![
            insert_user_stmt("b", "b@x"),
            insert_order_stmt(2, 1.0),
            insert_user_stmt("dup", "a@x"),
        ]),
        insert_user("c", "c@x"),
        WriteOp::Unit(vec![
            insert_user_stmt("d", "d@x"),
            Statement::new("COMMIT", vec![]),
        ]),
    ];
    let (outcomes, conn) = batched_equals_autocommit(&[], &ops);
    assert_eq!(
        outcomes,
        vec![
            committed(1, 1),
            failed(UNIQUE, "statement 2: UNIQUE constraint failed: users.email"),
            committed(1, 2),
            failed(MISUSE, &format!("statement 1: {NOT_A_WRITE_ERROR}")),
        ]
    );
    // Neither the user nor the order of the failed units exists.
    assert_eq!((count(&conn, "users"), count(&conn, "orders")), (2, 0));
}

#[test]
fn unit_in_autocommit_mode_uses_its_own_transaction() {
    let conn = open_db();
    let bad = WriteOp::Unit(vec![
        insert_user_stmt("a", "a@x"),
        insert_order_stmt(5, 1.0),
    ]);
    assert_eq!(
        execute_autocommit(&conn, &bad),
        failed(FOREIGN_KEY, "statement 1: FOREIGN KEY constraint failed")
    );
    assert!(conn.is_autocommit());
    assert_eq!(count(&conn, "users"), 0);
    let good = WriteOp::Unit(vec![
        insert_user_stmt("a", "a@x"),
        insert_order_stmt(1, 1.0),
    ]);
    assert_eq!(execute_autocommit(&conn, &good), committed(2, 1));
    assert!(conn.is_autocommit());
}

#[test]
fn transaction_rollback_reapplies_earlier_ops() {
    // INSERT OR ROLLBACK and RAISE(ROLLBACK) end the whole batch transaction: the earlier ops
    // are re-applied, the failing op fails, and the later ops run.
    let ops = vec![
        insert_user("a", "a@x"),
        insert_user("b", "b@x"),
        insert_user("dup", "a@x"),
        WriteOp::single(
            "INSERT OR ROLLBACK INTO users (username, email) VALUES (?1, ?2)",
            vec!["r".into(), "b@x".into()],
        ),
        insert_order(1, 10.0),
        insert_order(2, 2_000_000.0),
        WriteOp::Unit(vec![
            insert_user_stmt("u", "u@x"),
            insert_order_stmt(1, 5_000_000.0),
        ]),
        insert_user("c", "c@x"),
    ];
    let (outcomes, conn) = batched_equals_autocommit(&[], &ops);
    assert_eq!(
        outcomes,
        vec![
            committed(1, 1),
            committed(1, 2),
            failed(UNIQUE, "UNIQUE constraint failed: users.email"),
            failed(UNIQUE, "UNIQUE constraint failed: users.email"),
            committed(1, 1),
            failed(TRIGGER, "amount over limit"),
            failed(TRIGGER, "statement 1: amount over limit"),
            committed(1, 3),
        ]
    );
    assert_eq!((count(&conn, "users"), count(&conn, "orders")), (3, 1));
}

#[test]
fn full_disk_rolls_back_and_reapplies() {
    // SQLITE_FULL may leave the transaction half-done: the executor rolls it back and replays.
    let setup_conn = |conn: &rusqlite::Connection| {
        let pages: i64 = conn
            .query_row("PRAGMA page_count", [], |r| r.get(0))
            .unwrap();
        conn.query_row(
            &format!("PRAGMA max_page_count = {}", pages + 3),
            [],
            |_| Ok(()),
        )
        .unwrap();
    };
    let big = WriteOp::single(
        "INSERT INTO users (username, email) VALUES (?1, ?2)",
        vec![SqlValue::Blob(vec![7; 64 * 1024]), "big@x".into()],
    );
    let ops = vec![insert_user("a", "a@x"), big, insert_user("b", "b@x")];
    let batched = open_db();
    let reference = open_db();
    setup_conn(&batched);
    setup_conn(&reference);
    let outcomes = execute_batch(&batched, &ops).unwrap();
    let expected: Vec<_> = ops
        .iter()
        .map(|op| execute_autocommit(&reference, op))
        .collect();
    assert_eq!(outcomes, expected);
    assert_eq!(outcomes[1], failed(FULL, "database or disk is full"));
    assert_eq!(dump(&batched), dump(&reference));
    assert_eq!(count(&batched, "users"), 2);
}

#[test]
fn empty_batch_touches_nothing() {
    let conn = open_db();
    conn.execute_batch("BEGIN").unwrap();
    // Would fail with Begin if it tried to start a transaction.
    assert_eq!(execute_batch(&conn, &[]).unwrap(), vec![]);
    conn.execute_batch("ROLLBACK").unwrap();
}

#[test]
fn begin_failure_leaves_the_callers_transaction_alone() {
    let conn = open_db();
    conn.execute_batch("BEGIN; INSERT INTO users (username, email) VALUES ('t', 't@x');")
        .unwrap();
    let error = execute_batch(&conn, &[insert_user("a", "a@x")]).unwrap_err();
    assert!(matches!(error, FlushError::Begin(_)), "{error:?}");
    assert_eq!(
        error.to_string(),
        "BEGIN failed: cannot start a transaction within a transaction"
    );
    assert!(!conn.is_autocommit());
    conn.execute_batch("COMMIT").unwrap();
    assert_eq!(count(&conn, "users"), 1);
}

#[test]
fn commit_failure_rolls_back() {
    let conn = open_db();
    conn.execute_batch(
        "CREATE TABLE deferred (user_id INTEGER REFERENCES users(user_id) DEFERRABLE INITIALLY DEFERRED);",
    )
    .unwrap();
    let ops = vec![
        insert_user("a", "a@x"),
        WriteOp::single("INSERT INTO deferred (user_id) VALUES (99)", vec![]),
    ];
    let error = execute_batch(&conn, &ops).unwrap_err();
    assert!(matches!(error, FlushError::Commit(_)), "{error:?}");
    assert_eq!(
        error.to_string(),
        "COMMIT failed: FOREIGN KEY constraint failed"
    );
    assert!(conn.is_autocommit());
    assert_eq!(count(&conn, "users"), 0);
    // Alone, the deferred violation is the op's own failure.
    assert_eq!(
        execute_autocommit(&conn, &ops[1]),
        failed(FOREIGN_KEY, "FOREIGN KEY constraint failed")
    );
    let unit = WriteOp::Unit(vec![Statement::new(
        "INSERT INTO deferred (user_id) VALUES (98)",
        vec![],
    )]);
    assert_eq!(
        execute_autocommit(&conn, &unit),
        failed(FOREIGN_KEY, "RELEASE failed: FOREIGN KEY constraint failed")
    );
    assert!(conn.is_autocommit());
    assert_eq!(count(&conn, "deferred"), 0);
}

/// A panic that unwinds through a batch (here from the statements run before `COMMIT`, as a
/// caller's hook might) rolls the transaction back: the connection is left in autocommit mode
/// with none of the ops applied, and the next batch runs as if nothing had happened.
#[test]
fn a_panic_inside_a_batch_rolls_it_back() {
    let conn = open_db();
    let ops = vec![insert_user("a", "a@x"), insert_user("b", "b@x")];
    let budget = Budget::new(CountingMeter::new(1), 1_000_000);
    let mut seen = 0;
    let mut hook = |_: &rusqlite::Connection, outcomes: &[Outcome]| -> rusqlite::Result<()> {
        seen = outcomes.len();
        panic!("the hook panics");
    };
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        execute_batch_within_then(&conn, &ops, &budget, Some(&mut hook))
    }));
    assert!(result.is_err(), "the panic reaches the caller");
    assert_eq!(seen, 2, "both ops ran before the hook");
    assert!(conn.is_autocommit(), "the transaction was rolled back");
    assert_eq!(count(&conn, "users"), 0);
    assert_eq!(
        execute_batch(&conn, &ops).unwrap(),
        vec![committed(1, 1), committed(1, 2)]
    );
    assert_eq!(count(&conn, "users"), 2);
}

/// An error from the statements run before `COMMIT` rolls the batch back and is reported as
/// [`FlushError::BeforeCommit`]; the connection takes the next batch.
#[test]
fn a_failing_before_commit_rolls_the_batch_back() {
    let conn = open_db();
    let ops = vec![insert_user("a", "a@x")];
    let budget = Budget::new(CountingMeter::new(1), 1_000_000);
    let mut hook = |conn: &rusqlite::Connection, _: &[Outcome]| -> rusqlite::Result<()> {
        conn.execute_batch("INSERT INTO no_such_table VALUES (1)")
    };
    let error = execute_batch_within_then(&conn, &ops, &budget, Some(&mut hook)).unwrap_err();
    assert!(matches!(error, FlushError::BeforeCommit(_)), "{error:?}");
    assert_eq!(
        error.to_string(),
        "recording the batch before COMMIT failed: no such table: no_such_table"
    );
    assert!(conn.is_autocommit());
    assert_eq!(count(&conn, "users"), 0);
    assert_eq!(execute_batch(&conn, &ops).unwrap(), vec![committed(1, 1)]);
}

/// The SQL of every statement prepared (and not finalized) on `conn`: what the statement
/// cache holds once nothing is running.
fn prepared_statements(conn: &rusqlite::Connection) -> Vec<String> {
    let mut sqls = Vec::new();
    // SAFETY: the handle is valid while `conn` lives; statements are only inspected.
    unsafe {
        let db = conn.handle();
        let mut stmt = rusqlite::ffi::sqlite3_next_stmt(db, std::ptr::null_mut());
        while !stmt.is_null() {
            let sql = std::ffi::CStr::from_ptr(rusqlite::ffi::sqlite3_sql(stmt));
            sqls.push(sql.to_string_lossy().into_owned());
            stmt = rusqlite::ffi::sqlite3_next_stmt(db, stmt);
        }
    }
    sqls.sort();
    sqls
}

#[test]
fn statements_are_prepared_once_and_cached() {
    let conn = open_db();
    // Room for every statement of the batch (rusqlite's default is 16; see the crate docs).
    conn.set_prepared_statement_cache_capacity(64);
    let mut ops: Vec<WriteOp> = (0..50)
        .map(|i| insert_user("u", &format!("{i}@x")))
        .collect();
    ops.push(WriteOp::Unit(vec![
        insert_order_stmt(1, 1.0),
        insert_order_stmt(2, 2.0),
    ]));
    assert!(
        execute_batch(&conn, &ops)
            .unwrap()
            .iter()
            .all(Outcome::is_committed)
    );
    // Each distinct SQL text is prepared once and stays in the connection's cache: the 50
    // user inserts ran as chunks of 32, 16 and 2 rows; the coalescer's own reads of the schema
    // and of the largest rowid are SELECTs or PRAGMAs.
    let chunk = |rows: usize| {
        format!(
            "INSERT OR FAIL INTO users (username, email) VALUES {}",
            vec!["(?,?)"; rows].join(",")
        )
    };
    let mut expected = vec![
        BEGIN.to_owned(),
        COMMIT.to_owned(),
        RELEASE.to_owned(),
        SAVEPOINT.to_owned(),
        crate::testing::INSERT_ORDER.to_owned(),
        chunk(2),
        chunk(16),
        chunk(32),
    ];
    expected.sort();
    let prepared = prepared_statements(&conn);
    let (reads, writes): (Vec<String>, Vec<String>) = prepared
        .into_iter()
        .partition(|sql| sql.starts_with("SELECT") || sql.starts_with("PRAGMA"));
    assert_eq!(writes, expected);
    let mut distinct = reads.clone();
    distinct.dedup();
    assert_eq!(distinct, reads);
    assert_eq!(count(&conn, "users"), 50);
}

/// A write that changes nothing and runs about 200,000 virtual-machine operations (about 200
/// progress-handler reads at the default period).
const HEAVY: &str = "INSERT INTO users (username, email) SELECT 'never', 'never@x' FROM \
    (WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 40000) \
    SELECT x FROM c) WHERE x < 0";

fn heavy() -> WriteOp {
    WriteOp::single(HEAVY, vec![])
}

/// A meter that only moves while statements run: 1 per progress-handler read.
fn statement_meter() -> CountingMeter {
    CountingMeter::with_statement_step(0, 1)
}

#[test]
fn the_heavy_op_is_heavy_and_harmless_without_a_guard() {
    let conn = open_db();
    assert_eq!(execute_autocommit(&conn, &heavy()), committed(0, 0));
    let meter = statement_meter();
    let outcome = execute_autocommit_within(&conn, &heavy(), &Budget::new(meter.clone(), 1_000));
    assert_eq!(outcome, committed(0, 0));
    // About one read per 1,000 operations: it needs far more than the guards below allow.
    assert!(meter.statement_reads() > 150, "{}", meter.statement_reads());
}

#[test]
fn autocommit_within_interrupts_an_op_over_its_limit() {
    let conn = open_db();
    let meter = statement_meter();
    let outcome = execute_autocommit_within(&conn, &heavy(), &Budget::new(meter.clone(), 50));
    assert_eq!(
        outcome,
        failed(
            INTERRUPT,
            "interrupted: the op was still running after its limit of 50 instructions and was rolled back"
        )
    );
    // The handler stopped it at the limit, not at the end.
    assert_eq!(meter.statement_reads(), 50);
    assert!(conn.is_autocommit());
    // The guard is gone: the same op without a budget runs to completion.
    assert_eq!(execute_autocommit(&conn, &heavy()), committed(0, 0));
    // A unit is interrupted as a whole, its earlier statement undone.
    let unit = WriteOp::Unit(vec![
        insert_user_stmt("a", "a@x"),
        Statement::new(HEAVY, vec![]),
    ]);
    let outcome = execute_autocommit_within(&conn, &unit, &Budget::new(statement_meter(), 50));
    assert_eq!(outcome.code(), Some(INTERRUPT));
    assert_eq!(count(&conn, "users"), 0);
    assert!(conn.is_autocommit());
}

#[test]
fn batch_within_fails_the_interrupted_op_and_keeps_the_others() {
    let batched = open_db();
    let reference = open_db();
    let ops = vec![
        insert_user("a", "a@x"),
        insert_order(1, 2.0),
        heavy(),
        insert_user("b", "b@x"),
    ];
    // Budget 50: the ops before the heavy one use a few reads, the heavy one is interrupted at
    // 100 (the op limit); the batch has then used its budget, so the last op does not start.
    let outcomes =
        execute_batch_within(&batched, &ops, &Budget::new(statement_meter(), 50)).unwrap();
    let expected_first: Vec<Outcome> = ops[..2]
        .iter()
        .map(|op| execute_autocommit(&reference, op))
        .collect();
    assert_eq!(outcomes[..2], expected_first[..]);
    assert_eq!(
        outcomes[2],
        failed(
            INTERRUPT,
            "interrupted: the batch reached its limit of 100 instructions while this op ran; the op was rolled back (run it alone or in a smaller batch)"
        )
    );
    assert_eq!(outcomes[3], Outcome::NotExecuted);
    assert_eq!(dump(&batched), dump(&reference));
    assert!(batched.is_autocommit());
    // With a larger budget the same batch commits everything.
    let roomy = open_db();
    let outcomes =
        execute_batch_within(&roomy, &ops, &Budget::new(statement_meter(), 1_000)).unwrap();
    assert!(outcomes.iter().all(Outcome::is_committed), "{outcomes:?}");
}

#[test]
fn batch_within_an_interrupted_first_op_lets_nothing_else_start() {
    let conn = open_db();
    let ops = vec![heavy(), insert_user("a", "a@x")];
    let outcomes = execute_batch_within(&conn, &ops, &Budget::new(statement_meter(), 50)).unwrap();
    assert_eq!(outcomes[0].code(), Some(INTERRUPT));
    assert_eq!(outcomes[1], Outcome::NotExecuted);
    assert_eq!(count(&conn, "users"), 0);
}
