//! The batched write path tried as an attacker and as a careless controller would: no op can
//! wedge the queue, stop the timer or block an upgrade; nothing acknowledged is lost or altered;
//! strangers stay out. Every assertion is exact. Build the wasm first with scripts/build.sh.

use bench_api::*;
use bench_suite::client::{CONTROLLER, Client, STRANGER};
use candid::Principal;
use offline_engine::{InstructionLimits, MessageResult, Settings, SubnetKind, reject_code};

/// One second: the flush timer's period in these tests.
const SECOND: u64 = 1_000_000_000;

/// An insert that never ends by itself (a recursive CTE without a bound): only the
/// instruction guard stops it.
const ENDLESS_INSERT: &str = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) \
    INSERT INTO users (username, email) SELECT 'endless', 'endless@example.com' FROM c";

/// A flush budget small enough that the guard acts within a fraction of a second.
const BUDGET: u64 = 100_000_000;

fn queue_args() -> InitArgs {
    InitArgs {
        flush_size: Some(1_000),
        max_delay_ms: Some(1_000),
        flush_instruction_budget: Some(BUDGET),
        ..Default::default()
    }
}

fn committed(rowid: i64) -> TicketStatus {
    TicketStatus::Committed {
        rows_changed: 1,
        last_insert_rowid: rowid,
    }
}

fn interrupted_alone(message: &str) {
    assert_eq!(
        message,
        "interrupted: the op was still running after 200000000 instructions, alone at the start of a flush (2 × flush_instruction_budget), and was rolled back"
    );
}

/// Three orders, the endless insert, three orders: the tickets.
fn submit_around_heavy(c: &mut Client) -> (Vec<Ticket>, Ticket, Vec<Ticket>) {
    let before: Vec<Ticket> = (0..3)
        .map(|i| c.submit_order(1, i as f64).unwrap())
        .collect();
    let heavy = c.submit_sql(ENDLESS_INSERT);
    let after: Vec<Ticket> = (3..6)
        .map(|i| c.submit_order(1, i as f64).unwrap())
        .collect();
    (before, heavy, after)
}

fn assert_heavy_failed_alone(c: &mut Client, heavy: Ticket) {
    match c.ticket(heavy) {
        TicketStatus::Failed(OpError { code: 9, message }) => interrupted_alone(&message),
        other => panic!("ticket {heavy}: {other:?}"),
    }
}

#[test]
fn a_heavy_op_between_normal_ops_fails_alone_under_the_timer() {
    let mut c = Client::install(queue_args());
    c.create_user("alice");
    let (before, heavy, after) = submit_around_heavy(&mut c);

    // Timer run 1: the three ops before it commit; it is interrupted behind them and stays first.
    c.tick(SECOND);
    for (i, t) in before.iter().enumerate() {
        assert_eq!(c.ticket(*t), committed(i as i64 + 1));
    }
    assert_eq!(c.ticket(heavy), TicketStatus::Pending);
    assert_eq!(c.ticket(after[0]), TicketStatus::Pending);
    assert!(c.stats().timer_armed);
    // Timer run 2: alone with the whole limit, it fails; the flush has used its budget.
    c.tick(SECOND);
    assert_heavy_failed_alone(&mut c, heavy);
    assert_eq!(c.ticket(after[0]), TicketStatus::Pending);
    // Timer run 3: the rest commits and the timer stops.
    c.tick(SECOND);
    for (i, t) in after.iter().enumerate() {
        assert_eq!(c.ticket(*t), committed(i as i64 + 4));
    }
    assert_eq!(
        c.counts(),
        Counts {
            users: 1,
            orders: 6
        }
    );
    let s = c.stats();
    assert_eq!(
        (
            s.pending,
            s.committed,
            s.failed,
            s.interrupted,
            s.flush_errors,
            s.timer_armed
        ),
        (0, 6, 1, 1, 0, false)
    );
    assert!(
        s.last_error
            .as_deref()
            .is_some_and(|e| e.starts_with(&format!("ticket {heavy}: interrupted"))),
        "{:?}",
        s.last_error
    );
    assert!(c.traps().is_empty(), "{:?}", c.traps());
}

