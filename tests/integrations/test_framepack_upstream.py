# SPDX-License-Identifier: MIT
"""Upstream FramePack's own worker (demo_gradio.py and demo_gradio_f1.py of
../shared/upstream/FramePack-97fe5dbe, read from their source) run through rocmmem.framepack,
switched over by the documented one-line change of its import, on tiny modules and a faked GPU
(framepack_tiny.py and fakecuda.py say what is stood in), against a real rocmmemd.

After every memory call the worker makes, each model may hold on the GPU no more than
rocmmemd reserves for it; the models each step computes with are on the GPU when it runs;
the budget (12 GiB, with FramePack's own 6 and 8 GB of preserved memory) makes the daemon
evict the transformer for the VAE's decode and back, which the event thread carries out.

Needs PyTorch and the FramePack snapshot: without either it exits 77 (skipped), saying why.
"""
import importlib
import os
import unittest

import integ
from integ import IntegrationTestCase

REASON = integ.needs(integ.torch_missing(), integ.snapshot_missing(integ.UPSTREAM_FRAMEPACK))
if REASON is None:
    import numpy as np
    import torch

    import fakecuda
    fakecuda.install(16 << 30)
    import framepack_tiny
    import rocmmem.framepack

MODELS = ("text_encoder", "text_encoder_2", "vae", "image_encoder", "transformer")


@unittest.skipIf(REASON, REASON)
class Worker(IntegrationTestCase):
    def setUp(self):
        super().setUp()
        meminfo = os.path.join(self.dir, "meminfo")
        with open(meminfo, "w") as f:
            f.write("MemTotal: 67108864 kB\nMemAvailable: 67108864 kB\n")
        self.start_daemon(budget="12G", env=integ.clean_env(ROCMMEM_HOST_MEMINFO=meminfo))
        os.environ["ROCMMEM_FRAMEPACK_QUIET"] = "1"
        self.addCleanup(os.environ.pop, "ROCMMEM_FRAMEPACK_QUIET")
        self.addCleanup(self.fresh)
        self.fp = self.fresh()
        self.observer = rocmmem.connect(socket=self.sock, name="observer")
        self.addCleanup(self.observer.close)

    @staticmethod
    def fresh():
        """rocmmem.framepack as if just imported (the client of an earlier test closed)."""
        state = rocmmem.framepack._state
        if state:
            state.client.close()
        return importlib.reload(rocmmem.framepack)

    def declared(self):
        return {m["name"]: m["bytes"] for m in self.observer.status()["models"]
                if m["owner_pid"] == os.getpid()}

    def run_worker(self, demo):
        problems, calls, made = [], [], {}

        def wrap(name, fn):
            def call(*args, **kwargs):
                out = fn(*args, **kwargs)
                calls.append(name)
                if "ns" not in made:  # the demo's own start, before the models exist
                    return out
                declared = self.declared()
                for key in MODELS:
                    m = made["ns"][key]
                    real = sum(p.numel() * p.element_size() for p in m.parameters()
                               if fakecuda.on_device(p))
                    name_ = type(m).__name__.replace("DynamicSwap_", "")
                    if real > declared.get(name_, 0):
                        problems.append(f"after {name}: {name_} holds {real} bytes on the "
                                        f"GPU, {declared.get(name_, 0)} declared")
                return out
            return call

        worker, ns, compute = framepack_tiny.worker_namespace(demo, self.dir, wrap)
        made["ns"] = ns
        image = np.full((48, 64, 3), 128, dtype=np.uint8)
        # demo_gradio.py's defaults, but 2 s of video (2 sections) and 2 steps.
        worker(image, "a cat walks", "", 31337, 2, 9, 2, 1.0, 10.0, 0.0, 6, False, 16)
        self.assertEqual(ns["traceback"].printed, [])
        out = []
        while (item := ns["stream"].output_queue.pop()) is not None:
            out.append(item[0])
        return ns, compute, problems, calls, out

    def check(self, demo):
        ns, compute, problems, calls, out = self.run_worker(demo)
        self.assertEqual(problems, [])
        self.assertFalse(ns["high_vram"])
        self.assertEqual(out.count("file"), 2, out)
        self.assertEqual(out[-1], "end")
        self.assertEqual(len(compute.saved), 2)
        for step, share in compute.seen:
            self.assertEqual(share, 1.0, f"{step} ran with its model not on the GPU: "
                                         f"{compute.seen}")
        self.assertEqual({c for c in calls}, {
            "unload_complete_models", "fake_diffusers_current_device", "load_model_as_complete",
            "move_model_to_device_with_memory_preservation",
            "offload_model_from_device_for_memory_preservation", "get_cuda_free_memory_gb"})
        stats = self.fp.stats()
        # The VAE's decode with 8 GB preserved beside the transformer's 6: one of them goes.
        self.assertGreater(stats.get("evictions", 0), 0, stats)
        self.assertEqual(stats.get("revocations", 0), 0, stats)
        self.assertNotIn("plain_moves", stats)
        dsi = ns["DynamicSwapInstaller"]
        self.assertTrue(dsi.__module__ == "diffusers_helper.memory" and
                        importlib.import_module(dsi.__module__).__file__.startswith(
                            framepack_tiny.SNAPSHOT), "not FramePack's own DynamicSwapInstaller")
        self.assertEqual(ns["gpu"], torch.device("cuda", 0))

    def test_demo_gradio_worker(self):
        self.check("demo_gradio.py")

    def test_demo_gradio_f1_worker(self):
        self.check("demo_gradio_f1.py")


if __name__ == "__main__":
    integ.main(REASON)
