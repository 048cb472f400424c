//! The certified state tree of an instance and the witnesses (pruned trees) cut from it.
//!
//! The tree has the interface specification's top-level labels: `canister/<id>/
//! {controllers, module_hash, metadata/<name>}`, `canister_ranges/<subnet>/<shard>`,
//! `request_status/<request id>/{status, reply, reject_code, reject_message, error_code}`,
//! `subnet/<id>/{public_key, canister_ranges, type, node/<node id>/public_key}` and `time`. The
//! request statuses live in a certified red-black tree (`ic-certification`'s `RbTree`), so a
//! round updates only the requests that changed and a witness for one request is logarithmic
//! (a proof of absence for an unknown request, as agents expect); the other parts are small
//! and rebuilt each round.

use candid::Principal;
use ic_certification::HashTreeNode;
use ic_certification::hash_tree::{Hash, fork, label, leaf, pruned};
use ic_certification::{AsHashTree, HashTree, RbTree};

use super::certify::{Keys, bytes_leaf, cbor, labeled, leb128, ranges_cbor};

/// What the certified tree says about a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RequestStatus {
    /// The request was received and awaits execution.
    Received,
    /// Executed: the canister replied with these bytes.
    Replied(Vec<u8>),
    /// Executed: rejected with this reject code, message and error code (`IC0503`, ...).
    Rejected {
        /// The reject code (1 to 5).
        code: u64,
        /// The reject message.
        message: String,
        /// The error code.
        error_code: String,
    },
    /// Executed, and its reply or reject was dropped after its expiry.
    Done,
}

/// A request's node in the tree, with its hash computed once.
#[derive(Debug, Clone)]
pub struct RequestNode {
    tree: HashTree,
    hash: Hash,
}

impl RequestNode {
    fn new(status: &RequestStatus) -> RequestNode {
        let status_leaf = |s: &str| (b"status".to_vec(), bytes_leaf(s.as_bytes().to_vec()));
        let children = match status {
            RequestStatus::Received => vec![status_leaf("received")],
            RequestStatus::Done => vec![status_leaf("done")],
            RequestStatus::Replied(reply) => {
                vec![
                    status_leaf("replied"),
                    (b"reply".to_vec(), bytes_leaf(reply.clone())),
                ]
            }
            RequestStatus::Rejected {
                code,
                message,
                error_code,
            } => vec![
                status_leaf("rejected"),
                (b"reject_code".to_vec(), bytes_leaf(leb128(*code))),
                (
                    b"reject_message".to_vec(),
                    bytes_leaf(message.as_bytes().to_vec()),
                ),
                (
                    b"error_code".to_vec(),
                    bytes_leaf(error_code.as_bytes().to_vec()),
                ),
            ],
        };
        let tree = labeled(children);
        let hash = tree.digest();
        RequestNode { tree, hash }
    }
}

impl AsHashTree for RequestNode {
    fn root_hash(&self) -> Hash {
        self.hash
    }

    fn as_hash_tree(&self) -> HashTree {
        self.tree.clone()
    }
}

/// What certification needs to know about a canister.
#[derive(Debug, Clone)]
pub struct CanisterFacts {
    /// The canister id.
    pub id: Principal,
    /// Its controllers.
    pub controllers: Vec<Principal>,
    /// SHA-256 of its module, if it has code.
    pub module_hash: Option<[u8; 32]>,
    /// Its metadata sections (`icp:public` / `icp:private` custom sections), by name.
    pub metadata: Vec<(String, Vec<u8>)>,
}

/// The state tree: updated at the end of every round, and only then.
pub struct StateTree {
    requests: RbTree<[u8; 32], RequestNode>,
    canister: Option<HashTree>,
    canister_ranges: Option<HashTree>,
    subnet: Option<HashTree>,
    time: u64,
}

impl std::fmt::Debug for StateTree {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StateTree")
            .field("time", &self.time)
            .finish_non_exhaustive()
    }
}

impl Default for StateTree {
    fn default() -> Self {
        StateTree {
            requests: RbTree::new(),
            canister: None,
            canister_ranges: None,
            subnet: None,
            time: 0,
        }
    }
}

fn empty() -> HashTree {
    ic_certification::empty()
}

/// A full copy of `node` as a tree.
fn full(node: &HashTreeNode) -> HashTree {
    match node {
        HashTreeNode::Empty() => empty(),
        HashTreeNode::Fork(lr) => fork(full(&lr.0), full(&lr.1)),
        HashTreeNode::Labeled(l, sub) => label(l.as_bytes().to_vec(), full(sub)),
        HashTreeNode::Leaf(v) => leaf(v.clone()),
        HashTreeNode::Pruned(h) => pruned(*h),
    }
}

