//! Requests of the HTTP interface: the CBOR envelope, the request id, and the checks the
//! replica's ingress validator makes before anything executes (dfinity/ic
//! `rs/validator/src/ingress_validation.rs`, the interface specification's "Authentication").
//!
//! - The **request id** is the representation-independent hash of the content map as sent
//!   (every field, including ones this server does not interpret), so a signature over it is
//!   checked against exactly what the client signed.
//! - **Expiry**: `ingress_expiry` must lie in `[now, now + 5 min + 30 s]` (the replica's
//!   `MAX_INGRESS_TTL` and `PERMITTED_DRIFT_AT_VALIDATOR`), else HTTP 400 `Invalid request
//!   expiry: ...` (the JS agent resynchronises its clock on exactly that text).
//! - **Sender**: the anonymous principal carries no signature; any other sender's public key
//!   must be the one its self-authenticating principal is derived from, and its signature of
//!   `"\x0Aic-request" ‖ request id` must verify: Ed25519, ECDSA on secp256k1 or P-256 over
//!   SHA-256 (the keys ic-agent's and the JS agent's identities use).
//! - **Delegations**: at most 20, no key twice, each signed by the previous key over
//!   `"\x1Aic-request-auth-delegation" ‖ hash of the delegation`, none expired, at most 1,000
//!   targets each; the targets of the chain intersect, and the called canister must be in
//!   them.

use std::collections::BTreeSet;

use candid::Principal;
use ic_transport_types::{EnvelopeContent, SignedDelegation};
use serde_cbor::Value;
use sha2::{Digest, Sha256};

/// The replica's longest ingress expiry (`MAX_INGRESS_TTL`): 5 minutes.
pub const MAX_INGRESS_TTL_NS: u64 = 5 * 60 * 1_000_000_000;

/// The drift the replica's validator tolerates beyond it (`PERMITTED_DRIFT_AT_VALIDATOR`).
pub const PERMITTED_DRIFT_AT_VALIDATOR_NS: u64 = 30 * 1_000_000_000;

/// Most delegations in a chain.
pub const MAX_DELEGATIONS: usize = 20;

/// Most targets of one delegation.
pub const MAX_TARGETS_PER_DELEGATION: usize = 1_000;

/// Most bytes of a nonce.
pub const MAX_NONCE_BYTES: usize = 32;

/// Largest ingress message an application subnet accepts (`max_ingress_bytes_per_message`):
/// 2 MiB.
pub const MAX_INGRESS_BYTES: usize = 2 * 1024 * 1024;

/// Domain separator of a request signature.
pub const REQUEST_DOMAIN: &[u8] = b"\x0Aic-request";

/// Why a request is refused before execution: an HTTP status and the replica's text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct Refusal {
    /// HTTP status.
    pub status: u16,
    /// The body text.
    pub message: String,
}

impl Refusal {
    /// A 400 Bad Request with `message`.
    pub fn bad(message: impl Into<String>) -> Refusal {
        Refusal {
            status: 400,
            message: message.into(),
        }
    }
}

/// A parsed, not yet authenticated request.
#[derive(Debug, Clone)]
pub struct Request {
    /// The content as the interface specification types it.
    pub content: EnvelopeContent,
    /// The request id.
    pub id: [u8; 32],
    /// The sender's public key (DER).
    pub sender_pubkey: Option<Vec<u8>>,
    /// The sender's signature.
    pub sender_sig: Option<Vec<u8>>,
    /// The delegation chain.
    pub delegations: Vec<SignedDelegation>,
}

/// The representation-independent hash of a CBOR value (the interface specification's
/// "Request ids"): byte and text strings hash their bytes, natural numbers their LEB128
/// encoding, arrays the concatenation of their elements' hashes, maps the sorted
/// concatenation of `hash(key) ‖ hash(value)` of their fields.
pub fn hash_of(value: &Value) -> Result<[u8; 32], Refusal> {
    Ok(match value {
        Value::Bytes(b) => Sha256::digest(b).into(),
        Value::Text(t) => Sha256::digest(t.as_bytes()).into(),
        Value::Integer(i) => {
            let n = u64::try_from(*i).map_err(|_| {
                Refusal::bad(format!("negative or too large integer {i} in request"))
            })?;
            Sha256::digest(super::certify::leb128(n)).into()
        }
        Value::Array(items) => {
            let mut h = Sha256::new();
            for item in items {
                h.update(hash_of(item)?);
            }
            h.finalize().into()
        }
        Value::Map(fields) => {
            let mut pairs = Vec::with_capacity(fields.len());
            for (k, v) in fields {
                let mut pair = hash_of(k)?.to_vec();
                pair.extend_from_slice(&hash_of(v)?);
                pairs.push(pair);
            }
            pairs.sort();
            let mut h = Sha256::new();
            for p in pairs {
                h.update(p);
            }
            h.finalize().into()
        }
        Value::Tag(_, inner) => hash_of(inner)?,
        other => {
            return Err(Refusal::bad(format!(
                "unsupported CBOR value in request: {other:?}"
            )));
        }
    })
}

