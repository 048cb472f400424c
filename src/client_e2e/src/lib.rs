//! End-to-end harness for the batch clients: an offline replica (`offline-pocket-ic --replica
//! --test-hooks`, the crate `pocket_ic_server`) started in this process on a port of its own,
//! the reference canister deployed through ic-agent with every check of the agent on
//! (certificates, BLS signatures, the subnet delegation; only the root key is fetched, as local
//! development does), and the replica's fault hooks (drop or delay call answers, stop and start
//! a canister) plus upgrades between attempts.
//!
//! Figures measured through it are labelled "offline replica through a real agent", with the
//! metering profile the replica ran under ([`agent_label`]); the client rows (`bench/load.md`,
//! `bench/overhead.md`, `bench/app_canister.md`) are priced under each of [`PROFILES`].
//!
//! ```no_run
//! # async fn example() -> Result<(), client_e2e::E2eError> {
//! let replica = client_e2e::Replica::start(None)?;
//! let agent = replica.agent(client_e2e::identity(1)).await?;
//! let canister = client_e2e::deploy(&agent, None).await?;
//! replica.hook("drop_replies", r#"{"count": 1}"#)?;
//! # let _ = canister; Ok(()) }
//! ```

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::time::Duration;

use bench_api::{Counts, InitArgs};
use candid::{Decode, Encode, Principal};
use ic_agent::Agent;
use ic_agent::identity::BasicIdentity;
use ic_management_canister_types::{
    CanisterIdRecord, CanisterInstallMode, InstallCodeArgs, ProvisionalCreateCanisterWithCyclesArgs,
};
use offline_engine::Metering;
use pocket_ic_server::server::{ServeOptions, ServerConfig, serve_with};

/// The metering profiles the client rows are priced under, in the order the files show them:
/// the replica's rules with the deterministic memory tracker first, then those of PocketIC 13
/// and canbench 0.7.0 (the offline engine's `METERING.md` §10).
pub const PROFILES: [Metering; 2] = [Metering::IC_DMT, Metering::POCKET_IC_13];

/// What changed between the two profiles' rules, with its sources (the wording of the
/// benchmark report's opening).
pub const WHAT_CHANGED: &str = "What changed: dfinity/ic pull requests #10789 (\"Switch to deterministic memory tracker\", merged \
     2026-07-16) and #11180 (\"Remove feature flag for DMT\", 2026-08-24) charge 5,000 instructions per 4 KiB page \
     of every 64 KiB Wasm page a message first reads and again at its first write, heap or stable memory, \
     during the message; PocketIC 13 and canbench 0.7.0 run the replica before them (a changed heap page 1,000 \
     after the message, a new dirty stable page 1,000, reading free). The rules as implemented, each with its \
     file and commit: `src/offline_engine/METERING.md` §10. Which replica release carries the tracker to \
     mainnet cannot be checked offline.";

/// The names of [`PROFILES`], in their order: `ic-dmt-0441fbd7 and pocketic-13`.
pub fn profile_names() -> String {
    PROFILES.map(|m| m.name).join(" and ")
}

/// A profile's title, as the benchmark report heads its tables: "the replica's rules with the
/// deterministic memory tracker (`ic-dmt-0441fbd7`)", "the rules of PocketIC 13 and canbench
/// 0.7.0 (`pocketic-13`)"; any other profile by its name.
pub fn profile_title(metering: &Metering) -> String {
    let rules = if *metering == Metering::IC_DMT {
        "the replica's rules with the deterministic memory tracker"
    } else if *metering == Metering::POCKET_IC_13 {
        "the rules of PocketIC 13 and canbench 0.7.0"
    } else {
        "the rules"
    };
    format!("{rules} (`{}`)", metering.name)
}

/// The label of figures measured through a real agent on a replica metering by `metering`:
/// `offline replica through a real agent, metering ic-dmt-0441fbd7`.
pub fn agent_label(metering: &Metering) -> String {
    format!(
        "offline replica through a real agent, metering {}",
        metering.name
    )
}

