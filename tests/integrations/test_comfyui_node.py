# SPDX-License-Identifier: MIT
"""The ComfyUI node as users install it: the folder the comfyui_node target builds
(build/comfyui-rocmmem, from $ROCMMEM_COMFYUI_NODE), published to a repository, cloned into a
scratch custom_nodes/ and loaded by upstream ComfyUI's own nodes.load_custom_node, with nothing
installed into Python but what the node carries; and the status node's text.

Loading it into upstream ComfyUI needs PyTorch and ../shared/upstream/ComfyUI-a125cd84 (those
tests are skipped without them, saying so); the rest runs with and without PyTorch.
"""
import ast
import filecmp
import json
import os
import shutil
import subprocess
import sys
import textwrap
import tomllib
import unittest

import integ
from integ import IntegrationTestCase, MiB

import comfy_upstream as cu

NODE = os.environ.get("ROCMMEM_COMFYUI_NODE") or os.path.join(integ.ROOT, "build",
                                                              "comfyui-rocmmem")
BUILD = os.path.join(integ.NODES, "build_node.py")
GIT = shutil.which("git")
sys.path.insert(0, integ.NODES)
from rocmmem_comfyui import report  # noqa: E402


def tree(root):
    """{relative path: kind} of every entry under root, .git left out."""
    out = {}
    for d, dirs, files in os.walk(root):
        dirs[:] = [x for x in dirs if x != ".git"]
        for name in dirs + files:
            path = os.path.join(d, name)
            kind = "link" if os.path.islink(path) else "dir" if os.path.isdir(path) else "file"
            out[os.path.relpath(path, root)] = kind
    return out


