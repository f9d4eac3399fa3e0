# SPDX-License-Identifier: MIT
"""rocmmem.torch's glue without a GPU: the module without PyTorch, finding the library, and
install()/model_pool() against a stand-in `torch` that calls the allocator exactly as
PyTorch's CUDAPluggableAllocator and MemPool do (through the function pointers, by name),
on a real rocmmemd with the host backend, whose leases are plain host memory.

What the stand-in cannot show (kernels on leased device memory, PyTorch's own caching) is
test_torch.py's, on a machine with a GPU.
"""
import os
import shutil
import tempfile
import textwrap
import unittest

from torch_fixture import PYTHONPATH, Daemon, child_env, run_python

# A stand-in for the parts of torch that rocmmem.torch touches, behaving as PyTorch 2.5-2.8
# do: CUDA initialises lazily at the first allocation; the allocator can be swapped only
# before; a MemPool routes the allocations of use_mem_pool() through its allocator and caches
# what is freed until the pool is gone and empty_cache() runs.
STAND_IN = {
    "torch/__init__.py": """
        __version__ = "2.5.0+stand-in"
        from . import cuda

        class version:
            hip = None
            cuda = "stand-in"
        """,
    "torch/cuda/__init__.py": """
        import ctypes
        import threading
        from . import memory
        from .memory import MemPool, use_mem_pool, empty_cache

        _initialized = False
        _libc = ctypes.CDLL(None)
        _libc.malloc.restype = ctypes.c_void_p
        _libc.malloc.argtypes = [ctypes.c_size_t]
        _libc.free.argtypes = [ctypes.c_void_p]
        _live = {}  # ptr -> (size, where it came from)
        _lock = threading.Lock()

        def is_available():
            return True

        def is_initialized():
            return _initialized

        def init():
            global _initialized
            _initialized = True
            memory._allocator_initialized = True

        def current_device():
            return 0

        def synchronize():
            pass

        def get_device_name(i=0):
            return "stand-in"

        def alloc(nbytes, stream=None):
            \"\"\"A tensor's memory, as PyTorch gets it: the pool in use, else the current
            allocator (the pluggable one, or the caching allocator: here malloc).\"\"\"
            if not _initialized:
                init()
            pool = memory._pool_in_use()
            if pool is not None:
                ptr = pool._malloc(nbytes, stream)
                where = pool
            elif memory._current is not None:
                ptr = memory._current.alloc(nbytes, 0, stream)
                where = memory._current
            else:
                ptr = _libc.malloc(max(nbytes, 1))
                where = None
            if ptr:
                ctypes.memset(ptr, 0x5A, min(nbytes, 4096))  # it is really memory
                with _lock:
                    _live[ptr] = (nbytes, where, stream)
            return ptr or 0

        def free(ptr):
            with _lock:
                nbytes, where, stream = _live.pop(ptr)
            if where is None:
                _libc.free(ptr)
            elif isinstance(where, MemPool):
                where._cache(ptr, nbytes, stream)
            else:
                where.free(ptr, nbytes, 0, stream)
        """,
    "torch/cuda/memory.py": """
        import contextlib
        import ctypes
        import threading
        import weakref

        ALLOC = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_ssize_t, ctypes.c_int,
                                 ctypes.c_void_p)
        FREE = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_ssize_t, ctypes.c_int,
                                ctypes.c_void_p)
        _current = None  # the _CUDAAllocator installed, None: the caching allocator
        _allocator_initialized = False
        _tls = threading.local()
        _dead_pools = []  # cached segments of pools that are gone, freed by empty_cache

        class _CUDAAllocator:
            \"\"\"torch._C._cuda_CUDAAllocator: the two C functions.\"\"\"
            def __init__(self, alloc_fn, free_fn):
                self.alloc = ALLOC(alloc_fn)
                self.free = FREE(free_fn)

        class CUDAPluggableAllocator:
            def __init__(self, path_to_so_file, alloc_fn_name, free_fn_name):
                allocator = ctypes.CDLL(path_to_so_file)
                alloc_fn = ctypes.cast(getattr(allocator, alloc_fn_name), ctypes.c_void_p).value
                free_fn = ctypes.cast(getattr(allocator, free_fn_name), ctypes.c_void_p).value
                assert alloc_fn is not None and free_fn is not None
                self._allocator = _CUDAAllocator(alloc_fn, free_fn)

            def allocator(self):
                return self._allocator

        def change_current_allocator(allocator):
            global _current
            if _allocator_initialized:
                raise RuntimeError("Can't swap an already initialized allocator")
            _current = allocator.allocator()

        class _Segments:
            def __init__(self, allocator):
                self.allocator = allocator
                self.cached = []  # (ptr, size, stream)

            def release(self):
                for ptr, size, stream in self.cached:
                    self.allocator.free(ptr, size, 0, stream)
                self.cached = []

        class MemPool:
            def __init__(self, allocator=None):
                if allocator is not None and not isinstance(allocator, _CUDAAllocator):
                    raise TypeError("MemPool takes a torch._C._cuda_CUDAAllocator")
                if _current is not None:
                    raise RuntimeError("CUDAPluggableAllocator does not support MemPool")
                self._segments = _Segments(allocator)
                weakref.finalize(self, _dead_pools.append, self._segments)

            def _malloc(self, nbytes, stream):
                for i, (ptr, size, s) in enumerate(self._segments.cached):
                    if size == nbytes and s == stream:
                        del self._segments.cached[i]
                        return ptr
                return self._segments.allocator.alloc(nbytes, 0, stream)

            def _cache(self, ptr, nbytes, stream):
                self._segments.cached.append((ptr, nbytes, stream))

        def _pool_in_use():
            return getattr(_tls, "pool", None)

        @contextlib.contextmanager
        def use_mem_pool(pool, device=None):
            previous = _pool_in_use()
            _tls.pool = pool
            try:
                yield
            finally:
                _tls.pool = previous

        def empty_cache():
            while _dead_pools:
                _dead_pools.pop().release()
        """,
}

