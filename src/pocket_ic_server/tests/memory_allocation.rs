//! The reference canister under a memory allocation set with `update_settings`, through the
//! server: a write that needs more memory than the allocation leaves is refused with the
//! canister's trap and changes nothing, and commits once the allocation is raised.
//!
//! Its database lives in stable memory managed by ic-stable-structures' `MemoryManager` (through
//! ic-wasi-polyfill), which grows in buckets of 128 pages (8 MiB) and panics when
//! `ic0.stable64_grow` answers -1; SQLite's page cache lives in the heap, whose growth beyond
//! the allocation traps (`Canister cannot grow its memory usage.`). So the limit shows as a
//! trap, not as SQLite's `SQLITE_FULL` ("database or disk is full"): the module does the same on
//! the IC. Build the wasms first (`scripts/test.sh` does); a missing wasm fails the test.

mod common;

use std::path::PathBuf;

use bench_api::{CountsResult, SqlStatement, WriteResult};
use candid::{Decode, Encode, Nat, Principal};
use common::*;
use pocket_ic::{CanisterSettings, ErrorCode, RejectCode};

const CONTROLLER: Principal = Principal::from_slice(&[0xc0, 0x47]);

fn wasm() -> Vec<u8> {
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/canister/bench_canister.wasm");
    std::fs::read(&path)
        .unwrap_or_else(|e| panic!("{}: {e}; build it with scripts/build.sh", path.display()))
}

/// An `execute_sql` inserting `n` users of about 220 bytes each in one statement.
fn insert_users(n: u32) -> Vec<u8> {
    let sql = format!(
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT {n}) \
         INSERT INTO users (username, email) SELECT 'u_' || x, printf('%0200d', x) FROM c"
    );
    Encode!(&vec![SqlStatement {
        sql,
        params: vec![]
    }])
    .unwrap()
}

fn users(pic: &pocket_ic::PocketIc, id: Principal) -> u64 {
    let reply = pic
        .query_call(id, CONTROLLER, "counts", Encode!().unwrap())
        .unwrap();
    match Decode!(&reply, CountsResult).unwrap() {
        CountsResult::Ok(c) => c.users,
        CountsResult::Err(e) => panic!("counts: {e}"),
    }
}

fn allocation(pic: &pocket_ic::PocketIc, id: Principal, bytes: u64) {
    pic.update_canister_settings(
        id,
        Some(CONTROLLER),
        CanisterSettings {
            memory_allocation: Some(Nat::from(bytes)),
            ..Default::default()
        },
    )
    .unwrap();
}

#[test]
fn a_write_beyond_the_memory_allocation_is_refused_and_changes_nothing() {
    let pic = instance(false);
    let id = pic.create_canister_with_settings(Some(CONTROLLER), None);
    pic.add_cycles(id, 100_000_000_000_000_000);
    let wasm = wasm();
    pic.install_canister(
        id,
        wasm.clone(),
        Encode!(&Option::<()>::None).unwrap(),
        Some(CONTROLLER),
    );
    let status = pic.canister_status(id, Some(CONTROLLER)).unwrap();
    let metrics = status.memory_metrics;
    let used = u64::try_from(metrics.wasm_memory_size.0).unwrap()
        + u64::try_from(metrics.stable_memory_size.0).unwrap()
        + wasm.len() as u64;
    // Room for 12 MiB: the 40,000 users need a new 8 MiB bucket of stable memory besides the
    // page cache's growth.
    allocation(&pic, id, used + (12 << 20));
    let refused = pic
        .update_call(id, CONTROLLER, "execute_sql", insert_users(40_000))
        .unwrap_err();
    assert_eq!(refused.reject_code, RejectCode::CanisterError);
    assert_eq!(refused.error_code, ErrorCode::CanisterCalledTrap);
    assert!(
        refused.reject_message.starts_with(&format!(
            "Error from Canister {id}: Canister called `ic0.trap` with message: 'Panicked at 'MemoryId(120): grow failed'"
        )),
        "{}",
        refused.reject_message
    );
    assert_eq!(users(&pic, id), 0, "nothing committed");
    // 9 MiB: the heap hits the allocation first.
    allocation(&pic, id, used + (9 << 20));
    let refused = pic
        .update_call(id, CONTROLLER, "execute_sql", insert_users(40_000))
        .unwrap_err();
    assert_eq!(refused.error_code, ErrorCode::CanisterOutOfMemory);
    assert!(
        refused.reject_message.starts_with(&format!(
            "Error from Canister {id}: Canister cannot grow its memory usage..\n"
        )),
        "{}",
        refused.reject_message
    );
    assert_eq!(users(&pic, id), 0);
    // Room enough: the same write commits.
    allocation(&pic, id, used + (64 << 20));
    let reply = pic
        .update_call(id, CONTROLLER, "execute_sql", insert_users(40_000))
        .unwrap();
    assert!(matches!(
        Decode!(&reply, WriteResult).unwrap(),
        WriteResult::Ok(_)
    ));
    assert_eq!(users(&pic, id), 40_000);
}
