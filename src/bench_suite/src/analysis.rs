//! Tables derived from the canbench figures: the ic-rusqlite users/orders benchmark beside its
//! published figures, gains, floor, error isolation, flush size, and the targets.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::engine_runs::CanbenchFigures;
use crate::message_bench::{Mode, ModeSummary};

/// The nine benchmarks of the ic-rusqlite users/orders benchmark: bench name, what it does, and ic-rusqlite's
/// published PocketIC figure (instructions).
pub const USERS_ORDERS_BENCHMARK: [(&str, &str, u64); 9] = [
    (
        "users_orders_add_users",
        "Create 100,000 users (cached INSERT)",
        1_940_000_000,
    ),
    (
        "users_orders_add_orders",
        "Create 1M orders (no extra indexes)",
        20_050_000_000,
    ),
    (
        "users_orders_create_indexes",
        "Create 2 indexes over 1M orders",
        6_270_000_000,
    ),
    (
        "users_orders_select_join",
        "Join select (user_id < 1000, ORDER BY created_at)",
        202_280_000,
    ),
    (
        "users_orders_select_like",
        "SELECT … WHERE email LIKE 'user%'",
        781_460_000,
    ),
    (
        "users_orders_add_100_orders_indexed",
        "Create 100 orders with indexes present",
        9_030_000,
    ),
    (
        "users_orders_delete_orders_of_100_users",
        "Delete 1,000 orders (user_id <= 100)",
        23_140_000,
    ),
    (
        "users_orders_add_orders_indexed",
        "Create 1M orders with indexes present",
        29_880_000_000,
    ),
    (
        "users_orders_delete_tenth_rollback",
        "Delete 100,000 orders, then ROLLBACK",
        1_530_000_000,
    ),
];

/// Batch sizes of the batched/unbatched benches.
pub const BATCH_SIZES: [u64; 5] = [1, 10, 100, 1_000, 10_000];
/// Op kinds of the batched/unbatched benches.
pub const OP_KINDS: [&str; 3] = ["insert", "update", "delete"];
/// Flush sizes of the flush-size benches.
pub const FLUSH_SIZES: [u64; 4] = [10, 100, 1_000, 10_000];
/// Failing-op percentages of the error-isolation benches.
pub const ERROR_PCTS: [u64; 3] = [0, 1, 2];
/// Ops in the error-isolation, flush-size and floor benches.
pub const FIXED_OPS: u64 = 10_000;

/// Target: batched insert per op ≤ this × the floor.
pub const FLOOR_TARGET: f64 = 1.10;
/// Target: gain at N = 1000 ≥ this, by op kind (inserts 12×, updates and deletes 10×).
pub fn gain_target(kind: &str) -> f64 {
    if kind == "insert" { 12.0 } else { 10.0 }
}
/// Target: billed instructions per op of submit + timer flush at N = 10,000.
pub const SUBMIT_TARGET_PER_OP: f64 = 30_000.0;
/// Target: submit + timer flush at least this many times fewer billed instructions per op than
/// an unbatched call.
pub const SUBMIT_TARGET_GAIN: f64 = 9.0;
/// Target: billed instructions per op of the packed client batch at N = 10,000.
pub const CLIENT_BATCH_TARGET_PER_OP: f64 = 17_000.0;
/// Target: the packed client batch at least this many times fewer cycles per op than one
/// unbatched call per op.
pub const CLIENT_BATCH_TARGET_CYCLES_GAIN: f64 = 150.0;
/// Target: each message-level gain at full scale within this many percent of its value on the
/// 10,000-user fixture (N = 1,000).
pub const FULL_SCALE_TARGET_PCT: f64 = 10.0;
/// Target: error isolation within ± this many percent per successful op.
pub const ERROR_TARGET_PCT: f64 = 5.0;

/// One row of the users/orders benchmark table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UsersOrdersRow {
    /// Bench name.
    pub bench: String,
    /// What it does.
    pub description: String,
    /// Published PocketIC figure.
    pub published: u64,
    /// Our figure (None if the bench did not run).
    pub measured: Option<u64>,
    /// measured / published (only at full scale).
    pub ratio: Option<f64>,
}

