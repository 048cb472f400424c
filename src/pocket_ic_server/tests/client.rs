//! The `pocket-ic` 13.0.0 client drives the server binary through every endpoint the server
//! implements, on a WAT canister: install, update, query, a timer across ticks, an upgrade that
//! keeps stable memory, traps and rejects with the IC's codes and messages, time, cycles,
//! controllers, stable memory, the blob store, the management canister, instance deletion,
//! and the errors of what it does not implement.

mod common;

use std::time::Duration;

use candid::{Nat, Principal};
use common::*;
use ic_management_canister_types::{
    CanisterIdRecord, CanisterSettings, CanisterStatusType, ProvisionalTopUpCanisterArgs,
};
use offline_engine::{Canister, Engine, EngineConfig, MessageResult, Metering, Settings};
use pocket_ic::common::rest::{
    BlobCompression, RawEffectivePrincipal, SubnetInstructionConfig, SubnetKind,
};
use pocket_ic::{ErrorCode, PocketIc, RejectCode, RejectResponse, Time, update_candid_as};
use pocket_ic_server::topology::{FIRST_APPLICATION_RANGE_START, canister_id};

const GENESIS_NS: u64 = 1_620_328_630_000_000_000;
const ALICE: Principal = Principal::from_slice(&[0xa1, 0x1c, 0xe0]);
const BOB: Principal = Principal::from_slice(&[0xb0, 0xb0]);

/// A canister installed by ALICE (its controller) with init argument `init`.
fn installed(pic: &PocketIc, init: &[u8]) -> Principal {
    let id = pic.create_canister_with_settings(Some(ALICE), None);
    pic.add_cycles(id, 2_000_000_000_000);
    pic.install_canister(id, wasm(), init.to_vec(), Some(ALICE));
    id
}

fn u32_reply(r: Result<Vec<u8>, RejectResponse>) -> u32 {
    let bytes = r.expect("reply");
    u32::from_le_bytes(bytes.try_into().expect("4 bytes"))
}

fn lxzze() -> Principal {
    Principal::from_text("lxzze-o7777-77777-aaaaa-cai").unwrap()
}

#[test]
fn install_update_query_and_the_instance_s_topology() {
    let pic = instance(false);
    let topology = pic.topology();
    assert_eq!(topology.subnet_configs.len(), 1);
    let (subnet, config) = topology.subnet_configs.iter().next().unwrap();
    assert_eq!(config.subnet_kind, SubnetKind::Application);
    assert_eq!(
        config.instruction_config,
        SubnetInstructionConfig::Production
    );
    assert_eq!(
        Principal::from(topology.default_effective_canister_id.clone()),
        lxzze()
    );

    let id = installed(&pic, b"abc");
    assert_eq!(id, lxzze());
    assert_eq!(pic.get_subnet(id), Some(*subnet));
    assert!(pic.canister_exists(id));
    assert!(!pic.canister_exists(Principal::from_slice(&[1, 2, 3])));

    assert_eq!(u32_reply(pic.update_call(id, ALICE, "inc", vec![])), 1);
    assert_eq!(u32_reply(pic.update_call(id, BOB, "inc", vec![])), 2);
    assert_eq!(u32_reply(pic.query_call(id, BOB, "get", vec![])), 2);
    assert_eq!(
        pic.update_call(id, BOB, "whoami", vec![]),
        Ok(BOB.as_slice().to_vec())
    );
    // canister_init saw the install argument.
    assert_eq!(
        pic.query_call(id, ALICE, "stable", 7u32.to_le_bytes().to_vec()),
        Ok(vec![3, 0, 0, 0, b'a', b'b', b'c'])
    );
    // A second canister gets the next id of the subnet's range.
    let second = pic.create_canister();
    assert_eq!(second, canister_id(FIRST_APPLICATION_RANGE_START + 1));
}

