//! What the README shows is what its commands print: every `sh` block of the root README that
//! runs `target/release/bench-suite` and is followed by a `text` block (the README's "prints")
//! is run here, from the repository's root against the committed `bench/`, and its output must
//! equal the block, line for line.
//!
//! The binary is the one cargo built for this test (`CARGO_BIN_EXE_bench-suite`), the same
//! program the README's path names. When a change moves the committed results (a report
//! regenerated, a baseline changed), this test names the README block to copy again.

use std::path::Path;
use std::process::Command;

/// A command of the README and the output it says the command prints.
struct Shown {
    line: usize,
    args: Vec<String>,
    output: String,
}

/// The README's `bench-suite` commands that are followed by their output.
fn shown_commands(readme: &str) -> Vec<Shown> {
    let lines: Vec<&str> = readme.lines().collect();
    let mut shown = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        if lines[i] != "```sh" {
            i += 1;
            continue;
        }
        let start = i;
        let end = (start + 1..lines.len())
            .find(|&j| lines[j] == "```")
            .unwrap_or_else(|| panic!("README.md:{}: an unclosed sh block", start + 1));
        let command = lines[start + 1..end].join(" ");
        i = end + 1;
        let Some(rest) = command.strip_prefix("target/release/bench-suite ") else {
            continue;
        };
        // The output block, if any, follows within a few lines of prose ("prints ...").
        let Some(text) = (end + 1..(end + 6).min(lines.len())).find(|&j| lines[j] == "```text")
        else {
            continue;
        };
        if (end + 1..text).any(|j| lines[j].starts_with("```")) {
            continue;
        }
        let close = (text + 1..lines.len())
            .find(|&j| lines[j] == "```")
            .unwrap_or_else(|| panic!("README.md:{}: an unclosed text block", text + 1));
        shown.push(Shown {
            line: start + 2,
            args: rest.split_whitespace().map(str::to_owned).collect(),
            output: lines[text + 1..close].join("\n"),
        });
        i = close + 1;
    }
    shown
}

#[test]
fn every_bench_suite_command_the_readme_shows_prints_what_it_shows() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let shown = shown_commands(&readme);
    assert!(
        shown
            .iter()
            .any(|s| s.args.first().map(String::as_str) == Some("estimate")),
        "the README shows `bench-suite estimate` with its output ({} commands with output found)",
        shown.len()
    );
    for s in &shown {
        let out = Command::new(env!("CARGO_BIN_EXE_bench-suite"))
            .args(&s.args)
            .current_dir(&root)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "README.md:{}: `bench-suite {}` failed: {}",
            s.line,
            s.args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        );
        let printed = String::from_utf8(out.stdout).unwrap();
        let printed = printed.trim_end();
        if printed != s.output {
            let first = printed
                .lines()
                .zip(s.output.lines())
                .position(|(a, b)| a != b)
                .unwrap_or(printed.lines().count().min(s.output.lines().count()));
            panic!(
                "README.md:{}: `bench-suite {}` prints something else than the README shows \
                 (first difference at line {} of the output). Copy its output into the README's \
                 text block:\n{printed}",
                s.line,
                s.args.join(" "),
                first + 1
            );
        }
    }
}

#[test]
fn a_changed_output_is_noticed() {
    // The parser finds a command and its block, so the comparison above is not vacuous.
    let readme = "intro\n\n```sh\ntarget/release/bench-suite estimate --batch 10\n```\n\nprints:\n\n```text\nline one\nline two\n```\n\n```sh\nscripts/test.sh\n```\n";
    let shown = shown_commands(readme);
    assert_eq!(shown.len(), 1);
    assert_eq!(shown[0].args, ["estimate", "--batch", "10"]);
    assert_eq!(shown[0].output, "line one\nline two");
    assert_eq!(shown[0].line, 4);
}
