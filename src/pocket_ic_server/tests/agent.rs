//! ic-agent (the Rust agent, crates.io) against `offline-pocket-ic --replica`: it deploys the
//! reference canister through the management canister and calls it with every check of the
//! agent on (certificates and their BLS signatures, `/time`, canister ranges and the subnet
//! delegation, node-signed queries); only the root key is fetched, as local development does.
//! Then what the replica refuses: a wrong signature, a sender whose key does not match, an
//! expired or too distant expiry, a delegation to another canister or out of date; that an
//! identical request executes once; the fault-injection hooks; that the HTTP path executes
//! exactly the instructions the engine executes directly; and `pocket-ic`'s `make_live`.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use bench_api::{Counts, Outcome, WriteError};
use candid::{Decode, Encode, Principal};
use ic_agent::agent::RejectCode;
use ic_agent::identity::{
    AnonymousIdentity, BasicIdentity, DelegatedIdentity, Prime256v1Identity, Secp256k1Identity,
};
use ic_agent::{Agent, AgentError, Identity};
use ic_management_canister_types::{
    CanisterIdRecord, CanisterInstallMode, CanisterStatusResult, InstallCodeArgs,
    ProvisionalCreateCanisterWithCyclesArgs,
};
use ic_transport_types::{Delegation, Envelope, SignedDelegation};

/// The reference canister's wasm (built by `scripts/build.sh`).
fn canister_wasm() -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../target/canister/bench_canister.wasm")
}

/// One replica server per test process, shared by the tests that set no fault hooks.
fn replica() -> &'static common::Replica {
    static R: OnceLock<common::Replica> = OnceLock::new();
    R.get_or_init(|| common::spawn_replica("shared", &[]))
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime")
}

async fn agent_for(url: &str, identity: impl Identity + 'static) -> Agent {
    let agent = Agent::builder()
        .with_url(url)
        .with_identity(identity)
        .build()
        .expect("an agent");
    agent.fetch_root_key().await.expect("the root key");
    agent
}

fn ed25519(seed: u8) -> BasicIdentity {
    BasicIdentity::from_raw_key(&[seed; 32])
}

fn lxzze() -> Principal {
    Principal::from_text("lxzze-o7777-77777-aaaaa-cai").unwrap()
}

/// Creates a canister with cycles and installs the reference canister (gzipped, as agents
/// send modules over the 2 MiB ingress limit) with `init`.
async fn deploy(agent: &Agent, init: Option<bench_api::InitArgs>) -> Principal {
    let created = agent
        .update(
            &Principal::management_canister(),
            "provisional_create_canister_with_cycles",
        )
        .with_effective_canister_id(lxzze())
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
    let wasm = std::fs::read(canister_wasm()).expect("the canister wasm (scripts/build.sh)");
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(&wasm).unwrap();
    let module = gz.finish().unwrap();
    agent
        .update(&Principal::management_canister(), "install_code")
        .with_effective_canister_id(canister_id)
        .with_arg(
            Encode!(&InstallCodeArgs {
                mode: CanisterInstallMode::Install,
                canister_id,
                wasm_module: module,
                arg: Encode!(&init).unwrap(),
                sender_canister_version: None,
            })
            .unwrap(),
        )
        .call_and_wait()
        .await
        .expect("installed");
    canister_id
}

async fn create_user(
    agent: &Agent,
    canister: Principal,
    name: &str,
) -> Result<Outcome, AgentError> {
    let reply = agent
        .update(&canister, "create_user")
        .with_arg(Encode!(&name, &format!("{name}@example.com")).unwrap())
        .call_and_wait()
        .await?;
    Ok(Decode!(&reply, Result<Outcome, WriteError>)
        .unwrap()
        .expect("committed or failed, not refused"))
}

async fn counts(agent: &Agent, canister: Principal) -> Counts {
    let reply = agent
        .query(&canister, "counts")
        .with_arg(Encode!().unwrap())
        .call()
        .await
        .expect("counts");
    Decode!(&reply, Result<Counts, String>)
        .unwrap()
        .expect("counts")
}

fn http_error(e: AgentError) -> (u16, String) {
    match e {
        AgentError::HttpError(p) => (p.status, String::from_utf8_lossy(&p.content).into_owned()),
        other => panic!("expected an HTTP error, got {other:?}"),
    }
}

