# SPDX-License-Identifier: MIT
"""Stand-in for ComfyUI's comfy/model_management.py: the functions rocmmem_comfyui wraps or
reads, with ComfyUI's signatures and the behaviour the hooks rely on, on a fake GPU.

Signatures as in ComfyUI's comfy/model_management.py at comfyanonymous/ComfyUI 00184d15
(October 2025) and Comfy-Org/ComfyUI 02b2b388 (2026), which agree on all of them but for
free_memory, which the later one extends with keyword arguments (for_dynamic=False,
pins_required=0, ram_required=0) that the hooks never pass:

    current_loaded_models: list of LoadedModel, the most recently loaded first
    class LoadedModel(model): model (the ModelPatcher, held weakly), device, currently_used,
        model_memory(), model_loaded_memory(), model_offloaded_memory(),
        model_memory_required(device), model_load(lowvram_model_memory=0,
        force_patch_weights=False), model_unload(memory_to_free=None, unpatch_weights=True),
        model_use_more_vram(extra_memory, force_patch_weights=False), __eq__ (same patcher)
    free_memory(memory_required, device, keep_loaded=[])
    load_models_gpu(models, memory_required=0, force_patch_weights=False,
                    minimum_memory_required=None, force_full_load=False)
    load_model_gpu(model), loaded_models(only_currently_used=False), cleanup_models(),
    soft_empty_cache(force=False), unload_all_models(), get_torch_device(),
    get_free_memory(dev=None, torch_free_too=False), extra_reserved_memory(),
    minimum_inference_memory()

Written for the tests, not copied: the GPU is a byte count (VRAM), a model's weights are
bytes the stand-in ModelPatcher moves, and CALLS records what was called.
"""
import weakref


class Device:
    """A torch.device look-alike: type and index."""

    def __init__(self, type, index=None):
        self.type = type
        self.index = index

    def __eq__(self, other):
        return isinstance(other, Device) and (self.type, self.index) == (other.type,
                                                                         other.index)

    def __hash__(self):
        return hash((self.type, self.index))

    def __repr__(self):
        return self.type if self.index is None else f"{self.type}:{self.index}"


class _VRAM:
    def __init__(self, total):
        self.total = total
        self.used = 0


CPU = Device("cpu")
GPU = Device("cuda", 0)
MiB = 1 << 20
VRAM = _VRAM(1 << 30)
EXTRA_RESERVED_VRAM = 0
DISABLE_SMART_MEMORY = False
CALLS = []  # (name, detail) of each call, for the tests

current_loaded_models = []


def reset(total=1 << 30):
    """For the tests: an empty GPU of total bytes, nothing loaded, no calls recorded."""
    current_loaded_models.clear()
    VRAM.total = total
    VRAM.used = 0
    CALLS.clear()


def get_torch_device():
    return GPU


def is_device_cpu(device):
    return getattr(device, "type", None) == "cpu"


def get_free_memory(dev=None, torch_free_too=False):
    if dev is None:
        dev = get_torch_device()
    free = (1 << 40) if is_device_cpu(dev) else VRAM.total - VRAM.used
    return (free, 0) if torch_free_too else free


def extra_reserved_memory():
    return EXTRA_RESERVED_VRAM


def minimum_inference_memory():
    return MiB + extra_reserved_memory()


def _name(patcher):
    return type(patcher.model).__name__


