//! Wall time of N `create_order` updates on the reference canister: the engine's direct run
//! (`offline_engine::Canister::update_as`, engine: offline (wasmtime, IC metering)) against
//! the same calls through the IC HTTP interface of `offline-pocket-ic --replica` with ic-agent
//! (every verification on), one call at a time and with calls in flight together.
//!
//! ```sh
//! scripts/build.sh && cargo build --release -p pocket_ic_server
//! cargo run --release -p pocket_ic_server --example http_path_bench -- 1000
//! ```
//!
//! Prints one line per path with the total and per-call wall time and the ratio to the direct
//! run, then what one certificate costs to sign and to verify. Figures are this machine's;
//! rerun to compare. A second argument names a file for the server's request log
//! (`--log-requests`: every request with its duration on the server).

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use candid::{Decode, Encode, Principal};
use ic_agent::Agent;
use ic_agent::identity::BasicIdentity;
use ic_management_canister_types::{
    CanisterIdRecord, CanisterInstallMode, InstallCodeArgs, ProvisionalCreateCanisterWithCyclesArgs,
};
use offline_engine::{Canister, Charging, Engine, EngineConfig, Settings, SubnetKind};

type Error = Box<dyn std::error::Error>;

fn wasm() -> Result<Vec<u8>, Error> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../target/canister/bench_canister.wasm");
    std::fs::read(&path)
        .map_err(|e| format!("{}: {e} (run scripts/build.sh)", path.display()).into())
}

fn order(i: usize) -> Vec<u8> {
    Encode!(&1i64, &(i as f64 + 0.5)).unwrap_or_default()
}

/// The engine's direct run: install, one user, then `n` orders.
fn direct(n: usize, identity: &Principal) -> Result<Duration, Error> {
    let engine = Engine::new(EngineConfig::default())?;
    let program = engine.load(&wasm()?)?;
    let settings = Settings {
        subnet: SubnetKind::Application,
        controllers: vec![identity.as_slice().to_vec()],
        cycles: 100_000_000_000_000,
        canister_id: Principal::from_text("lxzze-o7777-77777-aaaaa-cai")?
            .as_slice()
            .to_vec(),
        charging: Some(Charging::APPLICATION),
        debug_print_enabled: true,
        ..Settings::default()
    };
    let (mut c, _) = Canister::install(
        &engine,
        &program,
        &Encode!(&None::<bench_api::InitArgs>)?,
        settings,
    )?;
    c.update_as(
        identity.as_slice(),
        "create_user",
        &Encode!(&"u", &"u@example.com")?,
    )?;
    let started = Instant::now();
    for i in 0..n {
        c.update_as(identity.as_slice(), "create_order", &order(i))?;
    }
    Ok(started.elapsed())
}

async fn deploy(agent: &Agent) -> Result<Principal, Error> {
    let created = agent
        .update(
            &Principal::management_canister(),
            "provisional_create_canister_with_cycles",
        )
        .with_effective_canister_id(Principal::from_text("lxzze-o7777-77777-aaaaa-cai")?)
        .with_arg(Encode!(&ProvisionalCreateCanisterWithCyclesArgs {
            amount: Some(100_000_000_000_000u128.into()),
            settings: None,
            specified_id: None,
            sender_canister_version: None,
        })?)
        .call_and_wait()
        .await?;
    let canister_id = Decode!(&created, CanisterIdRecord)?.canister_id;
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(&wasm()?)?;
    agent
        .update(&Principal::management_canister(), "install_code")
        .with_effective_canister_id(canister_id)
        .with_arg(Encode!(&InstallCodeArgs {
            mode: CanisterInstallMode::Install,
            canister_id,
            wasm_module: gz.finish()?,
            arg: Encode!(&None::<bench_api::InitArgs>)?,
            sender_canister_version: None,
        })?)
        .call_and_wait()
        .await?;
    agent
        .update(&canister_id, "create_user")
        .with_arg(Encode!(&"u", &"u@example.com")?)
        .call_and_wait()
        .await?;
    Ok(canister_id)
}

