#!/usr/bin/env python3
"""The tables of bench/peer_vfs.md from the two canbench results files: the reference canister's
(canbench_results.offline.yml, scripts/canbench.sh) and the peer's on ic-sqlite-vfs
(canbench_results.vfs.offline.yml, CANBENCH_CFG_FILE=canbench.vfs.offline.yml scripts/canbench.sh),
both engine: offline (wasmtime, IC metering), both at CI scale (BENCH_SCALE_DIVISOR=100: only the
users_orders_* row counts depend on it).

Usage: scripts/peer_vfs_table.py [REFERENCE_YML] [PEER_YML]
"""

import re
import sys


def results(path):
    """bench name -> total instructions (the `total:` block's)."""
    out = {}
    bench = None
    in_total = False
    for line in open(path):
        m = re.match(r"^  (\w+):$", line)
        if m:
            bench, in_total = m.group(1), False
            continue
        if re.match(r"^    total:$", line):
            in_total = True
            continue
        m = re.match(r"^      instructions: (\d+)", line)
        if m and bench and in_total and bench not in out:
            out[bench] = int(m.group(1))
    return out


def main():
    ref_path = sys.argv[1] if len(sys.argv) > 1 else "canbench_results.offline.yml"
    peer_path = sys.argv[2] if len(sys.argv) > 2 else "canbench_results.vfs.offline.yml"
    ref, peer = results(ref_path), results(peer_path)

    print("Instructions per write, users/orders inserts on the fixture (10,000 users, 20,000 orders,")
    print("two indexes); engine: offline (wasmtime, IC metering).")
    print()
    print("| N | (a) one call per write: ic-rusqlite | (a) ic-sqlite-vfs | (b) one transaction: ic-rusqlite (queue + flush) | (b) ic-sqlite-vfs (client batch) |")
    print("|---:|---:|---:|---:|---:|")
    for n in [1, 10, 100, 1000, 10000]:
        cells = []
        for name in [f"unbatched_insert_{n}", f"batched_insert_{n}"]:
            for r in [ref, peer]:
                cells.append(f"{r[name] / n:,.0f}" if name in r else "n/a")
        print(f"| {n:,} | {cells[0]} | {cells[1]} | {cells[2]} | {cells[3]} |")
    print()
    print("The same for updates of an order's amount and deletes of a user's orders (2 per user):")
    print()
    print("| op | N | (a) ic-rusqlite | (a) ic-sqlite-vfs | (b) ic-rusqlite | (b) ic-sqlite-vfs |")
    print("|---|---:|---:|---:|---:|---:|")
    for op in ["update", "delete"]:
        for n in [1, 10, 100, 1000, 10000]:
            cells = []
            for name in [f"unbatched_{op}_{n}", f"batched_{op}_{n}"]:
                for r in [ref, peer]:
                    cells.append(f"{r[name] / n:,.0f}" if name in r else "n/a")
            print(f"| {op} | {n:,} | {' | '.join(cells)} |")
    print()
    print("Per write, other paths of 10,000 or 1,000 inserts in one transaction:")
    print()
    print("| bench | ic-rusqlite | ic-sqlite-vfs |")
    print("|---|---:|---:|")
    rows = [
        ("floor_insert_10000", 10000, "the same INSERT 10,000 times, cached statement, nothing else"),
        ("breakdown_prepare_cached_10000", 10000, "ic-rusqlite: prepare_cached + SqlValue per op (no coalescing)"),
        ("breakdown_execute_batch_10000", 10000, "ic-rusqlite: batch_core's executor (coalesces inserts into multi-row INSERTs)"),
        ("client_batch_packed_1000", 1000, "execute_batch_packed's handler, unkeyed"),
    ]
    for name, n, what in rows:
        cells = [f"{r[name] / n:,.0f}" if name in r else "n/a" for r in [ref, peer]]
        print(f"| `{name}` ({what}) | {cells[0]} | {cells[1]} |")
    print()
    print("The nine users/orders benchmarks of ic-rusqlite (CI scale: 1,000 users, 10,000 orders), total instructions:")
    print()
    print("| bench | ic-rusqlite | ic-sqlite-vfs | ic-sqlite-vfs / ic-rusqlite |")
    print("|---|---:|---:|---:|")
    for name in sorted(n for n in ref if n.startswith("users_orders_")):
        a, b = ref.get(name), peer.get(name)
        ratio = f"{b / a:.2f}" if a and b else "n/a"
        print(f"| `{name}` | {a:,} | {b:,} | {ratio} |" if b else f"| `{name}` | {a:,} | n/a | n/a |")


if __name__ == "__main__":
    main()
