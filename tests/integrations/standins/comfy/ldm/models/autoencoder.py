# SPDX-License-Identifier: MIT
"""Stand-in for comfy/ldm/models/autoencoder.py: the VAE a VAE object's patcher wraps."""
from nn import Module


class AutoencoderKL(Module):
    pass
