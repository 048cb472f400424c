//! A subnet: several canisters, their ingress messages and the calls between them, executed in
//! rounds as the replica's scheduler executes them (`rs/execution_environment/src/scheduler.rs`).
//!
//! A round ([`Subnet::execute_round`]):
//!
//! 1. Times out the calls with a best-effort response whose deadline passed (their callers get
//!    `SYS_UNKNOWN` `Call deadline has expired.`) and drops the best-effort requests that expired
//!    in the queues.
//! 2. Inducts the messages the canisters sent in the previous round that did not fit in it, then
//!    the ingress messages of the block: at most [`SubnetConfig::max_ingress_messages_per_block`]
//!    (1,000) and [`SubnetConfig::max_ingress_bytes_per_block`] (4 MiB) of them, in submission
//!    order; the rest wait for the next round (`MAX_INGRESS_MESSAGES_PER_BLOCK` and
//!    `MAX_INGRESS_BYTES_PER_BLOCK` in the replica's `rs/limits/src/lib.rs`).
//! 3. Runs inner iterations while the round's instruction budget lasts: in the first, every
//!    running canister's heartbeat and due global timer; then each canister (in canister id
//!    order, rotated by one each round) executes the messages in its queues (round-robin over
//!    ingress and senders) until it has none or the budget is spent; after the iteration the
//!    messages the canisters sent are inducted into their receivers' queues, so that a call made
//!    in an iteration runs in the next one of the same round and its answer in the one after.
//!    The iterations end when one executed nothing or the budget is spent
//!    (`inner_round` in the replica's scheduler).
//!
//! So other messages run between a call and its answer: everything already queued at the callee
//! (and at the caller, before the answer) runs first, a canister's self-calls included. The
//! budget is the replica's: 4 B instructions per round less the 2 B of a slice, plus one, to
//! start messages; every execution costs 2 M more and every canister that executed 8 M more,
//! and every iteration 12 K per canister (`SchedulerConfig::application_subnet()` in
//! `rs/config/src/subnet_config.rs`). A message runs to its end in one go (no deterministic time
//! slicing), so a round may go beyond its budget by the last message.
//!
//! Messages to canisters outside the subnet's range go out ([`Subnet::take_outgoing`]) when the
//! subnet is part of a network ([`SubnetConfig::routes_out`]): whoever hosts the subnets routes
//! them to the subnet that hosts the receiver, which inducts them at its next round
//! ([`Subnet::induct_remote`]), as the IC's streams between subnets do. A message to a canister id
//! of its own range that no canister has, or to any canister it does not host when it routes
//! nothing out, is answered with `Canister <id> not found` (reject code 3).

use std::collections::{BTreeMap, VecDeque};

use crate::canister::Canister;
use crate::error::EngineError;
use crate::messages::{CanisterMessage, Ingress, Payload, Response};
use crate::types::{Execution, MessageResult, reject_code};
use crate::user_error::{no_wasm_module, principal_text};

/// How a subnet runs its rounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SubnetConfig {
    /// Instructions of a round (`MAX_INSTRUCTIONS_PER_ROUND`, 4 B on application subnets).
    pub max_instructions_per_round: u64,
    /// Instructions of a slice (`MAX_INSTRUCTIONS_PER_SLICE`, 2 B): the round starts messages
    /// while less than `max_instructions_per_round - max_instructions_per_slice` ran.
    pub max_instructions_per_slice: u64,
    /// Round instructions every execution costs besides its own (2 M).
    pub instruction_overhead_per_execution: u64,
    /// Round instructions every canister that executed costs (8 M).
    pub instruction_overhead_per_canister: u64,
    /// Round instructions every inner iteration costs per canister on the subnet (12 K).
    pub instruction_overhead_per_canister_for_finalization: u64,
    /// Ingress messages a block holds at most (1,000).
    pub max_ingress_messages_per_block: usize,
    /// Ingress bytes a block holds at most (4 MiB; [`Ingress::block_bytes`]).
    pub max_ingress_bytes_per_block: u64,
    /// Whether messages to canisters the subnet does not host leave it
    /// ([`Subnet::take_outgoing`]) instead of being rejected.
    pub routes_out: bool,
}

