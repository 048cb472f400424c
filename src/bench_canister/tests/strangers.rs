//! Strangers cost nothing, tried as an attacker would from another canister, where
//! `canister_inspect_message` never runs (`Canister::update_from_canister` runs a method as an
//! inter-canister call would: no inspection, no ingress size limit): every update method of the
//! interface refuses a stranger's call before it reads its argument, answering its typed
//! `Err(NotAuthorized)` for the same few thousand instructions whether the argument is empty or
//! 1.8 MB (60,000 principals for `add_writers`), and so does the library's hidden
//! `__careful_flush`; a query called as an update by a stranger is
//! rejected before it runs, while a writer canister reads through such calls; the anonymous
//! principal's keyed batches are refused, since everyone without an identity shares it. The
//! same checks run on the example canister (`examples/notes_canister`), whose methods are read
//! from its committed `.did`. Every figure is the engine's (`engine: offline (wasmtime, IC
//! metering)`). Build both wasms first: scripts/build.sh, scripts/build_example.sh.

use std::path::PathBuf;

use bench_api::packed;
use bench_api::*;
use bench_suite::client::{CONTROLLER, Client, principal};
use candid::{Encode, Principal, Reserved};
use ic_rusqlite_batch::access::{ANONYMOUS_KEYED_REFUSED, REPLICATED_QUERY_REFUSED};
use offline_engine::{
    ANONYMOUS, Canister, Engine, EngineConfig, Execution, MessageResult, Settings, reject_code,
};

/// The most a refused call may cost the canister, in instructions.
const REFUSAL_BOUND: u64 = 100_000;
/// Two refusals of the same call with a large and with an empty argument differ by less than
/// this (the allocator's state), where reading 1.8 MB would cost 1.8 M instructions or more.
const SAME_COST: u64 = 1_000;
/// The size of the attacker's argument, in bytes.
const LARGE: usize = 1_800_000;
/// A canister that is neither a controller nor a writer (a canister id: 10 bytes, `..01 01`).
const STRANGER_CANISTER: &[u8] = &[0, 0, 0, 0, 0, 0x5E, 0x11, 0x0C, 1, 1];
/// A canister the controller registers as a writer: an application canister reading and
/// writing through inter-canister calls.
const WRITER_CANISTER: &[u8] = &[0, 0, 0, 0, 0, 0x77, 0x21, 0x0C, 1, 1];

/// 60,000 distinct principals of 29 bytes: 1.8 MB of `vec principal`.
fn many_principals() -> Vec<Principal> {
    (0..60_000u32)
        .map(|i| {
            let mut bytes = [0x42u8; 29];
            bytes[..4].copy_from_slice(&i.to_be_bytes());
            Principal::from_slice(&bytes)
        })
        .collect()
}

fn big_blob() -> serde_bytes::ByteBuf {
    serde_bytes::ByteBuf::from(vec![0xA5; LARGE])
}

fn big_text() -> String {
    "x".repeat(LARGE)
}