#[test]
fn the_agent_deploys_the_canister_and_calls_it_with_verification_on() {
    let url = &replica().url;
    runtime().block_on(async {
        let agent = agent_for(url, ed25519(1)).await;
        let canister = deploy(&agent, None).await;
        // Update with a certified reply, then a node-signed query.
        let outcome = create_user(&agent, canister, "alice").await.unwrap();
        assert_eq!(
            outcome,
            Outcome::Committed {
                rows_changed: 1,
                last_insert_rowid: 1
            }
        );
        assert_eq!(
            counts(&agent, canister).await,
            Counts {
                users: 1,
                orders: 0
            }
        );
        // The agent reads the module hash and controllers from the certified state tree.
        let hash = agent
            .read_state_canister_module_hash(canister)
            .await
            .expect("module hash");
        let wasm = std::fs::read(canister_wasm()).unwrap();
        use sha2::Digest;
        assert_eq!(hash, sha2::Sha256::digest(&wasm).to_vec());
        let controllers = agent
            .read_state_canister_controllers(canister)
            .await
            .expect("controllers");
        assert_eq!(controllers, vec![ed25519(1).sender().unwrap()]);
        let candid = agent
            .read_state_canister_metadata(canister, "candid:service")
            .await
            .expect("candid metadata");
        assert!(String::from_utf8(candid).unwrap().contains("create_user"));
        // A method the canister does not have: its `canister_inspect_message` admits only the
        // update methods of its interface, so the ingress filter refuses the call before any
        // execution, with the replica's code for a message the canister did not accept (an
        // uncertified reject: nothing reached the state tree).
        let err = agent
            .update(&canister, "no_such_method")
            .with_arg(Encode!().unwrap())
            .call_and_wait()
            .await
            .unwrap_err();
        let AgentError::UncertifiedReject { reject, .. } = err else {
            panic!("expected an uncertified reject from the ingress filter, got {err:?}");
        };
        assert_eq!(reject.reject_code, RejectCode::CanisterReject);
        assert_eq!(reject.error_code.as_deref(), Some("IC0406"));
        assert!(
            reject.reject_message.contains("rejected the message"),
            "{}",
            reject.reject_message
        );
        // The same as a query: an uncertified (node-signed) reject.
        let err = agent
            .query(&canister, "no_such_method")
            .with_arg(Encode!().unwrap())
            .call()
            .await
            .unwrap_err();
        let AgentError::UncertifiedReject { reject, .. } = err else {
            panic!("expected an uncertified reject, got {err:?}");
        };
        assert_eq!(reject.error_code.as_deref(), Some("IC0536"));
        // A stranger is refused by canister_inspect_message before execution: a
        // non-replicated rejection, and nothing was written.
        let stranger = agent_for(url, ed25519(2)).await;
        let err = create_user(&stranger, canister, "mallory")
            .await
            .unwrap_err();
        let AgentError::UncertifiedReject { reject, .. } = err else {
            panic!("expected a non-replicated rejection, got {err:?}");
        };
        assert_eq!(reject.reject_code, RejectCode::CanisterReject);
        assert_eq!(reject.error_code.as_deref(), Some("IC0406"));
        assert_eq!(
            counts(&agent, canister).await,
            Counts {
                users: 1,
                orders: 0
            }
        );
        // A call to a canister that does not exist.
        let missing = pocket_ic_server::topology::canister_id(
            pocket_ic_server::topology::FIRST_APPLICATION_RANGE_START + 0xF_FFFF,
        );
        let err = agent
            .update(&missing, "create_user")
            .with_arg(Encode!(&"x", &"y").unwrap())
            .call_and_wait()
            .await
            .unwrap_err();
        let AgentError::UncertifiedReject { reject, .. } = err else {
            panic!("expected a non-replicated rejection, got {err:?}");
        };
        assert_eq!(reject.reject_code, RejectCode::DestinationInvalid);
        assert_eq!(reject.error_code.as_deref(), Some("IC0301"));
    });
}

#[test]
fn certificates_are_verified_against_the_fetched_root_key() {
    let url = &replica().url;
    runtime().block_on(async {
        let agent = agent_for(url, ed25519(3)).await;
        let canister = deploy(&agent, None).await;
        // Another key: the agent must refuse the certificates (BLS verification is real).
        let stranger_key = pocket_ic_server::http_interface::certify::BlsKey::generate();
        agent.set_root_key(stranger_key.der.clone());
        let err = create_user(&agent, canister, "eve").await.unwrap_err();
        assert!(
            matches!(err, AgentError::CertificateVerificationFailed()),
            "{err:?}"
        );
    });
}

