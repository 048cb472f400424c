//! What an op may do, by allow-list, tried as an attacker or a careless operator would: in
//! every path that runs ops (a queue's flush, a client batch, an op alone), statements that
//! would change the connection, anything in the temp schema however it is spelled, every
//! virtual table module compiled in, and every statement on the library's own tables (direct,
//! through the statement cache, through a trigger or a view of the application) are refused
//! before they take effect, naming their object; what an op may do still runs.

use rusqlite::Connection;

use crate::op::{OpError, Outcome, SqlValue, Statement, WriteOp};
use crate::testing::{count, insert_order, insert_user, open_db};
use crate::{
    BatchDigest, BatchKey, BatchQueue, Budget, Config, CountingMeter, DedupConfig, Deduplicator,
    OpStatus, execute_autocommit, execute_autocommit_within, execute_batch, execute_batch_within,
};

const SQLITE_AUTH: i32 = 23;

fn sql(text: &str) -> WriteOp {
    WriteOp::single(text.to_owned(), vec![])
}

fn auth(error: String) -> Outcome {
    Outcome::Failed(OpError {
        code: SQLITE_AUTH,
        message: error,
    })
}

fn refused_pragma(name: &str) -> Outcome {
    auth(format!(
        "refused, nothing happened: PRAGMA {name} with an argument changes the connection while it is compiled, outside any transaction (an op may only set user_version and application_id)"
    ))
}

fn temp(object: &str) -> Outcome {
    auth(format!(
        "refused, nothing happened: {object} is in the temp schema, which belongs to the connection, not to the database, and vanishes when the connection is reopened (at every upgrade of a canister)"
    ))
}

fn virtual_table(object: &str, module: &str) -> Outcome {
    auth(format!(
        "refused, nothing happened: {object} is a virtual table (module {module}): an op may not create or drop one, as its module runs code of its own on the connection"
    ))
}

fn library(name: &str) -> Outcome {
    auth(format!(
        "refused, nothing happened: {name} belongs to the library (the prefix batch_core_ is reserved: its tables change only through the library)"
    ))
}

fn library_via(name: &str, via: &str) -> Outcome {
    auth(format!(
        "refused, nothing happened: {name} belongs to the library (the prefix batch_core_ is reserved: its tables change only through the library), reached through {via}"
    ))
}

fn committed(rows_changed: u64, last_insert_rowid: i64) -> Outcome {
    Outcome::Committed {
        rows_changed,
        last_insert_rowid,
    }
}

fn foreign_key_failure() -> Outcome {
    Outcome::Failed(OpError {
        code: rusqlite::ffi::SQLITE_CONSTRAINT_FOREIGNKEY,
        message: "FOREIGN KEY constraint failed".into(),
    })
}

fn pragma(conn: &Connection, name: &str) -> i64 {
    conn.query_row(&format!("PRAGMA {name}"), [], |row| row.get(0))
        .unwrap()
}

/// Every object of a schema (`main` or `temp`): type, name and SQL text.
fn schema(conn: &Connection, name: &str) -> Vec<(String, String, Option<String>)> {
    conn.prepare(&format!(
        "SELECT type, name, sql FROM {name}.sqlite_schema ORDER BY type, name"
    ))
    .unwrap()
    .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
    .unwrap()
    .collect::<Result<_, _>>()
    .unwrap()
}

/// Every row of the library's tables.
fn library_rows(conn: &Connection) -> Vec<Vec<SqlValue>> {
    let mut rows = Vec::new();
    for text in [
        "SELECT created_at, caller, id, digest, outcomes FROM batch_core_dedup_keys ORDER BY 1, 2, 3",
        "SELECT id, keys, bytes, NULL, NULL FROM batch_core_dedup_meta ORDER BY id",
    ] {
        let mut statement = conn.prepare(text).unwrap();
        let mapped = statement
            .query_map([], |row| {
                (0..5).map(|i| row.get::<_, SqlValue>(i)).collect()
            })
            .unwrap();
        for row in mapped {
            rows.push(row.unwrap());
        }
    }
    rows
}