/// The attacker's argument to `method`: its own arguments at 1.8 MB where their types allow
/// it, else followed by a 1.8 MB blob (Candid lets a caller send more arguments than the
/// method takes; the decoder must skip them).
fn large_argument(method: &str) -> Vec<u8> {
    let arg = match method {
        "create_user" | "submit_create_user" => Encode!(&big_text(), &"e@example.com"),
        "create_order"
        | "submit_create_order"
        | "update_order_amount"
        | "submit_update_order_amount" => Encode!(&1i64, &1.5f64, &big_blob()),
        "delete_user_orders" | "submit_delete_user_orders" | "delete_note" => {
            Encode!(&1i64, &big_blob())
        }
        "execute_sql" | "submit_sql" => Encode!(&vec![SqlStatement {
            sql: big_text(),
            params: vec![],
        }]),
        // 106,000 orders: what a client batch of 1.8 MB holds.
        "execute_batch" => {
            let ops: Vec<UserOrderOp> = (0..106_000)
                .map(|i| UserOrderOp::CreateOrder {
                    user_id: 1,
                    amount: f64::from(i),
                })
                .collect();
            Encode!(&ops, &None::<BatchKey>)
        }
        "execute_writes" => {
            let ops: Vec<bench_api::writes::UserOrderWrite> = (0..106_000)
                .map(|i| bench_api::writes::UserOrderWrite::create_order {
                    user_id: 1,
                    amount: f64::from(i),
                })
                .collect();
            let key = BatchKey {
                created_at_time: 1,
                id: [1; 16],
            };
            Encode!(&key, &ops)
        }
        "execute_batch_packed" | "execute_writes_packed" => Encode!(&big_blob()),
        "execute_write" | "submit_write" => {
            Encode!(&bench_api::writes::UserOrderWrite::create_user {
                username: big_text(),
                email: "e@example.com".into(),
            })
        }
        "add_writers" | "remove_writers" => Encode!(&many_principals()),
        "set_read_only" => Encode!(&true, &big_blob()),
        "flush" => Encode!(&big_blob()),
        "add_note" => Encode!(&big_text()),
        // The library's hidden method, which only the canister itself may call.
        "__careful_flush" => Encode!(&1u64, &big_blob()),
        other => panic!("{other}: say how an attacker would call this new update method"),
    }
    .unwrap();
    assert!(arg.len() >= LARGE, "{method}: {} bytes", arg.len());
    arg
}

/// The typed refusal of a write method's reply (`variant { Ok; Err : WriteError; ... }`).
fn refusal(method: &str, exec: &Execution) -> WriteError {
    let MessageResult::Reply(bytes) = &exec.result else {
        panic!("{method}: expected a typed reply, got {:?}", exec.result)
    };
    if method == "execute_batch" {
        match candid::decode_one::<BatchResult>(bytes).unwrap() {
            BatchResult::Err(e) => e,
            other => panic!("{method}: {other:?}"),
        }
    } else {
        candid::decode_one::<Result<Reserved, WriteError>>(bytes)
            .unwrap_or_else(|e| panic!("{method}: {e}"))
            .expect_err(method)
    }
}

/// A query's argument of 1.8 MB (its own arguments, then a blob).
fn large_query_argument(method: &str) -> Vec<u8> {
    match method {
        "user_orders" => Encode!(&i64::MAX, &u32::MAX, &big_blob()),
        _ => Encode!(&big_blob()),
    }
    .unwrap()
}

/// Calls every update method in `updates` as [`STRANGER_CANISTER`] twice, with an empty and
/// with a large argument: each answers `Err(NotAuthorized)`, for the same instructions, under
/// [`REFUSAL_BOUND`]. Returns the costs.
fn strangers_updates_are_refused(
    canister: &mut Canister,
    updates: &[String],
) -> Vec<(String, u64)> {
    let mut costs = Vec::new();
    for method in updates {
        let large = large_argument(method);
        let exec = canister
            .update_from_canister(STRANGER_CANISTER, method, &large)
            .unwrap();
        assert_eq!(
            refusal(method, &exec),
            WriteError::NotAuthorized,
            "{method}"
        );
        assert!(
            exec.instructions < REFUSAL_BOUND,
            "{method}: a stranger's {} bytes cost {} instructions",
            large.len(),
            exec.instructions
        );
        let empty = canister
            .update_from_canister(STRANGER_CANISTER, method, &Encode!().unwrap())
            .unwrap();
        assert_eq!(
            refusal(method, &empty),
            WriteError::NotAuthorized,
            "{method}"
        );
        // Reading the argument would cost at least one instruction per byte
        // (`ic0.msg_arg_data_copy`): the refusal costs the same, to the allocator's state.
        assert!(
            exec.instructions.abs_diff(empty.instructions) < SAME_COST,
            "{method}: {} instructions with {} bytes, {} without",
            exec.instructions,
            large.len(),
            empty.instructions
        );
        costs.push((method.clone(), exec.instructions));
    }
    costs
}