#[test]
fn benchmarking_subnet_and_queries_discard_their_changes() {
    let pic = instance(true);
    let topology = pic.topology();
    assert_eq!(topology.get_benchmarking_app_subnets().len(), 1);
    let id = installed(&pic, &[]);
    // A query's changes are discarded.
    assert_eq!(u32_reply(pic.query_call(id, ALICE, "bump", vec![])), 1);
    assert_eq!(u32_reply(pic.query_call(id, ALICE, "get", vec![])), 0);
    // An update call may run a query method (replicated); a query call may not run an update.
    assert_eq!(u32_reply(pic.update_call(id, ALICE, "bump", vec![])), 1);
    assert_eq!(u32_reply(pic.query_call(id, ALICE, "get", vec![])), 0);
    let update_as_query = pic.query_call(id, ALICE, "inc", vec![]).unwrap_err();
    assert_eq!(
        update_as_query.error_code,
        ErrorCode::CanisterMethodNotFound
    );
}

#[test]
fn a_timer_fires_across_ticks_and_time_moves_one_nanosecond_per_round() {
    let pic = instance(false);
    assert_eq!(pic.get_time().as_nanos_since_unix_epoch(), GENESIS_NS);
    // Creation and installation run one round each.
    let id = installed(&pic, &[]);
    assert_eq!(pic.get_time().as_nanos_since_unix_epoch(), GENESIS_NS + 2);
    // The update runs in one round, which moves time by 1 ns.
    pic.update_call(
        id,
        ALICE,
        "set_timer",
        1_000_000_000u64.to_le_bytes().to_vec(),
    )
    .expect("timer set");
    let t0 = GENESIS_NS + 3;
    assert_eq!(pic.get_time().as_nanos_since_unix_epoch(), t0);
    pic.tick();
    assert_eq!(pic.get_time().as_nanos_since_unix_epoch(), t0 + 1);
    assert_eq!(u32_reply(pic.query_call(id, ALICE, "fired", vec![])), 0);
    pic.advance_time(Duration::from_millis(999));
    pic.tick();
    assert_eq!(u32_reply(pic.query_call(id, ALICE, "fired", vec![])), 0);
    pic.advance_time(Duration::from_millis(1));
    pic.tick();
    assert_eq!(u32_reply(pic.query_call(id, ALICE, "fired", vec![])), 1);
    pic.tick();
    assert_eq!(u32_reply(pic.query_call(id, ALICE, "fired", vec![])), 1);
    // The canister reads the instance time.
    let now = pic.get_time().as_nanos_since_unix_epoch();
    assert_eq!(
        pic.query_call(id, ALICE, "time", vec![]),
        Ok(now.to_le_bytes().to_vec())
    );
    // set_time and set_certified_time move time; time never goes back.
    pic.set_time(Time::from_nanos_since_unix_epoch(now + 5));
    assert_eq!(pic.get_time().as_nanos_since_unix_epoch(), now + 5);
    pic.set_certified_time(Time::from_nanos_since_unix_epoch(now + 9));
    assert_eq!(pic.get_time().as_nanos_since_unix_epoch(), now + 9);
    let back = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        pic.set_time(Time::from_nanos_since_unix_epoch(now))
    }));
    assert!(back.is_err(), "setting the time back is refused");
    assert_eq!(pic.get_time().as_nanos_since_unix_epoch(), now + 9);
}

#[test]
fn upgrade_keeps_stable_memory_and_reinstall_starts_afresh() {
    let pic = instance(false);
    let id = installed(&pic, b"xy");
    for _ in 0..3 {
        pic.update_call(id, ALICE, "inc", vec![]).expect("inc");
    }
    pic.upgrade_canister(id, wasm(), vec![], Some(ALICE))
        .expect("upgrades");
    // pre_upgrade saved the counter to stable memory, post_upgrade restored it; the init
    // argument written by canister_init is still there.
    assert_eq!(u32_reply(pic.query_call(id, ALICE, "get", vec![])), 3);
    assert_eq!(
        pic.query_call(id, ALICE, "stable", 6u32.to_le_bytes().to_vec()),
        Ok(vec![2, 0, 0, 0, b'x', b'y'])
    );
    // Only controllers upgrade.
    let denied = pic
        .upgrade_canister(id, wasm(), vec![], Some(BOB))
        .unwrap_err();
    assert_eq!(denied.error_code, ErrorCode::CanisterInvalidController);
    assert_eq!(
        denied.reject_message,
        format!(
            "Only the controllers of the canister {id} can control it.\nCanister's controllers: {ALICE}\nSender's ID: {BOB}"
        )
    );
    pic.reinstall_canister(id, wasm(), b"z".to_vec(), Some(ALICE))
        .expect("reinstalls");
    assert_eq!(u32_reply(pic.query_call(id, ALICE, "get", vec![])), 0);
    assert_eq!(
        pic.query_call(id, ALICE, "stable", 5u32.to_le_bytes().to_vec()),
        Ok(vec![1, 0, 0, 0, b'z'])
    );
}

