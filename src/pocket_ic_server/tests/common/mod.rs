//! Helpers of the client tests: instances of the server through the `pocket-ic` client, a WAT
//! canister exercising the message semantics, raw HTTP for endpoints the client does not reach.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use pocket_ic::{PocketIc, PocketIcBuilder};

/// The server binary under test.
pub fn server_binary() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_offline-pocket-ic"))
}

/// The URL of one server for this test process, started as the `pocket-ic` client starts it
/// (`--port-file`, then the port and a newline in it) but with its output discarded, so the
/// test process does not wait for the server's TTL to close inherited pipes. `tests/spawn.rs`
/// lets the client start the server itself.
pub fn server_url() -> url::Url {
    static URL: OnceLock<url::Url> = OnceLock::new();
    URL.get_or_init(|| start_server("default", &[])).clone()
}

/// The URL of a second server, started as [`server_url`]'s but with the variable canbench users
/// set to meter by the deterministic memory tracker (`OFFLINE_ENGINE_METERING`).
pub fn tracker_server_url() -> url::Url {
    static URL: OnceLock<url::Url> = OnceLock::new();
    URL.get_or_init(|| start_server("tracker", &[("OFFLINE_ENGINE_METERING", "ic-dmt-0441fbd7")]))
        .clone()
}

fn start_server(name: &str, env: &[(&str, &str)]) -> url::Url {
    let port_file = std::env::temp_dir().join(format!(
        "offline_pocket_ic_test_{}_{name}.port",
        std::process::id()
    ));
    let _ = std::fs::remove_file(&port_file);
    // The server outlives this process, as the pocket-ic client leaves the servers it
    // starts; its TTL ends it.
    #[allow(clippy::zombie_processes)]
    Command::new(server_binary())
        .arg("--port-file")
        .arg(&port_file)
        .args(["--ttl", "30"])
        .envs(env.iter().copied())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("starts the server");
    let port = wait_for_port(&port_file);
    url::Url::parse(&format!("http://127.0.0.1:{port}/")).expect("a URL")
}

/// The port a server started with `--port-file port_file` listens on, once it has written the
/// file (within 60 s).
fn wait_for_port(port_file: &std::path::Path) -> u16 {
    pocket_ic_server::server::wait_for_port(port_file, Duration::from_secs(60))
        .unwrap_or_else(|e| panic!("{e}"))
}

/// An instance with one application subnet (benchmarking limits if `benchmarking`).
pub fn instance(benchmarking: bool) -> PocketIc {
    let builder = builder();
    if benchmarking {
        builder.with_benchmarking_application_subnet().build()
    } else {
        builder.with_application_subnet().build()
    }
}

/// A client builder for the test process's server.
pub fn builder() -> PocketIcBuilder {
    PocketIcBuilder::new().with_server_url(server_url())
}

/// A canister for the client tests. Heap word 0 is a counter (`inc` increments it, and so does
/// the query `bump`, whose change is discarded), word 4 counts timer firings.
/// `canister_init` writes its argument's length (4 bytes) and bytes to stable memory at 0;
/// `canister_pre_upgrade` saves the counter to stable memory at 60000 and
/// `canister_post_upgrade` restores it.
pub const WAT: &str = r#"
(module
  (import "ic0" "msg_reply" (func $reply))
  (import "ic0" "msg_reply_data_append" (func $append (param i32 i32)))
  (import "ic0" "msg_reject" (func $reject (param i32 i32)))
  (import "ic0" "msg_arg_data_size" (func $arg_size (result i32)))
  (import "ic0" "msg_arg_data_copy" (func $arg_copy (param i32 i32 i32)))
  (import "ic0" "msg_caller_size" (func $caller_size (result i32)))
  (import "ic0" "msg_caller_copy" (func $caller_copy (param i32 i32 i32)))
  (import "ic0" "trap" (func $trap (param i32 i32)))
  (import "ic0" "time" (func $time (result i64)))
  (import "ic0" "global_timer_set" (func $timer_set (param i64) (result i64)))
  (import "ic0" "canister_cycle_balance128" (func $balance (param i32)))
  (import "ic0" "performance_counter" (func $perf (param i32) (result i64)))
  (import "ic0" "stable64_grow" (func $sgrow (param i64) (result i64)))
  (import "ic0" "stable64_write" (func $swrite (param i64 i64 i64)))
  (import "ic0" "stable64_read" (func $sread (param i64 i64 i64)))
  (import "ic0" "debug_print" (func $print (param i32 i32)))
  (memory 1)
  (data (i32.const 100) "boom")
  (data (i32.const 110) "no thanks")
  (data (i32.const 120) "timer fired")
  (func $reply_i32 (param $v i32)
    (i32.store (i32.const 1000) (local.get $v))
    (call $append (i32.const 1000) (i32.const 4))
    (call $reply))
  (func $reply_i64 (param $v i64)
    (i64.store (i32.const 1000) (local.get $v))
    (call $append (i32.const 1000) (i32.const 8))
    (call $reply))
  (func (export "canister_init")
    (drop (call $sgrow (i64.const 1)))
    (i32.store (i32.const 1000) (call $arg_size))
    (call $arg_copy (i32.const 1004) (i32.const 0) (call $arg_size))
    (call $swrite (i64.const 0) (i64.const 1000)
      (i64.extend_i32_u (i32.add (call $arg_size) (i32.const 4)))))
  (func (export "canister_pre_upgrade")
    (call $swrite (i64.const 60000) (i64.const 0) (i64.const 4)))
  (func (export "canister_post_upgrade")
    (call $sread (i64.const 0) (i64.const 60000) (i64.const 4)))
  (func (export "canister_update inc")
    (i32.store (i32.const 0) (i32.add (i32.load (i32.const 0)) (i32.const 1)))
    (call $reply_i32 (i32.load (i32.const 0))))
  (func (export "canister_query get") (call $reply_i32 (i32.load (i32.const 0))))
  (func (export "canister_query bump")
    (i32.store (i32.const 0) (i32.add (i32.load (i32.const 0)) (i32.const 1)))
    (call $reply_i32 (i32.load (i32.const 0))))
  (func (export "canister_query fired") (call $reply_i32 (i32.load (i32.const 4))))
  ;; argument: the delay in nanoseconds, 8 bytes little-endian
  (func (export "canister_update set_timer")
    (call $arg_copy (i32.const 1000) (i32.const 0) (i32.const 8))
    (drop (call $timer_set (i64.add (call $time) (i64.load (i32.const 1000)))))
    (call $reply))
  (func (export "canister_global_timer")
    (call $print (i32.const 120) (i32.const 11))
    (i32.store (i32.const 4) (i32.add (i32.load (i32.const 4)) (i32.const 1))))
  (func (export "canister_update boom")
    (i32.store (i32.const 0) (i32.const 999))
    (call $trap (i32.const 100) (i32.const 4)))
  (func (export "canister_update fail") unreachable)
  (func (export "canister_update refuse") (call $reject (i32.const 110) (i32.const 9)))
  (func (export "canister_update whoami")
    (call $caller_copy (i32.const 1000) (i32.const 0) (call $caller_size))
    (call $append (i32.const 1000) (call $caller_size))
    (call $reply))
  (func (export "canister_query time") (call $reply_i64 (call $time)))
  (func (export "canister_query balance")
    (call $balance (i32.const 1000))
    (call $append (i32.const 1000) (i32.const 16))
    (call $reply))
  ;; argument: an iteration count (4 bytes little-endian); replies performance_counter(0)
  (func (export "canister_update work")
    (local $i i32) (local $n i32)
    (call $arg_copy (i32.const 1000) (i32.const 0) (i32.const 4))
    (local.set $n (i32.load (i32.const 1000)))
    (loop $l
      (if (i32.lt_u (local.get $i) (local.get $n))
        (then (local.set $i (i32.add (local.get $i) (i32.const 1))) (br $l))))
    (call $reply_i64 (call $perf (i32.const 0))))
  ;; argument: a length n (4 bytes little-endian); replies the first n bytes of stable memory
  (func (export "canister_query stable")
    (call $arg_copy (i32.const 1000) (i32.const 0) (i32.const 4))
    (call $sread (i64.const 2000) (i64.const 0) (i64.extend_i32_u (i32.load (i32.const 1000))))
    (call $append (i32.const 2000) (i32.load (i32.const 1000)))
    (call $reply)))
