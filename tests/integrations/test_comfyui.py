# SPDX-License-Identifier: MIT
"""The ComfyUI node package (integrations/comfyui/rocmmem_comfyui) against a real rocmmemd.

ComfyUI itself is the stand-in of standins/comfy and standins/execution.py, which reproduces
the signatures of the functions the hooks wrap or read, as in ComfyUI's
comfy/model_management.py at comfyanonymous/ComfyUI 00184d15 (October 2025) and
Comfy-Org/ComfyUI 02b2b388 (2026), and PromptExecutor.execute of execution.py (unchanged
since 2023). The hooks run in this process, as in ComfyUI's; other processes (rocmmemctl,
Python snippets) make the requests that need ComfyUI's memory.
"""
import importlib
import importlib.util
import json
import logging
import os
import subprocess
import sys
import textwrap
import threading
import time
import unittest

import integ
from integ import MiB, IntegrationTestCase, child_env, poll_until, rocmmemctl_bin, round_up

import execution
import rocmmem
from comfy import model_management as mm
# Importing the node package installs the hooks, as in ComfyUI: not here, where each test
# installs them against its own daemon (and a machine's own rocmmemd must not be used).
os.environ["ROCMMEM_COMFYUI"] = "0"
from comfy.clip_model import CLIPVisionModelProjection
from comfy.ldm.models.autoencoder import AutoencoderKL
from comfy.model_base import SDXL, Flux
from comfy.model_patcher import ModelPatcher
from comfy.sd1_clip import SD1ClipModel
from nn import Module
from rocmmem_comfyui import NODE_CLASS_MAPPINGS, NODE_DISPLAY_NAME_MAPPINGS, hooks  # noqa
del os.environ["ROCMMEM_COMFYUI"]


class UpscaleModel(Module):
    """A model of no class the daemon knows: "other"."""


def patcher(cls, mib):
    return ModelPatcher(cls(mib * MiB), mm.GPU, mm.CPU)


ORIGINALS = {name: getattr(mm, name) for name in hooks.HOOKED}
ORIGINAL_EXECUTE = execution.PromptExecutor.execute


class ComfyTestCase(IntegrationTestCase):
    budget = "64M"
    extra = ()

    def setUp(self):
        super().setUp()
        mm.reset()
        hooks._said.clear()
        self.addCleanup(hooks.uninstall)
        self.addCleanup(mm.reset)

    def start(self, install=True):
        self.start_daemon(budget=self.budget, extra=self.extra)
        self.addCleanup(hooks.uninstall)  # before the daemon stops: it waits for its clients
        if install:
            self.assertTrue(hooks.install())

    def loaded(self):
        """The names of the modules ComfyUI has loaded, most recent first."""
        return [type(lm.model.model).__name__ for lm in mm.current_loaded_models]

    def unloads(self):
        return [detail for name, detail in mm.CALLS if name == "model_unload"]