impl SubnetConfig {
    /// An application subnet of the IC.
    pub const APPLICATION: SubnetConfig = SubnetConfig {
        max_instructions_per_round: 4_000_000_000,
        max_instructions_per_slice: 2_000_000_000,
        instruction_overhead_per_execution: 2_000_000,
        instruction_overhead_per_canister: 8_000_000,
        instruction_overhead_per_canister_for_finalization: 12_000,
        max_ingress_messages_per_block: 1_000,
        max_ingress_bytes_per_block: 4 * 1024 * 1024,
        routes_out: false,
    };

    /// The instructions a round may start messages with: `round - slice + 1`.
    pub fn round_budget(&self) -> i64 {
        let round = i64::try_from(self.max_instructions_per_round).unwrap_or(i64::MAX);
        let slice = i64::try_from(self.max_instructions_per_slice).unwrap_or(i64::MAX);
        round.saturating_sub(slice).saturating_add(1)
    }
}

impl Default for SubnetConfig {
    fn default() -> Self {
        SubnetConfig::APPLICATION
    }
}

/// Whether a canister runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CanisterStatus {
    /// It executes messages.
    Running,
    /// It was asked to stop: it executes answers to its calls but takes no new calls, and stops
    /// when no call context is open.
    Stopping,
    /// It executes nothing; calls to it are rejected.
    Stopped,
}

struct Slot {
    canister: Option<Canister>,
    status: CanisterStatus,
}

/// Why an ingress message was not accepted, or how a call could not be delivered: a reject code
/// and message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The reject code ([`crate::reject_code`]).
    pub code: u32,
    /// The message.
    pub message: String,
    /// The IC error code behind it (`301` for `IC0301`).
    pub error_code: u64,
}

/// The answer to an ingress message that completed in a round.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IngressOutcome {
    /// The message id given at submission.
    pub id: Vec<u8>,
    /// The canister it called.
    pub canister: Vec<u8>,
    /// The answer: a reply, or a reject (reject code and the engine's text: a trap's message,
    /// `Canister has no update method ...`, `Canister did not reply to the call`).
    pub result: MessageResult,
}

/// An execution and the canister that ran it.
pub type CanisterExecution = (Vec<u8>, Execution);

/// What a round did.
#[derive(Debug, Default)]
pub struct Round {
    /// Every execution, in order, with the canister that ran it.
    pub executions: Vec<CanisterExecution>,
    /// Ingress messages answered in the round.
    pub completed: Vec<IngressOutcome>,
    /// Ingress messages inducted into canister queues in the round.
    pub inducted_ingress: usize,
    /// Inner iterations that executed something.
    pub iterations: usize,
    /// Canisters that finished stopping in the round.
    pub stopped: Vec<Vec<u8>>,
}

/// A subnet of canisters (see the module documentation).
pub struct Subnet {
    config: SubnetConfig,
    slots: BTreeMap<Vec<u8>, Slot>,
    /// Submitted ingress messages not yet in a block.
    pool: VecDeque<Ingress>,
    /// Messages sent in a round that ended before they were inducted.
    pending: Vec<CanisterMessage>,
    /// Messages to canisters of other subnets.
    outgoing: Vec<CanisterMessage>,
    /// The canister ids the subnet's range holds (first and last, inclusive), if set.
    range: Option<(Vec<u8>, Vec<u8>)>,
    time: u64,
    round: u64,
}

impl std::fmt::Debug for Subnet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Subnet")
            .field("config", &self.config)
            .field("canisters", &self.slots.len())
            .field("pool", &self.pool.len())
            .field("time", &self.time)
            .field("round", &self.round)
            .finish_non_exhaustive()
    }
}

fn refusal(code: u32, error_code: u64, message: String) -> Refusal {
    Refusal {
        code,
        message,
        error_code,
    }
}

