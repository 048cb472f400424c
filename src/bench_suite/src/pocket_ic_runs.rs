//! Message-level runs through the `pocket-ic` 13 client: the three modes of
//! [`crate::engine_runs::run_mode`] (unbatched, submit + timer flush, client batch) on the
//! deployable wasm with the same fixture, driven only through what a real PocketIC exposes
//! (install, update calls, queries, time, ticks, cycle balances). The same code runs against
//! `offline-pocket-ic` (the offline engine behind PocketIC's REST protocol) and against a real
//! PocketIC server; every figure carries the label of the runtime it came from.
//!
//! Per mode it measures the cycles the canister's balance lost while the mode's messages ran
//! (execution, ingress reception and call fees, as the runtime charges them), the ingress
//! messages sent and their billed bytes, the ticks needed, and the rows committed (checked
//! against the replies, `stats` and `counts`). Instructions are not observable through the
//! client; on `offline-pocket-ic` the cycles equal the in-process fee model of the same run
//! ([`expected_cycles`]), which `tests/pocket_ic_messages.rs` asserts.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail, ensure};
use bench_api::{BatchResult, Counts, CountsResult, Outcome, Stats, WriteResult};
use candid::{CandidType, Decode, Deserialize, Encode, Principal};
use offline_engine::{Charging, Settings};
use pocket_ic::{PocketIc, PocketIcBuilder, Time};

use crate::engine_runs::{
    MAX_DELAY_MS, batch_ops, fixture_batches, fixture_indexes, mode_init_args, order,
};
use crate::fees::{FeeSchedule, ingress_bytes};
use crate::message_bench::{Mode, ModeRun, message_cycles};
use crate::progress::Progress;

/// Label of figures measured through `offline-pocket-ic`.
pub const OFFLINE_LABEL: &str = offline_engine::canbench::ENGINE_LABEL;
/// Label of figures measured through a real PocketIC server.
pub const POCKET_IC_LABEL: &str = "PocketIC (pocket-ic client)";
/// The file name of the offline server binary (`cargo build --release -p pocket_ic_server`).
pub const OFFLINE_BINARY_NAME: &str = "offline-pocket-ic";
/// Where `cargo build --release -p pocket_ic_server` writes the offline server, from the
/// workspace root.
pub const OFFLINE_BINARY: &str = "target/release/offline-pocket-ic";

/// Ticks a submit + timer run may take to drain its queue before it fails.
const MAX_FLUSH_ROUNDS: u64 = 100;
/// Ticks after the queue is empty, so the flush's self-call answer and callback have run on a
/// runtime that spreads them over rounds (no time passes, so no timer fires in them).
const SETTLE_TICKS: u64 = 3;

/// Which server the client talks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Runtime {
    /// `offline-pocket-ic`: the offline engine behind PocketIC's REST protocol.
    Offline,
    /// A real PocketIC server.
    PocketIc,
}

impl Runtime {
    /// The label every figure of this runtime carries.
    pub fn label(self) -> &'static str {
        match self {
            Runtime::Offline => OFFLINE_LABEL,
            Runtime::PocketIc => POCKET_IC_LABEL,
        }
    }

    /// The runtime a server is, told by the body of its own `GET /status`: `offline-pocket-ic`
    /// names itself and the offline engine there (`pocket_ic_server::identity`); any other
    /// server (PocketIC answers an empty body) is PocketIC. A renamed binary is still what it is.
    pub fn of_status(body: &str) -> Runtime {
        if body.starts_with(OFFLINE_BINARY_NAME)
            && body.contains(&format!("engine: {OFFLINE_LABEL}"))
        {
            Runtime::Offline
        } else {
            Runtime::PocketIc
        }
    }
}

/// The server the `pocket-ic` client talks to: a binary it starts (as it starts
/// `POCKET_IC_BIN`), or one already running at a URL.
#[derive(Debug, Clone)]
pub struct Server {
    /// The binary the client starts, if no `url`.
    pub binary: PathBuf,
    /// A running server (tests serve `offline-pocket-ic` in-process).
    pub url: Option<url::Url>,
    /// What it is.
    pub runtime: Runtime,
}

