//! The endpoints of the HTTP interface, as the replica answers them:
//!
//! | endpoint | answer |
//! |---|---|
//! | `GET /api/v2/status` | CBOR (tag 55799): `ic_api_version`, `impl_version`, `root_key` (DER), `replica_health_status`, `certified_height` |
//! | `POST /api/v2/canister/<ecid>/call` | 202 once the message is accepted; a refused one: 200 with `{reject_code, reject_message, error_code}` |
//! | `POST /api/{v3,v4}/canister/<ecid>/call` | 200 `{status: "replied", certificate}` once executed and certified; `{status: "non_replicated_rejection", ...}` if refused before execution; 202 after [`super::SYNC_CALL_TIMEOUT`] |
//! | `POST /api/{v2,v3}/canister/<ecid>/query` | 200 `{status: "replied", reply: {arg}, signatures}` or `{status: "rejected", reject_code, reject_message, error_code, signatures}`, signed by the subnet's node |
//! | `POST /api/{v2,v3}/canister/<ecid>/read_state` | 200 `{certificate}` for the paths the replica allows |
//! | `POST /api/{v2,v3}/subnet/<sid>/read_state` | 200 `{certificate}` for `time`, `subnet/...`, `canister_ranges/<sid>` |
//!
//! Malformed, unauthenticated or expired requests get the replica's 4xx status and text
//! (400 for validation failures, 403 for another sender's request id, 404 for a path the
//! replica does not serve, 413 beyond 2 MiB).

use std::sync::Arc;

use axum::body::Bytes;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use candid::Principal;
use ic_transport_types::{
    EnvelopeContent, NodeSignature, QueryResponse, RejectCode, RejectResponse, ReplyResponse,
    RequestId,
};
use pocket_ic::common::rest::{RawCanisterCall, RawCanisterResult, RawEffectivePrincipal};
use serde::Serialize;

use super::request::{self, Refusal, Request, Targets};
use super::{InstanceHttp, Record, SYNC_CALL_TIMEOUT, Signer};

/// Which call endpoint a request came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallVersion {
    /// `/api/v2/.../call`: asynchronous (202 once accepted).
    V2,
    /// `/api/v3/.../call` and `/api/v4/.../call`: synchronous (certificate in the answer).
    Sync,
}

fn cbor_response<T: Serialize>(value: &T) -> Response {
    (
        StatusCode::OK,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/cbor"),
        )],
        super::certify::cbor(value),
    )
        .into_response()
}

fn refusal(r: Refusal) -> Response {
    let status = StatusCode::from_u16(r.status).unwrap_or(StatusCode::BAD_REQUEST);
    (status, r.message).into_response()
}

fn principal_in_url(text: &str, what: &str) -> Result<Principal, Refusal> {
    Principal::from_text(text)
        .map_err(|e| Refusal::bad(format!("Could not parse {what} '{text}': {e}")))
}

/// A reject of the pocket-ic types as the transport types carry it.
fn transport_reject(r: &pocket_ic::RejectResponse) -> RejectResponse {
    RejectResponse {
        reject_code: RejectCode::try_from(r.reject_code as u64)
            .unwrap_or(RejectCode::CanisterError),
        reject_message: r.reject_message.clone(),
        error_code: Some(r.error_code.to_string()),
    }
}

/// The body of a non-replicated rejection (sync calls) / a refused v2 call.
#[derive(Serialize)]
struct NonReplicatedRejection<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    status: Option<&'static str>,
    reject_code: u64,
    reject_message: &'a str,
    error_code: String,
}

fn rejection(r: &pocket_ic::RejectResponse, version: CallVersion) -> Response {
    cbor_response(&NonReplicatedRejection {
        status: (version == CallVersion::Sync).then_some("non_replicated_rejection"),
        reject_code: r.reject_code as u64,
        reject_message: &r.reject_message,
        error_code: r.error_code.to_string(),
    })
}

#[derive(Serialize)]
struct Replied {
    status: &'static str,
    #[serde(with = "serde_bytes")]
    certificate: Vec<u8>,
}

