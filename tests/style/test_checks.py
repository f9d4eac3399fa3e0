#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""test_checks.py: the layer and size checks, run on small trees made for each case: each
rule they enforce is broken once and must be reported, naming the files; a tree that keeps
the rules passes."""
import os
import subprocess
import sys
import tempfile
import textwrap
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))


def run(script, root, *args):
    p = subprocess.run([sys.executable, os.path.join(HERE, script), "--root", root] + list(args),
                       capture_output=True, text=True, timeout=120)
    return p.returncode, p.stdout + p.stderr


class Tree:
    """A scratch source tree with the project's top-level folders."""

    def __init__(self):
        self.dir = tempfile.TemporaryDirectory()
        self.root = self.dir.name
        for top in ("common", "daemon", "client"):
            os.makedirs(os.path.join(self.root, top))

    def write(self, rel, text):
        path = os.path.join(self.root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(textwrap.dedent(text))

    def pair(self, rel, header, source):
        self.write(rel + ".h", header)
        self.write(rel + ".c", '#include "%s.h"\n' % os.path.basename(rel) + source)


def layered(t):
    """A small tree that keeps the rules, with a hook from a lower layer to a higher one."""
    t.pair("common/size", "int size_round(int x);\n", "int size_round(int x) { return x; }\n")
    t.pair("daemon/base/ids", "#include <stdint.h>\nuint64_t ids_next(void);\n",
           "uint64_t ids_next(void) { return 1; }\n")
    t.pair("daemon/state/books",
           '#include "ids.h"\nstruct books { uint64_t n; };\nvoid books_add(struct books *b);\n',
           "void books_add(struct books *b) { b->n += ids_next(); }\n")
    t.pair("daemon/policy/decide",
           '#include "books.h"\nstruct decide_hooks { void (*told)(void *ctx); void *ctx; };\n'
           "int decide(const struct books *b, const struct decide_hooks *h);\n",
           "int decide(const struct books *b, const struct decide_hooks *h)\n{\n"
           "\tif (b->n)\n\t\th->told(h->ctx);\n\treturn 0;\n}\n")
    t.pair("daemon/net/conn", '#include "decide.h"\n#include "size.h"\nvoid conn_go(void);\n',
           "static void told(void *ctx) { (void)ctx; }\n"
           "void conn_go(void)\n{\n\tstruct books b = {0};\n"
           "\tstruct decide_hooks h = {.told = told};\n"
           "\tbooks_add(&b);\n\tdecide(&b, &h);\n\t(void)size_round(1);\n}\n")


class Layers(unittest.TestCase):
    def setUp(self):
        self.t = Tree()
        layered(self.t)
        self.addCleanup(self.t.dir.cleanup)

    def check(self):
        return run("check_layers.py", self.t.root)

    def test_layered_tree_passes(self):
        rc, out = self.check()
        self.assertEqual(rc, 0, out)
        self.assertIn("0 problem(s)", out)

    def test_circle_of_includes_is_named(self):
        self.t.pair("daemon/state/ring", '#include "ledger.h"\nint ring(void);\n',
                    "int ring(void) { return 0; }\n")
        self.t.pair("daemon/state/ledger", "int ledger(void);\n",
                    '#include "ring.h"\nint ledger(void) { return ring(); }\n')
        rc, out = self.check()
        self.assertEqual(rc, 1, out)
        self.assertIn("includes: circle of 2 units: daemon/state/ledger, daemon/state/ring", out)

    def test_upward_include_names_the_pair(self):
        self.t.write("daemon/state/books.c", '#include "books.h"\n#include "conn.h"\n'
                     "void books_add(struct books *b) { b->n++; }\n")
        rc, out = self.check()
        self.assertEqual(rc, 1, out)
        self.assertIn("daemon/state/books.c:2: includes daemon/net/conn.h (daemon/state) -> "
                      "daemon/net/conn (daemon/net): up a layer", out)

    def test_call_hidden_behind_one_shared_header_is_found(self):
        # One internal header declares both files' functions: no include goes up, calls do.
        self.t.write("client/lib/conn/internal.h", "int conn_send(void);\nint api_view(void);\n")
        self.t.write("client/lib/conn/conn.c", '#include "internal.h"\n'
                     "int conn_send(void) { return api_view(); }\n")
        self.t.write("client/lib/api/view.c", '#include "internal.h"\n'
                     "int api_view(void) { return conn_send(); }\n")
        rc, out = self.check()
        self.assertEqual(rc, 1, out)
        self.assertNotIn("includes: circle", out)
        self.assertIn("references: circle of 2 units: client/lib/api/view, client/lib/conn/conn",
                      out)
        self.assertIn("client/lib/conn/conn.c:2: uses api_view (client/lib/conn) -> "
                      "client/lib/api/view (client/lib/api): up a layer", out)

    def test_policy_may_not_reach_the_loop_through_a_header(self):
        self.t.write("daemon/state/books.h", "#include <uv.h>\nstruct books { int n; };\n"
                     "void books_add(struct books *b);\n")
        rc, out = self.check()
        self.assertEqual(rc, 1, out)
        self.assertIn("daemon/policy/decide.h (daemon/policy) includes <uv.h> through "
                      "daemon/state/books.h", out)

    def test_ambiguous_include_is_named(self):
        self.t.write("daemon/state/util.h", "int state_util(void);\n")
        self.t.write("daemon/net/util.h", "int net_util(void);\n")
        self.t.write("daemon/app/main.c", '#include "util.h"\nint main(void) { return 0; }\n')
        rc, out = self.check()
        self.assertEqual(rc, 1, out)
        self.assertIn('daemon/app/main.c:1: #include "util.h" could be ', out)

    def test_file_in_no_layer_is_named(self):
        self.t.write("daemon/stray.c", "int stray(void) { return 0; }\n")
        rc, out = self.check()
        self.assertEqual(rc, 1, out)
        self.assertIn("daemon/stray.c: in no layer", out)

    def test_another_programs_internals_are_out_of_reach(self):
        self.t.write("client/lib/conn/conn.c", "int conn_secret(void) { return 0; }\n")
        self.t.write("client/ctl/main.c", "int conn_secret(void);\n"
                     "int main(void) { return conn_secret(); }\n")
        rc, out = self.check()
        self.assertEqual(rc, 1, out)
        self.assertIn("client/ctl/main.c:2: uses conn_secret (client/ctl/main) -> "
                      "client/lib/conn/conn (client/lib/conn): into another program", out)

    def test_public_header_is_the_way_in(self):
        self.t.write("client/include/rocmmem.h",
                     "typedef struct rocmmem_client rocmmem_client;\n"
                     "int rocmmem_open(rocmmem_client **c);\n")
        self.t.write("client/lib/conn/conn.c", '#include "rocmmem.h"\n'
                     "struct rocmmem_client { int fd; };\n"
                     "int rocmmem_open(rocmmem_client **c) { *c = 0; return 0; }\n")
        self.t.write("client/ctl/main.c", '#include "rocmmem.h"\n'
                     "int main(void) { rocmmem_client *c; return rocmmem_open(&c); }\n")
        rc, out = self.check()
        self.assertEqual(rc, 0, out)

    def test_real_tree_is_read_whole(self):
        rc, out = run("check_layers.py", ROOT, "--figures")
        self.assertIn(rc, (0, 1), out)
        self.assertIn("== includes graph", out)
        self.assertIn("== calls graph", out)
        self.assertRegex(out, r"check_layers: \d+ problem\(s\) in \d+ files")


class Sizes(unittest.TestCase):
    def setUp(self):
        self.t = Tree()
        self.addCleanup(self.t.dir.cleanup)

    def function(self, name, body_lines):
        return "int %s(void)\n{\n%s\treturn 0;\n}\n" % (name, "\tcall();\n" * body_lines)

    def test_limits_are_exact(self):
        # Braces and return count: 77 body lines make an 80-line function, 78 an 81-line one.
        self.t.write("daemon/base/ok.c", self.function("fits", 77))
        self.t.write("daemon/base/long.c", self.function("too_long", 78))
        self.t.write("daemon/base/big.c", "int x;\n" * 601)
        self.t.write("daemon/base/full.c", "int x;\n" * 600)
        rc, out = run("check_sizes.py", self.t.root)
        self.assertEqual(rc, 1, out)
        self.assertIn("daemon/base/long.c:2: too_long: 81 lines (at most 80)", out)
        self.assertIn("daemon/base/big.c: 601 lines (at most 600)", out)
        self.assertNotIn("fits", out)
        self.assertNotIn("full.c", out)

    def test_tables_of_data_do_not_count(self):
        rows = "".join('\t{"name%d", %d},\n' % (i, i) for i in range(700))
        self.t.write("daemon/app/table.c", "struct row { const char *n; int v; };\n"
                     "static const struct row rows[] = {\n%s};\n" % rows)
        self.t.write("daemon/app/fn.c", "int f(void)\n{\n\tstatic const int v[] = {\n%s\t};\n"
                     "\treturn v[0];\n}\n" % ("\t\t1,\n" * 100))
        rc, out = run("check_sizes.py", self.t.root)
        self.assertEqual(rc, 0, out)
        # A struct initialiser is code: it counts.
        self.t.write("daemon/app/fn.c", "int f(void)\n{\n\tstruct s v = {\n%s\t};\n"
                     "\treturn v.a;\n}\n" % ("\t\t.a = 1,\n" * 100))
        rc, out = run("check_sizes.py", self.t.root)
        self.assertEqual(rc, 1, out)
        self.assertIn("daemon/app/fn.c:2: f: 105 lines", out)

    def test_python_functions_and_files(self):
        body = "".join("    x = %d\n" % i for i in range(81))
        self.t.write("client/python/pkg/mod.py", "def long_one():\n%s" % body)
        rc, out = run("check_sizes.py", self.t.root)
        self.assertEqual(rc, 1, out)
        self.assertIn("client/python/pkg/mod.py:1: long_one: 82 lines (at most 80)", out)


if __name__ == "__main__":
    unittest.main()
