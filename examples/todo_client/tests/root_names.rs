//! The example canisters and this client are written with the root names of the crates they
//! use, and nothing else: `ic-rusqlite-batch`'s root is the common case of a canister author (its
//! other modules are for methods of another shape), `ic-batch-client`'s and the todo store's
//! roots are what a client needs. This test reads each crate's root exports from its source (its
//! `pub use` items and items, and its `#[macro_export]` macros not hidden from the docs; its
//! modules and re-exported crates are not root names) and fails, naming the file, the line and
//! the path, wherever the examples, this client, the guide's code or the library README's code
//! name anything through a module (`batch::canister::submit_op`, say). That the same sources
//! compile natively without a `cfg` of their own is `cargo test` building them (this crate
//! depends on the todo store; the notes store is a workspace member).

use std::collections::BTreeSet;
use std::path::Path;

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");

fn read(path: &str) -> String {
    std::fs::read_to_string(Path::new(ROOT).join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The identifier `text` starts with.
fn ident(text: &str) -> &str {
    let end = text.find(|c: char| !is_ident(c)).unwrap_or(text.len());
    &text[..end]
}

/// The top-level items of a `use` tree's group `{...}` (`text` starts after the `{`): each one's
/// first path segment (`self` for `self as x`).
fn group_heads(text: &str) -> Vec<String> {
    let mut heads = Vec::new();
    let (mut depth, mut start) = (0, 0);
    for (i, c) in text.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => {
                heads.push(text[start..i].trim().to_owned());
                break;
            }
            '}' => depth -= 1,
            ',' if depth == 0 => {
                heads.push(text[start..i].trim().to_owned());
                start = i + 1;
            }
            _ => {}
        }
    }
    heads
        .into_iter()
        .filter(|item| !item.is_empty())
        .map(|item| ident(&item).to_owned())
        .collect()
}

/// The names a crate's root exports, read from its root module's source (and the sources of
/// its `#[macro_export]` macros): `pub use a::b::C;`, `pub use a::{C, D};` and
/// `pub use a::b as C;` export `C` (and `D`), `pub use a;` re-exports a crate (a module, not a
/// root name); `pub struct`, `pub enum`, `pub fn`, ... at the top level (structs and enums
/// inside a macro's input too, as `writes!`'s); and the exported macros that are not
/// `#[doc(hidden)]`.
fn root_names(sources: &[&str]) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for source in sources {
        let text = read(source);
        let mut hidden = false;
        let mut exported = false;
        for line in text.lines() {
            let line = line.trim_end();
            // Items (a macro's, such as `writes!`'s enum, too) at any indentation; `use`
            // declarations, attributes and macros at the top level only.
            if line.starts_with(char::is_whitespace) {
                let item = line.trim_start();
                for keyword in ["pub struct ", "pub enum "] {
                    if let Some(rest) = item.strip_prefix(keyword) {
                        names.insert(ident(rest).to_owned());
                    }
                }
                continue;
            }
            if line.starts_with("#[doc(hidden)]") {
                hidden = true;
                continue;
            }
            if line.starts_with("#[macro_export]") {
                exported = true;
                continue;
            }
            if let Some(rest) = line.strip_prefix("macro_rules! ") {
                if exported && !hidden {
                    names.insert(ident(rest).to_owned());
                }
            } else if let Some(rest) = line.strip_prefix("pub use ") {
                let path = rest.trim_end_matches(';');
                if let Some(group) = path.find('{') {
                    let mut group_text = path[group + 1..].to_owned();
                    // A group over several lines.
                    if !group_text.contains('}') {
                        let after = &text[text.find(line).unwrap() + line.len()..];
                        group_text.push_str(&after[..after.find('}').unwrap() + 1]);
                    }
                    names.extend(group_heads(&group_text).into_iter().filter(|n| n != "self"));
                } else if let Some((_, alias)) = path.split_once(" as ") {
                    names.insert(alias.trim().to_owned());
                } else if path.contains("::") {
                    names.insert(path.rsplit("::").next().unwrap().to_owned());
                }
            } else {
                for keyword in [
                    "pub struct ",
                    "pub enum ",
                    "pub fn ",
                    "pub const fn ",
                    "pub const ",
                    "pub static ",
                    "pub type ",
                    "pub trait ",
                ] {
                    if let Some(rest) = line.strip_prefix(keyword) {
                        names.insert(ident(rest).to_owned());
                    }
                }
            }
            if !line.starts_with("#[") {
                hidden = false;
                exported = false;
            }
        }
    }
    names
}

/// A crate and the names its root exports.
struct Crate {
    name: &'static str,
    root: BTreeSet<String>,
}

/// Every path of `text` through one of `crates` (by its name, or an alias `use ... as x` gives
/// it) whose first segment after the crate is not a root name: `(line, path)`.
fn violations(text: &str, crates: &[Crate]) -> Vec<(usize, String)> {
    // The names each crate goes by in `text`.
    let mut names: Vec<(String, &Crate)> = Vec::new();
    for krate in crates {
        names.push((krate.name.to_owned(), krate));
        for pattern in [
            format!("use {} as ", krate.name),
            format!("{}::{{self as ", krate.name),
        ] {
            let mut rest = text;
            while let Some(at) = rest.find(&pattern) {
                rest = &rest[at + pattern.len()..];
                let alias = ident(rest).to_owned();
                if !names.iter().any(|(name, _)| *name == alias) {
                    names.push((alias, krate));
                }
            }
        }
    }
    let mut found = Vec::new();
    for (number, line) in text.lines().enumerate() {
        for (name, krate) in &names {
            let prefix = format!("{name}::");
            let mut from = 0;
            while let Some(at) = line[from..].find(&prefix) {
                let start = from + at;
                from = start + prefix.len();
                if line[..start].chars().next_back().is_some_and(is_ident) {
                    continue;
                }
                let rest = &line[from..];
                let heads = match rest.strip_prefix('{') {
                    Some(group) => group_heads(group),
                    None => vec![ident(rest).to_owned()],
                };
                for head in heads {
                    if head != "self" && !krate.root.contains(&head) {
                        found.push((number + 1, format!("{name}::{head}")));
                    }
                }
            }
        }
    }
    found
}

