//! Scenarios of a careless client (and controller) who sends the right data in the wrong shape:
//! a batch key of another Candid type than the method takes (Candid reads it as absent: the
//! batch ran unkeyed, and its resend applied it twice), a declared parameter of another type
//! (read as absent: `NULL` stored, `Committed` answered), a batch whose failure messages would
//! not fit one reply (every attempt trapped, its valid ops never committed), and a packed
//! batch encoded with padded varints (it ran, and its canonical resend was refused as another
//! batch). Each row must show 0 lost, 0 altered, 0 applied twice and 0 trapped.

use anyhow::{Result, ensure};
use batch_types::declare::{BatchRefusal, PackedWritesResult, WritesResult, encode_request};
use batch_types::packed::REQUEST_HEADER_BYTES;
use batch_types::reply::{MAX_REPLY_BYTES, max_error_bytes};
use bench_api::writes::UserOrderWrite;
use bench_api::*;
use candid::{CandidType, Encode, Nat};
use offline_engine::MessageResult;
use serde_bytes::ByteBuf;

use super::{Lab, Ledger, Notes, PLAIN, Scenario, Setup, WRITER};
use crate::client::Client;

/// Batches of each scenario.
const BATCHES: u8 = 10;
/// Orders per batch.
const ORDERS: usize = 5;
/// The refused orders of the oversized-reply batches (one valid order goes first).
const REFUSED_ORDERS: usize = 2_200;
/// The characters of the controller's trigger message.
const TRIGGER_MESSAGE_CHARS: usize = 1_000;

/// A batch key as a careless JavaScript client declares it: `created_at_time : nat`.
#[derive(CandidType)]
struct NatKey {
    created_at_time: Nat,
    id: ByteBuf,
}

/// `create_order` with `user_id : nat`, as a client whose `.did` drifted declares it.
#[derive(CandidType)]
#[allow(non_camel_case_types)]
enum NatWrite {
    create_order { user_id: Nat, amount: f64 },
}

/// `create_order` with `amount : float32`.
#[derive(CandidType)]
#[allow(non_camel_case_types)]
enum Float32Write {
    create_order { user_id: i64, amount: f32 },
}

pub(super) const SCENARIOS: [Scenario; 4] = [
    Scenario {
        name: "mistyped batch key",
        description: "10 keyed batches of 5 orders whose key says created_at_time : nat (the method takes nat64), each sent twice to execute_batch and execute_writes: refused Invalid naming the field, {refusal} instructions each, nothing applied; then each with the right key twice: run once, the resend a duplicate",
        step: "batch keys of another Candid type",
        setup: WRITER_SETUP,
        act: mistyped_key,
    },
    Scenario {
        name: "mistyped parameter",
        description: "10 batches of 5 orders with user_id : nat (execute_writes) and 10 single orders with amount : float32 (execute_write): refused Invalid naming the write and the parameter, {refusal} instructions each; then the same orders well typed, every amount stored with the bits sent",
        step: "declared parameters of another Candid type",
        setup: WRITER_SETUP,
        act: mistyped_parameter,
    },
    Scenario {
        name: "oversized reply",
        description: "a controller's trigger RAISE(ABORT, <1,000 characters>) on negative amounts; 1 valid and 2,200 refused orders through each of the 6 batch methods (keyed ones resent): every reply within 2 MiB (the largest {largest} bytes), each message cut to {cap} bytes with its code; the valid orders commit once",
        step: "a batch whose failure messages would not fit one reply",
        setup: WRITER_SETUP,
        act: oversized_reply,
    },
    Scenario {
        name: "padded encoding",
        description: "10 packed batches of 5 orders with a padded varint (81 00 for a write index, in the generic and the hand-written format): refused Malformed at its offset, {refusal} instructions each; then each canonical, and resent through Candid: a duplicate",
        step: "packed batches with padded varints",
        setup: WRITER_SETUP,
        act: padded_encoding,
    },
];

/// A registered writer and one user.
const WRITER_SETUP: Setup = Setup {
    writer: true,
    ..PLAIN
};

