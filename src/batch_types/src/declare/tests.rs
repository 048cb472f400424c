use candid::types::CandidType;
use proptest::prelude::*;

use super::*;
use crate::BatchKey;
use crate::packed;

crate::writes! {
    /// A todo store's writes.
    pub enum TodoWrite {
        /// Adds a todo.
        add_todo = "INSERT INTO todos (title, due, tag) VALUES (?1, ?2, ?3)" {
            title: String [max 20],
            due: Option<i64>,
            tag: Option<Blob> [max 4],
        },
        /// Reprices.
        set_weight = "UPDATE todos SET weight = ?2 WHERE id = ?1" { id: i64, weight: f64 },
        /// Controllers only.
        purge (controllers) = "DELETE FROM todos WHERE done = 1" {},
    }
}

/// The same writes with `set_weight`'s parameters in another order.
mod reordered {
    use crate::declare::Blob;
    crate::writes! {
        pub enum TodoWrite {
            add_todo = "INSERT INTO todos (title, due, tag) VALUES (?1, ?2, ?3)" {
                title: String [max 20],
                due: Option<i64>,
                tag: Option<Blob> [max 4],
            },
            set_weight = "UPDATE todos SET weight = ?1 WHERE id = ?2" { weight: f64, id: i64 },
            purge (controllers) = "DELETE FROM todos WHERE done = 1" {},
        }
    }
}

const KEY: BatchKey = BatchKey {
    created_at_time: 1_700_000_000_000_000_000,
    id: [7; 16],
};

fn ops() -> Vec<TodoWrite> {
    vec![
        TodoWrite::add_todo {
            title: "milk".into(),
            due: Some(-5),
            tag: None,
        },
        TodoWrite::set_weight {
            id: 300,
            weight: 1.5,
        },
        TodoWrite::purge {},
        TodoWrite::add_todo {
            title: String::new(),
            due: None,
            tag: Some(Blob::from(vec![1, 2])),
        },
    ]
}

#[test]
fn the_declaration_is_the_macro_input() {
    let d = TodoWrite::declaration();
    assert_eq!(d.name, "TodoWrite");
    let names: Vec<_> = d.writes.iter().map(|w| w.name).collect();
    assert_eq!(names, ["add_todo", "set_weight", "purge"]);
    assert_eq!(
        d.writes[0].params,
        [
            ParamDecl {
                name: "title",
                kind: ParamKind::Text,
                nullable: false,
                max_bytes: Some(20)
            },
            ParamDecl {
                name: "due",
                kind: ParamKind::Integer,
                nullable: true,
                max_bytes: None
            },
            ParamDecl {
                name: "tag",
                kind: ParamKind::Blob,
                nullable: true,
                max_bytes: Some(4)
            },
        ]
    );
    assert_eq!(d.writes[1].access, Access::Writers);
    assert_eq!(d.writes[2].access, Access::Controllers);
    assert_eq!(d.index_of("purge"), Some(2));
    assert_eq!(TodoWrite::purge {}.index(), 2);
}

#[test]
fn the_candid_type_names_each_write_and_its_fields() {
    let ty = TodoWrite::ty().to_string();
    assert_eq!(
        ty,
        "variant {\n  purge : record {};\n  add_todo : record { due : opt int64; tag : opt blob; \
         title : text };\n  set_weight : record { id : int64; weight : float64 };\n}",
    );
}

#[test]
fn a_request_reads_back_as_the_ops_parameters() {
    let request = encode_request(&KEY, &ops());
    let (header, body) = packed::read_header(&request).unwrap();
    assert_eq!(header.key, KEY);
    assert_eq!(header.digest, TodoWrite::declaration().digest);
    assert_eq!(body, packed_ops(&ops()).as_slice());
    let read = packed::read_ops(TodoWrite::declaration(), body, 100).unwrap();
    let expected: Vec<_> = ops()
        .into_iter()
        .map(|op| packed::PackedOp {
            write: op.index(),
            params: op.into_params(),
        })
        .collect();
    assert_eq!(read, expected);
    assert_eq!(
        request.len(),
        packed::REQUEST_HEADER_BYTES + ops().iter().map(Writes::op_len).sum::<usize>()
    );
    // The bytes, by hand: add_todo is write 0, "milk", due present -5 (zigzag 9), tag absent.
    assert_eq!(&body[..9], &[0, 4, b'm', b'i', b'l', b'k', 1, 9, 0]);
}

