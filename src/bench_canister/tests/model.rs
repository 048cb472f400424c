//! A model-based random run of the canister on the offline engine: thousands of steps mixing
//! submits (valid, failing, too long and heavy), controller ops whose cost varies, PRAGMAs that
//! would change the connection, unbatched writes, client batches, flushes, timer ticks,
//! upgrades, periods of a read-only database and strangers (writing, reading others' tickets,
//! calling queries as updates), checked against a reference model: a native SQLite with the
//! same schema, where every op the canister executes is applied alone, in the order the
//! canister executed it (batch_core's batched execution must equal that), heavy ops fail with
//! `SQLITE_INTERRUPT`, writes during a read-only period fail with `SQLITE_READONLY`, and refused
//! calls change nothing.
//!
//! Checked: every ticket's final outcome, every row's values (amounts to the bit), zero lost
//! (every acknowledged op gets an outcome), zero altered, zero stuck (the queue drains), and no
//! op failed with a reason its own run does not show (every failure equals the reference's
//! failure of the op alone; nothing was removed by the watchdog; nothing trapped).
//! `MODEL_STEPS` and `MODEL_SEED` change the run (at least 5,000 steps).

use std::collections::VecDeque;

use batch_core::{Outcome, SqlValue, Statement, WriteOp, execute_autocommit};
use bench_api::schema::{
    DELETE_USER_ORDERS, INSERT_ORDER, INSERT_USER, SCHEMA, UPDATE_ORDER_AMOUNT,
};
use bench_api::*;
use bench_suite::client::{CONTROLLER, Client, STRANGER, SplitMix64};
use candid::Principal;
use offline_engine::MessageResult;

/// A registered writer.
const WRITER: &[u8] = &[0x77, 0x21];

/// An insert that only the instruction guard stops.
const ENDLESS_INSERT: &str = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) \
    INSERT INTO users (username, email) SELECT 'endless', 'endless@example.com' FROM c";

/// The flag PRAGMAs that used to take effect while reported as failed.
const PRAGMAS: [&str; 4] = [
    "PRAGMA foreign_keys = OFF",
    "PRAGMA foreign_keys = ON",
    "PRAGMA writable_schema = 1",
    "PRAGMA query_only = 1",
];

/// An insert of user `tag` after a recursive CTE of `1 + random() % 5000` rows (up to about
/// 24 M instructions, under a quarter of the run's budget: it always commits, whatever it
/// costs each time it runs).
fn varying(tag: u64) -> String {
    format!(
        "INSERT INTO users (username, email) SELECT 'varying', 'varying{tag}@example.com' WHERE \
         (SELECT count(*) FROM (WITH RECURSIVE n(v) AS MATERIALIZED (SELECT 1 + abs(random()) % 5000), \
         c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c, n WHERE x < n.v) SELECT x FROM c)) > 0"
    )
}

/// What a write fails with while the database is read-only.
fn read_only_failure() -> Outcome {
    Outcome::Failed(OpError {
        code: 8,
        message: "attempt to write a readonly database".into(),
    })
}

/// The run's random draws: SplitMix64 with the shapes the model needs.
struct Rng(SplitMix64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0.next_u64()
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn amount(&mut self) -> f64 {
        match self.below(10) {
            0 => f64::NAN,
            1 => f64::from_bits(self.next()),
            2 => -0.0,
            _ => (self.below(100_000) as f64) / 8.0 - 1_000.0,
        }
    }
}

/// What the model knows of one queued op.
struct Queued {
    ticket: Ticket,
    /// The op as the reference executes it; `None` for the heavy op.
    op: Option<WriteOp>,
}

struct Model {
    db: rusqlite::Connection,
    pending: VecDeque<Queued>,
    /// Expected final outcome per ticket, as known so far.
    outcomes: Vec<(Ticket, Outcome)>,
    users: i64,
    orders: i64,
    next_email: u64,
}

fn write_op(op: &UserOrderOp) -> WriteOp {
    let (sql, params) = match op {
        UserOrderOp::CreateUser { username, email } => (
            INSERT_USER,
            vec![
                SqlValue::from(username.as_str()),
                SqlValue::from(email.as_str()),
            ],
        ),
        UserOrderOp::CreateOrder { user_id, amount } => {
            (INSERT_ORDER, vec![(*user_id).into(), (*amount).into()])
        }
        UserOrderOp::UpdateOrderAmount { order_id, amount } => (
            UPDATE_ORDER_AMOUNT,
            vec![(*order_id).into(), (*amount).into()],
        ),
        UserOrderOp::DeleteUserOrders { user_id } => (DELETE_USER_ORDERS, vec![(*user_id).into()]),
    };
    WriteOp::Single(Statement::new(sql, params))
}

