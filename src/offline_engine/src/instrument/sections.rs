//! The module around the bodies: the injected types, imports, helper functions, counter global
//! and exports, and the pass that re-encodes every section in the binary format's order.

use std::borrow::Cow;

use wasm_encoder::reencode::Reencode;
use wasm_encoder::{
    CodeSection, ConstExpr, ExportKind, ExportSection, FunctionSection, GlobalSection, GlobalType,
    ImportSection, Module, TypeSection, ValType,
};
use wasmparser::{ExternalKind, Parser, Payload};

use super::body::{BodyContext, instrument_body};
use super::dirty::{DirtyHooks, mark_range_helper};
use super::indices::{ProfileHooks, Shift, Special};
use super::metering::decrement_helper;
use super::pages::{PageHooks, touch_copy_helper, touch_helper};
use super::scan::Scan;
use super::{
    COUNTER_EXPORT, DIRTY_MAP_EXPORT, INJECTED_MODULE, InstrumentError, MEMORY_EXPORT,
    OUT_OF_INSTRUCTIONS, Options, PROFILE_ENTER, PROFILE_RETURN, PROFILE_TAIL, START_EXPORT,
    TABLE_EXPORT, TRACKER_EXPORT,
};
use crate::heap::DirtyMap;
use crate::tracker::TrackerMap;

/// Where the injected pieces go in the instrumented module.
pub(super) struct Layout {
    /// Index of the first injected type (the module's own come before).
    first_type: u32,
    /// Number of injected imports (every function index shifts by it).
    shift: u32,
    special: Special,
    /// Export names of every mutable global (its own export, or a new persistent name).
    pub(super) mutable_global_names: Vec<String>,
    /// Mutable globals without an export, with the name they get.
    extra_global_exports: Vec<(u32, String)>,
}

/// Injected types, after the module's own: `out_of_instructions`, the decrement helper, the
/// range-marking helper, the profiler's entry hook, its return and tail hooks; with the tracker,
/// its two helpers.
const OOI_TYPE: u32 = 0;
const HELPER_TYPE: u32 = 1;
const MARK_TYPE: u32 = 2;
const ENTER_TYPE: u32 = 3;
const HOOK_TYPE: u32 = 4;
const TOUCH_TYPE: u32 = 5;
const TOUCH_COPY_TYPE: u32 = 6;

impl Layout {
    pub(super) fn new(s: &Scan, options: Options) -> Self {
        // Injected imports: out_of_instructions, then the profiler's three hooks.
        let shift = if options.profile { 4 } else { 1 };
        let first_helper = shift + s.num_func_imports + s.num_defined_funcs;
        let special = Special {
            counter_global: s.num_globals,
            out_of_instructions: 0,
            decrement_helper: first_helper,
            dirty: (s.num_memories > 0 && options.tracker.is_none()).then(|| DirtyHooks {
                memory: 1,
                mark_range: first_helper + 1,
                layout: DirtyMap::for_memory(s.memory64),
            }),
            profile: options.profile.then_some(ProfileHooks {
                enter: 1,
                ret: 2,
                tail: 3,
            }),
            pages: options
                .tracker
                .filter(|_| s.num_memories > 0)
                .map(|t| PageHooks {
                    memory: 1,
                    touch: first_helper + 1,
                    touch_copy: first_helper + 2,
                    layout: TrackerMap::for_memory(s.memory64),
                    charge: t.wasm_page_charge(s.memory64),
                }),
        };
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
        Layout {
            first_type: s.num_types,
            shift,
            special,
            mutable_global_names,
            extra_global_exports,
        }
    }

    fn types(
        &self,
        section: Option<wasmparser::TypeSectionReader<'_>>,
        re: &mut Shift,
    ) -> Result<TypeSection, InstrumentError> {
        let mut types = TypeSection::new();
        if let Some(r) = section {
            re.parse_type_section(&mut types, r)?;
        }
        types.ty().function([], []);
        types.ty().function([ValType::I64], [ValType::I64]);
        types.ty().function([ValType::I64, ValType::I64], []);
        types.ty().function([ValType::I32], [ValType::I32]);
        types.ty().function([ValType::I32], []);
        if self.special.pages.is_some() {
            let i64 = ValType::I64;
            types.ty().function([i64, i64, i64, ValType::I32], []);
            types.ty().function([i64, i64, i64], []);
        }
        Ok(types)
    }

    fn imports(
        &self,
        section: Option<wasmparser::ImportSectionReader<'_>>,
        re: &mut Shift,
    ) -> Result<ImportSection, InstrumentError> {
        let mut imports = ImportSection::new();
        let function = |ty: u32| wasm_encoder::EntityType::Function(self.first_type + ty);
        imports.import(INJECTED_MODULE, OUT_OF_INSTRUCTIONS, function(OOI_TYPE));
        if self.special.profile.is_some() {
            for (name, ty) in [
                (PROFILE_ENTER, ENTER_TYPE),
                (PROFILE_RETURN, HOOK_TYPE),
                (PROFILE_TAIL, HOOK_TYPE),
            ] {
                imports.import(INJECTED_MODULE, name, function(ty));
            }
        }
        if let Some(r) = section {
            re.parse_import_section(&mut imports, r)?;
        }
        Ok(imports)
    }

