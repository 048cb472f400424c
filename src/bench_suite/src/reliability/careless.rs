//! Scenarios of a careless controller and of an attacker on the reference canister: SQL that
//! would put acknowledged writes where an upgrade loses them (temporary objects by schema name,
//! virtual tables), controller SQL on the library's own tables (the keys that make client
//! batches exactly once), settings that would make every later submit trap, strangers' large
//! calls from other canisters (which `canister_inspect_message` never sees), the dearest
//! ordinary op of the workload at the smallest flush budget on a large table, a memory
//! allocation without headroom, and one writer filling the key store before its keys expire.
//! Each used to lose or duplicate acknowledged writes, fail an ordinary op, or cost its victim
//! what the attacker sent; each row must now show 0 lost, 0 altered, 0 applied twice and 0
//! failed without a cause of its own.

use anyhow::{Result, bail, ensure};
use bench_api::*;
use candid::{Encode, Principal};
use offline_engine::{Execution, MessageResult};

use super::budget_floor::{load_fixture, upgrade_to_floor};
use super::{
    LARGE_BUDGET, Lab, Ledger, Notes, PLAIN, SECOND, Scenario, Setup, WRITER, add_writer, amount,
    args, install_refused, refused_now, stalled, upgrade,
};
use crate::client::{CONTROLLER, Client};

/// Statements that create objects in the connection's `temp` schema, or virtual tables: the
/// first one shadows `orders`, so that, were it allowed, every later write would land in a
/// table that the next upgrade drops.
pub const TEMPORARY_OBJECTS: [&str; 6] = [
    "CREATE TABLE temp.orders (order_id INTEGER PRIMARY KEY AUTOINCREMENT, user_id INTEGER NOT NULL, \
     amount REAL NOT NULL, created_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP)",
    "CREATE TABLE \"temp\".shadow (x)",
    "CREATE VIEW temp.v AS SELECT 1",
    "CREATE TRIGGER temp.t AFTER INSERT ON main.orders BEGIN SELECT 1; END",
    "CREATE VIRTUAL TABLE temp.pages USING dbstat",
    "CREATE VIRTUAL TABLE pages USING dbstat",
];

/// Controller SQL on the library's own tables (the keys of exactly-once client batches).
pub const LIBRARY_TABLE_SQL: [&str; 4] = [
    "DELETE FROM batch_core_dedup_keys",
    "DROP TABLE batch_core_dedup_keys",
    "DELETE FROM batch_core_dedup_meta",
    "UPDATE batch_core_dedup_meta SET keys = 0, bytes = 0",
];

/// `max_delay_ms` values that used to install and then make every submit trap (ic-cdk-timers
/// refuses a delay that overflows its deadline) or keep an op pending for days.
pub const UNSAFE_DELAYS_MS: [u64; 3] = [16_700_000_000_000, 1_000_000_000_000, u64::MAX];

/// A canister that is neither a controller nor a writer.
const STRANGER_CANISTER: &[u8] = &[0x00, 0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x07, 0x01, 0x01];
/// Instructions a stranger's call from a canister may cost at most, whatever its size.
pub const STRANGER_CALL_BOUND: u64 = 100_000;
/// Bytes of a stranger's large argument (an ingress message may carry 2 MiB).
const LARGE: usize = 1_800_000;

/// A stranger's well-typed large argument for `method`: what the method would decode in full
/// if it read its argument before checking the caller.
fn large_argument(method: &str) -> Result<Vec<u8>> {
    let text = "x".repeat(LARGE);
    Ok(match method {
        "execute_batch" => {
            let ops: Vec<UserOrderOp> = (0..106_000)
                .map(|i| UserOrderOp::CreateOrder {
                    user_id: 1,
                    amount: f64::from(i),
                })
                .collect();
            Encode!(&ops, &None::<BatchKey>)?
        }
        "add_writers" => {
            let principals: Vec<Principal> = (0..60_000u32)
                .map(|i| Principal::from_slice(&[&i.to_be_bytes()[..], &[0xAA; 25]].concat()))
                .collect();
            Encode!(&principals)?
        }
        "execute_sql" => Encode!(&vec![SqlStatement {
            sql: text,
            params: vec![],
        }])?,
        "create_user" => Encode!(&text, &"e@example.com")?,
        // A query called as an update, asking for everything.
        "user_orders" => Encode!(&i64::MAX, &u32::MAX)?,
        other => bail!("no large argument for {other}"),
    })
}

