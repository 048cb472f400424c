//! A client of the deployable canister on the offline engine: typed calls through the Candid
//! types of `bench_api`, time and ticks, upgrades, and a log of every execution. The canister's
//! integration tests and the reliability scenarios of the suite use it.

use std::path::{Path, PathBuf};

use bench_api::*;
use candid::utils::ArgumentEncoder;
use candid::{CandidType, Deserialize, Encode, Principal};
use offline_engine::{Canister, Engine, EngineConfig, Execution, MessageResult, Program, Settings};

/// The controller the tests install with.
pub const CONTROLLER: &[u8] = &[0xC0, 0xFF, 0xEE, 0x01];
/// A principal that is neither a controller nor a writer.
pub const STRANGER: &[u8] = &[0x5E, 0x11, 0x0A];

/// Where `scripts/build.sh` writes the deployable wasm, from the workspace root.
pub const DEPLOYABLE_WASM: &str = "target/canister/bench_canister.wasm";

/// The deployable wasm of this checkout (`<workspace>/target/canister/bench_canister.wasm`).
pub fn default_wasm_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(DEPLOYABLE_WASM)
}

/// Loads the deployable wasm at `path`. Panics with a build hint when it is missing: the
/// callers are tests and benchmark scenarios, which cannot run without it.
pub fn program_at(engine: &Engine, path: &Path) -> Program {
    let wasm = std::fs::read(path)
        .unwrap_or_else(|e| panic!("{}: {e}; run scripts/build.sh first", path.display()));
    engine.load(&wasm).expect("the canister wasm loads")
}

/// [`program_at`] the [`default_wasm_path`].
pub fn program(engine: &Engine) -> Program {
    program_at(engine, &default_wasm_path())
}

/// An installed canister, its program, and every execution it ran.
pub struct Client {
    /// The installed program (upgrades reinstall it).
    pub program: Program,
    /// The canister.
    pub canister: Canister,
    /// Every execution, in order (ticks included): the tests check that none trapped.
    pub log: Vec<Execution>,
}

impl Client {
    /// Installs with `args` on an application subnet.
    pub fn install(args: InitArgs) -> Client {
        Self::install_with(args, Settings::default())
    }

    /// Installs with `args` and engine `settings` (controllers are set to [`CONTROLLER`]).
    pub fn install_with(args: InitArgs, settings: Settings) -> Client {
        let engine = Engine::new(EngineConfig::default()).expect("engine");
        let program = program(&engine);
        Self::install_program(&engine, &program, args, settings)
    }

    /// Installs `program` (of `engine`) with `args` and engine `settings` (controllers are set
    /// to [`CONTROLLER`]).
    pub fn install_program(
        engine: &Engine,
        program: &Program,
        args: InitArgs,
        settings: Settings,
    ) -> Client {
        let settings = Settings {
            controllers: vec![CONTROLLER.to_vec()],
            ..settings
        };
        let arg = Encode!(&Some(args)).unwrap();
        let (canister, exec) = Canister::install(engine, program, &arg, settings).expect("install");
        Client {
            program: program.clone(),
            canister,
            log: vec![exec],
        }
    }

    /// An update call by `caller` as an ingress message; the raw execution.
    pub fn raw_update<A: ArgumentEncoder>(
        &mut self,
        caller: &[u8],
        method: &str,
        args: A,
    ) -> Execution {
        let arg = candid::encode_args(args).unwrap();
        let exec = self
            .canister
            .update_as(caller, method, &arg)
            .unwrap_or_else(|e| panic!("update {method}: {e}"));
        self.log.push(exec.clone());
        exec
    }

    /// An update call by `caller`, decoded as `R`; panics on anything but a reply.
    pub fn update_as<R, A>(&mut self, caller: &[u8], method: &str, args: A) -> R
    where
        R: CandidType + for<'de> Deserialize<'de>,
        A: ArgumentEncoder,
    {
        let exec = self.raw_update(caller, method, args);
        decode(method, &exec)
    }

    /// A `submit_*` call by `caller`: the ticket, or the `WriteError` its reject names.
    pub fn submit_as<A: ArgumentEncoder>(
        &mut self,
        caller: &[u8],
        method: &str,
        args: A,
    ) -> SubmitResult {
        let exec = self.raw_update(caller, method, args);
        replied_or_refused(method, &exec).into()
    }

    /// A single-op write executed now (`create_user`, ...) by `caller`: the outcome, or the
    /// `WriteError` its reject names.
    pub fn write_as<A: ArgumentEncoder>(
        &mut self,
        caller: &[u8],
        method: &str,
        args: A,
    ) -> WriteResult {
        let exec = self.raw_update(caller, method, args);
        replied_or_refused(method, &exec).into()
    }

    /// An update call by the controller.
    pub fn update<R, A>(&mut self, method: &str, args: A) -> R
    where
        R: CandidType + for<'de> Deserialize<'de>,
        A: ArgumentEncoder,
    {
        self.update_as(CONTROLLER, method, args)
    }

    /// A query (as the anonymous principal), decoded as `R`.
    pub fn query<R, A>(&mut self, method: &str, args: A) -> R
    where
        R: CandidType + for<'de> Deserialize<'de>,
        A: ArgumentEncoder,
    {
        self.query_as(offline_engine::ANONYMOUS, method, args)
    }

