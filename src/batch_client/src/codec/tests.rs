//! [`Declared`] against the canister's side of the format: the request the canister reads,
//! the replies it answers, and what the batcher does with each refusal.

use batch_types::declare::{Blob, InvalidParam, Writes};
use batch_types::{OpError, StoreShare};

use super::*;

batch_types::writes! {
    /// A note store: the codec's test declaration (every parameter kind, a nullable one).
    pub enum NoteWrite {
        /// A note.
        add = "INSERT INTO notes (title, body, pinned, weight) VALUES (?1, ?2, ?3, ?4)" {
            title: String [max 100], body: Option<Blob>, pinned: i64, weight: f64
        },
        /// Deletes note `id`.
        delete = "DELETE FROM notes WHERE id = ?1" { id: i64 },
    }
}

fn ops() -> Vec<NoteWrite> {
    vec![
        NoteWrite::add {
            title: "é".repeat(50),
            body: Some(Blob::from(vec![7; 300])),
            pinned: -1,
            weight: 0.25,
        },
        NoteWrite::delete { id: i64::MIN },
        NoteWrite::add {
            title: String::new(),
            body: None,
            pinned: 1 << 40,
            weight: f64::NAN,
        },
    ]
}

fn encoded_reply(result: PackedWritesResult) -> Vec<u8> {
    candid::encode_one(result).expect("encode")
}

#[test]
fn the_blob_framing_is_candids_and_within_its_bound() {
    for len in [0, 1, 127, 128, 16_383, 16_384, 2 * 1024 * 1024 - 1] {
        let bytes: Vec<u8> = (0..len).map(|i| i as u8).collect();
        let framed = encode_blob_arg(&bytes);
        assert_eq!(
            framed,
            candid::encode_one(Blob::from(bytes.clone())).unwrap(),
            "{len}"
        );
        assert!(framed.len() - len <= CANDID_BLOB_FRAMING_BYTES, "{len}");
    }
}

#[test]
fn the_canister_reads_the_request_as_sent_within_the_bytes_the_batcher_counted() {
    let codec = Declared::<NoteWrite>::new();
    let key = BatchKey {
        created_at_time: 1_700_000_000_123_456_789,
        id: *b"prefix!!\0\0\0\0\0\0\0\x2a",
    };
    let ops = ops();
    let request = codec.encode(&key, &ops);
    let counted = codec.header_len() + ops.iter().map(|op| codec.op_len(op)).sum::<usize>();
    // The header's bound holds 3 LEB128 bytes of length; this blob's length takes 2.
    assert_eq!(request.len(), counted - 1);

    let blob: Blob = candid::decode_one(&request).expect("a blob argument");
    let (header, body) = packed::read_header(&blob).expect("a request header");
    assert_eq!(header.digest, NoteWrite::declaration().digest);
    assert_eq!(header.key.created_at_time, key.created_at_time);
    assert_eq!(header.key.id, key.id);
    let read = packed::read_ops(NoteWrite::declaration(), body, 3).expect("the ops");
    assert_eq!(read.len(), 3);
    for (read, op) in read.into_iter().zip(ops) {
        assert_eq!(read.write, op.index());
        // NaN does not equal itself: compare the debug forms.
        assert_eq!(
            format!("{:?}", read.params),
            format!("{:?}", op.into_params())
        );
    }
}

