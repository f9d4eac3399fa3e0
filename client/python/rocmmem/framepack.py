# SPDX-License-Identifier: MIT
"""framepack: FramePack's memory helpers, with rocmmemd deciding what stays on the GPU.

The same names and signatures as FramePack's diffusers_helper/memory.py (lllyasviel/FramePack),
so that switching FramePack over is one changed import line (docs/integrations.md):

    from rocmmem.framepack import cpu, gpu, get_cuda_free_memory_gb, ...

What changes is what loading and unloading mean. Each model is registered with the daemon the
first time it goes to a GPU (its size counted from its parameters and buffers, its class
guessed from its class name). Loading a model completely acquires it: the daemon reserves its
size, first having idle models evicted (this process's or another's) when it does not fit,
and only then are the weights moved. "Unload" means "release to the daemon": the weights stay
on the GPU until someone, this process or another, needs the room; the daemon then asks for
them back and the eviction callback moves the model to the CPU and empties PyTorch's cache,
on the client's event thread, even while this process is sampling.

"Keep N GB preserved" becomes part of a reservation: the N GB that FramePack keeps free for
activations and for layers swapped in on the fly are reserved together with the model they
are for, in one request, and stay with it while it is resident (evicted with it). For
move_model_to_device_with_memory_preservation that is the model being moved (the
transformer, which samples with it); for offload_model_from_device_for_memory_preservation,
the next model loaded as complete (the VAE, which decodes with it). So each step of
FramePack's loop asks the daemon for one thing while holding nothing else in use, and two
processes never each hold part of what the other waits for.

Without a daemon (not running, or librocmmem missing) every call does what FramePack's own
does, plain moves, and so does a process whose daemon goes away while it runs. Refusals are
not hidden: a model larger than the budget, or a wait longer than the timeout, raises the
rocmmem.Error that says why.

torch is imported only when there is one: these functions work on anything that has
.to(device=...) and parameters() (and modules() for partial moves), which is how the tests
drive them with stand-in models (cpu and gpu are then the strings "cpu" and "cuda:0"). Where
something cannot work, it says why instead of failing somewhere deeper, and never assumes a
GPU PyTorch without asking torch.cuda.is_available(): with a PyTorch that has no GPU, `gpu`,
DynamicSwapInstaller (FramePack's own, whose module fails to import there) and every move of
a torch module to a GPU raise GPUUnavailable (an ImportError) with the reason.

Environment: ROCMMEM_SOCKET (the daemon's socket), ROCMMEM_CLIENT_NAME (default
"FramePack"), ROCMMEM_FRAMEPACK_TIMEOUT (seconds to wait for room, default 3600),
ROCMMEM_FRAMEPACK_QUIET=1 (no messages on stdout).
"""
import collections
import errno
import os
import threading

import rocmmem
from . import _books, _fptorch, _holding
from ._fptorch import GPUUnavailable
from .sizes import format_size

__all__ = ["cpu", "gpu", "gpu_complete_modules", "DynamicSwapInstaller",
           "fake_diffusers_current_device", "get_cuda_free_memory_gb",
           "move_model_to_device_with_memory_preservation",
           "offload_model_from_device_for_memory_preservation", "unload_complete_models",
           "load_model_as_complete", "register", "stats", "client", "GPUUnavailable"]

GiB = 1 << 30
_DYNAMIC_SWAP_PREFIX = "DynamicSwap_"  # the class prefix FramePack's DynamicSwapInstaller adds

# The models loaded "as complete" and not unloaded since, as in FramePack (which reads it
# nowhere else). Through rocmmemd these are the models this module holds in use.
gpu_complete_modules = []

_lock = threading.RLock()  # bookkeeping only: never held across a call to the daemon
_state = None  # None: not connected yet; False: no daemon (plain moves); else a _Residency
_counts = collections.Counter()
_overrides = {}  # id(model) -> what register() set


# --- devices, names ------------------------------------------------------------------------