impl Server {
    /// The server at `binary`, its runtime told by its own `/status` ([`Server::probe_runtime`]).
    /// Fails if it does not exist (the client would otherwise download a PocketIC) or does not
    /// answer.
    pub fn at(binary: &Path) -> Result<Server> {
        ensure!(
            binary.is_file(),
            "{} does not exist (offline-pocket-ic: `cargo build --release -p pocket_ic_server`; \
             PocketIC: point POCKET_IC_BIN at its server binary)",
            binary.display()
        );
        let mut server = Server {
            binary: binary.to_path_buf(),
            url: None,
            runtime: Runtime::PocketIc,
        };
        server.runtime = server.probe_runtime()?;
        Ok(server)
    }

    /// Asks the server what it is: creates an instance through the client (which starts the
    /// binary if needed), reads `GET /status` at the client's server URL, and classifies the
    /// body with [`Runtime::of_status`].
    pub fn probe_runtime(&self) -> Result<Runtime> {
        let pic = self.instance();
        let url = pic
            .get_server_url()
            .join("status")
            .context("the server's /status URL")?;
        drop(pic);
        let response = reqwest::blocking::get(url.clone())
            .with_context(|| format!("GET {url}"))?
            .error_for_status()
            .with_context(|| format!("GET {url}"))?;
        let body = response.text().with_context(|| format!("GET {url}"))?;
        Ok(Runtime::of_status(&body))
    }

    /// The server running at `url`, of `runtime`.
    pub fn running(url: url::Url, runtime: Runtime) -> Server {
        Server {
            binary: PathBuf::new(),
            url: Some(url),
            runtime,
        }
    }

    /// A new instance with one application subnet (no request time limit: the fixture's
    /// batches run long).
    pub fn instance(&self) -> PocketIc {
        let builder = match &self.url {
            Some(url) => PocketIcBuilder::new().with_server_url(url.clone()),
            None => PocketIcBuilder::new().with_server_binary(self.binary.clone()),
        };
        builder
            .with_max_request_time_ms(None)
            .with_application_subnet()
            .build()
    }
}

/// What one mode cost through the client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PocketIcModeRun {
    /// The mode.
    pub mode: Mode,
    /// Ops sent.
    pub n: u64,
    /// Ops committed (replies, `stats` and the `orders` row count agree).
    pub committed: u64,
    /// Ingress update calls sent.
    pub ingress_messages: u64,
    /// Their billed bytes (argument + method name + nonce).
    pub ingress_bytes: u64,
    /// Ticks after the ingress calls (the timer flush's rounds).
    pub ticks: u64,
    /// Cycles the canister's balance lost from the first call of the mode to the last tick.
    pub cycles: u128,
}

impl PocketIcModeRun {
    /// Cycles per op.
    pub fn cycles_per_op(&self) -> u128 {
        self.cycles / u128::from(self.n.max(1))
    }
}

/// Cycles the in-process fee model gives `run` (an [`crate::engine_runs::run_mode`] run) on the
/// subnet the runtimes charge for: PocketIC's 13-node application subnet.
pub fn expected_cycles(fees: &FeeSchedule, run: &ModeRun) -> u128 {
    run.messages
        .iter()
        .map(|m| message_cycles(fees, m, Charging::APPLICATION.subnet_nodes))
        .sum()
}

fn update(pic: &PocketIc, id: Principal, method: &str, arg: Vec<u8>) -> Result<Vec<u8>> {
    pic.update_call(id, Principal::anonymous(), method, arg)
        .map_err(|e| anyhow!("{method}: {e}"))
}

fn query<R: CandidType + for<'de> Deserialize<'de>>(
    pic: &PocketIc,
    id: Principal,
    method: &str,
) -> Result<R> {
    let bytes = pic
        .query_call(id, Principal::anonymous(), method, Encode!()?)
        .map_err(|e| anyhow!("{method}: {e}"))?;
    Ok(candid::decode_one(&bytes)?)
}

fn counts(pic: &PocketIc, id: Principal) -> Result<Counts> {
    Result::from(query::<CountsResult>(pic, id, "counts")?).map_err(|e| anyhow!("counts: {e}"))
}

