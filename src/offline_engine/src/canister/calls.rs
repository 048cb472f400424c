//! Call contexts, callbacks and the canister's input and output queues: how a canister receives
//! ingress messages, requests and responses, answers the calls made to it, and makes calls of its
//! own (the replica's `CallContextManager` and canister queues).
//!
//! Every call a canister makes, to itself or to another canister, leaves as a [`Request`] in its
//! output queue; every answer to a call made to it leaves as a [`Response`]. Whoever hosts the
//! canister routes them: a [`crate::Subnet`] between its canisters once per inner iteration of a
//! round, or, for a canister alone ([`Canister::tick`], [`Canister::update_and_wait`]), the
//! canister itself, which takes its own requests and answers calls to any other canister with
//! `Canister <id> not found` (reject code 3).

use std::time::Duration;

use wasmtime::{Func, Ref, Val};

use super::{Call, Canister, Method, trap_text};
use crate::error::EngineError;
use crate::fees::{IC_2025, ingress_bytes};
use crate::messages::{CanisterMessage, Ingress, Payload, Request, Response};
use crate::queues::Input;
use crate::system_api::{ApiType, OutgoingCall};
use crate::types::{Execution, MessageResult, PageUse, reject_code};
use crate::user_error::{canister_error, principal_text};

/// Upper bound on executions one [`Canister::tick`] performs.
const MAX_TICK_EXECUTIONS: usize = 1_000_000;

/// The reject a calling canister receives when the callee's call context ends without an
/// answer (`action_to_request_response` in the replica's `execution/common.rs`).
pub(crate) const NO_RESPONSE: &str = "No response";

/// The reject a call with a best-effort response receives when its deadline passes first.
pub(crate) const DEADLINE_EXPIRED: &str = "Call deadline has expired.";

/// Where a call context's answer goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Origin {
    /// An ingress message; `id` is the message id when a subnet inducted it (the answer is
    /// reported by id), `None` for a message run directly ([`Canister::update`]).
    Ingress { id: Option<Vec<u8>> },
    /// A call from a canister (`caller` of the context), answered through its callback.
    Canister { callback: u64, deadline: u64 },
    /// A system task (heartbeat, timer); nobody waits for an answer.
    System,
}

#[derive(Debug)]
pub(super) struct CallContext {
    pub origin: Origin,
    /// Who made the call: what `ic0.msg_caller_*` answers in its callbacks and cleanup.
    pub caller: Vec<u8>,
    pub replied: bool,
    pub outstanding: u32,
    pub instructions: u64,
    /// Cycles the call brought that no execution has accepted yet: refunded with the answer.
    pub available_cycles: u128,
}

#[derive(Debug)]
pub(super) struct Callback {
    pub context: u64,
    pub call: OutgoingCall,
    /// The call's deadline (ns; 0 for a guaranteed response).
    pub deadline: u64,
    /// The deadline passed and the call was answered with a timeout: a response arriving
    /// later is dropped.
    pub expired: bool,
}

/// Deadline of a call with a best-effort response made at `now` with `timeout_seconds`: whole
/// seconds, as the replica's `CoarseTime`.
fn deadline(now: u64, timeout_seconds: u32) -> u64 {
    (now / 1_000_000_000 + timeout_seconds as u64) * 1_000_000_000
}

