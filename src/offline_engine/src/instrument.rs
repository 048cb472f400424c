//! Instruction-metering instrumentation, following the replica's rules (`METERING.md` §1).
//!
//! The module is rewritten with wasmparser + wasm-encoder:
//! - an imported host function `__.out_of_instructions` is prepended (function index 0, all other
//!   function indices shift by one);
//! - an exported mutable i64 global [`COUNTER_EXPORT`] holds the remaining budget; every basic
//!   block subtracts its prepaid cost (the sum of [`operator_weight`]s) when entered; re-entrant
//!   blocks (function entry, loop headers) then check `counter < 0` and call `out_of_instructions`;
//! - before `memory.fill/copy/init` and `table.fill/copy/init` an injected, unmetered helper
//!   subtracts the size operand (saturating) and checks the counter;
//! - the start section is removed and its function exported as `canister_start`;
//! - memory 0 and table 0 are exported as `memory` and `table`, and every mutable global is
//!   exported (`__persistent_mutable_global_<i>` when it had no export), so the engine can
//!   snapshot and restore them;
//! - a module with a memory gets a second memory, the written-page map
//!   ([`crate::heap::DirtyMap`], exported as [`DIRTY_MAP_EXPORT`]): before every store to the
//!   heap the injected code sets the map's byte of the 4 KiB page of the store's first byte (and
//!   a summary byte per 64 pages), and before `memory.fill/copy/init` an injected helper marks
//!   every page of the destination range, so that the engine compares only those pages with its
//!   shadow of the heap ([`crate::heap`]);
//! - with [`Options::profile`], hooks for the profiler ([`crate::profile`]): an imported host
//!   function called at function entry (before the entry block's charge), after every call
//!   returns, before every tail call, and around calls of imported (`ic0`) functions.
//!
//! The injected code is never metered itself: it changes no instruction count.

mod weights;

pub use weights::operator_weight;

use std::borrow::Cow;

use wasm_encoder::reencode::Reencode;
use wasm_encoder::{
    BlockType as EncBlockType, CodeSection, ConstExpr, ExportKind, ExportSection, Function,
    FunctionSection, GlobalSection, GlobalType, ImportSection, Instruction, Module, TypeSection,
    ValType,
};
use wasmparser::{ExternalKind, Operator, Parser, Payload, TypeRef};

use crate::heap::{DirtyMap, PAGE_SHIFT, SUMMARY_SHIFT};

/// Name of the exported instruction counter global.
pub const COUNTER_EXPORT: &str = "canister counter_instructions";
/// Module name of the injected host imports.
pub const INJECTED_MODULE: &str = "__";
/// Name of the injected out-of-instructions host import.
pub const OUT_OF_INSTRUCTIONS: &str = "out_of_instructions";
/// Export name of the canister's main memory after instrumentation.
pub const MEMORY_EXPORT: &str = "memory";
/// Export name of the canister's function table after instrumentation.
pub const TABLE_EXPORT: &str = "table";
/// Export name of the former start function.
pub const START_EXPORT: &str = "canister_start";
/// Export name of the written-page map memory ([`crate::heap::DirtyMap`]).
pub const DIRTY_MAP_EXPORT: &str = "__dirty_pages";
/// Name of the profiler's function-entry hook `(func index: i32) -> (stack depth: i32)`.
pub const PROFILE_ENTER: &str = "profile_enter";
/// Name of the profiler's call-return hook `(stack depth of the caller: i32)`.
pub const PROFILE_RETURN: &str = "profile_return";
/// Name of the profiler's tail-call hook `(stack depth of the calling function: i32)`.
pub const PROFILE_TAIL: &str = "profile_tail";

/// Options of the instrumentation pass.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Options {
    /// Inject the profiler's hooks ([`PROFILE_ENTER`], [`PROFILE_RETURN`], [`PROFILE_TAIL`],
    /// imported from [`INJECTED_MODULE`]). They read the counter and never change it.
    pub profile: bool,
}

/// Errors of the instrumentation pass.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum InstrumentError {
    /// The input is not a valid WebAssembly module.
    #[error("invalid wasm module: {0}")]
    Parse(#[from] wasmparser::BinaryReaderError),
    /// Re-encoding the module failed.
    #[error("cannot re-encode wasm module: {0}")]
    Reencode(String),
    /// The module imports something the engine does not provide.
    #[error("module imports `{module}.{name}`, which the offline engine does not provide{hint}")]
    UnsupportedImport {
        /// Import module name.
        module: String,
        /// Import field name.
        name: String,
        /// Extra explanation (may be empty).
        hint: String,
    },
    /// The module uses a feature the IC does not allow (several memories, a component, ...).
    #[error("unsupported module: {0}")]
    Unsupported(String),
}

impl<E: std::fmt::Debug> From<wasm_encoder::reencode::Error<E>> for InstrumentError {
    fn from(e: wasm_encoder::reencode::Error<E>) -> Self {
        InstrumentError::Reencode(format!("{e:?}"))
    }
}

