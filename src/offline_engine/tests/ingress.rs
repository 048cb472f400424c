//! What the IC enforces on ingress messages and replies, and the engine with it:
//! `canister_inspect_message`, the ingress argument limit, the reply size limits, and the
//! pre-upgrade hook's log lines.

mod common;

use common::install_with;
use offline_engine::{MessageResult, Settings, SizeLimits, reject_code};

/// Accepts methods with 2-byte names (`ok`), traps on 4-byte names (`trap`), refuses the rest;
/// every update increments a counter, which `count` reads.
const GATED: &str = r#"
(module
  (import "ic0" "accept_message" (func $accept))
  (import "ic0" "msg_method_name_size" (func $name_size (result i32)))
  (import "ic0" "msg_reply" (func $reply))
  (import "ic0" "msg_reply_data_append" (func $append (param i32 i32)))
  (memory 1)
  (global $n (mut i32) (i32.const 0))
  (func (export "canister_inspect_message")
    ;; a change that must be discarded
    (global.set $n (i32.const 1000))
    (if (i32.eq (call $name_size) (i32.const 4)) (then unreachable))
    (if (i32.eq (call $name_size) (i32.const 2)) (then (call $accept))))
  (func $bump (global.set $n (i32.add (global.get $n) (i32.const 1))) (call $reply))
  (func (export "canister_update ok") (call $bump))
  (func (export "canister_update refuse") (call $bump))
  (func (export "canister_update trap") (call $bump))
  (func (export "canister_query count")
    (i32.store (i32.const 0) (global.get $n))
    (call $append (i32.const 0) (i32.const 4))
    (call $reply)))
"#;

fn count(c: &mut offline_engine::Canister) -> u32 {
    let e = c.query("count", &[]).unwrap();
    u32::from_le_bytes(e.result.reply().unwrap().try_into().unwrap())
}

#[test]
fn inspect_message_decides_which_ingress_messages_run() {
    let (_, mut c, _) = install_with(GATED, Settings::default());
    let accepted = c.update("ok", &[]).unwrap();
    assert_eq!(accepted.result, MessageResult::Reply(vec![]));
    assert_eq!(accepted.entry, "canister_update ok");
    assert_eq!(
        count(&mut c),
        1,
        "inspect_message's own change is discarded"
    );

    let refused = c.update("refuse", &[]).unwrap();
    assert_eq!(refused.entry, "canister_inspect_message");
    let id = candid::Principal::from_slice(offline_engine::DEFAULT_CANISTER_ID);
    assert_eq!(
        refused.result,
        MessageResult::Reject(
            reject_code::CANISTER_REJECT,
            format!("Canister {id} rejected the message")
        )
    );
    assert_eq!(refused.billed_instructions, 0);

    let trapped = c.update("trap", &[]).unwrap();
    assert_eq!(
        trapped.result,
        MessageResult::Reject(
            reject_code::CANISTER_ERROR,
            "Canister trapped: unreachable".into()
        )
    );
    assert_eq!(count(&mut c), 1, "refused messages did not run");

    // The inspection itself can be asked for.
    let inspection = c.inspect_message(&[4], "refuse", &[]).unwrap().unwrap();
    assert!(matches!(inspection.result, MessageResult::Reject(4, _)));
    assert!(inspection.instructions > 0);
}

#[test]
fn ingress_arguments_over_the_limit_are_refused_before_anything_runs() {
    let settings = Settings {
        sizes: SizeLimits {
            ingress_arg_bytes: 10,
            ..SizeLimits::default()
        },
        ..Settings::default()
    };
    let (_, mut c, _) = install_with(GATED, settings);
    assert!(c.update("ok", &[0; 10]).unwrap().result.reply().is_some());
    let refused = c.update("ok", &[0; 11]).unwrap();
    assert_eq!(
        refused.result,
        MessageResult::Reject(
            reject_code::SYS_FATAL,
            "ingress message refused: its argument of 11 bytes exceeds the limit of 10 bytes"
                .into()
        )
    );
    assert_eq!(count(&mut c), 1);
    // The default is the IC's 2 MiB.
    assert_eq!(SizeLimits::default().ingress_arg_bytes, 2 * 1024 * 1024);
}

/// Replies of `n` bytes: `update_<n>` and `query_<n>` for a few sizes around the limits.
const REPLIES: &str = r#"
(module
  (import "ic0" "msg_reply" (func $reply))
  (import "ic0" "msg_reply_data_append" (func $append (param i32 i32)))
  (memory 64)
  (func $reply_n (param $n i32) (call $append (i32.const 0) (local.get $n)) (call $reply))
  (func (export "canister_update update_2m") (call $reply_n (i32.const 2097152)))
  (func (export "canister_update update_2m_1") (call $reply_n (i32.const 2097153)))
  (func (export "canister_query query_3m") (call $reply_n (i32.const 3145728)))
  (func (export "canister_query query_3m_1") (call $reply_n (i32.const 3145729))))
"#;

#[test]
fn replies_over_the_limits_trap() {
    let (_, mut c, _) = install_with(REPLIES, Settings::default());
    let ok = c.update("update_2m", &[]).unwrap();
    assert_eq!(ok.result.reply().map(<[u8]>::len), Some(2 << 20));
    let too_big = c.update("update_2m_1", &[]).unwrap();
    assert_eq!(
        too_big.result,
        MessageResult::Trap(
            "Canister violated contract: ic0.msg_reply_data_append: application payload size (2097153) cannot be larger than 2097152".into()
        )
    );
    let ok = c.query("query_3m", &[]).unwrap();
    assert_eq!(ok.result.reply().map(<[u8]>::len), Some(3 << 20));
    let too_big = c.query("query_3m_1", &[]).unwrap();
    assert!(
        matches!(&too_big.result, MessageResult::Trap(m) if m.contains("(3145729) cannot be larger than 3145728")),
        "{:?}",
        too_big.result
    );
    // A query called as an update (replicated) has the 2 MiB limit.
    let replicated = c.update("query_3m", &[]).unwrap();
    assert!(replicated.result.is_trap());
}

const UPGRADE_LOGS: &str = r#"
(module
  (import "ic0" "debug_print" (func $print (param i32 i32)))
  (memory 1)
  (data (i32.const 0) "saving")
  (data (i32.const 16) "restored")
  (func (export "canister_pre_upgrade") (call $print (i32.const 0) (i32.const 6)))
  (func (export "canister_post_upgrade") (call $print (i32.const 16) (i32.const 8))))
"#;

#[test]
fn an_upgrade_keeps_the_pre_upgrade_log_lines() {
    let (engine, mut c, _) = install_with(UPGRADE_LOGS, Settings::default());
    let program = common::program(&engine, UPGRADE_LOGS);
    let upgrade = c.upgrade(&program, &[]).unwrap();
    assert_eq!(
        upgrade.logs,
        vec!["saving".to_string(), "restored".to_string()]
    );
}
