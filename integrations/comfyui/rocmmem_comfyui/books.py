# SPDX-License-Identifier: MIT
"""books: what this ComfyUI holds on each GPU, kept equal to what rocmmemd reserves for it.

Three kinds of holdings, each a model of the daemon (a Slot of rocmmem._holding):

- a model: one torch module ComfyUI loads (the clones of a ModelPatcher share it), registered
  under its class name. Before ComfyUI loads it, its full size (model_size()) is reserved;
  once loaded, what ComfyUI itself counts as loaded (LoadedModel.model_loaded_memory()): less
  for a partial (low VRAM) load, 0 once ComfyUI unloads it. A dynamic model (ModelPatcherDynamic,
  ComfyUI's DynamicVRAM, which pages weights in while it samples, so that what is loaded now
  says nothing of what sampling will use) keeps its full size reserved while ComfyUI has it.
- working memory, per device, for one step (a node: sampling, VAE encode or decode): what
  load_models_gpu was asked to keep free beyond the weights, registered as the model
  "working memory" while the node runs and unregistered when it ends.
- a direct load, per device: what a free_memory call made outside load_models_gpu was asked to
  free, for a model that is then moved to the GPU without load_models_gpu (upscale models),
  registered as "direct load" until the next such call or the end of the prompt.

So at any time the daemon's books for this process are ComfyUI's loaded models plus the
working memory and direct loads it was asked for. Waiting calls (reserve) never run under the
lock: while one waits, the client's event thread may need the lock to unload a model.
"""
import logging
import time

from . import report

try:  # the rocmmem package; without it nothing is hooked (hooks.install() says so)
    from rocmmem._holding import Holdings as _Holdings, Slot as _Slot
except Exception:
    _Holdings = _Slot = object

log = logging.getLogger("rocmmem.comfyui")

BACKOFF = 2.0  # seconds a load waits for a second holding while it holds the first
WORK = "working memory"
DIRECT = "direct load"


def rocmmem_error(name):
    """rocmmem's exception class name (the package is imported only where it is there)."""
    import rocmmem
    return getattr(rocmmem, name)


def call(fn, default, *args):
    """fn(*args), or default when fn is None or raises (a ComfyUI without that method)."""
    if fn is None:
        return default
    try:
        return fn(*args)
    except Exception:
        return default


def device_index(device):
    """The daemon's device for a torch device (ROCm's PyTorch calls HIP devices "cuda"), or
    None for the CPU and anything else."""
    if getattr(device, "type", None) != "cuda":
        return None
    index = getattr(device, "index", None)
    if index is None:
        try:
            import torch
            index = torch.cuda.current_device() if torch.cuda.is_available() else 0
        except Exception:
            index = 0
    return index


def is_dynamic(patcher):
    """Whether ComfyUI manages patcher's weights dynamically (DynamicVRAM, 2026)."""
    if any(c.__name__ == "ModelPatcherDynamic" for c in type(patcher).__mro__):
        return True
    return bool(call(getattr(patcher, "is_dynamic", None), False))


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


class Model(_Slot):
    """One torch module ComfyUI loads. pinned: ComfyUI keeps it on the GPU (--highvram,
    --gpu-only), so unloading it would free nothing; dynamic: see the module's docstring."""

    kind = "model"
    dynamic = False
    size = 0  # model_size() at the latest load


class Extra(_Slot):
    """Working memory or a direct load on one device: memory ComfyUI uses beyond weights."""

    def __init__(self, kind, device, budget):
        super().__init__(kind, device, kind, "other", budget)
        self.kind = kind


