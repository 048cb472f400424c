#!/usr/bin/env bash
# Runs every test: installs the tools, builds both canister wasms, then the native tests of every
# crate (including the wasm checks and the canister's integration tests on the offline engine),
# then clippy on the native crates and on the canister. Everything is built in release once.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh
scripts/build.sh
BENCH_SCALE_DIVISOR=100 scripts/build.sh canbench
cargo test --release
cargo clippy --release --all-targets -- -D warnings
cargo clippy --release --target wasm32-wasip1 -p bench_canister --features canbench-rs -- -D warnings
