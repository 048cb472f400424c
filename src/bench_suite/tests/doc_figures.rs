//! Every measured figure a hand-written doc quotes is checked: `bench-suite doc-figures` over the
//! repository lists no unchecked figure and no stale generated block. The generated blocks'
//! commands run from the repository's root through the binary cargo built for this test, against
//! the committed `bench/`.
//!
//! When a change moves the committed results, the listing names each stale block; rewrite them
//! all with `target/release/bench-suite doc-figures --write`.

use std::path::Path;
use std::process::Command;

#[test]
fn no_figure_in_a_hand_written_doc_is_unchecked() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out = Command::new(env!("CARGO_BIN_EXE_bench-suite"))
        .arg("doc-figures")
        .current_dir(&root)
        .output()
        .unwrap();
    let listing = String::from_utf8(out.stdout).unwrap();
    let failing: Vec<&str> = listing
        .lines()
        .filter(|l| l.ends_with("— unchecked") || l.contains("— stale ("))
        .collect();
    assert!(
        out.status.success() && failing.is_empty(),
        "bench-suite doc-figures failed ({}): {}\n{}\nMove each figure into a generated block, link \
         to its generated home, or add a defined value to doc_figures::constants; rewrite stale \
         blocks with `bench-suite doc-figures --write`.",
        out.status,
        String::from_utf8_lossy(&out.stderr),
        failing.join("\n")
    );
    // The listing is not vacuous: it found the README's estimate block and the constants.
    assert!(
        listing
            .lines()
            .any(|l| l.starts_with("README.md:") && l.contains("checked (`bench-suite estimate")),
        "{listing}"
    );
    assert!(
        listing.lines().any(|l| l.contains("— constant (")),
        "{listing}"
    );
}
