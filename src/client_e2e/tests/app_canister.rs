//! The application canister example (`examples/app_canister`, built by `scripts/build.sh`)
//! forwarding user writes to the database canister, with the batcher and with one call per
//! write: every user write is committed once, and its outcome recorded under its ticket.

use client_e2e::Replica;
use client_e2e::app::{Mode, measure_mode};

fn forwards_every_write_once(mode: Mode, seed: u8) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
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
