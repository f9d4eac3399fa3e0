# SPDX-License-Identifier: MIT
"""A Python process SIGKILLed while it holds leases and models, or while it waits for memory:
the daemon reclaims everything at once and the budget is whole again."""
import signal
import unittest

from fixture import BUDGET, MiB, PyTestCase

HOLDER = """
    c = rocmmem.connect(socket=SOCK, name="doomed")
    leases = [c.lease("8M", tag=f"doomed-{i}") for i in range(3)]
    for i, l in enumerate(leases):
        l.buffer[:] = bytes([i + 1]) * l.size  # touched: the pages are really there
    m = c.register_model("doomed-model", "16M", model_class="transformer")
    m.acquire()
    tagged = c.lease("4M", model=m)
    c.start_event_thread()
    say("holding", os.getpid())
    while True:
        time.sleep(1)
    """


class KillTest(PyTestCase):
    def setUp(self):
        super().setUp()
        self.start_daemon()

    def test_sigkill_while_holding_leases_and_a_model(self):
        p = self.python(HOLDER, name="doomed")
        p.wait_stdout(r"^holding \d+$", timeout=10)
        st = self.status()
        self.assertEqual(st["devices"][0]["leased_bytes"], 28 * MiB)
        self.assertEqual(st["devices"][0]["reserved_bytes"], 16 * MiB)
        self.assertEqual(len([l for l in st["leases"] if l["owner_pid"] == p.pid]), 4)
        before = st["counters"]["reclaimed"]
        p.signal(signal.SIGKILL)
        self.assertEqual(p.wait(), -signal.SIGKILL)
        st = self.wait_status(lambda s: s["devices"][0]["leased_bytes"] == 0 and
                              s["devices"][0]["reserved_bytes"] == 0, timeout=2.0,
                              what="the killed process's memory to be reclaimed")
        self.assertEqual(st["leases"], [])
        self.assertEqual(st["models"], [])
        self.assertFalse([x for x in st["clients"] if x["pid"] == p.pid])
        self.assertEqual(st["counters"]["reclaimed"] - before, 4)
        c = self.connect(name="after")
        with c.lease(BUDGET) as lease:  # the whole budget is free again
            self.assertEqual(lease.buffer[0], 0)  # and the pages the victim wrote are gone

    def test_sigkill_while_waiting_for_memory(self):
        c = self.connect(name="holder")
        held = c.lease(BUDGET - 4 * MiB)
        p = self.python("""
            c = rocmmem.connect(socket=SOCK, name="waiter")
            say("waiting")
            c.lease("32M", timeout=None)
            say("granted?")
            """, name="waiter")
        p.wait_stdout(r"^waiting$")
        self.wait_status(lambda st: any(q["owner_pid"] == p.pid for q in st["queue"]),
                         what="the child's request in the queue")
        p.signal(signal.SIGKILL)
        p.wait()
        st = self.wait_status(lambda st: not st["queue"], timeout=2.0,
                              what="the dead waiter to leave the queue")
        self.assertEqual(st["devices"][0]["leased_bytes"], BUDGET - 4 * MiB)
        held.release()
        self.assertNotIn("granted?", p.stdout())


if __name__ == "__main__":
    unittest.main()
