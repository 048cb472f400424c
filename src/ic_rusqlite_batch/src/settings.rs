//! Settings: the queue's [`Config`] and who may write, merged from install/upgrade arguments
//! ([`InitArgs`]) and checked against the IC's message limit, the canister's own floors and the
//! upper bounds below.
//!
//! Every numeric setting is bounded on both sides, and a value out of its bounds is refused
//! with its reason at install and at upgrade (the only places settings change): the install
//! or upgrade fails and the canister keeps its state. The upper bounds exist because each
//! value beyond them would make a later message trap or stall instead of being refused now:
//!
//! | setting | accepted | why the upper bound |
//! |---|---|---|
//! | `flush_size` | 1 ..= `max_pending` | a size trigger beyond the capacity could never fire |
//! | `max_delay_ms` | 0 ..= [`MAX_DELAY_MS`] (one day) | the timer library traps on a delay past `u64::MAX` ns from now (from about 1.67·10^13 ms), on every submit; a day is the deduplication window of client batches (24 h), the longest a client is asked to wait |
//! | `max_pending` | 1 ..= [`MAX_PENDING`] | heap: each pending op keeps about 150 bytes besides its own |
//! | `max_pending_bytes` | the canister's floor ..= [`MAX_PENDING_BYTES`] (256 MiB) | heap: the pending ops themselves |
//! | `flush_instruction_budget` | the canister's floor ..= [`MAX_FLUSH_BUDGET`] | 3 × the budget plus [`FLUSH_MARGIN`] must fit a message |
//! | `outcome_capacity` | `max_pending` ..= [`MAX_OUTCOME_CAPACITY`] | heap: an outcome keeps up to 1 KiB of error text |
//! | `coalesce_rows` | 0 ..= [`MAX_COALESCE_ROWS`] | a chunk is one SQLite statement, compiled (which the instruction guard cannot interrupt) and cached once per power of two up to it |
//!
//! The three heap bounds together keep the queue under about 1 GiB at worst (256 MiB of ops,
//! 75 MiB of their bookkeeping, 550 MiB of outcomes with 1 KiB errors, 8 MiB of history): a
//! quarter of a 32-bit canister's 4 GiB heap, which SQLite's page cache shares, so that an
//! upgrade, which holds the saved state and the restored queue at once, still fits.
//!
//! A setting a previous version accepted but these bounds refuse (a longer `max_delay_ms`, for
//! instance) makes an upgrade without that field fail with the reason: the upgrade argument
//! must set it within its bounds.

use batch_core::Config;

use batch_types::{InitArgs, Settings, WriteAccess};

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

/// The longest `max_delay_ms` accepted: one day. ic-cdk-timers traps when a timer's delay
/// passes `u64::MAX` nanoseconds from now (from about 1.67·10^13 ms today), which would make
/// every submit that arms the timer trap; far below that, an op could wait for its flush for
/// days. One day is the deduplication window of client batches (24 h): no write waits for the
/// timer longer than a client batch's key is kept.
pub const MAX_DELAY_MS: u64 = 86_400_000;

/// The largest `max_pending` (and so `flush_size`): 500,000 ops. Each pending op keeps about
/// 150 bytes of heap besides the bytes `max_pending_bytes` counts (its ticket, owner and time,
/// the op's containers).
pub const MAX_PENDING: u64 = 500_000;

/// The largest `max_pending_bytes`: 256 MiB (twice the default).
pub const MAX_PENDING_BYTES: u64 = 256 << 20;

/// The largest `outcome_capacity`: 500,000 outcomes (each keeps up to
/// [`batch_core::MAX_ERROR_BYTES`] of error text, so 550 MiB at worst).
pub const MAX_OUTCOME_CAPACITY: u64 = 500_000;

/// The largest `coalesce_rows`: 1,024 rows per multi-row INSERT (8 times the default). A chunk
/// is one SQLite statement: compiling it, which the instruction guard cannot interrupt, grows
/// with its rows, and the connection caches one such statement per power of two up to this.
pub const MAX_COALESCE_ROWS: u64 = 1_024;

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

