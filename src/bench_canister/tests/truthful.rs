//! Every outcome tells the truth, tried the way an attacker or a careless operator would: a
//! statement that would change the connection is refused and changes nothing; a flush that
//! fails outside any op fails no op, however long; a flush never passes its instruction bound,
//! whatever the ops cost; a submit never traps because of another caller's op; outcomes belong
//! to their submitter; strangers cannot make the canister pay for queries; budgets and queue
//! sizes that would fail ordinary ops are refused. Every assertion is exact. Build the wasm
//! first with scripts/build.sh.

use bench_api::*;
use bench_suite::client::{CONTROLLER, Client, STRANGER};
use candid::Principal;
use offline_engine::{InstructionLimits, MessageResult, Settings, SubnetKind, reject_code};

/// One second: the flush timer's period in these tests.
const SECOND: u64 = 1_000_000_000;
/// A registered writer.
const WRITER: &[u8] = &[0x77, 0x21];

fn committed(rowid: i64) -> TicketStatus {
    TicketStatus::Committed {
        rows_changed: 1,
        last_insert_rowid: rowid,
    }
}

fn failed(code: i32, message: &str) -> Outcome {
    Outcome::Failed(OpError {
        code,
        message: message.into(),
    })
}

fn refused_pragma(name: &str) -> Outcome {
    failed(
        23,
        &format!(
            "refused, nothing happened: PRAGMA {name} with an argument changes the connection while it is compiled, outside any transaction (an op may only set user_version and application_id)"
        ),
    )
}

fn foreign_key_failure() -> Outcome {
    failed(787, "FOREIGN KEY constraint failed")
}

/// `execute_sql` of one statement by the controller.
fn execute(c: &mut Client, sql: &str) -> Outcome {
    let statement = SqlStatement {
        sql: sql.into(),
        params: vec![],
    };
    Result::from(c.update::<WriteResult, _>("execute_sql", (vec![statement],)))
        .expect("a controller's SQL is executed")
}

/// `submit_sql` of one statement by the controller, flushed: its outcome.
fn submit_and_flush(c: &mut Client, sql: &str) -> Outcome {
    let ticket = c.submit_sql(sql);
    Result::from(c.update::<FlushResult, _>("flush", ())).expect("flushed");
    match c.ticket(ticket) {
        TicketStatus::Committed {
            rows_changed,
            last_insert_rowid,
        } => Outcome::Committed {
            rows_changed,
            last_insert_rowid,
        },
        TicketStatus::Failed(e) => Outcome::Failed(e),
        other => panic!("ticket {ticket}: {other:?}"),
    }
}

fn write(c: &mut Client, method: &str, user_id: i64, amount: f64) -> Outcome {
    Result::from(c.write_as(CONTROLLER, method, (user_id, amount))).expect("executed")
}

