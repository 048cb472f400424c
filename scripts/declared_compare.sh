#!/usr/bin/env bash
# The generic packed format against the reference canister's hand-written one, and the Candid
# keyed form beside them: the same keyed batches of N create_order writes (N = 1,000 and
# 10,000) run by the canbench benches of src/bench_canister/src/declared.rs (engine: offline
# (wasmtime, IC metering)), and the cycles per write on a 13-node subnet of one ingress message
# carrying the batch: 5 M to execute + 1.2 M to receive + 2,000 per argument byte (the request
# and 12 bytes of Candid blob framing for the packed forms) + 1 per instruction of the batch.
# Prints a Markdown table. Usage: scripts/declared_compare.sh (after cargo build --release -p offline_engine)
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/build.sh declared >/dev/null
wasm=target/canister/bench_canister_declared.wasm
engine=target/release/offline-engine
instructions() { "$engine" profile-bench "$wasm" "$1" --top 1 | sed -n 's/^canbench total: \([0-9]*\) instructions.*/\1/p'; }
echo "| N | form | instructions | request bytes | cycles per write | vs hand-written |"
echo "|---:|---|---:|---:|---:|---:|"
for n in 1000 10000; do
  hex=$(printf '%016x' "$n" | sed 's/\(..\)/\1 /g' | awk '{for (i = NF; i > 0; i--) printf "%s", $i}')
  reply=$("$engine" call "$wasm" __declared_request_bytes --query --arg-hex "4449444c000178$hex" --reply-hex \
    | sed -n 's/^reply: //p')
  bytes=$(python3 -c "import sys,struct; b=bytes.fromhex('$reply')[-24:]; print(*struct.unpack('<3Q', b))")
  read -r hand generic candid <<<"$bytes"
  base=""
  for form in hand_written_packed declared_packed declared_candid; do
    case $form in
      hand_written_packed) arg=$((hand + 12)); label="hand-written packed (bench_api::packed)" ;;
      declared_packed) arg=$((generic + 12)); label="generic packed (declared)" ;;
      declared_candid) arg=$candid; label="Candid keyed (declared)" ;;
    esac
    ins=$(instructions "${form}_keyed_$n")
    cycles=$(( (5000000 + 1200000 + 2000 * arg + ins) / n ))
    [ -z "$base" ] && base=$cycles
    vs=$(python3 -c "print(f'{($cycles / $base - 1) * 100:+.2f} %')")
    echo "| $n | $label | $ins | $arg | $cycles | $vs |"
  done
done
