//! Exact per-function instruction profiles (`PROFILING.md`).
//!
//! A program loaded with [`crate::Engine::load_profiled`] carries unmetered hooks
//! ([`crate::instrument::Options::profile`]): a host call at every function entry (before the
//! entry block's charge), after every call returns, before every tail call, and before every
//! direct call of an imported (`ic0`) function. Each hook reads the instruction counter and
//! attributes what was charged since the previous hook to the function on top of the engine's
//! copy of the call stack, then updates that stack. Since every charge of the message happens
//! between two hooks (or between the last hook and the end of the message, which the engine
//! closes), the self instructions of all functions add up to exactly
//! [`crate::Execution::instructions`]:
//!
//! - the cost of a basic block goes to the function the block belongs to (blocks are paid when
//!   entered, so the block that contains a call is paid by the caller before the callee starts);
//! - the run-time length charge of `memory.fill/copy/init` and `table.*` goes to the function
//!   executing it;
//! - a System API function called directly gets a frame of its own, named after its import
//!   (`ic0.stable64_write`), which receives its charge (fixed, per byte, stable dirty pages); one
//!   reached through `call_indirect` (never emitted by Rust) is charged to the caller;
//! - a trap ends the message where it happens: the last charge goes to the function (or
//!   System API frame) on top of the stack.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Arc;

use wasmparser::{KnownCustom, Name, Parser, Payload, TypeRef};
use wasmtime::{Caller, Global, Linker};

use crate::error::EngineError;
use crate::instrument::{INJECTED_MODULE, PROFILE_ENTER, PROFILE_RETURN, PROFILE_TAIL};

/// What the profiler's hooks need from the store they run in: the instruction counter, the
/// message's limit and the current profile. The store data implements it; the profiler does not
/// know the System API.
pub(crate) trait Profiled: 'static {
    /// The instrumented counter global of the instance.
    fn counter(&self) -> Option<Global>;
    /// The current message's instruction limit.
    fn limit(&self) -> u64;
    /// The current message's profile, when the program is profiled.
    fn profiler(&mut self) -> Option<&mut ProfState>;
}

/// Names of the functions of `wasm`, by function index (imports first): `module.name` for an
/// imported function (`ic0.msg_reply`), the demangled `name` section entry for a defined one
/// (followed by ` [<index>]` when several functions demangle to the same name),
/// `func[<index>]` for a defined function without a name.
pub fn function_names(wasm: &[u8]) -> Result<Vec<String>, EngineError> {
    let mut names: Vec<String> = Vec::new();
    let mut imported = 0usize;
    let mut named: Vec<(u32, String)> = Vec::new();
    let invalid = |e: wasmparser::BinaryReaderError| {
        EngineError::Instrument(crate::instrument::InstrumentError::Parse(e))
    };
    for payload in Parser::new(0).parse_all(wasm) {
        match payload.map_err(invalid)? {
            Payload::ImportSection(r) => {
                for imp in r.into_imports() {
                    let imp = imp.map_err(invalid)?;
                    if matches!(imp.ty, TypeRef::Func(_) | TypeRef::FuncExact(_)) {
                        names.push(format!("{}.{}", imp.module, imp.name));
                        imported += 1;
                    }
                }
            }
            Payload::FunctionSection(r) => {
                for i in 0..r.count() {
                    names.push(format!("func[{}]", imported as u32 + i));
                }
            }
            Payload::CustomSection(c) => {
                if let KnownCustom::Name(reader) = c.as_known() {
                    for sub in reader {
                        // A malformed name section only costs the names.
                        let Ok(Name::Function(map)) = sub else {
                            continue;
                        };
                        for naming in map.into_iter().flatten() {
                            named.push((naming.index, demangle(naming.name)));
                        }
                    }
                }
            }
            _ => {}
        }
    }
    for (index, name) in named {
        if let Some(slot) = names.get_mut(index as usize)
            && index as usize >= imported
        {
            *slot = name;
        }
    }
    // Distinct functions with the same demangled name (monomorphizations of one generic
    // function) keep their index, so that they stay apart.
    let mut count: HashMap<&str, u32> = HashMap::new();
    for n in &names {
        *count.entry(n.as_str()).or_insert(0) += 1;
    }
    let repeated: Vec<bool> = names.iter().map(|n| count[n.as_str()] > 1).collect();
    for (index, (name, repeated)) in names.iter_mut().zip(repeated).enumerate() {
        if repeated {
            name.push_str(&format!(" [{index}]"));
        }
    }
    Ok(names)
}

