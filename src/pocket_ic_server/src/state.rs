//! What every handler shares: the instances, the blob store, the HTTP interface's side of each
//! instance, the server's options and its request tracking (the TTL). It holds the types of the
//! instances and their HTTP interface and imports no router: the REST routes ([`crate::routes`])
//! and the IC HTTP interface's routes ([`crate::http_gateway`]) both build on it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use axum::http::HeaderValue;
use pocket_ic::common::rest::{InstanceConfig, Topology};

use crate::blob_store::BlobStore;
use crate::error::ServerError;
use crate::http_interface::InstanceHttp;
use crate::instance::{Instance, Programs};

/// Requests in flight and the time the last one finished (the server's TTL).
#[derive(Debug)]
pub struct Activity {
    pending: AtomicU64,
    last: Mutex<Instant>,
}

impl Default for Activity {
    fn default() -> Self {
        Activity {
            pending: AtomicU64::new(0),
            last: Mutex::new(Instant::now()),
        }
    }
}

impl Activity {
    pub(crate) fn begin(&self) {
        self.pending.fetch_add(1, Ordering::SeqCst);
    }

    pub(crate) fn end(&self) {
        *self.last.lock().unwrap_or_else(|p| p.into_inner()) = Instant::now();
        self.pending.fetch_sub(1, Ordering::SeqCst);
    }

    /// How long the server has been idle: `None` while a request is in flight.
    pub fn idle_for(&self) -> Option<std::time::Duration> {
        if self.pending.load(Ordering::SeqCst) > 0 {
            return None;
        }
        Some(
            self.last
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .elapsed(),
        )
    }
}

/// What the handlers share.
#[derive(Debug)]
pub struct Shared {
    /// The engine and its loaded modules.
    pub programs: Arc<Programs>,
    /// Instances by id; `None` once deleted.
    pub instances: Mutex<Vec<Option<Arc<Mutex<Instance>>>>>,
    /// The blob store.
    pub blobs: BlobStore,
    /// Request tracking for the TTL.
    pub activity: Activity,
    /// Do not print canisters' `debug_print` output.
    pub mute_canister_output: bool,
    /// The IC HTTP interface's side of each instance that used it (created on first use).
    pub http: Mutex<HashMap<usize, Arc<InstanceHttp>>>,
    /// The instance the root `/api/...` endpoints serve (`--replica`).
    pub replica: Mutex<Option<usize>>,
    /// Serve the fault-injection hooks (`--test-hooks`).
    pub test_hooks: AtomicBool,
    /// Print every request's method, path, status and duration to stderr (`--log-requests`).
    pub log_requests: AtomicBool,
    /// The HTTP `server` header of every response (the server's identity).
    pub server_header: HeaderValue,
}

/// The router's state.
pub type AppState = Arc<Shared>;

impl Shared {
    /// State for a server running canisters on `programs`' engine.
    pub fn new(programs: Arc<Programs>, mute_canister_output: bool) -> AppState {
        let server_header = HeaderValue::from_str(&crate::identity())
            .unwrap_or_else(|_| HeaderValue::from_static(crate::SERVER_NAME));
        Arc::new(Shared {
            programs,
            instances: Mutex::new(Vec::new()),
            blobs: BlobStore::default(),
            activity: Activity::default(),
            mute_canister_output,
            http: Mutex::new(HashMap::new()),
            replica: Mutex::new(None),
            test_hooks: AtomicBool::new(false),
            log_requests: AtomicBool::new(false),
            server_header,
        })
    }

    pub(crate) fn instances(&self) -> std::sync::MutexGuard<'_, Vec<Option<Arc<Mutex<Instance>>>>> {
        self.instances.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The HTTP interface's side of instance `id`, created (keys generated, state certified,
    /// round driver started) on first use.
    pub fn http(&self, id: usize) -> Result<Arc<InstanceHttp>, ServerError> {
        let instance = self.instance(id)?;
        let mut map = self.http.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(h) = map.get(&id) {
            return Ok(h.clone());
        }
        let h = InstanceHttp::start(instance);
        map.insert(id, h.clone());
        Ok(h)
    }

    /// The HTTP interface's side of instance `id`, if it was used.
    pub(crate) fn existing_http(&self, id: usize) -> Option<Arc<InstanceHttp>> {
        self.http
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&id)
            .cloned()
    }

    /// The instance the root `/api/...` endpoints serve.
    pub fn replica_instance(&self) -> Option<usize> {
        *self.replica.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Makes instance `id` the one the root `/api/...` endpoints serve.
    pub fn set_replica_instance(&self, id: usize) {
        *self.replica.lock().unwrap_or_else(|p| p.into_inner()) = Some(id);
    }

    /// Creates an instance from `config`; returns its id and topology.
    pub fn create_instance(
        &self,
        config: &InstanceConfig,
    ) -> Result<(usize, Topology), ServerError> {
        let mut instance = Instance::new(self.programs.clone(), config)?;
        if self.mute_canister_output {
            instance.mute_canister_output();
        }
        let topology = instance.topology();
        let mut instances = self.instances();
        let instance_id = instances.len();
        instances.push(Some(Arc::new(Mutex::new(instance))));
        Ok((instance_id, topology))
    }

    /// Instance `id`, unless it is unknown or deleted.
    pub(crate) fn instance(&self, id: usize) -> Result<Arc<Mutex<Instance>>, ServerError> {
        match self.instances().get(id) {
            None => Err(ServerError::InstanceNotFound(id)),
            Some(None) => Err(ServerError::InstanceDeleted(id)),
            Some(Some(i)) => Ok(i.clone()),
        }
    }
}
