//! What a careless client or controller sends the reference canister in the wrong shape, and
//! what it gets (engine: offline (wasmtime, IC metering)): a batch key or parameter of another
//! Candid type is refused naming it, never read as absent (a keyed batch would run unkeyed and
//! twice); a batch whose outcomes carry long messages is answered within the 2 MiB a reply may
//! hold, through every batch method, its valid ops committed; a packed batch has one encoding,
//! so a retry that encodes the same ops again is a duplicate; the page-level virtual tables are
//! out of an op's reach; install settings of another type are refused. Each refusal's
//! instructions are printed. Build the wasm first (scripts/build.sh; scripts/test.sh does).

use batch_types::declare::{
    BatchRefusal, PackedWritesResult, WritesReply, WritesResult, encode_request,
};
use batch_types::packed;
use batch_types::reply::{MAX_REPLY_BYTES, TRUNCATION_MARK, max_error_bytes};
use bench_api::writes::UserOrderWrite;
use bench_api::*;
use bench_suite::client::{Client, principal};
use offline_engine::{Execution, MessageResult};

const WRITER: &[u8] = &[0xAB, 0xCD, 0x03];

fn install() -> Client {
    let mut c = Client::install(InitArgs::default());
    let added: AdminResult = c.update("add_writers", (vec![principal(WRITER)],));
    assert_eq!(added, AdminResult::Ok(()));
    c
}

/// The Candid bytes of `text` (Candid's textual form, types annotated).
fn candid_text(text: &str) -> Vec<u8> {
    candid_parser::parse_idl_args(text)
        .unwrap_or_else(|e| panic!("{text}: {e}"))
        .to_bytes()
        .unwrap()
}

fn id_text(n: u8) -> String {
    format!("blob \"{}\"", format!("\\{n:02x}").repeat(16))
}

fn raw(c: &mut Client, method: &str, arg: &[u8]) -> Execution {
    c.canister
        .update_as(WRITER, method, arg)
        .unwrap_or_else(|e| panic!("{method}: {e}"))
}

fn reply<R: candid::CandidType + for<'de> candid::Deserialize<'de>>(exec: &Execution) -> R {
    bench_suite::client::decode("the call", exec)
}

fn committed(rows_changed: u64, rowid: i64) -> Outcome {
    Outcome::Committed {
        rows_changed,
        last_insert_rowid: rowid,
    }
}

const TWO_ORDERS: &str = "vec { variant { CreateOrder = record { user_id = 1 : int64; amount = 1.0 : float64 } }; variant { CreateOrder = record { user_id = 1 : int64; amount = 2.0 : float64 } } }";