def __getattr__(name):
    # cpu and gpu as FramePack defines them, made on first use so that importing this module
    # neither imports torch nor touches a GPU. A gpu that cannot work raises its reason (an
    # ImportError: `from rocmmem.framepack import gpu` then says why).
    if name in ("cpu", "gpu"):
        value = _fptorch.default_devices()[name]
        if isinstance(value, GPUUnavailable):
            raise value
        globals()[name] = value
        return value
    # DynamicSwapInstaller has nothing to do with residency: FramePack's own is used.
    if name == "DynamicSwapInstaller":
        value = _fptorch.framepack_memory().DynamicSwapInstaller
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _cpu():
    return __getattr__("cpu") if "cpu" not in globals() else globals()["cpu"]


def _class_name(model):
    name = type(model).__name__
    if name.startswith(_DYNAMIC_SWAP_PREFIX):
        name = name[len(_DYNAMIC_SWAP_PREFIX):]
    return name


def _guess_class(name):
    """The rocmmemd class for a model's class name (FramePack's five models, and the like)."""
    n = name.lower()
    if "vision" in n or "imageencoder" in n or "image_encoder" in n:
        return "image_encoder"
    if "vae" in n or "autoencoder" in n:
        return "vae"
    if any(k in n for k in ("text", "llama", "t5", "clip", "bert", "gemma", "qwen")):
        return "text_encoder"
    if any(k in n for k in ("transformer", "unet", "dit", "diffusion")):
        return "transformer"
    return "other"


def _say(message):
    if os.environ.get("ROCMMEM_FRAMEPACK_QUIET") != "1":
        print(f"rocmmem.framepack: {message}", flush=True)


def _fmt(n):
    return format_size(int(n))


def _books_note(r, e):
    """What rocmmemd's books say of this process on e's device, for a log line ("; rocmmemd
    measures 9 GiB, declared 6 GiB: ..."), or "" (quiet, no answer, no books)."""
    if os.environ.get("ROCMMEM_FRAMEPACK_QUIET") == "1":
        return ""
    try:
        text = _books.books_text(r.client.status(), os.getpid(), e.device)
    except Exception:
        return ""
    return f"; {text}" if text else ""


# --- the daemon's side ---------------------------------------------------------------------

class _Entry(_holding.Slot):
    """One model this module registered: its handle and what this process did with it."""

    def __init__(self, model, device, name, model_class, priority, size, budget):
        super().__init__(model, device, name, model_class, budget, priority=priority)
        self.size = size  # the model's bytes, parameters and buffers
        self.loaded = 0  # bytes this module moved to the GPU
        self.moved = set()  # ids of the submodules moved by a partial load
        self.complete = False  # the whole model is on the GPU


class _Residency(_holding.Holdings):
    """The connection to rocmmemd and the models registered through it."""

    def __init__(self, client):
        timeout = os.environ.get("ROCMMEM_FRAMEPACK_TIMEOUT", "3600")
        try:
            timeout = float(timeout)
        except ValueError:
            timeout = 3600.0
        super().__init__(client, _lock, timeout)
        self.preserve = {}  # device -> bytes for the next model loaded as complete there

    # -- the daemon's view

    def device_info(self, device):
        st = self.client.status()
        for d in (st or {}).get("devices", []):
            if d.get("index") == device:
                return d
        raise rocmmem.NotFound(errno.ENODEV, f"rocmmemd manages no device {device}")

    def budget(self, device):
        return int(self.device_info(device)["budget_bytes"])

    # -- registration

    def entry(self, model, device):
        key = id(model)
        with _lock:
            e = self.entries.get(key)
            if e is not None and e.ref() is not model:
                e = None  # a dead model's id reused
        if e is not None and e.device == device:
            return e
        if e is not None:  # the model moves to another GPU: start again there
            self.forget(e)
        with _lock:
            over = _overrides.get(key, {})
        name = (over.get("name") or _class_name(model)).encode()[:64].decode("utf-8", "ignore")
        model_class = over.get("model_class") or _guess_class(name)
        priority = over.get("priority")
        if priority is None:
            priority = 1 if model_class in ("transformer", "vae") else 0
        e = _Entry(model, device, name, model_class, priority, _fptorch.tensors_bytes(model),
                   self.budget(device))
        with _lock:
            self.entries[key] = e
        return e

    # -- events (on the client's event thread, or inside a call that waits)

    def _unload(self, handle, why):
        with _lock:
            e = self.by_id.get(handle.id)
        if e is None:
            return
        model = e.ref()
        if model is not None and (e.loaded or e.complete):
            model.to(device=_cpu())
            _fptorch.empty_cache()
            _say(f"{why} {handle.name} ({_fmt(e.loaded)} back to the CPU)")
        with _lock:
            e.loaded = 0
            e.moved.clear()
            e.complete = False
            e.reserved = 0
            _counts["evictions" if why == "unloaded" else "revocations"] += 1
            _counts[f"evicted:{handle.name}"] += 1

    def on_evict(self, handle):
        self._unload(handle, "unloaded")

    def on_revoked(self, handle, reason):
        self._unload(handle, f"revoked ({reason}):")

    # -- the daemon went away

    def degrade(self):
        """Continues without the daemon: what the daemon would have evicted goes now."""
        with _lock:
            entries = list(self.entries.values())
        for e in entries:
            model = e.ref()
            if model is None:
                continue
            if e.held and e.complete:
                if not any(m is model for m in gpu_complete_modules):
                    gpu_complete_modules.append(model)
            elif e.loaded or e.complete:
                model.to(device=_cpu())
        _fptorch.empty_cache()