#[test]
fn the_digest_moves_with_any_change_a_client_would_encode_differently() {
    let d = TodoWrite::declaration();
    assert_ne!(d.digest, reordered::TodoWrite::declaration().digest);
    assert_eq!(d.digest, digest_of(d.writes));
    let mut writes = d.writes.to_vec();
    writes[2].access = Access::Writers;
    assert_ne!(digest_of(&writes), d.digest);
    let mut writes = d.writes.to_vec();
    writes[1].sql = "UPDATE todos SET weight = ?2 WHERE id = ?1 AND done = 0";
    assert_ne!(digest_of(&writes), d.digest);
}

#[test]
fn parameters_are_checked_naming_the_op_the_write_and_the_parameter() {
    let d = TodoWrite::declaration();
    let long = "x".repeat(21);
    let err = d
        .check(
            3,
            0,
            &[SqlParam::Text(long), SqlParam::Null, SqlParam::Null],
        )
        .unwrap_err();
    assert_eq!(
        err,
        InvalidParam {
            op: 3,
            write: "add_todo".into(),
            param: "title".into(),
            reason: "21 bytes; at most 20".into(),
        }
    );
    assert_eq!(
        err.to_string(),
        "op 3 (add_todo, parameter title): 21 bytes; at most 20"
    );
    let exactly = "x".repeat(20);
    d.check(
        0,
        0,
        &[
            SqlParam::Text(exactly),
            SqlParam::Integer(1),
            SqlParam::Blob(vec![0; 4]),
        ],
    )
    .unwrap();
    let err = d
        .check(
            0,
            0,
            &[
                SqlParam::Text("a".into()),
                SqlParam::Null,
                SqlParam::Blob(vec![0; 5]),
            ],
        )
        .unwrap_err();
    assert_eq!(
        (err.param.as_str(), err.reason.as_str()),
        ("tag", "5 bytes; at most 4")
    );
    let err = d
        .check(1, 1, &[SqlParam::Integer(1), SqlParam::Real(f64::NAN)])
        .unwrap_err();
    assert_eq!(err.param, "weight");
    assert!(err.reason.starts_with("NULL (or NaN"), "{}", err.reason);
    let err = d
        .check(1, 1, &[SqlParam::Text("1".into()), SqlParam::Real(1.0)])
        .unwrap_err();
    assert_eq!(
        (err.param.as_str(), err.reason.as_str()),
        ("id", "Text; Integer declared")
    );
    let err = d.check(1, 1, &[SqlParam::Integer(1)]).unwrap_err();
    assert_eq!(
        (err.param.as_str(), err.reason.as_str()),
        ("", "1 parameters; 2 declared")
    );
}

#[test]
fn another_version_an_unknown_write_and_a_bad_presence_byte_are_refused_where_they_are() {
    let d = TodoWrite::declaration();
    let mut request = encode_request(&KEY, &ops());
    request[0] = 2;
    assert_eq!(
        packed::read_header(&request).unwrap_err(),
        packed::PackedError {
            offset: 0,
            what: "version 2; version 16 expected".into()
        }
    );
    let err = packed::read_ops(d, &[3], 10).unwrap_err();
    assert_eq!(err.offset, packed::REQUEST_HEADER_BYTES);
    assert_eq!(err.what, "write index 3; the declaration has 3 writes");
    let err = packed::read_ops(d, &[0, 1, b'a', 2], 10).unwrap_err();
    assert_eq!(err.offset, packed::REQUEST_HEADER_BYTES + 3);
    assert_eq!(err.what, "due: presence byte 2 (0 or 1 expected)");
    let err = packed::read_ops(d, &[2, 2, 2], 2).unwrap_err();
    assert_eq!(
        (err.offset, err.what.as_str()),
        (packed::REQUEST_HEADER_BYTES + 2, "more than 2 ops")
    );
    let err = packed::read_ops(d, &[0, 2, 0xff, 0xfe, 0, 0], 10).unwrap_err();
    assert!(err.what.starts_with("title is not UTF-8"), "{}", err.what);
}

#[test]
fn every_truncation_of_a_request_is_refused() {
    let request = encode_request(&KEY, &ops());
    let body_start = packed::REQUEST_HEADER_BYTES;
    // Cutting inside the header fails the header; cutting inside an op fails its ops, unless
    // the cut falls between two ops (then it is a shorter batch, which the digest tells apart).
    let boundaries: Vec<usize> = {
        let mut at = body_start;
        let mut b = vec![at];
        for op in ops() {
            at += op.op_len();
            b.push(at);
        }
        b
    };
    for cut in 0..request.len() {
        let bytes = &request[..cut];
        match packed::read_header(bytes) {
            Err(e) => assert!(cut < body_start && e.offset <= cut, "cut {cut}: {e}"),
            Ok((_, body)) => {
                let read = packed::read_ops(TodoWrite::declaration(), body, 100);
                assert_eq!(
                    read.is_ok(),
                    boundaries.contains(&cut),
                    "cut {cut}: {read:?}"
                );
                if let Err(e) = read {
                    assert!(e.offset <= cut, "cut {cut}: {e}");
                }
            }
        }
    }
}

