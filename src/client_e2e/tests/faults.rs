//! The Rust batcher (`ic-batch-client`, transport ic-agent with certificate verification on)
//! against the reference canister on the offline replica, with the faults a real network and
//! a careless operator cause: the reply lost after the commit, an answer later than the
//! client waits, an upgrade between send and retry, two concurrent sends of one key, a key past
//! the canister's window (or from a clock ahead of it), the canister stopped. Each asserts the
//! promise exactly: every op applied once (the `users` table counts them, each op's row id is
//! its own), its outcome delivered once to its own submitter, the attempts and duplicates the
//! batcher saw.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use bench_api::client::PackedUserOrders;
use bench_api::{Outcome, UserOrderOp};
use candid::Principal;
use client_e2e::{Replica, counts, deploy, identity, upgrade};
use ic_agent::Agent;
use ic_batch_client::agent::AgentTransport;
use ic_batch_client::{
    BatchCodec, BatchError, Batcher, BatcherConfig, OpResult, Reply, SendError, Transport,
    tokio_driver,
};

const MS: u64 = 1_000_000;
/// The canister's default deduplication window and permitted drift (ICRC-1's defaults).
const WINDOW_NS: u64 = 24 * 3_600 * 1_000 * MS;
const DRIFT_NS: u64 = 60 * 1_000 * MS;
/// The batch method the keyed packed codec speaks.
const METHOD: &str = "execute_batch_packed";

struct Setup {
    replica: Replica,
    agent: Agent,
    canister: Principal,
}

/// A replica of its own (the hooks act on the whole instance), the canister deployed by the
/// identity that then writes through the batcher (its controller).
async fn setup(seed: u8) -> Setup {
    let replica = Replica::start(None).expect("a replica");
    let agent = replica.agent(identity(seed)).await.expect("an agent");
    let canister = deploy(&agent, None).await.expect("deployed");
    Setup {
        replica,
        agent,
        canister,
    }
}

/// Batches form only when flushed (the delay is long), an attempt is abandoned after 2 s,
/// retries start after 50 ms.
fn config() -> BatcherConfig {
    tokio_driver::with_random_key_prefix(BatcherConfig {
        max_delay_ns: 60_000 * MS,
        attempt_timeout_ns: Some(2_000 * MS),
        initial_backoff_ns: 50 * MS,
        max_backoff_ns: 500 * MS,
        ..BatcherConfig::default()
    })
}

fn user(tag: &str, i: usize) -> UserOrderOp {
    UserOrderOp::CreateUser {
        username: format!("{tag}{i}"),
        email: format!("{tag}{i}@e2e.example"),
    }
}

/// Submits `n` new users as one batch through `transport`, runs the driver on `clock` until
/// every op is answered, and returns each op's result (index = submission order) and the
/// batcher's counters.
async fn one_batch<T, K>(
    transport: T,
    clock: K,
    tag: &str,
    n: usize,
) -> (
    Vec<OpResult<PackedUserOrders>>,
    ic_batch_client::BatcherStats,
)
where
    T: Transport,
    K: Fn() -> u64,
{
    let batcher = Batcher::new(PackedUserOrders, config()).expect("a valid config");
    let futures: Vec<_> = (0..n)
        .map(|i| batcher.try_submit(user(tag, i), clock()).expect("queued"))
        .collect();
    batcher.flush();
    batcher.close();
    let collect = async {
        let mut results = Vec::with_capacity(n);
        for f in futures {
            results.push(f.await);
        }
        results
    };
    // The driver ends once the (closed) batcher has answered everything.
    let ((), results) = tokio::join!(
        tokio_driver::run(batcher.clone(), transport, clock),
        collect
    );
    (results, batcher.stats())
}

/// Each op's own row: user `i` got row id `i + 1` (one batch, in order, on a fresh canister).
fn assert_applied_in_order(results: &[OpResult<PackedUserOrders>]) {
    for (i, r) in results.iter().enumerate() {
        assert_eq!(
            r,
            &Ok(Outcome::Committed {
                rows_changed: 1,
                last_insert_rowid: i as i64 + 1
            }),
            "op {i}"
        );
    }
}

