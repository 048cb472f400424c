//! Calls between canisters through the server, driven by the `pocket-ic` 13 client: replies,
//! rejects with the replica's codes and messages, the callee's trap rolled back, cycles
//! attached, accepted and refunded, the fees (derived from the fee schedule and the engine's
//! own run of the same calls), messages running between a call and its answer, calls between
//! subnets taking rounds, best-effort calls timing out, `stop_canister` waiting for open calls,
//! memory limits set with `update_settings`, and the reference canister under a memory
//! allocation. The test canisters are the engine's (`offline_engine/tests/canisters`).

mod common;

use std::time::Duration;

use candid::{Encode, Nat, Principal};
use common::*;
use ic_management_canister_types::{CanisterIdRecord, CanisterSettings, CanisterStatusType};
use offline_engine::fees::{IC_2025, ingress_bytes};
use offline_engine::messages::Ingress;
use offline_engine::{Canister, Charging, Engine, EngineConfig, Settings, Subnet, SubnetConfig};
use pocket_ic::{ErrorCode, PocketIc, RejectCode};
use pocket_ic_server::topology::{canister_id, canister_index};

const CALLER: &str = include_str!("../../offline_engine/tests/canisters/caller.wat");
const CALLEE: &str = include_str!("../../offline_engine/tests/canisters/callee.wat");
const GROWER: &str = include_str!("../../offline_engine/tests/canisters/grower.wat");
const ALICE: Principal = Principal::from_slice(&[0xa1, 0x1c, 0xe0]);
const CYCLES: u128 = 100_000_000_000_000;

fn wasm_of(wat: &str) -> Vec<u8> {
    wat::parse_str(wat).expect("valid wat")
}

/// A canister running `wat`, installed by ALICE on `subnet` (the first subnet if `None`).
fn canister(pic: &PocketIc, wat: &str, subnet: Option<Principal>) -> Principal {
    let id = match subnet {
        Some(s) => pic.create_canister_on_subnet(Some(ALICE), None, s),
        None => pic.create_canister_with_settings(Some(ALICE), None),
    };
    pic.add_cycles(id, CYCLES);
    pic.install_canister(id, wasm_of(wat), vec![], Some(ALICE));
    id
}

/// The argument of the caller's `call`.
fn call_arg(
    callee: &Principal,
    method: &str,
    cycles: u64,
    timeout: u32,
    payload: &[u8],
) -> Vec<u8> {
    let callee = callee.as_slice();
    let mut v = (callee.len() as u32).to_le_bytes().to_vec();
    v.extend_from_slice(callee);
    v.extend_from_slice(&(method.len() as u32).to_le_bytes());
    v.extend_from_slice(method.as_bytes());
    v.extend_from_slice(&cycles.to_le_bytes());
    v.extend_from_slice(&timeout.to_le_bytes());
    v.extend_from_slice(payload);
    v
}

/// The caller's answer: tag (0 reply, else the reject code), refund, counters at call and at
/// answer, and the reply data or reject message.
#[derive(Debug, PartialEq, Eq)]
struct Answer {
    tag: u8,
    refund: u128,
    counter_at_call: u32,
    counter_at_answer: u32,
    data: Vec<u8>,
}

fn answer(bytes: &[u8]) -> Answer {
    assert!(bytes.len() >= 25, "{bytes:?}");
    Answer {
        tag: bytes[0],
        refund: u128::from_le_bytes(bytes[1..17].try_into().unwrap()),
        counter_at_call: u32::from_le_bytes(bytes[17..21].try_into().unwrap()),
        counter_at_answer: u32::from_le_bytes(bytes[21..25].try_into().unwrap()),
        data: bytes[25..].to_vec(),
    }
}

fn call(pic: &PocketIc, a: Principal, b: &Principal, method: &str, cycles: u64) -> Answer {
    let reply = pic
        .update_call(a, ALICE, "call", call_arg(b, method, cycles, 0, b""))
        .expect("the caller replies");
    answer(&reply)
}

fn text(a: &Answer) -> String {
    String::from_utf8(a.data.clone()).unwrap()
}