/// `n` orders through the HTTP interface, `in_flight` calls at a time.
async fn through_http(
    agent: &Agent,
    canister: Principal,
    n: usize,
    in_flight: usize,
) -> Result<Duration, Error> {
    let started = Instant::now();
    let mut next = 0;
    while next < n {
        let mut calls = tokio::task::JoinSet::new();
        let end = n.min(next + in_flight);
        for i in next..end {
            let agent = agent.clone();
            calls.spawn(async move {
                agent
                    .update(&canister, "create_order")
                    .with_arg(order(i))
                    .call_and_wait()
                    .await
            });
        }
        next = end;
        while let Some(r) = calls.join_next().await {
            r??;
        }
    }
    Ok(started.elapsed())
}

fn main() -> Result<(), Error> {
    // With a second argument, the server logs every request (and its duration) to that file.
    let server_log = std::env::args().nth(2);
    let n: usize = std::env::args()
        .nth(1)
        .map(|s| s.parse())
        .transpose()?
        .unwrap_or(1000);
    let identity = BasicIdentity::from_raw_key(&[42; 32]);
    let principal = ic_agent::Identity::sender(&identity)?;
    let direct_time = direct(n, &principal)?;
    let port_file =
        std::env::temp_dir().join(format!("http_path_bench_{}.port", std::process::id()));
    let _ = std::fs::remove_file(&port_file);
    let server = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../target/release/offline-pocket-ic");
    let mut child = Command::new(&server)
        .args([
            "--replica",
            "--mute-canister-output",
            "--ttl",
            "30",
            "--port-file",
        ])
        .arg(&port_file)
        .args(server_log.is_some().then_some("--log-requests"))
        .stdout(Stdio::null())
        .stderr(match &server_log {
            Some(path) => Stdio::from(std::fs::File::create(path)?),
            None => Stdio::null(),
        })
        .spawn()
        .map_err(|e| {
            format!(
                "{}: {e} (cargo build --release -p pocket_ic_server)",
                server.display()
            )
        })?;
    let port = pocket_ic_server::server::wait_for_port(&port_file, Duration::from_secs(60))?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let result = rt.block_on(async {
        let agent = Agent::builder()
            .with_url(format!("http://127.0.0.1:{port}"))
            .with_identity(identity)
            .build()?;
        agent.fetch_root_key().await?;
        let canister = deploy(&agent).await?;
        let sequential = through_http(&agent, canister, n, 1).await?;
        let canister = deploy(&agent).await?;
        let concurrent = through_http(&agent, canister, n, 50).await?;
        Ok::<_, Error>((sequential, concurrent))
    });
    let _ = child.kill();
    let _ = child.wait();
    let (sequential, concurrent) = result?;
    // What one certificate costs: the server signs once per round, the agent verifies every
    // certificate it receives (ic-agent calls ic-verify-bls-signature, as measured here).
    let key = pocket_ic_server::http_interface::certify::BlsKey::generate();
    let root = [7u8; 32];
    let reps = 50u32;
    let started = Instant::now();
    let mut sig = Vec::new();
    for _ in 0..reps {
        sig = key.sign_root(&root);
    }
    let sign = started.elapsed() / reps;
    let mut msg = pocket_ic_server::http_interface::certify::STATE_ROOT_DOMAIN.to_vec();
    msg.extend_from_slice(&root);
    let started = Instant::now();
    for _ in 0..reps {
        ic_verify_bls_signature::verify_bls_signature(&sig, &msg, &key.der[37..])
            .map_err(|()| "the signature does not verify")?;
    }
    let verify = started.elapsed() / reps;
    let line = |what: &str, d: Duration| {
        println!(
            "{what:<58} {:>9.3} s  {:>8.3} ms/call  {:>6.2}x",
            d.as_secs_f64(),
            d.as_secs_f64() * 1e3 / n as f64,
            d.as_secs_f64() / direct_time.as_secs_f64()
        );
    };
    println!("{n} create_order updates on the reference canister");
    line(
        "engine's direct run (offline (wasmtime, IC metering))",
        direct_time,
    );
    line("HTTP path, ic-agent, 1 call at a time", sequential);
    line("HTTP path, ic-agent, 50 calls in flight", concurrent);
    println!(
        "one certificate: BLS signing (server, once per round) {:.3} ms, BLS verification (agent, every answer) {:.3} ms",
        sign.as_secs_f64() * 1e3,
        verify.as_secs_f64() * 1e3
    );
    Ok(())
}
