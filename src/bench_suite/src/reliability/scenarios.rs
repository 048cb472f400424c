//! The scenarios that try to stop, alter or empty the queue: a heavy op, a heavy delete built by
//! a stranger, ops that make every flush trap, upgrades with thousands of pending ops, a full
//! queue, a failing `COMMIT`, PRAGMAs, a read-only database, ops of varying cost, a stranger's
//! flood, strangers and queries called as updates, the smallest budget. One row of [`SCENARIOS`]
//! each, in the order of the table; each `act` does what the description says and checks what
//! must hold along the way.

use anyhow::{Result, ensure};
use bench_api::schema;
use bench_api::*;

use super::{
    ENDLESS_INSERT, LARGE_BUDGET, Lab, Ledger, Notes, PLAIN, PRAGMAS, SECOND, STRANGER, Scenario,
    Setup, UNINTERRUPTIBLE, VARYING, WRITER, amount, args, install_refused, read_only, refused_now,
    stalled, upgrade, varying_cost,
};
use crate::client::{CONTROLLER, Client};

/// One trapping op's scenarios: a budget of 100 M and a message limit of 1 B.
const TRAPPING: Setup = Setup {
    args: || args(100_000_000),
    message_limit: Some(1_000_000_000),
    ..PLAIN
};

/// The scenarios, in the order of the table.
pub(super) const SCENARIOS: [Scenario; 15] = [
    Scenario {
        name: "heavy op",
        description: "200 orders around a controller's endless insert (flush budget 100 M: interrupted at 200 M)",
        step: "heavy op among 200 writes",
        setup: Setup {
            args: || args(100_000_000),
            ..PLAIN
        },
        act: heavy_op,
    },
    Scenario {
        name: "stranger's heavy delete",
        description: "open mode: 20,000 orders of one user, then their delete among 100 other orders (the smallest budget, 20 M)",
        step: "heavy delete built by a stranger",
        setup: Setup {
            args: || InitArgs {
                write_access: Some(WriteAccess::Open),
                ..args(MIN_FLUSH_BUDGET)
            },
            users: &[],
            ..PLAIN
        },
        act: strangers_heavy_delete,
    },
    Scenario {
        name: "trapping op",
        description: "100 orders around one SQLite operation longer than the message limit (1 B here): the watchdog removes it",
        step: "an op that makes every flush trap",
        setup: TRAPPING,
        act: trapping_op,
    },
    Scenario {
        name: "trapping op at the tail",
        description: "1,000 orders, one SQLite operation longer than the message limit (1 B), then 300 more submitted during the stall (flush size 100)",
        step: "a trapping op at the tail of 1,000, submits going on",
        setup: Setup {
            args: || InitArgs {
                flush_size: Some(100),
                ..args(100_000_000)
            },
            writer: true,
            ..TRAPPING
        },
        act: trapping_op_at_the_tail,
    },
    Scenario {
        name: "three trapping ops",
        description: "200 orders with three SQLite operations longer than the message limit (1 B) among them (flush size 50)",
        step: "three trapping ops among 200",
        setup: Setup {
            args: || InitArgs {
                flush_size: Some(50),
                ..args(100_000_000)
            },
            writer: true,
            ..TRAPPING
        },
        act: three_trapping_ops,
    },
    Scenario {
        name: "upgrades",
        description: "10,000 pending orders (±inf, −0.0, subnormals, extremes) and a heavy op through three upgrades",
        step: "three upgrades with 10,000 pending ops",
        setup: PLAIN,
        act: upgrades,
    },
    Scenario {
        name: "full queue",
        description: "300 orders into a queue that holds 100 (in bytes): 200 refused with QueueBytesFull, never acknowledged",
        step: "a full queue",
        setup: Setup {
            args: || InitArgs {
                max_pending_bytes: Some(100 * (schema::INSERT_ORDER.len() as u64 + 16 + 8 + 8)),
                ..args(LARGE_BUDGET)
            },
            ..PLAIN
        },
        act: full_queue,
    },
    Scenario {
        name: "failing COMMIT",
        description: "200 orders around an insert that violates a deferred foreign key: flushes halve until it fails alone",
        step: "a COMMIT that one op makes fail",
        setup: PLAIN,
        act: failing_commit,
    },
    Scenario {
        name: "PRAGMAs",
        description: "foreign_keys = OFF, = ON, writable_schema = 1, query_only = 1, each executed and queued among 50 orders: refused (code 23); an order of a missing user still fails (787)",
        step: "PRAGMAs that would change the connection",
        setup: PLAIN,
        act: pragmas,
    },
    Scenario {
        name: "read-only database",
        description: "200 orders, read-only for 60 timer periods while the last 100 arrive: every flush fails at BEGIN, no op fails; all commit once writable",
        step: "a read-only database for 60 periods",
        setup: PLAIN,
        act: read_only_database,
    },
    Scenario {
        name: "varying cost",
        description: "240 controller inserts costing 0 to 1.3 budgets at random, at the largest budget for a 200 M message limit (53 M): re-application keeps the flush's deadline",
        step: "ops of varying cost at the largest budget",
        setup: VARYING,
        act: |_, c, l| {
            varying_cost(c, l);
            Ok(Notes::new())
        },
    },
    Scenario {
        name: "stranger's flood",
        description: "open mode, 1,000 outcomes kept: 10 orders by a writer, then 10,000 no-op submits by a stranger; the writer's outcomes stay, the stranger's evicted ones still say they committed",
        step: "a stranger floods an open canister",
        setup: Setup {
            args: || InitArgs {
                write_access: Some(WriteAccess::Open),
                flush_size: Some(100),
                max_pending: Some(1_000),
                outcome_capacity: Some(1_000),
                ..args(LARGE_BUDGET)
            },
            ..PLAIN
        },
        act: strangers_flood,
    },
    Scenario {
        name: "strangers",
        description: "1,000 writes by a stranger (restricted mode), then 100 by the controller",
        step: "strangers",
        setup: PLAIN,
        act: strangers,
    },
    Scenario {
        name: "queries as updates",
        description: "100 query calls by a stranger as updates (user_orders of everything among them): refused before they run, nothing billed",
        step: "queries called as updates",
        setup: PLAIN,
        act: queries_as_updates,
    },
    Scenario {
        name: "smallest budget",
        description: "300 ordinary ops at the smallest budget (20 M), each hundred first after an upgrade; one less is refused at install",
        step: "the smallest budget",
        setup: Setup {
            args: || InitArgs {
                flush_size: Some(100),
                max_pending: Some(1_000),
                outcome_capacity: Some(1_000),
                ..args(MIN_FLUSH_BUDGET)
            },
            users: &["u0", "u1", "u2", "u3", "u4", "u5", "u6", "u7", "u8", "u9"],
            ..PLAIN
        },
        act: smallest_budget,
    },
];

