# SPDX-License-Identifier: MIT
"""hooks: ComfyUI's model loading and freeing, wrapped so that rocmmemd arbitrates its memory.

install() checks that this ComfyUI can be accounted for, connects to rocmmemd and replaces
functions of comfy.model_management with wrappers that call the originals; books.py keeps
what the daemon reserves equal to what ComfyUI holds:

- load_models_gpu(models, memory_required=...): every model it is asked to put on a GPU (with
  the models patched into it) is acquired with its size before ComfyUI loads it, together with
  the step's working memory: memory_required, or ComfyUI's own floor for a step when that is
  more (minimum_inference_memory() less the extra_reserved_memory() it keeps for other
  programs). The daemon first has idle models evicted, this process's or another's, when it
  does not fit. After the load each model reserves what ComfyUI counts as loaded.
- execution's per-node execute: when a node ends, its working memory goes back and its models
  are idle: still loaded, evictable. PromptExecutor.execute: the same for the whole prompt.
- free_memory(memory_required, device) called outside load_models_gpu (an upscale model is
  then moved to the GPU with .to(device)): memory_required is reserved on that device until
  the next such call or the end of the prompt; a request for more than the budget is a flush
  (unload everything) and reserves nothing.
- free_memory, unload_all_models, soft_empty_cache: after ComfyUI unloads models by its own
  decision, their reservations shrink to what is still loaded; models that were
  garbage-collected are unregistered.

An evict request from the daemon unloads that model through ComfyUI's own path:
free_memory(1e30, device, keep_loaded=every other loaded model), on the client's event thread,
so that it happens even while ComfyUI samples. ComfyUI's model management is not thread-safe:
one lock is held inside every wrapper while ComfyUI manages models (never while it samples,
never while waiting for the daemon), and the eviction takes it too; soft_empty_cache, which
ComfyUI calls while sampling, only tries the lock.

What correct accounting needs is checked, not just names: a ComfyUI without
LoadedModel.model_loaded_memory() (before 2024-12-19) cannot say what its models hold, and is
left alone with one line in its log. A function a ComfyUI lacks is otherwise not wrapped
(logged once). Without the rocmmem package or a daemon nothing is wrapped, and ComfyUI behaves
exactly as it does alone; a daemon that goes away later leaves the wrappers passing through.

Environment: ROCMMEM_SOCKET (the daemon's socket), ROCMMEM_CLIENT_NAME (default "ComfyUI"),
ROCMMEM_COMFYUI_TIMEOUT (seconds a load waits for room, default 600; then ComfyUI loads
anyway), ROCMMEM_COMFYUI=0 (do not hook anything).
"""
import functools
import importlib
import inspect
import logging
import os
import threading

from . import books as B
from . import report

log = logging.getLogger("rocmmem.comfyui")

# What is wrapped in comfy.model_management when the running ComfyUI has it.
HOOKED = ("load_models_gpu", "free_memory", "unload_all_models", "soft_empty_cache")
# The least a ComfyUI must have for its models to be arbitrated.
REQUIRED = ("load_models_gpu", "free_memory", "current_loaded_models", "LoadedModel")
NEEDED = ("ComfyUI from 2024-12-19 on (commit 2dda7c11, which added "
          "LoadedModel.model_loaded_memory())")


