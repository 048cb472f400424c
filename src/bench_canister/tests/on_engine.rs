//! The deployable canister wasm on the offline engine: unbatched and batched writes, the timer
//! flush, the size trigger, error isolation, an upgrade with pending ops, settings, and the
//! committed `.did`. Build the wasm first with scripts/build.sh (scripts/test.sh does).

#[allow(dead_code)]
mod generic;

use bench_api::*;
use bench_suite::client::{CONTROLLER, Client};

#[test]
fn unbatched_write_commits_in_the_call() {
    let mut c = Client::install(InitArgs::default());
    assert_eq!(c.create_user("alice"), 1);
    let exec = c.raw_update(CONTROLLER, "create_order", (1i64, 9.5f64));
    let outcome: WriteResult = bench_suite::client::decode("create_order", &exec);
    assert_eq!(
        outcome,
        WriteResult::Ok(Outcome::Committed {
            rows_changed: 1,
            last_insert_rowid: 1
        })
    );
    assert!(exec.instructions > 10_000, "{}", exec.instructions);
    assert!(exec.billed_instructions >= exec.instructions);
    assert_eq!(
        c.counts(),
        Counts {
            users: 1,
            orders: 1
        }
    );
}

#[test]
fn batched_writes_are_flushed_by_the_timer_in_one_transaction() {
    let mut c = Client::install(InitArgs {
        flush_size: Some(1_000),
        max_delay_ms: Some(50),
        ..Default::default()
    });
    c.create_user("bob");
    let tickets: Vec<Ticket> = (0..20)
        .map(|i| c.submit_order(1, i as f64).unwrap())
        .collect();
    assert_eq!(c.ticket(tickets[0]), TicketStatus::Pending);
    assert_eq!(c.counts().orders, 0, "nothing is written before the flush");
    let s = c.stats();
    assert_eq!((s.pending, s.timer_armed), (20, true));

    let runs = c.tick(1_000_000_000);
    assert!(!runs.is_empty(), "the timer ran");
    assert_eq!(c.counts().orders, 20);
    let s = c.stats();
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
            c.ticket(*t),
            TicketStatus::Committed {
                rows_changed: 1,
                last_insert_rowid: i as i64 + 1
            }
        );
    }
    assert!(c.traps().is_empty());
}

#[test]
fn size_trigger_flushes_inside_the_submitting_call() {
    let mut c = Client::install(InitArgs {
        flush_size: Some(5),
        ..Default::default()
    });
    c.create_user("carol");
    for _ in 0..4 {
        c.submit_order(1, 1.0).unwrap();
        assert_eq!(c.stats().flushes, 0);
    }
    // The fifth fills the batch: it is flushed in the same call.
    let fifth = c.submit_order(1, 1.0).unwrap();
    let s = c.stats();
    assert_eq!(
        (s.flushes, s.last_flush_ops, s.committed, s.pending),
        (1, 5, 5, 0)
    );
    assert!(matches!(c.ticket(fifth), TicketStatus::Committed { .. }));
    assert_eq!(c.counts().orders, 5);
    assert!(!c.stats().timer_armed, "nothing pending, no timer");
}

#[test]
fn one_failing_op_does_not_undo_the_others() {
    let mut c = Client::install(InitArgs {
        flush_size: Some(100),
        ..Default::default()
    });
    // The precompiled SQLite of ic-rusqlite enforces foreign keys: orders need their user.
    c.create_user("erin");
    let good = c.submit_order(1, 1.0).unwrap();
    let no_user = c.submit_order(99, 1.0).unwrap();
    let nan = c.submit_order(1, f64::NAN).unwrap();
    let good2 = c.submit_order(1, 2.0).unwrap();
    let summary: FlushResult = c.update("flush", ());
    let summary = Result::from(summary).unwrap();
    assert_eq!(
        (summary.executed, summary.committed, summary.failed),
        (4, 2, 2)
    );
    assert!(matches!(c.ticket(good), TicketStatus::Committed { .. }));
    assert_eq!(
        c.ticket(no_user),
        TicketStatus::Failed(OpError {
            code: 787,
            message: "FOREIGN KEY constraint failed".into()
        })
    );
    // NaN is bound as NULL: the NOT NULL constraint refuses it.
    assert_eq!(
        c.ticket(nan),
        TicketStatus::Failed(OpError {
            code: 1299,
            message: "NOT NULL constraint failed: orders.amount".into()
        })
    );
    assert_eq!(
        c.ticket(good2),
        TicketStatus::Committed {
            rows_changed: 1,
            last_insert_rowid: 2
        }
    );
    assert_eq!(c.counts().orders, 2);
}