impl Subnet {
    /// An empty subnet at time `time_ns`.
    pub fn new(config: SubnetConfig, time_ns: u64) -> Subnet {
        Subnet {
            config,
            slots: BTreeMap::new(),
            pool: VecDeque::new(),
            pending: Vec::new(),
            outgoing: Vec::new(),
            range: None,
            time: time_ns,
            round: 0,
        }
    }

    /// The configuration.
    pub fn config(&self) -> &SubnetConfig {
        &self.config
    }

    /// Current time (ns since the epoch).
    pub fn time(&self) -> u64 {
        self.time
    }

    /// Sets the time of the subnet and of its canisters (it never goes back: an earlier time
    /// is ignored).
    pub fn set_time(&mut self, ns: u64) {
        self.time = self.time.max(ns);
        let now = self.time;
        for slot in self.slots.values_mut() {
            if let Some(c) = &mut slot.canister {
                c.advance_time(now.saturating_sub(c.time()));
            }
        }
    }

    /// The range of canister ids the subnet hosts (first and last id, inclusive; ids compare
    /// as bytes, as the IC's canister id ranges do). A message to an id of the range that no
    /// canister has is rejected here (`Canister <id> not found`); with
    /// [`SubnetConfig::routes_out`], a message to an id outside the range goes out.
    pub fn set_canister_range(&mut self, first: Vec<u8>, last: Vec<u8>) {
        self.range = Some((first, last));
    }

    fn in_range(&self, id: &[u8]) -> bool {
        match &self.range {
            Some((first, last)) => first.as_slice() <= id && id <= last.as_slice(),
            None => false,
        }
    }

    /// Rounds executed so far.
    pub fn rounds(&self) -> u64 {
        self.round
    }

    /// Adds an empty, running canister `id` (no code yet). Replaces nothing: an existing
    /// canister stays as it is.
    pub fn create(&mut self, id: &[u8]) {
        self.slots.entry(id.to_vec()).or_insert(Slot {
            canister: None,
            status: CanisterStatus::Running,
        });
    }

    /// Places an installed canister on the subnet (its id is its settings' `canister_id`),
    /// replacing the code of a canister with that id; the status stays (running for a new one).
    /// Its time is set to the subnet's.
    pub fn install(&mut self, mut canister: Canister) {
        canister.advance_time(self.time.saturating_sub(canister.time()));
        let id = canister.settings().canister_id.clone();
        let slot = self.slots.entry(id).or_insert(Slot {
            canister: None,
            status: CanisterStatus::Running,
        });
        slot.canister = Some(canister);
    }

    /// Removes canister `id`'s code (it stays, empty); returns it.
    pub fn uninstall(&mut self, id: &[u8]) -> Option<Canister> {
        self.slots.get_mut(id).and_then(|s| s.canister.take())
    }

    /// Removes canister `id` from the subnet; returns its code if it had some.
    pub fn remove(&mut self, id: &[u8]) -> Option<Canister> {
        self.slots.remove(id).and_then(|s| s.canister)
    }

    /// Whether the subnet hosts canister `id` (with or without code).
    pub fn contains(&self, id: &[u8]) -> bool {
        self.slots.contains_key(id)
    }

    /// The ids of the canisters, in order.
    pub fn canister_ids(&self) -> Vec<Vec<u8>> {
        self.slots.keys().cloned().collect()
    }

    /// The code and state of canister `id`, if it has code.
    pub fn canister(&self, id: &[u8]) -> Option<&Canister> {
        self.slots.get(id).and_then(|s| s.canister.as_ref())
    }

    /// Mutable access to canister `id` (install, upgrade, settings between rounds).
    pub fn canister_mut(&mut self, id: &[u8]) -> Option<&mut Canister> {
        self.slots.get_mut(id).and_then(|s| s.canister.as_mut())
    }

    /// The status of canister `id`.
    pub fn status(&self, id: &[u8]) -> Option<CanisterStatus> {
        self.slots.get(id).map(|s| s.status)
    }

    /// Starts canister `id` (a stopping canister runs again).
    pub fn start(&mut self, id: &[u8]) {
        if let Some(slot) = self.slots.get_mut(id) {
            slot.status = CanisterStatus::Running;
        }
    }

