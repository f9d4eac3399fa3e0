# SPDX-License-Identifier: MIT
"""Stand-in for comfy/model_base.py: ComfyUI's diffusion models all derive from BaseModel."""
from nn import Module


class BaseModel(Module):
    pass


class SDXL(BaseModel):
    pass


class Flux(BaseModel):
    pass
