//! The IC's HTTP interface (the interface specification's "HTTPS Interface", as the replica's
//! `rs/http_endpoints/public` serves it) on every instance of this server, so that real
//! agents (ic-agent, the JS agent) and the official CLI (icp-cli) talk to the offline replica
//! as they talk to the IC:
//!
//! - per instance under `/instances/<id>/api/...` (PocketIC's paths), and
//! - at the root, `/api/...`, for the instance made the server's replica (`--replica`, or an
//!   HTTP gateway created with `POST /http_gateway`, which `pocket-ic`'s `make_live` uses).
//!
//! [`request`] parses envelopes and authenticates them as the replica's ingress validator
//! does; [`certify`] holds an instance's keys (a root key, a delegated key per subnet, an
//! Ed25519 node key per subnet) and signs; [`state_tree`] is the certified state;
//! [`handlers`] are the endpoints; [`InstanceHttp`] ties an instance to its certification and
//! runs its rounds. [`crate::faults`] holds the fault-injection test hooks, apart from the
//! protocol.
//!
//! **Rounds.** A call's message executes in a round, as on the IC: a call wakes the
//! instance's round driver, which runs a round (every message submitted so far, in order),
//! then certifies the state once (the tree is signed lazily, once per round and subnet, by
//! the first certificate that needs it). A synchronous call waits for the round that
//! completes its message and answers its certificate; after
//! [`SYNC_CALL_TIMEOUT`] it answers 202 and the agent polls `read_state`, as with the replica.
//! A *live* instance (`auto_progress`, `--replica`) also runs a round every
//! [`LIVE_ROUND_INTERVAL`] and sets its time to the wall clock at each round, so timers fire
//! and certificates stay fresh; time never goes backwards.
//!
//! **Blocks at a fixed rate.** With a block interval ([`InstanceHttp::set_block_interval`],
//! `--block-interval-ms`), the driver runs exactly one round per interval and no other: a
//! call no longer wakes it. Each round's block takes at most 1,000 ingress messages and 4 MiB
//! of them in submission order (the IC's `MAX_INGRESS_MESSAGES_PER_BLOCK` and
//! `MAX_INGRESS_BYTES_PER_BLOCK`, `rs/limits` in the replica's source; the offline engine's
//! `SubnetConfig` enforces them); what does not fit waits for the next round, so a client
//! sees the queueing a busy subnet imposes. [`InstanceHttp::round_log`] records what every
//! round's block held.

pub mod certify;
pub mod handlers;
pub mod interface_compat;
pub mod request;
pub mod state_tree;
pub mod system_canisters;

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use candid::Principal;
use ic_certification::hash_tree::Hash;
use ic_certification::{Certificate, HashTree};
use pocket_ic::common::rest::{RawCanisterResult, RawIngressStatusArgs, RawMessageId};

use crate::error::ServerError;
use crate::instance::{BlockSummary, Instance};
use certify::{Keys, cbor};
use state_tree::{CanisterFacts, RequestStatus, StateTree};

/// How long a synchronous call waits for its certificate before answering 202 (the replica's
/// `ingress_message_certificate_timeout_seconds` default).
pub const SYNC_CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// How often a live instance runs a round when nothing wakes it earlier (about the IC's
/// block rate on an application subnet).
pub const LIVE_ROUND_INTERVAL: Duration = Duration::from_millis(500);

/// How long a request's status stays in the tree after its expiry (as `done`, its reply or
/// reject dropped), so a late poll learns that it completed.
pub const DONE_RETENTION_NS: u64 = request::MAX_INGRESS_TTL_NS;

/// Delegations are re-signed when the instance's time moved this far from their time (agents
/// refuse delegations older than 30 days relative to their own clock).
pub const DELEGATION_REFRESH_NS: u64 = 24 * 3600 * 1_000_000_000;

