#!/usr/bin/env bash
# Builds the peer canister on ic-sqlite-vfs (canisters/vfs_canister, a cargo workspace of its own)
# as the IC runs it: cargo (wasm32-unknown-unknown; SQLite is the crate's precompiled archive, so
# no C compiler and no wasi2ic) -> candid:service metadata.
# Usage: scripts/build_vfs.sh            -> target/canister/vfs_canister.wasm           (deployable)
#        scripts/build_vfs.sh canbench   -> target/canister/vfs_canister_canbench.wasm  (with __canbench__* queries;
#                                           BENCH_SCALE_DIVISOR=100 for the CI scale, default 1 = full scale)
# Each also writes <name>.named.wasm: the same module with its function names, for the profiler.
# A first build takes about 40 s on 2 cores (its own target directory, canisters/vfs_canister/target).
set -euo pipefail
cd "$(dirname "$0")/.."

flavour=${1:-deploy}
case "$flavour" in
  deploy)   features=();                          keep=();                      out=target/canister/vfs_canister.wasm ;;
  canbench) features=(--features canbench-rs);    keep=(--keep-name-section);   out=target/canister/vfs_canister_canbench.wasm ;;
  *) echo "usage: $0 [deploy|canbench]" >&2; exit 2 ;;
esac

command -v ic-wasm >/dev/null || { echo "ic-wasm not found: run scripts/setup.sh" >&2; exit 1; }

# The same path remapping as scripts/build.sh: the wasm, and so every instruction count, is the
# same in any clone.
RUSTFLAGS="${RUSTFLAGS:-} --remap-path-prefix=$PWD=/bench --remap-path-prefix=${CARGO_HOME:-$HOME/.cargo}=/cargo" \
  cargo build --release --locked --target wasm32-unknown-unknown \
  --manifest-path canisters/vfs_canister/Cargo.toml "${features[@]}"
mkdir -p target/canister
built=canisters/vfs_canister/target/wasm32-unknown-unknown/release/vfs_canister.wasm
did=canisters/vfs_canister/vfs_canister.did
ic-wasm "$built" -o "$out" metadata candid:service -f "$did" -v public "${keep[@]}"
named="${out%.wasm}.named.wasm"
ic-wasm "$built" -o "$named" metadata candid:service -f "$did" -v public --keep-name-section
echo "built $out ($(stat -c %s "$out") bytes) and $named"
