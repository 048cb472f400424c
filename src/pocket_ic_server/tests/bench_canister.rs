//! The project's canister through the `pocket-ic` client and the server: canbench's own
//! sequence of calls gives the same figures as the engine's direct run, and the deployable
//! canister installs (in chunks when large), takes writes from its controller, flushes on its
//! timer across ticks and keeps its database across an upgrade. Build the wasms first
//! (`scripts/test.sh` does); a missing wasm fails the test.

mod common;

use std::path::PathBuf;
use std::time::Duration;

use candid::{CandidType, Decode, Deserialize, Encode, Principal};
use common::*;
use offline_engine::canbench::{self, BenchResult};
use offline_engine::{Engine, EngineConfig};
use pocket_ic::CanisterSettings;

fn wasm_file(name: &str) -> Vec<u8> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../target/canister")
        .join(name);
    std::fs::read(&path)
        .unwrap_or_else(|e| panic!("{}: {e}; build it with scripts/build.sh", path.display()))
}

/// canbench 0.7.0's `init_pocket_ic`, `init_canister` and `run_benchmark`, call for call.
#[test]
fn canbench_s_calls_give_the_engine_s_direct_figures() {
    let wasm = wasm_file("bench_canister_canbench.wasm");
    let pic = builder()
        .with_max_request_time_ms(None)
        .with_benchmarking_application_subnet()
        .build();
    let id = pic.create_canister_with_settings(
        None,
        Some(CanisterSettings {
            environment_variables: None,
            ..Default::default()
        }),
    );
    pic.add_cycles(id, 1_000_000_000_000_000);
    pic.install_canister(id, wasm.clone(), vec![], None);

    let engine = Engine::new(EngineConfig::default()).unwrap();
    let program = engine.load(&wasm).unwrap();
    let mut direct = canbench::install(&engine, &program, &[], None).unwrap();
    let names = [
        "seed_add_users",
        "seed_select_like",
        "seed_add_100_indexed_orders",
        "batched_insert_1",
    ];
    for name in names {
        let reply = pic
            .query_call(
                id,
                Principal::anonymous(),
                &format!("__canbench__{name}"),
                Encode!(&()).unwrap(),
            )
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let via_server: BenchResult = candid::decode_one(&reply).unwrap();
        let run = canbench::run_benchmark(&mut direct, name).unwrap();
        assert_eq!(via_server, run.result, "{name}");
        assert!(via_server.total.instructions() > 0, "{name}");
    }
    // batched_insert_1 measures scopes; they arrived too.
    let reply = pic
        .query_call(
            id,
            Principal::anonymous(),
            "__canbench__batched_insert_1",
            Encode!(&()).unwrap(),
        )
        .unwrap();
    let r: BenchResult = candid::decode_one(&reply).unwrap();
    assert!(!r.scopes.is_empty());
}

#[derive(CandidType, Deserialize, Clone, Debug, Default)]
struct InitArgs {
    flush_size: Option<u64>,
    max_delay_ms: Option<u64>,
    max_pending: Option<u64>,
    flush_instruction_budget: Option<u64>,
    outcome_capacity: Option<u64>,
}

#[derive(CandidType, Deserialize, Clone, Debug, PartialEq)]
enum Outcome {
    Committed {
        rows_changed: u64,
        last_insert_rowid: i64,
    },
    Failed(String),
}

#[derive(CandidType, Deserialize, Clone, Debug, PartialEq)]
struct FlushSummary {
    executed: u64,
    committed: u64,
    failed: u64,
    remaining: u64,
    more_due: bool,
    instructions: u64,
}

#[derive(CandidType, Deserialize, Clone, Debug, PartialEq)]
struct Submitted {
    ticket: u64,
    flushed: Option<FlushSummary>,
}

#[derive(CandidType, Deserialize, Clone, Debug, PartialEq)]
enum WriteError {
    QueueFull { capacity: u64 },
    Invalid(String),
    NotAuthorized,
    Database(String),
}

#[derive(CandidType, Deserialize, Clone, Debug, PartialEq)]
struct Counts {
    users: u64,
    orders: u64,
}

#[test]
fn deployable_canister_writes_flushes_on_its_timer_and_keeps_data_across_an_upgrade() {
    let wasm = wasm_file("bench_canister.wasm");
    let owner = Principal::from_slice(&[0x0e, 0x11]);
    let pic = instance(false);
    let id = pic.create_canister_with_settings(Some(owner), None);
    // ic-cdk-timers needs cycles to schedule its timer (no fees are charged here, but the
    // canister checks its balance).
    pic.add_cycles(id, 10_000_000_000_000);
    let init = Encode!(&Some(InitArgs {
        flush_size: Some(100),
        max_delay_ms: Some(1_000),
        ..InitArgs::default()
    }))
    .unwrap();
    // The client installs a module and argument of 2 MB or more through the chunk store.
    let chunked = wasm.len() + init.len() >= 2_000_000;
    pic.install_canister(id, wasm.clone(), init, Some(owner));
    let chunks = pic.stored_chunks(id, Some(owner)).unwrap();
    assert_eq!(!chunks.is_empty(), chunked, "{} chunks", chunks.len());

    let call = |method: &str, arg: Vec<u8>| -> Vec<u8> {
        pic.update_call(id, owner, method, arg)
            .unwrap_or_else(|e| panic!("{method}: {e}"))
    };
    let out = call(
        "create_user",
        Encode!(&"alice", &"alice@example.com").unwrap(),
    );
    assert_eq!(
        Decode!(&out, Outcome).unwrap(),
        Outcome::Committed {
            rows_changed: 1,
            last_insert_rowid: 1
        }
    );
    let out = call("submit_create_order", Encode!(&1i64, &9.5f64).unwrap());
    let submitted = Decode!(&out, Result<Submitted, WriteError>)
        .unwrap()
        .unwrap();
    assert_eq!(submitted.flushed, None);
    let counts = || {
        let r = pic
            .query_call(id, owner, "counts", Encode!().unwrap())
            .unwrap();
        Decode!(&r, Result<Counts, String>).unwrap().unwrap()
    };
    assert_eq!(
        counts(),
        Counts {
            users: 1,
            orders: 0
        }
    );
    // The timer flushes the queue once its delay has passed, in a later round.
    pic.tick();
    assert_eq!(counts().orders, 0);
    pic.advance_time(Duration::from_millis(1_000));
    pic.tick();
    pic.tick();
    assert_eq!(
        counts(),
        Counts {
            users: 1,
            orders: 1
        }
    );

    // The database lives in stable memory: an upgrade keeps it.
    let upgrade = Encode!(&None::<InitArgs>).unwrap();
    pic.upgrade_canister(id, wasm, upgrade, Some(owner))
        .expect("upgrades");
    assert_eq!(
        counts(),
        Counts {
            users: 1,
            orders: 1
        }
    );
    let out = call("create_order", Encode!(&1i64, &3.0f64).unwrap());
    assert!(matches!(
        Decode!(&out, Outcome).unwrap(),
        Outcome::Committed { .. }
    ));
    assert_eq!(counts().orders, 2);
}