impl Floors {
    /// The floors of a canister whose writes are one statement on a row or a few, with
    /// parameters of at most a few KiB (the example canisters): a flush budget of 20 million
    /// instructions (16 times the dearest op of the reference canister's users/orders schema,
    /// which `bench-suite budget-floor` measures; check yours the same way) and 64 KiB of queue.
    pub const SMALL_WRITES: Floors = Floors {
        min_flush_budget: 20_000_000,
        min_flush_budget_reason: "an op of a few rows could be interrupted (16 times the dearest \
            small write measured)",
        min_pending_bytes: 65_536,
        min_pending_bytes_reason: "64 KiB, room for the largest small write",
    };
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

/// `value` of setting `name`, refused with `why` when it is above `max`.
fn at_most(name: &str, value: u64, max: u64, why: &str) -> Result<u64, SettingsError> {
    if value > max {
        return Err(SettingsError(format!(
            "{name} = {value} is above {max}, the largest accepted: {why}"
        )));
    }
    Ok(value)
}

impl CanisterSettings {
    /// `args` over `self`: every field present in `args` replaces the current value, every
    /// absent field keeps it. Fails, with the reason (which names the setting), on a value that
    /// does not fit, one above its upper bound (see the module documentation), an invalid queue
    /// configuration (`flush_size` 0 or above `max_pending`, ...), a flush budget above
    /// [`MAX_FLUSH_BUDGET`] or below `floors.min_flush_budget`, a `max_pending_bytes` below
    /// `floors.min_pending_bytes`, or an `outcome_capacity` below `max_pending`. The merged
    /// settings are checked whole, so a current value beyond today's bounds (saved by a version
    /// with other bounds) is refused too, until the argument sets it. Costs a few hundred
    /// instructions.
    pub fn merged(&self, args: &InitArgs, floors: &Floors) -> Result<Self, SettingsError> {
        let current = &self.config;
        let size = |name: &str, value: Option<u64>, current: usize, max: u64, why: &str| {
            let value = value.map_or(Ok(current), |v| as_usize(name, v))?;
            at_most(name, value as u64, max, why)?;
            Ok::<_, SettingsError>(value)
        };
        let max_delay_ns = match args.max_delay_ms {
            None => current.max_delay_ns,
            Some(ms) => ms.saturating_mul(1_000_000),
        };
        if max_delay_ns > MAX_DELAY_MS * 1_000_000 {
            let ms = args.max_delay_ms.unwrap_or(max_delay_ns / 1_000_000);
            return Err(SettingsError(format!(
                "max_delay_ms = {ms} is above {MAX_DELAY_MS}, the largest accepted: an op would wait for the timer longer than a day, the deduplication window of client batches (and the timer library traps on a delay past 2^64 ns from now)"
            )));
        }
        let heap = "the queue's heap must stay within its share of the canister's 4 GiB (an upgrade holds the saved queue and the restored one at once)";
        let config = Config {
            flush_size: size(
                "flush_size",
                args.flush_size,
                current.flush_size,
                MAX_PENDING,
                "it may not exceed max_pending, whose largest value this is",
            )?,
            max_delay_ns,
            max_pending: size(
                "max_pending",
                args.max_pending,
                current.max_pending,
                MAX_PENDING,
                heap,
            )?,
            max_pending_bytes: size(
                "max_pending_bytes",
                args.max_pending_bytes,
                current.max_pending_bytes,
                MAX_PENDING_BYTES,
                heap,
            )?,
            flush_instruction_budget: args
                .flush_instruction_budget
                .unwrap_or(current.flush_instruction_budget),
            outcome_capacity: size(
                "outcome_capacity",
                args.outcome_capacity,
                current.outcome_capacity,
                MAX_OUTCOME_CAPACITY,
                heap,
            )?,
            history_capacity: current.history_capacity,
            coalesce_rows: size(
                "coalesce_rows",
                args.coalesce_rows,
                current.coalesce_rows,
                MAX_COALESCE_ROWS,
                "a chunk is one SQLite statement, whose compilation the instruction guard cannot interrupt",
            )?,
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
            format!(
                "max_delay_ms = {} is above 86400000, the largest accepted: an op would wait for the timer longer than a day, the deduplication window of client batches (and the timer library traps on a delay past 2^64 ns from now)",
                u64::MAX
            )
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

    /// The names of the settings of `args` (merged over the defaults) that are out of their
    /// documented bounds: the rules written out again, independently of `merged`.
    fn violations(args: &InitArgs) -> Vec<&'static str> {
        let d = CanisterSettings::default().to_view(false);
        let flush_size = args.flush_size.unwrap_or(d.flush_size);
        let max_delay_ms = args.max_delay_ms.unwrap_or(d.max_delay_ms);
        let max_pending = args.max_pending.unwrap_or(d.max_pending);
        let bytes = args.max_pending_bytes.unwrap_or(d.max_pending_bytes);
        let budget = args
            .flush_instruction_budget
            .unwrap_or(d.flush_instruction_budget);
        let outcomes = args.outcome_capacity.unwrap_or(d.outcome_capacity);
        let coalesce = args.coalesce_rows.unwrap_or(d.coalesce_rows);
        let mut out = Vec::new();
        if flush_size == 0 || flush_size > 500_000 || flush_size > max_pending {
            out.push("flush_size");
        }
        if max_delay_ms > 86_400_000 {
            out.push("max_delay_ms");
        }
        if max_pending == 0 || max_pending > 500_000 {
            out.push("max_pending");
        }
        if !(400..=256 << 20).contains(&bytes) {
            out.push("max_pending_bytes");
        }
        if !(20_000_000..=10_666_666_666).contains(&budget) {
            out.push("flush_instruction_budget");
        }
        if outcomes > 500_000 || outcomes < max_pending {
            out.push("outcome_capacity");
        }
        if coalesce > 1_024 {
            out.push("coalesce_rows");
        }
        out
    }

    /// 0, 1, each bound of the setting ± 1, the edges of 32 and 64 bits.
    fn edges(bounds: &[u64]) -> Vec<u64> {
        let mut v = vec![0, 1, u64::from(u32::MAX), 1 << 32, u64::MAX - 1, u64::MAX];
        for &b in bounds {
            v.extend([b.saturating_sub(1), b, b.saturating_add(1)]);
        }
        v
    }

    /// SplitMix64, for a reproducible random sweep.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        }
        /// Absent (half of the time, so that whole combinations are often valid), an edge of
        /// `bounds`, a value below twice a bound, one between the smallest and the largest
        /// bound, or any 64-bit value of a random magnitude.
        fn field(&mut self, bounds: &[u64]) -> Option<u64> {
            let edges = edges(bounds);
            let (lo, hi) = (bounds[0], bounds[bounds.len() - 1]);
            match self.next() % 8 {
                0..4 => None,
                4 => Some(edges[(self.next() % edges.len() as u64) as usize]),
                5 => {
                    let b = bounds[(self.next() % bounds.len() as u64) as usize];
                    Some(self.next() % b.saturating_mul(2).max(2))
                }
                6 => Some(lo + self.next() % (hi - lo + 1)),
                _ => Some(self.next() >> (self.next() % 64)),
            }
        }
    }

