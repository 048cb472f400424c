//! Starting and stopping the server as the `pocket-ic` client expects: the port file is
//! created atomically (if it exists, another server already serves this client and this one
//! exits at once), the port is written to it followed by a newline once the server listens, and
//! it is removed again on shutdown. The server shuts down when it has been idle for its TTL,
//! on SIGINT/SIGTERM, and exits hard when its hard TTL since launch has passed.

use std::fs::File;
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use offline_engine::{Engine, EngineConfig, Metering};

use crate::error::ServerError;
use crate::instance::Programs;
use crate::routes::router;
use crate::state::{AppState, Shared};

/// How the server is started (the `pocket-ic` client passes `--port-file` and the TTLs).
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Address to bind.
    pub ip_addr: String,
    /// Port to bind (0: any free port).
    pub port: u16,
    /// File to write the port to.
    pub port_file: Option<PathBuf>,
    /// Shut down after this long without requests.
    pub ttl: Duration,
    /// Exit this long after launch, whatever is running.
    pub hard_ttl: Option<Duration>,
    /// Do not print canisters' `debug_print` output.
    pub mute_canister_output: bool,
}

/// What the server offers beyond PocketIC's REST protocol (all off by default).
#[derive(Debug, Clone, Default)]
pub struct ServeOptions {
    /// Create one live instance and serve its IC HTTP interface at the root (`/api/...`).
    pub replica: bool,
    /// Serve the fault-injection test hooks (`/test_hooks/...`).
    pub test_hooks: bool,
    /// Print every request to stderr.
    pub log_requests: bool,
    /// Never shut down for lack of requests (the TTL is ignored).
    pub no_idle_shutdown: bool,
    /// With `replica`: run one round (one block) per this interval and no other, instead of
    /// a round whenever a call arrives.
    pub block_interval: Option<Duration>,
    /// The rules for memory pages every canister is metered by (the offline engine's
    /// `METERING.md` §10); default: those of PocketIC 13, which this server's protocol follows.
    pub metering: Metering,
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> ServerError {
    let what = what.into();
    move |source| ServerError::Io { what, source }
}

fn remove_port_file(path: &Option<PathBuf>) {
    if let Some(p) = path {
        // Already gone is fine: the port file only tells clients where to connect.
        let _ = std::fs::remove_file(p);
    }
}

async fn shutdown_signal(state: AppState, ttl: Option<Duration>) {
    let idle = async {
        let Some(ttl) = ttl else {
            return std::future::pending::<()>().await;
        };
        loop {
            tokio::time::sleep(Duration::from_millis(250)).await;
            if state.activity.idle_for().is_some_and(|d| d > ttl) {
                eprintln!(
                    "{}: no request for {} s, shutting down",
                    crate::SERVER_NAME,
                    ttl.as_secs()
                );
                return;
            }
        }
    };
    let interrupted = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminated = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminated = std::future::pending::<()>();
    tokio::select! {
        () = idle => {}
        () = interrupted => {}
        () = terminated => {}
    }
}

/// The instance `--replica` creates: one application subnet with production instruction
/// limits and the normal cost schedule (canisters pay the IC's fees).
pub fn replica_config() -> pocket_ic::common::rest::InstanceConfig {
    use pocket_ic::common::rest::{ExtendedSubnetConfigSet, InstanceConfig, SubnetSpec};
    InstanceConfig {
        subnet_config_set: ExtendedSubnetConfigSet {
            application: vec![SubnetSpec::default()],
            ..Default::default()
        },
        ..Default::default()
    }
}

/// The port of a server started with `port_file`, once it has written it (polled every 20 ms,
/// for at most `timeout`).
pub fn wait_for_port(port_file: &std::path::Path, timeout: Duration) -> Result<u16, String> {
    let started = std::time::Instant::now();
    loop {
        if let Ok(text) = std::fs::read_to_string(port_file)
            && let Some(line) = text.strip_suffix('\n')
        {
            return line
                .parse()
                .map_err(|e| format!("port file {}: {line:?}: {e}", port_file.display()));
        }
        if started.elapsed() > timeout {
            return Err(format!(
                "the server did not write its port file {} within {timeout:?}",
                port_file.display()
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Serves PocketIC's REST protocol from a thread of this process, on a free local port, with
/// canister output muted and a TTL of 600 s (the tests' server: it ends with the process);
/// returns its port once it listens (within 60 s). `name` keeps the port files of servers that
/// start at once apart.
pub fn serve_in_thread(name: &str) -> Result<u16, String> {
    static SERVERS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let port_file = std::env::temp_dir().join(format!(
        "{name}_{}_{}.port",
        std::process::id(),
        SERVERS.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    ));
    let _ = std::fs::remove_file(&port_file);
    let config = ServerConfig {
        ip_addr: "127.0.0.1".into(),
        port: 0,
        port_file: Some(port_file.clone()),
        ttl: Duration::from_secs(600),
        hard_ttl: None,
        mute_canister_output: true,
    };
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Runtime::new().expect("a tokio runtime");
        runtime.block_on(serve(config)).expect("the server runs");
    });
    let port = wait_for_port(&port_file, Duration::from_secs(60));
    let _ = std::fs::remove_file(&port_file);
    port
}

/// Runs the server until its TTL, a signal or its hard TTL ends it. Returns at once (without
/// serving) if the port file already exists.
pub async fn serve(config: ServerConfig) -> Result<(), ServerError> {
    serve_with(config, ServeOptions::default()).await
}

/// [`serve`] with the options beyond PocketIC's REST protocol.
pub async fn serve_with(config: ServerConfig, options: ServeOptions) -> Result<(), ServerError> {
    let port_file = match &config.port_file {
        Some(path) => match File::options().write(true).create_new(true).open(path) {
            Ok(f) => Some(f),
            // A server for this client is running already.
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => return Ok(()),
            Err(e) => return Err(io(format!("creating {}", path.display()))(e)),
        },
        None => None,
    };
    let addr = format!("{}:{}", config.ip_addr, config.port);
    let listener = match tokio::net::TcpListener::bind(&addr).await {
        Ok(l) => l,
        Err(e) => {
            remove_port_file(&config.port_file);
            return Err(io(format!("binding {addr}"))(e));
        }
    };
    let port = listener
        .local_addr()
        .map_err(io("reading the bound address"))?
        .port();
    let engine = Engine::new(EngineConfig {
        metering: options.metering,
        ..EngineConfig::default()
    })?;
    let state = Shared::new(Arc::new(Programs::new(engine)), config.mute_canister_output);
    state
        .test_hooks
        .store(options.test_hooks, std::sync::atomic::Ordering::SeqCst);
    state
        .log_requests
        .store(options.log_requests, std::sync::atomic::Ordering::SeqCst);
    if options.replica {
        let (id, _) = state.create_instance(&replica_config())?;
        state.set_replica_instance(id);
        let http = state.http(id)?;
        // Live first: its first round brings the time to the wall clock; the blocks follow.
        http.set_live(true);
        http.set_block_interval(options.block_interval);
    }
    if let Some(mut f) = port_file {
        f.write_all(format!("{port}\n").as_bytes())
            .and_then(|()| f.flush())
            .map_err(io("writing the port file"))?;
    }
    eprintln!(
        "{}: listening on {}:{port}",
        crate::identity(),
        config.ip_addr
    );
    if options.replica {
        // The one line a script waits for: where agents and icp-cli connect.
        println!(
            "{}: replica at http://{}:{port}/ (instance 0, live)",
            crate::SERVER_NAME,
            config.ip_addr
        );
    }
    if let Some(hard_ttl) = config.hard_ttl {
        let port_file = config.port_file.clone();
        tokio::spawn(async move {
            tokio::time::sleep(hard_ttl).await;
            eprintln!(
                "{}: hard TTL of {} s reached, exiting",
                crate::SERVER_NAME,
                hard_ttl.as_secs()
            );
            remove_port_file(&port_file);
            std::process::exit(0);
        });
    }
    let served = axum::serve(listener, router(state.clone()))
        .with_graceful_shutdown(shutdown_signal(
            state,
            (!options.no_idle_shutdown).then_some(config.ttl),
        ))
        .await;
    remove_port_file(&config.port_file);
    served.map_err(io("serving HTTP"))
}