#[test]
fn ecdsa_identities_and_the_anonymous_sender_are_accepted() {
    let url = &replica().url;
    runtime().block_on(async {
        let owner = agent_for(url, ed25519(4)).await;
        let open = bench_api::InitArgs {
            write_access: Some(bench_api::WriteAccess::Open),
            ..Default::default()
        };
        let canister = deploy(&owner, Some(open)).await;
        let k1 =
            Secp256k1Identity::from_private_key(k256::SecretKey::from_slice(&[5; 32]).unwrap());
        let p256 =
            Prime256v1Identity::from_private_key(p256::SecretKey::from_slice(&[6; 32]).unwrap());
        let k1_agent = agent_for(url, k1).await;
        let p256_agent = agent_for(url, p256).await;
        let anon = agent_for(url, AnonymousIdentity).await;
        create_user(&k1_agent, canister, "k1")
            .await
            .expect("secp256k1");
        create_user(&p256_agent, canister, "p256")
            .await
            .expect("P-256");
        create_user(&anon, canister, "anon")
            .await
            .expect("anonymous");
        assert_eq!(
            counts(&anon, canister).await,
            Counts {
                users: 3,
                orders: 0
            }
        );
    });
}

#[test]
fn a_wrong_signature_or_sender_is_refused_before_execution() {
    let url = &replica().url;
    runtime().block_on(async {
        let agent = agent_for(url, ed25519(7)).await;
        let canister = deploy(&agent, None).await;
        let signed = agent
            .update(&canister, "create_user")
            .with_arg(Encode!(&"forged", &"f@example.com").unwrap())
            .sign()
            .expect("signed");
        let mut envelope: Envelope = serde_cbor::from_slice(&signed.signed_update).unwrap();
        let mut sig = envelope.sender_sig.clone().unwrap();
        sig[0] ^= 1;
        envelope.sender_sig = Some(sig);
        let (status, text) = http_error(
            agent
                .update_signed(canister, envelope.encode_bytes())
                .await
                .unwrap_err(),
        );
        assert_eq!(status, 400);
        assert!(text.starts_with("Invalid signature: "), "{text}");
        // Another identity's key with this sender: the sender does not match the key.
        let mut envelope: Envelope = serde_cbor::from_slice(&signed.signed_update).unwrap();
        envelope.sender_pubkey = ed25519(8).public_key();
        let (status, text) = http_error(
            agent
                .update_signed(canister, envelope.encode_bytes())
                .await
                .unwrap_err(),
        );
        assert_eq!(status, 400);
        assert!(text.contains("does not match the public key"), "{text}");
        // No signature at all from a non-anonymous sender.
        let mut envelope: Envelope = serde_cbor::from_slice(&signed.signed_update).unwrap();
        envelope.sender_sig = None;
        envelope.sender_pubkey = None;
        let (status, text) = http_error(
            agent
                .update_signed(canister, envelope.encode_bytes())
                .await
                .unwrap_err(),
        );
        assert_eq!(status, 400);
        assert!(text.starts_with("Missing signature from user"), "{text}");
        // None of them executed.
        assert_eq!(
            counts(&agent, canister).await,
            Counts {
                users: 0,
                orders: 0
            }
        );
    });
}

#[test]
fn expired_and_too_distant_requests_are_refused() {
    let url = &replica().url;
    runtime().block_on(async {
        let agent = agent_for(url, ed25519(9)).await;
        let canister = deploy(&agent, None).await;
        let now = std::time::SystemTime::now();
        for expiry in [
            now - Duration::from_secs(1),
            now + Duration::from_secs(6 * 60),
        ] {
            let err = agent
                .update(&canister, "create_user")
                .with_arg(Encode!(&"late", &"l@example.com").unwrap())
                .expire_at(expiry)
                .call_and_wait()
                .await
                .unwrap_err();
            let (status, text) = http_error(err);
            assert_eq!(status, 400);
            assert!(text.starts_with("Invalid request expiry: "), "{text}");
        }
        assert_eq!(
            counts(&agent, canister).await,
            Counts {
                users: 0,
                orders: 0
            }
        );
    });
}

