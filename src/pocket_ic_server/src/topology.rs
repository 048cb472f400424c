//! Subnet and canister ids of an instance.
//!
//! Only application subnets exist here (each either with production or with PocketIC's
//! benchmarking instruction limits). Subnet `i` (in the order of the instance configuration)
//! owns the canister id range of 2^20 ids ending just below `i` ranges from the top: the first
//! subnet's range starts at `lxzze-o7777-77777-aaaaa-cai`, the first canister id PocketIC gives on
//! an application subnet. Subnet ids are derived from the subnet's position; they are this
//! server's own (PocketIC derives its ids from keys this server does not have).

use std::collections::BTreeMap;

use candid::Principal;
use pocket_ic::common::rest::{
    CanisterCyclesCostSchedule, CanisterIdRange, RawCanisterId, SubnetConfig,
    SubnetInstructionConfig, SubnetKind, Topology,
};
use sha2::{Digest, Sha256};

/// Canister ids per subnet range (the IC's `CANISTER_IDS_PER_SUBNET`).
pub const CANISTER_IDS_PER_SUBNET: u64 = 1 << 20;

/// Index of the first canister id of the first application subnet (`lxzze-o7777-77777-aaaaa-cai`).
pub const FIRST_APPLICATION_RANGE_START: u64 = 0xFFFF_FFFF_FFE0_0000;

/// The canister id with index `index` (8 bytes big-endian, then the class bytes `0x01 0x01`).
pub fn canister_id(index: u64) -> Principal {
    let mut bytes = index.to_be_bytes().to_vec();
    bytes.extend_from_slice(&[0x01, 0x01]);
    Principal::from_slice(&bytes)
}

/// The index of a canister id, or `None` if `id` is not a canister id.
pub fn canister_index(id: &Principal) -> Option<u64> {
    let bytes = id.as_slice();
    if bytes.len() != 10 || bytes[8..] != [0x01, 0x01] {
        return None;
    }
    let mut index = [0u8; 8];
    index.copy_from_slice(&bytes[..8]);
    Some(u64::from_be_bytes(index))
}

/// One application subnet of an instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subnet {
    /// The subnet id.
    pub id: Principal,
    /// PocketIC's benchmarking instruction limits (else production limits).
    pub benchmarking: bool,
    /// The cost schedule asked for: `Normal` charges canisters the IC's fees for execution,
    /// ingress and calls ([`Subnet::charging`]), `Free` nothing.
    pub cost_schedule: CanisterCyclesCostSchedule,
    /// First canister index of the subnet's range.
    pub range_start: u64,
    /// Seed reported in the topology.
    pub seed: [u8; 32],
}

impl Subnet {
    /// The application subnet at `position` in the instance configuration.
    pub fn application(
        position: usize,
        benchmarking: bool,
        cost_schedule: CanisterCyclesCostSchedule,
    ) -> Subnet {
        let seed: [u8; 32] = Sha256::digest(format!(
            "{} application subnet {position}",
            crate::SERVER_NAME
        ))
        .into();
        // A self-authenticating-style id: 28 bytes of the seed and the class byte 0x02.
        let mut id = seed[..28].to_vec();
        id.push(0x02);
        Subnet {
            id: Principal::from_slice(&id),
            benchmarking,
            cost_schedule,
            range_start: FIRST_APPLICATION_RANGE_START - position as u64 * CANISTER_IDS_PER_SUBNET,
            seed,
        }
    }

    /// True if the canister id lies in the subnet's range.
    pub fn contains(&self, canister: &Principal) -> bool {
        canister_index(canister).is_some_and(|i| {
            i >= self.range_start && i - self.range_start < CANISTER_IDS_PER_SUBNET
        })
    }

    /// The first and last canister ids of the subnet's range.
    pub fn range(&self) -> (Principal, Principal) {
        (
            canister_id(self.range_start),
            canister_id(self.range_start + CANISTER_IDS_PER_SUBNET - 1),
        )
    }

    /// How the engine runs the subnet's rounds: an application subnet's round (4 B
    /// instructions, 1,000 ingress messages and 4 MiB per block), with PocketIC's benchmarking
    /// limit as the round's instructions on a benchmarking subnet; messages to canisters of
    /// other subnets leave it (the instance delivers them).
    pub fn engine_config(&self) -> offline_engine::SubnetConfig {
        let mut config = offline_engine::SubnetConfig {
            routes_out: true,
            ..offline_engine::SubnetConfig::APPLICATION
        };
        if self.benchmarking {
            config.max_instructions_per_round = offline_engine::BENCHMARKING_LIMIT;
        }
        config
    }