/// The attacker's batch: two orders under a key whose `created_at_time` is a `nat` (or another
/// type) where the method takes `nat64`, or whose id is missing or a `text`. Candid alone reads
/// the key as null: the batch ran unkeyed, and its resend wrote 4 orders. Now each is refused
/// naming the field and the type sent, nothing is written, and the key stays free: the same
/// batch with the right key runs once, its resend is a duplicate.
#[test]
fn a_mistyped_key_is_refused_and_the_right_key_then_runs_once() {
    let mut c = install();
    c.create_user("ada");
    let now = c.canister.time();
    for (key, message) in [
        (
            format!("created_at_time = {now} : nat; id = {}", id_text(1)),
            "argument key, field created_at_time: nat sent where nat64 is expected",
        ),
        (
            format!("created_at_time = {now} : int; id = {}", id_text(1)),
            "argument key, field created_at_time: int sent where nat64 is expected",
        ),
        (
            format!(
                "created_at_time = {} : nat32; id = {}",
                now % 1_000,
                id_text(1)
            ),
            "argument key, field created_at_time: nat32 sent where nat64 is expected",
        ),
        (
            format!("created_at_time = {now} : nat64; id = \"0123456789abcdef\""),
            "argument key, field id: text sent where blob is expected",
        ),
        (
            format!("created_at_time = {now} : nat64"),
            "argument key, field id: nothing sent where blob is expected",
        ),
    ] {
        let arg = candid_text(&format!("({TWO_ORDERS}, opt record {{ {key} }})"));
        for _ in 0..2 {
            let exec = raw(&mut c, "execute_batch", &arg);
            let BatchResult::Err(WriteError::Invalid(why)) = reply::<BatchResult>(&exec) else {
                panic!("{key}: {:?}", exec.result)
            };
            assert!(why.starts_with(message), "{key}: {why}");
            println!(
                "mistyped key refused (engine: offline (wasmtime, IC metering)): {} instructions ({key})",
                exec.instructions
            );
        }
    }
    assert_eq!(c.counts().orders, 0, "nothing was written");
    assert_eq!(c.stats().keyed_batches, 0);

    let right = candid_text(&format!(
        "({TWO_ORDERS}, opt record {{ created_at_time = {now} : nat64; id = {} }})",
        id_text(1)
    ));
    let first: BatchResult = reply(&raw(&mut c, "execute_batch", &right));
    assert_eq!(
        first,
        BatchResult::Ok(vec![committed(1, 1), committed(1, 2)])
    );
    let again: BatchResult = reply(&raw(&mut c, "execute_batch", &right));
    assert_eq!(
        again,
        BatchResult::Duplicate(vec![committed(1, 1), committed(1, 2)])
    );
    assert_eq!(c.counts().orders, 2);

    // The declared batch method takes the key bare: the same mistakes, refused the same way.
    let ops =
        "vec { variant { create_order = record { user_id = 1 : int64; amount = 3.0 : float64 } } }";
    let arg = candid_text(&format!(
        "(record {{ created_at_time = {now} : nat; id = {} }}, {ops})",
        id_text(2)
    ));
    let refused: WritesResult = reply(&raw(&mut c, "execute_writes", &arg));
    let WritesResult::Err(BatchRefusal::Refused(WriteError::Invalid(why))) = refused else {
        panic!("{refused:?}")
    };
    assert!(
        why.starts_with("argument key, field created_at_time: nat sent where nat64 is expected"),
        "{why}"
    );
    assert_eq!(c.counts().orders, 2);
}

/// A declared parameter of another type, in a batch or a single write: refused naming the
/// argument, the write and the parameter; nothing is written.
#[test]
fn a_mistyped_declared_parameter_is_refused_naming_it() {
    let mut c = install();
    c.create_user("bo");
    let now = c.canister.time();
    let arg = candid_text(&format!(
        "(record {{ created_at_time = {now} : nat64; id = {} }}, vec {{ variant {{ create_order = record {{ user_id = 1 : nat; amount = 3.0 : float64 }} }} }})",
        id_text(3)
    ));
    let refused: WritesResult = reply(&raw(&mut c, "execute_writes", &arg));
    assert_eq!(
        refused,
        WritesResult::Err(BatchRefusal::Refused(WriteError::Invalid(
            "argument ops, an element, variant create_order, field user_id: nat sent where int64 \
             is expected (a value of another type is refused, never read as null)"
                .into()
        )))
    );
    let arg = candid_text(
        "(variant { create_order = record { user_id = 1 : int64; amount = 3.0 : float32 } })",
    );
    let exec = raw(&mut c, "execute_write", &arg);
    assert_eq!(
        reply::<WriteResult>(&exec),
        WriteResult::Err(WriteError::Invalid(
            "argument op, variant create_order, field amount: float32 sent where float64 is \
             expected (a value of another type is refused, never read as null)"
                .into()
        ))
    );
    println!(
        "mistyped parameter refused (engine: offline (wasmtime, IC metering)): {} instructions",
        exec.instructions
    );
    assert_eq!(c.counts().orders, 0);
}

