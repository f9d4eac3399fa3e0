# SPDX-License-Identifier: MIT
"""The ComfyUI node package (integrations/comfyui/rocmmem_comfyui) against a real rocmmemd and
upstream ComfyUI: real prompts of upstream's nodes run through upstream's model management and
executor (comfy_upstream.py says what is faked: the GPU, the packages Debian lacks, the tiny
models), with the hooks installed in this process, as in ComfyUI's. Other processes (Python
children, rocmmemctl) make the requests that compete for ComfyUI's memory.

The books: after every load (during the step) and after every node, rocmmemd's reservations for
this ComfyUI must equal what ComfyUI itself counts as loaded, plus the working memory the step
asked for, plus what a free_memory outside load_models_gpu asked for; and what the faked GPU
really holds must not exceed them.

Needs PyTorch (Debian's python3-torch) and ../shared/upstream/ComfyUI-a125cd84: without either
it exits 77 (skipped), saying which is missing.
"""
import logging
import os
import sys
import time
import unittest

import integ
from integ import MiB, IntegrationTestCase, round_up

import comfy_upstream as cu

REASON = cu.missing()
if REASON is None:
    import fakecuda
    import rocmmem

    C = cu.load()
    # Importing the node package installs the hooks, as in ComfyUI: not here, where each test
    # installs them against its own daemon (and a machine's own rocmmemd must not be used).
    os.environ["ROCMMEM_COMFYUI"] = "0"
    from rocmmem_comfyui import NODE_CLASS_MAPPINGS, books, hooks, report
    del os.environ["ROCMMEM_COMFYUI"]
    # The status node, as ComfyUI would have it from the package (the package itself is loaded
    # through ComfyUI's loader in test_comfyui_node.py).
    C.nodes.NODE_CLASS_MAPPINGS.update(NODE_CLASS_MAPPINGS)

GiB = 1 << 30
# A process that asks rocmmemd for nbytes (a model's reservation: no memory is allocated).
ASK = """
import rocmmem, sys, time
c = rocmmem.connect(socket=sys.argv[1], name=sys.argv[4])
m = c.register_model(sys.argv[4], size=int(sys.argv[2]))
print("asking", flush=True)
m.acquire(timeout=float(sys.argv[3]))
print("granted", time.monotonic(), flush=True)
m.release(); m.unregister(); c.close()
print("done", flush=True)
"""
# Holds all but 1 GiB, says so, waits until rocmmemd has a request queued behind it, asks for
# nearly 1 GiB more, then lets go of everything.
GREEDY = """
import rocmmem, sys, time
c = rocmmem.connect(socket=sys.argv[1], name="greedy")
first = c.register_model("first", size=int(sys.argv[2])).acquire()
print("holding", flush=True)
deadline = time.monotonic() + 10
while not c.status()["queue"] and time.monotonic() < deadline:
    time.sleep(0.01)
more = c.register_model("more", size=int(sys.argv[3])).acquire(timeout=20)
more.release(); first.release(); c.close()
print("done", flush=True)
"""