/// The label of figures of the offline engine's subnet run in this process under `metering`,
/// as the benchmark report labels its own: `offline (wasmtime, IC metering: ic-dmt-0441fbd7)`.
pub fn engine_label(metering: &Metering) -> String {
    format!(
        "{}: {})",
        offline_engine::canbench::ENGINE_LABEL.trim_end_matches(')'),
        metering.name
    )
}

/// What went wrong in the harness (not in the code under test), with its cause.
#[derive(Debug, thiserror::Error)]
pub enum E2eError {
    /// The replica could not be started or did not say where it listens.
    #[error("starting the offline replica: {0}")]
    Start(String),
    /// An HTTP exchange with the replica's test hooks failed.
    #[error("test hook {hook}: {message}")]
    Hook {
        /// The hook.
        hook: String,
        /// What failed.
        message: String,
    },
    /// An agent call failed.
    #[error("{what}: {source}")]
    Agent {
        /// What was called.
        what: String,
        /// The agent's error (boxed: it is large, and errors travel by value).
        source: Box<ic_agent::AgentError>,
    },
    /// A Candid argument or reply could not be encoded or decoded.
    #[error("{what}: {message}")]
    Candid {
        /// What was encoded or decoded.
        what: String,
        /// Candid's error.
        message: String,
    },
    /// The canister's wasm could not be read (build it with `scripts/build.sh`).
    #[error("reading {path}: {source} (build it with scripts/build.sh)")]
    Wasm {
        /// Its path.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
}

fn agent_error(what: impl Into<String>) -> impl FnOnce(ic_agent::AgentError) -> E2eError {
    let what = what.into();
    move |source| E2eError::Agent {
        what,
        source: Box::new(source),
    }
}

fn candid_error(what: impl Into<String>) -> impl FnOnce(candid::Error) -> E2eError {
    let what = what.into();
    move |e| E2eError::Candid {
        what,
        message: e.to_string(),
    }
}

/// An offline replica served from this process (a thread with its own runtime), with the
/// fault hooks on. It lives until the process ends.
#[derive(Debug, Clone)]
pub struct Replica {
    /// `http://127.0.0.1:<port>`.
    pub url: String,
    /// The rules for memory pages its canisters are metered by.
    pub metering: Metering,
}

impl Replica {
    /// Starts a replica (one live instance, one application subnet, the normal cost schedule)
    /// and waits until it listens. With `block_interval` it runs one round per interval (one
    /// block: at most 1,000 ingress messages and 4 MiB); otherwise a round whenever a call
    /// arrives. Its canisters are metered by the server's default profile (PocketIC 13's
    /// rules, as `offline-pocket-ic` without `--metering`). Cost: one instance's key
    /// generation (BLS), well under a second.
    pub fn start(block_interval: Option<Duration>) -> Result<Replica, E2eError> {
        Replica::start_metered(block_interval, ServeOptions::default().metering)
    }

    /// [`Replica::start`] with its canisters metered by `metering` (as `offline-pocket-ic
    /// --metering <name>`).
    pub fn start_metered(
        block_interval: Option<Duration>,
        metering: Metering,
    ) -> Result<Replica, E2eError> {
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let port_file = std::env::temp_dir().join(format!(
            "client_e2e_replica_{}_{n}.port",
            std::process::id()
        ));
        let _ = std::fs::remove_file(&port_file);
        let config = ServerConfig {
            ip_addr: "127.0.0.1".into(),
            port: 0,
            port_file: Some(port_file.clone()),
            ttl: Duration::from_secs(3600),
            hard_ttl: None,
            mute_canister_output: true,
        };
        let options = ServeOptions {
            replica: true,
            test_hooks: true,
            log_requests: false,
            no_idle_shutdown: true,
            block_interval,
            metering,
        };
        let runtime = runtime().map_err(|e| E2eError::Start(e.to_string()))?;
        std::thread::Builder::new()
            .name(format!("offline-replica-{n}"))
            .spawn(move || {
                if let Err(e) = runtime.block_on(serve_with(config, options)) {
                    eprintln!("client_e2e: the offline replica stopped: {e}");
                }
            })
            .map_err(|e| E2eError::Start(e.to_string()))?;
        let port = pocket_ic_server::server::wait_for_port(&port_file, Duration::from_secs(60))
            .map_err(E2eError::Start)?;
        Ok(Replica {
            url: format!("http://127.0.0.1:{port}"),
            metering,
        })
    }

