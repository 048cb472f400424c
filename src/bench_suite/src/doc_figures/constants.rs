//! The values the docs quote that are not measured: each defined by a public source (the IC's
//! fee schedule and interface specification, the replica's source with file and commit, SQLite,
//! the WebAssembly specification) or by this repository's own configuration. Where the code holds
//! the value, `value` is the code's and a unit test holds the figure to it.

#[cfg(test)]
use batch_core::{
    DEFAULT_MAX_BYTES, DEFAULT_MAX_BYTES_PER_CALLER, DEFAULT_PERMITTED_DRIFT_NS, DEFAULT_WINDOW_NS,
};
use bench_api::{MAX_SINGLE_OP_ARG_BYTES, MAX_USERNAME_BYTES, MIN_FLUSH_BUDGET};
#[cfg(test)]
use ic_batch_client::{BatcherConfig, ENVELOPE_RESERVE_BYTES, IC_MAX_MESSAGE_BYTES};

/// The value the library's or the client's code holds, which only the unit test reads: their
/// crates are dev-dependencies, so that the suite's own build does not compile SQLite and the
/// client for a table of figures.
#[cfg(test)]
macro_rules! library {
    ($e:expr) => {
        $e
    };
}
#[cfg(not(test))]
macro_rules! library {
    ($e:expr) => {
        None
    };
}
use offline_engine::SubnetConfig;
use offline_engine::fees::{CYCLES_PER_XDR, IC_2025, NONCE_BYTES};
use offline_engine::metering::Metering;
use offline_engine::stable::{MAX_STABLE_WASM_PAGES, OS_PAGE, WASM_PAGE};
use offline_engine::system_api::MAX_CALL_TIMEOUT_SECONDS;
use offline_engine::system_api::complexity::overhead;
use offline_engine::types::SubnetKind;

/// One defined value as the docs write it.
#[derive(Debug, Clone, Copy)]
pub struct Constant {
    /// The figure as written (`2 MiB`, `5 M`); compared without the space before the unit.
    pub figure: &'static str,
    /// A figure is this constant when its paragraph (lowercased) contains one of these.
    pub about: &'static [&'static str],
    /// Where the value is defined.
    pub source: &'static str,
    /// The code's value in the figure's base unit (bytes, seconds, cycles, percent), if the code
    /// has it.
    pub value: Option<f64>,
}

const fn c(
    figure: &'static str,
    about: &'static [&'static str],
    source: &'static str,
    value: Option<f64>,
) -> Constant {
    Constant {
        figure,
        about,
        source,
        value,
    }
}

const FEES: &str =
    "IC fee schedule, offline_engine::fees::IC_2025 (rs/config/src/subnet_config.rs)";
const SUBNET: &str =
    "replica's rs/config/src/subnet_config.rs, offline_engine::SubnetConfig::APPLICATION";
const LIMITS: &str = "replica's rs/config/src/execution_environment.rs, offline_engine::types::SubnetKind::Application";
const SPEC: &str = "IC interface specification";
const EMBEDDERS: &str = "replica's rs/config/src/embedders.rs (src/offline_engine/METERING.md)";
const TRACKER: &str = "replica at 0441fbd7 (#10789, #11180), offline_engine::Metering::IC_DMT";
const POCKET_IC_13: &str = "replica of PocketIC 13.0.0, offline_engine::Metering::POCKET_IC_13";
const DEDUP: &str = "batch_core::dedup defaults (ICRC-1 deduplication window)";
const CLIENT: &str = "ic_batch_client::BatcherConfig::default";
const SETTINGS: &str = "ic_rusqlite_batch::settings";
const PAGE: &[&str] = &["page"];
const MESSAGE: &[&str] = &["message", "fee", "execut"];
const INGRESS: &[&str] = &["ingress", "receiv", "reception"];
const INSTRUCTION_LIMIT: &[&str] = &["limit", "update", "message", "install", "query"];
const REPLY_LIMIT: &[&str] = &[
    "reply", "replies", "message", "request", "argument", "payload", "ingress", "limit",
];

