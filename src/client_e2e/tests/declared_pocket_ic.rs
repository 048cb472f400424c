//! `Declared<W>` through a real transport: the Rust batcher (`ic-batch-client`, transport
//! PocketIC, feature `pocket-ic`) sending the example todo store's declared writes
//! (`examples/todo_canister`, `todo_canister::TodoWrite`) to the canister's
//! `execute_writes_packed` on `offline-pocket-ic` (served in-process, the server binary's
//! code). Every op is committed once (its outcome names the row holding its own title; a reply
//! lost after the commit is retried under the same key and answered as a duplicate), and a
//! client built against another declaration is refused `DeclarationMismatch`, naming both
//! digests, with nothing applied. Build the wasm first (`scripts/build_example.sh`).

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use batch_types::declare::Writes;
use candid::{Decode, Encode, Principal};
use ic_batch_client::pocket_ic::PocketIcTransport;
use ic_batch_client::{
    BatchError, BatchRefusal, Batcher, BatcherConfig, Declared, Outcome, SendError, Transport,
    tokio_driver,
};
use pocket_ic::Time;
use pocket_ic::nonblocking::PocketIc;
use pocket_ic_server::server::serve_in_thread;
use todo_canister::TodoWrite;

/// The todo store's wasm, as `scripts/build_example.sh` builds it.
const WASM: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../target/canister/todo_canister.wasm"
);
const OPS: usize = 1_000;

/// Serves `offline-pocket-ic` on a free port in a background thread (it ends with the test
/// process) and returns its URL.
fn offline_server() -> url::Url {
    let port = serve_in_thread("client_e2e_declared_pocket_ic").expect("the server listens");
    url::Url::parse(&format!("http://127.0.0.1:{port}/")).expect("a URL")
}

/// The todo store, installed by `controller` (its time set to this machine's, which the
/// batcher's keys carry), with `writer` registered.
async fn install(pic: &PocketIc, controller: Principal, writer: Principal) -> Principal {
    let wasm = std::fs::read(WASM)
        .unwrap_or_else(|e| panic!("{WASM}: {e}; build it with scripts/build_example.sh"));
    pic.set_time(Time::from_nanos_since_unix_epoch(now_ns()))
        .await;
    let id = pic
        .create_canister_with_settings(Some(controller), None)
        .await;
    pic.add_cycles(id, 100_000_000_000_000).await;
    pic.install_canister(
        id,
        wasm,
        Encode!(&None::<batch_types::InitArgs>).unwrap(),
        Some(controller),
    )
    .await;
    let reply = pic
        .update_call(
            id,
            controller,
            "add_writers",
            Encode!(&vec![writer]).unwrap(),
        )
        .await
        .expect("add_writers");
    let added: Result<(), batch_types::WriteError> =
        Decode!(&reply, batch_types::AdminResult).unwrap().into();
    added.expect("the writer registered");
    id
}

fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("after the epoch")
        .as_nanos() as u64
}

/// Every todo as id → (title, due_ns), through the canister's `todos` query (pages of 100).
async fn todos(
    pic: &PocketIc,
    id: Principal,
    caller: Principal,
) -> HashMap<i64, (String, Option<i64>)> {
    #[derive(candid::CandidType, candid::Deserialize)]
    struct Todo {
        id: i64,
        title: String,
        due_ns: Option<i64>,
        #[allow(dead_code)]
        done: bool,
    }
    let mut all = HashMap::new();
    let mut after = 0i64;
    loop {
        let reply = pic
            .query_call(id, caller, "todos", Encode!(&after).unwrap())
            .await
            .expect("todos");
        let page = Decode!(&reply, Result<Vec<Todo>, batch_types::QueryError>)
            .unwrap()
            .expect("the todos");
        let Some(last) = page.last() else {
            return all;
        };
        after = last.id;
        for todo in page {
            let id = todo.id;
            assert!(
                all.insert(id, (todo.title, todo.due_ns)).is_none(),
                "todo {id} listed twice"
            );
        }
    }
}

/// The PocketIC transport, losing the reply of its first call after the canister ran it (as
/// an ingress call whose status could not be read).
struct LoseFirstReply {
    inner: PocketIcTransport,
    lost: AtomicBool,
}

impl Transport for LoseFirstReply {
    async fn call(&self, request: Vec<u8>) -> Result<Vec<u8>, SendError> {
        let reply = self.inner.call(request).await;
        if !self.lost.swap(true, Ordering::SeqCst) {
            reply?;
            return Err(SendError::Unknown("the reply was lost".into()));
        }
        reply
    }
}

