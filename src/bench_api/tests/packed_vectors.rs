//! The shared test vectors of the packed codec (`testdata/packed_vectors.json`): ops and
//! outcomes with their exact bytes, and refused inputs with the offset of the refusal. The
//! Rust codec writes them (`UPDATE_VECTORS=1 cargo test --release -p bench_api --test
//! packed_vectors`) and checks them byte for byte; every other implementation of the format
//! (the TypeScript client) checks the same file.

use bench_api::packed::{
    decode_keyed_ops, decode_keyed_outcomes, decode_ops, decode_outcomes, encode_keyed_ops,
    encode_keyed_outcomes, encode_ops, encode_outcomes,
};
use bench_api::{BatchKey, OpError, Outcome, UserOrderOp};
use serde_json::{Value, json};

const PATH: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/testdata/packed_vectors.json");

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn order(user_id: i64, bits: u64) -> UserOrderOp {
    UserOrderOp::CreateOrder {
        user_id,
        amount: f64::from_bits(bits),
    }
}

fn update(order_id: i64, bits: u64) -> UserOrderOp {
    UserOrderOp::UpdateOrderAmount {
        order_id,
        amount: f64::from_bits(bits),
    }
}

fn delete(user_id: i64) -> UserOrderOp {
    UserOrderOp::DeleteUserOrders { user_id }
}

fn user(username: &str, email: &str) -> UserOrderOp {
    UserOrderOp::CreateUser {
        username: username.into(),
        email: email.into(),
    }
}

fn committed(rows_changed: u64, last_insert_rowid: i64) -> Outcome {
    Outcome::Committed {
        rows_changed,
        last_insert_rowid,
    }
}

fn failed(code: i32, message: &str) -> Outcome {
    Outcome::Failed(OpError {
        code,
        message: message.into(),
    })
}

fn op_json(op: &UserOrderOp) -> Value {
    match op {
        UserOrderOp::CreateOrder { user_id, amount } => json!({"CreateOrder": {
            "user_id": user_id.to_string(),
            "amount_bits": format!("{:016x}", amount.to_bits()),
        }}),
        UserOrderOp::UpdateOrderAmount { order_id, amount } => json!({"UpdateOrderAmount": {
            "order_id": order_id.to_string(),
            "amount_bits": format!("{:016x}", amount.to_bits()),
        }}),
        UserOrderOp::DeleteUserOrders { user_id } => {
            json!({"DeleteUserOrders": {"user_id": user_id.to_string()}})
        }
        UserOrderOp::CreateUser { username, email } => {
            json!({"CreateUser": {"username": username, "email": email}})
        }
    }
}

fn outcome_json(outcome: &Outcome) -> Value {
    match outcome {
        Outcome::Committed {
            rows_changed,
            last_insert_rowid,
        } => json!({"Committed": {
            "rows_changed": rows_changed.to_string(),
            "last_insert_rowid": last_insert_rowid.to_string(),
        }}),
        Outcome::Failed(OpError { code, message }) => {
            json!({"Failed": {"code": code, "message": message}})
        }
        Outcome::NotExecuted => json!({"NotExecuted": null}),
    }
}

fn key_json(key: &BatchKey) -> Value {
    json!({"created_at_time_ns": key.created_at_time.to_string(), "id": hex(&key.id)})
}

/// Ops vectors: (name, key, ops).
fn op_cases() -> Vec<(&'static str, Option<BatchKey>, Vec<UserOrderOp>)> {
    let mut id = [0u8; 16];
    for (i, b) in id.iter_mut().enumerate() {
        *b = i as u8;
    }
    vec![
        ("no ops", None, vec![]),
        ("one order", None, vec![order(42, 19.5f64.to_bits())]),
        (
            "zigzag extremes and varint boundaries",
            None,
            vec![
                order(i64::MIN, 0),
                order(i64::MAX, 0),
                delete(-1),
                delete(0),
                delete(-64),
                delete(63),
                delete(64),
                delete(-65),
                delete(8_191),
                delete(8_192),
                update(i64::MIN + 1, 0),
            ],
        ),
        (
            "floats bit for bit",
            None,
            vec![
                order(1, 0x7ff8_0000_0000_0000),
                order(2, 0x7ff0_0000_0000_0001),
                order(3, 0xfff8_0000_0000_0abc),
                order(4, f64::INFINITY.to_bits()),
                order(5, f64::NEG_INFINITY.to_bits()),
                order(6, (-0.0f64).to_bits()),
                update(7, 1),
                update(8, f64::MAX.to_bits()),
                update(9, f64::MIN_POSITIVE.to_bits()),
                update(10, 0.1f64.to_bits()),
            ],
        ),
        (
            "texts",
            None,
            vec![
                user("", ""),
                user("é漢🦀", "ünï@x"),
                user(&"n".repeat(127), &"e".repeat(128)),
                user(
                    &"x".repeat(100),
                    &format!("{}@{}", "a".repeat(64), "b".repeat(189)),
                ),
            ],
        ),
        (
            "keyed, no ops",
            Some(BatchKey {
                created_at_time: 0,
                id: [0; 16],
            }),
            vec![],
        ),
        (
            "keyed, mixed ops",
            Some(BatchKey {
                created_at_time: 1_700_000_000_123_456_789,
                id,
            }),
            vec![
                user("alice", "a@x"),
                order(1, 2.5f64.to_bits()),
                update(1, (-0.0f64).to_bits()),
                delete(1),
            ],
        ),
        (
            "keyed, the largest time",
            Some(BatchKey {
                created_at_time: u64::MAX,
                id: [0xff; 16],
            }),
            vec![order(-1, 0x7ff8_0000_0000_0001)],
        ),
    ]
}

