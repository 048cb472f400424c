use proptest::prelude::*;

use super::*;
use crate::OpError;

fn op() -> impl Strategy<Value = UserOrderOp> {
    prop_oneof![
        (any::<i64>(), any::<u64>()).prop_map(|(user_id, bits)| UserOrderOp::CreateOrder {
            user_id,
            amount: f64::from_bits(bits)
        }),
        (any::<i64>(), any::<u64>()).prop_map(|(order_id, bits)| {
            UserOrderOp::UpdateOrderAmount {
                order_id,
                amount: f64::from_bits(bits),
            }
        }),
        any::<i64>().prop_map(|user_id| UserOrderOp::DeleteUserOrders { user_id }),
        (".{0,20}", "\\PC{0,20}")
            .prop_map(|(username, email)| UserOrderOp::CreateUser { username, email }),
    ]
}

fn outcome() -> impl Strategy<Value = Outcome> {
    prop_oneof![
        (any::<u64>(), any::<i64>()).prop_map(|(rows_changed, last_insert_rowid)| {
            Outcome::Committed {
                rows_changed,
                last_insert_rowid,
            }
        }),
        (any::<i32>(), ".{0,40}")
            .prop_map(|(code, message)| Outcome::Failed(OpError { code, message })),
    ]
}

/// Outcomes with runs in them: committed rows with rowids that step by a constant (what
/// batches of inserts and updates return), some at the ends of the 64-bit range, between
/// single outcomes of any kind.
fn outcomes() -> impl Strategy<Value = Vec<Outcome>> {
    let run = (
        1usize..8,
        prop_oneof![Just(0u64), Just(1), any::<u64>()],
        prop_oneof![
            Just(0i64),
            Just(i64::MAX - 3),
            Just(i64::MIN + 3),
            any::<i64>()
        ],
        prop_oneof![Just(0i64), Just(1), Just(-1), -3i64..3],
    )
        .prop_map(|(count, rows_changed, first, step)| {
            (0..count as i64)
                .map_while(|k| {
                    Some(Outcome::Committed {
                        rows_changed,
                        last_insert_rowid: first.checked_add(step.checked_mul(k)?)?,
                    })
                })
                .collect::<Vec<_>>()
        });
    proptest::collection::vec(prop_oneof![run, outcome().prop_map(|o| vec![o])], 0..12)
        .prop_map(|parts| parts.concat())
}

/// Equal with floats compared bit for bit (NaN payloads, −0.0).
fn same_ops(a: &[UserOrderOp], b: &[UserOrderOp]) -> bool {
    let bits = |op: &UserOrderOp| match op {
        UserOrderOp::CreateOrder { user_id, amount } => (1, *user_id, amount.to_bits(), None),
        UserOrderOp::UpdateOrderAmount { order_id, amount } => {
            (2, *order_id, amount.to_bits(), None)
        }
        UserOrderOp::DeleteUserOrders { user_id } => (3, *user_id, 0, None),
        UserOrderOp::CreateUser { username, email } => {
            (4, 0, 0, Some((username.clone(), email.clone())))
        }
    };
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| bits(x) == bits(y))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2_000))]

    #[test]
    fn ops_round_trip_bit_for_bit(ops in proptest::collection::vec(op(), 0..40)) {
        let packed = encode_ops(&ops);
        let back = decode_ops(&packed, ops.len()).unwrap();
        prop_assert!(same_ops(&ops, &back));
        // Every strict prefix (past the version byte) that cuts an op is refused, never misread.
        for cut in 1..packed.len() {
            if let Ok(prefix) = decode_ops(&packed[..cut], usize::MAX) {
                prop_assert!(same_ops(&prefix, &back[..prefix.len()]));
                prop_assert_eq!(encode_ops(&prefix).len(), cut);
            }
        }
    }

    #[test]
    fn outcomes_round_trip(outcomes in outcomes()) {
        let packed = encode_outcomes(&outcomes);
        prop_assert_eq!(&decode_outcomes(&packed, outcomes.len()).unwrap(), &outcomes);
        // One outcome fewer expected than the reply holds: refused, whatever record holds it.
        if !outcomes.is_empty() {
            prop_assert!(decode_outcomes(&packed, outcomes.len() - 1).is_err());
        }
        // Every strict prefix decodes to a prefix of the outcomes or is refused.
        for cut in 1..packed.len() {
            if let Ok(prefix) = decode_outcomes(&packed[..cut], usize::MAX) {
                prop_assert_eq!(&prefix[..], &outcomes[..prefix.len()]);
            }
        }
    }

    #[test]
    fn any_bytes_decode_or_are_refused_without_panicking(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        let _ = decode_ops(&bytes, 1_000);
        let _ = decode_outcomes(&bytes, 1_000);
    }
}

