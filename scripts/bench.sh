#!/usr/bin/env bash
# The main job: installs the tools it needs, builds the reference canister's two wasms, the
# canbench and deployable wasms of its peer on ic-sqlite-vfs (canisters/vfs_canister, whose benches
# and messages the suite runs beside the reference's) and the suite, and runs the benchmark suite on the offline engine (wasmtime with the IC's metering;
# under both metering profiles, the replica's deterministic memory tracker and the rules of PocketIC 13; its independent
# runs on every core),
# writing bench/REPORT.md, bench/results.json and bench/*.svg|png; it ends with the summary table.
# Usage: scripts/bench.sh [full|ci]   (default full: the scale of the ic-rusqlite users/orders
#        benchmark, 100k users and 1M orders)
# It builds only what the report needs (the example canisters and the clients are built by the
# tests). Each step names itself before it starts, with how long it usually takes on a 2-core
# machine (first run / later runs), and says how long it took; the last line is the breakdown.
set -euo pipefail
cd "$(dirname "$0")/.."

scale=${1:-full}
case "$scale" in
  full) divisor=1 ;;
  ci)   divisor=100 ;;
  *) echo "usage: $0 [full|ci]" >&2; exit 2 ;;
esac

source scripts/steps.sh
canbench_wasm() { BENCH_SCALE_DIVISOR=$divisor scripts/build.sh canbench; }
peer_canbench_wasm() { BENCH_SCALE_DIVISOR=$divisor scripts/build_vfs.sh canbench; }

# The pinned toolchain first (rustup installs it, with its targets, at the first cargo command):
# then the suite's build, the longest step, runs beside the tools and the wasms, whose builds
# leave cores idle (the peer's in a target directory of its own; the reference's wait for the
# suite's build to release target/).
step "toolchain" "30 s first run, 1 s later" cargo --version
step_beside "suite build" "7 min first run beside the next steps, 1 min later" cargo build --release -p bench_suite
step "tools" "2 min first run beside the suite build, 1 s later" scripts/setup.sh
step "peer canister wasm (ic-sqlite-vfs, canbench)" "80 s first run beside the suite build, 1 s later" peer_canbench_wasm
step "peer canister wasm (ic-sqlite-vfs, deployable)" "20 s first run beside the suite build, 1 s later" scripts/build_vfs.sh
step "canister wasm (deployable)" "3 min first run, most of it waiting for the suite build, 10 s later" scripts/build.sh
step "canister wasm (canbench)" "15 s first run, 1 s later" canbench_wasm
step_wait "suite build"
step "suite run ($scale scale)" "3 min at full scale, 1 min at CI scale" \
  target/release/bench-suite run --scale "$scale" --out bench \
  --peer-canbench-wasm target/canister/vfs_canister_canbench.wasm --peer-wasm target/canister/vfs_canister.wasm
echo
steps_summary
