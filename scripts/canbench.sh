#!/usr/bin/env bash
# Runs the real canbench (0.7.0, installed by scripts/setup.sh) on canbench.yml's benchmarks
# through offline-pocket-ic: PocketIC's REST protocol served by the offline engine, so nothing is
# downloaded. Results: canbench_results.offline.yml (canbench.offline.yml), never canbench's own
# canbench_results.yml. Arguments go to canbench: a pattern, --persist, --csv, --show-summary,
# --instruction-tracing, --noise-threshold, ...
# Scale: BENCH_SCALE_DIVISOR (default 100, the CI scale of the committed results; 1 = full scale).
set -euo pipefail
cd "$(dirname "$0")/.."

command -v canbench >/dev/null || { echo "canbench not found: run scripts/setup.sh" >&2; exit 1; }
# The whole workspace with its tests, as scripts/test.sh builds it: the same features, so a build
# that ran already is not repeated (a narrower build would rebuild every shared dependency).
cargo build --release -q --workspace --all-targets
export BENCH_SCALE_DIVISOR="${BENCH_SCALE_DIVISOR:-100}"
export CANBENCH_CFG_FILE="${CANBENCH_CFG_FILE:-canbench.offline.yml}"
# Say where the figures come from before canbench prints them (it calls its runtime "PocketIC").
echo "canbench.sh: canbench runs on offline-pocket-ic (target/release/offline-pocket-ic), PocketIC's protocol served by the offline engine: every figure below is engine: offline (wasmtime, IC metering), not a PocketIC's." >&2
exec canbench --runtime-path target/release/offline-pocket-ic --no-runtime-integrity-check "$@"
