#!/usr/bin/env bash
# Checks the published library crates (ic-rusqlite-batch-core, ic-batch-client) on the toolchain
# of their MSRV, the `rust-version` their manifests state: every target (tests, examples), the
# client's off-chain transports, and its canister transport for wasm32. Installs that toolchain
# with rustup (minimal profile) if it is missing; builds in target/msrv.
set -euo pipefail
cd "$(dirname "$0")/.."

msrv() { sed -n 's/^rust-version = "\(.*\)"$/\1/p' "$1"; }
core=$(msrv src/batch_core/Cargo.toml)
client=$(msrv src/batch_client/Cargo.toml)
if [ -z "$core" ] || [ "$core" != "$client" ]; then
  echo "check_msrv: the library crates state different MSRVs ('$core', '$client')" >&2
  exit 1
fi
toolchain="$core.0"
rustup toolchain install "$toolchain" --profile minimal --target wasm32-wasip1
cargo +"$toolchain" check --locked --release --target-dir target/msrv --all-targets \
  -p ic-rusqlite-batch-core -p ic-batch-client --features ic-batch-client/ic-agent,ic-batch-client/pocket-ic
cargo +"$toolchain" check --locked --release --target-dir target/msrv --target wasm32-wasip1 \
  -p ic-batch-client --no-default-features --features ic-cdk
echo "check_msrv: the library crates build with Rust $toolchain"