/// A request the interface accepted.
#[derive(Debug, Clone)]
pub struct Record {
    /// The instance's id for the message.
    pub message: RawMessageId,
    /// Who sent it.
    pub sender: Principal,
    /// The canister it calls.
    pub canister: Principal,
    /// The method it calls.
    pub method: String,
    /// Its `ingress_expiry`.
    pub expiry: u64,
    /// Its outcome once executed.
    pub status: Option<RequestStatus>,
}

/// An instance's certification: keys, state tree, request records, and the signatures of the
/// current tree.
#[derive(Debug)]
pub struct Certification {
    /// The instance's keys.
    pub keys: Keys,
    tree: StateTree,
    records: HashMap<[u8; 32], Record>,
    pending: Vec<[u8; 32]>,
    expiries: BTreeSet<(u64, [u8; 32])>,
    root: Hash,
    /// Signature of the current tree per subnet, the last entry by the root key.
    signatures: Vec<Option<Vec<u8>>>,
    delegation_time: u64,
    round: u64,
}

/// Who signs a certificate: a subnet (by index), or the root key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signer {
    /// The application subnet with this index (its certificate carries the delegation).
    Subnet(usize),
    /// The root key (no delegation): for effective canister ids outside every subnet.
    Root,
}

impl Certification {
    /// The record of request `id`, if the interface accepted it.
    pub fn record(&self, id: &[u8; 32]) -> Option<&Record> {
        self.records.get(id)
    }

    /// Records an accepted request.
    pub fn accept(&mut self, id: [u8; 32], record: Record) {
        self.expiries.insert((record.expiry, id));
        self.records.insert(id, record);
        self.pending.push(id);
    }

    /// The number of the last certified round.
    pub fn round(&self) -> u64 {
        self.round
    }

    /// The certified time.
    pub fn time(&self) -> u64 {
        self.tree.time()
    }

    /// Who signs certificates for effective canister id `canister`.
    pub fn signer_for(&self, canister: &Principal) -> Signer {
        self.keys
            .subnet_of(canister)
            .map_or(Signer::Root, Signer::Subnet)
    }

    fn signature(&mut self, signer: Signer) -> Vec<u8> {
        let index = match signer {
            Signer::Subnet(i) => i,
            Signer::Root => self.keys.subnets.len(),
        };
        if let Some(Some(s)) = self.signatures.get(index) {
            return s.clone();
        }
        let sig = match signer {
            Signer::Subnet(i) => self.keys.subnets[i].key.sign_root(&self.root),
            Signer::Root => self.keys.root.sign_root(&self.root),
        };
        if let Some(slot) = self.signatures.get_mut(index) {
            *slot = Some(sig.clone());
        }
        sig
    }

    /// A certificate (CBOR) of the current tree revealing `paths` (and `/time`), signed by
    /// `signer`.
    pub fn certificate(&mut self, paths: &[Vec<Vec<u8>>], signer: Signer) -> Vec<u8> {
        let tree: HashTree = self.tree.witness(paths);
        let signature = self.signature(signer);
        let delegation = match signer {
            Signer::Subnet(i) => Some(self.keys.subnets[i].delegation.clone()),
            Signer::Root => None,
        };
        cbor(&Certificate {
            tree,
            signature,
            delegation,
        })
    }
}

/// The HTTP interface's side of an instance.
pub struct InstanceHttp {
    /// The instance.
    pub instance: Arc<Mutex<Instance>>,
    /// Its certification.
    pub cert: Mutex<Certification>,
    live: AtomicBool,
    wake: tokio::sync::Notify,
    rounds: tokio::sync::watch::Sender<u64>,
    /// The fault-injection hooks of this instance.
    pub faults: crate::faults::Faults,
    block_interval: Mutex<Option<Duration>>,
    round_log: Mutex<VecDeque<RoundRecord>>,
    started: std::time::Instant,
}

/// How many rounds [`InstanceHttp::round_log`] keeps (the oldest are dropped first).
pub const ROUND_LOG_LEN: usize = 100_000;

