#!/usr/bin/env python3
"""Fails when two modules inside one crate import each other, directly or around a loop.

The crate graph keeps layers apart across crates (cargo refuses a cycle there); inside a
crate nothing does, so this checker reads every `use` and every written path that starts
with `crate::`, `super::` or `self::`, resolves it through the module tree (following
`pub use` re-exports), and turns it into an edge between two sibling modules: the first
modules at which the importer's and the imported item's paths part. A module that uses its
own ancestor or descendant adds no edge (a parent holds its children; `super::Error` in
a child is how Rust is written). Strongly connected components of more than one module
are cycles; each is printed with one import per edge, so it can be cut where it is
cheapest.

Usage: scripts/module-cycles.py [CRATE_SRC_DIR ...]   (default: every crate of the workspace)
       scripts/module-cycles.py --self-test           (the checker on crates written to find)
Exit status 1 when a cycle is found (or the self-test fails).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent



def workspace_crates() -> list[Path]:
    """The source directory of every library and binary of the workspace's crates."""
    metadata = json.loads(
        subprocess.run(
            ["cargo", "metadata", "--no-deps", "--format-version", "1", "--offline"],
            cwd=ROOT, check=True, capture_output=True, text=True,
        ).stdout
    )
    dirs = {
        Path(target["src_path"]).parent
        for package in metadata["packages"]
        for target in package["targets"]
        if set(target["kind"]) & {"lib", "bin"}
    }
    return sorted(dirs)


IDENT = r"[A-Za-z_][A-Za-z0-9_]*"


