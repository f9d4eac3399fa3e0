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

    def test_what_awaits_re_declaration_is_listed(self):
        # A holder that is busy (no call, no event thread) re-declares nothing yet: the new
        # daemon accounts its memory and lists it as awaiting, by process, everywhere status
        # is shown.
        self.start_daemon(extra=["--restart-grace", "30"])
        h = self.python("""
            c = rocmmem.connect(socket=SOCK, name="busy-host")
            lease = c.lease("4M")
            m = c.register_model("unet", "2M")
            m.acquire(timeout=5)
            say("held", os.getpid())
            time.sleep(60)
            """, name="busy-host")
        pid = int(h.wait_stdout(r"^held (\d+)$").group(1))
        self.daemon.signal(signal.SIGKILL)
        self.daemon.wait()
        self.start_daemon(name="rocmmemd2", extra=["--restart-grace", "30"])
        c = self.connect(name="observer")
        st = c.status()
        [w] = st["awaiting_redeclare"]
        self.assertEqual((w["pid"], w["device"], w["leases"], w["lease_bytes"], w["models"],
                          w["reserved_bytes"], w["bytes"]),
                         (pid, 0, 1, 4 << 20, 1, 2 << 20, 6 << 20))
        self.assertTrue(0 < w["grace_left_ms"] <= 30000, w)
        self.assertEqual(st["devices"][0]["awaiting_redeclare_bytes"], 6 << 20)
        self.assertEqual(st["devices"][0]["leased_bytes"], 4 << 20)
        self.assertEqual(st["leases"], [])
        ctl = self.ctl_json("status")
        self.assertEqual(ctl["awaiting_redeclare"][0]["pid"], pid)
        self.assertEqual(ctl["awaiting_redeclare"][0]["bytes"], 6 << 20)
        table = self.ctl("status")
        self.assertEqual(table.rc, 0, table)
        self.assertIn("AWAITING RE-DECLARATION", table.stdout)
        self.assertRegex(table.stdout, rf"(?m)^{pid} +\d+ +0 +1 +4 MiB +1 +2 MiB +\d")

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
