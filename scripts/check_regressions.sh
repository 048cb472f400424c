#!/usr/bin/env bash
# CI cycle-regression check: runs every canbench benchmark at the CI scale (BENCH_SCALE_DIVISOR=100)
# on the offline engine and fails when any benchmark's instructions rise more than 2% over the
# committed baseline, printing the table of changes.
#   scripts/check_regressions.sh           check against bench/canbench_ci.offline.yml
#   scripts/check_regressions.sh --update  rewrite the baseline (commit it with the change that moved it)
set -euo pipefail
cd "$(dirname "$0")/.."

BENCH_SCALE_DIVISOR=100 scripts/build.sh canbench
args=(canbench --no-build --results-file bench/canbench_ci.offline.yml --noise-threshold 2)
if [ "${1:-}" = "--update" ]; then
  cargo run --release -q -p offline_engine -- "${args[@]}" --persist
else
  cargo run --release -q -p offline_engine -- "${args[@]}" --fail-on-regression
fi
