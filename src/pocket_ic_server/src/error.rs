//! The server's error type: everything a REST request can fail with (calls to canisters fail
//! with the IC's reject responses instead, see [`crate::reject`]).

use candid::Principal;

/// Why a REST request failed. Each variant maps to an HTTP status and a JSON body
/// `{"message": ...}`, which the `pocket-ic` client reports verbatim.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServerError {
    /// No instance with this id was ever created.
    #[error("instance {0} not found")]
    InstanceNotFound(usize),
    /// The instance was deleted.
    #[error("instance {0} was deleted")]
    InstanceDeleted(usize),
    /// The canister does not exist in the instance.
    #[error("canister {0} not found")]
    CanisterNotFound(Principal),
    /// The canister has no Wasm module (it was created but not installed, or uninstalled).
    #[error("canister {0} has no Wasm module")]
    NoWasmModule(Principal),
    /// The request body is not the JSON the endpoint expects.
    #[error("invalid request body for {endpoint}: {message}")]
    BadRequest {
        /// The endpoint.
        endpoint: &'static str,
        /// What is wrong.
        message: String,
    },
    /// The instance configuration asks for something the offline engine does not offer.
    #[error("{0}")]
    UnsupportedConfig(String),
    /// An endpoint of the protocol this server does not implement.
    #[error(
        "{server} does not implement `{method} {path}` (engine: {engine}; see src/pocket_ic_server/README.md for the endpoints it serves)",
        server = crate::SERVER_NAME,
        engine = crate::ENGINE_LABEL
    )]
    UnsupportedEndpoint {
        /// HTTP method.
        method: String,
        /// Request path.
        path: String,
    },
    /// `set_time` would move time backwards.
    #[error("cannot set the time back from {current} ns to {requested} ns")]
    TimeIntoPast {
        /// Current time.
        current: u64,
        /// Requested time.
        requested: u64,
    },
    /// No blob with this id is stored.
    #[error("blob {0} not found in the blob store")]
    BlobNotFound(String),
    /// A gzip blob or wasm module could not be decompressed.
    #[error("decompressing gzip data: {0}")]
    Gzip(std::io::Error),
    /// The ingress message id is unknown.
    #[error("ingress message {0} not found")]
    MessageNotFound(String),
    /// An ingress message did not complete within the rounds `await` runs.
    #[error("ingress message {0} did not complete after {1} rounds")]
    MessageDidNotComplete(String, usize),
    /// The caller asked for the status of another caller's message.
    #[error("the user tries to access Request ID not signed by the caller")]
    Forbidden,
    /// Binding, the port file or another file operation of the server failed.
    #[error("{what}: {source}")]
    Io {
        /// What the server was doing.
        what: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The offline engine failed (not the canister: its traps are reject responses).
    #[error("offline engine: {0}")]
    Engine(#[from] offline_engine::EngineError),
    /// A task running the engine panicked or was cancelled.
    #[error("engine task failed: {0}")]
    Task(String),
}

impl ServerError {
    /// The HTTP status this error is answered with.
    pub fn status(&self) -> u16 {
        match self {
            ServerError::InstanceNotFound(_)
            | ServerError::BlobNotFound(_)
            | ServerError::UnsupportedEndpoint { .. } => 404,
            ServerError::Forbidden => 403,
            ServerError::Engine(_) | ServerError::Task(_) => 500,
            _ => 400,
        }
    }
}
