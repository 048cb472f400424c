#!/usr/bin/env bash
# Checks the published library crates (ic-rusqlite-batch-types, ic-rusqlite-batch-core,
# ic-rusqlite-batch, ic-batch-client) on the toolchain
# of their MSRV, the `rust-version` their manifests state: every target (tests, examples), the
# client's off-chain transports, and its canister transport for wasm32. Installs that toolchain
# with rustup (minimal profile) if it is missing; builds in target/msrv.
set -euo pipefail
cd "$(dirname "$0")/.."

msrv() { sed -n 's/^rust-version = "\(.*\)"$/\1/p' "$1"; }
core=$(msrv src/batch_core/Cargo.toml)
for manifest in src/batch_client/Cargo.toml src/batch_types/Cargo.toml src/ic_rusqlite_batch/Cargo.toml; do
  other=$(msrv "$manifest")
  if [ -z "$core" ] || [ "$core" != "$other" ]; then
    echo "check_msrv: the library crates state different MSRVs ('$core' in batch_core, '$other' in $manifest)" >&2
    exit 1
  fi
done
toolchain="$core.0"
rustup toolchain install "$toolchain" --profile minimal --target wasm32-wasip1
cargo +"$toolchain" check --locked --release --target-dir target/msrv --all-targets \
  -p ic-rusqlite-batch-types -p ic-rusqlite-batch-core -p ic-rusqlite-batch -p ic-batch-client --features ic-batch-client/ic-agent,ic-batch-client/pocket-ic
cargo +"$toolchain" check --locked --release --target-dir target/msrv --target wasm32-wasip1 \
  -p ic-batch-client --no-default-features --features ic-cdk
cargo +"$toolchain" check --locked --release --target-dir target/msrv --target wasm32-wasip1 \
  -p ic-rusqlite-batch
echo "check_msrv: the library crates build with Rust $toolchain"
