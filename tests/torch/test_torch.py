# SPDX-License-Identifier: MIT
"""rocmmem.torch with real PyTorch on a real GPU: the allocator installed, tensors computed in
leased memory, the daemon's view of the leases, model_pool with and without install().

Runs only where an interpreter imports torch and torch.cuda.is_available() (ROCm or CUDA
builds); elsewhere it says why and exits 77, which CTest reports as skipped. The interpreter:
$ROCMMEM_TORCH_PYTHON, else this one, else python3 on PATH. Each scenario runs in a fresh
child process: install() must come before CUDA initialises, once per process.
"""
import os
import shutil
import sys
import textwrap
import unittest

from torch_fixture import Daemon, child_env, run_python

SKIP = 77

PROBE = """
import sys
try:
    import torch
except Exception as e:
    print(f"import torch failed: {e}")
    sys.exit(3)
if not torch.cuda.is_available():
    print(f"torch {torch.__version__} sees no GPU (torch.cuda.is_available() is False)")
    sys.exit(3)
print("hip" if getattr(torch.version, "hip", None) else "cuda", torch.__version__,
      torch.cuda.get_device_name(0))
"""


def find_torch_python():
    """(interpreter, backend, description) of the first that has torch with a GPU, or
    (None, None, why not)."""
    tried = []
    for python in (os.environ.get("ROCMMEM_TORCH_PYTHON"), sys.executable,
                   shutil.which("python3")):
        if not python or python in (t[0] for t in tried):
            continue
        try:
            rc, out = run_python(PROBE, python=python, timeout=120)
        except Exception as e:  # a broken interpreter is one more that cannot
            rc, out = 3, str(e)
        if rc == 0:
            backend, _, desc = out.strip().splitlines()[-1].partition(" ")
            return python, backend, desc
        tried.append((python, out.strip().splitlines()[-1] if out.strip() else f"exit {rc}"))
    return None, None, "; ".join(f"{p}: {why}" for p, why in tried)


PYTHON, BACKEND, DESCRIPTION = find_torch_python()

PRELUDE = """
import errno, os, sys
import rocmmem
import rocmmem.torch as rt
SOCK = os.environ["TORCH_TEST_SOCKET"]

def our_leases(c, model_id=None):
    return [l for l in c.status()["leases"]
            if l["owner_pid"] == os.getpid() and l["tag"] == "torch"
            and (model_id is None or l["model_id"] == model_id)]

# Polls check() until it is true: a GPU daemon frees memory off its event loop.
def eventually(check, what, timeout=10):
    import time
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)
"""