/// The users/orders benchmark table; `full_scale` decides whether ratios make sense.
pub fn users_orders_rows(
    benches: &BTreeMap<String, CanbenchFigures>,
    full_scale: bool,
) -> Vec<UsersOrdersRow> {
    USERS_ORDERS_BENCHMARK
        .iter()
        .map(|(bench, description, published)| {
            let measured = benches.get(*bench).map(|b| b.total.instructions);
            UsersOrdersRow {
                bench: bench.to_string(),
                description: description.to_string(),
                published: *published,
                measured,
                ratio: measured
                    .filter(|_| full_scale)
                    .map(|m| m as f64 / *published as f64),
            }
        })
        .collect()
}

/// One row of the gain table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GainRow {
    /// insert, update or delete.
    pub kind: String,
    /// Ops.
    pub n: u64,
    /// Unbatched instructions per op.
    pub unbatched_per_op: f64,
    /// Batched instructions per op.
    pub batched_per_op: f64,
    /// unbatched / batched.
    pub gain: f64,
}

fn per_op(benches: &BTreeMap<String, CanbenchFigures>, name: &str, n: u64) -> Option<f64> {
    benches
        .get(name)
        .map(|b| b.total.instructions as f64 / n.max(1) as f64)
}

/// Gain rows for every kind and N that both benches exist for.
pub fn gain_rows(benches: &BTreeMap<String, CanbenchFigures>) -> Vec<GainRow> {
    let mut rows = Vec::new();
    for kind in OP_KINDS {
        for n in BATCH_SIZES {
            let (Some(u), Some(b)) = (
                per_op(benches, &format!("unbatched_{kind}_{n}"), n),
                per_op(benches, &format!("batched_{kind}_{n}"), n),
            ) else {
                continue;
            };
            rows.push(GainRow {
                kind: kind.to_string(),
                n,
                unbatched_per_op: u,
                batched_per_op: b,
                gain: if b > 0.0 { u / b } else { f64::INFINITY },
            });
        }
    }
    rows
}

/// One row of the error-isolation table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorRow {
    /// Failing ops in percent.
    pub pct: u64,
    /// Total instructions.
    pub instructions: u64,
    /// Successful ops.
    pub successful: u64,
    /// Instructions per successful op.
    pub per_successful_op: f64,
    /// Change against the 0 % row, percent.
    pub delta_pct: Option<f64>,
}

/// Error-isolation rows.
pub fn error_rows(benches: &BTreeMap<String, CanbenchFigures>) -> Vec<ErrorRow> {
    let mut rows: Vec<ErrorRow> = ERROR_PCTS
        .iter()
        .filter_map(|pct| {
            let b = benches.get(&format!("errors_{pct}pct"))?;
            let successful = FIXED_OPS - FIXED_OPS * pct / 100;
            Some(ErrorRow {
                pct: *pct,
                instructions: b.total.instructions,
                successful,
                per_successful_op: b.total.instructions as f64 / successful as f64,
                delta_pct: None,
            })
        })
        .collect();
    if let Some(base) = rows
        .iter()
        .find(|r| r.pct == 0)
        .map(|r| r.per_successful_op)
    {
        for r in &mut rows {
            r.delta_pct = Some((r.per_successful_op - base) / base * 100.0);
        }
    }
    rows
}

/// One point of the flush-size curve.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FlushRow {
    /// Flush size.
    pub flush_size: u64,
    /// Total instructions for 10,000 ops.
    pub instructions: u64,
    /// Instructions per op.
    pub per_op: f64,
}

/// Flush-size rows.
pub fn flush_rows(benches: &BTreeMap<String, CanbenchFigures>) -> Vec<FlushRow> {
    FLUSH_SIZES
        .iter()
        .filter_map(|f| {
            let b = benches.get(&format!("flush_size_{f}"))?;
            Some(FlushRow {
                flush_size: *f,
                instructions: b.total.instructions,
                per_op: b.total.instructions as f64 / FIXED_OPS as f64,
            })
        })
        .collect()
}

/// One step of the floor breakdown (10,000 inserts).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FloorRow {
    /// Bench name.
    pub bench: String,
    /// What it adds over the previous row.
    pub what: String,
    /// Instructions per op.
    pub per_op: f64,
    /// per_op / floor per op.
    pub vs_floor: f64,
}

