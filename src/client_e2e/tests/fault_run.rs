//! The randomized fault run on the generic protocol (`execute_writes_packed` of the reference
//! canister's declared writes; `FAULT_RUN_OPS`, default 10,000 ops, about 10 s; `FAULT_RUN_SEED`
//! repeats a schedule): random dropped and delayed answers, stops and upgrades while eight
//! submitters write through one batcher. Every op's outcome is delivered once, to its own
//! submitter, and every op is applied exactly once; in the second run each submitter's ops
//! share an ordering key, and are committed in the order it submitted them.

use client_e2e::fault_run::{FaultRunConfig, FaultRunReport, run};

#[test]
fn a_randomized_fault_run_loses_nothing_and_applies_nothing_twice() {
    fault_run(false);
}

/// The same run with one ordering key per submitter: besides every op applied once, each
/// submitter's ops are committed in the order it submitted them, exactly.
#[test]
fn a_randomized_fault_run_with_ordering_keys_commits_each_key_in_order() {
    let report = fault_run(true);
    assert_eq!(report.out_of_order, 0, "{report}");
}

fn fault_run(ordered: bool) -> FaultRunReport {
    let ops = std::env::var("FAULT_RUN_OPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    let seed = std::env::var("FAULT_RUN_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(tokio_seed);
    let runtime = client_e2e::runtime().expect("a runtime");
    let report = runtime
        .block_on(run(FaultRunConfig {
            ops,
            seed,
            ordered,
            ..FaultRunConfig::default()
        }))
        .expect("the run");
    println!("{report}\n  (FAULT_RUN_SEED={seed} repeats this schedule)");
    assert_eq!(report.delivered, ops as u64, "{report}");
    assert_eq!(report.committed, ops as u64, "{report}");
    assert_eq!(report.rows, ops as u64, "{report}");
    assert_eq!(
        (report.lost, report.applied_twice, report.misdelivered),
        (0, 0, 0),
        "{report}"
    );
    assert!(report.exactly_once());
    // The run did meet faults, and the batcher answered retries from the canister's record.
    let f = &report.faults;
    assert!(
        f.dropped_answers + f.delayed_answers + f.stops + f.upgrades > 0,
        "{report}"
    );
    report
}

/// A seed from the clock, printed with the report so a failing schedule can be rerun.
fn tokio_seed() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}