class Steps:
    """Outer wrappers (around the hooks') of load_models_gpu, free_memory and execution's
    per-node execute that compare the books with ComfyUI's own counts at each point."""

    def __init__(self, case):
        self.case = case
        self.points = []  # (what, books, expected, really on the faked GPU)
        self.working = 0
        self.direct = 0
        self.depth = 0
        self.ended = {}  # node id -> time.monotonic() when it ended
        mm, ex = C.mm, C.execution
        self.saved = [(mm, "load_models_gpu", mm.load_models_gpu),
                      (mm, "free_memory", mm.free_memory), (ex, "execute", ex.execute)]
        load, free, node = (x[2] for x in self.saved)
        floor = mm.minimum_inference_memory() - mm.extra_reserved_memory()

        def load_models_gpu(models, *args, **kwargs):
            self.depth += 1
            try:
                out = load(models, *args, **kwargs)
            finally:
                self.depth -= 1
            self.working = max(int(kwargs.get("memory_required", args[0] if args else 0)),
                               floor)
            self.check("load " + ", ".join(type(m.model).__name__ for m in models))
            return out

        def free_memory(memory_required, device, *args, **kwargs):
            out = free(memory_required, device, *args, **kwargs)
            if self.depth == 0:
                big = memory_required >= case.budget_bytes
                self.direct = 0 if big else int(memory_required)
                self.check(f"free_memory({int(min(memory_required, 1 << 62))})")
            return out

        async def execute(*args, **kwargs):
            out = await node(*args, **kwargs)
            self.working = 0
            self.ended[args[3]] = time.monotonic()
            self.check(f"after node {args[3]}")
            return out

        mm.load_models_gpu, mm.free_memory, ex.execute = load_models_gpu, free_memory, execute
        case.addCleanup(self.restore)

    def restore(self):
        for owner, name, fn in self.saved:
            setattr(owner, name, fn)

    def check(self, what):
        expected = sum(round_up(n) for n in C.loaded_on_gpu().values()) + \
            round_up(self.working) + round_up(self.direct)
        self.points.append((what, self.case.books(), expected, fakecuda.allocated()))


class ComfyTestCase(IntegrationTestCase):
    budget = "8G"
    budget_bytes = 8 * GiB
    extra = ()

    def setUp(self):
        super().setUp()
        C.reset()
        report._said.clear()
        self.addCleanup(C.reset)
        self.meminfo = os.path.join(self.dir, "meminfo")
        with open(self.meminfo, "w") as f:  # a host with room for the budget, whatever this is
            f.write("MemTotal: 67108864 kB\nMemAvailable: 67108864 kB\n")

    def start(self, install=True, sock=None, extra=None):
        d = self.start_daemon(sock=sock, budget=self.budget,
                              extra=self.extra if extra is None else extra,
                              env=integ.clean_env(ROCMMEM_HOST_MEMINFO=self.meminfo))
        self.addCleanup(hooks.uninstall)  # before the daemon stops: it waits for its clients
        if install:
            self.assertTrue(hooks.install())
        self.observer = rocmmem.connect(socket=sock or self.sock, name="observer")
        self.addCleanup(self.observer.close)
        return d

    def books(self):
        """What rocmmemd reserves and leases for this process's ComfyUI client."""
        st = self.observer.status()
        return sum(c["reserved_bytes"] + c["leased_bytes"] for c in st["clients"]
                   if c["pid"] == os.getpid() and c["name"] == "ComfyUI")

    def ask(self, nbytes, name="asker", timeout=30):
        return self.background([integ.PYTHON, "-c", ASK, self.sock, str(nbytes), str(timeout),
                                name], name, env=integ.child_env(self.sock))