/// The Rust code blocks of a Markdown file, joined.
fn rust_blocks(markdown: &str) -> String {
    let mut code = String::new();
    let mut inside = false;
    for line in markdown.lines() {
        if line.starts_with("```") {
            inside = !inside && line.starts_with("```rust");
            continue;
        }
        if inside {
            code.push_str(line);
        }
        code.push('\n');
    }
    code
}

fn library() -> Crate {
    Crate {
        name: "ic_rusqlite_batch",
        root: root_names(&[
            "src/ic_rusqlite_batch/src/lib.rs",
            "src/ic_rusqlite_batch/src/macros.rs",
        ]),
    }
}

/// The library's root is what a canister author needs for declared writes, client batches
/// and the queue: these 13 names (a change to them is a change to this list).
#[test]
fn the_library_s_root_is_its_common_case() {
    let root: Vec<String> = library().root.into_iter().collect();
    assert_eq!(
        root,
        [
            "MethodClass",
            "QueryError",
            "Setup",
            "Ticket",
            "WriteError",
            "canister_methods",
            "client_batches",
            "query",
            "single_writes",
            "submit",
            "update",
            "with_connection",
            "writes",
        ]
    );
}

/// The todo store, the notes store, this client, the guide's code and the library README's
/// code use root names only.
#[test]
fn the_examples_and_the_client_use_root_names_only() {
    let crates = [
        library(),
        Crate {
            name: "ic_batch_client",
            // Its transports and drivers are modules by design, one per feature (the client
            // README's "Transports and drivers"): `tokio_driver::run`, `agent::AgentTransport`.
            root: root_names(&["src/batch_client/src/lib.rs"])
                .into_iter()
                .chain(
                    ["agent", "canister", "pocket_ic", "tokio_driver"]
                        .into_iter()
                        .map(String::from),
                )
                .collect(),
        },
        Crate {
            name: "todo_canister",
            root: root_names(&["examples/todo_canister/src/lib.rs"]),
        },
    ];
    assert!(crates[1].root.contains("Declared"));
    assert!(crates[2].root.contains("TodoWrite"));
    let sources = [
        (
            "examples/todo_canister/src/lib.rs",
            read("examples/todo_canister/src/lib.rs"),
        ),
        (
            "examples/notes_canister/src/lib.rs",
            read("examples/notes_canister/src/lib.rs"),
        ),
        (
            "examples/todo_client/src/lib.rs",
            read("examples/todo_client/src/lib.rs"),
        ),
        ("docs/guide.md", rust_blocks(&read("docs/guide.md"))),
        (
            "src/ic_rusqlite_batch/README.md",
            rust_blocks(&read("src/ic_rusqlite_batch/README.md")),
        ),
    ];
    let mut all = Vec::new();
    for (path, text) in &sources {
        let found = violations(text, &crates);
        all.extend(
            found
                .into_iter()
                .map(|(line, name)| format!("{path}:{line}: {name}")),
        );
    }
    assert!(
        all.is_empty(),
        "names that are not root names:\n{}",
        all.join("\n")
    );
}

/// The check fails where a module's name is used, through the crate's name, an alias or a
/// `use` group, and not for root names or for other crates' paths.
#[test]
fn a_path_through_a_module_is_found() {
    let crates = [library()];
    let text = "use ic_rusqlite_batch::{self as batch, canister::submit_op, Setup};\n\
                static S: batch::Setup = todo!();\n\
                fn f() { batch::canister::write_now(op); ic_rusqlite_batch::declared::execute(op); }\n\
                #[ic_cdk::query(guard = \"batch::canister::query_guard\")]\n\
                fn g() { notbatch::x(); std::mem::drop(batch::submit(op)); }\n";
    assert_eq!(
        violations(text, &crates),
        [
            (1, "ic_rusqlite_batch::canister".to_owned()),
            (3, "ic_rusqlite_batch::declared".to_owned()),
            (3, "batch::canister".to_owned()),
            (4, "batch::canister".to_owned()),
        ]
    );
}

/// The declaration the library README shows is the todo store's, write for write: a client
/// built from the README's snippet packs for the canister's digest.
#[test]
fn the_readme_shows_the_todo_store_s_declaration() {
    let declaration = |text: &str, file: &str| -> String {
        let start = text
            .find("batch::writes! {")
            .unwrap_or_else(|| panic!("{file} declares no writes"));
        let end = start
            + text[start..]
                .find("\n}\n")
                .unwrap_or_else(|| panic!("{file}: an unclosed writes!"));
        text[start..end].to_owned()
    };
    let example = read("examples/todo_canister/src/lib.rs");
    let readme = read("src/ic_rusqlite_batch/README.md");
    // The README's first declaration after the section that names the todo store.
    let from = readme
        .find("## Use: declare your writes once")
        .expect("the README's section on declared writes");
    assert_eq!(
        declaration(&readme[from..], "src/ic_rusqlite_batch/README.md"),
        declaration(&example, "examples/todo_canister/src/lib.rs"),
        "the README's declaration differs from examples/todo_canister's"
    );
}
