//! Validation data: the engine's canbench figures next to published PocketIC figures.
//!
//! `validation/<owner>-<name>.yml` holds, per public repository, one [`Suite`] per published
//! `canbench_results.yml`: where it comes from (repository, commit, path), how the benchmark wasm
//! was built here (compiler, lockfile, wasm hash), the engine commit that ran it, and one [`Row`]
//! per benchmark and scope with PocketIC's figures and the engine's. `validation/notes.yml`
//! explains the rows that differ ([`Note`]); `validation/compiler_variance.yml` holds the
//! project canister's instruction counts per compiler ([`CompilerVariance`]).
//!
//! `offline-engine validation record` and `offline-engine validation variance` write these files
//! from results files; [`render_section`] turns them into the tables of `VALIDATION.md`, and
//! `tests/validation.rs` checks both.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::Path;

use serde::Deserialize;

use crate::canbench::{BenchResult, Measurement};

/// Largest |Δ%| of a figure that still counts as "within ±0.01 %".
pub const TOLERANCE_PCT: f64 = 0.01;

/// Errors of building or checking validation data.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ValidationError {
    /// A benchmark is in one results file and not in the other.
    #[error("{bench}: only in the {side} results")]
    Unmatched {
        /// The benchmark (and scope, `bench::scope`).
        bench: String,
        /// Which file has it.
        side: &'static str,
    },
    /// A string field contains a line break (the data files keep one value per line).
    #[error("{field}: line breaks are not allowed: {value:?}")]
    Multiline {
        /// The field.
        field: &'static str,
        /// Its value.
        value: String,
    },
    /// The data are inconsistent (the message says how).
    #[error("{0}")]
    Inconsistent(String),
    /// A generated section of the Markdown file is malformed or unknown.
    #[error("generated section: {0}")]
    Markdown(String),
    /// A canbench results file could not be read or parsed.
    #[error("{path}: {message}")]
    Results {
        /// The file.
        path: String,
        /// What went wrong.
        message: String,
    },
}

/// A canbench results file (`canbench_results.yml` schema: `benches` by name and the version of
/// canbench that wrote it), read from a published repository or from the engine's run of the
/// same wasm (`scripts/canbench.sh`, the real canbench through `offline-pocket-ic`). Unknown
/// fields (such as the `engine:` line of older offline results) are ignored.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct ResultsFile {
    /// Results per benchmark.
    pub benches: BTreeMap<String, BenchResult>,
    /// The canbench version that wrote the file.
    #[serde(default)]
    pub version: String,
}

impl ResultsFile {
    /// Reads a results file. Errors: the file is missing or is not a results file.
    pub fn read(path: &Path) -> Result<Self, ValidationError> {
        let err = |message: String| ValidationError::Results {
            path: path.display().to_string(),
            message,
        };
        let text = std::fs::read_to_string(path).map_err(|e| err(e.to_string()))?;
        serde_yaml::from_str(&text).map_err(|e| err(e.to_string()))
    }
}

/// The figures of one measurement (a bench's total or one of its scopes).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Figures {
    /// Instructions.
    pub instructions: u64,
    /// Heap growth in 64 KiB pages.
    pub heap_increase: u64,
    /// Stable memory growth in 64 KiB pages.
    pub stable_memory_increase: u64,
    /// Number of calls (scopes only; a total always has 1).
    #[serde(default)]
    pub calls: Option<u64>,
}

impl Figures {
    fn of(m: &Measurement, with_calls: bool) -> Figures {
        Figures {
            instructions: m.instructions(),
            heap_increase: m.heap_increase.unwrap_or(0),
            stable_memory_increase: m.stable_memory_increase.unwrap_or(0),
            calls: if with_calls {
                Some(m.calls.unwrap_or(0))
            } else {
                None
            },
        }
    }

    /// `(name, value)` of every figure present.
    pub fn named(&self) -> Vec<(&'static str, u64)> {
        let mut v = vec![
            ("instructions", self.instructions),
            ("heap_increase", self.heap_increase),
            ("stable_memory_increase", self.stable_memory_increase),
        ];
        if let Some(c) = self.calls {
            v.push(("calls", c));
        }
        v
    }

    fn yaml(&self) -> String {
        let mut s = format!(
            "{{instructions: {}, heap_increase: {}, stable_memory_increase: {}",
            self.instructions, self.heap_increase, self.stable_memory_increase
        );
        if let Some(c) = self.calls {
            let _ = write!(s, ", calls: {c}");
        }
        s.push('}');
        s
    }
}

/// Δ of the instruction count, engine − PocketIC.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Delta {
    /// Instructions, engine − PocketIC.
    pub instructions: i64,
    /// The same in percent of PocketIC's figure, rounded to 6 decimals.
    pub pct: f64,
}

impl Delta {
    /// The Δ of `engine` against `pocketic`.
    pub fn of(pocketic: u64, engine: u64) -> Delta {
        Delta {
            instructions: engine as i64 - pocketic as i64,
            pct: round6(pct(pocketic, engine)),
        }
    }
}

fn pct(base: u64, value: u64) -> f64 {
    if base == 0 {
        if value == 0 { 0.0 } else { f64::INFINITY }
    } else {
        (value as f64 - base as f64) / base as f64 * 100.0
    }
}

fn round6(x: f64) -> f64 {
    if x.is_finite() {
        (x * 1e6).round() / 1e6
    } else {
        x
    }
}

/// One benchmark (or one scope of it): PocketIC's figures and the engine's.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Row {
    /// Benchmark name (without the `__canbench__` prefix).
    pub bench: String,
    /// Scope name, absent for the bench's total.
    #[serde(default)]
    pub scope: Option<String>,
    /// Published figures (PocketIC, from the repository's results file).
    pub pocketic: Figures,
    /// The engine's figures for the wasm built here.
    pub engine: Figures,
    /// Instruction Δ (recomputed and checked by the tests).
    pub delta: Delta,
}

impl Row {
    /// `bench` or `bench::scope`.
    pub fn key(&self) -> String {
        match &self.scope {
            Some(s) => format!("{}::{s}", self.bench),
            None => self.bench.clone(),
        }
    }

    /// Every figure equal.
    pub fn is_exact(&self) -> bool {
        self.pocketic == self.engine
    }

    /// Every figure within ±[`TOLERANCE_PCT`] (a figure of 0 must be 0).
    pub fn is_within_tolerance(&self) -> bool {
        self.pocketic
            .named()
            .iter()
            .zip(self.engine.named())
            .all(|((_, p), (_, e))| pct(*p, e).abs() <= TOLERANCE_PCT)
    }

    /// The figures that differ: `(name, pocketic, engine)`.
    pub fn differences(&self) -> Vec<(&'static str, u64, u64)> {
        let engine = self.engine.named();
        self.pocketic
            .named()
            .into_iter()
            .zip(engine)
            .filter(|((_, p), (_, e))| p != e)
            .map(|((n, p), (_, e))| (n, p, e))
            .collect()
    }

    /// Largest |Δ%| over the figures (∞ when a figure of 0 became non-zero).
    pub fn worst_pct(&self) -> f64 {
        self.pocketic
            .named()
            .iter()
            .zip(self.engine.named())
            .map(|((_, p), (_, e))| pct(*p, e).abs())
            .fold(0.0, f64::max)
    }
}