impl Canister {
    pub(super) fn new_id(&mut self) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        id
    }

    fn self_id(&self) -> Vec<u8> {
        self.store.data().api.sys.canister_id.clone()
    }

    /// A new call context.
    pub(super) fn open_context(&mut self, origin: Origin, caller: &[u8], cycles: u128) -> u64 {
        let context = self.new_id();
        self.contexts.insert(
            context,
            CallContext {
                origin,
                caller: caller.to_vec(),
                replied: false,
                outstanding: 0,
                instructions: 0,
                available_cycles: cycles,
            },
        );
        context
    }

    /// Registers the calls the committed execution in `context` made and queues their requests;
    /// charges their request fees.
    pub(super) fn register_calls(&mut self, context: u64, calls: Vec<OutgoingCall>) {
        if calls.is_empty() {
            return;
        }
        if let Some(charging) = self.settings.charging {
            // The request fee of every call made (method name + payload); the response's
            // transmission is charged when it arrives (`execute_response`).
            let fees: u128 = calls
                .iter()
                .map(|c| {
                    IC_2025.call_cost((c.method.len() + c.arg.len()) as u64, charging.subnet_nodes)
                })
                .sum();
            self.charge(fees);
        }
        let sender = self.self_id();
        let now = self.time();
        for call in calls {
            let callback = self.new_id();
            if let Some(ctx) = self.contexts.get_mut(&context) {
                ctx.outstanding += 1;
            }
            let deadline = call.timeout_seconds.map_or(0, |t| deadline(now, t));
            self.outputs.push_back(CanisterMessage::Request(Request {
                sender: sender.clone(),
                receiver: call.callee.clone(),
                method: call.method.clone(),
                payload: call.arg.clone(),
                cycles: call.cycles,
                callback,
                deadline,
            }));
            self.callbacks.insert(
                callback,
                Callback {
                    context,
                    call,
                    deadline,
                    expired: false,
                },
            );
        }
    }

    /// Bookkeeping after an execution in `context`: answers, and closing contexts that can no
    /// longer answer.
    pub(super) fn settle(&mut self, context: u64, exec: &mut Execution, expects_reply: bool) {
        let self_text = principal_text(&self.store.data().api.sys.canister_id);
        let Some(ctx) = self.contexts.get_mut(&context) else {
            return;
        };
        let from_canister = matches!(ctx.origin, Origin::Canister { .. });
        let mut answer = None;
        match &exec.result {
            MessageResult::Reply(_) | MessageResult::Reject(..) if !ctx.replied => {
                ctx.replied = true;
                answer = Some(exec.result.clone());
            }
            MessageResult::Trap(m) if !ctx.replied && ctx.outstanding == 0 && expects_reply => {
                ctx.replied = true;
                // A calling canister sees the replica's user error; an ingress caller the
                // engine's text, which its host words (the server's `reject` module).
                let message = if from_canister {
                    canister_error(&self_text, m).to_string()
                } else {
                    m.clone()
                };
                answer = Some(MessageResult::Reject(reject_code::CANISTER_ERROR, message));
            }
            MessageResult::NoReply if !ctx.replied && ctx.outstanding == 0 && expects_reply => {
                ctx.replied = true;
                let m = if from_canister {
                    NO_RESPONSE
                } else {
                    "Canister did not reply to the call"
                };
                answer = Some(MessageResult::Reject(
                    reject_code::CANISTER_ERROR,
                    m.to_string(),
                ));
                if matches!(ctx.origin, Origin::Ingress { .. }) {
                    exec.result = answer.clone().unwrap_or(MessageResult::NoReply);
                }
            }
            _ => {}
        }
        let origin = ctx.origin.clone();
        let caller = ctx.caller.clone();
        let refund = if answer.is_some() {
            std::mem::take(&mut ctx.available_cycles)
        } else {
            0
        };
        let done = ctx.replied && ctx.outstanding == 0;
        let system_done = origin == Origin::System && ctx.outstanding == 0;
        if let Some(result) = answer {
            match origin {
                Origin::Ingress { id: None } => {
                    self.ingress_results.insert(context, result);
                }
                Origin::Ingress { id: Some(id) } => {
                    self.completed_ingress.push((id, result));
                }
                Origin::Canister { callback, deadline } => {
                    let payload = match result {
                        MessageResult::Reply(b) => Payload::Reply(b),
                        MessageResult::Reject(code, m) => Payload::Reject(code, m),
                        MessageResult::Trap(m) => Payload::Reject(reject_code::CANISTER_ERROR, m),
                        MessageResult::NoReply => {
                            Payload::Reject(reject_code::CANISTER_ERROR, NO_RESPONSE.into())
                        }
                    };
                    self.outputs.push_back(CanisterMessage::Response(Response {
                        originator: caller,
                        respondent: self.self_id(),
                        callback,
                        payload,
                        refund,
                        deadline,
                    }));
                }
                Origin::System => {}
            }
        }
        if done || system_done {
            self.contexts.remove(&context);
        }
    }

    // ---------------------------------------------------------------- inputs

    /// Queues a message from canister `sender` (of another subnet when `remote`). A response
    /// whose callback timed out (or is unknown) is dropped and its refund credited, as the
    /// replica drops a late best-effort response.
    pub(crate) fn push_input(&mut self, message: CanisterMessage, remote: bool) {
        match message {
            CanisterMessage::Request(r) => {
                let sender = r.sender.clone();
                self.inputs.push(&sender, Input::Request(r), remote);
            }
            CanisterMessage::Response(r) => {
                if self.callbacks.get(&r.callback).is_none_or(|cb| cb.expired) {
                    self.add_cycles(r.refund);
                    return;
                }
                let sender = r.respondent.clone();
                self.inputs.push(&sender, Input::Response(r), remote);
            }
        }
    }

    /// Queues an ingress message a subnet inducted; its reception is charged now.
    pub(crate) fn push_ingress(&mut self, ingress: Ingress) {
        if let Some(charging) = self.settings.charging {
            let bytes = ingress_bytes(ingress.payload.len(), &ingress.method);
            self.charge(IC_2025.ingress_cost(bytes, charging.subnet_nodes));
        }
        self.inputs.push_ingress(ingress);
    }

    /// Whether messages wait for execution.
    pub(crate) fn has_input(&self) -> bool {
        !self.inputs.is_empty()
    }

    /// The messages this canister sent since the last call (requests and answers), in order.
    pub(crate) fn take_outputs(&mut self) -> Vec<CanisterMessage> {
        self.outputs.drain(..).collect()
    }

    /// The answers to inducted ingress messages since the last call: (message id, answer).
    pub(crate) fn take_completed_ingress(&mut self) -> Vec<(Vec<u8>, MessageResult)> {
        std::mem::take(&mut self.completed_ingress)
    }

    /// Call contexts still open (an answer or a callback outstanding): a stopping canister
    /// stops when there are none.
    pub(crate) fn open_call_contexts(&self) -> usize {
        self.contexts.len()
    }

    /// Times out the calls with a best-effort response whose deadline lies before `now`
    /// (whole seconds, as the replica's `CoarseTime`) and that have no response queued: each
    /// gets a `SYS_UNKNOWN` reject `Call deadline has expired.` without refund. Requests whose
    /// deadline passed before they ran are dropped from the input queues, as the replica sheds
    /// expired best-effort messages (their callers time out).
    pub(crate) fn time_out(&mut self, now: u64) {
        let now_s = now / 1_000_000_000;
        let expired = |deadline: u64| deadline != 0 && deadline / 1_000_000_000 < now_s;
        self.inputs
            .retain(|i| !matches!(i, Input::Request(r) if expired(r.deadline)));
        let mut timed_out: Vec<u64> = self
            .callbacks
            .iter()
            .filter(|(id, cb)| {
                !cb.expired && expired(cb.deadline) && !self.inputs.has_response_for(**id)
            })
            .map(|(id, _)| *id)
            .collect();
        timed_out.sort_unstable();
        let originator = self.self_id();
        for id in timed_out {
            let Some(cb) = self.callbacks.get_mut(&id) else {
                continue;
            };
            cb.expired = true;
            let respondent = cb.call.callee.clone();
            let response = Response {
                originator: originator.clone(),
                respondent: respondent.clone(),
                callback: id,
                payload: Payload::Reject(reject_code::SYS_UNKNOWN, DEADLINE_EXPIRED.into()),
                refund: 0,
                deadline: cb.deadline,
            };
            self.inputs
                .push(&respondent, Input::Response(response), false);
        }
    }

    /// Executes the next queued message (round-robin between sources and senders); `None`
    /// when nothing is queued. A response whose callback traps returns its cleanup too.
    pub(crate) fn execute_next_input(&mut self) -> Result<Option<Vec<Execution>>, EngineError> {
        let Some(input) = self.inputs.pop() else {
            return Ok(None);
        };
        Ok(Some(match input {
            Input::Ingress(ingress) => vec![self.execute_ingress_input(ingress)?],
            Input::Request(request) => vec![self.execute_request(request)?],
            Input::Response(response) => self.execute_response(response)?,
        }))
    }

    /// Takes the next queued message of a stopping canister: an answer to one of its calls runs;
    /// a request or an ingress message is refused with `Canister <id> is stopping`
    /// (`CANISTER_ERROR`, a request's cycles refunded), as the replica refuses the calls a
    /// stopping canister still has queued. `None` when nothing is queued.
    pub(crate) fn execute_next_input_stopping(
        &mut self,
    ) -> Result<Option<Vec<Execution>>, EngineError> {
        let Some(input) = self.inputs.pop() else {
            return Ok(None);
        };
        let refusal = format!("Canister {} is stopping", principal_text(&self.self_id()));
        Ok(Some(match input {
            Input::Response(response) => self.execute_response(response)?,
            Input::Request(request) => {
                self.outputs.push_back(CanisterMessage::Response(Response {
                    originator: request.sender,
                    respondent: request.receiver,
                    callback: request.callback,
                    payload: Payload::Reject(reject_code::CANISTER_ERROR, refusal),
                    refund: request.cycles,
                    deadline: request.deadline,
                }));
                Vec::new()
            }
            Input::Ingress(ingress) => {
                self.completed_ingress.push((
                    ingress.id,
                    MessageResult::Reject(reject_code::CANISTER_ERROR, refusal),
                ));
                Vec::new()
            }
        }))
    }

    /// Runs `canister_heartbeat` (if exported) and then the global timer (if due), as the first
    /// executions of a round.
    pub(crate) fn run_system_tasks(&mut self) -> Result<Vec<Execution>, EngineError> {
        let mut out = Vec::new();
        if self.func("canister_heartbeat").is_some() {
            out.push(self.run_system_task(ApiType::Heartbeat, "canister_heartbeat")?);
        }
        let (timer, time) = (
            self.store.data().api.sys.timer,
            self.store.data().api.sys.time,
        );
        if timer != 0 && time >= timer {
            self.store.data_mut().api.sys.timer = 0;
            if self.func("canister_global_timer").is_some() {
                out.push(self.run_system_task(ApiType::GlobalTimer, "canister_global_timer")?);
            }
        }
        Ok(out)
    }

    /// Runs the system task `entry` (`canister_heartbeat` or `canister_global_timer`, exported)
    /// in a call context of its own, whose caller is the management canister.
    fn run_system_task(&mut self, kind: ApiType, entry: &str) -> Result<Execution, EngineError> {
        let func = self
            .func(entry)
            .ok_or_else(|| EngineError::Module(format!("export `{entry}` vanished")))?;
        let method = Method {
            name: entry.into(),
            func,
            mode: kind,
        };
        let msg = self.message(kind, Vec::new());
        let (_, exec) = self.execute_in_new_context(method, msg, Origin::System, 0, false)?;
        Ok(exec)
    }

    /// Executes an inducted ingress message (its checks ran when it was submitted).
    fn execute_ingress_input(&mut self, ingress: Ingress) -> Result<Execution, EngineError> {
        let Some(found) = self.find_method(&ingress.method, Call::Update) else {
            let not_found = Self::method_not_found(&ingress.method, Call::Update);
            self.completed_ingress
                .push((ingress.id, not_found.result.clone()));
            return Ok(not_found);
        };
        let origin = Origin::Ingress {
            id: Some(ingress.id),
        };
        let msg = self.call_message(found.mode, ingress.sender, ingress.method, ingress.payload);
        let (_, exec) = self.execute_in_new_context(found, msg, origin, 0, true)?;
        Ok(exec)
    }

    /// Executes a request from a canister (possibly this one).
    fn execute_request(&mut self, request: Request) -> Result<Execution, EngineError> {
        let Some(found) = self.find_method(&request.method, Call::Update) else {
            let not_found = Self::method_not_found(&request.method, Call::Update);
            return Ok(self.answer_not_found(request, not_found));
        };
        let origin = Origin::Canister {
            callback: request.callback,
            deadline: request.deadline,
        };
        let cycles = request.cycles;
        let deadline = request.deadline;
        let mut msg =
            self.call_message(found.mode, request.sender, request.method, request.payload);
        msg.deadline = deadline;
        let (_, exec) = self.execute_in_new_context(found, msg, origin, cycles, true)?;
        Ok(exec)
    }

    /// Answers a request for a method the canister does not have with a reject; `exec` is the
    /// execution that says so.
    fn answer_not_found(&mut self, request: Request, exec: Execution) -> Execution {
        let text = match &exec.result {
            MessageResult::Reject(_, m) => m.clone(),
            other => trap_text(other),
        };
        let self_text = principal_text(&self.self_id());
        self.outputs.push_back(CanisterMessage::Response(Response {
            originator: request.sender,
            respondent: self.self_id(),
            callback: request.callback,
            payload: Payload::Reject(
                reject_code::CANISTER_ERROR,
                canister_error(&self_text, &text).to_string(),
            ),
            refund: request.cycles,
            deadline: request.deadline,
        }));
        exec
    }

    fn table_func(&mut self, index: u32) -> Option<Func> {
        let table = self.handles.table?;
        match table.get(&mut self.store, index as u64)? {
            Ref::Func(f) => f,
            _ => None,
        }
    }

    fn env_val(&self, env: u64) -> Val {
        if self.program.inner.info.memory64 {
            Val::I64(env as i64)
        } else {
            Val::I32(env as u32 as i32)
        }
    }

    /// Executes the answer to a call this canister made: its refund is credited, the reply or
    /// reject callback runs, and the cleanup callback if that traps.
    fn execute_response(&mut self, response: Response) -> Result<Vec<Execution>, EngineError> {
        let Some(cb) = self.callbacks.remove(&response.callback) else {
            // Unknown callback (a response that was not expected): dropped.
            self.add_cycles(response.refund);
            return Ok(Vec::new());
        };
        self.add_cycles(response.refund);
        if let Some(charging) = self.settings.charging {
            // Of the prepaid transmission of the largest response, the response's own bytes
            // are kept (reply data, or the reject message).
            let bytes = response.payload_bytes();
            self.charge(IC_2025.response_transmission_cost(bytes, charging.subnet_nodes));
        }
        let context = cb.context;
        if let Some(ctx) = self.contexts.get_mut(&context) {
            ctx.outstanding = ctx.outstanding.saturating_sub(1);
        }
        let origin_expects_reply = self
            .contexts
            .get(&context)
            .is_some_and(|c| c.origin != Origin::System);
        let caller = self
            .contexts
            .get(&context)
            .map(|c| c.caller.clone())
            .unwrap_or_default();
        let (mode, (fun, env), entry) = match &response.payload {
            Payload::Reply(_) => (ApiType::ReplyCallback, cb.call.on_reply, "reply_callback"),
            Payload::Reject(..) => (
                ApiType::RejectCallback,
                cb.call.on_reject,
                "reject_callback",
            ),
        };
        let mut msg = self.message(mode, caller.clone());
        msg.cycles_refunded = response.refund;
        msg.deadline = cb.deadline;
        match response.payload {
            Payload::Reply(bytes) => msg.arg = bytes,
            Payload::Reject(code, m) => msg.reject = Some((code, m)),
        }
        let mut out = Vec::new();
        let mut exec = match self.table_func(fun) {
            Some(func) => {
                let env = self.env_val(env);
                self.execute(entry.into(), func, &[env], msg, context)?
            }
            None => Execution {
                entry: entry.into(),
                result: MessageResult::Trap(format!(
                    "Canister requested to invoke a non-existent Wasm function {fun} from table 0"
                )),
                instructions: 0,
                billed_instructions: 0,
                heap_dirty_pages: 0,
                stable_dirty_pages: 0,
                pages: PageUse::default(),
                logs: Vec::new(),
                wall_time: Duration::ZERO,
            },
        };
        let trapped = exec.result.is_trap();
        if trapped
            && let Some((cfun, cenv)) = cb.call.on_cleanup
            && let Some(func) = self.table_func(cfun)
        {
            // The callback's changes are gone; the cleanup callback runs on the state before it.
            let env = self.env_val(cenv);
            let msg = self.message(ApiType::Cleanup, caller);
            let mut cleanup = self.execute("cleanup".into(), func, &[env], msg, context)?;
            if let MessageResult::Trap(cm) = &cleanup.result {
                let joined = format!(
                    "{}\n\ncall_on_cleanup also failed:\n\n{cm}",
                    trap_text(&exec.result)
                );
                exec.result = MessageResult::Trap(joined);
            }
            if !cleanup.result.is_trap() {
                cleanup.result = MessageResult::NoReply;
            }
            self.settle(context, &mut exec, origin_expects_reply);
            out.push(exec);
            out.push(cleanup);
            return Ok(out);
        }
        self.settle(context, &mut exec, origin_expects_reply);
        out.push(exec);
        Ok(out)
    }

    // ---------------------------------------------------------------- a canister alone

    /// Routes this canister's outputs as a canister alone on its subnet: its requests to itself
    /// and the answers to them go to its own input queue; a request to any other canister is
    /// answered with `Canister <id> not found` (reject code 3, its cycles refunded).
    pub(super) fn route_alone(&mut self) {
        let self_id = self.self_id();
        for message in self.take_outputs() {
            match message {
                CanisterMessage::Request(r) if r.receiver != self_id => {
                    let reject = Response {
                        originator: r.sender,
                        respondent: r.receiver.clone(),
                        callback: r.callback,
                        payload: Payload::Reject(
                            reject_code::DESTINATION_INVALID,
                            format!("Canister {} not found", principal_text(&r.receiver)),
                        ),
                        refund: r.cycles,
                        deadline: r.deadline,
                    };
                    self.push_input(CanisterMessage::Response(reject), false);
                }
                m if m.receiver() == self_id.as_slice() => self.push_input(m, false),
                // An answer to another canister's call (`update_from_canister` does not make
                // one): nobody to deliver it to.
                _ => {}
            }
        }
    }

    /// Whether the canister has anything in flight: queued or unsent messages, or calls awaiting
    /// an answer.
    pub fn has_pending_work(&self) -> bool {
        self.has_input() || !self.outputs.is_empty() || !self.callbacks.is_empty()
    }

    /// Number of queued messages (self-calls and responses) waiting for [`Self::tick`].
    pub fn queued(&self) -> usize {
        self.inputs.len()
    }

    /// Runs `canister_heartbeat` (if exported), then the global timer if its deadline has
    /// passed (engine time ≥ deadline), then delivers queued self-calls and responses (running
    /// callbacks and cleanups) until the queue is empty: a round of a canister alone on its
    /// subnet, whose self-calls and their answers all fit in the round. Returns every execution
    /// in order.
    pub fn tick(&mut self) -> Result<Vec<Execution>, EngineError> {
        let mut out = self.run_system_tasks()?;
        self.route_alone();
        out.extend(self.drain_inputs(MAX_TICK_EXECUTIONS)?);
        Ok(out)
    }

    /// Executes up to `max` queued messages, routing what they send (a canister alone).
    fn drain_inputs(&mut self, max: usize) -> Result<Vec<Execution>, EngineError> {
        let mut out = Vec::new();
        let mut n = 0;
        while self.has_input() {
            n += 1;
            if n > max {
                if max == MAX_TICK_EXECUTIONS {
                    return Err(EngineError::QueueDidNotDrain(max));
                }
                break;
            }
            if let Some(execs) = self.execute_next_input()? {
                out.extend(execs);
            }
            self.route_alone();
        }
        Ok(out)
    }

    /// Calls update method `method` and then runs [`Self::tick`] until its call context is
    /// answered (for methods that await calls). Returns the final answer and every execution
    /// (the first is the update itself). Time does not advance.
    pub fn update_and_wait(
        &mut self,
        method: &str,
        arg: &[u8],
    ) -> Result<(MessageResult, Vec<Execution>), EngineError> {
        self.update_and_wait_as(crate::types::ANONYMOUS, method, arg)
    }

    /// Like [`Self::update_and_wait`] with an explicit caller (principal bytes). The answer of a
    /// trap after the first execution (e.g. in a callback) is a `Reject` with
    /// [`reject_code::CANISTER_ERROR`] and the trap message, as the caller would receive it.
    pub fn update_and_wait_as(
        &mut self,
        caller: &[u8],
        method: &str,
        arg: &[u8],
    ) -> Result<(MessageResult, Vec<Execution>), EngineError> {
        let context = self.next_id;
        let first = self.update_as(caller, method, arg)?;
        if first.result != MessageResult::NoReply {
            return Ok((first.result.clone(), vec![first]));
        }
        let mut all = vec![first];
        loop {
            if let Some(r) = self.ingress_results.remove(&context) {
                return Ok((r, all));
            }
            if !self.has_input() {
                return Ok((MessageResult::NoReply, all));
            }
            let more = self.drain_inputs(1)?;
            all.extend(more);
        }
    }
}