#[test]
fn an_order_takes_ten_bytes() {
    let order = UserOrderOp::CreateOrder {
        user_id: 42,
        amount: 19.5,
    };
    // Tag, zigzag varint 84, eight float bytes.
    let mut expected = vec![VERSION, 1, 84];
    expected.extend_from_slice(&19.5f64.to_le_bytes());
    assert_eq!(encode_ops(std::slice::from_ref(&order)), expected);
    // A user id up to 8,191 takes 2 varint bytes: 11 bytes per order.
    let big = UserOrderOp::CreateOrder {
        user_id: 8_191,
        amount: 0.0,
    };
    assert_eq!(encode_ops(&[big]).len(), 1 + 11);
}

#[test]
fn refusals_say_where_and_why() {
    let error = |bytes: &[u8]| decode_ops(bytes, 10).unwrap_err().to_string();
    assert_eq!(
        error(&[]),
        "packed batch, byte 0: the version byte expected, the input ended"
    );
    assert_eq!(
        error(&[2]),
        "packed batch, byte 0: version 2; version 1 expected"
    );
    assert_eq!(error(&[1, 9]), "packed batch, byte 1: unknown op tag 9");
    assert_eq!(
        error(&[1, 3]),
        "packed batch, byte 2: user_id expected, the input ended"
    );
    assert_eq!(
        error(&[1, 1, 2, 0, 0]),
        "packed batch, byte 3: amount: 8 bytes expected, the input ended"
    );
    assert_eq!(
        error(&[1, 4, 2, 0xff, 0xfe, 0]),
        "packed batch, byte 3: username is not UTF-8: invalid utf-8 sequence of 1 bytes from index 0"
    );
    assert_eq!(
        error(&[
            1, 3, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f
        ]),
        "packed batch, byte 2: user_id: varint longer than 64 bits"
    );
    // The count limit, before reading the op past it.
    let three = encode_ops(&[
        UserOrderOp::DeleteUserOrders { user_id: 1 },
        UserOrderOp::DeleteUserOrders { user_id: 2 },
        UserOrderOp::DeleteUserOrders { user_id: 3 },
    ]);
    assert_eq!(
        decode_ops(&three, 2).unwrap_err().to_string(),
        "packed batch, byte 5: more than 2 ops"
    );
    // The extremes of a 64-bit varint.
    let extremes = [i64::MIN, i64::MAX, -1, 0]
        .map(|user_id| UserOrderOp::DeleteUserOrders { user_id })
        .to_vec();
    assert_eq!(decode_ops(&encode_ops(&extremes), 4).unwrap(), extremes);
}

