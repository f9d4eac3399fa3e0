# SPDX-License-Identifier: MIT
"""Fail-safe mode: a host that must keep working without rocmmemd. Without a daemon the client
connects at once, its model, status and telemetry calls do nothing, and lease() raises
DaemonUnavailable; a daemon that stops (or is killed) mid-run degrades it the same way."""
import os
import select
import signal
import socket
import time
import unittest

from fixture import PyTestCase, child_env, rocmmem, run_python


class FailSafeTest(PyTestCase):
    def assert_does_nothing(self, c):
        self.assertFalse(c.available)
        self.assertTrue(c.unavailable_reason)
        self.assertIsNone(c.status())
        self.assertIsNone(c.metrics())
        self.assertEqual(c.trim(), 0)
        self.assertIsNone(c.subscribe(interval=0.05))
        c.unsubscribe()
        self.assertIn(c.dispatch(), (0, 1))  # 1: the end of a connection, delivered once
        self.assertEqual(c.dispatch(), 0)
        m = c.register_model("flux", "8G", model_class="transformer")
        self.assertIsInstance(m, rocmmem.Model)
        start = time.monotonic()
        with m.use(timeout=None):
            m.acquire(timeout=None)
            m.release()
        m.resize("16G", timeout=None)
        m.pin()
        self.assertEqual(m.evict(), (0, False))
        self.assertEqual(c.evict_model(m), (0, False))
        c.pin_model(m, False)
        m.evict_ack()
        m.unregister()
        self.assertLess(time.monotonic() - start, 1.0, "a model call waited")
        with self.assertRaises(rocmmem.DaemonUnavailable) as cm:
            c.lease("2M")
        self.assertTrue(cm.exception.strerror)
        r, _, _ = select.select([c.fileno()], [], [], 0.05)
        self.assertEqual(r, [], "the fileno() of a client without a daemon is never readable")

    def test_no_daemon(self):
        missing = os.path.join(self.dir, "missing.sock")
        start = time.monotonic()
        with self.assertLogs("rocmmem", "WARNING") as logs:
            c = rocmmem.connect(socket=missing, name="host", fail_safe=True)  # timeout 5.0
        self.assertLess(time.monotonic() - start, 1.0, "fail-safe connect did not fail fast")
        self.assertIn("carrying on without it", logs.output[0])
        self.assertIn(missing, c.unavailable_reason)
        self.assert_does_nothing(c)
        self.assertIsNone(c.start_event_thread())
        got = []
        c.on_event = got.append
        c.close()
        c.close()
        self.assertEqual(got, [])
        with rocmmem.connect(socket=missing, fail_safe=True) as c2:
            self.assertFalse(c2.available)
        # Without fail_safe the same is an error.
        with self.assertRaises(rocmmem.DaemonUnavailable):
            rocmmem.connect(socket=missing, timeout=0)

    def test_socket_that_refuses_is_waited_for_up_to_the_timeout(self):
        stale = os.path.join(self.dir, "stale.sock")
        s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        s.bind(stale)  # a socket file nobody listens on: a daemon that crashed or restarts
        s.close()
        start = time.monotonic()
        c = rocmmem.connect(socket=stale, fail_safe=True, timeout=0.3)
        elapsed = time.monotonic() - start
        self.assertFalse(c.available)
        self.assertGreaterEqual(elapsed, 0.25)
        self.assertLess(elapsed, 3)
        self.assert_does_nothing(c)
        c.close()

    def test_daemon_that_stops_mid_run(self):
        self.start_daemon(extra=["--shutdown-timeout", "0.5"])
        c = self.connect(name="host", fail_safe=True)
        self.assertTrue(c.available)
        m = c.register_model("vae", "4M", model_class="vae")
        m.acquire(timeout=5)
        self.assertTrue(m.resident)
        lease = c.lease("2M")
        lease.buffer[:3] = b"abc"
        c.subscribe(samples=True, events=True, interval=0.05)
        t = c.start_event_thread()
        self.daemon.stop()
        t.join(10)
        self.assertFalse(t.is_alive(), "the event thread goes when the connection ends")
        self.assertFalse(c.available)
        m.release()  # no raise
        self.assert_does_nothing(c)
        m.acquire()
        m.release()
        lease.release()  # the daemon is gone: nothing to tell it, no error
        c.close()

    def test_daemon_killed_mid_run_without_dispatching(self):
        # reconnect=False: a daemon that never comes back, as before reconnection existed
        # (with it, the client would try again, its fileno() waking at each attempt:
        # test_reconnect.py covers that).
        self.start_daemon()
        c = self.connect(name="host", fail_safe=True, reconnect=False)
        m = c.register_model("te", "4M", model_class="text_encoder")
        with m.use():
            pass
        self.daemon.signal(signal.SIGKILL)
        self.daemon.wait()
        with self.assertLogs("rocmmem", "WARNING"):
            with m.use(timeout=None):  # the first call to notice: degrades, no raise
                pass
        self.assert_does_nothing(c)

    def test_not_fail_safe_raises_when_the_daemon_goes(self):
        # reconnect=False: the loss is final (with reconnection, acquire(timeout=None) would
        # wait for the daemon to come back: test_reconnect.py).
        self.start_daemon()
        c = self.connect(name="strict", reconnect=False)
        m = c.register_model("te", "4M")
        self.daemon.signal(signal.SIGKILL)
        self.daemon.wait()
        with self.assertRaises(rocmmem.DaemonUnavailable):
            m.acquire()
        with self.assertRaises(rocmmem.DaemonUnavailable):
            c.status()
        self.assertFalse(c.available)

    def test_fail_safe_host_script_without_library_and_daemon(self):
        # The pattern docs/python.md shows for hosts: works with neither library nor daemon.
        code = """
            import rocmmem
            client = rocmmem.connect(name="host", fail_safe=True)
            vae = client.register_model("vae", "2G", model_class="vae",
                                        on_evict=lambda m: None)
            with vae.use():
                print("computed", client.available)
            """
        for env in (child_env(ROCMMEM_LIBRARY="/nonexistent.so",
                              ROCMMEM_SOCKET=os.path.join(self.dir, "none.sock")),
                    child_env(ROCMMEM_SOCKET=os.path.join(self.dir, "none.sock"))):
            p = run_python(code, env=env)
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertEqual(p.stdout, "computed False\n")


if __name__ == "__main__":
    unittest.main()
