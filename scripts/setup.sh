#!/usr/bin/env bash
# Installs the tools the project needs on a fresh machine (Debian, Rust via rustup, crates.io;
# the Go module proxy for actionlint). Idempotent: tools already at the pinned version are kept.
#   scripts/setup.sh        the main job's tools (scripts/bench.sh): the wasm target, wasi2ic, ic-wasm
#   scripts/setup.sh all    also those of the tests and CI gates: canbench, actionlint
# What makes a first install slow, and what is cut:
#   - wasi2ic depends on ic-wasm 0.9 with its default features, which build binaryen's C++
#     (wasm-opt) although wasi2ic never optimizes: that C++ is compiled without optimization
#     (a profile override for its two -sys crates), the Rust code as usual.
#   - ic-wasm is installed without its `check-endpoints` feature (a Candid parser the build's
#     `metadata` and `--keep-name-section` do not use).
#   - canbench and actionlint only for `all`.
set -euo pipefail
cd "$(dirname "$0")/.."

WASI2IC_VERSION=0.2.16
IC_WASM_VERSION=0.11.1
# The canbench CLI; scripts/canbench.sh runs it through offline-pocket-ic.
CANBENCH_VERSION=0.7.0
# The GitHub Actions workflow linter, from the Go module proxy.
ACTIONLINT_VERSION=1.7.12

what=${1:-main}
case "$what" in
  main|all) ;;
  *) echo "usage: $0 [main|all]" >&2; exit 2 ;;
esac

# rust-toolchain.toml pins the toolchain; make sure its wasm target is present.
rustup target add wasm32-wasip1

have() { # have <binary> <version>
  "$1" --version 2>/dev/null | grep -q "$2"
}
cargo_install() { # cargo_install <crate> <version> [cargo install flags...]
  local crate=$1 version=$2
  shift 2
  echo "setup: installing $crate $version (cargo install)"
  local start=$SECONDS
  cargo install --locked "$crate@$version" "$@"
  echo "setup: $crate $version installed in $((SECONDS - start)) s"
}

have wasi2ic "$WASI2IC_VERSION" || cargo_install wasi2ic "$WASI2IC_VERSION" \
  --config 'profile.release.package.wasm-opt-sys.opt-level=0' \
  --config 'profile.release.package.wasm-opt-cxx-sys.opt-level=0'
have ic-wasm "$IC_WASM_VERSION" || cargo_install ic-wasm "$IC_WASM_VERSION" --no-default-features --features exe

if [ "$what" = all ]; then
  have canbench "$CANBENCH_VERSION" || cargo_install canbench "$CANBENCH_VERSION"
  if ! have actionlint "$ACTIONLINT_VERSION"; then
    command -v go >/dev/null || { echo "setup: actionlint needs Go (https://go.dev/doc/install)" >&2; exit 1; }
    echo "setup: installing actionlint $ACTIONLINT_VERSION (go install)"
    GOBIN="${CARGO_HOME:-$HOME/.cargo}/bin" go install "github.com/rhysd/actionlint/cmd/actionlint@v$ACTIONLINT_VERSION"
  fi
fi
