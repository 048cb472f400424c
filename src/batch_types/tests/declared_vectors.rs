//! The shared test vectors of the generic packed format (`testdata/declared_vectors.json`): a
//! declaration with its digest, requests with their exact bytes, replies with theirs, and
//! refused requests with the offset and reason of the refusal, and each request's Candid
//! argument (`execute_writes_packed`'s). The Rust codec writes them
//! (`UPDATE_VECTORS=1 cargo test -p ic-rusqlite-batch-types --test declared_vectors`) and checks
//! them byte for byte; every other implementation of the format (the TypeScript client) checks
//! the same file.

use batch_types::declare::{Blob, Writes, encode_request};
use batch_types::packed;
use batch_types::{BatchKey, OpError, Outcome, SqlParam};
use serde_json::{Value, json};

const PATH: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/testdata/declared_vectors.json"
);

batch_types::writes! {
    /// Every kind of parameter, nullable and not, with and without a size limit.
    pub enum VectorWrite {
        /// Integers and reals.
        numbers = "INSERT INTO n (a, b, c) VALUES (?1, ?2, ?3)" {
            a: i64,
            b: f64,
            c: Option<i64>,
        },
        /// Text and blobs.
        bytes = "INSERT INTO b (t, u, v) VALUES (?1, ?2, ?3)" {
            t: String [max 16],
            u: Option<String>,
            v: Option<Blob> [max 8],
        },
        /// No parameter; controllers only.
        reset (controllers) = "DELETE FROM n" {},
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn key(created_at_time: u64, fill: u8) -> BatchKey {
    BatchKey {
        created_at_time,
        id: [fill; 16],
    }
}

fn value_json(value: &SqlParam) -> Value {
    match value {
        SqlParam::Null => Value::Null,
        SqlParam::Integer(n) => json!(n.to_string()),
        SqlParam::Real(x) => json!(x),
        SqlParam::Text(t) => json!(t),
        SqlParam::Blob(b) => json!(hex(b)),
    }
}

fn op_json(op: &VectorWrite) -> Value {
    let decl = &VectorWrite::declaration().writes[op.index()];
    let params: serde_json::Map<String, Value> = decl
        .params
        .iter()
        .zip(op.clone().into_params())
        .map(|(p, v)| (p.name.to_owned(), value_json(&v)))
        .collect();
    json!({ "write": decl.name, "params": params })
}

fn outcome_json(outcome: &Outcome) -> Value {
    match outcome {
        Outcome::Committed {
            rows_changed,
            last_insert_rowid,
        } => json!({ "Committed": {
            "rows_changed": rows_changed.to_string(),
            "last_insert_rowid": last_insert_rowid.to_string(),
        }}),
        Outcome::Failed(OpError { code, message }) => {
            json!({ "Failed": { "code": code, "message": message } })
        }
        Outcome::NotExecuted => json!({ "NotExecuted": null }),
    }
}

fn requests() -> Vec<(BatchKey, Vec<VectorWrite>)> {
    vec![
        (key(0, 0), vec![]),
        (
            key(1_700_000_000_123_456_789, 0xA5),
            vec![
                VectorWrite::numbers {
                    a: 0,
                    b: 0.0,
                    c: None,
                },
                VectorWrite::numbers {
                    a: -1,
                    b: -2.5,
                    c: Some(63),
                },
                VectorWrite::numbers {
                    a: i64::MAX,
                    b: f64::MAX,
                    c: Some(i64::MIN),
                },
                VectorWrite::numbers {
                    a: 64,
                    b: 1e-300,
                    c: Some(-64),
                },
            ],
        ),
        (
            key(u64::MAX, 0x01),
            vec![
                VectorWrite::bytes {
                    t: String::new(),
                    u: None,
                    v: None,
                },
                VectorWrite::bytes {
                    t: "héllo ✓".into(),
                    u: Some("x".repeat(130)),
                    v: Some(Blob::from(vec![0, 255, 128])),
                },
                VectorWrite::reset {},
                VectorWrite::bytes {
                    t: "t".into(),
                    u: Some(String::new()),
                    v: Some(Blob::from(vec![])),
                },
            ],
        ),
    ]
}

fn replies() -> Vec<(bool, Vec<Outcome>)> {
    let committed = |rows_changed, last_insert_rowid| Outcome::Committed {
        rows_changed,
        last_insert_rowid,
    };
    let failed = |code, message: &str| {
        Outcome::Failed(OpError {
            code,
            message: message.into(),
        })
    };
    vec![
        (false, vec![]),
        (true, vec![committed(1, 7)]),
        (false, (1..=5).map(|k| committed(1, k)).collect()),
        (
            false,
            vec![
                committed(1, 10),
                committed(1, 11),
                failed(275, "CHECK constraint failed: length(title) > 0"),
                committed(0, 11),
                committed(0, 11),
                committed(0, 11),
                committed(2, -3),
                failed(9, "interrupted: the op reached its instruction limit"),
            ],
        ),
        (
            false,
            vec![
                committed(1, i64::MAX - 2),
                committed(1, i64::MAX - 1),
                committed(1, i64::MAX),
            ],
        ),
        // A failure repeated (one record, tag 3), a lone failure, and the ops a budget did
        // not reach (one record, tag 4).
        (
            true,
            vec![
                failed(1811, "trigger: too late"),
                failed(1811, "trigger: too late"),
                failed(1811, "trigger: too late"),
                failed(19, "é"),
                committed(1, 1),
                Outcome::NotExecuted,
                Outcome::NotExecuted,
            ],
        ),
        (false, vec![Outcome::NotExecuted]),
    ]
}

/// The ops bytes of requests the reader refuses (after a valid header).
fn refused() -> Vec<Vec<u8>> {
    vec![
        // No write 3.
        vec![3],
        // numbers: b cut short.
        vec![0, 0],
        // numbers: c's presence byte is 2.
        vec![0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 2],
        // bytes: t is not UTF-8.
        vec![1, 2, 0xC3, 0x28, 0, 0],
        // A write index cut short.
        vec![0x80],
        // A write index past 64 bits.
        vec![0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f],
        // Write index 1 padded to two bytes: not the shortest form.
        vec![0x81, 0x00, 2, b'h', b'i', 0, 0],
        // numbers: a = 1 (zigzag 2) padded to two bytes.
        vec![0, 0x82, 0x00, 0, 0, 0, 0, 0, 0, 0, 0, 0],
        // bytes: t's length padded to ten bytes.
        vec![
            1, 0x82, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00, b'h', b'i', 0, 0,
        ],
    ]
}

fn vectors() -> Value {
    let declaration = VectorWrite::declaration();
    let view = declaration.view();
    let requests: Vec<Value> = requests()
        .into_iter()
        .map(|(key, ops)| {
            json!({
                "key": {
                    "created_at_time_ns": key.created_at_time.to_string(),
                    "id": hex(&key.id),
                },
                "ops": ops.iter().map(op_json).collect::<Vec<_>>(),
                "bytes": hex(&encode_request(&key, &ops)),
                // `execute_writes_packed`'s Candid argument: every client's encoding of the
                // request, which the canister decodes strictly.
                "argument": hex(&candid::encode_one(Blob::from(encode_request(&key, &ops))).unwrap()),
            })
        })
        .collect();
    let replies: Vec<Value> = replies()
        .into_iter()
        .map(|(duplicate, outcomes)| {
            json!({
                "duplicate": duplicate,
                "outcomes": outcomes.iter().map(outcome_json).collect::<Vec<_>>(),
                "bytes": hex(&packed::encode_reply(duplicate, &outcomes)),
            })
        })
        .collect();
    let mut header = Vec::new();
    packed::request_header(&mut header, declaration.digest, &key(5, 5));
    let refused: Vec<Value> = refused()
        .into_iter()
        .map(|ops| {
            let err = packed::read_ops(declaration, &ops, 100).expect_err("refused");
            let mut bytes = header.clone();
            bytes.extend_from_slice(&ops);
            json!({ "bytes": hex(&bytes), "offset": err.offset, "what": err.what })
        })
        .collect();
    json!({
        "declaration": {
            "name": view.name,
            "digest": hex(&view.digest),
            "writes": view.writes.iter().map(|w| json!({
                "name": w.name,
                "sql": w.sql,
                "access": format!("{:?}", w.access),
                "params": w.params.iter().map(|p| json!({
                    "name": p.name,
                    "kind": format!("{:?}", p.kind),
                    "nullable": p.nullable,
                    "max_bytes": p.max_bytes,
                })).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
        },
        "requests": requests,
        "replies": replies,
        "refused": refused,
    })
}

#[test]
fn the_committed_vectors_are_what_the_codec_writes_and_reads() {
    let text = serde_json::to_string_pretty(&vectors()).unwrap() + "\n";
    if std::env::var_os("UPDATE_VECTORS").is_some() {
        std::fs::write(PATH, &text).unwrap();
    }
    let committed = std::fs::read_to_string(PATH)
        .expect("testdata/declared_vectors.json (UPDATE_VECTORS=1 writes it)");
    assert_eq!(
        committed, text,
        "the committed vectors differ from the codec's output"
    );
    // And every request reads back as its ops, every reply as its outcomes.
    let declaration = VectorWrite::declaration();
    for (key, ops) in requests() {
        let bytes = encode_request(&key, &ops);
        let (header, body) = packed::read_header(&bytes).unwrap();
        assert_eq!((header.key, header.digest), (key, declaration.digest));
        let read = packed::read_ops(declaration, body, 100).unwrap();
        let params: Vec<_> = read.into_iter().map(|op| op.params).collect();
        let expected: Vec<_> = ops.into_iter().map(Writes::into_params).collect();
        assert_eq!(params, expected);
    }
    for (duplicate, outcomes) in replies() {
        let bytes = packed::encode_reply(duplicate, &outcomes);
        let reply = packed::decode_reply(&bytes, outcomes.len()).unwrap();
        assert_eq!((reply.duplicate, reply.outcomes), (duplicate, outcomes));
    }
}