/// The floor comparison: floor, prepare_cached, execute_batch, batched insert.
pub fn floor_rows(benches: &BTreeMap<String, CanbenchFigures>) -> Vec<FloorRow> {
    let steps = [
        (
            "floor_insert_10000",
            "same INSERT ×10,000 in one transaction, cached statement (the floor)",
        ),
        (
            "breakdown_prepare_cached_10000",
            "for comparison: rusqlite prepare_cached per op with SqlValue binding (not on the batched path)",
        ),
        (
            "breakdown_execute_batch_10000",
            "floor + batch_core::execute_batch (statement held per batch, SqlValue binding, outcome per op)",
        ),
        (
            "batched_insert_10000",
            "+ queue: submit, meter, outcome store (the batched path)",
        ),
    ];
    let Some(floor) = per_op(benches, "floor_insert_10000", FIXED_OPS) else {
        return Vec::new();
    };
    steps
        .iter()
        .filter_map(|(bench, what)| {
            let p = per_op(benches, bench, FIXED_OPS)?;
            Some(FloorRow {
                bench: bench.to_string(),
                what: what.to_string(),
                per_op: p,
                vs_floor: p / floor,
            })
        })
        .collect()
}

/// The message-level targets: the batched op end to end and the packed client batch at
/// N = 10,000 on the 10,000-user fixture (`messages`), and each batched mode's gain at full scale
/// (`full_scale`, N = 1,000) against the same gain on the fixture.
pub fn message_targets(messages: &[ModeSummary], full_scale: &[ModeSummary]) -> Vec<TargetCheck> {
    let find = |runs: &[ModeSummary], mode: Mode, n: u64| -> Option<ModeSummary> {
        runs.iter().find(|s| s.mode == mode && s.n == n).cloned()
    };
    let mut out = Vec::new();
    let unbatched = find(messages, Mode::Unbatched, 10_000);
    let target = format!(
        "submit + timer flush ≤ {} billed instructions/op and ≥ {SUBMIT_TARGET_GAIN:.0}× fewer than unbatched (N = 10,000)",
        fmt_f(SUBMIT_TARGET_PER_OP)
    );
    out.push(
        match (&unbatched, find(messages, Mode::SubmitAndTimer, 10_000)) {
            (Some(u), Some(s)) => {
                let gain = u.instructions_per_op / s.instructions_per_op;
                TargetCheck {
                    target,
                    measured: format!(
                        "{} billed instructions/op, {gain:.1}× fewer",
                        fmt_f(s.instructions_per_op)
                    ),
                    met: Some(
                        s.instructions_per_op <= SUBMIT_TARGET_PER_OP && gain >= SUBMIT_TARGET_GAIN,
                    ),
                    breakdown_benches: vec![],
                }
            }
            _ => TargetCheck::not_measured(target),
        },
    );
    let packed = find(messages, Mode::ClientBatchPacked, 10_000);
    let target = format!(
        "packed client batch ≤ {} billed instructions/op (N = 10,000)",
        fmt_f(CLIENT_BATCH_TARGET_PER_OP)
    );
    out.push(match &packed {
        Some(p) => TargetCheck {
            target,
            measured: format!("{} billed instructions/op", fmt_f(p.instructions_per_op)),
            met: Some(p.instructions_per_op <= CLIENT_BATCH_TARGET_PER_OP),
            breakdown_benches: vec![],
        },
        None => TargetCheck::not_measured(target),
    });
    let target = format!(
        "packed client batch ≥ {CLIENT_BATCH_TARGET_CYCLES_GAIN:.0}× fewer cycles/op than unbatched (N = 10,000, 13 nodes)"
    );
    out.push(match (&unbatched, &packed) {
        (Some(u), Some(p)) if p.cycles_per_million_ops[0] > 0 => {
            let gain = u.cycles_per_million_ops[0] as f64 / p.cycles_per_million_ops[0] as f64;
            TargetCheck {
                target,
                measured: format!("{gain:.0}× fewer"),
                met: Some(gain >= CLIENT_BATCH_TARGET_CYCLES_GAIN),
                breakdown_benches: vec![],
            }
        }
        _ => TargetCheck::not_measured(target),
    });
    for mode in [
        Mode::SubmitAndTimer,
        Mode::ClientBatch,
        Mode::ClientBatchPacked,
    ] {
        let target = format!(
            "full scale: gain over unbatched within {FULL_SCALE_TARGET_PCT:.0}% of the 10k-user fixture's ({}, N = 1,000)",
            mode.label()
        );
        let gain = |runs: &[ModeSummary]| -> Option<f64> {
            let u = find(runs, Mode::Unbatched, 1_000)?;
            let m = find(runs, mode, 1_000)?;
            Some(u.instructions_per_op / m.instructions_per_op)
        };
        out.push(match (gain(messages), gain(full_scale)) {
            (Some(small), Some(full)) => {
                let change = (full / small - 1.0) * 100.0;
                TargetCheck {
                    target,
                    measured: format!("{small:.2}× → {full:.2}× ({change:+.1}%)"),
                    met: Some(change.abs() <= FULL_SCALE_TARGET_PCT),
                    breakdown_benches: vec![],
                }
            }
            _ => TargetCheck::not_measured(target),
        });
    }
    out
}

