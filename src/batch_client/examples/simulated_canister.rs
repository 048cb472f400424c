//! The batcher against a simulated database canister, natively: the canister is batch_core's
//! `Deduplicator` on an in-memory SQLite database with the reference schema, answering the
//! keyed packed batch as the reference canister's `execute_batch_packed` does. The first reply
//! is lost after the batch committed (as a timed-out ingress call can be): the batcher sends
//! the same request again, and the canister answers it from its record instead of running it
//! twice.
//!
//! `cargo run --release -p ic-batch-client --example simulated_canister`

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use batch_core::rusqlite::Connection;
use batch_core::{
    BatchDigest, BatchKey, Budget, CountingMeter, DedupConfig, Deduplicator, SqlValue, WriteOp,
};
use bench_api::packed::{decode_keyed_ops, encode_keyed_outcomes, keyed_ops_body};
use bench_api::schema::{INSERT_ORDER, INSERT_USER, SCHEMA};
use bench_api::{Outcome, UserOrderOp, WriteError, wire};
use ic_batch_client::{
    Batcher, BatcherConfig, PackedUserOrders, SendError, Transport, tokio_driver,
};

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
        conn.execute(INSERT_USER, ["owner", "owner@example.org"])?;
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

/// The canister's typed refusal of a batch (`PackedResult::Err`).
fn refused(error: WriteError) -> Result<Vec<u8>, SendError> {
    Ok(wire::encode_packed_result(Err(error)))
}

fn invalid(e: impl std::fmt::Display) -> WriteError {
    WriteError::Invalid(e.to_string())
}

impl Transport for &SimulatedCanister {
    async fn call(&self, request: Vec<u8>) -> Result<Vec<u8>, SendError> {
        let blob = match wire::decode_blob(&request) {
            Ok(blob) => blob,
            Err(e) => return refused(invalid(e)),
        };
        let (key, ops, body) = match decode_keyed_ops(&blob, bench_api::MAX_CLIENT_BATCH)
            .and_then(|(key, ops)| Ok((key, ops, keyed_ops_body(&blob)?.1)))
        {
            Ok(decoded) => decoded,
            Err(e) => return refused(invalid(e)),
        };
        let write_ops: Vec<WriteOp> = ops
            .iter()
            .map(|op| match op {
                UserOrderOp::CreateOrder { user_id, amount } => WriteOp::single(
                    INSERT_ORDER,
                    vec![(*user_id).into(), SqlValue::Real(*amount)],
                ),
                other => panic!("this example sends orders only, not {other:?}"),
            })
            .collect();
        let key = BatchKey {
            created_at_time_ns: key.created_at_time_ns,
            id: key.id,
        };
        let batch = {
            let mut db = self.db.lock().expect("the database lock");
            let (conn, dedup) = &mut *db;
            let executed = dedup.execute_keyed_within(
                conn,
                b"the client's principal",
                &key,
                &BatchDigest::of_bytes(body),
                &write_ops,
                &Budget::new(CountingMeter::new(1), 1_000_000_000),
                tokio_driver::system_clock(),
            );
            match executed {
                Ok(batch) => batch,
                Err(e) => return refused(ic_rusqlite_batch::types::dedup_refusal(e)),
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
        let outcomes: Vec<Outcome> = batch
            .outcomes
            .into_iter()
            .map(ic_rusqlite_batch::types::outcome)
            .collect();
        Ok(wire::encode_packed_result(Ok(encode_keyed_outcomes(
            batch.duplicate,
            &outcomes,
        ))))
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let canister: &'static SimulatedCanister = Box::leak(Box::new(SimulatedCanister::new()?));
    let batcher = Batcher::new(
        PackedUserOrders,
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
        let op = UserOrderOp::CreateOrder { user_id, amount };
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