#[test]
fn an_identical_request_executes_once() {
    let url = &replica().url;
    runtime().block_on(async {
        let agent = agent_for(url, ed25519(10)).await;
        let canister = deploy(&agent, None).await;
        let signed = agent
            .update(&canister, "create_user")
            .with_arg(Encode!(&"once", &"o@example.com").unwrap())
            .sign()
            .expect("signed");
        let mut replies = Vec::new();
        for _ in 0..3 {
            let r = agent
                .update_signed(canister, signed.signed_update.clone())
                .await
                .expect("answered");
            let ic_agent::agent::CallResponse::Response(bytes) = r else {
                panic!("expected a synchronous answer");
            };
            replies.push(Decode!(&bytes, Result<Outcome, WriteError>).unwrap());
        }
        assert_eq!(
            replies,
            vec![
                Ok(Outcome::Committed {
                    rows_changed: 1,
                    last_insert_rowid: 1
                });
                3
            ]
        );
        assert_eq!(
            counts(&agent, canister).await,
            Counts {
                users: 1,
                orders: 0
            }
        );
        // A re-signed request is a new request (a new nonce): it executes.
        assert_eq!(
            create_user(&agent, canister, "once").await.unwrap(),
            Outcome::Committed {
                rows_changed: 1,
                last_insert_rowid: 2
            }
        );
        assert_eq!(counts(&agent, canister).await.users, 2);
    });
}

fn delegation(
    from: &BasicIdentity,
    to: &BasicIdentity,
    expiration: u64,
    targets: Option<Vec<Principal>>,
) -> SignedDelegation {
    let delegation = Delegation {
        pubkey: to.public_key().unwrap(),
        expiration,
        targets,
        permissions: None,
    };
    let signature = from
        .sign_arbitrary(&delegation.signable())
        .unwrap()
        .signature
        .unwrap();
    SignedDelegation {
        delegation,
        signature,
    }
}

#[test]
fn delegations_are_checked_for_signature_targets_and_expiry() {
    let url = &replica().url;
    runtime().block_on(async {
        let root = ed25519(11);
        let owner = agent_for(url, ed25519(11)).await;
        let canister = deploy(&owner, None).await;
        let other = deploy(&owner, None).await;
        let far = u64::try_from(
            (std::time::SystemTime::now() + Duration::from_secs(3600))
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos(),
        )
        .unwrap();
        let chain =
            |expiration, targets| vec![delegation(&root, &ed25519(12), expiration, targets)];
        let delegated = |chain| {
            DelegatedIdentity::new_unchecked(
                root.public_key().unwrap(),
                Box::new(ed25519(12)),
                chain,
            )
        };
        // Targeting the canister: the delegated session writes as the owner (a controller).
        let session = agent_for(url, delegated(chain(far, Some(vec![canister])))).await;
        create_user(&session, canister, "delegated")
            .await
            .expect("delegated call");
        assert_eq!(counts(&owner, canister).await.users, 1);
        // Not a target.
        let err = create_user(&session, other, "elsewhere").await.unwrap_err();
        let (status, text) = http_error(err);
        assert_eq!(status, 400);
        assert!(
            text.contains("is not one of the delegation targets"),
            "{text}"
        );
        // Expired.
        let expired = agent_for(url, delegated(chain(1, None))).await;
        let (status, text) = http_error(create_user(&expired, canister, "x").await.unwrap_err());
        assert_eq!(status, 400);
        assert!(text.contains("delegation has expired"), "{text}");
        // Signed by someone else.
        let forged = DelegatedIdentity::new_unchecked(
            root.public_key().unwrap(),
            Box::new(ed25519(12)),
            vec![delegation(&ed25519(13), &ed25519(12), far, None)],
        );
        let forged = agent_for(url, forged).await;
        let (status, text) = http_error(create_user(&forged, canister, "y").await.unwrap_err());
        assert_eq!(status, 400);
        assert!(text.starts_with("Invalid delegation: "), "{text}");
        assert_eq!(counts(&owner, canister).await.users, 1);
    });
}

/// A POST with a raw body; returns the HTTP status, or `None` if nothing came back in time.
fn raw_post(url: &str, path: &str, body: &[u8], timeout: Duration) -> Option<u16> {
    let addr = url.trim_start_matches("http://");
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(timeout)).unwrap();
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/cbor\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).unwrap();
    s.write_all(body).unwrap();
    let mut buf = [0u8; 64];
    match s.read(&mut buf) {
        Ok(n) if n >= 12 => std::str::from_utf8(&buf[9..12]).ok()?.parse().ok(),
        _ => None,
    }
}