/// The batch that could never be answered: a controller's trigger raises a 1,000-character
/// message on negative amounts, and a writer sends one valid order and 2,200 (then 9,999)
/// refused ones. Every reply carried every message whole (over 2 MiB) and trapped, and so did
/// every retry. Now each message keeps the batch's share of the reply (with the code and a
/// mark at the cut), every batch method answers within 2 MiB, the valid order commits, and a
/// resend of a keyed batch answers the same outcomes.
#[test]
fn a_batch_of_long_failure_messages_is_answered_within_a_reply_by_every_method() {
    let mut c = install();
    c.create_user("cy");
    let message = "x".repeat(1_000);
    let created: WriteResult = c.update(
        "execute_sql",
        (vec![SqlStatement {
            sql: format!(
                "CREATE TRIGGER no_negative BEFORE INSERT ON orders WHEN NEW.amount < 0 \
                 BEGIN SELECT RAISE(ABORT, '{message}'); END"
            ),
            params: vec![],
        }],),
    );
    assert!(matches!(created, WriteResult::Ok(_)), "{created:?}");

    let mut orders = 0;
    let mut n = 0u8;
    for ops in [2_201, MAX_CLIENT_BATCH] {
        let cap = max_error_bytes(ops);
        // The amounts: 1.0 for the first op, -1.0 for every other.
        let amount = |i: usize| if i == 0 { 1.0 } else { -1.0 };
        let hand: Vec<UserOrderOp> = (0..ops)
            .map(|i| UserOrderOp::CreateOrder {
                user_id: 1,
                amount: amount(i),
            })
            .collect();
        let declared: Vec<UserOrderWrite> = (0..ops)
            .map(|i| UserOrderWrite::create_order {
                user_id: 1,
                amount: amount(i),
            })
            .collect();
        let mut key = || {
            n += 1;
            BatchKey {
                created_at_time: c.canister.time(),
                id: [n; 16],
            }
        };
        let (k1, k2, k3, k4) = (key(), key(), key(), key());
        let calls: Vec<(&str, Vec<u8>, bool)> = vec![
            (
                "execute_batch",
                candid::encode_args((hand.clone(), None::<BatchKey>)).unwrap(),
                false,
            ),
            (
                "execute_batch",
                candid::encode_args((hand.clone(), Some(k1))).unwrap(),
                true,
            ),
            (
                "execute_batch_packed",
                candid::encode_one(serde_bytes::ByteBuf::from(bench_api::packed::encode_ops(
                    &hand,
                )))
                .unwrap(),
                false,
            ),
            (
                "execute_batch_packed",
                candid::encode_one(serde_bytes::ByteBuf::from(
                    bench_api::packed::encode_keyed_ops(&k2, &hand),
                ))
                .unwrap(),
                true,
            ),
            (
                "execute_writes",
                candid::encode_args((k3, declared.clone())).unwrap(),
                true,
            ),
            (
                "execute_writes_packed",
                candid::encode_one(serde_bytes::ByteBuf::from(encode_request(&k4, &declared)))
                    .unwrap(),
                true,
            ),
        ];
        for (method, arg, keyed) in calls {
            let mut answers = Vec::new();
            for attempt in 0..if keyed { 2 } else { 1 } {
                let exec = raw(&mut c, method, &arg);
                let MessageResult::Reply(bytes) = &exec.result else {
                    panic!("{method} of {ops} ops: {:?}", exec.result)
                };
                assert!(
                    bytes.len() <= MAX_REPLY_BYTES,
                    "{method}: {} bytes",
                    bytes.len()
                );
                println!(
                    "{method} of {ops} ops, 1 valid (engine: offline (wasmtime, IC metering)): reply {} bytes, {} instructions{}",
                    bytes.len(),
                    exec.instructions,
                    if attempt == 1 {
                        " (resent: duplicate)"
                    } else {
                        ""
                    }
                );
                let (outcomes, duplicate) = outcomes_of(method, bytes, ops);
                assert_eq!(duplicate, attempt == 1, "{method}");
                answers.push(outcomes);
            }
            let outcomes = &answers[0];
            orders += 1;
            assert_eq!(outcomes.len(), ops);
            assert!(
                matches!(
                    outcomes[0],
                    Outcome::Committed {
                        rows_changed: 1,
                        ..
                    }
                ),
                "{method}: {:?}",
                outcomes[0]
            );
            for outcome in &outcomes[1..] {
                let Outcome::Failed(OpError { code, message }) = outcome else {
                    panic!("{method}: {outcome:?}")
                };
                // SQLITE_CONSTRAINT_TRIGGER, and the message cut to the batch's share.
                assert_eq!(*code, 1811, "{method}");
                assert!(message.len() <= cap, "{method}: {} > {cap}", message.len());
                assert!(message.ends_with(TRUNCATION_MARK), "{method}: {message}");
                assert!(message.starts_with("xxxx"), "{method}: {message}");
            }
            if let Some(resent) = answers.get(1) {
                assert_eq!(resent, outcomes, "{method}: the resend answers the same");
            }
            assert_eq!(
                c.counts().orders,
                orders,
                "{method}: the valid order committed once"
            );
        }
    }
}

