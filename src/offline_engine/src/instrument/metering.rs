//! The metering itself: where a function body is charged (the replica's basic-block rule) and
//! the injected code that charges it (`METERING.md` §1).

use wasm_encoder::{BlockType as EncBlockType, Function, Instruction, ValType};
use wasmparser::Operator;

use super::indices::Special;
use super::weights::operator_weight;

/// How an injection point is charged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Charge {
    /// A block start: subtract `cost`; `reentrant` blocks also check the counter.
    Static { cost: u64, reentrant: bool },
    /// Before a bulk operation: subtract the size operand on top of the stack.
    Dynamic { operand64: bool },
}

#[derive(Debug, Clone, Copy)]
pub(super) struct Point {
    pub(super) position: usize,
    pub(super) charge: Charge,
}

/// Computes the injection points of one function body (the replica's basic-block rule).
pub(super) fn injection_points(ops: &[Operator<'_>], wasm64: bool) -> Vec<Point> {
    let mut points = Vec::new();
    let mut current = Point {
        position: 0,
        charge: Charge::Static {
            cost: 1,
            reentrant: true,
        },
    };
    let add = |p: &mut Point, w: u64| {
        if let Charge::Static { cost, .. } = &mut p.charge {
            *cost += w;
        }
    };
    for (position, op) in ops.iter().enumerate() {
        add(&mut current, operator_weight(op, wasm64));
        let next = |reentrant| Point {
            position: position + 1,
            charge: Charge::Static { cost: 0, reentrant },
        };
        match op {
            Operator::Loop { .. } => {
                points.push(current);
                current = next(true);
            }
            Operator::If { .. }
            | Operator::Else
            | Operator::Br { .. }
            | Operator::BrIf { .. }
            | Operator::BrTable { .. }
            | Operator::End
            | Operator::Return
            | Operator::Unreachable
            | Operator::ReturnCall { .. }
            | Operator::ReturnCallIndirect { .. } => {
                points.push(current);
                current = next(false);
            }
            Operator::MemoryFill { .. }
            | Operator::MemoryCopy { .. }
            | Operator::TableFill { .. }
            | Operator::TableCopy { .. } => {
                points.push(Point {
                    position,
                    charge: Charge::Dynamic { operand64: wasm64 },
                });
            }
            Operator::MemoryInit { .. } | Operator::TableInit { .. } => {
                points.push(Point {
                    position,
                    charge: Charge::Dynamic { operand64: false },
                });
            }
            _ => {}
        }
    }
    // Stable sort: a dynamic point recorded while a block was still open comes before the
    // static point of that block when both sit at the same position (as in the replica).
    points.sort_by_key(|p| p.position);
    points.retain(|p| {
        p.position < ops.len()
            && match p.charge {
                Charge::Static { cost, reentrant } => reentrant || cost > 0,
                Charge::Dynamic { .. } => true,
            }
    });
    points
}

/// Static cost each function body would prepay at entry, for tests and diagnostics.
pub fn block_costs(wasm_ops: &[Operator<'_>], wasm64: bool) -> Vec<(usize, u64)> {
    injection_points(wasm_ops, wasm64)
        .into_iter()
        .filter_map(|p| match p.charge {
            Charge::Static { cost, .. } => Some((p.position, cost)),
            Charge::Dynamic { .. } => None,
        })
        .collect()
}

/// Charges a block at its start: subtracts its prepaid `cost`; a `reentrant` block (function
/// entry, loop header) then calls `out_of_instructions` when the counter is negative.
pub(super) fn emit_static(f: &mut Function, s: Special, cost: u64, reentrant: bool) {
    f.instruction(&Instruction::GlobalGet(s.counter_global));
    f.instruction(&Instruction::I64Const(cost as i64));
    f.instruction(&Instruction::I64Sub);
    f.instruction(&Instruction::GlobalSet(s.counter_global));
    if reentrant {
        f.instruction(&Instruction::GlobalGet(s.counter_global));
        f.instruction(&Instruction::I64Const(0));
        f.instruction(&Instruction::I64LtS);
        f.instruction(&Instruction::If(EncBlockType::Empty));
        f.instruction(&Instruction::Call(s.out_of_instructions));
        f.instruction(&Instruction::End);
    }
}

/// Charges the size operand on top of the stack (an i32 operand is widened for the helper and
/// narrowed back).
pub(super) fn emit_dynamic(f: &mut Function, s: Special, operand64: bool) {
    if operand64 {
        f.instruction(&Instruction::Call(s.decrement_helper));
    } else {
        f.instruction(&Instruction::I64ExtendI32U);
        f.instruction(&Instruction::Call(s.decrement_helper));
        f.instruction(&Instruction::I32WrapI64);
    }
}

/// The unmetered helper `(param i64) (result i64)`: subtracts its argument from the counter
/// (saturating at i64::MIN), calls `out_of_instructions` if the counter is negative, and
/// returns the argument unchanged.
pub(super) fn decrement_helper(s: Special) -> Function {
    let mut f = Function::new(vec![(1, ValType::I64)]);
    for i in [
        Instruction::GlobalGet(s.counter_global),
        Instruction::LocalGet(0),
        Instruction::I64Sub,
        Instruction::LocalTee(1),
        Instruction::GlobalGet(s.counter_global),
        Instruction::I64GtS,
        Instruction::If(EncBlockType::Result(ValType::I64)),
        Instruction::I64Const(i64::MIN),
        Instruction::Else,
        Instruction::LocalGet(1),
        Instruction::End,
        Instruction::GlobalSet(s.counter_global),
        Instruction::GlobalGet(s.counter_global),
        Instruction::I64Const(0),
        Instruction::I64LtS,
        Instruction::If(EncBlockType::Empty),
        Instruction::Call(s.out_of_instructions),
        Instruction::End,
        Instruction::LocalGet(0),
        Instruction::End,
    ] {
        f.instruction(&i);
    }
    f
}
