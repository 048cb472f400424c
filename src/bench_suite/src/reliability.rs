//! Reliability scenarios: the batched write path under the attacks and mistakes that used to
//! stop it or make it say something false (a heavy op, a heavy delete built by a stranger, an op
//! that makes every flush trap, one at the tail of a long queue while submits keep coming and
//! three among 200, upgrades with thousands of pending ops, a full queue, a `COMMIT` that one op
//! makes fail, PRAGMAs that would change the connection, a read-only database, ops whose cost
//! varies at the largest budget, a stranger flooding an open canister, strangers calling queries
//! as updates, the smallest budget; and, in `reliability/careless.rs`, a careless controller's and an
//! attacker's: temporary objects, SQL on the library's tables, unsafe settings, strangers'
//! large calls from canisters, the dearest op at the smallest budget on a large table, a
//! memory allocation without headroom, a writer filling the key store), and, in
//! `reliability/exact_types.rs`, a careless client's right data in the wrong shape (a batch key
//! or parameter of another Candid type, failure messages too long for one reply, padded
//! varints), each run on the deployable canister on the engine. For
//! each: ops acknowledged, committed and failed, ops failed without a cause of their own (an
//! ordinary op that failed: must be 0), acknowledged ops lost (no outcome after the queue
//! drained) and altered (an order stored with other bits than submitted), calls refused,
//! trapped messages, and the timer runs (about one per round) until the queue was empty again.
//! Lost, altered and failed without a cause must be 0.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::ops::Range;
use std::path::Path;

use anyhow::{Result, bail, ensure};
use bench_api::*;
use candid::Principal;
use offline_engine::{Engine, EngineConfig, InstructionLimits, Program, Settings, SubnetKind};
use serde::{Deserialize, Serialize};

use crate::client::{CONTROLLER, Client, STRANGER, program_at};
use crate::progress::Progress;

mod budget_floor;
mod careless;
mod exact_types;
mod scenarios;

