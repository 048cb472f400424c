//! Where the IC HTTP interface is mounted: per instance under `/instances/<id>/api/...`, at the
//! root `/api/...` for the server's replica instance, and on HTTP gateways (`POST
//! /http_gateway`, what `pocket-ic`'s `make_live` starts): a listener of its own whose root
//! `/api/...` serves one instance. The fault-injection hooks ([`crate::faults`]) are mounted
//! here too, under `/test_hooks/...`, when enabled.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Router};
use candid::Principal;
use pocket_ic::common::rest::{
    CreateHttpGatewayResponse, HttpGatewayBackend, HttpGatewayConfig, HttpGatewayInfo,
    RawCanisterCall, RawEffectivePrincipal,
};

use crate::error::ServerError;
use crate::faults::{BlockInterval, CanisterHook, DelayReplies, DropReplies};
use crate::http_interface::InstanceHttp;
use crate::http_interface::handlers::{self, CallVersion};
use crate::routes::{AppState, json, parse, respond};

/// The instance a root `/api/...` serves: `None` for the server's replica instance.
#[derive(Debug, Clone, Copy)]
pub struct Bound(pub Option<usize>);

fn no_replica() -> Response {
    (
        StatusCode::NOT_FOUND,
        format!(
            "{}: no instance serves the root /api endpoints (start the server with --replica, or use /instances/<id>/api/...)",
            crate::SERVER_NAME
        ),
    )
        .into_response()
}

fn http_of(state: &AppState, id: Option<usize>) -> Result<Arc<InstanceHttp>, Box<Response>> {
    let id = match id.or_else(|| state.replica_instance()) {
        Some(id) => id,
        None => return Err(Box::new(no_replica())),
    };
    state
        .http(id)
        .map_err(|e| Box::new(crate::routes::error(&e)))
}

macro_rules! both {
    ($inst:ident, $root:ident, $handler:expr, ($($p:ident),*)) => {
        async fn $inst(
            State(state): State<AppState>,
            Path((id, $($p),*)): Path<(usize, $(both!(@ty $p)),*)>,
            body: Bytes,
        ) -> Response {
            match http_of(&state, Some(id)) {
                Ok(h) => $handler(h, $($p),*, body).await,
                Err(r) => *r,
            }
        }
        async fn $root(
            State(state): State<AppState>,
            Extension(Bound(bound)): Extension<Bound>,
            Path(($($p),*,)): Path<($(both!(@ty $p)),*,)>,
            body: Bytes,
        ) -> Response {
            match http_of(&state, bound) {
                Ok(h) => $handler(h, $($p),*, body).await,
                Err(r) => *r,
            }
        }
    };
    (@ty $p:ident) => { String };
}

async fn do_call_v2(h: Arc<InstanceHttp>, ecid: String, body: Bytes) -> Response {
    handlers::call(h, &ecid, CallVersion::V2, body).await
}
async fn do_call_sync(h: Arc<InstanceHttp>, ecid: String, body: Bytes) -> Response {
    handlers::call(h, &ecid, CallVersion::Sync, body).await
}
async fn do_query(h: Arc<InstanceHttp>, ecid: String, body: Bytes) -> Response {
    handlers::query(h, &ecid, body).await
}
async fn do_read_canister(h: Arc<InstanceHttp>, ecid: String, body: Bytes) -> Response {
    handlers::read_state_canister(h, &ecid, body).await
}
async fn do_read_subnet(h: Arc<InstanceHttp>, sid: String, body: Bytes) -> Response {
    handlers::read_state_subnet(h, &sid, body).await
}

both!(inst_call_v2, root_call_v2, do_call_v2, (ecid));
both!(inst_call_sync, root_call_sync, do_call_sync, (ecid));
both!(inst_query, root_query, do_query, (ecid));
both!(
    inst_read_canister,
    root_read_canister,
    do_read_canister,
    (ecid)
);
both!(inst_read_subnet, root_read_subnet, do_read_subnet, (sid));

async fn inst_status(State(state): State<AppState>, Path(id): Path<usize>) -> Response {
    match http_of(&state, Some(id)) {
        Ok(h) => handlers::status(h).await,
        Err(r) => *r,
    }
}

async fn root_status(
    State(state): State<AppState>,
    Extension(Bound(bound)): Extension<Bound>,
) -> Response {
    match http_of(&state, bound) {
        Ok(h) => handlers::status(h).await,
        Err(r) => *r,
    }
}

