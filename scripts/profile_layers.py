#!/usr/bin/env python3
"""Where a profiled benchmark's instructions go, by layer.

Reads the folded stacks `offline-engine profile-bench <wasm> <bench> --folded FILE` writes
(one line per stack: frames joined by ';', then the instructions of the innermost frame), keeps
the stacks that pass through ROOT (the frame the benchmark measures, e.g. `vfs_canister::write_now`),
and splits their instructions into layers. Each instruction counts once, in the first layer
that matches its stack:

  journal     under SQLite's journal code: the copy of each page before its first change
              (pagerAddPageToRollbackJournal, memjrnl* of an in-memory journal, the statement
              sub-journal), the journal's header, sync and end of transaction, with whatever
              file layer and allocator work they cause
  file layer  under the VFS's I/O (SQLite's unix VFS -> WASI -> ic-wasi-polyfill -> stable-fs on
              the reference; the icstable VFS, its heap overlay and the commit that publishes it
              to stable memory with a superblock on ic-sqlite-vfs), outside the journal
  allocator   malloc/free/realloc and the Rust allocator, elsewhere
  sqlite      the rest of SQLite (parser, VDBE, B-tree, pager, functions)
  canister    the rest: the canister's Rust (batch_core or the facade, Candid, canbench)

plus the system calls among them (ic0.stable64_*, ic0.time), and the top functions by self
instructions. Usage: scripts/profile_layers.py FOLDED ROOT [--exclude FRAME] [--per N] [--top K]
(--exclude drops the stacks through FRAME, e.g. the fixture a benchmark builds under ROOT).
"""

import argparse
import collections
import re

JOURNAL = re.compile(
    r"^(pagerAddPageToRollbackJournal|writeJournalHdr|syncJournal|zeroJournalHdr|"
    r"pager_end_transaction|pager_open_journal|pagerOpenSavepoint|subjournalPage|"
    r"subjournalPageIfRequired|memjrnl\w*|journalHdrOffset|readJournalHdr|pager_playback\w*|"
    r"pagerPlaybackSavepoint|pager_truncate|sqlite3JournalOpen|sqlite3JournalCreate)$"
)
FILE_LAYER = re.compile(
    r"^(unix[A-Z]\w*|robust_open|seekAndWrite\w*|seekAndRead|osOpen|osClose|osFstat|"
    r"osFtruncate|osWrite|osRead|osPwrite|osPread|osUnlink|osAccess|osStat|osGetcwd|"
    r"sqlite3Os\w*|write|read|pwrite|pread|__lseek|lseek|fsync|fdatasync|ftruncate|open|close|"
    r"__wasi_\w*|__ic_custom_\w*)$"
    r"|^stable_fs::|^ic_wasi_polyfill::|^<stable_fs::"
    r"|^ic_sqlite_vfs::sqlite_vfs::(file|stable_blob|overlay|vfs)::|^ic_sqlite_vfs::stable::"
    r"|^<ic_sqlite_vfs::stable::"
)
ALLOCATOR = re.compile(
    r"^(malloc|free|realloc|calloc|dlmalloc|dlfree|dlrealloc|dlcalloc|__rustc::__\w+|"
    r"sqlite3_malloc\w*|sqlite3_free|sqlite3_realloc\w*|sqlite3Malloc\w*|sqlite3Mem(Malloc|Free|"
    r"Realloc|Size|Roundup)|sqlite3DbMalloc\w*|sqlite3DbFree\w*|sqlite3DbNNFreeNN|"
    r"sqlite3DbRealloc\w*|dbMallocRawFinish|dbReallocFinish|mallocWithAlarm|measureAllocationSize)$"
    r"|dlmalloc"
)
SQLITE = re.compile(r"^(sqlite3\w*|[a-z][A-Za-z0-9_]*)$")


def strip(frame):
    return re.sub(r" \[\d+\]$", "", frame)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folded")
    parser.add_argument("root")
    parser.add_argument("--exclude", help="drop the stacks through a frame containing this")
    parser.add_argument("--per", type=int, default=1, help="divide by this many writes")
    parser.add_argument("--top", type=int, default=12)
    args = parser.parse_args()

    layers = collections.Counter()
    calls = collections.Counter()
    self_cost = collections.Counter()
    total = 0
    for line in open(args.folded):
        stack, n = line.rstrip("\n").rsplit(" ", 1)
        n = int(n)
        frames = [strip(f) for f in stack.split(";")]
        if args.root not in frames:
            continue
        if args.exclude and any(args.exclude in f for f in frames):
            continue
        below = frames[frames.index(args.root) + 1 :]
        leaf = frames[-1]
        total += n
        self_cost[leaf] += n
        if leaf.startswith("ic0."):
            calls[leaf] += n
        if any(JOURNAL.search(f) for f in below):
            layers["journal"] += n
        elif any(FILE_LAYER.search(f) for f in below):
            layers["file layer"] += n
        elif ALLOCATOR.search(leaf):
            layers["allocator"] += n
        elif any(SQLITE.search(f) and not f.startswith("ic0.") for f in below):
            layers["sqlite"] += n
        else:
            layers["canister"] += n

    per = args.per
    print(f"{args.root}: {total:,} instructions in all, {total / per:,.0f} per write ({per:,} writes)")
    print(f"{'layer':<12} {'per write':>12} {'share':>7}")
    for name in ["journal", "file layer", "allocator", "sqlite", "canister"]:
        v = layers[name]
        print(f"{name:<12} {v / per:>12,.0f} {100 * v / max(total, 1):>6.1f}%")
    print("system calls among them:")
    for name, v in sorted(calls.items(), key=lambda kv: -kv[1]):
        print(f"  {name:<24} {v / per:>12,.0f}")
    print(f"top {args.top} functions by self instructions (per write):")
    for name, v in self_cost.most_common(args.top):
        print(f"  {v / per:>12,.0f}  {name[:110]}")


if __name__ == "__main__":
    main()