/// Creates a canister (controller: the anonymous principal, the caller of every call, as the
/// in-process runs' engine default), gives it the engine's default balance, installs the wasm
/// with `mode`'s install argument and builds the fixture with the in-process runs' batches.
/// The instance's time is moved to the engine's default start when it is earlier.
fn install_with_fixture(pic: &PocketIc, wasm: &[u8], mode: Mode, n: usize) -> Result<Principal> {
    let start = Settings::default().time_ns;
    if pic.get_time().as_nanos_since_unix_epoch() < start {
        pic.set_time(Time::from_nanos_since_unix_epoch(start));
    }
    let id = pic.create_canister();
    pic.add_cycles(id, Settings::default().cycles);
    let arg = Encode!(&Some(mode_init_args(mode, n)))?;
    pic.install_canister(id, wasm.to_vec(), arg, None);
    for ops in fixture_batches() {
        let reply = update(pic, id, "execute_batch", Encode!(&ops)?)?;
        let outcomes = Result::from(Decode!(&reply, BatchResult)?)
            .map_err(|e| anyhow!("fixture execute_batch: {e:?}"))?;
        crate::engine_runs::ensure_all_committed("fixture execute_batch", &outcomes, ops.len())?;
    }
    let reply = update(pic, id, "execute_sql", Encode!(&fixture_indexes())?)?;
    Result::from(Decode!(&reply, WriteResult)?).map_err(|e| anyhow!("fixture indexes: {e:?}"))?;
    Ok(id)
}

/// Runs `mode` with `n` ops on a fresh instance of `server` and returns its figures.
pub fn run_mode(
    server: &Server,
    wasm: &[u8],
    mode: Mode,
    n: usize,
    progress: &mut Progress,
) -> Result<PocketIcModeRun> {
    let pic = server.instance();
    progress.step(&format!(
        "{} N={n}: installing and building the fixture",
        mode.label()
    ));
    let id = install_with_fixture(&pic, wasm, mode, n)?;
    let rows_before = counts(&pic, id)?;
    let before = pic.cycle_balance(id);
    let mut ingress_messages = 0u64;
    let mut billed_bytes = 0u64;
    let mut send = |method: &str, arg: Vec<u8>| -> Result<Vec<u8>> {
        ingress_messages += 1;
        billed_bytes += ingress_bytes(arg.len(), method);
        update(&pic, id, method, arg)
    };
    let mut ticks = 0u64;
    let committed = match mode {
        Mode::Unbatched => {
            for i in 0..n {
                let (user_id, amount) = order(i);
                let reply = send("create_order", Encode!(&user_id, &amount)?)?;
                let out = Decode!(&reply, WriteResult)?;
                ensure!(
                    matches!(out, WriteResult::Ok(Outcome::Committed { .. })),
                    "create_order {i}: {out:?}"
                );
            }
            n as u64
        }
        Mode::SubmitAndTimer => {
            for i in 0..n {
                let (user_id, amount) = order(i);
                let reply = send("submit_create_order", Encode!(&user_id, &amount)?)?;
                let submitted = Decode!(&reply, bench_api::SubmitResult)?;
                ensure!(
                    matches!(submitted, bench_api::SubmitResult::Ok(_)),
                    "submit_create_order {i}: {submitted:?}"
                );
            }
            progress.step(&format!(
                "{} N={n}: advancing time for the timer flush",
                mode.label()
            ));
            let mut stats: Stats = query(&pic, id, "stats")?;
            while stats.pending > 0 {
                if ticks == MAX_FLUSH_ROUNDS {
                    bail!("the timer did not flush the queue: {stats:?}");
                }
                pic.advance_time(Duration::from_nanos(MAX_DELAY_MS * 1_000_000 + 1));
                pic.tick();
                ticks += 1;
                stats = query(&pic, id, "stats")?;
            }
            for _ in 0..SETTLE_TICKS {
                pic.tick();
                ticks += 1;
            }
            ensure!(
                stats.committed == n as u64,
                "{} of {n} ops committed: {stats:?}",
                stats.committed
            );
            stats.committed
        }
        Mode::ClientBatch => {
            let reply = send("execute_batch", Encode!(&batch_ops(n))?)?;
            let outcomes = Result::from(Decode!(&reply, BatchResult)?)
                .map_err(|e| anyhow!("execute_batch: {e:?}"))?;
            crate::engine_runs::ensure_all_committed("execute_batch", &outcomes, n)?;
            n as u64
        }
        Mode::ClientBatchPacked => {
            let reply = send("execute_batch_packed", crate::engine_runs::packed_arg(n)?)?;
            let outcomes = crate::engine_runs::packed_outcomes(&reply, n)?;
            crate::engine_runs::ensure_all_committed("execute_batch_packed", &outcomes, n)?;
            n as u64
        }
    };
    let after = pic.cycle_balance(id);
    let rows_after = counts(&pic, id)?;
    ensure!(
        rows_after.users == rows_before.users
            && rows_after.orders == rows_before.orders + committed,
        "rows: {rows_before:?} before, {rows_after:?} after {committed} committed orders"
    );
    let cycles = before
        .checked_sub(after)
        .with_context(|| format!("the balance grew from {before} to {after}"))?;
    Ok(PocketIcModeRun {
        mode,
        n: n as u64,
        committed,
        ingress_messages,
        ingress_bytes: billed_bytes,
        ticks,
        cycles,
    })
}

