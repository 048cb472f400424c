//! The HTTP endpoints of PocketIC's REST protocol this server serves, and the fallback that
//! answers every other endpoint with an error naming it.
//!
//! Bodies are JSON of `pocket-ic`'s REST types; a success is HTTP 200 with the value, a failure
//! an HTTP 4xx/5xx with `{"message": ...}` (the `pocket-ic` client's `ApiResponse`). Engine work
//! runs on blocking threads, one instance at a time.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Path, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use pocket_ic::common::rest::{
    ApiResponse, AutoProgressConfig, BinaryBlob, BlobCompression, BlobId, CreateInstanceResponse,
    InstanceConfig, RawAddCycles, RawCanisterCall, RawCanisterId, RawCycles, RawIngressStatusArgs,
    RawMessageId, RawPrincipalId, RawSetStableMemory, RawStableMemory, RawSubnetId, RawTickConfigs,
    RawTime, Topology,
};
use serde::Serialize;
use serde::de::DeserializeOwned;

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
    fn begin(&self) {
        self.pending.fetch_add(1, Ordering::SeqCst);
    }

    fn end(&self) {
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
    server_header: HeaderValue,
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

    fn instances(&self) -> std::sync::MutexGuard<'_, Vec<Option<Arc<Mutex<Instance>>>>> {
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

    fn existing_http(&self, id: usize) -> Option<Arc<InstanceHttp>> {
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

    fn instance(&self, id: usize) -> Result<Arc<Mutex<Instance>>, ServerError> {
        match self.instances().get(id) {
            None => Err(ServerError::InstanceNotFound(id)),
            Some(None) => Err(ServerError::InstanceDeleted(id)),
            Some(Some(i)) => Ok(i.clone()),
        }
    }
}

/// Runs `f` on instance `id` on a blocking thread (canister code runs there).
async fn on_instance<T, F>(state: &AppState, id: usize, f: F) -> Result<T, ServerError>
where
    T: Send + 'static,
    F: FnOnce(&mut Instance) -> Result<T, ServerError> + Send + 'static,
{
    let instance = state.instance(id)?;
    let http = state.existing_http(id);
    tokio::task::spawn_blocking(move || {
        let mut guard = instance.lock().unwrap_or_else(|p| p.into_inner());
        let result = f(&mut guard);
        // What the REST protocol changed is certified at once for the HTTP interface.
        if let Some(h) = http {
            h.certify(&guard)?;
        }
        result
    })
    .await
    .map_err(|e| ServerError::Task(e.to_string()))?
}

/// Parses a JSON request body.
pub fn parse<T: DeserializeOwned>(endpoint: &'static str, body: &[u8]) -> Result<T, ServerError> {
    serde_json::from_slice(body).map_err(|e| ServerError::BadRequest {
        endpoint,
        message: e.to_string(),
    })
}

/// A JSON response with `status`.
pub fn json<T: Serialize>(status: StatusCode, value: &T) -> Response {
    match serde_json::to_vec(value) {
        Ok(bytes) => (
            status,
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            )],
            bytes,
        )
            .into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}

/// A REST error response (`{"message": ...}` with the error's HTTP status).
pub fn error(e: &ServerError) -> Response {
    let status = StatusCode::from_u16(e.status()).unwrap_or(StatusCode::BAD_REQUEST);
    json(
        status,
        &ApiResponse::<()>::Error {
            message: e.to_string(),
        },
    )
}

/// A REST response: the JSON value, or the error.
pub fn respond<T: Serialize>(r: Result<T, ServerError>) -> Response {
    match r {
        Ok(v) => json(StatusCode::OK, &v),
        Err(e) => error(&e),
    }
}