fn outcome_of(status: &TicketStatus) -> Option<Outcome> {
    match status {
        TicketStatus::Committed {
            rows_changed,
            last_insert_rowid,
        } => Some(Outcome::Committed {
            rows_changed: *rows_changed,
            last_insert_rowid: *last_insert_rowid,
        }),
        TicketStatus::Failed(e) => Some(Outcome::Failed(e.clone())),
        _ => None,
    }
}

impl Model {
    fn new() -> Model {
        let db = rusqlite::Connection::open_in_memory().unwrap();
        // ic-rusqlite's SQLite enforces foreign keys.
        db.execute_batch("PRAGMA foreign_keys = ON;").unwrap();
        db.execute_batch(SCHEMA).unwrap();
        Model {
            db,
            pending: VecDeque::new(),
            outcomes: Vec::new(),
            users: 0,
            orders: 0,
            next_email: 0,
        }
    }

    fn random_op(&mut self, rng: &mut Rng) -> UserOrderOp {
        match rng.below(20) {
            0..=1 => {
                self.next_email += 1;
                UserOrderOp::CreateUser {
                    username: format!("user {} \u{1F980}", self.next_email),
                    email: format!("m{}@example.com", self.next_email),
                }
            }
            2..=11 => UserOrderOp::CreateOrder {
                user_id: rng.below(self.users as u64 + 3) as i64,
                amount: rng.amount(),
            },
            12..=17 => UserOrderOp::UpdateOrderAmount {
                order_id: rng.below(self.orders as u64 + 3) as i64,
                amount: rng.amount(),
            },
            _ => UserOrderOp::DeleteUserOrders {
                user_id: rng.below(self.users as u64 + 2) as i64,
            },
        }
    }

    /// Applies `op` alone to the reference and notes its effect on the id ranges.
    fn apply(&mut self, op: &WriteOp) -> Outcome {
        let outcome = execute_autocommit(&self.db, op);
        if let (
            Outcome::Committed {
                last_insert_rowid, ..
            },
            WriteOp::Single(s),
        ) = (&outcome, op)
        {
            if s.sql == INSERT_USER {
                self.users = self.users.max(*last_insert_rowid);
            } else if s.sql == INSERT_ORDER {
                self.orders = self.orders.max(*last_insert_rowid);
            }
        }
        outcome
    }
}

/// After a step: the queued ops the canister executed since the last sync (those before its
/// first pending ticket) are applied to the reference in order, and their outcomes checked.
fn sync(c: &mut Client, model: &mut Model) {
    let stats = c.stats();
    let pending = stats.pending as usize;
    assert!(pending <= model.pending.len(), "{stats:?}");
    let executed = model.pending.len() - pending;
    for _ in 0..executed {
        let q = model.pending.pop_front().unwrap();
        let expected = match &q.op {
            Some(op) => model.apply(op),
            None => Outcome::Failed(OpError { code: 9, message: "interrupted: the op was still running after 200000000 instructions, alone at the start of a flush (2 × flush_instruction_budget), and was rolled back".into() }),
        };
        let actual = outcome_of(&c.ticket(q.ticket))
            .unwrap_or_else(|| panic!("ticket {} executed but has no outcome", q.ticket));
        assert_eq!(actual, expected, "ticket {}", q.ticket);
        model.outcomes.push((q.ticket, expected));
    }
    if let Some(first) = model.pending.front() {
        assert_eq!(c.ticket(first.ticket), TicketStatus::Pending);
    }
    assert_eq!(stats.timer_armed, pending > 0, "{stats:?}");
}

/// Every row of the canister equals the reference (amounts to the bit).
fn compare_rows(c: &mut Client, model: &Model) {
    let mut reference_users: Vec<(i64, String, String)> = model
        .db
        .prepare("SELECT user_id, username, email FROM users ORDER BY user_id")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let mut users: Vec<(i64, String, String)> =
        Result::from(c.query::<UsersResult, _>("users_by_email_prefix", ("", 1_000u32)))
            .unwrap()
            .into_iter()
            .map(|u| (u.user_id, u.username, u.email))
            .collect();
    assert!(
        users.len() < 1_000,
        "the comparison reads at most 1,000 users"
    );
    users.sort();
    reference_users.sort();
    assert_eq!(users, reference_users);
    let reference_orders: Vec<(i64, i64, u64)> = model
        .db
        .prepare("SELECT order_id, user_id, amount FROM orders ORDER BY order_id")
        .unwrap()
        .query_map([], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get::<_, f64>(2)?.to_bits()))
        })
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let mut orders: Vec<(i64, i64, u64)> = Vec::new();
    for user_id in 0..=model.users {
        orders.extend(
            c.orders_of(user_id)
                .into_iter()
                .map(|o| (o.order_id, o.user_id, o.amount.to_bits())),
        );
    }
    orders.sort();
    assert_eq!(orders, reference_orders);
}

