#!/usr/bin/env bash
# CI gate of the committed canbench results (canbench_results.offline.yml, CI scale, under the
# rules of PocketIC 13 and canbench 0.7.0; the same benchmarks under the replica's deterministic
# memory tracker, canbench_results.ic-dmt.offline.yml; and the peer canister's on ic-sqlite-vfs,
# canbench_results.vfs.offline.yml), as
# canbench's own CI has it: runs canbench --persist --csv --show-summary through
# offline-pocket-ic (scripts/canbench.sh) and fails if any figure moved by the noise threshold
# (2%) or more in either direction -- instructions, heap and stable-memory increases, scope
# calls -- or a benchmark was added or removed; checks that every figure equals the engine's
# direct run; then checks that --instruction-tracing writes flamegraphs. After an intended
# change: scripts/canbench.sh --persist, and commit canbench_results.offline.yml with it (the
# peer's: CANBENCH_CFG_FILE=canbench.vfs.offline.yml scripts/canbench.sh --persist).
# The committed file is the one at HEAD: run it again and it fails again until that is committed.
set -euo pipefail
cd "$(dirname "$0")/.."

# The same build as scripts/test.sh (see scripts/canbench.sh): nothing is built twice.
cargo build --release -q --workspace --all-targets
# It compares with canbench_results.offline.yml as committed at HEAD (canbench --persist rewrites
# the working tree's copy), and writes a short Markdown summary for the pull request.
status=0
target/release/bench-suite canbench-check --config canbench.offline.yml --runner scripts/canbench.sh \
  --trace users_orders_select --summary "${PR_SUMMARY_DIR:-target/pr-summary}/canbench.md" "$@" || status=1
# The same benchmarks metered by the replica's deterministic memory tracker (METERING.md §10):
# offline-pocket-ic reads the profile from OFFLINE_ENGINE_METERING, which canbench-check passes on.
OFFLINE_ENGINE_METERING=ic-dmt-0441fbd7 CANBENCH_CFG_FILE=canbench.ic-dmt.offline.yml \
  target/release/bench-suite canbench-check --config canbench.ic-dmt.offline.yml --runner scripts/canbench.sh \
  --summary "${PR_SUMMARY_DIR:-target/pr-summary}/canbench-ic-dmt.md" "$@" || status=1
# The same gate for the peer canister on ic-sqlite-vfs (canisters/vfs_canister): canbench reads
# canbench.vfs.offline.yml (CANBENCH_CFG_FILE) and its results canbench_results.vfs.offline.yml.
# Its canbench wasm is built first at the scale of the committed results (BENCH_SCALE_DIVISOR=100,
# as scripts/canbench.sh runs canbench's build_cmd), so a build failure names itself here.
BENCH_SCALE_DIVISOR=100 scripts/build_vfs.sh canbench
CANBENCH_CFG_FILE=canbench.vfs.offline.yml target/release/bench-suite canbench-check \
  --config canbench.vfs.offline.yml --runner scripts/canbench.sh \
  --summary "${PR_SUMMARY_DIR:-target/pr-summary}/canbench-vfs.md" "$@" || status=1
exit "$status"