#[test]
fn pending_ops_survive_an_upgrade_and_are_flushed_after_it() {
    let args = InitArgs {
        flush_size: Some(1_000),
        ..Default::default()
    };
    let mut c = Client::install(args);
    c.create_user("dave");
    let tickets: Vec<Ticket> = (0..10)
        .map(|i| c.submit_order(1, i as f64).unwrap())
        .collect();
    let upgrade = c.upgrade(None);
    assert!(!upgrade.result.is_trap(), "{:?}", upgrade.result);
    // pre_upgrade does not flush: everything is still pending, and the timer is armed again.
    let s = c.stats();
    assert_eq!((s.pending, s.committed, s.timer_armed), (10, 0, true));
    c.tick(1_000_000_000);
    assert_eq!(
        c.counts(),
        Counts {
            users: 1,
            orders: 10
        }
    );
    for (i, t) in tickets.iter().enumerate() {
        assert_eq!(
            c.ticket(*t),
            TicketStatus::Committed {
                rows_changed: 1,
                last_insert_rowid: i as i64 + 1
            }
        );
    }
}

#[test]
fn data_survives_an_upgrade() {
    let mut c = Client::install(InitArgs::default());
    for name in ["u1", "u2", "u3"] {
        c.create_user(name);
    }
    c.upgrade(None);
    assert_eq!(c.counts().users, 3);
    assert_eq!(c.create_user("u4"), 4);
}

#[test]
fn settings_are_kept_across_upgrades_unless_given() {
    let mut c = Client::install(InitArgs {
        flush_size: Some(7),
        max_delay_ms: Some(3_000),
        max_pending: Some(70),
        max_pending_bytes: Some(1 << 20),
        flush_instruction_budget: Some(1_000_000_000),
        outcome_capacity: Some(90),
        coalesce_rows: Some(16),
        write_access: Some(WriteAccess::Open),
    });
    let installed = c.settings();
    assert_eq!(
        installed,
        bench_api::Settings {
            flush_size: 7,
            max_delay_ms: 3_000,
            max_pending: 70,
            max_pending_bytes: 1 << 20,
            flush_instruction_budget: 1_000_000_000,
            outcome_capacity: 90,
            coalesce_rows: 16,
            write_access: WriteAccess::Open,
            read_only: false,
        }
    );
    // No argument (what `dfx deploy` sends), then an argument with every field absent.
    c.upgrade(None);
    assert_eq!(c.settings(), installed);
    c.upgrade(Some(InitArgs::default()));
    assert_eq!(c.settings(), installed);
    // A field given replaces just that setting.
    c.upgrade(Some(InitArgs {
        max_pending: Some(80),
        ..Default::default()
    }));
    assert_eq!(
        c.settings(),
        bench_api::Settings {
            max_pending: 80,
            ..installed
        }
    );
}

#[test]
fn the_committed_did_matches_the_code() {
    let mut c = Client::install(InitArgs::default());
    let committed =
        generic::did_matches_the_code(&mut c.canister, "src/bench_canister/bench_canister.did");
    assert_eq!(committed, CANDID, "bench_api embeds the committed .did");
}

