//! Calls between canisters on a subnet: replies and rejects with the replica's codes and
//! messages, the callee's trap rolled back, cycles attached, accepted and refunded, the fees,
//! other messages running between a call and its answer (a self-call too), best-effort calls
//! timing out, and the round's limits (instructions, ingress per block).

mod common;
use common::*;
use offline_engine::fees::{IC_2025, ingress_bytes};
use offline_engine::messages::Ingress;
use offline_engine::subnet::Round;
use offline_engine::user_error::principal_text;
use offline_engine::{
    ANONYMOUS, Canister, CanisterStatus, Charging, Execution, MessageResult, Settings, Subnet,
    SubnetConfig,
};

const CALLER: &str = include_str!("canisters/caller.wat");
const CALLEE: &str = include_str!("canisters/callee.wat");

/// A canister id with index `n` (the shape the IC gives canister ids).
fn canister_id(n: u64) -> Vec<u8> {
    let mut v = n.to_be_bytes().to_vec();
    v.extend_from_slice(&[1, 1]);
    v
}

const START_CYCLES: u128 = 100_000_000_000_000;
const T0: u64 = 1_700_000_000_000_000_000;

struct Net {
    subnet: Subnet,
    a: Vec<u8>,
    b: Vec<u8>,
    next_id: u64,
}

fn net_with(config: SubnetConfig, charging: Option<Charging>) -> Net {
    let engine = engine();
    let (a, b) = (canister_id(10), canister_id(11));
    let mut subnet = Subnet::new(config, T0);
    for (id, wat) in [(&a, CALLER), (&b, CALLEE)] {
        let p = program(&engine, wat);
        let settings = Settings {
            canister_id: id.clone(),
            cycles: START_CYCLES,
            time_ns: T0,
            debug_print_enabled: false,
            charging,
            ..Settings::default()
        };
        let (c, _) = Canister::install(&engine, &p, &[], settings).expect("installs");
        subnet.install(c);
    }
    Net {
        subnet,
        a,
        b,
        next_id: 0,
    }
}

fn net() -> Net {
    net_with(SubnetConfig::APPLICATION, None)
}

/// The argument of the caller's `call`.
fn call_arg(callee: &[u8], method: &str, cycles: u64, timeout: u32, payload: &[u8]) -> Vec<u8> {
    let mut v = (callee.len() as u32).to_le_bytes().to_vec();
    v.extend_from_slice(callee);
    v.extend_from_slice(&(method.len() as u32).to_le_bytes());
    v.extend_from_slice(method.as_bytes());
    v.extend_from_slice(&cycles.to_le_bytes());
    v.extend_from_slice(&timeout.to_le_bytes());
    v.extend_from_slice(payload);
    v
}

/// The caller's answer.
#[derive(Debug, PartialEq, Eq)]
struct Answer {
    /// 0 for a reply, else the reject code.
    tag: u8,
    refund: u128,
    counter_at_call: u32,
    counter_at_answer: u32,
    /// Reply data or reject message.
    data: Vec<u8>,
}

fn answer(r: &MessageResult) -> Answer {
    let bytes = r
        .reply()
        .unwrap_or_else(|| panic!("the caller replies: {r:?}"));
    assert!(bytes.len() >= 25, "{bytes:?}");
    Answer {
        tag: bytes[0],
        refund: u128::from_le_bytes(bytes[1..17].try_into().unwrap()),
        counter_at_call: u32::from_le_bytes(bytes[17..21].try_into().unwrap()),
        counter_at_answer: u32::from_le_bytes(bytes[21..25].try_into().unwrap()),
        data: bytes[25..].to_vec(),
    }
}

impl Net {
    fn ingress(&mut self, receiver: &[u8], method: &str, payload: Vec<u8>) -> Ingress {
        self.next_id += 1;
        Ingress {
            id: self.next_id.to_be_bytes().to_vec(),
            sender: ANONYMOUS.to_vec(),
            receiver: receiver.to_vec(),
            method: method.into(),
            payload,
        }
    }

    fn submit(&mut self, receiver: &[u8], method: &str, payload: Vec<u8>) -> Vec<u8> {
        let m = self.ingress(receiver, method, payload);
        let id = m.id.clone();
        self.subnet.submit(m).unwrap().expect("accepted");
        id
    }

