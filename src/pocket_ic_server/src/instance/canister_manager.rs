//! The canister manager (the replica's `rs/execution_environment` `canister_manager`): the
//! management canister's methods as users reach them through ingress messages, executed on an
//! instance at the start of a round: canister creation with cycles, install / reinstall /
//! upgrade (whole or from the chunk store), settings, status, start, stop, delete, uninstall,
//! top-up and deposit of cycles. Which methods these are, and the rejects of the others, is
//! [`crate::management`].

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

use super::{CanisterEntry, Instance, default_settings};
use crate::blob_store::{gunzip, is_gzip};
use crate::error::ServerError;
use crate::management::{
    DEFAULT_PROVISIONAL_CYCLES, Executed, MAX_CHUNK_SIZE, MAX_CONTROLLERS, not_implemented,
};
use crate::reject::{self, reject};
use crate::topology::canister_id;

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

/// The wasm module of an install: `wasm` itself, or its gunzipped content.
fn decompressed(id: &Principal, wasm: Vec<u8>) -> Result<Vec<u8>, RejectResponse> {
    if !is_gzip(&wasm) {
        return Ok(wasm);
    }
    gunzip(&wasm).map_err(|e| {
        reject(
            ErrorCode::CanisterInvalidWasm,
            format!("Error from Canister {id}: the gzip-compressed Wasm module is invalid: {e}"),
            true,
        )
    })
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
    /// Executes the management message `message`, a call of `method` by `sender`, and records
    /// its outcome; `effective` (the effective principal of the ingress message) chooses the
    /// subnet of a new canister. `stop_canister` is answered once the canister stopped
    /// (`Instance::stop_canister`). `Err(ServerError)` only when the engine itself fails; the
    /// method's own failures are its reject.
    pub(super) fn execute_management(
        &mut self,
        message: &[u8],
        sender: Principal,
        method: Executed,
        payload: &[u8],
        effective: &RawEffectivePrincipal,
    ) -> Result<(), ServerError> {
        let result = match method {
            Executed::StopCanister => return self.stop_canister(message, sender, payload),
            Executed::ProvisionalCreateCanisterWithCycles => {
                decode::<(ProvisionalCreateCanisterWithCyclesArgs,)>(payload)
                    .and_then(|(a,)| self.create_canister(sender, a, effective))
                    .and_then(|canister_id| encode((CanisterIdRecord { canister_id },)))
            }
            Executed::ProvisionalTopUpCanister => {
                decode::<(ProvisionalTopUpCanisterArgs,)>(payload).and_then(|(a,)| self.top_up(a))
            }
            // Ingress messages carry no cycles: there is nothing to deposit.
            Executed::DepositCycles => decode::<(CanisterIdRecord,)>(payload).and_then(|(a,)| {
                self.existing(&a.canister_id)?;
                encode(())
            }),
            Executed::InstallCode => match decode::<(InstallCodeArgs,)>(payload) {
                Ok((a,)) => self.install(sender, a.canister_id, a.mode, a.wasm_module, &a.arg)?,
                Err(r) => Err(r),
            },
            Executed::InstallChunkedCode => match decode::<(InstallChunkedCodeArgs,)>(payload) {
                Ok((a,)) => match self.assemble_chunks(sender, &a) {
                    Ok(wasm) => self.install(sender, a.target_canister, a.mode, wasm, &a.arg)?,
                    Err(r) => Err(r),
                },
                Err(r) => Err(r),
            },
            Executed::UploadChunk => {
                decode::<(UploadChunkArgs,)>(payload).and_then(|(a,)| self.upload_chunk(sender, a))
            }
            Executed::ClearChunkStore => decode::<(CanisterIdRecord,)>(payload).and_then(|(a,)| {
                self.controlled(&a.canister_id, &sender)?.chunks.clear();
                encode(())
            }),
            Executed::StoredChunks => decode::<(CanisterIdRecord,)>(payload).and_then(|(a,)| {
                let entry = self.controlled(&a.canister_id, &sender)?;
                let hashes: Vec<ChunkHash> = entry
                    .chunks
                    .keys()
                    .map(|hash| ChunkHash { hash: hash.clone() })
                    .collect();
                encode((hashes,))
            }),
            Executed::UninstallCode => decode::<(UninstallCodeArgs,)>(payload)
                .and_then(|(a,)| self.uninstall_code(sender, a)),
            Executed::UpdateSettings => decode::<(UpdateSettingsArgs,)>(payload)
                .and_then(|(a,)| self.update_settings(sender, a)),
            Executed::CanisterStatus => decode::<(CanisterIdRecord,)>(payload).and_then(|(a,)| {
                let status = self.status(&a.canister_id, &sender)?;
                encode((status,))
            }),
            Executed::StartCanister => decode::<(CanisterIdRecord,)>(payload)
                .and_then(|(a,)| self.start_canister(sender, a.canister_id)),
            Executed::DeleteCanister => decode::<(CanisterIdRecord,)>(payload)
                .and_then(|(a,)| self.delete_canister(sender, a.canister_id)),
        };
        self.set_result(message, result);
        Ok(())
    }

    /// `provisional_top_up_canister`: mints `amount` cycles onto the canister.
    fn top_up(&mut self, a: ProvisionalTopUpCanisterArgs) -> Result<Vec<u8>, RejectResponse> {
        let amount = nat_to_u128(&a.amount, "amount")?;
        self.existing(&a.canister_id)?;
        self.credit(&a.canister_id, amount);
        encode(())
    }

    /// `upload_chunk`: adds a chunk of at most [`MAX_CHUNK_SIZE`] to the chunk store.
    fn upload_chunk(
        &mut self,
        sender: Principal,
        a: UploadChunkArgs,
    ) -> Result<Vec<u8>, RejectResponse> {
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
    }

    /// `uninstall_code`: drops the code and state, keeping the cycles.
    fn uninstall_code(
        &mut self,
        sender: Principal,
        a: UninstallCodeArgs,
    ) -> Result<Vec<u8>, RejectResponse> {
        let subnet = self.controlled(&a.canister_id, &sender)?.subnet;
        let code = self.engines[subnet].uninstall(a.canister_id.as_slice());
        let entry = self.existing(&a.canister_id)?;
        if let Some(code) = code {
            entry.empty_cycles = code.cycles();
        }
        entry.module_size = 0;
        entry.version += 1;
        encode(())
    }

    /// `update_settings`: applies the settings and passes the controllers and memory limits to
    /// the code.
    fn update_settings(
        &mut self,
        sender: Principal,
        a: UpdateSettingsArgs,
    ) -> Result<Vec<u8>, RejectResponse> {
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
    }

    /// `start_canister`: runs the canister again and fails its pending `stop_canister` calls.
    fn start_canister(
        &mut self,
        sender: Principal,
        id: Principal,
    ) -> Result<Vec<u8>, RejectResponse> {
        self.controlled(&id, &sender)?;
        if let Some(engine) = self.engine_of(&id) {
            engine.start(id.as_slice());
        }
        self.cancel_stops(&id);
        encode(())
    }

    /// `delete_canister`: removes a stopped canister.
    fn delete_canister(
        &mut self,
        sender: Principal,
        id: Principal,
    ) -> Result<Vec<u8>, RejectResponse> {
        self.controlled(&id, &sender)?;
        if self.status_of(&id) != Some(CanisterStatusType::Stopped) {
            return Err(reject(
                ErrorCode::CanisterNotStopped,
                format!("Canister {id} must be stopped before it is deleted."),
                true,
            ));
        }
        if let Some(engine) = self.engine_of(&id) {
            engine.remove(id.as_slice());
        }
        self.canisters.remove(&id);
        encode(())
    }

    /// `stop_canister` from the ingress message `message`: the canister stops at once when no
    /// call context of it is open; otherwise it is stopping (it finishes its calls and takes no
    /// new ones) and the message is answered in the round it stops.
    fn stop_canister(
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
        let wasm = match decompressed(&id, wasm) {
            Ok(w) => w,
            Err(r) => return Ok(Err(r)),
        };
        let program = match self.programs.load(&wasm) {
            Ok(p) => p,
            Err(e) => return Ok(Err(install_error(&id, e))),
        };
        let Some(entry) = self.canisters.get(&id) else {
            return Ok(Err(reject::canister_not_found(&id, true)));
        };
        let subnet = entry.subnet;
        let controllers = entry.controllers_first(&sender);
        let settings = self.install_settings(&id, entry, controllers.clone());
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

    /// The engine settings of a fresh install of canister `id` (record `entry`).
    fn install_settings(
        &self,
        id: &Principal,
        entry: &CanisterEntry,
        controllers: Vec<Vec<u8>>,
    ) -> Settings {
        let (wasm_memory_limit, memory_allocation) = entry.memory_limits();
        Settings {
            subnet: self.subnets[entry.subnet].engine_kind(),
            charging: self.subnets[entry.subnet].charging(),
            controllers,
            time_ns: self.time_ns,
            cycles: self.balance(id),
            canister_id: id.as_slice().to_vec(),
            debug_print_enabled: true,
            wasm_memory_limit,
            memory_allocation,
            // The IC's message size limits (2 MiB ingress argument and reply, 3 MiB query reply).
            ..Settings::default()
        }
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