#[test]
fn a_reply_keeps_its_outcomes_and_packs_runs() {
    let mut outcomes: Vec<Outcome> = (0..1_000)
        .map(|k| Outcome::Committed {
            rows_changed: 1,
            last_insert_rowid: 10 + k,
        })
        .collect();
    outcomes.insert(
        500,
        Outcome::Failed(crate::OpError {
            code: 2067,
            message: "UNIQUE constraint failed".into(),
        }),
    );
    let bytes = packed::encode_reply(true, &outcomes);
    assert!(bytes.len() < 60, "{} bytes", bytes.len());
    let reply = packed::decode_reply(&bytes, outcomes.len()).unwrap();
    assert!(reply.duplicate);
    assert_eq!(reply.outcomes, outcomes);
    let err = packed::decode_reply(&bytes, outcomes.len() - 1).unwrap_err();
    assert!(
        err.what.starts_with("a run of") || err.what.starts_with("more than"),
        "{err}"
    );
    let mut flagged = bytes.clone();
    flagged[1] = 2;
    assert_eq!(
        packed::decode_reply(&flagged, 2_000).unwrap_err().what,
        "unknown flags 0x02"
    );
}

/// A failure repeated in a row is one record (tag 3: its message once), and so are the ops
/// a batch's budget did not reach (tag 4); a run's count outside 1 to the outcomes left is
/// refused at the count's offset.
#[test]
fn repeated_failures_and_ops_not_executed_are_one_record_each() {
    let raised = Outcome::failed(1811, "x".repeat(900));
    let mut outcomes = vec![raised.clone(); 2_200];
    outcomes.push(Outcome::Committed {
        rows_changed: 1,
        last_insert_rowid: 4,
    });
    outcomes.extend(std::iter::repeat_n(Outcome::NotExecuted, 7_799));
    let bytes = packed::encode_reply(false, &outcomes);
    assert_eq!(
        bytes[..5],
        [packed::REPLY_VERSION, 0, 3, 0x98, 0x11],
        "a repeat of 2,200"
    );
    assert!(bytes.len() < 930, "{} bytes", bytes.len());
    assert_eq!(
        bytes[bytes.len() - 3..],
        [4, 0xf7, 0x3c],
        "7,799 not executed"
    );
    let reply = packed::decode_reply(&bytes, outcomes.len()).unwrap();
    assert_eq!(reply.outcomes, outcomes);
    // One more outcome than the ops sent: refused at the last count.
    let err = packed::decode_reply(&bytes, outcomes.len() - 1).unwrap_err();
    assert_eq!(
        (err.offset, err.what.as_str()),
        (
            bytes.len() - 2,
            "a run of 7799 outcomes (1 to 7798 expected)"
        )
    );
    // A count of 0 is refused too.
    let zero = [packed::REPLY_VERSION, 0, 4, 0];
    assert_eq!(
        packed::decode_reply(&zero, 10).unwrap_err().what,
        "a run of 0 outcomes (1 to 10 expected)"
    );
    // A single op not executed is a record of one; a failure alone is tag 1.
    assert_eq!(
        packed::encode_reply(true, &[Outcome::NotExecuted, raised.clone()])[..5],
        [packed::REPLY_VERSION, 1, 4, 1, 1]
    );
}

#[test]
fn refusals_say_what_and_where() {
    let mismatch = BatchRefusal::DeclarationMismatch {
        canister: Blob::from(vec![0xab; 8]),
        request: Blob::from(vec![0x01; 8]),
    };
    assert_eq!(
        mismatch.to_string(),
        "DeclarationMismatch: the canister's writes are declaration abababababababab, the \
         request was packed for declaration 0101010101010101"
    );
    let malformed: BatchRefusal = packed::PackedError {
        offset: 40,
        what: "x".into(),
    }
    .into();
    assert_eq!(
        malformed,
        BatchRefusal::Malformed {
            offset: 40,
            what: "x".into()
        }
    );
    assert_eq!(
        BatchRefusal::from(WriteError::NotAuthorized),
        BatchRefusal::NotAuthorized
    );
    let full = WriteError::QueueFull { capacity: 3 };
    assert_eq!(
        BatchRefusal::from(full.clone()),
        BatchRefusal::Refused(full)
    );
}

