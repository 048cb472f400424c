//! `bench-suite messages`: the message-level runs through the pocket-ic client beside the
//! in-process runs of the same modes; against offline-pocket-ic, fails when the cycles charged
//! differ from the in-process fee model.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};

use crate::engine_runs;
use crate::message_bench::{MessageKind, Mode};
use crate::pocket_ic_runs::{self, Row, Runtime, Server};
use crate::progress::Progress;

/// The `messages` runtimes.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum RuntimeArg {
    /// offline-pocket-ic (the offline engine behind PocketIC's REST protocol).
    Offline,
    /// A real PocketIC server (POCKET_IC_BIN).
    Pocketic,
}

/// Runs every mode at each of `ns` ops through the server of `runtime` (`server` for the
/// offline one) and in process, on the wasm at `wasm_path`, and prints the table.
pub fn run(
    runtime: RuntimeArg,
    ns: &[usize],
    wasm_path: &Path,
    server: &Path,
    progress: &mut Progress,
) -> Result<ExitCode> {
    // The client starts the server with this process's stdout and stderr unless muted; muted,
    // a pipe reading this process's output ends when it does, not at the server's TTL.
    if std::env::var_os("POCKET_IC_MUTE_SERVER").is_none() {
        // SAFETY: no other thread runs yet (the engine and the client start theirs below).
        unsafe { std::env::set_var("POCKET_IC_MUTE_SERVER", "1") };
    }
    let binary = match runtime {
        RuntimeArg::Offline => server.to_path_buf(),
        RuntimeArg::Pocketic => PathBuf::from(std::env::var_os("POCKET_IC_BIN").context(
            "--runtime pocketic: set POCKET_IC_BIN to the PocketIC server binary (pocket-ic 13 protocol)",
        )?),
    };
    let server = Server::at(&binary)?;
    let wasm = std::fs::read(wasm_path).with_context(|| {
        format!(
            "{}: build it first with `scripts/build.sh`",
            wasm_path.display()
        )
    })?;
    progress.step(&format!(
        "bench-suite messages: {} through the pocket-ic client (engine: {}), N = {ns:?}",
        binary.display(),
        server.runtime.label()
    ));
    let engine = engine_runs::engine()?;
    let program = engine_runs::load(&engine, wasm_path, "scripts/build.sh")?;
    let mut rows = Vec::new();
    for &n in ns {
        for mode in Mode::ALL {
            let run = pocket_ic_runs::run_mode(&server, &wasm, mode, n, progress)?;
            progress.step(&format!(
                "{} N={n}: {} cycles through the client; in-process run",
                mode.label(),
                run.cycles
            ));
            let local = engine_runs::run_mode(&engine, &program, mode, n)?;
            let model = pocket_ic_runs::expected_cycles(&crate::fees::IC_2025, &local);
            let ingress = local
                .messages
                .iter()
                .filter(|m| matches!(m.kind, MessageKind::Ingress { .. }))
                .count() as u64;
            rows.push(Row {
                run,
                in_process: Some((model, ingress)),
            });
        }
    }
    println!("{}", pocket_ic_runs::render_table(server.runtime, &rows));
    let differs = rows.iter().any(|r| {
        r.in_process
            .is_some_and(|(c, ingress)| c != r.run.cycles || ingress != r.run.ingress_messages)
    });
    match (server.runtime, differs) {
        (Runtime::Offline, true) => {
            println!(
                "FAILED: offline-pocket-ic charged other cycles (or counted other ingress messages) than the in-process fee model of the same runs."
            );
            Ok(ExitCode::from(1))
        }
        (Runtime::Offline, false) => {
            println!(
                "OK: offline-pocket-ic charged exactly the in-process fee model's cycles for every run."
            );
            Ok(ExitCode::SUCCESS)
        }
        (Runtime::PocketIc, _) => {
            println!(
                "The differences are PocketIC's charges against the offline engine's fee model \
                 (its instruction counts, and fees the engine does not charge, such as storage)."
            );
            Ok(ExitCode::SUCCESS)
        }
    }
}