#[test]
fn traps_and_rejects_carry_the_ic_s_codes_and_messages() {
    let pic = instance(false);
    let id = installed(&pic, &[]);
    pic.update_call(id, ALICE, "inc", vec![]).expect("inc");
    assert_eq!(
        pic.update_call(id, ALICE, "boom", vec![]),
        Err(RejectResponse {
            reject_code: RejectCode::CanisterError,
            reject_message: format!(
                "Error from Canister {id}: Canister called `ic0.trap` with message: 'boom'.\n\
                 Consider gracefully handling failures from this canister or altering the canister to handle exceptions. \
                 See documentation: https://docs.internetcomputer.org/references/execution-errors#trapped-explicitly"
            ),
            error_code: ErrorCode::CanisterCalledTrap,
            certified: true,
        })
    );
    // The trap rolled the message back.
    assert_eq!(u32_reply(pic.query_call(id, ALICE, "get", vec![])), 1);
    let fail = pic.update_call(id, ALICE, "fail", vec![]).unwrap_err();
    assert_eq!(fail.error_code, ErrorCode::CanisterTrapped);
    assert_eq!(
        fail.reject_message,
        format!(
            "Error from Canister {id}: Canister trapped: unreachable.\n\
             Consider gracefully handling failures from this canister or altering the canister to handle exceptions. \
             See documentation: https://docs.internetcomputer.org/references/execution-errors#trapped"
        )
    );
    assert_eq!(
        pic.update_call(id, ALICE, "refuse", vec![]),
        Err(RejectResponse {
            reject_code: RejectCode::CanisterReject,
            reject_message: "no thanks".into(),
            error_code: ErrorCode::CanisterRejectedMessage,
            certified: true,
        })
    );
    let missing = pic.query_call(id, ALICE, "nope", vec![]).unwrap_err();
    assert_eq!(
        missing,
        RejectResponse {
            reject_code: RejectCode::CanisterError,
            reject_message: format!(
                "Error from Canister {id}: Canister has no query method 'nope'..\n\
                 Check that the method being called is exported by the target canister. \
                 See documentation: https://docs.internetcomputer.org/references/execution-errors#method-not-found"
            ),
            error_code: ErrorCode::CanisterMethodNotFound,
            certified: false,
        }
    );
    let unknown = canister_id(FIRST_APPLICATION_RANGE_START + 9);
    let not_found = pic.update_call(unknown, ALICE, "inc", vec![]).unwrap_err();
    assert_eq!(not_found.reject_code, RejectCode::DestinationInvalid);
    assert_eq!(not_found.error_code, ErrorCode::CanisterNotFound);
    assert_eq!(
        not_found.reject_message,
        format!("Canister {unknown} not found")
    );
}

#[test]
fn instruction_counts_equal_the_engine_s_direct_run() {
    let pic = instance(false);
    let id = installed(&pic, &[]);
    let engine = Engine::new(EngineConfig {
        cache: false,
        cache_dir: None,
        ..EngineConfig::default()
    })
    .unwrap();
    let program = engine.load(&wasm()).unwrap();
    let (mut direct, _) = Canister::install(
        &engine,
        &program,
        &[],
        Settings {
            canister_id: id.as_slice().to_vec(),
            ..Settings::default()
        },
    )
    .unwrap();
    for n in [0u32, 1, 1_000, 123_457] {
        let arg = n.to_le_bytes().to_vec();
        let via_server = pic
            .update_call(id, ALICE, "work", arg.clone())
            .expect("work");
        let exec = direct.update("work", &arg).unwrap();
        assert_eq!(
            exec.result,
            MessageResult::Reply(via_server.clone()),
            "n = {n}"
        );
        let counted = u64::from_le_bytes(via_server.try_into().unwrap());
        assert!(counted > u64::from(n) * 5, "n = {n}: {counted}");
    }
}