#[test]
fn a_reply_lost_after_the_commit_is_answered_from_the_record_on_retry() {
    client_e2e::runtime().expect("a runtime").block_on(async {
        let s = setup(31).await;
        s.replica
            .hook("drop_replies", r#"{"count": 1}"#)
            .expect("hook");
        let transport = AgentTransport::new(s.agent.clone(), s.canister, METHOD);
        let (results, stats) = one_batch(transport, tokio_driver::system_clock, "lost", 5).await;
        assert_applied_in_order(&results);
        assert_eq!(counts(&s.agent, s.canister).await.expect("counts").users, 5);
        assert_eq!(
            (
                stats.batches,
                stats.attempts,
                stats.retries,
                stats.duplicate_replies,
                stats.outcomes
            ),
            (1, 2, 1, 1, 5)
        );
    });
}

#[test]
fn an_answer_later_than_the_client_waits_is_not_applied_again() {
    client_e2e::runtime().expect("a runtime").block_on(async {
        let s = setup(32).await;
        // The first answer comes 4 s late; the client gives up after 2 s and retries.
        s.replica
            .hook("delay_replies", r#"{"count": 1, "ms": 4000}"#)
            .expect("hook");
        let transport = AgentTransport::new(s.agent.clone(), s.canister, METHOD);
        let (results, stats) = one_batch(transport, tokio_driver::system_clock, "late", 7).await;
        assert_applied_in_order(&results);
        assert_eq!(counts(&s.agent, s.canister).await.expect("counts").users, 7);
        assert_eq!(
            (stats.attempts, stats.retries, stats.duplicate_replies),
            (2, 1, 1)
        );
    });
}

/// Upgrades the canister before the second attempt.
struct UpgradeBeforeRetry {
    inner: AgentTransport,
    agent: Agent,
    canister: Principal,
    calls: AtomicU32,
}

impl Transport for UpgradeBeforeRetry {
    async fn call(&self, request: Vec<u8>) -> Result<Vec<u8>, SendError> {
        if self.calls.fetch_add(1, Ordering::SeqCst) == 1 {
            upgrade(&self.agent, self.canister)
                .await
                .expect("upgraded between send and retry");
        }
        self.inner.call(request).await
    }
}

#[test]
fn an_upgrade_between_send_and_retry_keeps_the_record_of_the_batch() {
    client_e2e::runtime().expect("a runtime").block_on(async {
        let s = setup(33).await;
        s.replica
            .hook("drop_replies", r#"{"count": 1}"#)
            .expect("hook");
        let transport = UpgradeBeforeRetry {
            inner: AgentTransport::new(s.agent.clone(), s.canister, METHOD),
            agent: s.agent.clone(),
            canister: s.canister,
            calls: AtomicU32::new(0),
        };
        let (results, stats) = one_batch(transport, tokio_driver::system_clock, "upg", 6).await;
        assert_applied_in_order(&results);
        assert_eq!(counts(&s.agent, s.canister).await.expect("counts").users, 6);
        assert_eq!(
            (stats.attempts, stats.retries, stats.duplicate_replies),
            (2, 1, 1)
        );
    });
}

#[test]
fn two_concurrent_sends_of_one_key_run_it_once_and_answer_both_alike() {
    client_e2e::runtime().expect("a runtime").block_on(async {
        let s = setup(34).await;
        // A second agent of the same identity: two processes of one service racing.
        let other = s.replica.agent(identity(34)).await.expect("an agent");
        let batcher = Batcher::new(PackedUserOrders, config()).expect("a valid config");
        let now = tokio_driver::system_clock();
        let futures: Vec<_> = (0..4)
            .map(|i| batcher.try_submit(user("twin", i), now).expect("queued"))
            .collect();
        batcher.flush();
        let batch = batcher.take_batch(now).expect("a batch");
        let a = AgentTransport::new(s.agent.clone(), s.canister, METHOD);
        let b = AgentTransport::new(other, s.canister, METHOD);
        let (ra, rb) = tokio::join!(
            a.call(batch.request().to_vec()),
            b.call(batch.request().to_vec())
        );
        let decode = |r: &Result<Vec<u8>, SendError>| match PackedUserOrders
            .decode(r.as_ref().expect("answered"), 4)
            .expect("a reply")
        {
            Reply::Executed {
                outcomes,
                duplicate,
            } => (outcomes, duplicate),
            Reply::Refused(refusal) => panic!("refused: {refusal}"),
        };
        let ((oa, da), (ob, db)) = (decode(&ra), decode(&rb));
        assert_eq!(oa, ob, "both sends get the first run's outcomes");
        assert_eq!(
            [da, db].iter().filter(|d| **d).count(),
            1,
            "exactly one send ran the batch"
        );
        assert_eq!(counts(&s.agent, s.canister).await.expect("counts").users, 4);
        // The batcher settles the batch once, with one of the answers; each op's future
        // resolves once, with its own outcome.
        let _ = batcher.finish(batch, ra, tokio_driver::system_clock());
        let mut results = Vec::new();
        for f in futures {
            results.push(f.await);
        }
        assert_applied_in_order(&results);
        assert_eq!(batcher.stats().outcomes, 4);
    });
}

#[test]
fn a_key_past_the_window_or_ahead_of_the_canister_runs_nothing_and_says_why() {
    client_e2e::runtime().expect("a runtime").block_on(async {
        let s = setup(35).await;
        // A client clock a window and its drift behind: its keys are too old at once.
        let behind = || tokio_driver::system_clock() - WINDOW_NS - DRIFT_NS - 60_000 * MS;
        let transport = AgentTransport::new(s.agent.clone(), s.canister, METHOD);
        let (results, stats) = one_batch(transport, behind, "old", 3).await;
        for r in &results {
            assert!(
                matches!(
                    r,
                    Err(BatchError::Refused(bench_api::WriteError::TooOld { .. }))
                ),
                "{r:?}"
            );
        }
        assert_eq!((stats.attempts, stats.refused), (1, 3));
        // A client clock ahead by more than the drift: refused as created in the future.
        let ahead = || tokio_driver::system_clock() + DRIFT_NS + 60_000 * MS;
        let transport = AgentTransport::new(s.agent.clone(), s.canister, METHOD);
        let (results, _) = one_batch(transport, ahead, "new", 2).await;
        for r in &results {
            assert!(
                matches!(
                    r,
                    Err(BatchError::Refused(
                        bench_api::WriteError::CreatedInFuture { .. }
                    ))
                ),
                "{r:?}"
            );
        }
        assert_eq!(counts(&s.agent, s.canister).await.expect("counts").users, 0);
    });
}

#[test]
fn a_stopped_canister_is_retried_until_it_runs_again_and_applies_once() {
    client_e2e::runtime().expect("a runtime").block_on(async {
        let s = setup(36).await;
        s.replica.set_running(s.canister, false).expect("stopped");
        let replica = s.replica.clone();
        let canister = s.canister;
        let starter = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(1_500));
            replica.set_running(canister, true).expect("started");
        });
        let transport = AgentTransport::new(s.agent.clone(), s.canister, METHOD);
        let (results, stats) = one_batch(transport, tokio_driver::system_clock, "stop", 5).await;
        starter.join().expect("the starter");
        assert_applied_in_order(&results);
        assert_eq!(counts(&s.agent, s.canister).await.expect("counts").users, 5);
        assert!(
            stats.retries >= 1,
            "the stopped canister refused the first attempt"
        );
        assert_eq!(
            (stats.attempts, stats.duplicate_replies),
            (stats.retries + 1, 0),
            "refused attempts ran nothing: no duplicate was answered"
        );
    });
}
