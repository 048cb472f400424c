#!/usr/bin/env bash
# The main job: installs the tools it needs, builds both canister wasms and the suite, and runs
# the benchmark suite on the offline engine (wasmtime with the IC's metering), writing
# bench/REPORT.md, bench/results.json and bench/*.svg|png; it ends with the summary table.
# Usage: scripts/bench.sh [full|ci]   (default full: the scale of the ic-rusqlite users/orders
#        benchmark, 100k users and 1M orders)
# A first run on a fresh machine spends most of its time installing tools (cargo install) and
# compiling (wasmtime, SQLite); later runs only the suite. It prints where the time went.
set -euo pipefail
cd "$(dirname "$0")/.."

scale=${1:-full}
case "$scale" in
  full) divisor=1 ;;
  ci)   divisor=100 ;;
  *) echo "usage: $0 [full|ci]" >&2; exit 2 ;;
esac

t0=$SECONDS
scripts/setup.sh
t1=$SECONDS
scripts/build.sh
BENCH_SCALE_DIVISOR=$divisor scripts/build.sh canbench
t2=$SECONDS
cargo build --release -p bench_suite
t3=$SECONDS
target/release/bench-suite run --scale "$scale" --out bench
t4=$SECONDS
echo
echo "bench.sh: $((t4 - t0)) s in all: tools $((t1 - t0)) s, canister wasms $((t2 - t1)) s, suite build $((t3 - t2)) s, suite run $((t4 - t3)) s"
