//! The overhead figures: `cargo run --release -p client_e2e --example overhead -- [OPS]
//! [OUT.md]` (default 1,000 ops). The canister's cycles for the same new users through the Rust
//! batcher (ic-agent), one hand-built unkeyed `execute_batch_packed` call and one hand-built
//! keyed call; prints the table (offline replica through a real agent).

fn main() -> std::process::ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let ops = args.first().and_then(|a| a.parse().ok()).unwrap_or(1_000);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("overhead: {e}");
            return std::process::ExitCode::from(2);
        }
    };
    match runtime.block_on(client_e2e::overhead::measure(ops)) {
        Ok(o) => {
            let table = o.render();
            println!("{table}");
            if let Some(out) = args.get(1)
                && let Err(e) = std::fs::write(out, &table)
            {
                eprintln!("overhead: writing {out}: {e}");
                return std::process::ExitCode::from(2);
            }
            std::process::ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("overhead: {e}");
            std::process::ExitCode::from(2)
        }
    }
}
