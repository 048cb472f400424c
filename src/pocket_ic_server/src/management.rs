//! The management canister (`aaaaa-aa`) by name: every method of the IC's management canister
//! is a [`ManagementMethod`], executed by this server ([`Executed`], as
//! `crate::instance`'s canister manager runs it), accepted by the IC only from canisters
//! ([`CanisterOnly`]) or not implemented here ([`Refused`]); and the rejects of the methods a
//! user's ingress message may not call, as the IC's ingress filter words them.
//!
//! Methods only canisters may call (e.g. `create_canister`, `raw_rand`, `http_request`) are
//! rejected as the IC's ingress filter rejects them; the other methods the IC offers (snapshots,
//! canister logs) are rejected with a message naming this server.

use pocket_ic::{ErrorCode, RejectResponse};

use crate::reject::reject;

/// Cycles of a canister created with `amount = null` (the IC's provisional default, 100 T).
pub const DEFAULT_PROVISIONAL_CYCLES: u128 = 100_000_000_000_000;

/// Largest chunk of the wasm chunk store (1 MiB).
pub const MAX_CHUNK_SIZE: usize = 1 << 20;

/// Most controllers a canister can have.
pub const MAX_CONTROLLERS: usize = 10;

/// Declares an enum of management methods, each variant with its Candid name, and the
/// conversions between them: each name is written once.
macro_rules! methods {
    ($(#[$doc:meta])* $enum:ident { $($variant:ident = $name:literal,)* }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum $enum {
            $(
                #[doc = concat!("`", $name, "`")]
                $variant,
            )*
        }

        impl $enum {
            /// Every method of this kind.
            pub const ALL: &[$enum] = &[$($enum::$variant),*];

            /// The method's Candid name.
            pub fn name(self) -> &'static str {
                match self {
                    $($enum::$variant => $name,)*
                }
            }

            fn from_name(name: &str) -> Option<$enum> {
                match name {
                    $($name => Some($enum::$variant),)*
                    _ => None,
                }
            }
        }
    };
}

methods! {
    /// Management methods this server executes for users' ingress messages.
    Executed {
        ProvisionalCreateCanisterWithCycles = "provisional_create_canister_with_cycles",
        ProvisionalTopUpCanister = "provisional_top_up_canister",
        DepositCycles = "deposit_cycles",
        InstallCode = "install_code",
        InstallChunkedCode = "install_chunked_code",
        UploadChunk = "upload_chunk",
        ClearChunkStore = "clear_chunk_store",
        StoredChunks = "stored_chunks",
        UninstallCode = "uninstall_code",
        UpdateSettings = "update_settings",
        CanisterStatus = "canister_status",
        StartCanister = "start_canister",
        StopCanister = "stop_canister",
        DeleteCanister = "delete_canister",
    }
}

methods! {
    /// Management methods the IC accepts only from canisters.
    CanisterOnly {
        CreateCanister = "create_canister",
        RawRand = "raw_rand",
        HttpRequest = "http_request",
        EcdsaPublicKey = "ecdsa_public_key",
        SignWithEcdsa = "sign_with_ecdsa",
        SchnorrPublicKey = "schnorr_public_key",
        SignWithSchnorr = "sign_with_schnorr",
        VetkdPublicKey = "vetkd_public_key",
        VetkdDeriveKey = "vetkd_derive_key",
        CanisterInfo = "canister_info",
        CanisterMetadata = "canister_metadata",
        SubnetInfo = "subnet_info",
        NodeMetricsHistory = "node_metrics_history",
        BitcoinGetBalance = "bitcoin_get_balance",
        BitcoinGetUtxos = "bitcoin_get_utxos",
        BitcoinSendTransaction = "bitcoin_send_transaction",
        BitcoinGetCurrentFeePercentiles = "bitcoin_get_current_fee_percentiles",
        BitcoinGetBlockHeaders = "bitcoin_get_block_headers",
    }
}

methods! {
    /// Other management methods of the IC, which this server does not execute.
    Refused {
        TakeCanisterSnapshot = "take_canister_snapshot",
        LoadCanisterSnapshot = "load_canister_snapshot",
        ListCanisterSnapshots = "list_canister_snapshots",
        DeleteCanisterSnapshot = "delete_canister_snapshot",
        ReadCanisterSnapshotMetadata = "read_canister_snapshot_metadata",
        ReadCanisterSnapshotData = "read_canister_snapshot_data",
        UploadCanisterSnapshotMetadata = "upload_canister_snapshot_metadata",
        UploadCanisterSnapshotData = "upload_canister_snapshot_data",
        FetchCanisterLogs = "fetch_canister_logs",
        RenameCanister = "rename_canister",
    }
}

