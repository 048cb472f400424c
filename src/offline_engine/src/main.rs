//! `offline-engine`: run canister wasm offline with the IC's metering.
//!
//! Subcommands: `canbench` (run the canister's canbench benchmarks), `candid` (print the
//! Candid interface), `info` (imports, exports, metadata), `call` (install and run one message),
//! `profile` (the per-function instruction profile of one message), `profile-bench` (that of a
//! canbench benchmark), `host-time` (the engine's own time per message against the heap size).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use offline_engine::canbench::{self, BenchResult, ResultsFile, RunOptions};
use offline_engine::{
    Canister, Engine, EngineConfig, Execution, MessageResult, Profile, Program, Settings,
    SubnetKind,
};

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
    /// Run the `__canbench__*` benchmarks of canbench.yml (like canbench, offline).
    Canbench {
        /// Only benchmarks whose name contains this.
        pattern: Option<String>,
        /// The canbench configuration.
        #[arg(long, default_value = "canbench.yml")]
        config: PathBuf,
        /// Write the results as the new baseline.
        #[arg(long)]
        persist: bool,
        /// Exit non-zero if a benchmark's instructions regressed beyond the noise threshold.
        #[arg(long)]
        fail_on_regression: bool,
        /// Noise threshold in percent.
        #[arg(long, default_value_t = 2.0)]
        noise_threshold: f64,
        /// Skip build_cmd.
        #[arg(long)]
        no_build: bool,
        /// Results file (default: canbench_results.offline.yml next to canbench.yml).
        #[arg(long)]
        results_file: Option<PathBuf>,
    },
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
    /// Install a wasm, make the setup calls, and profile one update (or query): instructions per
    /// function with their call stacks, adding up to the message's instructions exactly.
    Profile {
        /// The wasm file (function names come from its `name` section: `scripts/build.sh`
        /// writes `target/canister/*.named.wasm` with it).
        wasm: PathBuf,
        /// Method name.
        method: String,
        /// Run as a query.
        #[arg(long)]
        query: bool,
        /// Candid argument, hex (default: empty tuple).
        #[arg(long, default_value = "4449444c0000")]
        arg_hex: String,
        /// Candid install argument, hex (default: empty tuple).
        #[arg(long, alias = "init-hex", default_value = "4449444c0000")]
        install_hex: String,
        /// An update to run before the profiled message, as METHOD or METHOD:ARG_HEX
        /// (repeatable, in order).
        #[arg(long)]
        setup: Vec<String>,
        /// Use the benchmarking subnet limits.
        #[arg(long)]
        benchmarking: bool,
        #[command(flatten)]
        output: ProfileOutput,
    },
    /// Profile one canbench benchmark (the `__canbench__<bench>` query, on the benchmarking
    /// subnet, from the post-install state as canbench runs it).
    ProfileBench {
        /// The canbench wasm (with a `name` section for function names).
        wasm: PathBuf,
        /// The benchmark's name.
        bench: String,
        /// Candid install argument, hex (default: empty tuple; canbench.yml's `init_args.hex`).
        #[arg(long, alias = "init-hex", default_value = "4449444c0000")]
        install_hex: String,
        /// A file whose bytes become the stable memory after install (canbench.yml's
        /// `stable_memory.file`).
        #[arg(long)]
        stable_memory: Option<PathBuf>,
        #[command(flatten)]
        output: ProfileOutput,
    },
    /// Measure the engine's own time per message against the heap size (a canister whose heap
    /// is grown to each size runs updates and queries that write eight pages).
    HostTime {
        /// Heap sizes in MiB (multiples of 8).
        #[arg(long, value_delimiter = ',', default_value = "16,64,256,1024")]
        heap_mib: Vec<u64>,
        /// Measured messages of each kind per size (the median is reported).
        #[arg(long, default_value_t = 20)]
        messages: u32,
    },
}

/// Where a profile goes.
#[derive(Args)]
struct ProfileOutput {
    /// Functions in the table (by self instructions).
    #[arg(long, default_value_t = 30)]
    top: usize,
    /// Write a flame graph (SVG) here.
    #[arg(long)]
    svg: Option<PathBuf>,
    /// Write the folded stacks here.
    #[arg(long)]
    folded: Option<PathBuf>,
}

fn hex_arg(what: &str, text: &str) -> Result<Vec<u8>, Box<dyn std::error::Error>> {
    hex::decode(text.trim()).map_err(|e| format!("{what}: {e}").into())
}

fn describe(e: &Execution) -> String {
    let result = match &e.result {
        MessageResult::Reply(b) => format!("reply of {} bytes", b.len()),
        other => format!("{other:?}"),
    };
    format!(
        "{}: {result}\ninstructions: {} (billed {}), heap dirty pages: {}, stable dirty pages: {}, \
         {:.3} ms with the profiler",
        e.entry,
        e.instructions,
        e.billed_instructions,
        e.heap_dirty_pages,
        e.stable_dirty_pages,
        e.wall_time.as_secs_f64() * 1e3
    )
}