fn field<'a>(map: &'a std::collections::BTreeMap<Value, Value>, name: &str) -> Option<&'a Value> {
    map.get(&Value::Text(name.to_string()))
}

fn bytes(v: Option<&Value>, what: &str) -> Result<Option<Vec<u8>>, Refusal> {
    match v {
        None => Ok(None),
        Some(Value::Bytes(b)) => Ok(Some(b.clone())),
        Some(_) => Err(Refusal::bad(format!("{what} is not a byte string"))),
    }
}

/// Parses a request body: a CBOR envelope (tag 55799 optional) with `content` and optional
/// `sender_pubkey`, `sender_sig`, `sender_delegation`.
pub fn parse(body: &[u8], what: &str) -> Result<Request, Refusal> {
    let bad = |e: String| Refusal::bad(format!("Could not parse body as {what} message: {e}"));
    let value: Value = serde_cbor::from_slice(body).map_err(|e| bad(e.to_string()))?;
    let value = match value {
        Value::Tag(55799, inner) => *inner,
        v => v,
    };
    let Value::Map(envelope) = value else {
        return Err(bad("the envelope is not a map".into()));
    };
    let content = field(&envelope, "content").ok_or_else(|| bad("no content".into()))?;
    let id = hash_of(content)?;
    let typed: EnvelopeContent =
        serde_cbor::value::from_value(content.clone()).map_err(|e| bad(e.to_string()))?;
    let delegations = match field(&envelope, "sender_delegation") {
        None => Vec::new(),
        Some(v) => serde_cbor::value::from_value(v.clone()).map_err(|e| bad(e.to_string()))?,
    };
    Ok(Request {
        content: typed,
        id,
        sender_pubkey: bytes(field(&envelope, "sender_pubkey"), "sender_pubkey")?,
        sender_sig: bytes(field(&envelope, "sender_sig"), "sender_sig")?,
        delegations,
    })
}

/// The canisters a delegation chain lets the sender act on (`None`: all).
pub type Targets = Option<BTreeSet<Principal>>;

/// Checks `ingress_expiry` against the replica's bounds at time `now` (ns).
pub fn check_expiry(expiry: u64, now: u64) -> Result<(), Refusal> {
    let max = now
        .saturating_add(MAX_INGRESS_TTL_NS)
        .saturating_add(PERMITTED_DRIFT_AT_VALIDATOR_NS);
    if expiry < now || expiry > max {
        return Err(Refusal::bad(format!(
            "Invalid request expiry: Specified ingress_expiry not within expected range: \
             Minimum allowed expiry: {}, Maximum allowed expiry: {}, Provided expiry:        {}",
            crate::instance::format_time(now),
            crate::instance::format_time(max),
            crate::instance::format_time(expiry),
        )));
    }
    Ok(())
}

