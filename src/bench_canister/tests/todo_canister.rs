//! The example todo store (`examples/todo_canister`), whose writes are declared once: its keyed
//! client batches in Candid and packed, exactly once across both methods, and every refusal a
//! careless or hostile client can meet, with nothing applied (engine: offline (wasmtime, IC
//! metering)). Build the wasm first (scripts/build_example.sh; scripts/test.sh does).

#[allow(dead_code)]
mod generic;

use batch_types::declare::{
    BatchRefusal, InvalidParam, PackedWritesResult, Writes, WritesReply, WritesResult,
    encode_request,
};
use batch_types::packed;
use batch_types::{BatchKey, InitArgs, OpError, Outcome, WriteError};
use bench_suite::client::SplitMix64 as Rng;
use candid::{Decode, Encode};
use generic::{CONTROLLER, Installed, STRANGER, WRITER_A, WRITER_B};
use offline_engine::MessageResult;
use todo_canister::TodoWrite;

const WASM: &str = "target/canister/todo_canister.wasm";

fn install() -> Installed {
    let mut c = generic::install_wasm(WASM, InitArgs::default());
    c.add_writers(&[WRITER_A, WRITER_B]);
    c
}

fn key(c: &Installed, n: u8) -> BatchKey {
    BatchKey {
        created_at_time: c.canister.time(),
        id: [n; 16],
    }
}

fn add(title: &str) -> TodoWrite {
    TodoWrite::add {
        title: title.into(),
        due_ns: None,
    }
}

/// `execute_writes` by `caller` as another canister (no inspection): the typed reply.
fn candid_batch(
    c: &mut Installed,
    caller: &[u8],
    key: &BatchKey,
    ops: &[TodoWrite],
) -> Result<WritesReply, BatchRefusal> {
    let exec = c
        .canister
        .update_from_canister(caller, "execute_writes", &Encode!(key, &ops).unwrap())
        .unwrap();
    match &exec.result {
        MessageResult::Reply(bytes) => Decode!(bytes, WritesResult).unwrap().into(),
        other => panic!("execute_writes: {other:?}; logs {:?}", exec.logs),
    }
}

/// `execute_writes_packed` by `caller` as another canister: the packed reply, decoded.
fn packed_batch(
    c: &mut Installed,
    caller: &[u8],
    request: &[u8],
    ops: usize,
) -> Result<packed::PackedReply, BatchRefusal> {
    let blob = serde_bytes::ByteBuf::from(request.to_vec());
    let exec = c
        .canister
        .update_from_canister(caller, "execute_writes_packed", &Encode!(&blob).unwrap())
        .unwrap();
    match &exec.result {
        MessageResult::Reply(bytes) => {
            let result: Result<serde_bytes::ByteBuf, BatchRefusal> =
                Decode!(bytes, PackedWritesResult).unwrap().into();
            result.map(|blob| packed::decode_reply(&blob, ops).unwrap())
        }
        other => panic!("execute_writes_packed: {other:?}; logs {:?}", exec.logs),
    }
}

/// The todos as (id, title, due_ns, done), by id.
fn todos(c: &mut Installed) -> Vec<(i64, String, Option<i64>, bool)> {
    #[derive(candid::CandidType, candid::Deserialize)]
    struct Todo {
        id: i64,
        title: String,
        due_ns: Option<i64>,
        done: bool,
    }
    let exec = c
        .canister
        .query_as(CONTROLLER, "todos", &Encode!(&0i64).unwrap())
        .unwrap();
    let MessageResult::Reply(bytes) = &exec.result else {
        panic!("todos: {exec:?}")
    };
    Decode!(bytes, Result<Vec<Todo>, batch_types::QueryError>)
        .unwrap()
        .unwrap()
        .into_iter()
        .map(|t| (t.id, t.title, t.due_ns, t.done))
        .collect()
}

fn committed(rows_changed: u64, last_insert_rowid: i64) -> Outcome {
    Outcome::Committed {
        rows_changed,
        last_insert_rowid,
    }
}

