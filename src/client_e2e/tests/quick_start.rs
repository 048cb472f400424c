//! The quick start of `ic-rusqlite-batch`'s README, followed as a newcomer would: every block of
//! its "Quick start" section, in order, in a scratch directory outside the repository. A block
//! whose first line names a file (`# Cargo.toml`, `// src/lib.rs`, ...) is written to that file;
//! any other `sh` block is run, except the one marked `# once per machine` (the tools the test
//! command's setup installed). Then a new write is added to the declaration, and the rebuilt
//! `.did` must have it: a write touches one file.
//!
//! What the test changes, and why: the crates are not on crates.io yet, so the scratch manifest
//! gets a `[patch.crates-io]` to the repository's (with its lockfile, so that the versions are
//! the tested ones); the replica is this test's (the README's `offline-pocket-ic ... &` line is
//! skipped and its port replaced by this one's); the scratch crate's `target` is `quick-start`
//! in cargo's target directory, so that a later run rebuilds only what changed. The tools come
//! from the repository: `offline-engine` from the release directory this test was built in (the
//! workspace's `cargo test --release` builds it), icp-cli from the lockfile of the JS agent
//! tests (`npm ci` there when missing), wasi2ic and ic-wasm from `scripts/setup.sh`.

use std::path::{Path, PathBuf};
use std::process::Command;

/// One fenced block of the section, in order.
#[derive(Debug, PartialEq)]
enum Step {
    /// Write `body` to `path` (relative to the directory the commands are in).
    File { path: String, body: String },
    /// Run these shell lines.
    Run(String),
}

/// The blocks of the README section `heading` (up to the next `## `), as steps.
fn steps(readme: &str, heading: &str) -> Vec<Step> {
    let start = readme
        .find(heading)
        .unwrap_or_else(|| panic!("the README has no {heading:?} section"));
    let section = &readme[start + heading.len()..];
    let section = &section[..section.find("\n## ").unwrap_or(section.len())];
    let mut steps = Vec::new();
    let mut lines = section.lines();
    while let Some(line) = lines.next() {
        let Some(lang) = line.strip_prefix("```") else {
            continue;
        };
        let body: Vec<&str> = lines.by_ref().take_while(|l| *l != "```").collect();
        let first = body.first().copied().unwrap_or_default();
        let named = first
            .strip_prefix("// ")
            .or_else(|| first.strip_prefix("# "))
            .filter(|name| !name.contains(' ') && name.contains('.'));
        match named {
            Some(path) => steps.push(Step::File {
                path: path.to_owned(),
                body: body.join("\n") + "\n",
            }),
            None if lang == "sh" && first != "# once per machine" => {
                steps.push(Step::Run(body.join("\n")))
            }
            None => {}
        }
    }
    steps
}

/// The release directory this test was built in (`<target>/release`).
fn release_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    // <target>/release/deps/quick_start-<hash>
    exe.parent().and_then(Path::parent).unwrap().to_path_buf()
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

/// icp-cli's binary from the JS agent tests' lockfile, installed there if it is not yet.
fn icp_dir(root: &Path) -> PathBuf {
    let package = root.join("src/pocket_ic_server/tests/agent-js");
    let bin = package.join("node_modules/@icp-sdk/icp-cli-linux-x64/bin");
    if !bin.join("icp").exists() {
        let status = Command::new("npm")
            .args(["ci", "--no-audit", "--no-fund"])
            .current_dir(&package)
            .status()
            .expect("npm runs");
        assert!(status.success(), "npm ci in {}", package.display());
    }
    bin
}

