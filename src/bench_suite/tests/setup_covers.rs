//! Every Rust target, binary and npm tool the scripts, the CI workflow and the tests use is
//! installed by the setup, so that a fresh machine runs both README commands.
//!
//! A machine that ran the tests before may have a target or a tool from earlier work, and then
//! nothing fails until a newcomer tries; this test reads the files instead:
//! - every Rust target triple named in a script, the workflow, a manifest or a Rust source (a
//!   `--target`, a `target/<triple>/` path, a doc line saying what a crate builds for) is in
//!   `rust-toolchain.toml`'s `targets`, which `scripts/setup.sh` adds;
//! - every command a script or `.ci/run` runs is on a fresh machine of this kind ([`FRESH`]),
//!   built by the repository (`target/...`, `scripts/...`), or installed by `scripts/setup.sh`
//!   (its `have <tool>` checks);
//! - every `npx <tool>` runs in a directory whose committed `package-lock.json` has a package
//!   providing that binary (so `npm ci` there installs it).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// What a fresh machine of this kind has before the setup runs (Debian with its base tools,
/// Rust by rustup, Node 20 with npm, Go, git), and the shell's own words.
const FRESH: &[&str] = &[
    // bash keywords and builtins
    "if",
    "then",
    "else",
    "elif",
    "fi",
    "for",
    "while",
    "until",
    "do",
    "done",
    "case",
    "esac",
    "in",
    "function",
    "select",
    "time",
    "!",
    "{",
    "}",
    "[",
    "[[",
    "]]",
    "cd",
    "echo",
    "printf",
    "exit",
    "return",
    "set",
    "shift",
    "local",
    "export",
    "source",
    ".",
    "read",
    "mapfile",
    "readarray",
    "declare",
    "test",
    "true",
    "false",
    "exec",
    "eval",
    "trap",
    "wait",
    "command",
    "type",
    "unset",
    "pushd",
    "popd",
    "kill",
    "times",
    "builtin",
    "let",
    ":",
    // Debian's base tools
    "bash",
    "sh",
    "env",
    "cat",
    "sed",
    "grep",
    "awk",
    "tr",
    "cut",
    "head",
    "tail",
    "sort",
    "uniq",
    "wc",
    "tee",
    "xargs",
    "find",
    "ls",
    "cp",
    "mv",
    "rm",
    "ln",
    "mkdir",
    "rmdir",
    "touch",
    "chmod",
    "stat",
    "date",
    "sleep",
    "basename",
    "dirname",
    "mktemp",
    "diff",
    "cmp",
    "tar",
    "gzip",
    "sha256sum",
    "realpath",
    "readlink",
    "timeout",
    "nproc",
    "seq",
    "python3",
    "apt-get",
    // the toolchains of this kind of machine
    "cargo",
    "rustup",
    "rustc",
    "node",
    "npm",
    "npx",
    "go",
    "git",
];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Files under `dir` (recursively, skipping build output and installed packages) whose name
/// ends with one of `suffixes`.
fn files_under(dir: &Path, suffixes: &[&str], out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if path.is_dir() {
            if !matches!(name.as_str(), "target" | "node_modules" | ".git") {
                files_under(&path, suffixes, out);
            }
        } else if suffixes.iter().any(|s| name.ends_with(s)) {
            out.push(path);
        }
    }
}

/// The scripts: `scripts/*.sh` and `.ci/run`.
fn scripts() -> Vec<PathBuf> {
    let mut out = vec![root().join(".ci/run")];
    files_under(&root().join("scripts"), &[".sh"], &mut out);
    out.sort();
    out
}

/// The targets `rust-toolchain.toml` lists.
fn toolchain_targets(toml: &str) -> BTreeSet<String> {
    let line = toml
        .lines()
        .find(|l| l.trim_start().starts_with("targets"))
        .expect("rust-toolchain.toml lists its targets");
    let list = line.split_once('[').and_then(|(_, r)| r.split_once(']'));
    let (list, _) = list.expect("targets = [ ... ] on one line");
    list.split(',')
        .map(|t| t.trim().trim_matches('"').to_owned())
        .filter(|t| !t.is_empty())
        .collect()
}

