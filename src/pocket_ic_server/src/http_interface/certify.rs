//! Certification: the keys of an instance and the certificates it signs.
//!
//! As on the IC, a certificate is a pruned state tree, a BLS12-381 signature (G1, the
//! interface specification's `BLS_SIG_BLS12381G1_XMD:SHA-256_SSWU_RO_NUL_` scheme) over
//! `"\x0Dic-state-root"` followed by the tree's root hash, and, for a subnet that is not the
//! root, a delegation: a certificate of the root key stating the subnet's public key and
//! canister ranges. Each instance generates its own keys when it is created:
//!
//! - a **root key**, served by `/api/v2/status` (agents fetch it as local development does);
//!   the root "subnet" id is the self-authenticating principal of its DER encoding, as agents
//!   derive it;
//! - one **subnet key** per application subnet, delegated by the root key (the delegation
//!   carries `/subnet/<id>/{public_key, canister_ranges}` and `/canister_ranges/<id>/<shard>`,
//!   the flat and the sharded form agents read);
//! - one **node key** (Ed25519) per application subnet, which signs query responses.
//!
//! Signing is the expensive part (a hash to the curve and a scalar multiplication), so a tree
//! is signed once per round and per subnet, and every certificate of that round is a pruned
//! view of the same tree carrying the same signature.

use candid::Principal;
use ed25519_dalek::{Signer, SigningKey};
use ic_certification::hash_tree::{Hash, fork, label, leaf};
use ic_certification::{Certificate, Delegation, HashTree};
use ic_verify_bls_signature::PrivateKey;
use serde::Serialize;

/// DER prefix of a BLS12-381 G2 public key (the IC's root and subnet keys): the 37 bytes
/// agents strip before the 96-byte key.
pub const BLS_DER_PREFIX: [u8; 37] = [
    0x30, 0x81, 0x82, 0x30, 0x1d, 0x06, 0x0d, 0x2b, 0x06, 0x01, 0x04, 0x01, 0x82, 0xdc, 0x7c, 0x05,
    0x03, 0x01, 0x02, 0x01, 0x06, 0x0c, 0x2b, 0x06, 0x01, 0x04, 0x01, 0x82, 0xdc, 0x7c, 0x05, 0x03,
    0x02, 0x01, 0x03, 0x61, 0x00,
];

/// DER prefix of an Ed25519 public key (node keys, and Ed25519 sender keys).
pub const ED25519_DER_PREFIX: [u8; 12] = [
    0x30, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x03, 0x21, 0x00,
];

/// Domain separator of a certificate signature.
pub const STATE_ROOT_DOMAIN: &[u8] = b"\x0Dic-state-root";

/// A BLS12-381 key pair that signs state trees.
pub struct BlsKey {
    secret: PrivateKey,
    /// DER encoding of the public key (133 bytes).
    pub der: Vec<u8>,
}

impl std::fmt::Debug for BlsKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BlsKey")
            .field("der", &hex::encode(&self.der))
            .finish_non_exhaustive()
    }
}

impl BlsKey {
    /// A fresh random key.
    pub fn generate() -> BlsKey {
        let secret = PrivateKey::random(&mut rand::rngs::OsRng);
        let mut der = BLS_DER_PREFIX.to_vec();
        der.extend_from_slice(&secret.public_key().serialize());
        BlsKey { secret, der }
    }

    /// The signature (48 bytes) of a tree whose root hash is `root`.
    pub fn sign_root(&self, root: &Hash) -> Vec<u8> {
        let mut msg = STATE_ROOT_DOMAIN.to_vec();
        msg.extend_from_slice(root);
        self.secret.sign(&msg).serialize().to_vec()
    }
}

/// A node: its Ed25519 key and its id (the self-authenticating principal of the DER key).
pub struct NodeKey {
    secret: SigningKey,
    /// DER encoding of the public key (44 bytes).
    pub der: Vec<u8>,
    /// The node id.
    pub id: Principal,
}