PRELUDE = """
import ctypes, errno, os, sys
import rocmmem
import rocmmem.torch as rt
SOCK = os.environ.get("TORCH_TEST_SOCKET")

def our_leases(c, model_id=None):
    return [l for l in c.status()["leases"]
            if l["owner_pid"] == os.getpid() and l["tag"] == "torch"
            and (model_id is None or l["model_id"] == model_id)]
"""

STAND_IN_DIR = None


def setUpModule():
    global STAND_IN_DIR
    STAND_IN_DIR = tempfile.mkdtemp(prefix="rocmmem-stand-in-torch-")
    for name, text in STAND_IN.items():
        path = os.path.join(STAND_IN_DIR, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(textwrap.dedent(text))


def tearDownModule():
    shutil.rmtree(STAND_IN_DIR, ignore_errors=True)


class Glue(unittest.TestCase):
    budget = "1G"

    def setUp(self):
        self.daemon = Daemon(backend="host", budget=self.budget)
        self.addCleanup(self.stop)

    def stop(self):
        self.assertEqual(self.daemon.stop(), 0, self.daemon.read_log())

    def child(self, code, torch=True, **env):
        path = (STAND_IN_DIR + os.pathsep if torch else "") + PYTHONPATH
        rc, out = run_python(PRELUDE + textwrap.dedent(code),
                             env=child_env(TORCH_TEST_SOCKET=self.daemon.sock, PYTHONPATH=path,
                                           **env))
        self.assertEqual(rc, 0, f"--- child ---\n{out}--- daemon ---\n{self.daemon.read_log()}")
        self.assertIn("OK", out)
        return out

    def test_without_torch(self):
        """the module imports without PyTorch; what needs it says so."""
        self.child("""
        try:
            import torch
            print("OK: torch is importable here; nothing to check")
            sys.exit(0)
        except ImportError:
            pass
        assert rt.stats()["leases"] == 0
        for call in (rt.install, rt.allocator, lambda: rt.model_pool(1).__enter__()):
            try:
                call()
            except rt.TorchError as e:
                assert e.errno == errno.ENOPKG and "needs PyTorch" in str(e), e
                assert isinstance(e, rocmmem.Error) and isinstance(e, RuntimeError)
            else:
                raise AssertionError(f"{call} worked without torch")
        print("OK")
        """, torch=False)

    def test_old_torch(self):
        """a PyTorch older than 2.0 (no CUDAPluggableAllocator) gets a clear error, not an
        AttributeError from deep inside."""
        self.child("""
        import torch
        for old in ("1.13.1", "1.12.0+rocm5.1.1", "0.4.1", "garbage"):
            torch.__version__ = old
            for call in (rt.install, rt.allocator, lambda: rt.model_pool(1).__enter__()):
                try:
                    call()
                except rt.TorchError as e:
                    assert e.errno == errno.ENOPKG, e
                    assert "needs PyTorch 2.0 or later" in str(e) and old in str(e), e
                else:
                    raise AssertionError(f"{call} worked with PyTorch {old}")
        torch.__version__ = "2.0.0"
        rt.allocator()  # 2.0 is enough
        print("OK")
        """)

    def test_library_path(self):
        """$ROCMMEM_TORCH_LIBRARY, else beside the librocmmem the package loads."""
        lib = os.environ["ROCMMEM_TORCH_LIBRARY"]
        librocmmem = os.environ["ROCMMEM_LIBRARY"]
        same_dir = os.path.dirname(os.path.realpath(lib)) == \
            os.path.dirname(os.path.realpath(librocmmem))
        self.assertTrue(same_dir, "the build puts both libraries in one directory")
        self.child(f"""
        assert rt.library_path() == {lib!r}, rt.library_path()
        print("OK")
        """)
        # Found through librocmmem's own location, by path or by the loader's search.
        self.child(f"""
        assert os.path.realpath(rt.library_path()) == os.path.realpath({lib!r}), rt.library_path()
        rt.stats()
        print("OK")
        """, ROCMMEM_TORCH_LIBRARY="")
        self.child(f"""
        assert not os.environ.get("ROCMMEM_LIBRARY")
        assert os.path.realpath(rt.library_path()) == os.path.realpath({lib!r}), rt.library_path()
        print("OK")
        """, ROCMMEM_TORCH_LIBRARY="", ROCMMEM_LIBRARY="",
                   LD_LIBRARY_PATH=os.path.dirname(librocmmem))
        self.child("""
        try:
            rt.stats()
        except rocmmem.LibraryNotFound as e:
            assert "/nonexistent/librocmmem_torch.so" in str(e), e
            print("OK", e)
        """, ROCMMEM_TORCH_LIBRARY="/nonexistent/librocmmem_torch.so")

    def test_install_allocates_from_leases(self):
        """install() swaps the allocator; tensors come from one leased chunk; freed, the
        memory goes back."""
        self.child("""
        import torch
        pluggable = rt.install(socket=SOCK, name="glue")
        assert rt.installed() and torch.cuda.memory._current is pluggable.allocator()
        assert rt.install() is pluggable  # twice: the same
        c = rocmmem.connect(socket=SOCK, name="observer")
        ptrs = [torch.cuda.alloc(1000 + 37 * i) for i in range(500)]
        assert all(p and p % 512 == 0 for p in ptrs)
        s = rt.stats()
        assert s["allocations"] == 500 and s["leases"] == 1 and s["lease_acquires"] == 1, s
        assert len(our_leases(c)) == 1
        for p in reversed(ptrs):
            torch.cuda.free(p)
        s = rt.stats()
        assert s["allocations"] == 0 and s["kept_bytes"] == 64 << 20, s
        assert rt.empty_cache() == 64 << 20
        assert our_leases(c) == []
        print("OK")
        """)

    def test_install_after_cuda_init(self):
        """too late: a clear error, and PyTorch's allocator untouched."""
        self.child("""
        import torch
        torch.cuda.alloc(10)
        try:
            rt.install(socket=SOCK)
        except rt.TorchError as e:
            assert e.errno == errno.EBUSY and "before the first CUDA allocation" in str(e), e
        else:
            raise AssertionError("installed after CUDA initialised")
        assert not rt.installed() and torch.cuda.memory._current is None
        print("OK")
        """)

    def test_model_pool_after_install(self):
        """with install(client=...), model_pool tags; other threads and code after it not."""
        self.child("""
        import threading
        import torch
        c = rocmmem.connect(socket=SOCK, name="host")
        rt.install(client=c)
        m = c.register_model("unet", model_class="transformer")
        v = c.register_model("vae", model_class="vae")
        with rt.model_pool(m) as pool:
            assert pool is None and rt.current_model() == m.id
            w = torch.cuda.alloc(1 << 20)
            with rt.model_pool(v):
                assert rt.current_model() == v.id
                vw = torch.cuda.alloc(1 << 20)
            assert rt.current_model() == m.id
            other = []
            t = threading.Thread(target=lambda: other.append(torch.cuda.alloc(4096)))
            t.start()
            t.join()
        assert rt.current_model() == 0
        x = torch.cuda.alloc(4096)
        assert len(our_leases(c, m.id)) == 1 and len(our_leases(c, v.id)) == 1
        assert len(our_leases(c, 0)) == 1  # the other thread's and x share one
        for p in (w, vw, other[0], x):
            torch.cuda.free(p)
        rt.trim()
        assert our_leases(c) == []
        # A model of another connection cannot be used by this allocator.
        d = rocmmem.connect(socket=SOCK, name="other")
        o = d.register_model("other")
        try:
            with rt.model_pool(o):
                pass
        except rt.TorchError as e:
            assert e.errno == errno.EXDEV, e
        else:
            raise AssertionError("a model of another connection was accepted")
        rt.shutdown()
        m.acquire(); m.release()  # the client stays open
        print("OK")
        """)

    def test_model_pool_without_install(self):
        """without install(): a MemPool over the library for the model's tensors only; its
        leases go back once the model's tensors are gone and release_pool() runs."""
        self.child("""
        import torch
        c = rocmmem.connect(socket=SOCK, name="pool-host")
        m = c.register_model("weights", model_class="transformer")
        with rt.model_pool(m) as pool:
            assert pool is not None
            weights = [torch.cuda.alloc(3 << 20) for _ in range(4)]
        activations = torch.cuda.alloc(1 << 20)  # PyTorch's own allocator: no lease
        leases = our_leases(c, m.id)
        assert leases and all(l["model_id"] == m.id for l in leases), leases
        assert our_leases(c, 0) == []
        assert rt.stats()["allocations"] == 4
        with rt.model_pool(m) as again:
            assert again is pool  # one pool per model
        for p in weights:
            torch.cuda.free(p)
        # Cached by the pool, as PyTorch does: still allocated in the library.
        assert rt.stats()["allocations"] == 4
        del pool, again  # the pool goes with its last reference
        rt.release_pool(m)
        assert rt.stats()["allocations"] == 0, rt.stats()
        assert our_leases(c, m.id) == [], c.status()["leases"]
        torch.cuda.free(activations)
        print("OK")
        """)

    def test_refusal_explained(self):
        """a lease the daemon refuses: NULL to PyTorch, the daemon's reason in last_error()."""
        self.child("""
        import torch
        rt.install(socket=SOCK, timeout=0)
        assert torch.cuda.alloc(2 << 30) == 0
        s = rt.stats()
        assert s["failed_allocs"] == 1, s
        assert "Could not lease 2 GiB on device 0" in rt.last_error(), rt.last_error()
        assert "budget" in rt.last_error(), rt.last_error()
        print("OK", rt.last_error())
        """)


if __name__ == "__main__":
    unittest.main(verbosity=2)
