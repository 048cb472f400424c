#!/usr/bin/env bash
# Counts the lines of the two canisters' code that the issue's targets measure:
#   the example canisters' batching glue: examples/notes_canister/src/lib.rs and
#     examples/todo_canister/src/lib.rs between their "---- glue" and "---- end of glue" lines
#     (all lines, blank and comments included);
#   the reference canister's non-bench code: src/bench_canister/src/*.rs except benches.rs.
set -euo pipefail
cd "$(dirname "$0")/.."

for example in notes_canister todo_canister; do
  glue=$(sed -n '/---- glue/,/---- end of glue/p' "examples/$example/src/lib.rs" | wc -l)
  echo "example glue (examples/$example/src/lib.rs, glue section): $glue lines"
done
reference=$(find src/bench_canister/src -name '*.rs' ! -name benches.rs -print0 | xargs -0 cat | wc -l)
echo "reference canister, non-bench code (src/bench_canister/src/*.rs without benches.rs): $reference lines"