/// The four PRAGMAs that took effect while they were reported as failed: each is refused
/// before it takes effect, unbatched and queued, and the flag it would have set is not set.
#[test]
fn pragmas_are_refused_before_they_take_effect() {
    let mut c = Client::install(InitArgs::default());
    c.create_user("alice");
    // The order statement is compiled (and cached) while foreign keys are on.
    assert_eq!(
        write(&mut c, "create_order", 99, 1.0),
        foreign_key_failure()
    );

    // 1. foreign_keys = OFF: refused both ways; an order of a missing user still fails.
    assert_eq!(
        execute(&mut c, "PRAGMA foreign_keys = OFF"),
        refused_pragma("foreign_keys")
    );
    assert_eq!(
        submit_and_flush(&mut c, "PRAGMA foreign_keys = OFF"),
        refused_pragma("foreign_keys")
    );
    assert_eq!(
        write(&mut c, "create_order", 99, 1.0),
        foreign_key_failure()
    );
    let t = c.submit_order(99, 2.0).unwrap();
    Result::from(c.update::<FlushResult, _>("flush", ())).unwrap();
    assert_eq!(
        c.ticket(t),
        TicketStatus::Failed(OpError {
            code: 787,
            message: "FOREIGN KEY constraint failed".into()
        })
    );

    // 2. foreign_keys = ON after it: refused too; no statement compiled without the check.
    assert_eq!(
        execute(&mut c, "PRAGMA foreign_keys = ON"),
        refused_pragma("foreign_keys")
    );
    assert_eq!(
        write(&mut c, "create_order", 99, 3.0),
        foreign_key_failure()
    );

    // 3. writable_schema = 1: refused; the schema table stays read-only.
    assert_eq!(
        execute(&mut c, "PRAGMA writable_schema = 1"),
        refused_pragma("writable_schema")
    );
    assert_eq!(
        submit_and_flush(&mut c, "PRAGMA writable_schema = 1"),
        refused_pragma("writable_schema")
    );
    let schema_write = "UPDATE sqlite_master SET sql = sql WHERE name = 'users'";
    let read_only_schema = failed(1, "table sqlite_master may not be modified");
    assert_eq!(execute(&mut c, schema_write), read_only_schema);
    assert_eq!(submit_and_flush(&mut c, schema_write), read_only_schema);

    // 4. query_only = 1: refused; writes go on, queued and unbatched.
    assert_eq!(
        execute(&mut c, "PRAGMA query_only = 1"),
        refused_pragma("query_only")
    );
    assert_eq!(
        submit_and_flush(&mut c, "PRAGMA query_only = 1"),
        refused_pragma("query_only")
    );
    assert_eq!(
        write(&mut c, "create_order", 1, 4.0),
        Outcome::Committed {
            rows_changed: 1,
            last_insert_rowid: 1
        }
    );
    let t = c.submit_order(1, 5.0).unwrap();
    Result::from(c.update::<FlushResult, _>("flush", ())).unwrap();
    assert_eq!(c.ticket(t), committed(2));

    // ATTACH (it would add a database file to the canister's file system) and temporary tables
    // (they would shadow `orders` on this connection until the next upgrade) are refused too.
    assert_eq!(
        execute(&mut c, "ATTACH 'other.db' AS other"),
        failed(
            23,
            "refused, nothing happened: ATTACH and DETACH change the databases of the connection, not the data"
        )
    );
    assert_eq!(
        submit_and_flush(
            &mut c,
            "CREATE TEMP TABLE orders (order_id INTEGER PRIMARY KEY, user_id, amount)"
        ),
        failed(
            23,
            "refused, nothing happened: temp.orders is in the temp schema, which belongs to the connection, not to the database, and vanishes when the connection is reopened (at every upgrade of a canister)"
        )
    );
    assert_eq!(
        write(&mut c, "create_order", 1, 6.0),
        Outcome::Committed {
            rows_changed: 1,
            last_insert_rowid: 3
        }
    );
    assert_eq!(c.orders_of(1).len(), 3, "the main table has every order");
    let s = c.stats();
    assert_eq!((s.flush_errors, s.pending, s.alarm), (0, 0, None));
    assert!(c.traps().is_empty(), "{:?}", c.traps());
}

fn queue_args() -> InitArgs {
    InitArgs {
        flush_size: Some(1_000),
        max_delay_ms: Some(1_000),
        flush_instruction_budget: Some(100_000_000),
        ..Default::default()
    }
}

/// A timer that fires late, with no trap anywhere (rounds longer than its period, a busy
/// subnet), is not taken for a trapping flush: the watchdog's first careful flush runs what a
/// normal flush would, it answers, and the careful mode ends at once. Every op commits in that
/// one run; no op is flushed alone, no alarm is raised, nothing traps.
#[test]
fn a_late_timer_is_not_taken_for_a_trap() {
    let mut c = Client::install(queue_args());
    c.create_user("alice");
    let tickets: Vec<Ticket> = (0..50)
        .map(|i| c.submit_order(1, i as f64).unwrap())
        .collect();
    // The timer's period is one second; its first run comes 2.5 periods late.
    c.tick(2 * SECOND + SECOND / 2);
    let s = c.stats();
    assert_eq!((s.pending, s.committed, &s.alarm), (0, 50, &None), "{s:?}");
    assert_eq!(s.last_flush_ops, 50);
    for (i, t) in tickets.iter().enumerate() {
        assert_eq!(c.ticket(*t), committed(i as i64 + 1));
    }
    assert!(c.traps().is_empty(), "{:?}", c.traps());
    // Later submits flush as usual, by the timer, in one flush each period.
    for i in 0..5 {
        c.submit_order(1, 100.0 + i as f64).unwrap();
    }
    c.tick(SECOND);
    let s = c.stats();
    assert_eq!((s.pending, s.committed, &s.alarm), (0, 55, &None), "{s:?}");
}

