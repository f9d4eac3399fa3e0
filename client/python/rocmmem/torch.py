# SPDX-License-Identifier: MIT
"""rocmmem.torch: PyTorch's GPU memory from rocmmemd leases (librocmmem_torch.so).

    import rocmmem.torch
    rocmmem.torch.install()          # first thing: before the first CUDA allocation
    import torch
    x = torch.empty(1 << 20, device="cuda")   # sub-allocated from a leased chunk

install() makes librocmmem_torch.so PyTorch's CUDA allocator (CUDAPluggableAllocator): every
tensor is carved out of large leases locally, and leases go back to the daemon when they
empty. model_pool(model) routes the memory allocated inside it to leases tagged with a model
registered with the daemon: with install(), by tagging; without it, through a
torch.cuda.MemPool over the same library while PyTorch's caching allocator keeps the rest.
See docs/torch.md.

It needs PyTorch 2.0 or later (MINIMUM_TORCH: CUDAPluggableAllocator and
change_current_allocator came with 2.0; model_pool() without install() needs torch.cuda.MemPool,
2.5). This module imports without PyTorch; its functions then raise TorchError (ENOPKG), and
so they do with an older PyTorch, naming its version.
"""
import contextlib
import ctypes
import errno as _errno
import gc
import os
import re
import sys
import threading
import warnings
import weakref

from . import _native as N
from .errors import Error, LibraryNotFound, make_error
from .sizes import parse_size

__all__ = ["TorchError", "library_path", "install", "installed", "allocator", "model_pool",
           "set_model", "current_model", "release_pool", "stats", "trim", "empty_cache",
           "shutdown", "last_error"]

MINIMUM_TORCH = (2, 0)
LIBRARY_ENV = "ROCMMEM_TORCH_LIBRARY"
LIBRARY_NAME = "librocmmem_torch.so"
ALLOC_FN = "rocmmem_torch_alloc"
FREE_FN = "rocmmem_torch_free"


class TorchError(Error, RuntimeError):
    """rocmmem.torch cannot do what was asked: no PyTorch or one older than 2.0 (ENOPKG), no
    GPU (ENODEV), too
    late to install (EBUSY), a model of another connection (EXDEV), no MemPool in this
    PyTorch (EOPNOTSUPP)."""


_STATS_FIELDS = ("leases", "leased_bytes", "used_bytes", "requested_bytes", "allocations",
                 "bad_frees", "allocs_total", "frees_total", "failed_allocs", "lease_acquires",
                 "lease_releases", "kept_bytes", "arenas")


class _Stats(ctypes.Structure):
    """struct rocmmem_torch_stats (client/torch/rocmmem_torch.h)."""
    _fields_ = [(name, ctypes.c_uint64) for name in _STATS_FIELDS] + \
        [("last_error", ctypes.c_char * 512)]


_PROTOTYPES = {
    "rocmmem_torch_alloc": (ctypes.c_void_p, [ctypes.c_ssize_t, ctypes.c_int, ctypes.c_void_p]),
    "rocmmem_torch_free": (None, [ctypes.c_void_p, ctypes.c_ssize_t, ctypes.c_int,
                                  ctypes.c_void_p]),
    "rocmmem_torch_init": (ctypes.c_int, [ctypes.c_char_p, ctypes.c_char_p]),
    "rocmmem_torch_init_client": (ctypes.c_int, [ctypes.c_void_p]),
    "rocmmem_torch_set_model": (ctypes.c_uint64, [ctypes.c_uint64]),
    "rocmmem_torch_get_model": (ctypes.c_uint64, []),
    "rocmmem_torch_set_timeout": (ctypes.c_int, [ctypes.c_int64]),
    "rocmmem_torch_set_chunk_size": (ctypes.c_int, [ctypes.c_uint64]),
    "rocmmem_torch_set_keep_empty": (ctypes.c_int, [ctypes.c_uint64]),
    "rocmmem_torch_stats": (ctypes.c_int, [ctypes.POINTER(_Stats)]),
    "rocmmem_torch_trim": (ctypes.c_int64, []),
    "rocmmem_torch_shutdown": (ctypes.c_int64, []),
}


class _State:
    def __init__(self):
        self.lock = threading.RLock()
        self.lib = None
        self.path = None
        self.pluggable = None  # torch.cuda.memory.CUDAPluggableAllocator over the library
        self.installed = False  # it is PyTorch's current allocator
        self.client = None  # the rocmmem.Client whose connection the library uses, if any
        self.connected = False
        self.pools = {}  # model id -> torch.cuda.MemPool (without install())


_state = _State()