/// canbench starts the server with arguments of its own: the variable `OFFLINE_ENGINE_METERING`
/// chooses its metering profile. With the memory tracker, `work`'s copy of its argument into
/// Wasm page 0 costs that page's access and write, which its performance counter shows.
#[test]
fn the_environment_chooses_the_metering_profile() {
    let arg = 1_000u32.to_le_bytes().to_vec();
    let count = |pic: &PocketIc| {
        let id = installed(pic, &[]);
        let reply = pic
            .update_call(id, ALICE, "work", arg.clone())
            .expect("work");
        (id, reply)
    };
    let (_, old) = count(&instance(false));
    let tracker = pocket_ic::PocketIcBuilder::new()
        .with_server_url(tracker_server_url())
        .with_application_subnet()
        .build();
    let (id, new) = count(&tracker);
    let engine = Engine::new(EngineConfig {
        cache: false,
        cache_dir: None,
        metering: Metering::IC_DMT,
    })
    .unwrap();
    let program = engine.load(&wasm()).unwrap();
    let settings = Settings {
        canister_id: id.as_slice().to_vec(),
        ..Settings::default()
    };
    let (mut direct, _) = Canister::install(&engine, &program, &[], settings).unwrap();
    let exec = direct.update("work", &arg).unwrap();
    assert_eq!(exec.result, MessageResult::Reply(new.clone()));
    let counter = |bytes: Vec<u8>| u64::from_le_bytes(bytes.try_into().unwrap());
    let event = Metering::IC_DMT.tracker.unwrap().wasm_page_charge(false);
    assert_eq!(counter(new), counter(old) + 2 * event);
}

#[test]
fn ingress_submit_status_await_and_ticks() {
    let pic = instance(false);
    let id = installed(&pic, &[]);
    let msg = pic
        .submit_call(id, ALICE, "inc", vec![])
        .expect("submitted");
    // Not executed before a round.
    assert_eq!(pic.ingress_status(msg.clone()), None);
    assert_eq!(u32_reply(pic.query_call(id, ALICE, "get", vec![])), 0);
    pic.tick();
    assert_eq!(
        pic.ingress_status(msg.clone()),
        Some(Ok(1u32.to_le_bytes().to_vec()))
    );
    assert_eq!(pic.await_call(msg.clone()), Ok(1u32.to_le_bytes().to_vec()));
    match pic.ingress_status_as(msg.clone(), BOB) {
        pocket_ic::IngressStatusResult::Forbidden(m) => {
            assert!(m.contains("not signed by the caller"), "{m}")
        }
        other => panic!("expected Forbidden, got {other:?}"),
    }
    let mine = pic.ingress_status_as(msg, ALICE);
    assert!(matches!(
        mine,
        pocket_ic::IngressStatusResult::Success(Ok(_))
    ));
    // await runs the round itself.
    let msg = pic
        .submit_call(id, ALICE, "inc", vec![])
        .expect("submitted");
    assert_eq!(u32_reply(pic.await_call(msg)), 2);
    // A submission the ingress filter refuses.
    let unknown = canister_id(FIRST_APPLICATION_RANGE_START + 9);
    let refused = pic.submit_call(unknown, ALICE, "inc", vec![]).unwrap_err();
    assert_eq!(refused.error_code, ErrorCode::CanisterNotFound);
}

