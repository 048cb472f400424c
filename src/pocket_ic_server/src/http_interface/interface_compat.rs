//! Management canister replies in the current interface. The server's management canister
//! encodes its replies with the types of the `pocket-ic` 13 client; the IC's current interface
//! adds fields that current agents' decoders require (icp-cli decodes `canister_status` with
//! `log_memory_store_size`, `log_memory_limit`, `minimum_incoming_canister_call_cycles`,
//! `snapshot_visibility`, `status_visibility`). Through the HTTP interface those replies are
//! re-encoded in the current interface; the added fields carry the IC's defaults (the
//! engine does not model canister logs, snapshots or their visibility). Older decoders accept
//! the result, as Candid lets them ignore fields they do not know.

use candid::{Decode, Encode, Nat};
use ic_management_canister_types as old;
use ic_management_canister_types_current as cur;

/// The IC's default canister log memory limit (4 KiB).
pub const DEFAULT_LOG_MEMORY_LIMIT: u64 = 4096;

fn log_visibility(v: old::LogVisibility) -> cur::LogVisibility {
    match v {
        old::LogVisibility::Controllers => cur::LogVisibility::Controllers,
        old::LogVisibility::Public => cur::LogVisibility::Public,
        old::LogVisibility::AllowedViewers(p) => cur::LogVisibility::AllowedViewers(p),
    }
}

/// `reply` (a `canister_status` reply in the older interface) in the current interface; the
/// reply unchanged if it does not decode.
pub fn canister_status(reply: &[u8]) -> Vec<u8> {
    let Ok(o) = Decode!(reply, old::CanisterStatusResult) else {
        return reply.to_vec();
    };
    let s = o.settings;
    let m = o.memory_metrics;
    let q = o.query_stats;
    let current = cur::CanisterStatusResult {
        status: match o.status {
            old::CanisterStatusType::Running => cur::CanisterStatusType::Running,
            old::CanisterStatusType::Stopping => cur::CanisterStatusType::Stopping,
            old::CanisterStatusType::Stopped => cur::CanisterStatusType::Stopped,
        },
        ready_for_migration: o.ready_for_migration,
        version: o.version,
        settings: cur::DefiniteCanisterSettings {
            controllers: s.controllers,
            compute_allocation: s.compute_allocation,
            memory_allocation: s.memory_allocation,
            freezing_threshold: s.freezing_threshold,
            reserved_cycles_limit: s.reserved_cycles_limit,
            minimum_incoming_canister_call_cycles: Nat::from(0u32),
            log_visibility: log_visibility(s.log_visibility),
            log_memory_limit: Nat::from(DEFAULT_LOG_MEMORY_LIMIT),
            snapshot_visibility: cur::SnapshotVisibility::Controllers,
            status_visibility: cur::StatusVisibility::Controllers,
            wasm_memory_limit: s.wasm_memory_limit,
            wasm_memory_threshold: s.wasm_memory_threshold,
            environment_variables: s
                .environment_variables
                .into_iter()
                .map(|e| cur::EnvironmentVariable {
                    name: e.name,
                    value: e.value,
                })
                .collect(),
        },
        module_hash: o.module_hash,
        memory_size: o.memory_size,
        memory_metrics: cur::MemoryMetrics {
            wasm_memory_size: m.wasm_memory_size,
            stable_memory_size: m.stable_memory_size,
            global_memory_size: m.global_memory_size,
            wasm_binary_size: m.wasm_binary_size,
            custom_sections_size: m.custom_sections_size,
            canister_history_size: m.canister_history_size,
            wasm_chunk_store_size: m.wasm_chunk_store_size,
            snapshots_size: m.snapshots_size,
            log_memory_store_size: Nat::from(0u32),
        },
        cycles: o.cycles,
        reserved_cycles: o.reserved_cycles,
        idle_cycles_burned_per_day: o.idle_cycles_burned_per_day,
        query_stats: cur::QueryStats {
            num_calls_total: q.num_calls_total,
            num_instructions_total: q.num_instructions_total,
            request_payload_bytes_total: q.request_payload_bytes_total,
            response_payload_bytes_total: q.response_payload_bytes_total,
        },
    };
    Encode!(&current).unwrap_or_else(|_| reply.to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_interfaces_decode_the_current_reply() {
        let old_reply = old::CanisterStatusResult {
            status: old::CanisterStatusType::Running,
            ready_for_migration: false,
            version: 3,
            settings: crate::instance::default_settings(vec![candid::Principal::anonymous()]),
            module_hash: Some(vec![1; 32]),
            memory_size: Nat::from(10u32),
            memory_metrics: old::MemoryMetrics {
                wasm_memory_size: Nat::from(1u32),
                stable_memory_size: Nat::from(2u32),
                global_memory_size: Nat::from(3u32),
                wasm_binary_size: Nat::from(4u32),
                custom_sections_size: Nat::from(5u32),
                canister_history_size: Nat::from(6u32),
                wasm_chunk_store_size: Nat::from(7u32),
                snapshots_size: Nat::from(8u32),
            },
            cycles: Nat::from(99u32),
            reserved_cycles: Nat::from(0u32),
            idle_cycles_burned_per_day: Nat::from(0u32),
            query_stats: old::QueryStats {
                num_calls_total: Nat::from(0u32),
                num_instructions_total: Nat::from(0u32),
                request_payload_bytes_total: Nat::from(0u32),
                response_payload_bytes_total: Nat::from(0u32),
            },
        };
        let bytes = Encode!(&old_reply).unwrap();
        let current = canister_status(&bytes);
        let c = Decode!(&current, cur::CanisterStatusResult).unwrap();
        assert_eq!(c.cycles, Nat::from(99u32));
        assert_eq!(c.memory_metrics.snapshots_size, Nat::from(8u32));
        assert_eq!(
            c.settings.log_memory_limit,
            Nat::from(DEFAULT_LOG_MEMORY_LIMIT)
        );
        assert_eq!(
            Decode!(&current, old::CanisterStatusResult).unwrap(),
            old_reply
        );
    }
}
