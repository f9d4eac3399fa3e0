# SPDX-License-Identifier: MIT
"""framepack_loop: FramePack's generation loop on stand-in models, as a process of its own.

The memory calls are those of the worker in FramePack's demo_gradio.py (lllyasviel/FramePack
bf2771b5, its low-VRAM path), in the same order with the same arguments; the models are the
stand-ins of framepack_models.py, sized 1 MiB for each GB of the real ones ("GB" below):

    unload_complete_models(text_encoder, text_encoder_2, image_encoder, vae, transformer)
    fake_diffusers_current_device(text_encoder, gpu); load_model_as_complete(text_encoder_2)
    -> text encoding
    load_model_as_complete(vae) -> VAE encoding
    load_model_as_complete(image_encoder) -> CLIP vision
    for each section:
        unload_complete_models()
        move_model_to_device_with_memory_preservation(transformer, gpu, preserved_memory_gb=6)
        -> sampling (with 6 GB of activations)
        offload_model_from_device_for_memory_preservation(transformer, gpu, preserved_memory_gb=8)
        load_model_as_complete(vae) -> VAE decoding (with 8 GB of activations)
        unload_complete_models()

    python3 framepack_loop.py [--memory rocmmem|plain] [--jobs N] [--sections N]
                              [--step-ms MS] [--exclusive]

--memory picks the one import line that differs (rocmmem.framepack, or the stand-in of
FramePack's own diffusers_helper.memory). Each step checks that its models are on the GPU
and, through rocmmemd, that this process has no more on the GPU than the daemon reserved for
it (read from status after the step's allocations). Prints one JSON line at the end: the
steps, failures, accounting violations, each model's arrivals on and departures from the GPU,
and rocmmem.framepack's counters.
"""
import argparse
import faulthandler
import json
import os
import signal
import sys
import time
import traceback

import framepack_models as fm

try:
    import torch
except ImportError:
    pass
else:
    if not torch.cuda.is_available():
        import fakecuda  # Debian's CPU-only PyTorch: FramePack would not start without a GPU
        fakecuda.install()

faulthandler.register(signal.SIGUSR1, all_threads=True)  # where a stuck run is stuck

p = argparse.ArgumentParser()
p.add_argument("--memory", choices=("rocmmem", "plain"), default="rocmmem")
p.add_argument("--jobs", type=int, default=2)
p.add_argument("--sections", type=int, default=3)
p.add_argument("--step-ms", type=float, default=20)
p.add_argument("--exclusive", action="store_true",
               help="check that the transformer and the VAE are never on the GPU together")
args = p.parse_args()

if args.memory == "plain":
    from diffusers_helper.memory import cpu, gpu, get_cuda_free_memory_gb, move_model_to_device_with_memory_preservation, offload_model_from_device_for_memory_preservation, fake_diffusers_current_device, DynamicSwapInstaller, unload_complete_models, load_model_as_complete  # noqa: E501
else:
    from rocmmem.framepack import cpu, gpu, get_cuda_free_memory_gb, move_model_to_device_with_memory_preservation, offload_model_from_device_for_memory_preservation, fake_diffusers_current_device, DynamicSwapInstaller, unload_complete_models, load_model_as_complete  # noqa: E501

GB = 1 / 1024  # FramePack's gigabytes, as the stand-ins' mebibytes
MiB = 1 << 20
gpu_memory_preservation = 6  # demo_gradio.py's default

text_encoder = fm.LlamaModel(16 * MiB)
text_encoder_2 = fm.CLIPTextModel(2 * MiB, nlayers=1)
vae = fm.AutoencoderKLHunyuanVideo(4 * MiB, nlayers=2)
image_encoder = fm.SiglipVisionModel(2 * MiB, nlayers=1)
transformer = fm.HunyuanVideoTransformer3DModelPacked(24 * MiB)
MODELS = {"text_encoder": text_encoder, "text_encoder_2": text_encoder_2, "vae": vae,
          "image_encoder": image_encoder, "transformer": transformer}

steps, failures, violations = [], [], []
free_mem_gb = get_cuda_free_memory_gb(gpu)
high_vram = False  # the low-VRAM path: the one that moves models
DynamicSwapInstaller.install_model(transformer, device=gpu)
DynamicSwapInstaller.install_model(text_encoder, device=gpu)


def own_reserved():
    """What rocmmemd holds for this process: its models' bytes (None without a daemon)."""
    if args.memory != "rocmmem":
        return None
    import rocmmem.framepack

    c = rocmmem.framepack.client()
    st = c.status() if c is not None else None
    if st is None:
        return None
    return sum(m["bytes"] for m in st["models"] if m["owner_pid"] == os.getpid())


def step(what, complete=(), partial=(), activations_gb=0):
    """One step of work: its models must be on the GPU (complete: whole), it allocates its
    activations, and the process must not hold more than the daemon reserved for it."""
    for m in complete:
        if not m.fully_loaded():
            failures.append(f"{what}: {type(m).__name__} is not (all) on the GPU")
    for m in partial:
        if m.loaded_bytes() == 0:
            failures.append(f"{what}: none of {type(m).__name__} is on the GPU")
    act = fm.Activations(int(activations_gb * GB * (1 << 30)))
    try:
        reserved = own_reserved()  # read before the GPU is: evictions only lower both
        real = fm.gpu_bytes()
        if reserved is not None and real > reserved:
            violations.append(f"{what}: {real} bytes on the GPU, {reserved} reserved")
        if args.exclusive and transformer.loaded_bytes() and vae.loaded_bytes():
            violations.append(f"{what}: the transformer and the VAE on the GPU together")
        time.sleep(args.step_ms / 1000)
    finally:
        act.free()
    steps.append(what)


def worker(job, sections):
    unload_complete_models(text_encoder, text_encoder_2, image_encoder, vae, transformer)
    fake_diffusers_current_device(text_encoder, gpu)
    load_model_as_complete(text_encoder_2, target_device=gpu)
    # text_encoder needs nothing on the GPU: DynamicSwapInstaller fetches its layers.
    step(f"job {job}: text encoding", complete=[text_encoder_2])
    load_model_as_complete(vae, target_device=gpu)
    step(f"job {job}: VAE encoding", complete=[vae])
    load_model_as_complete(image_encoder, target_device=gpu)
    step(f"job {job}: CLIP vision", complete=[image_encoder])
    for section in range(sections):
        unload_complete_models()
        move_model_to_device_with_memory_preservation(
            transformer, target_device=gpu,
            preserved_memory_gb=gpu_memory_preservation * GB)
        step(f"job {job} section {section}: sampling", complete=[transformer],
             activations_gb=gpu_memory_preservation)
        offload_model_from_device_for_memory_preservation(transformer, target_device=gpu,
                                                          preserved_memory_gb=8 * GB)
        load_model_as_complete(vae, target_device=gpu)
        step(f"job {job} section {section}: VAE decoding", complete=[vae], activations_gb=8)
        unload_complete_models()


for job in range(args.jobs):
    try:
        worker(job, args.sections)
    except Exception:
        failures.append(f"job {job}: {traceback.format_exc()}")

result = {"pid": os.getpid(), "steps": steps, "failures": failures, "violations": violations,
          "free_mem_gb": free_mem_gb,
          "moves": {n: [m.arrivals, m.departures] for n, m in MODELS.items()}}
if args.memory == "rocmmem":
    import rocmmem.framepack

    result["stats"] = rocmmem.framepack.stats()
    result["names"] = {n: type(m).__name__ for n, m in MODELS.items()}
print(json.dumps(result), flush=True)
sys.exit(1 if failures else 0)