/// Calls every query in `queries` as an update (a replicated query) by [`STRANGER_CANISTER`]
/// with an empty and a large argument: each is rejected with the library's message, for the
/// same instructions, under [`REFUSAL_BOUND`]. Returns the costs.
fn strangers_replicated_queries_are_rejected(
    canister: &mut Canister,
    queries: &[String],
) -> Vec<(String, u64)> {
    let mut costs = Vec::new();
    for method in queries {
        let rejected = MessageResult::Reject(
            reject_code::CANISTER_REJECT,
            REPLICATED_QUERY_REFUSED.to_owned(),
        );
        let large = large_query_argument(method);
        let exec = canister
            .update_from_canister(STRANGER_CANISTER, method, &large)
            .unwrap();
        assert_eq!(
            (exec.entry.as_str(), &exec.result),
            (format!("canister_query {method}").as_str(), &rejected),
            "{method}"
        );
        assert!(
            exec.instructions < REFUSAL_BOUND,
            "{method}: {} instructions",
            exec.instructions
        );
        let empty = canister
            .update_from_canister(STRANGER_CANISTER, method, &Encode!().unwrap())
            .unwrap();
        assert_eq!(empty.result, rejected, "{method}");
        assert!(
            exec.instructions.abs_diff(empty.instructions) < SAME_COST,
            "{method}: {} and {} instructions",
            exec.instructions,
            empty.instructions
        );
        costs.push((method.clone(), exec.instructions));
    }
    costs
}

fn print_costs(what: &str, costs: &[(String, u64)]) {
    for (method, instructions) in costs {
        println!(
            "{what}: {method}: {instructions} instructions (engine: offline (wasmtime, IC metering))"
        );
    }
}

fn methods_of_class(class: MethodClass) -> Vec<String> {
    methods_of(class).map(String::from).collect()
}

/// The reference canister's update methods (every class but queries), from its method table.
fn reference_updates() -> Vec<String> {
    let mut updates: Vec<String> = METHODS
        .iter()
        .filter(|(_, class)| *class != MethodClass::Query)
        .map(|(name, _)| name.to_string())
        .collect();
    updates.sort();
    updates
}

/// 1,000 orders of 10 users, by the controller.
fn fixture(c: &mut Client) {
    for i in 0..10 {
        c.create_user(&format!("user{i}"));
    }
    let ops: Vec<UserOrderOp> = (0..1_000)
        .map(|i| UserOrderOp::CreateOrder {
            user_id: i % 10 + 1,
            amount: i as f64,
        })
        .collect();
    let r: BatchResult = c.update("execute_batch", (ops, None::<BatchKey>));
    assert_eq!(Result::from(r).map(|o| o.len()), Ok(1_000));
}

fn writers(c: &mut Client) -> Vec<Principal> {
    c.query_as(CONTROLLER, "writers", ())
}

#[test]
fn every_update_refuses_a_stranger_canister_before_reading_its_argument() {
    let mut c = Client::install(InitArgs::default());
    fixture(&mut c);
    let before = (c.counts(), c.stats(), writers(&mut c), c.settings());
    let mut updates = reference_updates();
    assert_eq!(updates.len(), 20, "{updates:?}");
    updates.push("__careful_flush".to_owned());
    let costs = strangers_updates_are_refused(&mut c.canister, &updates);
    print_costs("reference, stranger canister's update", &costs);
    // Nothing changed: no row, no op, no writer, no setting (read-only stays off).
    assert_eq!(
        (c.counts(), c.stats(), writers(&mut c), c.settings()),
        before
    );
}