    const FLUSH_SIZE: &[u64] = &[1, 100, 500_000];
    const DELAY: &[u64] = &[1_000, 86_400_000, 16_700_000_000_000];
    const PENDING: &[u64] = &[1, 10_000, 500_000];
    const BYTES: &[u64] = &[400, 128 << 20, 256 << 20];
    const BUDGET: &[u64] = &[20_000_000, 10_666_666_666];
    const OUTCOMES: &[u64] = &[10_000, 500_000];
    const COALESCE: &[u64] = &[1, 128, 1_024];

    /// `merged` against [`violations`]: accepted exactly when every setting is within its
    /// bounds, and then as given, with a timer period the timer library takes until the year
    /// 2500; refused otherwise with a reason that starts with the name of a setting out of its
    /// bounds.
    fn check(args: &InitArgs) {
        let expected = violations(args);
        match CanisterSettings::default().merged(args, &FLOORS) {
            Ok(s) => {
                assert!(expected.is_empty(), "{args:?} accepted, but {expected:?}");
                let v = s.to_view(false);
                let d = CanisterSettings::default().to_view(false);
                assert_eq!(v.flush_size, args.flush_size.unwrap_or(d.flush_size));
                assert_eq!(v.max_delay_ms, args.max_delay_ms.unwrap_or(d.max_delay_ms));
                assert_eq!(v.max_pending, args.max_pending.unwrap_or(d.max_pending));
                assert_eq!(
                    v.max_pending_bytes,
                    args.max_pending_bytes.unwrap_or(d.max_pending_bytes)
                );
                assert_eq!(
                    v.outcome_capacity,
                    args.outcome_capacity.unwrap_or(d.outcome_capacity)
                );
                assert_eq!(
                    v.coalesce_rows,
                    args.coalesce_rows.unwrap_or(d.coalesce_rows)
                );
                // 2500-01-01 in nanoseconds since the epoch: ic-cdk-timers adds the period.
                const YEAR_2500_NS: u64 = 16_725_225_600_000_000_000;
                assert!(YEAR_2500_NS.checked_add(s.timer_period_ns()).is_some());
                assert!(s.timer_period_ns() <= 86_400_000_000_000);
            }
            Err(SettingsError(reason)) => assert!(
                expected.iter().any(|name| reason.starts_with(name)),
                "{args:?} refused with {reason:?}, expected a reason about one of {expected:?}"
            ),
        }
    }