def _torch():
    """PyTorch with a usable GPU, imported on first use."""
    try:
        import torch
    except ImportError as e:
        raise TorchError(_errno.ENOPKG, f"rocmmem.torch needs PyTorch: import torch failed "
                                        f"({e})") from None
    version = getattr(torch, "__version__", "")
    m = re.match(r"(\d+)\.(\d+)", str(version))
    if not m or (int(m.group(1)), int(m.group(2))) < MINIMUM_TORCH:
        raise TorchError(_errno.ENOPKG, f"rocmmem.torch needs PyTorch "
                                        f"{'.'.join(map(str, MINIMUM_TORCH))} or later "
                                        f"(CUDAPluggableAllocator); this is PyTorch "
                                        f"{version or 'of an unknown version'}")
    if not hasattr(torch, "cuda") or not torch.cuda.is_available():
        raise TorchError(_errno.ENODEV, "rocmmem.torch needs a GPU PyTorch can use: "
                                        "torch.cuda.is_available() is False")
    return torch


def _librocmmem_dir():
    """The directory of the librocmmem the rocmmem package loads, or None."""
    env = os.environ.get(N.LIBRARY_ENV)
    if env and os.sep in env:
        return os.path.dirname(os.path.abspath(env))
    try:
        lib = N.load()
    except LibraryNotFound:
        return None

    class _DlInfo(ctypes.Structure):
        _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", ctypes.c_void_p),
                    ("dli_sname", ctypes.c_char_p), ("dli_saddr", ctypes.c_void_p)]

    try:
        libc = ctypes.CDLL(None)
        dladdr = libc.dladdr
    except (OSError, AttributeError):
        return None
    dladdr.argtypes = [ctypes.c_void_p, ctypes.POINTER(_DlInfo)]
    dladdr.restype = ctypes.c_int
    info = _DlInfo()
    addr = ctypes.cast(lib.rocmmem_connect, ctypes.c_void_p).value
    if not dladdr(addr, ctypes.byref(info)) or not info.dli_fname:
        return None
    return os.path.dirname(os.path.realpath(os.fsdecode(info.dli_fname)))


def library_path():
    """Where librocmmem_torch.so is: $ROCMMEM_TORCH_LIBRARY, else beside the librocmmem the
    package loads (installed or built: they lie in one directory) or in its rocmmem/
    subdirectory (the Debian package's place for a plugin), else its name for the dynamic
    loader's search."""
    env = os.environ.get(LIBRARY_ENV)
    if env:
        return env
    d = _librocmmem_dir()
    for candidate in ((d, LIBRARY_NAME), (d, "rocmmem", LIBRARY_NAME)) if d else ():
        if os.path.exists(os.path.join(*candidate)):
            return os.path.join(*candidate)
    return LIBRARY_NAME


def _lib():
    """librocmmem_torch.so with its prototypes set, loaded once."""
    with _state.lock:
        if _state.lib is not None:
            return _state.lib
        path = library_path()
        try:
            lib = ctypes.CDLL(path)
        except OSError as e:
            raise LibraryNotFound(f"Could not load {path}: {e} (set ${LIBRARY_ENV} to its path, "
                                  f"or install rocmmemd's libraries)", name=path,
                                  path=path) from None
        for name, (restype, argtypes) in _PROTOTYPES.items():
            try:
                fn = getattr(lib, name)
            except AttributeError:
                raise LibraryNotFound(f"{path} has no {name}: it is not librocmmem_torch, or "
                                      f"older than this package", name=path, path=path) from None
            fn.restype = restype
            fn.argtypes = argtypes
        _state.lib = lib
        _state.path = path
        return lib


def _check(rc, what):
    if rc < 0:
        message = _stats_struct().last_error.decode("utf-8", "backslashreplace")
        raise make_error(rc, f"{what}: {message}" if message else what)
    return rc


def _stats_struct():
    s = _Stats()
    _lib().rocmmem_torch_stats(ctypes.byref(s))
    return s


def _configure(timeout, chunk_size, keep_empty):
    lib = _lib()
    if timeout is not None:
        lib.rocmmem_torch_set_timeout(-1 if timeout == float("inf") else int(timeout * 1000))
    if chunk_size is not None:
        _check(lib.rocmmem_torch_set_chunk_size(parse_size(chunk_size)), "chunk_size")
    if keep_empty is not None:
        lib.rocmmem_torch_set_keep_empty(parse_size(keep_empty))


