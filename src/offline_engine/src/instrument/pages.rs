//! The deterministic memory tracker's heap side ([`crate::tracker`]), injected in profiles that
//! have the tracker: before every load and store of the heap a check of the state of its Wasm
//! page in the tracker map, and an unmetered helper that charges and records the page when the
//! state falls short; before `memory.fill/copy/init` a call of the helper for their ranges.
//!
//! The check of an access of `size` bytes at `addr + offset` (the address stays on the stack;
//! `need` is 1 for a read, 2 for a write; `pair` is the lower of the page's state and the next
//! page's):
//!
//! ```text
//! page = (addr + offset) >> 16
//! if size == 1: if state[page] < need: touch(addr, offset, size, write)
//! else if pair[page] < need:
//!     if state[page] < need || (addr + offset) % 65536 > 65536 - size:
//!         touch(addr, offset, size, write)
//! ```
//!
//! A check that an earlier check covers on every path is left out ([`super::redundant`]).
//!
//! `touch` (the helper, [`touch_helper`]) does what [`TrackerMap::touch`] does on the host:
//! nothing for an access beyond the heap (it traps), else for each Wasm page of the range the
//! [`crate::tracker`] transition, the counter charged for each event. It never checks the
//! counter: like the replica's fault handler, it charges, and the next check (function entry,
//! loop header, System API call) traps when the limit is passed.

use wasm_encoder::{BlockType as EncBlockType, Function, Instruction, MemArg, ValType};
use wasmparser::Operator;

use crate::tracker::{ACCESSED, TrackerMap, UNTOUCHED, WASM_PAGE_SHIFT, WRITTEN};

/// The tracker map and helpers as the injected code sees them.
#[derive(Debug, Clone, Copy)]
pub(super) struct PageHooks {
    /// Memory index of the tracker map.
    pub(super) memory: u32,
    /// Function index of [`touch_helper`].
    pub(super) touch: u32,
    /// Function index of [`touch_copy_helper`].
    pub(super) touch_copy: u32,
    pub(super) layout: TrackerMap,
    /// Instructions per tracker event of one Wasm page.
    pub(super) charge: u64,
}

/// One heap access: static offset, size in bytes, and whether it writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Access {
    pub(super) offset: u64,
    pub(super) size: u64,
    pub(super) write: bool,
}

/// The heap access `op` makes, if it loads from or stores to memory 0.
pub(super) fn heap_access(op: &Operator<'_>) -> Option<Access> {
    use Operator as O;
    let (memarg, size, write) = match op {
        O::I32Load8S { memarg }
        | O::I32Load8U { memarg }
        | O::I64Load8S { memarg }
        | O::I64Load8U { memarg }
        | O::V128Load8Splat { memarg }
        | O::V128Load8Lane { memarg, .. } => (memarg, 1, false),
        O::I32Load16S { memarg }
        | O::I32Load16U { memarg }
        | O::I64Load16S { memarg }
        | O::I64Load16U { memarg }
        | O::V128Load16Splat { memarg }
        | O::V128Load16Lane { memarg, .. } => (memarg, 2, false),
        O::I32Load { memarg }
        | O::F32Load { memarg }
        | O::I64Load32S { memarg }
        | O::I64Load32U { memarg }
        | O::V128Load32Splat { memarg }
        | O::V128Load32Zero { memarg }
        | O::V128Load32Lane { memarg, .. } => (memarg, 4, false),
        O::I64Load { memarg }
        | O::F64Load { memarg }
        | O::V128Load8x8S { memarg }
        | O::V128Load8x8U { memarg }
        | O::V128Load16x4S { memarg }
        | O::V128Load16x4U { memarg }
        | O::V128Load32x2S { memarg }
        | O::V128Load32x2U { memarg }
        | O::V128Load64Splat { memarg }
        | O::V128Load64Zero { memarg }
        | O::V128Load64Lane { memarg, .. } => (memarg, 8, false),
        O::V128Load { memarg } => (memarg, 16, false),
        O::I32Store8 { memarg } | O::I64Store8 { memarg } | O::V128Store8Lane { memarg, .. } => {
            (memarg, 1, true)
        }
        O::I32Store16 { memarg } | O::I64Store16 { memarg } | O::V128Store16Lane { memarg, .. } => {
            (memarg, 2, true)
        }
        O::I32Store { memarg }
        | O::F32Store { memarg }
        | O::I64Store32 { memarg }
        | O::V128Store32Lane { memarg, .. } => (memarg, 4, true),
        O::I64Store { memarg } | O::F64Store { memarg } | O::V128Store64Lane { memarg, .. } => {
            (memarg, 8, true)
        }
        O::V128Store { memarg } => (memarg, 16, true),
        _ => return None,
    };
    (memarg.memory == 0).then_some(Access {
        offset: memarg.offset,
        size,
        write,
    })
}

