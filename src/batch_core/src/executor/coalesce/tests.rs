//! Statement coalescing against op-by-op execution: the shapes it accepts, the tables it
//! refuses, and a property test that runs random runs of inserts (failing in every way a row
//! can) coalesced and alone and compares every outcome, rowid and row.

use proptest::prelude::*;
use rusqlite::Connection;
use rusqlite::ffi::{
    SQLITE_CONSTRAINT_CHECK as CHECK, SQLITE_CONSTRAINT_DATATYPE as DATATYPE,
    SQLITE_CONSTRAINT_FOREIGNKEY as FOREIGN_KEY, SQLITE_CONSTRAINT_NOTNULL as NOT_NULL,
    SQLITE_CONSTRAINT_UNIQUE as UNIQUE, SQLITE_INTERRUPT as INTERRUPT,
};

use super::*;
use crate::executor::{
    BatchRun, OnInterrupt, TEST_PROGRESS_PERIOD_OPS, execute_autocommit, run_batch,
};
use crate::meter::{Budget, CountingMeter};
use crate::op::SqlValue;

// ---------------------------------------------------------------- shapes

#[test]
fn single_row_inserts_with_plain_parameters_are_shapes() {
    let shape = parse_insert("INSERT INTO users (username, email) VALUES (?1, ?2)").unwrap();
    assert_eq!(shape.table, "users");
    assert_eq!(shape.columns, ["username", "email"]);
    assert_eq!(
        shape.sql(3),
        "INSERT OR FAIL INTO users (username, email) VALUES (?,?),(?,?),(?,?)"
    );
    for sql in [
        "insert into users(username,email) values(?,?)",
        "  INSERT\tINTO \"Users\" ( \"user name\" , email ) VALUES ( ? , ? ) ; ",
        "INSERT INTO t (a) VALUES (?1);",
        "INSERT INTO t_2$ (a_1, b) VALUES (?, ?)",
    ] {
        assert!(parse_insert(sql).is_some(), "{sql}");
    }
    let quoted = parse_insert("INSERT INTO \"My T\" (\"a b\") VALUES (?)").unwrap();
    assert_eq!(
        (quoted.table.as_str(), quoted.table_sql.as_str()),
        ("My T", "\"My T\"")
    );
    assert_eq!(quoted.columns, ["a b"]);
}

#[test]
fn everything_else_runs_alone() {
    for sql in [
        // Other conflict resolution, or RETURNING: different results per row.
        "INSERT OR IGNORE INTO t (a) VALUES (?1)",
        "INSERT OR REPLACE INTO t (a) VALUES (?1)",
        "REPLACE INTO t (a) VALUES (?1)",
        "INSERT INTO t (a) VALUES (?1) RETURNING a",
        "INSERT INTO t (a) VALUES (?1) ON CONFLICT DO NOTHING",
        // Not one row of parameters.
        "INSERT INTO t (a) VALUES (?1), (?2)",
        "INSERT INTO t (a, b) VALUES (?1, 5)",
        "INSERT INTO t (a, b) VALUES (?1, ?1)",
        "INSERT INTO t (a, b) VALUES (?2, ?1)",
        "INSERT INTO t (a, b) VALUES (?1, ?)",
        "INSERT INTO t (a, b) VALUES (:a, :b)",
        "INSERT INTO t (a, b) VALUES (?1)",
        "INSERT INTO t VALUES (?1)",
        "INSERT INTO t (a) SELECT ?1",
        "INSERT INTO t DEFAULT VALUES",
        // Qualified, bracketed or back-quoted names, comments, a second statement.
        "INSERT INTO main.t (a) VALUES (?1)",
        "INSERT INTO [t] (a) VALUES (?1)",
        "INSERT INTO `t` (a) VALUES (?1)",
        "INSERT INTO \"t\"\"x\" (a) VALUES (?1)",
        "INSERT INTO t (a) VALUES (?1) -- note",
        "INSERT INTO t (a) VALUES (?1); INSERT INTO t (a) VALUES (?1)",
        "WITH x AS (SELECT 1) INSERT INTO t (a) VALUES (?1)",
        "INSERTINTO t (a) VALUES (?1)",
        "UPDATE t SET a = ?1",
        "",
    ] {
        assert_eq!(parse_insert(sql), None, "{sql}");
    }
}

// ---------------------------------------------------------------- tables

