//! `offline-engine`: run canister wasm offline with the IC's metering.
//!
//! Subcommands: `candid` (print the Candid interface), `info` (imports, exports, metadata),
//! `call` (install and run one message), `validation record|variance` (validation data, see
//! VALIDATION.md). canbench runs through the real canbench CLI and `offline-pocket-ic` (crate
//! `pocket_ic_server`).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use offline_engine::validation::ResultsFile;
use offline_engine::{Canister, Engine, EngineConfig, MessageResult, Settings, SubnetKind};

#[derive(Parser)]
#[command(
    name = "offline-engine",
    version,
    about = "Run IC canister wasm offline on wasmtime with the IC's instruction metering"
)]
struct Cli {
    /// Do not use the compiled-module cache.
    #[arg(long, global = true)]
    no_cache: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print the Candid interface of a canister wasm.
    Candid {
        /// The wasm file.
        wasm: PathBuf,
    },
    /// Print the imports, exports and metadata of a canister wasm.
    Info {
        /// The wasm file.
        wasm: PathBuf,
    },
    /// Install a wasm and run one update (or query) message; prints the result and its cost.
    Call {
        /// The wasm file.
        wasm: PathBuf,
        /// Method name.
        method: String,
        /// Run as a query.
        #[arg(long)]
        query: bool,
        /// Candid argument, hex (default: empty tuple).
        #[arg(long, default_value = "4449444c0000")]
        arg_hex: String,
        /// Candid init argument, hex (default: empty tuple).
        #[arg(long, default_value = "4449444c0000")]
        init_hex: String,
        /// Use the benchmarking subnet limits.
        #[arg(long)]
        benchmarking: bool,
    },
    /// Record validation data (`src/offline_engine/validation/`, see VALIDATION.md).
    #[command(subcommand)]
    Validation(Box<ValidationCommand>),
}

#[derive(Subcommand)]
enum ValidationCommand {
    /// Compare a published canbench results file with the engine's results for the same benches
    /// and write the suite into a repository's data file (replacing the suite of that file).
    Record {
        /// The repository's data file (created if missing), e.g. validation/dfinity-canbench.yml.
        #[arg(long)]
        data: PathBuf,
        /// `owner/name` on GitHub.
        #[arg(long)]
        repository: String,
        /// Path of the results file in the repository.
        #[arg(long)]
        results_file: String,
        /// The commit the figures were produced at (40 hex).
        #[arg(long)]
        commit: String,
        /// Its committer date, YYYY-MM-DD.
        #[arg(long)]
        commit_date: String,
        /// The published results file (a checkout of that commit).
        #[arg(long)]
        pocketic: PathBuf,
        /// The engine's results file for the wasm built from that commit.
        #[arg(long)]
        engine: PathBuf,
        /// The PocketIC server version the canbench that wrote the results runs.
        #[arg(long)]
        pocketic_server: String,
        /// The wasm the engine ran (its SHA-256 is recorded).
        #[arg(long)]
        wasm: PathBuf,
        /// `rustc -V` of the compiler that built it.
        #[arg(long)]
        compiler: String,
        /// Why that compiler.
        #[arg(long)]
        compiler_source: String,
        /// Lockfile use.
        #[arg(long)]
        lockfile: String,
        /// The build command.
        #[arg(long)]
        build: String,
        /// The engine commit whose binary produced `--engine` (40 hex).
        #[arg(long)]
        engine_commit: String,
    },
    /// Add one compiler's column to the compiler-variance data of the project canister.
    Variance {
        /// The data file (created if missing), e.g. validation/compiler_variance.yml.
        #[arg(long)]
        data: PathBuf,
        /// `rustc -V` of the compiler.
        #[arg(long)]
        compiler: String,
        /// The engine's results file for the wasm that compiler built.
        #[arg(long)]
        engine: PathBuf,
        /// That wasm (its SHA-256 is recorded).
        #[arg(long)]
        wasm: PathBuf,
        /// The baseline compiler (`rustc -V`), used when the file is created.
        #[arg(long)]
        baseline: String,
        /// How the wasm was built, used when the file is created.
        #[arg(long)]
        build: String,
        /// The project commit the canister was built from (40 hex), used when the file is created.
        #[arg(long)]
        source_commit: String,
        /// The engine commit (40 hex), used when the file is created.
        #[arg(long)]
        engine_commit: String,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e}");
            let mut source = std::error::Error::source(e.as_ref());
            while let Some(s) = source {
                eprintln!("  caused by: {s}");
                source = s.source();
            }
            ExitCode::from(2)
        }
    }
}