/// Rust target triples named in `text`: words of the form `<arch>-<vendor or os>...`.
fn triples_in(text: &str) -> BTreeSet<String> {
    const ARCHS: &[&str] = &[
        "wasm32-", "wasm64-", "x86_64-", "aarch64-", "i686-", "armv7-", "riscv64",
    ];
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '-'))
        .map(|w| w.trim_end_matches('-'))
        .filter(|w| ARCHS.iter().any(|a| w.starts_with(a)) && w.matches('-').count() >= 1)
        // npm's platform packages (`...-linux-x64`) are not Rust triples.
        .filter(|w| !w.ends_with("-x64"))
        .map(str::to_owned)
        .collect()
}

/// `line` with the text inside its quotes dropped (the quotes kept), so that a quoted
/// argument is one word and holds no separator.
fn unquoted(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut quote = None;
    for c in line.chars() {
        match quote {
            None => {
                out.push(c);
                if c == '"' || c == '\'' {
                    quote = Some(c);
                }
            }
            Some(q) if c == q => {
                out.push(c);
                quote = None;
            }
            Some(_) => {}
        }
    }
    out
}

/// The commands a bash script runs: the first word of each simple command (a heuristic that
/// fits the scripts of this repository: no heredocs, one command per line or joined by
/// separators, continuation lines for long argument lists).
fn commands_in(script: &str) -> BTreeSet<String> {
    let mut commands = BTreeSet::new();
    // The previous line ended with `\` after its command word: this line only adds arguments.
    let mut arguments_continue = false;
    for raw in script.lines() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let line = unquoted(line);
        // A comment after the code.
        let line = line.split(" #").next().unwrap_or(&line).to_owned();
        let continues = line.ends_with('\\');
        // A case pattern (`main|all) ;;`) or a function definition (`have() {`).
        if line.contains("()") || (line.ends_with(";;") && line.contains(')')) {
            arguments_continue = false;
            continue;
        }
        let separators = [";", "&&", "||", "|", "$(", "(", "`"];
        let mut pieces = vec![line.clone()];
        for sep in separators {
            pieces = pieces
                .iter()
                .flat_map(|p| p.split(sep).map(str::to_owned).collect::<Vec<_>>())
                .collect();
        }
        let mut last_had_command = false;
        for (i, piece) in pieces.iter().enumerate() {
            last_had_command = false;
            if i == 0 && arguments_continue {
                last_had_command = true;
                continue;
            }
            let mut words = piece.split_whitespace();
            // Skip leading assignments (`VAR=value cmd`) and `time`/`!`/`exec`.
            let word = words.find(|w| !w.contains('=') && !matches!(*w, "time" | "!" | "exec"));
            let Some(word) = word else { continue };
            let word = word.trim_end_matches(')');
            if word.is_empty()
                || word == "\\"
                || word.starts_with(['-', '"', '\'', '$', '*', '<', '>', '/', '{', '}'])
                || word.starts_with(|c: char| c.is_ascii_digit())
            {
                continue;
            }
            last_had_command = true;
            commands.insert(word.to_owned());
        }
        arguments_continue = continues && last_had_command;
    }
    commands
}

/// The tools `scripts/setup.sh` installs: the names of its `have <tool> <version>` checks.
fn setup_installs(setup: &str) -> BTreeSet<String> {
    setup
        .split("have ")
        .skip(1)
        .filter_map(|rest| rest.split_whitespace().next())
        .filter(|w| {
            w.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        })
        .map(str::to_owned)
        .collect()
}

#[test]
fn every_target_the_repository_builds_for_is_installed_by_the_setup() {
    let toml = read(&root().join("rust-toolchain.toml"));
    let installed = toolchain_targets(&toml);
    let setup = read(&root().join("scripts/setup.sh"));
    assert!(
        setup.contains("rust-toolchain.toml") && setup.contains("rustup target add"),
        "scripts/setup.sh adds the targets rust-toolchain.toml lists"
    );
    let mut files = scripts();
    files_under(&root().join(".github"), &[".yml", ".yaml"], &mut files);
    files_under(
        &root().join("src"),
        &[".rs", ".toml", ".json", ".ts"],
        &mut files,
    );
    files_under(
        &root().join("examples"),
        &[".rs", ".toml", ".json"],
        &mut files,
    );
    files.push(root().join("Cargo.toml"));
    let mut missing = Vec::new();
    for file in &files {
        for triple in triples_in(&read(file)) {
            if triple != "x86_64-unknown-linux-gnu" && !installed.contains(&triple) {
                missing.push(format!(
                    "{} uses the Rust target {triple}, which rust-toolchain.toml's targets (added by \
                     scripts/setup.sh) do not list: add it there",
                    file.strip_prefix(root()).unwrap_or(file).display()
                ));
            }
        }
    }
    assert!(missing.is_empty(), "{}", missing.join("\n"));
    assert!(
        installed.contains("wasm32-wasip1") && installed.contains("wasm32-unknown-unknown"),
        "the canisters' targets: {installed:?}"
    );
}

