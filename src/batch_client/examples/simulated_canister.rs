//! The batcher against a simulated database canister, natively: the canister is batch_core's
//! `Deduplicator` on an in-memory SQLite database, its writes declared once (`writes!`: the
//! declaration the client shares), answering as ic-rusqlite-batch's `execute_writes_packed`
//! does (the generic packed request read by the declaration, the outcomes packed). The first reply
//! is lost after the batch committed (as a timed-out ingress call can be): the batcher sends
//! the same request again, and the canister answers it from its record instead of running it
//! twice.
//!
//! `cargo run --release -p ic-batch-client --example simulated_canister`

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use batch_core::rusqlite::Connection;
use batch_core::{
    BatchDigest, Budget, CountingMeter, DedupConfig, Deduplicator, SqlValue, WriteOp,
};
use batch_types::declare::{BatchRefusal, Blob, PackedWritesResult, Writes};
use batch_types::packed;
use batch_types::{SqlParam, WriteError};
use ic_batch_client::{
    Batcher, BatcherConfig, Declared, Outcome, SendError, Transport, tokio_driver,
};

batch_types::writes! {
    /// The shop's writes, declared once for the canister and its clients.
    pub enum ShopWrite {
        /// A user.
        create_user = "INSERT INTO users (username, email) VALUES (?1, ?2)" {
            username: String [max 64], email: String [max 254]
        },
        /// An order of `amount` for user `user_id`.
        create_order = "INSERT INTO orders (user_id, amount) VALUES (?1, ?2)" {
            user_id: i64, amount: f64
        },
    }
}

const SCHEMA: &str = "
CREATE TABLE users (user_id INTEGER PRIMARY KEY, username TEXT NOT NULL, email TEXT NOT NULL);
CREATE TABLE orders (order_id INTEGER PRIMARY KEY,
  user_id INTEGER NOT NULL REFERENCES users(user_id), amount REAL NOT NULL);
";

/// The database canister, with the number of batches it ran and the replies it lost.
struct SimulatedCanister {
    db: Mutex<(Connection, Deduplicator)>,
    executions: AtomicU64,
    replies_to_lose: AtomicU64,
}

impl SimulatedCanister {
    fn new() -> Result<Self, Box<dyn std::error::Error>> {
        let conn = Connection::open_in_memory()?;
        conn.execute_batch(SCHEMA)?;
        conn.pragma_update(None, "foreign_keys", true)?;
        conn.execute(
            "INSERT INTO users (username, email) VALUES (?1, ?2)",
            ["owner", "owner@example.org"],
        )?;
        Ok(SimulatedCanister {
            db: Mutex::new((conn, Deduplicator::new(DedupConfig::default())?)),
            executions: AtomicU64::new(0),
            replies_to_lose: AtomicU64::new(1),
        })
    }

    fn orders(&self) -> i64 {
        let db = self.db.lock().expect("the database lock");
        db.0.query_row("SELECT count(*) FROM orders", [], |row| row.get(0))
            .expect("count the orders")
    }
}

/// The canister's typed refusal of a batch (`PackedWritesResult::Err`).
fn refused(refusal: BatchRefusal) -> Result<Vec<u8>, SendError> {
    Ok(candid::encode_one(PackedWritesResult::Err(refusal)).expect("a reply"))
}

/// The request's header, the bytes of its ops and the ops as batch_core runs them (each
/// write's declared SQL with its parameters), or the canister's refusal.
fn read_request(
    request: &[u8],
) -> Result<(packed::RequestHeader, Vec<u8>, Vec<WriteOp>), BatchRefusal> {
    let blob: Blob = candid::decode_one(request).map_err(|e| BatchRefusal::Malformed {
        offset: 0,
        what: e.to_string(),
    })?;
    let declaration = ShopWrite::declaration();
    let (header, body) = packed::read_header(&blob)?;
    if header.digest != declaration.digest {
        return Err(BatchRefusal::DeclarationMismatch {
            canister: Blob::from(declaration.digest.to_vec()),
            request: Blob::from(header.digest.to_vec()),
        });
    }
    let mut ops = Vec::new();
    for (i, op) in packed::read_ops(declaration, body, 10_000)?
        .into_iter()
        .enumerate()
    {
        declaration.check(i, op.write, &op.params)?;
        let params = op.params.into_iter().map(sql_value).collect();
        ops.push(WriteOp::single(declaration.writes[op.write].sql, params));
    }
    Ok((header, body.to_vec(), ops))
}

