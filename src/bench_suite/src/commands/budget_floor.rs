//! `bench-suite budget-floor`: what each op of the users/orders API costs alone at the smallest
//! flush budget; fails if the most expensive op times the margin exceeds it.

use std::path::Path;
use std::process::ExitCode;

use anyhow::Result;

use super::exit_code;
use crate::progress::Progress;
use crate::reliability;

/// Measures the budget floor on `wasm` at the full scale divided by `divisor` and prints its
/// tables.
pub fn run(wasm: &Path, divisor: usize, progress: &mut Progress) -> Result<ExitCode> {
    let f = reliability::budget_floor(wasm, divisor, progress)?;
    print!("{}", reliability::render_budget_floor(&f));
    println!("(engine: {})", crate::engine_runs::ENGINE_LABEL);
    Ok(exit_code(f.fits()))
}
