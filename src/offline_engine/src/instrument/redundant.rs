//! Which checks of the memory tracker ([`super::pages`]) a function body can leave out: those an
//! earlier check covers on every path to them.

use std::collections::HashMap;

use wasmparser::Operator;

use super::pages::{heap_access, operand_above_address};
use crate::tracker::WASM_PAGE_SHIFT;

/// The local whose value is the address of the access at `ops[i]`, when the code visibly takes
/// it from one: `local.get L` (or `local.tee L`) right before a load, or before the one
/// operator that pushes the value of a store (a constant, `local.get`, `global.get`).
fn address_local(ops: &[Operator<'_>], i: usize) -> Option<u32> {
    let local = |op: &Operator<'_>| match *op {
        Operator::LocalGet { local_index } | Operator::LocalTee { local_index } => {
            Some(local_index)
        }
        _ => None,
    };
    if operand_above_address(&ops[i]).is_none() {
        return local(ops.get(i.checked_sub(1)?)?);
    }
    let value = ops.get(i.checked_sub(1)?)?;
    let pushes_one = matches!(
        value,
        Operator::LocalGet { .. }
            | Operator::GlobalGet { .. }
            | Operator::I32Const { .. }
            | Operator::I64Const { .. }
            | Operator::F32Const { .. }
            | Operator::F64Const { .. }
            | Operator::V128Const { .. }
    );
    if pushes_one {
        local(ops.get(i.checked_sub(2)?)?)
    } else {
        None
    }
}

/// The static offsets `[lo, hi)` from an address local whose pages are known to satisfy a need,
/// by (address local, write).
type Covered = HashMap<(u32, bool), (u64, u64)>;

