//! One function body: its charges ([`super::metering`]), the written-page map's tracking
//! ([`super::dirty`]) and the profiler's hooks, injected around the original operators.

use wasm_encoder::reencode::Reencode;
use wasm_encoder::{Function, Instruction, ValType};
use wasmparser::Operator;

use super::InstrumentError;
use super::dirty::{
    SCRATCH_TYPES, Scratch, Taken, bulk_locals, check_locals, emit_bulk_mark, emit_store_mark,
    heap_bulk, heap_store,
};
use super::indices::{ProfileHooks, Shift, Special};
use super::metering::{Charge, emit_dynamic, emit_static, injection_points};
use super::pages::{
    CheckLocals, emit_access_check, emit_bulk_touch, heap_access, operand_above_address,
};
use super::redundant::redundant_checks;

/// What the body instrumentation needs to know about the module and the function.
pub(super) struct BodyContext {
    pub(super) special: Special,
    pub(super) wasm64: bool,
    /// Index of the function in the original module.
    pub(super) func_index: u32,
    /// Number of parameters of the function.
    pub(super) params: u32,
    /// Number of imported functions in the original module.
    pub(super) imported_funcs: u32,
}

/// The instrumented body of one function.
pub(super) fn instrument_body(
    body: wasmparser::FunctionBody<'_>,
    cx: &BodyContext,
    reencoder: &mut Shift,
) -> Result<Function, InstrumentError> {
    let special = cx.special;
    let mut locals = Vec::new();
    let mut declared = 0u32;
    for pair in body.get_locals_reader()? {
        let (count, ty) = pair?;
        declared += count;
        locals.push((count, reencoder.val_type(ty)?));
    }
    let mut reader = body.get_operators_reader()?;
    let mut ops = Vec::new();
    while !reader.eof() {
        ops.push(reader.read()?);
    }
    let counts = super::dirty::scratch_counts(
        &ops,
        special.profile.is_some(),
        special.dirty.is_some(),
        special.pages.is_some(),
        cx.wasm64,
    );
    for (ty, n) in SCRATCH_TYPES.iter().zip(counts) {
        if n > 0 {
            locals.push((n, *ty));
        }
    }
    let scratch = Scratch::new(cx.params + declared, counts);
    // i32 scratch #0 is the profiler's depth when profiling; marking uses the ones after it.
    let depth = scratch.local(ValType::I32, 0);
    let mark_base = u32::from(special.profile.is_some());
    let mut f = Function::new(locals);

    let points = injection_points(&ops, cx.wasm64);
    let redundant = match special.pages {
        Some(_) => redundant_checks(&ops),
        None => Vec::new(),
    };
    let mut next_point = points.iter().peekable();
    if let Some(p) = special.profile {
        // Before the entry block's charge, so that the entry block counts for this function.
        f.instruction(&Instruction::I32Const(cx.func_index as i32));
        f.instruction(&Instruction::Call(p.enter));
        f.instruction(&Instruction::LocalSet(depth));
    }
    for (position, op) in ops.into_iter().enumerate() {
        while let Some(p) = next_point.next_if(|p| p.position == position) {
            match p.charge {
                Charge::Static { cost, reentrant } => emit_static(&mut f, special, cost, reentrant),
                Charge::Dynamic { operand64 } => emit_dynamic(&mut f, special, operand64),
            }
        }
        let mut taken = Taken::after(mark_base);
        if let Some(p) = special.pages {
            if let Some(access) = heap_access(&op)
                && !redundant[position]
            {
                // A store's value (a lane load's vector) waits in a local while the address is
                // checked.
                let value = operand_above_address(&op).map(|ty| scratch.slot(taken.take(ty)));
                if let Some(v) = value {
                    f.instruction(&Instruction::LocalSet(v));
                }
                let [addr, effective, wide_page, page] = check_locals(&mut taken, cx.wasm64);
                let locals = CheckLocals {
                    addr: scratch.slot(addr),
                    effective: scratch.slot(effective),
                    wide_page: scratch.slot(wide_page),
                    page: scratch.slot(page),
                };
                emit_access_check(&mut f, p, locals, access, cx.wasm64);
                if let Some(v) = value {
                    f.instruction(&Instruction::LocalGet(v));
                }
            } else if heap_access(&op).is_some() {
                // Covered by an earlier check (`redundant_checks`).
            } else if let Some(types) = heap_bulk(&op, cx.wasm64) {
                let locals = bulk_locals(&mut taken, types).map(|s| scratch.slot(s));
                for &l in locals.iter().rev() {
                    f.instruction(&Instruction::LocalSet(l));
                }
                emit_bulk_touch(&mut f, p, &op, locals, types);
                for &l in &locals {
                    f.instruction(&Instruction::LocalGet(l));
                }
            }
        }
        if let Some(d) = special.dirty {
            if let Some((ty, offset)) = heap_store(&op) {
                emit_store_mark(&mut f, d, &scratch, &mut taken, ty, offset, cx.wasm64);
            } else if let Some(types) = heap_bulk(&op, cx.wasm64) {
                emit_bulk_mark(&mut f, d, &scratch, &mut taken, types);
            }
        }
        let after_call = match special.profile {
            Some(p) => profile_before(&mut f, p, &op, depth, cx.imported_funcs),
            None => false,
        };
        f.instruction(&reencoder.instruction(op)?);
        if after_call && let Some(p) = special.profile {
            f.instruction(&Instruction::LocalGet(depth));
            f.instruction(&Instruction::Call(p.ret));
        }
    }
    Ok(f)
}

/// The profiler's hooks before `op`: the tail-call hook before a tail call, the entry hook
/// around a call of an imported (`ic0`) function. Returns whether the return hook follows `op`
/// (a call that returns here).
fn profile_before(
    f: &mut Function,
    p: ProfileHooks,
    op: &Operator<'_>,
    depth: u32,
    imported_funcs: u32,
) -> bool {
    let enter_import = |f: &mut Function, function_index: u32| {
        if function_index < imported_funcs {
            f.instruction(&Instruction::I32Const(function_index as i32));
            f.instruction(&Instruction::Call(p.enter));
            f.instruction(&Instruction::Drop);
        }
    };
    match *op {
        Operator::Call { function_index } => {
            enter_import(f, function_index);
            true
        }
        Operator::CallIndirect { .. } | Operator::CallRef { .. } => true,
        Operator::ReturnCall { .. }
        | Operator::ReturnCallIndirect { .. }
        | Operator::ReturnCallRef { .. } => {
            f.instruction(&Instruction::LocalGet(depth));
            f.instruction(&Instruction::Call(p.tail));
            if let Operator::ReturnCall { function_index } = *op {
                enter_import(f, function_index);
            }
            false
        }
        _ => false,
    }
}
