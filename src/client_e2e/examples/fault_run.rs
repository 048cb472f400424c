//! The full randomized fault run: `cargo run --release -p client_e2e --example fault_run --
//! [OPS] [SEED] [ordered]` (default 10,000 ops, a seed from the clock; `ordered`: one ordering
//! key per submitter). Prints the counts; exits 1 unless every op was delivered once and
//! applied exactly once (and, `ordered`, each submitter's ops committed in its order).

use client_e2e::fault_run::{FaultRunConfig, run};

fn main() -> std::process::ExitCode {
    let mut args = std::env::args().skip(1);
    let ops = args.next().and_then(|a| a.parse().ok()).unwrap_or(10_000);
    let seed = args.next().and_then(|a| a.parse().ok()).unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64)
    });
    let ordered = args.next().is_some_and(|a| a == "ordered");
    let runtime = match client_e2e::runtime() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("fault_run: {e}");
            return std::process::ExitCode::from(2);
        }
    };
    match runtime.block_on(run(FaultRunConfig {
        ops,
        seed,
        ordered,
        ..FaultRunConfig::default()
    })) {
        Ok(report) => {
            println!("{report}\n  (seed {seed})");
            if report.exactly_once() && (!ordered || report.out_of_order == 0) {
                std::process::ExitCode::SUCCESS
            } else {
                std::process::ExitCode::from(1)
            }
        }
        Err(e) => {
            eprintln!("fault_run: {e}");
            std::process::ExitCode::from(2)
        }
    }
}