/// A database that is read-only for 60 timer periods: every flush fails at `BEGIN`, which is
/// no op's doing, so no op fails; the alarm says so; once writable, everything commits.
#[test]
fn a_read_only_database_fails_no_op_and_everything_commits_after_it() {
    let mut c = Client::install(queue_args());
    c.create_user("alice");
    let before: Vec<Ticket> = (0..8)
        .map(|i| c.submit_order(1, i as f64).unwrap())
        .collect();
    let r: AdminResult = c.update("set_read_only", (true,));
    assert_eq!(r, AdminResult::Ok(()));
    assert!(c.settings().read_only);
    // A stranger may not switch it.
    let exec = c
        .canister
        .update_from_canister(
            STRANGER,
            "set_read_only",
            &candid::encode_args((false,)).unwrap(),
        )
        .unwrap();
    let r: AdminResult = bench_suite::client::decode("set_read_only", &exec);
    assert_eq!(r, AdminResult::Err(WriteError::NotAuthorized));
    // Unbatched writes fail with SQLite's own reason, and change nothing.
    assert_eq!(
        write(&mut c, "create_order", 1, 1.0),
        failed(8, "attempt to write a readonly database")
    );
    for _ in 0..30 {
        c.tick(SECOND);
    }
    // Submits are still accepted: they wait too.
    let during: Vec<Ticket> = (0..4)
        .map(|i| c.submit_order(1, 100.0 + i as f64).unwrap())
        .collect();
    // An upgrade keeps the mode.
    assert!(!c.upgrade(None).result.is_trap());
    assert!(c.settings().read_only);
    for _ in 0..30 {
        c.tick(SECOND);
    }
    let s = c.stats();
    assert_eq!(
        (
            s.pending,
            s.failed,
            s.committed,
            s.flush_errors,
            s.timer_armed
        ),
        (12, 0, 0, 60, true)
    );
    assert_eq!(
        s.last_error.as_deref(),
        Some("BEGIN failed: attempt to write a readonly database")
    );
    // The upgrade reset the watchdog: 30 attempts since.
    assert_eq!(
        s.alarm.as_deref(),
        Some(
            "flushes fail outside any op (30 attempts in 29 s): BEGIN failed: attempt to write a readonly database; every queued op stays pending and the timer retries once per period"
        )
    );
    for t in before.iter().chain(&during) {
        assert_eq!(c.ticket(*t), TicketStatus::Pending, "ticket {t}");
    }
    assert_eq!(c.counts().orders, 0);

    let r: AdminResult = c.update("set_read_only", (false,));
    assert_eq!(r, AdminResult::Ok(()));
    c.tick(SECOND);
    for (i, t) in before.iter().chain(&during).enumerate() {
        assert_eq!(c.ticket(*t), committed(i as i64 + 1), "ticket {t}");
    }
    let s = c.stats();
    assert_eq!(
        (s.pending, s.failed, s.committed, s.alarm),
        (0, 0, 12, None)
    );
    assert!(c.traps().is_empty(), "{:?}", c.traps());
}

/// An insert whose cost varies: a recursive CTE of `1 + random() % rows` rows (about 4,750
/// instructions each), then one user `tag`.
fn varying(rows: u64, tag: usize) -> String {
    format!(
        "INSERT INTO users (username, email) SELECT 'varying', 'varying{tag}@x' WHERE \
         (SELECT count(*) FROM (WITH RECURSIVE n(v) AS MATERIALIZED (SELECT 1 + abs(random()) % {rows}), \
         c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c, n WHERE x < n.v) SELECT x FROM c)) > 0"
    )
}

