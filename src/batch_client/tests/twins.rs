//! What the TypeScript client (`src/batch_client_ts`) must do as this crate does, written from
//! this crate's own code to `testdata/client_twins.json`
//! (`UPDATE_TWINS=1 cargo test -p ic-batch-client --test twins` writes it; this test checks the
//! committed file is what the code gives, and the TypeScript test `test/twins.test.ts` checks
//! its client against the same file):
//!
//! - `settings`: every [`BatcherConfig`] field with its default value (nanoseconds, bytes,
//!   counts) and the default as the READMEs write it; this README's settings table is checked
//!   here, row by row;
//! - `refusals`: every way a declared canister refuses a batch (each `BatchRefusal` variant,
//!   `Refused` with each `WriteError` variant), as its Candid reply and as the value an agent
//!   decodes, with what the batcher does with it (final, too old, retried);
//! - `rejects`: for each reject code, whether the batch is sent again and whether it may have
//!   run;
//! - `outcomes`: a reply holding every kind of outcome in every record of the packed format,
//!   each outcome as an agent decodes it and whether the op is sent again (only
//!   `NotExecuted`, as `batch_types::retry`'s table says; the table itself is
//!   `batch_types/testdata/retry_rules.json`, which the TypeScript client's table is checked
//!   against).
//!
//! The samples cover every variant of the Candid types (checked against their type), so a
//! variant added in Rust fails here until the samples, the file and the TypeScript client have
//! it.

use batch_types::declare::{BatchRefusal, Blob, InvalidParam, PackedWritesResult};
use batch_types::{OpError, Outcome, StoreShare, WriteError};
use candid::types::{Type, TypeEnv, TypeInner};
use candid::{CandidType, IDLArgs, IDLValue};
use ic_batch_client::{
    BatchCodec, BatcherConfig, Declared, RefusalKind, RejectCode, Reply, is_not_executed,
};
use serde_json::{Map, Value, json};

const PATH: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/testdata/client_twins.json");
const README: &str = include_str!("../README.md");

batch_types::writes! {
    /// A declaration for the codec whose refusals are read.
    pub enum TwinWrite {
        /// One write.
        touch = "UPDATE t SET n = n + 1 WHERE id = ?1" { id: i64 },
    }
}