def _residency():
    """The connection to rocmmemd, or None where there is none: plain moves then."""
    global _state
    with _lock:
        state = _state
    if state is None:
        state = _connect()
        with _lock:
            if _state is None:
                _state = state
            state = _state
    if state is False:
        return None
    if not state.client.available:
        _say("rocmmemd went away: moving models as FramePack does")
        with _lock:
            _state = False
        state.degrade()
        return None
    return state


def _connect():
    name = os.environ.get("ROCMMEM_CLIENT_NAME", "FramePack")
    try:
        c = rocmmem.connect(name=name, fail_safe=True)
    except Exception as e:  # a missing library, a bad socket path: FramePack goes on alone
        _say(f"rocmmemd not available ({e}): moving models as FramePack does")
        return False
    if not c.available:
        _say("rocmmemd not available: moving models as FramePack does")
        c.close()
        return False
    c.start_event_thread()
    return _Residency(c)


def client():
    """The rocmmem client this module uses, or None without a daemon (connects if need be)."""
    r = _residency()
    return r.client if r else None


def register(model, name=None, model_class=None, priority=None):
    """Sets the name, class ("transformer", "vae", "text_encoder", "image_encoder", "other")
    or priority that model is registered with, for models whose class name says too little.
    Call it before the model's first load: a registered model keeps what it has."""
    with _lock:
        _overrides[id(model)] = {"name": name, "model_class": model_class,
                                 "priority": priority}


def stats():
    """Counters since the start: evictions and revocations handled ("evicted:NAME" per
    model), loads through the daemon, plain moves (no daemon)."""
    with _lock:
        return dict(_counts)


# --- plain moves, as FramePack makes them (no daemon) ----------------------------------------

def _modules(model):
    fn = getattr(model, "modules", None)
    return list(fn()) if fn else [model]


def _plain_unload(*args):
    for m in gpu_complete_modules + list(args):
        m.to(device=_cpu())
    gpu_complete_modules.clear()
    _counts["plain_moves"] += 1
    _fptorch.empty_cache()


def _plain_load(model, target_device, unload):
    if unload:
        _plain_unload()
    model.to(device=target_device)
    gpu_complete_modules.append(model)
    _counts["plain_moves"] += 1


def _plain_move(model, target_device, preserved_memory_gb):
    limit = preserved_memory_gb * GiB
    for m in _modules(model):
        free = _fptorch.plain_free_bytes(target_device)
        if free is not None and free <= limit:
            _fptorch.empty_cache()
            return
        if hasattr(m, "weight"):
            m.to(device=target_device)
    model.to(device=target_device)
    _counts["plain_moves"] += 1
    _fptorch.empty_cache()