fn key(c: &Client, n: u8) -> BatchKey {
    BatchKey {
        created_at_time: c.canister.time(),
        id: [n; 16],
    }
}

/// Orders of user 1, distinct amounts per batch.
fn orders(batch: u8) -> Vec<UserOrderOp> {
    (0..ORDERS)
        .map(|i| UserOrderOp::CreateOrder {
            user_id: 1,
            amount: f64::from(batch) * 100.0 + i as f64 + 0.25,
        })
        .collect()
}

fn declared(ops: &[UserOrderOp]) -> Vec<UserOrderWrite> {
    ops.iter()
        .map(|op| match op {
            UserOrderOp::CreateOrder { user_id, amount } => UserOrderWrite::create_order {
                user_id: *user_id,
                amount: *amount,
            },
            other => unreachable!("{other:?}"),
        })
        .collect()
}

/// Whether `exec` replied an `Invalid` refusal (`WriteError::Invalid`, alone or inside a batch
/// refusal) that names `what`.
fn invalid_naming(exec: &offline_engine::Execution, what: &str) -> bool {
    let MessageResult::Reply(bytes) = &exec.result else {
        return false;
    };
    let text = [
        candid::decode_one::<BatchResult>(bytes)
            .ok()
            .and_then(|r| match r {
                BatchResult::Err(WriteError::Invalid(t)) => Some(t),
                _ => None,
            }),
        candid::decode_one::<WritesResult>(bytes)
            .ok()
            .and_then(|r| match r {
                WritesResult::Err(refusal) => invalid_text(refusal),
                _ => None,
            }),
        candid::decode_one::<WriteResult>(bytes)
            .ok()
            .and_then(|r| match r {
                WriteResult::Err(WriteError::Invalid(t)) => Some(t),
                _ => None,
            }),
    ];
    text.into_iter().flatten().any(|t| t.contains(what))
}

fn invalid_text(refusal: BatchRefusal) -> Option<String> {
    match refusal {
        BatchRefusal::Refused(WriteError::Invalid(t)) => Some(t),
        BatchRefusal::Malformed { what, .. } => Some(what),
        _ => None,
    }
}

/// A generic packed request of `ops` under `key`.
fn request(key: &BatchKey, ops: &[UserOrderWrite]) -> Result<Vec<u8>> {
    Ok(encode_request(key, ops))
}

fn mistyped_key(_: &Lab, c: &mut Client, l: &mut Ledger) -> Result<Notes> {
    let mut refusal = 0;
    for n in 0..BATCHES {
        let k = key(c, n);
        let ops = orders(n);
        let nat_key = NatKey {
            created_at_time: Nat::from(k.created_at_time),
            id: ByteBuf::from(k.id.to_vec()),
        };
        for _ in 0..2 {
            let exec = c.raw_update(WRITER, "execute_batch", (ops.clone(), Some(&nat_key)));
            ensure!(
                invalid_naming(
                    &exec,
                    "field created_at_time: nat sent where nat64 is expected"
                ),
                "execute_batch with a nat key: {:?}",
                exec.result
            );
            refusal = exec.instructions;
            let exec = c.raw_update(WRITER, "execute_writes", (&nat_key, declared(&ops)));
            ensure!(
                invalid_naming(
                    &exec,
                    "field created_at_time: nat sent where nat64 is expected"
                ),
                "execute_writes with a nat key: {:?}",
                exec.result
            );
            l.refused += 2;
        }
    }
    ensure!(c.counts().orders == 0, "a refused batch wrote orders");
    for n in 0..BATCHES {
        let k = key(c, n);
        let ops = orders(n);
        let first: BatchResult = c.update_as(WRITER, "execute_batch", (ops.clone(), Some(k)));
        ensure!(matches!(first, BatchResult::Ok(_)), "{first:?}");
        let again: BatchResult = c.update_as(WRITER, "execute_batch", (ops, Some(k)));
        ensure!(
            matches!(again, BatchResult::Duplicate(_)),
            "the resend: {again:?}"
        );
    }
    l.keyed(1, u64::from(BATCHES) * ORDERS as u64);
    Ok(vec![("refusal", crate::analysis::fmt_u(refusal))])
}

