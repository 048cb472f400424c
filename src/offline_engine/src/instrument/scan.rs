//! The first pass over the module: what the instrumentation and the engine need to know.

use wasmparser::{ExternalKind, Parser, Payload, TypeRef};

use super::{InstrumentError, START_EXPORT};

/// Facts gathered in a first pass over the module.
#[derive(Default)]
pub(super) struct Scan {
    pub(super) num_types: u32,
    /// Parameter count of every type (0 for non-function types).
    pub(super) type_params: Vec<u32>,
    /// Type index of every defined function.
    pub(super) func_types: Vec<u32>,
    pub(super) num_func_imports: u32,
    pub(super) num_defined_funcs: u32,
    pub(super) num_globals: u32,
    pub(super) mutable_globals: Vec<u32>,
    pub(super) exported_globals: Vec<(u32, String)>,
    pub(super) memory64: bool,
    pub(super) num_memories: u32,
    pub(super) num_tables: u32,
    pub(super) start: Option<u32>,
    pub(super) function_exports: Vec<String>,
    pub(super) ic0_imports: Vec<String>,
    pub(super) metadata: Vec<(String, Vec<u8>)>,
}

/// The first pass: gathers [`Scan`] and refuses what the engine cannot run (imports it does not
/// provide, several memories, a component, a start function next to a `canister_start` export).
pub(super) fn scan(
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