#[test]
fn a_query_called_as_an_update_is_rejected_for_a_stranger_and_runs_for_a_writer() {
    let mut c = Client::install(InitArgs::default());
    fixture(&mut c);
    let queries = methods_of_class(MethodClass::Query);
    assert_eq!(queries.len(), 10, "{queries:?}");
    let costs = strangers_replicated_queries_are_rejected(&mut c.canister, &queries);
    print_costs("reference, stranger canister's replicated query", &costs);

    // Registered, the application canister reads through inter-canister calls: the same rows
    // as a query call.
    let added: AdminResult = c.update("add_writers", (vec![principal(WRITER_CANISTER)],));
    assert_eq!(added, AdminResult::Ok(()));
    let as_query: UserOrdersResult = c.query("user_orders", (i64::MAX, 1_000u32));
    let exec = c
        .canister
        .update_from_canister(
            WRITER_CANISTER,
            "user_orders",
            &Encode!(&i64::MAX, &1_000u32).unwrap(),
        )
        .unwrap();
    let replicated: UserOrdersResult = bench_suite::client::decode("user_orders", &exec);
    assert_eq!(Result::from(replicated.clone()).map(|r| r.len()), Ok(1_000));
    assert_eq!(replicated, as_query);
    println!(
        "reference, writer canister's user_orders(max, 1000) as an update: {} instructions",
        exec.instructions
    );
    let exec = c
        .canister
        .update_from_canister(WRITER_CANISTER, "counts", &Encode!().unwrap())
        .unwrap();
    assert_eq!(
        bench_suite::client::decode::<CountsResult>("counts", &exec),
        CountsResult::Ok(Counts {
            users: 10,
            orders: 1_000
        })
    );
    // Through ingress, inspection still refuses a query called as an update, whoever sends it.
    let exec = c.raw_update(WRITER_CANISTER, "counts", ());
    assert_eq!(exec.entry, "canister_inspect_message");
    // Removed, the canister is a stranger again.
    let removed: AdminResult = c.update("remove_writers", (vec![principal(WRITER_CANISTER)],));
    assert_eq!(removed, AdminResult::Ok(()));
    let exec = c
        .canister
        .update_from_canister(WRITER_CANISTER, "counts", &Encode!().unwrap())
        .unwrap();
    assert_eq!(
        exec.result,
        MessageResult::Reject(
            reject_code::CANISTER_REJECT,
            REPLICATED_QUERY_REFUSED.to_owned()
        )
    );
}

/// In `Open` mode everyone may write, so everyone's replicated queries run (they cost what a
/// write may cost): the guard is the write access, nothing else.
#[test]
fn in_open_mode_a_query_called_as_an_update_runs_for_anyone() {
    let mut c = Client::install(InitArgs {
        write_access: Some(WriteAccess::Open),
        ..Default::default()
    });
    fixture(&mut c);
    let exec = c
        .canister
        .update_from_canister(STRANGER_CANISTER, "counts", &Encode!().unwrap())
        .unwrap();
    assert_eq!(
        bench_suite::client::decode::<CountsResult>("counts", &exec),
        CountsResult::Ok(Counts {
            users: 10,
            orders: 1_000
        })
    );
}

fn key_now(c: &Client, n: u8) -> BatchKey {
    BatchKey {
        created_at_time: c.canister.time(),
        id: [n; 16],
    }
}

fn users(n: usize, tag: &str) -> Vec<UserOrderOp> {
    (0..n)
        .map(|i| UserOrderOp::CreateUser {
            username: format!("{tag}{i}"),
            email: format!("{tag}{i}@example.com"),
        })
        .collect()
}

/// In `Open` mode the anonymous principal may write, but it is everyone who calls without an
/// identity: its keyed batches, Candid and packed, are refused `Invalid` and apply nothing, its
/// unkeyed batches run, and a signed caller's keyed batch runs once.
#[test]
fn the_anonymous_principals_keyed_batches_are_refused() {
    let mut c = Client::install(InitArgs {
        write_access: Some(WriteAccess::Open),
        ..Default::default()
    });
    assert_eq!(c.create_user("alice"), 1);
    let refused = WriteError::Invalid(ANONYMOUS_KEYED_REFUSED.to_owned());

    let k = key_now(&c, 1);
    let r: BatchResult = c.update_as(ANONYMOUS, "execute_batch", (users(3, "anon"), Some(k)));
    assert_eq!(r, BatchResult::Err(refused.clone()));
    let packed_key = BatchKey {
        created_at_time: k.created_at_time,
        id: [1; 16],
    };
    let arg = serde_bytes::ByteBuf::from(packed::encode_keyed_ops(&packed_key, &users(3, "anon")));
    let r: PackedResult = c.update_as(ANONYMOUS, "execute_batch_packed", (arg,));
    assert_eq!(r, PackedResult::Err(refused));
    assert_eq!(
        c.counts(),
        Counts {
            users: 1,
            orders: 0
        }
    );
    let s = c.stats();
    assert_eq!((s.keyed_batches, s.keys_held), (0, 0));

    // Unkeyed, the anonymous principal's batches run as before.
    let r: BatchResult = c.update_as(
        ANONYMOUS,
        "execute_batch",
        (users(2, "anon"), None::<BatchKey>),
    );
    assert_eq!(Result::from(r).map(|o| o.len()), Ok(2));
    let unkeyed = serde_bytes::ByteBuf::from(packed::encode_ops(&users(2, "packed")));
    let r: PackedResult = c.update_as(ANONYMOUS, "execute_batch_packed", (unkeyed,));
    assert!(matches!(r, PackedResult::Ok(_)), "{r:?}");
    assert_eq!(
        c.counts(),
        Counts {
            users: 5,
            orders: 0
        }
    );

    // A signed caller has a key scope of its own: its keyed batch runs once.
    let signed: &[u8] = &[0x5A, 0x17];
    for _ in 0..2 {
        let _: BatchResult = c.update_as(signed, "execute_batch", (users(3, "signed"), Some(k)));
    }
    assert_eq!(
        c.counts(),
        Counts {
            users: 8,
            orders: 0
        }
    );
    let s = c.stats();
    assert_eq!(
        (s.keyed_batches, s.duplicates_answered, s.keys_held),
        (1, 1, 1)
    );
}