/// Runs `ops` in one batch with coalescing and returns what ran, checking it against op by op
/// on a second database built with the same `schema`.
fn batch_against_alone(schema: &str, ops: &[WriteOp], coalesce_rows: usize) -> BatchRun {
    let batched = Connection::open_in_memory().unwrap();
    let reference = Connection::open_in_memory().unwrap();
    batched.execute_batch(schema).unwrap();
    reference.execute_batch(schema).unwrap();
    let run = run_batch::<fn() -> u64>(
        &batched,
        ops.len(),
        |i| &ops[i],
        None,
        OnInterrupt::Fail,
        coalesce_rows,
        &mut CoalesceCache::default(),
    )
    .unwrap();
    let alone: Vec<Outcome> = ops
        .iter()
        .map(|op| execute_autocommit(&reference, op))
        .collect();
    assert_eq!(run.outcomes, alone);
    assert_eq!(dump(&batched), dump(&reference));
    run
}

/// Every table's rows in rowid order (and `sqlite_sequence`), without `CURRENT_TIMESTAMP`.
fn dump(conn: &Connection) -> Vec<(String, Vec<SqlValue>)> {
    let tables: Vec<(String, bool)> = conn
        .prepare(
            "SELECT name, wr FROM pragma_table_list WHERE schema = 'main' AND type = 'table' \
             AND name NOT LIKE 'sqlite_schema' ORDER BY name",
        )
        .unwrap()
        .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let mut rows = Vec::new();
    for (table, without_rowid) in tables {
        let order = if without_rowid { "" } else { " ORDER BY rowid" };
        let rowid = if without_rowid || table == "sqlite_sequence" {
            ""
        } else {
            "rowid, "
        };
        let mut statement = conn
            .prepare(&format!("SELECT {rowid}* FROM \"{table}\"{order}"))
            .unwrap();
        let columns: Vec<String> = statement
            .column_names()
            .iter()
            .map(|c| c.to_string())
            .collect();
        let keep: Vec<usize> = (0..columns.len())
            .filter(|&i| columns[i] != "created_at")
            .collect();
        let mapped = statement
            .query_map([], |row| {
                keep.iter().map(|&i| row.get::<_, SqlValue>(i)).collect()
            })
            .unwrap();
        for row in mapped {
            rows.push((table.clone(), row.unwrap()));
        }
    }
    rows
}

/// A schema where every insert shape below may be coalesced: the users/orders tables of the
/// ic-rusqlite benchmark with enforced foreign keys, a unique email, a CHECK and a STRICT table.
const COALESCIBLE: &str = "
PRAGMA foreign_keys = ON;
CREATE TABLE users (
  user_id INTEGER PRIMARY KEY AUTOINCREMENT,
  username TEXT NOT NULL,
  email TEXT NOT NULL UNIQUE,
  created_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP
);
CREATE TABLE orders (
  order_id INTEGER PRIMARY KEY AUTOINCREMENT,
  user_id INTEGER NOT NULL,
  amount REAL NOT NULL CHECK (amount < 1000000),
  created_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP,
  FOREIGN KEY (user_id) REFERENCES users(user_id)
);
CREATE INDEX orders_user ON orders(user_id);
CREATE TABLE events (kind TEXT NOT NULL, n INTEGER) STRICT;
CREATE TABLE plain (x);
";

const INSERT_USER: &str = "INSERT INTO users (username, email) VALUES (?1, ?2)";
const INSERT_ORDER: &str = "INSERT INTO orders (user_id, amount) VALUES (?1, ?2)";
const INSERT_EVENT: &str = "INSERT INTO events (kind, n) VALUES (?, ?)";

fn user(name: &str, email: &str) -> WriteOp {
    WriteOp::single(INSERT_USER, vec![name.into(), email.into()])
}

fn users(n: usize) -> Vec<WriteOp> {
    (0..n)
        .map(|i| user(&format!("user{i}"), &format!("{i}@x")))
        .collect()
}

#[test]
fn runs_of_one_shape_become_power_of_two_chunks() {
    // 300 = 128 + 128 + 32 + 8 + 4.
    let run = batch_against_alone(COALESCIBLE, &users(300), 128);
    assert_eq!(run.coalesced, 300);
    // coalesce_rows is rounded down to a power of two: 100 → 64.
    let run = batch_against_alone(COALESCIBLE, &users(65), 100);
    assert_eq!(run.coalesced, 64);
    // 0 and 1 turn it off; a lone op runs alone.
    assert_eq!(batch_against_alone(COALESCIBLE, &users(10), 0).coalesced, 0);
    assert_eq!(batch_against_alone(COALESCIBLE, &users(10), 1).coalesced, 0);
    assert_eq!(
        batch_against_alone(COALESCIBLE, &users(1), 128).coalesced,
        0
    );
}