/// What the engine needs to know about an instrumented module.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ModuleInfo {
    /// The main memory is 64-bit (wasm64): loads/stores weigh 2, dirty pages cost 4,000.
    pub memory64: bool,
    /// The module defines a memory (exported as [`MEMORY_EXPORT`]).
    pub has_memory: bool,
    /// The module defines a table (exported as [`TABLE_EXPORT`]).
    pub has_table: bool,
    /// The module had a start section (now exported as [`START_EXPORT`]).
    pub has_start: bool,
    /// Names of the exported functions of the original module (e.g. `canister_update foo`).
    pub function_exports: Vec<String>,
    /// `ic0` functions the module imports.
    pub ic0_imports: Vec<String>,
    /// Export names of every mutable global (persisted across messages, restored on traps).
    pub mutable_globals: Vec<String>,
    /// Custom sections named `icp:public <name>` / `icp:private <name>`: (name, contents).
    pub metadata: Vec<(String, Vec<u8>)>,
}

/// The instrumented module and its description.
#[derive(Debug, Clone)]
pub struct Instrumented {
    /// The instrumented wasm binary.
    pub wasm: Vec<u8>,
    /// Facts about the module.
    pub info: ModuleInfo,
}

/// How an injection point is charged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Charge {
    /// A block start: subtract `cost`; `reentrant` blocks also check the counter.
    Static { cost: u64, reentrant: bool },
    /// Before a bulk operation: subtract the size operand on top of the stack.
    Dynamic { operand64: bool },
}

#[derive(Debug, Clone, Copy)]
struct Point {
    position: usize,
    charge: Charge,
}

