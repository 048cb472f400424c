//! The message-level runs through the `pocket-ic` client against `offline-pocket-ic` (served
//! in-process, the server binary's code): every op of every mode commits, and the cycles the
//! server charged the canister, the ingress messages and their bytes equal the in-process run
//! of the same mode and N under the fee model. Build the deployable wasm first
//! (`scripts/build.sh`).

use bench_suite::engine_runs;
use bench_suite::fees::IC_2025;
use bench_suite::message_bench::{Mode, summarize};
use bench_suite::pocket_ic_runs::{self, Runtime, Server};
use bench_suite::progress::Progress;
use pocket_ic_server::server::serve_in_thread;

const N: usize = 10;

/// Serves `offline-pocket-ic` on a free port in a background thread (it ends with the test
/// process) and returns its URL.
fn offline_server() -> url::Url {
    let port = serve_in_thread("bench_suite_pocket_ic_messages").expect("the server listens");
    url::Url::parse(&format!("http://127.0.0.1:{port}/")).expect("a URL")
}

/// The runtime label comes from the server's own `/status`, not from what the caller claims or
/// the binary is called.
#[test]
fn the_offline_server_says_what_it_is_on_its_status() {
    let server = Server::running(offline_server(), Runtime::PocketIc);
    assert_eq!(
        server.probe_runtime().expect("GET /status"),
        Runtime::Offline
    );
}

#[test]
fn the_pocket_ic_path_on_the_offline_server_equals_the_in_process_runs() {
    let server = Server::running(offline_server(), Runtime::Offline);
    let wasm_path = bench_suite::client::default_wasm_path();
    let wasm = std::fs::read(&wasm_path)
        .unwrap_or_else(|e| panic!("{}: {e}; run scripts/build.sh", wasm_path.display()));
    let engine = engine_runs::engine().unwrap();
    let program = engine.load(&wasm).unwrap();
    let mut progress = Progress::quiet();
    for mode in Mode::ALL {
        let via_client = pocket_ic_runs::run_mode(&server, &wasm, mode, N, &mut progress)
            .unwrap_or_else(|e| panic!("{}: {e:#}", mode.label()));
        let local = engine_runs::run_mode(&engine, &program, mode, N).unwrap();
        let summary = summarize(&IC_2025, &local);
        let label = mode.label();
        assert_eq!(via_client.n, N as u64, "{label}");
        assert_eq!(via_client.committed, N as u64, "{label}");
        assert_eq!(via_client.committed, local.committed, "{label}");
        assert_eq!(
            via_client.ingress_messages, summary.ingress_messages,
            "{label}"
        );
        assert_eq!(via_client.ingress_bytes, summary.ingress_bytes, "{label}");
        assert_eq!(
            via_client.cycles,
            pocket_ic_runs::expected_cycles(&IC_2025, &local),
            "{label}: cycles charged by offline-pocket-ic vs the in-process fee model"
        );
        // The fee model's 13-node column is the same figure.
        assert_eq!(via_client.cycles, summary.cycles[0], "{label}");
        if mode == Mode::SubmitAndTimer {
            assert!(via_client.ticks > 0, "the timer flush took ticks");
        }
    }
}