#[derive(Serialize)]
struct ReadStateAnswer {
    #[serde(with = "serde_bytes")]
    certificate: Vec<u8>,
}

fn parse(body: &[u8], what: &str) -> Result<Request, Refusal> {
    if body.len() > request::MAX_INGRESS_BYTES {
        return Err(Refusal {
            status: 413,
            message: format!(
                "Request is too large. Message byte size {} is larger than the max allowed {}.",
                body.len(),
                request::MAX_INGRESS_BYTES
            ),
        });
    }
    request::parse(body, what)
}

/// What happened to a call when it reached the instance.
enum Accepted {
    /// Submitted now, or already known (an identical request: deduplicated).
    Known,
    /// Refused by the ingress filter (canister missing, stopped, `canister_inspect_message`).
    Refused(pocket_ic::RejectResponse),
}

/// Checks and submits a call on a blocking thread.
fn accept_call(
    http: &InstanceHttp,
    req: &Request,
    effective: Principal,
) -> Result<Result<Accepted, Refusal>, crate::ServerError> {
    let EnvelopeContent::Call {
        canister_id,
        method_name,
        arg,
        sender,
        ingress_expiry,
        ..
    } = &req.content
    else {
        return Ok(Err(Refusal::bad(
            "Could not parse body as call message: the request_type is not \"call\"",
        )));
    };
    let mut inst = http.instance();
    if let Err(r) = req.authenticate_for(canister_id, inst.time()) {
        return Ok(Err(r));
    }
    {
        let cert = http.cert();
        if cert.record(&req.id).is_some() {
            // The IC executes an identical request (same request id) once within its expiry.
            return Ok(Ok(Accepted::Known));
        }
    }
    if let Some(outcome) =
        super::system_canisters::call(&mut inst, sender, canister_id, method_name, arg)?
    {
        let status = match outcome {
            Ok(reply) => super::state_tree::RequestStatus::Replied(reply),
            Err(r) => super::state_tree::RequestStatus::Rejected {
                code: r.reject_code as u64,
                message: r.reject_message,
                error_code: r.error_code.to_string(),
            },
        };
        http.cert().accept(
            req.id,
            Record {
                message: pocket_ic::common::rest::RawMessageId {
                    effective_principal: RawEffectivePrincipal::None,
                    message_id: req.id.to_vec(),
                },
                sender: *sender,
                canister: *canister_id,
                method: method_name.clone(),
                expiry: *ingress_expiry,
                status: Some(status),
            },
        );
        return Ok(Ok(Accepted::Known));
    }
    // `Instance::submit` is the ingress filter: the canister exists, runs and has code, the
    // argument fits, and `canister_inspect_message` accepts the message.
    let submitted = inst.submit(RawCanisterCall {
        sender: sender.as_slice().to_vec(),
        canister_id: canister_id.as_slice().to_vec(),
        // The management canister's own id names no subnet: such calls go to the first one.
        effective_principal: if effective == Principal::management_canister() {
            RawEffectivePrincipal::None
        } else {
            RawEffectivePrincipal::CanisterId(effective.as_slice().to_vec())
        },
        method: method_name.clone(),
        payload: arg.clone(),
    })?;
    match submitted {
        Err(r) => Ok(Ok(Accepted::Refused(r))),
        Ok(message) => {
            http.cert().accept(
                req.id,
                Record {
                    message,
                    sender: *sender,
                    canister: *canister_id,
                    method: method_name.clone(),
                    expiry: *ingress_expiry,
                    status: None,
                },
            );
            Ok(Ok(Accepted::Known))
        }
    }
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, crate::ServerError> + Send + 'static,
) -> Result<T, Response> {
    match tokio::task::spawn_blocking(f).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err((StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response()),
        Err(e) => Err((StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response()),
    }
}

/// `POST .../canister/<ecid>/call`.
pub async fn call(
    http: Arc<InstanceHttp>,
    ecid: &str,
    version: CallVersion,
    body: Bytes,
) -> Response {
    let effective = match principal_in_url(ecid, "effective canister id") {
        Ok(p) => p,
        Err(r) => return refusal(r),
    };
    let req = match parse(&body, "call") {
        Ok(r) => r,
        Err(r) => return refusal(r),
    };
    if let EnvelopeContent::Call { canister_id, .. } = &req.content
        && *canister_id != Principal::management_canister()
        && *canister_id != effective
    {
        return refusal(Refusal::bad(format!(
            "Specified CanisterId {canister_id} does not match effective canister id in URL {effective}"
        )));
    }
    let id = req.id;
    let h = http.clone();
    let accepted = match blocking(move || accept_call(&h, &req, effective)).await {
        Ok(a) => a,
        Err(resp) => return resp,
    };
    match accepted {
        Err(r) => return refusal(r),
        Ok(Accepted::Refused(r)) => return rejection(&r, version),
        Ok(Accepted::Known) => {}
    }
    let mut rounds = http.rounds();
    http.wake();
    let fault = http.faults.take_call_fault();
    if version == CallVersion::V2 {
        return fault.apply(StatusCode::ACCEPTED.into_response()).await;
    }
    let signer = http.cert().signer_for(&effective);
    let waited = tokio::time::timeout(SYNC_CALL_TIMEOUT, async {
        loop {
            {
                let mut cert = http.cert();
                let done = cert.record(&id).is_some_and(|r| r.status.is_some());
                if done {
                    let paths = vec![
                        vec![b"time".to_vec()],
                        vec![b"request_status".to_vec(), id.to_vec()],
                    ];
                    return Some(cert.certificate(&paths, signer));
                }
                // Gone (expired and dropped) while waiting.
                cert.record(&id)?;
            }
            if rounds.changed().await.is_err() {
                return None;
            }
        }
    })
    .await;
    let response = match waited {
        Ok(Some(certificate)) => cbor_response(&Replied {
            status: "replied",
            certificate,
        }),
        Ok(None) => (
            StatusCode::ACCEPTED,
            "Certified state does not contain request status. Please try /read_state.",
        )
            .into_response(),
        Err(_) => (
            StatusCode::ACCEPTED,
            "Message did not complete execution and certification within the replica defined timeout.",
        )
            .into_response(),
    };
    fault.apply(response).await
}

/// `POST .../canister/<ecid>/query`.
pub async fn query(http: Arc<InstanceHttp>, ecid: &str, body: Bytes) -> Response {
    let effective = match principal_in_url(ecid, "effective canister id") {
        Ok(p) => p,
        Err(r) => return refusal(r),
    };
    let req = match parse(&body, "query") {
        Ok(r) => r,
        Err(r) => return refusal(r),
    };
    let EnvelopeContent::Query {
        canister_id,
        method_name,
        arg,
        sender,
        ..
    } = req.content.clone()
    else {
        return refusal(Refusal::bad(
            "Could not parse body as query message: the request_type is not \"query\"",
        ));
    };
    if canister_id != Principal::management_canister() && canister_id != effective {
        return refusal(Refusal::bad(format!(
            "Specified CanisterId {canister_id} does not match effective canister id in URL {effective}"
        )));
    }
    let h = http.clone();
    let outcome = blocking(move || {
        let mut inst = h.instance();
        if let Err(r) = req.authenticate_for(&canister_id, inst.time()) {
            return Ok(Err(r));
        }
        if let Some(result) = super::system_canisters::query(&inst, &canister_id, &method_name) {
            return Ok(Ok((result, inst.time(), req.id)));
        }
        let result = inst.query(RawCanisterCall {
            sender: sender.as_slice().to_vec(),
            canister_id: canister_id.as_slice().to_vec(),
            effective_principal: RawEffectivePrincipal::CanisterId(effective.as_slice().to_vec()),
            method: method_name,
            payload: arg,
        })?;
        Ok(Ok((result, inst.time(), req.id)))
    })
    .await;
    let (result, time, id) = match outcome {
        Ok(Ok(v)) => v,
        Ok(Err(r)) => return refusal(r),
        Err(resp) => return resp,
    };
    let mut response = match result {
        RawCanisterResult::Ok(arg) => QueryResponse::Replied {
            reply: ReplyResponse { arg },
            signatures: Vec::new(),
        },
        RawCanisterResult::Err(r) => QueryResponse::Rejected {
            reject: transport_reject(&r),
            signatures: Vec::new(),
        },
    };
    let signable = response.signable(RequestId::new(&id), time);
    let signature = {
        let cert = http.cert();
        let node = match cert.keys.subnet_of(&effective) {
            Some(i) => &cert.keys.subnets[i].node,
            None => &cert.keys.root_node,
        };
        NodeSignature {
            timestamp: time,
            signature: node.sign(&signable),
            identity: node.id,
        }
    };
    match &mut response {
        QueryResponse::Replied { signatures, .. } | QueryResponse::Rejected { signatures, .. } => {
            signatures.push(signature);
        }
    }
    cbor_response(&response)
}

/// Splits read_state paths into byte labels.
fn paths_of(req: &Request) -> Result<Vec<Vec<Vec<u8>>>, Refusal> {
    match &req.content {
        EnvelopeContent::ReadState { paths, .. } => Ok(paths
            .iter()
            .map(|p| p.iter().map(|l| l.as_bytes().to_vec()).collect())
            .collect()),
        _ => Err(Refusal::bad(
            "Could not parse body as read_state message: the request_type is not \"read_state\"",
        )),
    }
}

fn not_found_path() -> Refusal {
    Refusal {
        status: 404,
        message: "Invalid path requested.".into(),
    }
}

/// Checks that `sender` (with delegation `targets`) may read `paths` through the canister
/// endpoint of `effective`, as the replica's `verify_paths` does.
fn verify_canister_paths(
    cert: &super::Certification,
    sender: &Principal,
    targets: &Targets,
    paths: &[Vec<Vec<u8>>],
    effective: &Principal,
) -> Result<(), Refusal> {
    let mut request_id: Option<&[u8]> = None;
    for path in paths {
        let labels: Vec<&[u8]> = path.iter().map(Vec::as_slice).collect();
        match labels.as_slice() {
            [b"time"]
            | [b"subnet"]
            | [b"subnet", _]
            | [b"subnet", _, b"public_key" | b"node" | b"canister_ranges"] => {}
            [b"subnet", _, b"node", _] | [b"subnet", _, b"node", _, b"public_key"] => {}
            [b"canister", id, b"controllers" | b"module_hash"]
            | [b"canister", id, b"metadata", _] => {
                let id = Principal::try_from_slice(id).map_err(|e| {
                    Refusal::bad(format!("Could not parse principal id in path: {e}"))
                })?;
                if id != *effective {
                    return Err(Refusal::bad(format!(
                        "Effective principal id in URL {effective} does not match requested principal id: {id}."
                    )));
                }
            }
            [b"request_status", rid]
            | [
                b"request_status",
                rid,
                b"status" | b"reply" | b"reject_code" | b"reject_message" | b"error_code",
            ] => {
                if rid.len() != 32 {
                    return Err(Refusal::bad(
                        "Invalid request id in paths. Maybe the request ID is not of 32 bytes in length?!",
                    ));
                }
                if let Some(prev) = request_id
                    && prev != *rid
                {
                    return Err(Refusal::bad(format!(
                        "More than one non-unique request ID exists in request_status paths: {} and {}.",
                        hex::encode(prev),
                        hex::encode(rid)
                    )));
                }
                request_id = Some(rid);
                let mut key = [0u8; 32];
                key.copy_from_slice(rid);
                if let Some(record) = cert.record(&key) {
                    if record.sender != *sender {
                        return Err(Refusal {
                            status: 403,
                            message:
                                "The user tries to access Request ID not signed by the caller."
                                    .into(),
                        });
                    }
                    if let Some(t) = targets
                        && !t.contains(&record.canister)
                    {
                        return Err(Refusal {
                            status: 403,
                            message: "The user tries to access request IDs for canisters not belonging to sender delegation targets.".into(),
                        });
                    }
                }
            }
            _ => return Err(not_found_path()),
        }
    }
    Ok(())
}

/// Checks that `paths` are what the subnet endpoint of `subnet` serves: `time`, the subnet
/// paths and the subnet's own `canister_ranges`.
fn verify_subnet_paths(paths: &[Vec<Vec<u8>>], subnet: &Principal) -> Result<(), Refusal> {
    for path in paths {
        let labels: Vec<&[u8]> = path.iter().map(Vec::as_slice).collect();
        match labels.as_slice() {
            [b"time"]
            | [b"subnet"]
            | [b"subnet", _]
            | [b"subnet", _, b"public_key" | b"canister_ranges" | b"node"] => {}
            [b"subnet", _, b"node", _] | [b"subnet", _, b"node", _, b"public_key"] => {}
            [b"canister_ranges", id] if *id == subnet.as_slice() => {}
            _ => return Err(not_found_path()),
        }
    }
    Ok(())
}

/// Whose state a read_state request reads: the canister or the subnet in its URL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadStateScope {
    /// `.../canister/<ecid>/read_state`: the paths the replica lets a sender read through a
    /// canister, certified by the canister's subnet.
    Canister,
    /// `.../subnet/<sid>/read_state`: `time`, `subnet/...` and `canister_ranges/<sid>`,
    /// certified by that subnet (or the root key for the root subnet).
    Subnet,
}