    /// Calls `method` of B through A and returns A's answer.
    fn call_b(&mut self, method: &str, cycles: u64, payload: &[u8]) -> Answer {
        let arg = call_arg(&self.b.clone(), method, cycles, 0, payload);
        let m = self.ingress(&self.a.clone(), "call", arg);
        let (r, _) = self.subnet.execute_ingress(m, 10).unwrap();
        answer(&r)
    }

    fn cycles(&self, id: &[u8]) -> u128 {
        self.subnet.canister(id).unwrap().cycles()
    }

    fn query(&mut self, id: &[u8], method: &str) -> Vec<u8> {
        let c = self.subnet.canister_mut(id).unwrap();
        c.query(method, &[])
            .unwrap()
            .result
            .reply()
            .unwrap()
            .to_vec()
    }
}

fn entries(round: &Round) -> Vec<(String, String)> {
    round
        .executions
        .iter()
        .map(|(id, e)| (principal_text(id), e.entry.clone()))
        .collect()
}

#[test]
fn a_call_and_its_answer_run_in_the_iterations_after_it_within_the_round() {
    let mut n = net();
    let (a, b) = (principal_text(&n.a), principal_text(&n.b));
    let bid = n.b.clone();
    let id = n.submit(&n.a.clone(), "call", call_arg(&bid, "echo", 0, 0, b"hi"));
    let round = n.subnet.execute_round().unwrap();
    // Iteration 1 runs the ingress message at A, whose request is inducted after it;
    // iteration 2 runs it at B; iteration 3 runs A's reply callback.
    assert_eq!(
        entries(&round),
        [
            (a.clone(), "canister_update call".to_string()),
            (b, "canister_update echo".to_string()),
            (a, "reply_callback".to_string()),
        ]
    );
    assert_eq!(round.iterations, 3);
    assert_eq!(round.inducted_ingress, 1);
    let done = &round.completed;
    assert_eq!(done.len(), 1);
    assert_eq!(done[0].id, id);
    let got = answer(&done[0].result);
    assert_eq!(
        got,
        Answer {
            tag: 0,
            refund: 0,
            counter_at_call: 0,
            counter_at_answer: 0,
            data: b"hi".to_vec()
        }
    );
}

#[test]
fn rejects_carry_the_replica_s_codes_and_messages() {
    let mut n = net();
    let b = principal_text(&n.b);
    let explicit = n.call_b("reject", 0, b"");
    assert_eq!((explicit.tag, explicit.data), (4, b"no thanks".to_vec()));

    let missing = n.call_b("nope", 0, b"");
    assert_eq!(missing.tag, 5);
    assert_eq!(
        String::from_utf8(missing.data).unwrap(),
        format!(
            "IC0536: Error from Canister {b}: Canister has no update method 'nope'..\n\
             Check that the method being called is exported by the target canister. \
             See documentation: https://docs.internetcomputer.org/references/execution-errors#method-not-found"
        )
    );

    let silent = n.call_b("silent", 0, b"");
    assert_eq!((silent.tag, silent.data), (5, b"No response".to_vec()));

    // A canister id nobody has.
    let nobody = canister_id(99);
    let arg = call_arg(&nobody, "echo", 0, 0, b"");
    let m = n.ingress(&n.a.clone(), "call", arg);
    let (r, _) = n.subnet.execute_ingress(m, 10).unwrap();
    let got = answer(&r);
    assert_eq!(got.tag, 3);
    assert_eq!(
        String::from_utf8(got.data).unwrap(),
        format!("Canister {} not found", principal_text(&nobody))
    );

    // A stopped canister.
    assert_eq!(n.subnet.stop(&n.b.clone()), Some(CanisterStatus::Stopped));
    let stopped = n.call_b("echo", 0, b"");
    assert_eq!(stopped.tag, 5);
    assert_eq!(
        String::from_utf8(stopped.data).unwrap(),
        format!("Canister {b} is stopped")
    );
    n.subnet.start(&n.b.clone());
    assert_eq!(n.call_b("echo", 0, b"x").data, b"x");

    // A canister without code.
    let empty = canister_id(12);
    n.subnet.create(&empty);
    let arg = call_arg(&empty, "echo", 0, 0, b"");
    let m = n.ingress(&n.a.clone(), "call", arg);
    let (r, _) = n.subnet.execute_ingress(m, 10).unwrap();
    let got = answer(&r);
    assert_eq!(got.tag, 5);
    assert_eq!(
        String::from_utf8(got.data).unwrap(),
        format!(
            "IC0537: Error from Canister {}: Attempted to execute a message, but the canister contains no Wasm module..\n\
             Please install code to this canister before calling it. \
             See documentation: https://docs.internetcomputer.org/references/execution-errors#wasm-module-not-found",
            principal_text(&empty)
        )
    );
}

