#!/usr/bin/env python3
"""A map of the workspace's Rust code for reviewers (scripts/structure.sh runs it).

For each crate under src/ and examples/ (a directory with a Cargo.toml) it prints the longest
functions (file:line, name, lines from the `fn` line to its closing brace) and every pair of
files of the crate that import each other. A file imports another when it names a module the
other file holds: `crate::a::b` (in a `use` or inline), `super::...` at the top of a file, or a
child module's name; a path resolves to the deepest file whose module path is a prefix of it.
The crate root (lib.rs, main.rs) is left out, as it declares every module. It is not a gate:
it always exits 0.
"""

import os
import re
import sys

TOP = 10
SKIP_DIRS = {"target", "node_modules", ".git"}


def blank_literals(text):
    """`text` with comments, strings and char literals replaced by spaces (newlines kept), so
    that braces and paths are found in code only."""
    out = []
    i, n = 0, len(text)

    def keep_newlines(s):
        return "".join("\n" if c == "\n" else " " for c in s)

    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append(keep_newlines(text[i:j]))
            i = j
        elif (m := re.match(r'b?r(#*)"', text[i:i + 260])) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            end = '"' + m.group(1)
            j = text.find(end, i + m.end())
            j = n if j < 0 else j + len(end)
            out.append(keep_newlines(text[i:j]))
            i = j
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append(keep_newlines(text[i:j + 1]))
            i = j + 1
        elif c == "'":
            # A char literal ('x', '\n', '\u{..}') or a lifetime ('a).
            m = re.match(r"'(\\u\{[0-9a-fA-F]*\}|\\.|[^\\'])'", text[i:i + 12])
            if m:
                out.append(" " * m.end())
                i += m.end()
            else:
                out.append(c)
                i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


FN = re.compile(r"^[ \t]*(?:pub(?:\([^)]*\))?\s+)?(?:(?:const|async|unsafe|extern(?:\s+\"[^\"]*\")?)\s+)*fn\s+([A-Za-z_][A-Za-z0-9_]*)", re.M)


def functions(code):
    """(line, name, lines) of every function with a body in blanked `code`."""
    found = []
    for m in FN.finditer(code):
        # The body opens at the first `{` before any `;` (a declaration without body).
        j = m.end()
        depth_paren = 0
        while j < len(code):
            ch = code[j]
            if ch in "([<":
                depth_paren += 1
            elif ch in ")]>":
                depth_paren -= 1
            elif ch == ";" and depth_paren <= 0:
                j = -1
                break
            elif ch == "{" and depth_paren <= 0:
                break
            j += 1
        if j < 0 or j >= len(code):
            continue
        depth, k = 0, j
        while k < len(code):
            if code[k] == "{":
                depth += 1
            elif code[k] == "}":
                depth -= 1
                if depth == 0:
                    break
            k += 1
        start = code.count("\n", 0, m.start()) + 1
        end = code.count("\n", 0, k) + 1
        found.append((start, m.group(1), end - start + 1))
    return found


def rust_files(crate_dir):
    for root, dirs, files in os.walk(crate_dir):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS)
        for f in sorted(files):
            if f.endswith(".rs"):
                yield os.path.join(root, f)


def module_of(src_dir, path):
    """The module path (tuple) of a file under src/, () for the crate root."""
    rel = os.path.relpath(path, src_dir)[:-3].split(os.sep)
    if rel[-1] in ("mod", "lib", "main"):
        rel = rel[:-1]
    return tuple(rel)


def top_level(code):
    """`code` with everything inside braces blanked (the file's top-level items only)."""
    out, depth = [], 0
    for ch in code:
        if ch == "}":
            depth -= 1
        out.append(ch if depth == 0 or ch == "\n" else " ")
        if ch == "{":
            depth += 1
    return "".join(out)


PATH = re.compile(r"(?<![A-Za-z0-9_:])((?:crate|super|self|[a-z_][a-z0-9_]*)(?:::[A-Za-z_][A-Za-z0-9_]*)+)")