class Hooks(ComfyTestCase):
    def setUp(self):
        super().setUp()
        self.start()

    def test_wrapped_and_restored(self):
        for name in hooks.HOOKED:
            self.assertIs(getattr(mm, name).__rocmmem_original__, ORIGINALS[name])
        self.assertIs(execution.PromptExecutor.execute.__rocmmem_original__, ORIGINAL_EXECUTE)
        hooks.uninstall()
        for name in hooks.HOOKED:
            self.assertIs(getattr(mm, name), ORIGINALS[name])
        self.assertIs(execution.PromptExecutor.execute, ORIGINAL_EXECUTE)
        # Its connection is gone too (status leaves the asking rocmmemctl's own out).
        self.assertEqual([c["name"] for c in self.status()["clients"]], [])

    def test_models_are_reserved_before_comfyui_loads_them(self):
        seen = {}
        observer = rocmmem.connect(socket=self.sock, name="observer")
        self.addCleanup(observer.close)
        real_load = ModelPatcher.partially_load

        def partially_load(p, device_to, extra_memory=0, force_patch_weights=False):
            name = type(p.model).__name__
            seen[name] = next(m for m in observer.status()["models"] if m["name"] == name)
            return real_load(p, device_to, extra_memory, force_patch_weights)

        ModelPatcher.partially_load = partially_load
        self.addCleanup(setattr, ModelPatcher, "partially_load", real_load)
        models = [patcher(SDXL, 20), patcher(AutoencoderKL, 3), patcher(SD1ClipModel, 5),
                  patcher(CLIPVisionModelProjection, 2), patcher(UpscaleModel, 1)]
        for m in models:
            mm.load_models_gpu([m])
        classes = {"SDXL": "transformer", "AutoencoderKL": "vae",
                   "SD1ClipModel": "text_encoder", "CLIPVisionModelProjection": "image_encoder",
                   "UpscaleModel": "other"}
        for m in models:
            name = type(m.model).__name__
            self.assertEqual(seen[name]["state"], "in_use", name)
            self.assertEqual(seen[name]["bytes"], round_up(m.model_size()), name)
        got = self.models_by_name()
        self.assertEqual({n: m["class"] for n, m in got.items()}, classes)
        self.assertEqual({n: m["bytes"] for n, m in got.items()},
                         {type(m.model).__name__: round_up(m.model_size()) for m in models})
        self.assertEqual({m["owner_pid"] for m in got.values()}, {os.getpid()})
        self.assertEqual([c["name"] for c in self.status()["clients"]
                          if c["pid"] == os.getpid()], ["ComfyUI", "observer"])

    def test_in_use_until_the_next_load_or_the_end_of_the_prompt(self):
        clip, unet, vae = patcher(SD1ClipModel, 4), patcher(Flux, 16), patcher(AutoencoderKL, 2)
        mm.load_model_gpu(clip)
        self.assertEqual(self.models_by_name()["SD1ClipModel"]["state"], "in_use")
        mm.load_models_gpu([unet])
        states = {n: m["state"] for n, m in self.models_by_name().items()}
        self.assertEqual(states, {"SD1ClipModel": "idle", "Flux": "in_use"})
        seen = []

        def decode():
            mm.load_models_gpu([vae])
            seen.append({n: m["state"] for n, m in self.models_by_name().items()})

        execution.PromptExecutor().execute([decode], "prompt-1")
        self.assertEqual(seen, [{"SD1ClipModel": "idle", "Flux": "idle",
                                 "AutoencoderKL": "in_use"}])
        states = {n: m["state"] for n, m in self.models_by_name().items()}
        self.assertEqual(states, {"SD1ClipModel": "idle", "Flux": "idle",
                                  "AutoencoderKL": "idle"})
        self.assertEqual(self.loaded(), ["AutoencoderKL", "Flux", "SD1ClipModel"])

    def test_patch_models_and_clones(self):
        unet = patcher(SDXL, 10)
        control = patcher(UpscaleModel, 4)
        unet.patch_models = [control]
        clone = unet.clone()
        mm.load_models_gpu([unet, clone])
        got = self.models_by_name()
        self.assertEqual(sorted(got), ["SDXL", "UpscaleModel"])  # a clone shares its module
        self.assertEqual({m["state"] for m in got.values()}, {"in_use"})
        mm.load_models_gpu([clone])  # ComfyUI swaps the clone in: the same weights
        got = self.models_by_name()
        self.assertEqual(got["SDXL"]["state"], "in_use")
        self.assertEqual(got["SDXL"]["bytes"], 10 * MiB)
        self.assertEqual(got["UpscaleModel"]["state"], "in_use")

    def test_models_comfyui_keeps_on_the_gpu_are_pinned(self):
        # --highvram: the diffusion model's offload device is the GPU itself.
        unet = ModelPatcher(SDXL(8 * MiB), mm.GPU, mm.GPU)
        with self.assertLogs("rocmmem.comfyui", logging.INFO) as logs:
            mm.load_models_gpu([unet])
        self.assertIn("INFO:rocmmem.comfyui:rocmmem: ComfyUI keeps SDXL on the GPU (--highvram "
                      "or --gpu-only): registered pinned, rocmmemd will not evict it",
                      logs.output)
        mm.load_models_gpu([patcher(AutoencoderKL, 4)])
        got = self.models_by_name()["SDXL"]
        self.assertEqual((got["pinned"], got["state"]), (True, "idle"))
        self.assertFalse(self.models_by_name()["AutoencoderKL"]["pinned"])

    def test_evict_request_unloads_through_comfyuis_path(self):
        clip, unet, vae = patcher(SD1ClipModel, 6), patcher(SDXL, 24), patcher(AutoencoderKL, 8)
        execution.PromptExecutor().execute(
            [lambda: mm.load_models_gpu([clip]), lambda: mm.load_models_gpu([unet]),
             lambda: mm.load_models_gpu([vae])], "prompt-1")
        self.assertEqual({m["state"] for m in self.models_by_name().values()}, {"idle"})
        mm.CALLS.clear()
        # 38 MiB resident, 26 free: a 30 MiB lease needs one model out. The daemon picks the
        # least recently used (the clip); ComfyUI must unload that one, on the event thread
        # (this thread waits in subprocess.run meanwhile).
        r = integ.run([rocmmemctl_bin(), "--socket", self.sock, "lease", "30M", "--timeout",
                       "10", "--hold", "0"])
        self.assertEqual(r.rc, 0, r)
        got = self.models_by_name()
        evicted = [n for n, m in got.items() if m["state"] == "evicted"]
        self.assertEqual(evicted, ["SD1ClipModel"], got)
        self.assertEqual(got["SD1ClipModel"]["evictions"], 1)
        self.assertEqual(mm.CALLS, [("free_memory", 1e30), ("model_unload", "SD1ClipModel"),
                                    ("soft_empty_cache", False)])
        self.assertEqual(self.loaded(), ["AutoencoderKL", "SDXL"])
        self.assertEqual(clip.model.gpu_bytes, 0)
        self.assertEqual(mm.VRAM.used, 32 * MiB)
        self.assertEqual(hooks.installed().evictions, 1)
        # Loaded again later: reserved again (the daemon counts it resident).
        mm.load_models_gpu([clip])
        self.assertEqual(self.models_by_name()["SD1ClipModel"]["bytes"], 6 * MiB)
        self.assertEqual(self.models_by_name()["SD1ClipModel"]["state"], "in_use")

    def test_rocmmemctl_evict_names_the_model(self):
        unet, vae = patcher(SDXL, 8), patcher(AutoencoderKL, 4)
        execution.PromptExecutor().execute(
            [lambda: mm.load_models_gpu([unet]), lambda: mm.load_models_gpu([vae])], "p")
        r = self.ctl("evict", "SDXL")
        self.assertEqual(r.rc, 0, r)
        self.assertEqual(self.loaded(), ["AutoencoderKL"])
        self.assertEqual(self.unloads(), ["SDXL"])
        self.assertEqual(self.models_by_name()["SDXL"]["state"], "evicted")
        r = self.ctl("evict", "AutoencoderKL")
        self.assertEqual(r.rc, 0, r)
        self.assertEqual(self.loaded(), [])

    def test_comfyuis_own_unloads_give_the_memory_back(self):
        clip, unet = patcher(SD1ClipModel, 6), patcher(SDXL, 20)
        mm.load_models_gpu([clip])
        mm.load_models_gpu([unet])
        mm.unload_all_models()  # ComfyUI's "free memory" button
        got = self.models_by_name()
        self.assertEqual({n: m["bytes"] for n, m in got.items()}, {"SD1ClipModel": 0,
                                                                    "SDXL": 0})
        self.assertEqual(self.status()["devices"][0]["free_bytes"], 64 * MiB)
        mm.load_models_gpu([unet])
        self.assertEqual(self.models_by_name()["SDXL"]["bytes"], 20 * MiB)

    def test_partial_load_reserves_what_is_loaded(self):
        # A GPU smaller than the model: ComfyUI loads what fits (lowvram) and the reservation
        # shrinks to that after the load.
        mm.reset(total=16 * MiB)
        unet = patcher(SDXL, 24)
        mm.load_models_gpu([unet])
        self.assertTrue(0 < unet.model.gpu_bytes < 24 * MiB)
        got = self.models_by_name()["SDXL"]
        self.assertEqual(got["bytes"], round_up(unet.model.gpu_bytes))
        self.assertEqual(got["state"], "in_use")
        # ComfyUI frees part of it by its own decision: the reservation follows.
        mm.free_memory(mm.VRAM.total - 4 * MiB, mm.GPU)
        self.assertEqual(self.models_by_name()["SDXL"]["bytes"],
                         round_up(unet.model.gpu_bytes))

    def test_garbage_collected_models_are_forgotten(self):
        unet = patcher(SDXL, 8)
        mm.load_models_gpu([unet])
        self.assertIn("SDXL", self.models_by_name())
        mm.current_loaded_models.clear()
        del unet
        mm.soft_empty_cache()  # what ComfyUI calls after its gc.collect() between prompts
        self.assertNotIn("SDXL", self.models_by_name())

    def test_second_model_of_a_load_does_not_wait_holding_the_first(self):
        # Another process holds 40 MiB and, to let go of it, first needs 10 MiB more. ComfyUI
        # loads a 20 MiB model with a 20 MiB patch model. Holding the first while waiting for
        # the second (the daemon serves in order) would wait forever; the hooks let go of the
        # first after BACKOFF, the other gets its 10 MiB and leaves, ComfyUI gets both.
        hooks.BACKOFF = 0.3
        self.addCleanup(setattr, hooks, "BACKOFF", 2.0)
        script = textwrap.dedent(f"""
            import rocmmem, sys
            c = rocmmem.connect(socket={self.sock!r}, name="greedy")
            first = c.lease("40M")
            print("holding", flush=True)
            sys.stdin.readline()
            more = c.lease("10M", timeout=20)
            more.release(); first.release(); c.close()
            print("done", flush=True)
        """)
        env = child_env(self.sock)
        greedy = subprocess.Popen([integ.PYTHON, "-c", script], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True, env=env)
        self.addCleanup(greedy.stdout.close)
        self.addCleanup(greedy.stdin.close)
        self.addCleanup(greedy.wait)
        self.addCleanup(greedy.kill)
        self.assertEqual(greedy.stdout.readline().strip(), "holding")
        unet, control = patcher(SDXL, 20), patcher(UpscaleModel, 20)
        unet.patch_models = [control]

        def then_ask_for_more():
            poll_until(lambda: self.status()["queue"], 10, what="ComfyUI waiting")
            greedy.stdin.write("\n")
            greedy.stdin.flush()

        t = threading.Thread(target=then_ask_for_more)
        t.start()
        start = time.monotonic()
        mm.load_models_gpu([unet])
        t.join()
        self.assertLess(time.monotonic() - start, 8)
        self.assertEqual(greedy.stdout.readline().strip(), "done")
        got = self.models_by_name()
        self.assertEqual({n: (m["state"], m["bytes"]) for n, m in got.items()},
                         {"SDXL": ("in_use", 20 * MiB), "UpscaleModel": ("in_use", 20 * MiB)})

    def test_daemon_going_away_leaves_comfyui_alone(self):
        # A daemon of its own that does not wait for its clients when told to stop.
        hooks.uninstall()
        sock = os.path.join(self.dir, "short.sock")
        short = self.start_daemon(sock=sock, extra=["--shutdown-timeout", "0.2"],
                                  check_exit=False)
        os.environ["ROCMMEM_SOCKET"] = sock
        self.assertTrue(hooks.install())
        self.addCleanup(hooks.uninstall)
        unet = patcher(SDXL, 8)
        mm.load_models_gpu([unet])
        self.assertEqual([m["name"] for m in self.status(sock=sock)["models"]], ["SDXL"])
        short.stop()
        poll_until(lambda: not hooks.installed().active(), 10, what="the client to notice")
        vae = patcher(AutoencoderKL, 4)
        mm.load_models_gpu([vae])
        mm.unload_all_models()
        self.assertEqual(self.loaded(), [])
        self.assertEqual(mm.VRAM.used, 0)
        text = NODE_CLASS_MAPPINGS["RocmmemStatus"]().status()["result"][0]
        self.assertRegex(text, r"^rocmmemd not available")