fn mistyped_parameter(_: &Lab, c: &mut Client, l: &mut Ledger) -> Result<Notes> {
    let mut refusal = 0;
    for n in 0..BATCHES {
        let k = key(c, n);
        let nat_ops: Vec<NatWrite> = orders(n)
            .iter()
            .map(|op| match op {
                UserOrderOp::CreateOrder { amount, .. } => NatWrite::create_order {
                    user_id: Nat::from(1u64),
                    amount: *amount,
                },
                other => unreachable!("{other:?}"),
            })
            .collect();
        let exec = c.raw_update(WRITER, "execute_writes", (k, nat_ops));
        ensure!(
            invalid_naming(
                &exec,
                "variant create_order, field user_id: nat sent where int64 is expected"
            ),
            "execute_writes with user_id : nat: {:?}",
            exec.result
        );
        let single = Float32Write::create_order {
            user_id: 1,
            amount: 0.5,
        };
        let exec = c.raw_update(WRITER, "execute_write", (single,));
        ensure!(
            invalid_naming(
                &exec,
                "variant create_order, field amount: float32 sent where float64 is expected"
            ),
            "execute_write with amount : float32: {:?}",
            exec.result
        );
        refusal = exec.instructions;
        l.refused += 2;
    }
    ensure!(c.counts().orders == 0, "a refused write stored an order");
    let mut sent = Vec::new();
    for n in 0..BATCHES {
        let k = key(c, n);
        let ops = declared(&orders(n));
        let r: WritesResult = c.update_as(WRITER, "execute_writes", (k, ops.clone()));
        ensure!(matches!(r, WritesResult::Ok(_)), "{r:?}");
        sent.extend(ops.into_iter().map(|op| match op {
            UserOrderWrite::create_order { amount, .. } => amount,
            other => unreachable!("{other:?}"),
        }));
    }
    let stored: Vec<u64> = c.orders_of(1).iter().map(|o| o.amount.to_bits()).collect();
    let sent: Vec<u64> = sent.iter().map(|a| a.to_bits()).collect();
    ensure!(
        stored == sent,
        "the stored amounts differ from the sent ones"
    );
    l.keyed(1, u64::from(BATCHES) * ORDERS as u64);
    Ok(vec![("refusal", crate::analysis::fmt_u(refusal))])
}

fn oversized_reply(_: &Lab, c: &mut Client, l: &mut Ledger) -> Result<Notes> {
    let message = "x".repeat(TRIGGER_MESSAGE_CHARS);
    let created: WriteResult = c.update(
        "execute_sql",
        (vec![SqlStatement {
            sql: format!(
                "CREATE TRIGGER no_negative BEFORE INSERT ON orders WHEN NEW.amount < 0 \
                 BEGIN SELECT RAISE(ABORT, '{message}'); END"
            ),
            params: vec![],
        }],),
    );
    ensure!(matches!(created, WriteResult::Ok(_)), "{created:?}");
    let hand: Vec<UserOrderOp> = (0..=REFUSED_ORDERS)
        .map(|i| UserOrderOp::CreateOrder {
            user_id: 1,
            amount: if i == 0 { 1.0 } else { -1.0 },
        })
        .collect();
    let writes = declared(&hand);
    let ops = hand.len();
    let (k1, k2, k3, k4) = (key(c, 1), key(c, 2), key(c, 3), key(c, 4));
    let blob = ByteBuf::from;
    let calls: Vec<(&str, Vec<u8>, bool)> = vec![
        ("execute_batch", Encode!(&hand, &None::<BatchKey>)?, false),
        ("execute_batch", Encode!(&hand, &Some(k1))?, true),
        (
            "execute_batch_packed",
            Encode!(&blob(bench_api::packed::encode_ops(&hand)))?,
            false,
        ),
        (
            "execute_batch_packed",
            Encode!(&blob(bench_api::packed::encode_keyed_ops(&k2, &hand)))?,
            true,
        ),
        ("execute_writes", Encode!(&k3, &writes)?, true),
        (
            "execute_writes_packed",
            Encode!(&blob(request(&k4, &writes)?))?,
            true,
        ),
    ];
    let mut largest = 0;
    let mut valid = 0;
    for (method, arg, keyed) in calls {
        for _ in 0..if keyed { 2 } else { 1 } {
            let exec = c
                .canister
                .update_as(WRITER, method, &arg)
                .map_err(|e| anyhow::anyhow!("{method}: {e}"))?;
            c.log.push(exec.clone());
            let MessageResult::Reply(bytes) = &exec.result else {
                anyhow::bail!("{method} of {ops} ops: {:?}", exec.result);
            };
            largest = largest.max(bytes.len());
        }
        valid += 1;
        l.keyed_failed(REFUSED_ORDERS as u64);
    }
    ensure!(largest <= MAX_REPLY_BYTES, "a reply of {largest} bytes");
    l.keyed(1, valid);
    Ok(vec![
        ("largest", crate::analysis::fmt_u(largest as u64)),
        ("cap", crate::analysis::fmt_u(max_error_bytes(ops) as u64)),
    ])
}