/// A Rust symbol demangled without its hash; other names unchanged.
fn demangle(name: &str) -> String {
    match rustc_demangle::try_demangle(name) {
        Ok(d) => format!("{d:#}"),
        Err(_) => name.to_string(),
    }
}

/// A multiplicative hasher for the (parent node, function) keys of the call tree.
#[derive(Default)]
struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ b as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = v.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

const ROOT: u32 = u32::MAX;

#[derive(Debug, Clone)]
struct RawNode {
    func: u32,
    parent: u32,
    self_instructions: u64,
    calls: u64,
}

/// The profiler's state during one message (in the store, updated by the hooks).
#[derive(Debug)]
pub(crate) struct ProfState {
    /// Instructions attributed so far.
    last: u64,
    /// Call-tree nodes of the frames on the stack (node 0 is the root).
    stack: Vec<u32>,
    nodes: Vec<RawNode>,
    children: HashMap<u64, u32, BuildHasherDefault<KeyHasher>>,
}

impl ProfState {
    /// An empty profile: nothing charged yet.
    pub(crate) fn new() -> Self {
        ProfState {
            last: 0,
            stack: Vec::new(),
            nodes: vec![RawNode {
                func: ROOT,
                parent: 0,
                self_instructions: 0,
                calls: 0,
            }],
            children: HashMap::default(),
        }
    }

    /// Attributes the instructions charged since the last hook (`now` is the total so far) to
    /// the frame on top of the stack.
    fn charge(&mut self, now: u64) {
        let delta = now.saturating_sub(self.last);
        self.last = self.last.max(now);
        let top = self.stack.last().copied().unwrap_or(0);
        self.nodes[top as usize].self_instructions += delta;
    }

    /// Function `func` starts (or an `ic0` function is about to be called); returns the new
    /// stack depth.
    fn enter(&mut self, now: u64, func: u32) -> i32 {
        self.charge(now);
        let parent = self.stack.last().copied().unwrap_or(0);
        let key = ((parent as u64) << 32) | func as u64;
        let next = self.nodes.len() as u32;
        let node = *self.children.entry(key).or_insert(next);
        if node == next {
            self.nodes.push(RawNode {
                func,
                parent,
                self_instructions: 0,
                calls: 0,
            });
        }
        self.nodes[node as usize].calls += 1;
        self.stack.push(node);
        self.stack.len() as i32
    }

    /// Control is back in the function at stack depth `depth` (a call returned).
    fn returned(&mut self, now: u64, depth: i32) {
        self.charge(now);
        self.stack.truncate(depth.max(0) as usize);
    }

    /// The function at stack depth `depth` tail-calls: its frame ends.
    fn tail(&mut self, now: u64, depth: i32) {
        self.charge(now);
        self.stack.truncate(depth.max(1) as usize - 1);
    }

    /// The engine's call into the module ended (returned or trapped) with `now` instructions.
    pub(crate) fn close(&mut self, now: u64) {
        self.charge(now);
        self.stack.clear();
    }

    /// The finished profile of execution `entry`.
    pub(crate) fn finish(&self, entry: String, names: Arc<[String]>) -> Profile {
        Profile {
            entry,
            instructions: self.last,
            names,
            nodes: self
                .nodes
                .iter()
                .map(|n| ProfileNode {
                    function: (n.func != ROOT).then_some(n.func),
                    parent: n.parent as usize,
                    self_instructions: n.self_instructions,
                    calls: n.calls,
                })
                .collect(),
        }
    }
}

/// Instructions executed so far in the message, as the engine counts them (clamped to the
/// limit, as [`crate::Execution::instructions`] is).
fn executed<T: Profiled>(c: &mut Caller<'_, T>) -> u64 {
    let Some(g) = c.data().counter() else {
        return 0;
    };
    let v = g.get(&mut *c).i64().unwrap_or(0);
    let limit = c.data().limit();
    let limit_i = i64::try_from(limit).unwrap_or(i64::MAX);
    limit_i.saturating_sub(v).clamp(0, limit_i) as u64
}