/// The outcomes (and whether a duplicate) of a batch method's reply.
fn outcomes_of(method: &str, bytes: &[u8], ops: usize) -> (Vec<Outcome>, bool) {
    match method {
        "execute_batch" => match candid::decode_one::<BatchResult>(bytes).unwrap() {
            BatchResult::Ok(o) => (o, false),
            BatchResult::Duplicate(o) => (o, true),
            BatchResult::Err(e) => panic!("{method}: {e:?}"),
        },
        "execute_batch_packed" => {
            let blob = match candid::decode_one::<PackedResult>(bytes).unwrap() {
                PackedResult::Ok(blob) => blob,
                PackedResult::Err(e) => panic!("{method}: {e:?}"),
            };
            if blob[0] == bench_api::packed::KEYED_REPLY_VERSION {
                let r = bench_api::packed::decode_keyed_outcomes(&blob, ops).unwrap();
                (r.outcomes, r.duplicate)
            } else {
                (
                    bench_api::packed::decode_outcomes(&blob, ops).unwrap(),
                    false,
                )
            }
        }
        "execute_writes" => match candid::decode_one::<WritesResult>(bytes).unwrap() {
            WritesResult::Ok(WritesReply {
                outcomes,
                duplicate,
            }) => (outcomes, duplicate),
            WritesResult::Err(e) => panic!("{method}: {e}"),
        },
        "execute_writes_packed" => match candid::decode_one::<PackedWritesResult>(bytes).unwrap() {
            PackedWritesResult::Ok(blob) => {
                let r = packed::decode_reply(&blob, ops).unwrap();
                (r.outcomes, r.duplicate)
            }
            PackedWritesResult::Err(e) => panic!("{method}: {e}"),
        },
        other => panic!("{other}"),
    }
}

