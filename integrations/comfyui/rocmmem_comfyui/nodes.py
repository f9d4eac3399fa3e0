# SPDX-License-Identifier: MIT
"""nodes: the "rocmmemd status" node: what the daemon holds and for whom, and for this ComfyUI,
per model, what is declared to the daemon beside what is really held."""
from . import hooks


class RocmmemStatus:
    """An output node: rocmmemd's devices, clients and models, then this ComfyUI's holdings
    (declared and real bytes per model, working memory, PyTorch's and rocmmemd's figures for
    the process), as text shown on the node and given as a STRING output (to a Preview Any
    node, a file, ...). Runs anew each prompt."""

    CATEGORY = "utils/rocmmem"
    DESCRIPTION = ("Shows rocmmemd's status: each device's budget and free memory, the "
                   "processes it serves and their models (in use, idle or evicted), and for "
                   "this ComfyUI what each model declares to rocmmemd beside what it really "
                   "holds.")
    RETURN_TYPES = ("STRING",)
    RETURN_NAMES = ("status",)
    OUTPUT_TOOLTIPS = ("rocmmemd's status as text",)
    FUNCTION = "status"
    OUTPUT_NODE = True

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {}}

    @classmethod
    def IS_CHANGED(cls, **kwargs):
        return float("nan")  # never the same: the status changes by itself

    def status(self):
        try:
            text = hooks.status_text()
        except Exception as err:  # a status node must not fail a prompt
            text = f"rocmmemd status unavailable: {err}"
        return {"ui": {"text": [text]}, "result": (text,)}


NODE_CLASS_MAPPINGS = {"RocmmemStatus": RocmmemStatus}
NODE_DISPLAY_NAME_MAPPINGS = {"RocmmemStatus": "rocmmemd status"}
