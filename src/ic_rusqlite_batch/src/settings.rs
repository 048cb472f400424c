//! Settings: the queue's [`Config`] and who may write, merged from install/upgrade arguments
//! ([`InitArgs`]) and checked against the IC's message limit and the canister's own floors.

use batch_core::Config;

use crate::types::{InitArgs, Settings, WriteAccess};

/// Instructions an update or timer message may use on an application subnet
/// (`MAX_INSTRUCTIONS_PER_MESSAGE` in the replica's `rs/config/src/subnet_config.rs`).
pub const MESSAGE_LIMIT: u64 = 40_000_000_000;

/// What a flush may not use of [`MESSAGE_LIMIT`] beyond [`Config::max_flush_instructions`]:
/// rollback of an interrupted op, `COMMIT`, the outcome bookkeeping and the rest of the message
/// (Candid, the call itself). A flush re-applies ops after an interrupt within 3 × the budget
/// from its start, whatever they cost (batch_core's `Budget::flush_limit`). The reference
/// canister measured at most 3.008 × the budget per message on the offline engine
/// (`bench-suite reliability`, "the worst-case flush" in `bench/REPORT.md`); 8 billion is kept
/// for what a measurement on one workload cannot promise.
pub const FLUSH_MARGIN: u64 = 8_000_000_000;

/// The largest `flush_instruction_budget` accepted: three of it (the flush's worst case) plus
/// [`FLUSH_MARGIN`] fit in [`MESSAGE_LIMIT`].
pub const MAX_FLUSH_BUDGET: u64 = (MESSAGE_LIMIT - FLUSH_MARGIN) / 3;
const _: () = assert!(3 * MAX_FLUSH_BUDGET + FLUSH_MARGIN <= MESSAGE_LIMIT);

/// Shortest period of the flush timer: the IC runs timers at most once per round (about a
/// second), and ic-cdk-timers' repeating timers with a shorter period run more than once in a
/// round when rounds are slow.
pub const MIN_TIMER_PERIOD_NS: u64 = 1_000_000_000;

/// The smallest values a canister accepts for two settings, with the reason each one exists
/// (quoted in the refusal). They depend on the canister's ops, so the canister states them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Floors {
    /// The smallest `flush_instruction_budget`: measure the most expensive single op of your
    /// schema (alone, in a flush of its own) and keep a wide margin (the reference canister
    /// keeps 16 ×), so that no ordinary op is ever interrupted.
    pub min_flush_budget: u64,
    /// Why: completes "is below the smallest budget, N: ...".
    pub min_flush_budget_reason: &'static str,
    /// The smallest `max_pending_bytes`: the size of the largest op your API can queue
    /// (`batch_core::WriteOp::size_bytes`), so that an empty queue takes any op.
    pub min_pending_bytes: u64,
    /// Why: completes "is below N, ...: the queue would refuse it".
    pub min_pending_bytes_reason: &'static str,
}

/// Why [`CanisterSettings::merged`] refused the arguments (its text is the reason).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SettingsError(pub String);

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
fn as_usize(name: &str, value: u64) -> Result<usize, SettingsError> {
    usize::try_from(value).map_err(|_| {
        SettingsError(format!(
            "{name} = {value} does not fit in {} bits",
            usize::BITS
        ))
    })
}