class _Hooks:
    """The wrappers of one ComfyUI's comfy.model_management and execution, over its books."""

    def __init__(self, mm, client, owns_client):
        timeout = os.environ.get("ROCMMEM_COMFYUI_TIMEOUT", "600")
        try:
            timeout = float(timeout)
        except ValueError:
            timeout = 600.0
        # The lock: ComfyUI's model management, one caller at a time.
        self.lock = threading.RLock()
        self.books = B.Books(client, self.lock, timeout, mm)
        self.books.unload = self.unload
        self.mm = mm
        self.client = client
        self.owns_client = owns_client
        self.originals = {}  # name -> original function of comfy.model_management
        self.patched = []  # (object, attribute, original) outside comfy.model_management
        self.tls = threading.local()  # depth: inside an original ComfyUI call

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

    def after(self):
        if self.active():
            try:
                self.books.reconcile()
            except Exception as err:
                log.warning("rocmmem: could not update the reservations: %s", err)

    def working(self, memory_required):
        """The working memory of a step: what load_models_gpu was asked for beyond the
        weights, or ComfyUI's own floor for any step when that is more."""
        floor = B.call(getattr(self.mm, "minimum_inference_memory", None), 0) - \
            B.call(getattr(self.mm, "extra_reserved_memory", None), 0)
        try:
            asked = int(memory_required or 0)
        except (TypeError, ValueError):
            asked = 0
        return max(asked, int(floor), 0)

    def rows(self, device=None):
        """[(device, name, declared, real or None, state, model id)] of this ComfyUI's
        holdings."""
        with self.lock:
            loaded = self.books.loaded_models()
            out = []
            for e in self.books.entries.values():
                if device is not None and e.device != device:
                    continue
                if e.kind == "model":
                    module = e.ref()
                    lm = loaded.get(id(module)) if module is not None else None
                    real = int(B.call(getattr(lm, "model_loaded_memory", None), 0)) if lm \
                        else 0
                    state = "in use" if e.held else "idle" if e.reserved else "not loaded"
                    name = f"{e.name} ({e.model_class}{', dynamic' if e.dynamic else ''})"
                    out.append((e.device, name, e.reserved, real, state, _id(e)))
                elif e.held:
                    out.append((e.device, e.name, e.reserved, None, "in use", _id(e)))
        return out

    # -- the daemon's requests (on the event thread, or inside a call that waits)

    def unload(self, e, why):
        with self.lock:
            module = e.ref()
            if module is None:
                return
            if self.depth() > 0:
                # Called inside one of ComfyUI's own calls (never by this package): unloading
                # now would pull a model from under it. Not acked: revoked at the deadline.
                raise RuntimeError(f"cannot unload {e.name} inside ComfyUI's model "
                                   "management")
            lm = self.books.loaded_models().get(id(module))
            if lm is None:
                return
            keep = [o for o in list(self.mm.current_loaded_models) if o is not lm]
            self.original("free_memory", 1e30, lm.device, keep_loaded=keep)
            if id(module) in self.books.loaded_models():
                # ComfyUI kept it (a version whose free_memory decides otherwise): unload
                # it the way free_memory does.
                lm.model_unload()
                self.mm.current_loaded_models[:] = [
                    o for o in self.mm.current_loaded_models if o is not lm]
                if "soft_empty_cache" in self.originals:
                    self.original("soft_empty_cache")
            log.info("rocmmem: %s %s for another request", why, e.name)

    # -- the wrappers

    def load_models_gpu(self, models, *args, **kwargs):
        if self.depth() > 0 or not self.active():
            return self.original("load_models_gpu", models, *args, **kwargs)
        models = list(models)
        required = kwargs.get("memory_required", args[0] if args else 0)
        with self.lock:
            self.books.budgets = {}  # read again once per load: a reloaded daemon may change
            plan = []
            for p in _patchers(models):
                try:
                    e = self.books.model(p)
                except Exception as err:
                    report.once(logging.WARNING, ("register", type(p).__name__),
                                "could not register %s with rocmmemd: %s", type(p).__name__,
                                err)
                    continue
                if e is not None and not any(e is x for x, _ in plan):
                    plan.append((e, e.size))
            for device in sorted({e.device for e, _ in plan}):
                w = self.books.extra(B.WORK, device)
                if w is not None:
                    plan.append((w, self.working(required)))
        self.books.reserve(plan)
        try:
            with self.lock:
                return self.original("load_models_gpu", models, *args, **kwargs)
        finally:
            with self.lock:
                self.after()
            st = self.status_for_log()
            for device in sorted({e.device for e, _ in plan}):
                rows = [r for r in self.rows(device) if r[4] == "in use"]
                log.info("rocmmem: %s", report.step_line(
                    device, rows, report.torch_bytes(device),
                    report.books_line(st, os.getpid(), device)))

    def status_for_log(self):
        """rocmmemd's status for the step's log line (its books of this process), or None
        when the line is not logged or the daemon does not answer."""
        if not log.isEnabledFor(logging.INFO):
            return None
        try:
            return self.client.status()
        except Exception:
            return None

    def free_memory(self, memory_required, device, *args, **kwargs):
        if self.depth() > 0 or not self.active():
            return self.original("free_memory", memory_required, device, *args, **kwargs)
        index = B.device_index(device)
        if index is not None:
            try:
                asked = int(memory_required)
            except (TypeError, ValueError, OverflowError):
                asked = 0
            if 0 < asked < self.books.budget(index):
                with self.lock:
                    e = self.books.extra(B.DIRECT, index)
                if e is not None:
                    self.books.reserve([(e, asked)], end_previous=False)
            else:  # a flush: nothing of it will be used
                self.books.end_direct(index)
        with self.lock:
            try:
                return self.original("free_memory", memory_required, device, *args,
                                     **kwargs)
            finally:
                self.after()

    def unload_all_models(self, *args, **kwargs):
        if self.depth() > 0 or not self.active():
            return self.original("unload_all_models", *args, **kwargs)
        with self.lock:
            try:
                return self.original("unload_all_models", *args, **kwargs)
            finally:
                self.after()

    def soft_empty_cache(self, *args, **kwargs):
        # ComfyUI calls it while sampling (2026): it touches no model list, so it runs
        # without the lock, and the reservations are updated only when the lock is free.
        if self.depth() > 0 or not self.active():
            return self.original("soft_empty_cache", *args, **kwargs)
        try:
            return self.original("soft_empty_cache", *args, **kwargs)
        finally:
            if self.lock.acquire(blocking=False):
                try:
                    self.after()
                finally:
                    self.lock.release()

    def node_done(self):
        if self.active():
            self.books.end_step()

    def prompt_done(self):
        # The prompt is done: its models stay loaded but are idle, for the daemon to evict
        # when another request needs the room; what was reserved beyond them goes back.
        if self.active():
            self.books.end_all()
            with self.lock:
                self.after()

    # -- installing

    def wrap(self):
        for name in HOOKED:
            fn = getattr(self.mm, name, None)
            if not callable(fn):
                report.once(logging.INFO, ("missing", name), "this ComfyUI has no "
                            "comfy.model_management.%s: not hooked", name)
                continue
            self.originals[name] = fn
            wrapper = _forward(getattr(self, name))
            functools.update_wrapper(wrapper, fn)
            wrapper.__rocmmem_original__ = fn
            setattr(self.mm, name, wrapper)
        try:
            execution = importlib.import_module("execution")
            cls = execution.PromptExecutor
            self.patch(cls, "execute", self.prompt_done)
        except Exception:
            report.once(logging.INFO, ("missing", "execute"), "no execution.PromptExecutor."
                        "execute: models stay in use until the next load")
            return
        if callable(getattr(execution, "execute", None)):
            self.patch(execution, "execute", self.node_done)
        else:
            report.once(logging.INFO, ("missing", "node"), "no execution.execute: working "
                        "memory stays reserved until the next load or the end of the prompt")

    def patch(self, owner, name, done):
        """Wraps owner.name (sync or async) so that done() runs when it returns."""
        original = getattr(owner, name)
        if inspect.iscoroutinefunction(original):
            async def wrapper(*args, **kwargs):
                try:
                    return await original(*args, **kwargs)
                finally:
                    done()
        else:
            def wrapper(*args, **kwargs):
                try:
                    return original(*args, **kwargs)
                finally:
                    done()
        functools.update_wrapper(wrapper, original)
        wrapper.__rocmmem_original__ = original
        setattr(owner, name, wrapper)
        self.patched.append((owner, name, original))

    def unwrap(self):
        for name, fn in self.originals.items():
            setattr(self.mm, name, fn)
        self.originals = {}
        for owner, name, original in reversed(self.patched):
            setattr(owner, name, original)
        self.patched = []