#[test]
fn replies_rejects_and_traps_reach_the_caller_as_the_replica_words_them() {
    let pic = instance(false);
    let (a, b) = (canister(&pic, CALLER, None), canister(&pic, CALLEE, None));
    let hi = pic
        .update_call(a, ALICE, "call", call_arg(&b, "echo", 0, 0, b"hi"))
        .unwrap();
    assert_eq!(answer(&hi).data, b"hi");
    let rejected = call(&pic, a, &b, "reject", 0);
    assert_eq!((rejected.tag, text(&rejected)), (4, "no thanks".into()));
    let missing = call(&pic, a, &b, "nope", 0);
    assert_eq!(missing.tag, 5);
    assert_eq!(
        text(&missing),
        format!(
            "IC0536: Error from Canister {b}: Canister has no update method 'nope'..\n\
             Check that the method being called is exported by the target canister. \
             See documentation: https://docs.internetcomputer.org/references/execution-errors#method-not-found"
        )
    );
    let silent = call(&pic, a, &b, "silent", 0);
    assert_eq!((silent.tag, text(&silent)), (5, "No response".into()));
    // The callee's trap: rejected with its user error, its changes rolled back.
    let before = pic.query_call(b, ALICE, "get", vec![]).unwrap();
    let trapped = call(&pic, a, &b, "write_and_trap", 0);
    assert_eq!(trapped.tag, 5);
    assert_eq!(
        text(&trapped),
        format!(
            "IC0503: Error from Canister {b}: Canister called `ic0.trap` with message: 'oops'.\n\
             Consider gracefully handling failures from this canister or altering the canister to handle exceptions. \
             See documentation: https://docs.internetcomputer.org/references/execution-errors#trapped-explicitly"
        )
    );
    assert_eq!(pic.query_call(b, ALICE, "get", vec![]).unwrap(), before);
    let written = call(&pic, a, &b, "write", 0);
    assert_eq!(written.data, 1u32.to_le_bytes());
}

#[test]
fn instruction_counts_and_fees_equal_the_engine_s_run_of_the_same_calls() {
    // Through the server (a subnet with the normal cost schedule: the IC's fees are charged).
    let pic = instance(false);
    let (a, b) = (canister(&pic, CALLER, None), canister(&pic, CALLEE, None));
    let (a0, b0) = (pic.cycle_balance(a), pic.cycle_balance(b));
    let arg = call_arg(&b, "work", 1_000_000, 0, &1_000u32.to_le_bytes());
    let via_server = answer(&pic.update_call(a, ALICE, "call", arg.clone()).unwrap());
    let (a1, b1) = (pic.cycle_balance(a), pic.cycle_balance(b));

    // The engine's own run: the same modules and ids on a subnet of its own, charging on.
    let engine = Engine::new(EngineConfig {
        cache: false,
        cache_dir: None,
        ..EngineConfig::default()
    })
    .unwrap();
    let mut subnet = Subnet::new(SubnetConfig::APPLICATION, 0);
    for (id, wat) in [(a, CALLER), (b, CALLEE)] {
        let program = engine.load(&wasm_of(wat)).unwrap();
        let settings = Settings {
            canister_id: id.as_slice().to_vec(),
            cycles: if id == a { a0 } else { b0 },
            charging: Some(Charging::APPLICATION),
            ..Settings::default()
        };
        subnet.install(
            Canister::install(&engine, &program, &[], settings)
                .unwrap()
                .0,
        );
    }
    let ingress = Ingress {
        id: vec![1],
        sender: ALICE.as_slice().to_vec(),
        receiver: a.as_slice().to_vec(),
        method: "call".into(),
        payload: arg.clone(),
    };
    let (direct, execs) = subnet.execute_ingress(ingress, 5).unwrap();
    let direct = answer(direct.reply().unwrap());
    // B's instruction count, reported through A, is the engine's; so is every figure.
    assert_eq!(via_server, direct);
    let work = u64::from_le_bytes(via_server.data.clone().try_into().unwrap());
    assert!(work > 5 * 1_000, "{work}");

    // The fees, from the fee schedule and the billed instructions of the engine's run.
    let billed = |id: &Principal| -> Vec<u64> {
        execs
            .iter()
            .filter(|(c, _)| c == id.as_slice())
            .map(|(_, e)| e.billed_instructions)
            .collect()
    };
    let ([call_exec, callback], [work_exec]) = (
        <[u64; 2]>::try_from(billed(&a)).unwrap(),
        <[u64; 1]>::try_from(billed(&b)).unwrap(),
    );
    let (f, n) = (IC_2025, 13);
    let accepted = 500_000u128;
    let caller_cost = f.ingress_cost(ingress_bytes(arg.len(), "call"), n)
        + f.execution_cost(call_exec, n)
        + f.call_cost(("work".len() + 4) as u64, n)
        + f.response_transmission_cost(8, n)
        + f.execution_cost(callback, n);
    // `work` accepts nothing: the 1,000,000 attached come back.
    assert_eq!(via_server.refund, 1_000_000);
    assert_eq!(a0 - a1, caller_cost);
    assert_eq!(b0 - b1, f.execution_cost(work_exec, n));

    // Cycles the callee accepts stay with it; the rest comes back.
    let half = call(&pic, a, &b, "accept_half", 1_000_000);
    assert_eq!((half.tag, half.refund), (0, accepted));
    assert_eq!(half.data, accepted.to_le_bytes());
}

