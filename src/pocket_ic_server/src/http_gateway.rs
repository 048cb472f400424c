//! Where the IC HTTP interface is mounted: per instance under `/instances/<id>/api/...`, at the
//! root `/api/...` for the server's replica instance, and on HTTP gateways (`POST
//! /http_gateway`, what `pocket-ic`'s `make_live` starts): a listener of its own whose root
//! `/api/...` serves one instance. Its routes are one table (`IC_HTTP_ROUTES`, as the
//! replica's `rs/http_endpoints/public` has one router), mounted in all three places; which
//! instance a request is for is its [`Target`]. The fault-injection hooks ([`crate::faults`])
//! are mounted here too, under `/test_hooks/...`, when enabled.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::extract::{FromRequestParts, Path, RawPathParams, State};
use axum::http::StatusCode;
use axum::http::request::Parts;
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
use crate::http_interface::handlers::{self, CallVersion, ReadStateScope};
use crate::response::{error, json, parse, respond};
use crate::state::AppState;

/// An endpoint of the IC HTTP interface.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Endpoint {
    /// `GET .../status`.
    Status,
    /// `POST .../canister/<ecid>/call`.
    Call(CallVersion),
    /// `POST .../canister/<ecid>/query`.
    Query,
    /// `POST .../{canister,subnet}/<id>/read_state`.
    ReadState(ReadStateScope),
}

/// The IC HTTP interface's routes (the replica's `rs/http_endpoints/public` router), relative
/// to where they are mounted: at the root, per instance under `/instances/{id}`, and at the
/// root of each HTTP gateway.
const IC_HTTP_ROUTES: [(&str, Endpoint); 10] = [
    ("/api/v2/status", Endpoint::Status),
    (
        "/api/v2/canister/{ecid}/call",
        Endpoint::Call(CallVersion::V2),
    ),
    (
        "/api/v3/canister/{ecid}/call",
        Endpoint::Call(CallVersion::Sync),
    ),
    (
        "/api/v4/canister/{ecid}/call",
        Endpoint::Call(CallVersion::Sync),
    ),
    ("/api/v2/canister/{ecid}/query", Endpoint::Query),
    ("/api/v3/canister/{ecid}/query", Endpoint::Query),
    (
        "/api/v2/canister/{ecid}/read_state",
        Endpoint::ReadState(ReadStateScope::Canister),
    ),
    (
        "/api/v3/canister/{ecid}/read_state",
        Endpoint::ReadState(ReadStateScope::Canister),
    ),
    (
        "/api/v2/subnet/{sid}/read_state",
        Endpoint::ReadState(ReadStateScope::Subnet),
    ),
    (
        "/api/v3/subnet/{sid}/read_state",
        Endpoint::ReadState(ReadStateScope::Subnet),
    ),
];

impl Endpoint {
    /// Answers a request to this endpoint; `id` is the canister or subnet id of its path.
    async fn serve(self, http: Arc<InstanceHttp>, id: &str, body: Bytes) -> Response {
        match self {
            Endpoint::Status => handlers::status(http).await,
            Endpoint::Call(version) => handlers::call(http, id, version, body).await,
            Endpoint::Query => handlers::query(http, id, body).await,
            Endpoint::ReadState(scope) => handlers::read_state(http, scope, id, body).await,
        }
    }
}

/// [`IC_HTTP_ROUTES`] as a router.
fn ic_http_routes() -> Router<AppState> {
    IC_HTTP_ROUTES
        .into_iter()
        .fold(Router::new(), |router, (path, endpoint)| {
            let serve = move |state: State<AppState>, target: Target, body: Bytes| {
                serve(endpoint, state, target, body)
            };
            let method = match endpoint {
                Endpoint::Status => get(serve),
                _ => post(serve),
            };
            router.route(path, method)
        })
}

/// A request to `endpoint` of the instance `target` names.
async fn serve(
    endpoint: Endpoint,
    State(state): State<AppState>,
    target: Target,
    body: Bytes,
) -> Response {
    match target.http(&state) {
        Ok(h) => endpoint.serve(h, &target.param, body).await,
        Err(r) => *r,
    }
}

/// The instance a root `/api/...` serves: `None` for the server's replica instance.
#[derive(Debug, Clone, Copy)]
pub struct Bound(pub Option<usize>);