#[test]
fn replies_are_read_as_outcomes_or_a_typed_refusal() {
    let codec = Declared::<NoteWrite>::new();
    let outcomes = vec![
        Outcome::Committed {
            rows_changed: 1,
            last_insert_rowid: 5,
        },
        Outcome::Failed(OpError {
            code: 2067,
            message: "UNIQUE constraint failed".into(),
        }),
    ];
    for duplicate in [false, true] {
        let reply = encoded_reply(PackedWritesResult::Ok(Blob::from(packed::encode_reply(
            duplicate, &outcomes,
        ))));
        assert_eq!(
            codec.decode(&reply, 2),
            Ok(Reply::Executed {
                outcomes: outcomes.clone(),
                duplicate
            })
        );
        // Fewer outcomes than ops, or more: the reply cannot be read.
        assert!(codec.decode(&reply, 3).is_err());
        assert!(codec.decode(&reply, 1).is_err());
    }
    let mismatch = BatchRefusal::DeclarationMismatch {
        canister: Blob::from(vec![1; 8]),
        request: Blob::from(NoteWrite::declaration().digest.to_vec()),
    };
    assert_eq!(
        codec.decode(&encoded_reply(PackedWritesResult::Err(mismatch.clone())), 2),
        Ok(Reply::Refused(mismatch))
    );
    // A reply of the reference canister's format (version 3) is not one of these.
    let mut other = packed::encode_reply(false, &outcomes);
    other[0] = 3;
    assert!(
        codec
            .decode(&encoded_reply(PackedWritesResult::Ok(Blob::from(other))), 2)
            .is_err()
    );
    assert!(codec.decode(b"DIDL", 2).is_err());
}

#[test]
fn each_refusal_has_its_kind() {
    let codec = Declared::<NoteWrite>::new();
    let kind = |r: BatchRefusal| codec.refusal_kind(&r);
    let invalid = InvalidParam {
        op: 0,
        write: "add".into(),
        param: "title".into(),
        reason: "101 bytes; at most 100".into(),
    };
    assert_eq!(kind(BatchRefusal::NotAuthorized), RefusalKind::Final);
    assert_eq!(
        kind(BatchRefusal::InvalidParam(invalid)),
        RefusalKind::Final
    );
    assert_eq!(
        kind(BatchRefusal::DeclarationMismatch {
            canister: Blob::from(vec![0; 8]),
            request: Blob::from(vec![1; 8]),
        }),
        RefusalKind::Final
    );
    assert_eq!(
        kind(BatchRefusal::Malformed {
            offset: 3,
            what: "x".into()
        }),
        RefusalKind::Final
    );
    for (error, expected) in [
        (
            WriteError::TooOld {
                created_at_time: 0,
                now: 1,
                oldest_accepted: 1,
            },
            RefusalKind::TooOld,
        ),
        (
            WriteError::StoreFull {
                keys_held: 1,
                max_keys: 1,
                bytes_held: 0,
                max_bytes: 1,
                share: StoreShare::Caller,
            },
            RefusalKind::Retry,
        ),
        (WriteError::Database("busy".into()), RefusalKind::Retry),
        (WriteError::QueueFull { capacity: 1 }, RefusalKind::Retry),
        (WriteError::Invalid("no".into()), RefusalKind::Final),
        (
            WriteError::DigestMismatch { created_at_time: 1 },
            RefusalKind::Final,
        ),
    ] {
        assert_eq!(RefusalKind::of_write_error(&error), expected, "{error:?}");
        assert_eq!(
            kind(BatchRefusal::Refused(error.clone())),
            expected,
            "{error:?}"
        );
    }
    assert_eq!(
        codec.refusal_of_reject(RejectCode::CanisterReject, "no"),
        None
    );
}

#[test]
fn only_ops_the_budget_did_not_reach_are_not_executed() {
    let failed = |code, message: &str| {
        Outcome::Failed(OpError {
            code,
            message: message.into(),
        })
    };
    let codec = Declared::<NoteWrite>::new();
    assert!(codec.not_executed(&Outcome::NotExecuted));
    assert!(!codec.not_executed(&failed(9, "interrupted: the op reached its limit")));
    // The text of an older canister's failure is a failure: only the variant says "not run".
    assert!(!codec.not_executed(&failed(9, "not executed: the budget was used up")));
    assert!(!codec.not_executed(&Outcome::Committed {
        rows_changed: 0,
        last_insert_rowid: 0
    }));
}
