//! The deployable canister wasm on the offline engine: install, unbatched and batched writes, the
//! timer flush, a full queue, controller-only SQL, trap rollback, and an upgrade with pending ops.
//! Build the wasm first with scripts/build.sh (scripts/test.sh does).

use std::path::PathBuf;

use candid::{CandidType, Decode, Deserialize, Encode, Principal};
use offline_engine::{Canister, Engine, EngineConfig, Execution, MessageResult, Program, Settings};

#[derive(CandidType, Deserialize, Clone, Debug, Default)]
struct InitArgs {
    flush_size: Option<u64>,
    max_delay_ms: Option<u64>,
    max_pending: Option<u64>,
    flush_instruction_budget: Option<u64>,
    outcome_capacity: Option<u64>,
}

#[derive(CandidType, Deserialize, Clone, Debug, PartialEq)]
enum Outcome {
    Committed {
        rows_changed: u64,
        last_insert_rowid: i64,
    },
    Failed(String),
}

#[derive(CandidType, Deserialize, Clone, Debug, PartialEq)]
struct FlushSummary {
    executed: u64,
    committed: u64,
    failed: u64,
    remaining: u64,
    more_due: bool,
    instructions: u64,
}

#[derive(CandidType, Deserialize, Clone, Debug, PartialEq)]
struct Submitted {
    ticket: u64,
    flushed: Option<FlushSummary>,
}

#[derive(CandidType, Deserialize, Clone, Debug, PartialEq)]
enum WriteError {
    QueueFull { capacity: u64 },
    Invalid(String),
    NotAuthorized,
    Database(String),
}

#[derive(CandidType, Deserialize, Clone, Debug, PartialEq)]
enum TicketStatus {
    Pending,
    Committed {
        rows_changed: u64,
        last_insert_rowid: i64,
    },
    Failed(String),
    Evicted,
    Unknown,
}

#[derive(CandidType, Deserialize, Clone, Debug, PartialEq)]
struct Stats {
    pending: u64,
    submitted: u64,
    committed: u64,
    failed: u64,
    rejected: u64,
    flushes: u64,
    last_flush_ops: u64,
    last_flush_instructions: u64,
    timer_armed: bool,
}

#[derive(CandidType, Deserialize, Clone, Debug, PartialEq)]
struct Counts {
    users: u64,
    orders: u64,
}

#[derive(CandidType, Deserialize, Clone, Debug, PartialEq)]
enum SqlParam {
    Null,
    Integer(i64),
    Real(f64),
    Text(String),
    Blob(Vec<u8>),
}

#[derive(CandidType, Deserialize, Clone, Debug, PartialEq)]
struct SqlStatement {
    sql: String,
    params: Vec<SqlParam>,
}

const CONTROLLER: &[u8] = &[0xC0, 0xFF, 0xEE, 0x01];

fn program(engine: &Engine) -> Program {
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/canister/bench_canister.wasm");
    let wasm = std::fs::read(&path)
        .unwrap_or_else(|e| panic!("{}: {e}; run scripts/build.sh first", path.display()));
    engine.load(&wasm).expect("the canister wasm loads")
}

fn install(args: InitArgs) -> (Engine, Program, Canister) {
    let engine = Engine::new(EngineConfig::default()).expect("engine");
    let program = program(&engine);
    let settings = Settings {
        controllers: vec![CONTROLLER.to_vec()],
        ..Settings::default()
    };
    let arg = Encode!(&Some(args)).unwrap();
    let (canister, exec) = Canister::install(&engine, &program, &arg, settings).expect("install");
    assert!(
        !matches!(exec.result, MessageResult::Trap(_)),
        "init trapped: {:?}",
        exec.result
    );
    (engine, program, canister)
}

fn u(c: &mut Canister, method: &str, arg: &[u8]) -> Execution {
    c.update(method, arg)
        .unwrap_or_else(|e| panic!("update {method}: {e}"))
}

fn ua(c: &mut Canister, caller: &[u8], method: &str, arg: &[u8]) -> Execution {
    c.update_as(caller, method, arg)
        .unwrap_or_else(|e| panic!("update {method}: {e}"))
}

fn q(c: &mut Canister, method: &str, arg: &[u8]) -> Execution {
    c.query(method, arg)
        .unwrap_or_else(|e| panic!("query {method}: {e}"))
}

fn reply(exec: &Execution) -> &[u8] {
    match &exec.result {
        MessageResult::Reply(bytes) => bytes,
        other => panic!(
            "{}: expected a reply, got {other:?}; logs: {:?}",
            exec.entry, exec.logs
        ),
    }
}

fn stats(c: &mut Canister) -> Stats {
    Decode!(reply(&q(c, "stats", &Encode!().unwrap())), Stats).unwrap()
}