class StatusNode(ComfyTestCase):
    def test_mappings(self):
        self.assertEqual(list(NODE_CLASS_MAPPINGS), ["RocmmemStatus"])
        self.assertEqual(NODE_DISPLAY_NAME_MAPPINGS, {"RocmmemStatus": "rocmmemd status"})
        node = NODE_CLASS_MAPPINGS["RocmmemStatus"]
        self.assertEqual(node.INPUT_TYPES(), {"required": {}})
        self.assertEqual(node.RETURN_TYPES, ("STRING",))
        self.assertTrue(node.OUTPUT_NODE)
        self.assertTrue(callable(getattr(node(), node.FUNCTION)))
        changed = node.IS_CHANGED()
        self.assertNotEqual(changed, changed)  # NaN: run every time

    def test_status_text(self):
        self.start()
        mm.load_models_gpu([patcher(SDXL, 8)])
        out = NODE_CLASS_MAPPINGS["RocmmemStatus"]().status()
        text = out["result"][0]
        self.assertEqual(out["ui"], {"text": [text]})
        lines = text.splitlines()
        self.assertRegex(lines[0], rf"^rocmmemd \S+, pid {self.daemon.pid}, backend host$")
        self.assertEqual(lines[1], "ComfyUI: models arbitrated (1 registered, 0 evictions)")
        self.assertIn("devices:", lines)
        self.assertIn("  0 host memory: budget 64 MiB, leased 0 B, reserved 8 MiB, free 56 MiB",
                      lines)
        self.assertIn(f"  pid {os.getpid()} ComfyUI: 1 model, 8 MiB reserved, 0 leases, 0 B "
                      f"leased", lines)
        self.assertRegex(text, rf"(?m)^  \d+ SDXL \(transformer\) pid {os.getpid()} device 0: "
                               r"in use, 8 MiB$")

    def test_status_without_hooks(self):
        # The daemon came after ComfyUI: the node shows its status and says why nothing is
        # arbitrated.
        self.start(install=False)
        text = NODE_CLASS_MAPPINGS["RocmmemStatus"]().status()["result"][0]
        self.assertIn("ComfyUI: models not arbitrated (rocmmemd was not reachable when "
                      "ComfyUI started: restart ComfyUI)", text)
        self.assertIn("models: none", text)

    def test_status_without_daemon(self):
        text = NODE_CLASS_MAPPINGS["RocmmemStatus"]().status()["result"][0]
        self.assertRegex(text, r"^rocmmemd not available: ")


