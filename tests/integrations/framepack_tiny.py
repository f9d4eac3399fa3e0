# SPDX-License-Identifier: MIT
"""framepack_tiny: what upstream FramePack's worker (demo_gradio.py and demo_gradio_f1.py at
../shared/upstream/FramePack-97fe5dbe) runs on, made tiny, for running that worker itself.

worker_namespace() reads the worker function from the demo's source (ast: the function alone,
not the module, which loads gigabytes of weights and starts a web server), runs FramePack's own
import line from diffusers_helper.memory changed to rocmmem.framepack (the docs' one-line
switch), and binds the worker's other names:
- FramePack's own, imported from the snapshot: AsyncStream, make_progress_bar_html,
  find_nearest_bucket, hf_clip_vision_encode (pure Python there);
- the five models, real torch modules named as FramePack's (LlamaModel, CLIPTextModel,
  AutoencoderKLHunyuanVideo, SiglipVisionModel, HunyuanVideoTransformer3DModelPacked) but of a
  few square Linear layers, on the faked GPU of fakecuda.py;
- stand-ins for the compute the worker calls (text encoding, VAE, sampling, image and video
  helpers of diffusers_helper.utils, which imports cv2): small computations on those modules
  with FramePack's signatures. The sampler does not call the worker's preview callback (which
  needs einops, not in Debian 12).
"""
import ast
import os
import sys

import numpy as np
import torch

import integ

MiB = 1 << 20
SNAPSHOT = integ.UPSTREAM_FRAMEPACK


