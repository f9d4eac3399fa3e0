# SPDX-License-Identifier: MIT
"""rocmmem.framepack against a real rocmmemd: FramePack's loop in two processes at once, and
each call on its own.

FramePack is the stand-in of standins/: framepack_loop.py makes the memory calls of the
worker in lllyasviel/FramePack's demo_gradio.py (bf2771b5) on stand-in models whose weights
.to() moves between a "cpu" and a "gpu" list; diffusers_helper/memory.py reproduces the
signatures and plain behaviour of FramePack's diffusers_helper/memory.py (789d43b8).
"""
import importlib
import inspect
import json
import os
import threading
import unittest

import integ
from integ import MiB, IntegrationTestCase, child_env, poll_until, rocmmemctl_bin

import diffusers_helper.memory as framepack_memory
import framepack_models as fm
import rocmmem
import rocmmem.framepack

LOOP = os.path.join(integ.STANDINS, "framepack_loop.py")
FUNCTIONS = ("load_model_as_complete", "unload_complete_models",
             "move_model_to_device_with_memory_preservation",
             "offload_model_from_device_for_memory_preservation", "get_cuda_free_memory_gb",
             "fake_diffusers_current_device")
GB = 1 / 1024  # the loop's and these tests' GB: the stand-ins' MiB
JOBS, SECTIONS = 2, 3
STEPS = JOBS * (3 + 2 * SECTIONS)


def fresh_framepack():
    """rocmmem.framepack as if just imported (the state of earlier tests closed)."""
    state = rocmmem.framepack._state
    if state:
        state.client.close()
    return importlib.reload(rocmmem.framepack)


class FramePackLoop(IntegrationTestCase):
    def loop(self, name, *args, env=None):
        env = env or child_env(self.sock, ROCMMEM_FRAMEPACK_QUIET="1")
        return self.background([integ.PYTHON, LOOP, "--jobs", str(JOBS), "--sections",
                                str(SECTIONS), *args], name, env=env)

    def result(self, proc):
        rc = proc.wait(30)
        self.assertEqual(rc, 0, proc)
        return json.loads(proc.stdout().splitlines()[-1])

    def test_two_processes_on_a_budget_for_one_large_model(self):
        # 40 MiB: one transformer (24) with its 6 preserved, but never two; the transformer
        # and the VAE never together.
        self.start_daemon(budget="40M", extra=["--exclusive", "transformer,vae",
                                               "--evict-deadline", "5"])
        observer = rocmmem.connect(socket=self.sock, name="monitor")
        self.addCleanup(observer.close)
        stop = threading.Event()
        seen = {"samples": 0, "problems": [], "pids": set(), "most": 0}

        def monitor():
            while not stop.is_set():
                st = observer.status()
                d = st["devices"][0]
                held = d["leased_bytes"] + d["reserved_bytes"]
                seen["most"] = max(seen["most"], held)
                if held > d["budget_bytes"] or d["free_bytes"] < 0:
                    seen["problems"].append(f"over the budget: {d}")
                resident = {m["class"] for m in st["models"] if m["bytes"] > 0}
                if {"transformer", "vae"} <= resident:
                    seen["problems"].append(f"transformer beside a vae: {st['models']}")
                seen["pids"] |= {m["owner_pid"] for m in st["models"]}
                seen["samples"] += 1
                stop.wait(0.005)

        t = threading.Thread(target=monitor)
        t.start()
        try:
            a = self.loop("framepack-a", "--exclusive")
            b = self.loop("framepack-b", "--exclusive")
            results = [self.result(a), self.result(b)]
        finally:
            stop.set()
            t.join()
        for r in results:
            self.assertEqual(r["failures"], [], r)
            self.assertEqual(r["violations"], [], r)
            self.assertEqual(len(r["steps"]), STEPS, r)
            stats = r["stats"]
            self.assertNotIn("plain_moves", stats, r)
            self.assertEqual(stats.get("revocations", 0), 0, r)
            for model, (arrivals, departures) in r["moves"].items():
                evicted = stats.get("evicted:" + r["names"][model], 0)
                # A model leaves the GPU only when the daemon has it evicted, and comes back
                # only after it left.
                self.assertEqual(departures, evicted, (model, r))
                self.assertGreaterEqual(arrivals, 1, (model, r))
                self.assertLessEqual(arrivals, departures + 1, (model, r))
            # The two processes competed: each had the other's (or its own) models evicted.
            self.assertGreater(stats["evictions"], 0, r)
        self.assertEqual(seen["problems"], [])
        self.assertGreater(seen["samples"], 10)
        self.assertEqual(seen["pids"], {a.pid, b.pid})
        self.assertGreater(seen["most"], 30 * MiB)  # the budget was used, not just split
        st = self.status()
        self.assertEqual(st["counters"]["revocations"], 0)
        self.assertEqual(st["counters"]["timeouts"], 0)
        self.assertEqual(st["models"], [])

    def test_without_daemon_it_moves_as_framepack_does(self):
        missing = child_env(self.sock, ROCMMEM_FRAMEPACK_QUIET="1")  # nothing listens there
        through = self.result(self.loop("no-daemon", env=missing))
        plain = self.result(self.loop("plain", "--memory", "plain", env=missing))
        self.assertEqual(through["failures"], [])
        self.assertEqual(len(through["steps"]), STEPS)
        self.assertEqual(through["moves"], plain["moves"])
        self.assertGreater(through["stats"]["plain_moves"], 0)
        self.assertNotIn("evictions", through["stats"])
        # FramePack unloads after every use: the VAE goes back and forth each time.
        self.assertEqual(plain["moves"]["vae"], [JOBS * (1 + SECTIONS)] * 2)