#[test]
fn a_heavy_op_never_makes_flush_or_a_submit_trap() {
    let mut c = Client::install(InitArgs {
        flush_size: Some(8),
        ..queue_args()
    });
    c.create_user("bob");
    let (before, heavy, after) = submit_around_heavy(&mut c);
    // The eighth op fills the batch: its submit flushes the three before the heavy op.
    let seventh = c.submit_order(1, 6.0).unwrap();
    let s = c.stats();
    assert_eq!(
        (s.flushes, s.last_flush_ops, s.committed, s.pending),
        (1, 3, 3, 5)
    );
    // `flush` fails the heavy op alone, then commits the rest.
    let first = Result::from(c.update::<FlushResult, _>("flush", ())).unwrap();
    assert_eq!(
        (
            first.executed,
            first.failed,
            first.interrupted,
            first.remaining
        ),
        (1, 1, 1, 4)
    );
    assert_heavy_failed_alone(&mut c, heavy);
    let second = Result::from(c.update::<FlushResult, _>("flush", ())).unwrap();
    assert_eq!((second.committed, second.remaining), (4, 0));
    for t in before.iter().chain(&after).chain([&seventh]) {
        assert!(
            matches!(c.ticket(*t), TicketStatus::Committed { .. }),
            "{t}"
        );
    }
    assert!(c.traps().is_empty(), "{:?}", c.traps());
}

#[test]
fn a_heavy_op_pending_at_an_upgrade_does_not_block_it() {
    let mut c = Client::install(queue_args());
    c.create_user("carol");
    let (before, heavy, after) = submit_around_heavy(&mut c);
    let upgrade = c.upgrade(None);
    assert!(!upgrade.result.is_trap(), "{:?}", upgrade.result);
    // pre_upgrade only saves: far below the 300 B instructions of an upgrade.
    assert!(
        upgrade.instructions < 50_000_000,
        "{}",
        upgrade.instructions
    );
    let s = c.stats();
    assert_eq!((s.pending, s.timer_armed), (7, true));
    for _ in 0..3 {
        c.tick(SECOND);
    }
    assert_heavy_failed_alone(&mut c, heavy);
    for t in before.iter().chain(&after) {
        assert!(
            matches!(c.ticket(*t), TicketStatus::Committed { .. }),
            "{t}"
        );
    }
    assert_eq!(c.stats().pending, 0);
    assert!(c.traps().is_empty(), "{:?}", c.traps());
}

#[test]
fn unbatched_and_controller_sql_are_interrupted_too() {
    let mut c = Client::install(queue_args());
    let statement = SqlStatement {
        sql: ENDLESS_INSERT.into(),
        params: vec![],
    };
    let r: WriteResult = c.update("execute_sql", (vec![statement],));
    match Result::from(r) {
        Ok(Outcome::Failed(OpError { code: 9, message })) => assert_eq!(
            message,
            "interrupted: the op was still running after its limit of 300000000 instructions and was rolled back"
        ),
        other => panic!("{other:?}"),
    }
    assert_eq!(c.counts().users, 0, "nothing of it was committed");
    assert!(c.traps().is_empty());
}

#[test]
fn a_stranger_cannot_build_a_heavy_op_in_restricted_mode() {
    let mut c = Client::install(queue_args());
    let refused = c.raw_update(STRANGER, "create_user", ("mallory", "m@example.com"));
    let id = Principal::from_slice(offline_engine::DEFAULT_CANISTER_ID);
    assert_eq!(
        refused.result,
        MessageResult::Reject(
            reject_code::CANISTER_REJECT,
            format!("Canister {id} rejected the message")
        )
    );
    assert_eq!(refused.billed_instructions, 0);
    // From another canister (no inspect_message), the method refuses.
    let arg = candid::encode_args((vec![UserOrderOp::CreateOrder {
        user_id: 1,
        amount: 1.0,
    }],))
    .unwrap();
    let exec = c
        .canister
        .update_from_canister(STRANGER, "execute_batch", &arg)
        .unwrap();
    let r: BatchResult = bench_suite::client::decode("execute_batch", &exec);
    assert_eq!(r, BatchResult::Err(WriteError::NotAuthorized));
    assert_eq!(
        c.counts(),
        Counts {
            users: 0,
            orders: 0
        }
    );
}