impl std::fmt::Debug for NodeKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeKey")
            .field("id", &self.id.to_text())
            .finish_non_exhaustive()
    }
}

impl NodeKey {
    /// A fresh random node key.
    pub fn generate() -> NodeKey {
        let secret = SigningKey::generate(&mut rand::rngs::OsRng);
        let mut der = ED25519_DER_PREFIX.to_vec();
        der.extend_from_slice(secret.verifying_key().as_bytes());
        let id = Principal::self_authenticating(&der);
        NodeKey { secret, der, id }
    }

    /// The node's signature of `msg` (for a query response: `"\x0Bic-response"` followed by
    /// the response's hash, as `ic_transport_types::QueryResponse::signable` builds it).
    pub fn sign(&self, msg: &[u8]) -> Vec<u8> {
        self.secret.sign(msg).to_bytes().to_vec()
    }
}

/// A canister id range, inclusive at both ends.
pub type CanisterRange = (Principal, Principal);

/// One application subnet as certification sees it.
#[derive(Debug)]
pub struct SubnetKeys {
    /// The subnet id (the one the PocketIC topology reports).
    pub id: Principal,
    /// The subnet's canister ranges.
    pub ranges: Vec<CanisterRange>,
    /// The key that signs the subnet's certificates.
    pub key: BlsKey,
    /// The subnet's one node.
    pub node: NodeKey,
    /// The root key's delegation to this subnet.
    pub delegation: Delegation,
}

/// The keys of an instance.
#[derive(Debug)]
pub struct Keys {
    /// The root key.
    pub root: BlsKey,
    /// The root subnet id: the self-authenticating principal of the root key's DER.
    pub root_subnet: Principal,
    /// The root subnet's node: it signs query answers for canister ids outside every
    /// application subnet (where no canister exists).
    pub root_node: NodeKey,
    /// The root subnet's canister ranges: the NNS subnet's on the IC (the first 2^20 ids, where
    /// the ledger and the cycles minting canister live) and the cycles ledger's. No canister of
    /// this server lives there; calls to them are answered by the server's system canister
    /// methods ([`super::system_canisters`]) or "not found", certified by the root key.
    pub root_ranges: Vec<CanisterRange>,
    /// The application subnets.
    pub subnets: Vec<SubnetKeys>,
}

/// CBOR with the self-describing tag 55799, as the IC encodes its HTTP bodies.
pub fn cbor<T: Serialize>(value: &T) -> Vec<u8> {
    let mut s = serde_cbor::Serializer::new(Vec::new());
    // Writing to a Vec cannot fail and every value encoded here is a plain tree of maps,
    // arrays, integers and byte strings.
    if s.self_describe().is_err() || value.serialize(&mut s).is_err() {
        return Vec::new();
    }
    s.into_inner()
}

/// CBOR of canister ranges: an array of `[start, end]` pairs of principal byte strings.
pub fn ranges_cbor(ranges: &[CanisterRange]) -> Vec<u8> {
    let pairs: Vec<(serde_bytes::ByteBuf, serde_bytes::ByteBuf)> = ranges
        .iter()
        .map(|(a, b)| {
            (
                serde_bytes::ByteBuf::from(a.as_slice().to_vec()),
                serde_bytes::ByteBuf::from(b.as_slice().to_vec()),
            )
        })
        .collect();
    cbor(&pairs)
}

/// LEB128 encoding of `n` (the certified `/time`).
pub fn leb128(n: u64) -> Vec<u8> {
    let mut v = Vec::with_capacity(10);
    // Writing to a Vec cannot fail.
    let _ = leb128::write::unsigned(&mut v, n);
    v
}

/// A tree of labelled children sorted by label, as a balanced fork structure (the shape the
/// replica gives a node's children). An empty list is the empty tree.
pub fn labeled(mut children: Vec<(Vec<u8>, HashTree)>) -> HashTree {
    children.sort_by(|a, b| a.0.cmp(&b.0));
    fn build(items: &mut Vec<HashTree>) -> HashTree {
        match items.len() {
            0 => ic_certification::empty(),
            1 => items.remove(0),
            n => {
                let mut right = items.split_off(n / 2);
                let l = build(items);
                let r = build(&mut right);
                fork(l, r)
            }
        }
    }
    let mut items: Vec<HashTree> = children.into_iter().map(|(l, t)| label(l, t)).collect();
    build(&mut items)
}