    #[test]
    fn every_setting_over_its_whole_range_is_accepted_within_its_bounds_or_refused_by_name() {
        let fields: [(&str, &[u64]); 7] = [
            ("flush_size", FLUSH_SIZE),
            ("max_delay_ms", DELAY),
            ("max_pending", PENDING),
            ("max_pending_bytes", BYTES),
            ("flush_instruction_budget", BUDGET),
            ("outcome_capacity", OUTCOMES),
            ("coalesce_rows", COALESCE),
        ];
        let set = |args: &mut InitArgs, name: &str, value: Option<u64>| match name {
            "flush_size" => args.flush_size = value,
            "max_delay_ms" => args.max_delay_ms = value,
            "max_pending" => args.max_pending = value,
            "max_pending_bytes" => args.max_pending_bytes = value,
            "flush_instruction_budget" => args.flush_instruction_budget = value,
            "outcome_capacity" => args.outcome_capacity = value,
            _ => args.coalesce_rows = value,
        };
        // Each setting alone over its edges, and with the others at their largest.
        let largest = InitArgs {
            flush_size: Some(500_000),
            max_delay_ms: Some(86_400_000),
            max_pending: Some(500_000),
            max_pending_bytes: Some(256 << 20),
            flush_instruction_budget: Some(MAX_FLUSH_BUDGET),
            outcome_capacity: Some(500_000),
            coalesce_rows: Some(1_024),
            write_access: None,
        };
        check(&largest);
        let mut accepted = 0;
        for (name, bounds) in fields {
            for value in edges(bounds) {
                for base in [InitArgs::default(), largest.clone()] {
                    let mut args = base;
                    set(&mut args, name, Some(value));
                    check(&args);
                    accepted += usize::from(violations(&args).is_empty());
                }
            }
        }
        assert!(accepted > 50, "the sweep accepted only {accepted} cases");
        // Random combinations of all of them.
        let mut rng = Rng(0x5E77_1265);
        let mut outcomes = [0usize; 2];
        for _ in 0..200_000 {
            let mut args = InitArgs::default();
            for (name, bounds) in fields {
                set(&mut args, name, rng.field(bounds));
            }
            check(&args);
            outcomes[usize::from(violations(&args).is_empty())] += 1;
        }
        // Both verdicts are well represented.
        assert!(outcomes.iter().all(|&n| n > 10_000), "{outcomes:?}");
    }

