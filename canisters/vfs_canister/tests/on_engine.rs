//! The peer canister's deployable wasm on the offline engine (src/offline_engine): each write
//! path leaves exactly the rows it should, failing ops change nothing, strangers cannot write,
//! the crate's recommended settings are in effect, the data survives an upgrade, and the
//! committed `.did` is the code's. Build the wasm first with scripts/build_vfs.sh
//! (scripts/test.sh does); `fixture_stable_memory` also reads the reference's deployable wasm
//! (scripts/build.sh).

use std::path::PathBuf;

use bench_api::fixture::{self, Workload};
use bench_api::{
    BatchKey, BatchResult, Counts, CountsResult, OpError, Outcome, PackedResult, SqlParam,
    SqlStatement, UserOrderOp, WriteError, WriteResult,
};
use candid::utils::ArgumentEncoder;
use candid::{CandidType, Decode, Deserialize, Encode};
use offline_engine::{Canister, Engine, EngineConfig, Execution, MessageResult, Settings};

const CONTROLLER: &[u8] = &[0xC0, 0xFF, 0xEE, 0x01];
const STRANGER: &[u8] = &[0x5E, 0x11, 0x0A];

/// From the repository root.
fn path(relative: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(relative)
}

/// `db_info`'s record (the canister's own type).
#[derive(CandidType, Deserialize, Debug)]
struct DbInfo {
    page_size: u64,
    page_count: u64,
    freelist_count: u64,
    stable_memory_bytes: u64,
}

#[derive(CandidType, Deserialize, Debug)]
enum DbInfoResult {
    Ok(DbInfo),
    Err(bench_api::QueryError),
}

struct Peer {
    canister: Canister,
    program: offline_engine::Program,
}

/// Installs `wasm` (from the repository root) with `init` (Candid bytes), controlled by
/// [`CONTROLLER`].
fn install(wasm: &str, init: &[u8]) -> Peer {
    let engine = Engine::new(EngineConfig::default()).expect("engine");
    let bytes = std::fs::read(path(wasm))
        .unwrap_or_else(|e| panic!("{wasm}: {e}; build it first (scripts/test.sh does)"));
    let program = engine.load(&bytes).expect("the wasm loads");
    let settings = Settings {
        controllers: vec![CONTROLLER.to_vec()],
        ..Settings::default()
    };
    let (canister, _) = Canister::install(&engine, &program, init, settings).expect("install");
    Peer { canister, program }
}

fn peer() -> Peer {
    install("target/canister/vfs_canister.wasm", &Encode!().unwrap())
}

fn reply<R: CandidType + for<'de> Deserialize<'de>>(method: &str, exec: &Execution) -> R {
    match &exec.result {
        MessageResult::Reply(bytes) => {
            Decode!(bytes, R).unwrap_or_else(|e| panic!("{method}: {e}"))
        }
        other => panic!("{method}: {other:?}"),
    }
}

impl Peer {
    fn update<R: CandidType + for<'de> Deserialize<'de>>(
        &mut self,
        method: &str,
        args: impl ArgumentEncoder,
    ) -> R {
        let exec = self.raw_update(CONTROLLER, method, args);
        reply(method, &exec)
    }

    fn raw_update(&mut self, caller: &[u8], method: &str, args: impl ArgumentEncoder) -> Execution {
        let arg = candid::encode_args(args).unwrap();
        self.canister
            .update_as(caller, method, &arg)
            .unwrap_or_else(|e| panic!("{method}: {e}"))
    }

    fn query<R: CandidType + for<'de> Deserialize<'de>>(&mut self, method: &str) -> R {
        let exec = self
            .canister
            .query_as(CONTROLLER, method, &Encode!().unwrap())
            .unwrap_or_else(|e| panic!("{method}: {e}"));
        reply(method, &exec)
    }

    fn counts(&mut self) -> Counts {
        match self.query::<CountsResult>("counts") {
            CountsResult::Ok(c) => c,
            CountsResult::Err(e) => panic!("counts: {e:?}"),
        }
    }

    fn db_info(&mut self) -> DbInfo {
        match self.query::<DbInfoResult>("db_info") {
            DbInfoResult::Ok(info) => info,
            DbInfoResult::Err(e) => panic!("db_info: {e:?}"),
        }
    }