/// The batch key `n` (16 bytes of it) created at `created_at_time`.
fn key(created_at_time: u64, n: u8) -> BatchKey {
    BatchKey {
        created_at_time,
        id: [n; 16],
    }
}

/// `n` orders of `user_id`, the amounts of `first` on.
fn order_ops(user_id: i64, n: usize, first: usize) -> Vec<UserOrderOp> {
    (first..first + n)
        .map(|i| UserOrderOp::CreateOrder {
            user_id,
            amount: amount(i),
        })
        .collect()
}

/// The scenarios, in the order of the table (after the queue's).
pub(super) const SCENARIOS: [Scenario; 7] = [
    Scenario {
        name: "temporary objects",
        description: "a controller's temp.orders, \"temp\".shadow, temp view, temp trigger and dbstat tables, each executed and queued before 30 orders, then an upgrade: refused (code 23), every order read back after the upgrade",
        step: "temporary objects and virtual tables",
        setup: PLAIN,
        act: temporary_objects,
    },
    Scenario {
        name: "library tables",
        description: "4 keyed batches, then a controller's DELETE/DROP/UPDATE of the key store, each executed and queued before 10 orders, an upgrade, the 4 batches resent and a new one: refused (code 23), the resent batches answered as duplicates",
        step: "controller SQL on the library's own tables",
        setup: Setup {
            writer: true,
            ..PLAIN
        },
        act: library_tables,
    },
    Scenario {
        name: "unsafe settings",
        description: "max_delay_ms of 1.67·10^13, 10^12 and u64::MAX at install: refused with the setting's name; then 100 orders",
        step: "settings that would make submits trap",
        setup: PLAIN,
        act: unsafe_settings,
    },
    Scenario {
        name: "strangers' calls from canisters",
        description: "20 calls of 1.8 MB by a canister that may not write (execute_batch of 106,000 orders, add_writers of 60,000 principals, execute_sql, create_user, user_orders(max, max) as an update; no inspect_message for calls from canisters): refused before their argument is read, the dearest for {dearest} instructions; then 100 orders",
        step: "strangers' large calls from other canisters",
        setup: PLAIN,
        act: strangers_calls_from_canisters,
    },
    Scenario {
        name: "dearest op at the floor",
        description: "20,000 users with 10 orders each, the smallest budget (20 M): 100 orders around 10 queued deletes of a user's orders, and 3 unbatched; each delete commits its 10 rows",
        step: "the dearest op at the smallest budget on 200,000 orders",
        setup: Setup {
            args: || InitArgs {
                flush_size: Some(100),
                ..args(LARGE_BUDGET)
            },
            users: &[],
            ..PLAIN
        },
        act: dearest_op_at_the_floor,
    },
    Scenario {
        name: "no memory headroom",
        description: "1,000 orders queued, then a memory allocation equal to the memory in use for 40 timer periods (every flush traps: the environment's fault, the probe tells): no op removed, stats answers; all commit once lifted",
        step: "a memory allocation without headroom",
        setup: Setup {
            args: || InitArgs {
                flush_size: Some(2_000),
                ..args(LARGE_BUDGET)
            },
            ..PLAIN
        },
        act: no_memory_headroom,
    },
    Scenario {
        name: "a writer fills the key store",
        description: "one writer records {recorded} batches of 10,000 failed ops (about 385 KB each) until StoreFull names its share, another writer's keyed batch still commits, 50 orders; after the window the store empties, the dearest timer message {dearest_timer} B instructions",
        step: "one writer fills its share of the key store",
        setup: Setup {
            writer: true,
            ..PLAIN
        },
        act: writer_fills_the_key_store,
    },
];

fn temporary_objects(_: &Lab, c: &mut Client, l: &mut Ledger) -> Result<Notes> {
    for (i, sql) in TEMPORARY_OBJECTS.iter().enumerate() {
        ensure!(refused_now(c, sql)?, "{sql} was not refused");
        l.sql(c, sql);
        l.orders(c, 30 * i..30 * i + 30);
        c.tick(SECOND);
    }
    // Committed orders in a temporary table would be gone now: `finish` reads them back.
    upgrade(c)?;
    Ok(Notes::new())
}

