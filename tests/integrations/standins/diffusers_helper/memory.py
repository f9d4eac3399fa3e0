# SPDX-License-Identifier: MIT
"""Stand-in for FramePack's diffusers_helper/memory.py (lllyasviel/FramePack, read at commit
789d43b8 of its memory.py and bf2771b5 of demo_gradio.py, 2025): the same names and
signatures, FramePack's behaviour (plain moves), written anew for the stand-in models of
framepack_models.py. This is what FramePack does without rocmmemd, and what the loop of
framepack_loop.py imports in its control run.

    cpu, gpu, gpu_complete_modules
    class DynamicSwapInstaller: install_model(model, **kwargs), uninstall_model(model)
    fake_diffusers_current_device(model, target_device)
    get_cuda_free_memory_gb(device=None)
    move_model_to_device_with_memory_preservation(model, target_device, preserved_memory_gb=0)
    offload_model_from_device_for_memory_preservation(model, target_device,
                                                      preserved_memory_gb=0)
    unload_complete_models(*args)
    load_model_as_complete(model, target_device, unload=True)

There is no torch here: the free memory of the stand-in GPU is unlimited (inf), so moves
are whole and offloads free nothing, as FramePack's are on a GPU with room to spare.
"""
cpu = "cpu"
gpu = "cuda:0"
gpu_complete_modules = []


class DynamicSwapInstaller:
    """FramePack swaps layers in on the fly; the stand-ins only record who asked."""

    installed = []

    @staticmethod
    def install_model(model, **kwargs):
        DynamicSwapInstaller.installed.append(model)

    @staticmethod
    def uninstall_model(model):
        DynamicSwapInstaller.installed.remove(model)


def fake_diffusers_current_device(model, target_device):
    table = getattr(model, "scale_shift_table", None)
    if table is not None:
        table.data = table.data.to(target_device)
        return
    for _, m in model.named_modules():
        if hasattr(m, "weight"):
            m.to(target_device)
            return


def get_cuda_free_memory_gb(device=None):
    return float("inf")


def move_model_to_device_with_memory_preservation(model, target_device, preserved_memory_gb=0):
    for m in model.modules():
        if get_cuda_free_memory_gb(target_device) <= preserved_memory_gb:
            return
        if hasattr(m, "weight"):
            m.to(device=target_device)
    model.to(device=target_device)


def offload_model_from_device_for_memory_preservation(model, target_device,
                                                      preserved_memory_gb=0):
    for m in model.modules():
        if get_cuda_free_memory_gb(target_device) >= preserved_memory_gb:
            return
        if hasattr(m, "weight"):
            m.to(device=cpu)
    model.to(device=cpu)


def unload_complete_models(*args):
    for m in gpu_complete_modules + list(args):
        m.to(device=cpu)
    gpu_complete_modules.clear()


def load_model_as_complete(model, target_device, unload=True):
    if unload:
        unload_complete_models()
    model.to(device=target_device)
    gpu_complete_modules.append(model)
