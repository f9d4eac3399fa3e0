# SPDX-License-Identifier: MIT
"""hooks: ComfyUI's model loading and freeing, wrapped so that rocmmemd arbitrates its models.

install() connects to rocmmemd and replaces functions of comfy.model_management with
wrappers that call the originals:

- load_models_gpu: every model it is asked to put on a GPU (with the models patched into it,
  as ComfyUI counts them) becomes a registered model, named after its class (SDXL,
  AutoencoderKL, SD1ClipModel, ...) with its class guessed (a diffusion model is a
  transformer, a VAE a vae, CLIP and the other text encoders text_encoder, CLIP vision
  image_encoder). Before ComfyUI loads them they are acquired: the daemon reserves their size
  (model_size()), first having idle models evicted, this process's or another's, when it
  does not fit. They stay in use until the next load_models_gpu call, or until the prompt
  ends (PromptExecutor.execute); then they are idle, still loaded, and evictable.
- free_memory, unload_all_models, soft_empty_cache: after ComfyUI has unloaded models by its
  own decision, their reservations shrink to what is still on the GPU (model_loaded_memory()),
  and the models that were garbage-collected are unregistered.

An evict request from the daemon unloads that model through ComfyUI's own path:
free_memory(1e30, device, keep_loaded=every other loaded model), on the client's event thread,
so that it happens even while ComfyUI samples. ComfyUI's model management is not
thread-safe: one lock is held inside every wrapper while ComfyUI manages models (never while
it samples, and never while waiting for the daemon), and the eviction takes it too. So an
eviction waits for a model load in progress, which can be long for a large checkpoint read
from disk: give rocmmemd an --evict-deadline longer than that (docs/integrations.md).

Everything is feature-detected: a function the running ComfyUI lacks is not wrapped (logged
once). Without the rocmmem package or without a daemon nothing is wrapped at all, and
ComfyUI behaves exactly as it does alone. A daemon that goes away later leaves the wrappers
passing everything straight through.

Environment: ROCMMEM_SOCKET (the daemon's socket), ROCMMEM_CLIENT_NAME (default "ComfyUI"),
ROCMMEM_COMFYUI_TIMEOUT (seconds a load waits for room, default 600; then ComfyUI loads
anyway), ROCMMEM_COMFYUI=0 (do not hook anything).
"""
import importlib
import logging
import os
import threading
import time

log = logging.getLogger("rocmmem.comfyui")

# What is wrapped in comfy.model_management when the running ComfyUI has it.
HOOKED = ("load_models_gpu", "free_memory", "unload_all_models", "soft_empty_cache")
# The least a ComfyUI must have for its models to be arbitrated.
REQUIRED = ("load_models_gpu", "free_memory", "current_loaded_models")

BACKOFF = 2.0  # seconds a load waits for a second model while holding the first

_said = set()  # messages logged once

try:  # the rocmmem package; without it nothing is hooked (install() says so)
    from rocmmem._holding import Holdings as _Holdings, Slot as _Slot
except Exception:
    _Holdings = _Slot = object


def rocmmem_error(name):
    """rocmmem's exception class name (the package is imported only where it is there)."""
    import rocmmem
    return getattr(rocmmem, name)


def _once(level, key, message, *args):
    if key not in _said:
        _said.add(key)
        log.log(level, "rocmmem: " + message, *args)


# --- models: names, classes, devices -------------------------------------------------------

def guess_class(module):
    """The rocmmemd class of the torch module a ModelPatcher wraps (patcher.model)."""
    mro = type(module).__mro__
    own = type(module).__name__.lower()
    where = (type(module).__module__ or "").lower()
    if "vision" in own or "clip_vision" in where:
        return "image_encoder"
    if "vae" in own or "autoencod" in own or "taesd" in own or ".vae" in where or \
            "autoencoder" in where:
        return "vae"
    if any(c.__name__ == "BaseModel" and c.__module__ == "comfy.model_base" for c in mro):
        return "transformer"  # every diffusion model ComfyUI loads: SD1.5, SDXL, Flux, WAN...
    if "clip" in own or "textencoder" in own or own.endswith("temodel") or \
            "text_encoders" in where or "sd1_clip" in where or "sdxl_clip" in where:
        return "text_encoder"
    if any(k in own for k in ("unet", "diffusion", "transformer", "dit")):
        return "transformer"
    return "other"