/// The router of every endpoint this server serves.
pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/status", get(status))
        .route("/blobstore", post(blob_set))
        .route("/blobstore/", post(blob_set))
        .route("/blobstore/{id}", get(blob_get))
        .route("/instances", get(list_instances).post(create_instance))
        .route("/instances/", get(list_instances).post(create_instance))
        .route("/instances/{id}", delete(delete_instance))
        .route("/instances/{id}/", delete(delete_instance))
        .route("/instances/{id}/read/topology", get(topology))
        .route("/instances/{id}/read/get_time", get(get_time))
        .route("/instances/{id}/read/query", post(query))
        .route("/instances/{id}/read/get_cycles", post(get_cycles))
        .route(
            "/instances/{id}/read/get_controllers",
            post(get_controllers),
        )
        .route(
            "/instances/{id}/read/get_stable_memory",
            post(get_stable_memory),
        )
        .route("/instances/{id}/read/get_subnet", post(get_subnet))
        .route("/instances/{id}/read/ingress_status", post(ingress_status))
        .route(
            "/instances/{id}/update/submit_ingress_message",
            post(submit_ingress_message),
        )
        .route(
            "/instances/{id}/update/await_ingress_message",
            post(await_ingress_message),
        )
        .route(
            "/instances/{id}/update/execute_ingress_message",
            post(execute_ingress_message),
        )
        .route("/instances/{id}/update/set_time", post(set_time))
        .route("/instances/{id}/update/set_certified_time", post(set_time))
        .route("/instances/{id}/update/add_cycles", post(add_cycles))
        .route(
            "/instances/{id}/update/set_stable_memory",
            post(set_stable_memory),
        )
        .route("/instances/{id}/update/tick", post(tick))
        .route(
            "/instances/{id}/auto_progress",
            get(auto_progress_enabled).post(auto_progress),
        )
        .route("/http_gateway", post(crate::http_gateway::create))
        .route("/http_gateway/{id}/stop", post(crate::http_gateway::stop))
        .merge(crate::http_gateway::api_routes())
        .route("/instances/{id}/stop_progress", post(stop_progress))
        .fallback(fallback)
        .method_not_allowed_fallback(fallback)
        .layer(DefaultBodyLimit::disable())
        .layer(middleware::from_fn_with_state(state.clone(), track))
        .with_state(state)
}

/// Counts requests for the TTL and names the server in every response.
async fn track(State(state): State<AppState>, request: Request, next: Next) -> Response {
    state.activity.begin();
    let log = state.log_requests.load(Ordering::Relaxed).then(|| {
        (
            request.method().clone(),
            request.uri().path().to_string(),
            Instant::now(),
        )
    });
    let mut response = next.run(request).await;
    state.activity.end();
    if let Some((method, path, started)) = log {
        eprintln!(
            "{}: {method} {path} -> {} ({} µs)",
            crate::SERVER_NAME,
            response.status().as_u16(),
            started.elapsed().as_micros()
        );
    }
    response
        .headers_mut()
        .insert(header::SERVER, state.server_header.clone());
    response
}

async fn fallback(method: Method, uri: Uri) -> Response {
    error(&ServerError::UnsupportedEndpoint {
        method: method.to_string(),
        path: uri.path().to_string(),
    })
}

async fn status() -> Response {
    (StatusCode::OK, crate::identity()).into_response()
}

async fn blob_set(State(state): State<AppState>, headers: HeaderMap, body: Bytes) -> Response {
    let compression = match headers.get(header::CONTENT_ENCODING).map(|v| v.to_str()) {
        None => BlobCompression::NoCompression,
        Some(Ok("gzip")) => BlobCompression::Gzip,
        Some(_) => {
            return (
                StatusCode::BAD_REQUEST,
                "Bad encoding: Only 'gzip' content encoding is supported",
            )
                .into_response();
        }
    };
    let id = state.blobs.store(BinaryBlob {
        data: body.to_vec(),
        compression,
    });
    (StatusCode::OK, hex::encode(id.0)).into_response()
}