def strip_comments_and_strings(text: str) -> str:
    """Blanks comments, string and char literals, keeping line numbers."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
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
            out.append("\n" * text.count("\n", i, j))
            i = j
        elif c == "r" and re.match(r'r#*"', text[i:i + 260]) and not re.match(r"[A-Za-z0-9_]", text[i - 1:i] or " "):
            hashes = re.match(r'r(#*)"', text[i:]).group(1)
            end = text.find('"' + hashes, i + len(hashes) + 2)
            end = n if end < 0 else end + 1 + len(hashes)
            out.append('""' + "\n" * text.count("\n", i, end))
            i = end
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append('""' + "\n" * text.count("\n", i, j))
            i = j + 1
        elif c == "'" and (m := re.match(r"'(\\u\{[0-9a-fA-F]+\}|\\.|[^\\'])'", text[i:i + 12])):
            out.append("' '")
            i += m.end()
        else:
            out.append(c)
            i += 1
    return "".join(out)


class Module:
    def __init__(self, path: tuple[str, ...], file: Path):
        self.path = path
        self.file = file
        self.children: dict[str, tuple[str, ...]] = {}
        self.reexports: dict[str, tuple[str, ...]] = {}
        # (line, path segments relative to this module, the path as written) for every
        # use and written path
        self.refs: list[tuple[int, list[str], str]] = []


USE_RE = re.compile(r"\b(pub(?:\([^)]*\))?\s+)?use\s+([^;]+);", re.S)
MOD_RE = re.compile(r"^\s*(?:#\[[^\]]*\]\s*)*(?:pub(?:\([^)]*\))?\s+)?mod\s+(" + IDENT + r")\s*(;|\{)", re.M)
PATH_RE = re.compile(r"(?<![A-Za-z0-9_:])((?:crate|super|self)(?:::" + IDENT + r")+)")
PATH_ATTR_RE = re.compile(r'#\[path\s*=\s*"([^"]+)"\]\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+(' + IDENT + r")")


def module_file(dir_: Path, name: str) -> Path | None:
    for candidate in (dir_ / f"{name}.rs", dir_ / name / "mod.rs"):
        if candidate.is_file():
            return candidate
    return None


def roots_of(src: Path) -> list[Path]:
    """The crate roots in `src`: lib.rs and main.rs are two crates sharing a directory
    (main.rs reaches the library by the crate's name), each checked on its own."""
    return [p for p in (src / "lib.rs", src / "main.rs") if p.is_file()]


def load_crate(src: Path, root: Path) -> dict[tuple[str, ...], Module]:
    modules: dict[tuple[str, ...], Module] = {}

    def load(path: tuple[str, ...], file: Path, child_dir: Path) -> None:
        raw = file.read_text()
        text = strip_comments_and_strings(raw)
        mod = Module(path, file)
        modules[path] = mod
        path_attrs = {m.group(2): m.group(1) for m in PATH_ATTR_RE.finditer(raw)}
        # Inline modules (`mod tests { ... }`) are part of their file's module here: their
        # imports are the file's, and `super::` inside them is counted from the file.
        for m in MOD_RE.finditer(text):
            name, kind = m.group(1), m.group(2)
            if kind != ";":
                continue
            if name in path_attrs:
                child = (file.parent / path_attrs[name]).resolve()
                if not child.is_file():
                    continue
                sub_dir = child.parent / child.stem if child.name != "mod.rs" else child.parent
            else:
                child = module_file(child_dir, name)
                if child is None:
                    continue
                sub_dir = child.parent if child.name == "mod.rs" else child.parent / name
            mod.children[name] = path + (name,)
            load(path + (name,), child, sub_dir)
        inline_depth = inline_module_depths(text)
        for m in USE_RE.finditer(text):
            line = text.count("\n", 0, m.start()) + 1
            depth = inline_depth(m.start())
            for segs, alias, name in use_entries(m.group(2)):
                written = "::".join(segs)
                if depth == 0 and segs[0] in mod.children:
                    segs = ["self"] + segs  # `use child::Item` names this module's child
                segs = adjust_super(segs, depth)
                mod.refs.append((line, segs, written))
                if m.group(1) and segs and segs[0] in ("crate", "super", "self") and segs[-1] != "*":
                    mod.reexports[alias or name] = tuple(segs)
        for m in PATH_RE.finditer(text):
            line = text.count("\n", 0, m.start()) + 1
            written = m.group(1)
            mod.refs.append((line, adjust_super(written.split("::"), inline_depth(m.start())), written))

    load(("crate",), root, src)
    return modules


def inline_module_depths(text: str):
    """Returns f(offset) -> how many inline `mod x { }` blocks enclose offset."""
    spans = []
    for m in re.finditer(r"\bmod\s+" + IDENT + r"\s*\{", text):
        start = m.end() - 1
        depth, j = 0, start
        while j < len(text):
            if text[j] == "{":
                depth += 1
            elif text[j] == "}":
                depth -= 1
                if depth == 0:
                    break
            j += 1
        spans.append((start, j))
    return lambda off: sum(1 for s, e in spans if s < off < e)


def adjust_super(segs: list[str], depth: int) -> list[str]:
    """Inside `depth` inline modules, the first `depth` leading `super`s name the file's module."""
    i = 0
    while depth and i < len(segs) and segs[i] == "super":
        depth -= 1
        i += 1
    if i:
        rest = segs[i:]
        return ["self"] + rest if rest else ["self"]
    if depth and segs and segs[0] == "self":
        # `self::x` inside an inline module names the inline module's items: its own.
        return []
    return segs


def use_entries(tree: str):
    """Yields (segments, alias, last name) for each path a use tree names."""
    tree = re.sub(r"\s+as\s+", " as ", tree.strip())
    tree = re.sub(r"\s*(::|,|\{|\})\s*", r"\1", tree)
    out = []

    def walk(s: str, prefix: list[str]) -> None:
        parts, depth, cur = [], 0, ""
        for ch in s:
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
            if ch == "," and depth == 0:
                parts.append(cur)
                cur = ""
            else:
                cur += ch
        if cur.strip():
            parts.append(cur)
        for part in parts:
            part = part.strip()
            if not part:
                continue
            brace = part.find("{")
            if brace >= 0:
                head = [p for p in part[:brace].split("::") if p]
                walk(part[brace + 1:part.rfind("}")], prefix + head)
                continue
            alias = None
            if " as " in part:
                part, alias = part.split(" as ", 1)
            segs = [p for p in part.split("::") if p]
            if segs and segs[-1] == "self":
                segs = segs[:-1]
            full = prefix + segs
            if full:
                out.append((full, alias if alias != "_" else None, full[-1]))

    walk(tree, [])
    return out


def absolute(segs: list[str], here: tuple[str, ...]) -> list[str] | None:
    """Makes a path start at `crate`, or None for a path into another crate."""
    if not segs:
        return None
    if segs[0] == "crate":
        return segs
    if segs[0] in ("self", "super"):
        base = list(here)
        i = 0
        if segs[0] == "self":
            i = 1
        while i < len(segs) and segs[i] == "super":
            if len(base) == 1:
                return None
            base.pop()
            i += 1
        return base + segs[i:]
    return None


def resolve(segs: list[str], modules: dict[tuple[str, ...], Module]) -> tuple[str, ...]:
    """The module a path's item lives in, following re-exports (bounded)."""
    for _ in range(16):
        cur = ("crate",)
        i = 1
        redirected = False
        while i < len(segs):
            mod = modules.get(cur)
            if mod is None:
                return cur
            name = segs[i]
            if name in mod.children:
                cur = mod.children[name]
                i += 1
                continue
            if name in mod.reexports:
                target = absolute(list(mod.reexports[name]), cur)
                if target is not None and target != segs[: i + 1]:
                    segs = target + segs[i + 1:]
                    redirected = True
                    break
            return cur
        if not redirected:
            return cur
    return cur


def shown(path: Path) -> Path:
    return path.relative_to(ROOT) if path.is_relative_to(ROOT) else path


def sibling_edge(a: tuple[str, ...], b: tuple[str, ...]):
    i = 0
    while i < len(a) and i < len(b) and a[i] == b[i]:
        i += 1
    if i == len(a) or i == len(b):
        return None  # same module, or an ancestor/descendant
    return a[: i + 1], b[: i + 1]


def cycles(src: Path) -> list[str]:
    return [c for root in roots_of(src) for c in cycles_of(src, root)]


def cycles_of(src: Path, root: Path) -> list[str]:
    modules = load_crate(src, root)
    edges: dict[tuple[str, ...], dict[tuple[str, ...], str]] = defaultdict(dict)
    for mod in modules.values():
        for line, segs, written in mod.refs:
            if not segs:
                continue
            target_path = absolute(segs, mod.path)
            if target_path is None:
                continue
            target = resolve(target_path, modules)
            edge = sibling_edge(mod.path, target)
            if edge is None:
                continue
            a, b = edge
            rel = shown(mod.file)
            edges[a].setdefault(b, f"{rel}:{line} {written}")
    found = []
    for comp in strongly_connected(edges):
        if len(comp) < 2:
            continue
        names = sorted("::".join(p) for p in comp)
        lines = [f"module cycle in {shown(root)}: {', '.join(names)}"]
        members = set(comp)
        for a in sorted(comp):
            for b, where in sorted(edges[a].items()):
                if b in members:
                    lines.append(f"  {'::'.join(a)} -> {'::'.join(b)}   ({where})")
        found.append("\n".join(lines))
    return found


def strongly_connected(edges):
    """Tarjan's algorithm, iterative."""
    index, low, on_stack, stack, result = {}, {}, set(), [], []
    counter = [0]
    nodes = set(edges) | {b for bs in edges.values() for b in bs}
    for root in sorted(nodes):
        if root in index:
            continue
        work = [(root, iter(sorted(edges.get(root, {}))))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, it = work[-1]
            advanced = False
            for nxt in it:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter[0]
                    counter[0] += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(edges.get(nxt, {})))))
                    advanced = True
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == node:
                        break
                result.append(comp)
    return result