fn heavy_op(_: &Lab, c: &mut Client, l: &mut Ledger) -> Result<Notes> {
    l.orders(c, 0..100);
    l.sql(c, ENDLESS_INSERT);
    l.orders(c, 100..200);
    Ok(Notes::new())
}

fn strangers_heavy_delete(_: &Lab, c: &mut Client, l: &mut Ledger) -> Result<Notes> {
    let _ = c.write_as(STRANGER, "create_user", ("target", "t@example.com"));
    let _ = c.write_as(STRANGER, "create_user", ("other", "o@example.com"));
    for _ in 0..200 {
        let ops = vec![
            UserOrderOp::CreateOrder {
                user_id: 1,
                amount: 1.0
            };
            100
        ];
        let r: BatchResult = c.update_as(STRANGER, "execute_batch", (ops,));
        ensure!(Result::from(r).is_ok(), "a client batch was refused");
    }
    l.orders_as(c, STRANGER, 2, 0..50);
    l.other(c, STRANGER, "submit_delete_user_orders", 1, true);
    l.orders_as(c, STRANGER, 2, 50..100);
    Ok(Notes::new())
}

fn trapping_op(_: &Lab, c: &mut Client, l: &mut Ledger) -> Result<Notes> {
    l.orders(c, 0..50);
    l.sql(c, UNINTERRUPTIBLE);
    l.orders(c, 50..100);
    Ok(Notes::new())
}

fn trapping_op_at_the_tail(_: &Lab, c: &mut Client, l: &mut Ledger) -> Result<Notes> {
    l.orders_as(c, WRITER, 1, 0..1_000);
    l.sql(c, UNINTERRUPTIBLE);
    for i in 1_000..1_300 {
        l.order(c, WRITER, 1, amount(i));
        if i % 50 == 0 {
            c.tick(SECOND);
        }
    }
    Ok(Notes::new())
}

fn three_trapping_ops(_: &Lab, c: &mut Client, l: &mut Ledger) -> Result<Notes> {
    for i in 0..200 {
        if i == 40 || i == 110 || i == 170 {
            l.sql(c, UNINTERRUPTIBLE);
        }
        l.order(c, WRITER, 1, amount(i));
    }
    Ok(Notes::new())
}

fn upgrades(_: &Lab, c: &mut Client, l: &mut Ledger) -> Result<Notes> {
    l.orders(c, 0..10_000);
    l.sql(c, ENDLESS_INSERT);
    for _ in 0..3 {
        upgrade(c)?;
    }
    Ok(Notes::new())
}

fn full_queue(_: &Lab, c: &mut Client, l: &mut Ledger) -> Result<Notes> {
    l.orders(c, 0..300);
    ensure!(l.refused == 200, "{} submits refused", l.refused);
    Ok(Notes::new())
}