#[test]
fn the_callee_s_trap_rolls_back_its_changes_and_reaches_the_caller_as_the_replica_words_it() {
    let mut n = net();
    let b = principal_text(&n.b);
    let bid = n.b.clone();
    let before = n.query(&bid, "get");
    assert_eq!(before, [0u8; 16]);
    let trapped = n.call_b("write_and_trap", 0, b"");
    assert_eq!(trapped.tag, 5);
    assert_eq!(
        String::from_utf8(trapped.data).unwrap(),
        format!(
            "IC0503: Error from Canister {b}: Canister called `ic0.trap` with message: 'oops'.\n\
             Consider gracefully handling failures from this canister or altering the canister to handle exceptions. \
             See documentation: https://docs.internetcomputer.org/references/execution-errors#trapped-explicitly"
        )
    );
    // Counter (a global), heap word and stable memory size: all as before the call.
    assert_eq!(n.query(&bid, "get"), before);
    let written = n.call_b("write", 0, b"");
    assert_eq!(
        (written.tag, written.data),
        (0, 1u32.to_le_bytes().to_vec())
    );
}

#[test]
fn cycles_are_attached_accepted_and_refunded() {
    let mut n = net();
    let (a, b) = (n.a.clone(), n.b.clone());
    let half = n.call_b("accept_half", 1_000_000, b"");
    assert_eq!(half.tag, 0);
    assert_eq!(half.refund, 500_000);
    assert_eq!(half.data, 500_000u128.to_le_bytes());
    assert_eq!(n.cycles(&a), START_CYCLES - 500_000);
    assert_eq!(n.cycles(&b), START_CYCLES + 500_000);
    // A reject refunds everything attached; so does a trap, whose acceptance is rolled back.
    let rejected = n.call_b("reject", 7_000, b"");
    assert_eq!((rejected.tag, rejected.refund), (4, 7_000));
    let trapped = n.call_b("write_and_trap", 9_000, b"");
    assert_eq!((trapped.tag, trapped.refund), (5, 9_000));
    assert_eq!(n.cycles(&a), START_CYCLES - 500_000);
    assert_eq!(n.cycles(&b), START_CYCLES + 500_000);
}

fn billed(round_execs: &[(Vec<u8>, Execution)], id: &[u8]) -> Vec<u64> {
    round_execs
        .iter()
        .filter(|(c, _)| c == id)
        .map(|(_, e)| e.billed_instructions)
        .collect()
}

#[test]
fn inter_canister_fees_are_charged_as_the_fee_schedule_states() {
    let nodes = 13;
    let f = IC_2025;
    let mut n = net_with(SubnetConfig::APPLICATION, Some(Charging::APPLICATION));
    let (a, b) = (n.a.clone(), n.b.clone());
    let (a0, b0) = (n.cycles(&a), n.cycles(&b));
    let payload = b"twelve bytes";
    let arg = call_arg(&b, "echo", 0, 0, payload);
    let arg_len = arg.len();
    let m = n.ingress(&a, "call", arg);
    let (r, execs) = n.subnet.execute_ingress(m, 10).unwrap();
    assert_eq!(answer(&r).data, payload);
    let (at_a, at_b) = (billed(&execs, &a), billed(&execs, &b));
    let [call, callback] = at_a[..] else {
        panic!("{execs:?}")
    };
    let [echo] = at_b[..] else {
        panic!("{execs:?}")
    };
    // The caller: the ingress message's reception and execution, the request (method name and
    // payload), the transmission of the response's 12 bytes, the callback's execution.
    let caller_fees = f.ingress_cost(ingress_bytes(arg_len, "call"), nodes)
        + f.execution_cost(call, nodes)
        + f.call_cost(("echo".len() + payload.len()) as u64, nodes)
        + f.response_transmission_cost(payload.len() as u64, nodes)
        + f.execution_cost(callback, nodes);
    assert_eq!(n.cycles(&a), a0 - caller_fees);
    // The callee pays its execution only (a call carries no reception fee).
    assert_eq!(n.cycles(&b), b0 - f.execution_cost(echo, nodes));
}