/// Adds the profiler's hooks to `linker` (they do nothing in a store without a profile).
pub(crate) fn add_to_linker<T: Profiled>(linker: &mut Linker<T>) -> wasmtime::Result<()> {
    linker.func_wrap(
        INJECTED_MODULE,
        PROFILE_ENTER,
        |mut c: Caller<'_, T>, func: i32| -> i32 {
            let now = executed(&mut c);
            match c.data_mut().profiler() {
                Some(p) => p.enter(now, func as u32),
                None => 0,
            }
        },
    )?;
    linker.func_wrap(
        INJECTED_MODULE,
        PROFILE_RETURN,
        |mut c: Caller<'_, T>, depth: i32| {
            let now = executed(&mut c);
            if let Some(p) = c.data_mut().profiler() {
                p.returned(now, depth);
            }
        },
    )?;
    linker.func_wrap(
        INJECTED_MODULE,
        PROFILE_TAIL,
        |mut c: Caller<'_, T>, depth: i32| {
            let now = executed(&mut c);
            if let Some(p) = c.data_mut().profiler() {
                p.tail(now, depth);
            }
        },
    )?;
    Ok(())
}

/// One node of a profile's call tree: a function reached through one particular call path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProfileNode {
    /// The function (index in the module's function index space, imports first); `None` for
    /// the root, which stands for the engine calling into the module.
    pub function: Option<u32>,
    /// Index of the parent node in [`Profile::nodes`] (the root's is 0, itself). Parents come
    /// before their children.
    pub parent: usize,
    /// Instructions charged while this node was on top of the stack.
    pub self_instructions: u64,
    /// How many times the function was entered through this path.
    pub calls: u64,
}

/// The cost of one function over the whole message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FunctionCost {
    /// The function (index in the module's function index space); `None` for instructions
    /// charged outside any function (none in practice).
    pub function: Option<u32>,
    /// Its name (see [`function_names`]).
    pub name: String,
    /// Instructions charged while it was on top of the stack.
    pub self_instructions: u64,
    /// Instructions charged while it was anywhere on the stack (recursive activations counted
    /// once).
    pub inclusive_instructions: u64,
    /// How many times it was entered (called).
    pub calls: u64,
}

/// The instruction profile of one message: a call tree whose self instructions add up to
/// [`crate::Execution::instructions`] exactly.
#[derive(Debug, Clone)]
pub struct Profile {
    entry: String,
    instructions: u64,
    names: Arc<[String]>,
    nodes: Vec<ProfileNode>,
}

impl Profile {
    /// An empty profile of a message that executed nothing (e.g. a method that does not exist).
    pub fn empty(entry: &str, names: Arc<[String]>) -> Profile {
        ProfState::new().finish(entry.to_string(), names)
    }

    /// What ran (as [`crate::Execution::entry`]).
    pub fn entry(&self) -> &str {
        &self.entry
    }

    /// Total instructions of the profile: the message's [`crate::Execution::instructions`].
    pub fn instructions(&self) -> u64 {
        self.instructions
    }

    /// The call tree; node 0 is the root.
    pub fn nodes(&self) -> &[ProfileNode] {
        &self.nodes
    }

    /// The name of function `function` (see [`function_names`]).
    pub fn function_name(&self, function: u32) -> String {
        self.names
            .get(function as usize)
            .cloned()
            .unwrap_or_else(|| format!("func[{function}]"))
    }

    fn node_name(&self, node: &ProfileNode) -> String {
        match node.function {
            Some(f) => self.function_name(f),
            None => "(engine)".to_string(),
        }
    }

    /// Every function that was entered or charged, with its self and inclusive instructions,
    /// sorted by self instructions (descending), then inclusive, then name.
    pub fn functions(&self) -> Vec<FunctionCost> {
        let n = self.nodes.len();
        let mut children: Vec<Vec<usize>> = vec![Vec::new(); n];
        for (i, node) in self.nodes.iter().enumerate().skip(1) {
            children[node.parent].push(i);
        }
        // Subtree totals: children come after their parents.
        let mut subtree: Vec<u64> = self.nodes.iter().map(|n| n.self_instructions).collect();
        for i in (1..n).rev() {
            let parent = self.nodes[i].parent;
            subtree[parent] += subtree[i];
        }
        let mut by_function: HashMap<Option<u32>, FunctionCost> = HashMap::new();
        // Depth-first, counting how often each function is active above the current node.
        let mut active: HashMap<Option<u32>, u32> = HashMap::new();
        let mut stack: Vec<(usize, bool)> = vec![(0, true)];
        while let Some((i, entering)) = stack.pop() {
            let node = &self.nodes[i];
            if !entering {
                if let Some(c) = active.get_mut(&node.function) {
                    *c -= 1;
                }
                continue;
            }
            let outermost = active.get(&node.function).copied().unwrap_or(0) == 0;
            if i != 0 || node.self_instructions > 0 {
                let cost = by_function
                    .entry(node.function)
                    .or_insert_with(|| FunctionCost {
                        function: node.function,
                        name: self.node_name(node),
                        self_instructions: 0,
                        inclusive_instructions: 0,
                        calls: 0,
                    });
                cost.self_instructions += node.self_instructions;
                cost.calls += node.calls;
                if outermost {
                    cost.inclusive_instructions += if i == 0 {
                        node.self_instructions
                    } else {
                        subtree[i]
                    };
                }
            }
            *active.entry(node.function).or_insert(0) += 1;
            stack.push((i, false));
            for &c in children[i].iter().rev() {
                stack.push((c, true));
            }
        }
        let mut v: Vec<FunctionCost> = by_function.into_values().collect();
        v.sort_by(|a, b| {
            b.self_instructions
                .cmp(&a.self_instructions)
                .then(b.inclusive_instructions.cmp(&a.inclusive_instructions))
                .then_with(|| a.name.cmp(&b.name))
        });
        v
    }