def expand_uses(code):
    """The paths of `use` trees in `code`, groups expanded (`a::{b, c::d}` -> a::b, a::c::d)."""
    paths = []

    def expand(prefix, tree):
        tree = tree.strip()
        if not tree:
            return
        m = re.match(r"^(.*?)::\s*\{(.*)\}$", tree, re.S)
        if m:
            base = prefix + [p for p in m.group(1).split("::") if p]
            depth, part = 0, ""
            for ch in m.group(2) + ",":
                if ch == "," and depth == 0:
                    expand(base, part)
                    part = ""
                    continue
                depth += ch == "{"
                depth -= ch == "}"
                part += ch
            return
        name = re.split(r"\s+as\s+", tree)[0].strip()
        paths.append("::".join(prefix + [p for p in name.split("::") if p]))

    for m in re.finditer(r"\buse\s+([^;]*);", code):
        expand([], m.group(1))
    return paths


def imports(module, code, modules):
    """The modules (of `modules`) a file whose module is `module` names."""
    targets = set()
    top = top_level(code)
    candidates = set(PATH.findall(code)) | set(expand_uses(code))
    candidates_top = set(PATH.findall(top)) | set(expand_uses(top))
    for path in candidates:
        parts = path.split("::")
        if parts[0] == "crate":
            full = parts[1:]
        elif parts[0] in ("super", "self"):
            # Only at the top of a file: inside an inline module they name the file itself.
            if path not in candidates_top:
                continue
            base = list(module)
            while parts and parts[0] in ("super", "self"):
                if parts[0] == "super" and base:
                    base.pop()
                parts = parts[1:]
            full = base + parts
        elif tuple(module) + (parts[0],) in modules:
            full = list(module) + parts
        else:
            continue
        best = None
        for k in range(len(full), 0, -1):
            if tuple(full[:k]) in modules:
                best = tuple(full[:k])
                break
        if best and best != tuple(module):
            targets.add(best)
    return targets


def crates(root):
    for parent in ("src", "examples"):
        base = os.path.join(root, parent)
        if not os.path.isdir(base):
            continue
        for name in sorted(os.listdir(base)):
            d = os.path.join(base, name)
            if os.path.isfile(os.path.join(d, "Cargo.toml")):
                yield d


def report(root, crate_dir):
    rel_crate = os.path.relpath(crate_dir, root)
    fns = []
    codes = {}
    for path in rust_files(crate_dir):
        with open(path, encoding="utf-8", errors="replace") as f:
            code = blank_literals(f.read())
        codes[path] = code
        rel = os.path.relpath(path, root)
        for line, name, lines in functions(code):
            fns.append((lines, rel, line, name))
    print(f"== {rel_crate}")
    if not fns:
        print("  (no Rust functions)")
    else:
        print(f"  longest functions:")
        for lines, rel, line, name in sorted(fns, key=lambda f: (-f[0], f[1], f[2]))[:TOP]:
            print(f"    {lines:5}  {name}  {rel}:{line}")

    src_dir = os.path.join(crate_dir, "src")
    files = {}
    for path in codes:
        if not path.startswith(src_dir + os.sep) or os.sep + "bin" + os.sep in path:
            continue
        module = module_of(src_dir, path)
        if module:
            files[module] = path
    edges = {m: imports(m, codes[p], files) for m, p in files.items()}
    circles = sorted(
        (files[a], files[b])
        for a in edges for b in edges[a]
        if a in edges.get(b, ()) and files[a] < files[b]
    )
    if circles:
        print("  files that import each other:")
        for a, b in circles:
            print(f"    {os.path.relpath(a, root)} <-> {os.path.relpath(b, root)}")
    else:
        print("  files that import each other: none")


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), ".."))
    only = sys.argv[2:]
    for crate_dir in crates(root):
        if only and not any(os.path.basename(crate_dir) == o for o in only):
            continue
        try:
            report(root, crate_dir)
        except Exception as e:  # a map, not a gate
            print(f"== {os.path.relpath(crate_dir, root)}: not read ({e})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
