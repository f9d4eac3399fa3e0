# SPDX-License-Identifier: MIT
"""framepack_models: stand-ins for FramePack's five models, whose weights are bytearrays that
.to() moves between a "cpu" and a "gpu" list, so that a test sees every move.

Devices are strings ("cpu", "cuda:0"), as rocmmem.framepack accepts them when there is no
torch. Each model counts its arrivals on the GPU (none of it there -> some of it) and its
departures (some -> none). The class names are those of demo_gradio.py's models, from which
rocmmem.framepack guesses the classes it registers.
"""
CPU = []  # the weights (bytearrays) on the "cpu"
GPU = []  # the weights and activations on the "gpu"


def on_gpu(device):
    return str(device).startswith("cuda")


def gpu_bytes():
    """Bytes this process has on the "gpu": weights and activations."""
    return sum(len(b) for b in GPU)


def _remove(lst, buf):
    for i, b in enumerate(lst):
        if b is buf:
            del lst[i]
            return


class Tensor:
    """A weight: nbytes bytes on one device."""

    def __init__(self, nbytes):
        self.data = bytearray(nbytes)
        self.nbytes = nbytes
        self.device = "cpu"
        CPU.append(self.data)

    def to(self, device):
        if on_gpu(device) != on_gpu(self.device):
            _remove(GPU if on_gpu(self.device) else CPU, self.data)
            (GPU if on_gpu(device) else CPU).append(self.data)
        self.device = str(device)
        return self


class Layer:
    """A submodule with a weight (what FramePack's partial moves go by)."""

    def __init__(self, owner, nbytes):
        self.owner = owner
        self.weight = Tensor(nbytes)

    def modules(self):
        return iter([self])

    def parameters(self):
        return iter([self.weight])

    def buffers(self):
        return iter([])

    def to(self, device=None, dtype=None):
        if device is not None:
            before = self.owner.loaded_bytes()
            self.weight.to(device)
            self.owner._moved(before)
        return self


class StandinModel:
    """A model of nlayers layers of equal size, nbytes in all."""

    def __init__(self, nbytes, nlayers=8):
        self.layers = [Layer(self, nbytes // nlayers) for _ in range(nlayers)]
        self.arrivals = 0
        self.departures = 0

    def modules(self):
        return iter([self] + self.layers)

    def named_modules(self):
        return iter([("", self)] + [(str(i), m) for i, m in enumerate(self.layers)])

    def parameters(self):
        return iter([m.weight for m in self.layers])

    def buffers(self):
        return iter([])

    def loaded_bytes(self):
        return sum(m.weight.nbytes for m in self.layers if on_gpu(m.weight.device))

    def fully_loaded(self):
        return self.loaded_bytes() == sum(m.weight.nbytes for m in self.layers)

    def _moved(self, before):
        after = self.loaded_bytes()
        if before == 0 and after > 0:
            self.arrivals += 1
        elif before > 0 and after == 0:
            self.departures += 1

    def to(self, device=None, dtype=None):
        if device is not None:
            before = self.loaded_bytes()
            for m in self.layers:
                m.weight.to(device)
            self._moved(before)
        return self


class LlamaModel(StandinModel):
    pass


class CLIPTextModel(StandinModel):
    pass


class AutoencoderKLHunyuanVideo(StandinModel):
    pass


class SiglipVisionModel(StandinModel):
    pass


class HunyuanVideoTransformer3DModelPacked(StandinModel):
    pass


class Activations:
    """Working memory a step allocates on the "gpu" and frees at its end."""

    def __init__(self, nbytes):
        self.buf = bytearray(nbytes)
        GPU.append(self.buf)

    def free(self):
        _remove(GPU, self.buf)