#[test]
fn a_reply_of_committed_inserts_is_one_run() {
    let outcomes: Vec<Outcome> = (0..10_000)
        .map(|k| Outcome::Committed {
            rows_changed: 1,
            last_insert_rowid: 20_001 + k,
        })
        .collect();
    // Version, tag, count 10,000 (2 varint bytes), rows_changed 1, first 20,001 (zigzag 40,002:
    // 3 bytes), step 1 (zigzag 2).
    assert_eq!(
        encode_outcomes(&outcomes),
        [REPLY_VERSION, 2, 0x90, 0x4e, 1, 0xc2, 0xb8, 0x02, 2]
    );
    // Two in a row stay single records; a failure splits a run.
    let two = &outcomes[..2];
    assert_eq!(
        encode_outcomes(two),
        [
            REPLY_VERSION,
            0,
            1,
            0xc2,
            0xb8,
            0x02,
            0,
            1,
            0xc4,
            0xb8,
            0x02
        ]
    );
    let mut split = outcomes[..6].to_vec();
    split[3] = Outcome::Failed(OpError {
        code: 19,
        message: "x".into(),
    });
    assert_eq!(
        encode_outcomes(&split),
        [
            REPLY_VERSION,
            2,
            3,
            1,
            0xc2,
            0xb8,
            0x02,
            2,
            1,
            38,
            1,
            b'x',
            0,
            1,
            0xca,
            0xb8,
            0x02,
            0,
            1,
            0xcc,
            0xb8,
            0x02
        ]
    );
}

#[test]
fn a_run_may_span_the_whole_rowid_range() {
    // Steps of i64::MAX from i64::MIN: the rowids are in range although 2 · step is not.
    let outcomes: Vec<Outcome> = [i64::MIN, -1, i64::MAX - 1]
        .map(|last_insert_rowid| Outcome::Committed {
            rows_changed: 0,
            last_insert_rowid,
        })
        .to_vec();
    let packed = encode_outcomes(&outcomes);
    assert_eq!(packed[1], 2, "one run");
    assert_eq!(decode_outcomes(&packed, 3).unwrap(), outcomes);
}

#[test]
fn a_hostile_run_is_refused_before_it_is_expanded() {
    let error = |bytes: &[u8], max: usize| decode_outcomes(bytes, max).unwrap_err().to_string();
    // A count of 2^63 against 10 expected outcomes: refused, nothing allocated for it.
    let mut huge = vec![REPLY_VERSION, 2];
    huge.extend([0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01]);
    huge.extend([1, 0, 2]);
    assert_eq!(
        error(&huge, 10),
        "packed batch, byte 2: a run of 9223372036854775808 outcomes (1 to 10 expected)"
    );
    // A run of zero, and one whose last rowid would pass i64::MAX.
    assert_eq!(
        error(&[REPLY_VERSION, 2, 0, 1, 0, 2], 10),
        "packed batch, byte 2: a run of 0 outcomes (1 to 10 expected)"
    );
    let mut past_max = vec![REPLY_VERSION, 2, 2, 1];
    past_max.extend([0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]);
    past_max.push(2);
    assert_eq!(
        error(&past_max, 10),
        "packed batch, byte 2: a run's last rowid is out of the 64-bit range"
    );
    // The same run of one ends at i64::MAX exactly: fine.
    past_max[2] = 1;
    assert_eq!(
        decode_outcomes(&past_max, 10).unwrap(),
        [Outcome::Committed {
            rows_changed: 1,
            last_insert_rowid: i64::MAX
        }]
    );
    // A reply in the old version is refused.
    assert_eq!(
        error(&[1, 0, 1, 2], 10),
        "packed batch, byte 0: version 1; version 2 expected"
    );
}

