//! The reference canister on the library's generic protocol: its writes declared once
//! (`bench_api::writes::UserOrderWrite`), its keyed client batches through the methods
//! `client_batches!` derives (`execute_writes` in Candid, `execute_writes_packed` packed), and
//! what a careless or hostile client meets there, each refusal typed and nothing applied
//! (engine: offline (wasmtime, IC metering)). Build the wasm first (scripts/build.sh;
//! scripts/test.sh does).

use batch_types::declare::{
    BatchRefusal, DeclarationView, InvalidParam, PackedWritesResult, Writes, WritesReply,
    WritesResult, encode_request,
};
use batch_types::packed::{self, PackedReply};
use bench_api::writes::UserOrderWrite;
use bench_api::*;
use bench_suite::client::{Client, principal};
use offline_engine::MessageResult;

const WRITER: &[u8] = &[0xAB, 0xCD, 0x02];
const STRANGER: &[u8] = &[0xEE, 0x01];

fn install() -> Client {
    let mut c = Client::install(InitArgs::default());
    let added: AdminResult = c.update("add_writers", (vec![principal(WRITER)],));
    assert_eq!(added, AdminResult::Ok(()));
    c
}

fn key(c: &Client, n: u8) -> BatchKey {
    BatchKey {
        created_at_time: c.canister.time(),
        id: [n; 16],
    }
}

fn writes(c: &mut Client, caller: &[u8], key: &BatchKey, ops: &[UserOrderWrite]) -> WritesResult {
    c.update_as(caller, "execute_writes", (*key, ops.to_vec()))
}

fn packed(
    c: &mut Client,
    caller: &[u8],
    request: Vec<u8>,
    ops: usize,
) -> Result<PackedReply, BatchRefusal> {
    let exec = c.raw_update(
        caller,
        "execute_writes_packed",
        (serde_bytes::ByteBuf::from(request),),
    );
    match &exec.result {
        MessageResult::Reply(bytes) => {
            let result: Result<serde_bytes::ByteBuf, BatchRefusal> =
                candid::decode_one::<PackedWritesResult>(bytes)
                    .unwrap()
                    .into();
            result.map(|blob| packed::decode_reply(&blob, ops).unwrap())
        }
        other => panic!("execute_writes_packed: {other:?}"),
    }
}

fn committed(rows_changed: u64, rowid: i64) -> Outcome {
    Outcome::Committed {
        rows_changed,
        last_insert_rowid: rowid,
    }
}

fn user(name: &str) -> UserOrderWrite {
    UserOrderWrite::create_user {
        username: name.into(),
        email: format!("{name}@example.org"),
    }
}

fn order(user_id: i64, amount: f64) -> UserOrderWrite {
    UserOrderWrite::create_order { user_id, amount }
}

/// A packed batch runs once; its retries, packed or in Candid, answer the recorded outcomes
/// (a failed op's included) and apply nothing twice.
#[test]
fn a_declared_batch_runs_once_whichever_method_carries_its_retries() {
    let mut c = install();
    let k = key(&c, 1);
    let ops = vec![
        user("ada"),
        order(1, 2.5),
        order(1, 3.5),
        // No user 99: the foreign key fails this op alone.
        order(99, 1.0),
        UserOrderWrite::update_order_amount {
            order_id: 1,
            amount: 9.0,
        },
    ];
    let request = encode_request(&k, &ops);
    let first = packed(&mut c, WRITER, request.clone(), ops.len()).unwrap();
    assert!(!first.duplicate);
    assert_eq!(
        first.outcomes[..3],
        [committed(1, 1), committed(1, 1), committed(1, 2)]
    );
    assert!(
        matches!(
            &first.outcomes[3],
            Outcome::Failed(OpError { code: 787, .. })
        ),
        "{:?}",
        first.outcomes[3]
    );
    assert_eq!(first.outcomes[4], committed(1, 0));
    assert_eq!(
        c.counts(),
        Counts {
            users: 1,
            orders: 2
        }
    );

    let again = packed(&mut c, WRITER, request, ops.len()).unwrap();
    assert_eq!((&again.outcomes, again.duplicate), (&first.outcomes, true));
    let in_candid = writes(&mut c, WRITER, &k, &ops);
    assert_eq!(
        in_candid,
        WritesResult::Ok(WritesReply {
            outcomes: first.outcomes.clone(),
            duplicate: true
        })
    );
    assert_eq!(
        c.counts(),
        Counts {
            users: 1,
            orders: 2
        }
    );
    let amounts: Vec<f64> = c.orders_of(1).iter().map(|o| o.amount).collect();
    assert_eq!(amounts, [9.0, 3.5]);
}

