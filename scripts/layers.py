#!/usr/bin/env python3
"""The crate's floors and room sizes, checked (docs/STYLE.md, "Floors" and "Rooms and sizes").

    scripts/layers.py               # exit 1, naming each import up and each file too long
    scripts/layers.py --graph       # which top-level module imports which, then the check
    scripts/layers.py --root DIR    # check DIR/src instead (tests/layers.rs plants faults there)

A module of src/ imports only from modules on floors below its own (FLOORS, top down, as
src/lib.rs draws them); two modules on one floor do not import each other. An import is any path
`crate::NAME` (or `crate::{NAME, ..}`) in code outside tests and comments. A source file is at
most MAX_LINES lines before its test module, unless ALLOWED names it and says why.
"""
import os
import re
import sys

# Top down; modules on one floor are siblings that import neither each other nor anything above.
FLOORS = [
    ["cmd"],
    ["selfbench"],
    ["cli", "tui"],
    ["run"],
    ["live"],
    ["export"],
    ["summary"],
    ["runner"],
    ["event"],
    ["telemetry"],
    ["config"],
    ["sim", "serve"],
    ["workload"],
    ["client"],
    ["metrics"],
    ["fmt", "grammar"],
]

MAX_LINES = 650

# Files allowed past MAX_LINES, each with why it is one thing.
ALLOWED = {
}

REPO = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def floor_of():
    return {m: i for i, names in enumerate(FLOORS) for m in names}


def strip(src):
    """The code of `src` without comments, string and char literals, and #[cfg(test)] items."""
    out = []
    i, n = 0, len(src)
    while i < n:
        c = src[i]
        if src.startswith("//", i):
            j = src.find("\n", i)
            i = n if j < 0 else j
        elif src.startswith("/*", i):
            j = src.find("*/", i + 2)
            i = n if j < 0 else j + 2
        elif c == "r" and re.match(r'r#*"', src[i:i + 10]) and (i == 0 or not (src[i - 1].isalnum() or src[i - 1] == "_")):
            hashes = re.match(r'r(#*)"', src[i:]).group(1)
            end = '"' + hashes
            j = src.find(end, i + 2 + len(hashes))
            i = n if j < 0 else j + len(end)
            out.append('""')
        elif c == '"':
            j = i + 1
            while j < n and src[j] != '"':
                j += 2 if src[j] == "\\" else 1
            i = j + 1
            out.append('""')
        elif c == "'" and re.match(r"'(\\.|[^\\'])'|'\\(x..|u\{[0-9a-fA-F]+\})'", src[i:i + 12]):
            m = re.match(r"'(\\.|[^\\'])'|'\\(x..|u\{[0-9a-fA-F]+\})'", src[i:i + 12])
            i += len(m.group(0))
            out.append("' '")
        else:
            out.append(c)
            i += 1
    code = "".join(out)
    return drop_test_items(code)


def drop_test_items(code):
    """`code` without the items under #[cfg(test)] (a braced item, or `mod x;`)."""
    res = []
    i = 0
    for m in re.finditer(r"#\[cfg\(test\)\]", code):
        if m.start() < i:
            continue
        res.append(code[i:m.start()])
        j = m.end()
        # The item: up to its `;` or its balanced braces, whichever comes first.
        k = j
        while k < len(code) and code[k] not in "{;":
            k += 1
        if k < len(code) and code[k] == "{":
            depth = 0
            while k < len(code):
                if code[k] == "{":
                    depth += 1
                elif code[k] == "}":
                    depth -= 1
                    if depth == 0:
                        break
                k += 1
        i = k + 1
    res.append(code[i:])
    return "".join(res)


# `#[cfg(test)]`, or `#[cfg(any(test, feature = "fixtures"))]`: test code, and fixtures that
# the benches share with the tests.
TEST_GATE = r"#\[cfg\((?:test|any\(test[^\]]*)\)\]"


def test_files(root):
    """Files that are test modules: `#[cfg(test)] mod x;` makes x.rs (or x/mod.rs) one, and the
    files under x/ too."""
    tests = set()
    for dp, _, fs in os.walk(root):
        for f in fs:
            if not f.endswith(".rs"):
                continue
            p = os.path.join(dp, f)
            src = open(p, encoding="utf-8").read()
            here = dp if f in ("mod.rs", "lib.rs", "main.rs") else os.path.join(dp, f[:-3])
            for m in re.finditer(TEST_GATE + r"\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;", src):
                tests.add(os.path.normpath(os.path.join(here, m.group(1) + ".rs")))
                tests.add(os.path.normpath(os.path.join(here, m.group(1), "mod.rs")))
    return tests


def in_tests(path, tests, root):
    """Whether `path` is a test module, or inside the folder of one."""
    d = path
    while os.path.normpath(d) != os.path.normpath(root):
        if d in tests or os.path.join(d, "mod.rs") in tests:
            return True
        d = os.path.dirname(d)
    return False


def lines_before_tests(src):
    m = re.search(r"^#\[cfg\(test\)\]\s*\n\s*mod\s+\w+\s*\{", src, re.M)
    return src[: m.start()].count("\n") if m else src.count("\n")


def main(argv):
    repo = argv[argv.index("--root") + 1] if "--root" in argv else REPO
    root = os.path.join(repo, "src")
    floors = floor_of()
    tests = test_files(root)
    edges = {}
    problems = []
    for dp, _, fs in sorted(os.walk(root)):
        for f in sorted(fs):
            if not f.endswith(".rs"):
                continue
            p = os.path.normpath(os.path.join(dp, f))
            rel = os.path.relpath(p, root)
            top = rel.split(os.sep)[0].removesuffix(".rs")
            if top in ("lib", "main") or in_tests(p, tests, root):
                continue
            if top not in floors:
                problems.append(f"src/{rel}: module `{top}` is on no floor (add it to FLOORS in scripts/layers.py and to src/lib.rs's map)")
                continue
            src = open(p, encoding="utf-8").read()
            n = lines_before_tests(src)
            if n > MAX_LINES and f"src/{rel}" not in ALLOWED:
                problems.append(f"src/{rel}: {n} lines before its tests (more than {MAX_LINES}): split it along its seams, or allow it in scripts/layers.py with why")
            code = strip(src)
            names = set(re.findall(r"\bcrate::(\w+)", code))
            for group in re.findall(r"\bcrate::\{([^}]*)\}", code):
                names.update(re.findall(r"(?:^|[\s,{])(\w+)", group))
            for name in sorted(names):
                if name not in floors or name == top:
                    continue
                edges.setdefault(top, set()).add(name)
                if floors[name] <= floors[top]:
                    how = "a sibling on its floor" if floors[name] == floors[top] else "a floor above"
                    problems.append(f"src/{rel}: imports crate::{name}, {how} `{top}`")
    for f in ALLOWED:
        if not os.path.exists(os.path.join(repo, f)) and "--root" not in argv:
            problems.append(f"{f}: allowed in scripts/layers.py but not in the tree")
    if "--graph" in argv:
        for top in sorted(edges, key=lambda t: floors[t]):
            print(f"{top} -> {', '.join(sorted(edges[top], key=lambda t: floors[t]))}")
    for p in problems:
        print(p)
    if problems:
        print(f"layers: {len(problems)} problem(s)")
        return 1
    print(f"layers: {len(floors)} modules on {len(FLOORS)} floors, no import up, no file over {MAX_LINES} lines but {len(ALLOWED)} allowed")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
