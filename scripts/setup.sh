#!/usr/bin/env bash
# Installs the tools the project needs on a fresh machine (Debian, Rust via rustup, crates.io,
# the npm registry; the Go module proxy for actionlint). Idempotent: tools already at the pinned
# version are kept.
#   scripts/setup.sh        the main job's tools (scripts/bench.sh): the Rust targets, wasi2ic, ic-wasm
#   scripts/setup.sh all    also those of the tests and CI gates: canbench, actionlint
# Every Rust target a script, the workflow or a test builds for is listed in rust-toolchain.toml
# and added here; `cargo test -p bench_suite --test setup_covers` fails when one is not (and
# likewise for the binaries and npm packages the scripts run).
# What a first install costs on a 2-core machine, and why:
#   - ic-wasm: the prebuilt linux-x64 binary DFINITY publishes on the npm registry
#     (@icp-sdk/ic-wasm-linux-x64, the same release as the crate), installed with `npm ci` from
#     the lockfile in scripts/tools: about 2 s (`cargo install ic-wasm` took 85 s).
#   - wasi2ic 0.2.15: it depends on walrus alone; 0.2.16 added ic-wasm with its default features,
#     whose binaryen C++ (wasm-opt) wasi2ic never runs and which took 519 s to compile. Both
#     rewrite the same imports; the canister wasm they give is the same byte for byte (the
#     deployable wasm's sha256 in bench/results.json): about 70 s.
#   - canbench (`all` only): about 4 minutes.
#   - Debian's clang-14 and llvm-14 (`all` only, apt-get): the C compiler and archiver with which
#     scripts/build_vfs.sh canbench-bundled compiles SQLite for the peer canister on
#     ic-sqlite-vfs (its default build links the crate's precompiled archive and needs neither):
#     about 40 s.
set -euo pipefail
cd "$(dirname "$0")/.."

WASI2IC_VERSION=0.2.15
# The version of the npm package in scripts/tools/package.json (its lockfile pins it).
IC_WASM_VERSION=0.11.1
# The canbench CLI; scripts/canbench.sh runs it through offline-pocket-ic.
CANBENCH_VERSION=0.7.0
# The GitHub Actions workflow linter, from the Go module proxy.
ACTIONLINT_VERSION=1.7.12
# Debian 12's clang and llvm (clang-14, llvm-ar-14), from its package archive.
CLANG_VERSION=14.0

what=${1:-main}
case "$what" in
  main|all) ;;
  *) echo "usage: $0 [main|all]" >&2; exit 2 ;;
esac

bin="${CARGO_HOME:-$HOME/.cargo}/bin"

# The targets rust-toolchain.toml lists (rustup adds them when it installs the toolchain, not
# when the toolchain was there before).
mapfile -t targets < <(sed -n 's/^targets *= *\[\(.*\)\]/\1/p' rust-toolchain.toml | tr -d ' "' | tr ',' '\n' | sed '/^$/d')
[ "${#targets[@]}" -gt 0 ] || { echo "setup: no targets in rust-toolchain.toml" >&2; exit 1; }
installed=$(rustup target list --installed)
for t in "${targets[@]}"; do
  if ! grep -qx "$t" <<<"$installed"; then
    echo "setup: adding the Rust target $t (rustup, a few seconds)"
    rustup target add "$t"
  fi
done

have() { # have <binary> <version>
  "$1" --version 2>/dev/null | grep -q "$2"
}
cargo_install() { # cargo_install <crate> <version> <usual time> [cargo install flags...]
  local crate=$1 version=$2 usual=$3
  shift 3
  echo "setup: installing $crate $version (cargo install; usually $usual on 2 cores)"
  local start=$SECONDS
  cargo install --locked "$crate@$version" "$@"
  echo "setup: $crate $version installed in $((SECONDS - start)) s"
}

have wasi2ic "$WASI2IC_VERSION" || cargo_install wasi2ic "$WASI2IC_VERSION" "70 s"
if ! have ic-wasm "$IC_WASM_VERSION"; then
  echo "setup: installing ic-wasm $IC_WASM_VERSION (the prebuilt binary from the npm registry; usually 2 s)"
  start=$SECONDS
  (cd scripts/tools && npm ci --no-audit --no-fund --loglevel=error)
  mkdir -p "$bin"
  cp scripts/tools/node_modules/@icp-sdk/ic-wasm-linux-x64/bin/ic-wasm "$bin/ic-wasm"
  have ic-wasm "$IC_WASM_VERSION" || { echo "setup: ic-wasm from npm is not $IC_WASM_VERSION" >&2; exit 1; }
  echo "setup: ic-wasm $IC_WASM_VERSION installed in $((SECONDS - start)) s"
fi

if [ "$what" = all ]; then
  have canbench "$CANBENCH_VERSION" || cargo_install canbench "$CANBENCH_VERSION" "4 minutes"
  if ! have actionlint "$ACTIONLINT_VERSION"; then
    command -v go >/dev/null || { echo "setup: actionlint needs Go (https://go.dev/doc/install)" >&2; exit 1; }
    echo "setup: installing actionlint $ACTIONLINT_VERSION (go install; usually 30 s)"
    start=$SECONDS
    GOBIN="$bin" go install "github.com/rhysd/actionlint/cmd/actionlint@v$ACTIONLINT_VERSION"
    echo "setup: actionlint $ACTIONLINT_VERSION installed in $((SECONDS - start)) s"
  fi
  if ! have clang-14 "$CLANG_VERSION" || ! have llvm-ar-14 "$CLANG_VERSION"; then
    echo "setup: installing clang-14 and llvm-14 (apt-get from Debian's archive; usually 40 s)"
    start=$SECONDS
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends clang-14 llvm-14
    have clang-14 "$CLANG_VERSION" || { echo "setup: clang-14 is not $CLANG_VERSION" >&2; exit 1; }
    echo "setup: clang-14 and llvm-14 installed in $((SECONDS - start)) s"
  fi
fi