    /// Asks canister `id` to stop. It stops at once when no call context is open and nothing is
    /// queued, else it is stopping: it runs the answers to its calls and refuses the requests
    /// and ingress messages still queued (`Canister <id> is stopping`), and it stops after the
    /// round in which its last context closed. Returns the status.
    pub fn stop(&mut self, id: &[u8]) -> Option<CanisterStatus> {
        let slot = self.slots.get_mut(id)?;
        let busy = slot
            .canister
            .as_ref()
            .is_some_and(|c| c.open_call_contexts() > 0 || c.has_pending_work());
        slot.status = if !busy {
            CanisterStatus::Stopped
        } else {
            CanisterStatus::Stopping
        };
        Some(slot.status)
    }

    /// Ingress messages submitted and not yet inducted.
    pub fn pending_ingress(&self) -> usize {
        self.pool.len()
    }

    /// Why a message to canister `id` cannot be delivered now, if it cannot: the canister is
    /// unknown, stopped or (for a request) stopping, or has no code.
    fn undeliverable(&self, id: &[u8], request: bool) -> Option<Refusal> {
        let text = principal_text(id);
        let Some(slot) = self.slots.get(id) else {
            return Some(refusal(
                reject_code::DESTINATION_INVALID,
                crate::user_error::error_code::CANISTER_NOT_FOUND,
                format!("Canister {text} not found"),
            ));
        };
        match slot.status {
            CanisterStatus::Stopped => {
                return Some(refusal(
                    reject_code::CANISTER_ERROR,
                    crate::user_error::error_code::CANISTER_STOPPED,
                    format!("Canister {text} is stopped"),
                ));
            }
            CanisterStatus::Stopping if request => {
                return Some(refusal(
                    reject_code::CANISTER_ERROR,
                    crate::user_error::error_code::CANISTER_STOPPING,
                    format!("Canister {text} is stopping"),
                ));
            }
            _ => {}
        }
        if slot.canister.is_none() {
            // What a calling canister receives: the replica's user error, code included.
            let e = no_wasm_module(&text);
            return Some(refusal(e.reject_code(), e.code, e.to_string()));
        }
        None
    }

    /// Submits an ingress message as the IC's ingress filter checks it: the canister exists,
    /// runs and has code, the argument is within the ingress limit, and
    /// `canister_inspect_message` (if exported) accepts it. An accepted message waits in the
    /// pool for a block ([`Self::execute_round`]).
    pub fn submit(&mut self, ingress: Ingress) -> Result<Result<(), Refusal>, EngineError> {
        if let Some(r) = self.undeliverable(&ingress.receiver, true) {
            return Ok(Err(r));
        }
        let Some(canister) = self.canister_mut(&ingress.receiver) else {
            return Ok(Err(refusal(
                reject_code::DESTINATION_INVALID,
                crate::user_error::error_code::CANISTER_NOT_FOUND,
                format!("Canister {} not found", principal_text(&ingress.receiver)),
            )));
        };
        if let Some(refused) =
            canister.check_ingress(&ingress.sender, &ingress.method, &ingress.payload)?
        {
            let (code, message) = match refused.result {
                MessageResult::Reject(code, m) => (code, m),
                MessageResult::Trap(m) => (reject_code::CANISTER_ERROR, m),
                other => (reject_code::CANISTER_ERROR, format!("{other:?}")),
            };
            let error_code = match code {
                reject_code::CANISTER_REJECT => {
                    crate::user_error::error_code::CANISTER_REJECTED_MESSAGE
                }
                reject_code::SYS_FATAL => 100 + code as u64,
                _ => crate::user_error::canister_error("", &message).code,
            };
            return Ok(Err(refusal(code, error_code, message)));
        }
        self.pool.push_back(ingress);
        Ok(Ok(()))
    }