class _Tiny(torch.nn.Module):
    """nbytes of float32 weights in `layers` square Linear layers."""

    def __init__(self, nbytes, layers):
        super().__init__()
        width = int((nbytes // layers // 4) ** 0.5)
        self.width = width
        self.layers = torch.nn.ModuleList(torch.nn.Linear(width, width, bias=False)
                                          for _ in range(layers))

    @property
    def device(self):
        return next(iter(self._parameters.values()), self.layers[0].weight).device

    @property
    def dtype(self):
        return torch.float32

    def run(self, x):
        for layer in self.layers:
            x = torch.tanh(layer(x))
        return x


class LlamaModel(_Tiny):
    def __init__(self):
        super().__init__(8 * MiB, 8)


class CLIPTextModel(_Tiny):
    def __init__(self):
        super().__init__(2 * MiB, 2)


class AutoencoderKLHunyuanVideo(_Tiny):
    def __init__(self):
        super().__init__(4 * MiB, 4)


class SiglipVisionModel(_Tiny):
    def __init__(self):
        super().__init__(2 * MiB, 2)

    def forward(self, pixel_values):
        x = pixel_values.mean() + torch.zeros(1, 4, self.width, device=pixel_values.device)
        return _Output(self.run(x))


class HunyuanVideoTransformer3DModelPacked(_Tiny):
    def __init__(self):
        super().__init__(24 * MiB, 6)
        self.teacache = None

    def initialize_teacache(self, enable_teacache=True, num_steps=25):
        self.teacache = (enable_teacache, num_steps)


class _Output:
    def __init__(self, last_hidden_state):
        self.last_hidden_state = last_hidden_state


class _Features(dict):
    def to(self, device=None, dtype=None):
        return _Features({k: v.to(device=device, dtype=dtype) for k, v in self.items()})


class SiglipImageProcessor:
    def preprocess(self, images, return_tensors="pt"):
        return _Features(pixel_values=torch.from_numpy(images).float().permute(2, 0, 1)[None])


class Compute:
    """The compute the worker calls, on the faked GPU (gpu: rocmmem.framepack's)."""

    def __init__(self, gpu):
        self.gpu = gpu
        self.saved = []  # (filename, shape) of each "video" written
        self.seen = []  # (step, the share of its model's weights on the GPU)

    def look(self, step, model):
        import fakecuda
        params = list(model.parameters())
        self.seen.append((step, sum(fakecuda.on_device(p) for p in params) / len(params)))

    def encode_prompt_conds(self, prompt, text_encoder, text_encoder_2, tokenizer, tokenizer_2):
        self.look("text_encoder_2", text_encoder_2)
        n = max(1, len(prompt.split()))
        llama = text_encoder.run(torch.ones(1, n, text_encoder.width, device=self.gpu))
        clip = text_encoder_2.run(torch.ones(1, text_encoder_2.width, device=self.gpu))
        return llama, clip

    @staticmethod
    def crop_or_pad_yield_mask(x, length=256):
        b, n, c = x.shape
        mask = torch.zeros(b, length, dtype=torch.bool, device=x.device)
        mask[:, :min(n, length)] = True
        if n >= length:
            return x[:, :length], mask
        return torch.cat([x, x.new_zeros(b, length - n, c)], dim=1), mask

    @staticmethod
    def resize_and_center_crop(image, target_width, target_height):
        rows = np.arange(target_height) * image.shape[0] // target_height
        cols = np.arange(target_width) * image.shape[1] // target_width
        return image[rows][:, cols]

    def vae_encode(self, image, vae):
        self.look("vae_encode", vae)
        x = vae.run(image.to(self.gpu).mean() + torch.zeros(1, vae.width, device=self.gpu))
        h, w = image.shape[-2] // 8, image.shape[-1] // 8
        return x.mean() + torch.zeros(1, 16, 1, h, w, device=self.gpu)

    def vae_decode(self, latents, vae, image_mode=False):
        self.look("vae_decode", vae)
        x = vae.run(latents.to(self.gpu).mean() + torch.zeros(1, vae.width, device=self.gpu))
        frames = latents.shape[2] * 4 - 3
        return x.mean() + torch.zeros(1, 3, frames, 8, 8, device=self.gpu)

    @staticmethod
    def vae_decode_fake(latents):
        raise NotImplementedError("the tests' sampler shows no previews")

    def sample_hunyuan(self, transformer, width, height, frames, num_inference_steps,
                       generator, device, **kwargs):
        self.look("sample", transformer)
        x = torch.randn(1, 16, (frames + 3) // 4, height // 8, width // 8,
                        generator=generator).to(device)
        for _ in range(num_inference_steps):
            v = transformer.run(torch.ones(1, transformer.width, device=device))
            x = x * 0.9 + v.mean()
        return x

    @staticmethod
    def soft_append_bcthw(history, current, overlap=0):
        return torch.cat([history, current[:, :, overlap:]], dim=2)

    def save_bcthw_as_mp4(self, x, output_filename, fps=10, crf=0):
        self.saved.append((output_filename, list(x.shape)))

    @staticmethod
    def generate_timestamp():
        return "job"


def worker_source(demo):
    """The worker function of the demo file, as a module of its own (ast)."""
    with open(os.path.join(SNAPSHOT, demo), encoding="utf-8") as f:
        tree = ast.parse(f.read(), demo)
    worker = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "worker")
    line = next(n for n in tree.body if isinstance(n, ast.ImportFrom) and
                n.module == "diffusers_helper.memory")
    return worker, line


def free_names(fn):
    """The names the function reads that it does not bind itself."""
    import builtins
    bound = {a.arg for a in fn.args.args}
    read = set()
    for n in ast.walk(fn):
        if isinstance(n, ast.Name):
            (bound if isinstance(n.ctx, ast.Store) else read).add(n.id)
        elif isinstance(n, ast.FunctionDef) and n is not fn:
            bound.add(n.name)
            bound.update(a.arg for a in n.args.args)
        elif isinstance(n, ast.ExceptHandler) and n.name:
            bound.add(n.name)
    return read - bound - set(dir(builtins))


class Traceback:
    """Stands for the traceback module in the worker, whose `except:` prints and goes on:
    what it would print is kept, for the test to fail on."""

    def __init__(self):
        self.printed = []

    def print_exc(self):
        import traceback
        self.printed.append(traceback.format_exc())


def worker_namespace(demo, outputs, wrap=None):
    """(worker function, namespace, compute) for demo ("demo_gradio.py" or
    "demo_gradio_f1.py"); wrap(name, fn) may wrap each memory function."""
    if SNAPSHOT not in sys.path:
        sys.path.insert(0, SNAPSHOT)
    fn, line = worker_source(demo)
    ns = {"__name__": "framepack_worker", "torch": torch, "np": np, "os": os}
    switched = ast.ImportFrom(module="rocmmem.framepack", names=line.names, level=0)
    exec(compile(ast.fix_missing_locations(ast.Module([switched], [])), demo, "exec"), ns)
    if wrap is not None:
        for alias in line.names:
            name = alias.asname or alias.name
            if callable(ns[name]) and name != "DynamicSwapInstaller":
                ns[name] = wrap(name, ns[name])
    from PIL import Image
    from diffusers_helper.bucket_tools import find_nearest_bucket
    from diffusers_helper.clip_vision import hf_clip_vision_encode
    from diffusers_helper.gradio.progress_bar import make_progress_bar_html
    from diffusers_helper.thread_utils import AsyncStream
    compute = Compute(ns["gpu"])
    ns.update(Image=Image, find_nearest_bucket=find_nearest_bucket,
              hf_clip_vision_encode=hf_clip_vision_encode,
              make_progress_bar_html=make_progress_bar_html, stream=AsyncStream(),
              outputs_folder=outputs, traceback=Traceback(),
              text_encoder=LlamaModel().eval(), text_encoder_2=CLIPTextModel().eval(),
              vae=AutoencoderKLHunyuanVideo().eval(), image_encoder=SiglipVisionModel().eval(),
              transformer=HunyuanVideoTransformer3DModelPacked().eval(),
              tokenizer=None, tokenizer_2=None, feature_extractor=SiglipImageProcessor())
    for name in ("encode_prompt_conds", "crop_or_pad_yield_mask", "resize_and_center_crop",
                 "vae_encode", "vae_decode", "vae_decode_fake", "sample_hunyuan",
                 "soft_append_bcthw", "save_bcthw_as_mp4", "generate_timestamp"):
        ns[name] = getattr(compute, name)
    # What the demo does at start, before any worker runs (demo_gradio.py, lines 44-99).
    free_mem_gb = ns["get_cuda_free_memory_gb"](ns["gpu"])
    ns["high_vram"] = free_mem_gb > 60
    if not ns["high_vram"]:
        ns["DynamicSwapInstaller"].install_model(ns["transformer"], device=ns["gpu"])
        ns["DynamicSwapInstaller"].install_model(ns["text_encoder"], device=ns["gpu"])
    missing = free_names(fn) - set(ns) - {"einops"}  # einops: only in the preview callback
    if missing:
        raise AssertionError(f"the worker of {demo} reads names the test does not bind: "
                             f"{sorted(missing)}")
    exec(compile(ast.fix_missing_locations(ast.Module([fn], [])), demo, "exec"), ns)
    return ns["worker"], ns, compute