    /// A query by `caller`, decoded as `R`.
    pub fn query_as<R, A>(&mut self, caller: &[u8], method: &str, args: A) -> R
    where
        R: CandidType + for<'de> Deserialize<'de>,
        A: ArgumentEncoder,
    {
        let arg = candid::encode_args(args).unwrap();
        let exec = self
            .canister
            .query_as(caller, method, &arg)
            .unwrap_or_else(|e| panic!("query {method}: {e}"));
        decode(method, &exec)
    }

    /// The `stats` query.
    pub fn stats(&mut self) -> Stats {
        self.query("stats", ())
    }

    /// The `settings` query.
    pub fn settings(&mut self) -> bench_api::Settings {
        self.query("settings", ())
    }

    /// The `counts` query.
    pub fn counts(&mut self) -> Counts {
        Result::from(self.query::<CountsResult, _>("counts", ())).unwrap()
    }

    /// The `ticket_status` query by the controller (who sees every ticket).
    pub fn ticket(&mut self, ticket: Ticket) -> TicketStatus {
        self.ticket_as(CONTROLLER, ticket)
    }

    /// The `ticket_status` query by `caller` (who sees its own tickets).
    pub fn ticket_as(&mut self, caller: &[u8], ticket: Ticket) -> TicketStatus {
        self.query_as(caller, "ticket_status", (ticket,))
    }

    /// The statuses of tickets `first..first + count`, through `ticket_statuses` by the
    /// controller (1,000 per query).
    pub fn tickets(&mut self, first: Ticket, count: u64) -> Vec<TicketStatus> {
        let mut all = Vec::new();
        while (all.len() as u64) < count {
            let next = first + all.len() as u64;
            let n = (count - all.len() as u64).min(u64::from(MAX_QUERY_ROWS)) as u32;
            let page: Vec<TicketStatus> = self.query_as(CONTROLLER, "ticket_statuses", (next, n));
            assert_eq!(
                page.len(),
                n as usize,
                "ticket_statuses returns what it was asked"
            );
            all.extend(page);
        }
        all
    }

    /// Every order of `user_id`, through the paginated `orders` query.
    pub fn orders_of(&mut self, user_id: i64) -> Vec<Order> {
        let mut all = Vec::new();
        let mut after = 0i64;
        loop {
            let page: Vec<Order> =
                Result::from(self.query::<OrdersResult, _>("orders", (user_id, after, 1_000u32)))
                    .unwrap();
            let Some(last) = page.last() else { break };
            after = last.order_id;
            all.extend(page);
        }
        all
    }

    /// `submit_sql` by the controller; the ticket.
    pub fn submit_sql(&mut self, sql: &str) -> Ticket {
        let statement = SqlStatement {
            sql: sql.into(),
            params: vec![],
        };
        let r: SubmitResult = self.update("submit_sql", (vec![statement],));
        Result::from(r).expect("accepted")
    }

    /// `submit_create_order` by the controller.
    pub fn submit_order(&mut self, user_id: i64, amount: f64) -> Result<Ticket, WriteError> {
        self.submit_as(CONTROLLER, "submit_create_order", (user_id, amount))
            .into()
    }

    /// `create_user` by the controller; the new user's id.
    pub fn create_user(&mut self, name: &str) -> i64 {
        let r = self.write_as(
            CONTROLLER,
            "create_user",
            (name, format!("{name}@example.com")),
        );
        match Result::from(r) {
            Ok(Outcome::Committed {
                last_insert_rowid, ..
            }) => last_insert_rowid,
            other => panic!("create_user {name}: {other:?}"),
        }
    }

    /// Moves time by `ns` and runs what is due; returns the executions.
    pub fn tick(&mut self, ns: u64) -> Vec<Execution> {
        self.canister.advance_time(ns);
        let runs = self.canister.tick().expect("tick");
        self.log.extend(runs.iter().cloned());
        runs
    }

    /// Upgrades to the same wasm with `args`; the execution.
    pub fn upgrade(&mut self, args: Option<InitArgs>) -> Execution {
        let program = self.program.clone();
        let exec = self
            .canister
            .upgrade(&program, &Encode!(&args).unwrap())
            .expect("upgrade");
        self.log.push(exec.clone());
        exec
    }

    /// The executions that trapped so far.
    pub fn traps(&self) -> Vec<&Execution> {
        self.log.iter().filter(|e| e.result.is_trap()).collect()
    }
}

/// The typed reply of a write method (`variant { Ok : R; Err : WriteError }`) as a `Result`;
/// panics on anything else (a trap, a reject).
pub fn replied_or_refused<R: CandidType + for<'de> Deserialize<'de>>(
    method: &str,
    exec: &Execution,
) -> Result<R, WriteError> {
    decode::<Result<R, WriteError>>(method, exec)
}

/// Decodes a reply as `R`, or panics with the execution.
pub fn decode<R: CandidType + for<'de> Deserialize<'de>>(method: &str, exec: &Execution) -> R {
    match &exec.result {
        MessageResult::Reply(bytes) => candid::decode_one(bytes)
            .unwrap_or_else(|e| panic!("{method}: decoding the reply: {e}")),
        other => panic!(
            "{method}: expected a reply, got {other:?}; logs: {:?}",
            exec.logs
        ),
    }
}

/// The principal of raw bytes.
pub fn principal(bytes: &[u8]) -> Principal {
    Principal::from_slice(bytes)
}

/// SplitMix64: a small deterministic generator for test sequences (the canister's tests draw
/// their random ops and faults from it, so that a seed reproduces a run).
#[derive(Clone, Debug)]
pub struct SplitMix64(pub u64);

impl SplitMix64 {
    /// The next number of the sequence.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}