/// The false refusal: a packed `create_order(1, 2.5)` with its write index padded (`81 00`
/// for 1) ran, and its resend in canonical bytes was refused `DigestMismatch`. Now the padded
/// request is refused `Malformed` at the padded varint, in the generic and the hand-written
/// format, and runs nothing; the canonical one runs, and its resend through Candid (another
/// encoding of the same ops) is a duplicate with the recorded outcomes.
#[test]
fn a_packed_batch_has_one_encoding_and_a_re_encoded_retry_is_a_duplicate() {
    let mut c = install();
    c.create_user("di");
    let key = BatchKey {
        created_at_time: c.canister.time(),
        id: [9; 16],
    };
    let ops = [UserOrderWrite::create_order {
        user_id: 1,
        amount: 2.5,
    }];
    let canonical = encode_request(&key, &ops);
    // The write index (1) right after the 33-byte header, padded to `81 00`.
    let header = packed::REQUEST_HEADER_BYTES;
    assert_eq!(canonical[header], 1);
    let mut padded = canonical[..header].to_vec();
    padded.extend_from_slice(&[0x81, 0x00]);
    padded.extend_from_slice(&canonical[header + 1..]);
    let send = |c: &mut Client, request: &[u8]| -> PackedWritesResult {
        reply(&raw(
            c,
            "execute_writes_packed",
            &candid::encode_one(serde_bytes::ByteBuf::from(request.to_vec())).unwrap(),
        ))
    };
    let refused = send(&mut c, &padded);
    assert_eq!(
        refused,
        PackedWritesResult::Err(BatchRefusal::Malformed {
            offset: header as u64,
            what: "a write index: varint 1 padded to 2 bytes (not its shortest form)".into(),
        })
    );
    // The user id (1, zigzag 2) padded to `82 00`.
    let mut padded_param = canonical[..=header].to_vec();
    padded_param.extend_from_slice(&[0x82, 0x00]);
    padded_param.extend_from_slice(&canonical[header + 2..]);
    assert!(matches!(
        send(&mut c, &padded_param),
        PackedWritesResult::Err(BatchRefusal::Malformed { offset, .. }) if offset == header as u64 + 1
    ));
    assert_eq!(c.counts().orders, 0);
    let ran = send(&mut c, &canonical);
    let PackedWritesResult::Ok(blob) = ran else {
        panic!("{ran:?}")
    };
    let first = packed::decode_reply(&blob, 1).unwrap();
    assert_eq!(
        (first.outcomes.clone(), first.duplicate),
        (vec![committed(1, 1)], false)
    );
    let in_candid: WritesResult = reply(&raw(
        &mut c,
        "execute_writes",
        &candid::encode_args((key, ops.to_vec())).unwrap(),
    ));
    assert_eq!(
        in_candid,
        WritesResult::Ok(WritesReply {
            outcomes: first.outcomes,
            duplicate: true
        })
    );

    // The hand-written format: the user id padded is refused too, naming its offset.
    let hand = [UserOrderOp::CreateOrder {
        user_id: 1,
        amount: 2.5,
    }];
    let key2 = BatchKey {
        id: [10; 16],
        ..key
    };
    let keyed = bench_api::packed::encode_keyed_ops(&key2, &hand);
    let at = bench_api::packed::KEYED_HEADER_BYTES + 1;
    assert_eq!(keyed[at], 2, "user id 1, zigzag");
    let mut padded = keyed[..at].to_vec();
    padded.extend_from_slice(&[0x82, 0x00]);
    padded.extend_from_slice(&keyed[at + 1..]);
    let refused: PackedResult = reply(&raw(
        &mut c,
        "execute_batch_packed",
        &candid::encode_one(serde_bytes::ByteBuf::from(padded)).unwrap(),
    ));
    let PackedResult::Err(WriteError::Invalid(why)) = refused else {
        panic!("{refused:?}")
    };
    assert!(
        why.contains(&format!("byte {at}")) && why.contains("not its shortest form"),
        "{why}"
    );
    assert_eq!(c.counts().orders, 1);
}

/// SQLite's page statistics (`dbstat`) cover every table of the file, the library's keys
/// included, whatever the statement's text names: a controller's op that copies from them is
/// refused, and nothing is written.
#[test]
fn page_level_virtual_tables_are_out_of_reach_of_a_controller_s_sql() {
    let mut c = install();
    let made: WriteResult = c.update(
        "execute_sql",
        (vec![SqlStatement {
            sql: "CREATE TABLE copied (name TEXT, n INTEGER, data BLOB)".into(),
            params: vec![],
        }],),
    );
    assert!(matches!(made, WriteResult::Ok(_)), "{made:?}");
    // A keyed batch, so the library's tables hold a key.
    let key = BatchKey {
        created_at_time: c.canister.time(),
        id: [4; 16],
    };
    let _: BatchResult = c.update_as(
        WRITER,
        "execute_batch",
        (Vec::<UserOrderOp>::new(), Some(key)),
    );
    let sql = |c: &mut Client, text: &str| -> WriteResult {
        c.update(
            "execute_sql",
            (vec![SqlStatement {
                sql: text.into(),
                params: vec![],
            }],),
        )
    };
    for text in [
        "INSERT INTO copied (name, n) SELECT name, pageno FROM dbstat WHERE name GLOB '*dedup_keys'",
        "INSERT INTO copied (name, n) SELECT name, pgsize FROM DBSTAT('main')",
    ] {
        assert_eq!(
            sql(&mut c, text),
            WriteResult::Ok(Outcome::Failed(OpError {
                code: 23,
                message: "refused, nothing happened: dbstat reaches the pages of every table, \
                          the library's included"
                    .into(),
            })),
            "{text}"
        );
    }
    // sqlite_dbpage (raw pages, writable) is not compiled into ic-rusqlite's SQLite: an op
    // naming it fails before the allow-list is asked (which refuses it where it exists).
    for text in [
        "INSERT INTO copied (n, data) SELECT pgno, data FROM sqlite_dbpage",
        "UPDATE sqlite_dbpage SET data = zeroblob(4096) WHERE pgno = 2",
    ] {
        assert_eq!(
            sql(&mut c, text),
            WriteResult::Ok(Outcome::Failed(OpError {
                code: 1,
                message: "no such table: sqlite_dbpage".into(),
            })),
            "{text}"
        );
    }
    let count: WriteResult = c.update(
        "execute_sql",
        (vec![SqlStatement {
            sql: "DELETE FROM copied".into(),
            params: vec![],
        }],),
    );
    assert_eq!(
        count,
        WriteResult::Ok(committed(0, 0)),
        "nothing was copied"
    );
}