#[test]
fn execute_ingress_message_runs_a_call_at_once() {
    let pic = instance(false);
    let id = installed(&pic, &[]);
    let base = pic.get_server_url().to_string();
    let body = serde_json::json!({
        "sender": base64(ALICE.as_slice()),
        "canister_id": base64(id.as_slice()),
        "effective_principal": { "CanisterId": base64(id.as_slice()) },
        "method": "inc",
        "payload": "",
    });
    let (status, _, reply) = http(
        &base,
        "POST",
        &format!(
            "/instances/{}/update/execute_ingress_message",
            pic.instance_id()
        ),
        body.to_string().as_bytes(),
    );
    assert_eq!(status, 200);
    let reply: serde_json::Value = serde_json::from_slice(&reply).unwrap();
    assert_eq!(
        reply,
        serde_json::json!({ "Ok": base64(&1u32.to_le_bytes()) })
    );
    assert_eq!(u32_reply(pic.query_call(id, ALICE, "get", vec![])), 1);
}

fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[test]
fn cycles_controllers_and_stable_memory() {
    let pic = instance(false);
    let id = installed(&pic, &[]);
    // The install was charged (`fees_are_charged_as_the_engine_charges` checks the amounts);
    // queries are free.
    let installed_balance = pic.cycle_balance(id);
    assert!(installed_balance < 2_000_000_000_000);
    assert_eq!(pic.add_cycles(id, 5), installed_balance + 5);
    assert_eq!(
        pic.query_call(id, ALICE, "balance", vec![]),
        Ok((installed_balance + 5).to_le_bytes().to_vec())
    );
    // Top-up through the management canister (anyone may); deposit_cycles from ingress carries
    // no cycles.
    let top_up: Result<(), _> = update_candid_as(
        &pic,
        Principal::management_canister(),
        BOB,
        "provisional_top_up_canister",
        (ProvisionalTopUpCanisterArgs {
            canister_id: id,
            amount: 10u64.into(),
        },),
    );
    top_up.expect("tops up");
    let deposit: Result<(), _> = pocket_ic::call_candid_as(
        &pic,
        Principal::management_canister(),
        RawEffectivePrincipal::CanisterId(id.as_slice().to_vec()),
        BOB,
        "deposit_cycles",
        (CanisterIdRecord { canister_id: id },),
    );
    deposit.expect("deposits");
    assert_eq!(pic.cycle_balance(id), installed_balance + 15);

    assert_eq!(pic.get_controllers(id), vec![ALICE]);
    pic.set_controllers(id, Some(ALICE), vec![ALICE, BOB])
        .expect("sets controllers");
    assert_eq!(pic.get_controllers(id), vec![ALICE, BOB]);
    // BOB, now a controller, upgrades; pre/post upgrade run as BOB without trouble.
    pic.upgrade_canister(id, wasm(), vec![], Some(BOB))
        .expect("BOB upgrades");

    // Stable memory: set through the blob store (plain and gzip), read back.
    let mut bytes = vec![0u8; 70_000];
    bytes[..5].copy_from_slice(b"hello");
    pic.set_stable_memory(id, bytes.clone(), BlobCompression::NoCompression);
    let read = pic.get_stable_memory(id);
    assert_eq!(read.len(), 131_072, "grown to whole 64 KiB pages");
    assert_eq!(&read[..70_000], &bytes[..]);
    assert_eq!(
        pic.query_call(id, ALICE, "stable", 5u32.to_le_bytes().to_vec()),
        Ok(b"hello".to_vec())
    );
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    std::io::Write::write_all(&mut gz, b"gzipped").unwrap();
    pic.set_stable_memory(id, gz.finish().unwrap(), BlobCompression::Gzip);
    assert_eq!(&pic.get_stable_memory(id)[..7], b"gzipped");

    // The blob store serves what was uploaded.
    let blob = pic.upload_blob(b"blob!".to_vec(), BlobCompression::NoCompression);
    let base = pic.get_server_url().to_string();
    let (status, _, body) = http(
        &base,
        "GET",
        &format!("/blobstore/{}", hex::encode(&blob.0)),
        b"",
    );
    assert_eq!((status, body), (200, b"blob!".to_vec()));
}