class LoadedModel:
    def __init__(self, model):
        self._model = weakref.ref(model)
        self.device = model.load_device
        self.real_model = None
        self.currently_used = True

    @property
    def model(self):
        return self._model()

    def model_memory(self):
        return self.model.model_size()

    def model_loaded_memory(self):
        return self.model.loaded_size()

    def model_offloaded_memory(self):
        return self.model.model_size() - self.model.loaded_size()

    def model_memory_required(self, device):
        if device == self.model.current_loaded_device():
            return self.model_offloaded_memory()
        return self.model_memory()

    def model_load(self, lowvram_model_memory=0, force_patch_weights=False):
        extra = lowvram_model_memory if lowvram_model_memory else 1e32
        self.model_use_more_vram(extra, force_patch_weights=force_patch_weights)
        real = self.model.model
        self.real_model = weakref.ref(real)
        return real

    def model_use_more_vram(self, extra_memory, force_patch_weights=False):
        return self.model.partially_load(self.device, extra_memory,
                                         force_patch_weights=force_patch_weights)

    def model_unload(self, memory_to_free=None, unpatch_weights=True):
        """Frees memory_to_free bytes of it (None: all); True when it was unloaded whole."""
        CALLS.append(("model_unload", _name(self.model)))
        if memory_to_free is not None and memory_to_free < self.model.loaded_size():
            freed = self.model.partially_unload(self.model.offload_device, memory_to_free)
            if freed >= memory_to_free:
                return False
        self.model.detach(unpatch_weights)
        self.real_model = None
        return True

    def __eq__(self, other):
        return self.model is other.model

    def is_dead(self):
        return self.real_model is not None and self.real_model() is not None and \
            self.model is None


def free_memory(memory_required, device, keep_loaded=[]):
    """Unloads the models least worth keeping (most offloaded first, then the oldest) until
    memory_required bytes are free on device; returns the LoadedModels it unloaded."""
    CALLS.append(("free_memory", memory_required))
    candidates = []
    for i in range(len(current_loaded_models) - 1, -1, -1):
        lm = current_loaded_models[i]
        if lm.device == device and lm not in keep_loaded and not lm.is_dead():
            candidates.append((-lm.model_offloaded_memory(), i))
            lm.currently_used = False
    unloaded = []
    for _, i in sorted(candidates):
        memory_to_free = None
        if not DISABLE_SMART_MEMORY:
            free = get_free_memory(device)
            if free > memory_required:
                break
            memory_to_free = memory_required - free
        if current_loaded_models[i].model_unload(memory_to_free):
            unloaded.append(i)
    out = [current_loaded_models.pop(i) for i in sorted(unloaded, reverse=True)]
    if out:
        soft_empty_cache()
    return out


def load_models_gpu(models, memory_required=0, force_patch_weights=False,
                    minimum_memory_required=None, force_full_load=False):
    """Loads models (and the models patched into them) on their load devices, unloading
    others first where the memory is short; a model that still does not fit is loaded in
    part (lowvram)."""
    CALLS.append(("load_models_gpu", [_name(m) for m in models]))
    inference = minimum_inference_memory()
    extra = max(inference, memory_required + extra_reserved_memory())
    wanted = []
    for m in models:
        for x in [m] + m.model_patches_models():
            if not any(x is w for w in wanted):
                wanted.append(x)
    to_load = []
    for x in wanted:
        lm = LoadedModel(x)
        if lm in current_loaded_models:
            lm = current_loaded_models[current_loaded_models.index(lm)]
            lm.currently_used = True
        to_load.append(lm)
    for lm in to_load:  # a clone of a model being loaded takes its place
        current_loaded_models[:] = [o for o in current_loaded_models
                                    if not lm.model.is_clone(o.model)]
    required = {}
    for lm in to_load:
        required[lm.device] = required.get(lm.device, 0) + lm.model_memory_required(lm.device)
    for device, n in required.items():
        if not is_device_cpu(device):
            free_memory(n * 1.1 + extra, device)
    for lm in to_load:
        lowvram = 0
        if not force_full_load and not is_device_cpu(lm.device):
            free = get_free_memory(lm.device) + lm.model_loaded_memory()
            if free - inference < lm.model_memory():
                lowvram = max(0.1, free - inference - lm.model_loaded_memory())
        lm.model_load(lowvram, force_patch_weights=force_patch_weights)
        current_loaded_models.insert(0, lm)


def load_model_gpu(model):
    return load_models_gpu([model])


def loaded_models(only_currently_used=False):
    return [lm.model for lm in current_loaded_models
            if lm.currently_used or not only_currently_used]


def cleanup_models():
    current_loaded_models[:] = [lm for lm in current_loaded_models
                                if lm.real_model is None or lm.real_model() is not None]


def soft_empty_cache(force=False):
    CALLS.append(("soft_empty_cache", force))


def unload_all_models():
    free_memory(1e30, get_torch_device())