class Calls(IntegrationTestCase):
    """Each call in this process, with the module fresh for each test."""

    budget = "40M"

    def setUp(self):
        super().setUp()
        self.daemon = self.start_daemon(budget=self.budget,
                                        extra=["--shutdown-timeout", "0.2"])
        self.addCleanup(fresh_framepack)  # closes the client before the daemon stops
        self.fp = fresh_framepack()
        os.environ["ROCMMEM_FRAMEPACK_QUIET"] = "1"
        self.addCleanup(os.environ.pop, "ROCMMEM_FRAMEPACK_QUIET")

    def states(self):
        return {n: (m["state"], m["bytes"]) for n, m in self.models_by_name().items()}

    def test_same_names_and_signatures_as_framepack(self):
        for name in FUNCTIONS:
            self.assertEqual(inspect.signature(getattr(self.fp, name)),
                             inspect.signature(getattr(framepack_memory, name)), name)
        # As FramePack has them (strings here, where there is no torch).
        self.assertEqual((self.fp.cpu, self.fp.gpu), ("cpu", "cuda:0"))
        self.assertIsInstance(self.fp.gpu_complete_modules, list)
        self.assertIs(self.fp.DynamicSwapInstaller, framepack_memory.DynamicSwapInstaller)
        from rocmmem.framepack import cpu, gpu, DynamicSwapInstaller  # noqa: F401

    def test_unload_keeps_models_until_the_room_is_needed(self):
        vae, encoder = fm.AutoencoderKLHunyuanVideo(4 * MiB), fm.SiglipVisionModel(2 * MiB)
        self.fp.load_model_as_complete(vae, target_device=self.fp.gpu)
        self.assertTrue(vae.fully_loaded())
        self.assertEqual(self.states(), {"AutoencoderKLHunyuanVideo": ("in_use", 4 * MiB)})
        got = self.models_by_name()["AutoencoderKLHunyuanVideo"]
        self.assertEqual((got["class"], got["priority"]), ("vae", 1))
        self.fp.load_model_as_complete(encoder, target_device=self.fp.gpu)
        self.assertEqual(self.states(), {"AutoencoderKLHunyuanVideo": ("idle", 4 * MiB),
                                         "SiglipVisionModel": ("in_use", 2 * MiB)})
        self.assertEqual(self.fp.gpu_complete_modules, [encoder])
        self.fp.unload_complete_models()
        self.assertEqual({s for s, _ in self.states().values()}, {"idle"})
        self.assertTrue(vae.fully_loaded() and encoder.fully_loaded())
        self.assertEqual((vae.arrivals, vae.departures), (1, 0))
        # Another process needs the room: the event thread moves both out (this thread only
        # waits for rocmmemctl meanwhile), the image encoder first (priority 0 below the
        # VAE's 1), for 36 MiB.
        r = integ.run([rocmmemctl_bin(), "--socket", self.sock, "lease", "36M", "--timeout",
                       "10", "--hold", "0"])
        self.assertEqual(r.rc, 0, r)
        self.assertEqual((encoder.arrivals, encoder.departures), (1, 1))
        self.assertEqual((vae.arrivals, vae.departures), (1, 0))
        r = integ.run([rocmmemctl_bin(), "--socket", self.sock, "lease", "40M", "--timeout",
                       "10", "--hold", "0"])
        self.assertEqual(r.rc, 0, r)
        self.assertEqual((vae.arrivals, vae.departures), (1, 1))
        self.assertEqual(vae.loaded_bytes(), 0)
        self.assertEqual(self.states(), {"AutoencoderKLHunyuanVideo": ("evicted", 0),
                                         "SiglipVisionModel": ("evicted", 0)})
        self.assertEqual(self.fp.stats()["evicted:AutoencoderKLHunyuanVideo"], 1)
        self.assertEqual(self.fp.stats()["evictions"], 2)
        self.fp.load_model_as_complete(vae, target_device=self.fp.gpu)
        self.assertEqual((vae.arrivals, vae.departures), (2, 1))

    def test_preserved_memory_is_reserved_with_its_model(self):
        transformer = fm.HunyuanVideoTransformer3DModelPacked(24 * MiB)
        vae = fm.AutoencoderKLHunyuanVideo(4 * MiB)
        name = "HunyuanVideoTransformer3DModelPacked"
        self.fp.move_model_to_device_with_memory_preservation(transformer, self.fp.gpu,
                                                              preserved_memory_gb=6 * GB)
        self.assertTrue(transformer.fully_loaded())
        self.assertEqual(self.states(), {name: ("in_use", 30 * MiB)})
        self.assertEqual(self.models_by_name()[name]["class"], "transformer")
        self.fp.offload_model_from_device_for_memory_preservation(transformer, self.fp.gpu,
                                                                  preserved_memory_gb=8 * GB)
        self.assertEqual(self.states(), {name: ("idle", 30 * MiB)})
        self.assertTrue(transformer.fully_loaded())
        # The VAE comes with the 8 preserved for its decode: 12 + 30 > 40, so the daemon has
        # the idle transformer evicted first.
        self.fp.load_model_as_complete(vae, self.fp.gpu)
        self.assertEqual(self.states(), {name: ("evicted", 0),
                                         "AutoencoderKLHunyuanVideo": ("in_use", 12 * MiB)})
        self.assertEqual(transformer.loaded_bytes(), 0)
        self.fp.unload_complete_models()
        # The next section: the transformer again, with its preserved memory; the VAE, idle,
        # makes room.
        self.fp.move_model_to_device_with_memory_preservation(transformer, self.fp.gpu,
                                                              preserved_memory_gb=6 * GB)
        self.assertEqual(self.states(), {name: ("in_use", 30 * MiB),
                                         "AutoencoderKLHunyuanVideo": ("evicted", 0)})

    def test_fake_current_device_reserves_one_layer(self):
        encoder = fm.LlamaModel(16 * MiB)  # 8 layers of 2 MiB
        self.fp.fake_diffusers_current_device(encoder, self.fp.gpu)
        self.assertEqual(encoder.loaded_bytes(), 2 * MiB)
        self.assertEqual(self.states(), {"LlamaModel": ("idle", 2 * MiB)})
        self.assertEqual(self.models_by_name()["LlamaModel"]["class"], "text_encoder")

    def test_get_cuda_free_memory_gb_counts_what_eviction_would_free(self):
        vae = fm.AutoencoderKLHunyuanVideo(4 * MiB)
        self.fp.load_model_as_complete(vae, self.fp.gpu)
        self.assertEqual(self.fp.get_cuda_free_memory_gb(), 36 * GB)
        self.fp.unload_complete_models()
        self.assertEqual(self.fp.get_cuda_free_memory_gb(self.fp.gpu), 40 * GB)
        self.assertEqual(self.fp.get_cuda_free_memory_gb("cuda:0"),
                         self.status()["devices"][0]["largest_with_eviction_bytes"] / (1 << 30))

    def test_register_overrides_the_guess(self):
        model = fm.StandinModel(2 * MiB, nlayers=1)
        self.fp.register(model, name="upscaler", model_class="other", priority=5)
        self.fp.load_model_as_complete(model, self.fp.gpu)
        got = self.models_by_name()["upscaler"]
        self.assertEqual((got["class"], got["priority"], got["bytes"]), ("other", 5, 2 * MiB))

    def test_cpu_target_is_a_plain_move(self):
        vae = fm.AutoencoderKLHunyuanVideo(4 * MiB)
        self.fp.load_model_as_complete(vae, self.fp.cpu)
        self.assertEqual(self.states(), {})
        self.assertEqual(vae.loaded_bytes(), 0)

    def test_daemon_going_away(self):
        vae, encoder = fm.AutoencoderKLHunyuanVideo(4 * MiB), fm.SiglipVisionModel(2 * MiB)
        self.fp.load_model_as_complete(vae, self.fp.gpu)
        self.fp.load_model_as_complete(encoder, self.fp.gpu)  # the VAE idle, still loaded
        client = self.fp.client()
        self.daemon.stop()
        poll_until(lambda: not client.available, 10, what="the client to notice")
        # What the daemon would have evicted goes now; from here on, FramePack's own moves.
        self.fp.unload_complete_models()
        self.assertEqual(vae.loaded_bytes(), 0)
        self.assertEqual(encoder.loaded_bytes(), 0)
        self.fp.load_model_as_complete(vae, self.fp.gpu)
        self.assertTrue(vae.fully_loaded())
        self.assertGreater(self.fp.stats()["plain_moves"], 0)


