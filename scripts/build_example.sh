#!/usr/bin/env bash
# Builds the example canisters, which only the tests use (the main job does not):
#   examples/notes_canister and examples/todo_canister (schemas of their own on
#     ic-rusqlite-batch) as the IC runs them, as scripts/build.sh builds the reference canister:
#     cargo (wasm32-wasip1) -> wasi2ic -> candid:service metadata from the committed .did
#     -> target/canister/<example>.wasm
#   examples/app_canister (an application canister batching its calls to the database canister,
#     for client_e2e): a plain wasm32-unknown-unknown module
#     -> target/wasm32-unknown-unknown/release/app_canister.wasm
# Usage: scripts/build_example.sh
set -euo pipefail
cd "$(dirname "$0")/.."

for tool in wasi2ic ic-wasm; do
  command -v "$tool" >/dev/null || { echo "$tool not found: run scripts/setup.sh" >&2; exit 1; }
done

for example in notes_canister todo_canister; do
  out=target/canister/$example.wasm
  RUSTFLAGS="${RUSTFLAGS:-} --remap-path-prefix=$PWD=/bench --remap-path-prefix=${CARGO_HOME:-$HOME/.cargo}=/cargo" \
    cargo build --release --target wasm32-wasip1 -p "$example"
  mkdir -p target/canister
  wasi2ic "target/wasm32-wasip1/release/$example.wasm" "$out.nowasi" >/dev/null
  ic-wasm "$out.nowasi" -o "$out" metadata candid:service -f "examples/$example/$example.did" -v public
  rm "$out.nowasi"
  echo "built $out ($(stat -c %s "$out") bytes)"
done
cargo build --release --target wasm32-unknown-unknown -p app_canister
echo "built target/wasm32-unknown-unknown/release/app_canister.wasm"