def _device_index(device):
    """The daemon's device for a torch device (ROCm's PyTorch calls HIP devices "cuda"), or
    None for the CPU and anything else."""
    if getattr(device, "type", None) != "cuda":
        return None
    index = getattr(device, "index", None)
    if index is None:
        try:
            import torch
            index = torch.cuda.current_device()
        except Exception:
            index = 0
    return index


def _patchers(models):
    """The ModelPatchers load_models_gpu loads for models: each with its patch models."""
    out = []
    for m in models:
        for p in [m] + list(getattr(m, "model_patches_models", lambda: [])()):
            if not any(p is q for q in out):
                out.append(p)
    return out


def _call(fn, default, *args):
    """fn(*args), or default when fn is None or raises (a ComfyUI without that method)."""
    if fn is None:
        return default
    try:
        return fn(*args)
    except Exception:
        return default


# --- state ---------------------------------------------------------------------------------

class _Entry(_Slot):
    """One torch module ComfyUI loads (clones of a ModelPatcher share it) as a model of the
    daemon; held: acquired in the latest load_models_gpu call. pinned: ComfyUI keeps it on the
    GPU (--highvram, --gpu-only), so unloading it would free nothing."""


class _Hooks(_Holdings):
    def __init__(self, mm, client, owns_client):
        timeout = os.environ.get("ROCMMEM_COMFYUI_TIMEOUT", "600")
        try:
            timeout = float(timeout)
        except ValueError:
            timeout = 600.0
        # The lock: ComfyUI's model management, one caller at a time.
        super().__init__(client, threading.RLock(), timeout)
        self.mm = mm
        self.owns_client = owns_client
        self.originals = {}  # name -> original function of comfy.model_management
        self.executor = None  # (class, original execute)
        self.tls = threading.local()  # depth: inside an original ComfyUI call
        self.budgets = {}
        self.evictions = 0

    # -- plumbing

    def depth(self):
        return getattr(self.tls, "depth", 0)

    def active(self):
        return self.client.available

    def original(self, name, *args, **kwargs):
        """Calls ComfyUI's own function (nested wrappers pass straight through)."""
        self.tls.depth = self.depth() + 1
        try:
            return self.originals[name](*args, **kwargs)
        finally:
            self.tls.depth -= 1

    def loaded_models(self):
        """{id(torch module): LoadedModel} for ComfyUI's loaded models."""
        out = {}
        for lm in list(getattr(self.mm, "current_loaded_models", [])):
            patcher = _call(lambda: lm.model, None)
            module = getattr(patcher, "model", None) if patcher is not None else None
            if module is not None:
                out.setdefault(id(module), lm)
        return out

    def budget(self, device):
        if device not in self.budgets:
            st = self.client.status() or {}
            for d in st.get("devices", []):
                self.budgets[d["index"]] = d["budget_bytes"]
        return self.budgets.get(device, 0)

    # -- registration (under the lock)

    def entry(self, patcher):
        """The entry of the torch module patcher loads on a GPU (None: not on a GPU)."""
        device = _device_index(getattr(patcher, "load_device", None))
        module = getattr(patcher, "model", None)
        if device is None or module is None:
            return None
        e = self.entries.get(id(module))
        if e is not None and e.ref() is module and e.device == device:
            return e
        if e is not None:
            self.forget(e)
        budget = self.budget(device)
        if budget <= 0:
            return None  # no such device in the daemon
        name = type(module).__name__.encode()[:64].decode("utf-8", "ignore") or "model"
        # With --highvram or --gpu-only ComfyUI "unloads" models to the GPU itself: such a
        # model can never give memory back, and is registered pinned (never chosen to make
        # room) rather than evicted for nothing.
        pinned = _device_index(getattr(patcher, "offload_device", None)) is not None
        if pinned:
            _once(logging.INFO, ("pinned", name), "ComfyUI keeps %s on the GPU (--highvram or "
                  "--gpu-only): registered pinned, rocmmemd will not evict it", name)
        e = _Entry(module, device, name, guess_class(module), budget, pinned=pinned)
        self.entries[id(module)] = e
        return e

    def quiet(self, what, e, err):
        log.debug("rocmmem: %s %s: %s", what, e.name, err)

    # -- reservations (never under the lock: waiting lets the event thread unload models)

    def reserve(self, plan):
        """Releases the models no longer in use, then acquires those of plan [(entry, bytes)].

        Waiting for one model while holding another could deadlock with a process that waits
        for what this one holds (the daemon's queue is first come, first served). So only the
        first wait is long; when a later one times out at BACKOFF seconds, what this call
        holds is let go and the model that blocked is waited for alone, then the rest again.
        """
        wanted = {id(e) for e, _ in plan}
        with self.lock:
            previous = [e for e in self.entries.values() if e.held and id(e) not in wanted]
        for e in previous:
            self.release(e)
        deadline = time.monotonic() + self.timeout
        pending = list(plan)
        while pending:
            e, target = pending[0]
            holding = [x for x, _ in plan if x.held and x is not e]
            remaining = deadline - time.monotonic()
            with self.lock:
                others = sum(o.reserved for o in self.entries.values()
                             if o.held and o is not e and o.device == e.device)
            target = min(target, self.budget(e.device) - others)
            try:
                if remaining <= 0:
                    raise rocmmem_error("Timeout")(110, f"waited {self.timeout:g} s for room")
                self.hold(e, target, min(BACKOFF, remaining) if holding else remaining,
                          shrink=False)
                pending.pop(0)
            except Exception as err:
                if not self.active():
                    return
                if holding and isinstance(err, rocmmem_error("Timeout")) and remaining > 0:
                    for x in holding:
                        self.release(x)
                    pending = [(e, target)] + [(x, t) for x, t in plan
                                               if x is not e and not x.held]
                    continue
                log.warning("rocmmem: could not reserve memory for %s: %s; ComfyUI loads it "
                            "anyway", e.name, err)
                pending.pop(0)

    def reconcile(self):
        """Makes the reservations match what ComfyUI has on the GPU (under the lock)."""
        loaded = self.loaded_models()
        for e in list(self.entries.values()):
            module = e.ref()
            if e.handle is None:
                if module is None:
                    self.forget(e)
                continue
            if module is None:  # garbage-collected: its memory went with it
                self.release(e)
                self.forget(e)
                continue
            lm = loaded.get(id(module))
            nbytes = 0
            if lm is not None:
                nbytes = int(_call(getattr(lm, "model_loaded_memory", None), 0))
            if nbytes == e.reserved:
                continue
            try:
                # Shrinking is immediate (ComfyUI unloaded it, or loaded only part of it);
                # growing past the reservation (a load that could not get one) is only
                # recorded when there is room at once.
                e.handle.resize(nbytes, timeout=0)
                e.reserved = nbytes
            except Exception as err:
                log.debug("rocmmem: resize %s to %d: %s", e.name, nbytes, err)

    def release_all(self):
        with self.lock:
            held = [e for e in self.entries.values() if e.held]
        for e in held:
            self.release(e)

    # -- the daemon's requests (on the event thread, or inside a call that waits)

    def unload(self, handle, why):
        with self.lock:
            e = self.by_id.get(handle.id)
            if e is None:
                return
            module = e.ref()
            if module is not None and self.depth() == 0:
                lm = self.loaded_models().get(id(module))
                if lm is not None:
                    keep = [o for o in list(self.mm.current_loaded_models) if o is not lm]
                    self.original("free_memory", 1e30, lm.device, keep_loaded=keep)
                    if id(module) in self.loaded_models():
                        # ComfyUI kept it (a version whose free_memory decides otherwise):
                        # unload it the way free_memory does.
                        lm.model_unload()
                        self.mm.current_loaded_models[:] = [
                            o for o in self.mm.current_loaded_models if o is not lm]
                        if "soft_empty_cache" in self.originals:
                            self.original("soft_empty_cache")
                    log.info("rocmmem: %s %s for another request", why, e.name)
            elif module is not None:
                # Called inside one of ComfyUI's own calls (never by this package): unloading
                # now would pull a model from under it. Not acked: revoked at the deadline.
                raise RuntimeError(f"cannot unload {handle.name} inside ComfyUI's model "
                                   "management")
            e.reserved = 0
            self.evictions += 1

    def on_evict(self, handle):
        self.unload(handle, "unloaded")

    def on_revoked(self, handle, reason):
        log.warning("rocmmem: %s was revoked: %s", handle.name, reason)
        self.unload(handle, "unloaded (late)")

    # -- the wrappers

    def load_models_gpu(self, models, *args, **kwargs):
        if self.depth() > 0 or not self.active():
            return self.original("load_models_gpu", models, *args, **kwargs)
        models = list(models)
        with self.lock:
            self.budgets = {}  # read again once per load: a reloaded daemon may change them
            plan = []
            for p in _patchers(models):
                try:
                    e = self.entry(p)
                except Exception as err:
                    _once(logging.WARNING, ("register", type(p).__name__),
                          "could not register %s with rocmmemd: %s", type(p).__name__, err)
                    continue
                if e is not None and not any(e is x for x, _ in plan):
                    plan.append((e, int(_call(getattr(p, "model_size", None), 0))))
        self.reserve(plan)
        try:
            with self.lock:
                return self.original("load_models_gpu", models, *args, **kwargs)
        finally:
            with self.lock:
                self.after()

    def after(self):
        if self.active():
            try:
                self.reconcile()
            except Exception as err:
                log.warning("rocmmem: could not update the reservations: %s", err)

    def passthrough(self, name):
        def wrapper(*args, **kwargs):
            if self.depth() > 0 or not self.active():
                return self.original(name, *args, **kwargs)
            with self.lock:
                try:
                    return self.original(name, *args, **kwargs)
                finally:
                    self.after()

        return wrapper

    def execute(self, original):
        def execute(executor, *args, **kwargs):
            try:
                return original(executor, *args, **kwargs)
            finally:
                # The prompt is done: its models stay loaded but are idle, for the daemon to
                # evict when another request needs the room.
                if self.active():
                    self.release_all()
                    with self.lock:
                        self.after()

        return execute

    # -- installing

    def wrap(self):
        for name in HOOKED:
            fn = getattr(self.mm, name, None)
            if not callable(fn):
                _once(logging.INFO, ("missing", name), "this ComfyUI has no "
                      "comfy.model_management.%s: not hooked", name)
                continue
            self.originals[name] = fn
            if name == "load_models_gpu":
                def wrapper(models, *args, **kwargs):
                    return self.load_models_gpu(models, *args, **kwargs)
            else:
                wrapper = self.passthrough(name)
            wrapper.__rocmmem_original__ = fn
            setattr(self.mm, name, wrapper)
        try:
            execution = importlib.import_module("execution")
            cls = execution.PromptExecutor
            original = cls.execute
        except Exception:
            _once(logging.INFO, ("missing", "execute"), "no execution.PromptExecutor.execute: "
                  "models stay in use until the next load")
        else:
            wrapper = self.execute(original)
            wrapper.__rocmmem_original__ = original
            cls.execute = wrapper
            self.executor = (cls, original)

    def unwrap(self):
        for name, fn in self.originals.items():
            setattr(self.mm, name, fn)
        self.originals = {}
        if self.executor is not None:
            cls, original = self.executor
            cls.execute = original
            self.executor = None


