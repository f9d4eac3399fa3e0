# SPDX-License-Identifier: MIT
"""Reconnection: a daemon killed (SIGKILL, as a crash or its watchdog would) and started again.
The client reconnects by itself, its lease keeps its data and its id, its model its id and
reservation; a fail-safe host carries on without the daemon meanwhile and is coordinated again
once it is back."""
import signal
import time
import unittest

from fixture import PyTestCase, poll_until, rocmmem


class ReconnectTest(PyTestCase):
    def kill_and_restart(self, c):
        self.daemon.signal(signal.SIGKILL)
        self.daemon.wait()
        return self.start_daemon(name="rocmmemd2")

    def test_a_client_reconnects_with_its_lease_and_model(self):
        self.start_daemon()
        c = self.connect(name="host")
        events = []
        c.on_event = events.append
        lease = c.lease("4M", tag="latents")
        lease.buffer[:5] = b"hello"
        m = c.register_model("vae", "8M", model_class="vae", priority=2)
        with m.use(timeout=5):
            pass
        c.start_event_thread()
        self.daemon.signal(signal.SIGKILL)
        self.daemon.wait()
        poll_until(lambda: c.state == "reconnecting", what="the client to notice")
        self.assertFalse(c.available)
        self.assertEqual(bytes(lease.buffer[:5]), b"hello")
        d2 = self.start_daemon(name="rocmmemd2")
        poll_until(lambda: c.state == "connected" and c.available, timeout=10,
                   what="the client to reconnect")
        types = [e["type"] for e in events]
        self.assertIn("reconnecting", types)
        self.assertIn("reconnected", types)
        self.assertEqual(bytes(lease.buffer[:5]), b"hello")
        st = c.status()
        self.assertEqual([(l["id"], l["bytes"], l["tag"]) for l in st["leases"]],
                         [(lease.id, lease.size, "latents")])
        [model] = st["models"]
        self.assertEqual((model["id"], model["name"], model["reservation_bytes"],
                          model["priority"]), (m.id, "vae", 8 << 20, 2))
        self.assertIn("took over lease", d2.log())
        lease.release()
        m.unregister()
        self.assertEqual(c.status()["devices"][0]["leased_bytes"], 0)
        c.close()

    def test_calls_wait_for_the_daemon_within_their_timeout(self):
        self.start_daemon()
        c = self.connect(name="strict")
        m = c.register_model("te", "4M")
        self.daemon.signal(signal.SIGKILL)
        self.daemon.wait()
        start = time.monotonic()
        with self.assertRaises(rocmmem.DaemonUnavailable) as cm:
            m.acquire(timeout=0.3)
        self.assertGreaterEqual(time.monotonic() - start, 0.25)
        self.assertEqual(cm.exception.errno, 107)  # ENOTCONN: reconnecting
        self.assertIn("reconnecting", cm.exception.strerror)
        self.assertEqual(c.state, "reconnecting")
        self.start_daemon(name="rocmmemd2")
        m.acquire(timeout=10)  # waits for the daemon, then for its memory
        self.assertTrue(c.available)
        m.release()

    def test_fail_safe_host_carries_on_then_is_coordinated_again(self):
        self.start_daemon()
        c = self.connect(name="host", fail_safe=True)
        m = c.register_model("flux", "4M", model_class="transformer")
        with m.use(timeout=5):
            pass
        self.daemon.signal(signal.SIGKILL)
        self.daemon.wait()
        start = time.monotonic()
        with self.assertLogs("rocmmem", "WARNING") as logs:
            with m.use(timeout=None):  # does not wait for the daemon: carries on
                pass
        self.assertLess(time.monotonic() - start, 1.0)
        self.assertIn("carrying on without it", logs.output[0])
        self.assertFalse(c.available)
        self.assertIsNone(c.status())
        with self.assertRaises(rocmmem.DaemonUnavailable):
            c.lease("2M")
        self.start_daemon(name="rocmmemd2")
        # The next calls give the library its chance: coordinated again, the model known.
        poll_until(lambda: c.status() is not None, timeout=10, what="the host to reconnect")
        self.assertTrue(c.available)
        [model] = c.status()["models"]
        self.assertEqual((model["id"], model["name"]), (m.id, "flux"))
        with m.use(timeout=5):
            pass
        c.close()

    def test_reconnect_false_and_the_environment(self):
        self.start_daemon()
        c = self.connect(name="final", reconnect=False)
        c.register_model("a", "2M")
        self.assertEqual(c.state, "connected")
        self.daemon.signal(signal.SIGKILL)
        self.daemon.wait()
        with self.assertRaises(rocmmem.DaemonUnavailable):
            c.status()
        self.assertEqual(c.state, "disconnected")
        with self.assertRaises(ValueError):
            rocmmem.connect(socket=self.sock, reconnect_window=0)


if __name__ == "__main__":
    unittest.main()
