# SPDX-License-Identifier: MIT
"""nn: stand-in for the torch modules ComfyUI's ModelPatcher wraps: weights are a byte count.

A Module knows its size (nbytes) and how many of its bytes are on the GPU (gpu_bytes); the
stand-in ModelPatcher moves them. Only class names and module paths matter to the hooks
(they guess a model's class from them), so the subclasses in comfy/ carry ComfyUI's names.
"""


class Module:
    def __init__(self, nbytes):
        self.nbytes = nbytes
        self.gpu_bytes = 0

    def __repr__(self):
        return f"<{type(self).__name__} {self.nbytes} bytes, {self.gpu_bytes} on the GPU>"
