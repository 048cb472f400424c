//! Scenarios of a careless controller and of an attacker on the reference canister: SQL that
//! would put acknowledged writes where an upgrade loses them (temporary objects by schema name,
//! virtual tables), controller SQL on the library's own tables (the keys that make client
//! batches exactly once), settings that would make every later submit trap, and the dearest
//! ordinary op of the workload at the smallest flush budget on a large table. Each used to lose
//! or duplicate acknowledged writes, or fail an ordinary op; each row must now show 0 lost,
//! 0 altered, 0 applied twice and 0 failed without a cause of its own.

use anyhow::{Result, ensure};
use bench_api::*;
use offline_engine::{Engine, Program, Settings};

use super::{Ledger, SECOND, ScenarioResult, WRITER, amount, args, writer};
use crate::client::{CONTROLLER, Client};
use crate::progress::Progress;

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

/// `execute_sql` of `sql` by the controller: whether it was refused with SQLITE_AUTH (23).
fn refused_now(c: &mut Client, sql: &str) -> bool {
    let statement = SqlStatement {
        sql: sql.into(),
        params: vec![],
    };
    let r: WriteResult = c.update("execute_sql", (vec![statement],));
    matches!(
        Result::from(r),
        Ok(Outcome::Failed(OpError { code: 23, .. }))
    )
}

fn key(created_at_time: u64, n: u8) -> BatchKey {
    BatchKey {
        created_at_time,
        id: vec![n; 16],
    }
}

fn orders(user_id: i64, n: usize, first: usize) -> Vec<UserOrderOp> {
    (first..first + n)
        .map(|i| UserOrderOp::CreateOrder {
            user_id,
            amount: amount(i),
        })
        .collect()
}

/// Runs the scenarios, appending their rows to `out`.
pub(super) fn run(
    engine: &Engine,
    program: &Program,
    progress: &mut Progress,
    out: &mut Vec<ScenarioResult>,
) -> Result<()> {
    let install = |args: InitArgs, settings: Settings| {
        Client::install_program(engine, program, args, settings)
    };

    progress.step("reliability: temporary objects and virtual tables");
    let mut c = install(args(10_000_000_000), Settings::default());
    c.create_user("a");
    let mut l = Ledger::default();
    for (i, sql) in TEMPORARY_OBJECTS.iter().enumerate() {
        ensure!(refused_now(&mut c, sql), "{sql} was not refused");
        l.sql(&mut c, sql);
        for j in 0..30 {
            l.order(&mut c, CONTROLLER, 1, amount(30 * i + j));
        }
        c.tick(SECOND);
    }
    // Committed orders in a temporary table would be gone now: `finish` reads them back.
    ensure!(!c.upgrade(None).result.is_trap(), "an upgrade trapped");
    out.push(l.finish(
        &mut c,
        "temporary objects",
        "a controller's temp.orders, \"temp\".shadow, temp view, temp trigger and dbstat tables, each executed and queued before 30 orders, then an upgrade: refused (code 23), every order read back after the upgrade",
    )?);

    progress.step("reliability: controller SQL on the library's own tables");
    let mut c = install(args(10_000_000_000), Settings::default());
    c.create_user("a");
    writer(&mut c)?;
    let now = c.canister.time();
    let mut l = Ledger::default();
    let batches: Vec<(BatchKey, Vec<UserOrderOp>)> = (0..4u8)
        .map(|n| (key(now, n + 1), orders(1, 5, 5 * n as usize)))
        .collect();
    let mut first = Vec::new();
    for (k, ops) in &batches {
        let r: BatchResult = c.update_as(WRITER, "execute_batch", (ops.clone(), Some(k.clone())));
        ensure!(matches!(r, BatchResult::Ok(_)), "a keyed batch: {r:?}");
        first.push(r.outcomes().map_err(|e| anyhow::anyhow!("{e:?}"))?);
    }
    for sql in LIBRARY_TABLE_SQL {
        ensure!(refused_now(&mut c, sql), "{sql} was not refused");
        l.sql(&mut c, sql);
        for j in 0..10 {
            l.order(&mut c, CONTROLLER, 1, amount(100 + j));
        }
        c.tick(SECOND);
    }
    ensure!(!c.upgrade(None).result.is_trap(), "an upgrade trapped");
    // Every batch resent: answered with its first outcomes, nothing applied again.
    for ((k, ops), outcomes) in batches.iter().zip(&first) {
        let r: BatchResult = c.update_as(WRITER, "execute_batch", (ops.clone(), Some(k.clone())));
        ensure!(
            r == BatchResult::Duplicate(outcomes.clone()),
            "a resent batch: {r:?}"
        );
    }
    // A new key still records.
    let r: BatchResult = c.update_as(
        WRITER,
        "execute_batch",
        (orders(1, 5, 20), Some(key(now, 9))),
    );
    ensure!(matches!(r, BatchResult::Ok(_)), "a new keyed batch: {r:?}");
    let keyed_orders = 5 * (batches.len() as u64 + 1);
    let mut row = l.finish(
        &mut c,
        "library tables",
        "4 keyed batches, then a controller's DELETE/DROP/UPDATE of the key store, each executed and queued before 10 orders, an upgrade, the 4 batches resent and a new one: refused (code 23), the resent batches answered as duplicates",
    )?;
    // Orders stored beyond the keyed batches' and the queued ones': applied twice.
    let stored = c.orders_of(1).len() as u64;
    let queued_orders = 10 * LIBRARY_TABLE_SQL.len() as u64;
    row.applied_twice = stored.saturating_sub(keyed_orders + queued_orders);
    // The keyed batches' orders are acknowledged and committed too (their outcomes above).
    row.acknowledged += keyed_orders;
    row.committed += keyed_orders;
    out.push(row);

    progress.step("reliability: settings that would make submits trap");
    let mut refused = 0;
    for delay in UNSAFE_DELAYS_MS {
        let unsafe_args = InitArgs {
            max_delay_ms: Some(delay),
            ..args(10_000_000_000)
        };
        let arg = candid::encode_one(Some(unsafe_args)).expect("encode");
        if offline_engine::Canister::install(engine, program, &arg, Settings::default()).is_err() {
            refused += 1;
        }
    }
    ensure!(
        refused == UNSAFE_DELAYS_MS.len(),
        "{refused} of {} unsafe max_delay_ms refused",
        UNSAFE_DELAYS_MS.len()
    );
    let mut c = install(args(10_000_000_000), Settings::default());
    c.create_user("a");
    let mut l = Ledger::default();
    for i in 0..100 {
        l.order(&mut c, CONTROLLER, 1, amount(i));
    }
    l.refused += refused as u64;
    out.push(l.finish(
        &mut c,
        "unsafe settings",
        "max_delay_ms of 1.67·10^13, 10^12 and u64::MAX at install: refused with the setting's name; then 100 orders",
    )?);

    Ok(())
}