fn run(cli: Cli) -> Result<ExitCode, Box<dyn std::error::Error>> {
    let engine = Engine::new(EngineConfig {
        cache: !cli.no_cache,
        cache_dir: None,
    })?;
    match cli.command {
        Command::Candid { wasm } => {
            let program = engine.load_file(&wasm)?;
            let (mut canister, _) =
                Canister::install(&engine, &program, b"DIDL\x00\x00", Settings::benchmarking())?;
            match canister.candid_interface()? {
                Some(text) => {
                    println!("{text}");
                    Ok(ExitCode::SUCCESS)
                }
                None => {
                    eprintln!(
                        "the wasm exports no get_candid_pointer and has no candid:service metadata"
                    );
                    Ok(ExitCode::from(1))
                }
            }
        }
        Command::Info { wasm } => {
            let program = engine.load_file(&wasm)?;
            let info = program.info();
            println!("sha256: {}", program.sha256_hex());
            println!("memory64: {}", info.memory64);
            println!(
                "ic0 imports ({}): {}",
                info.ic0_imports.len(),
                info.ic0_imports.join(", ")
            );
            println!("exports ({}):", info.function_exports.len());
            for e in &info.function_exports {
                println!("  {e}");
            }
            for (name, data) in &info.metadata {
                println!("metadata {name}: {} bytes", data.len());
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Call {
            wasm,
            method,
            query,
            arg_hex,
            init_hex,
            benchmarking,
        } => {
            let program = engine.load_file(&wasm)?;
            let subnet = if benchmarking {
                SubnetKind::Benchmarking
            } else {
                SubnetKind::Application
            };
            let (mut canister, init) = Canister::install(
                &engine,
                &program,
                &hex::decode(init_hex)?,
                Settings {
                    subnet,
                    ..Settings::default()
                },
            )?;
            println!(
                "install: {} instructions ({} billed)",
                init.instructions, init.billed_instructions
            );
            let arg = hex::decode(arg_hex)?;
            let exec = if query {
                canister.query(&method, &arg)?
            } else {
                canister.update(&method, &arg)?
            };
            for line in &exec.logs {
                println!("log: {line}");
            }
            match &exec.result {
                MessageResult::Reply(b) => println!("reply: {}", hex::encode(b)),
                other => println!("result: {other:?}"),
            }
            println!(
                "instructions: {}, billed: {}, heap dirty pages: {}, stable dirty pages: {}, {:.2} G instructions/s",
                exec.instructions,
                exec.billed_instructions,
                exec.heap_dirty_pages,
                exec.stable_dirty_pages,
                exec.instructions_per_second() / 1e9
            );
            Ok(ExitCode::SUCCESS)
        }
        Command::Validation(cmd) => validation(*cmd),
    }
}

fn sha256_file(path: &std::path::Path) -> Result<String, Box<dyn std::error::Error>> {
    use sha2::Digest;
    let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(hex::encode(sha2::Sha256::digest(bytes)))
}

fn validation(cmd: ValidationCommand) -> Result<ExitCode, Box<dyn std::error::Error>> {
    use offline_engine::validation::{self, CompilerVariance, RepositoryData, Suite};
    let read = |p: &std::path::Path| -> Result<Option<String>, Box<dyn std::error::Error>> {
        match std::fs::read_to_string(p) {
            Ok(t) => Ok(Some(t)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(format!("{}: {e}", p.display()).into()),
        }
    };
    match cmd {
        ValidationCommand::Record {
            data,
            repository,
            results_file,
            commit,
            commit_date,
            pocketic,
            engine,
            pocketic_server,
            wasm,
            compiler,
            compiler_source,
            lockfile,
            build,
            engine_commit,
        } => {
            let published = ResultsFile::read(&pocketic)?;
            if published.benches.is_empty() {
                return Err(format!("{}: no benches", pocketic.display()).into());
            }
            let ours = ResultsFile::read(&engine)?;
            let rows = validation::compare(&published, &ours)?;
            let mut file = match read(&data)? {
                Some(t) => serde_yaml::from_str::<RepositoryData>(&t)?,
                None => RepositoryData::new(&repository),
            };
            if file.repository != repository {
                return Err(format!("{} holds {}", data.display(), file.repository).into());
            }
            let suite = Suite {
                results_file,
                commit,
                commit_date,
                canbench: published.version.clone(),
                pocketic_server,
                compiler,
                compiler_source,
                lockfile,
                build,
                wasm_sha256: sha256_file(&wasm)?,
                engine_commit,
                benches: rows.iter().filter(|r| r.scope.is_none()).count(),
                scopes: rows.iter().filter(|r| r.scope.is_some()).count(),
                rows,
            };
            let exact = suite.rows.iter().filter(|r| r.is_exact()).count();
            let within = suite
                .rows
                .iter()
                .filter(|r| r.is_within_tolerance())
                .count();
            println!(
                "{}: {} benches, {} scopes; exact {exact}/{n}, within ±{}% {within}/{n}",
                suite.results_file,
                suite.benches,
                suite.scopes,
                validation::TOLERANCE_PCT,
                n = suite.rows.len()
            );
            for r in suite.rows.iter().filter(|r| !r.is_exact()) {
                println!(
                    "  {}: {:?} -> {:?} ({:+} instructions, {:+.6}%)",
                    r.key(),
                    r.pocketic,
                    r.engine,
                    r.delta.instructions,
                    r.delta.pct
                );
            }
            file.upsert(suite);
            file.check()?;
            std::fs::write(&data, file.to_yaml()?)?;
            Ok(ExitCode::SUCCESS)
        }
        ValidationCommand::Variance {
            data,
            compiler,
            engine,
            wasm,
            baseline,
            build,
            source_commit,
            engine_commit,
        } => {
            let ours = ResultsFile::read(&engine)?;
            if ours.benches.is_empty() {
                return Err(format!("{}: no benches", engine.display()).into());
            }
            let mut file = match read(&data)? {
                Some(t) => serde_yaml::from_str::<CompilerVariance>(&t)?,
                None => CompilerVariance::new(&build, &source_commit, &engine_commit, &baseline),
            };
            file.upsert(&compiler, &sha256_file(&wasm)?, &ours)?;
            std::fs::write(&data, file.to_yaml()?)?;
            println!(
                "{}: {} compilers, {} benches",
                data.display(),
                file.compilers.len(),
                file.benches.len()
            );
            Ok(ExitCode::SUCCESS)
        }
    }
}
