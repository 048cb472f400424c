//! The HTTP endpoints of PocketIC's REST protocol this server serves, and the fallback that
//! answers every other endpoint with an error naming it.
//!
//! Bodies are JSON of `pocket-ic`'s REST types; a success is HTTP 200 with the value, a failure
//! an HTTP 4xx/5xx with `{"message": ...}` (the `pocket-ic` client's `ApiResponse`). Engine work
//! runs on blocking threads, one instance at a time.

use std::sync::atomic::Ordering;
use std::time::Instant;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Path, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use pocket_ic::common::rest::{
    AutoProgressConfig, BinaryBlob, BlobCompression, BlobId, CreateInstanceResponse,
    InstanceConfig, RawAddCycles, RawCanisterCall, RawCanisterId, RawCycles, RawIngressStatusArgs,
    RawMessageId, RawPrincipalId, RawSetStableMemory, RawStableMemory, RawSubnetId, RawTickConfigs,
    RawTime,
};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::error::ServerError;
use crate::http_gateway;
use crate::instance::Instance;
use crate::response::{error, json, parse, respond};
use crate::state::AppState;

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

/// Parses the JSON body as an `A` (a failure names `endpoint`), runs `f` with it on instance
/// `id` ([`on_instance`]) and answers its result.
async fn with_body<A, T, F>(
    state: &AppState,
    id: usize,
    endpoint: &'static str,
    body: &[u8],
    f: F,
) -> Response
where
    A: DeserializeOwned + Send + 'static,
    T: Serialize + Send + 'static,
    F: FnOnce(&mut Instance, A) -> Result<T, ServerError> + Send + 'static,
{
    let r = match parse::<A>(endpoint, body) {
        Ok(a) => on_instance(state, id, move |i| f(i, a)).await,
        Err(e) => Err(e),
    };
    respond(r)
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
        .route("/http_gateway", post(http_gateway::create))
        .route("/http_gateway/{id}/stop", post(http_gateway::stop))
        .merge(http_gateway::api_routes())
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
    with_body(&state, id, "update/set_time", &body, |i, t: RawTime| {
        i.set_time(t.nanos_since_epoch)
    })
    .await
}

async fn tick(State(state): State<AppState>, Path(id): Path<usize>, body: Bytes) -> Response {
    // Blockmaker configurations only feed subnet metrics, which this server does not keep.
    with_body(&state, id, "update/tick", &body, |i, _: RawTickConfigs| {
        i.tick().map(drop)
    })
    .await
}

async fn query(State(state): State<AppState>, Path(id): Path<usize>, body: Bytes) -> Response {
    with_body(
        &state,
        id,
        "read/query",
        &body,
        |i, call: RawCanisterCall| i.query(call),
    )
    .await
}

async fn submit_ingress_message(
    State(state): State<AppState>,
    Path(id): Path<usize>,
    body: Bytes,
) -> Response {
    let endpoint = "update/submit_ingress_message";
    with_body(&state, id, endpoint, &body, |i, call: RawCanisterCall| {
        i.submit(call)
    })
    .await
}

async fn await_ingress_message(
    State(state): State<AppState>,
    Path(id): Path<usize>,
    body: Bytes,
) -> Response {
    let endpoint = "update/await_ingress_message";
    with_body(&state, id, endpoint, &body, |i, m: RawMessageId| {
        i.await_message(&m)
    })
    .await
}

async fn execute_ingress_message(
    State(state): State<AppState>,
    Path(id): Path<usize>,
    body: Bytes,
) -> Response {
    let endpoint = "update/execute_ingress_message";
    with_body(&state, id, endpoint, &body, |i, call: RawCanisterCall| {
        i.execute(call)
    })
    .await
}

async fn ingress_status(
    State(state): State<AppState>,
    Path(id): Path<usize>,
    body: Bytes,
) -> Response {
    let endpoint = "read/ingress_status";
    with_body(
        &state,
        id,
        endpoint,
        &body,
        |i, args: RawIngressStatusArgs| i.ingress_status(&args),
    )
    .await
}

async fn get_cycles(State(state): State<AppState>, Path(id): Path<usize>, body: Bytes) -> Response {
    with_body(
        &state,
        id,
        "read/get_cycles",
        &body,
        |i, c: RawCanisterId| {
            Ok(RawCycles {
                cycles: i.cycles(&c.canister_id)?,
            })
        },
    )
    .await
}

async fn add_cycles(State(state): State<AppState>, Path(id): Path<usize>, body: Bytes) -> Response {
    with_body(
        &state,
        id,
        "update/add_cycles",
        &body,
        |i, a: RawAddCycles| {
            Ok(RawCycles {
                cycles: i.add_cycles(&a.canister_id, a.amount)?,
            })
        },
    )
    .await
}

async fn get_controllers(
    State(state): State<AppState>,
    Path(id): Path<usize>,
    body: Bytes,
) -> Response {
    with_body(
        &state,
        id,
        "read/get_controllers",
        &body,
        |i, c: RawCanisterId| {
            Ok(i.controllers(&c.canister_id)?
                .into_iter()
                .map(RawPrincipalId::from)
                .collect::<Vec<_>>())
        },
    )
    .await
}

async fn get_stable_memory(
    State(state): State<AppState>,
    Path(id): Path<usize>,
    body: Bytes,
) -> Response {
    let endpoint = "read/get_stable_memory";
    with_body(&state, id, endpoint, &body, |i, c: RawCanisterId| {
        Ok(RawStableMemory {
            blob: i.stable_memory(&c.canister_id)?,
        })
    })
    .await
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
    with_body(
        &state,
        id,
        "read/get_subnet",
        &body,
        |i, c: RawCanisterId| Ok(i.subnet_of(&c.canister_id)?.map(RawSubnetId::from)),
    )
    .await
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