fn sql_value(param: SqlParam) -> SqlValue {
    match param {
        SqlParam::Null => SqlValue::Null,
        SqlParam::Integer(v) => SqlValue::Integer(v),
        SqlParam::Real(v) => SqlValue::Real(v),
        SqlParam::Text(v) => SqlValue::Text(v),
        SqlParam::Blob(v) => SqlValue::Blob(v),
    }
}

impl Transport for &SimulatedCanister {
    async fn call(&self, request: Vec<u8>) -> Result<Vec<u8>, SendError> {
        let (header, body, write_ops) = match read_request(&request) {
            Ok(read) => read,
            Err(refusal) => return refused(refusal),
        };
        let key = header.key;
        let batch = {
            let mut db = self.db.lock().expect("the database lock");
            let (conn, dedup) = &mut *db;
            let executed = dedup.execute_keyed_within(
                conn,
                b"the client's principal",
                &key,
                &BatchDigest::of_bytes(&body),
                &write_ops,
                &Budget::new(CountingMeter::new(1), 1_000_000_000),
                tokio_driver::system_clock(),
            );
            match executed {
                Ok(batch) => batch,
                Err(e) => return refused(WriteError::from(e).into()),
            }
        };
        if !batch.duplicate {
            self.executions.fetch_add(1, Ordering::Relaxed);
        }
        if self
            .replies_to_lose
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
            .is_ok()
        {
            return Err(SendError::Unknown("the reply was lost".into()));
        }
        let reply = Blob::from(packed::encode_reply(batch.duplicate, &batch.outcomes));
        Ok(candid::encode_one(PackedWritesResult::Ok(reply)).expect("a reply"))
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let canister: &'static SimulatedCanister = Box::leak(Box::new(SimulatedCanister::new()?));
    let batcher = Batcher::new(
        Declared::<ShopWrite>::new(),
        tokio_driver::with_random_key_prefix(BatcherConfig::default()),
    )?;
    let driver = tokio::spawn(tokio_driver::run(
        batcher.clone(),
        canister,
        tokio_driver::system_clock,
    ));

    // Five orders, the last for a user that does not exist: it fails alone.
    let mut futures = Vec::new();
    for (user_id, amount) in [(1, 10.0), (1, 20.0), (1, 30.0), (1, 40.0), (99, 50.0)] {
        let op = ShopWrite::create_order { user_id, amount };
        futures.push(batcher.submit(op, tokio_driver::system_clock()).await?);
    }
    let mut outcomes = Vec::new();
    for future in futures {
        outcomes.push(future.await?);
    }
    batcher.close();
    driver.await?;

    for (i, outcome) in outcomes.iter().enumerate() {
        println!("op {i}: {outcome:?}");
    }
    let stats = batcher.stats();
    println!(
        "{} batch, {} attempts, {} duplicate reply; the canister ran {} batch and holds {} orders",
        stats.batches,
        stats.attempts,
        stats.duplicate_replies,
        canister.executions.load(Ordering::Relaxed),
        canister.orders()
    );
    assert_eq!(
        outcomes[3],
        Outcome::Committed {
            rows_changed: 1,
            last_insert_rowid: 4
        }
    );
    assert!(matches!(&outcomes[4], Outcome::Failed(error) if error.code == 787));
    assert_eq!(
        (stats.batches, stats.attempts, stats.duplicate_replies),
        (1, 2, 1)
    );
    assert_eq!(canister.executions.load(Ordering::Relaxed), 1);
    assert_eq!(canister.orders(), 4);
    Ok(())
}
