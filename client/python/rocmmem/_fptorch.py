# SPDX-License-Identifier: MIT
"""_fptorch: what rocmmem.framepack asks of PyTorch, asked without assuming it has a GPU: torch
imported on first use (None where there is none, as for the tests' stand-in models), why it
cannot use a GPU, FramePack's devices and its own diffusers_helper.memory, device indexes,
tensor sizes, and PyTorch's free memory and cache."""


class GPUUnavailable(ImportError):
    """A name of FramePack's diffusers_helper.memory that cannot work in this Python: the
    message says why. An ImportError, so that FramePack's own import line fails with it."""


_torch_module = None
_torch_missing = None  # why torch cannot be imported, once tried


def torch_module():
    """torch, imported on first use, or None where there is none (the tests' stand-ins)."""
    global _torch_module, _torch_missing
    if _torch_module is None and _torch_missing is None:
        try:
            import torch
        except Exception as e:  # absent, or a broken install that fails to load
            _torch_missing = f"{type(e).__name__}: {e}"
        else:
            _torch_module = torch
    return _torch_module


def no_gpu_reason(torch):
    """Why this PyTorch cannot use a GPU, or None when it can."""
    try:
        if torch.cuda.is_available():
            return None
    except Exception as e:
        return f"torch.cuda.is_available() failed: {type(e).__name__}: {e}"
    version = getattr(torch, "__version__", "?")
    built = getattr(torch, "version", None)
    if not getattr(built, "cuda", None) and not getattr(built, "hip", None):
        return (f"this PyTorch ({version}) is built for the CPU only: it has neither CUDA nor "
                "HIP (ROCm); FramePack needs a ROCm or CUDA build of PyTorch")
    return (f"this PyTorch ({version}) sees no GPU: torch.cuda.is_available() is False "
            "(check the driver, and HIP_VISIBLE_DEVICES or CUDA_VISIBLE_DEVICES)")


def default_devices():
    """cpu and gpu as FramePack defines them; strings where there is no torch (the tests'
    stand-in models take them). gpu is a GPUUnavailable where torch has no GPU."""
    torch = torch_module()
    if torch is None:
        return {"cpu": "cpu", "gpu": "cuda:0"}
    why = no_gpu_reason(torch)
    if why is not None:
        return {"cpu": torch.device("cpu"),
                "gpu": GPUUnavailable(f"rocmmem.framepack.gpu: {why}")}
    try:
        index = torch.cuda.current_device()
    except Exception as e:
        return {"cpu": torch.device("cpu"),
                "gpu": GPUUnavailable("rocmmem.framepack.gpu: torch.cuda.current_device() "
                                      f"failed: {type(e).__name__}: {e}")}
    return {"cpu": torch.device("cpu"), "gpu": torch.device("cuda", index)}


def framepack_memory():
    """FramePack's own diffusers_helper.memory, or GPUUnavailable saying why it cannot be
    imported here (it calls torch.cuda.current_device() at import: a PyTorch without a GPU
    fails there, with an AssertionError rather than an ImportError)."""
    try:
        import diffusers_helper.memory as memory
    except Exception as e:
        why = f"{type(e).__name__}: {e}"
        torch = torch_module()
        if isinstance(e, ImportError) and getattr(e, "name", "") in ("diffusers_helper",
                                                                      "diffusers_helper.memory"):
            why += " (run FramePack from its own folder, where diffusers_helper is)"
        elif torch is not None and no_gpu_reason(torch):
            why += f"; {no_gpu_reason(torch)}"
        elif torch is None and getattr(e, "name", "") != "torch":
            why += f"; PyTorch cannot be imported ({_torch_missing})"
        raise GPUUnavailable("rocmmem.framepack.DynamicSwapInstaller is FramePack's own, from "
                             "diffusers_helper.memory, which cannot be imported here: "
                             f"{why}") from e
    return memory


def check_gpu(model, device):
    """Raises GPUUnavailable when model is a torch module and device a GPU this PyTorch does
    not have: said before anything is reserved for it, rather than failing in .to()."""
    torch = torch_module()
    if torch is None or device is None or not isinstance(model, torch.nn.Module):
        return
    why = no_gpu_reason(torch)
    if why is not None:
        raise GPUUnavailable(f"cannot move {type(model).__name__} to a GPU: {why}")


def device_index(device):
    """The daemon's device index for a PyTorch device, or None when it is not a GPU.

    ROCm builds of PyTorch call HIP devices "cuda", so "cuda:N" is device N of the daemon
    (which numbers devices as the runtime does; HIP_VISIBLE_DEVICES must agree).
    """
    if device is None:
        return None
    if isinstance(device, int) and not isinstance(device, bool):
        return device
    kind = getattr(device, "type", None)
    index = getattr(device, "index", None)
    if kind is None:
        kind, _, rest = str(device).partition(":")
        index = int(rest) if rest.isdigit() else None
    if kind != "cuda":
        return None
    if index is None:
        torch = torch_module()
        try:
            index = torch.cuda.current_device() if torch is not None and \
                torch.cuda.is_available() else 0
        except Exception:
            index = 0
    return index


def tensor_bytes(t):
    """Bytes of a tensor (or of anything with nbytes, or numel() and element_size())."""
    n = getattr(t, "nbytes", None)
    if isinstance(n, int):
        return n
    try:
        return int(t.numel()) * int(t.element_size())
    except (AttributeError, TypeError):
        return 0


def tensors_bytes(obj):
    """Bytes of a module's parameters and buffers, each counted once."""
    seen = set()
    total = 0
    for attr in ("parameters", "buffers"):
        fn = getattr(obj, attr, None)
        if fn is None:
            continue
        for t in fn():
            if id(t) not in seen:
                seen.add(id(t))
                total += tensor_bytes(t)
    return total


def empty_cache():
    """Empties PyTorch's cache where it has a GPU."""
    torch = torch_module()
    if torch is None:
        return
    try:
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    except Exception:
        pass


def plain_free_bytes(device):
    """What PyTorch could still allocate on device, or None when unknown (no torch, or one
    without a GPU, as with the tests' stand-in models: the plain moves then take the memory
    for plenty, moving whole models and offloading none)."""
    torch = torch_module()
    if torch is None or no_gpu_reason(torch) is not None:
        return None
    stats_ = torch.cuda.memory_stats(device)
    free, _ = torch.cuda.mem_get_info(device)
    return free + stats_["reserved_bytes.all.current"] - stats_["active_bytes.all.current"]
