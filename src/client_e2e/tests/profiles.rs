//! The client rows under both metering profiles (`client_e2e::PROFILES`): the same small run
//! through a real agent (overhead, load) and on the offline engine's subnet (the application
//! canister's breakdown) costs different cycles under the replica's rules with the deterministic
//! memory tracker and under PocketIC 13's, so each replica or engine really meters by its
//! profile, and every table names the profile its figures were measured under, the tracker's
//! first. Needs the canisters built (`scripts/build.sh`, `scripts/build_example.sh`).

use std::time::Duration;

use client_e2e::app::{Mode, Path as AppPath, breakdown, render_breakdown, render_loads};
use client_e2e::load::{LoadConfig, Path as LoadPath, run_profiles};
use client_e2e::{PROFILES, agent_label, engine_label, overhead};
use offline_engine::Metering;

/// Each of `needles` is in `text`, after the one before it.
fn in_order(text: &str, needles: &[String]) {
    let mut from = 0;
    for n in needles {
        let at = text[from..]
            .find(n.as_str())
            .unwrap_or_else(|| panic!("{n:?} after byte {from} of\n{text}"));
        from += at + n.len();
    }
}

#[test]
fn the_profiles_are_the_tracker_then_pocket_ic_13() {
    assert_eq!(PROFILES, [Metering::IC_DMT, Metering::POCKET_IC_13]);
    assert_eq!(
        agent_label(&Metering::IC_DMT),
        "offline replica through a real agent, metering ic-dmt-0441fbd7"
    );
    assert_eq!(
        engine_label(&Metering::POCKET_IC_13),
        "offline (wasmtime, IC metering: pocketic-13)"
    );
}

#[test]
fn overhead_costs_differ_by_profile_and_the_table_names_each() {
    let runs = client_e2e::runtime()
        .expect("a runtime")
        .block_on(overhead::measure_profiles(50))
        .expect("measured");
    let [tracker, pocket_ic] = &runs[..] else {
        panic!("{runs:?}")
    };
    assert_eq!(
        (tracker.metering, pocket_ic.metering),
        (Metering::IC_DMT, Metering::POCKET_IC_13)
    );
    for (way, a, b) in [
        ("unkeyed", tracker.unkeyed, pocket_ic.unkeyed),
        ("keyed", tracker.keyed, pocket_ic.keyed),
        ("batcher", tracker.batcher, pocket_ic.batcher),
    ] {
        assert!(a > 0 && b > 0 && a != b, "{way}: {a} and {b}");
    }
    let md = overhead::render(&runs);
    println!("{md}");
    in_order(
        &md,
        &[
            format!(
                "*engines: {}; {}*",
                agent_label(&Metering::IC_DMT),
                agent_label(&Metering::POCKET_IC_13)
            ),
            "| how | cycles (ic-dmt-0441fbd7) | cycles per op (ic-dmt-0441fbd7) | vs hand-built (ic-dmt-0441fbd7) | cycles (pocketic-13) |".into(),
            format!(
                "| the Rust batcher through ic-agent (keyed) | {} | {:.0} |",
                tracker.batcher,
                tracker.batcher as f64 / 50.0
            ),
        ],
    );
}

#[test]
fn load_costs_differ_by_profile_and_each_table_names_its_profile() {
    // 20 ops after one round of 1 s, one call per op and the batcher.
    let config = LoadConfig {
        ops_per_round: 20,
        rounds: 1,
        round: Duration::from_millis(1_000),
        concurrency: 20,
        paths: vec![LoadPath::OneCallPerOp, LoadPath::Batcher],
        ..LoadConfig::default()
    };
    let (runs, md) = client_e2e::runtime()
        .expect("a runtime")
        .block_on(run_profiles(&config))
        .expect("ran");
    println!("{md}");
    assert_eq!(
        runs.iter().map(|r| r.metering).collect::<Vec<_>>(),
        PROFILES.to_vec()
    );
    for path in [LoadPath::OneCallPerOp, LoadPath::Batcher] {
        let per_op: Vec<f64> = runs
            .iter()
            .map(|run| {
                let r = run
                    .results
                    .iter()
                    .find(|r| r.path == path)
                    .expect("the path");
                assert_eq!((r.committed, r.failures), (20, 0), "{r:?}");
                r.cycles_per_op
            })
            .collect();
        assert!(
            per_op[0] != per_op[1] && per_op[1] > 0.0,
            "{path:?}: {per_op:?}"
        );
    }
    in_order(
        &md,
        &[
            format!(
                "### Under the replica's rules with the deterministic memory tracker (`ic-dmt-0441fbd7`)\n\n*engine: {}*",
                agent_label(&Metering::IC_DMT)
            ),
            "| (c) the Rust batcher".into(),
            format!(
                "### Under the rules of PocketIC 13 and canbench 0.7.0 (`pocketic-13`)\n\n*engine: {}*",
                agent_label(&Metering::POCKET_IC_13)
            ),
            "| (c) the Rust batcher".into(),
            "| path | cycles per op (ic-dmt-0441fbd7) | cycles per op (pocketic-13) |".into(),
        ],
    );
}

#[test]
fn app_canister_costs_differ_by_profile_and_each_table_names_its_profile() {
    // 100 writes, 50 a round (engine: the offline engine's subnet, message by message).
    let runs: Vec<_> = PROFILES
        .into_iter()
        .map(|metering| {
            let b = breakdown(AppPath::App(Mode::Batched), 100, 50, metering).expect("measured");
            assert_eq!((b.metering, b.rows), (metering, 100));
            b
        })
        .collect();
    let [tracker, pocket_ic] = &runs[..] else {
        panic!("{runs:?}")
    };
    assert!(
        tracker.app_cycles != pocket_ic.app_cycles
            && tracker.database_cycles != pocket_ic.database_cycles,
        "{runs:?}"
    );
    for b in &runs {
        let label = format!("engine: {}, message by message", engine_label(&b.metering));
        assert!(render_breakdown(b).contains(&label), "{label}");
        assert!(render_loads(&[vec![b.clone()]]).contains(&label), "{label}");
    }
}
