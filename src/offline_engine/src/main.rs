//! `offline-engine`: run canister wasm offline with the IC's metering.
//!
//! Subcommands: `candid` (print the Candid interface), `info` (imports, exports, metadata),
//! `call` (install and run one message), `profile` (the per-function instruction profile of one
//! message), `profile-bench` (that of a canbench benchmark), `host-time` (the engine's own time
//! per message against the heap size), `validation record|variance` (validation data, see
//! VALIDATION.md). canbench runs through the real canbench CLI and `offline-pocket-ic` (crate
//! `pocket_ic_server`).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

mod call_text;

use clap::{Args, Parser, Subcommand};
use offline_engine::canbench::{self, BenchResult};
use offline_engine::validation::ResultsFile;
use offline_engine::{
    Canister, Engine, EngineConfig, Execution, MessageResult, Metering, PageUse, Profile, Program,
    Settings, SubnetKind,
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
    /// The rules for memory pages to meter by (METERING.md §10): `pocketic-13` (PocketIC 13 and
    /// canbench 0.7.0) or `ic-dmt-0441fbd7` (dfinity/ic with the deterministic memory tracker).
    #[arg(
        long,
        global = true,
        env = "OFFLINE_ENGINE_METERING",
        default_value = "pocketic-13"
    )]
    metering: Metering,
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
    /// Like `dfx canister call`, the argument is Candid text and the reply is printed as Candid
    /// text, both typed by the wasm's embedded `candid:service`; `--arg-hex`/`--init-hex` and
    /// `--reply-hex` take and print raw bytes instead.
    Call(CallArgs),
    /// Install a wasm, make the setup calls, and profile one update (or query): instructions per
    /// function with their call stacks, adding up to the message's instructions exactly.
    Profile(ProfileArgs),
    /// Profile one canbench benchmark (the `__canbench__<bench>` query, on the benchmarking
    /// subnet, from the post-install state as canbench runs it).
    ProfileBench(ProfileBenchArgs),
    /// Measure the engine's own time per message against the heap size (a canister whose heap
    /// is grown to each size runs updates and queries that write eight pages).
    HostTime(HostTimeArgs),
    /// Record validation data (`src/offline_engine/validation/`, see VALIDATION.md).
    #[command(subcommand)]
    Validation(Box<ValidationCommand>),
}

#[derive(Subcommand)]
enum ValidationCommand {
    /// Compare a published canbench results file with the engine's results for the same benches
    /// and write the suite into a repository's data file (replacing the suite of that file).
    Record(RecordArgs),
    /// Add one compiler's column to the compiler-variance data of the project canister.
    Variance(VarianceArgs),
}

#[derive(Args)]
struct CallArgs {
    /// The wasm file.
    wasm: PathBuf,
    /// Method name.
    method: String,
    /// Candid argument as text, e.g. '("alice", "alice@example.com")' (default: `()`).
    #[arg(conflicts_with = "arg_hex")]
    argument: Option<String>,
    /// Run as a query (the default for methods the service declares `query`).
    #[arg(long)]
    query: bool,
    /// Candid init argument as text, e.g. '(opt record { flush_size = opt 1000 })'.
    #[arg(long, conflicts_with = "init_hex")]
    init: Option<String>,
    /// Candid argument as hex bytes, instead of text.
    #[arg(long)]
    arg_hex: Option<String>,
    /// Candid init argument as hex bytes, instead of text.
    #[arg(long)]
    init_hex: Option<String>,
    /// Print the reply as hex bytes instead of Candid text.
    #[arg(long)]
    reply_hex: bool,
    /// Use the benchmarking subnet limits.
    #[arg(long)]
    benchmarking: bool,
}

#[derive(Args)]
struct ProfileArgs {
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
}

#[derive(Args)]
struct ProfileBenchArgs {
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
}

#[derive(Args)]
struct HostTimeArgs {
    /// Heap sizes in MiB (multiples of 8).
    #[arg(long, value_delimiter = ',', default_value = "16,64,256,1024")]
    heap_mib: Vec<u64>,
    /// Measured messages of each kind per size (the median is reported).
    #[arg(long, default_value_t = 20)]
    messages: u32,
}

#[derive(Args)]
struct RecordArgs {
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
}

#[derive(Args)]
struct VarianceArgs {
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
         {:.3} ms with the profiler\n{}",
        e.entry,
        e.instructions,
        e.billed_instructions,
        e.heap_dirty_pages,
        e.stable_dirty_pages,
        e.wall_time.as_secs_f64() * 1e3,
        pages_text(&e.pages)
    )
}

/// Page numbers as ranges: `0-3,17,40-41`.
fn ranges(pages: &[u64]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < pages.len() {
        let mut j = i;
        while j + 1 < pages.len() && pages[j + 1] == pages[j] + 1 {
            j += 1;
        }
        out.push(if i == j {
            pages[i].to_string()
        } else {
            format!("{}-{}", pages[i], pages[j])
        });
        i = j + 1;
    }
    if out.is_empty() {
        "-".into()
    } else {
        out.join(",")
    }
}