/// What one round of the round driver did, as [`InstanceHttp::round_log`] reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct RoundRecord {
    /// The round's number (the certified height after it).
    pub round: u64,
    /// When it started, in milliseconds since the instance's HTTP side started.
    pub started_ms: u64,
    /// Its blocks' ingress: inducted, and left waiting for a later round.
    #[serde(flatten)]
    pub block: BlockSummary,
}

impl std::fmt::Debug for InstanceHttp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InstanceHttp")
            .field("live", &self.live.load(Ordering::SeqCst))
            .finish_non_exhaustive()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Nanoseconds since the epoch by the wall clock.
pub fn wall_clock_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// The facts certification needs about every canister of `instance`.
fn canister_facts(instance: &Instance) -> Vec<CanisterFacts> {
    instance
        .canisters
        .iter()
        .map(|(id, entry)| {
            let (module_hash, metadata) = match instance.code(id) {
                Some(code) => {
                    let mut hash = [0u8; 32];
                    // The engine reports the module's SHA-256 in hex; it always decodes.
                    let _ = hex::decode_to_slice(code.program().sha256_hex(), &mut hash);
                    (Some(hash), code.program().info().metadata.clone())
                }
                None => (None, Vec::new()),
            };
            CanisterFacts {
                id: *id,
                controllers: entry.settings.controllers.clone(),
                module_hash,
                metadata,
            }
        })
        .collect()
}

impl InstanceHttp {
    /// The HTTP side of `instance`: fresh keys, the state certified once, and a round driver
    /// task on the current tokio runtime (it ends when the instance is dropped).
    pub fn start(instance: Arc<Mutex<Instance>>) -> Arc<InstanceHttp> {
        let cert = {
            let inst = lock(&instance);
            let subnets: Vec<(Principal, Vec<certify::CanisterRange>)> = inst
                .topology()
                .subnet_configs
                .iter()
                .map(|(id, config)| {
                    let ranges = config
                        .canister_ranges
                        .iter()
                        .map(|r| {
                            (
                                Principal::from(r.start.clone()),
                                Principal::from(r.end.clone()),
                            )
                        })
                        .collect();
                    (*id, ranges)
                })
                .collect();
            let time = inst.time();
            let keys = Keys::generate(&subnets, time);
            let n = keys.subnets.len();
            let mut c = Certification {
                keys,
                tree: StateTree::default(),
                records: HashMap::new(),
                pending: Vec::new(),
                expiries: BTreeSet::new(),
                root: [0; 32],
                signatures: vec![None; n + 1],
                delegation_time: time,
                round: 0,
            };
            c.tree.refresh(&c.keys, &canister_facts(&inst), time);
            c.root = c.tree.root_hash();
            c
        };
        let (rounds, _) = tokio::sync::watch::channel(0);
        let http = Arc::new(InstanceHttp {
            instance,
            cert: Mutex::new(cert),
            live: AtomicBool::new(false),
            wake: tokio::sync::Notify::new(),
            rounds,
            faults: crate::faults::Faults::default(),
            block_interval: Mutex::new(None),
            round_log: Mutex::new(VecDeque::new()),
            started: std::time::Instant::now(),
        });
        let weak = Arc::downgrade(&http);
        tokio::spawn(drive_rounds(weak));
        http
    }