fn hook(url: &str, name: &str, json: &str) {
    let addr = url.trim_start_matches("http://");
    let mut s = TcpStream::connect(addr).unwrap();
    let req = format!(
        "POST /test_hooks/{name} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{json}",
        json.len()
    );
    s.write_all(req.as_bytes()).unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    assert!(out.starts_with("HTTP/1.1 200"), "{out}");
}

#[test]
fn fault_hooks_drop_and_delay_answers_and_stop_canisters() {
    // Its own replica: a hook's count would otherwise be spent by other tests' calls.
    let own = common::spawn_replica("faults", &[]);
    let url = &own.url;
    runtime().block_on(async {
        let agent = agent_for(url, ed25519(14)).await;
        let canister = deploy(&agent, None).await;
        // A dropped answer: the call commits, the client hears nothing.
        let signed = agent
            .update(&canister, "create_user")
            .with_arg(Encode!(&"dropped", &"d@example.com").unwrap())
            .sign()
            .unwrap();
        hook(url, "drop_replies", r#"{"count": 1}"#);
        let path = format!("/api/v4/canister/{canister}/call");
        assert_eq!(
            raw_post(url, &path, &signed.signed_update, Duration::from_secs(2)),
            None
        );
        // The request's status says it committed; resending it returns the same answer.
        let (reply, _) = agent
            .wait(&signed.request_id, canister)
            .await
            .expect("the status of the dropped call");
        assert_eq!(
            Decode!(&reply, Result<Outcome, WriteError>).unwrap(),
            Ok(Outcome::Committed {
                rows_changed: 1,
                last_insert_rowid: 1
            })
        );
        assert_eq!(counts(&agent, canister).await.users, 1);
        // A delayed answer.
        hook(url, "delay_replies", r#"{"count": 1, "ms": 1500}"#);
        let started = Instant::now();
        create_user(&agent, canister, "late").await.unwrap();
        assert!(started.elapsed() >= Duration::from_millis(1500));
        // A stopped canister refuses calls with the replica's code.
        hook(
            url,
            "stop_canister",
            &format!(r#"{{"canister_id": "{canister}"}}"#),
        );
        let err = create_user(&agent, canister, "stopped").await.unwrap_err();
        let AgentError::UncertifiedReject { reject, .. } = err else {
            panic!("expected a rejection, got {err:?}");
        };
        assert_eq!(reject.error_code.as_deref(), Some("IC0508"));
        hook(
            url,
            "start_canister",
            &format!(r#"{{"canister_id": "{canister}"}}"#),
        );
        create_user(&agent, canister, "started").await.unwrap();
        assert_eq!(counts(&agent, canister).await.users, 3);
    });
}

#[test]
fn the_http_path_executes_the_engines_instructions_and_charges_its_fees() {
    use offline_engine::{Canister, Charging, Engine, EngineConfig, Settings, SubnetKind};
    let url = &replica().url;
    let identity = ed25519(15);
    let sender = identity.sender().unwrap();
    let user = Encode!(&"carol", &"carol@example.com").unwrap();
    let order = Encode!(&1i64, &9.5f64).unwrap();
    // Through the HTTP interface: the balance before and after one create_order.
    let http_delta = runtime().block_on(async {
        let agent = agent_for(url, identity).await;
        let canister = deploy(&agent, None).await;
        create_user(&agent, canister, "carol").await.unwrap();
        let status = |agent: Agent| async move {
            let r = agent
                .update(&Principal::management_canister(), "canister_status")
                .with_effective_canister_id(canister)
                .with_arg(
                    Encode!(&CanisterIdRecord {
                        canister_id: canister
                    })
                    .unwrap(),
                )
                .call_and_wait()
                .await
                .unwrap();
            Decode!(&r, CanisterStatusResult).unwrap().cycles
        };
        let before = status(agent.clone()).await;
        agent
            .update(&canister, "create_order")
            .with_arg(order.clone())
            .call_and_wait()
            .await
            .unwrap();
        let after = status(agent.clone()).await;
        before - after
    });
    // The engine directly: the same messages on the same module.
    let engine = Engine::new(EngineConfig::default()).unwrap();
    let program = engine
        .load(&std::fs::read(canister_wasm()).unwrap())
        .unwrap();
    let settings = Settings {
        subnet: SubnetKind::Application,
        controllers: vec![sender.as_slice().to_vec()],
        cycles: 100_000_000_000_000,
        canister_id: lxzze().as_slice().to_vec(),
        charging: Some(Charging::APPLICATION),
        debug_print_enabled: true,
        ..Settings::default()
    };
    let (mut c, _) = Canister::install(
        &engine,
        &program,
        &Encode!(&None::<bench_api::InitArgs>).unwrap(),
        settings,
    )
    .unwrap();
    c.update_as(sender.as_slice(), "create_user", &user)
        .unwrap();
    let before = c.cycles();
    let exec = c
        .update_as(sender.as_slice(), "create_order", &order)
        .unwrap();
    let engine_delta = before - c.cycles();
    assert!(exec.billed_instructions > 100_000);
    assert_eq!(candid::Nat::from(engine_delta), http_delta);
}

#[test]
fn make_live_gives_pocket_ic_users_an_agent_url() {
    let mut pic = common::instance(false);
    let url = pic.make_live(None);
    runtime().block_on(async {
        let agent = agent_for(url.as_str(), ed25519(16)).await;
        let canister = deploy(&agent, None).await;
        create_user(&agent, canister, "live").await.unwrap();
        assert_eq!(counts(&agent, canister).await.users, 1);
    });
    pic.stop_live();
}

/// icp-cli asks the cycles minting canister for the default subnets (a query the agent
/// verifies against the root subnet's node) before it creates canisters.
#[test]
fn the_default_subnets_query_is_verified_by_the_agent() {
    let url = &replica().url;
    runtime().block_on(async {
        let agent = agent_for(url, ed25519(17)).await;
        let cmc = pocket_ic_server::http_interface::system_canisters::CYCLES_MINTING_CANISTER;
        let reply = agent
            .query(&cmc, "get_default_subnets")
            .with_arg(Encode!().unwrap())
            .call()
            .await
            .expect("the default subnets");
        // The instance's one application subnet: the subnet its canisters live on.
        let subnets = Decode!(&reply, Vec<Principal>).unwrap();
        let canister = deploy(&agent, None).await;
        let subnet = agent
            .get_subnet_by_canister(&canister)
            .await
            .expect("the subnet");
        assert_eq!(subnets, vec![subnet.id()]);
    });
}

#[test]
fn read_state_keeps_strangers_out_of_other_requests_and_canisters() {
    let url = &replica().url;
    runtime().block_on(async {
        let owner = agent_for(url, ed25519(18)).await;
        let canister = deploy(&owner, None).await;
        let other = deploy(&owner, None).await;
        let signed = owner
            .update(&canister, "create_user")
            .with_arg(Encode!(&"private", &"p@example.com").unwrap())
            .sign()
            .unwrap();
        owner
            .update_signed(canister, signed.signed_update.clone())
            .await
            .expect("executed");
        // The sender reads its request's status; anyone else is refused (403).
        let (status, _) = owner
            .request_status_raw(&signed.request_id, canister)
            .await
            .expect("the sender's status");
        assert!(matches!(
            status,
            ic_agent::agent::RequestStatusResponse::Replied(_)
        ));
        let stranger = agent_for(url, ed25519(19)).await;
        let (code, text) = http_error(
            stranger
                .request_status_raw(&signed.request_id, canister)
                .await
                .unwrap_err(),
        );
        assert_eq!(code, 403);
        assert_eq!(
            text,
            "The user tries to access Request ID not signed by the caller."
        );
        // Canister paths must name the effective canister; unknown paths are not served.
        let (code, text) = http_error(
            stranger
                .read_state_raw(
                    vec![vec![
                        "canister".into(),
                        other.as_slice().into(),
                        "controllers".into(),
                    ]],
                    canister,
                )
                .await
                .unwrap_err(),
        );
        assert_eq!(code, 400);
        assert!(
            text.contains("does not match requested principal id"),
            "{text}"
        );
        let (code, text) = http_error(
            stranger
                .read_state_raw(vec![vec!["secrets".into()]], canister)
                .await
                .unwrap_err(),
        );
        assert_eq!((code, text.as_str()), (404, "Invalid path requested."));
    });
}

#[test]
fn per_instance_endpoints_serve_a_live_pocket_ic_instance() {
    let pic = common::instance(false);
    pic.auto_progress();
    let url = format!("{}instances/{}/", common::server_url(), pic.instance_id());
    runtime().block_on(async {
        let agent = agent_for(&url, ed25519(20)).await;
        let canister = deploy(&agent, None).await;
        create_user(&agent, canister, "per-instance").await.unwrap();
        assert_eq!(counts(&agent, canister).await.users, 1);
    });
    // The REST protocol sees what the agent did.
    let canister = pic.topology().default_effective_canister_id;
    assert!(pic.canister_exists(canister.into()));
}