/// Outcome vectors: (name, keyed duplicate flag, outcomes).
fn outcome_cases() -> Vec<(&'static str, Option<bool>, Vec<Outcome>)> {
    let inserts: Vec<Outcome> = (1..=10).map(|i| committed(1, i)).collect();
    vec![
        ("no outcomes", None, vec![]),
        ("one insert", None, vec![committed(1, 1)]),
        ("a run of inserts", None, inserts.clone()),
        (
            "runs at the ends of the range",
            None,
            vec![
                committed(1, i64::MAX - 2),
                committed(1, i64::MAX - 1),
                committed(1, i64::MAX),
                committed(3, i64::MIN + 9),
                committed(3, i64::MIN + 6),
                committed(3, i64::MIN + 3),
                committed(3, i64::MIN),
            ],
        ),
        (
            "updates (step 0) and pairs too short for a run",
            None,
            vec![
                committed(1, 0),
                committed(1, 0),
                committed(1, 0),
                committed(1, 0),
                committed(0, 0),
                committed(2, 5),
                committed(2, 6),
                committed(u64::MAX, i64::MIN),
            ],
        ),
        (
            "failures",
            None,
            vec![
                failed(2067, "UNIQUE constraint failed: users.email"),
                failed(i32::MIN, ""),
                failed(i32::MAX, "é漢🦀"),
                failed(
                    9,
                    "interrupted: the batch reached its limit of 20000000000 instructions while this op ran; the op was rolled back (run it alone or in a smaller batch)",
                ),
                failed(-1, &"m".repeat(300)),
            ],
        ),
        (
            "runs between failures",
            None,
            vec![
                committed(1, 1),
                committed(1, 2),
                committed(1, 3),
                failed(787, "FOREIGN KEY constraint failed"),
                committed(1, 4),
                committed(1, 5),
                committed(1, 6),
                committed(1, 7),
            ],
        ),
        (
            "a failure repeated (one record) and the ops a budget did not reach (one record)",
            None,
            vec![
                committed(1, 1),
                failed(1811, "trigger: not today"),
                failed(1811, "trigger: not today"),
                failed(1811, "trigger: not today"),
                Outcome::NotExecuted,
                Outcome::NotExecuted,
                Outcome::NotExecuted,
            ],
        ),
        ("keyed, first answer, no outcomes", Some(false), vec![]),
        ("keyed, duplicate, a run", Some(true), inserts),
        (
            "keyed, first answer, mixed",
            Some(false),
            vec![
                committed(1, 7),
                failed(2067, "UNIQUE constraint failed: users.email"),
            ],
        ),
        (
            "keyed, duplicate, one op not executed",
            Some(true),
            vec![committed(1, 7), Outcome::NotExecuted],
        ),
    ]
}

/// Refused inputs: (name, decoder, max, bytes). The offset comes from the Rust decoder.
fn refused_cases() -> Vec<(&'static str, &'static str, usize, Vec<u8>)> {
    let mut too_long = vec![1, 3];
    too_long.extend([0xff; 9]);
    too_long.push(0x02);
    vec![
        ("empty request", "ops", 10, vec![]),
        ("a reply version as a request", "ops", 10, vec![2]),
        ("an unknown op tag", "ops", 10, vec![1, 9]),
        ("a truncated float", "ops", 10, vec![1, 1, 0, 0, 0]),
        ("a varint past 64 bits", "ops", 10, too_long),
        ("text that is not UTF-8", "ops", 10, vec![1, 4, 1, 0xff, 0]),
        ("text past the end", "ops", 10, vec![1, 4, 5, b'a']),
        ("more ops than allowed", "ops", 1, vec![1, 3, 0, 3, 0]),
        (
            "a keyed request cut in its key",
            "keyed_ops",
            10,
            vec![2, 0, 0],
        ),
        (
            "an unkeyed request as keyed",
            "keyed_ops",
            10,
            vec![1, 3, 0],
        ),
        ("an unknown outcome tag", "outcomes", 10, vec![2, 5]),
        ("a run of zero", "outcomes", 10, vec![2, 2, 0, 1, 0, 0]),
        (
            "a run past the expected count",
            "outcomes",
            3,
            vec![2, 2, 4, 1, 0, 2],
        ),
        (
            "a run past the rowid range",
            "outcomes",
            10,
            vec![
                2, 2, 3, 1, 0xfc, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 2,
            ],
        ),
        (
            "a code past 32 bits",
            "outcomes",
            10,
            vec![2, 1, 0x80, 0x80, 0x80, 0x80, 0x20, 0],
        ),
        (
            "more outcomes than expected",
            "outcomes",
            1,
            vec![2, 0, 1, 2, 0, 1, 4],
        ),
        ("an unknown flag", "keyed_outcomes", 10, vec![3, 4]),
        ("a keyed reply without flags", "keyed_outcomes", 10, vec![3]),
        (
            "an unkeyed reply as keyed",
            "keyed_outcomes",
            10,
            vec![2, 0, 1, 2],
        ),
    ]
}

