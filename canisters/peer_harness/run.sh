#!/usr/bin/env bash
# Builds the two harnesses of bench/peer_reconcile.md and runs their benches on the offline
# engine (offline (wasmtime, IC metering)). From the repository root:
#   cargo build --release -p offline_engine   # once
#   canisters/peer_harness/run.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
T=target/peer_harness
E=target/release/offline-engine
(cd canisters/peer_harness/rusqlite_kv && cargo build --release --target wasm32-wasip1 --target-dir ../../../$T)
wasi2ic $T/wasm32-wasip1/release/peer_rusqlite_kv.wasm $T/rusqlite_kv_canbench.wasm >/dev/null
(cd canisters/peer_harness/vfs_kv && cargo build --release --target wasm32-unknown-unknown --target-dir ../../../$T --features bench-profile)
cp $T/wasm32-unknown-unknown/release/peer_vfs_kv.wasm $T/vfs_kv_canbench.wasm
for b in kv_insert_one_row kv_insert_only_1000_autocommit kv_insert_only_1000_one_tx \
         kv_insert_only_5000_autocommit kv_insert_only_5000_one_tx \
         kv_append_insert_5000_1000_autocommit kv_append_insert_5000_1000_one_tx; do
  echo "ic-rusqlite $b: $($E profile-bench $T/rusqlite_kv_canbench.wasm $b --top 1 | grep 'canbench total')"
done
for b in kv_insert_only_1000_one_tx kv_insert_only_1000_one_tx_stack_keys kv_insert_only_5000_one_tx \
         kv_insert_only_5000_one_tx_stack_keys kv_append_insert_5000_1000_one_tx \
         kv_append_insert_5000_1000_one_tx_stack_keys kv_insert_only_1000_per_row_tx \
         kv_insert_only_1000_per_row_tx_cached; do
  echo "ic-sqlite-vfs $b: $($E profile-bench $T/vfs_kv_canbench.wasm $b --top 1 | grep 'canbench total')"
done
# Stable memory after their bench_reset(1000): replies are Candid hex (nat64 little-endian).
$E call $T/rusqlite_kv_canbench.wasm reset_1000_stable_bytes --arg-hex 4449444c0000 --reply-hex | grep reply
$E call $T/vfs_kv_canbench.wasm reset_1000_raw_and_virtual_bytes --arg-hex 4449444c0000 --reply-hex | grep reply