/// `execute_batch_packed` gives exactly the outcomes of `execute_batch` for the same ops on
/// the same state, committed, failed and changing nothing, with fewer ingress bytes and fewer
/// instructions; malformed bytes are refused whole.
#[test]
fn a_packed_batch_matches_the_candid_batch() {
    let ops = vec![
        UserOrderOp::CreateUser {
            username: "carol".into(),
            email: "carol@x".into(),
        },
        UserOrderOp::CreateOrder {
            user_id: 1,
            amount: -0.0,
        },
        // A missing user: the foreign key fails this op only.
        UserOrderOp::CreateOrder {
            user_id: 99,
            amount: 1.5,
        },
        // NaN is stored as NULL: NOT NULL fails.
        UserOrderOp::CreateOrder {
            user_id: 2,
            amount: f64::NAN,
        },
        UserOrderOp::UpdateOrderAmount {
            order_id: 1,
            amount: f64::MAX,
        },
        // No such order: committed, nothing changed.
        UserOrderOp::UpdateOrderAmount {
            order_id: 1_000,
            amount: 2.0,
        },
        UserOrderOp::DeleteUserOrders { user_id: 3 },
    ];
    let mut runs = Vec::new();
    for packed in [false, true] {
        let mut c = Client::install(InitArgs::default());
        c.create_user("alice");
        c.create_user("bob");
        let (exec, outcomes) = if packed {
            let arg = serde_bytes::ByteBuf::from(bench_api::packed::encode_ops(&ops));
            let exec = c.raw_update(CONTROLLER, "execute_batch_packed", (arg,));
            let reply: PackedResult = bench_suite::client::decode("execute_batch_packed", &exec);
            let PackedResult::Ok(reply) = reply else {
                panic!("refused: {reply:?}")
            };
            (
                exec,
                bench_api::packed::decode_outcomes(&reply, ops.len()).unwrap(),
            )
        } else {
            let exec = c.raw_update(CONTROLLER, "execute_batch", (ops.clone(),));
            let r: BatchResult = bench_suite::client::decode("execute_batch", &exec);
            (exec, Result::from(r).unwrap())
        };
        runs.push((exec, outcomes, c.counts(), c.orders_of(1)));
    }
    let (candid, packed) = (&runs[0], &runs[1]);
    assert_eq!(packed.1, candid.1);
    assert_eq!((&packed.2, &packed.3), (&candid.2, &candid.3));
    assert_eq!(candid.3.len(), 1);
    let committed = |o: &Outcome| matches!(o, Outcome::Committed { .. });
    assert_eq!(
        candid.1.iter().map(committed).collect::<Vec<_>>(),
        [true, true, false, false, true, true, true]
    );
    assert!(packed.0.instructions < candid.0.instructions);
    let arg_len = |ops: &[UserOrderOp], packed: bool| {
        if packed {
            candid::encode_one(serde_bytes::ByteBuf::from(bench_api::packed::encode_ops(
                ops,
            )))
        } else {
            candid::encode_one(ops)
        }
        .unwrap()
        .len()
    };
    assert!(arg_len(&ops, true) < arg_len(&ops, false));

    // Malformed: refused with the reason, nothing runs.
    let mut c = Client::install(InitArgs::default());
    c.create_user("alice");
    let mut bad = bench_api::packed::encode_ops(&ops[1..2]);
    bad.push(9);
    let exec = c.raw_update(
        CONTROLLER,
        "execute_batch_packed",
        (serde_bytes::ByteBuf::from(bad),),
    );
    let refused = bench_suite::client::replied_or_refused::<serde_bytes::ByteBuf>(
        "execute_batch_packed",
        &exec,
    );
    assert_eq!(
        refused.unwrap_err(),
        WriteError::Invalid("packed batch, byte 11: unknown op tag 9".into())
    );
    assert_eq!(
        c.counts(),
        Counts {
            users: 1,
            orders: 0
        }
    );
}