@unittest.skipIf(REASON, REASON)
class Books(ComfyTestCase):
    def test_books_equal_comfyuis_counts_at_every_step(self):
        self.start()
        steps = Steps(self)
        out = C.run(cu.txt2img(), ["out"])
        self.assertEqual(out.history_result["outputs"]["out"]["shape"], [[1, 64, 64, 3]])
        whats = [p[0] for p in steps.points]
        for what in ("load TinyClipTextModel", "load BaseModel", "load AutoencoderKL",
                     "after node sample", "after node decode", "after node upscale"):
            self.assertIn(what, whats)
        for what, got, expected, real in steps.points:
            self.assertEqual(got, expected, f"{what}: {steps.points}")
            self.assertLessEqual(real, got, f"{what}: the faked GPU holds more than declared")
        # The sampler asked for more than ComfyUI's floor for a step: its own working memory
        # was reserved (the others, the floor).
        floor = C.mm.minimum_inference_memory() - C.mm.extra_reserved_memory()
        point = next(p for p in steps.points if p[0] == "load BaseModel")
        weights = sum(round_up(n) for n in C.loaded_on_gpu().values())
        self.assertGreater(point[1] - weights, round_up(floor), steps.points)
        # After the prompt: ComfyUI's loaded models, nothing more.
        self.assertEqual(self.books(), sum(round_up(n) for n in C.loaded_on_gpu().values()))
        self.assertEqual(sorted(C.loaded_on_gpu()),
                         ["AutoencoderKL", "BaseModel", "TinyClipTextModel"])

    def test_upscale_model_is_accounted(self):
        self.start()
        steps = Steps(self)
        C.run(cu.txt2img(), ["out"])
        free = [p for p in steps.points if p[0].startswith("free_memory(")]
        self.assertEqual(len(free), 1, steps.points)
        asked = int(free[0][0][len("free_memory("):-1])
        loaded = sum(round_up(n) for n in C.loaded_on_gpu().values())
        # Reserved from the free_memory call through the upscale, as the node loads its model
        # with .to(device), not through load_models_gpu; given back at the end of the prompt.
        self.assertGreaterEqual(free[0][1], round_up(asked))
        after = next(p for p in steps.points if p[0] == "after node upscale")
        self.assertEqual(after[1], loaded + round_up(asked))
        self.assertEqual(self.books(), loaded)
        names = {m["name"] for m in self.observer.status()["models"]}
        self.assertNotIn(books.DIRECT, names)

    def test_a_second_process_waits_for_the_working_memory(self):
        # Mid-sampling, another process asks for everything free and evictable plus half of
        # ComfyUI's working memory: it must wait until the sampler's node has ended.
        self.start()
        steps = Steps(self)
        seen = {}

        def probe():
            # All but what ComfyUI uses now, as it counts it: its UNet and half of the
            # working memory it asked for.
            working = steps.working
            seen["working"] = working
            ask = self.budget_bytes - round_up(C.loaded_on_gpu()["BaseModel"]) - \
                round_up(working // 2)
            seen["asker"] = asker = self.ask(ask)
            asker.wait_stdout("^asking$", 10)
            integ.poll_until(lambda: any(w["owner_pid"] == asker.pid
                                         for w in self.observer.status()["queue"]),
                             10, what="the asker waiting")
            seen["queued_during_sampling"] = "granted" not in asker.stdout()

        C.test_nodes.MID_SAMPLING.append(probe)
        self.addCleanup(C.test_nodes.MID_SAMPLING.clear)
        C.test_nodes.EVALUATIONS.clear()
        C.run(cu.txt2img(upscale=False, mid_sampling=True), ["out"])
        self.assertTrue(seen.get("queued_during_sampling"), seen)
        self.assertGreater(seen["working"], 0)
        asker = seen["asker"]
        m = asker.wait_stdout(r"^granted (\S+)$", 30)
        self.assertGreater(float(m.group(1)), C.test_nodes.EVALUATIONS[-1],
                           "the asker was granted while ComfyUI sampled")
        self.assertEqual(asker.proc.wait(10), 0, asker.stderr())

    def test_log_lines_say_declared_and_real(self):
        self.start()
        with self.assertLogs("rocmmem.comfyui", logging.INFO) as logs:
            C.run(cu.txt2img(upscale=False), ["out"])
        lines = [x for x in logs.output if "for this step" in x]
        sampler = next(x for x in lines if "BaseModel" in x)
        self.assertRegex(sampler, r"^INFO:rocmmem.comfyui:rocmmem: device 0: declared \S+ \S+ "
                                  r"for this step: BaseModel \(transformer\) \S+ \S+ \(loaded "
                                  r"\S+ \S+\), working memory \S+ \S+; PyTorch: \S+ \S+ "
                                  r"allocated; the process declared \S+ \S+; rocmmemd cannot "
                                  r"measure a process's GPU memory here \(host memory\)$")

    def test_status_node_shows_declared_and_real_per_model(self):
        self.start()
        C.run(cu.txt2img(upscale=False), ["out"])
        out = C.run({"status": {"class_type": "RocmmemStatus", "inputs": {}}}, ["status"],
                    prompt_id="status")
        text = out.history_result["outputs"]["status"]["text"][0]
        lines = text.splitlines()
        self.assertIn(f"this ComfyUI (pid {os.getpid()}), device 0:", lines)
        loaded = C.loaded_on_gpu()
        for name, cls in (("BaseModel", "transformer"), ("AutoencoderKL", "vae"),
                          ("TinyClipTextModel", "text_encoder")):
            row = next(x for x in lines if x.startswith(f"  {name} ({cls})"))
            self.assertIn(report.size(round_up(loaded[name])), row)  # declared, as rocmmemd has it
            self.assertIn(report.size(loaded[name]), row)  # real, as ComfyUI counts it
            self.assertTrue(row.endswith("idle"), row)
        self.assertRegex(text, r"(?m)^  PyTorch on this device: \S+ \S+ allocated, \S+ \S+ held "
                               r"by its cache$")
        self.assertIn("  measured: rocmmemd cannot measure a process's GPU memory on its host "
                      "backend", lines)

    def test_dynamic_model_reserves_its_full_size(self):
        # ComfyUI's DynamicVRAM (2026) pages weights in while sampling: loaded_size() says what
        # is resident now (here: nothing, after the load). The reservation is the full size.
        class ModelPatcherDynamic(C.model_patcher.ModelPatcher):
            def loaded_size(self):
                return 0

        self.start()
        unet = C.test_nodes.tiny_unet()
        dynamic = ModelPatcherDynamic(unet.model, unet.load_device, unet.offload_device)
        size = dynamic.model_size()
        with self.assertLogs("rocmmem.comfyui", logging.INFO) as logs:
            C.mm.load_models_gpu([dynamic])
        self.assertIn("INFO:rocmmem.comfyui:rocmmem: ComfyUI manages BaseModel dynamically "
                      "(DynamicVRAM): its full size stays reserved while it is loaded",
                      logs.output)
        self.assertEqual(C.loaded_on_gpu(), {"BaseModel": 0})
        floor = C.mm.minimum_inference_memory() - C.mm.extra_reserved_memory()
        self.assertEqual(self.books(), round_up(size) + round_up(floor))
        hooks.installed().prompt_done()
        self.assertEqual(self.books(), round_up(size))  # idle, still loaded: still its size
        C.mm.unload_all_models()
        self.assertEqual(self.books(), 0)

    def test_partial_load_reserves_what_is_loaded(self):
        # A GPU smaller than the model: ComfyUI loads part of it (low VRAM).
        fakecuda.install(256 * MiB)
        self.start()
        big = C.test_nodes.big_model(160 * MiB)
        C.mm.load_models_gpu([big])
        loaded = C.loaded_on_gpu()["BigModel"]
        self.assertTrue(0 < loaded < big.model_size(), loaded)
        floor = C.mm.minimum_inference_memory() - C.mm.extra_reserved_memory()
        self.assertEqual(self.books(), round_up(loaded) + round_up(floor))
        self.assertLessEqual(fakecuda.allocated(), self.books())
        hooks.installed().prompt_done()
        self.assertEqual(self.books(), round_up(loaded))


@unittest.skipIf(REASON, REASON)
class Hooks(ComfyTestCase):
    def test_wrapped_and_restored(self):
        originals = {name: getattr(C.mm, name) for name in hooks.HOOKED}
        executes = (C.execution.PromptExecutor.execute, C.execution.execute)
        self.start()
        for name in hooks.HOOKED:
            self.assertIs(getattr(C.mm, name).__rocmmem_original__, originals[name])
        self.assertIs(C.execution.PromptExecutor.execute.__rocmmem_original__, executes[0])
        self.assertIs(C.execution.execute.__rocmmem_original__, executes[1])
        hooks.uninstall()
        for name in hooks.HOOKED:
            self.assertIs(getattr(C.mm, name), originals[name])
        self.assertEqual((C.execution.PromptExecutor.execute, C.execution.execute), executes)
        # Its connection is closed; the daemon forgets it when it next reads that socket
        # (which a busy machine may put after the observer's request): looked for until then.
        deadline = time.monotonic() + 60
        names = [c["name"] for c in self.observer.status()["clients"]]
        while names != ["observer"] and time.monotonic() < deadline:
            time.sleep(0.01)
            names = [c["name"] for c in self.observer.status()["clients"]]
        self.assertEqual(names, ["observer"])

    def test_evict_request_unloads_through_comfyuis_path(self):
        self.start()
        C.run(cu.txt2img(upscale=False), ["out"])
        idle = {m["name"]: m for m in self.observer.status()["models"]}
        self.assertEqual({m["state"] for m in idle.values()}, {"idle"})
        before = fakecuda.allocated()
        # Everything but one model's granule: the daemon has the two least recently used
        # models (the text encoder, then the UNet) evicted, and ComfyUI unloads them on the
        # client's event thread while this thread only waits for the asker.
        asker = self.ask(self.budget_bytes - round_up(C.loaded_on_gpu()["AutoencoderKL"]))
        asker.wait_stdout("^done$", 30)
        got = {m["name"]: m["state"] for m in self.observer.status()["models"]}
        self.assertEqual(got, {"TinyClipTextModel": "evicted", "BaseModel": "evicted",
                               "AutoencoderKL": "idle"})
        self.assertEqual(sorted(C.loaded_on_gpu()), ["AutoencoderKL"])
        self.assertEqual(hooks.installed().books.evictions, 2)
        self.assertLess(fakecuda.allocated(), before)
        self.assertEqual(self.books(), round_up(C.loaded_on_gpu()["AutoencoderKL"]))
        # Loaded again by the next prompt: reserved again.
        C.run(cu.txt2img(upscale=False), ["out"], prompt_id="again")
        self.assertEqual(self.books(), sum(round_up(n) for n in C.loaded_on_gpu().values()))

    def test_rocmmemctl_evict_names_the_model(self):
        self.start()
        C.run(cu.txt2img(upscale=False), ["out"])
        r = self.ctl("evict", "BaseModel")
        self.assertEqual(r.rc, 0, r)
        self.assertNotIn("BaseModel", C.loaded_on_gpu())
        unet = next(m for m in self.observer.status()["models"] if m["name"] == "BaseModel")
        self.assertEqual((unet["state"], unet["bytes"]), ("evicted", 0))

    def test_comfyuis_own_unloads_give_the_memory_back(self):
        self.start()
        C.run(cu.txt2img(upscale=False), ["out"])
        self.assertGreater(self.books(), 0)
        C.mm.unload_all_models()  # ComfyUI's "free memory" button
        self.assertEqual(C.loaded_on_gpu(), {})
        self.assertEqual(self.books(), 0)
        self.assertEqual(fakecuda.allocated(), 0)

    def test_garbage_collected_models_are_forgotten(self):
        self.start()
        unet = C.test_nodes.tiny_unet()
        C.mm.load_models_gpu([unet])
        self.assertIn("BaseModel", {m["name"] for m in self.observer.status()["models"]})
        C.mm.current_loaded_models.clear()
        del unet
        import gc
        gc.collect()
        C.mm.soft_empty_cache()  # what ComfyUI calls after its gc.collect() between prompts
        self.assertNotIn("BaseModel", {m["name"] for m in self.observer.status()["models"]})

    def test_models_comfyui_keeps_on_the_gpu_are_pinned(self):
        # --highvram: the diffusion model's offload device is the GPU itself.
        self.start()
        unet = C.test_nodes.tiny_unet()
        kept = C.model_patcher.ModelPatcher(unet.model, unet.load_device, unet.load_device)
        with self.assertLogs("rocmmem.comfyui", logging.INFO) as logs:
            C.mm.load_models_gpu([kept])
        self.assertIn("INFO:rocmmem.comfyui:rocmmem: ComfyUI keeps BaseModel on the GPU "
                      "(--highvram or --gpu-only): registered pinned, rocmmemd will not evict "
                      "it", logs.output)
        got = next(m for m in self.observer.status()["models"] if m["name"] == "BaseModel")
        self.assertTrue(got["pinned"])

    def test_a_load_does_not_wait_holding_its_first_holding(self):
        # Another process holds all but 1 GiB and, to let go of it, first needs nearly 1 GiB
        # more. ComfyUI loads a model with 1 GiB of working memory: the model is granted, the
        # working memory waits. Holding the model while waiting (the daemon serves in order)
        # would wait forever; the hooks let go of it after BACKOFF, the other process gets its
        # memory and leaves, and ComfyUI gets both.
        books.BACKOFF = 0.3
        self.addCleanup(setattr, books, "BACKOFF", 2.0)
        self.start()
        greedy = self.background([integ.PYTHON, "-c", GREEDY, self.sock,
                                  str(self.budget_bytes - GiB), str(GiB - 4 * MiB)],
                                 "greedy", env=integ.child_env(self.sock))
        greedy.wait_stdout("^holding$", 10)
        unet = C.test_nodes.tiny_unet()
        start = time.monotonic()
        C.mm.load_models_gpu([unet], memory_required=GiB)
        self.assertLess(time.monotonic() - start, 20)
        greedy.wait_stdout("^done$", 10)
        self.assertEqual(greedy.proc.wait(10), 0, greedy.stderr())
        got = {m["name"]: (m["state"], m["bytes"]) for m in self.observer.status()["models"]}
        self.assertEqual(got["BaseModel"], ("in_use", round_up(unet.model_size())))
        self.assertEqual(got[books.WORK], ("in_use", GiB))

    def test_daemon_going_away_leaves_comfyui_alone(self):
        sock = os.path.join(self.dir, "short.sock")
        os.environ["ROCMMEM_SOCKET"] = sock  # restored by IntegrationTestCase
        short = self.start(sock=sock, extra=["--shutdown-timeout", "0.2"])
        C.run(cu.txt2img(upscale=False), ["out"])
        short.stop()
        integ.poll_until(lambda: not hooks.installed().active(), 10,
                         what="the client to notice")
        C.run(cu.txt2img(upscale=False), ["out"], prompt_id="alone")
        C.mm.unload_all_models()
        self.assertEqual(C.loaded_on_gpu(), {})
        text = NODE_CLASS_MAPPINGS["RocmmemStatus"]().status()["result"][0]
        self.assertRegex(text, r"^rocmmemd not available")

    def test_without_daemon_nothing_is_wrapped(self):
        with self.assertLogs("rocmmem.comfyui", logging.INFO) as logs:
            self.assertFalse(hooks.install())
        self.assertRegex("\n".join(logs.output), r"rocmmemd not available .*ComfyUI manages "
                                                  r"its memory alone")
        self.assertFalse(hasattr(C.mm.load_models_gpu, "__rocmmem_original__"))
        C.run(cu.txt2img(upscale=False), ["out"])
        text = NODE_CLASS_MAPPINGS["RocmmemStatus"]().status()["result"][0]
        self.assertRegex(text, r"^rocmmemd not available: ")

    def test_disabled_by_environment(self):
        self.start(install=False)
        os.environ["ROCMMEM_COMFYUI"] = "0"
        self.addCleanup(os.environ.pop, "ROCMMEM_COMFYUI")
        self.assertFalse(hooks.install())
        self.assertFalse(hasattr(C.mm.load_models_gpu, "__rocmmem_original__"))
        text = NODE_CLASS_MAPPINGS["RocmmemStatus"]().status()["result"][0]
        self.assertIn("ComfyUI: models not arbitrated (ROCMMEM_COMFYUI=0", text)


@unittest.skipIf(REASON, REASON)
class Versions(ComfyTestCase):
    def test_without_model_loaded_memory_comfyui_is_left_alone(self):
        # ComfyUI before 2024-12-19 (2dda7c11) has no LoadedModel.model_loaded_memory().
        saved = C.mm.LoadedModel.model_loaded_memory
        del C.mm.LoadedModel.model_loaded_memory
        self.addCleanup(setattr, C.mm.LoadedModel, "model_loaded_memory", saved)
        self.start(install=False)
        with self.assertLogs("rocmmem.comfyui", logging.WARNING) as logs:
            self.assertFalse(hooks.install())
        self.assertEqual(logs.output, [
            "WARNING:rocmmem.comfyui:rocmmem: ComfyUI 0.3.64 has no LoadedModel."
            "model_loaded_memory(): nothing tells what a loaded model still holds, so rocmmemd "
            "cannot account for its memory. ComfyUI runs unarbitrated on this version; "
            "rocmmemd needs ComfyUI from 2024-12-19 on (commit 2dda7c11, which added "
            "LoadedModel.model_loaded_memory())"])
        for name in hooks.HOOKED:
            self.assertFalse(hasattr(getattr(C.mm, name), "__rocmmem_original__"), name)
        self.assertFalse(hasattr(C.execution.execute, "__rocmmem_original__"))
        self.assertEqual([c["name"] for c in self.observer.status()["clients"]], ["observer"])
        text = NODE_CLASS_MAPPINGS["RocmmemStatus"]().status()["result"][0]
        self.assertIn("ComfyUI: models not arbitrated (ComfyUI 0.3.64 has no LoadedModel."
                      "model_loaded_memory()", text)

    def test_missing_function_is_skipped(self):
        # ComfyUI before mid-2023 had no unload_all_models.
        saved = C.mm.unload_all_models
        del C.mm.unload_all_models
        self.addCleanup(setattr, C.mm, "unload_all_models", saved)
        self.start(install=False)
        with self.assertLogs("rocmmem.comfyui", logging.INFO) as logs:
            self.assertTrue(hooks.install())
        self.assertIn("INFO:rocmmem.comfyui:rocmmem: this ComfyUI has no "
                      "comfy.model_management.unload_all_models: not hooked", logs.output)
        for name in ("load_models_gpu", "free_memory", "soft_empty_cache"):
            self.assertTrue(hasattr(getattr(C.mm, name), "__rocmmem_original__"), name)
        C.run(cu.txt2img(upscale=False), ["out"])
        self.assertEqual(self.books(), sum(round_up(n) for n in C.loaded_on_gpu().values()))

    def test_host_backend_is_said_plainly(self):
        self.start(install=False)
        with self.assertLogs("rocmmem.comfyui", logging.INFO) as logs:
            self.assertTrue(hooks.install())
        self.assertIn("WARNING:rocmmem.comfyui:rocmmem: rocmmemd runs on its host backend: it "
                      "loaded no GPU runtime, so it counts ComfyUI's GPU models against a budget "
                      "of host memory, not of the GPU, and cannot see what the GPU really holds."
                      " Install a GPU runtime rocmmemd can load (ROCm's libamdhip64, or "
                      "NVIDIA's libcuda) and restart rocmmemd", logs.output)

    def test_without_execution_models_stay_in_use_until_the_next_load(self):
        self.start(install=False)
        saved = sys.modules.pop("execution")
        self.addCleanup(sys.modules.__setitem__, "execution", saved)
        sys.modules["execution"] = None  # import execution fails
        with self.assertLogs("rocmmem.comfyui", logging.INFO) as logs:
            self.assertTrue(hooks.install())
        self.assertIn("INFO:rocmmem.comfyui:rocmmem: no execution.PromptExecutor.execute: "
                      "models stay in use until the next load", logs.output)
        self.assertFalse(hasattr(saved.PromptExecutor.execute, "__rocmmem_original__"))


if __name__ == "__main__":
    integ.main(REASON)