def _connect(socket, name, client):
    """Connects the library, once: through client's connection, or its own."""
    lib = _lib()
    with _state.lock:
        if client is not None:
            if _state.connected and _state.client is client:
                return
            # The handle stays valid until release_handle(), even if the client is closed
            # meanwhile: the library keeps using the connection until shutdown().
            try:
                handle = client.retain_handle()
            except Exception as e:
                raise TorchError(_errno.EBADF, f"the client has no connection to use: {e}") \
                    from e
            rc = lib.rocmmem_torch_init_client(handle)
            if rc < 0:
                client.release_handle()
            if rc == -_errno.EALREADY:
                raise TorchError(_errno.EALREADY, "the allocator has its connection already: "
                                                  "pass client= at the first call")
            _check(rc, "Could not use the client's connection")
            _state.client = client
        elif not _state.connected:
            rc = lib.rocmmem_torch_init(None if socket is None else os.fsencode(socket),
                                        None if name is None else name.encode("utf-8"))
            if rc != -_errno.EALREADY:
                _check(rc, "Could not connect the allocator to rocmmemd")
        _state.connected = True


def allocator():
    """The torch.cuda.memory.CUDAPluggableAllocator over librocmmem_torch.so (made once),
    installed or not: for torch.cuda.MemPool(rocmmem.torch.allocator().allocator())."""
    torch = _torch()
    with _state.lock:
        if _state.pluggable is None:
            _lib()
            _state.pluggable = torch.cuda.memory.CUDAPluggableAllocator(
                _state.path, ALLOC_FN, FREE_FN)
        return _state.pluggable


def install(socket=None, name=None, client=None, timeout=None, chunk_size=None,
            keep_empty=None):
    """Makes rocmmemd's leases PyTorch's CUDA memory. Call it before anything allocates on
    the GPU (before the first tensor, model.to("cuda"), or torch.cuda.init()).

    socket, name: the daemon and the name the allocator's connection shows (None: defaults).
    client: a rocmmem.Client whose connection the allocator uses instead: needed for
    model_pool() with that client's models; keep it open while PyTorch runs.
    timeout: seconds a lease request may wait in the daemon's queue (default 30; 0 fails at
    once). chunk_size: the lease size small tensors share (default "64M"). keep_empty: the
    largest empty lease kept for the next tensor (default: chunk_size; 0: none).
    Raises TorchError (EBUSY) when CUDA is initialised already. Returns the allocator.
    """
    torch = _torch()
    with _state.lock:
        if _state.installed:
            _configure(timeout, chunk_size, keep_empty)
            if client is not None:
                _connect(socket, name, client)
            return _state.pluggable
        if torch.cuda.is_initialized():
            raise TorchError(_errno.EBUSY,
                             "rocmmem.torch.install() must run before the first CUDA "
                             "allocation: torch.cuda is initialised already (call it first "
                             "thing, before any tensor, model.to('cuda') or torch.cuda.init(); "
                             "or use model_pool() without install())")
        _configure(timeout, chunk_size, keep_empty)
        _connect(socket, name, client)
        pluggable = allocator()
        try:
            torch.cuda.memory.change_current_allocator(pluggable)
        except RuntimeError as e:
            raise TorchError(_errno.EBUSY, f"PyTorch refused the allocator: {e} (install() "
                                           f"must run before the first CUDA allocation)") from None
        _state.installed = True
        return pluggable


def installed():
    """Whether install() made the library PyTorch's allocator."""
    return _state.installed


def set_model(model):
    """Makes this thread's next allocations count toward model (a rocmmem.Model or its id;
    None or 0: none). Returns the previous model id."""
    model_id = 0 if model is None else getattr(model, "id", model)
    if isinstance(model_id, bool) or not isinstance(model_id, int) or model_id < 0:
        raise TypeError(f"a model is a rocmmem.Model, its id or None, not {model!r}")
    return _lib().rocmmem_torch_set_model(model_id)


def current_model():
    """This thread's model id for new allocations (0: none)."""
    return _lib().rocmmem_torch_get_model()


def _mem_pool(torch, pluggable):
    """A torch.cuda.MemPool over the library, whichever constructor this PyTorch has."""
    pool_cls = getattr(torch.cuda, "MemPool", None) or getattr(torch.cuda.memory, "MemPool",
                                                               None)
    if pool_cls is None:
        raise TorchError(_errno.EOPNOTSUPP,
                         f"this PyTorch ({torch.__version__}) has no torch.cuda.MemPool (2.5 "
                         f"or later): use install() instead")
    try:
        return pool_cls(pluggable.allocator())
    except (TypeError, AttributeError):
        return pool_cls(pluggable)  # releases that take the Python object itself


def _use_mem_pool(torch):
    use = getattr(torch.cuda, "use_mem_pool", None) or getattr(torch.cuda.memory,
                                                               "use_mem_pool", None)
    if use is None:
        raise TorchError(_errno.EOPNOTSUPP, f"this PyTorch ({torch.__version__}) has no "
                                            f"use_mem_pool: use install() instead")
    return use


