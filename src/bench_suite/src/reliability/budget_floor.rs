//! The measurement behind [`bench_api::MIN_FLUSH_BUDGET`]: what each op of the users/orders API
//! costs alone on the schema the canister deploys, filled with the ic-rusqlite benchmark's
//! fixture (`bench-suite budget-floor`); and the fixture's loader and the controller's SQL, which
//! the scenarios use too.

use std::path::Path;

use anyhow::{Result, bail, ensure};
use bench_api::schema;
use bench_api::*;
use offline_engine::{Engine, EngineConfig, Program, Settings};
use serde::{Deserialize, Serialize};

use crate::analysis::fmt_u;
use crate::client::{CONTROLLER, Client, program_at};
use crate::progress::Progress;

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
pub(super) fn controller_sql(c: &mut Client, sql: &str) -> Result<Outcome> {
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
pub(super) fn load_fixture(c: &mut Client, users: usize, orders: usize) -> Result<()> {
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
    crate::engine_runs::ensure_all_committed("execute_batch_packed", &outcomes, ops.len())?;
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
    let mut c = unindexed_canister(&engine, &program, users, orders)?;
    let mut args = FreshArgs {
        users,
        orders,
        next_user: 0,
    };
    let batch = batch_of_orders(users);

    progress.step("budget floor: without the index");
    let batch_order_unindexed = warm_batch(&mut c, &batch)?;
    let mut unindexed = Vec::new();
    for method in ["create_order", "delete_user_orders"] {
        args.op_alone(&mut c, method, false)?;
        unindexed.push(UnindexedCost {
            op: method.to_owned(),
            flush_warm: args.op_alone(&mut c, method, true)?,
            unbatched_warm: args.op_alone(&mut c, method, false)?,
        });
    }

    progress.step("budget floor: the upgrade that creates the index");
    let index_upgrade = create_index(&mut c)?;
    let batch_order_indexed = warm_batch(&mut c, &batch)?;
    let plain_upgrade = upgrade_to_floor(&mut c)?;

    let mut out = Vec::new();
    for method in [
        "create_user",
        "create_order",
        "update_order_amount",
        "delete_user_orders",
    ] {
        progress.step(&format!("budget floor: {method}"));
        out.push(op_cost(&mut c, &mut args, method)?);
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

/// A canister holding the fixture of `users` and `orders` as one installed before the schema
/// had the index on `orders.user_id` holds it: the index dropped, then the rows.
fn unindexed_canister(
    engine: &Engine,
    program: &Program,
    users: usize,
    orders: usize,
) -> Result<Client> {
    let mut c = Client::install_program(
        engine,
        program,
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
    Ok(c)
}

/// The upgrade that creates the index on `orders.user_id`: its instructions; an error unless
/// the index exists after it.
fn create_index(c: &mut Client) -> Result<u64> {
    let index = schema::ORDERS_USER_ID_INDEX;
    let created = c.upgrade(None);
    ensure!(
        !created.result.is_trap(),
        "the upgrade that creates the index: {:?}",
        created.result
    );
    let exists = controller_sql(c, &format!("CREATE INDEX {index} ON orders(user_id)"))?;
    ensure!(
        matches!(&exists, Outcome::Failed(OpError { code: 1, message }) if message.contains("already exists")),
        "the upgrade did not create {index}: {exists:?}"
    );
    Ok(created.instructions)
}

/// The client batch of [`BATCH_OF_ORDERS`] orders for the upper half of the `users` users,
/// which no delete reaches.
fn batch_of_orders(users: usize) -> Vec<UserOrderOp> {
    (0..BATCH_OF_ORDERS)
        .map(|i| UserOrderOp::CreateOrder {
            user_id: (users - i % (users / 2)) as i64,
            amount: i as f64 + 0.25,
        })
        .collect()
}

/// A warm-up client batch of `batch`, then the measured one: its instructions per op.
fn warm_batch(c: &mut Client, batch: &[UserOrderOp]) -> Result<u64> {
    packed_batch(c, batch)?;
    Ok(packed_batch(c, batch)? / BATCH_OF_ORDERS as u64)
}

/// Fresh arguments on rows the fixture has: a new user, an order of the last user, the amount
/// of the last order, the orders of a user (a different user each time, from the first, so
/// that every delete finds its 10).
struct FreshArgs {
    users: usize,
    orders: usize,
    /// Calls made so far: the next user's number.
    next_user: i64,
}

impl FreshArgs {
    /// The next argument of `method`.
    fn arg(&mut self, method: &str) -> Result<Vec<u8>> {
        self.next_user += 1;
        let n = self.next_user;
        Ok(match method {
            "create_user" => {
                candid::encode_args((format!("floor{n}"), format!("floor{n}@example.com")))?
            }
            "create_order" => candid::encode_args((self.users as i64, 1.5f64))?,
            "update_order_amount" => candid::encode_args((self.orders as i64, 2.5f64))?,
            _ => candid::encode_args((n,))?,
        })
    }

    /// [`op_alone`] of `method` with its next argument and the rows it changes.
    fn op_alone(&mut self, c: &mut Client, method: &str, batched: bool) -> Result<u64> {
        let rows = match method {
            "delete_user_orders" => ORDERS_PER_USER as u64,
            _ => 1,
        };
        op_alone(c, method, &self.arg(method)?, batched, rows)
    }
}

/// What `method` costs alone: batched and unbatched, each warm (the same op once before,
/// unmeasured) and as the first write after an upgrade (which empties SQLite's page cache and
/// schema).
fn op_cost(c: &mut Client, args: &mut FreshArgs, method: &str) -> Result<OpCost> {
    let mut figures = [0u64; 4];
    for (slot, (cold, batched)) in [(false, true), (true, true), (false, false), (true, false)]
        .into_iter()
        .enumerate()
    {
        if cold {
            let exec = c.upgrade(None);
            ensure!(!exec.result.is_trap(), "upgrade: {:?}", exec.result);
        } else {
            args.op_alone(c, method, false)?;
        }
        figures[slot] = args.op_alone(c, method, batched)?;
    }
    Ok(OpCost {
        op: method.to_owned(),
        flush_warm: figures[0],
        flush_cold: figures[1],
        unbatched_warm: figures[2],
        unbatched_cold: figures[3],
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

/// Upgrades the canister to the smallest budget ([`bench_api::MIN_FLUSH_BUDGET`]): the
/// upgrade's instructions.
pub(super) fn upgrade_to_floor(c: &mut Client) -> Result<u64> {
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
