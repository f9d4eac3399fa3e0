# SPDX-License-Identifier: MIT
"""The GPU bundle (scripts/gpu-bundle.sh) made from this build and run on this machine.

Where this machine has no GPU the GPU tests must be reported skipped (their exit 77) and the
benchmark "not run", while the bundle's own check passes: its rocmmemd, rocmmemctl, librocmmem
and Python package run from the bundle. As root with unshare(1), the bundle runs with the
source and build trees hidden under an empty tmpfs, as on a machine that never had them.
CTest sets ROCMMEM_BUILD_DIR and ROCMMEM_SOURCE_DIR.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

BUILD = os.environ["ROCMMEM_BUILD_DIR"]
SOURCE = os.environ["ROCMMEM_SOURCE_DIR"]


def can_hide():
    if os.geteuid() != 0 or not shutil.which("unshare"):
        return False
    return subprocess.run(["unshare", "-m", "true"], capture_output=True).returncode == 0


class GpuBundle(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="rocmmem-gpubundle-")
        self.bundle = os.path.join(self.tmp, "bundle")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def test_runs_here(self):
        make = subprocess.run([sys.executable, os.path.join(SOURCE, "scripts", "gpu_bundle.py"),
                               "--build-dir", BUILD, "--source-dir", SOURCE, "--out",
                               self.bundle], capture_output=True, text=True, timeout=300)
        self.assertEqual(make.returncode, 0, make.stderr)
        with open(os.path.join(self.bundle, "manifest.json"), encoding="utf-8") as f:
            manifest = json.load(f)
        names = [t["name"] for t in manifest["tests"]]
        self.assertIn("test_gpu_real", names)
        self.assertIn("torch_python", names)
        for t in manifest["tests"]:
            text = json.dumps(t)
            self.assertNotIn(BUILD + "/", text, "a path into the build tree")
            self.assertNotIn(SOURCE + "/", text, "a path into the source tree")
        run = [os.path.join(self.bundle, "run-gpu.sh"), "--bench", "tiny"]
        hidden = can_hide()
        if hidden:
            # The build tree, unless it lies in the source tree, which hides it too.
            inside = os.path.realpath(BUILD).startswith(os.path.realpath(SOURCE) + os.sep)
            trees = " ".join("'%s'" % d for d in ([SOURCE] if inside else [SOURCE, BUILD]))
            run = ["unshare", "-m", "sh", "-c",
                   "for d in %s; do mount -t tmpfs none \"$d\" || exit 9; done; exec \"$@\""
                   % trees, "sh"] + run
        done = subprocess.run(run, capture_output=True, text=True, timeout=1200, cwd=self.tmp)
        print(done.stderr, file=sys.stderr)
        if not self.gpu():
            self.assertEqual(done.returncode, 0, done.stderr)
        with open(os.path.join(self.bundle, "results", "REPORT.json"), encoding="utf-8") as f:
            report = json.load(f)
        self.assertEqual(report["bundle_check"]["status"], "passed",
                         report["bundle_check"].get("detail"))
        by_name = {t["name"]: t for t in report["tests"]}
        self.assertEqual(set(by_name), set(names))
        if not self.gpu():
            for t in report["tests"]:
                self.assertEqual(t["status"], "skipped", t)
                self.assertEqual(t["exit"], 77, t)
            self.assertEqual(report["bench"]["status"], "not run", report["bench"])
            self.assertEqual(report["verdict"], "no failure")
        with open(os.path.join(self.bundle, "results", "REPORT.md"), encoding="utf-8") as f:
            md = f.read()
        self.assertIn("# rocmmemd GPU bundle report", md)
        for name in names:
            self.assertIn("| %s |" % name, md)
        print("bundle ran %s the source and build trees" % ("without" if hidden else "beside"),
              file=sys.stderr)

    @staticmethod
    def gpu():
        return any(os.path.exists(d) for d in ("/dev/kfd", "/dev/nvidiactl"))


if __name__ == "__main__":
    unittest.main()