/// Whom a request to the IC HTTP interface or a test hook is for: the instance its path names
/// (`/instances/{id}/...`, `/test_hooks/instances/{id}/...`), else the one its listener is
/// [`Bound`] to, else the replica instance; and the other segment its path captures (the
/// canister or subnet id, the hook's name), empty if none.
#[derive(Debug)]
pub struct Target {
    instance: Option<usize>,
    param: String,
}

impl FromRequestParts<AppState> for Target {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Response> {
        let (named, count) = {
            let params = RawPathParams::from_request_parts(parts, state)
                .await
                .map_err(IntoResponse::into_response)?;
            let named = params.iter().any(|(name, _)| name == "id");
            (named, params.iter().count())
        };
        let bound = parts.extensions.get::<Bound>().and_then(|b| b.0);
        let (instance, param) = match (named, count) {
            (false, 0) => (bound, String::new()),
            (false, _) => {
                let Path((param,)) = Path::<(String,)>::from_request_parts(parts, state)
                    .await
                    .map_err(IntoResponse::into_response)?;
                (bound, param)
            }
            (true, 1) => {
                let Path(id) = Path::<usize>::from_request_parts(parts, state)
                    .await
                    .map_err(IntoResponse::into_response)?;
                (Some(id), String::new())
            }
            (true, _) => {
                let Path((id, param)) = Path::<(usize, String)>::from_request_parts(parts, state)
                    .await
                    .map_err(IntoResponse::into_response)?;
                (Some(id), param)
            }
        };
        Ok(Target { instance, param })
    }
}

impl Target {
    /// The HTTP interface's side of the instance (created on first use), or the response
    /// saying why there is none.
    fn http(&self, state: &AppState) -> Result<Arc<InstanceHttp>, Box<Response>> {
        let Some(id) = self.instance.or_else(|| state.replica_instance()) else {
            return Err(Box::new(no_replica()));
        };
        state.http(id).map_err(|e| Box::new(error(&e)))
    }
}

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

/// The routes a listener serves at its root: the IC HTTP interface and the test hooks.
fn root_routes() -> Router<AppState> {
    ic_http_routes().route("/test_hooks/{hook}", post(hook))
}

/// Every route of the IC HTTP interface and the test hooks, for the main server: per
/// instance, and at the root for the replica instance.
pub fn api_routes() -> Router<AppState> {
    Router::new()
        .nest("/instances/{id}", ic_http_routes())
        .route("/test_hooks/instances/{id}/{hook}", post(hook))
        .merge(root_routes())
}

/// `POST /test_hooks/...`: a fault-injection hook ([`crate::faults`]).
async fn hook(State(state): State<AppState>, target: Target, body: Bytes) -> Response {
    run_hook(&state, &target, &body).await
}

async fn run_hook(state: &AppState, target: &Target, body: &[u8]) -> Response {
    let hook = target.param.as_str();
    if !state.test_hooks.load(Ordering::SeqCst) {
        return error(&ServerError::UnsupportedEndpoint {
            method: "POST".into(),
            path: format!(
                "/test_hooks/{hook} (the test hooks are off: start the server with --test-hooks)"
            ),
        });
    }
    let h = match target.http(state) {
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
        other => error(&ServerError::UnsupportedEndpoint {
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
    let refuse = |message: String| {
        json(
            StatusCode::BAD_REQUEST,
            &CreateHttpGatewayResponse::Error { message },
        )
    };
    let config: HttpGatewayConfig = match parse("http_gateway", &body) {
        Ok(c) => c,
        Err(e) => return refuse(e.to_string()),
    };
    let HttpGatewayBackend::PocketIcInstance(id) = config.forward_to else {
        return refuse(format!(
            "{} serves HTTP gateways only in front of its own instances",
            crate::SERVER_NAME
        ));
    };
    if config.https_config.is_some() {
        return refuse(format!("{} has no HTTPS gateway", crate::SERVER_NAME));
    }
    let http = match state.http(id) {
        Ok(h) => h,
        Err(e) => return refuse(e.to_string()),
    };
    http.set_live(true);
    let addr = format!(
        "{}:{}",
        config.ip_addr.as_deref().unwrap_or("127.0.0.1"),
        config.port.unwrap_or(0)
    );
    let listener = match tokio::net::TcpListener::bind(&addr).await {
        Ok(l) => l,
        Err(e) => return refuse(format!("binding {addr}: {e}")),
    };
    let port = match listener.local_addr() {
        Ok(a) => a.port(),
        Err(e) => return refuse(e.to_string()),
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
