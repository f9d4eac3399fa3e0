# SPDX-License-Identifier: MIT
"""Models in use that never come back: --max-hold (off by default, per class) asks the owner to
release, then revokes; `rocmmemctl evict --force` does the same for an administrator only,
logged with who forced it. A real rocmmemd, model_host as the owner, rocmmemctl."""
import os
import subprocess
import time
import unittest

from daemon import MiB, reachable_ctl
from test_models import ModelTestCase

ROOT = os.geteuid() == 0


class MaxHold(ModelTestCase):
    def test_in_use_past_its_hold_is_asked_then_revoked(self):
        # transformers may be held 0.5 s, others without limit (the default: off); an owner
        # that never answers is revoked at the transformer's own deadline of 1 s.
        d = self.start_daemon(extra=["--max-hold", "transformer:0.5", "--evict-deadline",
                                     "20, transformer:1"])
        started = time.monotonic()
        h, ids = self.host("unet:transformer:16M", "vae:vae:8M", args=["--no-ack", "--in-use",
                                                                     "unet", "--in-use", "vae"])
        h.wait_stdout(r"^evict unet$", timeout=10)
        h.wait_stdout(r"^revoked unet$", timeout=10)
        elapsed = time.monotonic() - started
        self.assertGreaterEqual(elapsed, 1.5, "the hold (0.5 s), then the deadline (1 s)")
        m = self.models()
        self.assertEqual((m[ids["unet"]]["state"], m[ids["unet"]]["bytes"],
                          m[ids["unet"]]["use_count"]), ("evicted", 0, 0))
        # The vae is in use as long as the transformer was, and more: no limit for its class.
        self.assertEqual((m[ids["vae"]]["state"], m[ids["vae"]]["use_count"]), ("in_use", 1))
        self.assertNotIn("evict vae", h.stdout())
        log = d.log()
        self.assertRegex(log, r"asking pid \d+ 'model_host' to release and unload model "
                              rf"{ids['unet']} 'unet' \(transformer 16 MiB\) by its deadline "
                              r"in 1 s: in use for 0\.5\d* s, longer than its maximum hold "
                              r"of 0\.5 s \(max_hold\)")
        self.assertRegex(log, rf"revoked model {ids['unet']} 'unet' \(16 MiB\) of pid \d+ "
                              r"'model_host': did not release and unload it within 1 s")

    def test_owner_that_releases_in_time_keeps_nothing_revoked(self):
        self.start_daemon(extra=["--max-hold", "0.3"])
        h, ids = self.host("unet:transformer:16M", args=["--in-use", "unet"])
        h.wait_stdout(r"^evict unet\nreleased unet\nacked unet$", timeout=10)
        m = self.models()[ids["unet"]]
        self.assertEqual((m["state"], m["evictions"]), ("evicted", 1))
        self.assertNotIn("revoked", h.stdout())


@unittest.skipUnless(ROOT, "a forced eviction takes root; the refusal runs rocmmemctl as nobody")
class Force(ModelTestCase):
    def as_nobody(self, *args):
        os.chmod(self.dir, 0o755)
        os.chmod(self.sock, 0o666)
        ctl_copy, ctl_env = reachable_ctl()
        p = subprocess.run([ctl_copy, "--socket", self.sock, *args], stdin=subprocess.DEVNULL,
                           capture_output=True, text=True, env=ctl_env, user=65534,
                           group=65534, extra_groups=[], timeout=10)
        p.rc = p.returncode
        return p

    def test_refused_to_a_non_administrator(self):
        self.start_daemon()
        h, ids = self.host("busy:vae:4M", args=["--in-use", "busy"])
        r = self.as_nobody("evict", "--force", "busy")
        self.failed(r, 2, r"^rocmmemctl: evict: a forced eviction takes root: uid 65534 is not "
                          r"an administrator")
        self.assertEqual(self.models()[ids["busy"]]["state"], "in_use")
        self.assertNotIn("evict", h.stdout())

    def test_administrator_takes_a_model_in_use(self):
        d = self.start_daemon(extra=["--evict-deadline", "1"])
        h, ids = self.host("busy:vae:4M", args=["--in-use", "busy", "--no-ack"])
        r = self.ctl("evict", "--force", "--json", "busy", timeout=10)
        self.assertEqual(r.rc, 0, r)
        o = r.json()
        self.assertEqual((o["evicted"], o["revoked"], o["bytes_freed"]), (True, True, 4 * MiB))
        self.assertGreaterEqual(o["elapsed_ms"], 900, "the owner had its deadline")
        h.wait_stdout(r"^evict busy\nrevoked busy$")
        self.assertEqual(self.models()[ids["busy"]]["state"], "evicted")
        self.assertRegex(d.log(), rf"pid \d+ 'rocmmemctl' \(uid 0\) forces the eviction of model "
                                  rf"{ids['busy']} 'busy' \(in use\) of pid {h.pid} 'model_host'")

    def test_owner_that_releases_when_forced(self):
        self.start_daemon()
        h, ids = self.host("busy:vae:4M", args=["--in-use", "busy"])
        r = self.ctl("evict", "--force", "busy", timeout=10)
        self.assertEqual(r.rc, 0, r)
        self.assertRegex(r.stdout, rf"^evicted model {ids['busy']} 'busy' of pid {h.pid}: 4 MiB "
                                   r"freed in \d+\.\d\d s\n$")
        h.wait_stdout(r"^evict busy\nreleased busy\nacked busy$")


if __name__ == "__main__":
    unittest.main()