class WithoutDaemon(ComfyTestCase):
    def test_nothing_is_wrapped(self):
        with self.assertLogs("rocmmem.comfyui", logging.INFO) as logs:
            self.assertFalse(hooks.install())
        self.assertRegex("\n".join(logs.output), r"rocmmemd not available .*ComfyUI manages "
                                                 r"its memory alone")
        for name in hooks.HOOKED:
            self.assertIs(getattr(mm, name), ORIGINALS[name])
        self.assertIs(execution.PromptExecutor.execute, ORIGINAL_EXECUTE)
        unet, vae = patcher(SDXL, 8), patcher(AutoencoderKL, 4)
        mm.load_models_gpu([unet])
        mm.load_models_gpu([vae])
        self.assertEqual(self.loaded(), ["AutoencoderKL", "SDXL"])
        mm.unload_all_models()
        self.assertEqual(mm.VRAM.used, 0)

    def test_disabled_by_environment(self):
        self.start_daemon()
        self.addCleanup(hooks.uninstall)
        os.environ["ROCMMEM_COMFYUI"] = "0"
        self.addCleanup(os.environ.pop, "ROCMMEM_COMFYUI")
        self.assertFalse(hooks.install())
        self.assertIs(mm.load_models_gpu, ORIGINALS["load_models_gpu"])


