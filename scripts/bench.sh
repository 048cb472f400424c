#!/usr/bin/env bash
# The main job: builds both canister wasms and runs the benchmark suite on the offline engine
# (wasmtime with the IC's metering), writing bench/REPORT.md, bench/results.json and bench/*.svg.
# Usage: scripts/bench.sh [full|ci]   (default full: the scale of the ic-rusqlite users/orders
#        benchmark, 100k users and 1M orders)
set -euo pipefail
cd "$(dirname "$0")/.."

scale=${1:-full}
case "$scale" in
  full) divisor=1 ;;
  ci)   divisor=100 ;;
  *) echo "usage: $0 [full|ci]" >&2; exit 2 ;;
esac

scripts/setup.sh
scripts/build.sh
BENCH_SCALE_DIVISOR=$divisor scripts/build.sh canbench
cargo run --release -p bench_suite -- run --scale "$scale" --out bench