/// The part of `node` that `paths` (relative to `node`) reveal: every label on the way to a
/// path stays visible (its siblings' labels too, so an absent label is provably absent),
/// everything a path ends at is revealed whole, the rest is pruned to its hash.
fn witness(node: &HashTreeNode, paths: &[&[Vec<u8>]]) -> HashTree {
    if paths.iter().any(|p| p.is_empty()) {
        return full(node);
    }
    match node {
        HashTreeNode::Empty() => empty(),
        HashTreeNode::Fork(lr) => fork(witness(&lr.0, paths), witness(&lr.1, paths)),
        HashTreeNode::Labeled(l, sub) => {
            let below: Vec<&[Vec<u8>]> = paths
                .iter()
                .filter(|p| p[0].as_slice() == l.as_bytes())
                .map(|p| &p[1..])
                .collect();
            if below.is_empty() {
                label(l.as_bytes().to_vec(), pruned(sub.digest()))
            } else {
                label(l.as_bytes().to_vec(), witness(sub, &below))
            }
        }
        HashTreeNode::Leaf(v) => leaf(v.clone()),
        HashTreeNode::Pruned(h) => pruned(*h),
    }
}

impl StateTree {
    /// Sets a request's status (inserting the request if new).
    pub fn set_request(&mut self, id: [u8; 32], status: &RequestStatus) {
        self.requests.insert(id, RequestNode::new(status));
    }

    /// Removes a request.
    pub fn remove_request(&mut self, id: &[u8; 32]) {
        self.requests.delete(id);
    }

    /// Rebuilds the canister, subnet and range parts and sets the time.
    pub fn refresh(&mut self, keys: &Keys, canisters: &[CanisterFacts], time: u64) {
        self.time = time;
        self.canister = Some(labeled(
            canisters
                .iter()
                .map(|c| {
                    let controllers: Vec<serde_bytes::ByteBuf> = c
                        .controllers
                        .iter()
                        .map(|p| serde_bytes::ByteBuf::from(p.as_slice().to_vec()))
                        .collect();
                    let mut children =
                        vec![(b"controllers".to_vec(), bytes_leaf(cbor(&controllers)))];
                    if let Some(hash) = c.module_hash {
                        children.push((b"module_hash".to_vec(), bytes_leaf(hash.to_vec())));
                        children.push((
                            b"metadata".to_vec(),
                            labeled(
                                c.metadata
                                    .iter()
                                    .map(|(n, d)| (n.as_bytes().to_vec(), bytes_leaf(d.clone())))
                                    .collect(),
                            ),
                        ));
                    }
                    (c.id.as_slice().to_vec(), labeled(children))
                })
                .collect(),
        ));
        if self.subnet.is_none() {
            self.canister_ranges = Some(labeled(
                keys.subnets
                    .iter()
                    .map(|s| {
                        let shards = labeled(
                            s.ranges
                                .iter()
                                .map(|r| (r.0.as_slice().to_vec(), bytes_leaf(ranges_cbor(&[*r]))))
                                .collect(),
                        );
                        (s.id.as_slice().to_vec(), shards)
                    })
                    .collect(),
            ));
            let mut subnets: Vec<(Vec<u8>, HashTree)> = keys
                .subnets
                .iter()
                .map(|s| {
                    let node = labeled(vec![(
                        s.node.id.as_slice().to_vec(),
                        labeled(vec![(
                            b"public_key".to_vec(),
                            bytes_leaf(s.node.der.clone()),
                        )]),
                    )]);
                    (
                        s.id.as_slice().to_vec(),
                        labeled(vec![
                            (
                                b"canister_ranges".to_vec(),
                                bytes_leaf(ranges_cbor(&s.ranges)),
                            ),
                            (b"node".to_vec(), node),
                            (b"public_key".to_vec(), bytes_leaf(s.key.der.clone())),
                            (b"type".to_vec(), bytes_leaf(b"application".to_vec())),
                        ]),
                    )
                })
                .collect();
            let root_node = labeled(vec![(
                keys.root_node.id.as_slice().to_vec(),
                labeled(vec![(
                    b"public_key".to_vec(),
                    bytes_leaf(keys.root_node.der.clone()),
                )]),
            )]);
            subnets.push((
                keys.root_subnet.as_slice().to_vec(),
                labeled(vec![
                    (
                        b"canister_ranges".to_vec(),
                        bytes_leaf(ranges_cbor(&keys.root_ranges)),
                    ),
                    (b"node".to_vec(), root_node),
                    (b"public_key".to_vec(), bytes_leaf(keys.root.der.clone())),
                    (b"type".to_vec(), bytes_leaf(b"system".to_vec())),
                ]),
            ));
            self.subnet = Some(labeled(subnets));
        }
    }

    /// The time the tree certifies.
    pub fn time(&self) -> u64 {
        self.time
    }

    fn part(part: &Option<HashTree>) -> HashTree {
        part.clone().unwrap_or_else(empty)
    }

