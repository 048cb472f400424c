//! An instance: its application subnets, its canisters (each an offline-engine [`Canister`] once
//! code is installed), its time and its ingress messages, and the rounds that execute them.
//!
//! A round ([`Instance::tick`]) runs, for every running canister, the global timer if it is due
//! and every queued self-call and callback; then every ingress message submitted since the last
//! round, in order (an update that awaits self-calls completes within the round); then time
//! moves on by 1 ns, as PocketIC's rounds do. Queries execute at once on the current state and
//! discard their changes.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use candid::Principal;
use ic_management_canister_types::{CanisterStatusType, DefiniteCanisterSettings, LogVisibility};
use offline_engine::{Canister, Engine, EngineError, Execution, Program};
use pocket_ic::RejectResponse;
use pocket_ic::common::rest::{
    CanisterCyclesCostSchedule, InitialTime, InstanceConfig, RawCanisterCall, RawCanisterResult,
    RawEffectivePrincipal, RawIngressStatusArgs, RawMessageId, Topology,
};
use sha2::{Digest, Sha256};

use crate::error::ServerError;
use crate::reject;
use crate::topology::{self, Subnet};

/// PocketIC's initial time: the IC's genesis, 2021-05-06 19:17:10 UTC.
pub const GENESIS_NS: u64 = 1_620_328_630_000_000_000;

/// How far time moves in each round (PocketIC: 1 ns, so that time strictly increases).
pub const ROUND_TIME_INCREMENT_NS: u64 = 1;

/// Rounds `await_ingress_message` runs at most before giving up.
pub const MAX_AWAIT_ROUNDS: usize = 100;

/// The engine and the modules it loaded, shared by all instances of a server: a wasm installed
/// twice (canbench installs the same module for tracing, tests install it per instance) is
/// instrumented and compiled once.
pub struct Programs {
    engine: Engine,
    loaded: Mutex<HashMap<[u8; 32], Program>>,
}

impl std::fmt::Debug for Programs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Programs")
            .field("engine", &self.engine)
            .finish_non_exhaustive()
    }
}

impl Programs {
    /// Wraps `engine`.
    pub fn new(engine: Engine) -> Programs {
        Programs {
            engine,
            loaded: Mutex::new(HashMap::new()),
        }
    }