@contextlib.contextmanager
def model_pool(model, device=None):
    """with model_pool(model): what this thread allocates on the GPU inside comes from leases
    tagged with model (a rocmmem.Model), which the daemon counts toward it and never shares
    with other memory. The model must be registered on the allocator's connection (install(
    client=...) or the first model_pool() sets it to the model's client).

    After install(): the allocations are tagged. Without install(): a torch.cuda.MemPool
    over the library (one per model, kept) holds them while PyTorch's caching allocator keeps
    serving everything else; its freed blocks stay cached in the pool until
    torch.cuda.empty_cache() (or empty_cache() here), which returns them and their leases.
    Yields the MemPool (None after install())."""
    torch = _torch()
    model_id = getattr(model, "id", model)
    owner = getattr(model, "client", None)
    with _state.lock:
        if owner is not None and model_id:
            if _state.client is None and not _state.connected:
                _connect(None, None, owner)
            elif _state.client is not owner:
                raise TorchError(_errno.EXDEV,
                                 f"model {model_id} is registered on another connection than "
                                 f"the allocator's: pass its client to install(client=...)")
        elif not _state.connected:
            _connect(None, None, None)
        pool = None
        if not _state.installed:
            pool = _state.pools.get(model_id)
            if pool is None:
                pool = _mem_pool(torch, allocator())
                _state.pools[model_id] = pool
    previous = set_model(model_id)
    try:
        if pool is None:
            yield None
        else:
            with _use_mem_pool(torch)(pool, device):
                yield pool
    finally:
        _lib().rocmmem_torch_set_model(previous)


def release_pool(model):
    """Without install(): drops model's MemPool, so that PyTorch lets go of the blocks it
    cached there (the model's tensors must be gone first), and gives the emptied leases back
    to the daemon. Call it when the model is unloaded (e.g. from its on_evict callback).
    PyTorch frees a pool's blocks only once nothing references the pool: a pool still
    referenced elsewhere (say, a name bound by `with model_pool(m) as pool`) gives nothing
    back, and a RuntimeWarning says so. Returns the bytes given back."""
    model_id = getattr(model, "id", model)
    with _state.lock:
        pool = _state.pools.pop(model_id, None)
    if pool is not None:
        torch = _torch()
        try:
            alive = weakref.ref(pool)
            others = 0
        except TypeError:  # a MemPool type without weak references
            alive = None
            gc.collect()  # garbage cycles that still hold it are not someone's reference
            others = sys.getrefcount(pool) - 2  # beyond this name and the call's argument
        del pool
        gc.collect()  # the pool goes when its last reference does
        torch.cuda.empty_cache()
        if (alive is not None and alive() is not None) or others > 0:
            # PyTorch keeps a live MemPool's cached blocks: nothing would go back, silently.
            warnings.warn(
                f"release_pool({model_id}): the model's MemPool is still referenced elsewhere "
                f"(a name bound by `with model_pool(...) as pool`?), so PyTorch keeps its "
                f"cached blocks and their leases stay: drop that reference, then call "
                f"rocmmem.torch.empty_cache()", RuntimeWarning, stacklevel=2)
    return trim()


def stats():
    """The allocator's counters as a dict: leases, leased_bytes, used_bytes,
    requested_bytes, allocations (live), bad_frees, allocs_total, frees_total,
    failed_allocs, lease_acquires, lease_releases, kept_bytes, arenas, last_error."""
    s = _stats_struct()
    d = {name: getattr(s, name) for name in _STATS_FIELDS}
    d["last_error"] = s.last_error.decode("utf-8", "backslashreplace")
    return d


def last_error():
    """Why the latest allocation failed (the daemon's explanation of a refusal), or ""."""
    return stats()["last_error"]


def trim():
    """Gives every empty lease back to the daemon. Returns the bytes given back."""
    return _lib().rocmmem_torch_trim()


def empty_cache():
    """torch.cuda.empty_cache() (PyTorch's cached blocks, MemPools included, go back to the
    library), then trim(). Returns the bytes given back to the daemon."""
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None and torch.cuda.is_initialized():
        torch.cuda.empty_cache()
    return trim()


def shutdown():
    """Gives every lease back and disconnects the allocator (a client passed to install()
    stays open). Tensors still alive become invalid: call it when PyTorch is done. Returns
    how many allocations were still live."""
    with _state.lock:
        live = _lib().rocmmem_torch_shutdown()
        if _state.client is not None:
            _state.client.release_handle()  # the library no longer uses its connection
        _state.client = None
        _state.connected = False
        return live