#[test]
fn management_canister_lifecycle() {
    let pic = instance(false);
    let settings = CanisterSettings {
        controllers: Some(vec![ALICE]),
        freezing_threshold: Some(100u64.into()),
        ..CanisterSettings::default()
    };
    let id = pic.create_canister_with_settings(Some(BOB), Some(settings));
    assert_eq!(pic.get_controllers(id), vec![ALICE]);
    let status = pic.canister_status(id, Some(ALICE)).expect("status");
    assert_eq!(status.status, CanisterStatusType::Running);
    assert_eq!(status.module_hash, None);
    assert_eq!(status.settings.freezing_threshold, Nat::from(100u64));
    assert_eq!(status.cycles, Nat::from(0u64));
    assert_eq!(
        pic.canister_status(id, Some(BOB)).unwrap_err().error_code,
        ErrorCode::CanisterInvalidController
    );
    // An empty canister answers calls with IC0537.
    let empty = pic.update_call(id, ALICE, "inc", vec![]).unwrap_err();
    assert_eq!(empty.error_code, ErrorCode::CanisterWasmModuleNotFound);

    pic.install_canister(id, wasm(), vec![], Some(ALICE));
    let status = pic.canister_status(id, Some(ALICE)).expect("status");
    let hash: [u8; 32] = sha2::Digest::finalize(sha2::Digest::chain_update(
        <sha2::Sha256 as sha2::Digest>::new(),
        wasm(),
    ))
    .into();
    assert_eq!(status.module_hash, Some(hash.to_vec()));
    assert_eq!(
        status.memory_metrics.wasm_binary_size,
        Nat::from(wasm().len() as u64)
    );
    assert_eq!(
        status.memory_metrics.stable_memory_size,
        Nat::from(65_536u64)
    );
    assert_eq!(status.version, 1);

    // Install on a non-empty canister is refused.
    let again = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        pic.install_canister(id, wasm(), vec![], Some(ALICE))
    }));
    assert!(again.is_err());

    // Stop, start, stop, delete.
    pic.stop_canister(id, Some(ALICE)).expect("stops");
    assert_eq!(
        pic.canister_status(id, Some(ALICE)).unwrap().status,
        CanisterStatusType::Stopped
    );
    let stopped = pic.update_call(id, ALICE, "inc", vec![]).unwrap_err();
    assert_eq!(stopped.error_code, ErrorCode::CanisterStopped);
    pic.start_canister(id, Some(ALICE)).expect("starts");
    assert_eq!(u32_reply(pic.update_call(id, ALICE, "inc", vec![])), 1);
    let running = pic.delete_canister(id, Some(ALICE)).unwrap_err();
    assert_eq!(running.error_code, ErrorCode::CanisterNotStopped);
    pic.uninstall_canister(id, Some(ALICE)).expect("uninstalls");
    assert_eq!(
        pic.canister_status(id, Some(ALICE)).unwrap().module_hash,
        None
    );
    pic.stop_canister(id, Some(ALICE)).expect("stops");
    pic.delete_canister(id, Some(ALICE)).expect("deletes");
    assert!(!pic.canister_exists(id));

    // A canister with a chosen id, and a chosen id outside every subnet.
    let chosen = canister_id(FIRST_APPLICATION_RANGE_START + 7);
    assert_eq!(pic.create_canister_with_id(None, None, chosen), Ok(chosen));
    assert!(pic.create_canister_with_id(None, None, chosen).is_err());
    let elsewhere = canister_id(7);
    assert!(pic.create_canister_with_id(None, None, elsewhere).is_err());
    // On a named subnet.
    let subnet = pic.topology().get_app_subnets()[0];
    let on_subnet = pic.create_canister_on_subnet(None, None, subnet);
    assert_eq!(pic.get_subnet(on_subnet), Some(subnet));
}