/// The operand above the address on the stack of a heap access, which waits in a local while
/// the address is checked: a store's value, or the vector of a `v128.loadN_lane`.
pub(super) fn operand_above_address(op: &Operator<'_>) -> Option<ValType> {
    match op {
        Operator::V128Load8Lane { .. }
        | Operator::V128Load16Lane { .. }
        | Operator::V128Load32Lane { .. }
        | Operator::V128Load64Lane { .. } => Some(ValType::V128),
        _ => super::dirty::heap_store(op).map(|(ty, _)| ty),
    }
}

fn map_arg(memory: u32, offset: u64) -> MemArg {
    MemArg {
        offset,
        align: 0,
        memory_index: memory,
    }
}

/// The scratch locals of an access check: the address and the effective address (of the
/// address type), in wasm64 the page index before it is bounded by the map (i64), and the
/// page index (i32).
#[derive(Debug, Clone, Copy)]
pub(super) struct CheckLocals {
    pub(super) addr: u32,
    pub(super) effective: u32,
    pub(super) wide_page: u32,
    pub(super) page: u32,
}

/// Pushes `i32.eqz` (a read needs the page accessed) or `< WRITTEN` (a write needs it written):
/// true when the state on the stack falls short.
fn short_of(f: &mut Function, write: bool) {
    if write {
        f.instruction(&Instruction::I32Const(WRITTEN as i32));
        f.instruction(&Instruction::I32LtU);
    } else {
        f.instruction(&Instruction::I32Eqz);
    }
}