    #[test]
    fn every_upper_bound_is_exact_and_refused_with_its_reason() {
        let room = InitArgs {
            max_pending: Some(500_000),
            outcome_capacity: Some(500_000),
            ..InitArgs::default()
        };
        let merge = |args: InitArgs| CanisterSettings::default().merged(&args, &FLOORS);
        let heap = "the queue's heap must stay within its share of the canister's 4 GiB (an upgrade holds the saved queue and the restored one at once)";
        let cases: [(InitArgs, InitArgs, String); 6] = [
            (
                InitArgs { max_delay_ms: Some(MAX_DELAY_MS), ..InitArgs::default() },
                InitArgs { max_delay_ms: Some(MAX_DELAY_MS + 1), ..InitArgs::default() },
                "max_delay_ms = 86400001 is above 86400000, the largest accepted: an op would wait for the timer longer than a day, the deduplication window of client batches (and the timer library traps on a delay past 2^64 ns from now)".into(),
            ),
            (
                InitArgs { flush_size: Some(MAX_PENDING), ..room.clone() },
                InitArgs { flush_size: Some(MAX_PENDING + 1), ..room.clone() },
                "flush_size = 500001 is above 500000, the largest accepted: it may not exceed max_pending, whose largest value this is".into(),
            ),
            (
                room.clone(),
                InitArgs { max_pending: Some(MAX_PENDING + 1), ..room.clone() },
                format!("max_pending = 500001 is above 500000, the largest accepted: {heap}"),
            ),
            (
                InitArgs { max_pending_bytes: Some(MAX_PENDING_BYTES), ..InitArgs::default() },
                InitArgs { max_pending_bytes: Some(MAX_PENDING_BYTES + 1), ..InitArgs::default() },
                format!("max_pending_bytes = 268435457 is above 268435456, the largest accepted: {heap}"),
            ),
            (
                InitArgs { outcome_capacity: Some(MAX_OUTCOME_CAPACITY), ..InitArgs::default() },
                InitArgs { outcome_capacity: Some(MAX_OUTCOME_CAPACITY + 1), ..InitArgs::default() },
                format!("outcome_capacity = 500001 is above 500000, the largest accepted: {heap}"),
            ),
            (
                InitArgs { coalesce_rows: Some(MAX_COALESCE_ROWS), ..InitArgs::default() },
                InitArgs { coalesce_rows: Some(MAX_COALESCE_ROWS + 1), ..InitArgs::default() },
                "coalesce_rows = 1025 is above 1024, the largest accepted: a chunk is one SQLite statement, whose compilation the instruction guard cannot interrupt".into(),
            ),
        ];
        for (largest, beyond, reason) in cases {
            assert!(merge(largest.clone()).is_ok(), "{largest:?}");
            assert_eq!(merge(beyond).unwrap_err().0, reason);
        }
        assert_eq!(MAX_DELAY_MS, 86_400_000);
        assert_eq!(
            (
                MAX_PENDING,
                MAX_PENDING_BYTES,
                MAX_OUTCOME_CAPACITY,
                MAX_COALESCE_ROWS
            ),
            (500_000, 268_435_456, 500_000, 1_024)
        );
    }

    #[test]
    fn an_upgrade_refuses_a_saved_setting_beyond_the_bounds_until_its_argument_sets_it() {
        // Saved by a version that accepted any delay that did not overflow.
        let saved = CanisterSettings {
            config: Config {
                max_delay_ns: 1_000_000_000_000 * 1_000_000,
                ..Config::default()
            },
            write_access: WriteAccess::Restricted,
        };
        assert_eq!(
            saved.merged(&InitArgs::default(), &FLOORS).unwrap_err().0,
            "max_delay_ms = 1000000000000 is above 86400000, the largest accepted: an op would wait for the timer longer than a day, the deduplication window of client batches (and the timer library traps on a delay past 2^64 ns from now)"
        );
        let fixed = saved
            .merged(
                &InitArgs {
                    max_delay_ms: Some(2_000),
                    ..InitArgs::default()
                },
                &FLOORS,
            )
            .unwrap();
        assert_eq!(fixed.timer_period_ns(), 2_000_000_000);
        // A sub-millisecond excess over the day is refused too.
        let over = CanisterSettings {
            config: Config {
                max_delay_ns: MAX_DELAY_MS * 1_000_000 + 1,
                ..Config::default()
            },
            write_access: WriteAccess::Restricted,
        };
        assert!(
            over.merged(&InitArgs::default(), &FLOORS)
                .unwrap_err()
                .0
                .starts_with("max_delay_ms = 86400000 is above 86400000")
        );
    }
}