/// Rows for every bench and scope of two results files. Fails if a bench or scope is in only
/// one of them.
pub fn compare(pocketic: &ResultsFile, engine: &ResultsFile) -> Result<Vec<Row>, ValidationError> {
    fn keys(r: &ResultsFile) -> BTreeSet<(String, Option<String>)> {
        r.benches
            .iter()
            .flat_map(|(b, res)| {
                std::iter::once((b.clone(), None))
                    .chain(res.scopes.keys().map(|s| (b.clone(), Some(s.clone()))))
            })
            .collect()
    }
    let (kp, ke) = (keys(pocketic), keys(engine));
    let name = |(b, s): &(String, Option<String>)| match s {
        Some(s) => format!("{b}::{s}"),
        None => b.clone(),
    };
    if let Some(k) = kp.difference(&ke).next() {
        return Err(ValidationError::Unmatched {
            bench: name(k),
            side: "PocketIC",
        });
    }
    if let Some(k) = ke.difference(&kp).next() {
        return Err(ValidationError::Unmatched {
            bench: name(k),
            side: "engine",
        });
    }
    let figures = |r: &BenchResult, scope: &Option<String>| match scope {
        None => Figures::of(&r.total, false),
        Some(s) => Figures::of(&r.scopes[s], true),
    };
    Ok(kp
        .into_iter()
        .map(|(bench, scope)| {
            let p = figures(&pocketic.benches[&bench], &scope);
            let e = figures(&engine.benches[&bench], &scope);
            Row {
                delta: Delta::of(p.instructions, e.instructions),
                bench,
                scope,
                pocketic: p,
                engine: e,
            }
        })
        .collect())
}

/// One published results file, the build of its wasm here and the rows.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Suite {
    /// Path of the results file in the repository.
    pub results_file: String,
    /// The commit the figures were produced at (the last commit that changed the file), 40 hex.
    pub commit: String,
    /// Its committer date, `YYYY-MM-DD`.
    pub commit_date: String,
    /// The `version` field of the results file (the canbench that wrote it).
    pub canbench: String,
    /// The PocketIC server that canbench version downloads and runs (its `canbench-bin`).
    pub pocketic_server: String,
    /// `rustc -V` of the compiler the wasm was built with here.
    pub compiler: String,
    /// Why that compiler (the repository's `rust-toolchain.toml`, or the stable release of the date).
    pub compiler_source: String,
    /// Lockfile use.
    pub lockfile: String,
    /// The build command (the repository's `canbench.yml` `build_cmd`, run with that compiler).
    pub build: String,
    /// SHA-256 of the wasm the engine ran.
    pub wasm_sha256: String,
    /// The engine commit whose binary produced the engine figures.
    pub engine_commit: String,
    /// Number of benches (rows without scope), checked against the rows.
    pub benches: usize,
    /// Number of scope rows, checked against the rows.
    pub scopes: usize,
    /// One row per bench and scope, sorted by bench then scope.
    pub rows: Vec<Row>,
}

impl Suite {
    fn order_key(&self) -> (&str, &str, &str) {
        (&self.results_file, &self.commit_date, &self.commit)
    }

    /// `path@commit8`, how the tables name the suite.
    pub fn label(&self) -> String {
        format!(
            "{}@{}",
            self.results_file,
            &self.commit[..self.commit.len().min(8)]
        )
    }

    /// Rows without scope.
    pub fn bench_rows(&self) -> impl Iterator<Item = &Row> {
        self.rows.iter().filter(|r| r.scope.is_none())
    }

    /// The differing row with the largest instruction |Δ %| (ties: largest |Δ|); a row whose
    /// only difference is a page count comes after every row that differs in instructions.
    pub fn worst(&self) -> Option<&Row> {
        self.rows.iter().filter(|r| !r.is_exact()).max_by(|a, b| {
            a.delta
                .pct
                .abs()
                .total_cmp(&b.delta.pct.abs())
                .then(a.delta.instructions.abs().cmp(&b.delta.instructions.abs()))
        })
    }
}

/// All suites of one repository (`validation/<owner>-<name>.yml`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RepositoryData {
    /// What the file is.
    pub about: String,
    /// `owner/name` on GitHub.
    pub repository: String,
    /// Suites, sorted by results file.
    pub suites: Vec<Suite>,
}

const REPOSITORY_ABOUT: &str = "PocketIC figures of a public repository's committed canbench results next to the offline engine's figures for the same benches, built from the same commit with the repository's own compiler. Written by `offline-engine validation record`; do not edit.";

impl RepositoryData {
    /// Empty data for `repository`.
    pub fn new(repository: &str) -> RepositoryData {
        RepositoryData {
            about: REPOSITORY_ABOUT.into(),
            repository: repository.into(),
            suites: Vec::new(),
        }
    }

    /// The file name of this repository's data (`owner-name.yml`).
    pub fn file_name(&self) -> String {
        format!("{}.yml", self.repository.replace('/', "-"))
    }

    /// Adds `suite`, replacing one with the same results file and commit; keeps suites sorted
    /// by results file, then commit date.
    pub fn upsert(&mut self, suite: Suite) {
        self.suites
            .retain(|s| (&s.results_file, &s.commit) != (&suite.results_file, &suite.commit));
        self.suites.push(suite);
        self.suites
            .sort_by(|a, b| a.order_key().cmp(&b.order_key()));
    }

