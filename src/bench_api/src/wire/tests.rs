use candid::Encode;
use proptest::prelude::*;

use super::*;
use crate::OpError;

fn f64_bits() -> impl Strategy<Value = f64> {
    any::<u64>().prop_map(f64::from_bits)
}

/// Equal, NaN payloads included.
fn same(a: f64, b: f64) -> bool {
    a.to_bits() == b.to_bits()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2_000))]

    #[test]
    fn decodes_what_candid_encodes(i in any::<i64>(), f in f64_bits(), a in ".*", b in ".*") {
        let (x, y) = decode_i64_f64(&Encode!(&i, &f).unwrap()).unwrap();
        prop_assert!(x == i && same(y, f));
        prop_assert_eq!(decode_i64(&Encode!(&i).unwrap()).unwrap(), (i,));
        prop_assert_eq!(decode_text_text(&Encode!(&a, &b).unwrap()).unwrap(), (a, b));
    }

    #[test]
    fn blobs_are_what_candid_makes_of_bytes(blob in proptest::collection::vec(any::<u8>(), 0..300)) {
        let candid_bytes = candid::encode_one(serde_bytes::ByteBuf::from(blob.clone())).unwrap();
        prop_assert_eq!(&encode_blob(&blob), &candid_bytes);
        prop_assert_eq!(&decode_blob(&candid_bytes).unwrap(), &blob);
        // `vec nat8` from a plain Vec<u8> is the same type: the same bytes.
        prop_assert_eq!(candid::encode_one(&blob).unwrap(), candid_bytes);
    }

    #[test]
    fn success_replies_are_candid_bytes_of_the_ok_case_and_decode_as_the_result(
        t in any::<u64>(),
        rows in any::<u64>(),
        rowid in any::<i64>(),
        blob in proptest::collection::vec(any::<u8>(), 0..300),
    ) {
        let submit = encode_submit_result(Ok(t));
        prop_assert_eq!(&submit, &candid::encode_one(OkOnly::Ok(t)).unwrap());
        prop_assert_eq!(candid::decode_one::<SubmitResult>(&submit).unwrap(), SubmitResult::Ok(t));

        let committed = Outcome::Committed { rows_changed: rows, last_insert_rowid: rowid };
        let write = encode_write_result(Ok(committed.clone()));
        prop_assert_eq!(
            &write,
            &candid::encode_one(OkOnly::Ok(CommittedOnly::Committed {
                rows_changed: rows,
                last_insert_rowid: rowid,
            }))
            .unwrap()
        );
        prop_assert_eq!(candid::decode_one::<WriteResult>(&write).unwrap(), WriteResult::Ok(committed));

        let packed = encode_packed_result(Ok(blob.clone()));
        prop_assert_eq!(
            &packed,
            &candid::encode_one(OkOnly::Ok(serde_bytes::ByteBuf::from(blob.clone()))).unwrap()
        );
        prop_assert_eq!(
            candid::decode_one::<PackedResult>(&packed).unwrap(),
            PackedResult::Ok(serde_bytes::ByteBuf::from(blob))
        );
    }
}

#[test]
fn other_blob_encodings_go_through_candid() {
    // The same blob with a type table of two entries (an unused `text` first): valid Candid,
    // not the fast path.
    let mut bytes = b"DIDL".to_vec();
    bytes.extend_from_slice(&[0x02, 0x6d, 0x71, 0x6d, 0x7b, 0x01, 0x01, 0x03, 1, 2, 3]);
    assert_eq!(decode_blob(&bytes).unwrap(), vec![1, 2, 3]);
    // A text is not a blob.
    assert!(decode_blob(&candid::encode_one("abc").unwrap()).is_err());
    // Trailing or missing bytes are refused.
    let mut long = encode_blob(&[1, 2, 3]);
    long.push(0);
    assert!(decode_blob(&long).is_err());
    let short = encode_blob(&[1, 2, 3]);
    assert!(decode_blob(&short[..short.len() - 1]).is_err());
}