/// The pages a message touched and their instructions, one line per memory.
fn pages_text(p: &PageUse) -> String {
    let memory = |name: &str, m: &offline_engine::MemoryPages| {
        format!(
            "{name}: accessed {} Wasm pages [{}], dirty {} Wasm pages [{}], written {} OS pages [{}]",
            m.accessed.len(),
            ranges(&m.accessed),
            m.dirty.len(),
            ranges(&m.dirty),
            m.written.len(),
            ranges(&m.written)
        )
    };
    format!(
        "page instructions: {}\n{}\n{}",
        p.instructions,
        memory("heap", &p.heap),
        memory("stable", &p.stable)
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
        metering: cli.metering,
    })?;
    match cli.command {
        Command::Candid { wasm } => candid(&engine, &wasm),
        Command::Info { wasm } => info(&engine, &wasm),
        Command::Call(args) => call(&engine, args),
        Command::Profile(args) => profile(&engine, args),
        Command::ProfileBench(args) => profile_bench(&engine, args),
        Command::HostTime(args) => host_time(&engine, args),
        Command::Validation(cmd) => match *cmd {
            ValidationCommand::Record(args) => validation_record(args),
            ValidationCommand::Variance(args) => validation_variance(args),
        },
    }
}

/// The settings of a canister on the application subnet, or on the benchmarking one.
fn settings_on(benchmarking: bool) -> Settings {
    let subnet = if benchmarking {
        SubnetKind::Benchmarking
    } else {
        SubnetKind::Application
    };
    Settings {
        subnet,
        ..Settings::default()
    }
}

/// `candid`: the Candid interface the wasm embeds or returns.
fn candid(engine: &Engine, wasm: &Path) -> Result<ExitCode, Box<dyn std::error::Error>> {
    let program = engine.load_file(wasm)?;
    let (mut canister, _) =
        Canister::install(engine, &program, b"DIDL\x00\x00", Settings::benchmarking())?;
    match canister.candid_interface()? {
        Some(text) => {
            println!("{text}");
            Ok(ExitCode::SUCCESS)
        }
        None => {
            eprintln!("the wasm exports no get_candid_pointer and has no candid:service metadata");
            Ok(ExitCode::from(1))
        }
    }
}