/// Every refusal is typed and whole: nothing of the batch runs, and the key stays free.
#[test]
fn a_careless_or_hostile_batch_is_refused_whole_with_its_reason() {
    let mut c = install();
    let k = key(&c, 2);
    let ops = vec![user("bob"), order(1, 1.0)];

    // A client built against another declaration (a write changed since): both digests.
    let mut request = encode_request(&k, &ops);
    request[1] ^= 0xFF;
    let ours = UserOrderWrite::declaration().digest.to_vec();
    let mut theirs = ours.clone();
    theirs[0] ^= 0xFF;
    assert_eq!(
        packed(&mut c, WRITER, request, ops.len()),
        Err(BatchRefusal::DeclarationMismatch {
            canister: ours.into(),
            request: theirs.into(),
        })
    );

    // A parameter past its declared size, named with its op, write and parameter.
    let long = UserOrderWrite::create_user {
        username: "x".repeat(MAX_USERNAME_BYTES + 1),
        email: "x@example.org".into(),
    };
    let refused = writes(&mut c, WRITER, &k, &[user("bob"), long.clone()]);
    let WritesResult::Err(BatchRefusal::InvalidParam(InvalidParam {
        op, write, param, ..
    })) = refused
    else {
        panic!("{refused:?}")
    };
    assert_eq!(
        (op, write.as_str(), param.as_str()),
        (1, "create_user", "username")
    );
    let refused = packed(&mut c, WRITER, encode_request(&k, &[long]), 1);
    assert!(
        matches!(&refused, Err(BatchRefusal::InvalidParam(p)) if p.op == 0 && p.param == "username"),
        "{refused:?}"
    );

    // Truncated bytes: Malformed, at the offset where the op stops.
    let mut request = encode_request(&k, &ops);
    request.pop();
    let refused = packed(&mut c, WRITER, request, ops.len());
    assert!(
        matches!(&refused, Err(BatchRefusal::Malformed { .. })),
        "{refused:?}"
    );

    // A stranger's ingress: rejected by inspection before the canister pays for it (calls
    // from other canisters: `strangers.rs`).
    let stranger = c.raw_update(STRANGER, "execute_writes", (k, ops.clone()));
    assert!(
        matches!(&stranger.result, MessageResult::Reject(4, _)),
        "{:?}",
        stranger.result
    );

    // None of it ran, and the key is still free: the batch runs now, once.
    assert_eq!(
        c.counts(),
        Counts {
            users: 0,
            orders: 0
        }
    );
    let ran = writes(&mut c, WRITER, &k, &ops);
    assert_eq!(
        ran,
        WritesResult::Ok(WritesReply {
            outcomes: vec![committed(1, 1), committed(1, 1)],
            duplicate: false
        })
    );
}