    /// The top level, with each part given by `f(label)`.
    fn top(&self, f: impl Fn(&'static [u8]) -> HashTree) -> HashTree {
        labeled(
            [
                &b"canister"[..],
                b"canister_ranges",
                b"request_status",
                b"subnet",
                b"time",
            ]
            .into_iter()
            .map(|l| (l.to_vec(), f(l)))
            .collect(),
        )
    }

    /// The root hash of the whole tree.
    pub fn root_hash(&self) -> Hash {
        self.top(|l| match l {
            b"canister" => pruned(Self::part(&self.canister).digest()),
            b"canister_ranges" => pruned(Self::part(&self.canister_ranges).digest()),
            b"request_status" => pruned(self.requests.root_hash()),
            b"subnet" => pruned(Self::part(&self.subnet).digest()),
            _ => leaf(leb128(self.time)),
        })
        .digest()
    }

    /// The witness revealing `paths` (each a list of labels from the root); `time` is always
    /// revealed. Its root hash is [`Self::root_hash`].
    pub fn witness(&self, paths: &[Vec<Vec<u8>>]) -> HashTree {
        let below = |l: &[u8]| -> Vec<&[Vec<u8>]> {
            paths
                .iter()
                .filter(|p| p.first().is_some_and(|f| f.as_slice() == l))
                .map(|p| &p[1..])
                .collect()
        };
        self.top(|l| match l {
            b"time" => leaf(leb128(self.time)),
            b"request_status" => {
                let ids = below(l);
                if ids.is_empty() {
                    return pruned(self.requests.root_hash());
                }
                if ids.iter().any(|p| p.is_empty()) {
                    return self.requests.as_hash_tree();
                }
                let mut tree: Option<HashTree> = None;
                for p in ids {
                    let w = self.requests.witness(&p[0]);
                    tree = Some(match tree {
                        None => w,
                        Some(t) => ic_certification::merge_hash_trees(t, w),
                    });
                }
                tree.unwrap_or_else(empty)
            }
            _ => {
                let part = match l {
                    b"canister" => &self.canister,
                    b"canister_ranges" => &self.canister_ranges,
                    _ => &self.subnet,
                };
                let part = Self::part(part);
                let sub = below(l);
                if sub.is_empty() {
                    pruned(part.digest())
                } else {
                    witness(part.as_ref(), &sub)
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ic_certification::LookupResult;

    fn keys() -> Keys {
        let id = Principal::from_slice(&[9; 29]);
        let range = (
            Principal::from_slice(&[0, 0, 0, 0, 0, 0, 0, 0, 1, 1]),
            Principal::from_slice(&[0, 0, 0, 0, 0, 0xF, 0xFF, 0xFF, 1, 1]),
        );
        Keys::generate(&[(id, vec![range])], 1)
    }

    #[test]
    fn witnesses_keep_the_root_hash_and_prove_absence() {
        let keys = keys();
        let mut t = StateTree::default();
        let canister = Principal::from_slice(&[0, 0, 0, 0, 0, 0, 0, 5, 1, 1]);
        t.refresh(
            &keys,
            &[CanisterFacts {
                id: canister,
                controllers: vec![Principal::anonymous()],
                module_hash: Some([7; 32]),
                metadata: vec![("candid:service".into(), b"service : {}".to_vec())],
            }],
            42,
        );
        for i in 0..50u8 {
            t.set_request([i; 32], &RequestStatus::Replied(vec![i]));
        }
        t.set_request(
            [200; 32],
            &RequestStatus::Rejected {
                code: 5,
                message: "no".into(),
                error_code: "IC0503".into(),
            },
        );
        let root = t.root_hash();
        let p = |labels: &[&[u8]]| labels.iter().map(|l| l.to_vec()).collect::<Vec<_>>();
        let w = t.witness(&[p(&[b"request_status", &[7; 32]]), p(&[b"time"])]);
        assert_eq!(w.digest(), root);
        assert_eq!(
            w.lookup_path([&b"request_status"[..], &[7; 32], b"reply"]),
            LookupResult::Found(&[7][..])
        );
        assert_eq!(
            w.lookup_path([&b"time"[..]]),
            LookupResult::Found(&[42][..])
        );
        // An unknown request is provably absent; other parts stay hidden.
        let w = t.witness(&[p(&[b"request_status", &[100; 32]])]);
        assert_eq!(w.digest(), root);
        assert_eq!(
            w.lookup_path([&b"request_status"[..], &[100; 32], b"status"]),
            LookupResult::Absent
        );
        assert_eq!(
            w.lookup_path([&b"canister"[..], canister.as_slice(), b"module_hash"]),
            LookupResult::Unknown
        );
        let w = t.witness(&[p(&[
            b"canister",
            canister.as_slice(),
            b"metadata",
            b"candid:service",
        ])]);
        assert_eq!(w.digest(), root);
        assert_eq!(
            w.lookup_path([
                &b"canister"[..],
                canister.as_slice(),
                b"metadata",
                b"candid:service"
            ]),
            LookupResult::Found(&b"service : {}"[..])
        );
        assert_eq!(
            w.lookup_path([&b"canister"[..], canister.as_slice(), b"metadata", b"nope"]),
            LookupResult::Absent
        );
        let w = t.witness(&[p(&[b"subnet"])]);
        assert_eq!(w.digest(), root);
        let sid = keys.subnets[0].id;
        assert_eq!(
            w.lookup_path([&b"subnet"[..], sid.as_slice(), b"public_key"]),
            LookupResult::Found(keys.subnets[0].key.der.as_slice())
        );
        // A status change changes the root.
        t.set_request([7; 32], &RequestStatus::Done);
        assert_ne!(t.root_hash(), root);
    }
}
