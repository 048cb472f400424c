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
    fn encodes_what_candid_encodes(t in any::<u64>(), rows in any::<u64>(), rowid in any::<i64>()) {
        prop_assert_eq!(encode_ticket(t), candid::encode_one(t).unwrap());
        let committed = Outcome::Committed { rows_changed: rows, last_insert_rowid: rowid };
        prop_assert_eq!(
            encode_outcome(committed.clone()),
            candid::encode_one(committed).unwrap()
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
fn failed_outcomes_go_through_candid() {
    let failed = Outcome::Failed(OpError {
        code: 787,
        message: "FOREIGN KEY constraint failed".into(),
    });
    assert_eq!(
        encode_outcome(failed.clone()),
        candid::encode_one(failed).unwrap()
    );
    assert_eq!(encode_ticket(7).len(), 15);
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
fn reject_messages_name_the_error() {
    use crate::WriteError;
    for e in [
        WriteError::QueueFull { capacity: 7 },
        WriteError::QueueBytesFull {
            pending_bytes: 10,
            capacity_bytes: 20,
        },
        WriteError::Invalid("username has 101 bytes; the limit is 100".into()),
        WriteError::NotAuthorized,
        WriteError::Database("COMMIT failed: disk full".into()),
    ] {
        assert_eq!(WriteError::from_reject(&e.to_string()), Some(e));
    }
    assert_eq!(WriteError::from_reject("Canister trapped"), None);
}