/// One key store serves both protocols: a key a client used for a hand-written batch is not
/// taken for a declared one with other bytes (the digests differ), and runs nothing twice.
#[test]
fn a_key_reused_across_the_two_protocols_is_refused_and_runs_nothing() {
    let mut c = install();
    let k = key(&c, 3);
    let hand: BatchResult = c.update_as(
        WRITER,
        "execute_batch",
        (
            vec![UserOrderOp::CreateUser {
                username: "cy".into(),
                email: "cy@example.org".into(),
            }],
            Some(k),
        ),
    );
    assert_eq!(hand, BatchResult::Ok(vec![committed(1, 1)]));
    let declared = writes(&mut c, WRITER, &k, &[user("cy")]);
    assert!(
        matches!(
            &declared,
            WritesResult::Err(BatchRefusal::Refused(WriteError::DigestMismatch { created_at_time }))
                if *created_at_time == k.created_at_time
        ),
        "{declared:?}"
    );
    assert_eq!(
        c.counts(),
        Counts {
            users: 1,
            orders: 0
        }
    );
}

/// What a client without code of its own reads: the declared writes and their digest.
#[test]
fn the_declaration_query_is_the_shared_declaration() {
    let mut c = install();
    let view: DeclarationView = c.query_as(WRITER, "batch_declaration", ());
    assert_eq!(view, UserOrderWrite::declaration().view());
    let names: Vec<&str> = view.writes.iter().map(|w| w.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "create_user",
            "create_order",
            "update_order_amount",
            "delete_user_orders"
        ]
    );
}

/// One declared write per call: now (`execute_write`, as `create_order`) or queued
/// (`submit_write`, as `submit_create_order`), each checked against the declaration first, with
/// the same outcomes as the hand-written methods. Prints the instructions of both forms.
#[test]
fn one_declared_write_per_call_runs_now_or_queued_as_the_hand_written_methods_do() {
    let mut c = install();
    let now = c.write_as(WRITER, "execute_write", (user("dee"),));
    assert_eq!(now, WriteResult::Ok(committed(1, 1)));
    // Each form once (the statement is prepared and cached), then measured.
    c.write_as(WRITER, "execute_write", (order(1, 1.0),));
    c.write_as(WRITER, "create_order", (1i64, 1.0f64));
    let declared = c.raw_update(WRITER, "execute_write", (order(1, 2.0),));
    let hand = c.raw_update(WRITER, "create_order", (1i64, 3.0f64));
    for (exec, rowid) in [(&declared, 3), (&hand, 4)] {
        let result: WriteResult = bench_suite::client::decode("a single write", exec);
        assert_eq!(result, WriteResult::Ok(committed(1, rowid)));
    }
    println!(
        "one create_order per call (engine: offline (wasmtime, IC metering)): execute_write {} instructions, {} argument bytes; create_order {} instructions",
        declared.instructions,
        candid::encode_args((order(1, 2.0),)).unwrap().len(),
        hand.instructions
    );

    // Checked first: nothing runs, nothing is queued.
    let long = UserOrderWrite::create_user {
        username: "x".repeat(MAX_USERNAME_BYTES + 1),
        email: "x@example.org".into(),
    };
    let invalid = WriteError::Invalid(
        "op 0 (create_user, parameter username): 101 bytes; at most 100".into(),
    );
    assert_eq!(
        c.write_as(WRITER, "execute_write", (long.clone(),)),
        WriteResult::Err(invalid.clone())
    );
    assert_eq!(
        c.submit_as(WRITER, "submit_write", (long,)),
        SubmitResult::Err(invalid)
    );
    assert_eq!(c.stats().pending, 0);

    // Queued: a ticket, committed by the next flush, as submit_create_order's.
    let SubmitResult::Ok(ticket) = c.submit_as(WRITER, "submit_write", (order(1, 4.0),)) else {
        panic!("not queued")
    };
    let flushed: FlushResult = c.update("flush", ());
    assert!(
        matches!(flushed, FlushResult::Ok(FlushSummary { committed: 1, .. })),
        "{flushed:?}"
    );
    assert_eq!(
        c.ticket_as(WRITER, ticket),
        TicketStatus::Committed {
            rows_changed: 1,
            last_insert_rowid: 5
        }
    );
    assert_eq!(
        c.counts(),
        Counts {
            users: 1,
            orders: 5
        }
    );
}
