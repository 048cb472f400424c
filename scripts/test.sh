#!/usr/bin/env bash
# Runs every test: checks formatting, installs the tools, lints the CI workflow, builds the canister wasms, then the
# native tests of every crate (including the wasm checks and the canister's integration tests on
# the offline engine), clippy on the native crates and on the canister, and a warning-free doc
# build. Everything is built in release once. Each step names itself with its usual time on a
# 2-core machine (first run from a fresh clone / later runs) and says how long it took; the last
# line is the breakdown.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/steps.sh

step "format" "1 s" cargo fmt --all --check
step "tools" "4 min first run (canbench most of it), 1 s later" scripts/setup.sh all
# The GitHub Actions workflow, checked by actionlint (pinned, installed by setup.sh all).
step "workflow lint" "1 s" actionlint .github/workflows/*.yml
canister_wasms() {
  scripts/build.sh
  BENCH_SCALE_DIVISOR=100 scripts/build.sh canbench
  # The example canisters on ic-rusqlite-batch and ic-batch-client (their tests run in
  # `cargo test`, with the generic checks on both canisters on ic-rusqlite-batch).
  scripts/build_example.sh
}
step "canister wasms" "100 s first run, 30 s later" canister_wasms
step "committed report is this commit's" "1 s" scripts/check_report_current.sh
# The feature pocket-ic adds `bench-suite messages` and its test (the main job builds the suite
# without it).
step "cargo test" "17 min first run, 6 min later" cargo test --release --features bench_suite/pocket-ic
# The peer canister on ic-sqlite-vfs (canisters/vfs_canister, a cargo workspace of its own):
# format, lint (its wasm, benches included), its deployable wasm, and its tests on the offline
# engine, which also install the reference's deployable wasm built above. The tests build in the
# root target directory, reusing the offline engine the step above compiled.
peer_canister() {
  cargo fmt --check --manifest-path canisters/vfs_canister/Cargo.toml
  cargo clippy --release --target wasm32-unknown-unknown --manifest-path canisters/vfs_canister/Cargo.toml \
    --features canbench-rs -- -D warnings
  scripts/build_vfs.sh
  cargo test --release --manifest-path canisters/vfs_canister/Cargo.toml --target-dir target
}
step "peer canister (ic-sqlite-vfs)" "4 min first run, 1 min later" peer_canister
library_examples() {
  # The library crates' runnable examples.
  cargo run --release -p ic-rusqlite-batch-core --example queue
  cargo run --release -p ic-batch-client --example simulated_canister
}
step "library examples" "20 s" library_examples
# The JS agent and icp-cli against the server's IC HTTP interface (their own npm package; the
# server binary and the canister wasm come from the steps above).
step "JS agent and icp-cli" "20 s" \
  bash -c 'cd src/pocket_ic_server/tests/agent-js && npm ci && npx tsc --noEmit && node --test'
clippy_and_docs() {
  cargo clippy --release --all-targets --features bench_suite/pocket-ic -- -D warnings
  cargo clippy --release -p bench_suite --all-targets -- -D warnings
  cargo clippy --release --target wasm32-wasip1 -p bench_canister --features declared -- -D warnings
  cargo clippy --release --target wasm32-wasip1 -p bench_canister --features levers -- -D warnings
  cargo clippy --release --target wasm32-wasip1 -p ic-rusqlite-batch -p notes_canister -p todo_canister -- -D warnings
  RUSTDOCFLAGS="-D warnings" cargo doc --no-deps --workspace --features bench_suite/pocket-ic
  RUSTDOCFLAGS="-D warnings" cargo doc --no-deps --target wasm32-wasip1 -p bench_canister --document-private-items
  RUSTDOCFLAGS="-D warnings" cargo doc --no-deps --target wasm32-wasip1 -p ic-rusqlite-batch -p notes_canister -p todo_canister
}
step "clippy and docs" "4.5 min first run, 2 min later" clippy_and_docs
# The batch client: its feature-gated transports (ic-agent, PocketIC) off-chain, its ic-cdk
# transport and timer driver built and linted for wasm32; the TypeScript client from its
# lockfile (type check, then node's test runner: shared packed vectors, simulated faults).
batch_clients() {
  cargo clippy --release -p ic-batch-client --features ic-agent,pocket-ic --all-targets -- -D warnings
  cargo clippy --release -p ic-batch-client --no-default-features --features ic-cdk --target wasm32-wasip1 -- -D warnings
  (cd src/batch_client_ts && npm ci --no-audit --no-fund && npx tsc --noEmit && npm test)
}
step "batch clients" "1 min first run" batch_clients
# The four crates and the npm package as crates.io and npm would get them (after the clients'
# step, which installs the TypeScript package's dependencies).
step "packages" "1 min" scripts/package.sh
echo
steps_summary