    /// The canonical text of the file.
    pub fn to_yaml(&self) -> Result<String, ValidationError> {
        let mut o = String::new();
        let _ = writeln!(o, "about: {}", scalar("about", &self.about)?);
        let _ = writeln!(o, "repository: {}", scalar("repository", &self.repository)?);
        o.push_str("suites:\n");
        for s in &self.suites {
            let fields: [(&'static str, &str); 11] = [
                ("results_file", &s.results_file),
                ("commit", &s.commit),
                ("commit_date", &s.commit_date),
                ("canbench", &s.canbench),
                ("pocketic_server", &s.pocketic_server),
                ("compiler", &s.compiler),
                ("compiler_source", &s.compiler_source),
                ("lockfile", &s.lockfile),
                ("build", &s.build),
                ("wasm_sha256", &s.wasm_sha256),
                ("engine_commit", &s.engine_commit),
            ];
            for (i, (k, v)) in fields.iter().enumerate() {
                let lead = if i == 0 { "- " } else { "  " };
                let _ = writeln!(o, "{lead}{k}: {}", scalar(k, v)?);
            }
            let _ = writeln!(o, "  benches: {}", s.benches);
            let _ = writeln!(o, "  scopes: {}", s.scopes);
            o.push_str("  rows:\n");
            for r in &s.rows {
                let _ = writeln!(o, "  - bench: {}", scalar("bench", &r.bench)?);
                if let Some(sc) = &r.scope {
                    let _ = writeln!(o, "    scope: {}", scalar("scope", sc)?);
                }
                let _ = writeln!(o, "    pocketic: {}", r.pocketic.yaml());
                let _ = writeln!(o, "    engine: {}", r.engine.yaml());
                let _ = writeln!(
                    o,
                    "    delta: {{instructions: {}, pct: {}}}",
                    r.delta.instructions,
                    float(r.delta.pct)
                );
            }
        }
        Ok(o)
    }

    /// Checks the internal consistency: counts, order, deltas, provenance present.
    pub fn check(&self) -> Result<(), ValidationError> {
        let bad = |m: String| {
            Err(ValidationError::Inconsistent(format!(
                "{}: {m}",
                self.repository
            )))
        };
        if self.repository.split('/').filter(|p| !p.is_empty()).count() != 2 {
            return bad("repository must be owner/name".into());
        }
        if self.suites.is_empty() {
            return bad("no suites".into());
        }
        for s in &self.suites {
            let at = &s.results_file;
            if !is_hex(&s.commit, 40) {
                return bad(format!("{at}: commit must be 40 hex digits"));
            }
            if !is_hex(&s.engine_commit, 40) {
                return bad(format!("{at}: engine_commit must be 40 hex digits"));
            }
            if !is_hex(&s.wasm_sha256, 64) {
                return bad(format!("{at}: wasm_sha256 must be 64 hex digits"));
            }
            if !is_date(&s.commit_date) {
                return bad(format!("{at}: commit_date must be YYYY-MM-DD"));
            }
            if !s.compiler.starts_with("rustc ") {
                return bad(format!("{at}: compiler must be `rustc -V` output"));
            }
            for (k, v) in [
                ("results_file", &s.results_file),
                ("canbench", &s.canbench),
                ("pocketic_server", &s.pocketic_server),
                ("compiler_source", &s.compiler_source),
                ("lockfile", &s.lockfile),
                ("build", &s.build),
            ] {
                if v.trim().is_empty() {
                    return bad(format!("{at}: {k} is empty"));
                }
            }
            if s.rows.is_empty() {
                return bad(format!("{at}: no rows"));
            }
            if s.benches != s.bench_rows().count() {
                return bad(format!(
                    "{at}: benches says {} but there are {} bench rows",
                    s.benches,
                    s.bench_rows().count()
                ));
            }
            let scopes = s.rows.len() - s.bench_rows().count();
            if s.scopes != scopes {
                return bad(format!(
                    "{at}: scopes says {} but there are {scopes} scope rows",
                    s.scopes
                ));
            }
            let keys: Vec<_> = s.rows.iter().map(|r| (&r.bench, &r.scope)).collect();
            if keys.windows(2).any(|w| w[0] >= w[1]) {
                return bad(format!(
                    "{at}: rows not sorted by bench and scope, or duplicated"
                ));
            }
            for r in &s.rows {
                if let Some(scope) = &r.scope
                    && !s
                        .rows
                        .iter()
                        .any(|t| t.bench == r.bench && t.scope.is_none())
                {
                    return bad(format!("{at}: scope {scope} of missing bench {}", r.bench));
                }
                if r.scope.is_some() != r.pocketic.calls.is_some()
                    || r.scope.is_some() != r.engine.calls.is_some()
                {
                    return bad(format!(
                        "{at}: {}: calls belong to scope rows only",
                        r.key()
                    ));
                }
                let d = Delta::of(r.pocketic.instructions, r.engine.instructions);
                if d.instructions != r.delta.instructions
                    || (d.pct - r.delta.pct).abs() > 5e-7
                    || !r.delta.pct.is_finite()
                {
                    return bad(format!(
                        "{at}: {}: delta {:?} does not follow from the figures ({d:?})",
                        r.key(),
                        r.delta
                    ));
                }
            }
        }
        let keys: Vec<_> = self.suites.iter().map(Suite::order_key).collect();
        if keys.windows(2).any(|w| w[0] >= w[1]) {
            return bad("suites not sorted by results file and commit date, or duplicated".into());
        }
        Ok(())
    }
}

/// Whether a difference is explained by a measurement or still open.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NoteStatus {
    /// Explained by a measurement described in the note.
    Measured,
    /// Not explained: an open question.
    Open,
}

/// The explanation of the rows that differ in one suite, or of one of its rows
/// (`validation/notes.yml`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Note {
    /// `owner/name`.
    pub repository: String,
    /// Results file path in the repository.
    pub results_file: String,
    /// The commit of the suite (40 hex).
    pub commit: String,
    /// The bench; absent: the note covers every differing row of the suite that has no note
    /// of its own.
    #[serde(default)]
    pub bench: Option<String>,
    /// The scope, if the note is about a scope row.
    #[serde(default)]
    pub scope: Option<String>,
    /// Measured or open.
    pub status: NoteStatus,
    /// The explanation (Markdown, one paragraph).
    pub note: String,
}

impl Note {
    fn is_for_suite(&self, repository: &str, suite: &Suite) -> bool {
        self.repository == repository
            && self.results_file == suite.results_file
            && self.commit == suite.commit
    }

    fn is_for_row(&self, row: &Row) -> bool {
        self.bench.as_deref() == Some(row.bench.as_str()) && self.scope == row.scope
    }
}

/// `validation/notes.yml`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Notes {
    /// What the file is.
    pub about: String,
    /// The notes.
    #[serde(default)]
    pub notes: Vec<Note>,
}

impl Notes {
    /// The note that explains `row` of `suite`: its own, else the suite's.
    pub fn of(&self, repository: &str, suite: &Suite, row: &Row) -> Option<&Note> {
        let mut for_suite = self
            .notes
            .iter()
            .filter(|n| n.is_for_suite(repository, suite));
        for_suite
            .clone()
            .find(|n| n.is_for_row(row))
            .or_else(|| for_suite.find(|n| n.bench.is_none()))
    }

    /// The suite-wide note of `suite`.
    pub fn of_suite(&self, repository: &str, suite: &Suite) -> Option<&Note> {
        self.notes
            .iter()
            .find(|n| n.is_for_suite(repository, suite) && n.bench.is_none())
    }

    /// Every row that differs has a note (its own or its suite's); every row note belongs to a
    /// row that differs; every suite note to a suite with a differing row; no duplicates.
    pub fn check(&self, repos: &[RepositoryData]) -> Result<(), ValidationError> {
        let bad = |m: String| Err(ValidationError::Inconsistent(format!("notes.yml: {m}")));
        for (i, n) in self.notes.iter().enumerate() {
            let what = format!(
                "note {} ({} {}@{} {})",
                i + 1,
                n.repository,
                n.results_file,
                &n.commit[..n.commit.len().min(8)],
                n.bench.as_deref().unwrap_or("*")
            );
            if n.note.trim().is_empty() {
                return bad(format!("{what} is empty"));
            }
            if n.bench.is_none() && n.scope.is_some() {
                return bad(format!("{what}: a scope needs a bench"));
            }
            let dup = self.notes[..i].iter().any(|m| {
                (
                    &m.repository,
                    &m.results_file,
                    &m.commit,
                    &m.bench,
                    &m.scope,
                ) == (
                    &n.repository,
                    &n.results_file,
                    &n.commit,
                    &n.bench,
                    &n.scope,
                )
            });
            if dup {
                return bad(format!("{what} is duplicated"));
            }
            let suite = repos
                .iter()
                .filter(|d| d.repository == n.repository)
                .flat_map(|d| d.suites.iter())
                .find(|s| s.results_file == n.results_file && s.commit == n.commit);
            let Some(suite) = suite else {
                return bad(format!("{what} matches no suite"));
            };
            let ok = match &n.bench {
                Some(_) => suite.rows.iter().any(|r| n.is_for_row(r) && !r.is_exact()),
                None => suite.rows.iter().any(|r| !r.is_exact()),
            };
            if !ok {
                return bad(format!("{what} is about rows that do not differ"));
            }
        }
        for d in repos {
            for s in &d.suites {
                if let Some(r) = s
                    .rows
                    .iter()
                    .find(|r| !r.is_exact() && self.of(&d.repository, s, r).is_none())
                {
                    return bad(format!(
                        "{} {}: {} differs and has no note",
                        d.repository,
                        s.label(),
                        r.key()
                    ));
                }
            }
        }
        Ok(())
    }
}

/// One compiler's build of the project canister.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VarianceCompiler {
    /// `rustc -V`.
    pub compiler: String,
    /// SHA-256 of the canbench wasm it built.
    pub wasm_sha256: String,
}