/// The committed `.did` is the code's interface (both directions).
#[test]
fn todo_did_matches_the_code() {
    let mut c = install();
    let committed =
        generic::did_matches_the_code(&mut c.canister, "examples/todo_canister/todo_canister.did");
    // What `icp canister call` users see: the writes by name, with named fields.
    assert!(
        committed.contains("add : record { title : text; due_ns : opt int64 }"),
        "{committed}"
    );
}

/// A batch runs once in Candid; its retry, in Candid or packed with the same ops, answers the
/// recorded outcomes and applies nothing twice; the query reads what the batch wrote.
#[test]
fn a_batch_runs_once_whichever_method_carries_its_retries() {
    let mut c = install();
    let k = key(&c, 1);
    let ops = vec![
        add("milk"),
        TodoWrite::add {
            title: "tax".into(),
            due_ns: Some(-7),
        },
        add("bread"),
        TodoWrite::complete { id: 2 },
    ];
    let first = candid_batch(&mut c, WRITER_A, &k, &ops).unwrap();
    let expected = vec![
        committed(1, 1),
        committed(1, 2),
        committed(1, 3),
        // An UPDATE inserts no row: its outcome's rowid is 0.
        committed(1, 0),
    ];
    assert_eq!(
        first,
        WritesReply {
            outcomes: expected.clone(),
            duplicate: false
        }
    );
    let again = candid_batch(&mut c, WRITER_A, &k, &ops).unwrap();
    assert_eq!((again.outcomes, again.duplicate), (expected.clone(), true));
    let packed = packed_batch(&mut c, WRITER_A, &encode_request(&k, &ops), ops.len()).unwrap();
    assert_eq!((packed.outcomes, packed.duplicate), (expected, true));
    assert_eq!(
        todos(&mut c),
        [
            (1, "milk".into(), None, false),
            (2, "tax".into(), Some(-7), true),
            (3, "bread".into(), None, false),
        ]
    );
    // A renamed todo (the write added last to the declaration).
    let k2 = key(&c, 13);
    let renamed = candid_batch(
        &mut c,
        WRITER_A,
        &k2,
        &[TodoWrite::rename {
            id: 3,
            title: "rye bread".into(),
        }],
    );
    assert_eq!(renamed.unwrap().outcomes, [committed(1, 0)]);
    assert_eq!(todos(&mut c)[2], (3, "rye bread".into(), None, false));
    // The same key is the other writer's own: it runs for them.
    let theirs = candid_batch(&mut c, WRITER_B, &k, &ops[..1]).unwrap();
    assert_eq!(
        (theirs.outcomes, theirs.duplicate),
        (vec![committed(1, 4)], false)
    );
}