fn failing_commit(_: &Lab, c: &mut Client, l: &mut Ledger) -> Result<Notes> {
    super::controller_sql(
        c,
        "CREATE TABLE deferred (user_id INTEGER REFERENCES users(user_id) \
         DEFERRABLE INITIALLY DEFERRED)",
    )?;
    l.orders(c, 0..100);
    l.sql(c, "INSERT INTO deferred VALUES (42)");
    l.orders(c, 100..200);
    Ok(Notes::new())
}

fn pragmas(_: &Lab, c: &mut Client, l: &mut Ledger) -> Result<Notes> {
    for (i, pragma) in PRAGMAS.iter().enumerate() {
        // Executed now and queued: refused both ways, nothing happens.
        ensure!(refused_now(c, pragma)?, "{pragma} was not refused");
        l.sql(c, pragma);
        l.orders(c, 50 * i..50 * i + 50);
        // An order of a missing user: it fails for its own cause (787) only if foreign keys
        // are still on.
        l.other(c, CONTROLLER, "submit_delete_user_orders", 99, false);
        let ticket = l.unchecked_order(c, 99)?;
        l.culprits.insert(ticket);
        c.tick(SECOND);
        ensure!(
            matches!(
                c.ticket(ticket),
                TicketStatus::Failed(OpError { code: 787, .. })
            ),
            "after {pragma}, an order of a missing user: {:?}",
            c.ticket(ticket)
        );
    }
    Ok(Notes::new())
}

fn read_only_database(_: &Lab, c: &mut Client, l: &mut Ledger) -> Result<Notes> {
    l.orders(c, 0..100);
    read_only(c, true)?;
    for i in 100..200 {
        l.order(c, CONTROLLER, 1, amount(i));
        if i % 2 == 0 {
            c.tick(SECOND);
        }
    }
    for _ in 0..10 {
        c.tick(SECOND);
    }
    stalled(c, 200, "while read-only")?;
    read_only(c, false)?;
    Ok(Notes::new())
}

fn strangers_flood(_: &Lab, c: &mut Client, l: &mut Ledger) -> Result<Notes> {
    l.orders_as(c, WRITER, 1, 0..10);
    let victims = l.tickets.clone();
    c.tick(SECOND);
    for _ in 0..10_000 {
        l.other(c, STRANGER, "submit_delete_user_orders", 999_999, false);
    }
    for t in &victims {
        ensure!(
            matches!(c.ticket_as(WRITER, *t), TicketStatus::Committed { .. }),
            "the victim's ticket {t}: {:?}",
            c.ticket_as(WRITER, *t)
        );
        ensure!(
            c.ticket_as(STRANGER, *t) == TicketStatus::NotYours,
            "a stranger read ticket {t}"
        );
    }
    Ok(Notes::new())
}

fn strangers(_: &Lab, c: &mut Client, l: &mut Ledger) -> Result<Notes> {
    for i in 0..1_000 {
        let exec = c.raw_update(STRANGER, "submit_create_order", (1i64, amount(i)));
        ensure!(exec.result.reply().is_none(), "a stranger was let in");
        l.refused += 1;
    }
    l.orders(c, 0..100);
    Ok(Notes::new())
}

fn queries_as_updates(_: &Lab, c: &mut Client, l: &mut Ledger) -> Result<Notes> {
    for i in 0..100 {
        let method = [
            "user_orders",
            "ticket_status",
            "ticket_statuses",
            "stats",
            "counts",
        ][i % 5];
        let exec = c.raw_update(STRANGER, method, (i64::MAX, u32::MAX));
        ensure!(
            exec.entry == "canister_inspect_message" && exec.billed_instructions == 0,
            "{method} as an update ran: {:?}",
            exec.result
        );
        l.refused += 1;
    }
    l.orders(c, 0..100);
    Ok(Notes::new())
}

fn smallest_budget(lab: &Lab, c: &mut Client, l: &mut Ledger) -> Result<Notes> {
    for round in 0..3 {
        upgrade(c)?;
        for i in 0..100 {
            let n = 100 * round + i;
            // Orders of users 1-5 are kept and checked; users 6-10 get orders that are deleted.
            let (kept, deleted) = ((n % 5 + 1) as i64, (n % 5 + 6) as i64);
            match i % 4 {
                0 => l.order(c, CONTROLLER, kept, amount(n)),
                1 => {
                    l.unchecked_order(c, deleted)?;
                }
                2 => l.other(c, CONTROLLER, "submit_delete_user_orders", deleted, false),
                _ => l.ordinary_sql(
                    c,
                    &format!("UPDATE users SET username = 'u{n}' WHERE user_id = {kept}"),
                ),
            }
        }
    }
    ensure!(
        install_refused(lab, args(MIN_FLUSH_BUDGET - 1)),
        "a budget below the floor was accepted"
    );
    Ok(Notes::new())
}
