//! `bench-suite doc-figures`: every measured figure quoted in a hand-written doc, with what
//! checks it ([`crate::doc_figures`]); exit 1 if any is unchecked or stale.

use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, Result};

use crate::doc_figures;

/// Lists the figures of the docs under `root` (rewriting the generated blocks first with
/// `write`), one `path:line: figure — status` line each, and their count per status.
pub fn run(root: &Path, write: bool) -> Result<ExitCode> {
    let program = std::env::current_exe().context("the path of bench-suite")?;
    let root = root
        .canonicalize()
        .with_context(|| root.display().to_string())?;
    let mut runner = doc_figures::process_runner(program, root.clone());
    let figures = doc_figures::list_all(&root, write, &mut runner)?;
    for f in &figures {
        println!("{f}");
    }
    println!("{}", doc_figures::summary(&figures));
    Ok(super::exit_code(!figures.iter().any(|f| f.status.fails())))
}
