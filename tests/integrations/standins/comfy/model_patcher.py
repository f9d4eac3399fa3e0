# SPDX-License-Identifier: MIT
"""Stand-in for ComfyUI's comfy/model_patcher.py: the ModelPatcher methods that
comfy.model_management calls (signatures as in ComfyUI 0.3.x, see model_management.py).

Weights are bytes: loading adds a module's bytes to the stand-in GPU (model_management.VRAM),
unloading takes them off. Clones share their module, and with it what is loaded, as in
ComfyUI.
"""


class ModelPatcher:
    def __init__(self, model, load_device, offload_device, size=0):
        self.model = model
        self.load_device = load_device
        self.offload_device = offload_device
        self.size = size or model.nbytes
        self.parent = None
        self.patch_models = []  # what model_patches_models() returns (a ControlNet, ...)

    def clone(self):
        n = ModelPatcher(self.model, self.load_device, self.offload_device, self.size)
        n.parent = self
        n.patch_models = list(self.patch_models)
        return n

    def is_clone(self, other):
        return hasattr(other, "model") and self.model is other.model

    def model_size(self):
        return self.size

    def loaded_size(self):
        return self.model.gpu_bytes

    def current_loaded_device(self):
        return self.load_device if self.model.gpu_bytes else self.offload_device

    def model_dtype(self):
        return "float16"

    def model_patches_models(self):
        return list(self.patch_models)

    def model_patches_to(self, device):
        pass

    def lowvram_patch_counter(self):
        return 0

    def _move(self, nbytes):
        from comfy import model_management as mm

        self.model.gpu_bytes += nbytes
        mm.VRAM.used += nbytes

    def partially_load(self, device_to, extra_memory=0, force_patch_weights=False):
        """Loads up to extra_memory more bytes onto device_to; returns how many it loaded."""
        n = int(min(max(extra_memory, 0), self.size - self.model.gpu_bytes))
        self._move(n)
        return n

    def partially_unload(self, device_to, memory_to_free=0):
        """Moves up to memory_to_free bytes to device_to; returns how many it freed."""
        n = int(min(max(memory_to_free, 0), self.model.gpu_bytes))
        self._move(-n)
        return n

    def detach(self, unpatch_all=True):
        # unpatch_all=False leaves the weights where they are (a clone takes over).
        if unpatch_all:
            self._move(-self.model.gpu_bytes)
        return self.model