fn library_tables(_: &Lab, c: &mut Client, l: &mut Ledger) -> Result<Notes> {
    let now = c.canister.time();
    let batches: Vec<(BatchKey, Vec<UserOrderOp>)> = (0..4u8)
        .map(|n| (key(now, n + 1), order_ops(1, 5, 5 * n as usize)))
        .collect();
    let mut first = Vec::new();
    for (k, ops) in &batches {
        let r: BatchResult = c.update_as(WRITER, "execute_batch", (ops.clone(), Some(*k)));
        ensure!(matches!(r, BatchResult::Ok(_)), "a keyed batch: {r:?}");
        first.push(r.outcomes().map_err(|e| anyhow::anyhow!("{e:?}"))?);
    }
    for sql in LIBRARY_TABLE_SQL {
        ensure!(refused_now(c, sql)?, "{sql} was not refused");
        l.sql(c, sql);
        l.orders(c, 100..110);
        c.tick(SECOND);
    }
    upgrade(c)?;
    // Every batch resent: answered with its first outcomes, nothing applied again.
    for ((k, ops), outcomes) in batches.iter().zip(&first) {
        let r: BatchResult = c.update_as(WRITER, "execute_batch", (ops.clone(), Some(*k)));
        ensure!(
            r == BatchResult::Duplicate(outcomes.clone()),
            "a resent batch: {r:?}"
        );
    }
    // A new key still records.
    let r: BatchResult = c.update_as(
        WRITER,
        "execute_batch",
        (order_ops(1, 5, 20), Some(key(now, 9))),
    );
    ensure!(matches!(r, BatchResult::Ok(_)), "a new keyed batch: {r:?}");
    l.keyed(1, 5 * (batches.len() as u64 + 1));
    Ok(Notes::new())
}

fn unsafe_settings(lab: &Lab, c: &mut Client, l: &mut Ledger) -> Result<Notes> {
    let refused = UNSAFE_DELAYS_MS
        .iter()
        .filter(|&&delay| {
            install_refused(
                lab,
                InitArgs {
                    max_delay_ms: Some(delay),
                    ..args(LARGE_BUDGET)
                },
            )
        })
        .count();
    ensure!(
        refused == UNSAFE_DELAYS_MS.len(),
        "{refused} of {} unsafe max_delay_ms refused",
        UNSAFE_DELAYS_MS.len()
    );
    l.orders(c, 0..100);
    l.refused += refused as u64;
    Ok(Notes::new())
}

/// Whether a stranger canister's call to `method` was refused: rejected, or answered with a
/// write method's typed refusal (`Err(NotAuthorized)`), never a success.
fn refused_stranger(method: &str, exec: &Execution) -> Result<bool> {
    Ok(match &exec.result {
        MessageResult::Reply(bytes) => {
            let r: WriteResult =
                candid::decode_one(bytes).unwrap_or(WriteResult::Ok(Outcome::Committed {
                    rows_changed: 0,
                    last_insert_rowid: 0,
                }));
            r == WriteResult::Err(WriteError::NotAuthorized)
                || matches!(
                    candid::decode_one::<BatchResult>(bytes),
                    Ok(BatchResult::Err(WriteError::NotAuthorized))
                )
                || matches!(
                    candid::decode_one::<AdminResult>(bytes),
                    Ok(AdminResult::Err(WriteError::NotAuthorized))
                )
        }
        MessageResult::Reject(..) => true,
        other => bail!("{method} by a stranger canister: {other:?}"),
    })
}

fn strangers_calls_from_canisters(_: &Lab, c: &mut Client, l: &mut Ledger) -> Result<Notes> {
    let mut refused = 0u64;
    let mut dearest = 0u64;
    for method in [
        "execute_batch",
        "add_writers",
        "execute_sql",
        "create_user",
        "user_orders",
    ] {
        let arg = large_argument(method)?;
        for _ in 0..4 {
            let exec: Execution =
                c.canister
                    .update_from_canister(STRANGER_CANISTER, method, &arg)?;
            ensure!(
                refused_stranger(method, &exec)?,
                "{method} by a stranger canister was not refused: {:?}",
                exec.result
            );
            refused += 1;
            dearest = dearest.max(exec.instructions);
        }
    }
    ensure!(
        dearest < STRANGER_CALL_BOUND,
        "a stranger's call from a canister cost {dearest} instructions"
    );
    let counts = c.counts();
    ensure!(
        counts.users == 1 && counts.orders == 0,
        "a stranger's call changed the data: {counts:?}"
    );
    l.orders(c, 0..100);
    l.refused += refused;
    Ok(vec![("dearest", dearest.to_string())])
}

