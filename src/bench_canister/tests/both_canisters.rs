//! The generic checks of `tests/generic` on the reference canister and on the example canister
//! (`examples/notes_canister`): the same promises, kept by the same library. Build both wasms
//! first (scripts/build.sh, scripts/build_example.sh; scripts/test.sh does).

mod generic;

use candid::Encode;
use generic::Target;

const REFERENCE: Target = Target {
    wasm: "target/canister/bench_canister.wasm",
    good: |i| {
        let name = format!("user{i}");
        let email = format!("{name}@example.com");
        ("submit_create_user", Encode!(&name, &email).unwrap())
    },
    // NaN is bound as NULL: orders.amount is NOT NULL (SQLITE_CONSTRAINT_NOTNULL).
    failing: |i| {
        let user = i as i64;
        ("submit_create_order", Encode!(&user, &f64::NAN).unwrap())
    },
    failing_code: 1299,
    oversized: || {
        let name = "n".repeat(2_000);
        ("submit_create_user", Encode!(&name, &"e").unwrap())
    },
};

const NOTES: Target = Target {
    wasm: "target/canister/notes_canister.wasm",
    good: |i| ("add_note", Encode!(&format!("note {i}")).unwrap()),
    // An empty note breaks the table's CHECK (SQLITE_CONSTRAINT_CHECK).
    failing: |_| ("add_note", Encode!(&"").unwrap()),
    failing_code: 275,
    oversized: || ("add_note", Encode!(&"n".repeat(2_000)).unwrap()),
};

#[test]
fn reference_strangers_are_kept_out() {
    generic::strangers_are_kept_out(&REFERENCE);
}

#[test]
fn notes_strangers_are_kept_out() {
    generic::strangers_are_kept_out(&NOTES);
}

#[test]
fn reference_model_run() {
    for seed in [1, 2, 3] {
        generic::model_run(&REFERENCE, seed, 120);
    }
}

#[test]
fn notes_model_run() {
    for seed in [1, 2, 3] {
        generic::model_run(&NOTES, seed, 120);
    }
}

/// The example's `min_flush_budget` (20 million) is at least 16 times its dearest op: a note at
/// its size limit, and a delete, each in a flush of its own, warm and as the first write after
/// an upgrade (engine: offline (wasmtime, IC metering)).
#[test]
fn notes_floor_is_sixteen_times_the_dearest_op() {
    let mut c = generic::install(
        &NOTES,
        batch_types::InitArgs {
            flush_size: Some(1_000),
            ..Default::default()
        },
    );
    let big = "n".repeat(1_000);
    let mut dearest = 0;
    for upgrade_first in [false, true, false] {
        if upgrade_first {
            c.upgrade();
        }
        for call in [
            ("add_note", Encode!(&big).unwrap()),
            ("delete_note", Encode!(&1i64).unwrap()),
        ] {
            let generic::Submitted::Ticket(_) = c.submit(generic::CONTROLLER, call, false) else {
                panic!("accepted")
            };
            let summary = c.flush();
            assert_eq!((summary.executed, summary.committed), (1, 1));
            dearest = dearest.max(summary.instructions);
        }
    }
    assert!(
        dearest * 16 <= 20_000_000,
        "the dearest note op costs {dearest} instructions"
    );
}

/// The example's committed `.did` is its code's interface (both directions).
#[test]
fn notes_did_matches_the_code() {
    let mut c = generic::install(&NOTES, batch_types::InitArgs::default());
    generic::did_matches_the_code(
        &mut c.canister,
        "examples/notes_canister/notes_canister.did",
    );
}
