//! Reliability scenarios: the batched write path under the attacks and mistakes that used to
//! stop it or make it say something false (a heavy op, a heavy delete built by a stranger, an op
//! that makes every flush trap, one at the tail of a long queue while submits keep coming and
//! three among 200, upgrades with thousands of pending ops, a full queue, a `COMMIT` that one op
//! makes fail, PRAGMAs that would change the connection, a read-only database, ops whose cost
//! varies at the largest budget, a stranger flooding an open canister, strangers calling queries
//! as updates, the smallest budget), each run on the deployable canister on the engine. For
//! each: ops acknowledged, committed and failed, ops failed without a cause of their own (an
//! ordinary op that failed: must be 0), acknowledged ops lost (no outcome after the queue
//! drained) and altered (an order stored with other bits than submitted), calls refused,
//! trapped messages, and the timer runs (about one per round) until the queue was empty again.
//! Lost, altered and failed without a cause must be 0.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;

use anyhow::{Result, bail, ensure};
use bench_api::schema;
use bench_api::*;
use candid::Principal;
use offline_engine::{Engine, EngineConfig, InstructionLimits, Settings, SubnetKind};
use serde::{Deserialize, Serialize};

use crate::client::{CONTROLLER, Client, STRANGER, program_at};
use crate::progress::Progress;

/// One second of engine time: the flush timer's period in the scenarios.
const SECOND: u64 = 1_000_000_000;
/// Timer runs after which a queue that has not drained counts as stuck.
const MAX_ROUNDS: u64 = 400;
/// A registered writer.
const WRITER: &[u8] = &[0x77, 0x21];

/// An insert that only the instruction guard stops.
const ENDLESS_INSERT: &str = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) \
    INSERT INTO users (username, email) SELECT 'endless', 'endless@example.com' FROM c";
/// One SQLite operation (a string function over 100 MB) longer than the reduced message limit of
/// its scenario: no guard can interrupt it, every flush that runs it traps.
const UNINTERRUPTIBLE: &str = "INSERT INTO users (username, email) VALUES ('poison', \
    length(replace(printf('%.*c', 100000000, 'x'), 'x', 'yy')))";
/// The flag PRAGMAs that used to take effect while reported as failed.
const PRAGMAS: [&str; 4] = [
    "PRAGMA foreign_keys = OFF",
    "PRAGMA foreign_keys = ON",
    "PRAGMA writable_schema = 1",
    "PRAGMA query_only = 1",
];
/// Instructions per row of the recursive CTE of [`varying`] (measured: 47,917,230 for 10,000
/// rows through `execute_sql`).
const VARYING_ROW_INSTRUCTIONS: u64 = 4_750;

/// An insert of user `tag` after a recursive CTE of `1 + random() % rows` rows: an op whose cost
/// varies each time it runs.
pub fn varying(rows: u64, tag: usize) -> String {
    format!(
        "INSERT INTO users (username, email) SELECT 'varying', 'varying{tag}@example.com' WHERE \
         (SELECT count(*) FROM (WITH RECURSIVE n(v) AS MATERIALIZED (SELECT 1 + abs(random()) % {rows}), \
         c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c, n WHERE x < n.v) SELECT x FROM c)) > 0"
    )
}

/// What one scenario did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScenarioResult {
    /// Short name.
    pub name: String,
    /// What was done.
    pub description: String,
    /// Queued ops the canister acknowledged with a ticket.
    pub acknowledged: u64,
    /// Of those, committed (an evicted outcome that says it committed included).
    pub committed: u64,
    /// Of those, failed (with their own outcome).
    pub failed: u64,
    /// Ordinary ops (every op but the scenario's culprits) that failed: ops failed without a
    /// cause of their own (must be 0).
    #[serde(default)]
    pub failed_without_cause: u64,
    /// Acknowledged ops without an outcome after the queue drained (must be 0).
    pub lost: u64,
    /// Committed orders stored with other bits than submitted (must be 0).
    pub altered: u64,
    /// Calls refused before anything was queued (full queue, strangers).
    pub refused: u64,
    /// Messages that trapped (their changes rolled back).
    pub trapped: u64,
    /// Timer runs from the disturbance until the queue was empty.
    pub rounds_to_drain: u64,
}

/// Tracks the tickets of a scenario and what each order should store.
#[derive(Default)]
struct Ledger {
    tickets: Vec<Ticket>,
    /// Ticket → (user, amount) of a queued order insert.
    orders: HashMap<Ticket, (i64, f64)>,
    /// The scenario's culprits: ops that may fail for a cause of their own.
    culprits: HashSet<Ticket>,
    refused: u64,
}

