# SPDX-License-Identifier: MIT
"""fakecuda: one faked GPU for Debian's CPU-only PyTorch, so that tests run the GPU code paths of
upstream ComfyUI and FramePack (and rocmmem's integrations) on a machine without one.

What is faked, and only this (install() does it; nothing of ComfyUI or rocmmem is patched):
- torch.cuda's queries answer for one device, "cuda:0", of `total` bytes: is_available,
  device_count, current_device, get_device_name, get_device_properties (name, total_memory),
  mem_get_info, memory_stats, memory_allocated, memory_reserved, max_memory_allocated,
  empty_cache, ipc_collect, synchronize, get_allocator_backend. Anything else of torch.cuda
  keeps failing as on a CPU-only PyTorch ("Torch not compiled with CUDA enabled").
- A TorchFunctionMode, entered on the main thread and on every thread started afterwards,
  places tensors meant for "cuda" in CPU memory: a device argument "cuda" becomes "cpu", a move
  to "cuda" copies and records the copy as on the device, a move of a recorded tensor to the
  CPU copies (the recorded one then dies with its last reference, as device memory is freed),
  results of operations on recorded tensors are recorded, and a recorded tensor's .device says
  "cuda:0". What the device holds (allocated()) is the bytes of the live recorded tensors'
  storages: the "real bytes" the integrations compare their reservations with.
"""
import threading
import weakref

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_flatten

GiB = 1 << 30
DEVICE = torch.device("cuda", 0)
CPU = torch.device("cpu")

_lock = threading.Lock()
_recorded = {}  # id(tensor) -> (weak reference, (storage address, bytes)): "on the GPU"
_state = {"total": 0, "installed": False, "empty_cache": 0, "peak": 0}


def _is_cuda(v):
    if isinstance(v, torch.device):
        return v.type == "cuda"
    if isinstance(v, str):
        return v == "cuda" or v.startswith("cuda:")
    return False


def _to_cpu(v):
    return CPU if _is_cuda(v) else v


def on_device(t):
    """Whether tensor t is "on the GPU"."""
    with _lock:
        r = _recorded.get(id(t))
    return r is not None and r[0]() is t


def _add(t):
    """Records t (anew: its storage may have changed, as after .data = ...)."""
    key = id(t)

    def gone(ref, key=key):
        with _lock:
            r = _recorded.get(key)
            if r is not None and r[0] is ref:
                del _recorded[key]

    with torch._C.DisableTorchFunction():
        storage = _storage_key(t)
    with _lock:
        r = _recorded.get(key)
        ref = r[0] if r is not None and r[0]() is t else weakref.ref(t, gone)
        _recorded[key] = (ref, storage)


def _discard(t):
    with _lock:
        r = _recorded.get(id(t))
        if r is not None and r[0]() is t:
            del _recorded[id(t)]


def _record(out):
    leaves, _ = tree_flatten(out)
    for t in leaves:
        if isinstance(t, torch.Tensor):
            _add(t)


def _storage_key(t):
    try:
        s = t.untyped_storage() if hasattr(t, "untyped_storage") else t.storage()
        return s.data_ptr(), s.nbytes()
    except Exception:
        return id(t), t.numel() * t.element_size()


def allocated():
    """Bytes of the live tensors on the faked GPU, each storage counted once."""
    with _lock:
        storages = dict(storage for ref, storage in _recorded.values() if ref() is not None)
    used = sum(storages.values())
    _state["peak"] = max(_state["peak"], used)
    return used


def total():
    return _state["total"]


def empty_cache_calls():
    return _state["empty_cache"]


def _target_of_to(args, kwargs):
    """(moves to the GPU, moves to the CPU) for Tensor.to's arguments."""
    device = kwargs.get("device")
    for a in args:
        if isinstance(a, (torch.device, str)):
            device = a
        elif isinstance(a, torch.Tensor):
            return (True, False) if on_device(a) else (False, True)
    if device is None:
        return False, False
    return _is_cuda(device), not _is_cuda(device)