/// What a refused batch leaves behind, and a batch of no ops, as the library README states
/// them: a refusal (`InvalidParam`, `DeclarationMismatch`, `Malformed`, `NotAuthorized`)
/// records no key, so the key runs once its batch is sent right; a batch of no ops is a batch:
/// it runs nothing, answers no outcome and records its key for no ops.
#[test]
fn refusals_record_no_key_and_an_empty_batch_records_its_key() {
    let mut c = install();
    let k = key(&c, 20);
    let long = vec![add("ok"), add(&"t".repeat(201))];
    assert!(matches!(
        candid_batch(&mut c, WRITER_A, &k, &long),
        Err(BatchRefusal::InvalidParam(_))
    ));
    let mut other_declaration = encode_request(&k, &[add("ok")]);
    other_declaration[1..9].copy_from_slice(&[0xAB; 8]);
    assert!(matches!(
        packed_batch(&mut c, WRITER_A, &other_declaration, 1),
        Err(BatchRefusal::DeclarationMismatch { .. })
    ));
    let request = encode_request(&k, &[add("ok")]);
    // Malformed: the offset is where the field that could not be read starts (the title's
    // bytes), not where the input ended (one byte later).
    // Its last bytes are the title's length, "ok" and due_ns (one byte: none); cut inside "ok".
    let cut = &request[..request.len() - 2];
    let title_at = (request.len() - 1 - "ok".len()) as u64;
    assert_eq!(
        packed_batch(&mut c, WRITER_A, cut, 1),
        Err(BatchRefusal::Malformed {
            offset: title_at,
            what: "title: 2 bytes expected, the input ended".into()
        })
    );
    // None of them recorded the key: sent right, it runs, once.
    let ran = packed_batch(&mut c, WRITER_A, &request, 1).unwrap();
    assert_eq!(
        (ran.outcomes, ran.duplicate),
        (vec![committed(1, 1)], false)
    );
    let again = candid_batch(&mut c, WRITER_A, &k, &[add("ok")]).unwrap();
    assert_eq!(
        (again.outcomes, again.duplicate),
        (vec![committed(1, 1)], true)
    );

    // A batch of no ops: accepted, nothing run, no outcome; its key is then taken for no ops.
    let empty_key = key(&c, 21);
    let empty = candid_batch(&mut c, WRITER_A, &empty_key, &[]).unwrap();
    assert_eq!((empty.outcomes, empty.duplicate), (vec![], false));
    let empty_again = packed_batch(
        &mut c,
        WRITER_A,
        &encode_request::<TodoWrite>(&empty_key, &[]),
        0,
    )
    .unwrap();
    assert_eq!(
        (empty_again.outcomes.len(), empty_again.duplicate),
        (0, true)
    );
    assert_eq!(
        candid_batch(&mut c, WRITER_A, &empty_key, &[add("late")]),
        Err(BatchRefusal::Refused(WriteError::DigestMismatch {
            created_at_time: empty_key.created_at_time
        }))
    );
    assert_eq!(todos(&mut c), [(1, "ok".into(), None, false)]);
}

/// A packed batch runs and its outcomes come back as runs; a failing op fails alone.
#[test]
fn a_packed_batch_runs_with_one_outcome_per_op() {
    let mut c = install();
    let k = key(&c, 2);
    let mut ops: Vec<TodoWrite> = (0..1_000).map(|i| add(&format!("todo {i}"))).collect();
    // NOT NULL title: a NULL cannot be sent (the type has none), but an UPDATE of a missing
    // row changes nothing and commits.
    ops.push(TodoWrite::complete { id: 5_000 });
    let reply = packed_batch(&mut c, WRITER_A, &encode_request(&k, &ops), ops.len()).unwrap();
    assert!(!reply.duplicate);
    assert_eq!(reply.outcomes.len(), 1_001);
    assert_eq!(reply.outcomes[999], committed(1, 1_000));
    assert_eq!(reply.outcomes[1_000], committed(0, 0));
    assert_eq!(todos(&mut c).len(), 100, "the query's page");
}