/// Verifies `sig` of `msg` by the DER public key `der`.
pub fn verify_signature(der: &[u8], msg: &[u8], sig: &[u8]) -> Result<(), String> {
    use super::certify::ED25519_DER_PREFIX;
    if der.len() == 44 && der[..12] == ED25519_DER_PREFIX {
        let mut key = [0u8; 32];
        key.copy_from_slice(&der[12..]);
        let key = ed25519_dalek::VerifyingKey::from_bytes(&key)
            .map_err(|e| format!("Invalid public key: malformed Ed25519 public key: {e}"))?;
        let sig = ed25519_dalek::Signature::from_slice(sig)
            .map_err(|e| format!("Invalid basic signature: Ed25519 signature: {e}"))?;
        return key.verify_strict(msg, &sig).map_err(|e| {
            format!("Invalid basic signature: Ed25519 signature could not be verified: {e}")
        });
    }
    use k256::pkcs8::DecodePublicKey;
    if let Ok(key) = k256::ecdsa::VerifyingKey::from_public_key_der(der) {
        let sig = k256::ecdsa::Signature::from_slice(sig)
            .map_err(|e| format!("Invalid basic signature: ECDSA secp256k1 signature: {e}"))?;
        use k256::ecdsa::signature::Verifier;
        return key.verify(msg, &sig).map_err(|e| {
            format!("Invalid basic signature: ECDSA secp256k1 signature could not be verified: {e}")
        });
    }
    if let Ok(key) = p256::ecdsa::VerifyingKey::from_public_key_der(der) {
        let sig = p256::ecdsa::Signature::from_slice(sig)
            .map_err(|e| format!("Invalid basic signature: ECDSA P-256 signature: {e}"))?;
        use p256::ecdsa::signature::Verifier;
        return key.verify(msg, &sig).map_err(|e| {
            format!("Invalid basic signature: ECDSA P-256 signature could not be verified: {e}")
        });
    }
    Err(format!(
        "Invalid public key: unsupported or malformed public key {} (this server verifies Ed25519, ECDSA secp256k1 and P-256 keys, not canister signatures or WebAuthn)",
        hex::encode(der)
    ))
}

impl Request {
    /// Authenticates the request at time `now`: expiry, sender, signature, delegations.
    /// Returns the canisters the sender may act on.
    pub fn authenticate(&self, now: u64) -> Result<Targets, Refusal> {
        check_expiry(self.content.ingress_expiry(), now)?;
        if let EnvelopeContent::Call { nonce: Some(n), .. }
        | EnvelopeContent::Query { nonce: Some(n), .. } = &self.content
            && n.len() > MAX_NONCE_BYTES
        {
            return Err(Refusal::bad(format!(
                "Nonce in request is too big: got {} bytes, but at most {MAX_NONCE_BYTES} are allowed",
                n.len()
            )));
        }
        let sender = *self.content.sender();
        let (pubkey, sig) = match (&self.sender_pubkey, &self.sender_sig) {
            (None, None) if sender == Principal::anonymous() => {
                if !self.delegations.is_empty() {
                    return Err(Refusal::bad(
                        "Signature is not allowed for the anonymous user",
                    ));
                }
                return Ok(None);
            }
            (_, _) if sender == Principal::anonymous() => {
                return Err(Refusal::bad(
                    "Signature is not allowed for the anonymous user",
                ));
            }
            (Some(k), Some(s)) => (k, s),
            _ => {
                return Err(Refusal::bad(format!(
                    "Missing signature from user: {sender}"
                )));
            }
        };
        if Principal::self_authenticating(pubkey) != sender {
            return Err(Refusal::bad(format!(
                "The user id {sender} does not match the public key {}",
                hex::encode(pubkey)
            )));
        }
        if self.delegations.len() > MAX_DELEGATIONS {
            return Err(Refusal::bad(format!(
                "Invalid delegation: Chain of delegations is too long: got {} delegations, but at most {MAX_DELEGATIONS} are allowed",
                self.delegations.len()
            )));
        }
        let mut seen: BTreeSet<&[u8]> = BTreeSet::new();
        seen.insert(pubkey.as_slice());
        for d in &self.delegations {
            if !seen.insert(d.delegation.pubkey.as_slice()) {
                return Err(Refusal::bad(format!(
                    "Invalid delegation: delegations contain a cycle: public key {} appears twice",
                    hex::encode(&d.delegation.pubkey)
                )));
            }
            if let Some(t) = &d.delegation.targets
                && t.len() > MAX_TARGETS_PER_DELEGATION
            {
                return Err(Refusal::bad(format!(
                    "Invalid delegation: expected at most {MAX_TARGETS_PER_DELEGATION} targets per delegation, but got {}",
                    t.len()
                )));
            }
            if d.delegation.expiration < now {
                return Err(Refusal::bad(format!(
                    "Invalid delegation expiry: Specified sender delegation has expired:\nProvided expiry:    {}\nLocal replica time: {}",
                    crate::instance::format_time(d.delegation.expiration),
                    crate::instance::format_time(now),
                )));
            }
        }
        let mut key: &[u8] = pubkey;
        let mut targets: Targets = None;
        for d in &self.delegations {
            verify_signature(key, &d.delegation.signable(), &d.signature)
                .map_err(|e| Refusal::bad(format!("Invalid delegation: {e}")))?;
            if let Some(t) = &d.delegation.targets {
                let t: BTreeSet<Principal> = t.iter().copied().collect();
                targets = Some(match targets {
                    None => t,
                    Some(prev) => prev.intersection(&t).copied().collect(),
                });
            }
            key = &d.delegation.pubkey;
        }
        let mut msg = REQUEST_DOMAIN.to_vec();
        msg.extend_from_slice(&self.id);
        verify_signature(key, &msg, sig)
            .map_err(|e| Refusal::bad(format!("Invalid signature: {e}")))?;
        Ok(targets)
    }