/// Every constant the docs quote.
pub fn table() -> Vec<Constant> {
    #[cfg(test)]
    let client = BatcherConfig::default();
    let dmt = Metering::IC_DMT.tracker.expect("the tracker's profile");
    let limits = SubnetKind::Application.limits();
    let subnet = SubnetConfig::APPLICATION;
    let f = |v: u128| Some(v as f64);
    let u = |v: u64| Some(v as f64);
    #[cfg(test)]
    let secs = |ns: u64| Some(ns as f64 / 1e9);
    vec![
        // The IC's fees (13 nodes).
        c(
            "5 M",
            MESSAGE,
            FEES,
            f(IC_2025.update_message_execution_fee),
        ),
        c(
            "5,000,000 cycles",
            MESSAGE,
            FEES,
            f(IC_2025.update_message_execution_fee),
        ),
        c(
            "1.2 M",
            INGRESS,
            FEES,
            f(IC_2025.ingress_message_reception_fee),
        ),
        c(
            "1,200,000 cycles",
            INGRESS,
            FEES,
            f(IC_2025.ingress_message_reception_fee),
        ),
        c("260 K", &["call"], FEES, f(IC_2025.xnet_call_fee)),
        c("260,000 cycles", &["call"], FEES, f(IC_2025.xnet_call_fee)),
        c(
            "1 cycle",
            &["instruction"],
            FEES,
            f(IC_2025.ten_update_instructions_execution_fee / 10),
        ),
        c(
            "2 cycles",
            &["wasm64"],
            "replica's rs/cycles_account_manager (wasm64 instructions)",
            None,
        ),
        c("1 T", &["xdr"], FEES, Some(CYCLES_PER_XDR)),
        c("US$ 1.35482", &["xdr"], FEES, Some(IC_2025.usd_per_xdr)),
        c(
            "8 bytes",
            &["nonce"],
            "agent-rs's ingress nonce, offline_engine::fees::NONCE_BYTES",
            u(NONCE_BYTES),
        ),
        // Pages and what touching them costs.
        c(
            "4 KiB",
            PAGE,
            "the replica's OS page, offline_engine::stable::OS_PAGE",
            u(OS_PAGE),
        ),
        c(
            "64 KiB",
            &["page", "min_pending_bytes"],
            "the Wasm page, offline_engine::stable::WASM_PAGE",
            u(WASM_PAGE),
        ),
        c(
            "16 KiB",
            &["page"],
            "16 KiB-page hosts (replica #9894); ic-sqlite-vfs's page size",
            None,
        ),
        c(
            "64 pages",
            &["summary"],
            "offline_engine::heap::SUMMARY_SHIFT",
            u(1 << offline_engine::heap::SUMMARY_SHIFT),
        ),
        c("5,000 instructions", PAGE, TRACKER, u(dmt.page_overhead)),
        c(
            "80,000 instructions",
            PAGE,
            TRACKER,
            u(dmt.page_overhead * dmt.os_pages_per_wasm_page),
        ),
        c(
            "1,000 instructions",
            PAGE,
            POCKET_IC_13,
            u(Metering::POCKET_IC_13.heap_changed_page),
        ),
        c(
            "3,000 instructions",
            &["copy"],
            "replica's rs/config/src/subnet_config.rs (copy overhead per dirty page)",
            None,
        ),
        c(
            "16 bytes",
            &["access", "cross"],
            "WebAssembly: the widest access (v128)",
            None,
        ),
        // Limits of messages, memory and rounds.
        c("40 B", INSTRUCTION_LIMIT, LIMITS, u(limits.update)),
        c("5 B", &["query"], LIMITS, u(limits.query)),
        c("300 B", &["install", "upgrade"], LIMITS, u(limits.install)),
        c("200 M", &["inspect"], LIMITS, u(limits.inspect)),
        c(
            "2 MiB",
            REPLY_LIMIT,
            SPEC,
            library!(Some(IC_MAX_MESSAGE_BYTES as f64)),
        ),
        c("3 MiB", &["query"], SPEC, None),
        c(
            "4 MiB",
            &["block"],
            SUBNET,
            u(subnet.max_ingress_bytes_per_block),
        ),
        c(
            "4 B",
            &["round"],
            SUBNET,
            u(subnet.max_instructions_per_round),
        ),
        c(
            "2 B",
            &["slice"],
            SUBNET,
            u(subnet.max_instructions_per_slice),
        ),
        c(
            "2 M",
            &["per execution", "each execution"],
            SUBNET,
            u(subnet.instruction_overhead_per_execution),
        ),
        c(
            "8 M",
            &["per canister", "each canister"],
            SUBNET,
            u(subnet.instruction_overhead_per_canister),
        ),
        c(
            "12 K",
            &["per canister"],
            SUBNET,
            u(subnet.instruction_overhead_per_canister_for_finalization),
        ),
        c(
            "4 GiB",
            &["heap", "32-bit", "memory"],
            "WebAssembly's 32-bit memory",
            Some(65_536.0 * WASM_PAGE as f64),
        ),
        c(
            "65,536 pages",
            &["heap"],
            "WebAssembly's 32-bit memory",
            Some(65_536.0),
        ),
        c(
            "500 GiB",
            &["stable"],
            "offline_engine::stable::MAX_STABLE_WASM_PAGES",
            Some((MAX_STABLE_WASM_PAGES * WASM_PAGE) as f64),
        ),
        c(
            "2 GiB",
            &["stable"],
            EMBEDDERS,
            u(dmt.stable_accessed_limit.message * OS_PAGE),
        ),
        c(
            "8 GiB",
            &["stable"],
            EMBEDDERS,
            u(dmt.stable_accessed_limit.upgrade * OS_PAGE),
        ),
        c(
            "1 GiB",
            &["stable", "dirt"],
            EMBEDDERS,
            u(dmt.stable_accessed_limit.query * OS_PAGE),
        ),
        c("6 GiB", &["wasm64"], EMBEDDERS, None),
        c(
            "37 bytes",
            &["stable_api_charges"],
            "STABLE_OP_BYTES of the replica's rs/embedders/tests/wasmtime_random_memory_writes.rs at 0441fbd7",
            None,
        ),
        c(
            "64 GiB",
            &["wasm64"],
            "offline_engine's wasm64 page states",
            None,
        ),
        c(
            "300 s",
            &["timeout"],
            SPEC,
            u(u64::from(MAX_CALL_TIMEOUT_SECONDS)),
        ),
        c("5 min", &["ingress_expiry"], SPEC, None),
        c("30 s", &["ingress_expiry"], SPEC, None),
        c("32 bytes", &["nonce"], SPEC, None),
        c("133 bytes", &["root_key"], SPEC, None),
        // The System API's costs.
        c(
            "500 instructions",
            &["ic0"],
            "replica's system_api_complexity.rs, offline_engine::system_api::complexity",
            u(overhead::MSG_REPLY),
        ),
        c(
            "100 instructions",
            &["limit"],
            "replica's system_api_complexity.rs (debug_print)",
            u(overhead::DEBUG_PRINT),
        ),
        c(
            "4×",
            &["wasm64"],
            "replica #1725 (the former wasm64 multiplier)",
            None,
        ),
        // This repository's configuration.
        c(
            "24 h",
            &["window", "retry", "key"],
            DEDUP,
            library!(secs(DEFAULT_WINDOW_NS)),
        ),
        c(
            "60 s",
            &["drift", "future"],
            DEDUP,
            library!(secs(DEFAULT_PERMITTED_DRIFT_NS)),
        ),
        c(
            "256 MiB",
            &["store", "max_pending_bytes", "pending"],
            DEDUP,
            library!(u(DEFAULT_MAX_BYTES)),
        ),
        c(
            "32 MiB",
            &["caller", "eighth"],
            DEDUP,
            library!(u(DEFAULT_MAX_BYTES_PER_CALLER)),
        ),
        c(
            "16 bytes",
            &["key"],
            "batch_types::BatchKey (creation time and a 16-byte id)",
            None,
        ),
        c(
            "8 bytes",
            &["key", "ticket"],
            "the batch key's id halves; a ticket's owner",
            None,
        ),
        c(
            "200 M",
            &["scaled down"],
            "the reliability scenario's message limit (bench_suite::reliability)",
            None,
        ),
        c(
            "1 B",
            &["message limit"],
            "the reliability scenarios' message limit (bench_suite::reliability)",
            None,
        ),
        c(
            "1 B",
            &["prune"],
            "ic_rusqlite_batch::keyed::PRUNE_STEP_INSTRUCTIONS",
            None,
        ),
        c(
            "1.25 B",
            &["prune"],
            "ic_rusqlite_batch::keyed::PRUNE_MESSAGE_MAX_INSTRUCTIONS",
            None,
        ),
        c(
            "20 M",
            &["budget", "floor"],
            "bench_api::MIN_FLUSH_BUDGET",
            u(MIN_FLUSH_BUDGET),
        ),
        c("8 B", &["margin"], SETTINGS, None),
        c(
            "10.6 B",
            &["budget"],
            "ic_rusqlite_batch::settings::MAX_FLUSH_BUDGET",
            None,
        ),
        c(
            "10 B",
            &["flush_instruction_budget"],
            "the reference canister's default budget",
            None,
        ),
        c("128 MiB", &["max_pending_bytes"], SETTINGS, None),
        c(
            "1 MiB",
            &["allocator"],
            "ic_rusqlite_batch's environment probe",
            None,
        ),
        c(
            "100 bytes",
            &["username"],
            "bench_api::MAX_USERNAME_BYTES",
            Some(MAX_USERNAME_BYTES as f64),
        ),
        c(
            "1 KiB",
            &["argument", "error"],
            "bench_api::MAX_SINGLE_OP_ARG_BYTES, batch_types::reply::MAX_ERROR_BYTES",
            Some(MAX_SINGLE_OP_ARG_BYTES as f64),
        ),
        c(
            "512 bytes",
            &["argument", "error"],
            "ic_rusqlite_batch::args::MAX_UNDECODABLE_BYTES",
            Some(512.0),
        ),
        c(
            "2,016 KiB",
            &["request"],
            CLIENT,
            library!(Some(client.max_request_bytes as f64)),
        ),
        c(
            "32 KiB",
            &["envelope"],
            "ic_batch_client::ENVELOPE_RESERVE_BYTES",
            library!(Some(ENVELOPE_RESERVE_BYTES as f64)),
        ),
        c(
            "50 ms",
            &["delay"],
            CLIENT,
            library!(secs(client.max_delay_ns)),
        ),
        c(
            "64 MiB",
            &["queue"],
            CLIENT,
            library!(Some(client.max_queued_bytes as f64)),
        ),
        c(
            "100 ms",
            &["backoff", "retrying"],
            CLIENT,
            library!(secs(client.initial_backoff_ns)),
        ),
        c(
            "10 s",
            &["backoff", "between attempts"],
            CLIENT,
            library!(secs(client.max_backoff_ns)),
        ),
        c(
            "2%",
            &["threshold", "either direction"],
            "bench_suite::regression::DEFAULT_THRESHOLD_PCT (canbench's)",
            Some(crate::regression::DEFAULT_THRESHOLD_PCT),
        ),
        c(
            "100k",
            &["users"],
            "bench_api::fixture::FULL_SCALE_USERS",
            Some(bench_api::fixture::FULL_SCALE_USERS as f64),
        ),
        c(
            "1M",
            &["orders"],
            "bench_api::fixture::FULL_SCALE_ORDERS",
            Some(bench_api::fixture::FULL_SCALE_ORDERS as f64),
        ),
        c(
            "0.01 %",
            &["tolerance", "within"],
            "offline_engine::validation::TOLERANCE_PCT",
            Some(offline_engine::validation::TOLERANCE_PCT),
        ),
        c(
            "35 %",
            &["faults"],
            "the fault rate the client tests inject (src/client_e2e, src/batch_client_ts/test)",
            None,
        ),
        c(
            "185 bytes",
            &["max_error_bytes"],
            "batch_types::reply::max_error_bytes(10,000)",
            Some(batch_types::reply::max_error_bytes(10_000) as f64),
        ),
        c(
            "1.8 MB",
            &["stranger"],
            "the size of the stranger calls of src/bench_canister/tests/strangers.rs",
            None,
        ),
        c(
            "0 cycles",
            &["created with"],
            "a canister's balance as created",
            None,
        ),
        c(
            "1,001 bytes",
            &["note"],
            "one byte over the notes canister's declared limit (examples/notes_canister)",
            None,
        ),
        c(
            "10 bytes",
            &["packed"],
            "the packed format of an order (bench_api::packed)",
            None,
        ),
        c(
            "1 GiB",
            &["at worst"],
            "ic_rusqlite_batch::settings (the queue's heap bound)",
            None,
        ),
        c(
            "500 ms",
            &["block-interval", "every"],
            "offline-pocket-ic's default round interval",
            None,
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_constant_reads_as_one_figure_equal_to_the_codes_value() {
        for k in table() {
            let written = crate::doc_figures::value_of(k.figure)
                .unwrap_or_else(|| panic!("{:?} does not read as one figure", k.figure));
            if let Some(v) = k.value {
                assert!(
                    written == v,
                    "{}: the doc says {written}, the code {v}",
                    k.figure
                );
            }
            assert!(
                !k.about.is_empty(),
                "{}: a constant names its subject",
                k.figure
            );
        }
    }
}