/// For every `block`, `loop` and `if` (by the position of its opening operator), the locals
/// assigned (`local.set`, `local.tee`) anywhere inside it.
fn assigned_locals(ops: &[Operator<'_>]) -> HashMap<usize, Vec<u32>> {
    let mut open: Vec<(usize, Vec<u32>)> = Vec::new();
    let mut assigned = HashMap::new();
    for (i, op) in ops.iter().enumerate() {
        match *op {
            Operator::Block { .. } | Operator::Loop { .. } | Operator::If { .. } => {
                open.push((i, Vec::new()))
            }
            Operator::LocalSet { local_index } | Operator::LocalTee { local_index } => {
                if let Some((_, locals)) = open.last_mut() {
                    locals.push(local_index);
                }
            }
            Operator::End => {
                if let Some((start, locals)) = open.pop() {
                    if let Some((_, outer)) = open.last_mut() {
                        outer.extend_from_slice(&locals);
                    }
                    assigned.insert(start, locals);
                }
            }
            _ => {}
        }
    }
    assigned
}

/// What holds on every path that meets at a point: the intersection of the ranges known on
/// each (`None`: no path reaches it yet, or the code is unreachable).
fn meet(a: Option<Covered>, b: &Option<Covered>) -> Option<Covered> {
    match (a, b) {
        (None, b) => b.clone(),
        (a, None) => a,
        (Some(mut a), Some(b)) => {
            a.retain(|key, (lo, hi)| match b.get(key) {
                Some(&(l, h)) => {
                    *lo = (*lo).max(l);
                    *hi = (*hi).min(h);
                    lo < hi
                }
                None => false,
            });
            Some(a)
        }
    }
}

/// An open `block`, `loop` or `if` of [`redundant_checks`].
struct Scope {
    is_loop: bool,
    is_if: bool,
    /// What held at its start (the `if`'s: where its `else`, or its missing `else`, begins).
    at_start: Option<Covered>,
    /// What holds on every branch to its end seen so far (and the `then` arm's end).
    incoming: Option<Covered>,
    seen_else: bool,
}

/// Which heap accesses of a function body need no check, because a check that runs before them
/// on every path covers them: the same address local, not assigned on any path in between, and
/// a range of static offsets within what such checks of that local covered, with a need at
/// least as high. Pages never go back to a lower state within an execution, and two checked
/// ranges no more than a Wasm page apart leave no page between them unchecked, so the check of
/// such an access would always pass.
///
/// A forward pass over the structured code: straight-line code keeps what it learns; where
/// paths meet (the `end` of a `block` or an `if`, with the branches to it) holds what holds on
/// all of them; a `loop` header keeps what held before the loop for the locals the loop does not
/// assign (its back edges come from inside it); after a loop's `end` (reached only by falling
/// through) holds what held at its last operator.
pub(super) fn redundant_checks(ops: &[Operator<'_>]) -> Vec<bool> {
    let assigned = assigned_locals(ops);
    let mut covered: Option<Covered> = Some(HashMap::new());
    let mut scopes: Vec<Scope> = Vec::new();
    let mut redundant = vec![false; ops.len()];
    let forget = |covered: &mut Option<Covered>, locals: &[u32]| {
        if let Some(c) = covered {
            c.retain(|(local, _), _| !locals.contains(local));
        }
    };
    let extend = |covered: &mut Covered, key, lo: u64, hi: u64| {
        let range = match covered.get(&key) {
            Some(&(l, h)) if h.max(hi) - l.min(lo) <= 1 << WASM_PAGE_SHIFT => {
                (l.min(lo), h.max(hi))
            }
            _ => (lo, hi),
        };
        covered.insert(key, range);
    };
    // A branch to the label `depth` levels out: what holds here holds at its target (a loop's
    // header needs nothing more; the function's end nothing at all).
    let branch = |scopes: &mut Vec<Scope>, covered: &Option<Covered>, depth: u32| {
        let Some(index) = scopes.len().checked_sub(1 + depth as usize) else {
            return;
        };
        let target = &mut scopes[index];
        if !target.is_loop {
            target.incoming = meet(target.incoming.take(), covered);
        }
    };
    for (i, op) in ops.iter().enumerate() {
        match op {
            Operator::LocalSet { local_index } | Operator::LocalTee { local_index } => {
                forget(&mut covered, &[*local_index]);
                continue;
            }
            Operator::Block { .. } | Operator::Loop { .. } | Operator::If { .. } => {
                let inside = assigned.get(&i).map_or(&[][..], Vec::as_slice);
                let is_loop = matches!(op, Operator::Loop { .. });
                if is_loop {
                    forget(&mut covered, inside);
                }
                scopes.push(Scope {
                    is_loop,
                    is_if: matches!(op, Operator::If { .. }),
                    at_start: covered.clone(),
                    incoming: None,
                    seen_else: false,
                });
                continue;
            }
            Operator::Else => {
                if let Some(scope) = scopes.last_mut() {
                    scope.incoming = meet(scope.incoming.take(), &covered);
                    scope.seen_else = true;
                    covered = scope.at_start.clone();
                }
                continue;
            }
            Operator::End => {
                if let Some(scope) = scopes.pop()
                    && !scope.is_loop
                {
                    let mut met = meet(scope.incoming, &covered);
                    if scope.is_if && !scope.seen_else {
                        // The condition was false: straight from the start to the end.
                        met = meet(met, &scope.at_start);
                    }
                    covered = met;
                }
                continue;
            }
            Operator::Br { relative_depth } => {
                branch(&mut scopes, &covered, *relative_depth);
                covered = None;
                continue;
            }
            Operator::BrIf { relative_depth } => {
                branch(&mut scopes, &covered, *relative_depth);
                continue;
            }
            Operator::BrTable { targets } => {
                for depth in targets.targets().flatten().chain(Some(targets.default())) {
                    branch(&mut scopes, &covered, depth);
                }
                covered = None;
                continue;
            }
            Operator::Return
            | Operator::Unreachable
            | Operator::ReturnCall { .. }
            | Operator::ReturnCallIndirect { .. } => {
                covered = None;
                continue;
            }
            _ => {}
        }
        let Some(access) = heap_access(op) else {
            continue;
        };
        let Some(c) = covered.as_mut() else {
            continue;
        };
        let Some(local) = address_local(ops, i) else {
            continue;
        };
        let Some(end) = access.offset.checked_add(access.size) else {
            continue;
        };
        if let Some(&(lo, hi)) = c.get(&(local, access.write))
            && lo <= access.offset
            && end <= hi
        {
            redundant[i] = true;
            continue;
        }
        // After the check the access's pages satisfy its need; a write's satisfy a read's too.
        extend(c, (local, false), access.offset, end);
        if access.write {
            extend(c, (local, true), access.offset, end);
        }
    }
    redundant
}