/// One row of the `messages` table: a run through the client and, when it was made, the
/// in-process run of the same mode and N.
#[derive(Debug, Clone)]
pub struct Row {
    /// Through the client.
    pub run: PocketIcModeRun,
    /// The in-process run's fee model ([`expected_cycles`]) and its ingress messages.
    pub in_process: Option<(u128, u64)>,
}

/// The Markdown table of `rows`, labelled with the runtime they came from.
pub fn render_table(runtime: Runtime, rows: &[Row]) -> String {
    let mut out = format!(
        "Message-level runs through the pocket-ic client (engine: {}); cycles are the canister's \
         balance before minus after, on a 13-node application subnet; the in-process column is \
         the fee model of the same run on the embedded engine (engine: {OFFLINE_LABEL}).\n\n",
        runtime.label()
    );
    out.push_str(
        "| mode | N | committed | ingress messages | ingress bytes | ticks | cycles | cycles / op | in-process fee model | difference |\n",
    );
    out.push_str("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for r in rows {
        let (model, diff) = match r.in_process {
            Some((cycles, _)) => (
                cycles.to_string(),
                (r.run.cycles as i128 - cycles as i128).to_string(),
            ),
            None => ("–".into(), "–".into()),
        };
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {model} | {diff} |\n",
            r.run.mode.label(),
            r.run.n,
            r.run.committed,
            r.run.ingress_messages,
            r.run.ingress_bytes,
            r.run.ticks,
            r.run.cycles,
            r.run.cycles_per_op(),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_runtime_is_told_by_the_server_s_status() {
        let offline = "offline-pocket-ic 0.1.0 (engine: offline (wasmtime, IC metering); PocketIC REST protocol of pocket-ic 13.0.0)";
        assert_eq!(Runtime::of_status(offline), Runtime::Offline);
        // PocketIC's own server answers an empty body; a body that merely mentions the engine
        // without naming the server is not taken for it.
        assert_eq!(Runtime::of_status(""), Runtime::PocketIc);
        assert_eq!(
            Runtime::of_status("pocket-ic-server (engine: offline (wasmtime, IC metering))"),
            Runtime::PocketIc
        );
        assert_eq!(Runtime::Offline.label(), "offline (wasmtime, IC metering)");
        assert_eq!(Runtime::PocketIc.label(), "PocketIC (pocket-ic client)");
    }

    #[test]
    fn the_table_shows_the_difference_to_the_model() {
        let run = PocketIcModeRun {
            mode: Mode::ClientBatch,
            n: 10,
            committed: 10,
            ingress_messages: 1,
            ingress_bytes: 300,
            ticks: 0,
            cycles: 1_000,
        };
        let t = render_table(
            Runtime::Offline,
            &[Row {
                run,
                in_process: Some((1_000, 1)),
            }],
        );
        assert!(t.contains("engine: offline (wasmtime, IC metering)"));
        assert!(t.contains("| client batch | 10 | 10 | 1 | 300 | 0 | 1000 | 100 | 1000 | 0 |"));
    }
}
