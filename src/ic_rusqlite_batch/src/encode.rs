//! Candid replies with their type table built once per type. `candid::encode_one` builds the
//! reply's type table on every call (the type, its memo, a subtype-ordered map of its
//! components): for a `WriteResult` that was about 300,000 instructions of a 490,000-instruction
//! `execute_write` whose insert failed on its foreign key, against 27,000 for SQLite's part
//! (engine: offline (wasmtime, IC metering), `offline-engine profile`; 168,846 with the table
//! built once). The table of a Rust type never changes, so the first
//! reply of each type keeps its header (`DIDL`, the table, the argument's type), and every
//! reply is that header and the value's own bytes: the same bytes as `candid::encode_one`
//! (a test compares them), for the value's few hundred instructions. The first reply of a type
//! (after an install or an upgrade: the headers live in the heap) serializes its value twice.

use std::any::TypeId;
use std::cell::RefCell;
use std::collections::BTreeMap;

use candid::CandidType;
use candid::ser::{IDLBuilder, ValueSerializer};

thread_local! {
    /// The header of each reply type encoded so far.
    static HEADERS: RefCell<BTreeMap<TypeId, Vec<u8>>> = const { RefCell::new(BTreeMap::new()) };
}

/// `value` as `candid::encode_one` encodes it, its type's header built at the first call.
pub fn encode_one<T: CandidType + 'static>(value: &T) -> Result<Vec<u8>, candid::Error> {
    let mut values = ValueSerializer::new();
    value.idl_serialize(&mut values)?;
    let body = values.get_result();
    let known = HEADERS.with_borrow(|headers| {
        headers.get(&TypeId::of::<T>()).map(|header| {
            let mut bytes = Vec::with_capacity(header.len() + body.len());
            bytes.extend_from_slice(header);
            bytes.extend_from_slice(body);
            bytes
        })
    });
    if let Some(bytes) = known {
        return Ok(bytes);
    }
    let bytes = IDLBuilder::new().arg(value)?.serialize_to_vec()?;
    // The value's bytes end the message; what comes before them is the type's.
    let header = bytes
        .strip_suffix(body)
        .ok_or_else(|| candid::Error::msg("the value's bytes do not end its encoding"))?;
    HEADERS.with_borrow_mut(|headers| headers.insert(TypeId::of::<T>(), header.to_vec()));
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use batch_types::{FlushSummary, OpError, Outcome, SubmitResult, WriteError, WriteResult};
    use candid::Principal;

    use super::encode_one;

    /// Every value, the first of its type or not, encodes as `candid::encode_one` does.
    #[test]
    fn replies_are_candid_s_bytes_whichever_comes_first() {
        let values = [
            WriteResult::Ok(Outcome::Committed {
                rows_changed: 1,
                last_insert_rowid: -7,
            }),
            WriteResult::Err(WriteError::Invalid(
                "op 0 (add, parameter title): 201 bytes".into(),
            )),
            WriteResult::Ok(Outcome::Failed(OpError {
                code: 19,
                message: "CHECK constraint failed".into(),
            })),
            WriteResult::Err(WriteError::NotAuthorized),
        ];
        for value in &values {
            assert_eq!(
                encode_one(value).unwrap(),
                candid::encode_one(value).unwrap()
            );
        }
        for value in [
            SubmitResult::Ok(u64::MAX),
            SubmitResult::Err(WriteError::NotAuthorized),
        ] {
            assert_eq!(
                encode_one(&value).unwrap(),
                candid::encode_one(&value).unwrap()
            );
        }
        let summary: Result<FlushSummary, WriteError> = Ok(FlushSummary {
            executed: 3,
            committed: 2,
            failed: 1,
            interrupted: 0,
            remaining: 9,
            more_due: true,
            instructions: 123_456,
        });
        assert_eq!(
            encode_one(&summary).unwrap(),
            candid::encode_one(&summary).unwrap()
        );
        let writers = vec![Principal::anonymous(), Principal::management_canister()];
        assert_eq!(
            encode_one(&writers).unwrap(),
            candid::encode_one(&writers).unwrap()
        );
        let none: Option<Vec<u8>> = None;
        assert_eq!(
            encode_one(&none).unwrap(),
            candid::encode_one(&none).unwrap()
        );
        let some = Some(vec![1u8, 2]);
        assert_eq!(
            encode_one(&some).unwrap(),
            candid::encode_one(&some).unwrap()
        );
    }
}
