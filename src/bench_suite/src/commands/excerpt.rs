//! `bench-suite excerpt`: one part of a generated Markdown file (a section of `bench/REPORT.md`,
//! one of its paragraphs or tables), printed as the file has it, so that a hand-written doc can
//! quote it in a generated block ([`crate::doc_figures`]).

use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};

/// The body of the section of `markdown` whose heading is `heading` (without its `#`s), up to the
/// next heading of any level, without its leading and trailing blank lines; with `part`, only its
/// `part`-th block (1-based; blocks are separated by blank lines: a paragraph, a table, a list).
pub fn excerpt(markdown: &str, heading: &str, part: Option<usize>) -> Result<String> {
    let lines: Vec<&str> = markdown.lines().collect();
    let is_heading = |l: &str| l.starts_with('#') && l.trim_start_matches('#').starts_with(' ');
    let matches: Vec<usize> = (0..lines.len())
        .filter(|&i| is_heading(lines[i]) && lines[i].trim_start_matches('#').trim() == heading)
        .collect();
    let start = match matches.as_slice() {
        [i] => i + 1,
        [] => bail!("no heading {heading:?}"),
        _ => bail!("{} headings {heading:?}", matches.len()),
    };
    let end = (start..lines.len())
        .find(|&i| is_heading(lines[i]))
        .unwrap_or(lines.len());
    let mut blocks: Vec<Vec<&str>> = Vec::new();
    let mut current: Vec<&str> = Vec::new();
    for l in &lines[start..end] {
        if l.trim().is_empty() {
            if !current.is_empty() {
                blocks.push(std::mem::take(&mut current));
            }
        } else {
            current.push(l);
        }
    }
    if !current.is_empty() {
        blocks.push(current);
    }
    match part {
        None => Ok(blocks
            .iter()
            .map(|b| b.join("\n"))
            .collect::<Vec<_>>()
            .join("\n\n")),
        Some(p) => blocks
            .get(p.wrapping_sub(1))
            .map(|b| b.join("\n"))
            .with_context(|| {
                format!(
                    "section {heading:?} has {} blocks, not a block {p}",
                    blocks.len()
                )
            }),
    }
}

/// Prints the excerpt of `file`.
pub fn run(file: &Path, section: &str, part: Option<usize>) -> Result<ExitCode> {
    let text =
        std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
    let e = excerpt(&text, section, part).with_context(|| file.display().to_string())?;
    println!("{e}");
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::excerpt;

    const DOC: &str =
        "# Title\n\n## A\n\nfirst para\nstill first\n\n| t |\n|---|\n\n### B\n\nb body\n";

    #[test]
    fn a_section_and_its_blocks() {
        assert_eq!(
            excerpt(DOC, "A", None).unwrap(),
            "first para\nstill first\n\n| t |\n|---|"
        );
        assert_eq!(excerpt(DOC, "A", Some(2)).unwrap(), "| t |\n|---|");
        assert_eq!(excerpt(DOC, "B", Some(1)).unwrap(), "b body");
        assert!(excerpt(DOC, "A", Some(3)).is_err());
        assert!(excerpt(DOC, "A", Some(0)).is_err());
        assert!(excerpt(DOC, "C", None).is_err());
    }
}