/// Runs `script` with bash in `dir`; returns its standard output, panicking with both outputs
/// when it fails.
fn bash(script: &str, dir: &Path, env: &[(&str, String)]) -> String {
    let out = Command::new("bash")
        .args(["-euo", "pipefail", "-c", script])
        .current_dir(dir)
        // The README's paths are the scratch crate's own `target/` (a link to the shared one).
        .env_remove("CARGO_TARGET_DIR")
        .env_remove("CARGO_BUILD_TARGET_DIR")
        .envs(env.iter().map(|(k, v)| (k, v)))
        .output()
        .expect("bash runs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "the quick start failed at:\n{script}\n--- stdout\n{stdout}\n--- stderr\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

#[test]
fn the_quick_start_builds_deploys_and_writes_1000_bookmarks() {
    let root = repo_root();
    let readme = std::fs::read_to_string(root.join("src/ic_rusqlite_batch/README.md")).unwrap();
    let steps = steps(&readme, "## Quick start: a canister of your own");

    let replica = client_e2e::Replica::start(None).expect("the offline replica starts");
    let port = replica.url.rsplit(':').next().unwrap().to_owned();
    let scratch = std::env::temp_dir().join(format!("quick-start-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&scratch);
    std::fs::create_dir_all(scratch.join(".home")).unwrap();
    let release = release_dir();
    assert!(
        release.join("offline-engine").exists(),
        "{} has no offline-engine: cargo build --release -p offline_engine",
        release.display()
    );
    let shared_target = release.parent().unwrap().join("quick-start");
    std::fs::create_dir_all(&shared_target).unwrap();

    let home = std::env::var("HOME").unwrap();
    let path = format!(
        "{}:{}:{}",
        release.display(),
        icp_dir(&root).display(),
        std::env::var("PATH").unwrap()
    );
    let env = [
        ("PATH", path),
        // icp-cli keeps its identities under HOME; rustup and cargo keep theirs.
        ("HOME", scratch.join(".home").display().to_string()),
        (
            "RUSTUP_HOME",
            std::env::var("RUSTUP_HOME").unwrap_or(format!("{home}/.rustup")),
        ),
        (
            "CARGO_HOME",
            std::env::var("CARGO_HOME").unwrap_or(format!("{home}/.cargo")),
        ),
    ];

    // The README's steps as one script (a `cd` carries over), with the test's changes.
    let mut script = String::new();
    let mut files = Vec::new();
    for step in &steps {
        match step {
            Step::File { path, body } => {
                files.push(path.clone());
                let body = body.replace("127.0.0.1:4943", &format!("127.0.0.1:{port}"));
                script += &format!(
                    "mkdir -p \"$(dirname {path})\"\ncat > {path} <<'QUICK_START_EOF'\n{body}QUICK_START_EOF\n"
                );
                if path == "Cargo.toml" {
                    script += &format!(
                        "cat >> Cargo.toml <<'QUICK_START_EOF'\n\n[patch.crates-io]\n\
                         ic-rusqlite-batch = {{ path = \"{r}/src/ic_rusqlite_batch\" }}\n\
                         ic-rusqlite-batch-core = {{ path = \"{r}/src/batch_core\" }}\n\
                         ic-rusqlite-batch-types = {{ path = \"{r}/src/batch_types\" }}\n\
                         ic-batch-client = {{ path = \"{r}/src/batch_client\" }}\n\
                         QUICK_START_EOF\n\
                         cp {r}/Cargo.lock Cargo.lock\nln -sfn {t} target\n",
                        r = root.display(),
                        t = shared_target.display()
                    );
                }
            }
            Step::Run(lines) => {
                for line in lines.lines() {
                    if line.starts_with("offline-pocket-ic ") {
                        continue; // the test's replica serves on `port`
                    }
                    script += &line.replace("127.0.0.1:4943", &format!("127.0.0.1:{port}"));
                    script += "\n";
                }
            }
        }
    }
    for expected in [
        "Cargo.toml",
        "src/lib.rs",
        "build.sh",
        "icp.yaml",
        "examples/client.rs",
    ] {
        assert!(
            files.iter().any(|f| f == expected),
            "the quick start writes {expected}: {files:?}"
        );
    }
    let out = bash(&script, &scratch, &env);
    assert!(
        out.contains("1000 of 1000 committed in"),
        "the client committed every bookmark:\n{out}"
    );
    assert!(
        out.contains("(variant { Ok = 1_000 : int64 })"),
        "the canister counts 1,000 bookmarks:\n{out}"
    );

    // A new write is one entry in the declaration: the rebuilt .did has it.
    let project = scratch.join("bookmarks");
    let did = |p: &Path| std::fs::read_to_string(p.join("bookmarks.did")).unwrap();
    assert!(!did(&project).contains("  tag : record"));
    let lib = project.join("src/lib.rs");
    let source = std::fs::read_to_string(&lib).unwrap();
    let last = "        remove = \"DELETE FROM bookmarks WHERE id = ?1\" { id: i64 },\n";
    assert!(
        source.contains(last),
        "the declaration's last write is `remove`"
    );
    let with_tag = source.replace(
        last,
        &format!(
            "{last}        /// Appends a tag to bookmark `id`'s title.\n        \
             tag = \"UPDATE bookmarks SET title = title || ' #' || ?2 WHERE id = ?1\" {{ id: i64, tag: String [max 30] }},\n"
        ),
    );
    std::fs::write(&lib, with_tag).unwrap();
    bash("sh build.sh", &project, &env);
    let rebuilt = did(&project);
    assert!(
        rebuilt.contains("tag : record { id : int64; tag : text }"),
        "the rebuilt .did declares the new write:\n{rebuilt}"
    );
    let _ = std::fs::remove_dir_all(&scratch);
}

#[test]
fn the_steps_are_read_from_the_blocks() {
    let readme = "intro\n## Quick start\n\n```sh\n# once per machine\nrustup target add x\n```\n\n\
                  ```sh\ncargo new --lib a && cd a\n```\n\n```toml\n# Cargo.toml\n[package]\n```\n\n\
                  ```rust,ignore\n// src/lib.rs\nfn f() {}\n```\n\n```text\nprints\n```\n\n## Next\n\n\
                  ```sh\nnot this\n```\n";
    assert_eq!(
        steps(readme, "## Quick start"),
        [
            Step::Run("cargo new --lib a && cd a".into()),
            Step::File {
                path: "Cargo.toml".into(),
                body: "# Cargo.toml\n[package]\n".into()
            },
            Step::File {
                path: "src/lib.rs".into(),
                body: "// src/lib.rs\nfn f() {}\n".into()
            },
        ]
    );
}