/// The single-op write of an authorized caller (`create_order`, unbatched): what it costs with
/// the check before the argument, as a registered writer (by ingress and from a canister) and
/// as the controller. Prints the figures; asserts the outcomes.
#[test]
fn an_authorized_single_op_write_runs() {
    let mut c = Client::install(InitArgs::default());
    fixture(&mut c);
    let writer: &[u8] = &[0x77, 0x22];
    let added: AdminResult = c.update(
        "add_writers",
        (vec![principal(writer), principal(WRITER_CANISTER)],),
    );
    assert_eq!(added, AdminResult::Ok(()));
    let arg = Encode!(&1i64, &2.5f64).unwrap();
    // Warm the statement cache, then measure.
    for round in 0..2 {
        for (who, caller, from_canister) in [
            ("controller (ingress)", CONTROLLER, false),
            ("writer (ingress)", writer, false),
            ("writer canister", WRITER_CANISTER, true),
        ] {
            let exec = if from_canister {
                c.canister
                    .update_from_canister(caller, "create_order", &arg)
            } else {
                c.canister.update_as(caller, "create_order", &arg)
            }
            .unwrap();
            let outcome = bench_suite::client::replied_or_refused::<Outcome>("create_order", &exec);
            assert!(
                matches!(
                    outcome,
                    Ok(Outcome::Committed {
                        rows_changed: 1,
                        ..
                    })
                ),
                "{who}: {outcome:?}"
            );
            if round == 1 {
                println!(
                    "create_order by the {who}: {} instructions (engine: offline (wasmtime, IC metering))",
                    exec.instructions
                );
            }
        }
    }
    assert_eq!(c.counts().orders, 1_006);
}

// ---------------------------------------------------------------- the example canister

/// The example canister, installed with [`CONTROLLER`] as controller.
fn install_notes() -> Canister {
    let engine = Engine::new(EngineConfig::default()).expect("engine");
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let path = root.join("target/canister/notes_canister.wasm");
    let wasm = std::fs::read(&path)
        .unwrap_or_else(|e| panic!("{}: {e}; run scripts/build_example.sh", path.display()));
    let program = engine.load(&wasm).expect("the wasm loads");
    let settings = Settings {
        controllers: vec![CONTROLLER.to_vec()],
        ..Settings::default()
    };
    let arg = Encode!(&None::<InitArgs>).unwrap();
    let (canister, exec) = Canister::install(&engine, &program, &arg, settings).expect("install");
    assert!(!exec.result.is_trap(), "{exec:?}");
    canister
}