/// Ops of varying cost at the largest budget the canister accepts, scaled down to a message
/// limit of 200 M (the canister's rule: 3 × the budget plus a fifth of the limit fits it): the
/// re-application after an interrupt keeps the flush's deadline, so no flush traps, in well
/// over 100 flushes, and every op commits.
#[test]
fn ops_of_varying_cost_at_the_largest_budget_never_make_a_flush_trap() {
    const LIMIT: u64 = 200_000_000;
    let budget = (LIMIT - LIMIT / 5) / 3;
    let limits = InstructionLimits {
        update: LIMIT,
        ..SubnetKind::Application.limits()
    };
    let mut c = Client::install_with(
        InitArgs {
            flush_instruction_budget: Some(budget),
            ..queue_args()
        },
        Settings {
            subnet: SubnetKind::Custom(limits),
            ..Settings::default()
        },
    );
    // Up to 1.3 budgets each: never interrupted alone (at 2 budgets), often behind others.
    let rows = budget * 13 / 10 / 4_750;
    let mut tickets = Vec::new();
    for tag in 0..240 {
        tickets.push(c.submit_sql(&varying(rows, tag)));
    }
    let mut flush_messages = 0u64;
    let mut most = 0u64;
    for _ in 0..400 {
        if c.stats().pending == 0 {
            break;
        }
        for e in c.tick(SECOND) {
            if e.entry.contains("timer") || e.entry.contains("__") {
                flush_messages += 1;
                most = most.max(e.instructions);
            }
        }
    }
    let s = c.stats();
    assert_eq!(
        (s.pending, s.committed, s.failed, s.interrupted),
        (0, 240, 0, 0),
        "{s:?}"
    );
    assert!(c.traps().is_empty(), "{:?}", c.traps());
    assert!(
        s.flushes + s.capped_flushes >= 100,
        "{} flushes, {} capped",
        s.flushes,
        s.capped_flushes
    );
    // The mechanism was needed: some flushes stopped at 3 budgets rather than pass them.
    assert!(s.capped_flushes > 0, "{s:?}");
    assert!(
        most <= 3 * budget + LIMIT / 20,
        "a flush message used {most} instructions, over 3 × {budget} + 5 %"
    );
    assert!(flush_messages >= 100);
    println!(
        "{} flushes, {} capped, {flush_messages} timer messages, the largest {most} instructions ({:.3} × the budget)",
        s.flushes,
        s.capped_flushes,
        most as f64 / budget as f64
    );
    for (i, t) in tickets.iter().enumerate() {
        assert!(
            matches!(
                c.ticket(*t),
                TicketStatus::Committed {
                    rows_changed: 1,
                    ..
                }
            ),
            "op {i}: {:?}",
            c.ticket(*t)
        );
    }
}

/// One SQLite operation (a string function over 100 MB) longer than the reduced message limit
/// below: no guard can interrupt it, every flush that runs it traps.
const UNINTERRUPTIBLE: &str = "INSERT INTO users (username, email) VALUES ('poison', \
    length(replace(printf('%.*c', 100000000, 'x'), 'x', 'yy')))";

