//! The benchmark suite of the project: batched vs unbatched cost of the users/orders workload,
//! run on the embedded offline engine (`offline_engine`: wasmtime with the IC's metering).
//!
//! - [`engine_runs`]: every engine call (canbench benches, message-level runs); [`client`]: typed
//!   calls to the canister on the engine (also used by the canister's tests).
//! - [`fees`]: the IC fee schedule and the cost of messages; [`message_bench`]: cycles and USD
//!   per mode; [`load_model`]: load over rounds, simulated over measured costs.
//! - [`profiles`]: the canbench and message-level runs again under the replica's deterministic
//!   memory tracker, beside the rules of PocketIC 13 the other tables are metered by.
//! - [`regions`]: where the pages of three workloads go, by region of the canister's memory;
//!   [`levers`]: the same workloads on builds that differ from the reference in one setting.
//! - [`summary`]: what a million writes cost on each path (the report's opening and the last
//!   thing `bench-suite run` prints); [`estimate`]: one's own load priced from `results.json`.
//! - [`analysis`]: the canbench tables and the targets; [`report`], [`charts`], [`output`]:
//!   `REPORT.md`, SVG and PNG charts, `results.json`.
//! - [`reliability`]: the scenarios that try to stop, alter or empty the queue.
//! - [`regression`]: the repository's one rule for comparing figures with a committed baseline
//!   (the CI check of `bench/baseline-ci.json`); [`canbench_check`]: the CI gate of the results
//!   real canbench writes through `offline-pocket-ic`; [`pr_summary`]: their short Markdown
//!   summary for a pull request.
//! - [`suite`]: runs it all and collects the figures; [`commands`]: one module per `bench-suite`
//!   command.
//! - [`doc_figures`]: every measured figure the hand-written docs quote, and what checks it
//!   (`bench-suite doc-figures`).
//! - `pocket_ic_runs` (feature `pocket-ic`): the message-level runs through the `pocket-ic`
//!   client, against `offline-pocket-ic` or a real PocketIC (`bench-suite messages`).
#![deny(missing_docs)]

pub mod analysis;
pub mod call_profile;
pub mod canbench_check;
pub mod charts;
pub mod client;
pub mod commands;
pub mod doc_figures;
pub mod engine_runs;
pub mod estimate;
pub mod fees;
pub mod levers;
pub mod load_model;
pub mod message_bench;
pub mod output;
pub mod peer;
#[cfg(feature = "pocket-ic")]
pub mod pocket_ic_runs;
pub mod pr_summary;
pub mod profiles;
pub mod progress;
pub mod regions;
pub mod regression;
pub mod reliability;
pub mod report;
pub mod scale;
pub mod suite;
pub mod summary;
pub mod which_path;