/// A leaf holding `bytes`.
pub fn bytes_leaf(bytes: impl Into<Vec<u8>>) -> HashTree {
    leaf(bytes.into())
}

impl Keys {
    /// Fresh keys for an instance whose application subnets are `subnets` (id and ranges), the
    /// delegations stamped with time `time_ns`.
    pub fn generate(subnets: &[(Principal, Vec<CanisterRange>)], time_ns: u64) -> Keys {
        let root = BlsKey::generate();
        let root_subnet = Principal::self_authenticating(&root.der);
        let subnets = subnets
            .iter()
            .map(|(id, ranges)| {
                let key = BlsKey::generate();
                let node = NodeKey::generate();
                let delegation = delegate(&root, *id, &key.der, ranges, time_ns);
                SubnetKeys {
                    id: *id,
                    ranges: ranges.clone(),
                    key,
                    node,
                    delegation,
                }
            })
            .collect();
        let root_ranges = vec![
            (
                crate::topology::canister_id(0),
                crate::topology::canister_id(crate::topology::CANISTER_IDS_PER_SUBNET - 1),
            ),
            // The range of the IC subnet that hosts the cycles ledger.
            (
                crate::topology::canister_id(0x0210_0000),
                crate::topology::canister_id(0x021F_FFFF),
            ),
        ];
        Keys {
            root,
            root_subnet,
            root_node: NodeKey::generate(),
            root_ranges,
            subnets,
        }
    }

    /// Re-signs every delegation with time `time_ns` (agents refuse delegations older than
    /// 30 days relative to their clock, so a delegation follows the instance's time).
    pub fn refresh_delegations(&mut self, time_ns: u64) {
        for s in &mut self.subnets {
            s.delegation = delegate(&self.root, s.id, &s.key.der, &s.ranges, time_ns);
        }
    }

    /// The subnet whose ranges contain `canister`, if any.
    pub fn subnet_of(&self, canister: &Principal) -> Option<usize> {
        self.subnets
            .iter()
            .position(|s| s.ranges.iter().any(|(a, b)| a <= canister && canister <= b))
    }

    /// The subnet with id `id`, if any.
    pub fn subnet_by_id(&self, id: &Principal) -> Option<usize> {
        self.subnets.iter().position(|s| s.id == *id)
    }
}

/// The root key's certificate delegating subnet `id` (key `der`, ranges `ranges`).
fn delegate(
    root: &BlsKey,
    id: Principal,
    der: &[u8],
    ranges: &[CanisterRange],
    time_ns: u64,
) -> Delegation {
    let sid = id.as_slice().to_vec();
    // One shard per range, labelled by the range's first canister id (the sharded form).
    let shards = labeled(
        ranges
            .iter()
            .map(|r| (r.0.as_slice().to_vec(), bytes_leaf(ranges_cbor(&[*r]))))
            .collect(),
    );
    let tree = labeled(vec![
        (
            b"canister_ranges".to_vec(),
            labeled(vec![(sid.clone(), shards)]),
        ),
        (
            b"subnet".to_vec(),
            labeled(vec![(
                sid.clone(),
                labeled(vec![
                    (b"canister_ranges".to_vec(), bytes_leaf(ranges_cbor(ranges))),
                    (b"public_key".to_vec(), bytes_leaf(der.to_vec())),
                ]),
            )]),
        ),
        (b"time".to_vec(), bytes_leaf(leb128(time_ns))),
    ]);
    let signature = root.sign_root(&tree.digest());
    let certificate = Certificate {
        tree,
        signature,
        delegation: None,
    };
    Delegation {
        subnet_id: sid,
        certificate: cbor(&certificate),
    }
}
