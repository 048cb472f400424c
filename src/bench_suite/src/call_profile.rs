//! Where a call's instructions go: exact per-function profiles of the client calls (the engine's
//! profiler, `src/offline_engine/PROFILING.md`), each function's self instructions put in one
//! part of the call. The parts of a call add up to its performance counter exactly.

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
    for line in folded.lines() {
        let Some((stack, count)) = line.rsplit_once(' ') else {
            continue;
        };
        let Ok(count) = count.parse::<u64>() else {
            continue;
        };
        let frames: Vec<&str> = stack.split(';').collect();
        parts[part_of(&frames)] += count;
    }
    parts
}

#[cfg(test)]
mod tests {
    use super::*;

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