#[test]
fn a_stranger_in_open_mode_builds_a_heavy_delete_and_it_fails_alone() {
    let budget = MIN_FLUSH_BUDGET;
    let mut c = Client::install(InitArgs {
        write_access: Some(WriteAccess::Open),
        flush_instruction_budget: Some(budget),
        ..queue_args()
    });
    let user = c.write_as(STRANGER, "create_user", ("target", "t@example.com"));
    assert!(matches!(Result::from(user), Ok(Outcome::Committed { .. })));
    let user = c.write_as(STRANGER, "create_user", ("other", "o@example.com"));
    assert!(matches!(Result::from(user), Ok(Outcome::Committed { .. })));
    // Orders for user 1 through client batches, each within the batch budget.
    let mut rows = 0;
    for _ in 0..200 {
        let ops = vec![
            UserOrderOp::CreateOrder {
                user_id: 1,
                amount: 1.0
            };
            100
        ];
        let r: BatchResult = c.update_as(STRANGER, "execute_batch", (ops,));
        let outcomes = Result::from(r).unwrap();
        rows += outcomes
            .iter()
            .filter(|o| matches!(o, Outcome::Committed { .. }))
            .count();
    }
    assert_eq!(rows, 20_000, "every batch fitted its budget");
    let first = c.submit_as(STRANGER, "submit_create_order", (2i64, 1.0f64));
    let delete = c.submit_as(STRANGER, "submit_delete_user_orders", (1i64,));
    let last = c.submit_as(STRANGER, "submit_create_order", (2i64, 2.0f64));
    let [first, delete, last] = [first, delete, last].map(|r| Result::from(r).expect("accepted"));
    for _ in 0..3 {
        c.tick(SECOND);
    }
    assert!(matches!(c.ticket(first), TicketStatus::Committed { .. }));
    match c.ticket(delete) {
        TicketStatus::Failed(OpError { code: 9, .. }) => {}
        other => panic!("{other:?}"),
    }
    assert!(matches!(c.ticket(last), TicketStatus::Committed { .. }));
    assert_eq!(
        c.orders_of(1).len(),
        20_000,
        "the interrupted delete deleted nothing"
    );
    // The same delete unbatched is interrupted at 3 × budget and deletes nothing either.
    let r = c.write_as(STRANGER, "delete_user_orders", (1i64,));
    match Result::from(r) {
        Ok(Outcome::Failed(OpError { code: 9, message })) => assert_eq!(
            message,
            format!(
                "interrupted: the op was still running after its limit of {} instructions and was rolled back",
                3 * budget
            )
        ),
        other => panic!("{other:?}"),
    }
    assert_eq!(c.orders_of(1).len(), 20_000);
    assert!(c.traps().is_empty(), "{:?}", c.traps());
}

/// An op whose single SQLite operation (a string function over 100 MB) runs longer than the
/// message limit below, which no guard can interrupt: every flush that runs it traps.
const UNINTERRUPTIBLE: &str = "INSERT INTO users (username, email) VALUES ('poison', \
    length(replace(printf('%.*c', 100000000, 'x'), 'x', 'yy')))";

