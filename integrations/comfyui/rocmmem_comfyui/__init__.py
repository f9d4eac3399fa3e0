# SPDX-License-Identifier: MIT
"""rocmmem_comfyui: the ComfyUI custom node package that lets rocmmemd arbitrate ComfyUI's memory.

Built into a node of its own (`cmake --build build --target comfyui_node`: build/comfyui-rocmmem/,
this package's files at its root with the rocmmem Python package in vendor/), which is what
users clone into custom_nodes/ or install through ComfyUI-Manager (docs/integrations.md).
When ComfyUI loads it, it wraps comfy.model_management (hooks.py) and adds the "rocmmemd
status" node (nodes.py). Without the daemon or librocmmem it only adds the node, which then
says why, and ComfyUI runs exactly as it does alone.
"""
import logging
import os
import sys

# The rocmmem package built into this node, ahead of any installed one: the node and the
# package it was built with go together. Only vendor/ goes on sys.path (it holds nothing but
# rocmmem), never this folder, whose nodes.py would shadow ComfyUI's own nodes module.
_VENDOR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "vendor")
if os.path.isdir(os.path.join(_VENDOR, "rocmmem")) and "rocmmem" not in sys.modules and \
        _VENDOR not in sys.path:
    sys.path.insert(0, _VENDOR)

from .nodes import NODE_CLASS_MAPPINGS, NODE_DISPLAY_NAME_MAPPINGS  # noqa: E402

__all__ = ["NODE_CLASS_MAPPINGS", "NODE_DISPLAY_NAME_MAPPINGS"]

try:
    from . import hooks

    hooks.install()
except Exception:  # never break ComfyUI's start
    logging.getLogger("rocmmem.comfyui").exception("rocmmem: could not hook ComfyUI's model "
                                                   "management")
