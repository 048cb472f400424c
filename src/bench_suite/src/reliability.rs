//! Reliability scenarios: the batched write path under the attacks and mistakes that used to
//! stop it or make it say something false (a heavy op, a heavy delete built by a stranger, an op
//! that makes every flush trap, one at the tail of a long queue while submits keep coming and
//! three among 200, upgrades with thousands of pending ops, a full queue, a `COMMIT` that one op
//! makes fail, PRAGMAs that would change the connection, a read-only database, ops whose cost
//! varies at the largest budget, a stranger flooding an open canister, strangers calling queries
//! as updates, the smallest budget; and, in `reliability/careless.rs`, a careless controller's and an
//! attacker's: temporary objects, SQL on the library's tables, unsafe settings, strangers'
//! large calls from canisters, the dearest op at the smallest budget on a large table, a
//! memory allocation without headroom, a writer filling the key store), each run on the
//! deployable canister on the engine. For
//! each: ops acknowledged, committed and failed, ops failed without a cause of their own (an
//! ordinary op that failed: must be 0), acknowledged ops lost (no outcome after the queue
//! drained) and altered (an order stored with other bits than submitted), calls refused,
//! trapped messages, and the timer runs (about one per round) until the queue was empty again.
//! Lost, altered and failed without a cause must be 0.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::ops::Range;
use std::path::Path;

use anyhow::{Result, bail, ensure};
use bench_api::schema;
use bench_api::*;
use candid::Principal;
use offline_engine::{Engine, EngineConfig, InstructionLimits, Program, Settings, SubnetKind};
use serde::{Deserialize, Serialize};

use crate::analysis::fmt_u;
use crate::client::{CONTROLLER, Client, STRANGER, program_at};
use crate::progress::Progress;

mod careless;
mod scenarios;

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
struct Lab<'a> {
    engine: &'a Engine,
    program: &'a Program,
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
    let mut c = Client::install_program(lab.engine, lab.program, (setup.args)(), settings);
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
    let engine = Engine::new(EngineConfig::default())?;
    let program = program_at(&engine, wasm);
    let lab = Lab {
        engine: &engine,
        program: &program,
    };
    scenarios::SCENARIOS
        .iter()
        .chain(&careless::SCENARIOS)
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

/// Upgrades the canister to the smallest budget ([`bench_api::MIN_FLUSH_BUDGET`]): the
/// upgrade's instructions.
fn upgrade_to_floor(c: &mut Client) -> Result<u64> {
    let exec = c.upgrade(Some(InitArgs {
        flush_instruction_budget: Some(MIN_FLUSH_BUDGET),
        ..Default::default()
    }));
    ensure!(!exec.result.is_trap(), "upgrade: {:?}", exec.result);
    let budget = c.settings().flush_instruction_budget;
    ensure!(
        budget == MIN_FLUSH_BUDGET,
        "the budget is {budget}, not {MIN_FLUSH_BUDGET}"
    );
    Ok(exec.instructions)
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
    offline_engine::Canister::install(lab.engine, lab.program, &arg, Settings::default()).is_err()
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
    let engine = Engine::new(EngineConfig::default())?;
    let program = program_at(&engine, wasm);
    let lab = Lab {
        engine: &engine,
        program: &program,
    };
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

/// What an op costs on the schema before the index on `orders.user_id`, warm (the same rows,
/// the canister's default budget: nothing interrupts it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnindexedCost {
    /// The method.
    pub op: String,
    /// Instructions of a flush of this op alone.
    pub flush_warm: u64,
    /// Instructions of the unbatched call.
    pub unbatched_warm: u64,
}

/// The measurement behind [`bench_api::MIN_FLUSH_BUDGET`], on the schema the canister deploys.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BudgetFloor {
    /// Users of the fixture the ops ran on.
    pub users: u64,
    /// Orders of the fixture (10 per user).
    pub orders: u64,
    /// Per op of the API, on the canister's schema, at the budget [`BudgetFloor::floor`].
    pub ops: Vec<OpCost>,
    /// The largest figure of `ops`.
    pub most_expensive: u64,
    /// `bench_api::MIN_FLUSH_BUDGET`.
    pub floor: u64,
    /// `bench_api::MIN_FLUSH_BUDGET_MARGIN`.
    pub margin: u64,
    /// `create_order` and `delete_user_orders` on the same rows without the index on
    /// `orders.user_id` (the schema of a canister installed before it had the index).
    pub unindexed: Vec<UnindexedCost>,
    /// Instructions of the upgrade that created the index over the existing orders
    /// (`pre_upgrade` and `post_upgrade`).
    pub index_upgrade: u64,
    /// Instructions of an upgrade once the index exists.
    pub plain_upgrade: u64,
    /// Instructions per op of a client batch (`execute_batch_packed`) of
    /// [`BATCH_OF_ORDERS`] `create_order`, warm, without the index.
    pub batch_order_unindexed: u64,
    /// The same with the index.
    pub batch_order_indexed: u64,
}