class RealTorch(unittest.TestCase):
    def setUp(self):
        self.daemon = Daemon(backend=BACKEND, budget="4G")
        self.addCleanup(self.stop)

    def stop(self):
        self.assertEqual(self.daemon.stop(), 0, self.daemon.read_log())

    def child(self, code):
        rc, out = run_python(PRELUDE + textwrap.dedent(code), python=PYTHON,
                             env=child_env(TORCH_TEST_SOCKET=self.daemon.sock), timeout=300)
        self.assertEqual(rc, 0, f"--- child ---\n{out}--- daemon ---\n{self.daemon.read_log()}")
        self.assertIn("OK", out)
        return out

    def test_installed_allocator(self):
        """every tensor comes from leases; results are right; memory goes back."""
        self.child("""
        rt.install(socket=SOCK, name="torch-install", timeout=10)
        import torch
        assert rt.installed()
        c = rocmmem.connect(socket=SOCK, name="observer")
        # PyTorch keeps some blocks for itself (cuBLAS and cuBLASLt workspaces, made at first
        # use: PyTorch 2.11 on an H200 still held two more after a 256 x 256 and a 2048 x 2048
        # product as a warm-up): the whole work once first, then count from there.
        def work(base):
            x = torch.ones(1 << 20, device="cuda")
            y = torch.randn(2048, 2048, device="cuda")
            z = y @ y
            torch.cuda.synchronize()
            assert float(x.sum()) == float(1 << 20)
            assert torch.allclose(z.cpu(), y.cpu() @ y.cpu(), rtol=1e-3, atol=1e-1)
            s = rt.stats()
            if base is not None:
                assert s["allocations"] >= base + 3 and s["leases"] >= 1, s
            for t in (x, y, z):
                assert t.data_ptr() % 512 == 0
            leases = our_leases(c)
            assert len(leases) == s["leases"], (leases, s)
            assert sum(l["bytes"] for l in leases) == s["leased_bytes"], (leases, s)

            # Thousands of small tensors: a few leases, not a round trip each.
            before = rt.stats()["lease_acquires"]
            ts = [torch.full((1000 + i,), float(i), device="cuda") for i in range(2000)]
            torch.cuda.synchronize()
            assert all(float(ts[i][-1]) == float(i) for i in range(0, 2000, 97))
            assert rt.stats()["lease_acquires"] - before <= 2, rt.stats()
            del ts, x, y, z
            torch.cuda.synchronize()

        work(None)
        base = rt.stats()["allocations"]
        work(base)
        s = rt.stats()
        assert s["allocations"] == base, s
        assert s["bad_frees"] == 0 and s["failed_allocs"] == 0, s
        rt.trim()
        assert rt.stats()["kept_bytes"] == 0
        assert len(our_leases(c)) == rt.stats()["leases"]

        # A tensor larger than a chunk: a lease of its own, given back when it dies.
        held = {l["id"] for l in our_leases(c)}
        b = torch.empty(300 << 20, dtype=torch.uint8, device="cuda")
        b.fill_(7)
        torch.cuda.synchronize()
        assert int(b[-1]) == 7
        new = [l for l in our_leases(c) if l["id"] not in held]
        assert len(new) == 1 and new[0]["bytes"] >= 300 << 20, new
        del b
        eventually(lambda: {l["id"] for l in our_leases(c)} == held, "the big lease to go")
        print("OK", rt.stats())
        """)

    def test_install_too_late(self):
        """install() after CUDA initialised says so instead of half working."""
        self.child("""
        import torch
        torch.zeros(1, device="cuda")
        try:
            rt.install(socket=SOCK)
        except rt.TorchError as e:
            assert e.errno == errno.EBUSY, e
            assert "before the first CUDA allocation" in str(e), e
            print("OK", e)
        else:
            raise AssertionError("install() after CUDA initialised did not fail")
        """)

    def test_model_pool_tags_after_install(self):
        """with install(client=...), model_pool tags the model's leases."""
        self.child("""
        c = rocmmem.connect(socket=SOCK, name="tagged-host")
        rt.install(client=c)
        import torch
        m = c.register_model("unet", model_class="transformer")
        with rt.model_pool(m) as pool:
            assert pool is None
            w = torch.randn(1024, 1024, device="cuda")
        x = torch.randn(1024, 1024, device="cuda")
        assert our_leases(c, m.id), c.status()["leases"]
        assert our_leases(c, 0), c.status()["leases"]
        assert float((w @ x).abs().sum()) > 0
        del w
        torch.cuda.synchronize()
        rt.trim()
        eventually(lambda: our_leases(c, m.id) == [], "the model's leases to go")
        rt.shutdown()
        print("OK")
        """)

    def test_model_pool_without_install(self):
        """without install(), a MemPool over the library holds just the model's tensors."""
        self.child("""
        import torch
        if not (hasattr(torch.cuda, "MemPool") or hasattr(torch.cuda.memory, "MemPool")):
            print("OK: this PyTorch has no MemPool,", torch.__version__)
            sys.exit(0)
        c = rocmmem.connect(socket=SOCK, name="pool-host")
        m = c.register_model("weights", model_class="transformer")
        with rt.model_pool(m) as pool:
            assert pool is not None
            w = torch.randn(1024, 1024, device="cuda")
        outside = torch.randn(1024, 1024, device="cuda")  # PyTorch's own allocator
        leases = our_leases(c, m.id)
        assert leases, c.status()["leases"]
        assert our_leases(c, 0) == [], c.status()["leases"]
        assert rt.stats()["allocations"] >= 1
        assert float((w @ outside).abs().sum()) > 0
        del w
        # `as pool` still holds the pool: PyTorch keeps its blocks, and release_pool says so
        # instead of returning as if it had given them back.
        import warnings
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            rt.release_pool(m)
        assert any("still referenced" in str(w.message) for w in caught), caught
        assert our_leases(c, m.id), c.status()["leases"]
        del pool
        rt.empty_cache()
        eventually(lambda: our_leases(c, m.id) == [], "the pool's leases to go")
        print("OK", rt.stats())
        """)


def main():
    if PYTHON is None:
        print(f"test_torch: skipped: no Python here has PyTorch with a GPU ({DESCRIPTION}). "
              f"Set ROCMMEM_TORCH_PYTHON to an interpreter that has.")
        sys.exit(SKIP)
    print(f"test_torch: {PYTHON}: torch {DESCRIPTION}, daemon backend {BACKEND}")
    unittest.main(verbosity=2)


if __name__ == "__main__":
    main()
