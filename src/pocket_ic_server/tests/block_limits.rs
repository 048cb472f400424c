//! The IC's block limits on the offline replica: a round inducts one block of ingress, at most
//! 1,000 messages and 4 MiB in submission order, and the rest waits for the next round; with
//! `--block-interval-ms` (or the `block_interval` hook) the replica runs one round per interval
//! and no other, whatever arrives, so clients see a busy subnet's queueing.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use candid::{Decode, Encode, Principal};
use ic_agent::Agent;
use ic_agent::identity::BasicIdentity;
use ic_management_canister_types::{
    CanisterIdRecord, CanisterInstallMode, InstallCodeArgs, ProvisionalCreateCanisterWithCyclesArgs,
};

/// The engine's block limits (the replica's `MAX_INGRESS_MESSAGES_PER_BLOCK` and
/// `MAX_INGRESS_BYTES_PER_BLOCK`).
const BLOCK_MESSAGES: u32 = 1_000;

/// A 1 MiB argument: three of them (with the method name `inc`) fit in a 4 MiB block, a
/// fourth does not.
const BIG_ARG: usize = 1024 * 1024;

fn counter(pic: &pocket_ic::PocketIc, canister: Principal) -> u32 {
    let reply = pic
        .query_call(canister, Principal::anonymous(), "get", vec![])
        .expect("get");
    u32::from_le_bytes(reply[..4].try_into().expect("4 bytes"))
}

#[test]
fn a_round_inducts_one_block_of_ingress_and_the_rest_waits_in_order() {
    let pic = common::instance(false);
    let canister = pic.create_canister();
    pic.add_cycles(canister, 100_000_000_000_000);
    pic.install_canister(canister, common::wasm(), vec![], None);
    let sender = Principal::anonymous();
    let ids: Vec<_> = (0..2_500)
        .map(|_| {
            pic.submit_call(canister, sender, "inc", vec![])
                .expect("accepted")
        })
        .collect();
    // Nothing runs before a round; then one block of 1,000 per round, in submission order.
    assert_eq!(counter(&pic, canister), 0);
    pic.tick();
    assert_eq!(counter(&pic, canister), BLOCK_MESSAGES);
    pic.tick();
    assert_eq!(counter(&pic, canister), 2 * BLOCK_MESSAGES);
    pic.tick();
    assert_eq!(counter(&pic, canister), 2_500);
    for (i, id) in ids.into_iter().enumerate() {
        let reply = pic.await_call(id).expect("replied");
        assert_eq!(
            u32::from_le_bytes(reply[..4].try_into().unwrap()),
            i as u32 + 1,
            "message {i} ran out of submission order"
        );
    }
    // The byte limit: 4 MiB per block, so three 1 MiB messages per round.
    for _ in 0..7 {
        pic.submit_call(canister, sender, "inc", vec![7u8; BIG_ARG])
            .expect("accepted");
    }
    pic.tick();
    assert_eq!(counter(&pic, canister), 2_503);
    pic.tick();
    assert_eq!(counter(&pic, canister), 2_506);
    pic.tick();
    assert_eq!(counter(&pic, canister), 2_507);
}

/// A POST to the replica; returns the HTTP status and the body.
fn post(url: &str, path: &str, content_type: &str, body: &[u8]) -> (u16, Vec<u8>) {
    let addr = url.trim_start_matches("http://");
    let mut s = TcpStream::connect(addr).expect("connects");
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).expect("writes");
    s.write_all(body).expect("writes");
    let mut out = Vec::new();
    s.read_to_end(&mut out).expect("reads");
    let split = out
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a header");
    let status = std::str::from_utf8(&out[9..12])
        .expect("a status")
        .parse()
        .expect("a status");
    (status, out[split + 4..].to_vec())
}

fn hook(url: &str, name: &str, json: &str) -> serde_json::Value {
    let (status, body) = post(
        url,
        &format!("/test_hooks/{name}"),
        "application/json",
        json.as_bytes(),
    );
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    serde_json::from_slice(&body).expect("JSON")
}

#[derive(Debug, serde::Deserialize, PartialEq, Eq)]
struct RoundRecord {
    round: u64,
    started_ms: u64,
    inducted_ingress: usize,
    waiting_ingress: usize,
}

fn rounds(url: &str) -> Vec<RoundRecord> {
    serde_json::from_value(hook(url, "rounds", "{}")["rounds"].clone()).expect("round records")
}