def git(*args, cwd=None):
    r = subprocess.run([GIT, *args], cwd=cwd, capture_output=True, text=True,
                       env=integ.clean_env(GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t",
                                           GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@t"))
    if r.returncode != 0:
        raise AssertionError(f"git {args}: {r.stderr}")
    return r.stdout


class Built(unittest.TestCase):
    def setUp(self):
        if not os.path.isfile(os.path.join(NODE, "pyproject.toml")):
            self.fail(f"no built node in {NODE}: build the comfyui_node target")

    def test_its_root_is_the_node(self):
        entries = tree(NODE)
        self.assertEqual([p for p, k in entries.items() if k == "link"], [])
        for name in ("__init__.py", "pyproject.toml", "README.md", "LICENSE", "icon.svg",
                     "vendor/rocmmem/__init__.py"):
            self.assertEqual(entries.get(name), "file", name)
        with open(os.path.join(NODE, "__init__.py")) as f:
            parsed = ast.parse(f.read())
        names = {a.asname or a.name for n in ast.walk(parsed) if isinstance(n, ast.ImportFrom)
                 for a in n.names}
        self.assertIn("NODE_CLASS_MAPPINGS", names)
        # The node's modules and the rocmmem package are the sources, byte for byte.
        source = os.path.join(integ.NODES, "rocmmem_comfyui")
        mine = sorted(n for n in os.listdir(source) if n.endswith(".py"))
        self.assertEqual(sorted(p for p in entries if p.endswith(".py") and "/" not in p), mine)
        self.assertEqual(filecmp.cmpfiles(source, NODE, mine, shallow=False)[0], mine)
        package = os.path.join(integ.PACKAGE, "rocmmem")
        theirs = sorted(n for n in os.listdir(package) if n.endswith(".py"))
        vendored = os.path.join(NODE, "vendor", "rocmmem")
        self.assertEqual(sorted(os.listdir(vendored)), theirs)
        self.assertEqual(filecmp.cmpfiles(package, vendored, theirs, shallow=False)[0], theirs)

    def test_pyproject_has_project_and_tool_comfy(self):
        with open(os.path.join(NODE, "pyproject.toml"), "rb") as f:
            meta = tomllib.load(f)
        import rocmmem
        self.assertEqual(meta["project"]["name"], "comfyui-rocmmem")
        self.assertEqual(meta["project"]["version"], rocmmem.__version__)
        self.assertEqual(meta["project"]["dependencies"], [])
        comfy = meta["tool"]["comfy"]
        self.assertEqual(comfy["DisplayName"], "rocmmemd")
        self.assertTrue(comfy["PublisherId"])
        self.assertRegex(comfy["Icon"], r"^https://\S+/icon\.svg$")
        self.assertRegex(meta["project"]["urls"]["Repository"], r"^https://")
        with open(os.path.join(NODE, "README.md")) as f:
            self.assertNotRegex(f.read(), r"@[A-Z_]+@")

    def test_built_anew_each_time(self):
        out = os.path.join(self.tmp(), "node")
        for _ in range(2):
            r = integ.run([integ.PYTHON, BUILD, "--out", out], timeout=30)
            self.assertEqual(r.rc, 0, r)
            with open(os.path.join(out, "stale.py"), "w") as f:
                f.write("")
        r = integ.run([integ.PYTHON, BUILD, "--out", out], timeout=30)
        self.assertEqual(r.rc, 0, r)
        self.assertNotIn("stale.py", os.listdir(out))
        self.assertEqual(set(tree(out)), set(tree(NODE)))

    @unittest.skipIf(GIT is None, "git is not installed")
    def test_published_as_a_repository_of_its_own(self):
        repo = os.path.join(self.tmp(), "comfyui-rocmmem")
        git("init", "--quiet", "-b", "main", repo)
        with open(os.path.join(repo, "old.txt"), "w") as f:
            f.write("from an older release\n")
        git("add", "old.txt", cwd=repo)
        git("commit", "--quiet", "-m", "old", cwd=repo)
        publish = [integ.PYTHON, BUILD, "--out", NODE, "--publish", repo, "--message", "v"]
        env = integ.clean_env(GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t",
                              GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@t")
        r = integ.run(publish, env=env, timeout=30)
        self.assertEqual(r.rc, 0, r)
        self.assertIn("committed", r.stdout)
        self.assertEqual(sorted(git("ls-files", cwd=repo).split()),
                         sorted(p for p, k in tree(NODE).items() if k == "file"))
        r = integ.run(publish, env=env, timeout=30)
        self.assertIn("already up to date", r.stdout)

    def tmp(self):
        import tempfile
        d = tempfile.mkdtemp(prefix="rocmmem-node-")
        self.addCleanup(shutil.rmtree, d, True)
        return d


# Loads the node from custom_nodes/ into upstream ComfyUI with its own loader, runs a prompt
# with the status node, and prints what it saw as one JSON line.
IN_COMFYUI = textwrap.dedent("""
    import asyncio, json, logging, os, sys
    logging.basicConfig(level=logging.INFO)  # as ComfyUI's main.py has its log
    import comfy_upstream as cu
    C = cu.load()
    path = sys.argv[1]
    ok = asyncio.run(C.nodes.load_custom_node(path))
    import rocmmem
    out = C.run(dict(cu.txt2img(upscale=False), status={"class_type": "RocmmemStatus",
                                                        "inputs": {}}), ["out", "status"])
    text = C.run({"s": {"class_type": "RocmmemStatus", "inputs": {}}}, ["s"], "s")
    print(json.dumps({
        "loaded": ok, "mapped": "RocmmemStatus" in C.nodes.NODE_CLASS_MAPPINGS,
        "hooked": hasattr(C.mm.load_models_gpu, "__rocmmem_original__"),
        "rocmmem": rocmmem.__file__,
        "text": text.history_result["outputs"]["s"]["text"][0]}))
""")
# Loads the node by path as ComfyUI's loader does, where there is no ComfyUI at all.
ALONE = textwrap.dedent("""
    import importlib.util, json, os, sys
    path = sys.argv[1]
    name = path.replace(".", "_x_")
    spec = importlib.util.spec_from_file_location(name, os.path.join(path, "__init__.py"))
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    import rocmmem
    node = module.NODE_CLASS_MAPPINGS["RocmmemStatus"]()
    print(json.dumps({"rocmmem": rocmmem.__file__, "text": node.status()["result"][0]}))
""")


class Installed(IntegrationTestCase):
    def install(self):
        """custom_nodes/comfyui-rocmmem, cloned from a repository the build was published
        to (copied where there is no git)."""
        custom = os.path.join(self.dir, "custom_nodes")
        os.makedirs(custom)
        target = os.path.join(custom, "comfyui-rocmmem")
        if GIT is None:
            shutil.copytree(NODE, target)
            return target
        repo = os.path.join(self.dir, "published")
        git("init", "--quiet", "-b", "main", repo)
        env = integ.clean_env(GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t",
                              GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@t")
        r = integ.run([integ.PYTHON, BUILD, "--out", NODE, "--publish", repo], env=env,
                      timeout=30)
        self.assertEqual(r.rc, 0, r)
        git("clone", "--quiet", repo, target)
        return target

    def child(self, script, target, python=(integ.PYTHON,), **env):
        # Only the tests' own helpers on the path: rocmmem must come from the node.
        e = integ.child_env(self.sock, pythonpath=(integ.HERE,), **env)
        r = integ.run([*python, "-c", script, target], env=e, timeout=60)
        self.assertEqual(r.rc, 0, r)
        return json.loads(r.stdout.splitlines()[-1]), r

    @unittest.skipIf(cu.missing(), cu.missing())
    def test_cloned_into_custom_nodes_and_loaded_by_comfyui(self):
        meminfo = os.path.join(self.dir, "meminfo")
        with open(meminfo, "w") as f:
            f.write("MemTotal: 67108864 kB\nMemAvailable: 67108864 kB\n")
        self.start_daemon(budget="8G", env=integ.clean_env(ROCMMEM_HOST_MEMINFO=meminfo))
        target = self.install()
        out, r = self.child(IN_COMFYUI, target)
        self.assertTrue(out["loaded"] and out["mapped"] and out["hooked"], r)
        self.assertEqual(os.path.dirname(out["rocmmem"]), os.path.join(target, "vendor",
                                                                       "rocmmem"))
        self.assertIn("ComfyUI: models arbitrated (3 registered, 0 evictions)", out["text"])
        self.assertIn("  BaseModel (transformer)", out["text"])
        self.assertIn("rocmmem: ComfyUI's models are arbitrated by rocmmemd", r.stderr)

    def test_loaded_where_there_is_no_comfyui_or_torch(self):
        # python3 -S: no site-packages at all (no torch, no numpy), as on a bare Python.
        self.start_daemon()
        target = self.install()
        out, r = self.child(ALONE, target, python=(integ.PYTHON, "-S"))
        self.assertEqual(os.path.dirname(out["rocmmem"]), os.path.join(target, "vendor",
                                                                       "rocmmem"))
        self.assertIn("comfy.model_management cannot be imported", r.stderr)
        self.assertRegex(out["text"], r"^rocmmemd \S+, pid \d+, backend host\nComfyUI: models "
                                      r"not arbitrated \(comfy.model_management cannot be "
                                      r"imported")

    def test_without_librocmmem_the_node_says_why(self):
        self.start_daemon()
        target = self.install()
        out, r = self.child(ALONE, target, python=(integ.PYTHON, "-S"),
                            ROCMMEM_LIBRARY=os.path.join(self.dir, "no-librocmmem.so.1"))
        self.assertRegex(out["text"], r"^rocmmemd not available: ")


class StatusText(unittest.TestCase):
    """The status node's text from a status --json dict: how the daemon's per-process
    measurement (telemetry today; reconciled books later) shows beside the declared bytes."""

    STATUS = {"daemon": {"version": "0.1.0", "pid": 1, "backend": "hip"},
              "devices": [{"index": 0, "name": "gfx1100", "backend": "hip",
                           "budget_bytes": 16 << 30, "leased_bytes": 0,
                           "reserved_bytes": 6 * MiB, "free_bytes": (16 << 30) - 6 * MiB,
                           "telemetry": {"source": "rocm-smi"},
                           "processes": [{"pid": 42, "vram_bytes": 9 * MiB, "client": True},
                                         {"pid": 43, "vram_bytes": MiB, "client": False}]}],
              "clients": [], "models": [{"id": 7, "name": "SDXL", "class": "transformer",
                                         "owner_pid": 42, "device": 0, "state": "in_use",
                                         "bytes": 4 * MiB}]}
    ROWS = [(0, "SDXL (transformer)", 3 * MiB + 5, 3 * MiB + 5, "in use", 7),
            (0, "working memory", 2 * MiB, None, "in use", 8)]

    def test_declared_real_and_measured(self):
        text = report.format_own(self.STATUS, 42, self.ROWS, lambda d: (7 * MiB, 8 * MiB))
        lines = text.splitlines()
        self.assertEqual(lines[0], "this ComfyUI (pid 42), device 0:")
        # Declared as rocmmemd holds it (model 7: 4 MiB, rounded up to its granule).
        self.assertRegex(lines[2], r"^  SDXL \(transformer\) +4 MiB +3.00 MiB  in use$")
        self.assertRegex(lines[3], r"^  working memory +2 MiB +-  in use$")
        self.assertRegex(lines[4], r"^  total +6 MiB +3.00 MiB  \(real: ComfyUI's own count\)$")
        self.assertEqual(lines[5], "  PyTorch on this device: 7 MiB allocated, 8 MiB held by "
                                   "its cache")
        self.assertEqual(lines[6], "  measured by rocmmemd (rocm-smi): 9 MiB")

    def test_no_measurement(self):
        st = json.loads(json.dumps(self.STATUS))
        del st["devices"][0]["processes"]
        text = report.format_own(st, 42, self.ROWS, lambda d: None)
        self.assertIn("  measured: rocmmemd has no per-process telemetry for this device", text)
        self.assertNotIn("PyTorch", text)
        st["daemon"]["backend"] = "host"
        text = report.format_own(st, 42, self.ROWS, lambda d: None)
        self.assertIn("  measured: rocmmemd cannot measure a process's GPU memory on its host "
                      "backend", text)

    def with_books(self, measurable=True):
        st = json.loads(json.dumps(self.STATUS))
        client = {"pid": 42, "name": "ComfyUI", "models": 1, "reserved_bytes": 6 * MiB,
                  "leases": 0, "leased_bytes": 0, "declared_bytes": 6 * MiB,
                  "measurable": measurable}
        book = {"device": 0, "declared_bytes": 6 * MiB, "measurable": measurable}
        if measurable:
            client |= {"measured_bytes": 9 * MiB, "undeclared_bytes": 3 * MiB}
            book |= {"measured_bytes": 9 * MiB, "undeclared_bytes": 3 * MiB}
        else:
            client["measured"] = "cannot measure: no per-process device memory here"
        st["clients"] = [client | {"books": [book]}]
        return st

    def test_reconciled_books(self):
        # The daemon's books of the process win over its process list (9 MiB either way here).
        st = self.with_books()
        st["devices"][0]["processes"][0]["vram_bytes"] = 1
        lines = report.format_own(st, 42, self.ROWS, lambda d: None).splitlines()
        self.assertEqual(lines[-1], "  measured by rocmmemd (reconciled books): 9 MiB, declared "
                                    "6 MiB: 3 MiB undeclared, charged")
        self.assertIn("  pid 42 ComfyUI: 1 model, 6 MiB reserved, 0 leases, 0 B leased; "
                      "measured 9 MiB, 3 MiB undeclared", report.format_status(st))
        self.assertEqual(report.step_line(0, self.ROWS[:1], None, report.books_line(st, 42, 0)),
                         "device 0: declared 3.00 MiB for this step: SDXL (transformer) 3.00 "
                         "MiB (loaded 3.00 MiB); rocmmemd measures the process at 9 MiB, 6 MiB "
                         "declared: 3 MiB undeclared, charged")
        # Another device, where it declared nothing and holds nothing measured.
        self.assertEqual(report.books_line(st, 42, 1),
                         "rocmmemd measures the process at 0 B, 0 B declared")
        self.assertIsNone(report.books_line(st, 43, 0), "no client of that pid")
        # The host backend: declared, and no figure.
        st = self.with_books(measurable=False)
        text = report.format_own(st, 42, self.ROWS, lambda d: None)
        self.assertIn("  measured: rocmmemd cannot measure a process's GPU memory on its host "
                      "backend", text)
        self.assertIn("; cannot measure", report.format_status(st))
        self.assertEqual(report.books_line(st, 42, 0),
                         "the process declared 6 MiB; rocmmemd cannot measure a process's GPU "
                         "memory here (host memory)")

    def test_step_line(self):
        self.assertEqual(report.step_line(0, self.ROWS, (7 * MiB, 8 * MiB)),
                         "device 0: declared 5.00 MiB for this step: SDXL (transformer) 3.00 "
                         "MiB (loaded 3.00 MiB), working memory 2 MiB; PyTorch: 7 MiB allocated")


if __name__ == "__main__":
    integ.main()