/// Emits the check of `access` (stack before and after: `[address]`). An access of one byte
/// compares the state of its page. A wider one first compares the page's pair state (the lower
/// of its state and the next page's): when that suffices, so does every page the access can
/// reach; when not, the page's own state and whether the access reaches into the next page.
///
/// In wasm32 the effective address is computed modulo 2^32: when `addr + offset` wraps, the
/// access traps for its bounds, and whatever the fast path reads the helper (which gets
/// `addr` and `offset` apart) charges nothing.
pub(super) fn emit_access_check(
    f: &mut Function,
    h: PageHooks,
    l: CheckLocals,
    access: Access,
    wasm64: bool,
) {
    let Access {
        offset,
        size,
        write,
    } = access;
    f.instruction(&Instruction::LocalTee(l.addr));
    if wasm64 {
        if offset != 0 {
            f.instruction(&Instruction::I64Const(offset as i64));
            f.instruction(&Instruction::I64Add);
        }
        f.instruction(&Instruction::LocalTee(l.effective));
        f.instruction(&Instruction::I64Const(WASM_PAGE_SHIFT as i64));
        f.instruction(&Instruction::I64ShrU);
        if let Some(overflow) = h.layout.overflow {
            let overflow = overflow as i64;
            f.instruction(&Instruction::LocalTee(l.wide_page));
            f.instruction(&Instruction::I64Const(overflow));
            f.instruction(&Instruction::LocalGet(l.wide_page));
            f.instruction(&Instruction::I64Const(overflow));
            f.instruction(&Instruction::I64LtU);
            f.instruction(&Instruction::Select);
        }
        f.instruction(&Instruction::I32WrapI64);
    } else {
        if offset != 0 {
            f.instruction(&Instruction::I32Const(offset as u32 as i32));
            f.instruction(&Instruction::I32Add);
        }
        f.instruction(&Instruction::LocalTee(l.effective));
        f.instruction(&Instruction::I32Const(WASM_PAGE_SHIFT as i32));
        f.instruction(&Instruction::I32ShrU);
    }
    let call = |f: &mut Function| {
        f.instruction(&Instruction::If(EncBlockType::Empty));
        f.instruction(&Instruction::LocalGet(l.addr));
        if !wasm64 {
            f.instruction(&Instruction::I64ExtendI32U);
        }
        f.instruction(&Instruction::I64Const(offset as i64));
        f.instruction(&Instruction::I64Const(size as i64));
        f.instruction(&Instruction::I32Const(i32::from(write)));
        f.instruction(&Instruction::Call(h.touch));
        f.instruction(&Instruction::End);
    };
    if size == 1 {
        f.instruction(&Instruction::I32Load8U(map_arg(h.memory, 0)));
        short_of(f, write);
        call(f);
    } else {
        f.instruction(&Instruction::LocalTee(l.page));
        f.instruction(&Instruction::I32Load8U(map_arg(
            h.memory,
            h.layout.pair_offset(),
        )));
        short_of(f, write);
        f.instruction(&Instruction::If(EncBlockType::Empty));
        f.instruction(&Instruction::LocalGet(l.page));
        f.instruction(&Instruction::I32Load8U(map_arg(h.memory, 0)));
        short_of(f, write);
        // The access reaches into the next Wasm page.
        f.instruction(&Instruction::LocalGet(l.effective));
        if wasm64 {
            f.instruction(&Instruction::I32WrapI64);
        }
        f.instruction(&Instruction::I32Const(0xFFFF));
        f.instruction(&Instruction::I32And);
        f.instruction(&Instruction::I32Const((0x1_0000 - size) as i32));
        f.instruction(&Instruction::I32GtU);
        f.instruction(&Instruction::I32Or);
        call(f);
        f.instruction(&Instruction::End);
    }
    f.instruction(&Instruction::LocalGet(l.addr));
}

/// The bulk operations: which helper their stashed operands (destination, value or source,
/// length; `types` as [`super::dirty::heap_bulk`] gives them) go to. A range of at most one
/// Wasm page lies within its first page and the next: when their pair states suffice (the
/// destination's for a write, the source's for a read), the helper is not called.
pub(super) fn emit_bulk_touch(
    f: &mut Function,
    h: PageHooks,
    op: &Operator<'_>,
    locals: [u32; 3],
    types: [ValType; 3],
) {
    let get = |f: &mut Function, i: usize| {
        f.instruction(&Instruction::LocalGet(locals[i]));
        if types[i] == ValType::I32 {
            f.instruction(&Instruction::I64ExtendI32U);
        }
    };
    // The pair state of the page of operand `i` (an address), as i32.
    let pair = |f: &mut Function, i: usize| {
        let page = |f: &mut Function| {
            get(f, i);
            f.instruction(&Instruction::I64Const(WASM_PAGE_SHIFT as i64));
            f.instruction(&Instruction::I64ShrU);
        };
        page(f);
        if let Some(overflow) = h.layout.overflow {
            f.instruction(&Instruction::I64Const(overflow as i64));
            page(f);
            f.instruction(&Instruction::I64Const(overflow as i64));
            f.instruction(&Instruction::I64LtU);
            f.instruction(&Instruction::Select);
        }
        f.instruction(&Instruction::I32WrapI64);
        f.instruction(&Instruction::I32Load8U(map_arg(
            h.memory,
            h.layout.pair_offset(),
        )));
    };
    let copy = matches!(op, Operator::MemoryCopy { .. });
    // Skip the helper when len <= 64 KiB and the pages are known to suffice.
    get(f, 2);
    f.instruction(&Instruction::I64Const(1 << WASM_PAGE_SHIFT));
    f.instruction(&Instruction::I64LeU);
    pair(f, 0);
    f.instruction(&Instruction::I32Const(WRITTEN as i32));
    f.instruction(&Instruction::I32GeU);
    f.instruction(&Instruction::I32And);
    if copy {
        pair(f, 1);
        f.instruction(&Instruction::I32Const(UNTOUCHED as i32));
        f.instruction(&Instruction::I32Ne);
        f.instruction(&Instruction::I32And);
    }
    f.instruction(&Instruction::I32Eqz);
    f.instruction(&Instruction::If(EncBlockType::Empty));
    if copy {
        get(f, 0);
        get(f, 1);
        get(f, 2);
        f.instruction(&Instruction::Call(h.touch_copy));
    } else {
        get(f, 0);
        f.instruction(&Instruction::I64Const(0));
        get(f, 2);
        f.instruction(&Instruction::I32Const(1));
        f.instruction(&Instruction::Call(h.touch));
    }
    f.instruction(&Instruction::End);
}