    /// Inducts a message from a canister of another subnet (the next round executes it). A
    /// request that cannot be delivered is answered through [`Self::take_outgoing`].
    pub fn induct_remote(&mut self, message: CanisterMessage) {
        let request = matches!(message, CanisterMessage::Request(_));
        match self.undeliverable(message.receiver(), request) {
            None => {
                if let Some(c) = self.canister_mut(message.receiver()) {
                    c.push_input(message, true);
                }
            }
            Some(r) => {
                if let CanisterMessage::Request(req) = message {
                    self.outgoing
                        .push(CanisterMessage::Response(reject_request(req, r)));
                }
            }
        }
    }

    /// Messages to canisters of other subnets, sent since the last call.
    pub fn take_outgoing(&mut self) -> Vec<CanisterMessage> {
        std::mem::take(&mut self.outgoing)
    }

    /// Delivers `message` on this subnet: into its receiver's queue, or, for a request that
    /// cannot be delivered, its reject into the sender's; messages to canisters elsewhere go
    /// out (or are rejected when the subnet routes nothing out).
    fn route(&mut self, message: CanisterMessage) {
        let receiver = message.receiver().to_vec();
        if !self.slots.contains_key(&receiver)
            && self.config.routes_out
            && !self.in_range(&receiver)
        {
            self.outgoing.push(message);
            return;
        }
        let request = matches!(message, CanisterMessage::Request(_));
        match self.undeliverable(&receiver, request) {
            None => {
                if let Some(c) = self.canister_mut(&receiver) {
                    c.push_input(message, false);
                }
            }
            Some(r) => {
                // A response that cannot be delivered (its caller stopped or went away) is
                // dropped; a request is answered with the refusal.
                if let CanisterMessage::Request(req) = message {
                    let reject = reject_request(req, r);
                    if let Some(c) = self.canister_mut(&reject.originator.clone()) {
                        c.push_input(CanisterMessage::Response(reject), false);
                    }
                }
            }
        }
    }

    /// Delivers what every canister sent.
    fn induct_outputs(&mut self) {
        let mut sent = std::mem::take(&mut self.pending);
        for slot in self.slots.values_mut() {
            if let Some(c) = &mut slot.canister {
                sent.extend(c.take_outputs());
            }
        }
        for message in sent {
            self.route(message);
        }
    }

    /// Moves the ingress messages of one block from the pool into their canisters' queues.
    fn induct_ingress(&mut self) -> usize {
        let (mut messages, mut bytes) = (0usize, 0u64);
        while let Some(next) = self.pool.front() {
            let size = next.block_bytes();
            if messages == self.config.max_ingress_messages_per_block
                || (messages > 0 && bytes + size > self.config.max_ingress_bytes_per_block)
            {
                break;
            }
            let Some(ingress) = self.pool.pop_front() else {
                break;
            };
            messages += 1;
            bytes += size;
            match self.canister_mut(&ingress.receiver) {
                Some(c) => c.push_ingress(ingress),
                // The canister went away after the message was accepted: nothing runs it.
                None => continue,
            }
        }
        messages
    }