/// `info`: imports, exports and metadata.
fn info(engine: &Engine, wasm: &Path) -> Result<ExitCode, Box<dyn std::error::Error>> {
    let program = engine.load_file(wasm)?;
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

/// `profile`: install, the setup updates, then one profiled message.
fn profile(engine: &Engine, args: ProfileArgs) -> Result<ExitCode, Box<dyn std::error::Error>> {
    let program = engine.load_file_profiled(&args.wasm)?;
    warn_without_names(&program);
    let (mut canister, _) = Canister::install(
        engine,
        &program,
        &hex_arg("--install-hex", &args.install_hex)?,
        settings_on(args.benchmarking),
    )?;
    for call in &args.setup {
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
    let arg = hex_arg("--arg-hex", &args.arg_hex)?;
    let (exec, profile) = if args.query {
        canister.query_profiled(&args.method, &arg)?
    } else {
        canister.update_profiled(&args.method, &arg)?
    };
    println!("{}\n", describe(&exec));
    write_profile(&profile, &args.output, &exec.entry)?;
    Ok(ExitCode::SUCCESS)
}

/// `profile-bench`: one canbench benchmark, profiled.
fn profile_bench(
    engine: &Engine,
    args: ProfileBenchArgs,
) -> Result<ExitCode, Box<dyn std::error::Error>> {
    let program = engine.load_file_profiled(&args.wasm)?;
    warn_without_names(&program);
    // Installed and called as canbench does (offline_engine::canbench, the runner the bench
    // suite and offline-pocket-ic's callers share).
    let stable = args.stable_memory.map(std::fs::read).transpose()?;
    let mut canister = canbench::install(
        engine,
        &program,
        &hex_arg("--install-hex", &args.install_hex)?,
        stable.as_deref(),
    )?;
    let (exec, profile) = canister.query_profiled(
        &format!("{}{}", canbench::BENCH_PREFIX, args.bench),
        canbench::BENCH_ARG,
    )?;
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
    write_profile(&profile, &args.output, &format!("canbench {}", args.bench))?;
    Ok(ExitCode::SUCCESS)
}

/// `host-time`: the engine's own time per message against the heap size.
fn host_time(engine: &Engine, args: HostTimeArgs) -> Result<ExitCode, Box<dyn std::error::Error>> {
    let mut rows = Vec::new();
    for mib in args.heap_mib {
        eprintln!("heap {mib} MiB ...");
        rows.push(offline_engine::host_time::measure(
            engine,
            mib,
            args.messages,
        )?);
    }
    offline_engine::host_time::write_table(&mut std::io::stdout(), &rows)?;
    Ok(ExitCode::SUCCESS)
}

/// `call`: install and run one message, arguments and reply as Candid text or hex.
fn call(engine: &Engine, args: CallArgs) -> Result<ExitCode, Box<dyn std::error::Error>> {
    let CallArgs {
        wasm,
        method,
        argument,
        query,
        init,
        arg_hex,
        init_hex,
        reply_hex,
        benchmarking,
    } = args;
    let program = engine.load_file(&wasm)?;
    // The service the wasm embeds types the text arguments and the reply; read it from a
    // throw-away install (metadata or get_candid_pointer), unless all is hex.
    let needs_interface = arg_hex.is_none() || init_hex.is_none() || !reply_hex;
    let interface = if needs_interface {
        let (mut probe, _) =
            Canister::install(engine, &program, b"DIDL\x00\x00", Settings::benchmarking())?;
        match probe.candid_interface()? {
            Some(did) => Some(call_text::Interface::parse(&did)?),
            None => None,
        }
    } else {
        None
    };
    let typed = || {
        interface
            .as_ref()
            .ok_or(call_text::CallTextError::NoInterface)
    };
    let init_arg = match (&init_hex, &init) {
        (Some(h), _) => hex_arg("--init-hex", h)?,
        (None, Some(text)) => typed()?.encode_init(text)?,
        (None, None) => match &interface {
            Some(i) => i
                .encode_init("()")
                .unwrap_or_else(|_| b"DIDL\x00\x00".to_vec()),
            None => b"DIDL\x00\x00".to_vec(),
        },
    };
    let arg = match (&arg_hex, &argument) {
        (Some(h), _) => hex_arg("--arg-hex", h)?,
        (None, text) => typed()?.encode_args(&method, text.as_deref().unwrap_or("()"))?,
    };
    let (mut canister, install) =
        Canister::install(engine, &program, &init_arg, settings_on(benchmarking))?;
    println!(
        "metering: {} ({})",
        engine.metering(),
        engine.metering().source
    );
    println!(
        "install: {} instructions ({} billed)",
        install.instructions, install.billed_instructions
    );
    let as_query = query || interface.as_ref().is_some_and(|i| i.is_query(&method));
    let exec = if as_query {
        canister.query(&method, &arg)?
    } else {
        canister.update(&method, &arg)?
    };
    for line in &exec.logs {
        println!("log: {line}");
    }
    match &exec.result {
        MessageResult::Reply(b) if reply_hex => println!("reply: {}", hex::encode(b)),
        MessageResult::Reply(b) => {
            println!("reply: {}", typed()?.decode_reply(&method, b)?)
        }
        other => println!("result: {other:?}"),
    }
    println!(
        "{}: {} instructions, billed: {}, heap dirty pages: {}, stable dirty pages: {}, {:.2} G instructions/s",
        if as_query { "query" } else { "update" },
        exec.instructions,
        exec.billed_instructions,
        exec.heap_dirty_pages,
        exec.stable_dirty_pages,
        exec.instructions_per_second() / 1e9
    );
    println!("{}", pages_text(&exec.pages));
    Ok(ExitCode::SUCCESS)
}

fn sha256_file(path: &std::path::Path) -> Result<String, Box<dyn std::error::Error>> {
    use sha2::Digest;
    let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(hex::encode(sha2::Sha256::digest(bytes)))
}

/// The text of a data file, or `None` if it does not exist yet.
fn read_data(p: &Path) -> Result<Option<String>, Box<dyn std::error::Error>> {
    match std::fs::read_to_string(p) {
        Ok(t) => Ok(Some(t)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("{}: {e}", p.display()).into()),
    }
}

/// `validation record`: a published results file against the engine's, into a data file.
fn validation_record(args: RecordArgs) -> Result<ExitCode, Box<dyn std::error::Error>> {
    use offline_engine::validation::{self, RepositoryData, Suite};
    let RecordArgs {
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
    } = args;
    let published = ResultsFile::read(&pocketic)?;
    if published.benches.is_empty() {
        return Err(format!("{}: no benches", pocketic.display()).into());
    }
    let ours = ResultsFile::read(&engine)?;
    let rows = validation::compare(&published, &ours)?;
    let mut file = match read_data(&data)? {
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

/// `validation variance`: one compiler's column of the compiler-variance data.
fn validation_variance(args: VarianceArgs) -> Result<ExitCode, Box<dyn std::error::Error>> {
    use offline_engine::validation::CompilerVariance;
    let ours = ResultsFile::read(&args.engine)?;
    if ours.benches.is_empty() {
        return Err(format!("{}: no benches", args.engine.display()).into());
    }
    let mut file = match read_data(&args.data)? {
        Some(t) => serde_yaml::from_str::<CompilerVariance>(&t)?,
        None => CompilerVariance::new(
            &args.build,
            &args.source_commit,
            &args.engine_commit,
            &args.baseline,
        ),
    };
    file.upsert(&args.compiler, &sha256_file(&args.wasm)?, &ours)?;
    std::fs::write(&args.data, file.to_yaml()?)?;
    println!(
        "{}: {} compilers, {} benches",
        args.data.display(),
        file.compilers.len(),
        file.benches.len()
    );
    Ok(ExitCode::SUCCESS)
}