/// While an op makes flushes trap, submits keep coming and fill batch after batch: no submit
/// traps (its size flush never runs the controller's SQL, and none runs while the queue is
/// stalled), every one gets its ticket, and the watchdog removes the op after finding it.
#[test]
fn submits_during_a_stall_never_trap() {
    let limits = InstructionLimits {
        update: 1_000_000_000,
        ..SubnetKind::Application.limits()
    };
    let mut c = Client::install_with(
        InitArgs {
            flush_size: Some(10),
            ..queue_args()
        },
        Settings {
            subnet: SubnetKind::Custom(limits),
            ..Settings::default()
        },
    );
    c.create_user("alice");
    let r: AdminResult = c.update("add_writers", (vec![Principal::from_slice(WRITER)],));
    assert_eq!(r, AdminResult::Ok(()));
    let mut orders = Vec::new();
    let mut submit = |c: &mut Client, i: usize| {
        let r = c.submit_as(WRITER, "submit_create_order", (1i64, i as f64));
        orders.push(Result::from(r).expect("a ticket, never a trap"));
    };
    for i in 0..25 {
        submit(&mut c, i);
    }
    // Two size flushes committed 20 orders; the poison waits behind the other 5.
    assert_eq!(c.stats().committed, 20);
    let poison = c.submit_sql(UNINTERRUPTIBLE);
    for i in 25..225 {
        submit(&mut c, i);
        if i % 20 == 0 {
            c.tick(SECOND);
        }
    }
    for _ in 0..100 {
        if c.stats().pending == 0 {
            break;
        }
        c.tick(SECOND);
    }
    // What trapped: the timer's normal flush once (the stall is not known before it), the
    // first careful flush (a whole flush in its own message: the stall could have been a late
    // timer), then the careful flushes of the poison alone, three times; no submit.
    let trapped: Vec<String> = c.traps().iter().map(|e| e.entry.clone()).collect();
    assert_eq!(
        trapped,
        [
            "canister_update <ic-cdk internal> timer_executor",
            "canister_update __careful_flush",
            "canister_update __careful_flush",
            "canister_update __careful_flush",
            "canister_update __careful_flush",
        ],
    );
    match c.ticket(poison) {
        TicketStatus::Failed(OpError { code: 4, message }) => assert_eq!(
            message,
            "removed without effect: each of 3 flushes that ran this op alone made its message trap, so it would have stopped the queue"
        ),
        other => panic!("{other:?}"),
    }
    for (i, t) in orders.iter().enumerate() {
        assert!(
            matches!(c.ticket(*t), TicketStatus::Committed { .. }),
            "order {i}: {:?}",
            c.ticket(*t)
        );
    }
    let s = c.stats();
    assert_eq!((s.pending, s.committed, s.failed), (0, 225, 1));
    assert_eq!(c.counts().orders, 225);
    println!("trapped messages: {}: {trapped:?}", trapped.len());
}

/// A stranger floods an open canister with no-op submits: the victim's outcome stays, the
/// stranger cannot read it, and the stranger's own evicted outcomes still say they committed.
#[test]
fn a_strangers_flood_does_not_erase_anothers_outcome() {
    let mut c = Client::install(InitArgs {
        write_access: Some(WriteAccess::Open),
        flush_size: Some(50),
        max_pending: Some(100),
        outcome_capacity: Some(100),
        ..Default::default()
    });
    let victim = Result::from(c.submit_as(
        WRITER,
        "submit_create_user",
        ("victim", "victim@example.com"),
    ))
    .unwrap();
    Result::from(c.update::<FlushResult, _>("flush", ())).unwrap();
    assert_eq!(c.ticket_as(WRITER, victim), committed(1));
    let mut flood = Vec::new();
    for _ in 0..1_000 {
        let r = c.submit_as(STRANGER, "submit_update_order_amount", (999_999i64, 1.0f64));
        flood.push(Result::from(r).expect("accepted"));
    }
    assert_eq!(c.stats().pending, 0, "size flushes kept up");
    // The victim's outcome is intact, to the victim and to controllers.
    assert_eq!(c.ticket_as(WRITER, victim), committed(1));
    assert_eq!(c.ticket(victim), committed(1));
    // Nobody else sees it.
    for other in [STRANGER, offline_engine::ANONYMOUS] {
        assert_eq!(c.ticket_as(other, victim), TicketStatus::NotYours);
    }
    let statuses: Vec<TicketStatus> = c.query_as(STRANGER, "ticket_statuses", (victim, 3u32));
    assert_eq!(statuses[0], TicketStatus::NotYours);
    // The stranger evicted its own: they still say whether they committed (0 rows changed).
    assert_eq!(
        c.ticket_as(STRANGER, flood[0]),
        TicketStatus::Evicted {
            committed: Some(true)
        }
    );
    assert_eq!(c.ticket_as(WRITER, flood[0]), TicketStatus::NotYours);
    assert_eq!(
        c.ticket_as(STRANGER, flood[999]),
        TicketStatus::Committed {
            rows_changed: 0,
            last_insert_rowid: 0
        }
    );
    assert!(c.traps().is_empty());
}