/// Every refusal is typed, names what is wrong, and applies nothing.
#[test]
fn refusals_are_typed_and_apply_nothing() {
    let mut c = install();
    let ops = vec![add("a")];

    // A stranger, calling as another canister (which skips inspection).
    let k = key(&c, 3);
    assert_eq!(
        candid_batch(&mut c, STRANGER, &k, &ops),
        Err(BatchRefusal::NotAuthorized)
    );
    let request = encode_request(&k, &ops);
    assert_eq!(
        packed_batch(&mut c, STRANGER, &request, 1),
        Err(BatchRefusal::NotAuthorized)
    );
    // A stranger's ingress is refused by inspection, before it is paid for.
    let exec = c
        .canister
        .update_as(STRANGER, "execute_writes", &Encode!(&k, &ops).unwrap())
        .unwrap();
    assert_eq!(exec.entry, "canister_inspect_message");

    // A write for controllers only, in a writer's batch: the whole batch is refused.
    let mixed = vec![add("b"), TodoWrite::purge_done {}];
    assert_eq!(
        {
            let k = key(&c, 4);
            candid_batch(&mut c, WRITER_A, &k, &mixed)
        },
        Err(BatchRefusal::NotAuthorized)
    );

    // Past a size limit: the op, the write and the parameter named.
    let long = vec![add("c"), add(&"t".repeat(201))];
    let invalid = BatchRefusal::InvalidParam(InvalidParam {
        op: 1,
        write: "add".into(),
        param: "title".into(),
        reason: "201 bytes; at most 200".into(),
    });
    assert_eq!(
        {
            let k = key(&c, 5);
            candid_batch(&mut c, WRITER_A, &k, &long)
        }
        .unwrap_err(),
        invalid
    );
    let request = encode_request(&key(&c, 5), &long);
    assert_eq!(
        packed_batch(&mut c, WRITER_A, &request, 2).unwrap_err(),
        invalid
    );

    // Packed for another declaration (the canister was upgraded and a write changed).
    let mut request = encode_request(&key(&c, 6), &ops);
    request[1..9].copy_from_slice(&[0xAB; 8]);
    assert_eq!(
        packed_batch(&mut c, WRITER_A, &request, 1),
        Err(BatchRefusal::DeclarationMismatch {
            canister: TodoWrite::declaration().digest.to_vec().into(),
            request: vec![0xAB; 8].into(),
        })
    );

    // Cut short.
    let request = encode_request(&key(&c, 7), &[add("long enough")]);
    let cut = &request[..request.len() - 2];
    assert!(matches!(
        packed_batch(&mut c, WRITER_A, cut, 1),
        Err(BatchRefusal::Malformed { what, .. }) if what.starts_with("title: 11 bytes expected")
    ));

    // A key reused for other ops.
    let k = key(&c, 8);
    candid_batch(&mut c, WRITER_A, &k, &ops).unwrap();
    let other = vec![add("z")];
    assert_eq!(
        candid_batch(&mut c, WRITER_A, &k, &other),
        Err(BatchRefusal::Refused(WriteError::DigestMismatch {
            created_at_time: k.created_at_time
        }))
    );
    // The anonymous principal has no key scope of its own (registered as a writer first, so
    // that this is the refusal it meets).
    let anonymous = candid::Principal::anonymous();
    c.add_writers(&[anonymous.as_slice()]);
    assert!(matches!(
        {
            let k = key(&c, 9);
            candid_batch(&mut c, anonymous.as_slice(), &k, &ops)
        },
        Err(BatchRefusal::Refused(WriteError::Invalid(_)))
    ));

    // Of all that, only the one batch of key 8 ran.
    assert_eq!(todos(&mut c), [(1, "a".into(), None, false)]);
    // A controller may purge.
    let purge = {
        let k = key(&c, 10);
        candid_batch(&mut c, CONTROLLER, &k, &[TodoWrite::purge_done {}])
    };
    assert_eq!(purge.unwrap().outcomes, [committed(0, 0)]);
}

/// Random and mutated requests: never a trap, and a refused one applies nothing.
#[test]
fn random_and_mutated_requests_are_refused_or_run_never_a_trap() {
    let mut c = install();
    let mut rng = Rng(0x7040);
    let valid = encode_request(
        &key(&c, 11),
        &[
            add("x"),
            TodoWrite::add {
                title: "yy".into(),
                due_ns: Some(3),
            },
            TodoWrite::complete { id: 1 },
        ],
    );
    let (mut refused, mut ran) = (0, 0);
    for case in 0..300u64 {
        let request: Vec<u8> = if case % 3 == 0 {
            (0..rng.next_u64() % 80)
                .map(|_| rng.next_u64() as u8)
                .collect()
        } else {
            // A fresh key (so a valid mutation runs rather than meeting a recorded key), then
            // one to three bytes of the ops flipped or the request cut.
            let mut r = valid.clone();
            r[17..25].copy_from_slice(&c.canister.time().to_le_bytes());
            r[25..41].copy_from_slice(&(case as u128).to_le_bytes());
            for _ in 0..=rng.next_u64() % 3 {
                let at = 41 + (rng.next_u64() % (r.len() - 41) as u64) as usize;
                r[at] = rng.next_u64() as u8;
            }
            if case % 3 == 2 {
                r.truncate(41 + (rng.next_u64() % (r.len() - 41) as u64) as usize);
            }
            r
        };
        let before = todos(&mut c);
        match packed_batch(&mut c, WRITER_A, &request, 64) {
            Ok(reply) => {
                ran += 1;
                assert!(reply.outcomes.len() <= 64);
            }
            Err(refusal) => {
                refused += 1;
                assert_eq!(
                    todos(&mut c),
                    before,
                    "case {case}: {refusal:?} applied something"
                );
            }
        }
    }
    assert!(refused > 100 && ran > 0, "refused {refused}, ran {ran}");
}