    /// Locks the certification.
    pub fn cert(&self) -> MutexGuard<'_, Certification> {
        lock(&self.cert)
    }

    /// Locks the instance.
    pub fn instance(&self) -> MutexGuard<'_, Instance> {
        lock(&self.instance)
    }

    /// Whether the instance is live (time follows the wall clock, rounds run on their own).
    pub fn is_live(&self) -> bool {
        self.live.load(Ordering::SeqCst)
    }

    /// Makes the instance live or not.
    pub fn set_live(&self, live: bool) {
        self.live.store(live, Ordering::SeqCst);
        self.wake.notify_one();
    }

    /// The time requests are validated against outside a round: the wall clock in a live
    /// instance (as a replica's own clock), else the certified time.
    pub fn validation_time(&self, certified: u64) -> u64 {
        if self.is_live() {
            certified.max(wall_clock_ns())
        } else {
            certified
        }
    }

    /// Runs one round per `interval` and no other (`Some`), or a round whenever a call
    /// arrives (`None`, the default). A zero interval means `None`.
    pub fn set_block_interval(&self, interval: Option<Duration>) {
        *lock(&self.block_interval) = interval.filter(|d| !d.is_zero());
        self.wake.notify_one();
    }

    /// The block interval, if rounds run at a fixed rate.
    pub fn block_interval(&self) -> Option<Duration> {
        *lock(&self.block_interval)
    }

    /// The rounds run so far (at most the last [`ROUND_LOG_LEN`]), oldest first.
    pub fn round_log(&self) -> Vec<RoundRecord> {
        lock(&self.round_log).iter().copied().collect()
    }

    /// Asks the round driver for a round as soon as possible (ignored while rounds run at a
    /// fixed rate).
    pub fn wake(&self) {
        self.wake.notify_one();
    }

    /// Subscribes to round completions (the value is the round number).
    pub fn rounds(&self) -> tokio::sync::watch::Receiver<u64> {
        self.rounds.subscribe()
    }

    /// Runs one round on the calling (blocking) thread: in a live instance the time first
    /// moves to the wall clock; then the instance's round; then the state is certified.
    pub fn run_round(&self) -> Result<(), ServerError> {
        self.run_round_started(std::time::Instant::now())
    }

    /// [`Self::run_round`], recorded in the round log as started at `started`.
    pub fn run_round_started(&self, started: std::time::Instant) -> Result<(), ServerError> {
        let started_ms = u64::try_from(started.saturating_duration_since(self.started).as_millis())
            .unwrap_or(u64::MAX);
        let mut inst = self.instance();
        if self.is_live() {
            let now = wall_clock_ns();
            if now > inst.time() {
                inst.set_time(now)?;
            }
        }
        let block = inst.tick()?;
        self.certify(&inst)?;
        let round = self.cert().round;
        let mut log = lock(&self.round_log);
        if log.len() == ROUND_LOG_LEN {
            log.pop_front();
        }
        log.push_back(RoundRecord {
            round,
            started_ms,
            block,
        });
        Ok(())
    }

    /// Certifies the instance's current state: completed requests get their outcome, expired
    /// ones become `done` and are dropped later, the canister facts and the time are
    /// refreshed, and the round counter moves on.
    pub fn certify(&self, inst: &Instance) -> Result<(), ServerError> {
        let facts = canister_facts(inst);
        let now = inst.time();
        let round = {
            let mut guard = self.cert();
            let c = &mut *guard;
            let pending = std::mem::take(&mut c.pending);
            for id in pending {
                let Some(record) = c.records.get_mut(&id) else {
                    continue;
                };
                if let Some(status) = &record.status {
                    // Answered by the server itself (a system canister's method).
                    c.tree.set_request(id, status);
                    continue;
                }
                let outcome = inst.ingress_status(&RawIngressStatusArgs {
                    raw_message_id: record.message.clone(),
                    raw_caller: None,
                })?;
                match outcome {
                    None => c.pending.push(id),
                    Some(result) => {
                        let status = match result {
                            RawCanisterResult::Ok(reply)
                                if record.canister == Principal::management_canister()
                                    && record.method == "canister_status" =>
                            {
                                RequestStatus::Replied(interface_compat::canister_status(&reply))
                            }
                            RawCanisterResult::Ok(reply) => RequestStatus::Replied(reply),
                            RawCanisterResult::Err(r) => RequestStatus::Rejected {
                                code: r.reject_code as u64,
                                message: r.reject_message,
                                error_code: r.error_code.to_string(),
                            },
                        };
                        c.tree.set_request(id, &status);
                        record.status = Some(status);
                    }
                }
            }
            while let Some(&(expiry, id)) = c.expiries.first() {
                if expiry >= now {
                    break;
                }
                c.expiries.pop_first();
                let Some(record) = c.records.get_mut(&id) else {
                    continue;
                };
                if expiry.saturating_add(DONE_RETENTION_NS) < now {
                    c.records.remove(&id);
                    c.tree.remove_request(&id);
                } else if record.status.is_some() {
                    record.status = Some(RequestStatus::Done);
                    c.tree.set_request(id, &RequestStatus::Done);
                    c.expiries
                        .insert((expiry.saturating_add(DONE_RETENTION_NS), id));
                } else {
                    c.expiries
                        .insert((expiry.saturating_add(DONE_RETENTION_NS), id));
                }
            }
            if now.abs_diff(c.delegation_time) > DELEGATION_REFRESH_NS {
                c.keys.refresh_delegations(now);
                c.delegation_time = now;
            }
            c.tree.refresh(&c.keys, &facts, now);
            c.root = c.tree.root_hash();
            for s in &mut c.signatures {
                *s = None;
            }
            c.round += 1;
            c.round
        };
        self.rounds.send_replace(round);
        Ok(())
    }
}