/// The query methods of the interface (its method table, which `tests/did.rs` of bench_api
/// checks against the `.did`), sorted.
fn query_methods() -> Vec<String> {
    let mut queries: Vec<String> = methods_of(MethodClass::Query).map(String::from).collect();
    queries.sort();
    queries
}

/// A stranger calls every query method as an update (a replicated query the canister would
/// pay for like an update): inspect_message refuses each before it runs, billing nothing, in
/// both modes and for controllers too; the canister's internal method is refused as well.
#[test]
fn queries_called_as_updates_are_refused_before_they_run() {
    let queries = query_methods();
    assert_eq!(
        queries,
        [
            "batch_declaration",
            "counts",
            "orders",
            "settings",
            "stats",
            "ticket_status",
            "ticket_statuses",
            "user_orders",
            "users_by_email_prefix",
            "writers",
        ]
    );
    let id = Principal::from_slice(offline_engine::DEFAULT_CANISTER_ID);
    for access in [WriteAccess::Restricted, WriteAccess::Open] {
        let mut c = Client::install(InitArgs {
            write_access: Some(access),
            ..Default::default()
        });
        c.create_user("alice");
        let expensive = candid::encode_args((i64::MAX, u32::MAX)).unwrap();
        for method in queries
            .iter()
            .map(String::as_str)
            .chain(["__careful_flush"])
        {
            for caller in [STRANGER, WRITER, CONTROLLER] {
                let arg = if method == "user_orders" {
                    expensive.clone()
                } else {
                    candid::encode_args(()).unwrap()
                };
                let exec = c.canister.update_as(caller, method, &arg).unwrap();
                assert_eq!(
                    (exec.entry.as_str(), &exec.result, exec.billed_instructions),
                    (
                        "canister_inspect_message",
                        &MessageResult::Reject(
                            reject_code::CANISTER_REJECT,
                            format!("Canister {id} rejected the message")
                        ),
                        0
                    ),
                    "{method} by {caller:?} in {access:?}"
                );
            }
        }
        // As queries they answer.
        let rows: UserOrdersResult = c.query("user_orders", (i64::MAX, u32::MAX));
        assert_eq!(rows, UserOrdersResult::Ok(vec![]));
    }
}

fn install_error(args: InitArgs) -> String {
    let engine = offline_engine::Engine::new(offline_engine::EngineConfig::default()).unwrap();
    let program = bench_suite::client::program(&engine);
    let arg = candid::encode_one(Some(args)).unwrap();
    match offline_engine::Canister::install(&engine, &program, &arg, Settings::default()) {
        Ok(_) => String::new(),
        Err(e) => e.to_string(),
    }
}