    /// Authenticates a call or query to `canister`: as [`Self::authenticate`], and the canister
    /// must be among the delegation targets.
    pub fn authenticate_for(&self, canister: &Principal, now: u64) -> Result<Targets, Refusal> {
        let targets = self.authenticate(now)?;
        if let Some(t) = &targets
            && !t.contains(canister)
        {
            return Err(Refusal::bad(format!(
                "Canister {canister} is not one of the delegation targets"
            )));
        }
        Ok(targets)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ic_transport_types::to_request_id;

    #[test]
    fn the_request_id_is_the_agents_one() {
        let content = EnvelopeContent::Call {
            nonce: Some(vec![1, 2, 3]),
            ingress_expiry: 1_700_000_000_000_000_000,
            sender: Principal::anonymous(),
            canister_id: Principal::from_slice(&[0, 0, 0, 0, 0, 0, 0, 1, 1, 1]),
            method_name: "create_order".into(),
            arg: vec![0x44, 0x49, 0x44, 0x4c],
            sender_info: None,
        };
        let value = serde_cbor::value::to_value(&content).unwrap();
        assert_eq!(hash_of(&value).unwrap(), *to_request_id(&content).unwrap());
    }

    #[test]
    fn expiry_bounds_are_the_replicas() {
        let now = 1_700_000_000_000_000_000;
        assert!(check_expiry(now, now).is_ok());
        assert!(
            check_expiry(
                now + MAX_INGRESS_TTL_NS + PERMITTED_DRIFT_AT_VALIDATOR_NS,
                now
            )
            .is_ok()
        );
        let late = check_expiry(
            now + MAX_INGRESS_TTL_NS + PERMITTED_DRIFT_AT_VALIDATOR_NS + 1,
            now,
        )
        .unwrap_err();
        assert_eq!(late.status, 400);
        assert!(late.message.starts_with("Invalid request expiry: "));
        assert!(check_expiry(now - 1, now).is_err());
    }

    #[test]
    fn signatures_of_each_key_type_verify_and_forgeries_do_not() {
        use k256::pkcs8::EncodePublicKey;
        let msg = b"\x0Aic-requestabc";
        // Ed25519.
        let sk = ed25519_dalek::SigningKey::from_bytes(&[7; 32]);
        let mut der = crate::http_interface::certify::ED25519_DER_PREFIX.to_vec();
        der.extend_from_slice(sk.verifying_key().as_bytes());
        use ed25519_dalek::Signer;
        let sig = sk.sign(msg).to_bytes();
        assert!(verify_signature(&der, msg, &sig).is_ok());
        assert!(verify_signature(&der, b"other", &sig).is_err());
        // secp256k1.
        let sk = k256::ecdsa::SigningKey::from_slice(&[9; 32]).unwrap();
        let der = sk
            .verifying_key()
            .to_public_key_der()
            .unwrap()
            .as_bytes()
            .to_vec();
        let sig: k256::ecdsa::Signature = k256::ecdsa::signature::Signer::sign(&sk, msg);
        assert!(verify_signature(&der, msg, &sig.to_bytes()).is_ok());
        assert!(verify_signature(&der, b"other", &sig.to_bytes()).is_err());
        // P-256.
        let sk = p256::ecdsa::SigningKey::from_slice(&[11; 32]).unwrap();
        let der = sk
            .verifying_key()
            .to_public_key_der()
            .unwrap()
            .as_bytes()
            .to_vec();
        let sig: p256::ecdsa::Signature = p256::ecdsa::signature::Signer::sign(&sk, msg);
        assert!(verify_signature(&der, msg, &sig.to_bytes()).is_ok());
        assert!(verify_signature(&der, b"other", &sig.to_bytes()).is_err());
        assert!(
            verify_signature(&[1, 2, 3], msg, &[0; 64])
                .unwrap_err()
                .starts_with("Invalid public key")
        );
    }
}