impl Ledger {
    fn order(&mut self, c: &mut Client, caller: &[u8], user_id: i64, amount: f64) {
        let r = c.submit_as(caller, "submit_create_order", (user_id, amount));
        match Result::from(r) {
            Ok(ticket) => {
                self.tickets.push(ticket);
                self.orders.insert(ticket, (user_id, amount));
            }
            Err(WriteError::QueueFull { .. } | WriteError::QueueBytesFull { .. }) => {
                self.refused += 1
            }
            Err(e) => panic!("submit_create_order: {e:?}"),
        }
    }

    /// A controller's SQL op, a culprit.
    fn sql(&mut self, c: &mut Client, sql: &str) {
        let ticket = c.submit_sql(sql);
        self.tickets.push(ticket);
        self.culprits.insert(ticket);
    }

    /// A controller's SQL op that must commit (an ordinary op).
    fn ordinary_sql(&mut self, c: &mut Client, sql: &str) {
        self.tickets.push(c.submit_sql(sql));
    }

    /// A single-argument submit by `caller`; a culprit if `culprit`.
    fn other(&mut self, c: &mut Client, caller: &[u8], method: &str, arg: i64, culprit: bool) {
        let r = c.submit_as(caller, method, (arg,));
        match Result::from(r) {
            Ok(ticket) => {
                self.tickets.push(ticket);
                if culprit {
                    self.culprits.insert(ticket);
                }
            }
            Err(e) => panic!("{method}: {e:?}"),
        }
    }

    /// Ticks until the queue is empty; then counts outcomes, losses and alterations.
    fn finish(self, c: &mut Client, name: &str, description: &str) -> Result<ScenarioResult> {
        let mut rounds = 0;
        while c.stats().pending > 0 {
            if rounds == MAX_ROUNDS {
                bail!(
                    "{name}: the queue did not drain in {MAX_ROUNDS} timer runs: {:?}",
                    c.stats()
                );
            }
            c.tick(SECOND);
            rounds += 1;
        }
        let (mut committed, mut failed, mut lost, mut failed_without_cause) = (0, 0, 0, 0);
        let mut rowids: BTreeMap<i64, Vec<(i64, f64)>> = BTreeMap::new();
        let first = self.tickets.iter().copied().min().unwrap_or(1);
        let last = self.tickets.iter().copied().max().unwrap_or(0);
        let statuses = c.tickets(first, (last + 1).saturating_sub(first));
        for ticket in &self.tickets {
            match statuses[(ticket - first) as usize].clone() {
                TicketStatus::Committed {
                    last_insert_rowid, ..
                } => {
                    committed += 1;
                    if let Some(&(user, amount)) = self.orders.get(ticket) {
                        rowids
                            .entry(user)
                            .or_default()
                            .push((last_insert_rowid, amount));
                    }
                }
                TicketStatus::Evicted {
                    committed: Some(true),
                } => committed += 1,
                TicketStatus::Failed(_)
                | TicketStatus::Evicted {
                    committed: Some(false),
                } => {
                    failed += 1;
                    if !self.culprits.contains(ticket) {
                        failed_without_cause += 1;
                    }
                }
                TicketStatus::Pending
                | TicketStatus::Evicted { committed: None }
                | TicketStatus::NotYours
                | TicketStatus::Unknown => lost += 1,
            }
        }
        let mut altered = 0;
        for (user, expected) in rowids {
            let stored: HashMap<i64, u64> = c
                .orders_of(user)
                .into_iter()
                .map(|o| (o.order_id, o.amount.to_bits()))
                .collect();
            altered += expected
                .iter()
                .filter(|(rowid, amount)| stored.get(rowid) != Some(&stored_bits(*amount)))
                .count() as u64;
        }
        Ok(ScenarioResult {
            name: name.into(),
            description: description.into(),
            acknowledged: self.tickets.len() as u64,
            committed,
            failed,
            failed_without_cause,
            lost,
            altered,
            refused: self.refused,
            trapped: c.traps().len() as u64,
            rounds_to_drain: rounds,
        })
    }
}

/// The bits SQLite stores for `amount` in a REAL column: whole numbers within the 64-bit integer
/// range are kept as integers, so −0.0 reads back as 0.0; every other value is kept exactly.
fn stored_bits(amount: f64) -> u64 {
    if amount == 0.0 { 0.0f64 } else { amount }.to_bits()
}

