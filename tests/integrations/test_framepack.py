# SPDX-License-Identifier: MIT
"""rocmmem.framepack against a real rocmmemd: FramePack's loop in two processes at once, each
call on its own, and what it says where it cannot work.

FramePack is the stand-in of standins/: framepack_loop.py makes the memory calls of the
worker in lllyasviel/FramePack's demo_gradio.py (bf2771b5) on stand-in models whose weights
.to() moves between a "cpu" and a "gpu" list; diffusers_helper/memory.py reproduces the
signatures and plain behaviour of FramePack's diffusers_helper/memory.py (789d43b8). (FramePack's
own worker runs in test_framepack_upstream.py.) These tests run with and without PyTorch: with
Debian's CPU-only one, this process and the loops fake a GPU for it (fakecuda.py), so that
rocmmem.framepack sees a GPU as it would under FramePack; WithoutAGPU checks what it says
where there is none.
"""
import ast
import contextlib
import importlib
import io
import inspect
import json
import os
import textwrap
import threading
import unittest

import integ
from integ import MiB, IntegrationTestCase, child_env, poll_until, rocmmemctl_bin

NO_TORCH = integ.torch_missing()
if NO_TORCH is None:
    import torch

    import fakecuda
    fakecuda.install()

import diffusers_helper.memory as framepack_memory  # noqa: E402 (the stand-in)
import framepack_models as fm  # noqa: E402
import rocmmem  # noqa: E402
import rocmmem.framepack  # noqa: E402

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
        # As FramePack has them: torch devices, or strings where there is no torch.
        if NO_TORCH:
            self.assertEqual((self.fp.cpu, self.fp.gpu), ("cpu", "cuda:0"))
        else:
            self.assertEqual((self.fp.cpu, self.fp.gpu),
                             (torch.device("cpu"), torch.device("cuda", 0)))
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

    def test_load_line_shows_the_books(self):
        # The line a load prints says what rocmmemd's books hold of this process: on the host
        # backend, what it declared and that nothing measures what it holds.
        os.environ.pop("ROCMMEM_FRAMEPACK_QUIET")
        self.addCleanup(os.environ.__setitem__, "ROCMMEM_FRAMEPACK_QUIET", "1")
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            self.fp.load_model_as_complete(fm.AutoencoderKLHunyuanVideo(4 * MiB),
                                           target_device=self.fp.gpu)
        self.assertRegex(out.getvalue(),
                         r"(?m)^rocmmem.framepack: loaded AutoencoderKLHunyuanVideo to \S+ "
                         r"\(4 MiB\); the process declared 4 MiB; rocmmemd cannot measure a "
                         r"process's GPU "
                         r"memory here \(host memory\)$")

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


@unittest.skipIf(integ.snapshot_missing(integ.UPSTREAM_FRAMEPACK),
                 integ.snapshot_missing(integ.UPSTREAM_FRAMEPACK))
class UpstreamSignatures(unittest.TestCase):
    def test_every_name_of_framepacks_memory_module(self):
        # Read from FramePack's own diffusers_helper/memory.py (its source: importing it needs
        # a GPU PyTorch) and demo_gradio.py's import line.
        path = os.path.join(integ.UPSTREAM_FRAMEPACK, "diffusers_helper", "memory.py")
        with open(path) as f:
            tree = ast.parse(f.read())
        defs = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
        for name in FUNCTIONS:
            theirs = ast.unparse(defs[name].args).replace(": torch.nn.Module", "").replace(
                ": torch.device", "")
            self.assertEqual(str(inspect.signature(getattr(rocmmem.framepack, name)))[1:-1],
                             theirs, name)
        with open(os.path.join(integ.UPSTREAM_FRAMEPACK, "demo_gradio.py")) as f:
            line = next(n for n in ast.parse(f.read()).body if isinstance(n, ast.ImportFrom)
                        and n.module == "diffusers_helper.memory")
        self.assertEqual(len(line.names), 9)
        for alias in line.names:
            self.assertIn(alias.name, rocmmem.framepack.__all__)


