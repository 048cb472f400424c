//! What a host (such as the PocketIC-protocol server) changes between messages: cycles,
//! controllers, and update calls awaited as a given caller.

mod common;
use common::*;
use offline_engine::{Canister, MessageResult, Settings};

const HOST: &str = r#"
(module
  (import "ic0" "msg_reply" (func $reply))
  (import "ic0" "msg_reply_data_append" (func $append (param i32 i32)))
  (import "ic0" "msg_caller_size" (func $caller_size (result i32)))
  (import "ic0" "msg_caller_copy" (func $caller_copy (param i32 i32 i32)))
  (import "ic0" "canister_cycle_balance128" (func $balance (param i32)))
  (import "ic0" "is_controller" (func $is_controller (param i32 i32) (result i32)))
  (memory 1)
  (func $caller (result i32)
    (call $caller_copy (i32.const 1000) (i32.const 0) (call $caller_size))
    (call $caller_size))
  (func (export "canister_post_upgrade")
    (i32.store (i32.const 2000) (call $caller))
    (memory.copy (i32.const 2004) (i32.const 1000) (i32.load (i32.const 2000))))
  (func (export "canister_query balance")
    (call $balance (i32.const 0)) (call $append (i32.const 0) (i32.const 16)) (call $reply))
  (func (export "canister_query caller_is_controller")
    (i32.store (i32.const 0) (call $is_controller (i32.const 1000) (call $caller)))
    (call $append (i32.const 0) (i32.const 4)) (call $reply))
  (func (export "canister_update whoami")
    (call $append (i32.const 1000) (call $caller)) (call $reply))
  (func (export "canister_query upgrader")
    (call $append (i32.const 2004) (i32.load (i32.const 2000))) (call $reply)))
"#;

const ALICE: &[u8] = &[0xa1, 0x1c, 0xe0];
const BOB: &[u8] = &[0xb0, 0xb0];

fn host_canister() -> (offline_engine::Engine, Canister) {
    let settings = Settings {
        controllers: vec![ALICE.to_vec()],
        cycles: 1_000,
        ..Settings::default()
    };
    let (engine, c, _) = install_with(HOST, settings);
    (engine, c)
}

fn reply(r: &MessageResult) -> Vec<u8> {
    r.reply().expect("reply").to_vec()
}

#[test]
fn add_cycles_is_seen_by_the_next_message_and_saturates() {
    let (_engine, mut c) = host_canister();
    assert_eq!(c.add_cycles(234), 1_234);
    assert_eq!(c.cycles(), 1_234);
    let e = c.query("balance", &[]).unwrap();
    assert_eq!(reply(&e.result), 1_234u128.to_le_bytes());
    assert_eq!(c.add_cycles(u128::MAX), u128::MAX);
}

#[test]
fn set_controllers_changes_is_controller_and_the_upgrade_caller() {
    let (engine, mut c) = host_canister();
    let ask = |c: &mut Canister, who: &[u8]| {
        let e = c.query_as(who, "caller_is_controller", &[]).unwrap();
        reply(&e.result)
    };
    assert_eq!(ask(&mut c, ALICE), [1, 0, 0, 0]);
    assert_eq!(ask(&mut c, BOB), [0, 0, 0, 0]);
    c.set_controllers(vec![BOB.to_vec(), ALICE.to_vec()]);
    assert_eq!(c.settings().controllers, [BOB.to_vec(), ALICE.to_vec()]);
    assert_eq!(ask(&mut c, BOB), [1, 0, 0, 0]);
    assert_eq!(ask(&mut c, ALICE), [1, 0, 0, 0]);
    let program = c.program().clone();
    let e = c.upgrade(&program, &[]).unwrap();
    assert!(!e.result.is_trap(), "{e:?}");
    let e = c.query("upgrader", &[]).unwrap();
    assert_eq!(reply(&e.result), BOB);
    drop(engine);
}

#[test]
fn update_and_wait_as_runs_with_the_given_caller() {
    let (_engine, mut c) = host_canister();
    let (r, runs) = c.update_and_wait_as(BOB, "whoami", &[]).unwrap();
    assert_eq!(r, MessageResult::Reply(BOB.to_vec()));
    assert_eq!(runs.len(), 1);
    let (r, _) = c.update_and_wait_as(BOB, "no_such_method", &[]).unwrap();
    assert_eq!(
        r,
        MessageResult::Reject(
            offline_engine::reject_code::CANISTER_ERROR,
            "Canister has no update method 'no_such_method'.".into()
        )
    );
}