    /// The `n` functions with the most self instructions (see [`Self::functions`]).
    pub fn top(&self, n: usize) -> Vec<FunctionCost> {
        let mut v = self.functions();
        v.truncate(n);
        v
    }

    /// A text table of the [`Self::top`] `n` functions, followed by a line for all other
    /// functions and the total, so that the self column adds up to [`Self::instructions`].
    pub fn top_table(&self, n: usize) -> String {
        let all = self.functions();
        let total = self.instructions;
        let pct = |v: u64| {
            if total == 0 {
                0.0
            } else {
                v as f64 * 100.0 / total as f64
            }
        };
        let mut out = String::new();
        let _ = writeln!(
            out,
            "{:>15} {:>6} {:>15} {:>6} {:>9}  function",
            "self", "%", "inclusive", "%", "calls"
        );
        for f in all.iter().take(n) {
            let _ = writeln!(
                out,
                "{:>15} {:>6.2} {:>15} {:>6.2} {:>9}  {}",
                f.self_instructions,
                pct(f.self_instructions),
                f.inclusive_instructions,
                pct(f.inclusive_instructions),
                f.calls,
                f.name
            );
        }
        if all.len() > n {
            let rest: u64 = all[n..].iter().map(|f| f.self_instructions).sum();
            let _ = writeln!(
                out,
                "{:>15} {:>6.2} {:>15} {:>6} {:>9}  ({} other functions)",
                rest,
                pct(rest),
                "",
                "",
                "",
                all.len() - n
            );
        }
        let _ = writeln!(
            out,
            "{:>15} {:>6.2} {:>15} {:>6} {:>9}  total ({})",
            total,
            pct(total),
            "",
            "",
            "",
            self.entry
        );
        out
    }

    /// The profile as folded stacks (`outer;inner;leaf <self instructions>` per line, sorted),
    /// the input format of flame graph tools. `;` inside a name is written as `:`.
    pub fn folded(&self) -> String {
        let names: Vec<String> = self
            .nodes
            .iter()
            .map(|n| self.node_name(n).replace(';', ":"))
            .collect();
        let mut lines = Vec::new();
        for (i, node) in self.nodes.iter().enumerate() {
            if node.self_instructions == 0 {
                continue;
            }
            let mut path = Vec::new();
            let mut j = i;
            while j != 0 {
                path.push(names[j].as_str());
                j = self.nodes[j].parent;
            }
            if path.is_empty() {
                path.push(names[0].as_str());
            }
            path.reverse();
            lines.push(format!("{} {}", path.join(";"), node.self_instructions));
        }
        lines.sort();
        let mut out = lines.join("\n");
        if !out.is_empty() {
            out.push('\n');
        }
        out
    }

    /// A flame graph of the profile as an SVG document (rendered by `inferno`; widths are
    /// instructions, colours derived from the function names so the output is deterministic).
    pub fn flamegraph_svg(&self, title: &str) -> Result<String, EngineError> {
        let folded = self.folded();
        let mut options = inferno::flamegraph::Options::default();
        options.title = title.to_string();
        options.count_name = "instructions".to_string();
        options.hash = true;
        options.deterministic = true;
        let mut svg = Vec::new();
        inferno::flamegraph::from_lines(&mut options, folded.lines(), &mut svg)
            .map_err(|e| EngineError::Module(format!("flame graph: {e}")))?;
        String::from_utf8(svg).map_err(|e| EngineError::Module(format!("flame graph: {e}")))
    }
}