impl CanisterSettings {
    /// `args` over `self`: every field present in `args` replaces the current value, every
    /// absent field keeps it. Fails, with the reason, on a value that does not fit, an invalid
    /// queue configuration, a flush budget above [`MAX_FLUSH_BUDGET`] or below
    /// `floors.min_flush_budget`, a `max_pending_bytes` below `floors.min_pending_bytes`, or an
    /// `outcome_capacity` below `max_pending`. Costs a few hundred instructions.
    pub fn merged(&self, args: &InitArgs, floors: &Floors) -> Result<Self, SettingsError> {
        let current = &self.config;
        let size = |name: &str, value: Option<u64>, current: usize| {
            value.map_or(Ok(current), |v| as_usize(name, v))
        };
        let max_delay_ns = match args.max_delay_ms {
            None => current.max_delay_ns,
            Some(ms) => ms.checked_mul(1_000_000).ok_or_else(|| {
                SettingsError(format!("max_delay_ms = {ms} overflows 64-bit nanoseconds"))
            })?,
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
        config
            .validate()
            .map_err(|e| SettingsError(e.to_string()))?;
        if config.flush_instruction_budget < floors.min_flush_budget {
            return Err(SettingsError(format!(
                "flush_instruction_budget = {} is below the smallest budget, {}: {}",
                config.flush_instruction_budget,
                floors.min_flush_budget,
                floors.min_flush_budget_reason
            )));
        }
        if (config.max_pending_bytes as u64) < floors.min_pending_bytes {
            return Err(SettingsError(format!(
                "max_pending_bytes = {} is below {}, {}: the queue would refuse it",
                config.max_pending_bytes, floors.min_pending_bytes, floors.min_pending_bytes_reason
            )));
        }
        if config.outcome_capacity < config.max_pending {
            return Err(SettingsError(format!(
                "outcome_capacity = {} is below max_pending = {}: a flush of a full queue would evict outcomes it has just recorded",
                config.outcome_capacity, config.max_pending
            )));
        }
        if config.flush_instruction_budget > MAX_FLUSH_BUDGET {
            return Err(SettingsError(format!(
                "flush_instruction_budget = {} leaves no headroom: a flush may use 3 × the budget ({}) plus a margin of {FLUSH_MARGIN} for rollback, COMMIT and the rest of the message, over the {MESSAGE_LIMIT} instructions of a message; the largest budget is {MAX_FLUSH_BUDGET}",
                config.flush_instruction_budget,
                config.max_flush_instructions(),
            )));
        }
        Ok(CanisterSettings {
            config,
            write_access: args.write_access.unwrap_or(self.write_access),
        })
    }

    /// The settings as a `settings` query reports them, with the database's read-only mode.
    pub fn to_view(&self, read_only: bool) -> Settings {
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

#[cfg(test)]
mod tests {
    use super::*;

    const FLOORS: Floors = Floors {
        min_flush_budget: 20_000_000,
        min_flush_budget_reason: "an op could be interrupted",
        min_pending_bytes: 400,
        min_pending_bytes_reason: "the largest op",
    };

    #[test]
    fn absent_fields_keep_the_current_values_and_present_ones_replace_them() {
        let current = CanisterSettings::default()
            .merged(
                &InitArgs {
                    flush_size: Some(7),
                    write_access: Some(WriteAccess::Open),
                    ..InitArgs::default()
                },
                &FLOORS,
            )
            .unwrap();
        assert_eq!(current.config.flush_size, 7);
        assert_eq!(current.write_access, WriteAccess::Open);
        let next = current
            .merged(
                &InitArgs {
                    max_delay_ms: Some(5_000),
                    ..InitArgs::default()
                },
                &FLOORS,
            )
            .unwrap();
        assert_eq!(next.config.flush_size, 7);
        assert_eq!(next.config.max_delay_ns, 5_000_000_000);
        assert_eq!(next.write_access, WriteAccess::Open);
        assert_eq!(next.timer_period_ns(), 5_000_000_000);
    }

    #[test]
    fn every_bound_is_refused_with_its_reason() {
        let refuse = |args: InitArgs| {
            CanisterSettings::default()
                .merged(&args, &FLOORS)
                .unwrap_err()
                .0
        };
        assert_eq!(
            refuse(InitArgs {
                flush_instruction_budget: Some(19_999_999),
                ..InitArgs::default()
            }),
            "flush_instruction_budget = 19999999 is below the smallest budget, 20000000: an op could be interrupted"
        );
        assert_eq!(
            refuse(InitArgs {
                max_pending_bytes: Some(399),
                ..InitArgs::default()
            }),
            "max_pending_bytes = 399 is below 400, the largest op: the queue would refuse it"
        );
        assert!(
            refuse(InitArgs {
                flush_instruction_budget: Some(MAX_FLUSH_BUDGET + 1),
                ..InitArgs::default()
            })
            .contains("leaves no headroom")
        );
        assert!(
            refuse(InitArgs {
                outcome_capacity: Some(9_999),
                ..InitArgs::default()
            })
            .starts_with("outcome_capacity = 9999 is below max_pending = 10000")
        );
        assert_eq!(
            refuse(InitArgs {
                max_delay_ms: Some(u64::MAX),
                ..InitArgs::default()
            }),
            format!("max_delay_ms = {} overflows 64-bit nanoseconds", u64::MAX)
        );
        // The largest budget itself is accepted, and so is the floor.
        for budget in [MAX_FLUSH_BUDGET, FLOORS.min_flush_budget] {
            let ok = CanisterSettings::default()
                .merged(
                    &InitArgs {
                        flush_instruction_budget: Some(budget),
                        ..InitArgs::default()
                    },
                    &FLOORS,
                )
                .unwrap();
            assert_eq!(ok.config.flush_instruction_budget, budget);
        }
    }

    #[test]
    fn a_short_delay_still_runs_the_timer_at_most_once_a_second() {
        let s = CanisterSettings::default()
            .merged(
                &InitArgs {
                    max_delay_ms: Some(10),
                    ..InitArgs::default()
                },
                &FLOORS,
            )
            .unwrap();
        assert_eq!(s.timer_period_ns(), MIN_TIMER_PERIOD_NS);
        assert_eq!(s.to_view(true).max_delay_ms, 10);
        assert!(s.to_view(true).read_only);
    }
}