/// `POST .../canister/<ecid>/read_state` and `POST .../subnet/<sid>/read_state`: `id` is the
/// canister or subnet id of the URL, as `scope` says.
pub async fn read_state(
    http: Arc<InstanceHttp>,
    scope: ReadStateScope,
    id: &str,
    body: Bytes,
) -> Response {
    let what = match scope {
        ReadStateScope::Canister => "effective canister id",
        ReadStateScope::Subnet => "effective subnet id",
    };
    let effective = match principal_in_url(id, what) {
        Ok(p) => p,
        Err(r) => return refusal(r),
    };
    let req = match parse(&body, "read_state") {
        Ok(r) => r,
        Err(r) => return refusal(r),
    };
    let answer = (|| {
        let mut paths = paths_of(&req)?;
        let mut cert = http.cert();
        let signer = match scope {
            ReadStateScope::Canister => {
                let targets = req.authenticate(http.validation_time(cert.time()))?;
                verify_canister_paths(&cert, req.content.sender(), &targets, &paths, &effective)?;
                cert.signer_for(&effective)
            }
            ReadStateScope::Subnet => {
                let signer = if effective == cert.keys.root_subnet {
                    Signer::Root
                } else {
                    match cert.keys.subnet_by_id(&effective) {
                        Some(i) => Signer::Subnet(i),
                        None => {
                            return Err(Refusal {
                                status: 404,
                                message: format!("Subnet {effective} not found"),
                            });
                        }
                    }
                };
                req.authenticate(http.validation_time(cert.time()))?;
                verify_subnet_paths(&paths, &effective)?;
                signer
            }
        };
        paths.push(vec![b"time".to_vec()]);
        Ok::<_, Refusal>(cert.certificate(&paths, signer))
    })();
    match answer {
        Ok(certificate) => cbor_response(&ReadStateAnswer { certificate }),
        Err(r) => refusal(r),
    }
}

#[derive(Serialize)]
struct Status {
    ic_api_version: &'static str,
    impl_version: String,
    #[serde(with = "serde_bytes")]
    root_key: Vec<u8>,
    replica_health_status: &'static str,
    certified_height: u64,
}

/// `GET /api/v2/status`.
pub async fn status(http: Arc<InstanceHttp>) -> Response {
    let cert = http.cert();
    cbor_response(&Status {
        ic_api_version: "0.18.0",
        impl_version: crate::identity(),
        root_key: cert.keys.root.der.clone(),
        replica_health_status: "healthy",
        certified_height: cert.round(),
    })
}
