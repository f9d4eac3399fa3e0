# SPDX-License-Identifier: MIT
"""Progress of a waiting acquire from Python: behind an owner that is stopped (SIGSTOP) with an
idle model, Model.acquire(on_progress=...) is told the model, its owner and the deadline, then
that the eviction ended in a revocation; Client.on_progress sees the same reports, and the long
wait is said once in the log at info. Passes with or without python3-torch (not imported)."""
import signal
import unittest

from fixture import PyTestCase, rocmmem

OWNER = """
    c = rocmmem.connect(socket=SOCK, name="stuck-owner")
    m = c.register_model("flux", "48M", model_class="transformer")
    with m.use():
        pass
    say("ready", m.id, os.getpid())
    while True:
        time.sleep(1)
    """


class ProgressTest(PyTestCase):
    def test_acquire_behind_a_stopped_owner(self):
        self.start_daemon(extra=["--evict-deadline", "1.5"])
        owner = self.python(OWNER, name="owner")
        m = owner.wait_stdout(r"^ready (\d+) (\d+)$", timeout=10)
        flux, owner_pid = int(m.group(1)), int(m.group(2))
        owner.signal(signal.SIGSTOP)
        self.addCleanup(owner.signal, signal.SIGCONT)
        c = self.connect(name="needy")
        vae = c.register_model("vae", "40M", model_class="vae")
        seen, everything = [], []
        c.on_progress = everything.append
        with self.assertLogs("rocmmem", level="INFO") as logs:
            vae.acquire(timeout=30, on_progress=seen.append)
        self.assertTrue(vae.resident)
        self.assertGreaterEqual(len(seen), 2, seen)
        first, last = seen[0], seen[-1]
        self.assertIsInstance(first, rocmmem.WaitProgress)
        self.assertEqual((first.request, first.request_model_id, first.device),
                         ("model_acquire", vae.id, 0))
        self.assertEqual((first.reason, first.model_id, first.model_name),
                         ("eviction", flux, "flux"))
        self.assertEqual((first.owner_pid, first.owner_name), (owner_pid, "stuck-owner"))
        self.assertTrue(0 < first.deadline <= 1.5, first)
        self.assertEqual(first.position, 0)
        self.assertIsNone(first.eviction_ended)
        self.assertEqual((last.eviction_ended, last.model_id), ("revoked", flux), last)
        self.assertEqual(everything, seen)
        said = [r for r in logs.output if "waited" in r]
        self.assertEqual(len(said), 1, logs.output)
        self.assertIn("the eviction of model %d 'flux'" % flux, said[0])
        self.assertIn("ended: revoked", said[0])
        vae.release()

    def test_not_waiting(self):
        """An acquire that does not wait is told nothing."""
        self.start_daemon()
        c = self.connect()
        seen = []
        c.on_progress = seen.append
        m = c.register_model("small", "8M")
        m.acquire(timeout=5, on_progress=seen.append)
        m.release()
        lease = c.lease("8M", timeout=5, on_progress=seen.append)
        lease.release()
        self.assertEqual(seen, [])


if __name__ == "__main__":
    unittest.main()
