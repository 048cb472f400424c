#!/usr/bin/env bash
# Installs the tools the project needs on a fresh machine (Debian, Rust via rustup, crates.io only).
# Idempotent: tools already at the pinned version are not rebuilt.
set -euo pipefail
cd "$(dirname "$0")/.."

WASI2IC_VERSION=0.2.16
IC_WASM_VERSION=0.11.1
# The canbench CLI; scripts/canbench.sh runs it through offline-pocket-ic.
CANBENCH_VERSION=0.7.0

# rust-toolchain.toml pins the toolchain; make sure its wasm target is present.
rustup target add wasm32-wasip1

need() { # need <binary> <crate> <version>
  if ! "$1" --version 2>/dev/null | grep -q "$3"; then
    echo "setup: installing $2 $3"
    cargo install --locked "$2@$3"
  fi
}
need wasi2ic wasi2ic "$WASI2IC_VERSION"
need ic-wasm ic-wasm "$IC_WASM_VERSION"
need canbench canbench "$CANBENCH_VERSION"
