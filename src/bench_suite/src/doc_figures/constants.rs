//! The values the docs quote that are not measured: each defined by a public source (the IC's
//! fee schedule and interface specification, the replica's source with file and commit, SQLite)
//! or by this repository's own configuration. Where the code holds the value, `value` is the
//! code's and a test holds the figure to it.

/// One defined value as the docs write it.
#[derive(Debug, Clone, Copy)]
pub struct Constant {
    /// The figure as written (`2 MiB`, `5 M`); compared without the space before the unit.
    pub figure: &'static str,
    /// A figure is this constant when its paragraph (lowercased) contains one of these.
    pub about: &'static [&'static str],
    /// Where the value is defined.
    pub source: &'static str,
    /// The code's value in the figure's base unit (bytes, seconds, cycles, percent), if the code
    /// has it.
    pub value: Option<f64>,
}

/// Every constant the docs quote.
pub const CONSTANTS: &[Constant] = &[];
