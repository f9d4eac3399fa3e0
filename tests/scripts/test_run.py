# SPDX-License-Identifier: MIT
"""scripts/run.sh, as the README has a newcomer run it, in a scratch copy of the source tree:
it builds the daemon, the libraries and rocmmemctl and nothing else (no test, no benchmark),
and the daemon it starts answers `rocmmemctl status`; Ctrl-C stops it cleanly."""
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "cli"))
from daemon import Background, can_connect, clean_env, poll_until  # noqa: E402

SOURCE = os.environ.get("ROCMMEM_SOURCE_DIR",
                        os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
# Generous: the build is from scratch on what may be two busy cores.
BUILD_DEADLINE_S = 540


def copy_tree(dest):
    """The tracked files of the source tree (git ls-files), else the tree without builds."""
    r = subprocess.run(["git", "-C", SOURCE, "ls-files", "-z"], capture_output=True)
    if r.returncode == 0 and r.stdout:
        for name in r.stdout.decode().split("\0"):
            src = os.path.join(SOURCE, name)
            if name and os.path.isfile(src):
                os.makedirs(os.path.dirname(os.path.join(dest, name)), exist_ok=True)
                shutil.copy2(src, os.path.join(dest, name))
        return
    shutil.copytree(SOURCE, dest, dirs_exist_ok=True, symlinks=True,
                    ignore=shutil.ignore_patterns("build*", ".git", "__pycache__"))


def is_elf(path):
    with open(path, "rb") as f:
        return f.read(4) == b"\x7fELF"


class RunScript(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="rocmmem-run-")
        self.addCleanup(shutil.rmtree, self.dir, ignore_errors=True)
        self.tree = os.path.join(self.dir, "tree")
        copy_tree(self.tree)
        self.assertFalse(os.path.exists(os.path.join(self.tree, "build")))
        self.sock = os.path.join(self.dir, "d.sock")

    def test_run_builds_only_what_runs_and_serves(self):
        started = time.monotonic()
        run = Background(["bash", "scripts/run.sh", "--socket", self.sock, "--backend", "host",
                          "--budget", "64M", "--config", "/dev/null"], self.dir, "run",
                         env=clean_env(), cwd=self.tree)
        self.addCleanup(run.kill)

        def serving():
            if not run.running():
                raise AssertionError(f"run.sh exited early: {run!r}")
            return can_connect(self.sock)

        poll_until(serving, BUILD_DEADLINE_S, interval=0.2, what="run.sh's daemon")
        took = time.monotonic() - started
        print(f"\nrun.sh: built and serving after {took:.1f} s", file=sys.stderr)
        build = os.path.join(self.tree, "build")
        ctl = os.path.join(build, "rocmmemctl")
        self.assertIn(f"rocmmemd is starting on socket {self.sock}", run.stdout())
        self.assertIn(f"{ctl} --socket {self.sock} status", run.stdout())

        r = subprocess.run([ctl, "--socket", self.sock, "status"], capture_output=True,
                           text=True, timeout=30, env=clean_env())
        self.assertEqual(r.returncode, 0, r)
        self.assertRegex(r.stdout, r"^rocmmemd \S+, pid \d+, up \S+, backend host\n")
        self.assertEqual(r.stdout.split(", pid ")[1].split(",")[0], str(run.pid),
                         "run.sh execs the daemon")

        # Built: the daemon, rocmmemctl and the libraries; no test, no benchmark.
        with open(os.path.join(build, "CMakeCache.txt")) as f:
            cache = f.read()
        self.assertIn("BUILD_TESTING:BOOL=OFF", cache)
        self.assertIn("ROCMMEM_BENCH:BOOL=OFF", cache)
        elves = set()
        for root, dirs, files in os.walk(build):
            dirs[:] = [d for d in dirs if d != "CMakeFiles"]
            for name in files:
                path = os.path.join(root, name)
                if not os.path.islink(path) and is_elf(path):
                    elves.add(os.path.relpath(path, build))
        versioned = {e for e in elves if e.startswith("librocmmem.so.")}
        self.assertEqual(len(versioned), 1, sorted(elves))
        self.assertEqual(elves - versioned, {"rocmmemd", "rocmmemctl", "librocmmem_torch.so",
                                              "exporter/rocmmem-exporter"},
                         sorted(elves))
        self.assertFalse(os.path.exists(os.path.join(build, "tests")))
        self.assertFalse(os.path.exists(os.path.join(build, "bench")))
        targets = subprocess.run(["cmake", "--build", build, "--target", "help"],
                                 capture_output=True, text=True, timeout=60).stdout
        self.assertNotRegex(targets, r"(?m)^\.\.\. (test_|bench_|fake|fuzz_|model_host)")
        self.assertRegex(targets, r"(?m)^\.\.\. rocmmemd$")

        run.signal(signal.SIGINT)
        self.assertEqual(run.wait(30), 0, run)
        self.assertFalse(os.path.exists(self.sock))


if __name__ == "__main__":
    unittest.main()
