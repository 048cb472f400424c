//! Every setting of `InitArgs` over its whole range, at install and at upgrade, as a careless
//! operator would set it: each is either refused with a reason that names a setting out of its
//! bounds (the install or upgrade fails; after a refused upgrade the canister keeps its
//! settings and its queue), or installed, and then a submit, the timer's flush, `stats` and
//! `ticket_status` answer, and the op commits. The values: 0, 1, each bound ± 1, the edges of
//! 32 and 64 bits, `u64::MAX`, and random combinations of all the settings (SplitMix64, fixed
//! seeds). The bounds are written out here again, as documented, independently of the
//! canister's code. Build the wasm first with scripts/build.sh.

use bench_api::*;
use bench_suite::client::{CONTROLLER, Client, SplitMix64, program};
use candid::Encode;
use offline_engine::{Canister, Engine, EngineConfig, MessageResult, Program};

/// The documented bounds (`ic_rusqlite_batch::settings`), and the canister's floors.
const MAX_DELAY_MS: u64 = 86_400_000;
const MAX_PENDING: u64 = 500_000;
const MAX_PENDING_BYTES: u64 = 256 << 20;
const MAX_BUDGET: u64 = 10_666_666_666;
const MAX_OUTCOMES: u64 = 500_000;
const MAX_COALESCE: u64 = 1_024;

/// The canister's defaults, as the `settings` query reports them.
fn defaults() -> Settings {
    Settings {
        flush_size: 100,
        max_delay_ms: 1_000,
        max_pending: 10_000,
        max_pending_bytes: 128 << 20,
        flush_instruction_budget: 10_000_000_000,
        outcome_capacity: 10_000,
        coalesce_rows: 128,
        write_access: WriteAccess::Restricted,
        read_only: false,
    }
}

/// `args` over `current`, as the documentation says an install (over the defaults) or an
/// upgrade (over the current settings) merges them.
fn merge(current: &Settings, args: &InitArgs) -> Settings {
    Settings {
        flush_size: args.flush_size.unwrap_or(current.flush_size),
        max_delay_ms: args.max_delay_ms.unwrap_or(current.max_delay_ms),
        max_pending: args.max_pending.unwrap_or(current.max_pending),
        max_pending_bytes: args.max_pending_bytes.unwrap_or(current.max_pending_bytes),
        flush_instruction_budget: args
            .flush_instruction_budget
            .unwrap_or(current.flush_instruction_budget),
        outcome_capacity: args.outcome_capacity.unwrap_or(current.outcome_capacity),
        coalesce_rows: args.coalesce_rows.unwrap_or(current.coalesce_rows),
        write_access: args.write_access.unwrap_or(current.write_access),
        read_only: current.read_only,
    }
}

/// The settings of `s` out of their documented bounds.
fn violations(s: &Settings) -> Vec<&'static str> {
    let mut out = Vec::new();
    if s.flush_size == 0 || s.flush_size > MAX_PENDING || s.flush_size > s.max_pending {
        out.push("flush_size");
    }
    if s.max_delay_ms > MAX_DELAY_MS {
        out.push("max_delay_ms");
    }
    if s.max_pending == 0 || s.max_pending > MAX_PENDING {
        out.push("max_pending");
    }
    if !(MIN_PENDING_BYTES..=MAX_PENDING_BYTES).contains(&s.max_pending_bytes) {
        out.push("max_pending_bytes");
    }
    if !(MIN_FLUSH_BUDGET..=MAX_BUDGET).contains(&s.flush_instruction_budget) {
        out.push("flush_instruction_budget");
    }
    if s.outcome_capacity > MAX_OUTCOMES || s.outcome_capacity < s.max_pending {
        out.push("outcome_capacity");
    }
    if s.coalesce_rows > MAX_COALESCE {
        out.push("coalesce_rows");
    }
    out
}

const NAMES: [&str; 7] = [
    "flush_size",
    "max_delay_ms",
    "max_pending",
    "max_pending_bytes",
    "flush_instruction_budget",
    "outcome_capacity",
    "coalesce_rows",
];

fn bounds(name: &str) -> &'static [u64] {
    match name {
        "flush_size" => &[1, 100, MAX_PENDING],
        "max_delay_ms" => &[1_000, MAX_DELAY_MS, 16_700_000_000_000],
        "max_pending" => &[1, 10_000, MAX_PENDING],
        "max_pending_bytes" => &[MIN_PENDING_BYTES, 128 << 20, MAX_PENDING_BYTES],
        "flush_instruction_budget" => &[MIN_FLUSH_BUDGET, MAX_BUDGET],
        "outcome_capacity" => &[10_000, MAX_OUTCOMES],
        _ => &[1, 128, MAX_COALESCE],
    }
}