async fn blob_get(State(state): State<AppState>, Path(id): Path<String>) -> Response {
    let Ok(hash) = hex::decode(&id) else {
        return StatusCode::BAD_REQUEST.into_response();
    };
    match state.blobs.fetch(&BlobId(hash)) {
        None => StatusCode::NOT_FOUND.into_response(),
        Some(BinaryBlob {
            data,
            compression: BlobCompression::Gzip,
        }) => (
            StatusCode::OK,
            [(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"))],
            data,
        )
            .into_response(),
        Some(BinaryBlob { data, .. }) => (StatusCode::OK, data).into_response(),
    }
}

async fn list_instances(State(state): State<AppState>) -> Response {
    let list: Vec<String> = state
        .instances()
        .iter()
        .map(|i| if i.is_some() { "Available" } else { "Deleted" }.to_string())
        .collect();
    json(StatusCode::OK, &list)
}

async fn create_instance(State(state): State<AppState>, body: Bytes) -> Response {
    let created = parse::<InstanceConfig>("instances", &body)
        .and_then(|config| state.create_instance(&config));
    match created {
        Ok((instance_id, topology)) => json(
            StatusCode::CREATED,
            &CreateInstanceResponse::Created {
                instance_id,
                topology,
                http_gateway_info: None,
            },
        ),
        Err(e) => json(
            StatusCode::BAD_REQUEST,
            &CreateInstanceResponse::Error {
                message: e.to_string(),
            },
        ),
    }
}

async fn delete_instance(State(state): State<AppState>, Path(id): Path<usize>) -> Response {
    let removed = {
        let mut instances = state.instances();
        match instances.get_mut(id) {
            None => Err(ServerError::InstanceNotFound(id)),
            Some(slot) => Ok(slot.take()),
        }
    };
    state
        .http
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .remove(&id);
    // Drop the instance (its canisters and their memories) off the async workers.
    respond(removed.map(|instance| {
        if let Some(instance) = instance {
            tokio::task::spawn_blocking(move || drop(instance));
        }
    }))
}

async fn topology(State(state): State<AppState>, Path(id): Path<usize>) -> Response {
    respond(on_instance(&state, id, |i| Ok(i.topology())).await)
}

async fn get_time(State(state): State<AppState>, Path(id): Path<usize>) -> Response {
    respond(
        on_instance(&state, id, |i| {
            Ok(RawTime {
                nanos_since_epoch: i.time(),
            })
        })
        .await,
    )
}

async fn set_time(State(state): State<AppState>, Path(id): Path<usize>, body: Bytes) -> Response {
    let r = match parse::<RawTime>("update/set_time", &body) {
        Ok(t) => on_instance(&state, id, move |i| i.set_time(t.nanos_since_epoch)).await,
        Err(e) => Err(e),
    };
    respond(r)
}

async fn tick(State(state): State<AppState>, Path(id): Path<usize>, body: Bytes) -> Response {
    // Blockmaker configurations only feed subnet metrics, which this server does not keep.
    let r = match parse::<RawTickConfigs>("update/tick", &body) {
        Ok(_) => on_instance(&state, id, |i: &mut Instance| i.tick().map(drop)).await,
        Err(e) => Err(e),
    };
    respond(r)
}

async fn query(State(state): State<AppState>, Path(id): Path<usize>, body: Bytes) -> Response {
    let r = match parse::<RawCanisterCall>("read/query", &body) {
        Ok(call) => on_instance(&state, id, move |i| i.query(call)).await,
        Err(e) => Err(e),
    };
    respond(r)
}

async fn submit_ingress_message(
    State(state): State<AppState>,
    Path(id): Path<usize>,
    body: Bytes,
) -> Response {
    let r = match parse::<RawCanisterCall>("update/submit_ingress_message", &body) {
        Ok(call) => on_instance(&state, id, move |i| i.submit(call)).await,
        Err(e) => Err(e),
    };
    respond(r)
}

async fn await_ingress_message(
    State(state): State<AppState>,
    Path(id): Path<usize>,
    body: Bytes,
) -> Response {
    let r = match parse::<RawMessageId>("update/await_ingress_message", &body) {
        Ok(m) => on_instance(&state, id, move |i| i.await_message(&m)).await,
        Err(e) => Err(e),
    };
    respond(r)
}

async fn execute_ingress_message(
    State(state): State<AppState>,
    Path(id): Path<usize>,
    body: Bytes,
) -> Response {
    let r = match parse::<RawCanisterCall>("update/execute_ingress_message", &body) {
        Ok(call) => on_instance(&state, id, move |i| i.execute(call)).await,
        Err(e) => Err(e),
    };
    respond(r)
}

async fn ingress_status(
    State(state): State<AppState>,
    Path(id): Path<usize>,
    body: Bytes,
) -> Response {
    let r = match parse::<RawIngressStatusArgs>("read/ingress_status", &body) {
        Ok(args) => on_instance(&state, id, move |i| i.ingress_status(&args)).await,
        Err(e) => Err(e),
    };
    respond(r)
}

async fn get_cycles(State(state): State<AppState>, Path(id): Path<usize>, body: Bytes) -> Response {
    let r = match parse::<RawCanisterId>("read/get_cycles", &body) {
        Ok(c) => {
            on_instance(&state, id, move |i| {
                Ok(RawCycles {
                    cycles: i.cycles(&c.canister_id)?,
                })
            })
            .await
        }
        Err(e) => Err(e),
    };
    respond(r)
}

async fn add_cycles(State(state): State<AppState>, Path(id): Path<usize>, body: Bytes) -> Response {
    let r = match parse::<RawAddCycles>("update/add_cycles", &body) {
        Ok(a) => {
            on_instance(&state, id, move |i| {
                Ok(RawCycles {
                    cycles: i.add_cycles(&a.canister_id, a.amount)?,
                })
            })
            .await
        }
        Err(e) => Err(e),
    };
    respond(r)
}

async fn get_controllers(
    State(state): State<AppState>,
    Path(id): Path<usize>,
    body: Bytes,
) -> Response {
    let r = match parse::<RawCanisterId>("read/get_controllers", &body) {
        Ok(c) => {
            on_instance(&state, id, move |i| {
                Ok(i.controllers(&c.canister_id)?
                    .into_iter()
                    .map(RawPrincipalId::from)
                    .collect::<Vec<_>>())
            })
            .await
        }
        Err(e) => Err(e),
    };
    respond(r)
}

async fn get_stable_memory(
    State(state): State<AppState>,
    Path(id): Path<usize>,
    body: Bytes,
) -> Response {
    let r = match parse::<RawCanisterId>("read/get_stable_memory", &body) {
        Ok(c) => {
            on_instance(&state, id, move |i| {
                Ok(RawStableMemory {
                    blob: i.stable_memory(&c.canister_id)?,
                })
            })
            .await
        }
        Err(e) => Err(e),
    };
    respond(r)
}

async fn set_stable_memory(
    State(state): State<AppState>,
    Path(id): Path<usize>,
    body: Bytes,
) -> Response {
    let r = match parse::<RawSetStableMemory>("update/set_stable_memory", &body) {
        Ok(s) => match state.blobs.fetch_bytes(&s.blob_id) {
            Ok(bytes) => {
                on_instance(&state, id, move |i| {
                    i.set_stable_memory(&s.canister_id, &bytes)
                })
                .await
            }
            Err(e) => Err(e),
        },
        Err(e) => Err(e),
    };
    respond(r)
}

async fn get_subnet(State(state): State<AppState>, Path(id): Path<usize>, body: Bytes) -> Response {
    let r = match parse::<RawCanisterId>("read/get_subnet", &body) {
        Ok(c) => {
            on_instance(&state, id, move |i| {
                Ok(i.subnet_of(&c.canister_id)?.map(RawSubnetId::from))
            })
            .await
        }
        Err(e) => Err(e),
    };
    respond(r)
}

/// Whether the instance is live (`auto_progress`).
async fn auto_progress_enabled(State(state): State<AppState>, Path(id): Path<usize>) -> Response {
    respond(
        state
            .instance(id)
            .map(|_| state.existing_http(id).is_some_and(|h| h.is_live())),
    )
}

/// Makes the instance live: its time follows the wall clock and rounds run on their own
/// (every call wakes one; otherwise one every [`crate::http_interface::LIVE_ROUND_INTERVAL`]).
/// The artificial delay PocketIC accepts is ignored.
async fn auto_progress(
    State(state): State<AppState>,
    Path(id): Path<usize>,
    body: Bytes,
) -> Response {
    let r = parse::<AutoProgressConfig>("auto_progress", &body)
        .and_then(|_| state.http(id))
        .map(|h| h.set_live(true));
    respond(r)
}

/// Stops live mode: time moves only with `set_time` and rounds again.
async fn stop_progress(State(state): State<AppState>, Path(id): Path<usize>) -> Response {
    respond(state.instance(id).map(|_| {
        if let Some(h) = state.existing_http(id) {
            h.set_live(false);
        }
    }))
}