#[test]
fn other_messages_run_between_a_call_and_its_answer() {
    let mut n = net();
    let (a, b) = (n.a.clone(), n.b.clone());
    // Both in one block: `bump` runs after `call` made its call and before the answer arrives.
    let call = n.submit(&a, "call", call_arg(&b, "echo", 0, 0, b"hi"));
    let bump = n.submit(&a, "bump", vec![]);
    let round = n.subnet.execute_round().unwrap();
    let result = |id: &[u8]| {
        round
            .completed
            .iter()
            .find(|o| o.id == id)
            .map(|o| o.result.clone())
            .unwrap()
    };
    assert_eq!(
        result(&bump),
        MessageResult::Reply(1u32.to_le_bytes().to_vec())
    );
    let got = answer(&result(&call));
    assert_eq!((got.counter_at_call, got.counter_at_answer), (0, 1));
}

#[test]
fn an_ingress_message_runs_between_a_self_call_and_its_execution() {
    let mut n = net();
    let a = n.a.clone();
    // A calls its own `bump`; the ingress `bump` queued behind `call` runs before the request,
    // which is inducted only after the iteration: the self-call sees the counter at 1.
    let call = n.submit(&a, "call", call_arg(&a, "bump", 0, 0, b""));
    let bump = n.submit(&a, "bump", vec![]);
    let round = n.subnet.execute_round().unwrap();
    let entries: Vec<String> = round
        .executions
        .iter()
        .map(|(_, e)| e.entry.clone())
        .collect();
    assert_eq!(
        entries,
        [
            "canister_update call",
            "canister_update bump",
            "canister_update bump",
            "reply_callback"
        ]
    );
    let of = |id: &[u8]| {
        round
            .completed
            .iter()
            .find(|o| o.id == id)
            .map(|o| o.result.clone())
            .unwrap()
    };
    assert_eq!(of(&bump), MessageResult::Reply(1u32.to_le_bytes().to_vec()));
    let got = answer(&of(&call));
    assert_eq!(got.data, 2u32.to_le_bytes());
    assert_eq!((got.counter_at_call, got.counter_at_answer), (0, 2));
}

#[test]
fn a_best_effort_call_times_out_with_sys_unknown_and_its_late_answer_is_dropped() {
    // A round budget of one instruction: every round runs one message, so the callee's chain
    // of self-calls spans rounds while time passes.
    let config = SubnetConfig {
        max_instructions_per_round: SubnetConfig::APPLICATION.max_instructions_per_slice,
        ..SubnetConfig::APPLICATION
    };
    assert_eq!(config.round_budget(), 1);
    let mut n = net_with(config, None);
    let (a, b) = (n.a.clone(), n.b.clone());
    let call = n.submit(
        &a,
        "call",
        call_arg(&b, "slow", 5_000, 1, &4u32.to_le_bytes()),
    );
    let mut outcome = None;
    let mut rounds = 0;
    let mut callbacks_at_a = 0;
    while rounds < 40 {
        let round = n.subnet.execute_round().unwrap();
        rounds += 1;
        callbacks_at_a += round
            .executions
            .iter()
            .filter(|(id, e)| *id == a && e.entry.ends_with("callback"))
            .count();
        if let Some(o) = round.completed.iter().find(|o| o.id == call) {
            outcome = Some((rounds, o.result.clone()));
        }
        let t = n.subnet.time();
        n.subnet.set_time(t + 1_000_000_000);
    }
    let (at_round, result) = outcome.expect("the call was answered");
    let got = answer(&result);
    assert_eq!(got.tag, 6, "{got:?}");
    assert_eq!(got.data, b"Call deadline has expired.");
    assert_eq!(got.refund, 0, "a timed-out call refunds nothing");
    // The deadline is the next whole second plus 1 s; it has passed when the time is 2 s on.
    assert_eq!(at_round, 3);
    // The callee finished its chain later; its answer was dropped: A ran one callback.
    assert_eq!(callbacks_at_a, 1);
    assert!(!n.subnet.canister(&b).unwrap().has_pending_work());
    // The attached cycles: sent with the request; the late answer's refund (the callee did not
    // accept them) is credited when it is dropped.
    assert_eq!(n.cycles(&a), START_CYCLES);
}