async fn deploy_counter(agent: &Agent) -> Principal {
    let lxzze = Principal::from_text("lxzze-o7777-77777-aaaaa-cai").unwrap();
    let created = agent
        .update(
            &Principal::management_canister(),
            "provisional_create_canister_with_cycles",
        )
        .with_effective_canister_id(lxzze)
        .with_arg(
            Encode!(&ProvisionalCreateCanisterWithCyclesArgs {
                amount: Some(100_000_000_000_000u128.into()),
                settings: None,
                specified_id: None,
                sender_canister_version: None,
            })
            .unwrap(),
        )
        .call_and_wait()
        .await
        .expect("created");
    let canister_id = Decode!(&created, CanisterIdRecord).unwrap().canister_id;
    agent
        .update(&Principal::management_canister(), "install_code")
        .with_effective_canister_id(canister_id)
        .with_arg(
            Encode!(&InstallCodeArgs {
                mode: CanisterInstallMode::Install,
                canister_id,
                wasm_module: common::wasm(),
                arg: vec![],
                sender_canister_version: None,
            })
            .unwrap(),
        )
        .call_and_wait()
        .await
        .expect("installed");
    canister_id
}

/// Sends `n` signed `inc` calls with `arg` through `/api/v2/.../call` (202 on acceptance,
/// before execution).
fn send_v2(url: &str, agent: &Agent, canister: Principal, n: usize, arg: &[u8]) {
    let path = format!("/api/v2/canister/{canister}/call");
    for _ in 0..n {
        let signed = agent
            .update(&canister, "inc")
            .with_arg(arg.to_vec())
            .sign()
            .expect("signed");
        let (status, body) = post(url, &path, "application/cbor", &signed.signed_update);
        assert_eq!(status, 202, "{}", String::from_utf8_lossy(&body));
    }
}

#[test]
fn a_replica_with_a_block_interval_runs_one_block_per_interval_whatever_arrives() {
    const INTERVAL_MS: u64 = 200;
    let replica = common::spawn_replica("block_limits", &["--block-interval-ms", "200"]);
    let url = replica.url.as_str();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        let agent = Agent::builder()
            .with_url(url)
            .with_identity(BasicIdentity::from_raw_key(&[21; 32]))
            .build()
            .expect("an agent");
        agent.fetch_root_key().await.expect("the root key");
        let canister = deploy_counter(&agent).await;
        let read = || async {
            let reply = agent
                .query(&canister, "get")
                .with_arg(vec![])
                .call()
                .await
                .expect("get");
            u32::from_le_bytes(reply[..4].try_into().unwrap())
        };
        assert_eq!(
            hook(url, "rounds", "{}")["block_interval_ms"],
            serde_json::json!(INTERVAL_MS)
        );
        // Rounds at the stated rate: never two blocks less than an interval apart.
        let log = rounds(url);
        assert!(log.len() >= 2, "rounds ran while deploying: {log:?}");
        for pair in log.windows(2) {
            assert!(
                pair[1].started_ms - pair[0].started_ms >= INTERVAL_MS,
                "two blocks closer than the interval: {pair:?}"
            );
            assert_eq!(pair[1].round, pair[0].round + 1);
        }
        // Hold the next block for ten minutes: 2,500 calls arrive and none runs a round.
        hook(url, "block_interval", r#"{"ms": 600000}"#);
        // A round already under way when the hook answered ends within this.
        tokio::time::sleep(Duration::from_millis(INTERVAL_MS)).await;
        let before = rounds(url).len();
        send_v2(url, &agent, canister, 2_500, &[]);
        send_v2(url, &agent, canister, 7, &vec![7u8; BIG_ARG]);
        assert_eq!(rounds(url).len(), before, "a call ran a round");
        assert_eq!(read().await, 0);
        // Back to one block per interval: 1,000 messages per block, then three 1 MiB ones
        // per block (4 MiB), in submission order; whatever does not fit waits.
        hook(
            url,
            "block_interval",
            &format!(r#"{{"ms": {INTERVAL_MS}}}"#),
        );
        let deadline = Instant::now() + Duration::from_secs(60);
        while read().await < 2_507 {
            assert!(Instant::now() < deadline, "the backlog did not drain");
            tokio::time::sleep(Duration::from_millis(INTERVAL_MS)).await;
        }
        let blocks: Vec<(usize, usize)> = rounds(url)[before..]
            .iter()
            .map(|r| (r.inducted_ingress, r.waiting_ingress))
            .filter(|&(inducted, _)| inducted > 0)
            .collect();
        assert_eq!(
            blocks,
            vec![(1_000, 1_507), (1_000, 507), (503, 4), (3, 1), (1, 0)],
            "blocks (inducted, waiting) after the backlog"
        );
    });
}
