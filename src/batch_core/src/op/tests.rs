use super::*;

#[test]
fn conversions() {
    assert_eq!(SqlValue::from(7i64), SqlValue::Integer(7));
    assert_eq!(SqlValue::from(7i32), SqlValue::Integer(7));
    assert_eq!(SqlValue::from(7u32), SqlValue::Integer(7));
    assert_eq!(SqlValue::from(true), SqlValue::Integer(1));
    assert_eq!(SqlValue::from(1.5), SqlValue::Real(1.5));
    assert_eq!(SqlValue::from("a"), SqlValue::Text("a".into()));
    assert_eq!(
        SqlValue::from(String::from("a")),
        SqlValue::Text("a".into())
    );
    assert_eq!(SqlValue::from(vec![1u8, 2]), SqlValue::Blob(vec![1, 2]));
    assert_eq!(SqlValue::from(&[3u8][..]), SqlValue::Blob(vec![3]));
    assert_eq!(SqlValue::from(None::<i64>), SqlValue::Null);
    assert_eq!(SqlValue::from(Some("x")), SqlValue::Text("x".into()));
    let value = Value::from(SqlValue::Text("t".into()));
    assert_eq!(SqlValue::from(value), SqlValue::Text("t".into()));
}

#[test]
fn binds_and_reads_every_storage_class() {
    let conn = rusqlite::Connection::open_in_memory().unwrap();
    let values = vec![
        SqlValue::Null,
        SqlValue::Integer(i64::MIN),
        SqlValue::Real(-0.25),
        SqlValue::Text("héllo".into()),
        SqlValue::Blob(vec![0, 255, 1]),
    ];
    for value in values {
        let (read, kind): (SqlValue, String) = conn
            .query_row("SELECT ?1, typeof(?1)", [&value], |row| {
                Ok((row.get(0)?, row.get(1)?))
            })
            .unwrap();
        assert_eq!(read, value);
        let expected_kind = match value {
            SqlValue::Null => "null",
            SqlValue::Integer(_) => "integer",
            SqlValue::Real(_) => "real",
            SqlValue::Text(_) => "text",
            SqlValue::Blob(_) => "blob",
        };
        assert_eq!(kind, expected_kind);
    }
}

#[test]
fn constructors() {
    let statement = Statement::new("DELETE FROM t WHERE id = ?1", vec![1.into()]);
    assert_eq!(statement.sql, "DELETE FROM t WHERE id = ?1");
    assert_eq!(statement.params, vec![SqlValue::Integer(1)]);
    assert_eq!(
        WriteOp::from(statement.clone()),
        WriteOp::Single(statement.clone())
    );
    assert_eq!(
        WriteOp::single("DELETE FROM t WHERE id = ?1", vec![1.into()]),
        WriteOp::Single(statement.clone())
    );
    let unit = WriteOp::unit(vec![statement.clone(), statement]);
    assert_eq!(unit.statement_count(), 2);
    assert_eq!(WriteOp::single("X", vec![]).statement_count(), 1);
}

#[test]
fn outcome_accessors() {
    let ok = Outcome::Committed {
        rows_changed: 1,
        last_insert_rowid: 2,
    };
    let err = Outcome::Failed(OpError {
        code: 19,
        message: "boom".into(),
    });
    assert!(ok.is_committed() && !err.is_committed());
    assert_eq!((ok.message(), err.message()), (None, Some("boom")));
    assert_eq!((ok.code(), err.code()), (None, Some(19)));
}

#[test]
fn serde_round_trip() {
    let op = WriteOp::Unit(vec![Statement::new(
        "INSERT INTO t VALUES (?1, ?2, ?3, ?4, ?5)",
        vec![
            SqlValue::Null,
            SqlValue::Integer(-3),
            SqlValue::Real(2.5),
            SqlValue::Text("x".into()),
            SqlValue::Blob(vec![9]),
        ],
    )]);
    let json = serde_json::to_string(&op).unwrap();
    assert_eq!(serde_json::from_str::<WriteOp>(&json).unwrap(), op);
    let outcome = Outcome::Failed(OpError {
        code: 2067,
        message: "UNIQUE constraint failed: users.email".into(),
    });
    let json = serde_json::to_string(&outcome).unwrap();
    assert_eq!(serde_json::from_str::<Outcome>(&json).unwrap(), outcome);
}
