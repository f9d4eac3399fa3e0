# SPDX-License-Identifier: MIT
"""Shared by test_torch.py and test_torch_glue.py: a private rocmmemd, and child processes
running Python snippets with the package and the built libraries.

CTest sets ROCMMEMD (the daemon), ROCMMEM_LIBRARY (librocmmem.so.1), ROCMMEM_TORCH_LIBRARY
(librocmmem_torch.so) and PYTHONPATH (client/python).
"""
import os
import runpy
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_DIR = os.path.dirname(os.path.dirname(HERE))
PYTHONPATH = os.path.join(SOURCE_DIR, "client", "python")
MiB = 1 << 20


# tests/cli/daemon.py's, read without importing that module under its generic name.
can_connect = runpy.run_path(os.path.join(SOURCE_DIR, "tests", "cli", "daemon.py"))["can_connect"]


class Daemon:
    """rocmmemd on a socket of its own in a temporary directory, stopped by stop()."""

    def __init__(self, backend="host", budget="1G", env=None):
        self.dir = tempfile.mkdtemp(prefix="rocmmem-torch-test-")
        self.sock = os.path.join(self.dir, "rocmmemd.sock")
        self.log = os.path.join(self.dir, "rocmmemd.log")
        args = [os.environ["ROCMMEMD"], "--socket", self.sock, "--config", "/dev/null",
                "--backend", backend, "--budget", budget, "--log-level", "debug"]
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=log,
                                         stderr=log, env=env or daemon_env())
        deadline = time.monotonic() + 30
        while not can_connect(self.sock):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise AssertionError(f"rocmmemd --backend {backend} did not start:\n"
                                     f"{self.read_log()}")
            time.sleep(0.02)

    def read_log(self):
        try:
            with open(self.log, encoding="utf-8", errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def stop(self):
        """Stops the daemon (SIGTERM); returns its exit status."""
        rc = self.proc.poll()
        if rc is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                rc = self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                rc = self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)
        return rc


def daemon_env():
    """The daemon's environment: no socket choice (it gets --socket) and no preloads."""
    return {k: v for k, v in os.environ.items()
            if k not in ("ROCMMEM_SOCKET", "LD_PRELOAD", "ROCMMEM_TORCH_TEST_PRELOAD")}


def child_env(**overrides):
    """A Python child's: the package on PYTHONPATH; in a sanitized build the sanitizers'
    runtimes preloaded (the libraries it loads need them first), leak checks off for the
    interpreter's own allocations."""
    env = daemon_env()
    env["PYTHONPATH"] = PYTHONPATH + (os.pathsep + env["PYTHONPATH"]
                                      if env.get("PYTHONPATH") else "")
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    preload = os.environ.get("ROCMMEM_TORCH_TEST_PRELOAD")
    if preload:
        env["LD_PRELOAD"] = preload
        env["ASAN_OPTIONS"] = "detect_leaks=0"
    env.update(overrides)
    return env


def run_python(code, python=None, env=None, timeout=120):
    """Runs code (dedented) in a child interpreter; returns (returncode, combined output)."""
    p = subprocess.run([python or sys.executable, "-c", textwrap.dedent(code)],
                       stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, env=env or child_env(), timeout=timeout,
                       text=True)
    return p.returncode, p.stdout