/// A target of the suite and whether it is met.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TargetCheck {
    /// The target.
    pub target: String,
    /// What we measured.
    pub measured: String,
    /// Met, missed, or not measured (None).
    pub met: Option<bool>,
    /// Benches whose scopes explain a miss.
    pub breakdown_benches: Vec<String>,
}

impl TargetCheck {
    /// `target`, whose benches did not run.
    fn not_measured(target: String) -> TargetCheck {
        TargetCheck {
            target,
            measured: "not measured".into(),
            met: None,
            breakdown_benches: vec![],
        }
    }
}

/// Evaluates the targets.
pub fn targets(benches: &BTreeMap<String, CanbenchFigures>) -> Vec<TargetCheck> {
    let mut out = Vec::new();
    let floor = per_op(benches, "floor_insert_10000", FIXED_OPS);
    let batched = per_op(benches, "batched_insert_10000", FIXED_OPS);
    out.push(match (floor, batched) {
        (Some(f), Some(b)) => TargetCheck {
            target: format!("batched insert ≤ {FLOOR_TARGET:.2}× the floor (10,000 ops)"),
            measured: format!(
                "{:.3}× ({} vs {} instructions/op)",
                b / f,
                fmt_f(b),
                fmt_f(f)
            ),
            met: Some(b / f <= FLOOR_TARGET),
            breakdown_benches: vec![
                "batched_insert_10000".into(),
                "breakdown_execute_batch_10000".into(),
                "breakdown_prepare_cached_10000".into(),
                "floor_insert_10000".into(),
            ],
        },
        _ => TargetCheck::not_measured(format!(
            "batched insert ≤ {FLOOR_TARGET:.2}× the floor (10,000 ops)"
        )),
    });
    let gains = gain_rows(benches);
    for kind in OP_KINDS {
        let goal = gain_target(kind);
        let target = format!("gain at N = 1000 ≥ {goal:.0}× ({kind})");
        out.push(
            match gains.iter().find(|g| g.kind == kind && g.n == 1_000) {
                Some(g) => TargetCheck {
                    target,
                    measured: format!("{:.1}×", g.gain),
                    met: Some(g.gain >= goal),
                    breakdown_benches: vec![
                        format!("batched_{kind}_1000"),
                        format!("unbatched_{kind}_1000"),
                    ],
                },
                None => TargetCheck::not_measured(target),
            },
        );
    }
    let errors = error_rows(benches);
    for pct in [1, 2] {
        let target = format!(
            "error isolation: {pct}% failing ops within ±{ERROR_TARGET_PCT:.0}% per successful op"
        );
        out.push(
            match errors
                .iter()
                .find(|r| r.pct == pct)
                .and_then(|r| r.delta_pct)
            {
                Some(d) => TargetCheck {
                    target,
                    measured: format!("{d:+.2}%"),
                    met: Some(d.abs() <= ERROR_TARGET_PCT),
                    breakdown_benches: vec![format!("errors_{pct}pct"), "errors_0pct".into()],
                },
                None => TargetCheck::not_measured(target),
            },
        );
    }
    out
}

