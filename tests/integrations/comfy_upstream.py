# SPDX-License-Identifier: MIT
"""comfy_upstream: upstream ComfyUI (../shared/upstream/ComfyUI-a125cd84, v0.3.64), imported for
real into the test process: comfy.model_management, comfy.model_patcher, comfy.sd, nodes,
execution and the upscale-model nodes, with Debian's CPU-only PyTorch.

What is not ComfyUI's own: the GPU, faked by fakecuda.py (torch.cuda's queries answer for one
device; tensors meant for it stay in CPU memory, counted as on it); the packages Debian 12
lacks, stood in by absent.py; the tiny models, made by the tests' own custom node package
comfy_test_nodes (loaded with upstream's nodes.load_custom_node, as ComfyUI loads any); and
the web server, which PromptExecutor only sends messages to (Server below). ComfyUI's
directories (input, output, temp, user) are in a temporary base directory, and no bytecode is
written, so that nothing is written into the snapshot.

load() does it once per process; the tests then drive real prompts through
execution.PromptExecutor.
"""
import asyncio
import atexit
import gc
import os
import shutil
import sys
import tempfile

import absent
import integ

GiB = 1 << 30
TOTAL = 8 * GiB  # the faked GPU's memory
TEST_NODES = os.path.join(integ.HERE, "comfy_test_nodes")

_loaded = None


class Server:
    """What PromptExecutor needs of ComfyUI's web server: where messages go."""

    def __init__(self):
        self.client_id = None
        self.last_node_id = None
        self.last_prompt_id = None
        self.messages = []

    def send_sync(self, event, data, sid=None):
        self.messages.append((event, data))


class Comfy:
    """The imported ComfyUI: its modules and the tests' node module."""

    def __init__(self, base):
        import comfy.model_management as mm
        import comfy.model_patcher
        import execution
        import folder_paths
        import nodes

        self.base = base
        self.mm = mm
        self.model_patcher = comfy.model_patcher
        self.execution = execution
        self.nodes = nodes
        self.folder_paths = folder_paths
        for path, parent in ((os.path.join(integ.UPSTREAM_COMFYUI, "comfy_extras",
                                           "nodes_upscale_model.py"), "comfy_extras"),
                             (TEST_NODES, "custom_nodes")):
            if not asyncio.run(nodes.load_custom_node(path, module_parent=parent)):
                raise RuntimeError(f"ComfyUI could not load {path}")
        self.test_nodes = sys.modules[TEST_NODES.replace(".", "_x_")]
        self.upscale_model = self.test_nodes.write_upscale_model(
            os.path.join(base, "models", "upscale_models"))

    def reset(self):
        """Nothing loaded, as after ComfyUI's start."""
        self.mm.unload_all_models()
        self.mm.current_loaded_models.clear()
        gc.collect()
        import fakecuda
        fakecuda.install(TOTAL)

    def loaded_on_gpu(self):
        """{module name: what ComfyUI counts as loaded} for its models on the GPU."""
        out = {}
        for lm in self.mm.current_loaded_models:
            if getattr(lm.device, "type", None) == "cuda" and lm.model is not None:
                out[type(lm.model.model).__name__] = lm.model_loaded_memory()
        return out

    def run(self, prompt, outputs, prompt_id="prompt"):
        """Runs prompt to outputs through upstream's PromptExecutor; returns the executor
        (its history_result holds the outputs) after checking that it succeeded."""
        e = self.execution.PromptExecutor(Server())
        e.execute(prompt, prompt_id, {}, list(outputs))
        errors = [d for event, d in e.status_messages if event == "execution_error"]
        if errors or not e.success:
            raise AssertionError(f"the prompt failed: {errors}")
        return e


def txt2img(size=256, steps=2, upscale=True, status=False, mid_sampling=False):
    """A prompt of upstream nodes over the tests' tiny checkpoint: two CLIPTextEncode, an
    EmptyLatentImage of size x size pixels, KSampler, VAEDecode, then (upscale)
    UpscaleModelLoader and ImageUpscaleWithModel, and (status) the rocmmemd status node. Its
    output node is "out"; mid_sampling puts the tests' RocmmemTestMidSampling node between
    the checkpoint and the sampler."""
    model = ["ckpt", 0]
    p = {
        "ckpt": {"class_type": "RocmmemTinyCheckpointLoader", "inputs": {"seed": 0}},
        "pos": {"class_type": "CLIPTextEncode", "inputs": {"clip": ["ckpt", 1],
                                                            "text": "a tiny cat"}},
        "neg": {"class_type": "CLIPTextEncode", "inputs": {"clip": ["ckpt", 1],
                                                            "text": "blurry"}},
        "latent": {"class_type": "EmptyLatentImage",
                   "inputs": {"width": size, "height": size, "batch_size": 1}},
        "sample": {"class_type": "KSampler",
                   "inputs": {"model": model, "positive": ["pos", 0], "negative": ["neg", 0],
                              "latent_image": ["latent", 0], "seed": 1, "steps": steps,
                              "cfg": 2.0, "sampler_name": "euler", "scheduler": "normal",
                              "denoise": 1.0}},
        "decode": {"class_type": "VAEDecode", "inputs": {"samples": ["sample", 0],
                                                         "vae": ["ckpt", 2]}},
    }
    if mid_sampling:
        p["probe"] = {"class_type": "RocmmemTestMidSampling", "inputs": {"model": model}}
        p["sample"]["inputs"]["model"] = ["probe", 0]
    image = ["decode", 0]
    if upscale:
        p["upscaler"] = {"class_type": "UpscaleModelLoader",
                         "inputs": {"model_name": "tiny_x2.pt"}}
        p["upscale"] = {"class_type": "ImageUpscaleWithModel",
                        "inputs": {"upscale_model": ["upscaler", 0], "image": image}}
        image = ["upscale", 0]
    p["out"] = {"class_type": "RocmmemTestImageBytes", "inputs": {"image": image}}
    if status:
        p["status"] = {"class_type": "RocmmemStatus", "inputs": {}}
    return p


def missing():
    """Why upstream ComfyUI cannot be imported here, or None."""
    return integ.needs(integ.torch_missing(), integ.snapshot_missing(integ.UPSTREAM_COMFYUI))


def load():
    """Imports upstream ComfyUI once per process (see the module's docstring)."""
    global _loaded
    if _loaded is not None:
        return _loaded
    why = missing()
    if why:
        raise RuntimeError(why)
    sys.dont_write_bytecode = True
    import fakecuda  # needs torch: imported only here
    fakecuda.install(TOTAL)
    absent.install()
    base = tempfile.mkdtemp(prefix="rocmmem-comfyui-")
    atexit.register(shutil.rmtree, base, True)
    if integ.UPSTREAM_COMFYUI not in sys.path:
        sys.path.insert(0, integ.UPSTREAM_COMFYUI)
    import comfy.cli_args

    comfy.cli_args.args.base_directory = base
    _loaded = Comfy(base)
    return _loaded
