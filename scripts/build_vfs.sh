#!/usr/bin/env bash
# Builds the peer canister on ic-sqlite-vfs (canisters/vfs_canister, a cargo workspace of its own)
# as the IC runs it: cargo (wasm32-unknown-unknown; SQLite is the crate's precompiled archive, so
# no C compiler and no wasi2ic) -> candid:service metadata.
# Usage: scripts/build_vfs.sh                   -> target/canister/vfs_canister.wasm           (deployable)
#        scripts/build_vfs.sh canbench          -> target/canister/vfs_canister_canbench.wasm  (with __canbench__* queries;
#                                                  BENCH_SCALE_DIVISOR=100 for the CI scale, default 1 = full scale)
#        scripts/build_vfs.sh canbench-bundled  -> target/canister/vfs_canister_canbench_bundled.wasm: the same
#                                                  benches with SQLite compiled here from the crate's vendored source
#                                                  by Debian's clang at -O3 (the crate's precompiled archive is -Oz),
#                                                  through canisters/vfs_canister/clang-wasm32.sh
# Each also writes <name>.named.wasm: the same module with its function names, for the profiler.
# A first build takes about 40 s on 2 cores (its own target directory, canisters/vfs_canister/target).
set -euo pipefail
cd "$(dirname "$0")/.."

flavour=${1:-deploy}
bundled=0
case "$flavour" in
  deploy)   features=();                          keep=();                      out=target/canister/vfs_canister.wasm ;;
  canbench) features=(--features canbench-rs);    keep=(--keep-name-section);   out=target/canister/vfs_canister_canbench.wasm ;;
  canbench-bundled) features=(--no-default-features --features canbench-rs,sqlite-bundled); keep=(--keep-name-section); out=target/canister/vfs_canister_canbench_bundled.wasm; bundled=1 ;;
  *) echo "usage: $0 [deploy|canbench|canbench-bundled]" >&2; exit 2 ;;
esac
if [ "$bundled" = 1 ]; then
  for tool in clang-14 llvm-ar-14; do
    command -v "$tool" >/dev/null || { echo "$tool not found: run scripts/setup.sh all" >&2; exit 1; }
  done
  export CC_wasm32_unknown_unknown="$PWD/canisters/vfs_canister/clang-wasm32.sh"
  export AR_wasm32_unknown_unknown=llvm-ar-14
  # The wasm features Rust's wasm32 targets and wasi-sdk's newer clang enable by default and
  # clang 14 does not: memcpy and memset as memory.copy and memory.fill instructions instead of
  # calls to byte loops, sign extension, saturating float conversions.
  export CFLAGS_wasm32_unknown_unknown="-mbulk-memory -msign-ext -mnontrapping-fptoint -mmutable-globals"
fi

command -v ic-wasm >/dev/null || { echo "ic-wasm not found: run scripts/setup.sh" >&2; exit 1; }

# Not --locked: the workspace's lockfile pins its registry crates, but its path dependencies
# (bench_api and, for the tests, offline_engine) belong to the root workspace and may gain a
# dependency there; cargo then adds it to canisters/vfs_canister/Cargo.lock (commit that change).
# The same path remapping as scripts/build.sh: the wasm, and so every instruction count, is the
# same in any clone.
RUSTFLAGS="${RUSTFLAGS:-} --remap-path-prefix=$PWD=/bench --remap-path-prefix=${CARGO_HOME:-$HOME/.cargo}=/cargo" \
  cargo build --release --target wasm32-unknown-unknown \
  --manifest-path canisters/vfs_canister/Cargo.toml "${features[@]}"
mkdir -p target/canister
built=canisters/vfs_canister/target/wasm32-unknown-unknown/release/vfs_canister.wasm
did=canisters/vfs_canister/vfs_canister.did
ic-wasm "$built" -o "$out" metadata candid:service -f "$did" -v public "${keep[@]}"
named="${out%.wasm}.named.wasm"
ic-wasm "$built" -o "$named" metadata candid:service -f "$did" -v public --keep-name-section
echo "built $out ($(stat -c %s "$out") bytes) and $named"
