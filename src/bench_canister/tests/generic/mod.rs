//! The promises of a canister built on `ic_rusqlite_batch`, checked the same way on any such
//! canister (the reference canister and the example): a [`Target`] says how to submit an op
//! that commits and one that fails; the checks use only the methods every batched canister
//! has (`flush`, `ticket_status`, `stats`, `add_writers`) and the hidden careful flush.
//!
//! The submit methods of the reference canister reply a bare ticket and refuse with a reject
//! naming the error; the example's reply `variant { Ok : nat64; Err : WriteError }`. Both are
//! read as [`Submitted`].

use std::path::PathBuf;

use batch_types::{FlushSummary, InitArgs, Stats, TicketStatus, WriteAccess, WriteError};
use bench_suite::client::SplitMix64 as Rng;
use candid::{Decode, Encode};
use offline_engine::{Canister, Engine, EngineConfig, Execution, MessageResult, Program, Settings};

/// The controller the checks install with.
pub const CONTROLLER: &[u8] = &[0xC0, 0xFF, 0xEE, 0x02];
/// Two writers, registered by the controller.
pub const WRITER_A: &[u8] = &[0xAA, 0x01];
/// See [`WRITER_A`].
pub const WRITER_B: &[u8] = &[0xBB, 0x02];
/// Neither a controller nor a writer.
pub const STRANGER: &[u8] = &[0x5E, 0x11, 0x0B];

/// A canister under test.
pub struct Target {
    /// Its deployable wasm, from the workspace root.
    pub wasm: &'static str,
    /// Submits an op that commits, `i`-th of its kind (distinct values): method and argument.
    pub good: fn(u64) -> (&'static str, Vec<u8>),
    /// Submits an op that fails when flushed, with this SQLite extended code.
    pub failing: fn(u64) -> (&'static str, Vec<u8>),
    /// The code of [`Self::failing`]'s failure.
    pub failing_code: i32,
    /// A submit whose argument is larger than the canister's single-op limit.
    pub oversized: fn() -> (&'static str, Vec<u8>),
}

/// What a submit answered.
#[derive(Debug, PartialEq)]
pub enum Submitted {
    /// A ticket.
    Ticket(u64),
    /// The method's own refusal, as the error's text.
    Refused(String),
    /// `canister_inspect_message` refused the ingress message: nothing ran.
    NotInspected,
}

/// An installed canister.
pub struct Installed {
    program: Program,
    /// The canister.
    pub canister: Canister,
}

/// Loads `target`'s wasm and installs it with `args`, [`CONTROLLER`] as controller.
pub fn install(target: &Target, args: InitArgs) -> Installed {
    install_wasm(target.wasm, args)
}

/// Loads the wasm at `wasm` (from the workspace root) and installs it with `args`,
/// [`CONTROLLER`] as controller.
pub fn install_wasm(wasm: &str, args: InitArgs) -> Installed {
    let engine = Engine::new(EngineConfig::default()).expect("engine");
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(wasm);
    let wasm = std::fs::read(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; run scripts/build.sh and scripts/build_example.sh first",
            path.display()
        )
    });
    let program = engine.load(&wasm).expect("the wasm loads");
    let settings = Settings {
        controllers: vec![CONTROLLER.to_vec()],
        ..Settings::default()
    };
    let (canister, exec) =
        Canister::install(&engine, &program, &Encode!(&Some(args)).unwrap(), settings)
            .expect("install");
    assert!(!exec.result.is_trap(), "install: {exec:?}");
    Installed { program, canister }
}

fn reply<T: candid::CandidType + for<'de> candid::Deserialize<'de>>(
    method: &str,
    exec: &Execution,
) -> T {
    match &exec.result {
        MessageResult::Reply(bytes) => {
            Decode!(bytes, T).unwrap_or_else(|e| panic!("{method}: decoding the reply: {e}"))
        }
        other => panic!(
            "{method}: expected a reply, got {other:?}; logs {:?}",
            exec.logs
        ),
    }
}

impl Installed {
    /// A submit as `caller`, by ingress (`from_canister`: as another canister, which skips
    /// `canister_inspect_message`).
    pub fn submit(
        &mut self,
        caller: &[u8],
        call: (&str, Vec<u8>),
        from_canister: bool,
    ) -> Submitted {
        let (method, arg) = call;
        let exec = if from_canister {
            self.canister.update_from_canister(caller, method, &arg)
        } else {
            self.canister.update_as(caller, method, &arg)
        }
        .expect("update");
        match &exec.result {
            MessageResult::Reject(_, _) if exec.entry == "canister_inspect_message" => {
                Submitted::NotInspected
            }
            // Every refusal is a typed `Err`: a write method never rejects with text.
            MessageResult::Reply(bytes) => Decode!(bytes, Result<u64, WriteError>)
                .expect("a typed submit result")
                .map_or_else(|e| Submitted::Refused(e.to_string()), Submitted::Ticket),
            other => panic!("{method}: {other:?}; logs {:?}", exec.logs),
        }
    }

