//! Wall time of the engine's direct run of 1,000 `create_order` updates on the reference
//! canister (engine: offline (wasmtime, IC metering)): installs the deployable wasm with the
//! default settings, creates one user, then runs the updates one after the other as ingress
//! messages and prints the wall time of the updates alone (install and compilation excluded),
//! the time per update and the instructions they executed. Then the same on a
//! [`offline_engine::Subnet`]: every update submitted as an ingress message and executed in a
//! round of its own, as a server executes one call at a time.
//!
//! ```text
//! scripts/build.sh
//! cargo run --release -p offline_engine --example create_orders [-- WASM [N]]
//! ```
//! `WASM` defaults to `target/canister/bench_canister.wasm`, `N` to 1,000.

use std::path::PathBuf;
use std::time::Instant;

use candid::Encode;
use offline_engine::messages::Ingress;
use offline_engine::{
    Canister, Engine, EngineConfig, MessageResult, Settings, Subnet, SubnetConfig,
};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let wasm = PathBuf::from(
        args.next()
            .unwrap_or_else(|| "target/canister/bench_canister.wasm".to_string()),
    );
    let n: usize = match args.next() {
        Some(s) => s.parse()?,
        None => 1_000,
    };
    let engine = Engine::new(EngineConfig::default())?;
    let program = engine.load_file(&wasm)?;
    let init = Encode!(&Option::<()>::None)?;
    let (mut canister, _) = Canister::install(&engine, &program, &init, Settings::default())?;
    let user = canister.update("create_user", &Encode!(&"orders", &"orders@example.com")?)?;
    if !matches!(user.result, MessageResult::Reply(_)) {
        return Err(format!("create_user: {:?}", user.result).into());
    }
    let mut instructions = 0u64;
    let started = Instant::now();
    for i in 0..n {
        let arg = Encode!(&1i64, &(i as f64 + 0.5))?;
        let exec = canister.update("create_order", &arg)?;
        if !matches!(exec.result, MessageResult::Reply(_)) {
            return Err(format!("create_order {i}: {:?}", exec.result).into());
        }
        instructions += exec.instructions;
    }
    let wall = started.elapsed();
    println!("engine: {}", offline_engine::canbench::ENGINE_LABEL);
    println!("{n} create_order updates (direct run, one canister): {wall:.3?} wall time");
    println!(
        "{:.1} µs per update, {instructions} instructions in total",
        wall.as_secs_f64() * 1e6 / n as f64
    );

    // The same updates as ingress messages of a subnet, one round each.
    let (mut canister, _) = Canister::install(&engine, &program, &init, Settings::default())?;
    canister.update("create_user", &Encode!(&"orders", &"orders@example.com")?)?;
    let id = canister.settings().canister_id.clone();
    let mut subnet = Subnet::new(SubnetConfig::APPLICATION, canister.time());
    subnet.install(canister);
    let mut instructions = 0u64;
    let started = Instant::now();
    for i in 0..n {
        let ingress = Ingress {
            id: (i as u64).to_be_bytes().to_vec(),
            sender: offline_engine::ANONYMOUS.to_vec(),
            receiver: id.clone(),
            method: "create_order".into(),
            payload: Encode!(&1i64, &(i as f64 + 0.5))?,
        };
        let (result, execs) = subnet.execute_ingress(ingress, 1)?;
        if !matches!(result, MessageResult::Reply(_)) {
            return Err(format!("create_order {i} on the subnet: {result:?}").into());
        }
        instructions += execs.iter().map(|(_, e)| e.instructions).sum::<u64>();
    }
    let wall = started.elapsed();
    println!("{n} create_order updates (a subnet, one round each): {wall:.3?} wall time");
    println!(
        "{:.1} µs per update, {instructions} instructions in total",
        wall.as_secs_f64() * 1e6 / n as f64
    );
    Ok(())
}
