//! What every section of the report is rendered from (the results, the charts written next to
//! it, the end-to-end commands' figures), and the label line of its tables.

use crate::suite::SuiteResults;
use crate::which_path::ClientFigures;

/// A chart written next to the report.
#[derive(Debug, Clone, PartialEq)]
pub struct ChartLink {
    /// Title.
    pub title: String,
    /// File name relative to the report.
    pub file: String,
}

/// What every section is rendered from.
pub(super) struct Inputs<'a> {
    /// The suite's figures.
    pub(super) results: &'a SuiteResults,
    /// The charts written next to the report.
    pub(super) charts: &'a [ChartLink],
    /// The committed markdown of the end-to-end commands.
    pub(super) client: &'a ClientFigures,
    /// The label line of every table ([`label`]).
    pub(super) label: String,
}

/// The label line of every table: engine, date and scale.
pub(super) fn label(r: &SuiteResults) -> String {
    format!(
        "*engine: {} · {} · scale {} (BENCH_SCALE_DIVISOR={})*",
        r.engine,
        r.date,
        r.scale.label(),
        r.scale_divisor
    )
}