    /// An update by `caller` (ingress), decoded as `T`; `None` if inspection refused it.
    pub fn update<T: candid::CandidType + for<'de> candid::Deserialize<'de>>(
        &mut self,
        caller: &[u8],
        method: &str,
        arg: Vec<u8>,
    ) -> Option<T> {
        let exec = self
            .canister
            .update_as(caller, method, &arg)
            .expect("update");
        if exec.entry == "canister_inspect_message" {
            return None;
        }
        Some(reply(method, &exec))
    }

    /// `stats`.
    pub fn stats(&mut self) -> Stats {
        let exec = self
            .canister
            .query_as(CONTROLLER, "stats", &Encode!().unwrap())
            .expect("query");
        reply("stats", &exec)
    }

    /// `ticket_status` as `caller`.
    pub fn status(&mut self, caller: &[u8], ticket: u64) -> TicketStatus {
        let exec = self
            .canister
            .query_as(caller, "ticket_status", &Encode!(&ticket).unwrap())
            .expect("query");
        reply("ticket_status", &exec)
    }

    /// `flush` by the controller.
    pub fn flush(&mut self) -> FlushSummary {
        let r: Result<FlushSummary, WriteError> = self
            .update(CONTROLLER, "flush", Encode!().unwrap())
            .expect("a controller's flush is accepted");
        r.expect("flush")
    }

    /// Registers `writers` as the controller.
    pub fn add_writers(&mut self, writers: &[&[u8]]) {
        let principals: Vec<candid::Principal> = writers
            .iter()
            .map(|w| candid::Principal::from_slice(w))
            .collect();
        let r: Result<(), WriteError> = self
            .update(CONTROLLER, "add_writers", Encode!(&principals).unwrap())
            .expect("accepted");
        r.expect("added");
    }

    /// Moves time by `ns` and runs what is due; panics if anything trapped.
    pub fn tick(&mut self, ns: u64) {
        self.canister.advance_time(ns);
        for exec in self.canister.tick().expect("tick") {
            assert!(!exec.result.is_trap(), "a timer run trapped: {exec:?}");
        }
    }

    /// Upgrades to the same wasm, keeping the settings.
    pub fn upgrade(&mut self) {
        let program = self.program.clone();
        let exec = self
            .canister
            .upgrade(&program, &Encode!(&None::<InitArgs>).unwrap())
            .expect("upgrade");
        assert!(!exec.result.is_trap(), "upgrade: {exec:?}");
    }
}

/// Strangers are kept out: by `canister_inspect_message` as ingress and by the method itself
/// as another canister; a stranger's failed attempts queue nothing, and a writer's ticket is
/// `NotYours` to the other writer and to strangers. Registered writers may write; the hidden
/// careful flush refuses everyone but the canister itself; an oversized argument is refused
/// before it is paid for.
pub fn strangers_are_kept_out(target: &Target) {
    let mut c = install(target, InitArgs::default());
    assert_eq!(
        c.submit(STRANGER, (target.good)(0), false),
        Submitted::NotInspected
    );
    assert_eq!(
        c.submit(STRANGER, (target.good)(0), true),
        Submitted::Refused(WriteError::NotAuthorized.to_string())
    );
    assert_eq!(
        c.submit(WRITER_A, (target.good)(0), false),
        Submitted::NotInspected
    );
    assert_eq!(c.stats().submitted, 0, "no refused attempt is queued");
    // A stranger may not register itself.
    let me = vec![candid::Principal::from_slice(STRANGER)];
    assert_eq!(
        c.update::<Result<(), WriteError>>(STRANGER, "add_writers", Encode!(&me).unwrap()),
        None
    );
    let exec = c
        .canister
        .update_from_canister(STRANGER, "add_writers", &Encode!(&me).unwrap())
        .unwrap();
    assert_eq!(
        reply::<Result<(), WriteError>>("add_writers", &exec),
        Err(WriteError::NotAuthorized)
    );

    c.add_writers(&[WRITER_A, WRITER_B]);
    let Submitted::Ticket(a) = c.submit(WRITER_A, (target.good)(1), false) else {
        panic!("a writer may submit")
    };
    assert_eq!(c.status(WRITER_A, a), TicketStatus::Pending);
    assert_eq!(c.status(WRITER_B, a), TicketStatus::NotYours);
    assert_eq!(c.status(STRANGER, a), TicketStatus::NotYours);
    assert_eq!(c.status(CONTROLLER, a), TicketStatus::Pending);

    // The careful flush is the canister's own: not through ingress, not from another canister,
    // not even for a controller.
    let arg = Encode!(&1u64).unwrap();
    for caller in [CONTROLLER, WRITER_A] {
        let exec = c
            .canister
            .update_as(caller, "__careful_flush", &arg)
            .unwrap();
        assert_eq!(exec.entry, "canister_inspect_message", "{exec:?}");
        let exec = c
            .canister
            .update_from_canister(caller, "__careful_flush", &arg)
            .unwrap();
        assert_eq!(
            reply::<Result<FlushSummary, WriteError>>("__careful_flush", &exec),
            Err(WriteError::NotAuthorized)
        );
    }
    assert_eq!(c.stats().pending, 1, "nothing flushed by the refused calls");
    assert_eq!(
        c.submit(WRITER_A, (target.oversized)(), false),
        Submitted::NotInspected
    );

    c.tick(1_000_000_000);
    assert!(
        matches!(
            c.status(WRITER_A, a),
            TicketStatus::Committed {
                rows_changed: 1,
                ..
            }
        ),
        "{:?}",
        c.status(WRITER_A, a)
    );
    assert_eq!(c.status(WRITER_B, a), TicketStatus::NotYours);
}

/// What the model expects of a ticket.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Expect {
    Commits,
    Fails,
}

