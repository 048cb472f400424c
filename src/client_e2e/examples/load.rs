//! The load test with real clients: `cargo run --release -p client_e2e --example load --
//! [OPS_PER_ROUND] [ROUNDS] [ROUND_MS] [CONCURRENCY] [OUT.md]` (defaults 2,000, 3, 1,000, 100,
//! no file). Prints the table (offline replica through a real agent) and writes it to OUT.md.

use std::time::Duration;

use client_e2e::load::{LoadConfig, run};

fn main() -> std::process::ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let num = |i: usize, default: u64| -> u64 {
        args.get(i).and_then(|a| a.parse().ok()).unwrap_or(default)
    };
    let config = LoadConfig {
        ops_per_round: num(0, 2_000) as usize,
        rounds: num(1, 3) as usize,
        round: Duration::from_millis(num(2, 1_000)),
        concurrency: num(3, 100) as usize,
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("load: {e}");
            return std::process::ExitCode::from(2);
        }
    };
    match runtime.block_on(run(&config)) {
        Ok((_, table)) => {
            println!("{table}");
            if let Some(out) = args.get(4)
                && let Err(e) = std::fs::write(out, &table)
            {
                eprintln!("load: writing {out}: {e}");
                return std::process::ExitCode::from(2);
            }
            std::process::ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("load: {e}");
            std::process::ExitCode::from(2)
        }
    }
}