    /// An agent for this replica with `identity`, the root key fetched (ic-agent's defaults:
    /// at most 50 requests in flight).
    pub async fn agent(&self, identity: BasicIdentity) -> Result<Agent, E2eError> {
        self.agent_with_limit(identity, 50).await
    }

    /// An agent for this replica with `identity` and at most `max_in_flight` requests in
    /// flight (ic-agent queues the others), the root key fetched.
    pub async fn agent_with_limit(
        &self,
        identity: BasicIdentity,
        max_in_flight: usize,
    ) -> Result<Agent, E2eError> {
        let agent = Agent::builder()
            .with_url(self.url.as_str())
            .with_identity(identity)
            .with_max_concurrent_requests(max_in_flight)
            .build()
            .map_err(agent_error("building an agent"))?;
        agent
            .fetch_root_key()
            .await
            .map_err(agent_error("fetching the root key"))?;
        Ok(agent)
    }

    /// Posts `json` to the test hook `name` (`drop_replies`, `delay_replies`,
    /// `stop_canister`, `start_canister`, `block_interval`, `rounds`) and returns its answer.
    /// Blocking (a local TCP exchange of a few hundred bytes).
    pub fn hook(&self, name: &str, json: &str) -> Result<serde_json::Value, E2eError> {
        let err = |message: String| E2eError::Hook {
            hook: name.to_string(),
            message,
        };
        let addr = self.url.trim_start_matches("http://");
        let mut s = TcpStream::connect(addr).map_err(|e| err(e.to_string()))?;
        let request = format!(
            "POST /test_hooks/{name} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{json}",
            json.len()
        );
        s.write_all(request.as_bytes())
            .map_err(|e| err(e.to_string()))?;
        let mut out = String::new();
        s.read_to_string(&mut out).map_err(|e| err(e.to_string()))?;
        let (head, body) = out
            .split_once("\r\n\r\n")
            .ok_or_else(|| err(format!("no HTTP header in {out:?}")))?;
        if !head.starts_with("HTTP/1.1 200") {
            return Err(err(format!("{head}: {body}")));
        }
        serde_json::from_str(body).map_err(|e| err(format!("{e}: {body}")))
    }

