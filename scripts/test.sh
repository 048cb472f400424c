#!/usr/bin/env bash
# Runs every test: checks formatting, installs the tools, builds both canister wasms, then the
# native tests of every crate (including the wasm checks and the canister's integration tests on
# the offline engine), clippy on the native crates and on the canister, and a warning-free doc
# build. Everything is built in release once.
set -euo pipefail
cd "$(dirname "$0")/.."

cargo fmt --all --check
scripts/setup.sh
scripts/build.sh
BENCH_SCALE_DIVISOR=100 scripts/build.sh canbench
cargo test --release
# The JS agent and icp-cli against the server's IC HTTP interface (their own npm package; the
# server binary and the canister wasm come from the steps above).
(cd src/pocket_ic_server/tests/agent-js && npm ci && npx tsc --noEmit && node --test)
cargo clippy --release --all-targets -- -D warnings
cargo clippy --release --target wasm32-wasip1 -p bench_canister --features canbench-rs -- -D warnings
RUSTDOCFLAGS="-D warnings" cargo doc --no-deps --workspace
RUSTDOCFLAGS="-D warnings" cargo doc --no-deps --target wasm32-wasip1 -p bench_canister --document-private-items