class LargerThanTheBudget(IntegrationTestCase):
    def setUp(self):
        super().setUp()
        self.start_daemon(budget="32M")
        self.addCleanup(fresh_framepack)
        self.fp = fresh_framepack()
        os.environ["ROCMMEM_FRAMEPACK_QUIET"] = "1"
        self.addCleanup(os.environ.pop, "ROCMMEM_FRAMEPACK_QUIET")

    def test_partial_move(self):
        # 40 MiB in 8 layers of 5 on a 32 MiB budget, 6 preserved: the layers that fit in 26
        # go to the GPU (FramePack's DynamicSwapInstaller brings the others in on the fly).
        transformer = fm.HunyuanVideoTransformer3DModelPacked(40 * MiB)
        self.fp.move_model_to_device_with_memory_preservation(transformer, self.fp.gpu,
                                                              preserved_memory_gb=6 * GB)
        self.assertEqual(transformer.loaded_bytes(), 25 * MiB)
        got = self.models_by_name()["HunyuanVideoTransformer3DModelPacked"]
        self.assertEqual((got["state"], got["bytes"]), ("in_use", 32 * MiB))
        with self.assertRaises(rocmmem.TooLarge):
            self.fp.load_model_as_complete(transformer, self.fp.gpu)


if __name__ == "__main__":
    unittest.main()