/// Rounds the driver runs back to back while accepted messages are still executing (a
/// message that awaits calls may need several), before it waits to be woken again.
pub const MAX_BACK_TO_BACK_ROUNDS: u32 = 100;

/// The round driver of an instance: runs a round whenever woken, and in a live instance also
/// every [`LIVE_ROUND_INTERVAL`]; while accepted messages are still executing it runs up to
/// [`MAX_BACK_TO_BACK_ROUNDS`] more at once. With a block interval it runs one round per
/// interval instead, whatever wakes it. Ends when the instance is gone.
async fn drive_rounds(http: Weak<InstanceHttp>) {
    let mut back_to_back = 0u32;
    // When the last block started: the next one is due one interval later (the interval in
    // force then), so at most one block per interval, never a burst to catch up.
    // (The first block runs at once: a live instance's time reaches the wall clock with it.)
    let mut last_block: Option<tokio::time::Instant> = None;
    loop {
        let Some(h) = http.upgrade() else { return };
        if let Some(interval) = h.block_interval() {
            let now = tokio::time::Instant::now();
            let due = last_block.map_or(now, |last| last + interval);
            if due > now {
                // A change of the interval wakes the driver; so does a call, which waits. At
                // most 5 s at a time, so a dropped instance ends its driver.
                let wait = due.min(now + Duration::from_secs(5));
                tokio::select! {
                    () = h.wake.notified() => {}
                    () = tokio::time::sleep_until(wait) => {}
                }
                continue;
            }
            last_block = Some(now);
            let h2 = h.clone();
            drop(h);
            let started = now.into_std();
            let round = tokio::task::spawn_blocking(move || h2.run_round_started(started)).await;
            if let Ok(Err(e)) = round {
                eprintln!("{}: a round failed: {e}", crate::SERVER_NAME);
            }
            continue;
        }
        let live = h.is_live();
        let woken = {
            let notified = h.wake.notified();
            if live {
                tokio::select! {
                    () = notified => true,
                    () = tokio::time::sleep(LIVE_ROUND_INTERVAL) => false,
                }
            } else {
                tokio::select! {
                    () = notified => true,
                    // Re-check periodically so a dropped instance ends its driver.
                    () = tokio::time::sleep(Duration::from_secs(5)) => false,
                }
            }
        };
        if !woken && !live {
            drop(h);
            continue;
        }
        // A block interval set while the driver waited (the wake was its change) rules at
        // once: no round outside it.
        if h.block_interval().is_some() {
            continue;
        }
        let h2 = h.clone();
        let round = tokio::task::spawn_blocking(move || h2.run_round()).await;
        if let Ok(Err(e)) = round {
            eprintln!("{}: a round failed: {e}", crate::SERVER_NAME);
        }
        // A block interval set from now on counts from the end of this round.
        last_block = Some(tokio::time::Instant::now());
        let pending = !h.cert().pending.is_empty();
        if pending && back_to_back < MAX_BACK_TO_BACK_ROUNDS {
            back_to_back += 1;
            h.wake();
        } else {
            back_to_back = 0;
        }
    }
}
