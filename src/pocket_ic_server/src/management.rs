//! The management canister (`aaaaa-aa`) as users reach it through ingress messages: canister
//! creation with cycles, install / reinstall / upgrade (whole or from the chunk store), settings,
//! status, start, stop, delete, uninstall, top-up and deposit of cycles.
//!
//! Methods only canisters may call (e.g. `create_canister`, `raw_rand`, `http_request`) are
//! rejected as the IC's ingress filter rejects them; the other methods the IC offers (snapshots,
//! canister logs, threshold keys, Bitcoin) are rejected with a message naming this server.

use candid::utils::{ArgumentDecoder, ArgumentEncoder};
use candid::{Nat, Principal};
use ic_management_canister_types::{
    CanisterIdRecord, CanisterInstallMode, CanisterSettings, CanisterStatusResult,
    CanisterStatusType, ChunkHash, InstallChunkedCodeArgs, InstallCodeArgs, MemoryMetrics,
    ProvisionalCreateCanisterWithCyclesArgs, ProvisionalTopUpCanisterArgs, QueryStats,
    UninstallCodeArgs, UpdateSettingsArgs, UploadChunkArgs, WasmMemoryPersistence,
};
use offline_engine::subnet::CanisterStatus;
use offline_engine::{Canister, EngineError, MessageResult, Settings};
use pocket_ic::common::rest::RawEffectivePrincipal;
use pocket_ic::{ErrorCode, RejectResponse};
use sha2::{Digest, Sha256};

use crate::blob_store::{gunzip, is_gzip};
use crate::error::ServerError;
use crate::instance::{CanisterEntry, Instance, default_settings};
use crate::reject::{self, reject};
use crate::topology::canister_id;

/// Cycles of a canister created with `amount = null` (the IC's provisional default, 100 T).
pub const DEFAULT_PROVISIONAL_CYCLES: u128 = 100_000_000_000_000;

/// Largest chunk of the wasm chunk store (1 MiB).
pub const MAX_CHUNK_SIZE: usize = 1 << 20;

/// Most controllers a canister can have.
pub const MAX_CONTROLLERS: usize = 10;

/// Management methods this server executes.
pub const IMPLEMENTED: &[&str] = &[
    "provisional_create_canister_with_cycles",
    "provisional_top_up_canister",
    "deposit_cycles",
    "install_code",
    "install_chunked_code",
    "upload_chunk",
    "clear_chunk_store",
    "stored_chunks",
    "uninstall_code",
    "update_settings",
    "canister_status",
    "start_canister",
    "stop_canister",
    "delete_canister",
];

/// Management methods the IC accepts only from canisters.
const CANISTER_ONLY: &[&str] = &[
    "create_canister",
    "raw_rand",
    "http_request",
    "ecdsa_public_key",
    "sign_with_ecdsa",
    "schnorr_public_key",
    "sign_with_schnorr",
    "vetkd_public_key",
    "vetkd_derive_key",
    "canister_info",
    "canister_metadata",
    "subnet_info",
    "node_metrics_history",
    "bitcoin_get_balance",
    "bitcoin_get_utxos",
    "bitcoin_send_transaction",
    "bitcoin_get_current_fee_percentiles",
    "bitcoin_get_block_headers",
];

/// Other management methods of the IC, which this server does not execute.
const NOT_IMPLEMENTED: &[&str] = &[
    "take_canister_snapshot",
    "load_canister_snapshot",
    "list_canister_snapshots",
    "delete_canister_snapshot",
    "read_canister_snapshot_metadata",
    "read_canister_snapshot_data",
    "upload_canister_snapshot_metadata",
    "upload_canister_snapshot_data",
    "fetch_canister_logs",
    "rename_canister",
];