# Run where PyTorch has no GPU (no fake): prints what each name says, as JSON.
NO_GPU = textwrap.dedent("""
    import json, sys
    out = {}
    try:
        from rocmmem.framepack import gpu
    except ImportError as e:
        out["gpu"] = f"{type(e).__name__}: {e}"
    try:
        from rocmmem.framepack import DynamicSwapInstaller
    except ImportError as e:
        out["dsi"] = f"{type(e).__name__}: {e}"
    import torch, rocmmem, rocmmem.framepack as fp
    try:
        fp.load_model_as_complete(torch.nn.Linear(4, 4), "cuda:0")
    except fp.GPUUnavailable as e:
        out["load"] = str(e)
    try:
        out["free"] = fp.get_cuda_free_memory_gb("cuda:0")
    except fp.GPUUnavailable as e:
        out["free"] = str(e)
    out["cpu"] = str(fp.cpu)
    c = fp.client()
    out["models"] = len(c.status()["models"]) if c else None
    print(json.dumps(out))
""")


@unittest.skipIf(NO_TORCH, NO_TORCH)
class WithoutAGPU(IntegrationTestCase):
    """A PyTorch without a GPU (Debian's, not faked here): every name that cannot work says
    why, before anything is reserved."""

    def run_child(self, framepack, sock):
        # framepack: FramePack's folder first on the path, as when it runs from there. Not the
        # stand-ins: their diffusers_helper would stand in for FramePack's absent one.
        path = ((framepack,) if framepack else ()) + (integ.PACKAGE,)
        env = child_env(sock, pythonpath=path, ROCMMEM_FRAMEPACK_QUIET="1")
        r = integ.run([integ.PYTHON, "-c", NO_GPU], env=env, timeout=30)
        self.assertEqual(r.rc, 0, r)
        return json.loads(r.stdout.splitlines()[-1])

    def test_each_name_says_why(self):
        self.start_daemon()
        framepack = integ.UPSTREAM_FRAMEPACK if os.path.isdir(integ.UPSTREAM_FRAMEPACK) \
            else None
        out = self.run_child(framepack, self.sock)
        built = r"this PyTorch \(\S+\) is built for the CPU only: it has neither CUDA nor HIP"
        self.assertRegex(out["gpu"], r"^GPUUnavailable: rocmmem.framepack.gpu: " + built)
        self.assertRegex(out["dsi"], r"^GPUUnavailable: rocmmem.framepack.DynamicSwapInstaller "
                                     r"is FramePack's own, from diffusers_helper.memory, which "
                                     r"cannot be imported here: ")
        if framepack is not None:  # FramePack's own module, which fails at import without a GPU
            self.assertIn("AssertionError: Torch not compiled with CUDA enabled; ", out["dsi"])
        else:  # no snapshot: run outside FramePack's folder, which the message points to
            self.assertIn("ModuleNotFoundError: No module named 'diffusers_helper' (run "
                          "FramePack from its own folder, where diffusers_helper is)", out["dsi"])
        self.assertRegex(out["load"], r"^cannot move Linear to a GPU: " + built)
        self.assertEqual(out["models"], 0)  # nothing was reserved for it
        self.assertEqual(out["cpu"], "cpu")
        self.assertIsInstance(out["free"], float)  # the daemon's answer needs no GPU torch

    def test_without_a_daemon_free_memory_says_why(self):
        out = self.run_child(None, os.path.join(self.dir, "nothing.sock"))
        self.assertRegex(out["free"], r"^get_cuda_free_memory_gb: no rocmmemd to ask, and this "
                                      r"PyTorch \(\S+\) is built for the CPU only")
        self.assertIsNone(out["models"])
        self.assertIn("ModuleNotFoundError: No module named 'diffusers_helper' (run FramePack "
                      "from its own folder, where diffusers_helper is)", out["dsi"])


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
    integ.main()