/// One row of the wire-shape table: what encoding a reply or decoding an argument costs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CodecRow {
    /// The canbench bench.
    pub bench: String,
    /// The shape and where it is used.
    pub shape: String,
    /// `candid`, the canister's hand codec, or the packed form.
    pub codec: String,
    /// Instructions per call (per op for the batch shapes).
    pub per_unit: u64,
    /// Bytes per call (per op for the batch shapes).
    pub bytes_per_unit: f64,
    /// What `per_unit` counts: "call" or "op".
    pub unit: String,
}

/// The wire-shape table from the `codec_*` benches (1,000 calls each, or one call with 1,000
/// ops), with the bytes of each encoding computed here with the same types.
pub fn codec_rows(benches: &BTreeMap<String, CanbenchFigures>) -> Vec<CodecRow> {
    use bench_api::{BatchResult, Outcome, SubmitResult, UserOrderOp, fixture::Workload};
    let orders: Vec<UserOrderOp> = (0..1_000).map(|i| Workload::Insert.op(i)).collect();
    let outcomes: Vec<Outcome> = (0..1_000i64)
        .map(|i| Outcome::Committed {
            rows_changed: 1,
            last_insert_rowid: 20_000 + i,
        })
        .collect();
    let committed = Outcome::Committed {
        rows_changed: 1,
        last_insert_rowid: 42,
    };
    let len = |r: Result<Vec<u8>, candid::Error>| r.map(|b| b.len()).unwrap_or(0) as f64;
    let order_arg = len(candid::encode_args((7i64, 9.5f64)));
    let batch_arg = len(candid::encode_one(&orders)) / 1_000.0;
    let packed_arg = bench_api::wire::encode_blob(&bench_api::packed::encode_ops(&orders)).len()
        as f64
        / 1_000.0;
    let batch_reply = len(candid::encode_one(BatchResult::Ok(outcomes.clone()))) / 1_000.0;
    let packed_reply =
        bench_api::wire::encode_packed_result(Ok(bench_api::packed::encode_outcomes(&outcomes)))
            .len() as f64
            / 1_000.0;
    let rows: [(&str, &str, &str, u64, f64, &str); 11] = [
        (
            "codec_reply_submit_result_candid",
            "reply `SubmitResult` (`variant { Ok : Ticket; Err : WriteError }`)",
            "candid",
            1_000,
            len(candid::encode_one(SubmitResult::Ok(42))),
            "call",
        ),
        (
            "codec_reply_ticket_candid",
            "reply `Ticket` (`nat64`), the submits",
            "candid",
            1_000,
            len(candid::encode_one(42u64)),
            "call",
        ),
        (
            "codec_reply_submit_result_wire",
            "reply `SubmitResult`, the submits",
            "hand codec (`Ok` case alone)",
            1_000,
            bench_api::wire::encode_submit_result(Ok(42)).len() as f64,
            "call",
        ),
        (
            "codec_reply_outcome_candid",
            "reply `Outcome`, unbatched writes",
            "candid",
            1_000,
            len(candid::encode_one(committed.clone())),
            "call",
        ),
        (
            "codec_reply_write_result_wire",
            "reply `WriteResult`, unbatched writes",
            "hand codec (`Ok` case alone)",
            1_000,
            bench_api::wire::encode_write_result(Ok(committed)).len() as f64,
            "call",
        ),
        (
            "codec_arg_i64_f64_candid",
            "argument `(int64, float64)`, `create_order` and `submit_create_order`",
            "candid",
            1_000,
            order_arg,
            "call",
        ),
        (
            "codec_arg_i64_f64_wire",
            "argument `(int64, float64)`, `create_order` and `submit_create_order`",
            "hand codec",
            1_000,
            order_arg,
            "call",
        ),
        (
            "codec_arg_batch_1000_candid",
            "argument of a client batch of 1,000 orders",
            "candid (`vec UserOrderOp`)",
            1_000,
            batch_arg,
            "op",
        ),
        (
            "codec_arg_batch_1000_packed",
            "argument of a client batch of 1,000 orders",
            "packed (`blob`)",
            1_000,
            packed_arg,
            "op",
        ),
        (
            "codec_reply_batch_1000_candid",
            "reply of a client batch of 1,000 orders",
            "candid (`BatchResult`)",
            1_000,
            batch_reply,
            "op",
        ),
        (
            "codec_reply_batch_1000_packed",
            "reply of a client batch of 1,000 orders",
            "packed (`blob`)",
            1_000,
            packed_reply,
            "op",
        ),
    ];
    rows.into_iter()
        .filter_map(|(bench, shape, codec, per, bytes, unit)| {
            let b = benches.get(bench)?;
            Some(CodecRow {
                bench: bench.to_string(),
                shape: shape.to_string(),
                codec: codec.to_string(),
                per_unit: b.total.instructions / per,
                bytes_per_unit: bytes,
                unit: unit.to_string(),
            })
        })
        .collect()
}