#[test]
fn other_ops_and_other_shapes_split_runs() {
    let mut ops = users(5);
    ops.push(WriteOp::single(
        "UPDATE users SET username = 'x' WHERE user_id = ?1",
        vec![1.into()],
    ));
    ops.extend((0..5).map(|i| WriteOp::single(INSERT_ORDER, vec![(i % 3 + 1).into(), 2.5.into()])));
    // The same insert with a different SQL text is another shape.
    ops.push(WriteOp::single(
        "INSERT INTO users (username, email) VALUES (?, ?)",
        vec!["y".into(), "y@x".into()],
    ));
    ops.push(user("z", "z@x"));
    // A wrong parameter count runs alone (and fails as it would alone).
    ops.push(WriteOp::single(INSERT_USER, vec!["w".into()]));
    ops.push(user("v", "v@x"));
    let run = batch_against_alone(COALESCIBLE, &ops, 128);
    // 5 users → 4 + 1; 5 orders → 4 + 1; the rest alone.
    assert_eq!(run.coalesced, 8);
}

/// Tables where a multi-row INSERT could differ from single-row ones.
#[test]
fn tables_that_could_differ_are_never_coalesced() {
    let insert = "INSERT INTO t (a) VALUES (?1)";
    for schema in [
        // A trigger (it could read the table, or count rows).
        "CREATE TABLE t (a); CREATE TRIGGER tr AFTER INSERT ON t BEGIN SELECT 1; END;",
        // A temp trigger on a main table.
        "CREATE TABLE t (a); CREATE TEMP TRIGGER tr AFTER INSERT ON main.t BEGIN SELECT 1; END;",
        // A foreign key to itself (checked at the end of a multi-row statement).
        "PRAGMA foreign_keys = ON; CREATE TABLE t (id INTEGER PRIMARY KEY, a REFERENCES t(id));",
        // ... however it is written.
        "CREATE TABLE t (id INTEGER PRIMARY KEY, a references T);",
        "CREATE TABLE t (id INTEGER PRIMARY KEY, a REFERENCES \"t\");",
        "CREATE TABLE t (id INTEGER PRIMARY KEY, a REFERENCES/* x */t);",
        "CREATE TABLE t (id INTEGER PRIMARY KEY, a, FOREIGN KEY (a) REFERENCES t (id));",
        // Its own conflict resolution.
        "CREATE TABLE t (a UNIQUE ON CONFLICT IGNORE);",
        "CREATE TABLE t (a NOT NULL ON CONFLICT REPLACE DEFAULT 1);",
        // No rowid, a view, a virtual table, a temp table shadowing the main one.
        "CREATE TABLE t (a PRIMARY KEY) WITHOUT ROWID;",
        "CREATE TABLE u (a); CREATE VIEW t AS SELECT a FROM u;",
        "CREATE VIRTUAL TABLE t USING fts5(a);",
        "CREATE TABLE t (a); CREATE TEMP TABLE t (a);",
        // A column named like the rowid.
        "CREATE TABLE t (a, rowid);",
        "CREATE TABLE t (a, oid TEXT);",
        "CREATE TABLE t (a, _rowid_ INTEGER);",
        // The INSERT gives the rowid: the INTEGER PRIMARY KEY alias.
        "CREATE TABLE t (a INTEGER PRIMARY KEY);",
        // (conservatively) an INTEGER column of a composite key.
        "CREATE TABLE t (a INTEGER, b, PRIMARY KEY (a, b));",
    ] {
        let ops: Vec<WriteOp> = (0..8)
            .map(|i| WriteOp::single(insert, vec![i.into()]))
            .collect();
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch(schema).unwrap();
        let run = run_batch::<fn() -> u64>(
            &conn,
            ops.len(),
            |i| &ops[i],
            None,
            OnInterrupt::Fail,
            128,
            &mut CoalesceCache::default(),
        )
        .unwrap();
        assert_eq!(run.coalesced, 0, "{schema}");
    }
    // A non-alias primary key and other constraints are fine.
    for schema in [
        "CREATE TABLE t (a TEXT PRIMARY KEY);",
        "CREATE TABLE t (a INT PRIMARY KEY);",
        "CREATE TABLE t (a CHECK (a >= 0), b DEFAULT 7);",
        "CREATE TABLE t (id INTEGER PRIMARY KEY AUTOINCREMENT, a);",
        // A foreign key to another table, a rowid alias not given by the INSERT.
        "PRAGMA foreign_keys = ON;
         CREATE TABLE p (id INTEGER PRIMARY KEY); INSERT INTO p VALUES (0), (1), (2), (3), (4), (5), (6), (7);
         CREATE TABLE t (k INTEGER PRIMARY KEY, a REFERENCES p(id));",
        "PRAGMA foreign_keys = ON;
         CREATE TABLE t (a, b, FOREIGN KEY (a) REFERENCES \"other\" (x));
         CREATE TABLE other (x PRIMARY KEY); INSERT INTO other VALUES (0), (1), (2), (3), (4), (5), (6), (7);",
    ] {
        let ops: Vec<WriteOp> = (0..8)
            .map(|i| WriteOp::single("INSERT INTO t (a) VALUES (?1)", vec![i.into()]))
            .collect();
        assert_eq!(
            batch_against_alone(schema, &ops, 128).coalesced,
            8,
            "{schema}"
        );
    }
}

#[test]
fn self_references_are_found_or_left_to_sqlite() {
    for (sql, table, may) in [
        ("CREATE TABLE T (A REFERENCES U)", "t", false),
        ("CREATE TABLE T (A REFERENCES T)", "t", true),
        (
            "CREATE TABLE T (A REFERENCES  T_2, B REFERENCES T)",
            "t",
            true,
        ),
        ("CREATE TABLE T (A REFERENCES T_2)", "t", false),
        ("CREATE TABLE T (A REFERENCES \"U\")", "t", true),
        ("CREATE TABLE T (A REFERENCES --\nU)", "t", true),
        ("CREATE TABLE T (A)", "t", false),
    ] {
        assert_eq!(may_reference_itself(sql, table), may, "{sql}");
    }
}

#[test]
fn a_schema_change_between_runs_is_seen() {
    let mut ops = users(4);
    ops.push(WriteOp::single(
        "CREATE TRIGGER tr AFTER INSERT ON users BEGIN UPDATE users SET username = 'changed' WHERE user_id = NEW.user_id; END",
        vec![],
    ));
    ops.extend(users(8).into_iter().skip(4));
    let run = batch_against_alone(COALESCIBLE, &ops, 128);
    assert_eq!(run.coalesced, 4);
}

// ---------------------------------------------------------------- failures inside chunks

fn order(user_id: i64, amount: f64) -> WriteOp {
    WriteOp::single(INSERT_ORDER, vec![user_id.into(), amount.into()])
}

#[test]
fn a_failing_row_fails_alone_and_the_others_commit() {
    let mut ops = users(3);
    let mut orders: Vec<WriteOp> = (0..20).map(|i| order(i % 3 + 1, i as f64)).collect();
    orders[0] = WriteOp::single(INSERT_ORDER, vec![1.into(), SqlValue::Null]); // NOT NULL, first
    orders[7] = order(1, 5_000_000.0); // CHECK, in the middle
    orders[19] = WriteOp::single(INSERT_ORDER, vec![2.into(), SqlValue::Null]); // last
    ops.extend(orders);
    let run = batch_against_alone(COALESCIBLE, &ops, 8);
    let codes: Vec<Option<i32>> = run.outcomes.iter().map(Outcome::code).collect();
    assert_eq!(codes[3], Some(NOT_NULL));
    assert_eq!(codes[10], Some(CHECK));
    assert_eq!(codes[22], Some(NOT_NULL));
    assert_eq!(codes.iter().flatten().count(), 3);
    assert!(run.coalesced > 0);
}

#[test]
fn a_foreign_key_failure_undoes_the_chunk_and_the_chunk_runs_alone() {
    // Immediate foreign keys of a multi-row INSERT are checked at its end, which undoes it
    // whole: the coalescer finds the failing op by running the chunk's ops alone.
    let mut ops = users(2);
    ops.extend((0..16).map(|i| order(if i == 9 { 99 } else { i % 2 + 1 }, 1.0)));
    let run = batch_against_alone(COALESCIBLE, &ops, 16);
    assert_eq!(run.outcomes[11].code(), Some(FOREIGN_KEY));
    assert_eq!(run.outcomes.iter().filter(|o| !o.is_committed()).count(), 1);
}

#[test]
fn strict_type_errors_and_unique_violations_inside_chunks() {
    let mut ops = users(6);
    ops[4] = user("dup", "1@x");
    ops.extend((0..10).map(|i| {
        let n: SqlValue = if i == 3 {
            "three".into()
        } else {
            (i as i64).into()
        };
        WriteOp::single(INSERT_EVENT, vec!["k".into(), n])
    }));
    let run = batch_against_alone(COALESCIBLE, &ops, 128);
    assert_eq!(run.outcomes[4].code(), Some(UNIQUE));
    assert_eq!(run.outcomes[9].code(), Some(DATATYPE));
}

#[test]
fn the_autoincrement_counter_matches_when_the_last_chunk_stops_early() {
    // OR FAIL keeps the rows before the failing one but skips SQLite's update of
    // sqlite_sequence; the coalescer stores it. Deleting the last rows then shows whether the
    // next rowid is reused.
    let mut ops = users(10);
    ops[9] = WriteOp::single(INSERT_USER, vec![SqlValue::Null, "n@x".into()]);
    ops.push(WriteOp::single(
        "DELETE FROM users WHERE user_id > ?1",
        vec![3.into()],
    ));
    ops.extend(users(13).into_iter().skip(10));
    let run = batch_against_alone(COALESCIBLE, &ops, 16);
    assert_eq!(
        run.outcomes.last(),
        Some(&Outcome::Committed {
            rows_changed: 1,
            last_insert_rowid: 12
        })
    );
    // Also when nothing follows: the counter is stored at once.
    let mut ops = users(6);
    ops[5] = WriteOp::single(INSERT_USER, vec![SqlValue::Null, "n@x".into()]);
    batch_against_alone(COALESCIBLE, &ops, 8);
}

#[test]
fn a_counter_left_unstored_is_stored_in_time_or_made_moot() {
    let order = |user: i64| WriteOp::single(INSERT_ORDER, vec![user.into(), 2.5.into()]);
    let null_user = || WriteOp::single(INSERT_USER, vec![SqlValue::Null, "n@x".into()]);
    // The first chunk into users stops early: its counter is not stored yet, and
    // sqlite_sequence has no row for users. A complete chunk into orders then creates orders'
    // row; op by op users' row comes first (the dump compares sqlite_sequence in rowid order).
    let mut ops = users(4);
    ops[3] = null_user();
    ops.extend((0..4).map(|_| order(1)));
    assert_eq!(batch_against_alone(COALESCIBLE, &ops, 4).coalesced, 3 + 4);
    // A stopped chunk, then a complete chunk into the same table (SQLite stores the larger
    // counter: nothing is left to store), then a delete of the last rows: the next rowid is
    // not reused.
    let mut ops = users(4);
    ops[1] = null_user();
    ops.extend(users(12).into_iter().skip(4));
    ops.push(WriteOp::single(
        "DELETE FROM users WHERE user_id > ?1",
        vec![2.into()],
    ));
    ops.extend(users(14).into_iter().skip(12));
    let run = batch_against_alone(COALESCIBLE, &ops, 8);
    assert_eq!(
        run.outcomes.last(),
        Some(&Outcome::Committed {
            rows_changed: 1,
            last_insert_rowid: 13
        })
    );
    // A complete chunk, then one that stops at its last row, then COMMIT.
    let mut ops = users(8);
    ops[7] = null_user();
    assert_eq!(batch_against_alone(COALESCIBLE, &ops, 4).coalesced, 4 + 3);
}

#[test]
fn rowids_near_the_end_of_the_range() {
    // A plain table whose largest rowid is i64::MAX - 2: a chunk of two rows just fits.
    let schema = "CREATE TABLE t (a); INSERT INTO t (rowid, a) VALUES (9223372036854775805, 0);";
    let ops: Vec<WriteOp> = (0..2)
        .map(|i| WriteOp::single("INSERT INTO t (a) VALUES (?1)", vec![i.into()]))
        .collect();
    assert_eq!(batch_against_alone(schema, &ops, 2).coalesced, 2);
    // Negative rowids: the next one is the largest plus one.
    let schema = "CREATE TABLE t (a); INSERT INTO t (rowid, a) VALUES (-50, 0);";
    let ops: Vec<WriteOp> = (0..8)
        .map(|i| WriteOp::single("INSERT INTO t (a) VALUES (?1)", vec![i.into()]))
        .collect();
    assert_eq!(batch_against_alone(schema, &ops, 8).coalesced, 8);
    // An AUTOINCREMENT counter above the largest rowid (rows deleted before).
    let schema = "CREATE TABLE t (id INTEGER PRIMARY KEY AUTOINCREMENT, a);
        INSERT INTO t (a) VALUES (1), (2), (3); DELETE FROM t WHERE id > 1;";
    assert_eq!(batch_against_alone(schema, &ops, 8).coalesced, 8);
}

#[test]
fn near_the_maximum_rowid_chunks_are_not_run() {
    let schema = "CREATE TABLE t (a); INSERT INTO t (rowid, a) VALUES (9223372036854775805, 0);";
    // A chunk of 4 would overflow: the ops run alone, and after the maximum SQLite picks
    // random rowids, as it does alone.
    let ops: Vec<WriteOp> = (1..=4)
        .map(|i| WriteOp::single("INSERT INTO t (a) VALUES (?1)", vec![i.into()]))
        .collect();
    let conn = Connection::open_in_memory().unwrap();
    conn.execute_batch(schema).unwrap();
    let run = run_batch::<fn() -> u64>(
        &conn,
        4,
        |i| &ops[i],
        None,
        OnInterrupt::Fail,
        4,
        &mut CoalesceCache::default(),
    )
    .unwrap();
    // Rowids MAX-1 and MAX are taken in order; then SQLite picks at random, alone.
    assert_eq!(run.outcomes.iter().filter(|o| o.is_committed()).count(), 4);
    let rowids: Vec<i64> = conn
        .prepare("SELECT rowid FROM t WHERE a IS NOT 0 ORDER BY a")
        .unwrap()
        .query_map([], |row| row.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(&rowids[..2], &[i64::MAX - 1, i64::MAX]);
    for (outcome, rowid) in run.outcomes.iter().zip(&rowids) {
        assert_eq!(
            outcome,
            &Outcome::Committed {
                rows_changed: 1,
                last_insert_rowid: *rowid
            }
        );
    }
}

// ---------------------------------------------------------------- the instruction guard

/// A meter charging 1 per progress-handler read, with a read every operation: a chunk of 64
/// rows runs far more operations than one row.
fn with_guard<T>(f: impl FnOnce() -> T) -> T {
    let previous = TEST_PROGRESS_PERIOD_OPS.with(|period| period.replace(1));
    let result = f();
    TEST_PROGRESS_PERIOD_OPS.with(|period| period.set(previous));
    result
}

/// Virtual-machine operations of one op alone and of a chunk of `rows`, measured.
fn operations_of(ops: &[WriteOp], coalesce_rows: usize) -> u64 {
    with_guard(|| {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch(COALESCIBLE).unwrap();
        let meter = CountingMeter::with_statement_step(0, 1);
        let budget = Budget::new(meter.clone(), u64::MAX / 4);
        run_batch(
            &conn,
            ops.len(),
            |i| &ops[i],
            Some((&budget, 0)),
            OnInterrupt::Fail,
            coalesce_rows,
            &mut CoalesceCache::default(),
        )
        .unwrap();
        meter.statement_reads()
    })
}

#[test]
fn an_interrupted_chunk_is_left_for_the_next_flush_or_failed_whole() {
    let ops = users(65);
    let one = operations_of(&ops[..1], 0);
    let chunk = operations_of(&ops[..64], 64) - operations_of(&ops[..0], 64);
    assert!(chunk > 8 * one, "chunk {chunk}, one {one}");
    // A limit (twice the budget) that one op fits in but the chunk does not.
    let budget_instructions = chunk / 4;
    for on_interrupt in [OnInterrupt::LeavePending, OnInterrupt::Fail] {
        let run = with_guard(|| {
            let conn = Connection::open_in_memory().unwrap();
            conn.execute_batch(COALESCIBLE).unwrap();
            let meter = CountingMeter::with_statement_step(0, 1);
            let budget = Budget::new(meter.clone(), budget_instructions);
            let run = run_batch(
                &conn,
                ops.len(),
                |i| &ops[i],
                Some((&budget, 0)),
                on_interrupt,
                64,
                &mut CoalesceCache::default(),
            )
            .unwrap();
            let count: i64 = conn
                .query_row("SELECT count(*) FROM users", [], |row| row.get(0))
                .unwrap();
            (run, count)
        });
        let (run, count) = run;
        match on_interrupt {
            OnInterrupt::LeavePending => {
                // Op 0 runs alone (so that an interrupt there blames it alone); the chunk of
                // ops 1..=64 is interrupted and left, nothing of it committed.
                assert_eq!(run.outcomes.len(), 1);
                assert!(run.outcomes[0].is_committed());
                assert!(run.left_after_interrupt);
                assert_eq!((run.interrupted, count), (0, 1));
            }
            OnInterrupt::Fail => {
                // A client batch: the chunk's ops fail as interrupted, the rest does not start.
                assert_eq!(run.outcomes.len(), 64);
                assert!(run.outcomes.iter().all(|o| o.code() == Some(INTERRUPT)));
                assert_eq!((run.interrupted, count), (64, 0));
            }
        }
    }
}

// ---------------------------------------------------------------- property

fn name() -> impl Strategy<Value = SqlValue> {
    prop_oneof![
        8 => (0..3u8).prop_map(|i| SqlValue::Text(format!("name{i}"))),
        1 => Just(SqlValue::Null),
    ]
}

fn email() -> impl Strategy<Value = SqlValue> {
    (0..40u8).prop_map(|i| SqlValue::Text(format!("u{i}@x")))
}

fn amount() -> impl Strategy<Value = SqlValue> {
    prop_oneof![
        12 => (0..4_000i64).prop_map(|q| SqlValue::Real(q as f64 / 4.0)),
        1 => Just(SqlValue::Real(2_000_000.0)),
        1 => Just(SqlValue::Null),
        1 => Just(SqlValue::Text("abc".into())),
    ]
}

fn insert_run() -> impl Strategy<Value = Vec<WriteOp>> {
    prop_oneof![
        3 => prop::collection::vec((name(), email()), 1..40).prop_map(|rows| rows
            .into_iter()
            .map(|(n, e)| WriteOp::single(INSERT_USER, vec![n, e]))
            .collect()),
        3 => prop::collection::vec(((0..12i64), amount()), 1..40).prop_map(|rows| rows
            .into_iter()
            .map(|(u, a)| WriteOp::single(INSERT_ORDER, vec![u.into(), a]))
            .collect()),
        1 => prop::collection::vec(
            prop_oneof![Just(SqlValue::Integer(1)), Just(SqlValue::Text("x".into())), Just(SqlValue::Null)],
            1..20,
        )
        .prop_map(|ns| ns
            .into_iter()
            .map(|n| WriteOp::single(INSERT_EVENT, vec!["k".into(), n]))
            .collect()),
    ]
}

fn other_op() -> impl Strategy<Value = WriteOp> {
    prop_oneof![
        (0..12i64)
            .prop_map(|u| WriteOp::single("DELETE FROM orders WHERE user_id = ?1", vec![u.into()])),
        (0..12i64)
            .prop_map(|u| WriteOp::single("DELETE FROM users WHERE user_id >= ?1", vec![u.into()])),
        (0..12i64).prop_map(|o| WriteOp::single(
            "DELETE FROM orders WHERE order_id >= ?1",
            vec![o.into()]
        )),
        (name(), email()).prop_map(|(n, e)| WriteOp::unit(vec![
            Statement::new(INSERT_USER, vec![n, e]),
            Statement::new(
                "INSERT INTO orders (user_id, amount) VALUES (last_insert_rowid(), 1.0)",
                vec![]
            ),
        ])),
        Just(WriteOp::single(
            "INSERT OR ROLLBACK INTO users (username, email) VALUES ('r', 'u1@x')",
            vec![]
        )),
    ]
}

fn batch() -> impl Strategy<Value = Vec<WriteOp>> {
    prop::collection::vec(
        prop_oneof![4 => insert_run(), 1 => other_op().prop_map(|op| vec![op])],
        1..12,
    )
    .prop_map(|runs| runs.into_iter().flatten().collect())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1_000))]

    /// Random runs of inserts, failing in every way a row can (NOT NULL, UNIQUE, CHECK, a
    /// foreign key, a STRICT type, a transaction-ending `OR ROLLBACK` between them), with
    /// deletes that make the AUTOINCREMENT counter matter: coalesced in chunks of any size,
    /// every outcome, rowid and row (and sqlite_sequence) is the same as op by op.
    #[test]
    fn coalesced_batches_match_op_by_op_execution(
        ops in batch(),
        coalesce_rows in prop_oneof![Just(2usize), Just(3), Just(4), Just(8), Just(128)],
    ) {
        batch_against_alone(COALESCIBLE, &ops, coalesce_rows);
    }
}