/// An op that breaks the schema (an empty title, against its CHECK) fails alone, with
/// SQLite's code, inside a batch that commits the others.
#[test]
fn a_failing_op_fails_alone() {
    let mut c = install();
    let ops = vec![add("one"), add(""), add("two")];
    let reply = {
        let k = key(&c, 12);
        candid_batch(&mut c, WRITER_A, &k, &ops)
    }
    .unwrap();
    assert_eq!(reply.outcomes[0], committed(1, 1));
    assert!(
        matches!(
            &reply.outcomes[1],
            Outcome::Failed(OpError { code: 275, .. })
        ),
        "{:?}",
        reply.outcomes[1]
    );
    assert_eq!(reply.outcomes[2], committed(1, 2));
    assert_eq!(
        todos(&mut c),
        [
            (1, "one".into(), None, false),
            (2, "two".into(), None, false)
        ]
    );
}

/// One write per call (`single_writes!`), classed without being listed: a writer's write runs
/// now or is queued; a controllers-only write is refused to a writer (`NotAuthorized`, from the
/// ingress path and from another canister) and runs for a controller; a parameter past its size
/// is `Invalid` naming the write and the parameter; a stranger's ingress is not inspected in;
/// nothing refused changes a row.
#[test]
fn single_writes_run_now_or_queued_and_keep_controllers_only_writes_for_controllers() {
    let mut c = install();
    type Now = Result<Outcome, WriteError>;
    type Queued = Result<u64, WriteError>;
    let now: Now = c
        .update(WRITER_A, "execute_write", Encode!(&add("milk")).unwrap())
        .expect("inspected in");
    assert_eq!(now, Ok(committed(1, 1)));
    let queued: Queued = c
        .update(WRITER_A, "submit_write", Encode!(&add("bread")).unwrap())
        .expect("inspected in");
    let ticket = queued.expect("a ticket");
    c.flush();
    assert_eq!(
        c.status(WRITER_A, ticket),
        batch_types::TicketStatus::Committed {
            rows_changed: 1,
            last_insert_rowid: 2
        }
    );
    let done: Now = c
        .update(
            WRITER_A,
            "execute_write",
            Encode!(&TodoWrite::complete { id: 1 }).unwrap(),
        )
        .expect("inspected in");
    assert_eq!(done, Ok(committed(1, 0)));

    // Controllers only: refused to a writer, by ingress and from a canister, nothing deleted.
    let purge = Encode!(&TodoWrite::purge_done {}).unwrap();
    for method in ["execute_write", "submit_write"] {
        let by_writer: Result<candid::Reserved, WriteError> = c
            .update(WRITER_A, method, purge.clone())
            .expect("inspected in");
        assert_eq!(
            by_writer.unwrap_err(),
            WriteError::NotAuthorized,
            "{method}"
        );
        let exec = c
            .canister
            .update_from_canister(WRITER_B, method, &purge)
            .unwrap();
        let MessageResult::Reply(bytes) = &exec.result else {
            panic!("{method}: {exec:?}")
        };
        let from_canister = Decode!(bytes, Result<candid::Reserved, WriteError>).unwrap();
        assert_eq!(
            from_canister.unwrap_err(),
            WriteError::NotAuthorized,
            "{method}"
        );
    }
    c.flush();
    assert_eq!(todos(&mut c).len(), 2);

    // Past its size: Invalid, naming the write and the parameter; nothing queued.
    let long = Encode!(&add(&"t".repeat(201))).unwrap();
    let invalid = WriteError::Invalid("op 0 (add, parameter title): 201 bytes; at most 200".into());
    let r: Now = c
        .update(WRITER_A, "execute_write", long.clone())
        .expect("inspected in");
    assert_eq!(r, Err(invalid.clone()));
    let r: Queued = c
        .update(WRITER_A, "submit_write", long)
        .expect("inspected in");
    assert_eq!(r, Err(invalid));
    assert_eq!(c.stats().pending, 0);

    // A stranger's ingress is refused by inspection.
    let r: Option<Now> = c.update(STRANGER, "execute_write", Encode!(&add("x")).unwrap());
    assert!(r.is_none());

    // The controller may purge: the done todo goes.
    let purged: Now = c
        .update(CONTROLLER, "execute_write", purge)
        .expect("inspected in");
    assert_eq!(purged, Ok(committed(1, 0)));
    assert_eq!(todos(&mut c), [(2, "bread".into(), None, false)]);
}