#[test]
fn a_flush_that_traps_keeps_the_timer_and_the_op_is_removed() {
    let limits = InstructionLimits {
        update: 1_000_000_000,
        ..SubnetKind::Application.limits()
    };
    let mut c = Client::install_with(
        queue_args(),
        Settings {
            subnet: SubnetKind::Custom(limits),
            ..Settings::default()
        },
    );
    c.create_user("dave");
    let a = c.submit_order(1, 1.0).unwrap();
    let poison = c.submit_sql(UNINTERRUPTIBLE);
    let b = c.submit_order(1, 2.0).unwrap();
    let d = c.submit_order(1, 3.0).unwrap();

    // The first timer flush traps: nothing of it remains, but the timer does.
    let runs = c.tick(SECOND);
    assert!(
        runs.iter().any(|e| e.result.is_trap()),
        "{:?}",
        runs.iter()
            .map(|e| (&e.entry, &e.result))
            .collect::<Vec<_>>()
    );
    let s = c.stats();
    assert_eq!((s.pending, s.committed, s.timer_armed), (4, 0, true));
    let runs = c.tick(SECOND);
    assert!(
        !runs.is_empty(),
        "the timer fired again after a trapped flush"
    );

    // The watchdog finds the op and removes it; everything else commits.
    for _ in 0..20 {
        if c.stats().pending == 0 {
            break;
        }
        c.tick(SECOND);
    }
    assert_eq!(c.stats().pending, 0, "{:?}", c.stats());
    assert_eq!(c.ticket(a), committed(1));
    match c.ticket(poison) {
        TicketStatus::Failed(OpError { code: 4, message }) => assert_eq!(
            message,
            "removed without effect: each of 3 flushes that ran this op alone made its message trap, so it would have stopped the queue"
        ),
        other => panic!("{other:?}"),
    }
    assert_eq!(c.ticket(b), committed(2));
    assert_eq!(c.ticket(d), committed(3));
    assert_eq!(
        c.counts(),
        Counts {
            users: 1,
            orders: 3
        }
    );
    assert!(!c.stats().timer_armed);
}

#[test]
fn a_budget_without_headroom_is_refused() {
    let engine = offline_engine::Engine::new(offline_engine::EngineConfig::default()).unwrap();
    let program = bench_suite::client::program(&engine);
    let install = |args: InitArgs| {
        let arg = candid::encode_one(Some(args)).unwrap();
        offline_engine::Canister::install(&engine, &program, &arg, Settings::default())
    };
    let error = install(InitArgs {
        flush_instruction_budget: Some(100_000_000_000),
        ..Default::default()
    })
    .unwrap_err()
    .to_string();
    assert!(
        error.contains("invalid settings: flush_instruction_budget = 100000000000 leaves no headroom: a flush may use 3 × the budget (300000000000) plus a margin of 8000000000 for rollback, COMMIT and the rest of the message, over the 40000000000 instructions of a message; the largest budget is 10666666666"),
        "{error}"
    );
    // The largest budget is accepted, one more is not.
    assert!(
        install(InitArgs {
            flush_instruction_budget: Some(10_666_666_666),
            ..Default::default()
        })
        .is_ok()
    );
    assert!(
        install(InitArgs {
            flush_instruction_budget: Some(10_666_666_667),
            ..Default::default()
        })
        .is_err()
    );
    // Sizes are not truncated to the canister's 32-bit usize.
    let error = install(InitArgs {
        max_pending: Some(1 << 32),
        ..Default::default()
    })
    .unwrap_err()
    .to_string();
    assert!(
        error.contains("max_pending = 4294967296 does not fit in 32 bits"),
        "{error}"
    );

    // At an upgrade the canister keeps running with its settings and queue.
    let mut c = Client::install(queue_args());
    c.create_user("erin");
    let t = c.submit_order(1, 1.0).unwrap();
    let refused = c.upgrade(Some(InitArgs {
        flush_instruction_budget: Some(20_000_000_000),
        ..Default::default()
    }));
    assert!(
        matches!(&refused.result, MessageResult::Trap(m) if m.contains("leaves no headroom")),
        "{:?}",
        refused.result
    );
    assert_eq!(c.settings().flush_instruction_budget, BUDGET);
    assert_eq!(c.ticket(t), TicketStatus::Pending);
    c.tick(SECOND);
    assert_eq!(c.ticket(t), committed(1));
}

