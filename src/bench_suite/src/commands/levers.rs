//! `bench-suite levers`: builds of the reference canister that differ in one setting, against
//! the reference, under both metering profiles ([`crate::levers`]).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};

use crate::engine_runs;
use crate::profiles::LEAD;
use crate::progress::Progress;

/// Measures `reference` and each of `levers` (named by their file stem), each holding `fixture`,
/// and prints the comparison as Markdown.
pub fn run(
    reference: &Path,
    levers: &[PathBuf],
    fixture: engine_runs::Fixture,
    progress: &mut Progress,
) -> Result<ExitCode> {
    let engine = engine_runs::engine_with(LEAD)?;
    let mut named = vec![("reference".to_string(), reference)];
    for p in levers {
        named.push(stem(p)?);
    }
    let mut builds = Vec::new();
    for (name, path) in named {
        progress.step(&format!("lever {name}"));
        builds.push(crate::levers::measure(
            &engine,
            name,
            path,
            fixture,
            "scripts/levers.sh",
            progress,
        )?);
    }
    print!(
        "{}",
        crate::levers::render(
            &builds,
            fixture,
            &format!("engine: {}", engine_runs::profile_label(&LEAD)),
            &format!(
                "engine: {}",
                engine_runs::profile_label(&offline_engine::Metering::POCKET_IC_13)
            ),
        )?
    );
    Ok(ExitCode::SUCCESS)
}

fn stem(path: &Path) -> Result<(String, &Path)> {
    let name = path
        .file_stem()
        .and_then(|s| s.to_str())
        .with_context(|| format!("{}: a lever's wasm is named by its setting", path.display()))?;
    Ok((name.to_string(), path))
}
