#!/usr/bin/env bash
# A map for reviewers, not a gate: for each crate under src/ and examples/, its 10 longest
# functions (lines, name, file:line) and the pairs of its files that import each other.
# Arguments: crate directory names to limit the map to (e.g. pocket_ic_server). Exits 0.
cd "$(dirname "$0")/.." || exit 0
python3 scripts/structure.py . "$@" || true
exit 0