fn key() -> impl Strategy<Value = BatchKey> {
    (any::<u64>(), any::<[u8; 16]>()).prop_map(|(created_at_time, id)| BatchKey {
        created_at_time,
        id,
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1_000))]

    #[test]
    fn keyed_requests_are_the_key_then_the_unkeyed_ops(
        key in key(),
        ops in proptest::collection::vec(op(), 0..20),
    ) {
        let keyed = encode_keyed_ops(&key, &ops);
        let plain = encode_ops(&ops);
        prop_assert_eq!(keyed[0], KEYED_VERSION);
        prop_assert_eq!(&keyed[1..9], &key.created_at_time.to_le_bytes());
        prop_assert_eq!(&keyed[9..25], &key.id);
        prop_assert_eq!(&keyed[KEYED_HEADER_BYTES..], &plain[1..]);
        prop_assert_eq!(
            ops.iter().map(op_len).sum::<usize>(),
            plain.len() - 1
        );
        let (read_key, body) = keyed_ops_body(&keyed).unwrap();
        prop_assert_eq!(read_key, key);
        prop_assert_eq!(body, &plain[1..]);
        let (decoded_key, decoded) = decode_keyed_ops(&keyed, ops.len()).unwrap();
        prop_assert_eq!(decoded_key, key);
        prop_assert!(same_ops(&ops, &decoded));
        if !ops.is_empty() {
            prop_assert!(decode_keyed_ops(&keyed, ops.len() - 1).is_err());
        }
        // A cut inside the header is refused; an unkeyed decoder refuses a keyed request.
        for cut in 0..KEYED_HEADER_BYTES {
            prop_assert!(keyed_ops_body(&keyed[..cut]).is_err());
        }
        prop_assert!(decode_ops(&keyed, usize::MAX).is_err());
    }

    #[test]
    fn keyed_replies_are_the_flags_then_the_unkeyed_outcomes(
        duplicate in any::<bool>(),
        outcomes in outcomes(),
    ) {
        let keyed = encode_keyed_outcomes(duplicate, &outcomes);
        let plain = encode_outcomes(&outcomes);
        prop_assert_eq!(&keyed[..2], &[KEYED_REPLY_VERSION, u8::from(duplicate)]);
        prop_assert_eq!(&keyed[2..], &plain[1..]);
        let reply = decode_keyed_outcomes(&keyed, outcomes.len()).unwrap();
        prop_assert_eq!(reply.duplicate, duplicate);
        prop_assert_eq!(&reply.outcomes, &outcomes);
        prop_assert!(decode_outcomes(&keyed, usize::MAX).is_err());
        prop_assert!(decode_keyed_outcomes(&plain, usize::MAX).is_err());
    }

    #[test]
    fn any_bytes_decode_keyed_or_are_refused_without_panicking(
        bytes in proptest::collection::vec(any::<u8>(), 0..200)
    ) {
        let _ = decode_keyed_ops(&bytes, 1_000);
        let _ = decode_keyed_outcomes(&bytes, 1_000);
    }
}

#[test]
fn keyed_refusals_say_where_and_why() {
    let ops_error = |bytes: &[u8]| decode_keyed_ops(bytes, 10).unwrap_err();
    let reply_error = |bytes: &[u8]| decode_keyed_outcomes(bytes, 10).unwrap_err();
    assert_eq!(
        ops_error(&[1]),
        PackedError {
            offset: 0,
            what: "version 1; version 2 expected".into()
        }
    );
    assert_eq!(
        ops_error(&[2, 0, 0, 0]),
        PackedError {
            offset: 1,
            what: "created_at_time: 8 bytes expected, the input ended".into()
        }
    );
    let mut header = vec![2];
    header.extend_from_slice(&[0; 8]);
    header.extend_from_slice(&[0; 15]);
    assert_eq!(
        ops_error(&header),
        PackedError {
            offset: 9,
            what: "the key's id: 16 bytes expected, the input ended".into()
        }
    );
    header.push(0);
    assert_eq!(decode_keyed_ops(&header, 10).unwrap().1, vec![]);
    header.push(9);
    assert_eq!(ops_error(&header).offset, KEYED_HEADER_BYTES);
    assert_eq!(
        reply_error(&[3]).what,
        "the flags byte expected, the input ended"
    );
    assert_eq!(
        reply_error(&[3, 2]),
        PackedError {
            offset: 1,
            what: "unknown flags 0x02".into()
        }
    );
    assert_eq!(reply_error(&[3, 0x81]).offset, 1);
    assert_eq!(
        decode_keyed_outcomes(&[3, 1], 0).unwrap(),
        KeyedReply {
            duplicate: true,
            outcomes: vec![]
        }
    );
}