/// One bench of the project canister: instructions per compiler, in the order of `compilers`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VarianceRow {
    /// The bench.
    pub bench: String,
    /// Instructions per compiler.
    pub instructions: Vec<u64>,
}

/// `validation/compiler_variance.yml`: the project canister built with several compilers.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CompilerVariance {
    /// What the file is.
    pub about: String,
    /// How the wasm was built.
    pub build: String,
    /// The project commit the canister was built from.
    pub source_commit: String,
    /// The engine commit that ran the benches.
    pub engine_commit: String,
    /// The compiler of the CI baseline (`rustc -V`); one of `compilers`.
    pub baseline: String,
    /// Compilers, oldest first.
    pub compilers: Vec<VarianceCompiler>,
    /// Compilers that could not build the canister, with the reason.
    #[serde(default)]
    pub failed: Vec<VarianceFailure>,
    /// One row per bench, sorted by name.
    pub benches: Vec<VarianceRow>,
}

/// A compiler that could not build the canister.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VarianceFailure {
    /// `rustc -V`.
    pub compiler: String,
    /// Why (the first error).
    pub reason: String,
}

const VARIANCE_ABOUT: &str = "The project's canbench benches (bench_canister, canbench flavour) built with several compilers and run on the offline engine; instructions per compiler in the order of `compilers`. Written by `offline-engine validation variance`; do not edit.";

impl CompilerVariance {
    /// Empty data.
    pub fn new(build: &str, source_commit: &str, engine_commit: &str, baseline: &str) -> Self {
        CompilerVariance {
            about: VARIANCE_ABOUT.into(),
            build: build.into(),
            source_commit: source_commit.into(),
            engine_commit: engine_commit.into(),
            baseline: baseline.into(),
            compilers: Vec::new(),
            failed: Vec::new(),
            benches: Vec::new(),
        }
    }

    /// Adds (or replaces) the column of `compiler` with the totals of `results`. Compilers stay
    /// sorted by version. Fails if the benches differ from those already recorded.
    pub fn upsert(
        &mut self,
        compiler: &str,
        wasm_sha256: &str,
        results: &ResultsFile,
    ) -> Result<(), ValidationError> {
        let names: Vec<&String> = results.benches.keys().collect();
        if !self.compilers.is_empty() {
            let have: Vec<&String> = self.benches.iter().map(|b| &b.bench).collect();
            if have != names {
                return Err(ValidationError::Inconsistent(format!(
                    "{compiler}: its benches differ from those recorded"
                )));
            }
        }
        let old = self.compilers.iter().position(|c| c.compiler == compiler);
        let mut cols: Vec<(VarianceCompiler, BTreeMap<String, u64>)> = self
            .compilers
            .iter()
            .enumerate()
            .filter(|(i, _)| Some(*i) != old)
            .map(|(i, c)| {
                let col = self
                    .benches
                    .iter()
                    .map(|b| (b.bench.clone(), b.instructions[i]))
                    .collect();
                (c.clone(), col)
            })
            .collect();
        cols.push((
            VarianceCompiler {
                compiler: compiler.into(),
                wasm_sha256: wasm_sha256.into(),
            },
            results
                .benches
                .iter()
                .map(|(n, r)| (n.clone(), r.total.instructions()))
                .collect(),
        ));
        cols.sort_by_key(|c| version_key(&c.0.compiler));
        self.failed.retain(|f| f.compiler != compiler);
        self.compilers = cols.iter().map(|(c, _)| c.clone()).collect();
        self.benches = names
            .iter()
            .map(|n| VarianceRow {
                bench: (*n).clone(),
                instructions: cols.iter().map(|(_, col)| col[*n]).collect(),
            })
            .collect();
        Ok(())
    }

    /// Index of the baseline compiler.
    pub fn baseline_index(&self) -> Option<usize> {
        self.compilers
            .iter()
            .position(|c| c.compiler == self.baseline)
    }

    /// Δ% of compiler `i` against the baseline for every bench.
    pub fn deltas(&self, i: usize) -> Vec<f64> {
        let b = self.baseline_index().unwrap_or(0);
        self.benches
            .iter()
            .map(|r| pct(r.instructions[b], r.instructions[i]))
            .collect()
    }

    /// The canonical text of the file.
    pub fn to_yaml(&self) -> Result<String, ValidationError> {
        let mut o = String::new();
        for (k, v) in [
            ("about", &self.about),
            ("build", &self.build),
            ("source_commit", &self.source_commit),
            ("engine_commit", &self.engine_commit),
            ("baseline", &self.baseline),
        ] {
            let _ = writeln!(o, "{k}: {}", scalar(k, v)?);
        }
        o.push_str("compilers:\n");
        for c in &self.compilers {
            let _ = writeln!(o, "- compiler: {}", scalar("compiler", &c.compiler)?);
            let _ = writeln!(
                o,
                "  wasm_sha256: {}",
                scalar("wasm_sha256", &c.wasm_sha256)?
            );
        }
        if self.failed.is_empty() {
            o.push_str("failed: []\n");
        } else {
            o.push_str("failed:\n");
            for f in &self.failed {
                let _ = writeln!(o, "- compiler: {}", scalar("compiler", &f.compiler)?);
                let _ = writeln!(o, "  reason: {}", scalar("reason", &f.reason)?);
            }
        }
        o.push_str("benches:\n");
        for b in &self.benches {
            let v: Vec<String> = b.instructions.iter().map(u64::to_string).collect();
            let _ = writeln!(
                o,
                "- {{bench: {}, instructions: [{}]}}",
                scalar("bench", &b.bench)?,
                v.join(", ")
            );
        }
        Ok(o)
    }

    /// Checks the internal consistency: baseline present, one figure per compiler, sorted.
    pub fn check(&self) -> Result<(), ValidationError> {
        let bad = |m: String| {
            Err(ValidationError::Inconsistent(format!(
                "compiler_variance: {m}"
            )))
        };
        if self.baseline_index().is_none() {
            return bad(format!(
                "baseline {} is not among the compilers",
                self.baseline
            ));
        }
        if !is_hex(&self.source_commit, 40) || !is_hex(&self.engine_commit, 40) {
            return bad("source_commit and engine_commit must be 40 hex digits".into());
        }
        for c in &self.compilers {
            if !c.compiler.starts_with("rustc ") || !is_hex(&c.wasm_sha256, 64) {
                return bad(format!("{}: bad compiler or wasm_sha256", c.compiler));
            }
        }
        let v: Vec<_> = self
            .compilers
            .iter()
            .map(|c| version_key(&c.compiler))
            .collect();
        if v.windows(2).any(|w| w[0] >= w[1]) {
            return bad("compilers not sorted by version, or duplicated".into());
        }
        if self.benches.is_empty() {
            return bad("no benches".into());
        }
        if self.benches.windows(2).any(|w| w[0].bench >= w[1].bench) {
            return bad("benches not sorted, or duplicated".into());
        }
        if let Some(b) = self
            .benches
            .iter()
            .find(|b| b.instructions.len() != self.compilers.len())
        {
            return bad(format!("{}: one figure per compiler expected", b.bench));
        }
        Ok(())
    }
}

/// `(major, minor, patch)` of a `rustc X.Y.Z (...)` string.
fn version_key(compiler: &str) -> (u32, u32, u32) {
    semver_key(compiler.split_whitespace().nth(1).unwrap_or(""))
}