/// Deterministic amounts with the awkward values among them.
fn amount(i: usize) -> f64 {
    const SPECIAL: [f64; 8] = [
        f64::INFINITY,
        f64::NEG_INFINITY,
        -0.0,
        5e-324,
        -386.33000000000004,
        8.010306006949637e142,
        f64::MAX,
        9_007_199_254_740_993.0,
    ];
    if i.is_multiple_of(5) {
        SPECIAL[(i / 5) % SPECIAL.len()]
    } else {
        let x = (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 11;
        x as f64 / 1e6 - 1_000.0
    }
}

fn args(budget: u64) -> InitArgs {
    InitArgs {
        flush_size: Some(100_000),
        max_pending: Some(100_000),
        max_delay_ms: Some(1_000),
        flush_instruction_budget: Some(budget),
        outcome_capacity: Some(100_000),
        ..Default::default()
    }
}

/// Engine settings with an update (and timer) message limit of `limit` instructions.
fn limited(limit: u64) -> Settings {
    Settings {
        subnet: SubnetKind::Custom(InstructionLimits {
            update: limit,
            ..SubnetKind::Application.limits()
        }),
        ..Settings::default()
    }
}

/// Runs every scenario on the deployable wasm at `wasm`.
pub fn run_all(wasm: &Path, progress: &mut Progress) -> Result<Vec<ScenarioResult>> {
    let engine = Engine::new(EngineConfig::default())?;
    let program = program_at(&engine, wasm);
    let install = |args: InitArgs, settings: Settings| {
        Client::install_program(&engine, &program, args, settings)
    };
    let mut out = Vec::new();

    progress.step("reliability: heavy op among 200 writes");
    let mut c = install(args(100_000_000), Settings::default());
    c.create_user("a");
    let mut l = Ledger::default();
    for i in 0..100 {
        l.order(&mut c, CONTROLLER, 1, amount(i));
    }
    l.sql(&mut c, ENDLESS_INSERT);
    for i in 100..200 {
        l.order(&mut c, CONTROLLER, 1, amount(i));
    }
    out.push(l.finish(
        &mut c,
        "heavy op",
        "200 orders around a controller's endless insert (flush budget 100 M: interrupted at 200 M)",
    )?);

    progress.step("reliability: heavy delete built by a stranger");
    let budget = MIN_FLUSH_BUDGET;
    let mut c = install(
        InitArgs {
            write_access: Some(WriteAccess::Open),
            ..args(budget)
        },
        Settings::default(),
    );
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
    let mut l = Ledger::default();
    for i in 0..50 {
        l.order(&mut c, STRANGER, 2, amount(i));
    }
    l.other(&mut c, STRANGER, "submit_delete_user_orders", 1, true);
    for i in 50..100 {
        l.order(&mut c, STRANGER, 2, amount(i));
    }
    out.push(l.finish(
        &mut c,
        "stranger's heavy delete",
        "open mode: 20,000 orders of one user, then their delete among 100 other orders (the smallest budget, 20 M)",
    )?);

    progress.step("reliability: an op that makes every flush trap");
    let mut c = install(args(100_000_000), limited(1_000_000_000));
    c.create_user("a");
    let mut l = Ledger::default();
    for i in 0..50 {
        l.order(&mut c, CONTROLLER, 1, amount(i));
    }
    l.sql(&mut c, UNINTERRUPTIBLE);
    for i in 50..100 {
        l.order(&mut c, CONTROLLER, 1, amount(i));
    }
    out.push(l.finish(
        &mut c,
        "trapping op",
        "100 orders around one SQLite operation longer than the message limit (1 B here): the watchdog removes it",
    )?);

    progress.step("reliability: a trapping op at the tail of 1,000, submits going on");
    let mut c = install(
        InitArgs {
            flush_size: Some(100),
            ..args(100_000_000)
        },
        limited(1_000_000_000),
    );
    c.create_user("a");
    writer(&mut c)?;
    let mut l = Ledger::default();
    for i in 0..1_000 {
        l.order(&mut c, WRITER, 1, amount(i));
    }
    l.sql(&mut c, UNINTERRUPTIBLE);
    for i in 1_000..1_300 {
        l.order(&mut c, WRITER, 1, amount(i));
        if i % 50 == 0 {
            c.tick(SECOND);
        }
    }
    out.push(l.finish(
        &mut c,
        "trapping op at the tail",
        "1,000 orders, one SQLite operation longer than the message limit (1 B), then 300 more submitted during the stall (flush size 100)",
    )?);

    progress.step("reliability: three trapping ops among 200");
    let mut c = install(
        InitArgs {
            flush_size: Some(50),
            ..args(100_000_000)
        },
        limited(1_000_000_000),
    );
    c.create_user("a");
    writer(&mut c)?;
    let mut l = Ledger::default();
    for i in 0..200 {
        if i == 40 || i == 110 || i == 170 {
            l.sql(&mut c, UNINTERRUPTIBLE);
        }
        l.order(&mut c, WRITER, 1, amount(i));
    }
    out.push(l.finish(
        &mut c,
        "three trapping ops",
        "200 orders with three SQLite operations longer than the message limit (1 B) among them (flush size 50)",
    )?);

    progress.step("reliability: three upgrades with 10,000 pending ops");
    let mut c = install(args(10_000_000_000), Settings::default());
    c.create_user("a");
    let mut l = Ledger::default();
    for i in 0..10_000 {
        l.order(&mut c, CONTROLLER, 1, amount(i));
    }
    l.sql(&mut c, ENDLESS_INSERT);
    for _ in 0..3 {
        ensure!(!c.upgrade(None).result.is_trap(), "an upgrade trapped");
    }
    out.push(l.finish(
        &mut c,
        "upgrades",
        "10,000 pending orders (±inf, −0.0, subnormals, extremes) and a heavy op through three upgrades",
    )?);

    progress.step("reliability: a full queue");
    let order_bytes = schema::INSERT_ORDER.len() as u64 + 16 + 8 + 8;
    let mut c = install(
        InitArgs {
            max_pending_bytes: Some(100 * order_bytes),
            ..args(10_000_000_000)
        },
        Settings::default(),
    );
    c.create_user("a");
    let mut l = Ledger::default();
    for i in 0..300 {
        l.order(&mut c, CONTROLLER, 1, amount(i));
    }
    ensure!(l.refused == 200, "{} submits refused", l.refused);
    out.push(l.finish(
        &mut c,
        "full queue",
        "300 orders into a queue that holds 100 (in bytes): 200 refused with QueueBytesFull, never acknowledged",
    )?);

    progress.step("reliability: a COMMIT that one op makes fail");
    let mut c = install(args(10_000_000_000), Settings::default());
    c.create_user("a");
    let deferred = SqlStatement {
        sql: "CREATE TABLE deferred (user_id INTEGER REFERENCES users(user_id) \
              DEFERRABLE INITIALLY DEFERRED)"
            .into(),
        params: vec![],
    };
    let r: WriteResult = c.update("execute_sql", (vec![deferred],));
    ensure!(Result::from(r).is_ok(), "creating the deferred table");
    let mut l = Ledger::default();
    for i in 0..100 {
        l.order(&mut c, CONTROLLER, 1, amount(i));
    }
    l.sql(&mut c, "INSERT INTO deferred VALUES (42)");
    for i in 100..200 {
        l.order(&mut c, CONTROLLER, 1, amount(i));
    }
    out.push(l.finish(
        &mut c,
        "failing COMMIT",
        "200 orders around an insert that violates a deferred foreign key: flushes halve until it fails alone",
    )?);

    progress.step("reliability: PRAGMAs that would change the connection");
    let mut c = install(args(10_000_000_000), Settings::default());
    c.create_user("a");
    let mut l = Ledger::default();
    for (i, pragma) in PRAGMAS.iter().enumerate() {
        // Executed now and queued: refused both ways, nothing happens.
        let statement = SqlStatement {
            sql: (*pragma).into(),
            params: vec![],
        };
        let r: WriteResult = c.update("execute_sql", (vec![statement],));
        ensure!(
            matches!(
                Result::from(r),
                Ok(Outcome::Failed(OpError { code: 23, .. }))
            ),
            "{pragma} was not refused"
        );
        l.sql(&mut c, pragma);
        for j in 0..50 {
            l.order(&mut c, CONTROLLER, 1, amount(50 * i + j));
        }
        // An order of a missing user: it fails for its own cause (787) only if foreign keys
        // are still on.
        l.other(&mut c, CONTROLLER, "submit_delete_user_orders", 99, false);
        let r = c.submit_as(CONTROLLER, "submit_create_order", (99i64, 1.0f64));
        let ticket = Result::from(r).map_err(|e| anyhow::anyhow!("{e:?}"))?;
        l.tickets.push(ticket);
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
    out.push(l.finish(
        &mut c,
        "PRAGMAs",
        "foreign_keys = OFF, = ON, writable_schema = 1, query_only = 1, each executed and queued among 50 orders: refused (code 23); an order of a missing user still fails (787)",
    )?);

    progress.step("reliability: a read-only database for 60 periods");
    let mut c = install(args(10_000_000_000), Settings::default());
    c.create_user("a");
    let mut l = Ledger::default();
    for i in 0..100 {
        l.order(&mut c, CONTROLLER, 1, amount(i));
    }
    let r: AdminResult = c.update("set_read_only", (true,));
    ensure!(r == AdminResult::Ok(()), "set_read_only: {r:?}");
    for i in 100..200 {
        l.order(&mut c, CONTROLLER, 1, amount(i));
        if i % 2 == 0 {
            c.tick(SECOND);
        }
    }
    for _ in 0..10 {
        c.tick(SECOND);
    }
    let s = c.stats();
    ensure!(
        s.failed == 0 && s.pending == 200 && s.alarm.is_some(),
        "while read-only: {s:?}"
    );
    let r: AdminResult = c.update("set_read_only", (false,));
    ensure!(r == AdminResult::Ok(()), "set_read_only: {r:?}");
    out.push(l.finish(
        &mut c,
        "read-only database",
        "200 orders, read-only for 60 timer periods while the last 100 arrive: every flush fails at BEGIN, no op fails; all commit once writable",
    )?);

    progress.step("reliability: ops of varying cost at the largest budget");
    let (c, l, _) = varying_cost_run(&engine, &program, 200_000_000, 240)?;
    let mut c = c;
    out.push(l.finish(
        &mut c,
        "varying cost",
        "240 controller inserts costing 0 to 1.3 budgets at random, at the largest budget for a 200 M message limit (53 M): re-application keeps the flush's deadline",
    )?);

    progress.step("reliability: a stranger floods an open canister");
    let mut c = install(
        InitArgs {
            write_access: Some(WriteAccess::Open),
            flush_size: Some(100),
            max_pending: Some(1_000),
            outcome_capacity: Some(1_000),
            ..args(10_000_000_000)
        },
        Settings::default(),
    );
    c.create_user("a");
    let mut l = Ledger::default();
    for i in 0..10 {
        l.order(&mut c, WRITER, 1, amount(i));
    }
    let victims = l.tickets.clone();
    c.tick(SECOND);
    for _ in 0..10_000 {
        l.other(
            &mut c,
            STRANGER,
            "submit_delete_user_orders",
            999_999,
            false,
        );
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
    out.push(l.finish(
        &mut c,
        "stranger's flood",
        "open mode, 1,000 outcomes kept: 10 orders by a writer, then 10,000 no-op submits by a stranger; the writer's outcomes stay, the stranger's evicted ones still say they committed",
    )?);

    progress.step("reliability: strangers");
    let mut c = install(args(10_000_000_000), Settings::default());
    c.create_user("a");
    let mut l = Ledger::default();
    for i in 0..1_000 {
        let exec = c.raw_update(STRANGER, "submit_create_order", (1i64, amount(i)));
        ensure!(exec.result.reply().is_none(), "a stranger was let in");
        l.refused += 1;
    }
    for i in 0..100 {
        l.order(&mut c, CONTROLLER, 1, amount(i));
    }
    out.push(l.finish(
        &mut c,
        "strangers",
        "1,000 writes by a stranger (restricted mode), then 100 by the controller",
    )?);

    progress.step("reliability: queries called as updates");
    let mut c = install(args(10_000_000_000), Settings::default());
    c.create_user("a");
    let mut l = Ledger::default();
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
    for i in 0..100 {
        l.order(&mut c, CONTROLLER, 1, amount(i));
    }
    out.push(l.finish(
        &mut c,
        "queries as updates",
        "100 query calls by a stranger as updates (user_orders of everything among them): refused before they run, nothing billed",
    )?);

    progress.step("reliability: the smallest budget");
    let mut c = install(
        InitArgs {
            flush_size: Some(100),
            max_pending: Some(1_000),
            outcome_capacity: Some(1_000),
            ..args(MIN_FLUSH_BUDGET)
        },
        Settings::default(),
    );
    for u in 0..10 {
        c.create_user(&format!("u{u}"));
    }
    let mut l = Ledger::default();
    for round in 0..3 {
        ensure!(!c.upgrade(None).result.is_trap(), "an upgrade trapped");
        for i in 0..100 {
            let n = 100 * round + i;
            // Orders of users 1-5 are kept and checked; users 6-10 get orders that are deleted.
            let (kept, deleted) = ((n % 5 + 1) as i64, (n % 5 + 6) as i64);
            match i % 4 {
                0 => l.order(&mut c, CONTROLLER, kept, amount(n)),
                1 => {
                    let r = c.submit_as(CONTROLLER, "submit_create_order", (deleted, 1.0f64));
                    let ticket = Result::from(r).map_err(|e| anyhow::anyhow!("{e:?}"))?;
                    l.tickets.push(ticket);
                }
                2 => l.other(
                    &mut c,
                    CONTROLLER,
                    "submit_delete_user_orders",
                    deleted,
                    false,
                ),
                _ => l.ordinary_sql(
                    &mut c,
                    &format!("UPDATE users SET username = 'u{n}' WHERE user_id = {kept}"),
                ),
            }
        }
    }
    ensure!(
        install_refused(&engine, &program, MIN_FLUSH_BUDGET - 1),
        "a budget below the floor was accepted"
    );
    out.push(l.finish(
        &mut c,
        "smallest budget",
        "300 ordinary ops at the smallest budget (20 M), each hundred first after an upgrade; one less is refused at install",
    )?);

    Ok(out)
}

/// Registers [`WRITER`].
fn writer(c: &mut Client) -> Result<()> {
    let r: AdminResult = c.update("add_writers", (vec![Principal::from_slice(WRITER)],));
    ensure!(r == AdminResult::Ok(()), "add_writers: {r:?}");
    Ok(())
}

/// Whether installing with `budget` is refused.
fn install_refused(engine: &Engine, program: &offline_engine::Program, budget: u64) -> bool {
    let arg = match candid::encode_one(Some(args(budget))) {
        Ok(arg) => arg,
        Err(_) => return false,
    };
    offline_engine::Canister::install(engine, program, &arg, Settings::default()).is_err()
}

/// `ops` controller inserts of varying cost (0 to 1.3 budgets at random) on a canister with the
/// largest budget for a message `limit` (three budgets plus a fifth of the limit fit it, as the
/// canister's rule has it for 40 B): the ledger of the ops, and the flush messages'
/// instructions, most first.
fn varying_cost_run(
    engine: &Engine,
    program: &offline_engine::Program,
    limit: u64,
    ops: usize,
) -> Result<(Client, Ledger, u64)> {
    let budget = (limit - limit / 5) / 3;
    let mut c = Client::install_program(
        engine,
        program,
        InitArgs {
            flush_size: Some(100_000),
            flush_instruction_budget: Some(budget),
            ..args(budget)
        },
        limited(limit),
    );
    let rows = budget * 13 / 10 / VARYING_ROW_INSTRUCTIONS;
    let mut l = Ledger::default();
    for tag in 0..ops {
        l.ordinary_sql(&mut c, &varying(rows, tag));
    }
    let mut most = 0;
    for _ in 0..MAX_ROUNDS {
        if c.stats().pending == 0 {
            break;
        }
        for e in c.tick(SECOND) {
            most = most.max(e.instructions);
        }
    }
    Ok((c, l, most))
}

/// The most instructions a flush used, against its budget: a flush whose ops use about its
/// budget and that then interrupts a heavy op behind them (re-applying them), and the heavy op's
/// own flush (interrupted alone, rolled back); and flushes of ops whose cost varies at the
/// largest budget of a reduced message limit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorstCaseFlush {
    /// `flush_instruction_budget`.
    pub budget: u64,
    /// Ops committed before the heavy op.
    pub ops_before: u64,
    /// Instructions of the flush message that committed them and interrupted the heavy op.
    pub mixed_flush_instructions: u64,
    /// Instructions of the flush message that ran the heavy op alone.
    pub alone_flush_instructions: u64,
    /// The message limit of the varying-cost run.
    #[serde(default)]
    pub varying_limit: u64,
    /// Its budget, the largest for that limit.
    #[serde(default)]
    pub varying_budget: u64,
    /// Ops of varying cost it flushed.
    #[serde(default)]
    pub varying_ops: u64,
    /// Flushes that committed ops.
    #[serde(default)]
    pub varying_flushes: u64,
    /// Flushes rolled back at 3 × the budget while re-applying.
    #[serde(default)]
    pub varying_capped: u64,
    /// Messages that trapped (must be 0).
    #[serde(default)]
    pub varying_trapped: u64,
    /// The most instructions one message of the run used.
    #[serde(default)]
    pub varying_most: u64,
}

/// Measures [`WorstCaseFlush`] with a budget of 1 billion instructions.
pub fn worst_case_flush(wasm: &Path, progress: &mut Progress) -> Result<WorstCaseFlush> {
    progress.step("reliability: the worst-case flush");
    let engine = Engine::new(EngineConfig::default())?;
    let program = program_at(&engine, wasm);
    let budget = 1_000_000_000;
    let mut c = Client::install_program(&engine, &program, args(budget), Settings::default());
    c.create_user("a");
    // About 30,000 instructions per queued insert: ops worth one budget.
    let ops = budget / 30_000;
    for i in 0..ops {
        let r = c.submit_order(1, i as f64);
        ensure!(r.is_ok(), "submit {i}: {r:?}");
    }
    c.submit_sql(ENDLESS_INSERT);
    let flush = |c: &mut Client| -> Result<(FlushSummary, u64)> {
        let exec = c.raw_update(crate::client::CONTROLLER, "flush", ());
        let summary: FlushResult = crate::client::decode("flush", &exec);
        let summary = Result::from(summary).map_err(|e| anyhow::anyhow!("flush: {e:?}"))?;
        Ok((summary, exec.instructions))
    };
    let (mixed, mixed_instructions) = flush(&mut c)?;
    ensure!(
        mixed.committed == ops && mixed.remaining == 1,
        "the heavy op was not left behind the others: {mixed:?}"
    );
    let (alone, alone_instructions) = flush(&mut c)?;
    ensure!(alone.interrupted == 1, "{alone:?}");
    progress.step("reliability: the flush bound with ops of varying cost");
    let limit = 200_000_000;
    let varying_ops = 240;
    let (mut v, _, most) = varying_cost_run(&engine, &program, limit, varying_ops)?;
    let s = v.stats();
    ensure!(
        s.pending == 0 && s.failed == 0,
        "the varying-cost run: {s:?}"
    );
    Ok(WorstCaseFlush {
        budget,
        ops_before: ops,
        mixed_flush_instructions: mixed_instructions,
        alone_flush_instructions: alone_instructions,
        varying_limit: limit,
        varying_budget: (limit - limit / 5) / 3,
        varying_ops: varying_ops as u64,
        varying_flushes: s.flushes,
        varying_capped: s.capped_flushes,
        varying_trapped: v.traps().len() as u64,
        varying_most: most,
    })
}

/// Whether every scenario lost and altered nothing, and failed no op without a cause of its own.
pub fn all_safe(results: &[ScenarioResult]) -> bool {
    results
        .iter()
        .all(|r| r.lost == 0 && r.altered == 0 && r.failed_without_cause == 0)
}

/// What one op of the users/orders API costs alone, as the instruction guard counts it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpCost {
    /// The method (`create_order`, ...).
    pub op: String,
    /// Instructions of a flush of this op alone (`FlushSummary::instructions`: `BEGIN`, the op,
    /// `COMMIT`), with SQLite's page cache warm.
    pub flush_warm: u64,
    /// The same as the first write after an upgrade (page cache and schema empty).
    pub flush_cold: u64,
    /// Instructions of the unbatched call (the whole message), warm.
    pub unbatched_warm: u64,
    /// The same, as the first write after an upgrade.
    pub unbatched_cold: u64,
}

/// The measurement behind [`bench_api::MIN_FLUSH_BUDGET`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BudgetFloor {
    /// Users of the fixture the ops ran on.
    pub users: u64,
    /// Orders of the fixture.
    pub orders: u64,
    /// Per op of the API.
    pub ops: Vec<OpCost>,
    /// The largest figure of `ops`.
    pub most_expensive: u64,
    /// `bench_api::MIN_FLUSH_BUDGET`.
    pub floor: u64,
}

