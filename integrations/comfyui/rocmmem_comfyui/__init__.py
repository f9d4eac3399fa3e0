# SPDX-License-Identifier: MIT
"""rocmmem_comfyui: a ComfyUI custom node package that lets rocmmemd arbitrate ComfyUI's models.

Copy or symlink this folder into ComfyUI's custom_nodes/ and install the rocmmem package into
ComfyUI's Python (docs/integrations.md). When ComfyUI loads it, it connects to rocmmemd and
wraps comfy.model_management (hooks.py); it adds the "rocmmemd status" node (nodes.py).
Without the package or the daemon it only adds the node, which then says so, and ComfyUI
runs exactly as it does alone.
"""
import logging

from .nodes import NODE_CLASS_MAPPINGS, NODE_DISPLAY_NAME_MAPPINGS

__all__ = ["NODE_CLASS_MAPPINGS", "NODE_DISPLAY_NAME_MAPPINGS"]

try:
    from . import hooks

    hooks.install()
except Exception:  # never break ComfyUI's start
    logging.getLogger("rocmmem.comfyui").exception("rocmmem: could not hook ComfyUI's model "
                                                   "management")
