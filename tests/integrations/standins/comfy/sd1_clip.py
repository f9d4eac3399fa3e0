# SPDX-License-Identifier: MIT
"""Stand-in for comfy/sd1_clip.py: the CLIP text encoder a CLIP object's patcher wraps."""
from nn import Module


class SD1ClipModel(Module):
    pass