/// Computes the injection points of one function body (the replica's basic-block rule).
fn injection_points(ops: &[Operator<'_>], wasm64: bool) -> Vec<Point> {
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

/// Shifts function indices by the number of injected imports; everything else round-trips.
struct Shift(u32);

impl Reencode for Shift {
    type Error = std::convert::Infallible;
    fn function_index(
        &mut self,
        func: u32,
    ) -> Result<u32, wasm_encoder::reencode::Error<Self::Error>> {
        Ok(func + self.0)
    }
}

/// Indices the injected code refers to.
#[derive(Debug, Clone, Copy)]
struct Special {
    counter_global: u32,
    out_of_instructions: u32,
    decrement_helper: u32,
    /// The written-page map: its memory index and helper, when the module has a memory.
    dirty: Option<DirtyHooks>,
    /// The profiler's hooks, when profiling.
    profile: Option<ProfileHooks>,
}

#[derive(Debug, Clone, Copy)]
struct DirtyHooks {
    memory: u32,
    mark_range: u32,
    layout: DirtyMap,
}

#[derive(Debug, Clone, Copy)]
struct ProfileHooks {
    enter: u32,
    ret: u32,
    tail: u32,
}

fn emit_static(f: &mut Function, s: Special, cost: u64, reentrant: bool) {
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

fn emit_dynamic(f: &mut Function, s: Special, operand64: bool) {
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
fn decrement_helper(s: Special) -> Function {
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

fn map_arg(memory: u32, offset: u64) -> wasm_encoder::MemArg {
    wasm_encoder::MemArg {
        offset,
        align: 0,
        memory_index: memory,
    }
}

/// The unmetered helper `(param $start i64) (param $len i64)`: marks every page of the byte
/// range `[start, start + len)` in the written-page map (nothing for an empty range; pages at or
/// beyond `tracked`, and a range that wraps around, mark the overflow entry instead), exactly as
/// [`DirtyMap::mark_range`] does on the host.
fn mark_range_helper(d: DirtyHooks) -> Function {
    let tracked = d.layout.tracked as i64;
    let summary = d.layout.summary_offset();
    // Locals: 0 start, 1 len, 2 page, 3 last page.
    let mut f = Function::new(vec![(2, ValType::I64)]);
    for i in [
        Instruction::LocalGet(1),
        Instruction::I64Eqz,
        Instruction::If(EncBlockType::Empty),
        Instruction::Return,
        Instruction::End,
        // page = min(start >> 12, tracked)
        Instruction::LocalGet(0),
        Instruction::I64Const(PAGE_SHIFT as i64),
        Instruction::I64ShrU,
        Instruction::LocalSet(2),
        // last = start + len - 1 wrapped ? tracked : (start + len - 1) >> 12
        Instruction::LocalGet(0),
        Instruction::LocalGet(1),
        Instruction::I64Add,
        Instruction::I64Const(1),
        Instruction::I64Sub,
        Instruction::LocalTee(3),
        Instruction::LocalGet(0),
        Instruction::I64LtU,
        Instruction::If(EncBlockType::Empty),
        Instruction::I64Const(tracked),
        Instruction::LocalSet(3),
        Instruction::Else,
        Instruction::LocalGet(3),
        Instruction::I64Const(PAGE_SHIFT as i64),
        Instruction::I64ShrU,
        Instruction::LocalSet(3),
        Instruction::End,
        Instruction::LocalGet(2),
        Instruction::I64Const(tracked),
        Instruction::I64GtU,
        Instruction::If(EncBlockType::Empty),
        Instruction::I64Const(tracked),
        Instruction::LocalSet(2),
        Instruction::End,
        Instruction::LocalGet(3),
        Instruction::I64Const(tracked),
        Instruction::I64GtU,
        Instruction::If(EncBlockType::Empty),
        Instruction::I64Const(tracked),
        Instruction::LocalSet(3),
        Instruction::End,
        Instruction::Loop(EncBlockType::Empty),
        Instruction::LocalGet(2),
        Instruction::I32WrapI64,
        Instruction::I32Const(1),
        Instruction::I32Store8(map_arg(d.memory, 0)),
        Instruction::LocalGet(2),
        Instruction::I64Const(SUMMARY_SHIFT as i64),
        Instruction::I64ShrU,
        Instruction::I32WrapI64,
        Instruction::I32Const(1),
        Instruction::I32Store8(map_arg(d.memory, summary)),
        Instruction::LocalGet(2),
        Instruction::I64Const(1),
        Instruction::I64Add,
        Instruction::LocalTee(2),
        Instruction::LocalGet(3),
        Instruction::I64LeU,
        Instruction::BrIf(0),
        Instruction::End,
        Instruction::End,
    ] {
        f.instruction(&i);
    }
    f
}

/// A store to the heap: the type of its value and its static offset.
fn heap_store(op: &Operator<'_>) -> Option<(ValType, u64)> {
    use Operator as O;
    let (ty, memarg) = match op {
        O::I32Store { memarg } | O::I32Store8 { memarg } | O::I32Store16 { memarg } => {
            (ValType::I32, memarg)
        }
        O::I64Store { memarg }
        | O::I64Store8 { memarg }
        | O::I64Store16 { memarg }
        | O::I64Store32 { memarg } => (ValType::I64, memarg),
        O::F32Store { memarg } => (ValType::F32, memarg),
        O::F64Store { memarg } => (ValType::F64, memarg),
        O::V128Store { memarg }
        | O::V128Store8Lane { memarg, .. }
        | O::V128Store16Lane { memarg, .. }
        | O::V128Store32Lane { memarg, .. }
        | O::V128Store64Lane { memarg, .. } => (ValType::V128, memarg),
        _ => return None,
    };
    (memarg.memory == 0).then_some((ty, memarg.offset))
}

/// A bulk operation writing the heap: the types of its three operands (destination, value or
/// source, length).
fn heap_bulk(op: &Operator<'_>, wasm64: bool) -> Option<[ValType; 3]> {
    let addr = if wasm64 { ValType::I64 } else { ValType::I32 };
    match op {
        Operator::MemoryFill { mem: 0 } => Some([addr, ValType::I32, addr]),
        Operator::MemoryCopy {
            dst_mem: 0,
            src_mem,
        } => {
            // A copy from another memory would have an address of that memory's type; the IC
            // allows one memory, so there is none.
            let _ = src_mem;
            Some([addr, addr, addr])
        }
        Operator::MemoryInit { mem: 0, .. } => Some([addr, ValType::I32, ValType::I32]),
        _ => None,
    }
}

/// Scratch locals the injected code of one function uses, appended to its locals.
struct Scratch {
    first: u32,
    /// How many locals of each type, in the order of [`SCRATCH_TYPES`].
    counts: [u32; 5],
}

const SCRATCH_TYPES: [ValType; 5] = [
    ValType::I32,
    ValType::I64,
    ValType::F32,
    ValType::F64,
    ValType::V128,
];

fn type_slot(ty: ValType) -> usize {
    SCRATCH_TYPES.iter().position(|t| *t == ty).unwrap_or(0)
}

impl Scratch {
    /// The `n`-th scratch local of type `ty` (which [`Self::need`] must have reserved).
    fn local(&self, ty: ValType, n: u32) -> u32 {
        let slot = type_slot(ty);
        self.first + self.counts[..slot].iter().sum::<u32>() + n
    }
    fn need(counts: &mut [u32; 5], ty: ValType, n: u32) {
        let slot = type_slot(ty);
        counts[slot] = counts[slot].max(n);
    }
}

/// Which scratch locals the injected code for `ops` needs (see [`emit_store_mark`],
/// [`emit_bulk_mark`], the profiler's depth local).
fn scratch_counts(ops: &[Operator<'_>], s: Special, wasm64: bool) -> [u32; 5] {
    let mut counts = [0u32; 5];
    if s.profile.is_some() {
        Scratch::need(&mut counts, ValType::I32, 1);
    }
    if s.dirty.is_none() {
        return counts;
    }
    // Profiling reserves i32 #0 for the depth; marking starts after it.
    let base = counts[0];
    for op in ops {
        if let Some((ty, _)) = heap_store(op) {
            // address, page (i32) [, page (i64) in wasm64], value
            if wasm64 {
                Scratch::need(&mut counts, ValType::I64, 2);
                Scratch::need(&mut counts, ValType::I32, base + 1);
                let n = if ty == ValType::I64 { 3 } else { 1 };
                Scratch::need(
                    &mut counts,
                    ty,
                    if ty == ValType::I32 { base + 2 } else { n },
                );
            } else {
                Scratch::need(&mut counts, ValType::I32, base + 2);
                let n = if ty == ValType::I32 { base + 3 } else { 1 };
                Scratch::need(&mut counts, ty, n);
            }
        } else if let Some(types) = heap_bulk(op, wasm64) {
            let mut per_type = [0u32; 5];
            for ty in types {
                per_type[type_slot(ty)] += 1;
            }
            for (slot, n) in per_type.into_iter().enumerate() {
                let n = if slot == 0 { base + n } else { n };
                Scratch::need(&mut counts, SCRATCH_TYPES[slot], n);
            }
        }
    }
    counts
}

/// Before a store: sets the map bytes of the page of the store's first byte. Stack before and
/// after: `[address, value]`.
fn emit_store_mark(
    f: &mut Function,
    d: DirtyHooks,
    x: &Scratch,
    base: u32,
    ty: ValType,
    offset: u64,
    wasm64: bool,
) {
    let summary = d.layout.summary_offset();
    let page = x.local(ValType::I32, base);
    if wasm64 {
        let value = match ty {
            ValType::I32 => x.local(ty, base + 1),
            ValType::I64 => x.local(ty, 2),
            _ => x.local(ty, 0),
        };
        let (addr, wide) = (x.local(ValType::I64, 0), x.local(ValType::I64, 1));
        let tracked = d.layout.tracked as i64;
        f.instruction(&Instruction::LocalSet(value));
        f.instruction(&Instruction::LocalTee(addr));
        if offset != 0 {
            f.instruction(&Instruction::I64Const(offset as i64));
            f.instruction(&Instruction::I64Add);
        }
        f.instruction(&Instruction::I64Const(PAGE_SHIFT as i64));
        f.instruction(&Instruction::I64ShrU);
        f.instruction(&Instruction::LocalTee(wide));
        f.instruction(&Instruction::I64Const(tracked));
        f.instruction(&Instruction::LocalGet(wide));
        f.instruction(&Instruction::I64Const(tracked));
        f.instruction(&Instruction::I64LtU);
        f.instruction(&Instruction::Select);
        f.instruction(&Instruction::I32WrapI64);
        f.instruction(&Instruction::LocalTee(page));
        f.instruction(&Instruction::I32Const(1));
        f.instruction(&Instruction::I32Store8(map_arg(d.memory, 0)));
        f.instruction(&Instruction::LocalGet(page));
        f.instruction(&Instruction::I32Const(SUMMARY_SHIFT as i32));
        f.instruction(&Instruction::I32ShrU);
        f.instruction(&Instruction::I32Const(1));
        f.instruction(&Instruction::I32Store8(map_arg(d.memory, summary)));
        f.instruction(&Instruction::LocalGet(addr));
        f.instruction(&Instruction::LocalGet(value));
    } else {
        let value = match ty {
            ValType::I32 => x.local(ty, base + 2),
            _ => x.local(ty, 0),
        };
        let addr = x.local(ValType::I32, base + 1);
        f.instruction(&Instruction::LocalSet(value));
        f.instruction(&Instruction::LocalTee(addr));
        // In wasm32 the page of `addr + offset` modulo 2^32 is below 2^20; when the sum wraps
        // the store traps anyway.
        if offset != 0 {
            f.instruction(&Instruction::I32Const(offset as u32 as i32));
            f.instruction(&Instruction::I32Add);
        }
        f.instruction(&Instruction::I32Const(PAGE_SHIFT as i32));
        f.instruction(&Instruction::I32ShrU);
        f.instruction(&Instruction::LocalTee(page));
        f.instruction(&Instruction::I32Const(1));
        f.instruction(&Instruction::I32Store8(map_arg(d.memory, 0)));
        f.instruction(&Instruction::LocalGet(page));
        f.instruction(&Instruction::I32Const(SUMMARY_SHIFT as i32));
        f.instruction(&Instruction::I32ShrU);
        f.instruction(&Instruction::I32Const(1));
        f.instruction(&Instruction::I32Store8(map_arg(d.memory, summary)));
        f.instruction(&Instruction::LocalGet(addr));
        f.instruction(&Instruction::LocalGet(value));
    }
}

/// Before a bulk operation (after its dynamic charge): marks the pages of its destination
/// range. Stack before and after: `[destination, value or source, length]`.
fn emit_bulk_mark(f: &mut Function, d: DirtyHooks, x: &Scratch, base: u32, types: [ValType; 3]) {
    let mut used = [0u32; 5];
    let locals: Vec<u32> = types
        .iter()
        .map(|&ty| {
            let slot = type_slot(ty);
            let n = used[slot] + if slot == 0 { base } else { 0 };
            used[slot] += 1;
            x.local(ty, n)
        })
        .collect();
    let extend = |f: &mut Function, ty: ValType| {
        if ty == ValType::I32 {
            f.instruction(&Instruction::I64ExtendI32U);
        }
    };
    f.instruction(&Instruction::LocalSet(locals[2]));
    f.instruction(&Instruction::LocalSet(locals[1]));
    f.instruction(&Instruction::LocalSet(locals[0]));
    f.instruction(&Instruction::LocalGet(locals[0]));
    extend(f, types[0]);
    f.instruction(&Instruction::LocalGet(locals[2]));
    extend(f, types[2]);
    f.instruction(&Instruction::Call(d.mark_range));
    for &l in &locals {
        f.instruction(&Instruction::LocalGet(l));
    }
}

/// What the body instrumentation needs to know about the module and the function.
struct BodyContext {
    special: Special,
    wasm64: bool,
    /// Index of the function in the original module.
    func_index: u32,
    /// Number of parameters of the function.
    params: u32,
    /// Number of imported functions in the original module.
    imported_funcs: u32,
}

fn instrument_body(
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
    let counts = scratch_counts(&ops, special, cx.wasm64);
    for (ty, n) in SCRATCH_TYPES.iter().zip(counts) {
        if n > 0 {
            locals.push((n, *ty));
        }
    }
    let scratch = Scratch {
        first: cx.params + declared,
        counts,
    };
    // i32 scratch #0 is the profiler's depth when profiling; marking uses the ones after it.
    let depth = scratch.local(ValType::I32, 0);
    let mark_base = u32::from(special.profile.is_some());
    let mut f = Function::new(locals);

    let points = injection_points(&ops, cx.wasm64);
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
        if let Some(d) = special.dirty {
            if let Some((ty, offset)) = heap_store(&op) {
                emit_store_mark(&mut f, d, &scratch, mark_base, ty, offset, cx.wasm64);
            } else if let Some(types) = heap_bulk(&op, cx.wasm64) {
                emit_bulk_mark(&mut f, d, &scratch, mark_base, types);
            }
        }
        let mut after_call = false;
        if let Some(p) = special.profile {
            match op {
                Operator::Call { function_index } => {
                    if function_index < cx.imported_funcs {
                        f.instruction(&Instruction::I32Const(function_index as i32));
                        f.instruction(&Instruction::Call(p.enter));
                        f.instruction(&Instruction::Drop);
                    }
                    after_call = true;
                }
                Operator::CallIndirect { .. } | Operator::CallRef { .. } => after_call = true,
                Operator::ReturnCall { .. }
                | Operator::ReturnCallIndirect { .. }
                | Operator::ReturnCallRef { .. } => {
                    f.instruction(&Instruction::LocalGet(depth));
                    f.instruction(&Instruction::Call(p.tail));
                    if let Operator::ReturnCall { function_index } = op
                        && function_index < cx.imported_funcs
                    {
                        f.instruction(&Instruction::I32Const(function_index as i32));
                        f.instruction(&Instruction::Call(p.enter));
                        f.instruction(&Instruction::Drop);
                    }
                }
                _ => {}
            }
        }
        f.instruction(&reencoder.instruction(op)?);
        if after_call && let Some(p) = special.profile {
            f.instruction(&Instruction::LocalGet(depth));
            f.instruction(&Instruction::Call(p.ret));
        }
    }
    Ok(f)
}

/// Facts gathered in a first pass over the module.
#[derive(Default)]
struct Scan {
    num_types: u32,
    /// Parameter count of every type (0 for non-function types).
    type_params: Vec<u32>,
    /// Type index of every defined function.
    func_types: Vec<u32>,
    num_func_imports: u32,
    num_defined_funcs: u32,
    num_globals: u32,
    mutable_globals: Vec<u32>,
    exported_globals: Vec<(u32, String)>,
    memory64: bool,
    num_memories: u32,
    num_tables: u32,
    start: Option<u32>,
    function_exports: Vec<String>,
    ic0_imports: Vec<String>,
    metadata: Vec<(String, Vec<u8>)>,
}

fn scan(
    wasm: &[u8],
    check_import: &dyn Fn(&str, &str) -> Result<(), String>,
) -> Result<Scan, InstrumentError> {
    let mut s = Scan::default();
    for payload in Parser::new(0).parse_all(wasm) {
        match payload? {
            Payload::Version {
                encoding: wasmparser::Encoding::Component,
                ..
            } => {
                return Err(InstrumentError::Unsupported(
                    "a component, not a core module".into(),
                ));
            }
            Payload::TypeSection(r) => {
                for group in r {
                    for ty in group?.types() {
                        s.num_types += 1;
                        let params = match &ty.composite_type.inner {
                            wasmparser::CompositeInnerType::Func(f) => f.params().len() as u32,
                            _ => 0,
                        };
                        s.type_params.push(params);
                    }
                }
            }
            Payload::ImportSection(r) => {
                for imp in r.into_imports() {
                    let imp = imp?;
                    match imp.ty {
                        TypeRef::Func(_) | TypeRef::FuncExact(_) => {
                            if let Err(hint) = check_import(imp.module, imp.name) {
                                return Err(InstrumentError::UnsupportedImport {
                                    module: imp.module.to_string(),
                                    name: imp.name.to_string(),
                                    hint,
                                });
                            }
                            s.ic0_imports.push(imp.name.to_string());
                            s.num_func_imports += 1;
                        }
                        _ => {
                            return Err(InstrumentError::UnsupportedImport {
                                module: imp.module.to_string(),
                                name: imp.name.to_string(),
                                hint: " (only ic0 functions can be imported)".into(),
                            });
                        }
                    }
                }
            }
            Payload::FunctionSection(r) => {
                s.num_defined_funcs = r.count();
                for ty in r {
                    s.func_types.push(ty?);
                }
            }
            Payload::TableSection(r) => s.num_tables = r.count(),
            Payload::MemorySection(r) => {
                for (i, m) in r.into_iter().enumerate() {
                    let m = m?;
                    if i == 0 {
                        s.memory64 = m.memory64;
                    }
                    s.num_memories += 1;
                }
            }
            Payload::GlobalSection(r) => {
                for (i, g) in r.into_iter().enumerate() {
                    if g?.ty.mutable {
                        s.mutable_globals.push(i as u32);
                    }
                    s.num_globals += 1;
                }
            }
            Payload::ExportSection(r) => {
                for e in r {
                    let e = e?;
                    match e.kind {
                        ExternalKind::Func | ExternalKind::FuncExact => {
                            s.function_exports.push(e.name.to_string())
                        }
                        ExternalKind::Global => {
                            s.exported_globals.push((e.index, e.name.to_string()))
                        }
                        _ => {}
                    }
                }
            }
            Payload::StartSection { func, .. } => s.start = Some(func),
            Payload::CustomSection(c) => {
                let name = c.name();
                if let Some(rest) = name
                    .strip_prefix("icp:public ")
                    .or_else(|| name.strip_prefix("icp:private "))
                {
                    s.metadata.push((rest.to_string(), c.data().to_vec()));
                }
            }
            _ => {}
        }
    }
    if s.num_memories > 1 {
        return Err(InstrumentError::Unsupported(format!(
            "{} memories (the IC allows one)",
            s.num_memories
        )));
    }
    if s.start.is_some() && s.function_exports.iter().any(|n| n == START_EXPORT) {
        return Err(InstrumentError::Unsupported(format!(
            "module has a start function and exports `{START_EXPORT}`"
        )));
    }
    Ok(s)
}

/// Instruments `wasm` for metering (no profiling hooks). `check_import(module, name)` accepts a
/// function import or returns a hint explaining the refusal; any non-function import is refused.
pub fn instrument(
    wasm: &[u8],
    check_import: &dyn Fn(&str, &str) -> Result<(), String>,
) -> Result<Instrumented, InstrumentError> {
    instrument_with(wasm, check_import, Options::default())
}

/// Instruments `wasm` with `options` (see [`instrument`]).
pub fn instrument_with(
    wasm: &[u8],
    check_import: &dyn Fn(&str, &str) -> Result<(), String>,
    options: Options,
) -> Result<Instrumented, InstrumentError> {
    let s = scan(wasm, check_import)?;
    let ooi_type = s.num_types;
    let helper_type = s.num_types + 1;
    let mark_type = s.num_types + 2;
    let enter_type = s.num_types + 3;
    let hook_type = s.num_types + 4;
    // Injected imports: out_of_instructions, then the profiler's three hooks.
    let shift = if options.profile { 4 } else { 1 };
    let first_helper = shift + s.num_func_imports + s.num_defined_funcs;
    let has_memory = s.num_memories > 0;
    let special = Special {
        counter_global: s.num_globals,
        out_of_instructions: 0,
        decrement_helper: first_helper,
        dirty: has_memory.then(|| DirtyHooks {
            memory: 1,
            mark_range: first_helper + 1,
            layout: DirtyMap::for_memory(s.memory64),
        }),
        profile: options.profile.then_some(ProfileHooks {
            enter: 1,
            ret: 2,
            tail: 3,
        }),
    };

    // Export names of mutable globals: existing export or a new persistent name.
    let mut mutable_global_names = Vec::new();
    let mut extra_global_exports = Vec::new();
    for &g in &s.mutable_globals {
        if let Some((_, name)) = s.exported_globals.iter().find(|(i, _)| *i == g) {
            mutable_global_names.push(name.clone());
        } else {
            let name = format!("__persistent_mutable_global_{g}");
            mutable_global_names.push(name.clone());
            extra_global_exports.push((g, name));
        }
    }

    let mut out = Module::new();
    let mut re = Shift(shift);
    let mut wrote_types = false;
    let mut wrote_imports = false;
    let mut wrote_functions = false;
    let mut wrote_globals = false;
    let mut wrote_exports = false;
    let mut wrote_code = false;

    let types_section = |section: Option<wasmparser::TypeSectionReader<'_>>,
                         re: &mut Shift|
     -> Result<TypeSection, InstrumentError> {
        let mut types = TypeSection::new();
        if let Some(r) = section {
            re.parse_type_section(&mut types, r)?;
        }
        types.ty().function([], []);
        types.ty().function([ValType::I64], [ValType::I64]);
        types.ty().function([ValType::I64, ValType::I64], []);
        types.ty().function([ValType::I32], [ValType::I32]);
        types.ty().function([ValType::I32], []);
        Ok(types)
    };
    let imports_section = |section: Option<wasmparser::ImportSectionReader<'_>>,
                           re: &mut Shift|
     -> Result<ImportSection, InstrumentError> {
        let mut imports = ImportSection::new();
        imports.import(
            INJECTED_MODULE,
            OUT_OF_INSTRUCTIONS,
            wasm_encoder::EntityType::Function(ooi_type),
        );
        if options.profile {
            for (name, ty) in [
                (PROFILE_ENTER, enter_type),
                (PROFILE_RETURN, hook_type),
                (PROFILE_TAIL, hook_type),
            ] {
                imports.import(
                    INJECTED_MODULE,
                    name,
                    wasm_encoder::EntityType::Function(ty),
                );
            }
        }
        if let Some(r) = section {
            re.parse_import_section(&mut imports, r)?;
        }
        Ok(imports)
    };
    let functions_section = |section: Option<wasmparser::FunctionSectionReader<'_>>,
                             re: &mut Shift|
     -> Result<FunctionSection, InstrumentError> {
        let mut functions = FunctionSection::new();
        if let Some(r) = section {
            re.parse_function_section(&mut functions, r)?;
        }
        functions.function(helper_type);
        if has_memory {
            functions.function(mark_type);
        }
        Ok(functions)
    };
    let globals_section = |section: Option<wasmparser::GlobalSectionReader<'_>>,
                           re: &mut Shift|
     -> Result<GlobalSection, InstrumentError> {
        let mut globals = GlobalSection::new();
        if let Some(r) = section {
            re.parse_global_section(&mut globals, r)?;
        }
        globals.global(
            GlobalType {
                val_type: ValType::I64,
                mutable: true,
                shared: false,
            },
            &ConstExpr::i64_const(0),
        );
        Ok(globals)
    };
    let exports_section = |section: Option<wasmparser::ExportSectionReader<'_>>,
                           re: &mut Shift|
     -> Result<ExportSection, InstrumentError> {
        let mut exports = ExportSection::new();
        let mut memory_exported = false;
        let mut table_exported = false;
        if let Some(r) = section {
            for e in r {
                let e = e?;
                let mut name = Cow::Borrowed(e.name);
                match e.kind {
                    ExternalKind::Memory if e.index == 0 && !memory_exported => {
                        memory_exported = true;
                        name = Cow::Borrowed(MEMORY_EXPORT);
                    }
                    ExternalKind::Table if e.index == 0 && !table_exported => {
                        table_exported = true;
                        name = Cow::Borrowed(TABLE_EXPORT);
                    }
                    _ => {}
                }
                let kind = re.export_kind(e.kind)?;
                let index = re.external_index(e.kind, e.index)?;
                exports.export(&name, kind, index);
            }
        }
        if !memory_exported && s.num_memories > 0 {
            exports.export(MEMORY_EXPORT, ExportKind::Memory, 0);
        }
        if !table_exported && s.num_tables > 0 {
            exports.export(TABLE_EXPORT, ExportKind::Table, 0);
        }
        for (g, name) in &extra_global_exports {
            exports.export(name, ExportKind::Global, *g);
        }
        if let Some(start) = s.start {
            exports.export(START_EXPORT, ExportKind::Func, start + shift);
        }
        if let Some(d) = special.dirty {
            exports.export(DIRTY_MAP_EXPORT, ExportKind::Memory, d.memory);
        }
        exports.export(COUNTER_EXPORT, ExportKind::Global, special.counter_global);
        Ok(exports)
    };

    // Section order: type, import, function, table, memory, tag, global, export, start, element,
    // datacount, code, data. Missing sections we must add are written just before the first
    // section that has to follow them.
    macro_rules! ensure {
        ($flag:ident, $make:expr) => {
            if !$flag {
                $flag = true;
                out.section(&$make?);
            }
        };
    }
    let mut code = CodeSection::new();
    let mut defined = 0u32;
    for payload in Parser::new(0).parse_all(wasm) {
        let payload = payload?;
        // Insert sections the input lacks, respecting the order.
        let order = match &payload {
            Payload::TypeSection(_) => 1,
            Payload::ImportSection(_) => 2,
            Payload::FunctionSection(_) => 3,
            Payload::TableSection(_) => 4,
            Payload::MemorySection(_) => 5,
            Payload::TagSection(_) => 6,
            Payload::GlobalSection(_) => 7,
            Payload::ExportSection(_) => 8,
            Payload::StartSection { .. } => 9,
            Payload::ElementSection(_) => 10,
            Payload::DataCountSection { .. } => 11,
            Payload::CodeSectionStart { .. } | Payload::CodeSectionEntry(_) => 12,
            Payload::DataSection(_) => 13,
            Payload::End(_) => 14,
            _ => 0,
        };
        if order > 1 {
            ensure!(wrote_types, types_section(None, &mut re));
        }
        if order > 2 {
            ensure!(wrote_imports, imports_section(None, &mut re));
        }
        if order > 3 {
            ensure!(wrote_functions, functions_section(None, &mut re));
        }
        if order > 7 {
            ensure!(wrote_globals, globals_section(None, &mut re));
        }
        if order > 8 {
            ensure!(wrote_exports, exports_section(None, &mut re));
        }
        if order > 12 && !wrote_code {
            wrote_code = true;
            code.function(&decrement_helper(special));
            if let Some(d) = special.dirty {
                code.function(&mark_range_helper(d));
            }
            out.section(&code);
        }
        match payload {
            Payload::Version { .. } | Payload::End(_) | Payload::CodeSectionStart { .. } => {}
            Payload::TypeSection(r) => {
                wrote_types = true;
                out.section(&types_section(Some(r), &mut re)?);
            }
            Payload::ImportSection(r) => {
                wrote_imports = true;
                out.section(&imports_section(Some(r), &mut re)?);
            }
            Payload::FunctionSection(r) => {
                wrote_functions = true;
                out.section(&functions_section(Some(r), &mut re)?);
            }
            Payload::GlobalSection(r) => {
                wrote_globals = true;
                out.section(&globals_section(Some(r), &mut re)?);
            }
            Payload::ExportSection(r) => {
                wrote_exports = true;
                out.section(&exports_section(Some(r), &mut re)?);
            }
            Payload::StartSection { .. } => {}
            Payload::TableSection(r) => {
                let mut t = wasm_encoder::TableSection::new();
                re.parse_table_section(&mut t, r)?;
                out.section(&t);
            }
            Payload::MemorySection(r) => {
                let mut m = wasm_encoder::MemorySection::new();
                re.parse_memory_section(&mut m, r)?;
                if let Some(d) = special.dirty {
                    let pages = d.layout.wasm_pages();
                    m.memory(wasm_encoder::MemoryType {
                        minimum: pages,
                        maximum: Some(pages),
                        memory64: false,
                        shared: false,
                        page_size_log2: None,
                    });
                }
                out.section(&m);
            }
            Payload::TagSection(r) => {
                let mut t = wasm_encoder::TagSection::new();
                re.parse_tag_section(&mut t, r)?;
                out.section(&t);
            }
            Payload::ElementSection(r) => {
                let mut e = wasm_encoder::ElementSection::new();
                re.parse_element_section(&mut e, r)?;
                out.section(&e);
            }
            Payload::DataCountSection { count, .. } => {
                out.section(&wasm_encoder::DataCountSection { count });
            }
            Payload::CodeSectionEntry(body) => {
                let params = s
                    .func_types
                    .get(defined as usize)
                    .and_then(|&t| s.type_params.get(t as usize))
                    .copied()
                    .unwrap_or(0);
                let cx = BodyContext {
                    special,
                    wasm64: s.memory64,
                    func_index: s.num_func_imports + defined,
                    params,
                    imported_funcs: s.num_func_imports,
                };
                defined += 1;
                code.function(&instrument_body(body, &cx, &mut re)?);
            }
            Payload::DataSection(r) => {
                let mut d = wasm_encoder::DataSection::new();
                re.parse_data_section(&mut d, r)?;
                out.section(&d);
            }
            Payload::CustomSection(c) => {
                re.parse_custom_section(&mut out, c)?;
            }
            other => {
                return Err(InstrumentError::Unsupported(format!(
                    "unexpected section {other:?}"
                )));
            }
        }
    }
    let wasm_out = out.finish();
    Ok(Instrumented {
        wasm: wasm_out,
        info: ModuleInfo {
            memory64: s.memory64,
            has_memory: s.num_memories > 0,
            has_table: s.num_tables > 0,
            has_start: s.start.is_some(),
            function_exports: s.function_exports,
            ic0_imports: s.ic0_imports,
            mutable_globals: mutable_global_names,
            metadata: s.metadata,
        },
    })
}

#[cfg(test)]
mod tests;