def _plain_offload(model, target_device, preserved_memory_gb):
    limit = preserved_memory_gb * GiB
    for m in _modules(model):
        free = _fptorch.plain_free_bytes(target_device)
        if free is None or free >= limit:  # unknown (no torch): taken as plenty, as below
            _fptorch.empty_cache()
            return
        if hasattr(m, "weight"):
            m.to(device=_cpu())
    model.to(device=_cpu())
    _counts["plain_moves"] += 1
    _fptorch.empty_cache()


# --- FramePack's calls ---------------------------------------------------------------------

def _place(r, model, target_device, e, weights, extra=0):
    """Holds e with room for weights bytes of the model plus extra (preserved memory), and
    moves that much of the model to target_device: all of it when weights covers its size,
    else its submodules in order."""
    if e.complete:
        weights = e.size
    # Never fewer than are on the GPU already: what was loaded stays until evicted.
    weights = max(min(weights, e.size), e.loaded)
    r.hold(e, max(weights + extra, 1))
    if weights >= e.size:
        if not e.complete:
            model.to(device=target_device)
            _say(f"loaded {e.name} to {target_device} ({_fmt(e.size)}){_books_note(r, e)}")
            with _lock:
                _counts["loads"] += 1
        e.complete = True
        e.loaded = e.size
        e.moved.clear()
        return
    before = e.loaded
    for m in _modules(model):
        if m is model or not hasattr(m, "weight") or id(m) in e.moved:
            continue
        n = _fptorch.tensors_bytes(m)
        if e.loaded + n > weights:
            break
        m.to(device=target_device)
        e.moved.add(id(m))
        e.loaded += n
    if e.loaded > before:
        _say(f"loaded {_fmt(e.loaded)} of {e.name} ({_fmt(e.size)}) to {target_device}"
             f"{_books_note(r, e)}")
        with _lock:
            _counts["loads"] += 1


def load_model_as_complete(model, target_device, unload=True):
    """Loads the whole model on target_device; with unload, first unloads the models loaded
    as complete before (FramePack's "only this one").

    Through rocmmemd "unload" only releases them, and loading acquires this model: the
    daemon reserves its size (plus the memory an offload_model_from_device_for_memory_
    preservation just before asked to preserve), having idle models evicted (those just
    released among them, as --exclusive and the priorities say) when it does not fit; the
    weights move only if they are not on the GPU already. Raises rocmmem.TooLarge when the
    model exceeds the device's budget.
    """
    device = _fptorch.device_index(target_device)
    _fptorch.check_gpu(model, device)
    r = _residency() if device is not None else None
    if r is None:
        _plain_load(model, target_device, unload)
        return
    if unload:
        _release_complete(r)
    e = r.entry(model, device)
    if e.size > e.budget:
        raise rocmmem.TooLarge(errno.E2BIG, f"model '{e.name}' needs {_fmt(e.size)}, "
                               f"more than device {device}'s budget: load it with "
                               "move_model_to_device_with_memory_preservation instead")
    with _lock:
        extra = r.preserve.pop(device, 0)
    if extra:
        extra = max(0, min(extra, r.budget(device) - e.size))
    _place(r, model, target_device, e, e.size, extra)
    with _lock:
        if not any(m is model for m in gpu_complete_modules):
            gpu_complete_modules.append(model)


def _release_complete(r):
    with _lock:
        models = list(gpu_complete_modules)
        gpu_complete_modules.clear()
    for m in models:
        _release_or_move(r, m)


def _release_or_move(r, m):
    """Releases m when this module loaded it; moves it to the CPU otherwise, as FramePack."""
    with _lock:
        e = r.entries.get(id(m))
    if e is not None and e.ref() is m:
        r.release(e)
    else:
        m.to(device=_cpu())


def unload_complete_models(*args):
    """Unloads the models loaded as complete, and those given.

    Through rocmmemd they are released, not moved: each stays on the GPU until the daemon
    needs its room, and is unloaded then (by this process's event thread). A model given
    that this module never loaded is moved to the CPU, as FramePack does.
    """
    r = _residency()
    if r is None:
        _plain_unload(*args)
        return
    _release_complete(r)
    for m in args:
        _release_or_move(r, m)
    with _lock:
        r.preserve.clear()