/// Budgets below the floor, queues smaller than one op and outcome stores smaller than the
/// queue are refused with the reason; at the floor, ordinary ops never fail, also as the first
/// writes after an upgrade.
#[test]
fn budgets_and_sizes_below_their_floors_are_refused() {
    for budget in [1, 1_000, MIN_FLUSH_BUDGET - 1] {
        let error = install_error(InitArgs {
            flush_instruction_budget: Some(budget),
            ..Default::default()
        });
        assert!(
            error.contains(&format!("invalid settings: flush_instruction_budget = {budget} is below the smallest budget, 20000000: an ordinary op of the users/orders workload could be interrupted (the most expensive one, measured, with headroom)")),
            "{error}"
        );
    }
    let error = install_error(InitArgs {
        max_pending_bytes: Some(MIN_PENDING_BYTES - 1),
        ..Default::default()
    });
    assert!(
        error.contains("invalid settings: max_pending_bytes = 420 is below 421, the size of the largest op of the API (a create_user with a username and an email at their limits): the queue would refuse it"),
        "{error}"
    );
    for capacity in [0, 9_999] {
        let error = install_error(InitArgs {
            outcome_capacity: Some(capacity),
            ..Default::default()
        });
        assert!(
            error.contains(&format!("invalid settings: outcome_capacity = {capacity} is below max_pending = 10000: a flush of a full queue would evict outcomes it has just recorded")),
            "{error}"
        );
    }

    // At the floors: the largest op fits an empty queue, and ordinary ops all commit.
    let mut c = Client::install(InitArgs {
        flush_instruction_budget: Some(MIN_FLUSH_BUDGET),
        max_pending_bytes: Some(MIN_PENDING_BYTES),
        max_pending: Some(1),
        flush_size: Some(1),
        outcome_capacity: Some(1),
        ..Default::default()
    });
    let longest = (
        "u".repeat(MAX_USERNAME_BYTES),
        format!("{}@x", "e".repeat(MAX_EMAIL_BYTES - 2)),
    );
    let t = Result::from(c.submit_as(CONTROLLER, "submit_create_user", longest)).unwrap();
    assert_eq!(c.ticket(t), committed(1));
    // An upgrade to the smallest budget with room for ordinary traffic; then 300 queued ops
    // and unbatched ones, the first of each as the first write after an upgrade.
    c.upgrade(Some(InitArgs {
        max_pending_bytes: Some(1 << 20),
        max_pending: Some(1_000),
        flush_size: Some(100),
        outcome_capacity: Some(1_000),
        ..Default::default()
    }));
    let mut tickets = Vec::new();
    for round in 0..3 {
        c.upgrade(None);
        for i in 0..100 {
            let user = (i % 2 + 1) as i64;
            let r = match i % 4 {
                0 => c.submit_as(CONTROLLER, "submit_create_order", (user, i as f64)),
                1 => c.submit_as(CONTROLLER, "submit_update_order_amount", (i as i64, 1.0f64)),
                2 => c.submit_as(
                    CONTROLLER,
                    "submit_create_user",
                    (format!("u{round}-{i}"), format!("{round}-{i}@x")),
                ),
                _ => c.submit_as(CONTROLLER, "submit_delete_user_orders", (2i64,)),
            };
            tickets.push(Result::from(r).unwrap());
        }
        c.upgrade(None);
        assert!(matches!(
            write(&mut c, "create_order", 1, 1.0),
            Outcome::Committed { .. }
        ));
        assert!(matches!(
            Result::from(c.write_as(CONTROLLER, "delete_user_orders", (1i64,))).unwrap(),
            Outcome::Committed { .. }
        ));
        c.tick(SECOND);
    }
    for t in &tickets {
        assert!(
            matches!(c.ticket(*t), TicketStatus::Committed { .. }),
            "ticket {t}: {:?}",
            c.ticket(*t)
        );
    }
    let s = c.stats();
    assert_eq!((s.pending, s.failed, s.interrupted), (0, 0, 0));
}

/// Tickets start at the install's time: a canister installed again (its state wiped) starts
/// past every ticket the previous install issued, so an old ticket is `Unknown`, never another
/// caller's op.
#[test]
fn tickets_are_unique_across_installs() {
    let first = Client::install_with(InitArgs::default(), Settings::default());
    let mut first = first;
    first.create_user("alice");
    let old: Vec<Ticket> = (0..3)
        .map(|i| first.submit_order(1, i as f64).unwrap())
        .collect();
    let installed_at = Settings::default().time_ns;
    assert_eq!(old, [installed_at, installed_at + 1, installed_at + 2]);
    let mut again = Client::install_with(
        InitArgs::default(),
        Settings {
            time_ns: installed_at + SECOND,
            ..Settings::default()
        },
    );
    again.create_user("bob");
    let new = again.submit_order(1, 1.0).unwrap();
    assert_eq!(new, installed_at + SECOND);
    for t in old {
        assert_eq!(again.ticket(t), TicketStatus::Unknown);
    }
    // An upgrade keeps counting.
    again.upgrade(None);
    assert_eq!(again.submit_order(1, 2.0).unwrap(), new + 1);
}