/// `n` with thousands separators.
fn count(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Nanoseconds in the largest unit that divides them.
fn duration(ns: u64) -> String {
    const UNITS: [(u64, &str); 4] = [
        (3_600_000_000_000, "h"),
        (1_000_000_000, "s"),
        (1_000_000, "ms"),
        (1, "ns"),
    ];
    let (size, unit) = UNITS
        .into_iter()
        .find(|(size, _)| ns.is_multiple_of(*size))
        .expect("1 divides");
    format!("{} {unit}", count(ns / size))
}

/// Bytes in the largest binary unit that divides them.
fn bytes(n: usize) -> String {
    let n = n as u64;
    let (size, unit) = [(1 << 20, "MiB"), (1 << 10, "KiB"), (1, "bytes")]
        .into_iter()
        .find(|(size, _)| n.is_multiple_of(*size))
        .expect("1 divides");
    format!("{} {unit}", count(n / size))
}

fn setting(name: &str, value: Value, default: String) -> Value {
    json!({ "name": name, "value": value, "default": default })
}

/// Every setting (the destructuring names every field: a new one does not compile here until
/// it is added).
fn settings() -> Vec<Value> {
    let BatcherConfig {
        max_batch_ops,
        max_request_bytes,
        max_delay_ns,
        max_queued_ops,
        max_queued_bytes,
        max_in_flight,
        initial_backoff_ns,
        max_backoff_ns,
        retry_for_ns,
        attempt_timeout_ns,
        max_resubmits,
        key_prefix,
    } = BatcherConfig::default();
    let ns = |name, ns: u64| setting(name, json!(ns), duration(ns));
    let ops = |name, n: u64| setting(name, json!(n), count(n));
    assert_eq!(key_prefix, [0; 8]);
    vec![
        ops("max_batch_ops", max_batch_ops as u64),
        setting(
            "max_request_bytes",
            json!(max_request_bytes),
            bytes(max_request_bytes),
        ),
        ns("max_delay_ns", max_delay_ns),
        ops("max_queued_ops", max_queued_ops as u64),
        setting(
            "max_queued_bytes",
            json!(max_queued_bytes),
            bytes(max_queued_bytes),
        ),
        ops("max_in_flight", max_in_flight as u64),
        ns("initial_backoff_ns", initial_backoff_ns),
        ns("max_backoff_ns", max_backoff_ns),
        ns("retry_for_ns", retry_for_ns),
        match attempt_timeout_ns {
            Some(timeout) => ns("attempt_timeout_ns", timeout),
            None => setting("attempt_timeout_ns", Value::Null, "none".into()),
        },
        ops("max_resubmits", u64::from(max_resubmits)),
        // Set by the drivers (random off-chain, the canister's time in a canister); the
        // TypeScript batcher draws 8 random bytes itself.
        setting("key_prefix", Value::Null, "8 zero bytes".into()),
    ]
}

/// The variant names of a Candid variant type.
fn variants(ty: Type) -> Vec<String> {
    match ty.as_ref() {
        TypeInner::Variant(fields) => fields.iter().map(|f| f.id.to_string()).collect(),
        other => panic!("not a variant: {other:?}"),
    }
}

fn write_errors() -> Vec<WriteError> {
    vec![
        WriteError::QueueFull { capacity: 10_000 },
        WriteError::QueueBytesFull {
            pending_bytes: 1 << 20,
            capacity_bytes: 64 << 20,
        },
        WriteError::Invalid("batch of 10,001 ops; at most 10,000".into()),
        WriteError::NotAuthorized,
        WriteError::Database("database is locked".into()),
        WriteError::TooOld {
            created_at_time: 1,
            now: 1_700_000_000_000_000_000,
            oldest_accepted: 1_699_913_540_000_000_000,
        },
        WriteError::CreatedInFuture {
            created_at_time: 1_700_000_120_000_000_000,
            now: 1_700_000_000_000_000_000,
            newest_accepted: 1_700_000_060_000_000_000,
        },
        WriteError::DigestMismatch {
            created_at_time: 1_700_000_000_000_000_000,
        },
        WriteError::StoreFull {
            keys_held: 1_000,
            max_keys: 1_000,
            bytes_held: 4_096,
            max_bytes: 1 << 20,
            share: StoreShare::Caller,
        },
        WriteError::StoreFull {
            keys_held: 5,
            max_keys: 100_000,
            bytes_held: 64 << 20,
            max_bytes: 64 << 20,
            share: StoreShare::Store,
        },
    ]
}

fn batch_refusals() -> Vec<BatchRefusal> {
    let mut all = vec![
        BatchRefusal::NotAuthorized,
        BatchRefusal::InvalidParam(InvalidParam {
            op: 3,
            write: "add".into(),
            param: "title".into(),
            reason: "201 bytes; at most 200".into(),
        }),
        BatchRefusal::DeclarationMismatch {
            canister: Blob::from(vec![1, 2, 3, 4, 5, 6, 7, 8]),
            request: Blob::from(vec![8, 7, 6, 5, 4, 3, 2, 1]),
        },
        BatchRefusal::Malformed {
            offset: 41,
            what: "a write index: varint 1 padded to 2 bytes (not its shortest form)".into(),
        },
    ];
    all.extend(write_errors().into_iter().map(BatchRefusal::Refused));
    all
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A Candid value as `@icp-sdk/core` decodes it, in JSON: a variant or a record as an object
/// of its fields by name, a 64-bit or larger number as a decimal string, a blob as hex.
fn agent_json(value: &IDLValue) -> Value {
    match value {
        IDLValue::Null => Value::Null,
        IDLValue::Bool(b) => json!(b),
        IDLValue::Text(t) => json!(t),
        IDLValue::Nat64(n) => json!(n.to_string()),
        IDLValue::Nat(n) => json!(n.to_string()),
        IDLValue::Int64(n) => json!(n.to_string()),
        IDLValue::Int(n) => json!(n.to_string()),
        IDLValue::Nat32(n) => json!(n),
        IDLValue::Int32(n) => json!(n),
        IDLValue::Blob(b) => json!(hex(b)),
        IDLValue::Vec(items) => match items
            .iter()
            .map(|item| match item {
                IDLValue::Nat8(b) => Some(*b),
                _ => None,
            })
            .collect::<Option<Vec<u8>>>()
        {
            Some(blob) if !items.is_empty() => json!(hex(&blob)),
            _ => Value::Array(items.iter().map(agent_json).collect()),
        },
        IDLValue::Opt(v) => json!([agent_json(v)]),
        IDLValue::None => json!([]),
        IDLValue::Record(fields) => Value::Object(
            fields
                .iter()
                .map(|f| (f.id.to_string(), agent_json(&f.val)))
                .collect::<Map<_, _>>(),
        ),
        IDLValue::Variant(v) => json!({ v.0.id.to_string(): agent_json(&v.0.val) }),
        other => panic!("no sample has a {other:?}"),
    }
}

fn refusals() -> Vec<Value> {
    let codec = Declared::<TwinWrite>::new();
    let result_type = PackedWritesResult::ty();
    let samples: Vec<Value> = batch_refusals()
        .into_iter()
        .map(|refusal| {
            let reply = candid::encode_one(PackedWritesResult::Err(refusal.clone())).unwrap();
            let decoded = IDLArgs::from_bytes_with_types(
                &reply,
                &TypeEnv::new(),
                std::slice::from_ref(&result_type),
            )
            .unwrap();
            let kind = match codec.decode(&reply, 1).unwrap() {
                Reply::Refused(r) => {
                    assert_eq!(r, refusal);
                    codec.refusal_kind(&r)
                }
                Reply::Executed { .. } => panic!("refused"),
            };
            json!({
                "reply": hex(&reply),
                "refusal": agent_json(&decoded.args[0])["Err"],
                "kind": match kind {
                    RefusalKind::Final => "final",
                    RefusalKind::TooOld => "tooOld",
                    RefusalKind::Retry => "retry",
                },
            })
        })
        .collect();
    // Every variant has a sample: the names the samples decode to are the types' own.
    let names = |values: Vec<&Value>| -> Vec<String> {
        let mut names: Vec<String> = values
            .into_iter()
            .flat_map(|v| v.as_object().unwrap().keys().cloned())
            .collect();
        names.sort();
        names.dedup();
        names
    };
    let sorted = |mut v: Vec<String>| {
        v.sort();
        v
    };
    let refusals: Vec<&Value> = samples.iter().map(|s| &s["refusal"]).collect();
    assert_eq!(
        names(refusals.clone()),
        sorted(variants(BatchRefusal::ty()))
    );
    let write_errors = refusals.iter().filter_map(|r| r.get("Refused")).collect();
    assert_eq!(names(write_errors), sorted(variants(WriteError::ty())));
    samples
}

fn rejects() -> Vec<Value> {
    (1..=7)
        .map(|code| {
            let reject = RejectCode::from_u32(code);
            json!({
                "code": code,
                "retried": reject.is_retried(),
                "may_have_run": reject.may_have_run(),
            })
        })
        .collect()
}

/// A reply of the outcomes of every kind, in every record of the packed format (a committed
/// run, one committed, one failed, a failure repeated, ops not executed), as the canister
/// sends it, with each outcome as an agent decodes it and whether the client sends its op
/// again. The failure whose message starts with "not executed" is a failure: only the
/// `NotExecuted` variant is read as one.
fn outcomes() -> Value {
    let failed = |code: i32, message: &str| {
        Outcome::Failed(OpError {
            code,
            message: message.into(),
        })
    };
    let committed = |last_insert_rowid| Outcome::Committed {
        rows_changed: 1,
        last_insert_rowid,
    };
    let outcomes = vec![
        committed(7),
        committed(8),
        committed(9),
        Outcome::Committed {
            rows_changed: 2,
            last_insert_rowid: 0,
        },
        failed(19, "UNIQUE constraint failed: users.email"),
        failed(9, "interrupted: the op used up its instruction budget"),
        failed(787, "not executed: FOREIGN KEY constraint failed"),
        failed(787, "not executed: FOREIGN KEY constraint failed"),
        Outcome::NotExecuted,
        Outcome::NotExecuted,
    ];
    let reply = candid::encode_one(PackedWritesResult::Ok(Blob::from(
        batch_types::packed::encode_reply(false, &outcomes),
    )))
    .unwrap();
    let codec = Declared::<TwinWrite>::new();
    match codec.decode(&reply, outcomes.len()).unwrap() {
        Reply::Executed {
            outcomes: decoded, ..
        } => assert_eq!(decoded, outcomes),
        Reply::Refused(r) => panic!("refused: {r}"),
    }
    let samples: Vec<Value> = outcomes
        .iter()
        .map(|outcome| {
            json!({
                "outcome": agent_json(&IDLValue::try_from_candid_type(outcome).unwrap()),
                "not_executed": is_not_executed(outcome),
            })
        })
        .collect();
    // Every variant has a sample.
    let mut names: Vec<String> = samples
        .iter()
        .flat_map(|s| s["outcome"].as_object().unwrap().keys().cloned())
        .collect();
    names.sort();
    names.dedup();
    let mut expected = variants(Outcome::ty());
    expected.sort();
    assert_eq!(names, expected);
    json!({ "reply": hex(&reply), "outcomes": samples })
}

fn twins() -> Value {
    json!({
        "settings": settings(),
        "refusals": refusals(),
        "rejects": rejects(),
        "outcomes": outcomes(),
    })
}

#[test]
fn the_committed_twins_are_what_the_client_does() {
    let text = serde_json::to_string_pretty(&twins()).unwrap() + "\n";
    if std::env::var_os("UPDATE_TWINS").is_some() {
        std::fs::write(PATH, &text).unwrap();
    }
    let committed = std::fs::read_to_string(PATH)
        .expect("testdata/client_twins.json (UPDATE_TWINS=1 writes it)");
    assert_eq!(
        committed, text,
        "the committed twins differ from what the client does (UPDATE_TWINS=1 rewrites them; then the TypeScript client must follow)"
    );
}

/// The README's settings table: one row per setting, in the code's order, its default as the
/// code gives it.
#[test]
fn the_readme_documents_every_setting_once_with_its_default() {
    let table = README
        .split("## Settings")
        .nth(1)
        .expect("a Settings section")
        .split("\n## ")
        .next()
        .unwrap();
    let rows: Vec<(String, String)> = table
        .lines()
        .filter_map(|line| {
            let cells: Vec<&str> = line.split(" | ").collect();
            let name = cells.first()?.strip_prefix("| `")?.strip_suffix('`')?;
            Some((name.to_owned(), cells.get(1)?.to_string()))
        })
        .collect();
    let expected: Vec<(String, String)> = settings()
        .iter()
        .map(|s| {
            (
                s["name"].as_str().unwrap().to_owned(),
                s["default"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(rows, expected);
}