    /// The engine.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// The loaded module for `wasm` (uncompressed): from memory if this server loaded it before,
    /// else instrumented and compiled (or taken from the engine's on-disk cache).
    pub fn load(&self, wasm: &[u8]) -> Result<Program, EngineError> {
        let key: [u8; 32] = Sha256::digest(wasm).into();
        if let Some(p) = self.lock().get(&key) {
            return Ok(p.clone());
        }
        let program = self.engine.load(wasm)?;
        self.lock().insert(key, program.clone());
        Ok(program)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<[u8; 32], Program>> {
        self.loaded.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// A canister of an instance.
pub(crate) struct CanisterEntry {
    /// Index of its subnet in [`Instance::subnets`].
    pub subnet: usize,
    /// The installed code and state; `None` while the canister is empty.
    pub code: Option<Canister>,
    /// Size of the installed wasm module in bytes.
    pub module_size: u64,
    /// Settings as the management canister reports them (only the controllers reach the engine).
    pub settings: DefiniteCanisterSettings,
    /// Running, stopping or stopped.
    pub status: CanisterStatusType,
    /// The cycle balance while the canister is empty (the engine holds it otherwise).
    pub empty_cycles: u128,
    /// The wasm chunk store: chunks by SHA-256.
    pub chunks: BTreeMap<Vec<u8>, Vec<u8>>,
    /// Installs, upgrades, uninstalls and settings changes so far.
    pub version: u64,
}

impl CanisterEntry {
    pub(crate) fn new(subnet: usize, settings: DefiniteCanisterSettings, cycles: u128) -> Self {
        CanisterEntry {
            subnet,
            code: None,
            module_size: 0,
            settings,
            status: CanisterStatusType::Running,
            empty_cycles: cycles,
            chunks: BTreeMap::new(),
            version: 0,
        }
    }

    /// The cycle balance.
    pub(crate) fn cycles(&self) -> u128 {
        match &self.code {
            Some(c) => c.cycles(),
            None => self.empty_cycles,
        }
    }

    /// Adds cycles; returns the new balance.
    pub(crate) fn add_cycles(&mut self, amount: u128) -> u128 {
        match &mut self.code {
            Some(c) => c.add_cycles(amount),
            None => {
                self.empty_cycles = self.empty_cycles.saturating_add(amount);
                self.empty_cycles
            }
        }
    }

    /// The controllers as raw principal bytes, `first` (when a controller) moved to the front:
    /// the engine runs install and upgrade hooks as its first controller.
    pub(crate) fn controllers_first(&self, first: &Principal) -> Vec<Vec<u8>> {
        let mut v: Vec<Vec<u8>> = Vec::with_capacity(self.settings.controllers.len());
        if self.settings.controllers.contains(first) {
            v.push(first.as_slice().to_vec());
        }
        v.extend(
            self.settings
                .controllers
                .iter()
                .filter(|c| *c != first)
                .map(|c| c.as_slice().to_vec()),
        );
        v
    }
}

/// The IC's default settings of a new canister with controllers `controllers`.
pub(crate) fn default_settings(controllers: Vec<Principal>) -> DefiniteCanisterSettings {
    DefiniteCanisterSettings {
        controllers,
        compute_allocation: 0u64.into(),
        memory_allocation: 0u64.into(),
        freezing_threshold: 2_592_000u64.into(),
        reserved_cycles_limit: 5_000_000_000_000u64.into(),
        log_visibility: LogVisibility::Controllers,
        wasm_memory_limit: 3_221_225_472u64.into(),
        wasm_memory_threshold: 0u64.into(),
        environment_variables: Vec::new(),
    }
}

/// An ingress message and, once executed, its outcome.
struct Message {
    sender: Principal,
    canister: Principal,
    effective: RawEffectivePrincipal,
    method: String,
    payload: Vec<u8>,
    result: Option<Result<Vec<u8>, RejectResponse>>,
}

/// One instance of the protocol: what `POST /instances` creates.
pub struct Instance {
    pub(crate) programs: Arc<Programs>,
    pub(crate) subnets: Vec<Subnet>,
    /// Next unused canister index per subnet.
    pub(crate) next_index: Vec<u64>,
    pub(crate) canisters: BTreeMap<Principal, CanisterEntry>,
    pub(crate) time_ns: u64,
    messages: HashMap<Vec<u8>, Message>,
    pending: VecDeque<Vec<u8>>,
    nonce: u64,
    /// Print canisters' `debug_print` output to stderr (as PocketIC does).
    print_canister_output: bool,
}

impl std::fmt::Debug for Instance {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Instance")
            .field("subnets", &self.subnets)
            .field("canisters", &self.canisters.keys().collect::<Vec<_>>())
            .field("time_ns", &self.time_ns)
            .field("pending", &self.pending.len())
            .finish_non_exhaustive()
    }
}

fn unsupported(what: impl std::fmt::Display) -> ServerError {
    ServerError::UnsupportedConfig(format!(
        "{} (engine: {}) cannot create this instance: {what}",
        crate::SERVER_NAME,
        crate::ENGINE_LABEL
    ))
}

/// Checks that `config` asks only for what the offline engine offers and returns its subnets.
fn subnets_of(config: &InstanceConfig) -> Result<Vec<Subnet>, ServerError> {
    let set = &config.subnet_config_set;
    let named = [
        ("NNS", set.nns.is_some()),
        ("SNS", set.sns.is_some()),
        ("II", set.ii.is_some()),
        ("fiduciary", set.fiduciary.is_some()),
        ("bitcoin", set.bitcoin.is_some()),
        ("system", !set.system.is_empty()),
        ("cloud engine", !set.cloud_engine.is_empty()),
        ("verified application", !set.verified_application.is_empty()),
    ];
    if let Some((name, _)) = named.iter().find(|(_, asked)| *asked) {
        return Err(unsupported(format_args!(
            "it hosts application subnets only, and a {name} subnet was requested"
        )));
    }
    if set.application.is_empty() {
        return Err(unsupported("the configuration has no application subnet"));
    }
    if config.state_dir.is_some() {
        return Err(unsupported(
            "state directories (persistent state) are not supported",
        ));
    }
    if config.http_gateway_config.is_some() {
        return Err(unsupported("the HTTP gateway is not supported"));
    }
    if config
        .icp_features
        .as_ref()
        .is_some_and(|f| *f != Default::default())
    {
        return Err(unsupported(
            "ICP features (system canisters) are not supported",
        ));
    }
    if config.bitcoind_addr.is_some() || config.dogecoind_addr.is_some() {
        return Err(unsupported("bitcoind/dogecoind adapters are not supported"));
    }
    let mut subnets = Vec::new();
    for (i, spec) in set.application.iter().enumerate() {
        if spec.get_state_path().is_some() || !spec.is_supported() {
            return Err(unsupported(
                "subnet state loaded from elsewhere is not supported",
            ));
        }
        if spec.get_subnet_admins().is_some() {
            return Err(unsupported("subnet admins are not supported"));
        }
        let benchmarking = matches!(
            spec.get_instruction_config(),
            pocket_ic::common::rest::SubnetInstructionConfig::Benchmarking
        );
        let schedule: CanisterCyclesCostSchedule = spec.get_cost_schedule();
        subnets.push(Subnet::application(i, benchmarking, schedule));
    }
    Ok(subnets)
}

/// Formats nanoseconds since the epoch as PocketIC's canister log lines do
/// (`2021-05-06 19:17:10.000000006 UTC`).
pub fn format_time(ns: u64) -> String {
    let secs = ns / 1_000_000_000;
    let (days, rem) = (secs / 86_400, secs % 86_400);
    format!(
        "{} {:02}:{:02}:{:02}.{:09} UTC",
        offline_engine::civil::civil_date(days),
        rem / 3_600,
        rem % 3_600 / 60,
        rem % 60,
        ns % 1_000_000_000
    )
}

fn principal(bytes: &[u8], endpoint: &'static str, what: &str) -> Result<Principal, ServerError> {
    Principal::try_from_slice(bytes).map_err(|e| ServerError::BadRequest {
        endpoint,
        message: format!("{what}: {e}"),
    })
}

impl Instance {
    /// Creates the instance `config` describes. Errors name what the offline engine does not
    /// offer (other subnet kinds, state directories, the HTTP gateway, ICP features, live mode).
    pub fn new(programs: Arc<Programs>, config: &InstanceConfig) -> Result<Instance, ServerError> {
        let subnets = subnets_of(config)?;
        let time_ns = match &config.initial_time {
            None => GENESIS_NS,
            Some(InitialTime::Timestamp(t)) => t.nanos_since_epoch,
            Some(InitialTime::AutoProgress(_)) => {
                return Err(unsupported(
                    "auto progress (live mode) is not supported: time moves with set_time and ticks",
                ));
            }
        };
        Ok(Instance {
            programs,
            next_index: subnets.iter().map(|s| s.range_start).collect(),
            subnets,
            canisters: BTreeMap::new(),
            time_ns,
            messages: HashMap::new(),
            pending: VecDeque::new(),
            nonce: 0,
            print_canister_output: true,
        })
    }

    /// Stops printing canisters' `debug_print` output (tests of the server itself).
    pub fn mute_canister_output(&mut self) {
        self.print_canister_output = false;
    }

    /// The subnets and canister ranges.
    pub fn topology(&self) -> Topology {
        topology::topology(&self.subnets)
    }

    /// Current time in nanoseconds since the epoch.
    pub fn time(&self) -> u64 {
        self.time_ns
    }

    /// Sets the time. Time never goes backwards: an earlier time is an error.
    pub fn set_time(&mut self, ns: u64) -> Result<(), ServerError> {
        if ns < self.time_ns {
            return Err(ServerError::TimeIntoPast {
                current: self.time_ns,
                requested: ns,
            });
        }
        self.advance_time(ns - self.time_ns);
        Ok(())
    }

    fn advance_time(&mut self, ns: u64) {
        self.time_ns = self.time_ns.saturating_add(ns);
        let now = self.time_ns;
        for entry in self.canisters.values_mut() {
            if let Some(c) = &mut entry.code {
                c.advance_time(now.saturating_sub(c.time()));
            }
        }
    }

    /// Prints the `debug_print` output of `execs` as PocketIC does:
    /// `<time> UTC: [Canister <id>] <line>`.
    pub(crate) fn print_output(&self, canister: &Principal, execs: &[Execution]) {
        if !self.print_canister_output {
            return;
        }
        for line in execs.iter().flat_map(|e| &e.logs) {
            eprintln!(
                "{}: [Canister {canister}] {line}",
                format_time(self.time_ns)
            );
        }
    }

    /// One round: due timers and queued self-calls and callbacks of every running canister,
    /// then the ingress messages submitted so far; then time moves on by 1 ns.
    pub fn tick(&mut self) -> Result<(), ServerError> {
        let ids: Vec<Principal> = self.canisters.keys().copied().collect();
        for id in ids {
            let execs = match self.canisters.get_mut(&id) {
                Some(CanisterEntry {
                    code: Some(c),
                    status: CanisterStatusType::Running,
                    ..
                }) => c.tick()?,
                _ => continue,
            };
            self.print_output(&id, &execs);
        }
        while let Some(id) = self.pending.pop_front() {
            self.execute_message(&id)?;
        }
        self.advance_time(ROUND_TIME_INCREMENT_NS);
        Ok(())
    }

    /// The canister `id`, checked for a call: it exists, has code and runs.
    fn callable(
        &mut self,
        id: &Principal,
        certified: bool,
    ) -> Result<&mut Canister, RejectResponse> {
        let entry = self
            .canisters
            .get_mut(id)
            .ok_or_else(|| reject::canister_not_found(id, certified))?;
        if entry.status != CanisterStatusType::Running {
            return Err(reject::stopped(id, certified));
        }
        entry
            .code
            .as_mut()
            .ok_or_else(|| reject::no_wasm_module(id, certified))
    }

    fn execute_message(&mut self, id: &[u8]) -> Result<(), ServerError> {
        let Some(m) = self.messages.get(id) else {
            return Ok(());
        };
        let (sender, canister, method, payload, effective) = (
            m.sender,
            m.canister,
            m.method.clone(),
            m.payload.clone(),
            m.effective.clone(),
        );
        let result = if canister == Principal::management_canister() {
            self.call_management(sender, &method, &payload, &effective)?
        } else {
            match self.callable(&canister, true) {
                Err(r) => Err(r),
                Ok(c) => {
                    let (result, execs) =
                        c.update_and_wait_as(sender.as_slice(), &method, &payload)?;
                    self.print_output(&canister, &execs);
                    reject::outcome(&canister, &result, true)
                }
            }
        };
        if let Some(m) = self.messages.get_mut(id) {
            m.result = Some(result);
        }
        Ok(())
    }

    /// Submits an ingress message: checks it as the IC's ingress filter would (the canister
    /// exists, has code and runs; the management canister has the method and accepts it from
    /// users) and queues it for the next round. The reject is the outcome of a failed check.
    pub fn submit(
        &mut self,
        call: RawCanisterCall,
    ) -> Result<Result<RawMessageId, RejectResponse>, ServerError> {
        const ENDPOINT: &str = "update/submit_ingress_message";
        let sender = principal(&call.sender, ENDPOINT, "sender")?;
        let canister = principal(&call.canister_id, ENDPOINT, "canister_id")?;
        let check = if canister == Principal::management_canister() {
            crate::management::check_ingress_method(&call.method)
        } else {
            self.callable(&canister, true).map(|_| ())
        };
        if let Err(r) = check {
            return Ok(Err(r));
        }
        let mut h = Sha256::new();
        h.update(self.nonce.to_be_bytes());
        h.update((call.sender.len() as u64).to_be_bytes());
        h.update(&call.sender);
        h.update((call.canister_id.len() as u64).to_be_bytes());
        h.update(&call.canister_id);
        h.update((call.method.len() as u64).to_be_bytes());
        h.update(call.method.as_bytes());
        h.update(&call.payload);
        self.nonce += 1;
        let message_id = h.finalize().to_vec();
        self.messages.insert(
            message_id.clone(),
            Message {
                sender,
                canister,
                effective: call.effective_principal.clone(),
                method: call.method,
                payload: call.payload,
                result: None,
            },
        );
        self.pending.push_back(message_id.clone());
        Ok(Ok(RawMessageId {
            effective_principal: call.effective_principal,
            message_id,
        }))
    }

    /// Runs rounds until the message completes (at most [`MAX_AWAIT_ROUNDS`]) and returns its
    /// outcome.
    pub fn await_message(&mut self, id: &RawMessageId) -> Result<RawCanisterResult, ServerError> {
        let key = &id.message_id;
        if !self.messages.contains_key(key) {
            return Err(ServerError::MessageNotFound(hex::encode(key)));
        }
        for _ in 0..=MAX_AWAIT_ROUNDS {
            if let Some(r) = self.messages.get(key).and_then(|m| m.result.clone()) {
                return Ok(r.into());
            }
            self.tick()?;
        }
        Err(ServerError::MessageDidNotComplete(
            hex::encode(key),
            MAX_AWAIT_ROUNDS,
        ))
    }

    /// Submits and awaits an ingress message.
    pub fn execute(&mut self, call: RawCanisterCall) -> Result<RawCanisterResult, ServerError> {
        match self.submit(call)? {
            Ok(id) => self.await_message(&id),
            Err(reject) => Ok(RawCanisterResult::Err(reject)),
        }
    }

    /// The outcome of a message if it completed (`None` while pending or if unknown). Asking
    /// for another caller's message is [`ServerError::Forbidden`].
    pub fn ingress_status(
        &self,
        args: &RawIngressStatusArgs,
    ) -> Result<Option<RawCanisterResult>, ServerError> {
        let Some(m) = self.messages.get(&args.raw_message_id.message_id) else {
            return Ok(None);
        };
        if let Some(caller) = &args.raw_caller
            && caller.principal_id != m.sender.as_slice()
        {
            return Err(ServerError::Forbidden);
        }
        Ok(m.result.clone().map(Into::into))
    }

    /// Executes a query at once (non-replicated: its changes are discarded).
    pub fn query(&mut self, call: RawCanisterCall) -> Result<RawCanisterResult, ServerError> {
        const ENDPOINT: &str = "read/query";
        let sender = principal(&call.sender, ENDPOINT, "sender")?;
        let canister = principal(&call.canister_id, ENDPOINT, "canister_id")?;
        if canister == Principal::management_canister() {
            return Ok(RawCanisterResult::Err(
                crate::management::unsupported_query(&call.method),
            ));
        }
        let c = match self.callable(&canister, false) {
            Ok(c) => c,
            Err(r) => return Ok(RawCanisterResult::Err(r)),
        };
        let exec = c.query_as(sender.as_slice(), &call.method, &call.payload)?;
        self.print_output(&canister, std::slice::from_ref(&exec));
        Ok(reject::outcome(&canister, &exec.result, false).into())
    }

    fn entry(&self, id: &[u8], endpoint: &'static str) -> Result<&CanisterEntry, ServerError> {
        let p = principal(id, endpoint, "canister_id")?;
        self.canisters
            .get(&p)
            .ok_or(ServerError::CanisterNotFound(p))
    }

    fn entry_mut(
        &mut self,
        id: &[u8],
        endpoint: &'static str,
    ) -> Result<&mut CanisterEntry, ServerError> {
        let p = principal(id, endpoint, "canister_id")?;
        self.canisters
            .get_mut(&p)
            .ok_or(ServerError::CanisterNotFound(p))
    }

    /// The cycle balance of canister `id`.
    pub fn cycles(&self, id: &[u8]) -> Result<u128, ServerError> {
        Ok(self.entry(id, "read/get_cycles")?.cycles())
    }

    /// Adds cycles to canister `id`; returns the new balance.
    pub fn add_cycles(&mut self, id: &[u8], amount: u128) -> Result<u128, ServerError> {
        Ok(self.entry_mut(id, "update/add_cycles")?.add_cycles(amount))
    }

    /// The controllers of canister `id`.
    pub fn controllers(&self, id: &[u8]) -> Result<Vec<Principal>, ServerError> {
        Ok(self
            .entry(id, "read/get_controllers")?
            .settings
            .controllers
            .clone())
    }

    /// The stable memory of canister `id` (empty if it has no code).
    pub fn stable_memory(&self, id: &[u8]) -> Result<Vec<u8>, ServerError> {
        Ok(self
            .entry(id, "read/get_stable_memory")?
            .code
            .as_ref()
            .map(Canister::stable_memory)
            .unwrap_or_default())
    }

    /// Replaces the stable memory of canister `id` (grown to whole 64 KiB pages).
    pub fn set_stable_memory(&mut self, id: &[u8], bytes: &[u8]) -> Result<(), ServerError> {
        let p = principal(id, "update/set_stable_memory", "canister_id")?;
        let entry = self
            .canisters
            .get_mut(&p)
            .ok_or(ServerError::CanisterNotFound(p))?;
        let code = entry.code.as_mut().ok_or(ServerError::NoWasmModule(p))?;
        code.set_stable_memory(bytes);
        Ok(())
    }

    /// The subnet of canister `id`, if the canister exists.
    pub fn subnet_of(&self, id: &[u8]) -> Result<Option<Principal>, ServerError> {
        let p = principal(id, "read/get_subnet", "canister_id")?;
        Ok(self.canisters.get(&p).map(|e| self.subnets[e.subnet].id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_times_like_pocketic_logs() {
        assert_eq!(
            format_time(GENESIS_NS + 6),
            "2021-05-06 19:17:10.000000006 UTC"
        );
        assert_eq!(format_time(0), "1970-01-01 00:00:00.000000000 UTC");
        assert_eq!(
            format_time(951_782_400_000_000_000),
            "2000-02-29 00:00:00.000000000 UTC"
        );
    }
}
