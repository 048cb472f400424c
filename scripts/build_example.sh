#!/usr/bin/env bash
# Builds the example canisters, which only the tests use (the main job does not):
#   examples/notes_canister (a schema of its own on ic-rusqlite-batch) as the IC runs it, as
#     scripts/build.sh builds the reference canister: cargo (wasm32-wasip1) -> wasi2ic ->
#     candid:service metadata from its committed .did -> target/canister/notes_canister.wasm
#   examples/app_canister (an application canister batching its calls to the database canister,
#     for client_e2e): a plain wasm32-unknown-unknown module
#     -> target/wasm32-unknown-unknown/release/app_canister.wasm
# Usage: scripts/build_example.sh
set -euo pipefail
cd "$(dirname "$0")/.."

for tool in wasi2ic ic-wasm; do
  command -v "$tool" >/dev/null || { echo "$tool not found: run scripts/setup.sh" >&2; exit 1; }
done

out=target/canister/notes_canister.wasm
RUSTFLAGS="${RUSTFLAGS:-} --remap-path-prefix=$PWD=/bench --remap-path-prefix=${CARGO_HOME:-$HOME/.cargo}=/cargo" \
  cargo build --release --target wasm32-wasip1 -p notes_canister
mkdir -p target/canister
wasi2ic target/wasm32-wasip1/release/notes_canister.wasm "$out.nowasi" >/dev/null
ic-wasm "$out.nowasi" -o "$out" metadata candid:service -f examples/notes_canister/notes_canister.did -v public
rm "$out.nowasi"
echo "built $out ($(stat -c %s "$out") bytes)"
cargo build --release --target wasm32-unknown-unknown -p app_canister
echo "built target/wasm32-unknown-unknown/release/app_canister.wasm"
