//! The written-page map's tracking (`crate::heap`): before every store to the heap the injected
//! code sets the map byte of the page of the store's first byte (and its summary byte), and
//! before `memory.fill/copy/init` an injected helper marks every page of the destination range.
//! The code works on scratch locals appended to the function's locals ([`Scratch`]).

use wasm_encoder::{BlockType as EncBlockType, Function, Instruction, ValType};
use wasmparser::Operator;

use crate::heap::{DirtyMap, PAGE_SHIFT, SUMMARY_SHIFT};

/// The written-page map as the injected code sees it.
#[derive(Debug, Clone, Copy)]
pub(super) struct DirtyHooks {
    /// Memory index of the map.
    pub(super) memory: u32,
    /// Function index of [`mark_range_helper`].
    pub(super) mark_range: u32,
    pub(super) layout: DirtyMap,
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
pub(super) fn mark_range_helper(d: DirtyHooks) -> Function {
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
pub(super) fn heap_store(op: &Operator<'_>) -> Option<(ValType, u64)> {
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
pub(super) fn heap_bulk(op: &Operator<'_>, wasm64: bool) -> Option<[ValType; 3]> {
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
pub(super) struct Scratch {
    first: u32,
    /// How many locals of each type, in the order of [`SCRATCH_TYPES`].
    counts: [u32; 5],
}

/// The types of the scratch locals, in the order they are appended.
pub(super) const SCRATCH_TYPES: [ValType; 5] = [
    ValType::I32,
    ValType::I64,
    ValType::F32,
    ValType::F64,
    ValType::V128,
];

fn type_slot(ty: ValType) -> usize {
    SCRATCH_TYPES.iter().position(|t| *t == ty).unwrap_or(0)
}

/// One scratch local: the `n`-th of type `ty`.
#[derive(Debug, Clone, Copy)]
pub(super) struct Slot {
    ty: ValType,
    n: u32,
}

impl Scratch {
    /// Scratch locals numbered from `first` (the function's parameters and declared locals
    /// come before), `counts` of each type of [`SCRATCH_TYPES`] (see [`scratch_counts`]).
    pub(super) fn new(first: u32, counts: [u32; 5]) -> Self {
        Scratch { first, counts }
    }

    /// The `n`-th scratch local of type `ty` (which [`scratch_counts`] must have reserved).
    pub(super) fn local(&self, ty: ValType, n: u32) -> u32 {
        let slot = type_slot(ty);
        self.first + self.counts[..slot].iter().sum::<u32>() + n
    }

    pub(super) fn slot(&self, s: Slot) -> u32 {
        self.local(s.ty, s.n)
    }
}

/// Hands out the scratch locals of one injected sequence in order: each takes the next local of
/// its type. The i32 locals start after the `base` ones the profiler reserves.
pub(super) struct Taken([u32; 5]);

impl Taken {
    pub(super) fn after(base: u32) -> Self {
        Taken([base, 0, 0, 0, 0])
    }

    pub(super) fn take(&mut self, ty: ValType) -> Slot {
        let slot = type_slot(ty);
        let n = self.0[slot];
        self.0[slot] += 1;
        Slot { ty, n }
    }
}

/// The scratch locals of a store's marking.
struct StoreLocals {
    /// The page index (i32).
    page: Slot,
    /// The store's address (of the address type).
    addr: Slot,
    /// In wasm64, the page index before it is bounded by the map (i64).
    wide: Option<Slot>,
    /// The stored value (of the store's value type).
    value: Slot,
}

fn store_locals(taken: &mut Taken, ty: ValType, address: Address) -> StoreLocals {
    let page = taken.take(ValType::I32);
    let addr = taken.take(address.ty());
    let wide = address.wasm64.then(|| taken.take(ValType::I64));
    let value = taken.take(ty);
    StoreLocals {
        page,
        addr,
        wide,
        value,
    }
}

/// The scratch locals of a bulk operation's marking: one per operand.
pub(super) fn bulk_locals(taken: &mut Taken, types: [ValType; 3]) -> [Slot; 3] {
    types.map(|ty| taken.take(ty))
}

/// Which scratch locals the injected code for `ops` needs (see [`emit_store_mark`],
/// [`emit_bulk_mark`], the profiler's depth local when `profile`; the marking's when the module
/// has a map, `dirty`; the tracker's checks when it has a tracker map, `pages`,
/// [`super::pages`]): the most any one sequence takes of each type.
pub(super) fn scratch_counts(
    ops: &[Operator<'_>],
    profile: bool,
    dirty: bool,
    pages: bool,
    wasm64: bool,
) -> [u32; 5] {
    // Profiling reserves i32 #0 for the depth; marking starts after it.
    let base = u32::from(profile);
    let mut counts = [base, 0, 0, 0, 0];
    let address = Address { wasm64 };
    for op in ops {
        let mut taken = Taken::after(base);
        if pages {
            if super::pages::heap_access(op).is_some() {
                if let Some(ty) = super::pages::operand_above_address(op) {
                    taken.take(ty);
                }
                check_locals(&mut taken, wasm64);
            } else if let Some(types) = heap_bulk(op, wasm64) {
                bulk_locals(&mut taken, types);
            }
        }
        if dirty {
            if let Some((ty, _)) = heap_store(op) {
                store_locals(&mut taken, ty, address);
            } else if let Some(types) = heap_bulk(op, wasm64) {
                bulk_locals(&mut taken, types);
            }
        }
        for (count, used) in counts.iter_mut().zip(taken.0) {
            *count = (*count).max(used);
        }
    }
    counts
}

/// The scratch locals of a tracker check ([`super::pages::emit_access_check`]): the address,
/// the effective address, the page index before it is bounded (wasm64) and the page index.
pub(super) fn check_locals(taken: &mut Taken, wasm64: bool) -> [Slot; 4] {
    let address = Address { wasm64 };
    [
        taken.take(address.ty()),
        taken.take(address.ty()),
        taken.take(ValType::I64),
        taken.take(ValType::I32),
    ]
}

/// The heap's address type: i32 in wasm32, i64 in wasm64.
#[derive(Debug, Clone, Copy)]
struct Address {
    wasm64: bool,
}

impl Address {
    fn ty(self) -> ValType {
        if self.wasm64 {
            ValType::I64
        } else {
            ValType::I32
        }
    }

    fn constant(self, value: u64) -> Instruction<'static> {
        if self.wasm64 {
            Instruction::I64Const(value as i64)
        } else {
            Instruction::I32Const(value as u32 as i32)
        }
    }

    fn add(self) -> Instruction<'static> {
        if self.wasm64 {
            Instruction::I64Add
        } else {
            Instruction::I32Add
        }
    }

    fn shr_u(self) -> Instruction<'static> {
        if self.wasm64 {
            Instruction::I64ShrU
        } else {
            Instruction::I32ShrU
        }
    }
}

/// Before a store of any width (`i32`/`i64`/`f32`/`f64`/`v128`, 8 to 128 bits), in wasm32 or
/// wasm64: sets the map bytes of the page of the store's first byte. Stack before and after:
/// `[address, value]`.
pub(super) fn emit_store_mark(
    f: &mut Function,
    d: DirtyHooks,
    x: &Scratch,
    taken: &mut Taken,
    ty: ValType,
    offset: u64,
    wasm64: bool,
) {
    let address = Address { wasm64 };
    let locals = store_locals(taken, ty, address);
    let (page, addr, value) = (
        x.slot(locals.page),
        x.slot(locals.addr),
        x.slot(locals.value),
    );
    f.instruction(&Instruction::LocalSet(value));
    f.instruction(&Instruction::LocalTee(addr));
    // In wasm32 the page of `addr + offset` modulo 2^32 is below 2^20; when the sum wraps the
    // store traps anyway.
    if offset != 0 {
        f.instruction(&address.constant(offset));
        f.instruction(&address.add());
    }
    f.instruction(&address.constant(u64::from(PAGE_SHIFT)));
    f.instruction(&address.shr_u());
    if let Some(wide) = locals.wide {
        // Pages at or beyond `tracked` mark the overflow entry.
        let wide = x.slot(wide);
        let tracked = d.layout.tracked as i64;
        f.instruction(&Instruction::LocalTee(wide));
        f.instruction(&Instruction::I64Const(tracked));
        f.instruction(&Instruction::LocalGet(wide));
        f.instruction(&Instruction::I64Const(tracked));
        f.instruction(&Instruction::I64LtU);
        f.instruction(&Instruction::Select);
        f.instruction(&Instruction::I32WrapI64);
    }
    f.instruction(&Instruction::LocalTee(page));
    f.instruction(&Instruction::I32Const(1));
    f.instruction(&Instruction::I32Store8(map_arg(d.memory, 0)));
    f.instruction(&Instruction::LocalGet(page));
    f.instruction(&Instruction::I32Const(SUMMARY_SHIFT as i32));
    f.instruction(&Instruction::I32ShrU);
    f.instruction(&Instruction::I32Const(1));
    f.instruction(&Instruction::I32Store8(map_arg(
        d.memory,
        d.layout.summary_offset(),
    )));
    f.instruction(&Instruction::LocalGet(addr));
    f.instruction(&Instruction::LocalGet(value));
}

/// Before a bulk operation (after its dynamic charge): marks the pages of its destination
/// range. Stack before and after: `[destination, value or source, length]`.
pub(super) fn emit_bulk_mark(
    f: &mut Function,
    d: DirtyHooks,
    x: &Scratch,
    taken: &mut Taken,
    types: [ValType; 3],
) {
    let locals = bulk_locals(taken, types).map(|s| x.slot(s));
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
