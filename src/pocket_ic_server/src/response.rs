//! The REST protocol's response helpers: JSON bodies, `pocket-ic`'s `{"message": ...}` errors
//! with the error's HTTP status, and JSON request parsing. A leaf: it imports nothing of the
//! crate but its error type.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use pocket_ic::common::rest::ApiResponse;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::error::ServerError;

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
