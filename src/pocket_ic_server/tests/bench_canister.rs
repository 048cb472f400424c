//! The project's canister through the `pocket-ic` client and the server: canbench's own
//! sequence of calls gives the same figures as the engine's direct run, and the deployable
//! canister installs (in chunks when large), takes writes from its controller and refuses a
//! stranger's with a reject (code 4), flushes on its timer across ticks and keeps its database
//! across an upgrade. Build the wasms first (`scripts/test.sh` does); a missing wasm fails the
//! test.

mod common;

use std::path::PathBuf;
use std::time::Duration;

use bench_api::{Counts, CountsResult, InitArgs, Outcome, Ticket, TicketStatus, WriteError};
use candid::{Decode, Encode, Principal};
use common::*;
use offline_engine::canbench::{self, BenchResult};
use offline_engine::{Engine, EngineConfig};
use pocket_ic::{CanisterSettings, RejectCode};

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
        "users_orders_add_users",
        "users_orders_select_like",
        "users_orders_add_100_orders_indexed",
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

#[test]
fn deployable_canister_writes_flushes_on_its_timer_and_keeps_data_across_an_upgrade() {
    let wasm = wasm_file("bench_canister.wasm");
    let owner = Principal::from_slice(&[0x0e, 0x11]);
    let pic = instance(false);
    let id = pic.create_canister_with_settings(Some(owner), None);
    // ic-cdk-timers needs cycles to schedule its timer (it checks its balance before the
    // self-call), and the server charges the IC's fees.
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
        Decode!(&out, Result<Outcome, WriteError>).unwrap(),
        Ok(Outcome::Committed {
            rows_changed: 1,
            last_insert_rowid: 1
        })
    );
    // A refusal is a reject with code 4 (CanisterReject): here a caller that is not a writer.
    let stranger = Principal::from_slice(&[0x5e, 0x12]);
    let refused = pic
        .update_call(
            id,
            stranger,
            "create_user",
            Encode!(&"bob", &"bob@example.com").unwrap(),
        )
        .expect_err("a stranger may not write");
    assert_eq!(
        refused.reject_code,
        RejectCode::CanisterReject,
        "{refused:?}"
    );
    // A submit replies with its ticket; the op waits in the queue.
    let out = call("submit_create_order", Encode!(&1i64, &9.5f64).unwrap());
    let ticket = Decode!(&out, Result<Ticket, WriteError>).unwrap().unwrap();
    let status = |ticket: Ticket| {
        let r = pic
            .query_call(id, owner, "ticket_status", Encode!(&ticket).unwrap())
            .unwrap();
        Decode!(&r, TicketStatus).unwrap()
    };
    assert_eq!(status(ticket), TicketStatus::Pending);
    let counts = || {
        let r = pic
            .query_call(id, owner, "counts", Encode!().unwrap())
            .unwrap();
        match Decode!(&r, CountsResult).unwrap() {
            CountsResult::Ok(c) => c,
            CountsResult::Err(e) => panic!("counts: {e}"),
        }
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
    assert!(
        matches!(
            status(ticket),
            TicketStatus::Committed {
                rows_changed: 1,
                ..
            }
        ),
        "{:?}",
        status(ticket)
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
        Decode!(&out, Result<Outcome, WriteError>).unwrap(),
        Ok(Outcome::Committed { .. })
    ));
    assert_eq!(counts().orders, 2);
}