/// A method of the IC's management canister, by what this server does with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ManagementMethod {
    /// Executed.
    Executed(Executed),
    /// Rejected: the IC accepts it only from canisters.
    CanisterOnly(CanisterOnly),
    /// Rejected: this server does not implement it.
    Refused(Refused),
}

impl ManagementMethod {
    /// The method called `name`, if the management canister has one.
    pub fn from_name(name: &str) -> Option<ManagementMethod> {
        Executed::from_name(name)
            .map(ManagementMethod::Executed)
            .or_else(|| CanisterOnly::from_name(name).map(ManagementMethod::CanisterOnly))
            .or_else(|| Refused::from_name(name).map(ManagementMethod::Refused))
    }

    /// The method's Candid name.
    pub fn name(self) -> &'static str {
        match self {
            ManagementMethod::Executed(m) => m.name(),
            ManagementMethod::CanisterOnly(m) => m.name(),
            ManagementMethod::Refused(m) => m.name(),
        }
    }
}

/// The reject of a management method this server does not implement.
pub fn not_implemented(method: &str) -> RejectResponse {
    reject(
        ErrorCode::UnknownManagementMessage,
        format!(
            "{} (engine: {}) does not implement the management canister method `{method}`",
            crate::SERVER_NAME,
            crate::ENGINE_LABEL
        ),
        true,
    )
}

/// Checks an ingress message to the management canister as the IC's ingress filter does: the
/// method this server executes, or the reject.
pub fn check_ingress_method(method: &str) -> Result<Executed, RejectResponse> {
    match ManagementMethod::from_name(method) {
        Some(ManagementMethod::Executed(m)) => Ok(m),
        Some(ManagementMethod::CanisterOnly(_)) => Err(reject(
            ErrorCode::CanisterRejectedMessage,
            format!("Only canisters can call ic00 method {method}"),
            true,
        )),
        Some(ManagementMethod::Refused(_)) => Err(not_implemented(method)),
        None => Err(reject(
            ErrorCode::CanisterMethodNotFound,
            format!("Management canister has no method '{method}'"),
            true,
        )),
    }
}

/// The answer to a query to the management canister (none are implemented).
pub fn unsupported_query(method: &str) -> RejectResponse {
    let mut r = not_implemented(method);
    r.certified = false;
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ingress_filter() {
        assert_eq!(
            check_ingress_method("install_code"),
            Ok(Executed::InstallCode)
        );
        let r = check_ingress_method("raw_rand").unwrap_err();
        assert_eq!(r.error_code, ErrorCode::CanisterRejectedMessage);
        assert_eq!(
            r.reject_message,
            "Only canisters can call ic00 method raw_rand"
        );
        let r = check_ingress_method("take_canister_snapshot").unwrap_err();
        assert_eq!(r.error_code, ErrorCode::UnknownManagementMessage);
        assert!(r.reject_message.contains("offline-pocket-ic"));
        assert!(r.reject_message.contains("`take_canister_snapshot`"));
        let r = check_ingress_method("frobnicate").unwrap_err();
        assert_eq!(r.error_code, ErrorCode::CanisterMethodNotFound);
        assert_eq!(
            r.reject_message,
            "Management canister has no method 'frobnicate'"
        );
    }

    #[test]
    fn every_name_parses_to_its_method() {
        let all = Executed::ALL
            .iter()
            .map(|&m| ManagementMethod::Executed(m))
            .chain(
                CanisterOnly::ALL
                    .iter()
                    .map(|&m| ManagementMethod::CanisterOnly(m)),
            )
            .chain(Refused::ALL.iter().map(|&m| ManagementMethod::Refused(m)));
        let mut names = std::collections::BTreeSet::new();
        for method in all {
            assert!(names.insert(method.name()), "{} twice", method.name());
            assert_eq!(ManagementMethod::from_name(method.name()), Some(method));
        }
        assert_eq!(names.len(), 14 + 18 + 10);
        assert_eq!(ManagementMethod::from_name("frobnicate"), None);
    }
}
