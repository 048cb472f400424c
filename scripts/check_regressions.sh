#!/usr/bin/env bash
# CI instruction check: runs the reduced-scale suite (every canbench bench at
# BENCH_SCALE_DIVISOR=100, plus the message-level runs) on the offline engine and fails when any
# benchmark's instructions moved by 2% or more in either direction from the committed baseline,
# or a benchmark was added or removed, printing the table of changes.
#   scripts/check_regressions.sh           check against bench/baseline-ci.json
#   scripts/check_regressions.sh --update  rewrite the baseline (commit it with the change that moved it)
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/build.sh
BENCH_SCALE_DIVISOR=100 scripts/build.sh canbench
# The same build as scripts/test.sh: the same features, so nothing is built twice.
cargo build --release -q --workspace --all-targets
if [ "${1:-}" = "--update" ]; then
  target/release/bench-suite update-baseline --baseline bench/baseline-ci.json
else
  # Also a short Markdown summary a CI job can post on the pull request.
  target/release/bench-suite check --baseline bench/baseline-ci.json --threshold 2 \
    --summary "${PR_SUMMARY_DIR:-target/pr-summary}/instructions.md"
fi