    fn batch(&mut self, ops: &[UserOrderOp]) -> Vec<Outcome> {
        match self.update("execute_batch", (ops, None::<BatchKey>)) {
            BatchResult::Ok(outcomes) => outcomes,
            other => panic!("execute_batch: {other:?}"),
        }
    }
}

fn committed(rows_changed: u64, last_insert_rowid: i64) -> WriteResult {
    WriteResult::Ok(Outcome::Committed {
        rows_changed,
        last_insert_rowid,
    })
}

fn failed_code(result: &WriteResult) -> i32 {
    match result {
        WriteResult::Ok(Outcome::Failed(OpError { code, .. })) => *code,
        other => panic!("expected a failed op: {other:?}"),
    }
}

fn users(range: std::ops::RangeInclusive<usize>) -> Vec<UserOrderOp> {
    range
        .map(|id| {
            let (username, email) = fixture::user(id);
            UserOrderOp::CreateUser { username, email }
        })
        .collect()
}

fn counts(users: u64, orders: u64) -> Counts {
    Counts { users, orders }
}

#[test]
fn one_call_per_write_commits_each_op_in_its_own_call() {
    let mut c = peer();
    for id in 1..=3 {
        let (name, email) = fixture::user(id);
        let r: WriteResult = c.update("create_user", (name, email));
        assert_eq!(r, committed(1, id as i64));
    }
    for i in 1..=5 {
        let r: WriteResult = c.update("create_order", (1i64, i as f64));
        assert_eq!(r, committed(1, i));
    }
    let r: WriteResult = c.update("create_order", (2i64, 0.5f64));
    assert_eq!(r, committed(1, 6));
    assert_eq!(c.counts(), counts(3, 6));

    let r: WriteResult = c.update("update_order_amount", (2i64, 7.5f64));
    assert_eq!(r, committed(1, 0), "an update inserts no row");
    let r: WriteResult = c.update("update_order_amount", (99i64, 7.5f64));
    assert_eq!(r, committed(0, 0), "no order 99");
    let r: WriteResult = c.update("delete_user_orders", (1i64,));
    assert_eq!(r, committed(5, 0));
    assert_eq!(c.counts(), counts(3, 1));

    // NaN is bound as NULL: orders.amount is NOT NULL (SQLITE_CONSTRAINT_NOTNULL).
    let r: WriteResult = c.update("create_order", (1i64, f64::NAN));
    assert_eq!(failed_code(&r), 1299);
    // The crate's connections enforce foreign keys: user 99 does not exist.
    let r: WriteResult = c.update("create_order", (99i64, 1.0f64));
    assert_eq!(failed_code(&r), 787);
    let r: WriteResult = c.update("create_user", ("n".repeat(101), "e".to_string()));
    assert!(
        matches!(r, WriteResult::Err(WriteError::Invalid(_))),
        "{r:?}"
    );
    assert_eq!(c.counts(), counts(3, 1), "failed ops changed nothing");
    // The next order's rowid follows the last committed one (AUTOINCREMENT).
    let r: WriteResult = c.update("create_order", (3i64, 1.0f64));
    assert_eq!(r, committed(1, 7));
}