fn refused(exec: &offline_engine::Execution) -> bool {
    matches!(exec.result, MessageResult::Reject(4, _)) && exec.entry == "canister_inspect_message"
}

#[test]
fn random_run_matches_the_reference_model() {
    let steps: usize = std::env::var("MODEL_STEPS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
        .max(5_000);
    let seed: u64 = std::env::var("MODEL_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(8);
    let mut rng = Rng(SplitMix64(seed));
    let mut c = Client::install(InitArgs {
        flush_size: Some(25),
        max_delay_ms: Some(1_000),
        max_pending: Some(10_000),
        outcome_capacity: Some(50_000),
        flush_instruction_budget: Some(100_000_000),
        ..Default::default()
    });
    let r: AdminResult = c.update("add_writers", (vec![Principal::from_slice(WRITER)],));
    assert_eq!(r, AdminResult::Ok(()));
    let mut model = Model::new();
    let mut acknowledged = 0usize;
    let mut refusals = 0usize;
    let mut read_only_periods = 0usize;
    let mut refused_pragmas = 0usize;
    let mut varying_ops = 0usize;

    for step in 0..steps {
        match rng.below(100) {
            // A queued write by the writer (sometimes too long: refused, nothing queued).
            0..=44 => {
                let op = model.random_op(&mut rng);
                let too_long = rng.below(50) == 0;
                let (method, result): (&str, SubmitResult) = match &op {
                    UserOrderOp::CreateUser { email, .. } if too_long => (
                        "submit_create_user",
                        c.submit_as(WRITER, "submit_create_user", ("x".repeat(101), email)),
                    ),
                    UserOrderOp::CreateUser { username, email } => (
                        "submit_create_user",
                        c.submit_as(WRITER, "submit_create_user", (username, email)),
                    ),
                    UserOrderOp::CreateOrder { user_id, amount } => (
                        "submit_create_order",
                        c.submit_as(WRITER, "submit_create_order", (*user_id, *amount)),
                    ),
                    UserOrderOp::UpdateOrderAmount { order_id, amount } => (
                        "submit_update_order_amount",
                        c.submit_as(WRITER, "submit_update_order_amount", (*order_id, *amount)),
                    ),
                    UserOrderOp::DeleteUserOrders { user_id } => (
                        "submit_delete_user_orders",
                        c.submit_as(WRITER, "submit_delete_user_orders", (*user_id,)),
                    ),
                };
                match Result::from(result) {
                    Ok(ticket) => {
                        assert!(!(too_long && method == "submit_create_user"));
                        acknowledged += 1;
                        model.pending.push_back(Queued {
                            ticket,
                            op: Some(write_op(&op)),
                        });
                    }
                    Err(WriteError::Invalid(_)) if too_long && method == "submit_create_user" => {}
                    Err(e) => panic!("step {step}: {method}: {e:?}"),
                }
            }
            // An op of varying cost by the controller: it always commits.
            46 => {
                varying_ops += 1;
                let sql = varying(rng.next());
                let ticket = c.submit_sql(&sql);
                acknowledged += 1;
                model.pending.push_back(Queued {
                    ticket,
                    op: Some(WriteOp::single(sql, vec![])),
                });
            }
            // A heavy op by the controller.
            45 => {
                let statement = SqlStatement {
                    sql: ENDLESS_INSERT.into(),
                    params: vec![],
                };
                let r: SubmitResult = c.update("submit_sql", (vec![statement],));
                let ticket = Result::from(r).expect("queued");
                acknowledged += 1;
                model.pending.push_back(Queued { ticket, op: None });
            }
            // An unbatched write, executed now.
            47..=61 => {
                let op = model.random_op(&mut rng);
                let result: WriteResult = match &op {
                    UserOrderOp::CreateUser { username, email } => {
                        c.write_as(WRITER, "create_user", (username, email))
                    }
                    UserOrderOp::CreateOrder { user_id, amount } => {
                        c.write_as(WRITER, "create_order", (*user_id, *amount))
                    }
                    UserOrderOp::UpdateOrderAmount { order_id, amount } => {
                        c.write_as(WRITER, "update_order_amount", (*order_id, *amount))
                    }
                    UserOrderOp::DeleteUserOrders { user_id } => {
                        c.write_as(WRITER, "delete_user_orders", (*user_id,))
                    }
                };
                let actual = Result::from(result).expect("executed");
                assert_eq!(actual, model.apply(&write_op(&op)), "step {step}: {op:?}");
            }
            // A client batch.
            62..=69 => {
                let ops: Vec<UserOrderOp> = (0..1 + rng.below(8))
                    .map(|_| model.random_op(&mut rng))
                    .collect();
                // As Candid or packed (`execute_batch_packed`): the same outcomes.
                let outcomes = if rng.below(2) == 0 {
                    let r: BatchResult = c.update_as(WRITER, "execute_batch", (ops.clone(),));
                    Result::from(r).expect("executed")
                } else {
                    let packed = serde_bytes::ByteBuf::from(bench_api::packed::encode_ops(&ops));
                    let r: PackedResult = c.update_as(WRITER, "execute_batch_packed", (packed,));
                    let PackedResult::Ok(r) = r else {
                        panic!("step {step}: refused: {r:?}")
                    };
                    bench_api::packed::decode_outcomes(&r, ops.len()).expect("a packed reply")
                };
                assert_eq!(outcomes.len(), ops.len(), "step {step}");
                for (op, actual) in ops.iter().zip(&outcomes) {
                    assert_eq!(
                        actual.clone(),
                        model.apply(&write_op(op)),
                        "step {step}: {op:?}"
                    );
                }
            }
            70..=77 => {
                let r: FlushResult = c.update_as(WRITER, "flush", ());
                Result::from(r).expect("flushed");
            }
            78..=89 => {
                c.tick(1_000_000_000);
            }
            90 => {
                let upgrade = c.upgrade(None);
                assert!(
                    !upgrade.result.is_trap(),
                    "step {step}: {:?}",
                    upgrade.result
                );
            }
            // A PRAGMA that would change the connection, by the controller: refused (the
            // reference, batch_core natively, refuses it alike), and nothing changes.
            91 if rng.below(2) == 0 => {
                refused_pragmas += 1;
                let pragma = PRAGMAS[rng.below(4) as usize];
                let op = WriteOp::single(pragma, vec![]);
                if rng.below(2) == 0 {
                    let statement = SqlStatement {
                        sql: pragma.into(),
                        params: vec![],
                    };
                    let r: WriteResult = c.update("execute_sql", (vec![statement],));
                    let actual = Result::from(r).expect("executed");
                    let expected = model.apply(&op);
                    assert_eq!(expected.code(), Some(23), "step {step}: {expected:?}");
                    assert_eq!(actual, expected, "step {step}: {pragma}");
                } else {
                    let ticket = c.submit_sql(pragma);
                    acknowledged += 1;
                    model.pending.push_back(Queued {
                        ticket,
                        op: Some(op),
                    });
                }
            }
            // A period of a read-only database: queued ops wait (no flush fails any), writes
            // executed now fail with SQLite's reason, submits are still accepted.
            91 => {
                read_only_periods += 1;
                let r: AdminResult = c.update("set_read_only", (true,));
                assert_eq!(r, AdminResult::Ok(()));
                for _ in 0..1 + rng.below(3) {
                    let op = model.random_op(&mut rng);
                    let result: WriteResult = match &op {
                        UserOrderOp::CreateUser { username, email } => {
                            c.write_as(WRITER, "create_user", (username, email))
                        }
                        UserOrderOp::CreateOrder { user_id, amount } => {
                            c.write_as(WRITER, "create_order", (*user_id, *amount))
                        }
                        UserOrderOp::UpdateOrderAmount { order_id, amount } => {
                            c.write_as(WRITER, "update_order_amount", (*order_id, *amount))
                        }
                        UserOrderOp::DeleteUserOrders { user_id } => {
                            c.write_as(WRITER, "delete_user_orders", (*user_id,))
                        }
                    };
                    let actual = Result::from(result).expect("executed");
                    assert_eq!(actual, read_only_failure(), "step {step}: {op:?}");
                    let op = model.random_op(&mut rng);
                    if let UserOrderOp::CreateOrder { user_id, amount } = op {
                        let r = c.submit_as(WRITER, "submit_create_order", (user_id, amount));
                        let ticket = Result::from(r).expect("accepted while read-only");
                        acknowledged += 1;
                        model.pending.push_back(Queued {
                            ticket,
                            op: Some(write_op(&op)),
                        });
                    }
                    c.tick(1_000_000_000);
                    sync(&mut c, &mut model);
                }
                let stats = c.stats();
                if stats.pending > 0 {
                    assert!(
                        stats
                            .alarm
                            .as_deref()
                            .is_some_and(|a| a
                                .contains("BEGIN failed: attempt to write a readonly database")),
                        "step {step}: {stats:?}"
                    );
                }
                let r: AdminResult = c.update("set_read_only", (false,));
                assert_eq!(r, AdminResult::Ok(()));
            }
            // Strangers: refused before the canister pays, nothing changes; they cannot read
            // others' tickets.
            _ => {
                if let Some((ticket, _)) = model.outcomes.last() {
                    assert_eq!(c.ticket_as(STRANGER, *ticket), TicketStatus::NotYours);
                }
                let exec = match rng.below(6) {
                    4 => c.raw_update(STRANGER, "stats", ()),
                    5 => c.raw_update(STRANGER, "user_orders", (i64::MAX, u32::MAX)),
                    0 => c.raw_update(STRANGER, "submit_create_order", (1i64, 1.0f64)),
                    1 => c.raw_update(STRANGER, "flush", ()),
                    2 => c.raw_update(
                        STRANGER,
                        "execute_batch_packed",
                        (serde_bytes::ByteBuf::from(bench_api::packed::encode_ops(
                            &[UserOrderOp::DeleteUserOrders { user_id: 1 }],
                        )),),
                    ),
                    _ => c.raw_update(
                        STRANGER,
                        "execute_batch",
                        (vec![UserOrderOp::DeleteUserOrders { user_id: 1 }],),
                    ),
                };
                assert!(refused(&exec), "step {step}: {:?}", exec.result);
                refusals += 1;
            }
        }
        sync(&mut c, &mut model);
        if step % 1_000 == 999 {
            compare_rows(&mut c, &model);
        }
    }

    // Drain: the queue empties in a bounded number of timer runs (nothing is stuck).
    for _ in 0..100 {
        if model.pending.is_empty() {
            break;
        }
        c.tick(1_000_000_000);
        sync(&mut c, &mut model);
    }
    assert!(
        model.pending.is_empty(),
        "stuck: {} ops",
        model.pending.len()
    );
    compare_rows(&mut c, &model);

    // Zero lost: every acknowledged op has exactly the outcome the model expects.
    assert_eq!(model.outcomes.len(), acknowledged);
    for (ticket, expected) in &model.outcomes {
        assert_eq!(
            outcome_of(&c.ticket(*ticket)).as_ref(),
            Some(expected),
            "ticket {ticket}"
        );
    }
    let stats = c.stats();
    let committed = model
        .outcomes
        .iter()
        .filter(|(_, o)| o.is_committed())
        .count();
    assert_eq!(
        (
            stats.submitted,
            stats.committed,
            stats.failed,
            stats.pending
        ),
        (
            acknowledged as u64,
            committed as u64,
            (acknowledged - committed) as u64,
            0
        )
    );
    assert!(c.traps().is_empty(), "{:?}", c.traps());
    // No op failed with a reason its own run does not show: every failure above equals the
    // reference's failure of the op alone, and none is the watchdog's removal.
    let removed = model
        .outcomes
        .iter()
        .filter(|(_, o)| o.code() == Some(4))
        .count();
    assert_eq!(removed, 0);
    // The run exercised what it claims to.
    let interrupted = model
        .outcomes
        .iter()
        .filter(|(_, o)| o.code() == Some(9))
        .count();
    assert!(interrupted > 0 && refusals > 0 && committed > 0);
    assert!(read_only_periods > 0 && refused_pragmas > 0 && varying_ops > 0);
    let refused_in_queue = model
        .outcomes
        .iter()
        .filter(|(_, o)| o.code() == Some(23))
        .count();
    assert!(refused_in_queue > 0, "a queued PRAGMA was refused");
    assert!(
        acknowledged - committed > interrupted,
        "failures besides interrupts"
    );
    println!(
        "model run: {steps} steps, {acknowledged} acknowledged ({committed} committed, {interrupted} interrupted, {refused_in_queue} refused PRAGMAs), {refusals} stranger calls refused, {read_only_periods} read-only periods, {varying_ops} varying-cost ops, 0 lost, 0 altered, 0 stuck, 0 failed without a cause of their own"
    );
}

#[test]
fn the_model_catches_a_difference() {
    // The comparison is not vacuous: a row the reference does not have is found.
    let mut c = Client::install(InitArgs::default());
    let model = Model::new();
    c.create_user("only in the canister");
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        compare_rows(&mut c, &model);
    }));
    assert!(caught.is_err());
    let _ = CONTROLLER;
}
