#!/usr/bin/env bash
# The C compiler for wasm32-unknown-unknown when ic-sqlite-vfs compiles SQLite itself (feature
# sqlite-bundled; scripts/build_vfs.sh canbench-bundled sets CC_wasm32_unknown_unknown to it): Debian's
# clang (scripts/setup.sh installs it) targeting wasm32-wasip1, with the crate's own minimal C
# headers (its c/include) first, as the crate's scripts/wasm32-unknown-unknown-cc.sh does with
# wasi-sdk. SQLite is built with SQLITE_OS_OTHER, so it calls no WASI function: the object links
# into a wasm32-unknown-unknown canister. cc passes --target=wasm32-unknown-unknown, dropped here.
set -euo pipefail

# -nostdlibinc: no system headers (the host's /usr/include is glibc's), only clang's own
# (stddef.h, limits.h, ...) and the crate's.
args=(--target=wasm32-wasip1 -nostdlibinc)
skip=0
crate_headers=()
for arg in "$@"; do
  case "$skip:$arg" in
    target:*) skip=0 ;;
    include:*)
      skip=0
      args+=("$arg")
      # The crate's build script includes <crate>/vendor/sqlite/src: its C headers are in
      # <crate>/c/include.
      case "$arg" in */vendor/sqlite/src) crate_headers=("-I${arg%/vendor/sqlite/src}/c/include") ;; esac
      ;;
    0:--target | 0:-target) skip=target ;;
    0:--target=* | 0:-target=*) ;;
    0:-I) skip=include; args+=("$arg") ;;
    0:-I*/vendor/sqlite/src)
      args+=("$arg")
      dir=${arg#-I}
      crate_headers=("-I${dir%/vendor/sqlite/src}/c/include")
      ;;
    *) args+=("$arg") ;;
  esac
done
[ "${#crate_headers[@]}" -gt 0 ] || { echo "$0: no -I<ic-sqlite-vfs>/vendor/sqlite/src among the arguments" >&2; exit 1; }
exec "${WASM32_CLANG:-clang-14}" "${crate_headers[@]}" "${args[@]}"