fn counts(c: &mut Canister) -> Counts {
    Decode!(reply(&q(c, "counts", &Encode!().unwrap())), Result<Counts, String>)
        .unwrap()
        .unwrap()
}

fn submit_order(c: &mut Canister, user_id: i64, amount: f64) -> Result<Submitted, WriteError> {
    let exec = u(
        c,
        "submit_create_order",
        &Encode!(&user_id, &amount).unwrap(),
    );
    Decode!(reply(&exec), Result<Submitted, WriteError>).unwrap()
}

fn ticket(c: &mut Canister, t: u64) -> TicketStatus {
    Decode!(
        reply(&q(c, "ticket_status", &Encode!(&t).unwrap())),
        TicketStatus
    )
    .unwrap()
}

fn create_user(c: &mut Canister, name: &str) -> Outcome {
    let exec = u(
        c,
        "create_user",
        &Encode!(&name, &format!("{name}@example.com")).unwrap(),
    );
    Decode!(reply(&exec), Outcome).unwrap()
}

#[test]
fn unbatched_write_commits_in_the_call() {
    let (_e, _p, mut c) = install(InitArgs::default());
    assert_eq!(
        create_user(&mut c, "alice"),
        Outcome::Committed {
            rows_changed: 1,
            last_insert_rowid: 1
        }
    );
    let exec = u(&mut c, "create_order", &Encode!(&1i64, &9.5f64).unwrap());
    assert_eq!(
        Decode!(reply(&exec), Outcome).unwrap(),
        Outcome::Committed {
            rows_changed: 1,
            last_insert_rowid: 1
        }
    );
    assert!(
        exec.instructions > 10_000,
        "an insert transaction costs instructions: {}",
        exec.instructions
    );
    assert!(exec.billed_instructions >= exec.instructions);
    assert_eq!(
        counts(&mut c),
        Counts {
            users: 1,
            orders: 1
        }
    );
}

#[test]
fn batched_writes_are_flushed_by_the_timer_in_one_transaction() {
    let (_e, _p, mut c) = install(InitArgs {
        flush_size: Some(1_000),
        max_delay_ms: Some(50),
        ..Default::default()
    });
    create_user(&mut c, "bob");
    let tickets: Vec<u64> = (0..20)
        .map(|i| submit_order(&mut c, 1, i as f64).unwrap().ticket)
        .collect();
    assert_eq!(ticket(&mut c, tickets[0]), TicketStatus::Pending);
    assert_eq!(
        counts(&mut c).orders,
        0,
        "nothing is written before the flush"
    );
    let s = stats(&mut c);
    assert_eq!((s.pending, s.timer_armed), (20, true));

    c.advance_time(1_000_000_000);
    let runs = c.tick().expect("tick");
    assert!(!runs.is_empty(), "the timer ran");
    assert_eq!(counts(&mut c).orders, 20);
    let s = stats(&mut c);
    assert_eq!(
        (
            s.pending,
            s.committed,
            s.flushes,
            s.last_flush_ops,
            s.timer_armed
        ),
        (0, 20, 1, 20, false)
    );
    for (i, t) in tickets.iter().enumerate() {
        assert_eq!(
            ticket(&mut c, *t),
            TicketStatus::Committed {
                rows_changed: 1,
                last_insert_rowid: i as i64 + 1
            }
        );
    }
}

#[test]
fn size_trigger_flushes_inside_the_submitting_call() {
    let (_e, _p, mut c) = install(InitArgs {
        flush_size: Some(5),
        ..Default::default()
    });
    create_user(&mut c, "carol");
    for _ in 0..4 {
        assert_eq!(submit_order(&mut c, 1, 1.0).unwrap().flushed, None);
    }
    let fifth = submit_order(&mut c, 1, 1.0).unwrap();
    let flushed = fifth
        .flushed
        .expect("the fifth submit fills the batch and flushes it");
    assert_eq!(
        (flushed.executed, flushed.committed, flushed.remaining),
        (5, 5, 0)
    );
    assert_eq!(counts(&mut c).orders, 5);
}