class _Placement(TorchFunctionMode):
    """The faked GPU's tensors: see the module's docstring."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        owner = getattr(func, "__self__", None)
        if name == "__get__" and getattr(owner, "__name__", None) in ("device", "is_cuda"):
            t = args[0]
            out = func(*args, **kwargs)
            if isinstance(t, torch.Tensor) and on_device(t):
                return DEVICE if owner.__name__ == "device" else True
            return out
        if name == "__set__" and getattr(owner, "__name__", None) == "data":
            func(*args, **kwargs)
            t, value = args[0], args[1]
            if on_device(value):
                _add(t)
            else:
                _discard(t)
            return None
        if name == "_parse_to":  # Module.to: keep "cuda" for the per-tensor .to() below
            return func(*args, **kwargs)
        if name in ("to", "cuda", "cpu") and args and isinstance(args[0], torch.Tensor):
            t = args[0]
            if name == "cuda":
                to_gpu, to_cpu = True, False
                args, kwargs = (t,), {k: v for k, v in kwargs.items() if k != "device"}
                func = torch.Tensor.to
            elif name == "cpu":
                to_gpu, to_cpu = False, True
            else:
                to_gpu, to_cpu = _target_of_to(args[1:], kwargs)
            was = on_device(t)
            args = (t,) + tuple(_to_cpu(a) for a in args[1:])
            kwargs = {k: _to_cpu(v) for k, v in kwargs.items()}
            if (to_gpu and not was) or (to_cpu and was):
                if name == "to":
                    kwargs["copy"] = True
                    out = func(*args, **kwargs)
                else:
                    out = t.clone()
                if to_gpu:
                    _record(out)
                return out
            out = func(*args, **kwargs)
            if was and not to_cpu:
                _record(out)
            return out
        moved = False
        if "device" in kwargs and _is_cuda(kwargs["device"]):
            kwargs["device"] = CPU
            moved = True
        new_args = []
        for a in args:
            if _is_cuda(a) and name not in ("__get__", "__set__"):
                a, moved = CPU, True
            new_args.append(a)
        out = func(*new_args, **kwargs)
        if not moved:
            leaves, _ = tree_flatten((args, kwargs))
            moved = any(isinstance(x, torch.Tensor) and on_device(x) for x in leaves)
        if moved:
            _record(out)
        return out


class _Properties:
    def __init__(self):
        self.name = "rocmmem test GPU (faked)"
        self.total_memory = _state["total"]
        self.major, self.minor = 8, 0  # fp16-capable, so that ComfyUI puts text encoders on it
        self.multi_processor_count = 1
        self.gcnArchName = "faked"


def _stats(device=None):
    used = allocated()
    return {"active_bytes.all.current": used, "reserved_bytes.all.current": used,
            "allocated_bytes.all.current": used, "allocated_bytes.all.peak": _state["peak"]}


def _mem_get_info(device=None):
    used = allocated()
    return max(0, _state["total"] - used), _state["total"]


def _empty_cache():
    _state["empty_cache"] += 1


_FAKES = {
    "is_available": lambda: True,
    "device_count": lambda: 1,
    "current_device": lambda: 0,
    "get_device_name": lambda device=None: "rocmmem test GPU (faked)",
    "get_device_properties": lambda device=None: _Properties(),
    "mem_get_info": _mem_get_info,
    "memory_stats": _stats,
    "memory_allocated": lambda device=None: allocated(),
    "memory_reserved": lambda device=None: allocated(),
    "max_memory_allocated": lambda device=None: _state["peak"],
    "empty_cache": _empty_cache,
    "ipc_collect": lambda: None,
    "synchronize": lambda device=None: None,
    "get_allocator_backend": lambda: "native",
    "is_bf16_supported": lambda *a, **k: True,
}


def install(total_bytes=8 * GiB):
    """Fakes the GPU (once per process; a later call only changes its size)."""
    _state["total"] = int(total_bytes)
    if _state["installed"]:
        return
    if torch.cuda.is_available():
        raise RuntimeError("fakecuda: this PyTorch has a real GPU; the fake is for CPU-only "
                           "builds")
    _state["installed"] = True
    for name, fn in _FAKES.items():
        setattr(torch.cuda, name, fn)
    run = threading.Thread.run

    def placed_run(self):
        with _Placement():
            run(self)

    threading.Thread.run = placed_run
    _Placement().__enter__()  # the main thread's, for the process's life


def installed():
    return _state["installed"]


__all__ = ["install", "installed", "allocated", "on_device", "total", "empty_cache_calls",
           "DEVICE", "GiB"]