/// `(major, minor, patch)` of `X.Y.Z` (missing or malformed parts are 0).
fn semver_key(v: &str) -> (u32, u32, u32) {
    let mut it = v.split(['.', '-']).map(|p| p.parse::<u32>().unwrap_or(0));
    (
        it.next().unwrap_or(0),
        it.next().unwrap_or(0),
        it.next().unwrap_or(0),
    )
}

/// `1.84.0` of `rustc 1.84.0 (9fc6b4312 2025-01-07)`.
pub fn short_version(compiler: &str) -> &str {
    compiler.split_whitespace().nth(1).unwrap_or(compiler)
}

fn is_hex(s: &str, len: usize) -> bool {
    s.len() == len
        && s.bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
}

fn is_date(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 10
        && b[4] == b'-'
        && b[7] == b'-'
        && b.iter()
            .enumerate()
            .all(|(i, c)| i == 4 || i == 7 || c.is_ascii_digit())
}

/// A YAML scalar for `value` on one line (quoted when YAML needs it).
fn scalar(field: &'static str, value: &str) -> Result<String, ValidationError> {
    if value.contains(['\n', '\r']) {
        return Err(ValidationError::Multiline {
            field,
            value: value.into(),
        });
    }
    let plain = !value.is_empty()
        && !value.starts_with([
            ' ', '-', '?', ':', ',', '[', ']', '{', '}', '#', '&', '*', '!', '|', '>', '\'', '"',
            '%', '@', '`',
        ])
        && !value.ends_with(' ')
        && !value.contains(": ")
        && !value.contains(" #")
        && !value.contains(['{', '}', '[', ']', ','])
        && serde_yaml::from_str::<serde_yaml::Value>(value)
            .is_ok_and(|v| v == serde_yaml::Value::String(value.into()));
    if plain {
        Ok(value.into())
    } else {
        let mut q = String::from('"');
        for c in value.chars() {
            match c {
                '"' => q.push_str("\\\""),
                '\\' => q.push_str("\\\\"),
                c if c.is_control() => {
                    let _ = write!(q, "\\u{:04x}", c as u32);
                }
                c => q.push(c),
            }
        }
        q.push('"');
        Ok(q)
    }
}

fn float(x: f64) -> String {
    if x == 0.0 {
        "0".into()
    } else {
        let s = format!("{x:.6}");
        let s = s.trim_end_matches('0').trim_end_matches('.');
        s.to_string()
    }
}

/// `1234567` → `1,234,567`.
pub fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn signed(n: i64) -> String {
    if n < 0 {
        format!("−{}", thousands(n.unsigned_abs()))
    } else if n > 0 {
        format!("+{}", thousands(n as u64))
    } else {
        "0".into()
    }
}

/// `p` with a sign and at least `decimals` decimals, more (up to 8) so that a small non-zero
/// value shows two significant digits; `from 0` for an infinite change.
fn signed_pct(p: f64, decimals: usize) -> String {
    if p.is_infinite() {
        return "from 0".into();
    }
    if p == 0.0 {
        return "0".into();
    }
    let mut d = decimals;
    while d < 8 && p.abs() < 10f64.powi(1 - d as i32) {
        d += 1;
    }
    format!("{}{:.*}", if p < 0.0 { "−" } else { "+" }, d, p.abs())
}

fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Everything the generated sections of `VALIDATION.md` are made from.
#[derive(Debug, Clone)]
pub struct ValidationData {
    /// One per repository, sorted by repository.
    pub repositories: Vec<RepositoryData>,
    /// Explanations of the rows that differ.
    pub notes: Notes,
    /// The project canister per compiler.
    pub variance: CompilerVariance,
}

impl ValidationData {
    /// Every check of every file.
    pub fn check(&self) -> Result<(), ValidationError> {
        for r in &self.repositories {
            r.check()?;
        }
        self.notes.check(&self.repositories)?;
        self.variance.check()
    }

    fn suites(&self) -> impl Iterator<Item = (&RepositoryData, &Suite)> {
        self.repositories
            .iter()
            .flat_map(|r| r.suites.iter().map(move |s| (r, s)))
    }
}

/// How many differing rows the `differences` section lists per suite.
pub const DIFFERENCES_SHOWN: usize = 12;

#[derive(Default)]
struct Tally {
    suites: usize,
    benches: usize,
    scopes: usize,
    rows: usize,
    exact: usize,
    within: usize,
    exact_benches: usize,
    within_benches: usize,
    page_diffs: usize,
}

impl Tally {
    fn add(&mut self, s: &Suite) {
        self.suites += 1;
        self.benches += s.benches;
        self.scopes += s.scopes;
        self.rows += s.rows.len();
        self.exact += s.rows.iter().filter(|r| r.is_exact()).count();
        self.within += s.rows.iter().filter(|r| r.is_within_tolerance()).count();
        self.page_diffs += s
            .rows
            .iter()
            .filter(|r| {
                r.pocketic.heap_increase != r.engine.heap_increase
                    || r.pocketic.stable_memory_increase != r.engine.stable_memory_increase
            })
            .count();
        // A bench counts as exact (within) when its total and all its scopes are.
        for b in s.bench_rows() {
            let rows = || s.rows.iter().filter(|r| r.bench == b.bench);
            if rows().all(Row::is_exact) {
                self.exact_benches += 1;
            }
            if rows().all(Row::is_within_tolerance) {
                self.within_benches += 1;
            }
        }
    }

    fn merge(&mut self, t: &Tally) {
        self.suites += t.suites;
        self.benches += t.benches;
        self.scopes += t.scopes;
        self.rows += t.rows;
        self.exact += t.exact;
        self.within += t.within;
        self.exact_benches += t.exact_benches;
        self.within_benches += t.within_benches;
        self.page_diffs += t.page_diffs;
    }
}

/// Names of the generated sections, in the order they usually appear.
pub const SECTIONS: &[&str] = &[
    "totals",
    "suites",
    "builds",
    "differences",
    "variance-summary",
    "variance-benches",
];

/// The Markdown of one generated section of `VALIDATION.md`.
/// The Markdown of one generated section of `VALIDATION.md`.
pub fn render_section(name: &str, data: &ValidationData) -> Result<String, ValidationError> {
    match name {
        "totals" => Ok(totals_section(data)),
        "suites" => Ok(suites_section(data)),
        "builds" => Ok(builds_section(data)),
        "differences" => Ok(differences_section(data)),
        "variance-summary" => variance_summary_section(&data.variance),
        "variance-benches" => variance_benches_section(&data.variance),
        other => Err(ValidationError::Markdown(format!(
            "unknown section {other:?} (known: {})",
            SECTIONS.join(", ")
        ))),
    }
}