/// The canister refuses a stranger with precomputed bytes, before it reads the argument:
/// `variant { Err = variant { NotAuthorized } }` (ic-rusqlite-batch's `NOT_AUTHORIZED_REPLY`).
/// Both result types of the declared batch methods read them as their own refusal.
#[test]
fn the_precomputed_refusal_reads_as_not_authorized() {
    let bytes: &[u8] = &[
        0x44, 0x49, 0x44, 0x4c, 0x02, 0x6b, 0x01, 0xc5, 0xfe, 0xd2, 0x01, 0x01, 0x6b, 0x01, 0xee,
        0x82, 0xc1, 0xea, 0x07, 0x7f, 0x01, 0x00, 0x00, 0x00,
    ];
    assert_eq!(
        candid::decode_one::<WritesResult>(bytes).unwrap(),
        WritesResult::Err(BatchRefusal::NotAuthorized)
    );
    assert_eq!(
        candid::decode_one::<PackedWritesResult>(bytes).unwrap(),
        PackedWritesResult::Err(BatchRefusal::NotAuthorized)
    );
}

fn arb_op() -> impl Strategy<Value = TodoWrite> {
    prop_oneof![
        (
            ".{0,8}",
            any::<Option<i64>>(),
            proptest::option::of(proptest::collection::vec(any::<u8>(), 0..4))
        )
            .prop_map(|(title, due, tag)| TodoWrite::add_todo {
                title,
                due,
                tag: tag.map(Blob::from)
            }),
        (
            any::<i64>(),
            any::<f64>().prop_filter("not NaN", |x| !x.is_nan())
        )
            .prop_map(|(id, weight)| TodoWrite::set_weight { id, weight }),
        Just(TodoWrite::purge {}),
    ]
}

fn arb_outcome() -> impl Strategy<Value = Outcome> {
    prop_oneof![
        (0..3u64, -2..3i64).prop_map(|(rows_changed, last_insert_rowid)| Outcome::Committed {
            rows_changed,
            last_insert_rowid
        }),
        (prop_oneof![Just(9), Just(19), any::<i32>()], "[ab]{0,2}")
            .prop_map(|(code, message)| Outcome::failed(code, message)),
        Just(Outcome::NotExecuted),
    ]
}

proptest! {
    /// Any outcomes (runs, repeats and singles mixed, in any order) read back exactly, and
    /// their records are never longer than one record per outcome.
    #[test]
    fn any_outcomes_read_back_exactly(outcomes in proptest::collection::vec(arb_outcome(), 0..40)) {
        let mut records = Vec::new();
        packed::put_outcomes(&mut records, &outcomes);
        let mut singles = 0;
        for o in &outcomes {
            let mut one = Vec::new();
            packed::put_outcomes(&mut one, std::slice::from_ref(o));
            singles += one.len();
        }
        prop_assert!(records.len() <= singles);
        prop_assert_eq!(packed::read_outcomes_from(&records, 0, outcomes.len()).unwrap(), outcomes);
    }

    #[test]
    fn any_ops_read_back_exactly(ops in proptest::collection::vec(arb_op(), 0..20)) {
        let request = encode_request(&KEY, &ops);
        let (_, body) = packed::read_header(&request).unwrap();
        let read = packed::read_ops(TodoWrite::declaration(), body, ops.len()).unwrap();
        prop_assert_eq!(read.len(), ops.len());
        for (op, read) in ops.into_iter().zip(read) {
            prop_assert_eq!(read.write, op.index());
            prop_assert_eq!(read.params, op.into_params());
        }
    }

    #[test]
    fn random_bytes_are_read_or_refused_never_a_panic(bytes in proptest::collection::vec(any::<u8>(), 0..80)) {
        let d = TodoWrite::declaration();
        if let Ok(ops) = packed::read_ops(d, &bytes, 64) {
            // What reads back is what the declaration would pack: the same bytes.
            let mut again = Vec::new();
            for op in &ops {
                packed::put_uint(&mut again, op.write as u64);
                for (param, value) in d.writes[op.write].params.iter().zip(&op.params) {
                    if param.nullable {
                        again.push(u8::from(*value != SqlParam::Null));
                    }
                    match value {
                        SqlParam::Null => {}
                        SqlParam::Integer(n) => packed::put_sint(&mut again, *n),
                        SqlParam::Real(x) => again.extend_from_slice(&x.to_le_bytes()),
                        SqlParam::Text(t) => packed::put_text(&mut again, t),
                        SqlParam::Blob(b) => packed::put_bytes(&mut again, b),
                    }
                }
            }
            // Read again, the minimal encoding of what was read gives the same ops.
            prop_assert!(again.len() <= bytes.len());
            prop_assert_eq!(packed::read_ops(d, &again, 64).unwrap(), ops);
        }
        let _ = packed::decode_reply(&bytes, 64);
        let _ = packed::read_header(&bytes);
    }
}