/// The model-based run: random sequences of submits (good and failing, by two writers),
/// timer ticks, size-triggered flushes, controller flushes and upgrades, against a model that
/// knows each op's fate. At the end every ticket has exactly its expected outcome (nothing
/// lost, nothing applied twice, no false outcome), the committed inserts got increasing rowids
/// in ticket order (applied once, in order), the counters add up, and each writer sees only
/// its own tickets.
pub fn model_run(target: &Target, seed: u64, steps: usize) {
    let mut c = install(
        target,
        InitArgs {
            flush_size: Some(7),
            max_delay_ms: Some(1_000),
            write_access: Some(WriteAccess::Restricted),
            ..InitArgs::default()
        },
    );
    c.add_writers(&[WRITER_A, WRITER_B]);
    let mut rng = Rng(seed);
    let mut model: Vec<(u64, &[u8], Expect)> = Vec::new();
    let mut upgrades = 0;
    for step in 0..steps {
        let writer: &[u8] = if rng.next_u64().is_multiple_of(2) {
            WRITER_A
        } else {
            WRITER_B
        };
        match rng.next_u64() % 20 {
            0..=10 => {
                let Submitted::Ticket(t) = c.submit(writer, (target.good)(step as u64), false)
                else {
                    panic!("step {step}: a good submit was refused")
                };
                model.push((t, writer, Expect::Commits));
            }
            11..=13 => {
                let Submitted::Ticket(t) = c.submit(writer, (target.failing)(step as u64), false)
                else {
                    panic!("step {step}: a failing op is refused only when flushed")
                };
                model.push((t, writer, Expect::Fails));
            }
            14..=16 => c.tick(rng.next_u64() % 1_500_000_000),
            17 | 18 => {
                let pending_before = c.stats().pending;
                let summary = c.flush();
                assert_eq!(summary.remaining + summary.executed, pending_before);
            }
            _ => {
                c.upgrade();
                upgrades += 1;
            }
        }
        if let Some(&(t, owner, _)) = model.last() {
            let other: &[u8] = if owner == WRITER_A {
                WRITER_B
            } else {
                WRITER_A
            };
            assert_eq!(c.status(other, t), TicketStatus::NotYours);
        }
    }
    for _ in 0..10 {
        if c.stats().pending == 0 {
            break;
        }
        c.tick(1_000_000_000);
    }
    let stats = c.stats();
    assert_eq!(stats.pending, 0, "the timer drained the queue: {stats:?}");
    let commits = model.iter().filter(|m| m.2 == Expect::Commits).count() as u64;
    assert_eq!(stats.submitted, model.len() as u64);
    assert_eq!(stats.committed, commits);
    assert_eq!(stats.failed, model.len() as u64 - commits);
    assert_eq!(stats.interrupted, 0);
    assert!(stats.alarm.is_none(), "{stats:?}");
    let mut last_rowid = 0;
    for &(t, owner, expect) in &model {
        match (c.status(owner, t), expect) {
            (
                TicketStatus::Committed {
                    rows_changed: 1,
                    last_insert_rowid,
                },
                Expect::Commits,
            ) => {
                assert!(
                    last_insert_rowid > last_rowid,
                    "ticket {t}: rowid {last_insert_rowid} after {last_rowid}"
                );
                last_rowid = last_insert_rowid;
            }
            (TicketStatus::Failed(e), Expect::Fails) => assert_eq!(e.code, target.failing_code),
            (status, expect) => panic!("ticket {t}: {status:?}, expected {expect:?}"),
        }
    }
    assert!(upgrades > 0 || steps < 20, "the sequence upgraded");
}

/// Checks that the committed `.did` at `did` (from the workspace root) is the interface the
/// installed canister's code exports (both directions: `service_equal`); returns the
/// committed text.
pub fn did_matches_the_code(canister: &mut Canister, did: &str) -> String {
    let from_code = canister
        .candid_interface()
        .expect("get_candid_pointer runs")
        .expect("the wasm exports get_candid_pointer");
    let committed = std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../..")
            .join(did),
    )
    .unwrap();
    use candid_parser::utils::{CandidSource, service_equal};
    service_equal(
        CandidSource::Text(&from_code),
        CandidSource::Text(&committed),
    )
    .unwrap_or_else(|e| panic!("{did} differs from the code: {e}\n{from_code}"));
    committed
}