#[test]
fn failures_and_refusals_go_through_candid_in_full() {
    let failed = Outcome::Failed(OpError {
        code: 787,
        message: "FOREIGN KEY constraint failed".into(),
    });
    assert_eq!(
        encode_write_result(Ok(failed.clone())),
        candid::encode_one(WriteResult::Ok(failed)).unwrap()
    );
    let refusal = WriteError::QueueFull { capacity: 7 };
    assert_eq!(
        encode_submit_result(Err(refusal.clone())),
        candid::encode_one(SubmitResult::Err(refusal.clone())).unwrap()
    );
    assert_eq!(
        encode_write_result(Err(refusal.clone())),
        candid::encode_one(WriteResult::Err(refusal.clone())).unwrap()
    );
    assert_eq!(
        candid::decode_one::<PackedResult>(&encode_packed_result(Err(refusal.clone()))).unwrap(),
        PackedResult::Err(refusal)
    );
    // The success replies' sizes: what each costs in reply bytes (50 instructions each): a bare
    // ticket was 15 bytes, a bare committed outcome (with the type table of `Failed` and
    // `NotExecuted`) 71: a typed ticket costs 7 bytes more, a typed committed outcome 19 fewer.
    assert_eq!(encode_submit_result(Ok(7)).len(), 22);
    assert_eq!(candid::encode_one(7u64).unwrap().len(), 15);
    let committed = Outcome::Committed {
        rows_changed: 1,
        last_insert_rowid: 7,
    };
    assert_eq!(
        (
            encode_write_result(Ok(committed.clone())).len(),
            candid::encode_one(committed).unwrap().len()
        ),
        (52, 71)
    );
}

#[test]
fn other_valid_encodings_are_decoded_by_candid() {
    // The same arguments written from Candid text: a valid encoding with a type table entry
    // that the fast path does not expect.
    let args = candid_parser::parse_idl_args("(-5 : int64, 2.5 : float64, opt (7 : nat))").unwrap();
    let bytes = args.to_bytes().unwrap();
    assert_eq!(decode_i64_f64(&bytes).unwrap(), (-5, 2.5));
    // Truncated or mistyped bytes are refused, as candid refuses them.
    let good = Encode!(&1i64, &2.0f64).unwrap();
    assert!(decode_i64_f64(&good[..good.len() - 1]).is_err());
    assert!(decode_i64_f64(&Encode!(&"x", &2.0f64).unwrap()).is_err());
    assert!(decode_i64(b"DIDL\x00\x01\x74").is_err());
    // Text that is not UTF-8 is refused.
    assert!(decode_text_text(b"DIDL\x00\x02\x71\x71\x01\xff\x00").is_err());
    // An empty argument list is refused for a method that takes arguments.
    assert!(decode_text_text(b"DIDL\x00\x00").is_err());
}

#[test]
fn the_precomputed_prefixes_are_candids() {
    let prefix = |bytes: Vec<u8>, value_len: usize| bytes[..bytes.len() - value_len].to_vec();
    assert_eq!(
        SUBMIT_OK_PREFIX.to_vec(),
        prefix(candid::encode_one(OkOnly::Ok(0u64)).unwrap(), 8)
    );
    assert_eq!(
        PACKED_OK_PREFIX.to_vec(),
        prefix(
            candid::encode_one(OkOnly::Ok(serde_bytes::ByteBuf::new())).unwrap(),
            1
        )
    );
    // `rows_changed` is the first of the two fields on the wire (Candid orders a record's
    // fields by the hash of their names).
    let probe = candid::encode_one(OkOnly::Ok(CommittedOnly::Committed {
        rows_changed: 1,
        last_insert_rowid: 2,
    }))
    .unwrap();
    assert_eq!(COMMITTED_OK_PREFIX.to_vec(), prefix(probe.clone(), 16));
    assert_eq!(probe[probe.len() - 16..probe.len() - 8], 1u64.to_le_bytes());
}