class Books(_Holdings):
    """The holdings of one ComfyUI; mm is its comfy.model_management. unload(slot, why) is set
    by the hooks: it unloads a model through ComfyUI's own path when the daemon asks."""

    def __init__(self, client, lock, timeout, mm):
        super().__init__(client, lock, timeout)
        self.mm = mm
        self.budgets = {}
        self.evictions = 0
        self.unload = None

    # -- what ComfyUI has, as it counts it

    def loaded_models(self):
        """{id(torch module): LoadedModel} for ComfyUI's loaded models."""
        out = {}
        for lm in list(getattr(self.mm, "current_loaded_models", [])):
            patcher = call(lambda: lm.model, None)
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

    def slots(self, kind=None):
        with self.lock:
            return [e for e in self.entries.values() if kind is None or e.kind == kind]

    # -- registration (under the lock)

    def model(self, patcher):
        """The slot of the torch module patcher loads on a GPU (None: not on a GPU)."""
        device = device_index(getattr(patcher, "load_device", None))
        module = getattr(patcher, "model", None)
        if device is None or module is None:
            return None
        e = self.entries.get(id(module))
        if e is not None and e.ref() is module and e.device == device:
            e.dynamic = is_dynamic(patcher)
            e.size = int(call(getattr(patcher, "model_size", None), 0))
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
        pinned = device_index(getattr(patcher, "offload_device", None)) is not None
        if pinned:
            report.once(logging.INFO, ("pinned", name), "ComfyUI keeps %s on the GPU "
                        "(--highvram or --gpu-only): registered pinned, rocmmemd will not "
                        "evict it", name)
        e = Model(module, device, name, guess_class(module), budget, pinned=pinned)
        e.dynamic = is_dynamic(patcher)
        e.size = int(call(getattr(patcher, "model_size", None), 0))
        if e.dynamic:
            report.once(logging.INFO, ("dynamic", name), "ComfyUI manages %s dynamically "
                        "(DynamicVRAM): its full size stays reserved while it is loaded", name)
        self.entries[id(module)] = e
        return e

    def extra(self, kind, device):
        """The working memory or direct-load slot of device (created on first use)."""
        key = (kind, device)
        e = self.entries.get(key)
        if e is None:
            budget = self.budget(device)
            if budget <= 0:
                return None
            e = self.entries[key] = Extra(kind, device, budget)
        return e

    def quiet(self, what, e, err):
        log.debug("rocmmem: %s %s: %s", what, e.name, err)

    # -- reservations (never under the lock)

    def end(self, e):
        """Ends a holding: a model is released (idle, still loaded), working memory or a
        direct load is given back whole."""
        if e.kind == "model":
            self.release(e)
        else:
            # Unregistered while still in use: released first, it would be idle for a moment,
            # and a waiting request could have the daemon ask to evict it meanwhile.
            e.held = False
            self.forget(e)
            e.reserved = 0

    def reserve(self, plan, end_previous=True):
        """Ends the holdings of the previous step (models and working memory not in plan; a
        direct load stays) unless told not to, then acquires those of plan [(slot, bytes)].

        Waiting for one holding while holding another could deadlock with a process that
        waits for what this one holds (the daemon's queue is first come, first served). So
        only the first wait is long; when a later one times out at BACKOFF seconds, what this
        call holds is let go and the holding that blocked is waited for alone, then the rest.
        """
        wanted = {id(e) for e, _ in plan}
        with self.lock:
            previous = [e for e in self.entries.values() if end_previous and e.held and
                        id(e) not in wanted and e.kind != DIRECT]
        for e in previous:
            self.end(e)
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
                          shrink=e.kind != "model")
                pending.pop(0)
            except Exception as err:
                if not self.client.available:
                    return
                if holding and isinstance(err, rocmmem_error("Timeout")) and remaining > 0:
                    for x in holding:
                        self.release(x)
                    pending = [(e, target)] + [(x, t) for x, t in plan
                                               if x is not e and not x.held]
                    continue
                log.warning("rocmmem: could not reserve %s for %s: %s; ComfyUI goes on "
                            "anyway", report.size(target), e.name, err)
                pending.pop(0)

    def reconcile(self):
        """Makes the models' reservations match what ComfyUI has on the GPU (under the
        lock); forgets the models that were garbage-collected."""
        loaded = self.loaded_models()
        for e in [x for x in self.entries.values() if x.kind == "model"]:
            module = e.ref()
            if e.handle is None:
                if module is None:
                    self.forget(e)
                continue
            if module is None:  # garbage-collected: its memory went with it
                self.release(e)
                self.forget(e)
                continue
            nbytes = self.counted(e, loaded.get(id(module)))
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

    @staticmethod
    def counted(e, lm):
        """What model slot e must reserve, given its LoadedModel (None: not loaded)."""
        if lm is None:
            return 0
        loaded = int(call(getattr(lm, "model_loaded_memory", None), 0))
        if e.dynamic:
            return max(loaded, e.size)
        return loaded

    def end_step(self):
        """The node that asked for working memory is done: it is given back, and the models
        loaded for it are idle (still loaded, evictable)."""
        for e in self.slots():
            if e.held and e.kind != DIRECT:
                self.end(e)

    def end_direct(self, device=None):
        for e in self.slots(DIRECT):
            if device is None or e.device == device:
                self.end(e)

    def end_all(self):
        self.end_step()
        self.end_direct()

    # -- the daemon's requests (on the event thread, or inside a call that waits)

    def on_evict(self, handle):
        self.evicted(handle, "unloaded")

    def on_revoked(self, handle, reason):
        log.warning("rocmmem: %s was revoked: %s", handle.name, reason)
        self.evicted(handle, "unloaded (late)")

    def evicted(self, handle, why):
        e = self.slot_of(handle.id)
        if e is None:
            return
        if e.kind == "model" and self.unload is not None:
            self.unload(e, why)
        e.reserved = 0
        self.evictions += e.kind == "model"
