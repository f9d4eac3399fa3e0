# SPDX-License-Identifier: MIT
"""Shared fixture of the integration tests: a real rocmmemd (tests/cli/daemon.py's), the paths
of the stand-ins, the rocmmem package, the ComfyUI node package (its sources, and the node
built from them), the upstream snapshots, and what a test module needs to run at all.

CTest sets ROCMMEMD, ROCMMEMCTL, ROCMMEM_LIBRARY, ROCMMEM_COMFYUI_NODE and PYTHONPATH; run by
hand, this module adds the source paths itself, and the binaries must be set as for tests/cli.
A module whose prerequisites are missing (torch, an upstream snapshot) ends with exit status
77, which CTest reports as skipped, after saying why (main()).
"""
import importlib.util
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
STANDINS = os.path.join(HERE, "standins")
PACKAGE = os.path.join(ROOT, "client", "python")
NODES = os.path.join(ROOT, "integrations", "comfyui")
NODE_PACKAGE = os.path.join(NODES, "rocmmem_comfyui")
CLI = os.path.join(ROOT, "tests", "cli")
PYTHON = sys.executable
# Unmodified upstream snapshots (../shared/upstream): tests import them, never copy them.
UPSTREAM = os.path.join(os.path.dirname(ROOT), "shared", "upstream")
UPSTREAM_COMFYUI = os.path.join(UPSTREAM, "ComfyUI-a125cd84")
UPSTREAM_FRAMEPACK = os.path.join(UPSTREAM, "FramePack-97fe5dbe")

for _path in (STANDINS, PACKAGE, NODES, HERE):
    if _path not in sys.path:
        sys.path.insert(0, _path)


def torch_missing():
    """Why PyTorch cannot be used here (None: it can). Debian's python3-torch is CPU-only:
    the tests that need a GPU fake one over it (fakecuda.py)."""
    try:
        import torch  # noqa: F401
    except Exception as e:
        return f"PyTorch cannot be imported ({type(e).__name__}: {e}); install python3-torch"
    return None


def snapshot_missing(path):
    if not os.path.isdir(path):
        return (f"the upstream snapshot {path} is absent (it sits beside the project in "
                "../shared/upstream)")
    return None


def needs(*reasons):
    """The first reason a test module cannot run, or None."""
    return next((r for r in reasons if r), None)


def main(reason=None):
    """Runs the calling test module, or exits 77 (CTest: skipped) saying why it cannot."""
    if reason:
        print(f"skipped: {reason}", flush=True)
        sys.exit(77)
    unittest.main(module="__main__")


def _load_cli_fixture():
    """tests/cli/daemon.py, under a name of its own (a module named daemon may be installed)."""
    spec = importlib.util.spec_from_file_location("rocmmem_cli_daemon",
                                                  os.path.join(CLI, "daemon.py"))
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


_cli = _load_cli_fixture()
GRANULE, MiB, CliTestCase, clean_env = _cli.GRANULE, _cli.MiB, _cli.CliTestCase, _cli.clean_env
poll_until, rocmmemctl_bin, run, Background = (_cli.poll_until, _cli.rocmmemctl_bin, _cli.run,
                                                _cli.Background)


def round_up(n, granule=GRANULE):
    return -(-n // granule) * granule


def child_env(sock, pythonpath=(STANDINS, PACKAGE, NODES, HERE), **overrides):
    """The environment of a child process: the socket, the stand-ins and the packages."""
    return clean_env(ROCMMEM_SOCKET=sock, PYTHONPATH=os.pathsep.join(pythonpath),
                     PYTHONDONTWRITEBYTECODE="1", **overrides)


class IntegrationTestCase(CliTestCase):
    """A private directory and socket per test (start_daemon() from CliTestCase); the
    process's own ROCMMEM_SOCKET points at it for the test's length."""

    def setUp(self):
        super().setUp()
        old = os.environ.get("ROCMMEM_SOCKET")
        os.environ["ROCMMEM_SOCKET"] = self.sock
        self.addCleanup(self._restore_socket, old)

    @staticmethod
    def _restore_socket(old):
        if old is None:
            os.environ.pop("ROCMMEM_SOCKET", None)
        else:
            os.environ["ROCMMEM_SOCKET"] = old

    def models_by_name(self):
        return {m["name"]: m for m in self.status()["models"]}