/// The root `/api/...` routes.
fn root_routes() -> Router<AppState> {
    Router::new()
        .route("/api/v2/status", get(root_status))
        .route("/api/v2/canister/{ecid}/call", post(root_call_v2))
        .route("/api/v3/canister/{ecid}/call", post(root_call_sync))
        .route("/api/v4/canister/{ecid}/call", post(root_call_sync))
        .route("/api/v2/canister/{ecid}/query", post(root_query))
        .route("/api/v3/canister/{ecid}/query", post(root_query))
        .route(
            "/api/v2/canister/{ecid}/read_state",
            post(root_read_canister),
        )
        .route(
            "/api/v3/canister/{ecid}/read_state",
            post(root_read_canister),
        )
        .route("/api/v2/subnet/{sid}/read_state", post(root_read_subnet))
        .route("/api/v3/subnet/{sid}/read_state", post(root_read_subnet))
        .route("/test_hooks/{hook}", post(root_hook))
}

/// Every route of the IC HTTP interface and the test hooks, for the main server: per
/// instance, and at the root for the replica instance.
pub fn api_routes() -> Router<AppState> {
    Router::new()
        .route("/instances/{id}/api/v2/status", get(inst_status))
        .route(
            "/instances/{id}/api/v2/canister/{ecid}/call",
            post(inst_call_v2),
        )
        .route(
            "/instances/{id}/api/v3/canister/{ecid}/call",
            post(inst_call_sync),
        )
        .route(
            "/instances/{id}/api/v4/canister/{ecid}/call",
            post(inst_call_sync),
        )
        .route(
            "/instances/{id}/api/v2/canister/{ecid}/query",
            post(inst_query),
        )
        .route(
            "/instances/{id}/api/v3/canister/{ecid}/query",
            post(inst_query),
        )
        .route(
            "/instances/{id}/api/v2/canister/{ecid}/read_state",
            post(inst_read_canister),
        )
        .route(
            "/instances/{id}/api/v3/canister/{ecid}/read_state",
            post(inst_read_canister),
        )
        .route(
            "/instances/{id}/api/v2/subnet/{sid}/read_state",
            post(inst_read_subnet),
        )
        .route(
            "/instances/{id}/api/v3/subnet/{sid}/read_state",
            post(inst_read_subnet),
        )
        .route("/test_hooks/instances/{id}/{hook}", post(inst_hook))
        .merge(root_routes().layer(Extension(Bound(None))))
}

async fn inst_hook(
    State(state): State<AppState>,
    Path((id, hook)): Path<(usize, String)>,
    body: Bytes,
) -> Response {
    run_hook(&state, Some(id), &hook, &body).await
}

async fn root_hook(
    State(state): State<AppState>,
    Extension(Bound(bound)): Extension<Bound>,
    Path(hook): Path<String>,
    body: Bytes,
) -> Response {
    run_hook(&state, bound, &hook, &body).await
}

async fn run_hook(state: &AppState, id: Option<usize>, hook: &str, body: &[u8]) -> Response {
    if !state.test_hooks.load(Ordering::SeqCst) {
        return crate::routes::error(&ServerError::UnsupportedEndpoint {
            method: "POST".into(),
            path: format!(
                "/test_hooks/{hook} (the test hooks are off: start the server with --test-hooks)"
            ),
        });
    }
    let h = match http_of(state, id) {
        Ok(h) => h,
        Err(r) => return *r,
    };
    let ok = serde_json::json!({"ok": true});
    match hook {
        "drop_replies" => respond(
            parse::<DropReplies>("test_hooks/drop_replies", body).map(|d| {
                h.faults.drop_replies(d.count);
                ok
            }),
        ),
        "delay_replies" => respond(parse::<DelayReplies>("test_hooks/delay_replies", body).map(
            |d| {
                h.faults
                    .delay_replies(d.count, std::time::Duration::from_millis(d.ms));
                ok
            },
        )),
        "block_interval" => respond(
            parse::<BlockInterval>("test_hooks/block_interval", body).map(|b| {
                h.set_block_interval(Some(std::time::Duration::from_millis(b.ms)));
                ok
            }),
        ),
        "rounds" => respond(Ok::<_, ServerError>(serde_json::json!({
            "block_interval_ms": h.block_interval().map(|d| d.as_millis() as u64),
            "rounds": h.round_log(),
        }))),
        "stop_canister" | "start_canister" => {
            let method = hook.to_string();
            let r = match parse::<CanisterHook>("test_hooks/stop_canister", body) {
                Err(e) => Err(e),
                Ok(c) => match Principal::from_text(&c.canister_id) {
                    Err(e) => Err(ServerError::BadRequest {
                        endpoint: "test_hooks/stop_canister",
                        message: format!("canister_id: {e}"),
                    }),
                    Ok(canister) => {
                        let h2 = h.clone();
                        tokio::task::spawn_blocking(move || set_running(&h2, canister, &method))
                            .await
                            .map_err(|e| ServerError::Task(e.to_string()))
                            .and_then(|r| r)
                    }
                },
            };
            respond(r.map(|()| ok))
        }
        other => crate::routes::error(&ServerError::UnsupportedEndpoint {
            method: "POST".into(),
            path: format!("/test_hooks/{other}"),
        }),
    }
}

