# SPDX-License-Identifier: MIT
"""comfy_test_nodes: a ComfyUI custom node package of the tests (loaded with upstream's
nodes.load_custom_node) whose nodes make tiny models with ComfyUI's own classes, where a real
workflow loads checkpoints from files: a 32-channel SD1.5-type UNet (comfy.supported_models.SD15,
no attention), an AutoencoderKL VAE of one level (comfy.sd.VAE with a config), a text encoder
of one embedding behind comfy.sd.CLIP, and an upscale model file for upstream's
UpscaleModelLoader. Two nodes only observe: RocmmemTestMidSampling runs the test's hooks
(MID_SAMPLING) once inside sampling, through ComfyUI's model function wrapper, and
RocmmemTestImageBytes is an output node that reports an image's shape. Everything else in the
tests' prompts is upstream's own nodes."""
import os
import time

import torch

import comfy.model_management
import comfy.model_patcher
import comfy.sd
import comfy.supported_models
import comfy.supported_models_base
import folder_paths

CONTEXT = 32  # the text encoder's width and the UNet's context_dim


def tiny_unet(seed=0):
    """A MODEL: ComfyUI's SD1.5 model class over a tiny UNet, as a checkpoint loader makes it."""
    torch.manual_seed(seed)
    unet_config = {"image_size": 32, "in_channels": 4, "out_channels": 4, "model_channels": 32,
                   "num_res_blocks": [1], "channel_mult": [1], "transformer_depth": [0],
                   "transformer_depth_output": [0, 0], "transformer_depth_middle": -1,
                   "context_dim": CONTEXT, "use_spatial_transformer": True,
                   "use_linear_in_transformer": False, "adm_in_channels": None,
                   "use_temporal_attention": False, "use_temporal_resblock": False,
                   "dtype": torch.float32, "num_heads": 1, "num_head_channels": -1,
                   "legacy": False}
    config = comfy.supported_models.SD15(unet_config)
    config.set_inference_dtype(torch.float32, None)
    # What ComfyUI estimates a step of this model needs per latent pixel (each model class
    # sets its own): more than SD1.5's, so that a small latent asks for more than ComfyUI's
    # floor for a step, as real models do at real sizes.
    config.memory_usage_factor = 4.0
    model = config.get_model({})
    load_device = comfy.model_management.get_torch_device()
    return comfy.model_patcher.ModelPatcher(
        model, load_device=load_device,
        offload_device=comfy.model_management.unet_offload_device())


def tiny_vae(seed=0):
    torch.manual_seed(seed)
    ddconfig = {"double_z": True, "z_channels": 4, "resolution": 64, "in_channels": 3,
                "out_ch": 3, "ch": 32, "ch_mult": [1], "num_res_blocks": 1,
                "attn_resolutions": [], "dropout": 0.0}
    config = {"params": {"embed_dim": 4, "ddconfig": ddconfig}}
    from comfy.ldm.models.autoencoder import AutoencoderKL
    sd = AutoencoderKL(**config["params"]).state_dict()
    return comfy.sd.VAE(sd=sd, config=config, dtype=torch.float32)


class TinyTokenizer:
    """Words to ids (their length), weight 1: enough for the text encoder below."""

    def __init__(self, embedding_directory=None, tokenizer_data={}):
        pass

    def tokenize_with_weights(self, text, return_word_ids=False, **kwargs):
        return [[(min(len(w), 63), 1.0) for w in text.split()] or [(0, 1.0)]]

    def state_dict(self):
        return {}