#[test]
fn client_batch_runs_in_one_transaction_and_a_failing_op_alone_fails() {
    let mut c = peer();
    let outcomes = c.batch(&users(1..=100));
    assert_eq!(outcomes.len(), 100);
    for (i, o) in outcomes.iter().enumerate() {
        assert_eq!(
            *o,
            Outcome::Committed {
                rows_changed: 1,
                last_insert_rowid: i as i64 + 1
            }
        );
    }
    let mut ops: Vec<UserOrderOp> = (0..1_000).map(|i| Workload::Insert.op(i % 100)).collect();
    ops[500] = UserOrderOp::CreateOrder {
        user_id: 1,
        amount: f64::NAN,
    };
    let outcomes = c.batch(&ops);
    assert_eq!(outcomes.len(), 1_000);
    let failed: Vec<usize> = (0..1_000)
        .filter(|i| matches!(outcomes[*i], Outcome::Failed(OpError { code: 1299, .. })))
        .collect();
    assert_eq!(failed, vec![500]);
    assert_eq!(c.counts(), counts(100, 999));

    // Updates and deletes in one batch: 10 orders of user 1 (ops 0, 100, ..., 900; op 500
    // failed), so user 1 has 9.
    let outcomes = c.batch(&[
        UserOrderOp::UpdateOrderAmount {
            order_id: 1,
            amount: 3.0,
        },
        UserOrderOp::DeleteUserOrders { user_id: 1 },
    ]);
    assert_eq!(
        outcomes,
        vec![
            Outcome::Committed {
                rows_changed: 1,
                last_insert_rowid: 0
            },
            Outcome::Committed {
                rows_changed: 9,
                last_insert_rowid: 0
            }
        ]
    );
    assert_eq!(c.counts(), counts(100, 990));

    // Refused whole, nothing applied: a keyed batch, a batch over the limit, an op over a
    // text limit.
    let key = BatchKey {
        created_at_time: 1,
        id: [7u8; 16],
    };
    let r: BatchResult = c.update("execute_batch", (users(101..=110), Some(key)));
    assert!(
        matches!(r, BatchResult::Err(WriteError::Invalid(_))),
        "{r:?}"
    );
    let too_many: Vec<UserOrderOp> = (0..=bench_api::MAX_CLIENT_BATCH)
        .map(|i| Workload::Insert.op(i % 100))
        .collect();
    let r: BatchResult = c.update("execute_batch", (too_many, None::<BatchKey>));
    assert!(
        matches!(r, BatchResult::Err(WriteError::Invalid(_))),
        "{r:?}"
    );
    let mut long = users(101..=110);
    long.push(UserOrderOp::CreateUser {
        username: "n".repeat(101),
        email: "e".into(),
    });
    let r: BatchResult = c.update("execute_batch", (long, None::<BatchKey>));
    assert!(
        matches!(r, BatchResult::Err(WriteError::Invalid(_))),
        "{r:?}"
    );
    assert_eq!(c.counts(), counts(100, 990));
}

#[test]
fn packed_batch_writes_its_rows_and_answers_packed_outcomes() {
    let mut c = peer();
    c.batch(&users(1..=10));
    let ops: Vec<UserOrderOp> = (0..250).map(|i| Workload::Insert.op(i % 10)).collect();
    let arg = serde_bytes::ByteBuf::from(bench_api::packed::encode_ops(&ops));
    let r: PackedResult = c.update("execute_batch_packed", (arg,));
    let PackedResult::Ok(bytes) = r else {
        panic!("{r:?}")
    };
    let outcomes = bench_api::packed::decode_outcomes(&bytes, 250).expect("packed outcomes");
    assert_eq!(outcomes.len(), 250);
    for (i, o) in outcomes.iter().enumerate() {
        assert_eq!(
            *o,
            Outcome::Committed {
                rows_changed: 1,
                last_insert_rowid: i as i64 + 1
            }
        );
    }
    assert_eq!(c.counts(), counts(10, 250));
    // A keyed packed request is refused whole.
    let key = BatchKey {
        created_at_time: 1,
        id: [7; 16],
    };
    let keyed = serde_bytes::ByteBuf::from(bench_api::packed::encode_keyed_ops(&key, &ops));
    let r: PackedResult = c.update("execute_batch_packed", (keyed,));
    assert!(
        matches!(r, PackedResult::Err(WriteError::Invalid(_))),
        "{r:?}"
    );
    assert_eq!(c.counts(), counts(10, 250));
}

#[test]
fn strangers_cannot_write() {
    let mut c = peer();
    c.batch(&users(1..=2));
    let (name, email) = fixture::user(3);
    for (method, exec) in [
        (
            "create_user",
            c.raw_update(STRANGER, "create_user", (name, email)),
        ),
        (
            "execute_batch",
            c.raw_update(STRANGER, "execute_batch", (users(3..=4), None::<BatchKey>)),
        ),
        (
            "execute_sql",
            c.raw_update(
                STRANGER,
                "execute_sql",
                (vec![SqlStatement {
                    sql: "DELETE FROM users".into(),
                    params: vec![],
                }],),
            ),
        ),
    ] {
        assert!(
            matches!(exec.result, MessageResult::Reject(..)),
            "{method}: {:?}",
            exec.result
        );
    }
    assert_eq!(c.counts(), counts(2, 0));
}