/// The totals: benchmarks, rows, how many are exact or within the tolerance, per PocketIC
/// server and per repository.
fn totals_section(data: &ValidationData) -> String {
    let mut o = String::new();
    let mut t = Tally::default();
    let mut repos_exact = 0;
    for r in &data.repositories {
        let mut tr = Tally::default();
        for s in &r.suites {
            tr.add(s);
        }
        if tr.exact == tr.rows {
            repos_exact += 1;
        }
        t.merge(&tr);
    }
    let _ = writeln!(
        o,
        "- {} repositories, {} results files, **{} benchmarks** and {} scopes: {} rows, \
         each compared on instructions, heap_increase and stable_memory_increase (and \
         calls for scopes).",
        data.repositories.len(),
        t.suites,
        t.benches,
        t.scopes,
        t.rows
    );
    let _ = writeln!(
        o,
        "- **Exact in every figure: {} of {} benchmarks** ({} of {} rows). Within \
         ±{TOLERANCE_PCT} % in every figure: {} benchmarks ({} rows).",
        t.exact_benches, t.benches, t.exact, t.rows, t.within_benches, t.within
    );
    let mut by_server: BTreeMap<&str, Tally> = BTreeMap::new();
    for (_, s) in data.suites() {
        by_server.entry(&s.pocketic_server).or_default().add(s);
    }
    for (server, t) in by_server.iter().rev() {
        let _ = writeln!(
            o,
            "- Figures measured with PocketIC {server}: exact {} of {} benchmarks ({} of {} \
             rows), within ±{TOLERANCE_PCT} % {} benchmarks, in {} results files.",
            t.exact_benches, t.benches, t.exact, t.rows, t.within_benches, t.suites
        );
    }
    let _ = writeln!(
        o,
        "- Repositories reproduced exactly in every row: {repos_exact} of {}.",
        data.repositories.len()
    );
    let _ = writeln!(
        o,
        "- Rows that differ in instructions only (heap and stable increase equal): {}; \
         rows whose heap or stable increase differs: {}.",
        t.rows - t.exact - t.page_diffs,
        t.page_diffs
    );
    o
}

/// One row per results file: exact and within counts, the others' median, the worst case.
fn suites_section(data: &ValidationData) -> String {
    let mut o = String::new();
    o.push_str(
        "| repository | results file @ commit | compiler | benches | scopes | exact | within ±0.01 % | median \\|Δ %\\| of the others | worst case (Δ instructions, Δ %) |\n\
         |---|---|---|---:|---:|---:|---:|---:|---|\n",
    );
    for (r, s) in data.suites() {
        let rows = s.rows.len();
        let exact = s.rows.iter().filter(|r| r.is_exact()).count();
        let within = s.rows.iter().filter(|r| r.is_within_tolerance()).count();
        let others: Vec<f64> = s
            .rows
            .iter()
            .filter(|r| !r.is_within_tolerance())
            .map(|r| r.delta.pct.abs())
            .collect();
        let med = if others.is_empty() {
            "–".to_string()
        } else {
            format!("{:.3}", median(others))
        };
        let worst = match s.worst() {
            None => "all exact".to_string(),
            Some(w) => {
                let status = match data.notes.of(&r.repository, s, w).map(|n| n.status) {
                    Some(NoteStatus::Measured) => "explained",
                    Some(NoteStatus::Open) => "open",
                    None => "no note",
                };
                format!(
                    "{} ({}, {} %), {status}",
                    w.key(),
                    signed(w.delta.instructions),
                    signed_pct(w.delta.pct, 4)
                )
            }
        };
        let _ = writeln!(
            o,
            "| {} | `{}` | {} | {} | {} | {exact}/{rows} | {within}/{rows} | {med} | {worst} |",
            r.repository,
            s.label(),
            short_version(&s.compiler),
            s.benches,
            s.scopes,
        );
    }
    o
}

/// How each results file was produced: commit, canbench and PocketIC, compiler, lockfile,
/// wasm and engine commit.
fn builds_section(data: &ValidationData) -> String {
    let mut o = String::new();
    o.push_str(
        "| repository | results file | commit (date) | results written by | compiler (why) | lockfile | wasm sha256 | engine commit |\n\
         |---|---|---|---|---|---|---|---|\n",
    );
    for (r, s) in data.suites() {
        let _ = writeln!(
            o,
            "| {} | `{}` | `{}` ({}) | canbench {}, PocketIC {} | {} ({}) | {} | `{}…` | `{}` |",
            r.repository,
            s.results_file,
            s.commit,
            s.commit_date,
            s.canbench,
            s.pocketic_server,
            s.compiler,
            s.compiler_source,
            s.lockfile,
            &s.wasm_sha256[..16],
            &s.engine_commit[..12],
        );
    }
    o
}

/// Every results file's differing rows (the largest [`DIFFERENCES_SHOWN`]) and their notes.
fn differences_section(data: &ValidationData) -> String {
    let mut o = String::new();
    let mut any = false;
    for (r, s) in data.suites() {
        any |= suite_differences(&mut o, data, &r.repository, s);
    }
    if !any {
        o.push_str("No row differs.\n\n");
    }
    // The section ends with a blank line; drop it so the end marker follows the text.
    while o.ends_with("\n\n") {
        o.pop();
    }
    o
}

/// One results file's differing rows and their notes; false (and nothing written) when every
/// row is exact.
fn suite_differences(o: &mut String, data: &ValidationData, repository: &str, s: &Suite) -> bool {
    let mut diff: Vec<&Row> = s.rows.iter().filter(|row| !row.is_exact()).collect();
    if diff.is_empty() {
        return false;
    }
    diff.sort_by(|a, b| {
        b.worst_pct()
            .total_cmp(&a.worst_pct())
            .then(a.key().cmp(&b.key()))
    });
    let _ = writeln!(
        o,
        "**{} `{}`** ({} of {} rows differ{}):\n",
        repository,
        s.label(),
        diff.len(),
        s.rows.len(),
        if diff.len() > DIFFERENCES_SHOWN {
            format!(", the {DIFFERENCES_SHOWN} largest shown")
        } else {
            String::new()
        }
    );
    o.push_str(
        "| bench | figure | PocketIC | engine | Δ | Δ % | note |\n|---|---|---:|---:|---:|---:|---|\n",
    );
    for row in diff.iter().take(DIFFERENCES_SHOWN) {
        let note = match data.notes.of(repository, s, row) {
            Some(n) if n.bench.is_some() => "own",
            Some(_) => "suite",
            None => "none",
        };
        for (figure, p, e) in row.differences() {
            let _ = writeln!(
                o,
                "| {} | {figure} | {} | {} | {} | {} | {note} |",
                row.key(),
                thousands(p),
                thousands(e),
                signed(e as i64 - p as i64),
                signed_pct(pct(p, e), 4)
            );
        }
    }
    o.push('\n');
    suite_notes(o, data, repository, s);
    o.push('\n');
    true
}

/// The notes of one results file: the suite's first, then each bench's.
fn suite_notes(o: &mut String, data: &ValidationData, repository: &str, s: &Suite) {
    let mut notes: Vec<&Note> = data
        .notes
        .notes
        .iter()
        .filter(|n| n.is_for_suite(repository, s))
        .collect();
    notes.sort_by_key(|n| (n.bench.is_some(), n.bench.clone(), n.scope.clone()));
    for n in notes {
        let status = match n.status {
            NoteStatus::Measured => "Explained",
            NoteStatus::Open => "Open question",
        };
        let whom = match (&n.bench, &n.scope) {
            (None, _) => "All differing rows".to_string(),
            (Some(b), None) => format!("`{b}`"),
            (Some(b), Some(sc)) => format!("`{b}::{sc}`"),
        };
        let _ = writeln!(o, "- {whom} ({status}). {}", n.note.trim());
    }
}

