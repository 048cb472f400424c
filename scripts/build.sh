#!/usr/bin/env bash
# Builds the bench_canister wasm as the IC runs it:
#   cargo (wasm32-wasip1) -> wasi2ic (WASI imports rewired to ic-wasi-polyfill) -> candid:service metadata.
# Usage: scripts/build.sh            -> target/canister/bench_canister.wasm           (deployable)
#        scripts/build.sh canbench   -> target/canister/bench_canister_canbench.wasm  (with __canbench__* queries;
#                                       BENCH_SCALE_DIVISOR=100 for the CI scale, default 1 = full scale)
#        scripts/build.sh declared   -> target/canister/bench_canister_declared.wasm  (the canbench wasm plus the
#                                       comparison of the generic packed format with the hand-written one)
#        scripts/build.sh lever      -> target/canister/bench_canister_lever.wasm     (the deployable wasm with the
#                                       pragmas and statement cache BENCH_LEVER_* name: scripts/levers.sh)
# Each also writes <name>.named.wasm: the same module with its function names, for the profiler.
set -euo pipefail
cd "$(dirname "$0")/.."

flavour=${1:-deploy}
# The canbench flavour keeps the wasm's name section: canbench --instruction-tracing needs the
# function names (its flamegraphs name functions; it finds canbench-rs's tracing hook by name).
case "$flavour" in
  deploy)   features=();                          keep=();                      out=target/canister/bench_canister.wasm ;;
  canbench) features=(--features canbench-rs);    keep=(--keep-name-section);   out=target/canister/bench_canister_canbench.wasm ;;
  declared) features=(--features declared);       keep=(--keep-name-section);   out=target/canister/bench_canister_declared.wasm ;;
  lever)    features=(--features levers);         keep=();                      out=target/canister/bench_canister_lever.wasm ;;
  *) echo "usage: $0 [deploy|canbench|declared|lever]" >&2; exit 2 ;;
esac

for tool in wasi2ic ic-wasm; do
  command -v "$tool" >/dev/null || { echo "$tool not found: run scripts/setup.sh" >&2; exit 1; }
done

# Remap the checkout's and cargo's paths so that the wasm (panic locations in its data) and hence every
# instruction count are the same in any clone: the CI regression check compares them exactly.
RUSTFLAGS="${RUSTFLAGS:-} --remap-path-prefix=$PWD=/bench --remap-path-prefix=${CARGO_HOME:-$HOME/.cargo}=/cargo" \
  cargo build --release --target wasm32-wasip1 -p bench_canister "${features[@]}"
mkdir -p target/canister
wasi2ic target/wasm32-wasip1/release/bench_canister.wasm "$out.nowasi" >/dev/null
ic-wasm "$out.nowasi" -o "$out" metadata candid:service -f src/bench_canister/bench_canister.did -v public "${keep[@]}"
# The same module with its `name` section (function names), for `offline-engine profile`: only
# that custom section differs, so every instruction count is the same (the canbench flavour keeps
# its name section anyway, so there the two files are identical).
named="${out%.wasm}.named.wasm"
ic-wasm "$out.nowasi" -o "$named" metadata candid:service -f src/bench_canister/bench_canister.did -v public \
  --keep-name-section
rm "$out.nowasi"
echo "built $out ($(stat -c %s "$out") bytes) and $named"