# Small crates, each with the cycles the checker must report (as sorted module names).
SELF_TEST = [
    (
        "a grouped use through a re-export, and a child module's test reaching a sibling",
        {
            "lib.rs": "mod a;\nmod b;\npub use a::Thing;\n",
            "a/mod.rs": "mod inner;\npub struct Thing;\n#[cfg(test)]\nmod tests {\n    use super::super::b::Other;\n}\n",
            "a/inner.rs": "pub fn f() -> char { '{' }\n",
            "b/mod.rs": "use crate::{Thing as T, a::{self as _}};\npub struct Other;\n",
        },
        [["crate::a", "crate::b"]],
    ),
    (
        "paths in comments and strings, a parent using its child, a child its parent",
        {
            "lib.rs": "mod a;\nmod b;\n",
            "a/mod.rs": "mod inner;\n// crate::b::Other\nconst S: &str = \"crate::b::Other\";\npub fn g() { inner::f() }\n",
            "a/inner.rs": "pub fn f() { super::g() }\n",
            "b.rs": "pub struct Other;\nfn h() { crate::a::g() }\n",
        },
        [],
    ),
    (
        "three siblings in a loop through written paths, inside a nested module",
        {
            "lib.rs": "pub mod engine;\n",
            "engine/mod.rs": "mod x;\nmod y;\nmod z;\n",
            "engine/x.rs": "pub fn x() { super::y::y() }\n",
            "engine/y.rs": "use super::z;\npub fn y() { z::z() }\n",
            "engine/z.rs": "pub fn z() { crate::engine::x::x() }\n",
        },
        [["crate::engine::x", "crate::engine::y", "crate::engine::z"]],
    ),
]


def self_test() -> int:
    failed = 0
    for name, files, want in SELF_TEST:
        with tempfile.TemporaryDirectory() as tmp:
            src = Path(tmp)
            for rel, text in files.items():
                (src / rel).parent.mkdir(parents=True, exist_ok=True)
                (src / rel).write_text(text)
            got = [sorted(c.split(": ", 1)[1].split("\n")[0].split(", ")) for c in cycles(src)]
        if sorted(got) != sorted(want):
            print(f"self-test failed: {name}: found {got}, expected {want}", file=sys.stderr)
            failed += 1
    if failed:
        return 1
    print(f"self-test: {len(SELF_TEST)} crates checked as expected")
    return 0


def main(argv: list[str]) -> int:
    if argv == ["--self-test"]:
        return self_test()
    dirs = [Path(a).resolve() for a in argv] or workspace_crates()
    found = []
    for d in dirs:
        found += cycles(d)
    for f in found:
        print(f)
    if found:
        print(f"{len(found)} module cycle(s): cut one import of each (move the shared item down, or pass it in)", file=sys.stderr)
        return 1
    print(f"no module cycles in {len(dirs)} crates")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