/// A setting of another type at an upgrade (`flush_size = opt (500 : nat)` where it is
/// `opt nat64`) would be read as absent and silently not apply: the upgrade is refused, naming
/// it, and the canister keeps its settings and data.
#[test]
fn an_install_setting_of_another_type_refuses_the_upgrade() {
    let mut c = install();
    c.create_user("ed");
    let before = c.settings();
    let program = c.program.clone();
    let arg = candid_text("(opt record { flush_size = opt (500 : nat) })");
    let upgrade = c.canister.upgrade(&program, &arg).expect("runs");
    let MessageResult::Trap(why) = &upgrade.result else {
        panic!("{:?}", upgrade.result)
    };
    assert!(
        why.contains(
            "invalid install argument: argument init, field flush_size: opt nat sent where opt nat64 is expected"
        ),
        "{why}"
    );
    assert_eq!(c.settings(), before);
    assert_eq!(c.counts().users, 1);
    let arg = candid_text("(opt record { flush_size = opt (500 : nat64) })");
    let upgrade = c.canister.upgrade(&program, &arg).expect("runs");
    assert!(!upgrade.result.is_trap(), "{:?}", upgrade.result);
    assert_eq!(c.settings().flush_size, 500);
}

/// What both clients send passes the canister's strict decoder as the argument it is: the Rust
/// client's `Declared` codec (a batch of every write of the reference) and the TypeScript
/// client's (the shared vectors' Candid arguments, which its tests check it produces byte for
/// byte), each read back as the request it carries.
#[test]
fn what_both_clients_send_passes_the_strict_decoder() {
    use ic_batch_client::BatchCodec;
    let key = BatchKey {
        created_at_time: 1_700_000_000_000_000_000,
        id: [7; 16],
    };
    let ops = vec![
        UserOrderWrite::create_user {
            username: "é".into(),
            email: "e@example.org".into(),
        },
        UserOrderWrite::create_order {
            user_id: -1,
            amount: f64::MIN_POSITIVE,
        },
        UserOrderWrite::update_order_amount {
            order_id: i64::MAX,
            amount: -0.0,
        },
        UserOrderWrite::delete_user_orders { user_id: 0 },
    ];
    let argument = ic_batch_client::Declared::<UserOrderWrite>::new().encode(&key, &ops);
    let (request,): (serde_bytes::ByteBuf,) =
        ic_rusqlite_batch::args::decode(&argument, &["request"]).expect("the Rust client's");
    assert_eq!(request.into_vec(), encode_request(&key, &ops));

    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../batch_types/testdata/declared_vectors.json"
    );
    let vectors: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let requests = vectors["requests"].as_array().unwrap();
    assert!(requests.len() >= 3);
    for v in requests {
        let argument = hex::decode(v["argument"].as_str().unwrap()).unwrap();
        let (request,): (serde_bytes::ByteBuf,) =
            ic_rusqlite_batch::args::decode(&argument, &["request"])
                .expect("the TypeScript client's");
        assert_eq!(hex::encode(request), v["bytes"].as_str().unwrap());
    }
}