fn padded_encoding(_: &Lab, c: &mut Client, l: &mut Ledger) -> Result<Notes> {
    let mut refusal = 0;
    let header = REQUEST_HEADER_BYTES;
    for n in 0..BATCHES {
        let k = key(c, n);
        let ops = declared(&orders(n));
        let canonical = request(&k, &ops)?;
        // The first write index (1, create_order) padded to `81 00`.
        let mut padded = canonical[..header].to_vec();
        padded.extend_from_slice(&[0x81, 0x00]);
        padded.extend_from_slice(&canonical[header + 1..]);
        let exec = c.raw_update(WRITER, "execute_writes_packed", (ByteBuf::from(padded),));
        let MessageResult::Reply(bytes) = &exec.result else {
            anyhow::bail!("execute_writes_packed: {:?}", exec.result);
        };
        let r = candid::decode_one::<PackedWritesResult>(bytes)?;
        ensure!(
            matches!(&r, PackedWritesResult::Err(BatchRefusal::Malformed { offset, what })
                if *offset == header as u64 && what.contains("not its shortest form")),
            "a padded request: {r:?}"
        );
        refusal = exec.instructions;
        // The hand-written format, its first op's tag (1, CreateOrder) is a byte: pad its user
        // id instead (1, zigzag 2, to `82 00`).
        let hand = orders(n + BATCHES);
        let keyed = bench_api::packed::encode_keyed_ops(&key(c, n + BATCHES), &hand);
        let at = bench_api::packed::KEYED_HEADER_BYTES + 1;
        let mut padded = keyed[..at].to_vec();
        padded.extend_from_slice(&[0x82, 0x00]);
        padded.extend_from_slice(&keyed[at + 1..]);
        let r: PackedResult = c.update_as(WRITER, "execute_batch_packed", (ByteBuf::from(padded),));
        ensure!(
            matches!(&r, PackedResult::Err(WriteError::Invalid(t)) if t.contains("not its shortest form")),
            "a padded hand-written request: {r:?}"
        );
        l.refused += 2;
        // Canonical: runs; resent through Candid (another encoding of the same ops): a duplicate.
        let r: PackedWritesResult =
            c.update_as(WRITER, "execute_writes_packed", (ByteBuf::from(canonical),));
        ensure!(matches!(r, PackedWritesResult::Ok(_)), "{r:?}");
        let again: WritesResult = c.update_as(WRITER, "execute_writes", (k, ops));
        ensure!(
            matches!(&again, WritesResult::Ok(reply) if reply.duplicate),
            "the resend through Candid: {again:?}"
        );
    }
    ensure!(
        c.counts().orders == u64::from(BATCHES) * ORDERS as u64,
        "orders applied other than once"
    );
    l.keyed(1, u64::from(BATCHES) * ORDERS as u64);
    Ok(vec![("refusal", crate::analysis::fmt_u(refusal))])
}