class OtherComfyUIVersions(ComfyTestCase):
    def variant(self, *missing):
        """The stand-in comfy.model_management, loaded anew without the functions missing."""
        spec = importlib.util.spec_from_file_location("variant_model_management",
                                                      mm.__file__)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        for name in missing:
            delattr(module, name)
        return module

    def test_missing_function_is_skipped(self):
        # ComfyUI before mid-2023 had no unload_all_models.
        self.start(install=False)
        old = self.variant("unload_all_models")
        with self.assertLogs("rocmmem.comfyui", logging.INFO) as logs:
            self.assertTrue(hooks.install(model_management=old))
        self.assertIn("INFO:rocmmem.comfyui:rocmmem: this ComfyUI has no "
                      "comfy.model_management.unload_all_models: not hooked", logs.output)
        self.assertFalse(hasattr(old, "unload_all_models"))
        for name in ("load_models_gpu", "free_memory", "soft_empty_cache"):
            self.assertTrue(hasattr(getattr(old, name), "__rocmmem_original__"), name)
        p = ModelPatcher(SDXL(6 * MiB), old.GPU, old.CPU)
        old.load_models_gpu([p])
        self.assertEqual(self.models_by_name()["SDXL"]["bytes"], 6 * MiB)
        old.free_memory(1e30, old.GPU)
        self.assertEqual(self.models_by_name()["SDXL"]["bytes"], 0)

    def test_without_load_models_gpu_nothing_is_hooked(self):
        # ComfyUI before June 2023 loaded one model at a time (load_model_gpu only).
        self.start(install=False)
        old = self.variant("load_models_gpu")
        with self.assertLogs("rocmmem.comfyui", logging.WARNING) as logs:
            self.assertFalse(hooks.install(model_management=old))
        self.assertRegex(logs.output[0], r"lacks load_models_gpu: nothing hooked")
        self.assertIs(old.free_memory.__module__, "variant_model_management")
        self.assertFalse(hasattr(old.free_memory, "__rocmmem_original__"))

    def test_without_executor_models_stay_in_use_until_the_next_load(self):
        self.start(install=False)
        saved = sys.modules.pop("execution")
        self.addCleanup(sys.modules.__setitem__, "execution", saved)
        sys.modules["execution"] = None  # import execution fails
        with self.assertLogs("rocmmem.comfyui", logging.INFO) as logs:
            self.assertTrue(hooks.install())
        self.assertIn("INFO:rocmmem.comfyui:rocmmem: no execution.PromptExecutor.execute: "
                      "models stay in use until the next load", logs.output)
        self.assertIs(saved.PromptExecutor.execute, ORIGINAL_EXECUTE)