/// Per compiler: the median and the largest difference from the baseline compiler.
fn variance_summary_section(v: &CompilerVariance) -> Result<String, ValidationError> {
    let mut o = String::new();
    let Some(b) = v.baseline_index() else {
        return Err(ValidationError::Markdown("variance: no baseline".into()));
    };
    o.push_str(
        "| compiler | wasm sha256 | median \\|Δ %\\| vs baseline | max \\|Δ %\\| vs baseline | bench of the max |\n\
         |---|---|---:|---:|---|\n",
    );
    let mut all = Vec::new();
    for (i, c) in v.compilers.iter().enumerate() {
        let d: Vec<f64> = v.deltas(i).into_iter().map(f64::abs).collect();
        let (mi, mx) =
            d.iter().enumerate().fold(
                (0, 0.0f64),
                |acc, (j, x)| if *x > acc.1 { (j, *x) } else { acc },
            );
        if i == b {
            let _ = writeln!(
                o,
                "| {} (baseline) | `{}…` | 0 | 0 | |",
                c.compiler,
                &c.wasm_sha256[..16]
            );
            continue;
        }
        all.extend(d.iter().copied());
        let _ = writeln!(
            o,
            "| {} | `{}…` | {:.3} | {:.3} | {} |",
            c.compiler,
            &c.wasm_sha256[..16],
            median(d.clone()),
            mx,
            v.benches[mi].bench
        );
    }
    for f in &v.failed {
        let _ = writeln!(o, "| {} | did not build: {} | | | |", f.compiler, f.reason);
    }
    let max = all.iter().copied().fold(0.0f64, f64::max);
    let _ = writeln!(
        o,
        "\nOver all {} benches and the {} other compilers: median |Δ %| {:.3}, max |Δ %| {:.3}.",
        v.benches.len(),
        v.compilers.len() - 1,
        median(all),
        max
    );
    Ok(o)
}

/// Per bench: every compiler's instructions and the largest difference from the baseline.
fn variance_benches_section(v: &CompilerVariance) -> Result<String, ValidationError> {
    let mut o = String::new();
    let Some(b) = v.baseline_index() else {
        return Err(ValidationError::Markdown("variance: no baseline".into()));
    };
    let _ = write!(o, "| bench |");
    for c in &v.compilers {
        let _ = write!(o, " {} |", short_version(&c.compiler));
    }
    let _ = writeln!(o, " max \\|Δ %\\| vs {} |", short_version(&v.baseline));
    let _ = write!(o, "|---|");
    for _ in &v.compilers {
        o.push_str("---:|");
    }
    o.push_str("---:|\n");
    for (j, row) in v.benches.iter().enumerate() {
        let _ = write!(o, "| {} |", row.bench);
        for (i, n) in row.instructions.iter().enumerate() {
            if i == b {
                let _ = write!(o, " **{}** |", thousands(*n));
            } else {
                let _ = write!(o, " {} |", thousands(*n));
            }
        }
        let mx = (0..v.compilers.len())
            .map(|i| v.deltas(i)[j].abs())
            .fold(0.0f64, f64::max);
        let _ = writeln!(o, " {mx:.3} |");
    }
    Ok(o)
}

/// How the README's validation line starts ([`readme_line`]).
pub const README_PREFIX: &str = "**Validation:** ";

/// The README's one-line summary of the validation, made from the data.
pub fn readme_line(data: &ValidationData) -> String {
    let mut t = Tally::default();
    let mut worst = 0.0f64;
    for (_, s) in data.suites() {
        t.add(s);
        if let Some(w) = s.worst() {
            worst = worst.max(w.delta.pct.abs());
        }
    }
    // The same counts for the suites measured with the newest PocketIC.
    let newest = data
        .suites()
        .map(|(_, s)| s.pocketic_server.as_str())
        .max_by_key(|v| semver_key(v))
        .map(|v| {
            let mut tn = Tally::default();
            for (_, s) in data.suites().filter(|(_, s)| s.pocketic_server == v) {
                tn.add(s);
            }
            format!(
                " ({} of {} of those measured with PocketIC {v})",
                tn.exact_benches, tn.benches
            )
        })
        .unwrap_or_default();
    format!(
        "{README_PREFIX}the offline engine reproduces PocketIC's canbench figures exactly on {} of {} \
         published benchmarks{newest} from {} repositories, each rebuilt from the commit of its \
         results with that repository's own compiler; the others differ by at most {} % in \
         instructions, with open causes \
         ([src/offline_engine/VALIDATION.md](src/offline_engine/VALIDATION.md)).",
        t.exact_benches,
        t.benches,
        data.repositories.len(),
        signed_pct(worst, 2).trim_start_matches('+')
    )
}

/// The opening marker of generated section `name`.
pub fn begin_marker(name: &str) -> String {
    format!("<!-- generated from validation/*.yml (section {name}): do not edit -->")
}

/// The closing marker of every generated section.
pub const END_MARKER: &str = "<!-- end generated -->";