#[test]
fn a_best_effort_callee_sees_the_deadline() {
    let mut n = net();
    let (a, b) = (n.a.clone(), n.b.clone());
    let m = n.ingress(&a, "call", call_arg(&b, "deadline", 0, 5, b""));
    let (r, _) = n.subnet.execute_ingress(m, 10).unwrap();
    let got = answer(&r);
    assert_eq!(
        got.data,
        ((T0 / 1_000_000_000 + 5) * 1_000_000_000).to_le_bytes()
    );
    // A guaranteed-response call has no deadline.
    let m = n.ingress(&a, "call", call_arg(&b, "deadline", 0, 0, b""));
    let (r, _) = n.subnet.execute_ingress(m, 10).unwrap();
    assert_eq!(answer(&r).data, 0u64.to_le_bytes());
}

#[test]
fn the_round_budget_leaves_messages_for_the_next_round() {
    // Room for three executions: each costs its instructions plus 2 M.
    let config = SubnetConfig {
        max_instructions_per_round: SubnetConfig::APPLICATION.max_instructions_per_slice
            + 5_000_000,
        ..SubnetConfig::APPLICATION
    };
    let mut n = net_with(config, None);
    let a = n.a.clone();
    for _ in 0..5 {
        n.submit(&a, "bump", vec![]);
    }
    let first = n.subnet.execute_round().unwrap();
    assert_eq!(first.inducted_ingress, 5);
    assert_eq!(first.executions.len(), 3);
    assert_eq!(first.completed.len(), 3);
    let second = n.subnet.execute_round().unwrap();
    assert_eq!(second.inducted_ingress, 0);
    assert_eq!(second.executions.len(), 2);
    assert_eq!(n.query(&a, "counter"), 5u32.to_le_bytes());
}

#[test]
fn a_block_holds_at_most_1000_ingress_messages_and_4_mib() {
    let mut n = net();
    let (a, b) = (n.a.clone(), n.b.clone());
    for _ in 0..1001 {
        n.submit(&a, "bump", vec![]);
    }
    assert_eq!(n.subnet.pending_ingress(), 1001);
    let first = n.subnet.execute_round().unwrap();
    assert_eq!(first.inducted_ingress, 1000);
    assert_eq!(n.subnet.pending_ingress(), 1);
    let second = n.subnet.execute_round().unwrap();
    assert_eq!(second.inducted_ingress, 1);
    assert_eq!(n.query(&a, "counter"), 1001u32.to_le_bytes());

    // 1.5 MiB arguments: two fit in 4 MiB, the third waits.
    let big = vec![7u8; 3 << 19];
    for _ in 0..3 {
        n.submit(&b, "silent", big.clone());
    }
    assert_eq!(n.subnet.execute_round().unwrap().inducted_ingress, 2);
    assert_eq!(n.subnet.execute_round().unwrap().inducted_ingress, 1);
}

#[test]
fn a_stopping_canister_finishes_its_calls_and_refuses_new_ones() {
    let config = SubnetConfig {
        max_instructions_per_round: SubnetConfig::APPLICATION.max_instructions_per_slice,
        ..SubnetConfig::APPLICATION
    };
    let mut n = net_with(config, None);
    let (a, b) = (n.a.clone(), n.b.clone());
    let bt = principal_text(&b);
    // B starts a chain of calls to itself (one message per round).
    let slow = n.submit(&b, "slow", 3u32.to_le_bytes().to_vec());
    n.subnet.execute_round().unwrap();
    assert_eq!(n.subnet.stop(&b), Some(CanisterStatus::Stopping));
    // New calls are refused while it stops.
    let refused = n.submit(&a, "call", call_arg(&b, "echo", 0, 0, b""));
    let mut stopped_at = None;
    let mut answers = Vec::new();
    for r in 0..20 {
        let round = n.subnet.execute_round().unwrap();
        if round.stopped.contains(&b) {
            stopped_at = Some(r);
        }
        answers.extend(round.completed);
    }
    assert!(stopped_at.is_some(), "B stopped once its chain ended");
    assert_eq!(n.subnet.status(&b), Some(CanisterStatus::Stopped));
    let of = |id: &[u8]| answers.iter().find(|o| o.id == id).unwrap().result.clone();
    // Its own next call in the chain was refused too (`Canister .. is stopping`), and the
    // callee's reject callback rejected the chain.
    assert_eq!(of(&slow), MessageResult::Reject(4, "no thanks".into()));
    let got = answer(&of(&refused));
    assert_eq!(got.tag, 5);
    assert_eq!(got.data, format!("Canister {bt} is stopping").as_bytes());
}
