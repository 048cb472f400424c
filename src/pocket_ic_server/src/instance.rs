//! An instance: its application subnets (each an offline-engine [`offline_engine::Subnet`] that
//! holds its canisters' code, state and queues), the canisters' management records, its time
//! and its ingress messages, and the rounds that execute them.
//!
//! A round ([`Instance::tick`]) first executes the messages to the management canister
//! submitted since the last round (the replica's subnet messages, which run first); then every
//! subnet executes a round as the replica's scheduler does (`offline_engine::subnet`): the
//! ingress messages of a block (at most 1,000 and 4 MiB), heartbeats and due timers, calls
//! between canisters in inner iterations until the round's instructions are spent; then the
//! messages between subnets are delivered (the receiving subnet executes them at its next
//! round); then time moves on by 1 ns, as PocketIC's rounds do. Queries execute at once on the
//! current state and discard their changes.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use candid::Principal;
use ic_management_canister_types::{CanisterStatusType, DefiniteCanisterSettings, LogVisibility};
use offline_engine::messages::{CanisterMessage, Ingress, Payload, Response};
use offline_engine::subnet::CanisterStatus;
use offline_engine::{Canister, Engine, EngineError, Execution, MessageResult, Program};
use pocket_ic::RejectResponse;
use pocket_ic::common::rest::{
    CanisterCyclesCostSchedule, InitialTime, InstanceConfig, RawCanisterCall, RawCanisterResult,
    RawEffectivePrincipal, RawIngressStatusArgs, RawMessageId, Topology,
};
use sha2::{Digest, Sha256};

use crate::error::ServerError;
use crate::management;
use crate::reject;
use crate::topology::{self, Subnet};

mod canister_manager;

/// PocketIC's initial time: the IC's genesis, 2021-05-06 19:17:10 UTC.
pub const GENESIS_NS: u64 = 1_620_328_630_000_000_000;

/// How far time moves in each round (PocketIC: 1 ns, so that time strictly increases).
pub const ROUND_TIME_INCREMENT_NS: u64 = 1;

/// What one round's blocks did with ingress, summed over the instance's subnets.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct BlockSummary {
    /// Ingress messages inducted into their canisters' queues this round.
    pub inducted_ingress: usize,
    /// Ingress messages accepted but left for a later round by the block limits.
    pub waiting_ingress: usize,
}

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

/// A canister of an instance: its management record. Its code, state, status and queues are
/// in its subnet's engine ([`Instance::engines`]).
pub(crate) struct CanisterEntry {
    /// Index of its subnet in [`Instance::subnets`] (and [`Instance::engines`]).
    pub subnet: usize,
    /// Size of the installed wasm module in bytes.
    pub module_size: u64,
    /// Settings as the management canister reports them (the controllers, `memory_allocation`
    /// and `wasm_memory_limit` reach the engine).
    pub settings: DefiniteCanisterSettings,
    /// The cycle balance while the canister is empty (the engine holds it otherwise).
    pub empty_cycles: u128,
    /// The wasm chunk store: chunks by SHA-256.
    pub chunks: BTreeMap<Vec<u8>, Vec<u8>>,
    /// Installs, upgrades, uninstalls and settings changes so far.
    pub version: u64,
}

impl CanisterEntry {
    fn new(subnet: usize, settings: DefiniteCanisterSettings, cycles: u128) -> Self {
        CanisterEntry {
            subnet,
            module_size: 0,
            settings,
            empty_cycles: cycles,
            chunks: BTreeMap::new(),
            version: 0,
        }
    }

    /// The settings' `wasm_memory_limit` and `memory_allocation` in bytes (0: none), as the
    /// engine takes them.
    fn memory_limits(&self) -> (u64, u64) {
        let bytes = |n: &candid::Nat| u64::try_from(&n.0).unwrap_or(u64::MAX);
        (
            bytes(&self.settings.wasm_memory_limit),
            bytes(&self.settings.memory_allocation),
        )
    }

