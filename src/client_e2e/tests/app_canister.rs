//! The application canister example (`examples/app_canister`, built by `scripts/build.sh`)
//! forwarding user writes to the database canister, with the batcher and with one call per
//! write: every user write is committed once, and its outcome recorded under its ticket; the
//! library's driver sends the due batches with the user calls (the timer only for the last);
//! and the message-level breakdown of the application canister's cycles adds up to its balance
//! under each metering profile.

use client_e2e::Replica;
use client_e2e::app::{Mode, Path, breakdown, measure_mode};
use offline_engine::Metering;

fn forwards_every_write_once(mode: Mode, seed: u8) {
    let runtime = client_e2e::runtime().expect("a runtime");
    runtime.block_on(async {
        let replica = Replica::start(None).expect("a replica");
        {
            let cost = measure_mode(&replica, mode, 300, 30, seed)
                .await
                .expect("measured");
            println!("{mode:?}: {cost:?}");
            assert_eq!(
                (
                    cost.summary.tickets,
                    cost.summary.committed,
                    cost.summary.failed,
                    cost.summary.pending
                ),
                (300, 300, 0, 0),
                "{mode:?}"
            );
            assert_eq!(cost.rows, 300, "{mode:?}: every write applied once");
            assert!(cost.app_cycles > 0 && cost.database_cycles > 0, "{cost:?}");
            // Exactly once: each ticket's op committed in a row of its own.
            assert_eq!(cost.summary.distinct_rows, 300, "{cost:?}");
            let s = &cost.summary;
            match mode {
                Mode::Direct => assert_eq!(s.calls, 300, "{cost:?}"),
                Mode::Batched => {
                    // Batches of several writes; every call is a batch's first attempt or a
                    // retry with its key, and no batch ran twice.
                    assert!(s.batches < 300, "{cost:?}");
                    assert_eq!(s.calls, s.batches + s.retries, "{cost:?}");
                    assert_eq!(s.calls, s.sent_by_messages + s.sent_by_timer, "{cost:?}");
                    // While user calls keep coming they send the due batches: the timer runs
                    // for the last ops of the run (and a rare pause), not per flush.
                    assert!(s.sent_by_timer <= s.timers, "{cost:?}");
                    assert!(
                        s.timers <= 3 && s.sent_by_messages >= s.calls.saturating_sub(3),
                        "{cost:?}"
                    );
                }
            }
        }
    });
}

#[test]
fn one_call_per_write_forwards_every_write_once() {
    forwards_every_write_once(Mode::Direct, 50);
}

#[test]
fn the_batcher_forwards_every_write_once() {
    forwards_every_write_once(Mode::Batched, 51);
}

#[test]
fn the_breakdown_adds_up_to_the_application_canisters_balance() {
    for metering in client_e2e::PROFILES {
        breakdown_adds_up(metering);
    }
}

fn breakdown_adds_up(metering: Metering) {
    // 200 writes, 50 a round: 4 rounds of user calls (engine: the offline engine's subnet).
    let b = breakdown(Path::App(Mode::Batched), 200, 50, metering).expect("measured");
    println!("{}", client_e2e::app::render_breakdown(&b));
    assert_eq!(b.rows, 200, "{}: every write applied once", metering.name);
    let parts: u128 = b.parts.iter().map(|p| p.cycles).sum();
    assert_eq!(parts, b.app_cycles, "{b:?}");
    let calls = b
        .parts
        .iter()
        .find(|p| p.what.starts_with("calls to the database canister"))
        .expect("the calls' fees");
    assert_eq!(calls.count, b.database_messages);
    assert!(
        calls.cycles >= 260_000 * u128::from(calls.count),
        "{calls:?}"
    );
    // At most one flush a round (the next user call sends what is due), no self-calls of a
    // timer library, and the global timer only for the last ops (the fourth round's).
    assert!(b.database_messages <= 5, "{b:?}");
    assert!(
        b.parts.iter().all(|p| !p.what.contains("timer_executor")),
        "{b:?}"
    );
    let timer_runs = b
        .parts
        .iter()
        .filter(|p| p.what.contains("canister_global_timer"))
        .map(|p| p.count)
        .sum::<u64>();
    assert!(timer_runs <= 1, "{b:?}");
    let direct = breakdown(Path::UserDirect, 200, 50, metering).expect("measured");
    assert_eq!((direct.rows, direct.database_messages), (200, 200));
}