/// Every way of running an op: alone, alone within a budget, in a client batch, in a client
/// batch within a budget, through a queue's flush. Returns the op's outcome.
fn run_each_way(conn: &Connection, op: &WriteOp) -> Vec<Outcome> {
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

/// `text` is refused every way with `expected`, and changes neither schema nor any row.
fn assert_refused(conn: &Connection, text: &str, expected: &Outcome) {
    let before = (
        schema(conn, "main"),
        schema(conn, "temp"),
        crate::testing::dump(conn),
    );
    for outcome in run_each_way(conn, &sql(text)) {
        assert_eq!(&outcome, expected, "{text}");
    }
    let after = (
        schema(conn, "main"),
        schema(conn, "temp"),
        crate::testing::dump(conn),
    );
    assert_eq!(before, after, "{text} changed nothing");
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
            Outcome::Failed(OpError {
                code: 1,
                message: "table sqlite_master may not be modified".into()
            })
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
    let Outcome::Failed(OpError { message: error, .. }) = &refused else {
        unreachable!()
    };
    for outcome in run_each_way(&conn, &unit) {
        assert_eq!(outcome, auth(format!("statement 1: {error}")));
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
fn attach_detach_and_vacuum_are_refused() {
    let conn = open_db();
    let attach = auth(
        "refused, nothing happened: ATTACH and DETACH change the databases of the connection, not the data".into(),
    );
    assert_refused(&conn, "ATTACH ':memory:' AS other", &attach);
    assert_refused(&conn, "DETACH main", &attach);
    // VACUUM attaches a database when it runs (alone: in a batch it cannot run at all), so
    // VACUUM INTO cannot write a file.
    let file = std::env::temp_dir().join(format!("allow_list_vacuum_{}.db", std::process::id()));
    let vacuum_into = sql(&format!("VACUUM INTO '{}'", file.display()));
    assert_eq!(execute_autocommit(&conn, &vacuum_into), attach);
    assert_eq!(execute_autocommit(&conn, &sql("VACUUM")), attach);
    assert!(!file.exists(), "{}", file.display());
    let databases: Vec<String> = conn
        .prepare("SELECT name FROM pragma_database_list")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    // VACUUM opened the connection's own temp database before it was refused; nothing was
    // attached.
    assert_eq!(databases, ["main", "temp"]);
}

/// A temp table of a main table's name shadows it: every later write would be acknowledged
/// and lost when the connection is reopened. Every spelling of the temp schema is refused,
/// naming the object; writes still reach the main tables.
#[test]
fn the_temp_schema_is_refused_however_it_is_spelled() {
    let conn = open_db();
    // The application's own temp table, made outside ops (an op cannot make one).
    conn.execute_batch("CREATE TEMP TABLE scratch (x)").unwrap();
    for (text, object) in [
        (
            "CREATE TEMP TABLE orders (order_id INTEGER PRIMARY KEY, user_id, amount)",
            "temp.orders",
        ),
        ("CREATE TEMPORARY TABLE orders (x)", "temp.orders"),
        ("CREATE TABLE temp.orders (x)", "temp.orders"),
        ("CREATE TABLE \"temp\".orders (x)", "temp.orders"),
        ("CREATE TABLE TEMP.orders (x)", "temp.orders"),
        ("CREATE TABLE [temp].\"orders\" (x)", "temp.orders"),
        ("CREATE TABLE `TeMp`.orders (x)", "temp.orders"),
        ("CREATE TABLE IF NOT EXISTS temp.orders (x)", "temp.orders"),
        (
            "CREATE TABLE temp.orders AS SELECT * FROM main.orders",
            "temp.orders",
        ),
        ("CREATE TEMP VIEW v AS SELECT 1", "temp.v"),
        ("CREATE TEMPORARY VIEW v AS SELECT 1", "temp.v"),
        ("CREATE VIEW temp.v AS SELECT * FROM main.orders", "temp.v"),
        ("CREATE VIEW \"temp\".v AS SELECT 1", "temp.v"),
        (
            "CREATE TEMP TRIGGER t AFTER INSERT ON orders BEGIN DELETE FROM orders; END",
            "temp.t",
        ),
        (
            "CREATE TRIGGER temp.t AFTER INSERT ON main.orders BEGIN DELETE FROM orders WHERE order_id = NEW.order_id; END",
            "temp.t",
        ),
        (
            "CREATE TRIGGER \"temp\".t BEFORE DELETE ON main.users BEGIN SELECT 1; END",
            "temp.t",
        ),
        ("CREATE INDEX temp.i ON scratch (x)", "temp.i"),
        ("CREATE INDEX i ON scratch (x)", "temp.i"),
        ("CREATE UNIQUE INDEX TEMP.i ON scratch (x)", "temp.i"),
        ("INSERT INTO scratch VALUES (1)", "temp.scratch"),
        ("INSERT INTO temp.scratch VALUES (1)", "temp.scratch"),
        ("UPDATE scratch SET x = 2", "temp.scratch"),
        ("DELETE FROM temp.scratch", "temp.scratch"),
        (
            "INSERT INTO users (username, email) SELECT x, x FROM temp.scratch",
            "temp.scratch",
        ),
        ("DROP TABLE temp.scratch", "temp.scratch"),
        ("DROP TABLE scratch", "temp.scratch"),
        ("ALTER TABLE temp.scratch ADD COLUMN y", "temp.scratch"),
        ("ALTER TABLE scratch RENAME TO orders", "temp.scratch"),
        ("PRAGMA temp.user_version = 1", "PRAGMA temp.user_version"),
    ] {
        assert_refused(&conn, text, &temp(object));
    }
    // Inserts still reach the main tables.
    assert_eq!(
        execute_autocommit(&conn, &insert_user("u", "u@x")),
        committed(1, 1)
    );
    assert_eq!(
        execute_autocommit(&conn, &insert_order(1, 1.0)),
        committed(1, 1)
    );
    assert_eq!(count(&conn, "main.orders"), 1);
    assert_eq!(count(&conn, "temp.scratch"), 0);
}

/// A write to the temp schema's table that SQLite reports with nothing after it (the
/// application made the schema writable): the statement compiled, so it is discarded rather
/// than cached, and refused every time.
#[test]
fn a_temp_schema_change_sqlite_names_no_object_for_is_refused_and_never_cached() {
    let conn = open_db();
    conn.pragma_update(None, "writable_schema", true).unwrap();
    let text = "INSERT INTO temp.sqlite_master (type, name, tbl_name, rootpage, sql) \
                VALUES ('table', 'orders', 'orders', 0, 'CREATE TABLE orders (x)')";
    let expected = auth(
        "refused, nothing happened: the statement changes the temp schema, which belongs to the connection, not to the database, and vanishes when the connection is reopened (at every upgrade of a canister)".into(),
    );
    for _ in 0..2 {
        assert_refused(&conn, text, &expected);
    }
    assert!(schema(&conn, "temp").is_empty());
}

/// Every virtual table module this SQLite has: creating one is refused in any schema, and so
/// is dropping one the application created; writing to the application's own is allowed.
#[test]
fn virtual_tables_of_every_module_are_refused() {
    let conn = open_db();
    let modules: Vec<String> = conn
        .prepare("SELECT name FROM pragma_module_list WHERE name NOT LIKE 'pragma%' ORDER BY name")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    for module in [
        "dbstat",
        "fts3",
        "fts4",
        "fts4aux",
        "fts5",
        "fts5vocab",
        "rtree",
        "rtree_i32",
    ] {
        assert!(modules.iter().any(|m| m == module), "{module}: {modules:?}");
    }
    for module in &modules {
        for (text, object) in [
            (
                format!("CREATE VIRTUAL TABLE temp.v USING {module}(a)"),
                "temp.v",
            ),
            (
                format!("CREATE VIRTUAL TABLE \"TEMP\".v USING {module}(a)"),
                "temp.v",
            ),
            (
                format!("CREATE VIRTUAL TABLE v USING {module}(a)"),
                "main.v",
            ),
            (
                format!("CREATE VIRTUAL TABLE IF NOT EXISTS main.v USING {module}(a)"),
                "main.v",
            ),
        ] {
            assert_refused(&conn, &text, &virtual_table(object, module));
        }
    }
    // The application's own virtual tables, made outside ops.
    conn.execute_batch(
        "CREATE VIRTUAL TABLE boxes USING rtree(id, x0, x1);
         CREATE VIRTUAL TABLE temp.notes USING fts5(body);",
    )
    .unwrap();
    assert_refused(
        &conn,
        "DROP TABLE boxes",
        &virtual_table("main.boxes", "rtree"),
    );
    assert_refused(
        &conn,
        "DROP TABLE temp.notes",
        &virtual_table("temp.notes", "fts5"),
    );
    assert_refused(
        &conn,
        "INSERT INTO notes (body) VALUES ('x')",
        &temp("temp.notes"),
    );
    assert_eq!(
        execute_autocommit(&conn, &sql("INSERT INTO boxes VALUES (7, 0, 1)")),
        committed(1, 7)
    );
    assert_eq!(count(&conn, "boxes"), 1);
}

fn keyed_batch(d: &mut Deduplicator, conn: &Connection, n: u8) -> crate::KeyedOutcomes {
    let ops = vec![insert_user(&format!("k{n}"), &format!("k{n}@x"))];
    let budget = Budget::new(CountingMeter::new(1), 1_000_000);
    d.execute_keyed_within(
        conn,
        b"alice",
        &BatchKey {
            created_at_time: NOW,
            id: [n; 16],
        },
        &BatchDigest::of_ops(&ops),
        &ops,
        &budget,
        NOW,
    )
    .unwrap()
}

const NOW: u64 = 10 * crate::DEFAULT_WINDOW_NS;

/// Nothing an op does reaches the library's tables: deleting the keys would make a resent
/// batch run twice, dropping them or emptying the counters would fail every keyed batch. Every
/// spelling and statement is refused before it is compiled, naming the table as written, and a
/// resent batch is still answered with its recorded outcomes.
#[test]
fn the_library_tables_are_out_of_reach_whatever_the_statement() {
    let conn = open_db();
    let mut d = Deduplicator::new(DedupConfig::default()).unwrap();
    let first = keyed_batch(&mut d, &conn, 1);
    assert!(!first.duplicate);
    assert_eq!(first.outcomes, vec![committed(1, 1)]);
    let rows = library_rows(&conn);
    for (text, name) in [
        ("DELETE FROM batch_core_dedup_keys", "batch_core_dedup_keys"),
        ("DROP TABLE batch_core_dedup_keys", "batch_core_dedup_keys"),
        ("DELETE FROM batch_core_dedup_meta", "batch_core_dedup_meta"),
        (
            "UPDATE batch_core_dedup_meta SET keys = 0",
            "batch_core_dedup_meta",
        ),
        (
            "INSERT INTO batch_core_dedup_meta (id, keys, bytes) VALUES (1, 0, 0)",
            "batch_core_dedup_meta",
        ),
        (
            "INSERT INTO users (username, email) SELECT hex(caller), hex(id) FROM batch_core_dedup_keys",
            "batch_core_dedup_keys",
        ),
        (
            "DELETE FROM main.\"BATCH_CORE_DEDUP_KEYS\"",
            "BATCH_CORE_DEDUP_KEYS",
        ),
        (
            "DELETE FROM [Batch_Core_Dedup_Keys]",
            "Batch_Core_Dedup_Keys",
        ),
        // After characters of several bytes.
        (
            "UPDATE users SET username = 'ééé' WHERE email IN (SELECT hex(id) FROM batch_core_dedup_keys)",
            "batch_core_dedup_keys",
        ),
        (
            "DELETE FROM `batch_core_dedup_keys` WHERE 1",
            "batch_core_dedup_keys",
        ),
        (
            "DROP TABLE IF EXISTS batch_core_dedup_meta",
            "batch_core_dedup_meta",
        ),
        (
            "ALTER TABLE batch_core_dedup_keys ADD COLUMN x",
            "batch_core_dedup_keys",
        ),
        (
            "ALTER TABLE batch_core_dedup_meta RENAME TO m",
            "batch_core_dedup_meta",
        ),
        (
            "CREATE INDEX k ON batch_core_dedup_keys (digest)",
            "batch_core_dedup_keys",
        ),
        (
            "CREATE TRIGGER k AFTER INSERT ON batch_core_dedup_keys BEGIN SELECT 1; END",
            "batch_core_dedup_keys",
        ),
        (
            "CREATE TRIGGER k AFTER INSERT ON users BEGIN DELETE FROM batch_core_dedup_keys; END",
            "batch_core_dedup_keys",
        ),
        (
            "CREATE VIEW k AS SELECT * FROM batch_core_dedup_keys",
            "batch_core_dedup_keys",
        ),
        ("ANALYZE batch_core_dedup_keys", "batch_core_dedup_keys"),
        // Objects of the prefix, and a rename into it (SQLite reports no new name).
        ("CREATE TABLE batch_core_mine (a)", "batch_core_mine"),
        ("CREATE INDEX batch_core_i ON users (email)", "batch_core_i"),
        (
            "ALTER TABLE users RENAME TO batch_core_users",
            "batch_core_users",
        ),
        // The prefix anywhere in the text, even in a literal (documented).
        (
            "INSERT INTO users (username, email) VALUES ('batch_core_x', 'x')",
            "batch_core_x",
        ),
    ] {
        assert_refused(&conn, text, &library(name));
    }
    // A name that merely contains the prefix is not the library's.
    assert_eq!(
        execute_autocommit(&conn, &sql("CREATE TABLE my_batch_core_notes (a)")),
        committed(0, 0)
    );
    assert_eq!(library_rows(&conn), rows, "the library's rows are intact");
    // A resent batch is answered with its recorded outcomes and runs nothing.
    let again = keyed_batch(&mut d, &conn, 1);
    assert!(again.duplicate);
    assert_eq!(again.outcomes, first.outcomes);
    assert_eq!(count(&conn, "users"), 1);
    // New keys are still recorded.
    assert_eq!(
        keyed_batch(&mut d, &conn, 2).outcomes,
        vec![committed(1, 2)]
    );
    assert_eq!(count(&conn, "batch_core_dedup_keys"), 2);
}

/// The connection's statement cache hands a compiled statement out again by its text without
/// asking the authorizer: an op whose text equals a statement the library compiled (with
/// parameters of the op's choosing) is refused before it reaches the cache.
#[test]
fn an_op_cannot_reuse_a_statement_the_library_compiled() {
    let conn = open_db();
    let mut d = Deduplicator::new(DedupConfig::default()).unwrap();
    let first = keyed_batch(&mut d, &conn, 1);
    // The keyed batch left the library's statements in the cache; its prune deletes keys one
    // by one with this one, compiled outside ops as the library does.
    const DELETE_KEY: &str =
        "DELETE FROM batch_core_dedup_keys WHERE created_at = ?1 AND caller = ?2 AND id = ?3";
    drop(conn.prepare_cached(DELETE_KEY).unwrap());
    let rows = library_rows(&conn);
    let statement = |text: &str, params: Vec<SqlValue>| WriteOp::single(text.to_owned(), params);
    for (op, name) in [
        (
            statement(
                DELETE_KEY,
                vec![
                    (NOW as i64).into(),
                    SqlValue::Blob(b"alice".to_vec()),
                    SqlValue::Blob(vec![1; 16]),
                ],
            ),
            "batch_core_dedup_keys",
        ),
        // The library's own texts, as `dedup` has them.
        (
            statement(
                "UPDATE batch_core_dedup_meta SET keys = keys + 1, bytes = bytes + ?1 \
                 WHERE id = 0 AND keys + 1 <= ?2 AND bytes + ?1 <= ?3",
                vec![1_000_000i64.into(), i64::MAX.into(), i64::MAX.into()],
            ),
            "batch_core_dedup_meta",
        ),
        (
            statement(
                "INSERT INTO batch_core_dedup_keys (created_at, caller, id, digest, outcomes) \
                 VALUES (?1, ?2, ?3, ?4, ?5)",
                vec![
                    (NOW as i64).into(),
                    SqlValue::Blob(b"alice".to_vec()),
                    SqlValue::Blob(vec![9; 16]),
                    SqlValue::Blob(vec![0; 16]),
                    SqlValue::Blob(vec![]),
                ],
            ),
            "batch_core_dedup_keys",
        ),
    ] {
        for outcome in run_each_way(&conn, &op) {
            assert_eq!(outcome, library(name), "{op:?}");
        }
    }
    assert_eq!(library_rows(&conn), rows);
    let again = keyed_batch(&mut d, &conn, 1);
    assert!(again.duplicate);
    assert_eq!(again.outcomes, first.outcomes);
    assert_eq!(count(&conn, "users"), 1);
}

/// A trigger or view the application created may reach the library's tables; an op that fires
/// or reads it is refused, naming the table and the trigger or view. (Outside ops, the
/// application's own statements run it.)
#[test]
fn a_trigger_or_view_cannot_carry_an_op_to_the_library_tables() {
    let conn = open_db();
    let mut d = Deduplicator::new(DedupConfig::default()).unwrap();
    keyed_batch(&mut d, &conn, 1);
    conn.execute_batch(
        "CREATE VIEW keys_view AS SELECT caller, id FROM batch_core_dedup_keys;
         CREATE TRIGGER wipe_keys AFTER INSERT ON orders BEGIN DELETE FROM batch_core_dedup_keys; END;",
    )
    .unwrap();
    let rows = library_rows(&conn);
    for outcome in run_each_way(&conn, &insert_order(1, 1.0)) {
        assert_eq!(outcome, library_via("batch_core_dedup_keys", "wipe_keys"));
    }
    assert_refused(
        &conn,
        "INSERT INTO users (username, email) SELECT hex(caller), hex(id) FROM keys_view",
        &library_via("batch_core_dedup_keys", "keys_view"),
    );
    assert_eq!(library_rows(&conn), rows);
    assert_eq!(count(&conn, "orders"), 0);
}

/// Statements over every table or index (`ANALYZE`, `REINDEX`) reach the library's too, and
/// are refused naming it; over the application's own they are allowed.
#[test]
fn statements_over_every_table_are_refused_where_they_reach_the_library() {
    let conn = open_db();
    // A table of the library's, as the library makes it (outside ops), with its own index.
    conn.execute_batch("CREATE TABLE batch_core_own (k TEXT PRIMARY KEY, v)")
        .unwrap();
    assert_refused(&conn, "ANALYZE", &library("batch_core_own"));
    assert_refused(
        &conn,
        "REINDEX",
        &library("sqlite_autoindex_batch_core_own_1"),
    );
    for text in ["ANALYZE users", "REINDEX idx_users_email"] {
        assert_eq!(
            execute_autocommit(&conn, &sql(text)),
            committed(0, 0),
            "{text}"
        );
    }
}

/// SQLite's page-level virtual tables reach every table of the file, the library's included,
/// whatever the op's text names: reading them (into a table of the application's, as a write
/// op must) and writing them are refused, and nothing changes.
#[test]
fn page_statistics_and_raw_pages_are_out_of_reach() {
    let conn = open_db();
    let mut d = crate::Deduplicator::new(crate::DedupConfig::default()).unwrap();
    keyed_batch(&mut d, &conn, 1);
    conn.execute_batch("CREATE TABLE copied (name TEXT, pages INTEGER)")
        .unwrap();
    let introspection = |table: &str| {
        auth(format!(
            "refused, nothing happened: {table} reaches the pages of every table, the library's included"
        ))
    };
    assert_refused(
        &conn,
        "INSERT INTO copied SELECT name, pageno FROM dbstat WHERE name GLOB '*dedup_keys'",
        &introspection("dbstat"),
    );
    // However it is spelled: SQLite names the module.
    assert_refused(
        &conn,
        "INSERT INTO copied SELECT name, pgsize FROM DBSTAT('main')",
        &introspection("dbstat"),
    );
    // sqlite_dbpage (raw pages, writable) is not compiled into this SQLite, nor into
    // ic-rusqlite's: an op naming it fails before the allow-list is asked. A build that has it
    // gets the refusal above, and this test then fails, to say so.
    assert_eq!(
        execute_autocommit(
            &conn,
            &sql("INSERT INTO copied (name) SELECT hex(data) FROM sqlite_dbpage WHERE pgno = 1")
        ),
        Outcome::Failed(OpError {
            code: 1,
            message: "no such table: sqlite_dbpage".into()
        })
    );
    // Every table's page statistics, the application's included: the module reads them all.
    assert_refused(
        &conn,
        "INSERT INTO copied SELECT name, pageno FROM dbstat WHERE name = 'users'",
        &introspection("dbstat"),
    );
}

/// Coalesced inserts are compiled as ops too: a table whose foreign key reads a library table
/// is refused in a chunk exactly as op by op, and nothing is inserted.
#[test]
fn coalesced_inserts_are_checked_as_ops_alone() {
    let conn = open_db();
    let mut d = Deduplicator::new(DedupConfig::default()).unwrap();
    keyed_batch(&mut d, &conn, 1);
    conn.execute_batch("CREATE TABLE t (a, m REFERENCES batch_core_dedup_meta (id))")
        .unwrap();
    let ops: Vec<WriteOp> = (0..8)
        .map(|i| WriteOp::single("INSERT INTO t (a) VALUES (?1)", vec![i.into()]))
        .collect();
    let mut queue = BatchQueue::new(Config::default()).unwrap();
    let tickets: Vec<_> = ops
        .iter()
        .map(|op| queue.submit(op.clone(), 0).unwrap().ticket)
        .collect();
    let report = queue.flush(&conn, &CountingMeter::new(1)).unwrap();
    assert_eq!(
        (report.committed, report.failed, report.coalesced),
        (0, 8, 0)
    );
    for ticket in tickets {
        assert_eq!(
            queue.status(ticket),
            OpStatus::Done(library("batch_core_dedup_meta"))
        );
    }
    for outcome in execute_batch(&conn, &ops).unwrap() {
        assert_eq!(outcome, library("batch_core_dedup_meta"));
    }
    assert_eq!(count(&conn, "t"), 0);
}

/// What an op may do still runs: DDL and DML of the main schema, `SELECT` inside writes,
/// functions, recursive queries, `AUTOINCREMENT`, units (the executor's savepoints are compiled
/// inside the op), header pragmas. Transaction control is not refused by the authorizer but
/// is not a write.
#[test]
fn what_an_op_may_do_is_allowed() {
    let conn = open_db();
    let ddl = committed(0, 0);
    for (text, expected) in [
        (
            "CREATE TABLE t (id INTEGER PRIMARY KEY AUTOINCREMENT, a TEXT, b REAL)",
            ddl.clone(),
        ),
        ("CREATE INDEX t_a ON t (a)", ddl.clone()),
        ("CREATE VIEW main.v AS SELECT a FROM t", ddl.clone()),
        (
            "CREATE TRIGGER t_user AFTER INSERT ON t WHEN NEW.a = 'x' \
             BEGIN INSERT INTO users (username, email) VALUES (NEW.a, NEW.a || '@x'); END",
            ddl.clone(),
        ),
        (
            "INSERT INTO t (a, b) VALUES ('x', abs(-1.5))",
            committed(1, 1),
        ),
        (
            "INSERT INTO t (a, b) SELECT username || '2', length(email) FROM users WHERE user_id = 1",
            committed(1, 2),
        ),
        (
            "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 3) \
             INSERT INTO t (a, b) SELECT 'r' || i, i FROM n",
            committed(3, 5),
        ),
        (
            "UPDATE t SET b = b + 1 WHERE a IN (SELECT a FROM v)",
            committed(5, 0),
        ),
        (
            "UPDATE sqlite_sequence SET seq = 100 WHERE name = 't'",
            committed(1, 0),
        ),
        (
            "INSERT INTO t (a) VALUES (json_extract('{\"k\": \"j\"}', '$.k'))",
            committed(1, 101),
        ),
        ("DELETE FROM t WHERE a LIKE 'r%'", committed(3, 0)),
        ("ALTER TABLE t ADD COLUMN c", ddl.clone()),
        ("ALTER TABLE t RENAME COLUMN c TO d", ddl.clone()),
        ("ANALYZE t", ddl.clone()),
        ("REINDEX t_a", ddl.clone()),
        ("DROP VIEW v", ddl.clone()),
        ("DROP TRIGGER t_user", ddl.clone()),
        ("ALTER TABLE t RENAME TO t2", ddl.clone()),
        ("DROP INDEX t_a", ddl.clone()),
        ("DROP TABLE t2", ddl.clone()),
        ("PRAGMA main.user_version = 3", ddl.clone()),
        ("PRAGMA application_id = 5", ddl.clone()),
    ] {
        assert_eq!(execute_autocommit(&conn, &sql(text)), expected, "{text}");
    }
    assert_eq!(
        (
            pragma(&conn, "user_version"),
            pragma(&conn, "application_id")
        ),
        (3, 5)
    );
    assert_eq!(count(&conn, "users"), 1, "the trigger inserted one user");
    // A unit: its savepoint is compiled inside the op.
    let unit = WriteOp::unit(vec![
        crate::testing::insert_order_stmt(1, 1.0),
        crate::testing::insert_order_stmt(1, 2.0),
    ]);
    let rowids: Vec<i64> = run_each_way(&conn, &unit)
        .into_iter()
        .map(|outcome| match outcome {
            Outcome::Committed {
                rows_changed: 2,
                last_insert_rowid,
            } => last_insert_rowid,
            other => panic!("{other:?}"),
        })
        .collect();
    // The queue's flush runs first (see `run_each_way`).
    assert_eq!(rowids, [4, 6, 8, 10, 2]);
    assert_eq!(count(&conn, "orders"), 10);
    // BEGIN IMMEDIATE is a write for SQLite (it takes the write lock): alone, it would leave a
    // transaction open that every later op joins, and that no flush can begin in.
    for text in [
        "BEGIN",
        "BEGIN IMMEDIATE",
        "BEGIN EXCLUSIVE",
        "BEGIN DEFERRED TRANSACTION",
    ] {
        assert_refused(
            &conn,
            text,
            &auth(
                "refused, nothing happened: BEGIN would open a transaction that outlives the op (an op runs inside the transaction of its batch, or of its own)".into(),
            ),
        );
        assert!(conn.is_autocommit(), "{text}");
    }
    // Other transaction control compiles (the executor's own does, inside ops) but is not a
    // write.
    for text in [
        "COMMIT",
        "END",
        "ROLLBACK",
        "SAVEPOINT s",
        "RELEASE s",
        "ROLLBACK TO s",
    ] {
        for outcome in run_each_way(&conn, &sql(text)) {
            assert_eq!(
                outcome,
                Outcome::Failed(OpError {
                    code: rusqlite::ffi::SQLITE_MISUSE,
                    message: crate::executor::NOT_A_WRITE_ERROR.into()
                }),
                "{text}"
            );
        }
    }
}

/// Functions that reach outside the database are refused, even where the application enabled
/// them.
#[test]
fn functions_that_reach_outside_the_database_are_refused() {
    let conn = open_db();
    for (text, function) in [
        (
            "INSERT INTO users (username, email) VALUES (load_extension('nothing'), 'e')",
            "load_extension",
        ),
        (
            "INSERT INTO users (username, email) VALUES (quote(fts3_tokenizer('simple')), 'e')",
            "fts3_tokenizer",
        ),
    ] {
        assert_refused(
            &conn,
            text,
            &auth(format!(
                "refused, nothing happened: {function}() reaches outside the database (it loads code or registers a tokenizer)"
            )),
        );
    }
}

#[test]
fn header_pragmas_and_pragma_queries_are_not_refused() {
    let conn = open_db();
    assert_eq!(
        execute_autocommit(&conn, &sql("PRAGMA user_version = 7")),
        committed(0, 0)
    );
    assert_eq!(pragma(&conn, "user_version"), 7);
    // A query is not refused as a change, but it is not a write either.
    assert_eq!(
        execute_autocommit(&conn, &sql("PRAGMA foreign_keys")),
        Outcome::Failed(OpError {
            code: rusqlite::ffi::SQLITE_MISUSE,
            message: crate::executor::NOT_A_WRITE_ERROR.into()
        })
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