/// An acknowledged write altered: `add` with `due_ns = opt (5 : nat)` (or `opt (5 : int)`, or
/// the text `"5"`) answered `Committed` and stored `NULL`, Candid reading the mistyped `opt` as
/// absent. Now each is refused `Invalid` naming the write and the parameter, through the single
/// write and the batch, and nothing is stored; every well-typed form stores exactly what was
/// sent (a bare `int64` where `opt int64` is declared is that value; `null` is `NULL`).
#[test]
fn a_mistyped_parameter_is_refused_and_a_well_typed_one_is_stored_as_sent() {
    let mut c = install();
    let bytes = |text: String| -> Vec<u8> {
        candid_parser::parse_idl_args(&text)
            .unwrap_or_else(|e| panic!("{text}: {e}"))
            .to_bytes()
            .unwrap()
    };
    for (due, sent) in [
        ("opt (5 : nat)", "opt nat"),
        ("opt (5 : int)", "opt int"),
        ("\"5\"", "text"),
        ("opt (5 : nat64)", "opt nat64"),
    ] {
        let op = format!("variant {{ add = record {{ title = \"x\"; due_ns = {due} }} }}");
        let refused: Result<Outcome, WriteError> = c
            .update(WRITER_A, "execute_write", bytes(format!("({op})")))
            .expect("inspected in");
        assert_eq!(
            refused,
            Err(WriteError::Invalid(format!(
                "argument op, variant add, field due_ns: {sent} sent where opt int64 is expected \
                 (a value of another type is refused, never read as null)"
            ))),
            "{due}"
        );
        let key = key(&c, 40);
        let batch = bytes(format!(
            "(record {{ created_at_time = {} : nat64; id = blob \"{}\" }}, vec {{ {op} }})",
            key.created_at_time,
            "\\28".repeat(16)
        ));
        let exec = c
            .canister
            .update_from_canister(WRITER_A, "execute_writes", &batch)
            .unwrap();
        let MessageResult::Reply(reply) = &exec.result else {
            panic!("{due}: {exec:?}")
        };
        let refused = Decode!(reply, WritesResult).unwrap();
        assert!(
            matches!(&refused, WritesResult::Err(BatchRefusal::Refused(WriteError::Invalid(why)))
                if why.starts_with(&format!("argument ops, an element, variant add, field due_ns: {sent} sent"))),
            "{due}: {refused:?}"
        );
    }
    assert_eq!(todos(&mut c), []);
    for (due, stored) in [
        ("opt (5 : int64)", Some(5)),
        ("(-6 : int64)", Some(-6)),
        ("null", None),
    ] {
        let op = format!("(variant {{ add = record {{ title = \"t\"; due_ns = {due} }} }})");
        let done: Result<Outcome, WriteError> = c
            .update(WRITER_A, "execute_write", bytes(op))
            .expect("inspected in");
        assert!(
            matches!(done, Ok(Outcome::Committed { .. })),
            "{due}: {done:?}"
        );
        assert_eq!(todos(&mut c).last().unwrap().2, stored, "{due}");
    }
    // A field left out of an `opt` type is absent, as Candid's subtyping says: NULL.
    let done: Result<Outcome, WriteError> = c
        .update(
            WRITER_A,
            "execute_write",
            bytes("(variant { add = record { title = \"u\" } })".into()),
        )
        .expect("inspected in");
    assert!(matches!(done, Ok(Outcome::Committed { .. })), "{done:?}");
    assert_eq!(todos(&mut c).last().unwrap().2, None);
}
