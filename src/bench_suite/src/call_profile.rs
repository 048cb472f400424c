//! Where a call's instructions go: exact per-function profiles of the client calls (the engine's
//! profiler, `src/offline_engine/PROFILING.md`), each function's self instructions put in one
//! part of the call. The parts of a call add up to its performance counter exactly.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The parts of a call, in report order.
pub const PARTS: [&str; 7] = [
    "SQLite",
    "file system in stable memory",
    "batch_core",
    "argument and reply encoding",
    "memory allocator",
    "System API (ic0)",
    "CDK and canister code",
];

/// One profiled call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallProfile {
    /// The method.
    pub method: String,
    /// Made on the full-scale fixture (100,000 users, 1,000,000 orders) rather than the
    /// 10,000-user one.
    #[serde(default)]
    pub full_scale: bool,
    /// Ops the call carried.
    pub ops: u64,
    /// Instructions (the performance counter at the end of the message).
    pub instructions: u64,
    /// Instructions of each of [`PARTS`], in that order; they add up to `instructions`.
    pub parts: Vec<u64>,
    /// Self instructions by function (for the report's comparison of two fixtures; not kept in
    /// `results.json`).
    #[serde(skip)]
    pub self_by_function: BTreeMap<String, u64>,
}

/// The part of a stack: the innermost frame that names one, from the leaf up; the canister's
/// own code if none does.
pub fn part_of(stack: &[&str]) -> usize {
    for frame in stack.iter().rev() {
        let part = if frame.starts_with("ic0.") {
            Some(5)
        } else if frame.starts_with("stable_fs::") || frame.starts_with("ic_wasi_polyfill") {
            Some(1)
        } else if frame.starts_with("sqlite3") {
            Some(0)
        } else if frame.starts_with("candid::")
            || frame.starts_with("bench_api::wire")
            || frame.starts_with("bench_api::packed")
            || frame.starts_with("<candid::")
            || frame.starts_with("serde::")
        {
            Some(3)
        } else if frame.starts_with("batch_core::") || frame.starts_with("<batch_core::") {
            Some(2)
        } else if frame.starts_with("dlmalloc")
            || frame.starts_with("dlfree")
            || frame.starts_with("dlrealloc")
            || frame.starts_with("__rust_alloc")
            || frame.starts_with("__rust_dealloc")
            || frame.starts_with("__rust_realloc")
            || frame.starts_with("__rustc::__rust_")
            || frame.starts_with("__rdl_")
            || frame.starts_with("__rustc::__rdl_")
            || *frame == "malloc"
            || *frame == "free"
            || *frame == "realloc"
            || *frame == "calloc"
        {
            Some(4)
        } else {
            None
        };
        if let Some(p) = part {
            return p;
        }
    }
    6
}

/// The parts of a profile given as folded stacks (`outer;inner;leaf <self instructions>`).
pub fn parts_of_folded(folded: &str) -> Vec<u64> {
    let mut parts = vec![0u64; PARTS.len()];
    for (stack, count) in folded_stacks(folded) {
        let frames: Vec<&str> = stack.split(';').collect();
        parts[part_of(&frames)] += count;
    }
    parts
}

/// The stacks of folded output (`outer;inner;leaf <self instructions>`) with their counts;
/// lines of another form are skipped.
fn folded_stacks(folded: &str) -> impl Iterator<Item = (&str, u64)> {
    folded.lines().filter_map(|line| {
        let (stack, count) = line.rsplit_once(' ')?;
        Some((stack, count.parse().ok()?))
    })
}

/// Self instructions by function (the leaf frame of each folded stack).
pub fn self_by_function(folded: &str) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for (stack, count) in folded_stacks(folded) {
        let leaf = stack.rsplit(';').next().unwrap_or(stack);
        *out.entry(leaf.to_string()).or_insert(0) += count;
    }
    out
}

/// The functions whose self instructions per op grew most from `small` to `large` (the same
/// call on two fixtures): (function, per op on `small`, per op on `large`), at most `n`.
pub fn growth(small: &CallProfile, large: &CallProfile, n: usize) -> Vec<(String, f64, f64)> {
    let per_op = |p: &CallProfile, f: &str| {
        p.self_by_function.get(f).copied().unwrap_or(0) as f64 / p.ops.max(1) as f64
    };
    let mut rows: Vec<(String, f64, f64)> = small
        .self_by_function
        .keys()
        .chain(large.self_by_function.keys())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .map(|f| (f.clone(), per_op(small, f), per_op(large, f)))
        .collect();
    rows.sort_by(|a, b| (b.2 - b.1).total_cmp(&(a.2 - a.1)).then(a.0.cmp(&b.0)));
    rows.truncate(n);
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn growth_ranks_functions_by_their_increase_per_op() {
        let profile = |ops: u64, folded: &str| CallProfile {
            method: "m".into(),
            full_scale: false,
            ops,
            instructions: 0,
            parts: vec![],
            self_by_function: self_by_function(folded),
        };
        let small = profile(10, "m;a 100\nm;b 50\nm;a;c 10\nbad\n");
        let large = profile(20, "m;a 200\nm;b 400\nm;d 60\n");
        assert_eq!(small.self_by_function["a"], 100);
        assert_eq!(small.self_by_function["c"], 10);
        // b: 5 -> 20 per op; d: 0 -> 3; a: 10 -> 10; c: 1 -> 0.
        assert_eq!(
            growth(&small, &large, 3),
            [
                ("b".to_string(), 5.0, 20.0),
                ("d".to_string(), 0.0, 3.0),
                ("a".to_string(), 10.0, 10.0)
            ]
        );
    }

    #[test]
    fn the_innermost_named_frame_decides() {
        // SQLite's allocations are the allocator's; its file writes the file system's.
        assert_eq!(part_of(&["m", "sqlite3_step", "sqlite3VdbeExec"]), 0);
        assert_eq!(
            part_of(&["m", "sqlite3_step", "sqlite3Malloc", "dlmalloc"]),
            4
        );
        assert_eq!(
            part_of(&[
                "m",
                "sqlite3_step",
                "stable_fs::fs::FileSystem::write",
                "ic0.stable64_write"
            ]),
            5
        );
        assert_eq!(
            part_of(&["m", "sqlite3_step", "stable_fs::fs::FileSystem::write"]),
            1
        );
        assert_eq!(part_of(&["m", "candid::de::IDLDeserialize::new"]), 3);
        assert_eq!(
            part_of(&["m", "batch_core::executor::run_batch", "memcmp"]),
            2
        );
        assert_eq!(
            part_of(&["canister_update create_order", "ic_cdk::futures::spawn"]),
            6
        );
        assert_eq!(part_of(&[]), 6);
    }

    #[test]
    fn folded_stacks_add_up() {
        let folded = "a;sqlite3_step;x 100\na;candid::de 20\na 5\nbad line\na;ic0.msg_reply 7\n";
        let parts = parts_of_folded(folded);
        assert_eq!(parts, vec![100, 0, 0, 20, 0, 7, 5]);
        assert_eq!(parts.iter().sum::<u64>(), 132);
    }
}