#[test]
fn writers_are_managed_by_controllers() {
    let mut c = Client::install(InitArgs::default());
    let writer = Principal::from_slice(STRANGER);
    // A stranger can neither write nor make itself a writer.
    let r: AdminResult = bench_suite::client::decode(
        "add_writers",
        &c.canister
            .update_from_canister(
                STRANGER,
                "add_writers",
                &candid::encode_args((vec![writer],)).unwrap(),
            )
            .unwrap(),
    );
    assert_eq!(r, AdminResult::Err(WriteError::NotAuthorized));
    assert!(
        c.raw_update(STRANGER, "add_writers", (vec![writer],))
            .result
            .reply()
            .is_none(),
        "inspect_message refuses it"
    );
    // The controller registers it: it may write, but not run SQL.
    let r: AdminResult = c.update("add_writers", (vec![writer],));
    assert_eq!(r, AdminResult::Ok(()));
    assert_eq!(c.query::<Vec<Principal>, _>("writers", ()), vec![writer]);
    let created = c.write_as(STRANGER, "create_user", ("w", "w@example.com"));
    assert!(matches!(
        Result::from(created),
        Ok(Outcome::Committed { .. })
    ));
    let sql = SqlStatement {
        sql: "DELETE FROM users".into(),
        params: vec![],
    };
    let arg = candid::encode_args((vec![sql],)).unwrap();
    let exec = c
        .canister
        .update_from_canister(STRANGER, "execute_sql", &arg)
        .unwrap();
    let r: WriteResult = bench_suite::client::decode("execute_sql", &exec);
    assert_eq!(r, WriteResult::Err(WriteError::NotAuthorized));
    let exec = c
        .canister
        .update_from_canister(STRANGER, "submit_sql", &arg)
        .unwrap();
    let r: SubmitResult = bench_suite::client::decode("submit_sql", &exec);
    assert_eq!(r, SubmitResult::Err(WriteError::NotAuthorized));
    // Removed again, it is refused.
    let r: AdminResult = c.update("remove_writers", (vec![writer],));
    assert_eq!(r, AdminResult::Ok(()));
    assert!(
        c.raw_update(STRANGER, "create_user", ("w2", "w2@example.com"))
            .result
            .reply()
            .is_none()
    );
    assert_eq!(c.counts().users, 1);
    // Writers survive an upgrade.
    let r: AdminResult = c.update("add_writers", (vec![writer],));
    assert_eq!(r, AdminResult::Ok(()));
    c.upgrade(None);
    assert_eq!(c.query::<Vec<Principal>, _>("writers", ()), vec![writer]);
}

#[test]
fn limits_keep_rows_and_replies_small() {
    let mut c = Client::install(InitArgs::default());
    let long = "x".repeat(MAX_USERNAME_BYTES + 1);
    let r = c.write_as(CONTROLLER, "create_user", (long.as_str(), "l@example.com"));
    assert_eq!(
        r,
        WriteResult::Err(WriteError::Invalid(
            "username has 101 bytes; the limit is 100".into()
        ))
    );
    // inspect_message refuses oversized single-op arguments before the canister pays.
    let huge = "y".repeat(2 * MAX_SINGLE_OP_ARG_BYTES);
    let exec = c.raw_update(CONTROLLER, "submit_create_user", (huge.as_str(), "h@x"));
    assert!(
        matches!(exec.result, MessageResult::Reject(4, _)),
        "{:?}",
        exec.result
    );
    // The engine refuses ingress arguments above the IC's 2 MiB.
    let exec = c.raw_update(
        CONTROLLER,
        "execute_sql",
        (vec![SqlStatement {
            sql: "z".repeat(3 << 20),
            params: vec![],
        }],),
    );
    assert!(
        matches!(exec.result, MessageResult::Reject(1, _)),
        "{:?}",
        exec.result
    );
    // Queries return at most 1,000 rows, whatever the limit asked.
    c.create_user("u");
    let ops = vec![
        UserOrderOp::CreateOrder {
            user_id: 1,
            amount: 2.0
        };
        1_500
    ];
    let r: BatchResult = c.update("execute_batch", (ops,));
    assert!(
        Result::from(r)
            .unwrap()
            .iter()
            .all(|o| matches!(o, Outcome::Committed { .. }))
    );
    let rows: Vec<UserOrder> =
        Result::from(c.query::<UserOrdersResult, _>("user_orders", (i64::MAX, u32::MAX))).unwrap();
    assert_eq!(rows.len(), MAX_QUERY_ROWS as usize);
    assert_eq!(c.orders_of(1).len(), 1_500);
}