def _id(e):
    return e.handle.id if e.handle is not None else None


def _forward(method):
    def wrapper(*args, **kwargs):
        return method(*args, **kwargs)

    return wrapper


def _patchers(models):
    """The ModelPatchers load_models_gpu loads for models: each with its patch models."""
    out = []
    for m in models:
        for p in [m] + list(B.call(getattr(m, "model_patches_models", None), [])):
            if not any(p is q for q in out):
                out.append(p)
    return out


def _version():
    """"ComfyUI 0.3.64" from its comfyui_version.py, where it has one."""
    try:
        v = importlib.import_module("comfyui_version").__version__
    except Exception:
        return "this ComfyUI"
    return f"ComfyUI {v}"


_hooks = None
_why_not = None  # why install() left ComfyUI alone, for the status node
_install_lock = threading.Lock()


def installed():
    """The running hooks, or None."""
    return _hooks


def not_hooked_reason():
    return _why_not


def _refuse(level, key, message, *args):
    global _why_not
    _why_not = message % args if args else message
    report.once(level, key, message, *args)
    return False


def install(client=None, model_management=None):
    """Connects to rocmmemd (unless given a client) and wraps ComfyUI's model management.

    Returns True when the hooks are in place; False, having changed nothing, when this ComfyUI
    cannot be accounted for, or comfy.model_management, the rocmmem package or the daemon is
    missing (each logged once).
    """
    global _hooks, _why_not
    with _install_lock:
        if _hooks is not None:
            return True
        if os.environ.get("ROCMMEM_COMFYUI") == "0":
            return _refuse(logging.INFO, "disabled", "ROCMMEM_COMFYUI=0: ComfyUI's models are "
                           "not arbitrated")
        mm = model_management
        if mm is None:
            try:
                mm = importlib.import_module("comfy.model_management")
            except Exception as err:
                return _refuse(logging.WARNING, "no-comfy", "comfy.model_management cannot be "
                               "imported (%s): nothing hooked", err)
        missing = [n for n in REQUIRED if not hasattr(mm, n)]
        if missing:
            return _refuse(logging.WARNING, "too-old", "this ComfyUI's comfy.model_management "
                           "lacks %s: nothing hooked, ComfyUI runs unarbitrated; rocmmemd needs "
                           "%s", ", ".join(missing), NEEDED)
        if not callable(getattr(mm.LoadedModel, "model_loaded_memory", None)):
            return _refuse(logging.WARNING, "too-old", "%s has no LoadedModel."
                           "model_loaded_memory(): nothing tells what a loaded model still "
                           "holds, so rocmmemd cannot account for its memory. ComfyUI runs "
                           "unarbitrated on this version; rocmmemd needs %s", _version(),
                           NEEDED)
        owns = client is None
        if owns:
            try:
                import rocmmem
            except ImportError as err:
                return _refuse(logging.WARNING, "no-package", "the rocmmem Python package "
                               "cannot be imported (%s): ComfyUI manages its memory alone", err)
            try:
                client = rocmmem.connect(name=os.environ.get("ROCMMEM_CLIENT_NAME", "ComfyUI"),
                                         fail_safe=True)
            except Exception as err:
                return _refuse(logging.WARNING, "no-connect", "cannot reach rocmmemd (%s): "
                               "ComfyUI manages its memory alone", err)
        if not client.available:
            reason = client.unavailable_reason
            if owns:
                client.close()
            return _refuse(logging.INFO, "no-daemon", "rocmmemd not available (%s): ComfyUI "
                           "manages its memory alone", reason)
        client.start_event_thread()
        h = _Hooks(mm, client, owns)
        try:
            h.wrap()
        except BaseException:
            h.unwrap()
            if owns:
                client.close()
            raise
        _hooks, _why_not = h, None
    log.info("rocmmem: ComfyUI's models are arbitrated by rocmmemd %s (%s backend)",
             client.daemon_version, client.backend)
    if client.backend == "host":
        report.once(logging.WARNING, "host-backend", "rocmmemd runs on its host backend: it "
                    "loaded no GPU runtime, so it counts ComfyUI's GPU models against a budget "
                    "of host memory, not of the GPU, and cannot see what the GPU really holds. "
                    "Install a GPU runtime rocmmemd can load (ROCm's libamdhip64, or NVIDIA's "
                    "libcuda) and restart rocmmemd")
    return True


def uninstall():
    """Puts ComfyUI's functions back, forgets the holdings and closes the client (if install
    opened it)."""
    global _hooks
    with _install_lock:
        h, _hooks = _hooks, None
    if h is None:
        return
    h.unwrap()
    for e in h.books.slots():
        h.books.release(e)
        h.books.forget(e)
    if h.owns_client:
        h.client.close()


def status_text():
    """What the status node shows: rocmmemd's status and this ComfyUI's holdings, or why
    there are none."""
    h = _hooks
    if h is not None and h.active():
        st = h.client.status()
        if st is not None:
            models = h.books.slots("model")
            head = (f"ComfyUI: models arbitrated ({len(models)} registered, "
                    f"{report.count(h.books.evictions, 'eviction')})")
            return (report.format_status(st, head) + "\n\n" +
                    report.format_own(st, os.getpid(), h.rows(), report.torch_bytes))
    try:
        import rocmmem
    except ImportError:
        return ("rocmmemd not available: the rocmmem Python package cannot be imported in "
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
        note = _why_not or ("rocmmemd was not reachable when ComfyUI started: restart "
                            "ComfyUI")
        return report.format_status(st, f"ComfyUI: models not arbitrated ({note})")
    finally:
        c.close()