/// Measures what each op of the users/orders API costs alone, warm and as the first write after
/// an upgrade, on the `fixture` (the reference workload is the full scale of the ic-rusqlite
/// benchmark), to derive the smallest flush budget.
pub fn budget_floor(
    wasm: &Path,
    fixture: crate::engine_runs::Fixture,
    progress: &mut Progress,
) -> Result<BudgetFloor> {
    progress.step("budget floor: building the fixture");
    let engine = Engine::new(EngineConfig::default())?;
    let program = program_at(&engine, wasm);
    let mut c = Client::install_program(
        &engine,
        &program,
        InitArgs {
            flush_size: Some(10_000),
            max_delay_ms: Some(86_400_000),
            ..Default::default()
        },
        Settings::default(),
    );
    for ops in crate::engine_runs::fixture_batches_of(fixture) {
        let packed = serde_bytes::ByteBuf::from(bench_api::packed::encode_ops(&ops));
        let reply: serde_bytes::ByteBuf = c.update("execute_batch_packed", (packed,));
        let outcomes = bench_api::packed::decode_outcomes(&reply, ops.len())
            .map_err(|e| anyhow::anyhow!("fixture: {e}"))?;
        ensure!(
            outcomes
                .iter()
                .all(|o| matches!(o, Outcome::Committed { .. })),
            "fixture: an op failed"
        );
    }
    let r: WriteResult = c.update("execute_sql", (crate::engine_runs::fixture_indexes(),));
    ensure!(Result::from(r).is_ok(), "fixture indexes");
    let (users, orders) = fixture.rows();
    // The ops, each on rows the fixture has: a new user, an order of the last user, the
    // amount of the last order, the orders of a user (as many as any user has; a different
    // user each time, so that every delete finds them).
    let mut next_user = 0i64;
    let mut arg = |method: &str| -> Result<Vec<u8>> {
        Ok(match method {
            "create_user" => {
                next_user += 1;
                candid::encode_args((
                    format!("floor{next_user}"),
                    format!("floor{next_user}@example.com"),
                ))?
            }
            "create_order" => candid::encode_args((users as i64, 1.5f64))?,
            "update_order_amount" => candid::encode_args((orders as i64, 2.5f64))?,
            _ => {
                next_user += 1;
                candid::encode_args((next_user,))?
            }
        })
    };
    let mut out = Vec::new();
    for method in [
        "create_user",
        "create_order",
        "update_order_amount",
        "delete_user_orders",
    ] {
        progress.step(&format!("budget floor: {method}"));
        let mut figures = [0u64; 4];
        for (slot, (cold, batched)) in [(false, true), (true, true), (false, false), (true, false)]
            .into_iter()
            .enumerate()
        {
            if cold {
                // An upgrade empties SQLite's page cache and schema.
                ensure!(!c.upgrade(None).result.is_trap(), "upgrade trapped");
            } else {
                // Warm: the same op once before, unmeasured.
                let exec = c.canister.update_as(CONTROLLER, method, &arg(method)?)?;
                ensure!(exec.result.reply().is_some(), "{method}: {:?}", exec.result);
            }
            let arg = arg(method)?;
            figures[slot] = if batched {
                let submit = format!("submit_{method}");
                let exec = c.canister.update_as(CONTROLLER, &submit, &arg)?;
                ensure!(exec.result.reply().is_some(), "{submit}: {:?}", exec.result);
                let flushed = Result::from(c.update::<FlushResult, _>("flush", ()))
                    .map_err(|e| anyhow::anyhow!("flush: {e:?}"))?;
                ensure!(
                    flushed.committed == 1,
                    "{method} alone did not commit: {flushed:?}"
                );
                flushed.instructions
            } else {
                let exec = c.canister.update_as(CONTROLLER, method, &arg)?;
                let outcome: bench_api::WriteResult = crate::client::decode(method, &exec);
                ensure!(
                    matches!(
                        outcome,
                        bench_api::WriteResult::Ok(Outcome::Committed { .. })
                    ),
                    "{method}: {outcome:?}"
                );
                exec.instructions
            };
        }
        out.push(OpCost {
            op: method.to_owned(),
            flush_warm: figures[0],
            flush_cold: figures[1],
            unbatched_warm: figures[2],
            unbatched_cold: figures[3],
        });
    }
    let most_expensive = out
        .iter()
        .flat_map(|o| {
            [
                o.flush_warm,
                o.flush_cold,
                o.unbatched_warm,
                o.unbatched_cold,
            ]
        })
        .max()
        .unwrap_or(0);
    Ok(BudgetFloor {
        users: users as u64,
        orders: orders as u64,
        ops: out,
        most_expensive,
        floor: bench_api::MIN_FLUSH_BUDGET,
    })
}

/// The table of [`BudgetFloor`], in Markdown.
pub fn render_budget_floor(f: &BudgetFloor) -> String {
    let mut o = format!(
        "What one op of the API costs alone ({} users, {} orders): instructions\n\n\
         | op | flush of it alone | …after an upgrade | unbatched call | …after an upgrade |\n\
         |---|---:|---:|---:|---:|\n",
        f.users, f.orders
    );
    for x in &f.ops {
        o.push_str(&format!(
            "| {} | {} | {} | {} | {} |\n",
            x.op, x.flush_warm, x.flush_cold, x.unbatched_warm, x.unbatched_cold
        ));
    }
    o.push_str(&format!(
        "\nmost expensive: {} instructions; the smallest budget the canister accepts: {} ({:.0}× it)\n",
        f.most_expensive,
        f.floor,
        f.floor as f64 / f.most_expensive.max(1) as f64
    ));
    o
}
