# SPDX-License-Identifier: MIT
"""rocmmemd's notifications to the service manager, received on a real $NOTIFY_SOCKET the test
binds: READY=1 only once the socket accepts, a STATUS= line that follows leases and waiters,
WATCHDOG=1 at half the watchdog interval (and only when expected), STOPPING=1 on SIGTERM."""
import os
import re
import signal
import time
import unittest

from fixture import RawClient, ServiceTestCase, protocol_version, service_env

IDLE = "0 clients, 0 leases, 0 B of 64 MiB leased, 0 waiting"


class Ready(ServiceTestCase):
    def test_ready_only_once_the_socket_accepts(self):
        d = self.start_service()
        ready = self.wait_ready(d)
        # The moment READY=1 arrives, a client is served: connect and say hello.
        c = RawClient(self.sock)
        self.addCleanup(c.close)
        hello = c.hello()
        self.assertEqual(hello[1][0], protocol_version())
        self.assertEqual(ready.get("STATUS"), IDLE, ready)
        self.assertIn("listening on", d.log())
        # READY=1 comes once (a reload would send it again; there was none).
        later = self.notify.collect(1.5)
        self.assertFalse([n for n in later if n.get("READY")], later)

    def test_nothing_is_sent_outside_systemd(self):
        d = self.start_service(env=service_env(None))
        d.wait_ready()
        self.assertEqual(self.ctl("status").rc, 0)
        self.assertEqual(self.notify.collect(1.0), [])
        self.assertNotIn("watchdog", d.log())


class Status(ServiceTestCase):
    def wait_status(self, line, timeout=10.0):
        return self.notify.wait_for(lambda n: n.get("STATUS") == line, timeout,
                                    what=f"STATUS={line}")

    def test_status_follows_leases_and_waiters(self):
        d = self.start_service()
        self.wait_ready(d)
        h1 = self.holder("10M", "--hold", "60")
        h1.wait_stdout(r"^lease \d+:")
        self.wait_status("1 client, 1 lease, 10 MiB of 64 MiB leased, 0 waiting")
        h2 = self.holder("60M", "--timeout", "60")
        self.wait_status("2 clients, 1 lease, 10 MiB of 64 MiB leased, 1 waiting")
        h1.signal(signal.SIGINT)  # releases: the waiter gets its 60 MiB
        self.assertEqual(h1.wait(), 0, h1)
        h2.wait_stdout(r"^lease \d+:")
        self.wait_status("1 client, 1 lease, 60 MiB of 64 MiB leased, 0 waiting")
        h2.signal(signal.SIGINT)
        self.assertEqual(h2.wait(), 0, h2)
        self.wait_status(IDLE)
        # A change is sent at most once a second: never more lines than seconds run, plus
        # the first and READY's own.
        lines = [n for n in self.notify.seen if n.get("STATUS") and not n.get("READY")]
        ran = time.monotonic() - self.spawned_at
        self.assertLessEqual(len(lines), int(ran) + 2, self.notify.seen)


class Watchdog(ServiceTestCase):
    def test_pings_at_half_the_interval(self):
        d = self.start_service(env=service_env(self.notify.path, WATCHDOG_USEC="400000"),
                               own_watchdog_pid=True)
        self.wait_ready(d)
        window = self.notify.collect(3.0)
        pings = [n for n in window if n.get("WATCHDOG") == "1"]
        # Every 200 ms: 15 expected in 3 s (a ping every 400 ms, the whole interval, would
        # give 7). A loaded machine sends fewer; never more than twice as many.
        self.assertGreaterEqual(len(pings), 10, window)
        every = [n for n in self.notify.seen if n.get("WATCHDOG") == "1"]
        ran = time.monotonic() - self.spawned_at
        self.assertLessEqual(len(every), 2 * ran / 0.2 + 1, self.notify.seen)
        self.assertRegex(d.log(), r"systemd watchdog: 400 ms; pinging every 200 ms")

    def test_no_pings_unless_expected_from_this_process(self):
        cases = {
            "no WATCHDOG_USEC": service_env(self.notify.path),
            "WATCHDOG_PID of another process": service_env(self.notify.path,
                                                           WATCHDOG_USEC="400000",
                                                           WATCHDOG_PID="1"),
        }
        for what, env in cases.items():
            with self.subTest(what):
                d = self.start_service(env=env)
                self.wait_ready(d)
                window = self.notify.collect(1.2)
                self.assertFalse([n for n in window if n.get("WATCHDOG")], window)
                self.assertEqual(d.stop(), 0, d.log())