#[test]
fn chunked_install_through_the_chunk_store() {
    let pic = instance(false);
    let id = pic.create_canister_with_settings(Some(ALICE), None);
    let wasm = wasm();
    let (a, b) = wasm.split_at(wasm.len() / 2);
    let ha = pic
        .upload_chunk(id, Some(ALICE), a.to_vec())
        .expect("chunk a");
    let hb = pic
        .upload_chunk(id, Some(ALICE), b.to_vec())
        .expect("chunk b");
    let mut stored = pic.stored_chunks(id, Some(ALICE)).expect("stored");
    stored.sort();
    let mut expected = vec![ha.clone(), hb.clone()];
    expected.sort();
    assert_eq!(stored, expected);
    let full: [u8; 32] = sha2::Digest::finalize(sha2::Digest::chain_update(
        <sha2::Sha256 as sha2::Digest>::new(),
        &wasm,
    ))
    .into();
    // A wrong module hash is refused.
    let wrong = pic.install_chunked_canister(
        id,
        Some(ALICE),
        ic_management_canister_types::CanisterInstallMode::Install,
        id,
        vec![hb.clone(), ha.clone()],
        full.to_vec(),
        b"q".to_vec(),
    );
    assert_eq!(
        wrong.unwrap_err().error_code,
        ErrorCode::CanisterContractViolation
    );
    pic.install_chunked_canister(
        id,
        Some(ALICE),
        ic_management_canister_types::CanisterInstallMode::Install,
        id,
        vec![ha, hb],
        full.to_vec(),
        b"q".to_vec(),
    )
    .expect("installs from chunks");
    assert_eq!(
        pic.query_call(id, ALICE, "stable", 5u32.to_le_bytes().to_vec()),
        Ok(vec![1, 0, 0, 0, b'q'])
    );
    pic.clear_chunk_store(id, Some(ALICE)).expect("clears");
    assert_eq!(pic.stored_chunks(id, Some(ALICE)), Ok(vec![]));
}

#[test]
fn unimplemented_endpoints_and_methods_answer_errors_that_name_them() {
    let pic = instance(false);
    let base = pic.get_server_url().to_string();
    let iid = pic.instance_id();
    // The fallback names the endpoint and the server.
    let (status, head, body) = http(
        &base,
        "POST",
        &format!("/instances/{iid}/update/mock_canister_http"),
        b"{}",
    );
    assert_eq!(status, 404);
    assert!(head.contains("server: offline-pocket-ic"), "{head}");
    let message = serde_json::from_slice::<serde_json::Value>(&body).unwrap()["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        message.starts_with(&format!(
            "offline-pocket-ic does not implement `POST /instances/{iid}/update/mock_canister_http`"
        )),
        "{message}"
    );
    assert!(message.contains("engine: offline (wasmtime, IC metering)"));
    // Live mode: off until asked for, then on until stopped.
    assert!(!pic.auto_progress_enabled());
    pic.auto_progress();
    assert!(pic.auto_progress_enabled());
    pic.stop_progress();
    assert!(!pic.auto_progress_enabled());
    // Management methods this server does not execute.
    let id = pic.create_canister();
    let snapshot = pic.take_canister_snapshot(id, None, None).unwrap_err();
    assert_eq!(snapshot.error_code, ErrorCode::UnknownManagementMessage);
    assert!(snapshot.reject_message.contains("`take_canister_snapshot`"));
    let canister_only: Result<(), _> = update_candid_as(
        &pic,
        Principal::management_canister(),
        ALICE,
        "raw_rand",
        (),
    );
    assert_eq!(
        canister_only.unwrap_err().reject_message,
        "Only canisters can call ic00 method raw_rand"
    );
    // /status says what the server is.
    let (status, _, body) = http(&base, "GET", "/status", b"");
    assert_eq!(status, 200);
    assert!(String::from_utf8_lossy(&body).starts_with("offline-pocket-ic "));
    // No root key without an NNS subnet (the client does not ask the server).
    assert_eq!(pic.root_key(), None);
}

