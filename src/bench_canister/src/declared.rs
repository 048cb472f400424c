//! The comparison of the generic packed format of the reference canister's declared writes
//! (`bench_api::writes::UserOrderWrite`) with the hand-written one (`bench_api::packed`): the
//! same ops, the same SQL, the same keyed run. Compiled only into the comparison wasm (`scripts/build.sh declared`: features
//! `canbench-rs` and `declared`), so the deployable and canbench wasms are as before.

use bench_api::UserOrderOp;
use bench_api::fixture::Workload;
use bench_api::writes::UserOrderWrite;
use canbench_rs::{BenchResult, bench, bench_fn};
use ic_rusqlite_batch::batch_types::declare::{
    BatchRefusal, Writes, WritesReply, WritesResult, encode_request,
};
use ic_rusqlite_batch::batch_types::{BatchKey, packed};
use ic_rusqlite_batch::{declared, encode, keyed};

fn declared(op: &UserOrderOp) -> UserOrderWrite {
    UserOrderWrite::from(op.clone())
}

fn orders(n: u64) -> Vec<UserOrderOp> {
    crate::benches::batch_fixture();
    (0..n as usize).map(|i| Workload::Insert.op(i)).collect()
}

fn key() -> BatchKey {
    BatchKey {
        created_at_time: ic_cdk::api::time(),
        id: [7; 16],
    }
}

/// The generic packed batch as `execute_writes_packed` runs it (without the Candid blob
/// framing, as `client_batch_packed_keyed_*` runs the hand-written one): read and check the
/// request by the declaration, run it under its key, pack the outcomes.
fn generic_packed(n: u64) -> BenchResult {
    let ops: Vec<UserOrderWrite> = orders(n).iter().map(declared).collect();
    let request = encode_request(&key(), &ops);
    let caller = ic_cdk::api::msg_caller();
    bench_fn(|| {
        let (header, checked) = declared::packed_batch(UserOrderWrite::declaration(), &request)
            .expect("a valid request");
        let request = keyed::KeyedBatch {
            key: header.key,
            digest: checked.digest,
            ops: checked.ops,
        };
        let out =
            keyed::run(caller.as_slice(), request, ic_cdk::api::time()).expect("the batch runs");
        let reply = packed::encode_reply(out.duplicate, &out.outcomes);
        assert_eq!(reply[..2], [packed::REPLY_VERSION, 0]);
        std::hint::black_box(reply);
    })
}

/// The same batch in Candid as `execute_writes` runs it, with its arguments' decoding
/// (`(BatchKey, vec UserOrderWrite)`) and its reply's encoding (`WritesResult`, as the
/// library's methods encode it: the type's table built once).
fn generic_candid(n: u64) -> BenchResult {
    let ops: Vec<UserOrderWrite> = orders(n).iter().map(declared).collect();
    let arg = candid::encode_args((&key(), &ops)).expect("encodes");
    let caller = ic_cdk::api::msg_caller();
    // A running canister has replied with this type before: its table is built.
    encode::encode_one(&WritesResult::Err(BatchRefusal::NotAuthorized)).expect("encodes");
    bench_fn(|| {
        let (key, ops): (BatchKey, Vec<UserOrderWrite>) =
            candid::decode_args(&arg).expect("decodes");
        let checked = declared::candid_batch(ops).expect("valid ops");
        let request = keyed::KeyedBatch {
            key,
            digest: checked.digest,
            ops: checked.ops,
        };
        let out =
            keyed::run(caller.as_slice(), request, ic_cdk::api::time()).expect("the batch runs");
        let reply = WritesResult::Ok(WritesReply {
            outcomes: out.outcomes,
            duplicate: out.duplicate,
        });
        std::hint::black_box(encode::encode_one(&reply).expect("encodes"));
    })
}

/// The hand-written keyed packed batch of `n` orders (`client_batch_packed_keyed_1000`'s work).
fn hand_written_packed(n: u64) -> BenchResult {
    let key = key();
    let arg = bench_api::packed::encode_keyed_ops(&key, &orders(n));
    let caller = ic_cdk::api::msg_caller();
    bench_fn(|| {
        let reply =
            crate::packed_batch(&arg, crate::benches::keyed_run(caller)).expect("the batch runs");
        std::hint::black_box(reply);
    })
}

#[bench(raw)]
fn declared_packed_keyed_1000() -> BenchResult {
    generic_packed(1_000)
}

#[bench(raw)]
fn declared_packed_keyed_10000() -> BenchResult {
    generic_packed(10_000)
}

#[bench(raw)]
fn declared_candid_keyed_1000() -> BenchResult {
    generic_candid(1_000)
}

#[bench(raw)]
fn declared_candid_keyed_10000() -> BenchResult {
    generic_candid(10_000)
}

#[bench(raw)]
fn hand_written_packed_keyed_1000() -> BenchResult {
    hand_written_packed(1_000)
}

#[bench(raw)]
fn hand_written_packed_keyed_10000() -> BenchResult {
    hand_written_packed(10_000)
}

/// The request bytes of each form for `n` orders, for the cycles of its ingress message.
#[ic_cdk::query]
fn __declared_request_bytes(n: u64) -> (u64, u64, u64) {
    let ops = orders(n);
    let declared_ops: Vec<UserOrderWrite> = ops.iter().map(declared).collect();
    let k = key();
    let hand = bench_api::packed::encode_keyed_ops(&k, &ops);
    let generic = encode_request(&k, &declared_ops);
    let candid = candid::encode_args((&k, &declared_ops)).expect("encodes");
    (hand.len() as u64, generic.len() as u64, candid.len() as u64)
}