fn set(args: &mut InitArgs, name: &str, value: Option<u64>) {
    match name {
        "flush_size" => args.flush_size = value,
        "max_delay_ms" => args.max_delay_ms = value,
        "max_pending" => args.max_pending = value,
        "max_pending_bytes" => args.max_pending_bytes = value,
        "flush_instruction_budget" => args.flush_instruction_budget = value,
        "outcome_capacity" => args.outcome_capacity = value,
        _ => args.coalesce_rows = value,
    }
}

/// 0, 1, each bound ± 1, the edges of 32 and 64 bits.
fn edges(name: &str) -> Vec<u64> {
    let mut v = vec![0, 1, u64::from(u32::MAX), 1 << 32, u64::MAX];
    for &b in bounds(name) {
        v.extend([b - 1, b, b + 1]);
    }
    v
}

/// Absent (half of the time, so that whole combinations are often valid), an edge, a value
/// below twice a bound, a value between the setting's smallest and largest bound, or any
/// 64-bit value of a random magnitude.
fn random_field(rng: &mut SplitMix64, name: &str) -> Option<u64> {
    let edges = edges(name);
    let bounds = bounds(name);
    let (lo, hi) = (bounds[0], bounds[bounds.len() - 1]);
    match rng.next_u64() % 8 {
        0..4 => None,
        4 => Some(edges[(rng.next_u64() % edges.len() as u64) as usize]),
        5 => {
            let b = bounds[(rng.next_u64() % bounds.len() as u64) as usize];
            Some(rng.next_u64() % (2 * b))
        }
        6 => Some(lo + rng.next_u64() % (hi - lo + 1)),
        _ => Some(rng.next_u64() >> (rng.next_u64() % 64)),
    }
}

/// Settings that leave room for every single setting to reach its largest value.
fn roomy() -> InitArgs {
    InitArgs {
        max_pending: Some(MAX_PENDING),
        outcome_capacity: Some(MAX_OUTCOMES),
        ..InitArgs::default()
    }
}

struct Harness {
    engine: Engine,
    program: Program,
}

impl Harness {
    fn new() -> Harness {
        let engine = Engine::new(EngineConfig::default()).expect("engine");
        let program = program(&engine);
        Harness { engine, program }
    }

    /// Installs with `args`: the client, or the install's error.
    fn install(&self, args: &InitArgs) -> Result<Client, String> {
        let settings = offline_engine::Settings {
            controllers: vec![CONTROLLER.to_vec()],
            ..offline_engine::Settings::default()
        };
        let arg = Encode!(&Some(args.clone())).unwrap();
        Canister::install(&self.engine, &self.program, &arg, settings)
            .map(|(canister, exec)| Client {
                program: self.program.clone(),
                canister,
                log: vec![exec],
            })
            .map_err(|e| e.to_string())
    }
}

/// The reason names a setting of `expected`.
fn assert_refused_by_name(reason: &str, expected: &[&str], args: &InitArgs) {
    assert!(
        expected
            .iter()
            .any(|name| reason.contains(&format!("invalid settings: {name}"))),
        "{args:?}: refused with {reason:?}, expected a reason about one of {expected:?}"
    );
}

/// With `settings` in effect: the `settings` query reports them, a submit answers a ticket, the
/// timer's flush after the period commits it as user `rowid`, and `stats` and `ticket_status`
/// answer. Nothing traps.
fn exercise(c: &mut Client, settings: &Settings, rowid: i64) {
    assert_eq!(&c.settings(), settings);
    let ticket = match c.submit_as(CONTROLLER, "submit_create_user", ("u", "u@example.com")) {
        SubmitResult::Ok(t) => t,
        other => panic!("{settings:?}: submit answered {other:?}"),
    };
    let period_ns = settings.max_delay_ms.max(1_000) * 1_000_000;
    c.tick(period_ns);
    assert_eq!(
        c.ticket(ticket),
        TicketStatus::Committed {
            rows_changed: 1,
            last_insert_rowid: rowid
        },
        "{settings:?}"
    );
    let s = c.stats();
    assert_eq!(
        (s.pending, s.timer_armed, s.alarm),
        (0, false, None),
        "{settings:?}"
    );
    let traps: Vec<_> = c.traps().iter().map(|e| (&e.entry, &e.result)).collect();
    assert!(traps.is_empty(), "{settings:?}: {traps:?}");
}

/// At install: refused by name, or installed and working.
fn check_install(h: &Harness, args: &InitArgs) -> bool {
    let expected_settings = merge(&defaults(), args);
    let expected = violations(&expected_settings);
    match h.install(args) {
        Ok(mut c) => {
            assert!(expected.is_empty(), "{args:?} installed, but {expected:?}");
            exercise(&mut c, &expected_settings, 1);
            true
        }
        Err(reason) => {
            assert_refused_by_name(&reason, &expected, args);
            false
        }
    }
}

