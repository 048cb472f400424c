//! The committed validation data (`validation/*.yml`) are consistent, and the generated sections
//! of `VALIDATION.md` and the README's validation line are exactly what those data give.
//!
//! After re-recording data, regenerate both with
//! `UPDATE_VALIDATION=1 cargo test -p offline_engine --release --test validation`.

use std::path::{Path, PathBuf};

use offline_engine::validation::{
    self, CompilerVariance, Notes, RepositoryData, SECTIONS, ValidationData,
};

const VARIANCE_FILE: &str = "compiler_variance.yml";
const NOTES_FILE: &str = "notes.yml";

fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn parse<T: serde::de::DeserializeOwned>(path: &Path) -> (T, String) {
    let text = read(path);
    let value = serde_yaml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    (value, text)
}

/// Every data file, parsed; each repository file must be in its canonical form (the text
/// `offline-engine validation record` writes), so a figure edited by hand shows.
fn load() -> ValidationData {
    let dir = crate_dir().join("validation");
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "yml"))
        .collect();
    paths.sort();
    let mut repositories = Vec::new();
    for p in &paths {
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        if name == VARIANCE_FILE || name == NOTES_FILE {
            continue;
        }
        let (data, text): (RepositoryData, String) = parse(p);
        assert_eq!(
            data.file_name(),
            name,
            "{name} holds the data of {}",
            data.repository
        );
        data.check().unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(
            data.to_yaml().unwrap(),
            text,
            "{name} is not in the form `offline-engine validation record` writes (edited by hand?)"
        );
        repositories.push(data);
    }
    let (variance, text): (CompilerVariance, String) = parse(&dir.join(VARIANCE_FILE));
    assert_eq!(
        variance.to_yaml().unwrap(),
        text,
        "{VARIANCE_FILE} is not in the form `offline-engine validation variance` writes"
    );
    let (notes, _): (Notes, String) = parse(&dir.join(NOTES_FILE));
    ValidationData {
        repositories,
        notes,
        variance,
    }
}

#[test]
fn data_are_consistent() {
    let data = load();
    data.check().unwrap();
    // What VALIDATION.md claims in its method: at least three repositories, 400 benchmarks, each
    // results file recorded with its provenance.
    assert!(
        data.repositories.len() >= 3,
        "fewer than three repositories"
    );
    let benches: usize = data
        .repositories
        .iter()
        .flat_map(|r| &r.suites)
        .map(|s| s.benches)
        .sum();
    assert!(benches >= 400, "only {benches} benchmarks");
    let engine_commits: std::collections::BTreeSet<_> = data
        .repositories
        .iter()
        .flat_map(|r| &r.suites)
        .map(|s| s.engine_commit.as_str())
        .collect();
    assert!(!engine_commits.is_empty());
}

#[test]
fn validation_md_is_generated_from_the_data() {
    let data = load();
    data.check().unwrap();
    let path = crate_dir().join("VALIDATION.md");
    let text = read(&path);
    let expected = validation::regenerate_markdown(&text, &data).unwrap();
    for s in SECTIONS {
        assert!(
            text.contains(&validation::begin_marker(s)),
            "VALIDATION.md lacks the generated section {s}"
        );
    }
    if std::env::var_os("UPDATE_VALIDATION").is_some() {
        if expected != text {
            std::fs::write(&path, &expected).unwrap();
            eprintln!("rewrote {}", path.display());
        }
        return;
    }
    if expected != text {
        let line = text
            .lines()
            .zip(expected.lines())
            .position(|(a, b)| a != b)
            .map_or(text.lines().count().min(expected.lines().count()), |i| i);
        panic!(
            "VALIDATION.md differs from what validation/*.yml give, first at line {}:\n  file: {}\n  data: {}\n\
             Regenerate with UPDATE_VALIDATION=1 cargo test -p offline_engine --release --test validation",
            line + 1,
            text.lines().nth(line).unwrap_or("<end>"),
            expected.lines().nth(line).unwrap_or("<end>")
        );
    }
}

#[test]
fn a_number_edited_by_hand_in_validation_md_is_caught() {
    let data = load();
    let text = read(&crate_dir().join("VALIDATION.md"));
    let generated = validation::regenerate_markdown(&text, &data).unwrap();
    // Change the first digit inside the first generated section.
    let start = generated
        .find(&validation::begin_marker(SECTIONS[0]))
        .unwrap()
        + validation::begin_marker(SECTIONS[0]).len();
    let at = start
        + generated[start..]
            .find(|c: char| c.is_ascii_digit())
            .expect("a digit in the generated text");
    let mut edited = generated.clone();
    let digit = edited.as_bytes()[at];
    let other = if digit == b'9' {
        '1'
    } else {
        (digit + 1) as char
    };
    edited.replace_range(at..at + 1, &other.to_string());
    assert_ne!(edited, generated);
    assert_eq!(
        validation::regenerate_markdown(&edited, &data).unwrap(),
        generated,
        "regenerating restores the edited number, so the comparison above fails on it"
    );
}

#[test]
fn readme_states_the_result_of_the_data() {
    let data = load();
    let line = validation::readme_line(&data);
    let path = crate_dir().join("../../README.md");
    let text = read(&path);
    let found: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with(validation::README_PREFIX))
        .collect();
    if std::env::var_os("UPDATE_VALIDATION").is_some() && found.len() == 1 && found[0] != line {
        let updated: String = text
            .lines()
            .map(|l| if l == found[0] { line.as_str() } else { l })
            .collect::<Vec<_>>()
            .join("\n")
            + if text.ends_with('\n') { "\n" } else { "" };
        std::fs::write(&path, updated).unwrap();
        eprintln!("rewrote the validation line of {}", path.display());
        return;
    }
    assert_eq!(
        found,
        vec![line.as_str()],
        "README.md must have exactly one line starting with {:?}, equal to what the data give",
        validation::README_PREFIX
    );
}
