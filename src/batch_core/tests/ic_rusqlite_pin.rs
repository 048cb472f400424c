//! The rusqlite this crate is built against is the one ic-rusqlite re-exports: one SQL layer
//! natively and in the canister. ic-rusqlite does not pin its rusqlite (`^0.39` for 0.5), so
//! the workspace pins rusqlite exactly; this test fails when that pin and the rusqlite the
//! locked ic-rusqlite resolves to differ, when the lockfile holds two rusqlite versions, and
//! when the README's statement of the supported versions no longer matches the lockfile.
//!
//! It reads the workspace (`cargo metadata --locked`), so it is not part of the packaged crate.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

fn workspace_manifest() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../Cargo.toml")
}

/// `cargo metadata` of the whole workspace, every platform, as locked.
fn metadata() -> Value {
    let output = Command::new(env!("CARGO"))
        .args([
            "metadata",
            "--format-version",
            "1",
            "--locked",
            "--manifest-path",
        ])
        .arg(workspace_manifest())
        .output()
        .expect("cargo metadata runs");
    assert!(
        output.status.success(),
        "cargo metadata --locked failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("cargo metadata prints JSON")
}

fn packages<'m>(metadata: &'m Value, name: &str) -> Vec<&'m Value> {
    metadata["packages"]
        .as_array()
        .expect("packages")
        .iter()
        .filter(|p| p["name"] == name)
        .collect()
}

fn version(package: &Value) -> &str {
    package["version"].as_str().expect("a version")
}

#[test]
fn the_rusqlite_pin_is_the_rusqlite_of_the_locked_ic_rusqlite() {
    let metadata = metadata();

    // This crate's requirement on rusqlite, as the workspace declares it.
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml");
    let this = metadata["packages"]
        .as_array()
        .expect("packages")
        .iter()
        .find(|p| Path::new(p["manifest_path"].as_str().unwrap_or_default()) == manifest)
        .expect("this crate is a workspace member");
    let requirements: Vec<&str> = this["dependencies"]
        .as_array()
        .expect("dependencies")
        .iter()
        .filter(|d| d["name"] == "rusqlite")
        .map(|d| d["req"].as_str().expect("a requirement"))
        .collect();
    assert!(!requirements.is_empty());

    // The one rusqlite of the lockfile, and the one the locked ic-rusqlite resolves to.
    let rusqlite = packages(&metadata, "rusqlite");
    assert_eq!(rusqlite.len(), 1, "one rusqlite in Cargo.lock");
    let rusqlite = rusqlite[0];
    let ic_rusqlite = packages(&metadata, "ic-rusqlite");
    assert_eq!(ic_rusqlite.len(), 1, "one ic-rusqlite in Cargo.lock");
    let ic_rusqlite = ic_rusqlite[0];
    let node = metadata["resolve"]["nodes"]
        .as_array()
        .expect("resolve nodes")
        .iter()
        .find(|n| n["id"] == ic_rusqlite["id"])
        .expect("ic-rusqlite is resolved");
    let resolved = node["deps"]
        .as_array()
        .expect("deps")
        .iter()
        .find(|d| d["name"] == "rusqlite")
        .expect("ic-rusqlite depends on rusqlite");
    assert_eq!(resolved["pkg"], rusqlite["id"]);

    for requirement in requirements {
        assert_eq!(
            requirement,
            format!("={}", version(rusqlite)),
            "the workspace pins rusqlite {requirement}, ic-rusqlite {} uses rusqlite {}: \
             pin the rusqlite that ic-rusqlite re-exports",
            version(ic_rusqlite),
            version(rusqlite)
        );
    }

    // The README states the supported versions.
    let (major, minor) = {
        let mut parts = version(ic_rusqlite).split('.');
        (parts.next().unwrap_or(""), parts.next().unwrap_or(""))
    };
    let readme = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md"))
        .expect("README.md");
    let statement = format!(
        "ic-rusqlite {major}.{minor}.x (rusqlite {})",
        version(rusqlite)
    );
    assert!(
        readme.contains(&statement),
        "README.md must state the supported versions as `{statement}`"
    );
}