#[test]
fn instances_other_subnets_and_deletion() {
    let pic = instance(false);
    let base = pic.get_server_url().to_string();
    let iid = pic.instance_id();
    let list = |base: &str| -> Vec<String> {
        let (status, _, body) = http(base, "GET", "/instances", b"");
        assert_eq!(status, 200);
        serde_json::from_slice(&body).unwrap()
    };
    assert_eq!(list(&base)[iid], "Available");
    // Asking for an NNS subnet is refused with a message naming it.
    let config = serde_json::to_vec(&pocket_ic::common::rest::InstanceConfig {
        subnet_config_set: pocket_ic::common::rest::SubnetConfigSet {
            nns: true,
            application: 1,
            ..Default::default()
        }
        .into(),
        ..Default::default()
    })
    .unwrap();
    let (status, _, body) = http(&base, "POST", "/instances", &config);
    assert_eq!(status, 400);
    let text = String::from_utf8_lossy(&body);
    assert!(text.contains("a NNS subnet was requested"), "{text}");
    drop(pic);
    assert_eq!(list(&base)[iid], "Deleted");
    let (status, _, _) = http(
        &base,
        "GET",
        &format!("/instances/{iid}/read/topology"),
        b"",
    );
    assert_eq!(status, 400);
}

#[test]
fn two_subnets_route_creation_by_the_effective_principal() {
    let pic = builder()
        .with_application_subnet()
        .with_benchmarking_application_subnet()
        .build();
    let topology = pic.topology();
    assert_eq!(topology.get_app_subnets().len(), 2);
    let bench = topology.get_benchmarking_app_subnets();
    assert_eq!(bench.len(), 1);
    let on_bench = pic.create_canister_on_subnet(None, None, bench[0]);
    assert_eq!(pic.get_subnet(on_bench), Some(bench[0]));
    assert_eq!(topology.get_subnet(on_bench), Some(bench[0]));
    // The default (no effective principal) is the first subnet.
    let first = pic.create_canister();
    assert_eq!(first, lxzze());
    assert_ne!(pic.get_subnet(first), Some(bench[0]));
    // Canisters on the benchmarking subnet run with its limits: install and call work.
    pic.install_canister(on_bench, wasm(), vec![], None);
    assert_eq!(
        u32_reply(pic.update_call(on_bench, Principal::anonymous(), "inc", vec![])),
        1
    );
}

/// On an application subnet with the normal cost schedule the server charges what the IC
/// charges, as the engine computes it: the install's execution, then an update's execution and
/// its ingress reception; queries are free.
#[test]
fn fees_are_charged_as_the_engine_charges() {
    use offline_engine::Charging;
    use offline_engine::fees::{IC_2025, ingress_bytes};

    let pic = instance(false);
    let id = installed(&pic, b"abc");
    let nodes = Charging::APPLICATION.subnet_nodes;
    let engine = Engine::new(EngineConfig {
        cache: false,
        cache_dir: None,
        ..EngineConfig::default()
    })
    .unwrap();
    let program = engine.load(&wasm()).unwrap();
    let (mut direct, install) = Canister::install(
        &engine,
        &program,
        b"abc",
        Settings {
            canister_id: id.as_slice().to_vec(),
            controllers: vec![ALICE.as_slice().to_vec()],
            cycles: 2_000_000_000_000,
            charging: Some(Charging::APPLICATION),
            ..Settings::default()
        },
    )
    .unwrap();
    let installed_balance =
        2_000_000_000_000 - IC_2025.execution_cost(install.billed_instructions, nodes);
    assert_eq!(direct.cycles(), installed_balance);
    assert_eq!(pic.cycle_balance(id), installed_balance);

    pic.update_call(id, ALICE, "inc", vec![]).expect("inc");
    let exec = direct.update_as(ALICE.as_slice(), "inc", &[]).unwrap();
    let after_inc = installed_balance
        - IC_2025.execution_cost(exec.billed_instructions, nodes)
        - IC_2025.ingress_cost(ingress_bytes(0, "inc"), nodes);
    assert_eq!(direct.cycles(), after_inc);
    assert_eq!(pic.cycle_balance(id), after_inc);

    assert_eq!(u32_reply(pic.query_call(id, ALICE, "get", vec![])), 1);
    assert_eq!(pic.cycle_balance(id), after_inc, "queries are free");
}