impl BudgetFloor {
    /// Whether the most expensive op times the margin fits the floor: no ordinary op of the
    /// workload comes near being interrupted at the smallest budget.
    pub fn fits(&self) -> bool {
        self.most_expensive.saturating_mul(self.margin) <= self.floor
    }
}

/// Orders per user of the ic-rusqlite fixture at every scale.
const ORDERS_PER_USER: usize = fixture::FULL_SCALE_ORDERS / fixture::FULL_SCALE_USERS;

/// Orders of the client batch whose cost per op [`budget_floor`] measures.
pub const BATCH_OF_ORDERS: usize = 1_000;

/// Users and orders of the ic-rusqlite benchmark's full scale divided by `divisor` (10 orders
/// per user at every scale); an error unless `divisor` divides it and leaves 100 users at least.
pub fn floor_scale(divisor: usize) -> Result<(usize, usize)> {
    ensure!(
        divisor >= 1
            && fixture::FULL_SCALE_USERS.is_multiple_of(divisor)
            && fixture::FULL_SCALE_USERS / divisor >= 100,
        "the divisor must divide {} and leave 100 users at least: {divisor}",
        fixture::FULL_SCALE_USERS
    );
    Ok((
        fixture::FULL_SCALE_USERS / divisor,
        fixture::FULL_SCALE_ORDERS / divisor,
    ))
}

/// `sql` through the controller's `execute_sql`: its outcome.
fn controller_sql(c: &mut Client, sql: &str) -> Result<Outcome> {
    let r: WriteResult = c.update(
        "execute_sql",
        (vec![SqlStatement {
            sql: sql.to_owned(),
            params: vec![],
        }],),
    );
    Result::from(r).map_err(|e| anyhow::anyhow!("{sql}: {e:?}"))
}

/// Writes the ic-rusqlite fixture's `users` users and `orders` orders (10 per user at every
/// scale) through client batches of the most ops a batch may hold; every op must commit.
fn load_fixture(c: &mut Client, users: usize, orders: usize) -> Result<()> {
    let user_ops: Vec<UserOrderOp> = (1..=users)
        .map(|id| {
            let (username, email) = fixture::user(id);
            UserOrderOp::CreateUser { username, email }
        })
        .collect();
    let order_ops: Vec<UserOrderOp> = (1..=orders)
        .map(|i| {
            let (user_id, amount) = fixture::order(i, users);
            UserOrderOp::CreateOrder { user_id, amount }
        })
        .collect();
    for ops in user_ops
        .chunks(MAX_CLIENT_BATCH)
        .chain(order_ops.chunks(MAX_CLIENT_BATCH))
    {
        packed_batch(c, ops)?;
    }
    Ok(())
}

/// One client batch (`execute_batch_packed`) of `ops`, every one of which must commit; its
/// instructions.
fn packed_batch(c: &mut Client, ops: &[UserOrderOp]) -> Result<u64> {
    let packed = serde_bytes::ByteBuf::from(packed::encode_ops(ops));
    let exec = c.raw_update(CONTROLLER, "execute_batch_packed", (packed,));
    let Some(reply) = exec.result.reply() else {
        bail!("execute_batch_packed: {:?}", exec.result);
    };
    let outcomes = crate::engine_runs::packed_outcomes(reply, ops.len())?;
    ensure!(
        outcomes
            .iter()
            .all(|o| matches!(o, Outcome::Committed { .. })),
        "a client batch of {} ops: an op did not commit",
        ops.len()
    );
    Ok(exec.instructions)
}

