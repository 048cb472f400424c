//! The two methods of the IC's system canisters that icp-cli's `deploy` needs to create a
//! canister, served by the server itself (this server hosts no NNS):
//!
//! - the cycles minting canister's query `get_default_subnets`
//!   (`rkp4c-7iaaa-aaaaa-aaaca-cai`): the instance's application subnets;
//! - the cycles ledger's update `create_canister` (`um5iw-rqaaa-aaaaq-qaaba-cai`): creates a
//!   canister with the requested cycles on the requested subnet, controlled by the caller
//!   unless the settings say otherwise, as `provisional_create_canister_with_cycles` would.
//!   The caller's cycles balance is neither kept nor debited: the cycles are minted, as the
//!   provisional method mints them on a local replica.
//!
//! Every other method of these canisters, and every other system canister, is absent: calls
//! get the IC's "canister not found" reject.

use candid::{CandidType, Decode, Encode, Nat, Principal};
use ic_management_canister_types::{
    CanisterIdRecord, CanisterSettings, ProvisionalCreateCanisterWithCyclesArgs,
};
use pocket_ic::common::rest::{RawCanisterCall, RawCanisterResult, RawEffectivePrincipal};
use serde::Deserialize;

use crate::error::ServerError;
use crate::instance::Instance;

/// The cycles minting canister's id.
pub const CYCLES_MINTING_CANISTER: Principal =
    Principal::from_slice(&[0, 0, 0, 0, 0, 0, 0, 4, 1, 1]);

/// The cycles ledger's id.
pub const CYCLES_LEDGER: Principal = Principal::from_slice(&[0, 0, 0, 0, 2, 0x10, 0, 2, 1, 1]);

#[derive(Debug, CandidType, Deserialize)]
enum SubnetSelection {
    Subnet { subnet: Principal },
    Filter(SubnetFilter),
}

#[derive(Debug, CandidType, Deserialize)]
struct SubnetFilter {
    subnet_type: Option<String>,
}

#[derive(Debug, CandidType, Deserialize)]
struct CreationArgs {
    subnet_selection: Option<SubnetSelection>,
    settings: Option<CanisterSettings>,
}

#[derive(Debug, CandidType, Deserialize)]
struct CreateCanisterArgs {
    amount: Nat,
    creation_args: Option<CreationArgs>,
}

#[derive(Debug, CandidType)]
struct CreateCanisterSuccess {
    block_id: Nat,
    canister_id: Principal,
}

#[derive(Debug, CandidType)]
enum CreateCanisterError {
    GenericError { message: String, error_code: Nat },
}

#[derive(Debug, CandidType)]
enum CreateCanisterResponse {
    Ok(CreateCanisterSuccess),
    Err(CreateCanisterError),
}

fn reject(message: String) -> pocket_ic::RejectResponse {
    crate::reject::reject(pocket_ic::ErrorCode::CanisterRejectedMessage, message, true)
}

/// The answer of a system canister's query this server serves, if it serves it.
pub fn query(inst: &Instance, canister: &Principal, method: &str) -> Option<RawCanisterResult> {
    if *canister != CYCLES_MINTING_CANISTER || method != "get_default_subnets" {
        return None;
    }
    let subnets: Vec<Principal> = inst.topology().subnet_configs.keys().copied().collect();
    Some(match Encode!(&subnets) {
        Ok(bytes) => RawCanisterResult::Ok(bytes),
        Err(e) => RawCanisterResult::Err(reject(e.to_string())),
    })
}

/// Executes a system canister's update this server serves, if it serves it.
pub fn call(
    inst: &mut Instance,
    sender: &Principal,
    canister: &Principal,
    method: &str,
    arg: &[u8],
) -> Result<Option<Result<Vec<u8>, pocket_ic::RejectResponse>>, ServerError> {
    if *canister != CYCLES_LEDGER || method != "create_canister" {
        return Ok(None);
    }
    let args = match Decode!(arg, CreateCanisterArgs) {
        Ok(a) => a,
        Err(e) => {
            return Ok(Some(Err(reject(format!(
                "failed to decode create_canister arguments: {e}"
            )))));
        }
    };
    let (subnet, mut settings) = match args.creation_args {
        None => (None, None),
        Some(c) => (
            match c.subnet_selection {
                Some(SubnetSelection::Subnet { subnet }) => Some(subnet),
                _ => None,
            },
            c.settings,
        ),
    };
    let s = settings.get_or_insert_with(CanisterSettings::default);
    if s.controllers.is_none() {
        s.controllers = Some(vec![*sender]);
    }
    let payload = match Encode!(&ProvisionalCreateCanisterWithCyclesArgs {
        amount: Some(args.amount),
        settings,
        specified_id: None,
        sender_canister_version: None,
    }) {
        Ok(p) => p,
        Err(e) => return Ok(Some(Err(reject(e.to_string())))),
    };
    let result = inst.execute(RawCanisterCall {
        sender: sender.as_slice().to_vec(),
        canister_id: Principal::management_canister().as_slice().to_vec(),
        effective_principal: match subnet {
            Some(s) => RawEffectivePrincipal::SubnetId(s.as_slice().to_vec()),
            None => RawEffectivePrincipal::None,
        },
        method: "provisional_create_canister_with_cycles".into(),
        payload,
    })?;
    let response = match result {
        RawCanisterResult::Ok(bytes) => match Decode!(&bytes, CanisterIdRecord) {
            Ok(r) => CreateCanisterResponse::Ok(CreateCanisterSuccess {
                block_id: Nat::from(0u32),
                canister_id: r.canister_id,
            }),
            Err(e) => CreateCanisterResponse::Err(CreateCanisterError::GenericError {
                message: e.to_string(),
                error_code: Nat::from(0u32),
            }),
        },
        RawCanisterResult::Err(r) => {
            CreateCanisterResponse::Err(CreateCanisterError::GenericError {
                message: r.reject_message,
                error_code: Nat::from(r.error_code as u64),
            })
        }
    };
    Ok(Some(Encode!(&response).map_err(|e| reject(e.to_string()))))
}
