#!/usr/bin/env bash
# What lowers a write's bill: builds of the reference canister that differ from it in one setting
# (a pragma, the statement cache's capacity), each measured against the reference under both
# metering profiles (bench-suite levers) -> bench/levers.md.
# Usage: scripts/levers.sh                    -> every lever below, each canister holding the small fixture
#        scripts/levers.sh SETTING=VALUE ...  -> those (a pragma of bench_api::schema::PRAGMAS, or statement_cache)
#        scripts/levers.sh --full-scale [SETTING=VALUE ...]
#                                             -> the same, each canister holding the full-scale fixture (100,000
#                                                users, 1,000,000 orders) -> bench/levers_full_scale.md
# The reference (journal_mode=PERSIST, locking_mode=EXCLUSIVE, synchronous=NORMAL, page_size=4096,
# temp_store=MEMORY, cache_size=1000000, a statement cache of 64) is what the suite measures; the
# journal modes other than PERSIST are comparisons, not candidates.
set -euo pipefail
cd "$(dirname "$0")/.."
# Each build names its one setting; none inherited from the caller's environment.
for v in "${!BENCH_LEVER_@}"; do unset "$v"; done

out=bench/levers.md
scale=()
if [ "${1:-}" = --full-scale ]; then
  shift
  out=bench/levers_full_scale.md
  scale=(--full-scale)
fi
levers=("$@")
if [ ${#levers[@]} -eq 0 ]; then
  levers=(
    cache_size=10 cache_size=100 cache_size=-2000 cache_size=1000 cache_size=10000
    page_size=1024 page_size=8192 page_size=16384 page_size=65536
    statement_cache=16
    synchronous=OFF synchronous=FULL
    journal_mode=TRUNCATE journal_mode=DELETE journal_mode=MEMORY journal_mode=WAL journal_mode=OFF
    locking_mode=NORMAL
  )
fi

scripts/build.sh
mkdir -p target/levers
wasms=()
for lever in "${levers[@]}"; do
  setting=${lever%%=*}
  value=${lever#*=}
  case "$setting" in
    journal_mode|synchronous|page_size|locking_mode|temp_store|cache_size|statement_cache) ;;
    *) echo "levers: unknown setting '$setting' in '$lever'" >&2; exit 2 ;;
  esac
  echo "levers: building $lever" >&2
  env "BENCH_LEVER_${setting^^}=$value" scripts/build.sh lever >&2
  cp target/canister/bench_canister_lever.wasm "target/levers/$lever.wasm"
  wasms+=("target/levers/$lever.wasm")
done

cargo build --release -p bench_suite
{
  echo "# Levers: one setting changed, measured against the reference"
  echo
  target/release/bench-suite levers "${scale[@]}" "${wasms[@]}"
} > "$out.new"
mv "$out.new" "$out"
echo "levers: wrote $out" >&2