use budget_floor::controller_sql;
pub use budget_floor::{
    BATCH_OF_ORDERS, BudgetFloor, OpCost, UnindexedCost, budget_floor, floor_scale,
    render_budget_floor,
};

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
    /// Ops applied more than once (a resent keyed batch that ran again; must be 0).
    #[serde(default)]
    pub applied_twice: u64,
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
    /// Orders of one user (user, orders) that keyed client batches committed outside the
    /// queue: acknowledged and committed, and every order of that user stored beyond them and
    /// the queued ones counts as applied twice.
    keyed: Option<(i64, u64)>,
    /// Ops of client batches outside the queue that failed with an outcome of their own (the
    /// scenario's culprits): acknowledged and failed.
    keyed_failed: u64,
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

    /// The controller's orders of user 1, with the amounts of `range`.
    fn orders(&mut self, c: &mut Client, range: Range<usize>) {
        self.orders_as(c, CONTROLLER, 1, range);
    }

    /// Orders of `user_id` by `caller`, with the amounts of `range`.
    fn orders_as(&mut self, c: &mut Client, caller: &[u8], user_id: i64, range: Range<usize>) {
        for i in range {
            self.order(c, caller, user_id, amount(i));
        }
    }

    /// The controller's order of `user_id` (amount 1.0) whose stored bits are not checked: it
    /// fails, or a later delete removes it. Its ticket.
    fn unchecked_order(&mut self, c: &mut Client, user_id: i64) -> Result<Ticket> {
        let r = c.submit_as(CONTROLLER, "submit_create_order", (user_id, 1.0f64));
        let ticket = Result::from(r).map_err(|e| anyhow::anyhow!("{e:?}"))?;
        self.tickets.push(ticket);
        Ok(ticket)
    }

    /// `orders` orders of `user_id` that keyed client batches committed.
    fn keyed(&mut self, user_id: i64, orders: u64) {
        self.keyed = Some((user_id, orders));
    }

    /// `ops` ops of client batches that failed with their own outcome (culprits).
    fn keyed_failed(&mut self, ops: u64) {
        self.keyed_failed += ops;
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
        let (mut acknowledged, mut applied_twice) = (self.tickets.len() as u64, 0);
        acknowledged += self.keyed_failed;
        failed += self.keyed_failed;
        if let Some((user, keyed)) = self.keyed {
            let queued = self.orders.values().filter(|(u, _)| *u == user).count() as u64;
            let stored = c.orders_of(user).len() as u64;
            applied_twice = stored.saturating_sub(keyed + queued);
            acknowledged += keyed;
            committed += keyed;
        }
        Ok(ScenarioResult {
            name: name.into(),
            description: description.into(),
            acknowledged,
            committed,
            failed,
            failed_without_cause,
            lost,
            altered,
            refused: self.refused,
            applied_twice,
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

/// Budget of the scenarios that no ordinary flush comes near (10 B).
const LARGE_BUDGET: u64 = 10_000_000_000;

/// The canister a scenario starts from.
#[derive(Clone, Copy)]
struct Setup {
    /// Its install arguments.
    args: fn() -> InitArgs,
    /// Its update (and timer) message limit when smaller than an application subnet's.
    message_limit: Option<u64>,
    /// Users the controller creates first, by name.
    users: &'static [&'static str],
    /// Whether [`WRITER`] is registered.
    writer: bool,
}

/// Most scenarios' canister: the large budget, one user, no writer.
const PLAIN: Setup = Setup {
    args: || args(LARGE_BUDGET),
    message_limit: None,
    users: &["a"],
    writer: false,
};

/// The engine and the wasm the scenarios install.
struct Lab {
    engine: Engine,
    program: Program,
}

impl Lab {
    /// A fresh engine and the deployable wasm at `wasm` loaded on it.
    fn new(wasm: &Path) -> Result<Lab> {
        let engine = Engine::new(EngineConfig::default())?;
        let program = program_at(&engine, wasm);
        Ok(Lab { engine, program })
    }
}

/// Values a scenario measured, by the name of their placeholder in its description.
type Notes = Vec<(&'static str, String)>;

/// One scenario: one row of the table.
struct Scenario {
    /// Short name.
    name: &'static str,
    /// What was done; `{name}` stands for the value `act` notes under that name.
    description: &'static str,
    /// The progress line.
    step: &'static str,
    /// The canister it starts from.
    setup: Setup,
    /// What is done, with the checks along the way (an error if one fails); once it returns,
    /// the queue drains and the ledger is counted.
    act: fn(&Lab, &mut Client, &mut Ledger) -> Result<Notes>,
}

/// Installs the canister of `setup`.
fn install(lab: &Lab, setup: &Setup) -> Result<Client> {
    let settings = setup.message_limit.map_or_else(Settings::default, limited);
    let mut c = Client::install_program(&lab.engine, &lab.program, (setup.args)(), settings);
    for name in setup.users {
        c.create_user(name);
    }
    if setup.writer {
        writer(&mut c)?;
    }
    Ok(c)
}

/// Runs `s` on a canister of its own: its row.
fn run(lab: &Lab, s: &Scenario, progress: &mut Progress) -> Result<ScenarioResult> {
    progress.step(&format!("reliability: {}", s.step));
    let mut c = install(lab, &s.setup)?;
    let mut l = Ledger::default();
    let notes = (s.act)(lab, &mut c, &mut l)?;
    let description = notes
        .iter()
        .fold(s.description.to_owned(), |d, (name, value)| {
            d.replace(&format!("{{{name}}}"), value)
        });
    l.finish(&mut c, s.name, &description)
}

/// Runs every scenario on the deployable wasm at `wasm`, in the order of the table.
pub fn run_all(wasm: &Path, progress: &mut Progress) -> Result<Vec<ScenarioResult>> {
    let lab = Lab::new(wasm)?;
    scenarios::SCENARIOS
        .iter()
        .chain(&careless::SCENARIOS)
        .chain(&exact_types::SCENARIOS)
        .map(|s| run(&lab, s, progress))
        .collect()
}

/// Registers [`WRITER`].
fn writer(c: &mut Client) -> Result<()> {
    add_writer(c, WRITER)
}

/// Registers `principal` as a writer.
fn add_writer(c: &mut Client, principal: &[u8]) -> Result<()> {
    let r: AdminResult = c.update("add_writers", (vec![Principal::from_slice(principal)],));
    ensure!(r == AdminResult::Ok(()), "add_writers: {r:?}");
    Ok(())
}

/// Upgrades the canister with its arguments; an error if the upgrade trapped.
fn upgrade(c: &mut Client) -> Result<()> {
    ensure!(!c.upgrade(None).result.is_trap(), "an upgrade trapped");
    Ok(())
}

/// Makes the database read-only (or writable again).
fn read_only(c: &mut Client, on: bool) -> Result<()> {
    let r: AdminResult = c.update("set_read_only", (on,));
    ensure!(r == AdminResult::Ok(()), "set_read_only: {r:?}");
    Ok(())
}

/// Checks that the queue is stalled (`what`: while what): `pending` ops wait, none failed, the
/// alarm is raised.
fn stalled(c: &mut Client, pending: u64, what: &str) -> Result<()> {
    let s = c.stats();
    ensure!(
        s.failed == 0 && s.pending == pending && s.alarm.is_some(),
        "{what}: {s:?}"
    );
    Ok(())
}

/// Whether installing with `args` is refused.
fn install_refused(lab: &Lab, args: InitArgs) -> bool {
    let arg = match candid::encode_one(Some(args)) {
        Ok(arg) => arg,
        Err(_) => return false,
    };
    offline_engine::Canister::install(&lab.engine, &lab.program, &arg, Settings::default()).is_err()
}

/// `execute_sql` of `sql` by the controller: whether it was refused with SQLITE_AUTH (23).
fn refused_now(c: &mut Client, sql: &str) -> Result<bool> {
    Ok(matches!(
        controller_sql(c, sql)?,
        Outcome::Failed(OpError { code: 23, .. })
    ))
}

/// The message limit of the varying-cost run.
const VARYING_LIMIT: u64 = 200_000_000;
/// Ops of the varying-cost run.
const VARYING_OPS: usize = 240;

/// The largest budget for a message `limit`: three budgets plus a fifth of the limit fit it, as
/// the canister's rule has it for 40 B.
const fn largest_budget(limit: u64) -> u64 {
    (limit - limit / 5) / 3
}

/// The varying-cost run's canister: the largest budget for [`VARYING_LIMIT`].
const VARYING: Setup = Setup {
    args: || args(largest_budget(VARYING_LIMIT)),
    message_limit: Some(VARYING_LIMIT),
    users: &[],
    writer: false,
};

/// [`VARYING_OPS`] controller inserts of varying cost (0 to 1.3 budgets at random) on the
/// [`VARYING`] canister, then timer runs until the queue drained: the most instructions one
/// message used.
fn varying_cost(c: &mut Client, l: &mut Ledger) -> u64 {
    let rows = largest_budget(VARYING_LIMIT) * 13 / 10 / VARYING_ROW_INSTRUCTIONS;
    for tag in 0..VARYING_OPS {
        l.ordinary_sql(c, &varying(rows, tag));
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
    most
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
    let lab = Lab::new(wasm)?;
    let budget = 1_000_000_000;
    let mut c = install(
        &lab,
        &Setup {
            args: || args(1_000_000_000),
            ..PLAIN
        },
    )?;
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
    let mut v = install(&lab, &VARYING)?;
    let most = varying_cost(&mut v, &mut Ledger::default());
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
        varying_limit: VARYING_LIMIT,
        varying_budget: largest_budget(VARYING_LIMIT),
        varying_ops: VARYING_OPS as u64,
        varying_flushes: s.flushes,
        varying_capped: s.capped_flushes,
        varying_trapped: v.traps().len() as u64,
        varying_most: most,
    })
}

/// Whether every scenario lost and altered nothing, and failed no op without a cause of its own.
pub fn all_safe(results: &[ScenarioResult]) -> bool {
    results.iter().all(|r| {
        r.lost == 0 && r.altered == 0 && r.failed_without_cause == 0 && r.applied_twice == 0
    })
}