#[test]
fn other_messages_run_between_a_call_and_its_answer() {
    let pic = instance(false);
    let (a, b) = (canister(&pic, CALLER, None), canister(&pic, CALLEE, None));
    let call = pic
        .submit_call(a, ALICE, "call", call_arg(&b, "echo", 0, 0, b"hi"))
        .unwrap();
    let bump = pic.submit_call(a, ALICE, "bump", vec![]).unwrap();
    let t = pic.get_time();
    pic.tick();
    // One round: the call, the bump, the callee, the callback.
    assert_eq!(pic.get_time(), t + Duration::from_nanos(1));
    assert_eq!(
        pic.ingress_status(bump),
        Some(Ok(1u32.to_le_bytes().to_vec()))
    );
    let got = answer(&pic.ingress_status(call).unwrap().unwrap());
    assert_eq!((got.counter_at_call, got.counter_at_answer), (0, 1));
    // A self-call: the ingress bump queued behind the call runs before the self-call.
    let call = pic
        .submit_call(a, ALICE, "call", call_arg(&a, "bump", 0, 0, b""))
        .unwrap();
    let bump = pic.submit_call(a, ALICE, "bump", vec![]).unwrap();
    pic.tick();
    assert_eq!(
        pic.ingress_status(bump),
        Some(Ok(2u32.to_le_bytes().to_vec()))
    );
    let got = answer(&pic.ingress_status(call).unwrap().unwrap());
    assert_eq!(got.data, 3u32.to_le_bytes());
    assert_eq!((got.counter_at_call, got.counter_at_answer), (1, 3));
}

fn two_subnets() -> (PocketIc, Principal, Principal) {
    let pic = builder()
        .with_application_subnet()
        .with_application_subnet()
        .build();
    let subnets = pic.topology().get_app_subnets();
    assert_eq!(subnets.len(), 2);
    let a = canister(&pic, CALLER, Some(subnets[0]));
    let b = canister(&pic, CALLEE, Some(subnets[1]));
    assert_ne!(pic.get_subnet(a), pic.get_subnet(b));
    (pic, a, b)
}

#[test]
fn calls_between_subnets_take_rounds_and_best_effort_calls_time_out() {
    let (pic, a, b) = two_subnets();
    // The request leaves A's subnet at the end of round 1, runs at B in round 2, and its answer
    // runs at A in round 3.
    let t = pic.get_time();
    let hi = pic
        .update_call(a, ALICE, "call", call_arg(&b, "echo", 0, 0, b"hi"))
        .unwrap();
    assert_eq!(answer(&hi).data, b"hi");
    assert_eq!(pic.get_time(), t + Duration::from_nanos(3));

    // A best-effort call with a 1 s timeout, and 2 s passing before the request can run.
    let m = pic
        .submit_call(a, ALICE, "call", call_arg(&b, "write", 3_000, 1, b""))
        .unwrap();
    pic.tick();
    pic.advance_time(Duration::from_secs(2));
    pic.tick();
    let got = answer(&pic.ingress_status(m).expect("answered").unwrap());
    assert_eq!(got.tag, RejectCode::SysUnknown as u8);
    assert_eq!(text(&got), "Call deadline has expired.");
    assert_eq!(got.refund, 0);
    // The expired request never ran at B: its counter is still 0.
    let state = pic.query_call(b, ALICE, "get", vec![]).unwrap();
    assert_eq!(state[..4], [0, 0, 0, 0]);
}

#[test]
fn undeliverable_calls_are_rejected_as_the_replica_rejects_them() {
    let (pic, a, b) = two_subnets();
    // An id of B's subnet's range that no canister has.
    let free = canister_id(canister_index(&b).unwrap() + 5);
    let nobody = call(&pic, a, &free, "echo", 0);
    assert_eq!(
        (nobody.tag, text(&nobody)),
        (3, format!("Canister {free} not found"))
    );
    // An id of no subnet.
    let nowhere = Principal::from_slice(&[0, 0, 0, 0, 0, 0, 0, 7, 1, 1]);
    let lost = call(&pic, a, &nowhere, "echo", 0);
    assert_eq!(
        (lost.tag, text(&lost)),
        (3, format!("No route to canister {nowhere}"))
    );
    // The management canister, whose methods this server does not execute for canisters.
    let ic00 = call(&pic, a, &Principal::management_canister(), "raw_rand", 0);
    assert_eq!(ic00.tag, 4);
    assert!(text(&ic00).contains("method `raw_rand`"), "{}", text(&ic00));
    // A stopped canister.
    pic.stop_canister(b, Some(ALICE)).unwrap();
    let stopped = call(&pic, a, &b, "echo", 0);
    assert_eq!(
        (stopped.tag, text(&stopped)),
        (5, format!("Canister {b} is stopped"))
    );
    pic.start_canister(b, Some(ALICE)).unwrap();
    assert_eq!(call(&pic, a, &b, "echo", 0).tag, 0);
}

