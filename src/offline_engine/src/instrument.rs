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
//!   snapshot and restore them.
//!
//! The injected code is never metered itself.

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

/// Shifts function indices by one (for the prepended import); everything else round-trips.
struct Shift;

impl Reencode for Shift {
    type Error = std::convert::Infallible;
    fn function_index(
        &mut self,
        func: u32,
    ) -> Result<u32, wasm_encoder::reencode::Error<Self::Error>> {
        Ok(func + 1)
    }
}

/// Indices the injected code refers to.
#[derive(Debug, Clone, Copy)]
struct Special {
    counter_global: u32,
    out_of_instructions: u32,
    decrement_helper: u32,
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

fn instrument_body(
    body: wasmparser::FunctionBody<'_>,
    special: Special,
    wasm64: bool,
    reencoder: &mut Shift,
) -> Result<Function, InstrumentError> {
    let mut f = reencoder.new_function_with_parsed_locals(&body)?;
    let mut reader = body.get_operators_reader()?;
    let mut ops = Vec::new();
    while !reader.eof() {
        ops.push(reader.read()?);
    }
    let points = injection_points(&ops, wasm64);
    let mut next_point = points.iter().peekable();
    for (position, op) in ops.into_iter().enumerate() {
        while let Some(p) = next_point.next_if(|p| p.position == position) {
            match p.charge {
                Charge::Static { cost, reentrant } => emit_static(&mut f, special, cost, reentrant),
                Charge::Dynamic { operand64 } => emit_dynamic(&mut f, special, operand64),
            }
        }
        f.instruction(&reencoder.instruction(op)?);
    }
    Ok(f)
}

/// Facts gathered in a first pass over the module.
#[derive(Default)]
struct Scan {
    num_types: u32,
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
                    s.num_types += group?.types().len() as u32;
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
            Payload::FunctionSection(r) => s.num_defined_funcs = r.count(),
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

/// Instruments `wasm`. `check_import(module, name)` accepts a function import or returns a hint
/// explaining the refusal; any non-function import is refused.
pub fn instrument(
    wasm: &[u8],
    check_import: &dyn Fn(&str, &str) -> Result<(), String>,
) -> Result<Instrumented, InstrumentError> {
    let s = scan(wasm, check_import)?;
    let ooi_type = s.num_types;
    let helper_type = s.num_types + 1;
    let special = Special {
        counter_global: s.num_globals,
        out_of_instructions: 0,
        decrement_helper: 1 + s.num_func_imports + s.num_defined_funcs,
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
    let mut re = Shift;
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
            exports.export(START_EXPORT, ExportKind::Func, start + 1);
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
                code.function(&instrument_body(body, special, s.memory64, &mut re)?);
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