/// Formats a count with thousands separators.
pub fn fmt_u(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Formats a non-negative float rounded to an integer with thousands separators.
pub fn fmt_f(x: f64) -> String {
    if x.is_finite() && x >= 0.0 {
        fmt_u(x.round() as u64)
    } else {
        format!("{x}")
    }
}

/// Formats an instruction count with two decimals and a unit (`1.94 B`, `202.28 M`, `999`).
pub fn human(n: u64) -> String {
    let v = n as f64;
    if n >= 1_000_000_000_000 {
        format!("{:.2} T", v / 1e12)
    } else if n >= 1_000_000_000 {
        format!("{:.2} B", v / 1e9)
    } else if n >= 1_000_000 {
        format!("{:.2} M", v / 1e6)
    } else if n >= 1_000 {
        format!("{:.2} K", v / 1e3)
    } else {
        format!("{n}")
    }
}

/// Formats a byte count in binary units when it is a whole number of them (`4 MiB`, `2 KiB`),
/// else with thousands separators and `bytes`.
pub fn human_bytes(n: u64) -> String {
    match n {
        0 => "0 bytes".to_string(),
        _ if n.is_multiple_of(1 << 20) => format!("{} MiB", n >> 20),
        _ if n.is_multiple_of(1 << 10) => format!("{} KiB", n >> 10),
        _ => format!("{} bytes", fmt_u(n)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine_runs::Measured;

    fn bench(i: u64) -> CanbenchFigures {
        CanbenchFigures {
            total: Measured {
                calls: 1,
                instructions: i,
                ..Measured::default()
            },
            scopes: BTreeMap::new(),
        }
    }

    #[test]
    fn codec_rows_divide_by_the_calls_and_count_the_bytes() {
        let mut m = BTreeMap::new();
        m.insert("codec_reply_submit_result_wire".to_string(), bench(511_205));
        m.insert("codec_arg_batch_1000_packed".to_string(), bench(352_805));
        let rows = codec_rows(&m);
        assert_eq!(rows.len(), 2);
        // Table order, not name order; a typed ticket reply is `DIDL`, 1 type (`variant { Ok :
        // nat64 }`: tag, 1 case, the hash of `Ok` in 3 bytes, nat64), 1 argument of type 0, the
        // case 0 and 8 bytes.
        assert_eq!((rows[0].per_unit, rows[0].bytes_per_unit), (511, 22.0));
        assert_eq!(rows[0].unit, "call");
        // 1,000 orders: a tag, the user id (1 varint byte up to 63, else 2), 8 float bytes; and the frame.
        assert_eq!(rows[1].per_unit, 352);
        assert_eq!((rows[1].bytes_per_unit * 1_000.0).round(), 10_949.0);
        assert_eq!(rows[1].unit, "op");
    }

    fn sample() -> BTreeMap<String, CanbenchFigures> {
        let mut m = BTreeMap::new();
        m.insert("unbatched_insert_1000".into(), bench(400_000_000));
        m.insert("batched_insert_1000".into(), bench(20_000_000));
        m.insert("floor_insert_10000".into(), bench(150_000_000));
        m.insert("batched_insert_10000".into(), bench(180_000_000));
        m.insert("errors_0pct".into(), bench(200_000_000));
        m.insert("errors_1pct".into(), bench(198_000_000));
        m.insert("errors_2pct".into(), bench(220_000_000));
        m.insert("flush_size_10".into(), bench(900_000_000));
        m.insert("users_orders_add_users".into(), bench(1_940_000_000 / 2));
        m
    }

    #[test]
    fn gains_and_targets() {
        let b = sample();
        let g = gain_rows(&b);
        assert_eq!(g.len(), 1);
        assert!((g[0].gain - 20.0).abs() < 1e-9);
        let t = targets(&b);
        assert_eq!(t.len(), 6);
        // floor: 18,000 vs 15,000 per op = 1.2× > 1.10 → missed, with a breakdown.
        assert_eq!(t[0].met, Some(false));
        assert!(!t[0].breakdown_benches.is_empty());
        assert_eq!(t[1].met, Some(true)); // insert gain 20×
        assert_eq!(t[2].met, None); // update not measured
        // 1%: 198 M / 9,900 = 20,000 per op: 0 %. 2%: 220 M / 9,800 ≈ +12.2 %.
        assert_eq!(t[4].met, Some(true));
        assert_eq!(t[5].met, Some(false));
    }

    fn summary(mode: Mode, n: u64, per_op: f64, cycles_per_million: u128) -> ModeSummary {
        ModeSummary {
            mode,
            n,
            messages: n,
            ingress_messages: n,
            timer_messages: 0,
            billed_instructions: (per_op * n as f64) as u64,
            instructions: (per_op * n as f64) as u64,
            ingress_bytes: 0,
            instructions_per_op: per_op,
            cycles: [0, 0],
            cycles_per_million_ops: [cycles_per_million, 0],
            usd_per_million_ops: [0.0, 0.0],
            changed_pages: 0,
            tracked: Default::default(),
        }
    }

    #[test]
    fn message_level_targets() {
        let fixture = vec![
            summary(Mode::Unbatched, 10_000, 240_000.0, 6_500_000),
            summary(Mode::SubmitAndTimer, 10_000, 30_001.0, 6_300_000),
            summary(Mode::ClientBatchPacked, 10_000, 17_000.0, 43_000),
            summary(Mode::Unbatched, 1_000, 240_000.0, 0),
            summary(Mode::SubmitAndTimer, 1_000, 24_000.0, 0),
            summary(Mode::ClientBatch, 1_000, 24_000.0, 0),
            summary(Mode::ClientBatchPacked, 1_000, 20_000.0, 0),
        ];
        let full = vec![
            summary(Mode::Unbatched, 1_000, 240_000.0, 0),
            // 10× → 9.0×: −10.0 %, within; 10× → 8.96×: missed; 12× → 13.2×: +10 %.
            summary(Mode::SubmitAndTimer, 1_000, 240_000.0 / 9.0, 0),
            summary(Mode::ClientBatch, 1_000, 240_000.0 / 8.96, 0),
            summary(Mode::ClientBatchPacked, 1_000, 240_000.0 / 13.2, 0),
        ];
        let t = message_targets(&fixture, &full);
        let met: Vec<Option<bool>> = t.iter().map(|t| t.met).collect();
        // Submit: 30,001 > 30,000 (8.0× fewer); packed: 17,000 ≤ 17,000; cycles 151×.
        assert_eq!(
            met,
            [
                Some(false),
                Some(true),
                Some(true),
                Some(true),
                Some(false),
                Some(true)
            ]
        );
        assert_eq!(t[2].measured, "151× fewer");
        // Without full-scale runs those targets are not measured, not met.
        let t = message_targets(&fixture, &[]);
        assert_eq!(t[3].met, None);
        assert_eq!(t[5].measured, "not measured");
    }

    #[test]
    fn published_ratio_only_at_full_scale() {
        let b = sample();
        let full = users_orders_rows(&b, true);
        assert_eq!(full.len(), 9);
        assert!((full[0].ratio.unwrap() - 0.5).abs() < 1e-9);
        assert_eq!(full[1].measured, None);
        assert_eq!(users_orders_rows(&b, false)[0].ratio, None);
    }

    #[test]
    fn formatting() {
        assert_eq!(fmt_u(1_234_567), "1,234,567");
        assert_eq!(fmt_u(12), "12");
        assert_eq!(fmt_f(999.6), "1,000");
        assert_eq!(flush_rows(&sample())[0].per_op, 90_000.0);
        assert_eq!(floor_rows(&sample()).len(), 2);
    }
}