/// Runs `method` once with `arg`, batched (submitted, then a flush of it alone) or unbatched;
/// fails unless it committed and changed `rows` rows. Its instructions: the flush's, or the
/// whole call's.
fn op_alone(c: &mut Client, method: &str, arg: &[u8], batched: bool, rows: u64) -> Result<u64> {
    if batched {
        let submit = format!("submit_{method}");
        let exec = c.canister.update_as(CONTROLLER, &submit, arg)?;
        ensure!(exec.result.reply().is_some(), "{submit}: {:?}", exec.result);
        let ticket = crate::client::replied_or_refused::<Ticket>(&submit, &exec)
            .map_err(|e| anyhow::anyhow!("{submit}: {e:?}"))?;
        let flushed = Result::from(c.update::<FlushResult, _>("flush", ()))
            .map_err(|e| anyhow::anyhow!("flush: {e:?}"))?;
        ensure!(
            flushed.executed == 1 && flushed.committed == 1,
            "{method} alone did not commit: {flushed:?}"
        );
        let status = c.ticket(ticket);
        ensure!(
            matches!(status, TicketStatus::Committed { rows_changed, .. } if rows_changed == rows),
            "{method} alone: {status:?}, not {rows} rows committed"
        );
        Ok(flushed.instructions)
    } else {
        let exec = c.canister.update_as(CONTROLLER, method, arg)?;
        ensure!(exec.result.reply().is_some(), "{method}: {:?}", exec.result);
        let outcome: WriteResult = crate::client::decode(method, &exec);
        ensure!(
            matches!(
                outcome,
                WriteResult::Ok(Outcome::Committed { rows_changed, .. }) if rows_changed == rows
            ),
            "{method}: {outcome:?}, not {rows} rows committed"
        );
        Ok(exec.instructions)
    }
}

/// Measures what each op of the users/orders API costs alone on the schema the canister
/// deploys, filled with the ic-rusqlite benchmark's full scale divided by `divisor`
/// ([`floor_scale`]; the reference workload is the full scale, divisor 1), to check the
/// smallest flush budget.
///
/// It builds the fixture as a canister installed before the schema had the index on
/// `orders.user_id` holds it (the index dropped, then the rows), measures `create_order`,
/// `delete_user_orders` and a client batch of orders there, upgrades (which creates the
/// index: the upgrade's instructions are its cost), measures the client batch again, and
/// upgrades to the smallest budget ([`bench_api::MIN_FLUSH_BUDGET`]). There it runs each op
/// of the API alone, batched (a flush of it alone) and unbatched, warm and as the first write
/// after an upgrade; every one must commit, with the rows it should change.
pub fn budget_floor(wasm: &Path, divisor: usize, progress: &mut Progress) -> Result<BudgetFloor> {
    let (users, orders) = floor_scale(divisor)?;
    progress.step(&format!(
        "budget floor: {users} users and {orders} orders without the index (a canister installed before it)"
    ));
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
    let index = schema::ORDERS_USER_ID_INDEX;
    let dropped = controller_sql(&mut c, &format!("DROP INDEX {index}"))?;
    ensure!(
        matches!(dropped, Outcome::Committed { .. }),
        "the canister's schema has no index {index} to drop: {dropped:?}"
    );
    load_fixture(&mut c, users, orders)?;
    // Fresh arguments on rows the fixture has: a new user, an order of the last user, the
    // amount of the last order, the orders of a user (a different user each time, from the
    // first, so that every delete finds its 10). The client batches write orders for the upper
    // half of the users, which no delete reaches.
    let mut next_user = 0i64;
    let mut arg = |method: &str| -> Result<Vec<u8>> {
        next_user += 1;
        Ok(match method {
            "create_user" => candid::encode_args((
                format!("floor{next_user}"),
                format!("floor{next_user}@example.com"),
            ))?,
            "create_order" => candid::encode_args((users as i64, 1.5f64))?,
            "update_order_amount" => candid::encode_args((orders as i64, 2.5f64))?,
            _ => candid::encode_args((next_user,))?,
        })
    };
    let rows = |method: &str| match method {
        "delete_user_orders" => ORDERS_PER_USER as u64,
        _ => 1,
    };
    let batch: Vec<UserOrderOp> = (0..BATCH_OF_ORDERS)
        .map(|i| UserOrderOp::CreateOrder {
            user_id: (users - i % (users / 2)) as i64,
            amount: i as f64 + 0.25,
        })
        .collect();
    // A warm-up batch, then the measured one.
    let warm_batch = |c: &mut Client| -> Result<u64> {
        packed_batch(c, &batch)?;
        Ok(packed_batch(c, &batch)? / BATCH_OF_ORDERS as u64)
    };

    progress.step("budget floor: without the index");
    let batch_order_unindexed = warm_batch(&mut c)?;
    let mut unindexed = Vec::new();
    for method in ["create_order", "delete_user_orders"] {
        op_alone(&mut c, method, &arg(method)?, false, rows(method))?;
        unindexed.push(UnindexedCost {
            op: method.to_owned(),
            flush_warm: op_alone(&mut c, method, &arg(method)?, true, rows(method))?,
            unbatched_warm: op_alone(&mut c, method, &arg(method)?, false, rows(method))?,
        });
    }

    progress.step("budget floor: the upgrade that creates the index");
    let created = c.upgrade(None);
    ensure!(
        !created.result.is_trap(),
        "the upgrade that creates the index: {:?}",
        created.result
    );
    let index_upgrade = created.instructions;
    let exists = controller_sql(&mut c, &format!("CREATE INDEX {index} ON orders(user_id)"))?;
    ensure!(
        matches!(&exists, Outcome::Failed(OpError { code: 1, message }) if message.contains("already exists")),
        "the upgrade did not create {index}: {exists:?}"
    );
    let batch_order_indexed = warm_batch(&mut c)?;
    let plain_upgrade = upgrade_to_floor(&mut c)?;

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
                let exec = c.upgrade(None);
                ensure!(!exec.result.is_trap(), "upgrade: {:?}", exec.result);
            } else {
                // Warm: the same op once before, unmeasured.
                op_alone(&mut c, method, &arg(method)?, false, rows(method))?;
            }
            figures[slot] = op_alone(&mut c, method, &arg(method)?, batched, rows(method))?;
        }
        out.push(OpCost {
            op: method.to_owned(),
            flush_warm: figures[0],
            flush_cold: figures[1],
            unbatched_warm: figures[2],
            unbatched_cold: figures[3],
        });
    }
    ensure!(c.traps().is_empty(), "a message trapped: {:?}", c.traps());
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
        floor: MIN_FLUSH_BUDGET,
        margin: MIN_FLUSH_BUDGET_MARGIN,
        unindexed,
        index_upgrade,
        plain_upgrade,
        batch_order_unindexed,
        batch_order_indexed,
    })
}