    fn functions(
        &self,
        section: Option<wasmparser::FunctionSectionReader<'_>>,
        re: &mut Shift,
    ) -> Result<FunctionSection, InstrumentError> {
        let mut functions = FunctionSection::new();
        if let Some(r) = section {
            re.parse_function_section(&mut functions, r)?;
        }
        functions.function(self.first_type + HELPER_TYPE);
        if self.special.dirty.is_some() {
            functions.function(self.first_type + MARK_TYPE);
        }
        if self.special.pages.is_some() {
            functions.function(self.first_type + TOUCH_TYPE);
            functions.function(self.first_type + TOUCH_COPY_TYPE);
        }
        Ok(functions)
    }

    fn globals(
        &self,
        section: Option<wasmparser::GlobalSectionReader<'_>>,
        re: &mut Shift,
    ) -> Result<GlobalSection, InstrumentError> {
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
    }

    fn exports(
        &self,
        s: &Scan,
        section: Option<wasmparser::ExportSectionReader<'_>>,
        re: &mut Shift,
    ) -> Result<ExportSection, InstrumentError> {
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
        for (g, name) in &self.extra_global_exports {
            exports.export(name, ExportKind::Global, *g);
        }
        if let Some(start) = s.start {
            exports.export(START_EXPORT, ExportKind::Func, start + self.shift);
        }
        if let Some(d) = self.special.dirty {
            exports.export(DIRTY_MAP_EXPORT, ExportKind::Memory, d.memory);
        }
        if let Some(p) = self.special.pages {
            exports.export(TRACKER_EXPORT, ExportKind::Memory, p.memory);
        }
        exports.export(
            COUNTER_EXPORT,
            ExportKind::Global,
            self.special.counter_global,
        );
        Ok(exports)
    }

    /// The module's memory section plus the written-page map's memory.
    fn memories(
        &self,
        section: wasmparser::MemorySectionReader<'_>,
        re: &mut Shift,
    ) -> Result<wasm_encoder::MemorySection, InstrumentError> {
        let mut m = wasm_encoder::MemorySection::new();
        re.parse_memory_section(&mut m, section)?;
        let maps = [
            self.special.dirty.map(|d| d.layout.wasm_pages()),
            self.special.pages.map(|p| p.layout.wasm_pages()),
        ];
        for pages in maps.into_iter().flatten() {
            m.memory(wasm_encoder::MemoryType {
                minimum: pages,
                maximum: Some(pages),
                memory64: false,
                shared: false,
                page_size_log2: None,
            });
        }
        Ok(m)
    }
}

// Ranks of the sections in the binary format's order: type, import, function, table, memory,
// tag, global, export, start, element, datacount, code, data.
const TYPE: u8 = 1;
const IMPORT: u8 = 2;
const FUNCTION: u8 = 3;
const GLOBAL: u8 = 7;
const EXPORT: u8 = 8;
const CODE: u8 = 12;

fn rank(payload: &Payload<'_>) -> u8 {
    match payload {
        Payload::TypeSection(_) => TYPE,
        Payload::ImportSection(_) => IMPORT,
        Payload::FunctionSection(_) => FUNCTION,
        Payload::TableSection(_) => 4,
        Payload::MemorySection(_) => 5,
        Payload::TagSection(_) => 6,
        Payload::GlobalSection(_) => GLOBAL,
        Payload::ExportSection(_) => EXPORT,
        Payload::StartSection { .. } => 9,
        Payload::ElementSection(_) => 10,
        Payload::DataCountSection { .. } => 11,
        Payload::CodeSectionStart { .. } | Payload::CodeSectionEntry(_) => CODE,
        Payload::DataSection(_) => 13,
        Payload::End(_) => 14,
        _ => 0,
    }
}