def move_model_to_device_with_memory_preservation(model, target_device, preserved_memory_gb=0):
    """Moves as much of model to target_device as leaves preserved_memory_gb free.

    Through rocmmemd: acquires the model with its size plus preserved_memory_gb reserved (at
    most the device's budget), and moves the whole model when that fits, else its submodules
    in order until what fits beside the preserved memory is on the GPU (FramePack's
    DynamicSwapInstaller brings in the rest on the fly). The model stays in use until
    offload_model_from_device_for_memory_preservation or unload_complete_models(model).
    """
    device = _fptorch.device_index(target_device)
    _fptorch.check_gpu(model, device)
    r = _residency() if device is not None else None
    if r is None:
        _plain_move(model, target_device, preserved_memory_gb)
        return
    preserved = max(0, int(preserved_memory_gb * GiB))
    e = r.entry(model, device)
    budget = r.budget(device)
    weights = min(e.size, budget - preserved)
    if weights <= 0:
        _say(f"{preserved_memory_gb} GB preserved leaves no room for {e.name}: it "
             "stays on the CPU")
        return
    _place(r, model, target_device, e, weights, preserved)


def offload_model_from_device_for_memory_preservation(model, target_device,
                                                      preserved_memory_gb=0):
    """Makes preserved_memory_gb free on target_device, offloading model as needed.

    Through rocmmemd: releases the model (it stays resident while nobody needs its room),
    and preserved_memory_gb is reserved with the next model loaded as complete on that
    device (FramePack's VAE decode, whose working memory it is). The daemon has this model
    evicted when that reservation needs its room.
    """
    device = _fptorch.device_index(target_device)
    r = _residency() if device is not None else None
    if r is None:
        _plain_offload(model, target_device, preserved_memory_gb)
        return
    with _lock:
        e = r.entries.get(id(model))
    if e is not None and e.ref() is model:
        r.release(e)
    with _lock:
        r.preserve[device] = max(0, int(preserved_memory_gb * GiB))


def fake_diffusers_current_device(model, target_device):
    """Moves one small piece of model to target_device so that diffusers takes the model to
    be there (its scale_shift_table, else its first module with a weight), as FramePack does.
    Through rocmmemd that piece is reserved, moved, and released at once: it stays on the
    GPU until the daemon needs the room. (Holding it while FramePack loads the next model
    would mean waiting while holding, which can deadlock two processes; FramePack's
    DynamicSwapInstaller, installed on the text encoder whenever this is used, fetches any
    layer that is not on the GPU.)
    """
    table = getattr(model, "scale_shift_table", None)
    device = _fptorch.device_index(target_device)
    _fptorch.check_gpu(model, device)
    r = _residency() if device is not None else None
    if r is not None and table is None:
        first = next((m for m in _modules(model) if m is not model and hasattr(m, "weight")),
                     None)
        if first is not None:
            e = r.entry(model, device)
            _place(r, model, target_device, e, _fptorch.tensors_bytes(first))
            r.release(e)
            return
    if table is not None:
        table.data = table.data.to(target_device)
        return
    for m in _modules(model):
        if hasattr(m, "weight"):
            m.to(target_device)
            return


def get_cuda_free_memory_gb(device=None):
    """GB that a request on device could get: through rocmmemd, the largest it could be
    granted with idle models evicted; without it, what PyTorch reports free (0 if unknown:
    no torch). Raises GPUUnavailable without a daemon where PyTorch has no GPU."""
    if device is None:
        device = __getattr__("gpu") if "gpu" not in globals() else globals()["gpu"]
    index = _fptorch.device_index(device)
    r = _residency() if index is not None else None
    if r is not None:
        d = r.device_info(index)
        free = d.get("largest_with_eviction_bytes", d.get("free_bytes", 0))
        return free / GiB
    torch = _fptorch.torch_module()
    why = _fptorch.no_gpu_reason(torch) if torch is not None else None
    if why is not None:
        raise GPUUnavailable(f"get_cuda_free_memory_gb: no rocmmemd to ask, and {why}")
    free = _fptorch.plain_free_bytes(device)
    return (free or 0) / GiB