fn vectors() -> Value {
    let ops: Vec<Value> = op_cases()
        .iter()
        .map(|(name, key, ops)| {
            let bytes = match key {
                Some(key) => encode_keyed_ops(key, ops),
                None => encode_ops(ops),
            };
            json!({
                "name": name,
                "key": key.as_ref().map(key_json),
                "ops": ops.iter().map(op_json).collect::<Vec<_>>(),
                "hex": hex(&bytes),
            })
        })
        .collect();
    let outcomes: Vec<Value> = outcome_cases()
        .iter()
        .map(|(name, keyed, outcomes)| {
            let bytes = match keyed {
                Some(duplicate) => encode_keyed_outcomes(*duplicate, outcomes),
                None => encode_outcomes(outcomes),
            };
            json!({
                "name": name,
                "keyed": keyed.map(|duplicate| json!({"duplicate": duplicate})),
                "outcomes": outcomes.iter().map(outcome_json).collect::<Vec<_>>(),
                "hex": hex(&bytes),
            })
        })
        .collect();
    let refused: Vec<Value> = refused_cases()
        .iter()
        .map(|(name, decoder, max, bytes)| {
            let error = match *decoder {
                "ops" => decode_ops(bytes, *max).map(drop),
                "keyed_ops" => decode_keyed_ops(bytes, *max).map(drop),
                "outcomes" => decode_outcomes(bytes, *max).map(drop),
                "keyed_outcomes" => decode_keyed_outcomes(bytes, *max).map(drop),
                other => panic!("unknown decoder {other}"),
            }
            .expect_err(name);
            json!({
                "name": name,
                "decoder": decoder,
                "max": max,
                "hex": hex(bytes),
                "offset": error.offset,
                "what": error.what,
            })
        })
        .collect();
    json!({
        "about": "Test vectors of the packed client batch (bench_api::packed): ops and outcomes with their exact bytes (hex), and refused inputs with the byte offset of the refusal. 64-bit integers are decimal strings; floats are their IEEE 754 bits as 16 hex digits. Written by `UPDATE_VECTORS=1 cargo test --release -p bench_api --test packed_vectors`; checked byte for byte by the Rust and TypeScript codecs.",
        "ops": ops,
        "outcomes": outcomes,
        "refused": refused,
    })
}

#[test]
fn the_committed_vectors_are_what_the_codec_writes() {
    let text = serde_json::to_string_pretty(&vectors()).expect("json") + "\n";
    if std::env::var_os("UPDATE_VECTORS").is_some() {
        std::fs::write(PATH, &text).expect("write the vectors");
        return;
    }
    let committed = std::fs::read_to_string(PATH).expect("read the vectors");
    assert!(
        committed == text,
        "{PATH} differs from what the codec writes: run UPDATE_VECTORS=1 cargo test --release -p bench_api --test packed_vectors and review the diff"
    );
}

#[test]
fn every_vector_decodes_to_its_value() {
    for (name, key, ops) in op_cases() {
        match key {
            Some(key) => {
                let (read_key, read) =
                    decode_keyed_ops(&encode_keyed_ops(&key, &ops), ops.len()).expect(name);
                assert_eq!(read_key, key, "{name}");
                assert_eq!(
                    read.iter().map(op_json).collect::<Vec<_>>(),
                    ops.iter().map(op_json).collect::<Vec<_>>(),
                    "{name}"
                );
            }
            None => {
                let read = decode_ops(&encode_ops(&ops), ops.len()).expect(name);
                assert_eq!(
                    read.iter().map(op_json).collect::<Vec<_>>(),
                    ops.iter().map(op_json).collect::<Vec<_>>(),
                    "{name}"
                );
            }
        }
    }
    for (name, keyed, outcomes) in outcome_cases() {
        match keyed {
            Some(duplicate) => {
                let reply = decode_keyed_outcomes(
                    &encode_keyed_outcomes(duplicate, &outcomes),
                    outcomes.len(),
                )
                .expect(name);
                assert_eq!(
                    (reply.duplicate, reply.outcomes),
                    (duplicate, outcomes),
                    "{name}"
                );
            }
            None => {
                let read =
                    decode_outcomes(&encode_outcomes(&outcomes), outcomes.len()).expect(name);
                assert_eq!(read, outcomes, "{name}");
            }
        }
    }
}