#[test]
fn one_failing_op_does_not_undo_the_others() {
    let (_e, _p, mut c) = install(InitArgs {
        flush_size: Some(100),
        ..Default::default()
    });
    // The precompiled SQLite of ic-rusqlite enforces foreign keys: orders need their user.
    create_user(&mut c, "erin");
    let good = |v: f64| SqlStatement {
        sql: "INSERT INTO orders (user_id, amount) VALUES (1, ?1)".into(),
        params: vec![SqlParam::Real(v)],
    };
    let bad = SqlStatement {
        sql: "INSERT INTO orders (user_id, amount) VALUES (1, NULL)".into(),
        params: vec![],
    };
    let mut tickets = vec![];
    for stmt in [good(1.0), bad, good(2.0)] {
        let exec = ua(
            &mut c,
            CONTROLLER,
            "submit_sql",
            &Encode!(&vec![stmt]).unwrap(),
        );
        tickets.push(
            Decode!(reply(&exec), Result<Submitted, WriteError>)
                .unwrap()
                .unwrap()
                .ticket,
        );
    }
    let exec = u(&mut c, "flush", &Encode!().unwrap());
    let summary = Decode!(reply(&exec), Result<FlushSummary, WriteError>)
        .unwrap()
        .unwrap();
    assert_eq!(
        (summary.executed, summary.committed, summary.failed),
        (3, 2, 1),
        "{summary:?} {:?}",
        tickets
            .iter()
            .map(|t| ticket(&mut c, *t))
            .collect::<Vec<_>>()
    );
    assert!(
        matches!(ticket(&mut c, tickets[0]), TicketStatus::Committed { .. }),
        "{:?}",
        ticket(&mut c, tickets[0])
    );
    assert_eq!(
        ticket(&mut c, tickets[1]),
        TicketStatus::Failed("NOT NULL constraint failed: orders.amount".into())
    );
    assert!(matches!(
        ticket(&mut c, tickets[2]),
        TicketStatus::Committed { .. }
    ));
    assert_eq!(counts(&mut c).orders, 2);
}

#[test]
fn caller_supplied_sql_is_controller_only() {
    let (_e, _p, mut c) = install(InitArgs::default());
    let stmt = SqlStatement {
        sql: "DELETE FROM users".into(),
        params: vec![],
    };
    let stranger = Principal::anonymous();
    for method in ["submit_sql", "execute_sql"] {
        let exec = ua(
            &mut c,
            stranger.as_slice(),
            method,
            &Encode!(&vec![stmt.clone()]).unwrap(),
        );
        let bytes = reply(&exec);
        let refused = if method == "submit_sql" {
            Decode!(bytes, Result<Submitted, WriteError>).unwrap().err()
        } else {
            Decode!(bytes, Result<Outcome, WriteError>).unwrap().err()
        };
        assert_eq!(refused, Some(WriteError::NotAuthorized), "{method}");
    }
}

#[test]
fn pending_ops_survive_an_upgrade_and_are_flushed_after_it() {
    // A budget so small that the pre_upgrade flush stops after one op: the rest must survive.
    let args = InitArgs {
        flush_size: Some(1_000),
        flush_instruction_budget: Some(1),
        ..Default::default()
    };
    let (_e, program, mut c) = install(args.clone());
    create_user(&mut c, "dave");
    let tickets: Vec<u64> = (0..10)
        .map(|i| submit_order(&mut c, 1, i as f64).unwrap().ticket)
        .collect();
    let upgrade = c
        .upgrade(&program, &Encode!(&Some(args)).unwrap())
        .expect("upgrade");
    assert!(
        !matches!(upgrade.result, MessageResult::Trap(_)),
        "{:?}",
        upgrade.result
    );
    // At least one op was flushed in pre_upgrade; the others are pending after the upgrade.
    let s = stats(&mut c);
    assert_eq!(s.pending + s.committed, 10, "{s:?}");
    assert!(s.pending > 0 && s.timer_armed, "{s:?}");
    // The re-armed timer flushes one op per run under this budget; drive it to the end.
    for _ in 0..20 {
        c.advance_time(1_000_000_000);
        c.tick().expect("tick");
    }
    assert_eq!(
        counts(&mut c),
        Counts {
            users: 1,
            orders: 10
        }
    );
    for t in tickets {
        assert!(
            matches!(ticket(&mut c, t), TicketStatus::Committed { .. }),
            "ticket {t}"
        );
    }
}

#[test]
fn data_survives_an_upgrade() {
    let (_e, program, mut c) = install(InitArgs::default());
    for name in ["u1", "u2", "u3"] {
        create_user(&mut c, name);
    }
    c.upgrade(&program, &Encode!(&None::<InitArgs>).unwrap())
        .expect("upgrade");
    assert_eq!(counts(&mut c).users, 3);
    assert_eq!(
        create_user(&mut c, "u4"),
        Outcome::Committed {
            rows_changed: 1,
            last_insert_rowid: 4
        }
    );
}

#[test]
fn the_committed_did_matches_the_code() {
    let (_e, _p, mut c) = install(InitArgs::default());
    let from_code = c
        .candid_interface()
        .expect("get_candid_pointer runs")
        .expect("the wasm exports get_candid_pointer");
    let committed = std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("bench_canister.did"),
    )
    .unwrap();
    use candid_parser::utils::{CandidSource, service_equal};
    service_equal(
        CandidSource::Text(&from_code),
        CandidSource::Text(&committed),
    )
    .unwrap_or_else(|e| {
        panic!("bench_canister.did differs from the code: {e}\n--- from the code:\n{from_code}")
    });
}
