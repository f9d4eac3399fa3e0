#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""check_sizes.py: fails when a file of daemon/ or client/ is over 600 lines, or a function
over 80, naming each offender.

What is counted:
  - a file: its lines, less the lines of its tables of data;
  - a C function: from the line of its opening brace to the line of its closing brace, both
    included, less the tables inside it; a Python function (or method): from its "def" line
    to its last line, less the same;
  - a table of data: in C, the initializer of an array (`name[...] = { ... }`, at file level
    or in a function); in Python, a list, tuple, dict or set literal assigned at module level.
    Initializers of a single struct are code, not tables: they count.
EXEMPT names the files allowed to be longer, each with the reason.

Usage: check_sizes.py [--root DIR] [--figures]
"""
import argparse
import ast
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import csource  # noqa: E402

ROOTS = ("daemon", "client")
FILE_MAX = 600
FUNCTION_MAX = 80
EXEMPT = {
    "client/include/rocmmem.h": "the one public header (DESIGN.md), the API's documentation",
}


def c_sizes(path):
    src = csource.read(path)
    lines = src.nlines - len(src.table_lines)
    funcs = []
    for f in src.functions:
        span = range(f.open_line, f.close_line + 1)
        n = len(span) - len(src.table_lines.intersection(span))
        funcs.append((f.name, f.open_line, n))
    return lines, funcs


def py_sizes(path):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    tree = ast.parse(text, path)
    tables = set()
    for node in tree.body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(
                node.value, (ast.List, ast.Tuple, ast.Dict, ast.Set)):
            tables.update(range(node.value.lineno, node.value.end_lineno + 1))
    lines = text.count("\n") + (0 if text.endswith("\n") or not text else 1) - len(tables)
    funcs = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            span = range(node.lineno, node.end_lineno + 1)
            funcs.append((node.name, node.lineno, len(span) - len(tables.intersection(span))))
    return lines, funcs


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", default=os.path.join(os.path.dirname(__file__), "..", ".."))
    ap.add_argument("--figures", action="store_true")
    args = ap.parse_args()
    root = os.path.abspath(args.root)
    long_files, long_funcs, nfiles, nfuncs = [], [], 0, 0
    for top in ROOTS:
        for base, dirs, names in os.walk(os.path.join(root, top)):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            for name in sorted(names):
                path = os.path.join(base, name)
                rel = os.path.relpath(path, root)
                if name.endswith((".c", ".h")):
                    lines, funcs = c_sizes(path)
                elif name.endswith(".py"):
                    lines, funcs = py_sizes(path)
                else:
                    continue
                nfiles += 1
                nfuncs += len(funcs)
                if lines > FILE_MAX and rel not in EXEMPT:
                    long_files.append("%s: %d lines (at most %d)" % (rel, lines, FILE_MAX))
                for fname, line, n in funcs:
                    if n > FUNCTION_MAX:
                        long_funcs.append("%s:%d: %s: %d lines (at most %d)" % (
                            rel, line, fname, n, FUNCTION_MAX))
    for p in long_files + long_funcs:
        print(p)
    if args.figures:
        print("check_sizes: %d of %d files over %d lines, %d of %d functions over %d lines" % (
            len(long_files), nfiles, FILE_MAX, len(long_funcs), nfuncs, FUNCTION_MAX))
    print("check_sizes: %d problem(s)" % (len(long_files) + len(long_funcs)))
    return 1 if long_files or long_funcs else 0


if __name__ == "__main__":
    sys.exit(main())