class AsACustomNode(IntegrationTestCase):
    """The folder loaded the way ComfyUI loads custom_nodes/ entries, in a process of its own."""

    SCRIPT = textwrap.dedent("""
        import importlib.util, json, os, sys
        path = sys.argv[1]
        name = path.replace(".", "_x_")  # ComfyUI's module name for a custom node folder
        spec = importlib.util.spec_from_file_location(name, os.path.join(path, "__init__.py"))
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        from comfy import model_management as mm
        from comfy.model_base import SDXL
        from comfy.model_patcher import ModelPatcher
        mm.load_models_gpu([ModelPatcher(SDXL(4 << 20), mm.GPU, mm.CPU)])
        node = module.NODE_CLASS_MAPPINGS["RocmmemStatus"]()
        print(json.dumps({"hooked": hasattr(mm.load_models_gpu, "__rocmmem_original__"),
                          "loaded": mm.VRAM.used, "text": node.status()["result"][0]}))
    """)

    def load(self, env):
        r = integ.run([integ.PYTHON, "-c", self.SCRIPT, integ.NODE_PACKAGE], env=env,
                      timeout=30)
        self.assertEqual(r.rc, 0, r)
        return json.loads(r.stdout.splitlines()[-1]), r

    def test_with_daemon(self):
        self.start_daemon()
        env = child_env(self.sock)
        out, r = self.load(env)
        self.assertTrue(out["hooked"], r)
        self.assertEqual(out["loaded"], 4 * MiB)
        self.assertIn("SDXL (transformer)", out["text"])

    def test_without_the_rocmmem_package(self):
        self.start_daemon()
        env = child_env(self.sock, pythonpath=(integ.STANDINS,))
        out, r = self.load(env)
        self.assertFalse(out["hooked"], r)
        self.assertEqual(out["loaded"], 4 * MiB)
        self.assertEqual(out["text"], "rocmmemd not available: the rocmmem Python package is "
                                      "not installed in ComfyUI's Python (docs/integrations.md)")
        self.assertIn("the rocmmem Python package is not installed", r.stderr)


if __name__ == "__main__":
    unittest.main()
