# SPDX-License-Identifier: MIT
"""Stand-in for comfy/clip_model.py: the CLIP vision model a ClipVisionModel's patcher wraps."""
from nn import Module


class CLIPVisionModelProjection(Module):
    pass
