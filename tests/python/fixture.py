# SPDX-License-Identifier: MIT
"""Shared fixture of the Python package's tests: a real rocmmemd (host backend), the package
imported from client/python, helper processes running Python snippets.

CTest sets ROCMMEMD, ROCMMEMCTL, ROCMMEM_LIBRARY (the built librocmmem.so.1), ROCMMEM_ABI_DUMP
and PYTHONPATH (client/python). Nothing sleeps for correctness: waits poll a condition.
"""
import importlib.util
import json
import os
import subprocess
import sys
import textwrap

import rocmmem  # from PYTHONPATH: client/python

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_DIR = os.path.dirname(os.path.dirname(HERE))


def _load_cli_fixture():
    """tests/cli/daemon.py, under a name of its own: tests/cli has modules named like ours."""
    spec = importlib.util.spec_from_file_location(
        "rocmmem_cli_daemon", os.path.join(SOURCE_DIR, "tests", "cli", "daemon.py"))
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


# In a sanitized build CTest preloads the sanitizers' runtimes into this interpreter (the
# library it loads needs them first) with leak checks off (Python's own allocations would be
# reported). The daemon and rocmmemctl, linked with them, run without that, leak checks on;
# Python children that load the library get it back (child_env).
_SANITIZER_ENV = {}
if os.environ.pop("ROCMMEM_PYTHON_SANITIZED", None):
    for _key in ("LD_PRELOAD", "ASAN_OPTIONS"):
        if _key in os.environ:
            _SANITIZER_ENV[_key] = os.environ.pop(_key)

_cli = _load_cli_fixture()
BUDGET, GRANULE, MiB = _cli.BUDGET, _cli.GRANULE, _cli.MiB
Background, CliTestCase, clean_env = _cli.Background, _cli.CliTestCase, _cli.clean_env
poll_until, rocmmemctl_bin, run = _cli.poll_until, _cli.rocmmemctl_bin, _cli.run
reachable_copy = _cli.reachable_copy

__all__ = ["BUDGET", "GRANULE", "MiB", "Background", "PyTestCase", "clean_env", "poll_until",
           "rocmmemctl_bin", "run", "rocmmem", "SOURCE_DIR", "PYTHON", "read", "run_python",
           "child_env"]

# The interpreter the tests run under (Debian's /usr/bin/python3 under CTest) for children.
PYTHON = sys.executable


def child_env(**overrides):
    """A child's environment: no inherited socket choice, the package and library kept."""
    env = clean_env(**overrides)
    env.setdefault("PYTHONPATH", os.path.join(SOURCE_DIR, "client", "python"))
    for key, value in _SANITIZER_ENV.items():
        env.setdefault(key, value)
    return env


class PyTestCase(CliTestCase):
    """A private directory per test, start_daemon() (--budget 64M), connect() to it, and
    python() children that print lines the test waits for."""

    def connect(self, name="python-test", **kw):
        """rocmmem.connect to this test's daemon, closed at cleanup."""
        kw.setdefault("socket", self.sock)
        c = rocmmem.connect(name=name, **kw)
        self.addCleanup(c.close)
        return c

    def python(self, code, *args, name="child", env=None):
        """Starts `python3 -c CODE ARGS...` in the background (killed at cleanup). CODE gets
        SOCK (the daemon's socket) and say(text), which prints a line and flushes."""
        prelude = textwrap.dedent("""\
            import os, sys, time
            import rocmmem
            SOCK = sys.argv[1]
            def say(*parts):
                print(*parts, flush=True)
            """)
        b = Background([PYTHON, "-c", prelude + textwrap.dedent(code), self.sock, *args],
                       self.dir, name, env=env if env is not None else child_env())
        self.addCleanup(b.kill)
        return b

    def ctl_json(self, *args):
        r = self.ctl("--json", *args)
        self.assertEqual(r.rc, 0, r)
        return json.loads(r.stdout)

    def wait_client_gone(self, pid, timeout=5.0):
        return self.wait_status(lambda st: all(c["pid"] != pid for c in st["clients"]),
                                timeout, what=f"pid {pid} to leave the daemon's clients")


def read(path):
    """A text file's contents (closed at once)."""
    with open(path, encoding="utf-8") as f:
        return f.read()


def run_python(code, env=None, timeout=60.0, cwd=None):
    """Runs `python3 -c CODE` to its end and returns the Result."""
    p = subprocess.run([PYTHON, "-c", textwrap.dedent(code)], env=env or child_env(),
                       stdin=subprocess.DEVNULL, capture_output=True, text=True,
                       timeout=timeout, cwd=cwd)
    return p