"#;

/// The WAT canister as wasm.
pub fn wasm() -> Vec<u8> {
    wat::parse_str(WAT).expect("valid wat")
}

/// A raw HTTP/1.1 request to the server at `base` (`http://localhost:<port>/`, as
/// `PocketIc::get_server_url` prints); returns the status, the headers and the body.
pub fn http(base: &str, method: &str, path: &str, body: &[u8]) -> (u16, String, Vec<u8>) {
    let authority = base
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_string();
    let (host, port) = authority.rsplit_once(':').expect("host:port");
    let port: u16 = port.parse().expect("a port");
    let host = if host == "localhost" {
        "127.0.0.1"
    } else {
        host
    };
    let mut s = TcpStream::connect((host, port)).expect("connects to the server");
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).expect("writes");
    s.write_all(body).expect("writes");
    let mut response = Vec::new();
    s.read_to_end(&mut response).expect("reads");
    let split = response
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a header");
    let head = String::from_utf8_lossy(&response[..split]).to_string();
    let status: u16 = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .expect("a status");
    let mut body = response[split + 4..].to_vec();
    let head = head.to_ascii_lowercase();
    if head.contains("transfer-encoding: chunked") {
        body = dechunk(&body);
    }
    (status, head, body)
}

fn dechunk(mut data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let Some(eol) = data.windows(2).position(|w| w == b"\r\n") else {
            return out;
        };
        let size = usize::from_str_radix(String::from_utf8_lossy(&data[..eol]).trim(), 16)
            .expect("chunk size");
        if size == 0 {
            return out;
        }
        out.extend_from_slice(&data[eol + 2..eol + 2 + size]);
        data = &data[eol + 2 + size + 2..];
    }
}

/// A replica server (`--replica --test-hooks`, the IC HTTP interface at its root) of its own,
/// named `name` within this test process, with `extra` arguments; killed when dropped (and by
/// its TTL otherwise). The fault hooks act on the whole replica, so a test that sets them must
/// not share its replica with tests running beside it.
pub struct Replica {
    /// `http://127.0.0.1:<port>`.
    pub url: String,
    child: std::process::Child,
}

impl Drop for Replica {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts a [`Replica`] and waits for its port file.
pub fn spawn_replica(name: &str, extra: &[&str]) -> Replica {
    let port_file = std::env::temp_dir().join(format!(
        "offline_pocket_ic_replica_{}_{name}.port",
        std::process::id()
    ));
    let _ = std::fs::remove_file(&port_file);
    let child = Command::new(server_binary())
        .args([
            "--replica",
            "--test-hooks",
            "--mute-canister-output",
            "--ttl",
            "60",
        ])
        .args(extra)
        .arg("--port-file")
        .arg(&port_file)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("starts the server");
    let port = wait_for_port(&port_file);
    Replica {
        url: format!("http://127.0.0.1:{port}"),
        child,
    }
}