_hooks = None
_install_lock = threading.Lock()


def installed():
    """The running hooks, or None."""
    return _hooks


def install(client=None, model_management=None):
    """Connects to rocmmemd (unless given a client) and wraps ComfyUI's model management.

    Returns True when the hooks are in place; False, having changed nothing, when ComfyUI's
    comfy.model_management, the rocmmem package or the daemon is missing (logged).
    """
    global _hooks
    with _install_lock:
        if _hooks is not None:
            return True
        if os.environ.get("ROCMMEM_COMFYUI") == "0":
            _once(logging.INFO, "disabled", "ROCMMEM_COMFYUI=0: ComfyUI's models are not "
                  "arbitrated")
            return False
        mm = model_management
        if mm is None:
            try:
                mm = importlib.import_module("comfy.model_management")
            except Exception as err:
                _once(logging.WARNING, "no-comfy", "comfy.model_management cannot be imported "
                      "(%s): nothing hooked", err)
                return False
        missing = [n for n in REQUIRED if not hasattr(mm, n)]
        if missing:
            _once(logging.WARNING, "too-old", "this ComfyUI's comfy.model_management lacks %s: "
                  "nothing hooked", ", ".join(missing))
            return False
        owns = client is None
        if owns:
            try:
                import rocmmem
            except ImportError as err:
                _once(logging.WARNING, "no-package", "the rocmmem Python package is not "
                      "installed in ComfyUI's Python (%s): ComfyUI manages its memory alone",
                      err)
                return False
            try:
                client = rocmmem.connect(name=os.environ.get("ROCMMEM_CLIENT_NAME", "ComfyUI"),
                                         fail_safe=True)
            except Exception as err:
                _once(logging.WARNING, "no-connect", "cannot reach rocmmemd (%s): ComfyUI "
                      "manages its memory alone", err)
                return False
        if not client.available:
            _once(logging.INFO, "no-daemon", "rocmmemd not available (%s): ComfyUI manages its "
                  "memory alone", client.unavailable_reason)
            if owns:
                client.close()
            return False
        client.start_event_thread()
        h = _Hooks(mm, client, owns)
        try:
            h.wrap()
        except BaseException:
            h.unwrap()
            if owns:
                client.close()
            raise
        _hooks = h
        log.info("rocmmem: ComfyUI's models are arbitrated by rocmmemd %s (%s backend)",
                 client.daemon_version, client.backend)
        return True