fn config() -> BatcherConfig {
    tokio_driver::with_random_key_prefix(BatcherConfig {
        max_batch_ops: 100,
        max_in_flight: 4,
        ..BatcherConfig::default()
    })
}

fn title(i: usize) -> String {
    format!("todo {i}")
}

fn due(i: usize) -> Option<i64> {
    i.is_multiple_of(3).then_some(i as i64 * 1_000)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn declared_writes_through_pocket_ic_commit_once_and_another_declaration_is_refused() {
    let pic = Arc::new(
        pocket_ic::PocketIcBuilder::new()
            .with_server_url(offline_server())
            .with_max_request_time_ms(None)
            .with_application_subnet()
            .build_async()
            .await,
    );
    let controller = Principal::self_authenticating(b"todo store controller");
    let writer = Principal::self_authenticating(b"todo client");
    let id = install(&pic, controller, writer).await;

    // 1,000 ops in batches of 100, the first reply lost after its batch committed.
    let transport = LoseFirstReply {
        inner: PocketIcTransport::new(Arc::clone(&pic), id, writer, "execute_writes_packed"),
        lost: AtomicBool::new(false),
    };
    let batcher = Batcher::new(Declared::<TodoWrite>::new(), config()).expect("a config");
    let driver = tokio::spawn(tokio_driver::run(
        batcher.clone(),
        transport,
        tokio_driver::system_clock,
    ));
    let mut futures = Vec::new();
    for i in 0..OPS {
        let op = TodoWrite::add {
            title: title(i),
            due_ns: due(i),
        };
        futures.push(
            batcher
                .submit(op, tokio_driver::system_clock())
                .await
                .expect("queued"),
        );
    }
    let mut rowids = Vec::new();
    for (i, future) in futures.into_iter().enumerate() {
        match future.await {
            Ok(Outcome::Committed {
                rows_changed: 1,
                last_insert_rowid,
            }) => rowids.push(last_insert_rowid),
            other => panic!("op {i}: {other:?}"),
        }
    }
    batcher.close();
    driver.await.expect("the driver");
    let stats = batcher.stats();
    eprintln!("{OPS} declared ops through PocketIC: {stats:?}");
    assert!(stats.batches >= (OPS / 100) as u64, "{stats:?}");
    assert_eq!(stats.outcomes, OPS as u64, "{stats:?}");
    assert_eq!(
        (stats.retries, stats.duplicate_replies),
        (1, 1),
        "the lost reply's batch is answered from the canister's record: {stats:?}"
    );

    // Each op's outcome names the row holding its own title, and no title is stored twice.
    let stored = todos(&pic, id, controller).await;
    assert_eq!(stored.len(), OPS, "every op applied once");
    for (i, rowid) in rowids.iter().enumerate() {
        assert_eq!(
            stored.get(rowid),
            Some(&(title(i), due(i))),
            "op {i}'s outcome names row {rowid}"
        );
    }

    // A client built against another declaration (the add write without its due date): every
    // op refused with both digests, nothing applied.
    batch_types::writes! {
        /// The todo store's writes as an older client declared them.
        pub enum OldTodoWrite {
            add = "INSERT INTO todos (title) VALUES (?1)" { title: String [max 200] },
        }
    }
    let batcher = Batcher::new(Declared::<OldTodoWrite>::new(), config()).expect("a config");
    let transport = PocketIcTransport::new(Arc::clone(&pic), id, writer, "execute_writes_packed");
    let driver = tokio::spawn(tokio_driver::run(
        batcher.clone(),
        transport,
        tokio_driver::system_clock,
    ));
    let mut futures = Vec::new();
    for i in 0..3 {
        let op = OldTodoWrite::add {
            title: format!("old {i}"),
        };
        futures.push(
            batcher
                .submit(op, tokio_driver::system_clock())
                .await
                .expect("queued"),
        );
    }
    let expected = BatchRefusal::DeclarationMismatch {
        canister: TodoWrite::declaration().digest.to_vec().into(),
        request: OldTodoWrite::declaration().digest.to_vec().into(),
    };
    assert_ne!(
        TodoWrite::declaration().digest,
        OldTodoWrite::declaration().digest
    );
    for future in futures {
        assert_eq!(future.await, Err(BatchError::Refused(expected.clone())));
    }
    batcher.close();
    driver.await.expect("the driver");
    assert_eq!(batcher.stats().attempts, 1, "a refusal is final");
    assert_eq!(
        todos(&pic, id, controller).await.len(),
        OPS,
        "nothing applied"
    );
}
