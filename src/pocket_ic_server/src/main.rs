//! `offline-pocket-ic`: serves PocketIC's REST protocol over the offline engine.
//!
//! Point `POCKET_IC_BIN` (the `pocket-ic` client) or `canbench --runtime-path ...
//! --no-runtime-integrity-check` at this binary. The client starts it with `--port-file` and the
//! TTLs; `--version` prints only the line the client's version check requires. With
//! `--replica` it serves one live instance at the root `/api/...` as a replica for agents and
//! icp-cli, and prints its URL.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use offline_engine::Metering;
use pocket_ic_server::server::{ServeOptions, ServerConfig, serve_with};

/// Serves PocketIC's REST protocol (pocket-ic 13 client, canbench 0.7) and runs every canister on
/// the offline engine: wasmtime with the IC's instruction metering, no replica.
#[derive(Parser)]
#[command(name = "offline-pocket-ic", disable_version_flag = true)]
struct Args {
    /// Print the version line the pocket-ic client checks (`pocket-ic-server 13.0.0`) and exit.
    #[arg(long)]
    version: bool,
    /// Address to bind.
    #[arg(long, short, default_value = "127.0.0.1")]
    ip_addr: String,
    /// Port to listen on (0: any free port).
    #[arg(long, short, default_value_t = 0)]
    port: u16,
    /// File to write the port to (created atomically; if it exists, exit at once).
    #[arg(long)]
    port_file: Option<PathBuf>,
    /// Shut down after this many seconds without requests (default 60; with `--replica`, never).
    #[arg(long)]
    ttl: Option<u64>,
    /// Exit this many seconds after launch, whatever is running.
    #[arg(long)]
    hard_ttl: Option<u64>,
    /// Accepted for compatibility with PocketIC's command line; this server has no log levels.
    #[arg(long, short)]
    log_levels: Option<String>,
    /// Do not print canisters' debug_print output.
    #[arg(long)]
    mute_canister_output: bool,
    /// Serve as a replica for agents: create one live instance (one application subnet, the
    /// normal cost schedule) whose IC HTTP interface is served at the root (`/api/...`), and
    /// print its URL.
    #[arg(long)]
    replica: bool,
    /// Serve the fault-injection test hooks under `/test_hooks/...` (drop or delay call
    /// answers, stop a canister). Off by default: they are not part of the IC's protocol.
    #[arg(long)]
    test_hooks: bool,
    /// Print every request (method, path, HTTP status, duration) to stderr.
    #[arg(long)]
    log_requests: bool,
    /// With `--replica`: run one round (one block of at most 1,000 ingress messages and
    /// 4 MiB, the IC's block limits) every this many milliseconds and no other; ingress that
    /// does not fit waits for the next block. Without it a round runs whenever a call arrives.
    #[arg(long, requires = "replica")]
    block_interval_ms: Option<u64>,
    /// The rules for memory pages every canister is metered by (the offline engine's
    /// METERING.md §10): `pocketic-13` (what PocketIC 13 and canbench 0.7.0 run) or
    /// `ic-dmt-0441fbd7` (dfinity/ic with the deterministic memory tracker). canbench starts this
    /// binary with arguments of its own: set the variable to choose.
    #[arg(long, env = "OFFLINE_ENGINE_METERING", default_value = "pocketic-13")]
    metering: Metering,
}

fn main() -> ExitCode {
    let args = Args::parse();
    if args.version {
        println!("{}", pocket_ic_server::VERSION_LINE);
        return ExitCode::SUCCESS;
    }
    let config = ServerConfig {
        ip_addr: args.ip_addr,
        port: args.port,
        port_file: args.port_file,
        ttl: Duration::from_secs(args.ttl.unwrap_or(60)),
        hard_ttl: args.hard_ttl.map(Duration::from_secs),
        mute_canister_output: args.mute_canister_output,
    };
    let options = ServeOptions {
        replica: args.replica,
        test_hooks: args.test_hooks,
        log_requests: args.log_requests,
        // A replica serves until stopped, unless a TTL is asked for.
        no_idle_shutdown: args.replica && args.ttl.is_none(),
        block_interval: args.block_interval_ms.map(Duration::from_millis),
        metering: args.metering,
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!(
                "{}: cannot start the async runtime: {e}",
                pocket_ic_server::SERVER_NAME
            );
            return ExitCode::from(2);
        }
    };
    match runtime.block_on(serve_with(config, options)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{}: {e}", pocket_ic_server::SERVER_NAME);
            ExitCode::from(2)
        }
    }
}