    /// The engine's instruction limits for canisters of this subnet.
    pub fn engine_kind(&self) -> offline_engine::SubnetKind {
        if self.benchmarking {
            offline_engine::SubnetKind::Benchmarking
        } else {
            offline_engine::SubnetKind::Application
        }
    }

    /// What the engine charges canisters of this subnet: the fees of a 13-node application
    /// subnet (PocketIC's application subnets have 13 nodes) under the normal cost schedule,
    /// nothing under the free one.
    pub fn charging(&self) -> Option<offline_engine::Charging> {
        match self.cost_schedule {
            CanisterCyclesCostSchedule::Normal => Some(offline_engine::Charging::APPLICATION),
            CanisterCyclesCostSchedule::Free => None,
        }
    }

    /// The subnet as the topology reports it.
    pub fn config(&self) -> SubnetConfig {
        SubnetConfig {
            subnet_kind: SubnetKind::Application,
            subnet_admins: None,
            cost_schedule: self.cost_schedule,
            subnet_seed: self.seed,
            instruction_config: if self.benchmarking {
                SubnetInstructionConfig::Benchmarking
            } else {
                SubnetInstructionConfig::Production
            },
            canister_ranges: vec![CanisterIdRange {
                start: RawCanisterId::from(canister_id(self.range_start)),
                end: RawCanisterId::from(canister_id(
                    self.range_start + (CANISTER_IDS_PER_SUBNET - 1),
                )),
            }],
        }
    }
}

/// The topology of subnets `subnets`: the default effective canister id is the first canister
/// id of the first subnet.
pub fn topology(subnets: &[Subnet]) -> Topology {
    let subnet_configs: BTreeMap<Principal, SubnetConfig> =
        subnets.iter().map(|s| (s.id, s.config())).collect();
    let first = subnets
        .first()
        .map(|s| s.range_start)
        .unwrap_or(FIRST_APPLICATION_RANGE_START);
    Topology {
        subnet_configs,
        default_effective_canister_id: RawCanisterId::from(canister_id(first)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_application_canister_is_pocketic_s() {
        assert_eq!(
            canister_id(FIRST_APPLICATION_RANGE_START).to_text(),
            "lxzze-o7777-77777-aaaaa-cai"
        );
        assert_eq!(
            canister_id(FIRST_APPLICATION_RANGE_START).as_slice(),
            [0xff, 0xff, 0xff, 0xff, 0xff, 0xe0, 0, 0, 1, 1]
        );
        let id = canister_id(42);
        assert_eq!(canister_index(&id), Some(42));
        assert_eq!(canister_index(&Principal::anonymous()), None);
        assert_eq!(canister_index(&Principal::management_canister()), None);
    }

    #[test]
    fn the_cost_schedule_decides_the_charging() {
        let normal = Subnet::application(0, false, CanisterCyclesCostSchedule::Normal);
        let free = Subnet::application(0, false, CanisterCyclesCostSchedule::Free);
        assert_eq!(
            normal.charging(),
            Some(offline_engine::Charging { subnet_nodes: 13 })
        );
        assert_eq!(free.charging(), None);
    }

    #[test]
    fn subnets_own_disjoint_ranges() {
        let a = Subnet::application(0, true, CanisterCyclesCostSchedule::Normal);
        let b = Subnet::application(1, false, CanisterCyclesCostSchedule::Normal);
        assert_ne!(a.id, b.id);
        assert_eq!(a.id.as_slice().len(), 29);
        assert!(a.contains(&canister_id(FIRST_APPLICATION_RANGE_START)));
        assert!(a.contains(&canister_id(FIRST_APPLICATION_RANGE_START + 0xF_FFFF)));
        assert!(!a.contains(&canister_id(FIRST_APPLICATION_RANGE_START + 0x10_0000)));
        assert!(b.contains(&canister_id(FIRST_APPLICATION_RANGE_START - 1)));
        assert!(!b.contains(&canister_id(FIRST_APPLICATION_RANGE_START)));
        let t = topology(&[a.clone(), b.clone()]);
        assert_eq!(t.get_benchmarking_app_subnets(), vec![a.id]);
        assert_eq!(t.get_app_subnets().len(), 2);
        assert_eq!(
            t.get_subnet(canister_id(FIRST_APPLICATION_RANGE_START - 5)),
            Some(b.id)
        );
        assert_eq!(
            Principal::from(t.default_effective_canister_id),
            canister_id(FIRST_APPLICATION_RANGE_START)
        );
    }
}