#[test]
fn stop_canister_waits_for_the_canister_s_open_calls() {
    let (pic, a, b) = two_subnets();
    let m = pic
        .submit_call(a, ALICE, "call", call_arg(&b, "echo", 0, 0, b"hi"))
        .unwrap();
    pic.tick();
    // A waits for B's answer: stopping it leaves it stopping until the answer ran.
    let stop = pic
        .submit_call(
            Principal::management_canister(),
            ALICE,
            "stop_canister",
            Encode!(&CanisterIdRecord { canister_id: a }).unwrap(),
        )
        .unwrap();
    pic.tick();
    assert_eq!(pic.ingress_status(stop.clone()), None);
    let refused = pic.submit_call(a, ALICE, "bump", vec![]).unwrap_err();
    assert_eq!(refused.error_code, ErrorCode::CanisterStopping);
    assert_eq!(refused.reject_message, format!("Canister {a} is stopping"));
    // canister_status runs at the start of the next round, before A's answer arrives.
    assert_eq!(
        pic.canister_status(a, Some(ALICE)).unwrap().status,
        CanisterStatusType::Stopping
    );
    assert_eq!(answer(&pic.ingress_status(m).unwrap().unwrap()).data, b"hi");
    assert_eq!(pic.ingress_status(stop), Some(Ok(Encode!().unwrap())));
    assert_eq!(
        pic.canister_status(a, Some(ALICE)).unwrap().status,
        CanisterStatusType::Stopped
    );
}

#[test]
fn memory_limits_set_by_update_settings_hold() {
    let pic = instance(false);
    let g = canister(&pic, GROWER, None);
    let page = 65_536u64;
    let grow =
        |method: &str, pages: u32| pic.update_call(g, ALICE, method, pages.to_le_bytes().to_vec());
    pic.update_canister_settings(
        g,
        Some(ALICE),
        CanisterSettings {
            wasm_memory_limit: Some(Nat::from(3 * page)),
            ..CanisterSettings::default()
        },
    )
    .unwrap();
    assert_eq!(grow("grow", 1), Ok(1i32.to_le_bytes().to_vec()));
    let over = grow("grow", 2).unwrap_err();
    assert_eq!(over.error_code, ErrorCode::CanisterWasmMemoryLimitExceeded);
    assert!(
        over.reject_message.starts_with(&format!(
            "Error from Canister {g}: Canister exceeded its current Wasm memory limit of {} bytes. The peak Wasm memory usage was {} bytes.",
            3 * page,
            4 * page
        )),
        "{}",
        over.reject_message
    );
    // A memory allocation just above what it uses: stable memory cannot grow, the heap traps.
    let usage = pic
        .canister_status(g, Some(ALICE))
        .unwrap()
        .memory_metrics
        .wasm_memory_size;
    let module = wasm_of(GROWER).len() as u64;
    let used = u64::try_from(usage.0).unwrap() + module;
    pic.update_canister_settings(
        g,
        Some(ALICE),
        CanisterSettings {
            wasm_memory_limit: Some(Nat::from(0u64)),
            memory_allocation: Some(Nat::from(used + page)),
            ..CanisterSettings::default()
        },
    )
    .unwrap();
    assert_eq!(
        pic.canister_status(g, Some(ALICE))
            .unwrap()
            .settings
            .memory_allocation,
        Nat::from(used + page)
    );
    assert_eq!(grow("stable_grow", 2), Ok((-1i64).to_le_bytes().to_vec()));
    assert_eq!(grow("grow", 1), Ok(2i32.to_le_bytes().to_vec()));
    let full = grow("grow", 1).unwrap_err();
    assert_eq!(full.error_code, ErrorCode::CanisterOutOfMemory);
    assert!(
        full.reject_message.starts_with(&format!(
            "Error from Canister {g}: Canister cannot grow its memory usage..\n"
        )),
        "{}",
        full.reject_message
    );
}

#[test]
fn reinstall_keeps_the_canister_s_cycles_and_starts_its_state_afresh() {
    let pic = instance(false);
    let (a, b) = (canister(&pic, CALLER, None), canister(&pic, CALLEE, None));
    assert_eq!(call(&pic, a, &b, "write", 0).data, 1u32.to_le_bytes());
    pic.update_call(b, ALICE, "write", vec![]).unwrap();
    let cycles = pic.cycle_balance(b);
    pic.reinstall_canister(b, wasm_of(CALLEE), vec![], Some(ALICE))
        .unwrap();
    // The cycles stay: the reinstall costs its execution only (the module has no start or
    // init function, so no instructions: the base fee).
    assert_eq!(cycles - pic.cycle_balance(b), IC_2025.execution_cost(0, 13));
    // The counter (a global) starts again.
    assert_eq!(call(&pic, a, &b, "write", 0).data, 1u32.to_le_bytes());
}