fn not_implemented(method: &str) -> RejectResponse {
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

/// Checks an ingress message to the management canister as the IC's ingress filter does.
pub fn check_ingress_method(method: &str) -> Result<(), RejectResponse> {
    if IMPLEMENTED.contains(&method) {
        Ok(())
    } else if CANISTER_ONLY.contains(&method) {
        Err(reject(
            ErrorCode::CanisterRejectedMessage,
            format!("Only canisters can call ic00 method {method}"),
            true,
        ))
    } else if NOT_IMPLEMENTED.contains(&method) {
        Err(not_implemented(method))
    } else {
        Err(reject(
            ErrorCode::CanisterMethodNotFound,
            format!("Management canister has no method '{method}'"),
            true,
        ))
    }
}

/// The answer to a query to the management canister (none are implemented).
pub fn unsupported_query(method: &str) -> RejectResponse {
    let mut r = not_implemented(method);
    r.certified = false;
    r
}

fn decode<T: for<'a> ArgumentDecoder<'a>>(payload: &[u8]) -> Result<T, RejectResponse> {
    candid::decode_args(payload).map_err(|e| {
        reject(
            ErrorCode::InvalidManagementPayload,
            format!("Error decoding candid: {e}"),
            true,
        )
    })
}

fn encode<T: ArgumentEncoder>(value: T) -> Result<Vec<u8>, RejectResponse> {
    candid::encode_args(value).map_err(|e| {
        reject(
            ErrorCode::CanisterWasmEngineError,
            format!("Error encoding the management canister's reply: {e}"),
            true,
        )
    })
}

fn nat_to_u128(n: &Nat, what: &str) -> Result<u128, RejectResponse> {
    u128::try_from(&n.0).map_err(|_| {
        reject(
            ErrorCode::InvalidManagementPayload,
            format!("{what} {n} does not fit in 128 bits"),
            true,
        )
    })
}

fn invalid_controller(
    canister: &Principal,
    controllers: &[Principal],
    sender: &Principal,
) -> RejectResponse {
    let list: Vec<String> = controllers.iter().map(Principal::to_text).collect();
    reject(
        ErrorCode::CanisterInvalidController,
        format!(
            "Only the controllers of the canister {canister} can control it.\nCanister's controllers: {}\nSender's ID: {sender}",
            list.join(" ")
        ),
        true,
    )
}

fn install_error(canister: &Principal, e: EngineError) -> RejectResponse {
    match e {
        EngineError::InstallFailed(exec) => match reject::outcome(canister, &exec.result, true) {
            Err(r) => r,
            Ok(_) => reject(
                ErrorCode::CanisterWasmEngineError,
                format!("Error from Canister {canister}: install failed"),
                true,
            ),
        },
        EngineError::Instrument(_) | EngineError::Module(_) => reject(
            ErrorCode::CanisterInvalidWasm,
            format!(
                "Error from Canister {canister}: Wasm module of canister {canister} is not valid: {e}"
            ),
            true,
        ),
        other => reject(
            ErrorCode::CanisterWasmEngineError,
            format!("Error from Canister {canister}: the offline engine failed: {other}"),
            true,
        ),
    }
}

/// Applies the fields `update` sets to `settings`.
fn apply_settings(
    settings: &mut ic_management_canister_types::DefiniteCanisterSettings,
    update: CanisterSettings,
) -> Result<(), RejectResponse> {
    if let Some(c) = update.controllers {
        if c.len() > MAX_CONTROLLERS {
            return Err(reject(
                ErrorCode::InvalidManagementPayload,
                format!(
                    "Invalid settings: {} controllers exceed the maximum of {MAX_CONTROLLERS}",
                    c.len()
                ),
                true,
            ));
        }
        settings.controllers = c;
    }
    if let Some(v) = update.compute_allocation {
        settings.compute_allocation = v;
    }
    if let Some(v) = update.memory_allocation {
        settings.memory_allocation = v;
    }
    if let Some(v) = update.freezing_threshold {
        settings.freezing_threshold = v;
    }
    if let Some(v) = update.reserved_cycles_limit {
        settings.reserved_cycles_limit = v;
    }
    if let Some(v) = update.log_visibility {
        settings.log_visibility = v;
    }
    if let Some(v) = update.wasm_memory_limit {
        settings.wasm_memory_limit = v;
    }
    if let Some(v) = update.wasm_memory_threshold {
        settings.wasm_memory_threshold = v;
    }
    if let Some(v) = update.environment_variables {
        settings.environment_variables = v;
    }
    Ok(())
}

impl Instance {
    /// Executes management method `method` for `sender`; `effective` (the effective principal of
    /// the ingress message) chooses the subnet of a new canister. `Err(ServerError)` only when the
    /// engine itself fails; the method's own failures are the reject in the inner result.
    pub(crate) fn call_management(
        &mut self,
        sender: Principal,
        method: &str,
        payload: &[u8],
        effective: &RawEffectivePrincipal,
    ) -> Result<Result<Vec<u8>, RejectResponse>, ServerError> {
        Ok(match method {
            "provisional_create_canister_with_cycles" => {
                decode::<(ProvisionalCreateCanisterWithCyclesArgs,)>(payload)
                    .and_then(|(a,)| self.create_canister(sender, a, effective))
                    .and_then(|canister_id| encode((CanisterIdRecord { canister_id },)))
            }
            "provisional_top_up_canister" => decode::<(ProvisionalTopUpCanisterArgs,)>(payload)
                .and_then(|(a,)| {
                    let amount = nat_to_u128(&a.amount, "amount")?;
                    self.existing(&a.canister_id)?;
                    self.credit(&a.canister_id, amount);
                    encode(())
                }),
            // Ingress messages carry no cycles: there is nothing to deposit.
            "deposit_cycles" => decode::<(CanisterIdRecord,)>(payload).and_then(|(a,)| {
                self.existing(&a.canister_id)?;
                encode(())
            }),
            "install_code" => match decode::<(InstallCodeArgs,)>(payload) {
                Ok((a,)) => self.install(sender, a.canister_id, a.mode, a.wasm_module, &a.arg)?,
                Err(r) => Err(r),
            },
            "install_chunked_code" => match decode::<(InstallChunkedCodeArgs,)>(payload) {
                Ok((a,)) => match self.assemble_chunks(sender, &a) {
                    Ok(wasm) => self.install(sender, a.target_canister, a.mode, wasm, &a.arg)?,
                    Err(r) => Err(r),
                },
                Err(r) => Err(r),
            },
            "upload_chunk" => decode::<(UploadChunkArgs,)>(payload).and_then(|(a,)| {
                if a.chunk.len() > MAX_CHUNK_SIZE {
                    return Err(reject(
                        ErrorCode::CanisterContractViolation,
                        format!(
                            "Wasm chunk size {} exceeds the maximum chunk size of {MAX_CHUNK_SIZE}",
                            a.chunk.len()
                        ),
                        true,
                    ));
                }
                let entry = self.controlled(&a.canister_id, &sender)?;
                let hash = Sha256::digest(&a.chunk).to_vec();
                entry.chunks.insert(hash.clone(), a.chunk);
                encode((ChunkHash { hash },))
            }),
            "clear_chunk_store" => decode::<(CanisterIdRecord,)>(payload).and_then(|(a,)| {
                self.controlled(&a.canister_id, &sender)?.chunks.clear();
                encode(())
            }),
            "stored_chunks" => decode::<(CanisterIdRecord,)>(payload).and_then(|(a,)| {
                let entry = self.controlled(&a.canister_id, &sender)?;
                let hashes: Vec<ChunkHash> = entry
                    .chunks
                    .keys()
                    .map(|hash| ChunkHash { hash: hash.clone() })
                    .collect();
                encode((hashes,))
            }),
            "uninstall_code" => decode::<(UninstallCodeArgs,)>(payload).and_then(|(a,)| {
                let subnet = self.controlled(&a.canister_id, &sender)?.subnet;
                let code = self.engines[subnet].uninstall(a.canister_id.as_slice());
                let entry = self.existing(&a.canister_id)?;
                if let Some(code) = code {
                    entry.empty_cycles = code.cycles();
                }
                entry.module_size = 0;
                entry.version += 1;
                encode(())
            }),
            "update_settings" => decode::<(UpdateSettingsArgs,)>(payload).and_then(|(a,)| {
                let entry = self.controlled(&a.canister_id, &sender)?;
                apply_settings(&mut entry.settings, a.settings)?;
                let controllers = entry
                    .settings
                    .controllers
                    .iter()
                    .map(|c| c.as_slice().to_vec())
                    .collect();
                let (wasm_memory_limit, memory_allocation) = entry.memory_limits();
                entry.version += 1;
                if let Some(code) = self.code_mut(&a.canister_id) {
                    code.set_controllers(controllers);
                    code.set_memory_limits(wasm_memory_limit, memory_allocation);
                }
                encode(())
            }),
            "canister_status" => decode::<(CanisterIdRecord,)>(payload).and_then(|(a,)| {
                let status = self.status(&a.canister_id, &sender)?;
                encode((status,))
            }),
            "start_canister" => decode::<(CanisterIdRecord,)>(payload).and_then(|(a,)| {
                self.controlled(&a.canister_id, &sender)?;
                if let Some(engine) = self.engine_of(&a.canister_id) {
                    engine.start(a.canister_id.as_slice());
                }
                self.cancel_stops(&a.canister_id);
                encode(())
            }),
            // `stop_canister` answers once the canister stopped (`Instance::stop_canister`).
            "delete_canister" => decode::<(CanisterIdRecord,)>(payload).and_then(|(a,)| {
                self.controlled(&a.canister_id, &sender)?;
                if self.status_of(&a.canister_id) != Some(CanisterStatusType::Stopped) {
                    return Err(reject(
                        ErrorCode::CanisterNotStopped,
                        format!(
                            "Canister {} must be stopped before it is deleted.",
                            a.canister_id
                        ),
                        true,
                    ));
                }
                if let Some(engine) = self.engine_of(&a.canister_id) {
                    engine.remove(a.canister_id.as_slice());
                }
                self.canisters.remove(&a.canister_id);
                encode(())
            }),
            other => check_ingress_method(other).and_then(|()| Err(not_implemented(other))),
        })
    }

    /// `stop_canister` from the ingress message `message`: the canister stops at once when no
    /// call context of it is open; otherwise it is stopping (it finishes its calls and takes no
    /// new ones) and the message is answered in the round it stops.
    pub(crate) fn stop_canister(
        &mut self,
        message: &[u8],
        sender: Principal,
        payload: &[u8],
    ) -> Result<(), ServerError> {
        let answer = decode::<(CanisterIdRecord,)>(payload).and_then(|(a,)| {
            self.controlled(&a.canister_id, &sender)?;
            let status = self
                .engine_of(&a.canister_id)
                .and_then(|e| e.stop(a.canister_id.as_slice()));
            Ok((a.canister_id, status))
        });
        let result = match answer {
            Err(r) => Some(Err(r)),
            Ok((_, Some(CanisterStatus::Stopped) | None)) => Some(encode(())),
            Ok((canister, Some(_))) => {
                self.stopping.push((canister, message.to_vec()));
                None
            }
        };
        if let Some(result) = result {
            self.set_result(message, result);
        }
        Ok(())
    }

    /// The canister `id`, which must exist.
    fn existing(&mut self, id: &Principal) -> Result<&mut CanisterEntry, RejectResponse> {
        self.canisters
            .get_mut(id)
            .ok_or_else(|| reject::canister_not_found(id, true))
    }

    /// The canister `id`, which must exist and be controlled by `sender`.
    fn controlled(
        &mut self,
        id: &Principal,
        sender: &Principal,
    ) -> Result<&mut CanisterEntry, RejectResponse> {
        let entry = self.existing(id)?;
        if !entry.settings.controllers.contains(sender) {
            return Err(invalid_controller(id, &entry.settings.controllers, sender));
        }
        Ok(entry)
    }

    /// The subnet the effective principal names: a subnet id, or a canister id in its range;
    /// none names the first subnet.
    fn subnet_for(&self, effective: &RawEffectivePrincipal) -> Result<usize, RejectResponse> {
        match effective {
            RawEffectivePrincipal::None => Ok(0),
            RawEffectivePrincipal::SubnetId(bytes) => {
                let id = Principal::try_from_slice(bytes).map_err(|e| {
                    reject(
                        ErrorCode::SubnetNotFound,
                        format!("Invalid effective subnet id: {e}"),
                        true,
                    )
                })?;
                self.subnets.iter().position(|s| s.id == id).ok_or_else(|| {
                    reject(
                        ErrorCode::SubnetNotFound,
                        format!("Subnet {id} not found"),
                        true,
                    )
                })
            }
            RawEffectivePrincipal::CanisterId(bytes) => {
                let id = Principal::try_from_slice(bytes).map_err(|e| {
                    reject(
                        ErrorCode::CanisterNotHostedBySubnet,
                        format!("Invalid effective canister id: {e}"),
                        true,
                    )
                })?;
                self.subnets
                    .iter()
                    .position(|s| s.contains(&id))
                    .ok_or_else(|| {
                        reject(
                            ErrorCode::CanisterNotHostedBySubnet,
                            format!(
                                "The effective canister id {id} lies in no subnet of this instance"
                            ),
                            true,
                        )
                    })
            }
        }
    }

    /// Creates a canister: with the specified id (which must lie in a subnet's range and be
    /// free), else with the next free id of the subnet the effective principal names.
    fn create_canister(
        &mut self,
        sender: Principal,
        args: ProvisionalCreateCanisterWithCyclesArgs,
        effective: &RawEffectivePrincipal,
    ) -> Result<Principal, RejectResponse> {
        let cycles = match &args.amount {
            Some(n) => nat_to_u128(n, "amount")?,
            None => DEFAULT_PROVISIONAL_CYCLES,
        };
        let (subnet, id) = match args.specified_id {
            Some(id) => {
                let subnet = self.subnets.iter().position(|s| s.contains(&id)).ok_or_else(|| {
                    reject(
                        ErrorCode::CanisterNotHostedBySubnet,
                        format!(
                            "The specified canister id {id} lies in no subnet of this instance ({} creates no subnets on demand)",
                            crate::SERVER_NAME
                        ),
                        true,
                    )
                })?;
                if self.canisters.contains_key(&id) {
                    return Err(reject(
                        ErrorCode::CanisterIdAlreadyExists,
                        format!("Canister {id} is already installed."),
                        true,
                    ));
                }
                (subnet, id)
            }
            None => {
                let subnet = self.subnet_for(effective)?;
                let mut index = self.next_index[subnet];
                while self.canisters.contains_key(&canister_id(index)) {
                    index += 1;
                }
                if !self.subnets[subnet].contains(&canister_id(index)) {
                    return Err(reject(
                        ErrorCode::MaxNumberOfCanistersReached,
                        "The subnet has no canister ids left",
                        true,
                    ));
                }
                self.next_index[subnet] = index + 1;
                (subnet, canister_id(index))
            }
        };
        let mut settings = default_settings(vec![sender]);
        if let Some(s) = args.settings {
            apply_settings(&mut settings, s)?;
        }
        self.canisters
            .insert(id, CanisterEntry::new(subnet, settings, cycles));
        self.engines[subnet].create(id.as_slice());
        Ok(id)
    }

    /// The wasm module `args` names in the store canister's chunk store.
    fn assemble_chunks(
        &mut self,
        sender: Principal,
        args: &InstallChunkedCodeArgs,
    ) -> Result<Vec<u8>, RejectResponse> {
        let target_subnet = self.controlled(&args.target_canister, &sender)?.subnet;
        let store_id = args.store_canister.unwrap_or(args.target_canister);
        let store = self.controlled(&store_id, &sender)?;
        if store.subnet != target_subnet {
            return Err(reject(
                ErrorCode::CanisterContractViolation,
                format!(
                    "The store canister {store_id} is not on the subnet of {}",
                    args.target_canister
                ),
                true,
            ));
        }
        let mut wasm = Vec::new();
        for ChunkHash { hash } in &args.chunk_hashes_list {
            let chunk = store.chunks.get(hash).ok_or_else(|| {
                reject(
                    ErrorCode::CanisterContractViolation,
                    format!(
                        "Wasm module chunk {} is not in the chunk store of {store_id}",
                        hex::encode(hash)
                    ),
                    true,
                )
            })?;
            wasm.extend_from_slice(chunk);
        }
        let hash = Sha256::digest(&wasm).to_vec();
        if hash != args.wasm_module_hash {
            return Err(reject(
                ErrorCode::CanisterContractViolation,
                format!(
                    "Wasm module hash {} does not match the assembled module's hash {}",
                    hex::encode(&args.wasm_module_hash),
                    hex::encode(&hash)
                ),
                true,
            ));
        }
        Ok(wasm)
    }

    /// install_code in `mode`. Install and reinstall build a fresh canister (stable memory
    /// empty) and keep the old one if init traps; upgrade runs the engine's upgrade (stable
    /// memory kept; the old code and state stay if a hook traps).
    fn install(
        &mut self,
        sender: Principal,
        id: Principal,
        mode: CanisterInstallMode,
        wasm: Vec<u8>,
        arg: &[u8],
    ) -> Result<Result<Vec<u8>, RejectResponse>, ServerError> {
        if let Err(r) = self.controlled(&id, &sender) {
            return Ok(Err(r));
        }
        let wasm = if is_gzip(&wasm) {
            match gunzip(&wasm) {
                Ok(w) => w,
                Err(e) => {
                    return Ok(Err(reject(
                        ErrorCode::CanisterInvalidWasm,
                        format!(
                            "Error from Canister {id}: the gzip-compressed Wasm module is invalid: {e}"
                        ),
                        true,
                    )));
                }
            }
        } else {
            wasm
        };
        let program = match self.programs.load(&wasm) {
            Ok(p) => p,
            Err(e) => return Ok(Err(install_error(&id, e))),
        };
        let time_ns = self.time_ns;
        let Some(entry) = self.canisters.get(&id) else {
            return Ok(Err(reject::canister_not_found(&id, true)));
        };
        let (wasm_memory_limit, memory_allocation) = entry.memory_limits();
        let subnet = entry.subnet;
        let controllers = entry.controllers_first(&sender);
        let settings = Settings {
            subnet: self.subnets[subnet].engine_kind(),
            charging: self.subnets[subnet].charging(),
            controllers: controllers.clone(),
            time_ns,
            cycles: self.balance(&id),
            canister_id: id.as_slice().to_vec(),
            debug_print_enabled: true,
            wasm_memory_limit,
            memory_allocation,
            // The IC's message size limits (2 MiB ingress argument and reply, 3 MiB query reply).
            ..Settings::default()
        };
        let has_code = self.code(&id).is_some();
        let engine = self.programs.engine();
        let (outcome, execs) = match mode {
            CanisterInstallMode::Install if has_code => {
                return Ok(Err(reject(
                    ErrorCode::CanisterNonEmpty,
                    format!(
                        "Canister {id} cannot be installed because the canister is not empty. Try installing with mode='reinstall' instead."
                    ),
                    true,
                )));
            }
            // Reinstalling a canister with code keeps its calls in flight
            // (`Canister::reinstall`); one without code is installed.
            CanisterInstallMode::Reinstall if has_code => {
                let Some(code) = self.engines[subnet].canister_mut(id.as_slice()) else {
                    return Ok(Err(reject::no_wasm_module(&id, true)));
                };
                code.set_controllers(controllers);
                let exec = code.reinstall(engine, &program, arg)?;
                let r = match &exec.result {
                    MessageResult::Trap(m) => Err(reject::canister_error(&id, m, true)),
                    _ => Ok(()),
                };
                (r, vec![exec])
            }
            CanisterInstallMode::Install | CanisterInstallMode::Reinstall => {
                match Canister::install(engine, &program, arg, settings) {
                    Ok((canister, exec)) => {
                        self.engines[subnet].install(canister);
                        (Ok(()), vec![exec])
                    }
                    Err(EngineError::InstallFailed(exec)) => {
                        let r = reject::outcome(&id, &exec.result, true).map(|_| ());
                        (r, vec![*exec])
                    }
                    Err(e) => (Err(install_error(&id, e)), Vec::new()),
                }
            }
            CanisterInstallMode::Upgrade(flags) => {
                let flags = flags.unwrap_or_default();
                if flags.skip_pre_upgrade == Some(true)
                    || flags.wasm_memory_persistence == Some(WasmMemoryPersistence::Keep)
                {
                    return Ok(Err(not_implemented(
                        "install_code (upgrade with skip_pre_upgrade or wasm_memory_persistence = keep)",
                    )));
                }
                let Some(code) = self.engines[subnet].canister_mut(id.as_slice()) else {
                    return Ok(Err(reject::no_wasm_module(&id, true)));
                };
                code.set_controllers(controllers);
                let exec = code.upgrade(&program, arg)?;
                // A completed upgrade has no reply: only a trap is a failure.
                let r = match &exec.result {
                    MessageResult::Trap(m) => Err(reject::canister_error(&id, m, true)),
                    _ => Ok(()),
                };
                (r, vec![exec])
            }
        };
        self.print_output(&id, &execs);
        if outcome.is_ok()
            && let Some(entry) = self.canisters.get_mut(&id)
        {
            entry.module_size = wasm.len() as u64;
            entry.version += 1;
        }
        Ok(outcome.and_then(|()| encode(())))
    }

    fn status(
        &mut self,
        id: &Principal,
        sender: &Principal,
    ) -> Result<CanisterStatusResult, RejectResponse> {
        self.controlled(id, sender)?;
        let (heap, stable, hash) = match self.code(id) {
            Some(c) => (
                c.heap_size_bytes(),
                c.stable_size_bytes(),
                hex::decode(c.program().sha256_hex()).ok(),
            ),
            None => (0, 0, None),
        };
        let cycles = self.balance(id);
        let status = self.status_of(id).unwrap_or(CanisterStatusType::Stopped);
        let Some(entry) = self.canisters.get(id) else {
            return Err(reject::canister_not_found(id, true));
        };
        let chunks: u64 = entry.chunks.values().map(|c| c.len() as u64).sum();
        Ok(CanisterStatusResult {
            status,
            ready_for_migration: false,
            version: entry.version,
            settings: entry.settings.clone(),
            module_hash: hash,
            memory_size: Nat::from(heap + stable + entry.module_size + chunks),
            memory_metrics: MemoryMetrics {
                wasm_memory_size: heap.into(),
                stable_memory_size: stable.into(),
                global_memory_size: 0u64.into(),
                wasm_binary_size: entry.module_size.into(),
                custom_sections_size: 0u64.into(),
                canister_history_size: 0u64.into(),
                wasm_chunk_store_size: chunks.into(),
                snapshots_size: 0u64.into(),
            },
            cycles: Nat::from(cycles),
            reserved_cycles: 0u64.into(),
            idle_cycles_burned_per_day: 0u64.into(),
            query_stats: QueryStats {
                num_calls_total: 0u64.into(),
                num_instructions_total: 0u64.into(),
                request_payload_bytes_total: 0u64.into(),
                response_payload_bytes_total: 0u64.into(),
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ingress_filter() {
        assert!(check_ingress_method("install_code").is_ok());
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
}
