# SPDX-License-Identifier: MIT
"""A working stand-in for spandrel (not in Debian 12), with the two names ComfyUI's upscale-model
nodes use (comfy_extras/nodes_upscale_model.py): ModelLoader().load_from_state_dict(sd) and
ImageModelDescriptor. It knows one architecture, the tests' own: a convolution to 3 * s * s
channels and a pixel shuffle, an upscaler by s ("conv.weight", "conv.bias")."""
import torch

STANDIN = True


class _Upscaler(torch.nn.Module):
    def __init__(self, scale, hidden):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 3 * scale * scale, 3, padding=1)
        self.hidden = torch.nn.Conv2d(3, 3, 1) if hidden else None
        self.shuffle = torch.nn.PixelShuffle(scale)

    def forward(self, x):
        if self.hidden is not None:
            x = self.hidden(x)
        return self.shuffle(self.conv(x))


class ImageModelDescriptor:
    """What spandrel gives for a single-image model: the module, its scale, moves."""

    def __init__(self, model, scale):
        self.model = model
        self.scale = scale

    def to(self, device):
        self.model.to(device)
        return self

    def eval(self):
        self.model.eval()
        return self

    def __call__(self, image):
        return self.model(image)


class ModelLoader:
    def load_from_state_dict(self, state_dict):
        weight = state_dict.get("conv.weight")
        if weight is None or weight.ndim != 4 or weight.shape[1] != 3:
            raise ValueError("spandrel stand-in: not the tests' upscaler architecture")
        scale = int(round((weight.shape[0] / 3) ** 0.5))
        model = _Upscaler(scale, "hidden.weight" in state_dict)
        model.load_state_dict(state_dict)
        return ImageModelDescriptor(model, scale)
