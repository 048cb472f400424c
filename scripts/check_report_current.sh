#!/usr/bin/env bash
# Fails when the committed report is not this commit's: the deployable wasm that scripts/build.sh
# builds from HEAD must be the one whose run wrote bench/results.json (and bench/REPORT.md), as
# canbench's CI fails on stale committed results. Every message figure of the report is metered
# on that wasm; a commit that changes it reruns the main job (scripts/bench.sh) and commits its
# outputs. Run by scripts/test.sh after the canister build.
set -euo pipefail
cd "$(dirname "$0")/.."

wasm=target/canister/bench_canister.wasm
built=$(sha256sum "$wasm" | cut -d' ' -f1)
reported=$(python3 -c 'import json; print(json.load(open("bench/results.json"))["deployable_wasm"]["sha256"])')
if [ "$built" != "$reported" ]; then
  echo "bench/results.json was measured on a deployable wasm of sha256 $reported;" >&2
  echo "this commit builds $built ($wasm): rerun scripts/bench.sh and commit bench/." >&2
  exit 1
fi
echo "bench/results.json is this commit's report (deployable wasm sha256 $built)"