#[test]
fn recommended_settings_hold_and_the_data_survives_an_upgrade() {
    let mut c = peer();
    c.batch(&users(1..=50));
    let info = c.db_info();
    assert_eq!(info.page_size, 16_384, "ic-sqlite-vfs's page size");
    assert_eq!(info.freelist_count, 0);
    assert!(info.page_count >= 4, "{info:?}");
    let program = c.program.clone();
    let exec = c
        .canister
        .upgrade(&program, &Encode!().unwrap())
        .expect("upgrade");
    assert!(!exec.result.is_trap(), "{:?}", exec.result);
    assert_eq!(c.counts(), counts(50, 0));
    let r: WriteResult = c.update("create_order", (50i64, 1.0f64));
    assert_eq!(r, committed(1, 1));
    assert_eq!(c.db_info().page_size, 16_384);
}

#[test]
fn did_matches_the_code() {
    let mut c = peer();
    let from_code = c
        .canister
        .candid_interface()
        .expect("get_candid_pointer runs")
        .expect("the wasm exports get_candid_pointer");
    let committed = std::fs::read_to_string(path("canisters/vfs_canister/vfs_canister.did"))
        .expect("the committed .did");
    use candid_parser::utils::{CandidSource, service_equal};
    service_equal(
        CandidSource::Text(&from_code),
        CandidSource::Text(&committed),
    )
    .unwrap_or_else(|e| panic!("vfs_canister.did differs from the code: {e}\n{from_code}"));
}

/// Loads the batched/unbatched benches' fixture (`bench_api::fixture`: 10,000 users, 20,000
/// orders, the two indexes) into `c` through `execute_batch` and `execute_sql`, and checks the
/// counts.
fn load_fixture(c: &mut Peer) {
    let outcomes = c.batch(&users(1..=fixture::USERS));
    assert_eq!(outcomes.len(), fixture::USERS);
    for chunk in 0..fixture::ORDERS / bench_api::MAX_CLIENT_BATCH {
        let ops: Vec<UserOrderOp> = (1..=bench_api::MAX_CLIENT_BATCH)
            .map(|i| {
                let (user_id, amount) =
                    fixture::order(chunk * bench_api::MAX_CLIENT_BATCH + i, fixture::USERS);
                UserOrderOp::CreateOrder { user_id, amount }
            })
            .collect();
        let outcomes = c.batch(&ops);
        assert!(outcomes.iter().all(|o| matches!(
            o,
            Outcome::Committed {
                rows_changed: 1,
                ..
            }
        )));
    }
    let statements: Vec<SqlStatement> = fixture::INDEXES
        .iter()
        .map(|sql| SqlStatement {
            sql: sql.to_string(),
            params: Vec::<SqlParam>::new(),
        })
        .collect();
    let r: WriteResult = c.update("execute_sql", (statements,));
    assert!(
        matches!(r, WriteResult::Ok(Outcome::Committed { .. })),
        "{r:?}"
    );
    assert_eq!(
        c.counts(),
        counts(fixture::USERS as u64, fixture::ORDERS as u64)
    );
}

/// The stable memory each canister uses after the batched/unbatched fixture, loaded the same
/// way into both (engine: offline (wasmtime, IC metering)); `--nocapture` prints the figures
/// bench/peer_vfs.md quotes.
#[test]
fn fixture_stable_memory() {
    let mut peer = peer();
    load_fixture(&mut peer);
    let info = peer.db_info();
    let peer_stable = peer.canister.stable_size_bytes();
    assert_eq!(info.stable_memory_bytes, peer_stable);
    // The image (64 KiB superblock + the database's pages) fits in the MemoryManager's buckets.
    assert!(
        info.page_count * info.page_size + 65_536 <= peer_stable,
        "{info:?}"
    );

    let mut reference = install(
        "target/canister/bench_canister.wasm",
        &Encode!(&Some(bench_api::InitArgs::default())).unwrap(),
    );
    load_fixture(&mut reference);
    let reference_stable = reference.canister.stable_size_bytes();
    println!(
        "stable memory after the fixture (engine: offline (wasmtime, IC metering)): \
         ic-sqlite-vfs peer {peer_stable} bytes (SQLite image {} pages of {} bytes, {} free), \
         ic-rusqlite reference {reference_stable} bytes",
        info.page_count, info.page_size, info.freelist_count
    );
    assert!(peer_stable > 0 && reference_stable > 0);
}