#[test]
fn every_command_the_scripts_run_is_installed_by_the_setup() {
    let installs = setup_installs(&read(&root().join("scripts/setup.sh")));
    for tool in ["wasi2ic", "ic-wasm", "canbench", "actionlint"] {
        assert!(
            installs.contains(tool),
            "setup.sh installs {tool}: {installs:?}"
        );
    }
    // The scripts' own functions (scripts/steps.sh's are sourced by others).
    let texts: Vec<(PathBuf, String)> = scripts()
        .into_iter()
        .map(|s| (s.clone(), read(&s)))
        .collect();
    let functions: BTreeSet<&str> = texts
        .iter()
        .flat_map(|(_, text)| text.lines())
        .filter_map(|l| l.trim().split_once("() {").map(|(name, _)| name.trim()))
        .collect();
    let mut missing = Vec::new();
    for (script, text) in &texts {
        for command in commands_in(text) {
            let known = FRESH.contains(&command.as_str())
                || installs.contains(&command)
                || functions.contains(command.as_str())
                || command.starts_with("target/")
                || command.starts_with("scripts/")
                || command.starts_with("./");
            if !known {
                missing.push(format!(
                    "{} runs `{command}`, which is not on a fresh machine and scripts/setup.sh \
                     does not install (add it there, with a `have {command} <version>` check)",
                    script.strip_prefix(root()).unwrap_or(script).display()
                ));
            }
        }
    }
    assert!(missing.is_empty(), "{}", missing.join("\n"));
}

#[test]
fn every_npx_tool_comes_from_a_committed_lockfile() {
    let mut checked = 0;
    for script in scripts() {
        for line in read(&script).lines() {
            let Some(at) = line.find("npx ") else {
                continue;
            };
            let tool = line[at + 4..].split_whitespace().next().unwrap_or_default();
            let dir = line
                .split("cd ")
                .nth(1)
                .and_then(|r| r.split_whitespace().next())
                .unwrap_or_else(|| {
                    panic!(
                        "{}: `npx {tool}` without a `cd <dir>` on its line",
                        script.display()
                    )
                });
            let lock = root().join(dir).join("package-lock.json");
            let lock = read(&lock);
            assert!(
                line.contains("npm ci"),
                "{}: `npx {tool}` in {dir} runs after `npm ci` on the same line",
                script.display()
            );
            assert!(
                lock.contains(&format!("\"{tool}\": ")),
                "{}: `npx {tool}` runs in {dir}, whose package-lock.json has no package with the \
                 binary {tool}: add the package to {dir}/package.json",
                script.display()
            );
            checked += 1;
        }
    }
    assert!(
        checked >= 2,
        "the scripts run tsc in the two TypeScript packages ({checked})"
    );
}

#[test]
fn the_readers_find_what_they_should() {
    // The parsers above are not vacuous: each finds what a script of this shape uses.
    // The triple is assembled so that this file does not name a target itself.
    let triple = format!("{}-foo-bar", "wasm32");
    let script = format!(
        "set -euo pipefail\ncd \"$(dirname \"$0\")/..\"\nfor t in a; do\n  wasi2ic x y >/dev/null\ndone\nRUSTFLAGS=\"-x\" \\\n  cargo build --target {triple} \\\n  --release\nmytool --flag | grep x && (cd dir && npm ci && npx tsc)\ncase \"$1\" in\n  main|all) ;;\nesac\n"
    );
    let script = script.as_str();
    let commands = commands_in(script);
    for c in [
        "set", "cd", "for", "wasi2ic", "cargo", "mytool", "grep", "npm", "npx",
    ] {
        assert!(commands.contains(c), "{c} in {commands:?}");
    }
    assert!(
        !commands.contains("--release") && !commands.contains("main"),
        "{commands:?}"
    );
    assert_eq!(triples_in(script).into_iter().collect::<Vec<_>>(), [triple]);
    assert_eq!(
        toolchain_targets("[toolchain]\ntargets = [\"wasm32-wasip1\", \"x\"]\n")
            .into_iter()
            .collect::<Vec<_>>(),
        ["wasm32-wasip1", "x"]
    );
    assert!(setup_installs("have wasi2ic \"$V\" || x\nhave ic-wasm 1").contains("ic-wasm"));
}