fn dearest_op_at_the_floor(_: &Lab, c: &mut Client, l: &mut Ledger) -> Result<Notes> {
    let users = 20_000;
    load_fixture(c, users, 10 * users)?;
    // The fixture was written at a large budget; the ops below run at the smallest.
    upgrade_to_floor(c)?;
    for u in 1..=10i64 {
        l.orders_as(
            c,
            CONTROLLER,
            users as i64,
            10 * u as usize..10 * u as usize + 10,
        );
        l.other(c, CONTROLLER, "submit_delete_user_orders", u, false);
    }
    for u in 11..=13i64 {
        let r: WriteResult = c.update("delete_user_orders", (u,));
        ensure!(
            matches!(
                Result::from(r.clone()),
                Ok(Outcome::Committed {
                    rows_changed: 10,
                    ..
                })
            ),
            "delete_user_orders({u}) unbatched at the smallest budget: {r:?}"
        );
    }
    Ok(Notes::new())
}

fn no_memory_headroom(_: &Lab, c: &mut Client, l: &mut Ledger) -> Result<Notes> {
    l.orders(c, 0..1_000);
    let used = c.canister.memory_usage();
    c.canister.set_memory_limits(0, used);
    for _ in 0..40 {
        c.tick(SECOND);
    }
    stalled(c, 1_000, "without headroom")?;
    c.canister.set_memory_limits(0, 0);
    Ok(Notes::new())
}

fn writer_fills_the_key_store(_: &Lab, c: &mut Client, l: &mut Ledger) -> Result<Notes> {
    let heavy: &[u8] = &[0x77, 0x22];
    add_writer(c, heavy)?;
    // 10,000 failing ops per batch, two messages in turn: about 385 KB of record each.
    let failing: Vec<UserOrderOp> = (0..MAX_CLIENT_BATCH)
        .map(|i| UserOrderOp::CreateOrder {
            user_id: if i % 2 == 0 { 1 } else { 99 },
            amount: if i % 2 == 0 { f64::NAN } else { 1.0 },
        })
        .collect();
    let now = c.canister.time();
    let mut recorded = 0u32;
    let share_full = loop {
        let mut id = [0xEE; 16];
        id[..4].copy_from_slice(&recorded.to_be_bytes());
        let k = BatchKey {
            created_at_time: now,
            id,
        };
        match c.update_as::<BatchResult, _>(heavy, "execute_batch", (failing.clone(), Some(k))) {
            BatchResult::Ok(_) => recorded += 1,
            BatchResult::Err(e) => break e,
            other => bail!("a heavy writer's batch: {other:?}"),
        }
        ensure!(recorded < 200, "the heavy writer's share never filled");
    };
    ensure!(
        matches!(
            share_full,
            WriteError::StoreFull {
                share: StoreShare::Caller,
                ..
            }
        ),
        "the heavy writer's refusal: {share_full:?}"
    );
    // Another writer still records.
    let r: BatchResult = c.update_as(
        WRITER,
        "execute_batch",
        (order_ops(1, 5, 0), Some(key(now, 1))),
    );
    ensure!(
        matches!(r, BatchResult::Ok(_)),
        "another writer's keyed batch: {r:?}"
    );
    l.keyed(1, 5);
    l.orders(c, 0..50);
    // Past the window: the prune timer empties the store in messages of its own.
    let before = c.log.len();
    c.canister.advance_time(25 * 3_600 * SECOND);
    for _ in 0..200 {
        c.tick(SECOND);
        if c.stats().keys_held == 0 {
            break;
        }
    }
    let held = c.stats().keys_held;
    ensure!(held == 0, "{held} keys left after the window");
    let dearest_timer = c.log[before..]
        .iter()
        .map(|e| e.instructions)
        .max()
        .unwrap_or(0);
    ensure!(
        dearest_timer < 2_000_000_000,
        "a timer message after the window cost {dearest_timer} instructions"
    );
    Ok(vec![
        ("recorded", recorded.to_string()),
        (
            "dearest_timer",
            format!("{:.2}", dearest_timer as f64 / 1e9),
        ),
    ])
}