/// The tables of [`BudgetFloor`], in Markdown, and whether the floor holds.
pub fn render_budget_floor(f: &BudgetFloor) -> String {
    let mut o = format!(
        "What one op of the API costs alone on the canister's schema ({} users, {} orders, \
         {ORDERS_PER_USER} per user), at the smallest budget ({}): instructions\n\n\
         | op | flush of it alone | …after an upgrade | unbatched call | …after an upgrade |\n\
         |---|---:|---:|---:|---:|\n",
        fmt_u(f.users),
        fmt_u(f.orders),
        fmt_u(f.floor)
    );
    for x in &f.ops {
        o.push_str(&format!(
            "| {} | {} | {} | {} | {} |\n",
            x.op,
            fmt_u(x.flush_warm),
            fmt_u(x.flush_cold),
            fmt_u(x.unbatched_warm),
            fmt_u(x.unbatched_cold)
        ));
    }
    let needed = f.most_expensive.saturating_mul(f.margin);
    o.push_str(&format!(
        "\nmost expensive: {} instructions; × {} (the margin) = {}, {} the smallest budget the \
         canister accepts, {} ({:.1}× the most expensive)\n",
        fmt_u(f.most_expensive),
        f.margin,
        fmt_u(needed),
        if f.fits() { "within" } else { "ABOVE" },
        fmt_u(f.floor),
        f.floor as f64 / f.most_expensive.max(1) as f64
    ));
    o.push_str(
        "\nWithout the index on orders.user_id (a canister installed before it), warm, same rows:\n\n\
         | op | flush of it alone | unbatched call |\n|---|---:|---:|\n",
    );
    for x in &f.unindexed {
        o.push_str(&format!(
            "| {} | {} | {} |\n",
            x.op,
            fmt_u(x.flush_warm),
            fmt_u(x.unbatched_warm)
        ));
    }
    o.push_str(&format!(
        "\nA client batch of {} create_order (execute_batch_packed), per op: {} instructions \
         without the index, {} with it.\nThe upgrade that created the index over {} orders: {} \
         instructions; an upgrade once it exists: {}.\n",
        fmt_u(BATCH_OF_ORDERS as u64),
        fmt_u(f.batch_order_unindexed),
        fmt_u(f.batch_order_indexed),
        fmt_u(f.orders),
        fmt_u(f.index_upgrade),
        fmt_u(f.plain_upgrade)
    ));
    o
}