/// Runs `ops` coalesced as a client batch (`OnInterrupt::Fail`) or a flush of the queue
/// (`LeavePending`) under an instruction guard that trips after about `budget`
/// virtual-machine operations, and checks it against op by op without the interrupted ops:
/// each interrupted op changed nothing, every other op that ran has the outcome it has op by
/// op in that sequence (ops left for the next flush or not reached have none), and the rows
/// (and `sqlite_sequence`) are the same. Wherever the guard trips (inside a chunk, at the
/// bookkeeping after one, at the store of an `AUTOINCREMENT` counter a stopped chunk left,
/// while ops are re-applied after a lost transaction), nothing may be lost, doubled, counted
/// wrong or reported from a state that no longer exists.
fn interrupted_batch_against_alone(
    ops: &[WriteOp],
    coalesce_rows: usize,
    budget: u64,
    on_interrupt: OnInterrupt,
) {
    let (run, batched) = with_guard(|| {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch(COALESCIBLE).unwrap();
        let meter = CountingMeter::with_statement_step(0, 1);
        let budget = Budget::new(meter, budget);
        let run = run_batch(
            &conn,
            ops.len(),
            |i| &ops[i],
            Some((&budget, 0)),
            on_interrupt,
            coalesce_rows,
            &mut CoalesceCache::default(),
        )
        .unwrap();
        (run, dump(&conn))
    });
    let reference = Connection::open_in_memory().unwrap();
    reference.execute_batch(COALESCIBLE).unwrap();
    for (i, (op, outcome)) in ops.iter().zip(&run.outcomes).enumerate() {
        if outcome.code() != Some(INTERRUPT) {
            assert_eq!(
                &execute_autocommit(&reference, op),
                outcome,
                "op {i}: {:?}",
                run.outcomes
            );
        }
    }
    let interrupted = run
        .outcomes
        .iter()
        .filter(|o| o.code() == Some(INTERRUPT))
        .count();
    assert_eq!(run.interrupted, interrupted);
    if on_interrupt == OnInterrupt::LeavePending {
        // Only the first op, which had the whole budget, may fail as interrupted.
        assert!(
            run.outcomes
                .iter()
                .skip(1)
                .all(|o| o.code() != Some(INTERRUPT))
        );
        // Left after an interrupt: some op has no outcome (also when the budget ran out).
        assert!(!run.left_after_interrupt || run.outcomes.len() < ops.len());
    }
    assert_eq!(batched, dump(&reference));
}