/// Pushes the heap's size in bytes (i64).
fn heap_bytes(f: &mut Function, wasm64: bool) {
    f.instruction(&Instruction::MemorySize(0));
    if !wasm64 {
        f.instruction(&Instruction::I64ExtendI32U);
    }
    f.instruction(&Instruction::I64Const(WASM_PAGE_SHIFT as i64));
    f.instruction(&Instruction::I64Shl);
}

/// Clamps the i64 page index on the stack to the map (wasm64), using `tmp`.
fn clamp(f: &mut Function, layout: TrackerMap, tmp: u32) {
    if let Some(overflow) = layout.overflow {
        let overflow = overflow as i64;
        f.instruction(&Instruction::LocalTee(tmp));
        f.instruction(&Instruction::I64Const(overflow));
        f.instruction(&Instruction::LocalGet(tmp));
        f.instruction(&Instruction::I64Const(overflow));
        f.instruction(&Instruction::I64LtU);
        f.instruction(&Instruction::Select);
    }
}

/// The unmetered helper `(param $addr i64) (param $offset i64) (param $len i64) (param $write
/// i32)`: applies an access of `len` bytes at `addr + offset` to the tracker map as
/// [`TrackerMap::touch`] does, subtracting `charge` from the counter global `counter` per event.
pub(super) fn touch_helper(h: PageHooks, counter: u32, wasm64: bool) -> Function {
    const ADDR: u32 = 0;
    const OFFSET: u32 = 1;
    const LEN: u32 = 2;
    const WRITE: u32 = 3;
    const EA: u32 = 4;
    const END: u32 = 5;
    const PAGE: u32 = 6;
    const LAST: u32 = 7;
    const STATE: u32 = 8;
    const IGNORE: u32 = 9;
    const COUNT: u32 = 10;
    const NEXT: u32 = 11;
    const PREVIOUS: u32 = 12;
    let layout = h.layout;
    let pairs = layout.pair_offset();
    let mut f = Function::new(vec![(4, ValType::I64), (5, ValType::I32)]);
    let ret_if = |f: &mut Function| {
        f.instruction(&Instruction::If(EncBlockType::Empty));
        f.instruction(&Instruction::Return);
        f.instruction(&Instruction::End);
    };
    // Nothing for an empty range, a range that wraps around, or one beyond the heap.
    f.instruction(&Instruction::LocalGet(LEN));
    f.instruction(&Instruction::I64Eqz);
    ret_if(&mut f);
    for i in [
        Instruction::LocalGet(ADDR),
        Instruction::LocalGet(OFFSET),
        Instruction::I64Add,
        Instruction::LocalTee(EA),
        Instruction::LocalGet(ADDR),
        Instruction::I64LtU,
    ] {
        f.instruction(&i);
    }
    ret_if(&mut f);
    for i in [
        Instruction::LocalGet(EA),
        Instruction::LocalGet(LEN),
        Instruction::I64Add,
        Instruction::LocalTee(END),
        Instruction::LocalGet(EA),
        Instruction::I64LtU,
    ] {
        f.instruction(&i);
    }
    ret_if(&mut f);
    f.instruction(&Instruction::LocalGet(END));
    heap_bytes(&mut f, wasm64);
    f.instruction(&Instruction::I64GtU);
    ret_if(&mut f);
    // The first and last pages.
    f.instruction(&Instruction::LocalGet(EA));
    f.instruction(&Instruction::I64Const(WASM_PAGE_SHIFT as i64));
    f.instruction(&Instruction::I64ShrU);
    clamp(&mut f, layout, PAGE);
    f.instruction(&Instruction::LocalSet(PAGE));
    f.instruction(&Instruction::LocalGet(END));
    f.instruction(&Instruction::I64Const(1));
    f.instruction(&Instruction::I64Sub);
    f.instruction(&Instruction::I64Const(WASM_PAGE_SHIFT as i64));
    f.instruction(&Instruction::I64ShrU);
    clamp(&mut f, layout, LAST);
    f.instruction(&Instruction::LocalSet(LAST));
    f.instruction(&Instruction::I32Const(0));
    f.instruction(&Instruction::I32Load8U(map_arg(
        h.memory,
        layout.mode_offset(),
    )));
    f.instruction(&Instruction::LocalSet(IGNORE));

    let charge = |f: &mut Function, events: u64| {
        f.instruction(&Instruction::GlobalGet(counter));
        f.instruction(&Instruction::I64Const((h.charge * events) as i64));
        f.instruction(&Instruction::I64Sub);
        f.instruction(&Instruction::GlobalSet(counter));
    };
    let push = |f: &mut Function, list: u64| {
        for i in [
            Instruction::I32Const(0),
            Instruction::I32Load(map_arg(h.memory, list)),
            Instruction::LocalTee(COUNT),
            Instruction::I32Const(4),
            Instruction::I32Mul,
            Instruction::LocalGet(PAGE),
            Instruction::I32WrapI64,
            Instruction::I32Store(map_arg(h.memory, list + 4)),
            Instruction::I32Const(0),
            Instruction::LocalGet(COUNT),
            Instruction::I32Const(1),
            Instruction::I32Add,
            Instruction::I32Store(map_arg(h.memory, list)),
        ] {
            f.instruction(&i);
        }
    };
    // The page's state, its pair state (with the next page's) and the previous page's pair
    // state (with its own), as `TrackerMap::set_state`.
    let set_state = |f: &mut Function, state: u8| {
        let state = state as i32;
        for i in [
            Instruction::LocalGet(PAGE),
            Instruction::I32WrapI64,
            Instruction::I32Const(state),
            Instruction::I32Store8(map_arg(h.memory, 0)),
            // pairs[p] = min(state, states[p + 1])
            Instruction::LocalGet(PAGE),
            Instruction::I32WrapI64,
            Instruction::I32Const(state),
            Instruction::LocalGet(PAGE),
            Instruction::I32WrapI64,
            Instruction::I32Load8U(map_arg(h.memory, 1)),
            Instruction::LocalTee(NEXT),
            Instruction::I32Const(state),
            Instruction::LocalGet(NEXT),
            Instruction::I32LtU,
            Instruction::Select,
            Instruction::I32Store8(map_arg(h.memory, pairs)),
            // if p > 0: pairs[p - 1] = min(states[p - 1], state)
            Instruction::LocalGet(PAGE),
            Instruction::I64Eqz,
            Instruction::I32Eqz,
            Instruction::If(EncBlockType::Empty),
            Instruction::LocalGet(PAGE),
            Instruction::I32WrapI64,
            Instruction::I32Const(1),
            Instruction::I32Sub,
            Instruction::LocalTee(PREVIOUS),
            Instruction::LocalGet(PREVIOUS),
            Instruction::I32Load8U(map_arg(h.memory, 0)),
            Instruction::LocalTee(NEXT),
            Instruction::I32Const(state),
            Instruction::LocalGet(NEXT),
            Instruction::I32Const(state),
            Instruction::I32LtU,
            Instruction::Select,
            Instruction::I32Store8(map_arg(h.memory, pairs)),
            Instruction::End,
        ] {
            f.instruction(&i);
        }
    };
    let state_is = |f: &mut Function, state: u8| {
        f.instruction(&Instruction::LocalGet(STATE));
        f.instruction(&Instruction::I32Const(state as i32));
        f.instruction(&Instruction::I32Eq);
        f.instruction(&Instruction::If(EncBlockType::Empty));
    };

    f.instruction(&Instruction::Loop(EncBlockType::Empty));
    f.instruction(&Instruction::LocalGet(PAGE));
    f.instruction(&Instruction::I32WrapI64);
    f.instruction(&Instruction::I32Load8U(map_arg(h.memory, 0)));
    f.instruction(&Instruction::LocalSet(STATE));
    f.instruction(&Instruction::LocalGet(IGNORE));
    f.instruction(&Instruction::If(EncBlockType::Empty));
    {
        // Ignoring modifications: one event per page, read or write.
        state_is(&mut f, UNTOUCHED);
        charge(&mut f, 1);
        push(&mut f, layout.accessed_list());
        set_state(&mut f, WRITTEN);
        f.instruction(&Instruction::End);
    }
    f.instruction(&Instruction::Else);
    f.instruction(&Instruction::LocalGet(WRITE));
    f.instruction(&Instruction::If(EncBlockType::Empty));
    {
        // A write: access and write for an untouched page, the write for an accessed one.
        state_is(&mut f, UNTOUCHED);
        charge(&mut f, 2);
        push(&mut f, layout.accessed_list());
        push(&mut f, layout.dirty_list());
        set_state(&mut f, WRITTEN);
        f.instruction(&Instruction::Else);
        state_is(&mut f, ACCESSED);
        charge(&mut f, 1);
        push(&mut f, layout.dirty_list());
        set_state(&mut f, WRITTEN);
        f.instruction(&Instruction::End);
        f.instruction(&Instruction::End);
    }
    f.instruction(&Instruction::Else);
    {
        // A read: the access for an untouched page.
        state_is(&mut f, UNTOUCHED);
        charge(&mut f, 1);
        push(&mut f, layout.accessed_list());
        set_state(&mut f, ACCESSED);
        f.instruction(&Instruction::End);
    }
    f.instruction(&Instruction::End);
    f.instruction(&Instruction::End);
    // Next page, while page <= last.
    for i in [
        Instruction::LocalGet(PAGE),
        Instruction::I64Const(1),
        Instruction::I64Add,
        Instruction::LocalTee(PAGE),
        Instruction::LocalGet(LAST),
        Instruction::I64LeU,
        Instruction::BrIf(0),
        Instruction::End,
        Instruction::End,
    ] {
        f.instruction(&i);
    }
    f
}