class TinyClipTextModel(torch.nn.Module):
    """A text encoder as comfy.sd.CLIP drives one (encode_token_weights, clip options)."""

    def __init__(self, device=None, dtype=None, model_options={}):
        super().__init__()
        self.embedding = torch.nn.Embedding(64, CONTEXT, device=device)
        self.projection = torch.nn.Linear(CONTEXT, CONTEXT, device=device)
        self.dtypes = {torch.float32}

    def reset_clip_options(self):
        pass

    def set_clip_options(self, options):
        pass

    def encode_token_weights(self, tokens):
        ids = torch.tensor([[t for t, _ in tokens[0]]], device=self.embedding.weight.device)
        cond = self.projection(self.embedding(ids))
        # Like ComfyUI's own text encoders, the results go to its intermediate device.
        out = comfy.model_management.intermediate_device()
        return cond.to(out), cond.mean(dim=1).to(out)


def tiny_clip():
    target = comfy.supported_models_base.ClipTarget(TinyTokenizer, TinyClipTextModel)
    return comfy.sd.CLIP(target=target, model_options={"dtype": torch.float32})


class BigModel(torch.nn.Module):
    """A model of ComfyUI's own layers (comfy.ops, which it can load in part: low VRAM), for
    a GPU smaller than the model."""

    def __init__(self, nbytes, layers=8):
        super().__init__()
        import comfy.ops
        width = 1024
        rows = max(1, nbytes // layers // (width * 4))
        self.layers = torch.nn.ModuleList(
            comfy.ops.manual_cast.Linear(width, rows, bias=False) for _ in range(layers))


def big_model(nbytes):
    model = BigModel(nbytes)
    return comfy.model_patcher.ModelPatcher(
        model, load_device=comfy.model_management.get_torch_device(),
        offload_device=comfy.model_management.unet_offload_device())


class TinyCheckpointLoader:
    """What CheckpointLoaderSimple gives (MODEL, CLIP, VAE), made instead of read."""

    CATEGORY = "rocmmem tests"
    RETURN_TYPES = ("MODEL", "CLIP", "VAE")
    FUNCTION = "load"

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"seed": ("INT", {"default": 0})}}

    def load(self, seed):
        return (tiny_unet(seed), tiny_clip(), tiny_vae(seed))


def write_upscale_model(directory, name="tiny_x2.pt", scale=2):
    """An upscale model file (the tests' spandrel stand-in architecture) for UpscaleModelLoader."""
    torch.manual_seed(0)
    conv = torch.nn.Conv2d(3, 3 * scale * scale, 3, padding=1)
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, name)
    torch.save({"conv.weight": conv.weight.detach(), "conv.bias": conv.bias.detach()}, path)
    folder_paths.add_model_folder_path("upscale_models", directory)
    return name


# Callables the tests put here; RocmmemTestMidSampling calls each once, inside the first
# model evaluation of a sampling (with the working memory of the step reserved).
MID_SAMPLING = []
EVALUATIONS = []  # time.monotonic() at the end of each model evaluation through that node


class MidSampling:
    """MODEL -> the same model, with a model function wrapper (ComfyUI's API for custom nodes)
    that runs MID_SAMPLING's callables at the first evaluation."""

    CATEGORY = "rocmmem tests"
    RETURN_TYPES = ("MODEL",)
    FUNCTION = "wrap"

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"model": ("MODEL",)}}

    def wrap(self, model):
        m = model.clone()

        def wrapper(apply_model, args):
            while MID_SAMPLING:
                MID_SAMPLING.pop(0)()
            out = apply_model(args["input"], args["timestep"], **args["c"])
            EVALUATIONS.append(time.monotonic())
            return out

        m.set_model_unet_function_wrapper(wrapper)
        return (m,)


class ImageBytes:
    """An output node: the image's shape, in the prompt's outputs (instead of a file)."""

    CATEGORY = "rocmmem tests"
    RETURN_TYPES = ()
    FUNCTION = "report"
    OUTPUT_NODE = True

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"image": ("IMAGE",)}}

    def report(self, image):
        return {"ui": {"shape": [list(image.shape)]}}


NODE_CLASS_MAPPINGS = {"RocmmemTinyCheckpointLoader": TinyCheckpointLoader,
                       "RocmmemTestMidSampling": MidSampling,
                       "RocmmemTestImageBytes": ImageBytes}
