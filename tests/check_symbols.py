#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""check_symbols.py: a shared library exports exactly its public API, each symbol in the
version node of the release that added it.

Three lists must be the same set of names: the functions the public header declares with its
export macro, the global names of the version script, and the library's defined dynamic
symbols (nm -D). Each symbol must carry, as its default version (name@@NODE), the node the
version script puts it in; the version script must name every symbol (no wildcard among the
globals), name each once, and hide everything else (local: *). With --soname, the library's
SONAME must be that.

Usage: check_symbols.py --lib LIB --map MAP --header HEADER --macro MACRO [--soname NAME]
       check_symbols.py --self-test
"""
import argparse
import re
import subprocess
import sys
import textwrap
import unittest


def header_exports(text, macro):
    """The functions text declares with macro in front (comments ignored)."""
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"#define[^\n]*(\\\n[^\n]*)*", " ", text)
    return re.findall(r"\b%s\b[^;{]*?\b(\w+)\s*\(" % re.escape(macro), text)


def map_nodes(text):
    """[(node, [global names], local wildcard seen, parent or None)] of a version script."""
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"#[^\n]*", " ", text)
    nodes = []
    for m in re.finditer(r"([A-Za-z_][\w.]*)\s*\{(.*?)\}\s*([A-Za-z_][\w.]*)?\s*;", text,
                         flags=re.S):
        names, local, section = [], False, None
        for item in re.split(r"[;\s]+", m.group(2)):
            if not item:
                continue
            if item in ("global:", "local:"):
                section = item[:-1]
            elif section == "local":
                local = local or item == "*"
            else:
                names.append(item)
        nodes.append((m.group(1), names, local, m.group(3)))
    return nodes


def library_symbols(nm_output):
    """{name: (node, default)} of the defined dynamic symbols nm -D printed; version nodes
    themselves (absolute symbols named after a node) are left out."""
    found = {}
    for line in nm_output.splitlines():
        m = re.match(r"^[0-9a-f]*\s+([A-Za-z])\s+([^@\s]+)(@@?)?(\S+)?$", line.strip())
        if not m or m.group(1) == "A":
            continue
        found[m.group(2)] = (m.group(4), m.group(3) == "@@")
    return found


def problems(header_names, nodes, symbols):
    """Everything wrong, as sentences (none: all agree)."""
    out = []
    in_map = {}
    for node, names, _, _ in nodes:
        for n in names:
            if any(ch in n for ch in "*?["):
                out.append("the version script exports a pattern, not a name: %s in %s"
                           % (n, node))
            elif n in in_map:
                out.append("%s is in the version script twice (%s and %s)"
                           % (n, in_map[n], node))
            else:
                in_map[n] = node
    if not nodes:
        out.append("the version script has no version node")
    elif not any(local for _, _, local, _ in nodes):
        out.append("the version script does not hide the rest (local: *;)")
    known = {node for node, _, _, _ in nodes}
    for node, _, _, parent in nodes:
        if parent and parent not in known:
            out.append("node %s inherits %s, which the script does not define" % (node, parent))
    header, script, lib = set(header_names), set(in_map), set(symbols)
    for name in sorted(header - script):
        out.append("%s is declared in the header but missing from the version script" % name)
    for name in sorted(script - header):
        out.append("%s is in the version script but not declared in the header" % name)
    for name in sorted(script - lib):
        out.append("%s is in the version script but the library does not define it" % name)
    for name in sorted(lib - script):
        out.append("the library exports %s, which the version script does not name" % name)
    for name in sorted(script & lib):
        node, default = symbols[name]
        if node != in_map[name] or not default:
            out.append("%s is exported as %s%s%s, not %s@@%s"
                       % (name, name, "@@" if default else "@", node, name, in_map[name]))
    return out


def soname(lib):
    out = subprocess.run(["objdump", "-p", lib], capture_output=True, text=True,
                         check=True).stdout
    m = re.search(r"^\s*SONAME\s+(\S+)", out, flags=re.M)
    return m.group(1) if m else None


class SelfTest(unittest.TestCase):
    """The checker catches each kind of disagreement it is there for."""

    HEADER = textwrap.dedent("""\
        #define X_EXPORT __attribute__((visibility("default")))
        /* X_EXPORT int x_commented(void); */
        X_EXPORT int x_one(void);
        X_EXPORT const struct x_info *
        x_two(int a,
              int b);
        int x_private(void);
        """)
    MAP = "X_1.0 {\n global:\n  x_one;\n  x_two;\n local:\n  *;\n};\n"
    NM = ("0000000000000000 A X_1.0\n"
          "0000000000001000 T x_one@@X_1.0\n"
          "0000000000001010 T x_two@@X_1.0\n")

    def check(self, header=HEADER, script=MAP, nm=NM):
        return problems(header_exports(header, "X_EXPORT"), map_nodes(script),
                        library_symbols(nm))

    def test_agreement_passes(self):
        self.assertEqual(self.check(), [])
        self.assertEqual(sorted(header_exports(self.HEADER, "X_EXPORT")), ["x_one", "x_two"])

    def test_a_later_node_inheriting_the_first_passes(self):
        script = self.MAP + "X_1.1 {\n global:\n  x_three;\n} X_1.0;\n"
        header = self.HEADER + "X_EXPORT void x_three(void);\n"
        nm = self.NM + "0000000000000000 A X_1.1\n0000000000001020 T x_three@@X_1.1\n"
        self.assertEqual(self.check(header, script, nm), [])

    def test_wildcard_is_refused(self):
        script = "X_1.0 {\n global:\n  x_*;\n local:\n  *;\n};\n"
        self.assertTrue(any("pattern" in p for p in self.check(script=script)))

    def test_header_without_map_entry(self):
        header = self.HEADER + "X_EXPORT int x_new(void);\n"
        self.assertIn("x_new is declared in the header but missing from the version script",
                      self.check(header=header))

    def test_library_exports_more(self):
        nm = self.NM + "0000000000001020 T x_leak\n"
        self.assertIn("the library exports x_leak, which the version script does not name",
                      self.check(nm=nm))

    def test_wrong_or_non_default_node(self):
        nm = self.NM.replace("x_two@@X_1.0", "x_two@X_0")
        self.assertIn("x_two is exported as x_two@X_0, not x_two@@X_1.0", self.check(nm=nm))

    def test_missing_local_and_duplicates(self):
        script = "X_1.0 {\n global:\n  x_one;\n  x_two;\n  x_one;\n};\n"
        found = self.check(script=script)
        self.assertIn("the version script does not hide the rest (local: *;)", found)
        self.assertIn("x_one is in the version script twice (X_1.0 and X_1.0)", found)

    def test_unknown_parent(self):
        script = self.MAP + "X_2.0 {\n global:\n  x_three;\n} X_1.5;\n"
        self.assertIn("node X_2.0 inherits X_1.5, which the script does not define",
                      self.check(script=script))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lib")
    ap.add_argument("--map")
    ap.add_argument("--header")
    ap.add_argument("--macro")
    ap.add_argument("--soname")
    ap.add_argument("--self-test", action="store_true")
    args = ap.parse_args()
    if args.self_test:
        result = unittest.main(argv=[sys.argv[0], "-v", "SelfTest"], exit=False).result
        return 0 if result.wasSuccessful() else 1
    with open(args.header, encoding="utf-8") as f:
        header_names = header_exports(f.read(), args.macro)
    with open(args.map, encoding="utf-8") as f:
        nodes = map_nodes(f.read())
    nm = subprocess.run(["nm", "-D", "--defined-only", args.lib], capture_output=True,
                        text=True, check=True).stdout
    symbols = library_symbols(nm)
    found = problems(header_names, nodes, symbols)
    if args.soname and soname(args.lib) != args.soname:
        found.append("%s's SONAME is %s, not %s" % (args.lib, soname(args.lib), args.soname))
    for p in found:
        print("check_symbols: " + p)
    print("check_symbols: %d symbols in %s: %s" % (
        len(symbols), ", ".join(n for n, _, _, _ in nodes), "agree" if not found else
        "%d problem(s)" % len(found)))
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