/// The unmetered helper `(param $dst i64) (param $src i64) (param $len i64)` before
/// `memory.copy`: when both ranges lie within the heap (else the copy traps before it touches
/// anything), the source is read and the destination written.
pub(super) fn touch_copy_helper(h: PageHooks, wasm64: bool) -> Function {
    const DST: u32 = 0;
    const SRC: u32 = 1;
    const LEN: u32 = 2;
    const SIZE: u32 = 3;
    let mut f = Function::new(vec![(1, ValType::I64)]);
    heap_bytes(&mut f, wasm64);
    f.instruction(&Instruction::LocalSet(SIZE));
    for from in [DST, SRC] {
        // from + len wraps, or passes the heap: return.
        for i in [
            Instruction::LocalGet(from),
            Instruction::LocalGet(LEN),
            Instruction::I64Add,
            Instruction::LocalGet(from),
            Instruction::I64LtU,
            Instruction::LocalGet(from),
            Instruction::LocalGet(LEN),
            Instruction::I64Add,
            Instruction::LocalGet(SIZE),
            Instruction::I64GtU,
            Instruction::I32Or,
            Instruction::If(EncBlockType::Empty),
            Instruction::Return,
            Instruction::End,
        ] {
            f.instruction(&i);
        }
    }
    for (from, write) in [(SRC, 0), (DST, 1)] {
        f.instruction(&Instruction::LocalGet(from));
        f.instruction(&Instruction::I64Const(0));
        f.instruction(&Instruction::LocalGet(LEN));
        f.instruction(&Instruction::I32Const(write));
        f.instruction(&Instruction::Call(h.touch));
    }
    f.instruction(&Instruction::End);
    f
}
