//! Cycles per user write of the application canister example, with and without the batcher:
//! `cargo run --release -p client_e2e --example app_canister -- [WRITES] [IN_FLIGHT] [OUT.md]`
//! (default 1,000 writes, 50 in flight; after `scripts/build.sh`). Prints the table (offline
//! replica through a real agent).

fn main() -> std::process::ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let writes = args.first().and_then(|a| a.parse().ok()).unwrap_or(1_000);
    let in_flight = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(50);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("app_canister: {e}");
            return std::process::ExitCode::from(2);
        }
    };
    match runtime.block_on(client_e2e::app::measure(writes, in_flight)) {
        Ok((_, table)) => {
            println!("{table}");
            if let Some(out) = args.get(2)
                && let Err(e) = std::fs::write(out, &table)
            {
                eprintln!("app_canister: writing {out}: {e}");
                return std::process::ExitCode::from(2);
            }
            std::process::ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("app_canister: {e}");
            std::process::ExitCode::from(2)
        }
    }
}