/// An installed canister upgraded with one argument after another.
struct Upgraded {
    c: Client,
    current: Settings,
    users: i64,
}

impl Upgraded {
    fn new(h: &Harness) -> Upgraded {
        let c = h
            .install(&InitArgs::default())
            .expect("the defaults install");
        Upgraded {
            c,
            current: defaults(),
            users: 0,
        }
    }

    /// Upgrades with `args` while an op is pending: refused by name (the settings and the
    /// op stay), or upgraded and working.
    fn check(&mut self, args: &InitArgs) -> bool {
        let merged = merge(&self.current, args);
        let expected = violations(&merged);
        // An op waits in the queue across the upgrade (the current flush size permitting).
        let pending =
            match self
                .c
                .submit_as(CONTROLLER, "submit_create_user", ("p", "p@example.com"))
            {
                SubmitResult::Ok(t) => t,
                other => panic!("{:?}: submit answered {other:?}", self.current),
            };
        self.users += 1;
        let upgrade = self.c.upgrade(Some(args.clone()));
        let accepted = match &upgrade.result {
            MessageResult::Trap(reason) => {
                assert_refused_by_name(reason, &expected, args);
                assert_eq!(
                    self.c.settings(),
                    self.current,
                    "a refused upgrade keeps them"
                );
                // The log keeps the refused upgrade's trap: it is expected, drop it.
                self.c.log.pop();
                false
            }
            other => {
                assert!(
                    expected.is_empty(),
                    "{args:?} over {:?} upgraded ({other:?}), but {expected:?}",
                    self.current
                );
                self.current = merged;
                true
            }
        };
        // The op that crossed the upgrade commits at the next timer run (if the submit did not
        // flush it already).
        self.c
            .tick(self.current.max_delay_ms.max(1_000) * 1_000_000);
        assert_eq!(
            self.c.ticket(pending),
            TicketStatus::Committed {
                rows_changed: 1,
                last_insert_rowid: self.users
            },
            "{args:?}"
        );
        self.users += 1;
        exercise(&mut self.c, &self.current, self.users);
        accepted
    }
}

#[test]
fn every_setting_alone_over_its_whole_range_at_install() {
    let h = Harness::new();
    let mut accepted = 0;
    for name in NAMES {
        for value in edges(name) {
            for base in [InitArgs::default(), roomy()] {
                let mut args = base;
                set(&mut args, name, Some(value));
                accepted += usize::from(check_install(&h, &args));
            }
        }
    }
    // Each setting at its largest value, and the largest of all at once.
    let largest = InitArgs {
        flush_size: Some(MAX_PENDING),
        max_delay_ms: Some(MAX_DELAY_MS),
        max_pending: Some(MAX_PENDING),
        max_pending_bytes: Some(MAX_PENDING_BYTES),
        flush_instruction_budget: Some(MAX_BUDGET),
        outcome_capacity: Some(MAX_OUTCOMES),
        coalesce_rows: Some(MAX_COALESCE),
        write_access: None,
    };
    assert!(check_install(&h, &largest));
    assert!(accepted >= 60, "only {accepted} installs accepted");
}

#[test]
fn every_setting_alone_over_its_whole_range_at_upgrade() {
    let h = Harness::new();
    let mut u = Upgraded::new(&h);
    let mut verdicts = [0usize; 2];
    for name in NAMES {
        for value in edges(name) {
            let mut args = InitArgs::default();
            set(&mut args, name, Some(value));
            verdicts[usize::from(u.check(&args))] += 1;
            // Back to room for the next value (always accepted).
            assert!(u.check(&InitArgs {
                flush_size: Some(100),
                max_delay_ms: Some(1_000),
                max_pending_bytes: Some(128 << 20),
                flush_instruction_budget: Some(10_000_000_000),
                coalesce_rows: Some(128),
                ..roomy()
            }));
        }
    }
    assert!(verdicts.iter().all(|&n| n >= 20), "{verdicts:?}");
}

#[test]
fn random_combinations_of_every_setting_at_install_and_upgrade() {
    let h = Harness::new();
    let mut rng = SplitMix64(0x5E77_1265_0001);
    let draw = |rng: &mut SplitMix64| {
        let mut args = InitArgs::default();
        for name in NAMES {
            set(&mut args, name, random_field(rng, name));
        }
        args
    };
    let mut installs = [0usize; 2];
    for _ in 0..80 {
        let args = draw(&mut rng);
        installs[usize::from(check_install(&h, &args))] += 1;
    }
    let mut u = Upgraded::new(&h);
    let mut upgrades = [0usize; 2];
    for _ in 0..80 {
        let args = draw(&mut rng);
        upgrades[usize::from(u.check(&args))] += 1;
    }
    // Both verdicts occur.
    assert!(
        installs.iter().chain(&upgrades).all(|&n| n > 0),
        "{installs:?} {upgrades:?}"
    );
}