/// Stops or starts `canister` through the management canister, as its first controller.
fn set_running(h: &InstanceHttp, canister: Principal, method: &str) -> Result<(), ServerError> {
    let mut inst = h.instance();
    let controller = inst
        .controllers(canister.as_slice())?
        .first()
        .copied()
        .ok_or_else(|| ServerError::BadRequest {
            endpoint: "test_hooks",
            message: format!("canister {canister} has no controller to stop or start it"),
        })?;
    let arg = candid::encode_one(ic_management_canister_types::CanisterIdRecord {
        canister_id: canister,
    })
    .map_err(|e| ServerError::BadRequest {
        endpoint: "test_hooks",
        message: e.to_string(),
    })?;
    let result = inst.execute(RawCanisterCall {
        sender: controller.as_slice().to_vec(),
        canister_id: Principal::management_canister().as_slice().to_vec(),
        effective_principal: RawEffectivePrincipal::CanisterId(canister.as_slice().to_vec()),
        method: method.to_string(),
        payload: arg,
    })?;
    if let pocket_ic::common::rest::RawCanisterResult::Err(r) = result {
        return Err(ServerError::BadRequest {
            endpoint: "test_hooks",
            message: r.reject_message,
        });
    }
    h.certify(&inst)
}

/// The HTTP gateways started so far: id → shutdown signal.
#[derive(Debug, Default)]
pub struct Gateways {
    next: usize,
    stop: HashMap<usize, tokio::sync::oneshot::Sender<()>>,
}

fn gateways() -> &'static Mutex<Gateways> {
    static G: std::sync::OnceLock<Mutex<Gateways>> = std::sync::OnceLock::new();
    G.get_or_init(|| Mutex::new(Gateways::default()))
}

/// `POST /http_gateway`: a listener whose root `/api/...` serves one instance (made live), as
/// PocketIC's HTTP gateway does for agents. Canister HTTP requests (`http_request`) are not
/// served; neither is HTTPS or a gateway in front of another replica.
pub async fn create(State(state): State<AppState>, body: Bytes) -> Response {
    let error = |message: String| {
        json(
            StatusCode::BAD_REQUEST,
            &CreateHttpGatewayResponse::Error { message },
        )
    };
    let config: HttpGatewayConfig = match parse("http_gateway", &body) {
        Ok(c) => c,
        Err(e) => return error(e.to_string()),
    };
    let HttpGatewayBackend::PocketIcInstance(id) = config.forward_to else {
        return error(format!(
            "{} serves HTTP gateways only in front of its own instances",
            crate::SERVER_NAME
        ));
    };
    if config.https_config.is_some() {
        return error(format!("{} has no HTTPS gateway", crate::SERVER_NAME));
    }
    let http = match state.http(id) {
        Ok(h) => h,
        Err(e) => return error(e.to_string()),
    };
    http.set_live(true);
    let addr = format!(
        "{}:{}",
        config.ip_addr.as_deref().unwrap_or("127.0.0.1"),
        config.port.unwrap_or(0)
    );
    let listener = match tokio::net::TcpListener::bind(&addr).await {
        Ok(l) => l,
        Err(e) => return error(format!("binding {addr}: {e}")),
    };
    let port = match listener.local_addr() {
        Ok(a) => a.port(),
        Err(e) => return error(e.to_string()),
    };
    let router = root_routes()
        .layer(Extension(Bound(Some(id))))
        .layer(axum::extract::DefaultBodyLimit::disable())
        .with_state(state.clone());
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let gateway_id = {
        let mut g = gateways().lock().unwrap_or_else(|p| p.into_inner());
        let gid = g.next;
        g.next += 1;
        g.stop.insert(gid, tx);
        gid
    };
    tokio::spawn(async move {
        let _ = axum::serve(listener, router)
            .with_graceful_shutdown(async {
                let _ = rx.await;
            })
            .await;
    });
    json(
        StatusCode::CREATED,
        &CreateHttpGatewayResponse::Created(HttpGatewayInfo {
            instance_id: gateway_id,
            port,
        }),
    )
}

/// `POST /http_gateway/{id}/stop`.
pub async fn stop(Path(id): Path<usize>) -> Response {
    if let Some(tx) = gateways()
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .stop
        .remove(&id)
    {
        let _ = tx.send(());
    }
    respond(Ok::<(), ServerError>(()))
}
