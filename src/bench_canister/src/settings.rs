//! The canister's settings: install/upgrade arguments merged over the current settings, checked
//! against the IC's message limit.

use batch_core::Config;
use bench_api::{InitArgs, MIN_FLUSH_BUDGET, MIN_PENDING_BYTES, Settings, WriteAccess};

/// Instructions an update or timer message may use on an application subnet
/// (`MAX_INSTRUCTIONS_PER_MESSAGE` in the replica's `rs/config/src/subnet_config.rs`).
pub const MESSAGE_LIMIT: u64 = 40_000_000_000;

/// What a flush may not use of [`MESSAGE_LIMIT`] beyond [`Config::max_flush_instructions`]:
/// rollback of an interrupted op, `COMMIT`, the outcome bookkeeping and the rest of the message
/// (Candid, the call itself). A flush re-applies ops after an interrupt within 3 × the budget
/// from its start, whatever they cost (batch_core's `Budget::flush_limit`). Measured on the
/// engine (`bench-suite reliability`, "the worst-case flush" in `bench/REPORT.md`): with a
/// budget of 1 billion, a flush that commits one budget of inserts and interrupts a heavy op
/// behind them uses 2.26 billion in all, and an op interrupted alone at 2 billion is rolled back
/// for 2.5 million more; ops whose cost varies, at the largest budget for a message limit scaled
/// down to 200 million (budget 53.3 million), used at most 3.008 × the budget per message. The
/// canister keeps 8 billion anyway, for what a measurement on one workload cannot promise.
pub const FLUSH_MARGIN: u64 = 8_000_000_000;

/// The largest `flush_instruction_budget` the canister accepts: three of it (the flush's worst
/// case) plus [`FLUSH_MARGIN`] fit in [`MESSAGE_LIMIT`].
pub const MAX_FLUSH_BUDGET: u64 = (MESSAGE_LIMIT - FLUSH_MARGIN) / 3;

/// Shortest period of the flush timer: the IC runs timers at most once per round (about a
/// second), and ic-cdk-timers' repeating timers with a shorter period run more than once in a
/// round when rounds are slow.
pub const MIN_TIMER_PERIOD_NS: u64 = 1_000_000_000;

/// Everything a controller sets: the queue's configuration and who may write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CanisterSettings {
    /// The queue's configuration.
    pub config: Config,
    /// Who may write.
    pub write_access: WriteAccess,
}

impl Default for CanisterSettings {
    fn default() -> Self {
        CanisterSettings {
            config: Config::default(),
            write_access: WriteAccess::Restricted,
        }
    }
}

/// A `nat64` setting as a `usize`, refused (not truncated) when it does not fit, as on wasm32.
fn as_usize(name: &str, value: u64) -> Result<usize, String> {
    usize::try_from(value)
        .map_err(|_| format!("{name} = {value} does not fit in {} bits", usize::BITS))
}

impl CanisterSettings {
    /// `args` over `self`: every field present in `args` replaces the current value, every
    /// absent field keeps it. Fails, with the reason, on a value that does not fit, an invalid
    /// queue configuration, a flush budget above [`MAX_FLUSH_BUDGET`] or below
    /// [`MIN_FLUSH_BUDGET`], a `max_pending_bytes` below [`MIN_PENDING_BYTES`], or an
    /// `outcome_capacity` below `max_pending`.
    pub fn merged(&self, args: &InitArgs) -> Result<CanisterSettings, String> {
        let current = &self.config;
        let size = |name: &str, value: Option<u64>, current: usize| {
            value.map_or(Ok(current), |v| as_usize(name, v))
        };
        let max_delay_ns = match args.max_delay_ms {
            None => current.max_delay_ns,
            Some(ms) => ms
                .checked_mul(1_000_000)
                .ok_or_else(|| format!("max_delay_ms = {ms} overflows 64-bit nanoseconds"))?,
        };
        let config = Config {
            flush_size: size("flush_size", args.flush_size, current.flush_size)?,
            max_delay_ns,
            max_pending: size("max_pending", args.max_pending, current.max_pending)?,
            max_pending_bytes: size(
                "max_pending_bytes",
                args.max_pending_bytes,
                current.max_pending_bytes,
            )?,
            flush_instruction_budget: args
                .flush_instruction_budget
                .unwrap_or(current.flush_instruction_budget),
            outcome_capacity: size(
                "outcome_capacity",
                args.outcome_capacity,
                current.outcome_capacity,
            )?,
            history_capacity: current.history_capacity,
            coalesce_rows: size("coalesce_rows", args.coalesce_rows, current.coalesce_rows)?,
        };
        config.validate().map_err(|e| e.to_string())?;
        if config.flush_instruction_budget < MIN_FLUSH_BUDGET {
            return Err(format!(
                "flush_instruction_budget = {} is below the smallest budget, {MIN_FLUSH_BUDGET}: an ordinary op of the users/orders workload could be interrupted (the most expensive one, measured, with headroom)",
                config.flush_instruction_budget
            ));
        }
        if (config.max_pending_bytes as u64) < MIN_PENDING_BYTES {
            return Err(format!(
                "max_pending_bytes = {} is below {MIN_PENDING_BYTES}, the size of the largest op of the API (a create_user with a username and an email at their limits): the queue would refuse it",
                config.max_pending_bytes
            ));
        }
        if config.outcome_capacity < config.max_pending {
            return Err(format!(
                "outcome_capacity = {} is below max_pending = {}: a flush of a full queue would evict outcomes it has just recorded",
                config.outcome_capacity, config.max_pending
            ));
        }
        if config.flush_instruction_budget > MAX_FLUSH_BUDGET {
            return Err(format!(
                "flush_instruction_budget = {} leaves no headroom: a flush may use 3 × the budget ({}) plus a margin of {FLUSH_MARGIN} for rollback, COMMIT and the rest of the message, over the {MESSAGE_LIMIT} instructions of a message; the largest budget is {MAX_FLUSH_BUDGET}",
                config.flush_instruction_budget,
                config.max_flush_instructions(),
            ));
        }
        Ok(CanisterSettings {
            config,
            write_access: args.write_access.unwrap_or(self.write_access),
        })
    }

    /// The settings as the `settings` query reports them, with the database's read-only mode.
    pub fn to_candid(&self, read_only: bool) -> Settings {
        let c = &self.config;
        Settings {
            flush_size: c.flush_size as u64,
            max_delay_ms: c.max_delay_ns / 1_000_000,
            max_pending: c.max_pending as u64,
            max_pending_bytes: c.max_pending_bytes as u64,
            flush_instruction_budget: c.flush_instruction_budget,
            outcome_capacity: c.outcome_capacity as u64,
            coalesce_rows: c.coalesce_rows as u64,
            write_access: self.write_access,
            read_only,
        }
    }

    /// The flush timer's period: `max_delay`, at least [`MIN_TIMER_PERIOD_NS`].
    pub fn timer_period_ns(&self) -> u64 {
        self.config.max_delay_ns.max(MIN_TIMER_PERIOD_NS)
    }
}