def uninstall():
    """Puts ComfyUI's functions back, forgets the models and closes the client (if install
    opened it)."""
    global _hooks
    with _install_lock:
        h, _hooks = _hooks, None
    if h is None:
        return
    h.unwrap()
    with h.lock:
        entries = list(h.entries.values())
    for e in entries:
        h.release(e)
        h.forget(e)
    if h.owns_client:
        h.client.close()


# --- status --------------------------------------------------------------------------------

def _size(n):
    try:
        from rocmmem import format_size
    except ImportError:
        return f"{n} B"
    return format_size(int(n))


def _count(n, what):
    return f"{n} {what}{'' if n == 1 else 's'}"


def format_status(st, hooked=None):
    """rocmmemd's status (a status --json dict) as text: daemon, devices, clients, models."""
    d = st.get("daemon", {})
    lines = [f"rocmmemd {d.get('version', '?')}, pid {d.get('pid', '?')}, backend "
             f"{d.get('backend', '?')}"]
    if hooked is not None:
        lines.append(hooked)
    lines.append("")
    lines.append("devices:")
    for dev in st.get("devices", []):
        lines.append(f"  {dev['index']} {dev.get('name', '')}: budget "
                     f"{_size(dev['budget_bytes'])}, leased {_size(dev['leased_bytes'])}, "
                     f"reserved {_size(dev.get('reserved_bytes', 0))}, free "
                     f"{_size(dev['free_bytes'])}")
    lines.append("clients:")
    for c in st.get("clients", []):
        lines.append(f"  pid {c['pid']} {c.get('name', '')}: "
                     f"{_count(c.get('models', 0), 'model')}, "
                     f"{_size(c.get('reserved_bytes', 0))} reserved, "
                     f"{_count(c.get('leases', 0), 'lease')}, "
                     f"{_size(c.get('leased_bytes', 0))} leased")
    models = st.get("models", [])
    lines.append("models:" if models else "models: none")
    for m in models:
        lines.append(f"  {m.get('id', '?')} {m['name']} ({m['class']}) pid {m['owner_pid']} "
                     f"device {m['device']}: {m['state'].replace('_', ' ')}, "
                     f"{_size(m['bytes'])}")
    queue = st.get("queue", [])
    if queue:
        lines.append(f"queue: {len(queue)} waiting")
    return "\n".join(lines)


def status_text():
    """What the status node shows: rocmmemd's status, or why there is none."""
    h = _hooks
    if h is not None and h.active():
        st = h.client.status()
        if st is not None:
            return format_status(st, f"ComfyUI: models arbitrated ({len(h.entries)} "
                                     f"registered, {_count(h.evictions, 'eviction')})")
    try:
        import rocmmem
    except ImportError:
        return ("rocmmemd not available: the rocmmem Python package is not installed in "
                "ComfyUI's Python (docs/integrations.md)")
    try:
        c = rocmmem.connect(name="ComfyUI status", fail_safe=True, timeout=0)
    except Exception as err:
        return f"rocmmemd not available: {err}"
    try:
        if not c.available:
            return f"rocmmemd not available: {c.unavailable_reason}"
        st = c.status()
        if st is None:
            return "rocmmemd not available"
        note = ("ComfyUI: models not arbitrated (rocmmemd was not reachable when ComfyUI "
                "started: restart ComfyUI)")
        return format_status(st, note)
    finally:
        c.close()