/// The example's methods from its committed `.did`: (updates, queries), sorted.
fn notes_methods() -> (Vec<String>, Vec<String>) {
    let did = std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../examples/notes_canister/notes_canister.did"),
    )
    .unwrap();
    let (env, service) = candid_parser::utils::CandidSource::Text(&did)
        .load()
        .expect("the .did parses");
    let service = service.expect("a service");
    let (mut updates, mut queries) = (Vec::new(), Vec::new());
    for (name, func) in env.as_service(&service).unwrap() {
        let func = env.as_func(func).unwrap();
        if func.is_query() {
            queries.push(name.clone());
        } else {
            updates.push(name.clone());
        }
    }
    updates.sort();
    queries.sort();
    (updates, queries)
}

fn notes_reply<T: candid::CandidType + for<'de> candid::Deserialize<'de>>(exec: &Execution) -> T {
    bench_suite::client::decode("notes", exec)
}

#[test]
fn the_example_refuses_strangers_before_reading_their_arguments() {
    let mut canister = install_notes();
    let (updates, queries) = notes_methods();
    assert_eq!(
        updates,
        [
            "add_note",
            "add_writers",
            "delete_note",
            "flush",
            "remove_writers",
            "set_read_only"
        ]
    );
    let note = canister
        .update_as(CONTROLLER, "add_note", &Encode!(&"hello").unwrap())
        .unwrap();
    let hello: Result<u64, WriteError> = notes_reply(&note);
    assert!(hello.is_ok(), "{hello:?}");
    let stats_before: Stats = notes_reply(
        &canister
            .query_as(CONTROLLER, "stats", &Encode!().unwrap())
            .unwrap(),
    );
    let mut attacked = updates.clone();
    attacked.push("__careful_flush".to_owned());
    let costs = strangers_updates_are_refused(&mut canister, &attacked);
    print_costs("notes, stranger canister's update", &costs);
    let costs = strangers_replicated_queries_are_rejected(&mut canister, &queries);
    print_costs("notes, stranger canister's replicated query", &costs);
    let stats_after: Stats = notes_reply(
        &canister
            .query_as(CONTROLLER, "stats", &Encode!().unwrap())
            .unwrap(),
    );
    assert_eq!(stats_after, stats_before, "nothing queued or flushed");
    let writers: Vec<Principal> = notes_reply(
        &canister
            .query_as(CONTROLLER, "writers", &Encode!().unwrap())
            .unwrap(),
    );
    assert_eq!(writers, vec![]);

    // A writer canister writes and reads through inter-canister calls.
    let added: Result<(), WriteError> = notes_reply(
        &canister
            .update_as(
                CONTROLLER,
                "add_writers",
                &Encode!(&vec![principal(WRITER_CANISTER)]).unwrap(),
            )
            .unwrap(),
    );
    assert_eq!(added, Ok(()));
    let ticket: Result<u64, WriteError> = notes_reply(
        &canister
            .update_from_canister(
                WRITER_CANISTER,
                "add_note",
                &Encode!(&"from a canister").unwrap(),
            )
            .unwrap(),
    );
    let flushed: Result<FlushSummary, WriteError> = notes_reply(
        &canister
            .update_from_canister(WRITER_CANISTER, "flush", &Encode!().unwrap())
            .unwrap(),
    );
    assert_eq!(flushed.map(|s| (s.executed, s.committed)), Ok((2, 2)));
    let status: TicketStatus = notes_reply(
        &canister
            .update_from_canister(
                WRITER_CANISTER,
                "ticket_status",
                &Encode!(&ticket.unwrap()).unwrap(),
            )
            .unwrap(),
    );
    assert!(
        matches!(
            status,
            TicketStatus::Committed {
                rows_changed: 1,
                ..
            }
        ),
        "{status:?}"
    );
    #[derive(candid::CandidType, candid::Deserialize, Debug, PartialEq)]
    struct Note {
        id: i64,
        text: String,
    }
    let notes: Result<Vec<Note>, QueryError> = notes_reply(
        &canister
            .update_from_canister(WRITER_CANISTER, "notes", &Encode!(&0i64).unwrap())
            .unwrap(),
    );
    assert_eq!(
        notes.map(|n| n.into_iter().map(|n| n.text).collect::<Vec<_>>()),
        Ok(vec!["hello".to_owned(), "from a canister".to_owned()])
    );
}