#[test]
fn interrupts_while_ops_are_reapplied() {
    let users = |emails: &[u32]| -> Vec<WriteOp> {
        emails
            .iter()
            .map(|e| user("name0", &format!("u{e}@x")))
            .collect()
    };
    // The second op fails (the same email), the guard then trips at the bookkeeping after the
    // chunk and interrupts the ROLLBACK too: the next attempt must not find the transaction
    // still open.
    interrupted_batch_against_alone(&users(&[0, 0]), 2, 29, OnInterrupt::Fail);
    // Ops re-applied after a lost transaction, one of them interrupted this time: the failure
    // of a later op (the email it repeats is no longer there) must not be kept from the
    // earlier attempt.
    let ops = users(&[0, 3, 4, 5, 7, 1, 8, 6, 9, 36, 10, 36, 0, 0, 0, 0]);
    interrupted_batch_against_alone(&ops, 128, 177, OnInterrupt::Fail);
    interrupted_batch_against_alone(&ops, 128, 177, OnInterrupt::LeavePending);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3_000))]

    /// The same random batches with the instruction guard tripping anywhere.
    #[test]
    fn interrupted_coalesced_batches_lose_and_double_nothing(
        ops in batch(),
        coalesce_rows in prop_oneof![Just(2usize), Just(4), Just(8), Just(128)],
        budget in prop_oneof![1u64..200, 200u64..2_000, 2_000u64..20_000],
        on_interrupt in prop_oneof![Just(OnInterrupt::Fail), Just(OnInterrupt::LeavePending)],
    ) {
        interrupted_batch_against_alone(&ops, coalesce_rows, budget, on_interrupt);
    }
}

#[test]
fn same_text_finds_a_difference_at_every_position() {
    let text = "INSERT INTO orders (user_id, amount) VALUES (?1, ?2)";
    for len in 0..=text.len() {
        let a = &text[..len];
        // A copy: equal text at another address.
        let copy = String::from(a);
        assert!(same_text(a, &copy));
        for i in 0..len {
            let mut b = a.as_bytes().to_vec();
            b[i] ^= 0x20;
            let b = String::from_utf8(b).unwrap();
            assert!(!same_text(a, &b), "{a:?} vs {b:?}");
        }
        if len < text.len() {
            assert!(!same_text(a, &text[..len + 1]));
        }
    }
}