/// `markdown` with every generated section replaced by [`render_section`]'s text. Fails on an
/// unknown section, a missing end marker, or when no section is present.
pub fn regenerate_markdown(
    markdown: &str,
    data: &ValidationData,
) -> Result<String, ValidationError> {
    const OPEN: &str = "<!-- generated from validation/*.yml (section ";
    let mut out = String::new();
    let mut rest = markdown;
    let mut found = 0;
    while let Some(start) = rest.find(OPEN) {
        let after = &rest[start + OPEN.len()..];
        let name_end = after
            .find(')')
            .ok_or_else(|| ValidationError::Markdown("unterminated marker".into()))?;
        let name = &after[..name_end];
        let marker = begin_marker(name);
        if !rest[start..].starts_with(&marker) {
            return Err(ValidationError::Markdown(format!(
                "malformed marker for section {name:?}"
            )));
        }
        let body_start = start + marker.len();
        let end = rest[body_start..].find(END_MARKER).ok_or_else(|| {
            ValidationError::Markdown(format!("section {name:?} has no end marker"))
        })?;
        out.push_str(&rest[..body_start]);
        out.push('\n');
        out.push_str(&render_section(name, data)?);
        out.push_str(END_MARKER);
        rest = &rest[body_start + end + END_MARKER.len()..];
        found += 1;
    }
    if found == 0 {
        return Err(ValidationError::Markdown("no generated section".into()));
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `(bench, instructions, [(scope, instructions)])`.
    type Spec<'a> = (&'a str, u64, &'a [(&'a str, u64)]);

    fn results(benches: &[Spec<'_>]) -> ResultsFile {
        let m = |i: u64| Measurement {
            calls: Some(1),
            instructions: Some(i),
            heap_increase: Some(0),
            stable_memory_increase: Some(1),
        };
        ResultsFile {
            benches: benches
                .iter()
                .map(|(n, i, scopes)| {
                    (
                        n.to_string(),
                        BenchResult {
                            total: m(*i),
                            scopes: scopes.iter().map(|(s, i)| (s.to_string(), m(*i))).collect(),
                        },
                    )
                })
                .collect(),
            version: "0.2.0".into(),
        }
    }

    fn suite(rows: Vec<Row>) -> Suite {
        Suite {
            results_file: "benchmarks/x/canbench_results.yml".into(),
            commit: "0".repeat(40),
            commit_date: "2026-01-02".into(),
            canbench: "0.2.0".into(),
            pocketic_server: "9.0.1".into(),
            compiler: "rustc 1.84.0 (9fc6b4312 2025-01-07)".into(),
            compiler_source: "rust-toolchain.toml: 1.84.0".into(),
            lockfile: "Cargo.lock, --locked".into(),
            build: "cargo build --release".into(),
            wasm_sha256: "a".repeat(64),
            engine_commit: "b".repeat(40),
            benches: rows.iter().filter(|r| r.scope.is_none()).count(),
            scopes: rows.iter().filter(|r| r.scope.is_some()).count(),
            rows,
        }
    }

    #[test]
    fn compare_pairs_benches_and_scopes() {
        let p = results(&[("a", 1000, &[("s", 10)]), ("b", 7, &[])]);
        let e = results(&[("a", 1001, &[("s", 10)]), ("b", 7, &[])]);
        let rows = compare(&p, &e).unwrap();
        assert_eq!(rows.len(), 3);
        assert_eq!(rows[0].key(), "a");
        assert_eq!(rows[0].delta.instructions, 1);
        assert_eq!(rows[0].delta.pct, 0.1);
        assert!(!rows[0].is_exact() && !rows[0].is_within_tolerance());
        assert_eq!(rows[1].key(), "a::s");
        assert_eq!(rows[1].pocketic.calls, Some(1));
        assert!(rows[2].is_exact());
        let missing = results(&[("a", 1000, &[])]);
        assert!(matches!(
            compare(&p, &missing),
            Err(ValidationError::Unmatched { .. })
        ));
    }

    #[test]
    fn tolerance_is_per_figure() {
        let p = results(&[("a", 1_000_000, &[])]);
        let e = results(&[("a", 1_000_100, &[])]);
        let row = &compare(&p, &e).unwrap()[0];
        assert!(row.is_within_tolerance());
        let mut heap = row.clone();
        heap.engine.heap_increase = 1;
        assert!(!heap.is_within_tolerance());
        assert_eq!(heap.worst_pct(), f64::INFINITY);
    }

    #[test]
    fn yaml_round_trips_and_check_catches_edits() {
        let p = results(&[("a b", 1000, &[("s: x", 10)]), ("b", 7, &[])]);
        let e = results(&[("a b", 999, &[("s: x", 10)]), ("b", 7, &[])]);
        let mut data = RepositoryData::new("owner/repo");
        data.upsert(suite(compare(&p, &e).unwrap()));
        let text = data.to_yaml().unwrap();
        let parsed: RepositoryData = serde_yaml::from_str(&text).unwrap();
        assert_eq!(parsed, data);
        parsed.check().unwrap();
        assert_eq!(parsed.to_yaml().unwrap(), text);

        let edited: RepositoryData =
            serde_yaml::from_str(&text.replacen("instructions: 999", "instructions: 998", 1))
                .unwrap();
        assert!(
            edited.check().is_err(),
            "a changed figure must break the delta"
        );
        let mut counted = data.clone();
        counted.suites[0].benches = 5;
        assert!(counted.check().is_err());
    }

    #[test]
    fn scalars_quote_what_yaml_would_misread() {
        assert_eq!(scalar("f", "plain text").unwrap(), "plain text");
        assert_eq!(scalar("f", "1.84.0").unwrap(), "1.84.0");
        assert_eq!(scalar("f", "true").unwrap(), "\"true\"");
        assert_eq!(scalar("f", "12").unwrap(), "\"12\"");
        assert_eq!(scalar("f", "a: b").unwrap(), "\"a: b\"");
        assert!(scalar("f", "a\nb").is_err());
        for v in ["x, y", "`cmd`", "{a}", "it's", "say \"hi\""] {
            let s = scalar("f", v).unwrap();
            let back: String = serde_yaml::from_str(&s).unwrap();
            assert_eq!(back, v);
        }
    }

    #[test]
    fn variance_columns_sorted_by_version() {
        let mut v =
            CompilerVariance::new("b", &"1".repeat(40), &"2".repeat(40), "rustc 1.95.0 (x)");
        v.upsert(
            "rustc 1.95.0 (x)",
            &"c".repeat(64),
            &results(&[("a", 100, &[])]),
        )
        .unwrap();
        v.upsert(
            "rustc 1.90.0 (y)",
            &"d".repeat(64),
            &results(&[("a", 110, &[])]),
        )
        .unwrap();
        v.upsert(
            "rustc 1.100.0 (z)",
            &"e".repeat(64),
            &results(&[("a", 90, &[])]),
        )
        .unwrap();
        assert_eq!(v.benches[0].instructions, vec![110, 100, 90]);
        assert_eq!(v.deltas(0), vec![10.0]);
        v.check().unwrap();
        let parsed: CompilerVariance = serde_yaml::from_str(&v.to_yaml().unwrap()).unwrap();
        assert_eq!(parsed, v);
        assert!(
            v.upsert(
                "rustc 1.91.0 (w)",
                &"f".repeat(64),
                &results(&[("b", 1, &[])])
            )
            .is_err()
        );
    }

    #[test]
    fn markdown_sections_are_replaced_and_unknown_ones_rejected() {
        let p = results(&[("a", 1000, &[])]);
        let data = ValidationData {
            repositories: vec![{
                let mut d = RepositoryData::new("o/r");
                d.upsert(suite(compare(&p, &p).unwrap()));
                d
            }],
            notes: Notes {
                about: String::new(),
                notes: Vec::new(),
            },
            variance: {
                let mut v = CompilerVariance::new(
                    "b",
                    &"1".repeat(40),
                    &"2".repeat(40),
                    "rustc 1.95.0 (x)",
                );
                v.upsert("rustc 1.95.0 (x)", &"c".repeat(64), &p).unwrap();
                v
            },
        };
        data.check().unwrap();
        let md = format!(
            "intro\n{}\nstale\n{END_MARKER}\nafter\n",
            begin_marker("totals")
        );
        let out = regenerate_markdown(&md, &data).unwrap();
        assert!(
            out.contains("Exact in every figure: 1 of 1 benchmarks"),
            "{out}"
        );
        assert!(!out.contains("stale"));
        assert!(out.ends_with("after\n"));
        assert_eq!(regenerate_markdown(&out, &data).unwrap(), out);
        let unknown = format!("{}\n{END_MARKER}\n", begin_marker("nope"));
        assert!(regenerate_markdown(&unknown, &data).is_err());
        assert!(regenerate_markdown("no markers", &data).is_err());
        for s in SECTIONS {
            render_section(s, &data).unwrap();
        }
    }

    #[test]
    fn every_differing_row_needs_a_note() {
        let p = results(&[("a", 1000, &[]), ("b", 10, &[])]);
        let e = results(&[("a", 1001, &[]), ("b", 10, &[])]);
        let mut d = RepositoryData::new("o/r");
        d.upsert(suite(compare(&p, &e).unwrap()));
        let repos = vec![d];
        let note = |bench: Option<&str>| Note {
            repository: "o/r".into(),
            results_file: "benchmarks/x/canbench_results.yml".into(),
            commit: "0".repeat(40),
            bench: bench.map(String::from),
            scope: None,
            status: NoteStatus::Open,
            note: "why".into(),
        };
        let notes = |v: Vec<Note>| Notes {
            about: String::new(),
            notes: v,
        };
        assert!(notes(vec![]).check(&repos).is_err(), "row a has no note");
        notes(vec![note(None)]).check(&repos).unwrap();
        notes(vec![note(Some("a"))]).check(&repos).unwrap();
        assert!(
            notes(vec![note(Some("b"))]).check(&repos).is_err(),
            "b is exact"
        );
        assert!(
            notes(vec![note(Some("a")), note(Some("a"))])
                .check(&repos)
                .is_err(),
            "duplicate"
        );
        let s = &repos[0].suites[0];
        let n = notes(vec![note(None), note(Some("a"))]);
        assert_eq!(
            n.of("o/r", s, &s.rows[0]).unwrap().bench.as_deref(),
            Some("a")
        );
    }

    #[test]
    fn numbers_format() {
        assert_eq!(thousands(1_234_567), "1,234,567");
        assert_eq!(thousands(12), "12");
        assert_eq!(signed(-1500), "−1,500");
        assert_eq!(float(-0.000031), "-0.000031");
        assert_eq!(float(12.5), "12.5");
        assert_eq!(
            version_key("rustc 1.93.1 (01f6ddf75 2026-02-11)"),
            (1, 93, 1)
        );
    }
}