/// Warns when the program has no function names (a wasm without `name` section).
fn warn_without_names(program: &Program) {
    let imported = program.info().ic0_imports.len();
    let named = program
        .function_names()
        .is_some_and(|names| names.iter().skip(imported).any(|n| !n.starts_with("func[")));
    if !named {
        eprintln!(
            "warning: the wasm has no function names (no `name` section); profile the \
             `.named.wasm` that scripts/build.sh writes next to it"
        );
    }
}

fn write_profile(
    profile: &Profile,
    output: &ProfileOutput,
    title: &str,
) -> Result<(), Box<dyn std::error::Error>> {
    print!("{}", profile.top_table(output.top));
    if let Some(path) = &output.folded {
        std::fs::write(path, profile.folded())?;
        eprintln!("folded stacks: {}", path.display());
    }
    if let Some(path) = &output.svg {
        std::fs::write(path, profile.flamegraph_svg(title)?)?;
        eprintln!("flame graph: {}", path.display());
    }
    Ok(())
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
        Command::Canbench {
            pattern,
            config,
            persist,
            fail_on_regression,
            noise_threshold,
            no_build,
            results_file,
        } => {
            let options = RunOptions {
                pattern,
                noise_threshold,
                persist,
                skip_build: no_build,
                results_file,
            };
            // The baseline as it was before this run (for the regression table).
            let cfg = canbench::CanbenchConfig::read(&config)?;
            let dir = config
                .parent()
                .filter(|p| !p.as_os_str().is_empty())
                .unwrap_or(std::path::Path::new("."));
            let baseline = ResultsFile::read(&canbench::results_path_for(
                dir,
                &cfg,
                options.results_file.as_deref(),
            ))?;
            let mut out = std::io::stdout();
            let mut progress = std::io::stderr();
            let summary = canbench::run(&engine, &config, &options, &mut out, &mut progress)?;
            let regressions = summary.regressions();
            if fail_on_regression && !regressions.is_empty() {
                eprintln!(
                    "\n{} benchmark(s) regressed beyond the {noise_threshold}% noise threshold:",
                    regressions.len()
                );
                canbench::write_change_table(&mut std::io::stderr(), &summary, &baseline)?;
                return Ok(ExitCode::from(1));
            }
            Ok(ExitCode::SUCCESS)
        }
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
        Command::Profile {
            wasm,
            method,
            query,
            arg_hex,
            install_hex,
            setup,
            benchmarking,
            output,
        } => {
            let program = engine.load_file_profiled(&wasm)?;
            warn_without_names(&program);
            let subnet = if benchmarking {
                SubnetKind::Benchmarking
            } else {
                SubnetKind::Application
            };
            let settings = Settings {
                subnet,
                ..Settings::default()
            };
            let (mut canister, _) = Canister::install(
                &engine,
                &program,
                &hex_arg("--install-hex", &install_hex)?,
                settings,
            )?;
            for call in &setup {
                let (m, arg) = match call.split_once(':') {
                    Some((m, h)) => (m, hex_arg("--setup", h)?),
                    None => (call.as_str(), b"DIDL\x00\x00".to_vec()),
                };
                let e = canister.update(m, &arg)?;
                if e.result.is_trap() {
                    return Err(format!("setup call {m}: {:?}", e.result).into());
                }
                eprintln!("setup {m}: {} instructions", e.instructions);
            }
            let arg = hex_arg("--arg-hex", &arg_hex)?;
            let (exec, profile) = if query {
                canister.query_profiled(&method, &arg)?
            } else {
                canister.update_profiled(&method, &arg)?
            };
            println!("{}\n", describe(&exec));
            write_profile(&profile, &output, &exec.entry)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::ProfileBench {
            wasm,
            bench,
            install_hex,
            stable_memory,
            output,
        } => {
            let program = engine.load_file_profiled(&wasm)?;
            warn_without_names(&program);
            let (mut canister, _) = Canister::install(
                &engine,
                &program,
                &hex_arg("--install-hex", &install_hex)?,
                Settings::benchmarking(),
            )?;
            if let Some(path) = stable_memory {
                canister.set_stable_memory(&std::fs::read(&path)?);
            }
            let (exec, profile) =
                canister.query_profiled(&format!("__canbench__{bench}"), b"DIDL\x00\x00")?;
            println!("{}", describe(&exec));
            if let MessageResult::Reply(bytes) = &exec.result
                && let Ok(r) = candid::decode_one::<BenchResult>(bytes)
            {
                println!(
                    "canbench total: {} instructions (the benchmark's own count, inside the query)",
                    r.total.instructions()
                );
            }
            println!();
            write_profile(&profile, &output, &format!("canbench {bench}"))?;
            Ok(ExitCode::SUCCESS)
        }
        Command::HostTime { heap_mib, messages } => {
            let mut rows = Vec::new();
            for mib in heap_mib {
                eprintln!("heap {mib} MiB ...");
                rows.push(offline_engine::host_time::measure(&engine, mib, messages)?);
            }
            offline_engine::host_time::write_table(&mut std::io::stdout(), &rows)?;
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
    }
}