class Stopping(ServiceTestCase):
    def test_stopping_on_sigterm_while_draining(self):
        d = self.start_service(extra=["--shutdown-timeout", "30"])
        self.wait_ready(d)
        h = self.holder("10M", "--hold", "60")
        h.wait_stdout(r"^lease \d+:")
        self.freeze(h)  # it cannot let go: the daemon drains until told again
        d.signal(signal.SIGTERM)
        stopping = self.notify.wait_for(lambda n: n.get("STOPPING") == "1",
                                        what="STOPPING=1")
        self.assertTrue(d.running(), "STOPPING=1 comes while the daemon still drains")
        self.assertEqual(stopping.get("STATUS"), "stopping: 1 client left", stopping)
        # The drain may outlast TimeoutStopSec: the daemon asks for its timeout plus 10 s.
        self.assertEqual(stopping.get("EXTEND_TIMEOUT_USEC"), str(40 * 1000 * 1000), stopping)
        d.signal(signal.SIGTERM)  # a second one cuts the drain short
        self.assertEqual(d.wait(), 0, d.log())
        after = self.notify.seen[self.notify.seen.index(stopping) + 1:]
        after += self.notify.collect(0.2)
        for n in after:
            self.assertIsNone(n.get("READY"), after)
            self.assertRegex(n.get("STATUS") or "stopping", r"^stopping", after)

    def test_stopping_without_clients(self):
        d = self.start_service()
        self.wait_ready(d)
        d.signal(signal.SIGTERM)
        stopping = self.notify.wait_for(lambda n: n.get("STOPPING") == "1",
                                        what="STOPPING=1")
        self.assertEqual(stopping.get("STATUS"), "stopping: 0 clients left", stopping)
        self.assertEqual(d.wait(), 0, d.log())
        self.assertFalse(os.path.lexists(self.sock))
        self.assertTrue(re.search(r"stopping: terminated \(SIGTERM\)", d.log()), d.log())


class Reloading(ServiceTestCase):
    def write_config(self, text):
        path = os.path.join(self.dir, "rocmmemd.conf")
        with open(path + ".tmp", "w") as f:
            f.write(text)
        os.replace(path + ".tmp", path)
        return path

    def reload(self, d):
        """SIGHUP; returns (RELOADING=1 notification, the READY=1 after it)."""
        start = len(self.notify.seen)
        d.signal(signal.SIGHUP)
        reloading = self.notify.wait_for(lambda n: n.get("RELOADING") == "1",
                                         what="RELOADING=1")
        ready = self.notify.wait_for(lambda n: n.get("READY") == "1", what="READY=1 again")
        self.assertLessEqual(start, self.notify.seen.index(reloading))
        self.assertLess(self.notify.seen.index(reloading), self.notify.seen.index(ready))
        return reloading, ready

    def test_reloading_then_ready(self):
        path = self.write_config("[devices]\nbudget = 64M\n")
        d = self.start_service(extra=["--config", path], budget=None)
        self.wait_ready(d)
        self.write_config("[devices]\nbudget = 32M\n")
        before = time.clock_gettime(time.CLOCK_MONOTONIC)
        reloading, ready = self.reload(d)
        # MONOTONIC_USEC: when the reload began, on CLOCK_MONOTONIC (systemd 253+ checks it).
        usec = int(reloading.get("MONOTONIC_USEC"))
        self.assertGreaterEqual(usec, int(before * 1e6) - 1000)
        self.assertLessEqual(usec, int(time.clock_gettime(time.CLOCK_MONOTONIC) * 1e6))
        self.assertEqual(ready.get("STATUS"), "0 clients, 0 leases, 0 B of 32 MiB leased, "
                         "0 waiting", ready)
        # A broken file: READY=1 all the same (the old configuration serves), and it says so.
        self.write_config("[devices]\nbudget = lots\n")
        _, ready = self.reload(d)
        self.assertRegex(ready.get("STATUS"), r"the last reload failed", ready)
        self.assertEqual(self.status()["devices"][0]["budget_bytes"], 32 << 20)


if __name__ == "__main__":
    unittest.main()
