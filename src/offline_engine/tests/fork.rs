//! `Canister::fork`: a fork runs and meters every later message exactly as the canister it was
//! taken from, under both metering profiles, and refuses while anything is in flight.
//! The reference canister's wasm comes from `scripts/build.sh` (a missing wasm fails the test).

mod common;

use common::{engine_metering, figures};
use offline_engine::{Canister, EngineError, Execution, MessageResult, Metering, Settings};

fn bench_canister() -> Vec<u8> {
    let path = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../target/canister/bench_canister.wasm");
    std::fs::read(&path)
        .unwrap_or_else(|e| panic!("{}: {e}; build it with scripts/build.sh", path.display()))
}

/// The same messages on `c`: writes, the timer's flush with its self-call, a query, an
/// upgrade, and writes after it.
fn later_messages(c: &mut Canister) -> Vec<Execution> {
    let mut out = Vec::new();
    for i in 0..3i64 {
        let arg =
            candid::encode_args((format!("late{i}"), format!("late{i}@example.com"))).unwrap();
        out.push(c.update("create_user", &arg).unwrap());
        let arg = candid::encode_args((i + 1, 7.5f64)).unwrap();
        out.push(c.update("submit_create_order", &arg).unwrap());
    }
    c.advance_time(2_000_000_000);
    out.extend(c.tick().unwrap());
    out.push(
        c.query("counts", &candid::encode_args(()).unwrap())
            .unwrap(),
    );
    // `(opt record {})`: default settings.
    let init = hex::decode("4449444c026e016c00010001").unwrap();
    let program = c.program().clone();
    out.push(c.upgrade(&program, &init).unwrap());
    let arg = candid::encode_args(("after".to_string(), "after@example.com".to_string())).unwrap();
    out.push(c.update("create_user", &arg).unwrap());
    out
}

fn fork_meters_as_the_original(metering: Metering) {
    let engine = engine_metering(metering);
    let program = engine.load(&bench_canister()).unwrap();
    let init = hex::decode("4449444c026e016c00010001").unwrap();
    let (mut c, _) = Canister::install(&engine, &program, &init, Settings::default()).unwrap();
    // State to carry: rows in stable memory, ops queued in the heap, a timer set.
    for i in 0..20i64 {
        let arg = candid::encode_args((format!("u{i}"), format!("u{i}@example.com"))).unwrap();
        let e = c.update("create_user", &arg).unwrap();
        assert!(matches!(e.result, MessageResult::Reply(_)), "{e:?}");
    }
    let arg = candid::encode_args((1i64, 12.5f64)).unwrap();
    let e = c.update("submit_create_order", &arg).unwrap();
    assert!(matches!(e.result, MessageResult::Reply(_)), "{e:?}");
    assert_ne!(c.global_timer(), 0, "a submit sets the timer");

    let mut fork = c.fork().unwrap();
    assert_eq!(fork.stable_memory(), c.stable_memory());
    assert_eq!(fork.heap_size_bytes(), c.heap_size_bytes());
    assert_eq!(fork.global_timer(), c.global_timer());
    assert_eq!(fork.time(), c.time());
    assert_eq!(fork.cycles(), c.cycles());
    assert_eq!(fork.certified_data(), c.certified_data());

    let original: Vec<_> = later_messages(&mut c).iter().map(figures).collect();
    let forked: Vec<_> = later_messages(&mut fork).iter().map(figures).collect();
    assert!(original.len() > 10, "{original:?}");
    assert_eq!(forked, original);
    assert_eq!(fork.stable_memory(), c.stable_memory());
    assert_eq!(fork.cycles(), c.cycles());
}

#[test]
fn a_fork_meters_every_later_message_as_the_original() {
    fork_meters_as_the_original(Metering::POCKET_IC_13);
}

#[test]
fn a_fork_meters_every_later_message_as_the_original_under_the_memory_tracker() {
    fork_meters_as_the_original(Metering::IC_DMT);
}

#[test]
fn a_fork_does_not_change_the_original() {
    let engine = engine_metering(Metering::IC_DMT);
    let program = engine.load(&bench_canister()).unwrap();
    let init = hex::decode("4449444c026e016c00010001").unwrap();
    let (mut c, _) = Canister::install(&engine, &program, &init, Settings::default()).unwrap();
    let (mut twin, _) = Canister::install(&engine, &program, &init, Settings::default()).unwrap();
    let mut fork = c.fork().unwrap();
    // The fork's writes stay in the fork.
    let arg = candid::encode_args(("only-fork".to_string(), "f@example.com".to_string())).unwrap();
    fork.update("create_user", &arg).unwrap();
    assert_ne!(fork.stable_memory(), c.stable_memory());
    // The original still meters as a canister that was never forked.
    let original: Vec<_> = later_messages(&mut c).iter().map(figures).collect();
    let never_forked: Vec<_> = later_messages(&mut twin).iter().map(figures).collect();
    assert_eq!(original, never_forked);
}

#[test]
fn a_canister_with_a_call_in_flight_is_not_forked() {
    let engine = common::engine();
    let program = common::program(&engine, include_str!("canisters/caller.wat"));
    let settings = Settings::default();
    let own_id = settings.canister_id.clone();
    let (mut c, _) = Canister::install(&engine, &program, &[], settings).unwrap();
    // `call`: callee, method, cycles, timeout, payload (canisters/caller.wat).
    let mut arg = (own_id.len() as u32).to_le_bytes().to_vec();
    arg.extend_from_slice(&own_id);
    arg.extend_from_slice(&4u32.to_le_bytes());
    arg.extend_from_slice(b"bump");
    arg.extend_from_slice(&0u64.to_le_bytes());
    arg.extend_from_slice(&0u32.to_le_bytes());
    let e = c.update("call", &arg).unwrap();
    assert!(!e.result.is_trap(), "{e:?}");
    assert!(c.has_pending_work());
    assert!(matches!(c.fork(), Err(EngineError::NotQuiescent)));
    // The call and its answer have run, but nobody took the answer to the ingress message.
    c.tick().unwrap();
    assert!(!c.has_pending_work());
    assert!(matches!(c.fork(), Err(EngineError::NotQuiescent)));
    // Called and answered to the end, a canister forks, its counter with it.
    let (mut c, _) = Canister::install(&engine, &program, &[], Settings::default()).unwrap();
    let (answer, _) = c.update_and_wait("call", &arg).unwrap();
    assert!(matches!(answer, MessageResult::Reply(_)), "{answer:?}");
    let mut fork = c.fork().unwrap();
    let bumped = |c: &mut Canister| match c.update("bump", &[]).unwrap().result {
        MessageResult::Reply(bytes) => bytes,
        other => panic!("{other:?}"),
    };
    assert_eq!(bumped(&mut fork), bumped(&mut c));
}