    /// The controllers as raw principal bytes, `first` (when a controller) moved to the front:
    /// the engine runs install and upgrade hooks as its first controller.
    fn controllers_first(&self, first: &Principal) -> Vec<Vec<u8>> {
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
    programs: Arc<Programs>,
    pub(crate) subnets: Vec<Subnet>,
    /// The engine of every subnet (same order as `subnets`): code, state, status and queues of
    /// its canisters.
    engines: Vec<offline_engine::Subnet>,
    /// Next unused canister index per subnet.
    next_index: Vec<u64>,
    pub(crate) canisters: BTreeMap<Principal, CanisterEntry>,
    time_ns: u64,
    messages: HashMap<Vec<u8>, Message>,
    /// Messages to the management canister submitted since the last round.
    pending: VecDeque<Vec<u8>>,
    /// `stop_canister` messages waiting for their canister to stop: (canister, message id).
    stopping: Vec<(Principal, Vec<u8>)>,
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
        let engines = subnets
            .iter()
            .map(|s| {
                let mut engine = offline_engine::Subnet::new(s.engine_config(), time_ns);
                let (first, last) = s.range();
                engine.set_canister_range(first.as_slice().to_vec(), last.as_slice().to_vec());
                engine
            })
            .collect();
        Ok(Instance {
            programs,
            next_index: subnets.iter().map(|s| s.range_start).collect(),
            subnets,
            engines,
            canisters: BTreeMap::new(),
            time_ns,
            messages: HashMap::new(),
            pending: VecDeque::new(),
            stopping: Vec::new(),
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
        for engine in &mut self.engines {
            engine.set_time(self.time_ns);
        }
    }

    /// Prints the `debug_print` output of `execs` as PocketIC does:
    /// `<time> UTC: [Canister <id>] <line>`.
    fn print_output(&self, canister: &Principal, execs: &[Execution]) {
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

    /// The installed code and state of canister `id`, if it has code.
    pub(crate) fn code(&self, id: &Principal) -> Option<&Canister> {
        let entry = self.canisters.get(id)?;
        self.engines[entry.subnet].canister(id.as_slice())
    }

    /// Mutable access to the code and state of canister `id`, if it has code.
    fn code_mut(&mut self, id: &Principal) -> Option<&mut Canister> {
        let subnet = self.canisters.get(id)?.subnet;
        self.engines[subnet].canister_mut(id.as_slice())
    }

    /// The engine of canister `id`'s subnet.
    fn engine_of(&mut self, id: &Principal) -> Option<&mut offline_engine::Subnet> {
        let subnet = self.canisters.get(id)?.subnet;
        self.engines.get_mut(subnet)
    }

    /// Whether canister `id` runs, is stopping or is stopped (`None` if it does not exist).
    fn status_of(&self, id: &Principal) -> Option<CanisterStatusType> {
        let entry = self.canisters.get(id)?;
        Some(match self.engines[entry.subnet].status(id.as_slice())? {
            CanisterStatus::Running => CanisterStatusType::Running,
            CanisterStatus::Stopping => CanisterStatusType::Stopping,
            CanisterStatus::Stopped => CanisterStatusType::Stopped,
        })
    }

    /// The cycle balance of canister `id` (0 if it does not exist).
    pub(crate) fn balance(&self, id: &Principal) -> u128 {
        match (self.code(id), self.canisters.get(id)) {
            (Some(c), _) => c.cycles(),
            (None, Some(e)) => e.empty_cycles,
            (None, None) => 0,
        }
    }

    /// Adds cycles to canister `id`; returns the new balance.
    fn credit(&mut self, id: &Principal, amount: u128) -> u128 {
        if let Some(c) = self.code_mut(id) {
            return c.add_cycles(amount);
        }
        match self.canisters.get_mut(id) {
            Some(e) => {
                e.empty_cycles = e.empty_cycles.saturating_add(amount);
                e.empty_cycles
            }
            None => 0,
        }
    }

    /// One round: the management messages submitted so far, a round of every subnet
    /// (ingress of one block, timers, calls between canisters within the round's instructions),
    /// the messages between subnets delivered for their next round; then time moves on by 1 ns.
    ///
    /// Returns how many ingress messages the round's blocks inducted and how many still wait
    /// (a block holds at most 1,000 messages and 4 MiB: the rest wait for the next round).
    pub fn tick(&mut self) -> Result<BlockSummary, ServerError> {
        while let Some(id) = self.pending.pop_front() {
            self.execute_message(&id)?;
        }
        let mut stopped = Vec::new();
        let mut summary = BlockSummary::default();
        for index in 0..self.engines.len() {
            let round = self.engines[index].execute_round()?;
            summary.inducted_ingress += round.inducted_ingress;
            summary.waiting_ingress += self.engines[index].pending_ingress();
            for (canister, exec) in &round.executions {
                let p = Principal::from_slice(canister);
                self.print_output(&p, std::slice::from_ref(exec));
            }
            for outcome in round.completed {
                if let Some(m) = self.messages.get_mut(&outcome.id) {
                    m.result = Some(reject::outcome(&m.canister, &outcome.result, true));
                }
            }
            stopped.extend(round.stopped.iter().map(|c| Principal::from_slice(c)));
        }
        self.complete_stops(&stopped);
        self.deliver_between_subnets();
        self.advance_time(ROUND_TIME_INCREMENT_NS);
        Ok(summary)
    }

    /// Records the outcome of message `id`.
    fn set_result(&mut self, id: &[u8], result: Result<Vec<u8>, RejectResponse>) {
        if let Some(m) = self.messages.get_mut(id) {
            m.result = Some(result);
        }
    }

    /// Answers the `stop_canister` messages whose canisters stopped.
    fn complete_stops(&mut self, stopped: &[Principal]) {
        let (done, waiting): (Vec<_>, Vec<_>) = std::mem::take(&mut self.stopping)
            .into_iter()
            .partition(|(c, _)| stopped.contains(c));
        self.stopping = waiting;
        let reply = candid::encode_args(()).unwrap_or_default();
        for (_, id) in done {
            if let Some(m) = self.messages.get_mut(&id) {
                m.result = Some(Ok(reply.clone()));
            }
        }
    }

    /// Fails the `stop_canister` messages waiting for canister `id` (it was started again), as
    /// the replica does.
    fn cancel_stops(&mut self, id: &Principal) {
        let (cancelled, waiting): (Vec<_>, Vec<_>) = std::mem::take(&mut self.stopping)
            .into_iter()
            .partition(|(c, _)| c == id);
        self.stopping = waiting;
        for (_, message) in cancelled {
            if let Some(m) = self.messages.get_mut(&message) {
                m.result = Some(Err(reject::reject(
                    pocket_ic::ErrorCode::CanisterStoppingCancelled,
                    format!("Canister {id}'s stop request was cancelled."),
                    true,
                )));
            }
        }
    }

    /// Delivers the messages the subnets sent to canisters of other subnets: into the
    /// receiver's subnet, which executes them at its next round. A request to a canister id of
    /// no subnet is answered with `No route to canister <id>`, one to an id of a subnet's range
    /// that no canister has with `Canister <id> not found` (reject code 3), and one to the
    /// management canister with a reject naming the method, as this server does not execute
    /// calls from canisters to it.
    fn deliver_between_subnets(&mut self) {
        let mut sent = Vec::new();
        for engine in &mut self.engines {
            sent.extend(engine.take_outgoing());
        }
        for message in sent {
            let receiver = Principal::from_slice(message.receiver());
            if let Some(entry) = self.canisters.get(&receiver) {
                self.engines[entry.subnet].induct_remote(message);
                continue;
            }
            let CanisterMessage::Request(request) = message else {
                // An answer to a canister that went away: nobody to deliver it to.
                continue;
            };
            let (code, text) = if receiver == Principal::management_canister() {
                (
                    offline_engine::reject_code::CANISTER_REJECT,
                    format!(
                        "{} (engine: {}) does not execute calls from canisters to the management canister (method `{}`)",
                        crate::SERVER_NAME,
                        crate::ENGINE_LABEL,
                        request.method
                    ),
                )
            } else if self.subnets.iter().any(|s| s.contains(&receiver)) {
                (
                    offline_engine::reject_code::DESTINATION_INVALID,
                    format!("Canister {receiver} not found"),
                )
            } else {
                (
                    offline_engine::reject_code::DESTINATION_INVALID,
                    format!("No route to canister {receiver}"),
                )
            };
            let sender = Principal::from_slice(&request.sender);
            let reject = Response {
                originator: request.sender,
                respondent: request.receiver,
                callback: request.callback,
                payload: Payload::Reject(code, text),
                refund: request.cycles,
                deadline: request.deadline,
            };
            if let Some(entry) = self.canisters.get(&sender) {
                self.engines[entry.subnet].induct_remote(CanisterMessage::Response(reject));
            }
        }
    }

    /// Canister `id`, checked for a call: it exists, runs and has code.
    fn callable(&self, id: &Principal, certified: bool) -> Result<(), RejectResponse> {
        match self.status_of(id) {
            None => Err(reject::canister_not_found(id, certified)),
            Some(CanisterStatusType::Running) if self.code(id).is_some() => Ok(()),
            Some(CanisterStatusType::Running) => Err(reject::no_wasm_module(id, certified)),
            Some(CanisterStatusType::Stopping) => Err(reject::stopping(id, certified)),
            Some(CanisterStatusType::Stopped) => Err(reject::stopped(id, certified)),
        }
    }

    /// Executes a message to the management canister at the start of a round.
    fn execute_message(&mut self, id: &[u8]) -> Result<(), ServerError> {
        let Some(m) = self.messages.get(id) else {
            return Ok(());
        };
        let (sender, method, payload, effective) = (
            m.sender,
            m.method.clone(),
            m.payload.clone(),
            m.effective.clone(),
        );
        match management::check_ingress_method(&method) {
            Ok(method) => self.execute_management(id, sender, method, &payload, &effective),
            Err(r) => {
                self.set_result(id, Err(r));
                Ok(())
            }
        }
    }

    /// Submits an ingress message: checks it as the IC's ingress filter would (the canister
    /// exists, has code and runs, the argument is within the limit, `canister_inspect_message`
    /// accepts it; the management canister has the method and accepts it from users) and
    /// queues it for the next round. The reject is the outcome of a failed check.
    pub fn submit(
        &mut self,
        call: RawCanisterCall,
    ) -> Result<Result<RawMessageId, RejectResponse>, ServerError> {
        const ENDPOINT: &str = "update/submit_ingress_message";
        let sender = principal(&call.sender, ENDPOINT, "sender")?;
        let canister = principal(&call.canister_id, ENDPOINT, "canister_id")?;
        let check = if canister == Principal::management_canister() {
            management::check_ingress_method(&call.method).map(drop)
        } else {
            self.callable(&canister, true)
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
        let message_id = h.finalize().to_vec();
        if canister != Principal::management_canister() {
            let ingress = Ingress {
                id: message_id.clone(),
                sender: call.sender.clone(),
                receiver: call.canister_id.clone(),
                method: call.method.clone(),
                payload: call.payload.clone(),
            };
            let Some(engine) = self.engine_of(&canister) else {
                return Ok(Err(reject::canister_not_found(&canister, true)));
            };
            if let Err(refused) = engine.submit(ingress)? {
                let result = MessageResult::Reject(refused.code, refused.message);
                return Ok(Err(match reject::outcome(&canister, &result, true) {
                    Err(r) => r,
                    Ok(_) => reject::canister_not_found(&canister, true),
                }));
            }
        }
        self.nonce += 1;
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
        if canister == Principal::management_canister() {
            self.pending.push_back(message_id.clone());
        }
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
            return Ok(RawCanisterResult::Err(management::unsupported_query(
                &call.method,
            )));
        }
        if let Err(r) = self.callable(&canister, false) {
            return Ok(RawCanisterResult::Err(r));
        }
        let Some(c) = self.code_mut(&canister) else {
            return Ok(RawCanisterResult::Err(reject::no_wasm_module(
                &canister, false,
            )));
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

    /// The cycle balance of canister `id`.
    pub fn cycles(&self, id: &[u8]) -> Result<u128, ServerError> {
        self.entry(id, "read/get_cycles")?;
        let p = principal(id, "read/get_cycles", "canister_id")?;
        Ok(self.balance(&p))
    }

    /// Adds cycles to canister `id`; returns the new balance.
    pub fn add_cycles(&mut self, id: &[u8], amount: u128) -> Result<u128, ServerError> {
        self.entry(id, "update/add_cycles")?;
        let p = principal(id, "update/add_cycles", "canister_id")?;
        Ok(self.credit(&p, amount))
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
        self.entry(id, "read/get_stable_memory")?;
        let p = principal(id, "read/get_stable_memory", "canister_id")?;
        Ok(self
            .code(&p)
            .map(Canister::stable_memory)
            .unwrap_or_default())
    }

    /// Replaces the stable memory of canister `id` (grown to whole 64 KiB pages).
    pub fn set_stable_memory(&mut self, id: &[u8], bytes: &[u8]) -> Result<(), ServerError> {
        let p = principal(id, "update/set_stable_memory", "canister_id")?;
        if !self.canisters.contains_key(&p) {
            return Err(ServerError::CanisterNotFound(p));
        }
        let code = self.code_mut(&p).ok_or(ServerError::NoWasmModule(p))?;
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