    /// Stops (`running == false`) or starts `canister` through the hooks, as its controller.
    pub fn set_running(&self, canister: Principal, running: bool) -> Result<(), E2eError> {
        let hook = if running {
            "start_canister"
        } else {
            "stop_canister"
        };
        self.hook(hook, &format!(r#"{{"canister_id": "{canister}"}}"#))
            .map(drop)
    }
}

/// The tokio runtime the offline replica's server, the agents and the clients run on (each test
/// and example, and the replica's own thread): two worker threads, the cores of the machines the
/// project runs on.
pub fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
}

/// An Ed25519 identity from a one-byte seed (distinct seeds, distinct principals).
pub fn identity(seed: u8) -> BasicIdentity {
    BasicIdentity::from_raw_key(&[seed; 32])
}

/// The reference canister's wasm, as `scripts/build.sh` builds it.
pub fn canister_wasm_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/canister/bench_canister.wasm")
}

fn gzipped_canister() -> Result<Vec<u8>, E2eError> {
    let path = canister_wasm_path();
    let wasm = std::fs::read(&path).map_err(|source| E2eError::Wasm {
        path: path.clone(),
        source,
    })?;
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(&wasm)
        .and_then(|()| gz.finish())
        .map_err(|source| E2eError::Wasm { path, source })
}

/// Creates a canister (100 T cycles) controlled by the agent's identity and installs the
/// reference canister with `init`. Cost: two update calls.
pub async fn deploy(agent: &Agent, init: Option<InitArgs>) -> Result<Principal, E2eError> {
    let first = Principal::from_text("lxzze-o7777-77777-aaaaa-cai")
        .map_err(|e| E2eError::Start(e.to_string()))?;
    let arg = Encode!(&ProvisionalCreateCanisterWithCyclesArgs {
        amount: Some(100_000_000_000_000u128.into()),
        settings: None,
        specified_id: None,
        sender_canister_version: None,
    })
    .map_err(candid_error("create argument"))?;
    let created = agent
        .update(
            &Principal::management_canister(),
            "provisional_create_canister_with_cycles",
        )
        .with_effective_canister_id(first)
        .with_arg(arg)
        .call_and_wait()
        .await
        .map_err(agent_error("provisional_create_canister_with_cycles"))?;
    let canister_id = Decode!(&created, CanisterIdRecord)
        .map_err(candid_error("create reply"))?
        .canister_id;
    install(
        agent,
        canister_id,
        CanisterInstallMode::Install,
        Encode!(&init).map_err(candid_error("init argument"))?,
    )
    .await?;
    Ok(canister_id)
}

/// Upgrades `canister` to the same reference canister (its stable memory, and so its SQLite
/// database and recorded batch keys, kept). Cost: one `install_code` call.
pub async fn upgrade(agent: &Agent, canister: Principal) -> Result<(), E2eError> {
    install(
        agent,
        canister,
        CanisterInstallMode::Upgrade(None),
        Encode!(&None::<InitArgs>).map_err(candid_error("upgrade argument"))?,
    )
    .await
}

async fn install(
    agent: &Agent,
    canister_id: Principal,
    mode: CanisterInstallMode,
    arg: Vec<u8>,
) -> Result<(), E2eError> {
    let module = gzipped_canister()?;
    let args = Encode!(&InstallCodeArgs {
        mode,
        canister_id,
        wasm_module: module,
        arg,
        sender_canister_version: None,
    })
    .map_err(candid_error("install_code argument"))?;
    agent
        .update(&Principal::management_canister(), "install_code")
        .with_effective_canister_id(canister_id)
        .with_arg(args)
        .call_and_wait()
        .await
        .map_err(agent_error("install_code"))?;
    Ok(())
}

/// The rows of the reference canister's tables (a query; certified by the node's signature).
pub async fn counts(agent: &Agent, canister: Principal) -> Result<Counts, E2eError> {
    let reply = agent
        .query(&canister, "counts")
        .with_arg(Encode!().map_err(candid_error("counts argument"))?)
        .call()
        .await
        .map_err(agent_error("counts"))?;
    Decode!(&reply, Result<Counts, String>)
        .map_err(candid_error("counts reply"))?
        .map_err(|message| E2eError::Candid {
            what: "counts".into(),
            message,
        })
}

/// The users whose email starts with `prefix` (at most [`bench_api::MAX_QUERY_ROWS`]; a
/// query).
pub async fn users_with_email_prefix(
    agent: &Agent,
    canister: Principal,
    prefix: &str,
) -> Result<Vec<bench_api::User>, E2eError> {
    let reply = agent
        .query(&canister, "users_by_email_prefix")
        .with_arg(
            Encode!(&prefix, &bench_api::MAX_QUERY_ROWS)
                .map_err(candid_error("users_by_email_prefix argument"))?,
        )
        .call()
        .await
        .map_err(agent_error("users_by_email_prefix"))?;
    Decode!(&reply, Result<Vec<bench_api::User>, String>)
        .map_err(candid_error("users_by_email_prefix reply"))?
        .map_err(|message| E2eError::Candid {
            what: "users_by_email_prefix".into(),
            message,
        })
}

/// The canister's cycle balance (`canister_status`, as its controller; one update call).
pub async fn cycles(agent: &Agent, canister: Principal) -> Result<u128, E2eError> {
    let reply = agent
        .update(&Principal::management_canister(), "canister_status")
        .with_effective_canister_id(canister)
        .with_arg(
            Encode!(&CanisterIdRecord {
                canister_id: canister
            })
            .map_err(candid_error("canister_status argument"))?,
        )
        .call_and_wait()
        .await
        .map_err(agent_error("canister_status"))?;
    let status = Decode!(&reply, ic_management_canister_types::CanisterStatusResult)
        .map_err(candid_error("canister_status reply"))?;
    u128::try_from(status.cycles.0).map_err(|e| E2eError::Candid {
        what: "canister_status cycles".into(),
        message: e.to_string(),
    })
}

pub mod app;
pub mod fault_run;
pub mod load;
pub mod overhead;
pub mod replies;