    /// Executes one round (see the module documentation). Time does not move: the caller sets
    /// it between rounds ([`Self::set_time`]).
    pub fn execute_round(&mut self) -> Result<Round, EngineError> {
        let mut round = Round::default();
        self.induct_outputs();
        round.inducted_ingress = self.induct_ingress();
        let now = self.time;
        for slot in self.slots.values_mut() {
            if let Some(c) = &mut slot.canister {
                c.time_out(now);
            }
        }

        let ids = self.canister_ids();
        let n = ids.len().max(1);
        let offset = (self.round as usize) % n;
        let order: Vec<Vec<u8>> = ids
            .iter()
            .cycle()
            .skip(offset)
            .take(ids.len())
            .cloned()
            .collect();
        let mut budget = self.config.round_budget();
        let mut first = true;
        loop {
            if budget <= 0 {
                break;
            }
            let mut executed_any = false;
            for id in &order {
                if budget <= 0 {
                    break;
                }
                let Some(slot) = self.slots.get_mut(id) else {
                    continue;
                };
                if slot.status == CanisterStatus::Stopped {
                    continue;
                }
                let running = slot.status == CanisterStatus::Running;
                let Some(c) = slot.canister.as_mut() else {
                    continue;
                };
                let mut executions = Vec::new();
                if first && running {
                    executions.extend(c.run_system_tasks()?);
                }
                for e in &executions {
                    budget -= round_cost(e, &self.config);
                }
                let mut took_input = false;
                while budget > 0 {
                    // A stopping canister runs the answers to its calls and refuses the rest.
                    let next = if running {
                        c.execute_next_input()?
                    } else {
                        c.execute_next_input_stopping()?
                    };
                    let Some(execs) = next else { break };
                    took_input = true;
                    for e in &execs {
                        budget -= round_cost(e, &self.config);
                    }
                    executions.extend(execs);
                }
                if !executions.is_empty() || took_input {
                    executed_any = true;
                }
                if executions.iter().any(|e| e.instructions > 0) {
                    budget -= as_budget(self.config.instruction_overhead_per_canister);
                }
                round
                    .executions
                    .extend(executions.into_iter().map(|e| (id.clone(), e)));
                round
                    .completed
                    .extend(c.take_completed_ingress().into_iter().map(|(mid, result)| {
                        IngressOutcome {
                            id: mid,
                            canister: id.clone(),
                            result,
                        }
                    }));
            }
            first = false;
            budget -= as_budget(
                self.config
                    .instruction_overhead_per_canister_for_finalization
                    .saturating_mul(self.slots.len() as u64),
            );
            if !executed_any {
                break;
            }
            round.iterations += 1;
            // The replica's `induct_messages_on_same_subnet`.
            self.induct_outputs();
        }
        // What the canisters sent after the last iteration: to canisters elsewhere it leaves
        // now (the replica's stream builder runs at the end of the round); to canisters here it
        // is inducted at the next round.
        let mut sent = Vec::new();
        for slot in self.slots.values_mut() {
            if let Some(c) = &mut slot.canister {
                sent.extend(c.take_outputs());
            }
        }
        for message in sent {
            if self.slots.contains_key(message.receiver()) {
                self.pending.push(message);
            } else {
                self.route(message);
            }
        }
        for (id, slot) in self.slots.iter_mut() {
            if slot.status == CanisterStatus::Stopping
                && slot
                    .canister
                    .as_ref()
                    .is_none_or(|c| c.open_call_contexts() == 0 && !c.has_pending_work())
            {
                slot.status = CanisterStatus::Stopped;
                round.stopped.push(id.clone());
            }
        }
        self.round += 1;
        Ok(round)
    }

    /// Submits `ingress` and runs rounds until it is answered (at most `max_rounds`); returns
    /// the answer and every execution. Time does not move. A refused message is answered with
    /// its refusal (as a `Reject`).
    pub fn execute_ingress(
        &mut self,
        ingress: Ingress,
        max_rounds: usize,
    ) -> Result<(MessageResult, Vec<CanisterExecution>), EngineError> {
        let id = ingress.id.clone();
        if let Err(r) = self.submit(ingress)? {
            return Ok((MessageResult::Reject(r.code, r.message), Vec::new()));
        }
        let mut all = Vec::new();
        for _ in 0..max_rounds {
            let round = self.execute_round()?;
            all.extend(round.executions);
            if let Some(done) = round.completed.into_iter().find(|o| o.id == id) {
                return Ok((done.result, all));
            }
        }
        Ok((MessageResult::NoReply, all))
    }
}

/// The rejection of `request` for `why`: its cycles go back with it.
fn reject_request(request: crate::messages::Request, why: Refusal) -> Response {
    Response {
        originator: request.sender,
        respondent: request.receiver,
        callback: request.callback,
        payload: Payload::Reject(why.code, why.message),
        refund: request.cycles,
        deadline: request.deadline,
    }
}

fn as_budget(instructions: u64) -> i64 {
    i64::try_from(instructions).unwrap_or(i64::MAX)
}

/// What an execution costs the round: its instructions and the per-execution overhead.
fn round_cost(e: &Execution, config: &SubnetConfig) -> i64 {
    as_budget(
        e.instructions
            .saturating_add(config.instruction_overhead_per_execution),
    )
}