/// A section the injected items go into, with the input's own when it has one.
enum Own<'a> {
    Types(Option<wasmparser::TypeSectionReader<'a>>),
    Imports(Option<wasmparser::ImportSectionReader<'a>>),
    Functions(Option<wasmparser::FunctionSectionReader<'a>>),
    Globals(Option<wasmparser::GlobalSectionReader<'a>>),
    Exports(Option<wasmparser::ExportSectionReader<'a>>),
}

impl Own<'_> {
    fn rank(&self) -> u8 {
        match self {
            Own::Types(_) => TYPE,
            Own::Imports(_) => IMPORT,
            Own::Functions(_) => FUNCTION,
            Own::Globals(_) => GLOBAL,
            Own::Exports(_) => EXPORT,
        }
    }
}

/// The re-encoding pass: the instrumented module, section by section.
struct Writer<'a> {
    s: &'a Scan,
    layout: &'a Layout,
    out: Module,
    re: Shift,
    /// Ranks of the sections the injected items go into that are written already.
    written: Vec<u8>,
    code: CodeSection,
    /// Defined functions seen so far.
    defined: u32,
}

/// Re-encodes `wasm` with the injected items of `layout` and every body instrumented.
pub(super) fn write(wasm: &[u8], s: &Scan, layout: &Layout) -> Result<Vec<u8>, InstrumentError> {
    let mut w = Writer {
        s,
        layout,
        out: Module::new(),
        re: Shift(layout.shift),
        written: Vec::new(),
        code: CodeSection::new(),
        defined: 0,
    };
    for payload in Parser::new(0).parse_all(wasm) {
        let payload = payload?;
        w.add_missing_before(rank(&payload))?;
        w.payload(payload)?;
    }
    Ok(w.out.finish())
}

impl Writer<'_> {
    /// Writes the sections the injected items need that the input lacks and that must come
    /// before a section of rank `next`.
    fn add_missing_before(&mut self, next: u8) -> Result<(), InstrumentError> {
        for missing in [
            Own::Types(None),
            Own::Imports(None),
            Own::Functions(None),
            Own::Globals(None),
            Own::Exports(None),
        ] {
            if next > missing.rank() && !self.written.contains(&missing.rank()) {
                self.own(missing)?;
            }
        }
        if next > CODE && !self.written.contains(&CODE) {
            self.written.push(CODE);
            let special = self.layout.special;
            self.code.function(&decrement_helper(special));
            if let Some(d) = special.dirty {
                self.code.function(&mark_range_helper(d));
            }
            if let Some(p) = special.pages {
                let wasm64 = self.s.memory64;
                self.code
                    .function(&touch_helper(p, special.counter_global, wasm64));
                self.code.function(&touch_copy_helper(p, wasm64));
            }
            self.out.section(&self.code);
        }
        Ok(())
    }

    /// Writes a section the injected items go into.
    fn own(&mut self, section: Own<'_>) -> Result<(), InstrumentError> {
        self.written.push(section.rank());
        let (layout, re, out) = (self.layout, &mut self.re, &mut self.out);
        match section {
            Own::Types(r) => out.section(&layout.types(r, re)?),
            Own::Imports(r) => out.section(&layout.imports(r, re)?),
            Own::Functions(r) => out.section(&layout.functions(r, re)?),
            Own::Globals(r) => out.section(&layout.globals(r, re)?),
            Own::Exports(r) => out.section(&layout.exports(self.s, r, re)?),
        };
        Ok(())
    }

    /// Re-encodes one payload of the input.
    fn payload(&mut self, payload: Payload<'_>) -> Result<(), InstrumentError> {
        match payload {
            Payload::Version { .. }
            | Payload::End(_)
            | Payload::CodeSectionStart { .. }
            | Payload::StartSection { .. } => {}
            Payload::TypeSection(r) => self.own(Own::Types(Some(r)))?,
            Payload::ImportSection(r) => self.own(Own::Imports(Some(r)))?,
            Payload::FunctionSection(r) => self.own(Own::Functions(Some(r)))?,
            Payload::GlobalSection(r) => self.own(Own::Globals(Some(r)))?,
            Payload::ExportSection(r) => self.own(Own::Exports(Some(r)))?,
            Payload::TableSection(r) => {
                let mut t = wasm_encoder::TableSection::new();
                self.re.parse_table_section(&mut t, r)?;
                self.out.section(&t);
            }
            Payload::MemorySection(r) => {
                self.out.section(&self.layout.memories(r, &mut self.re)?);
            }
            Payload::TagSection(r) => {
                let mut t = wasm_encoder::TagSection::new();
                self.re.parse_tag_section(&mut t, r)?;
                self.out.section(&t);
            }
            Payload::ElementSection(r) => {
                let mut e = wasm_encoder::ElementSection::new();
                self.re.parse_element_section(&mut e, r)?;
                self.out.section(&e);
            }
            Payload::DataCountSection { count, .. } => {
                self.out.section(&wasm_encoder::DataCountSection { count });
            }
            Payload::CodeSectionEntry(body) => {
                let cx = self.body_context();
                self.defined += 1;
                self.code
                    .function(&instrument_body(body, &cx, &mut self.re)?);
            }
            Payload::DataSection(r) => {
                let mut d = wasm_encoder::DataSection::new();
                self.re.parse_data_section(&mut d, r)?;
                self.out.section(&d);
            }
            Payload::CustomSection(c) => {
                self.re.parse_custom_section(&mut self.out, c)?;
            }
            other => {
                return Err(InstrumentError::Unsupported(format!(
                    "unexpected section {other:?}"
                )));
            }
        }
        Ok(())
    }

    /// The context of the next defined function's body.
    fn body_context(&self) -> BodyContext {
        let s = self.s;
        let params = s
            .func_types
            .get(self.defined as usize)
            .and_then(|&t| s.type_params.get(t as usize))
            .copied()
            .unwrap_or(0);
        BodyContext {
            special: self.layout.special,
            wasm64: s.memory64,
            func_index: s.num_func_imports + self.defined,
            params,
            imported_funcs: s.num_func_imports,
        }
    }
}
