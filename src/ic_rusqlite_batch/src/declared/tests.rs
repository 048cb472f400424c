use batch_types::BatchKey;
use batch_types::declare::{Blob, InvalidParam, encode_request};

use super::*;

crate::writes! {
    /// A ledger's writes, for these tests.
    pub enum LedgerWrite {
        /// Opens an account.
        open = "INSERT INTO accounts (owner, memo) VALUES (?1, ?2)" {
            owner: String [max 8],
            memo: Option<Blob> [max 2],
        },
        /// Moves an amount.
        transfer = "UPDATE accounts SET balance = balance + ?2 WHERE id = ?1" {
            id: i64,
            amount: f64,
        },
        /// Closes every account: controllers only.
        close_all (controllers) = "DELETE FROM accounts" {},
    }
}

const KEY: BatchKey = BatchKey {
    created_at_time: 5,
    id: [1; 16],
};

fn ops() -> Vec<LedgerWrite> {
    vec![
        LedgerWrite::open {
            owner: "ann".into(),
            memo: None,
        },
        LedgerWrite::transfer {
            id: 1,
            amount: -2.5,
        },
    ]
}

#[test]
fn both_methods_give_the_same_ops_and_the_same_digest() {
    let candid = candid_batch(ops()).unwrap();
    let (header, packed) =
        packed_batch(LedgerWrite::declaration(), &encode_request(&KEY, &ops())).unwrap();
    assert_eq!(header.key, KEY);
    assert_eq!(candid, packed);
    assert!(!candid.needs_controller);
    assert_eq!(
        candid.ops,
        [
            WriteOp::Single(Statement::new(
                "INSERT INTO accounts (owner, memo) VALUES (?1, ?2)",
                vec![SqlValue::Text("ann".into()), SqlValue::Null],
            )),
            WriteOp::Single(Statement::new(
                "UPDATE accounts SET balance = balance + ?2 WHERE id = ?1",
                vec![SqlValue::Integer(1), SqlValue::Real(-2.5)],
            )),
        ]
    );
    // Another op, another digest: a key reused for it is refused by batch_core.
    let mut other = ops();
    other[1] = LedgerWrite::transfer { id: 1, amount: 2.5 };
    assert_ne!(candid_batch(other).unwrap().digest, candid.digest);
}

#[test]
fn a_write_for_controllers_marks_the_batch() {
    let mut ops = ops();
    ops.push(LedgerWrite::close_all {});
    assert!(candid_batch(ops.clone()).unwrap().needs_controller);
    let request = encode_request(&KEY, &ops);
    assert!(
        packed_batch(LedgerWrite::declaration(), &request)
            .unwrap()
            .1
            .needs_controller
    );
}

#[test]
fn an_oversized_parameter_is_refused_naming_op_write_and_parameter() {
    let mut ops = ops();
    ops.push(LedgerWrite::open {
        owner: "ann".into(),
        memo: Some(Blob::from(vec![0; 3])),
    });
    let expected = BatchRefusal::InvalidParam(InvalidParam {
        op: 2,
        write: "open".into(),
        param: "memo".into(),
        reason: "3 bytes; at most 2".into(),
    });
    assert_eq!(candid_batch(ops.clone()).unwrap_err(), expected);
    let request = encode_request(&KEY, &ops);
    assert_eq!(
        packed_batch(LedgerWrite::declaration(), &request).unwrap_err(),
        expected
    );
}

#[test]
fn a_request_for_another_declaration_is_refused_with_both_digests() {
    let mut request = encode_request(&KEY, &ops());
    request[1] ^= 0xff;
    let canister = LedgerWrite::declaration().digest;
    let mut sent = canister;
    sent[0] ^= 0xff;
    assert_eq!(
        packed_batch(LedgerWrite::declaration(), &request).unwrap_err(),
        BatchRefusal::DeclarationMismatch {
            canister: canister.to_vec().into(),
            request: sent.to_vec().into(),
        }
    );
}

#[test]
fn malformed_and_oversized_batches_are_refused_whole() {
    let request = encode_request(&KEY, &ops());
    let cut = &request[..request.len() - 3];
    assert!(matches!(
        packed_batch(LedgerWrite::declaration(), cut).unwrap_err(),
        BatchRefusal::Malformed { offset, .. } if offset as usize <= cut.len()
    ));
    let many = vec![LedgerWrite::close_all {}; MAX_DECLARED_BATCH_OPS + 1];
    let refusal = BatchRefusal::Refused(WriteError::Invalid(
        "10001 ops in one batch; the limit is 10000".into(),
    ));
    assert_eq!(candid_batch(many.clone()).unwrap_err(), refusal);
    let err = packed_batch(LedgerWrite::declaration(), &encode_request(&KEY, &many)).unwrap_err();
    assert!(
        matches!(&err, BatchRefusal::Malformed { what, .. } if what == "more than 10000 ops"),
        "{err:?}"
    );
    assert_eq!(
        candid_batch(vec![LedgerWrite::close_all {}; MAX_DECLARED_BATCH_OPS])
            .unwrap()
            .ops
            .len(),
        MAX_DECLARED_BATCH_OPS
    );
}

/// One write per call is checked as a batch's op 0: a parameter past its size is `Invalid`
/// naming the write and the parameter, a write for controllers only says so, and a valid one
/// is its declared statement with its parameters in order.
#[test]
fn a_single_write_is_checked_by_its_declaration() {
    let (op, controllers_only) = single_op(LedgerWrite::transfer { id: 3, amount: 1.5 }).unwrap();
    assert_eq!(
        op,
        WriteOp::Single(Statement::new(
            "UPDATE accounts SET balance = balance + ?2 WHERE id = ?1",
            vec![SqlValue::Integer(3), SqlValue::Real(1.5)],
        ))
    );
    assert!(!controllers_only);
    assert!(single_op(LedgerWrite::close_all {}).unwrap().1);
    assert_eq!(
        single_op(LedgerWrite::open {
            owner: "annabelle".into(),
            memo: None,
        }),
        Err(WriteError::Invalid(
            "op 0 (open, parameter owner): 9 bytes; at most 8".into()
        ))
    );
    // NaN is SQLite's NULL: refused where the parameter is not nullable.
    let nan = single_op(LedgerWrite::transfer {
        id: 3,
        amount: f64::NAN,
    });
    assert!(
        matches!(&nan, Err(WriteError::Invalid(m)) if m.starts_with("op 0 (transfer, parameter amount)")),
        "{nan:?}"
    );
}
