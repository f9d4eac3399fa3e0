# SPDX-License-Identifier: MIT
"""The graceful stop (the drain): on SIGTERM the daemon stops listening, tells every client, and
gives the clients that hold memory up to --shutdown-timeout to let go; a client that holds
nothing goes at once, one that hangs is cut off at the deadline, a second signal ends the wait.
While draining, only what gives memory back is served."""
import errno
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import unittest

from fixture import (MiB, STATUS, Event, RawClient, ServiceTestCase, clean_env, poll_until,
                     service_env)

# A host through the Python package that holds a lease and does not let go during the drain.
PY_HOLDER = textwrap.dedent("""\
    import json, sys
    import rocmmem

    c = rocmmem.connect(socket=sys.argv[1], name="py-holder")
    events = []
    c.on_event = events.append
    lease = c.lease("10M")
    lease.buffer[:5] = b"hello"
    print("held", flush=True)
    sys.stdin.readline()  # the daemon has stopped meanwhile
    seen = {"before": [lease.revoked, lease.released]}
    try:
        c.status()  # the first call finds the connection ended
    except rocmmem.DaemonUnavailable as e:
        seen["error"] = e.errno
    seen["after_call"] = [lease.revoked, lease.released, c.state, c.available]
    try:
        while c.dispatch() > 0:
            pass
    except rocmmem.DaemonUnavailable:
        pass  # once the end was delivered
    seen["delivered"] = [lease.revoked, lease.released, lease.revoked_reason,
                         [e["type"] for e in events]]
    print(json.dumps(seen), flush=True)
    """)


class Drain(ServiceTestCase):
    def start(self, timeout_s):
        d = self.start_service(env=service_env(None),
                               extra=["--shutdown-timeout", str(timeout_s)])
        d.wait_ready()
        return d

    def test_a_client_that_lets_go_lets_the_daemon_exit_promptly(self):
        d = self.start(30)
        h = self.holder("10M", "--hold", "60")
        h.wait_stdout(r"^lease \d+:")
        start = time.monotonic()
        d.signal(signal.SIGTERM)
        self.assertEqual(d.wait(10.0), 0, d.log())
        self.assertLess(time.monotonic() - start, 10.0, "far less than the 30 s allowed")
        self.assertEqual(h.wait(), 3, h)
        self.assertIn("lost the lease: terminated (SIGTERM)", h.stderr())
        self.assertIn("waiting up to 30000 ms for 1 client(s)", d.log())
        self.assertRegex(d.log(), r"disconnected; reclaimed 10 MiB in 1 lease")
        self.assertNotIn("did not let go", d.log())
        self.assertFalse(os.path.lexists(self.sock))

    def test_a_client_that_hangs_is_cut_off_at_the_deadline(self):
        d = self.start(1)
        h = self.holder("10M", "--hold", "60")
        h.wait_stdout(r"^lease \d+:")
        self.freeze(h)
        start = time.monotonic()
        d.signal(signal.SIGTERM)
        self.assertEqual(d.wait(15.0), 0, d.log())
        self.assertGreaterEqual(time.monotonic() - start, 0.9, "it waited for the client")
        self.assertRegex(d.log(), r"did not let go within 1000 ms; disconnecting it and "
                                  r"reclaiming 10 MiB in 1 lease")
        h.signal(signal.SIGCONT)
        self.assertEqual(h.wait(), 3, h)

    def test_a_second_signal_ends_the_wait(self):
        d = self.start(60)
        h = self.holder("10M", "--hold", "60")
        h.wait_stdout(r"^lease \d+:")
        self.freeze(h)
        d.signal(signal.SIGTERM)
        poll_until(lambda: "waiting up to 60000 ms" in d.log(), what="the drain to start")
        self.assertTrue(d.running())
        d.signal(signal.SIGINT)
        self.assertEqual(d.wait(10.0), 0, d.log())
        self.assertIn("interrupted (SIGINT): not waiting any longer; disconnecting 1 client",
                      d.log())

    def test_a_python_lease_taken_at_the_deadline_says_revoked(self):
        preload = os.environ.get("ROCMMEM_PYTHON_PRELOAD")
        if preload == "":
            self.skipTest("the sanitizers' runtimes to preload into Python were not found")
        env = clean_env(**({"LD_PRELOAD": preload, "ASAN_OPTIONS": "detect_leaks=0"}
                           if preload else {}))
        d = self.start(1)
        p = subprocess.Popen([sys.executable, "-c", PY_HOLDER, self.sock], env=env,
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.addCleanup(lambda: p.poll() is None and (p.kill(), p.wait()))
        self.assertEqual(p.stdout.readline().strip(), "held")
        d.signal(signal.SIGTERM)
        self.assertEqual(d.wait(15.0), 0, d.log())
        self.assertRegex(d.log(), r"did not let go within 1000 ms; disconnecting it and "
                                  r"reclaiming 10 MiB in 1 lease")
        out, _ = p.communicate("go\n", timeout=30)
        seen = json.loads(out)
        # Nothing read yet: nothing known. The first call reads the daemon's last words (it
        # stops) and the end: the memory is gone, the connection ends for good.
        self.assertEqual(seen["before"], [False, False])
        self.assertEqual(seen["error"], errno.ECONNRESET)
        self.assertEqual(seen["after_call"], [True, False, "disconnected", False])
        revoked, released, reason, types = seen["delivered"]
        self.assertEqual((revoked, released), (True, True))
        self.assertIn("shutdown deadline", reason)
        self.assertEqual(types, ["shutdown", "lease_revoked", "disconnected"])

    def test_only_releases_are_served_while_draining(self):
        d = self.start(60)
        holder = RawClient(self.sock)
        self.addCleanup(holder.close)
        holder.hello("holder")
        lease = holder.lease(40 * MiB)
        waiting = holder.acquire(40 * MiB, timeout_ms=60000)  # cannot fit: it waits
        self.wait_status(lambda s: s["queue"], what="the waiting request")
        idle = RawClient(self.sock)
        self.addCleanup(idle.close)
        idle.hello("idle")

        d.signal(signal.SIGTERM)
        # The idle client is told why, then disconnected at once.
        ev = idle.receive()
        self.assertIsInstance(ev, Event)
        self.assertIn("SIGTERM", ev.shutdown_reason())
        self.assertIsNone(idle.receive(), "a client holding nothing is disconnected at once")
        # The holder is told too, and its waiting request is answered: it will never be met.
        r = holder.reply_to(waiting)
        self.assertEqual(r.error, -errno.ESHUTDOWN, r)
        self.assertEqual([e.shutdown_reason() for e in holder.events], ["terminated (SIGTERM)"])
        # New requests are refused; a release is served.
        r = holder.reply_to(holder.send(STATUS))
        self.assertEqual(r.error, -errno.ESHUTDOWN, r)
        self.assertIn("stopping", r.message)
        r = holder.reply_to(holder.acquire(2 * MiB))
        self.assertEqual(r.error, -errno.ESHUTDOWN, r)
        r = holder.reply_to(holder.release(lease))
        self.assertEqual(r.error, 0, r)
        # Holding nothing any more, it is disconnected, and the daemon exits long before 60 s.
        self.assertIsNone(holder.receive(), "disconnected once it holds nothing")
        self.assertEqual(d.wait(10.0), 0, d.log())
        self.assertIn("holds nothing any more: disconnecting it", d.log())


if __name__ == "__main__":
    unittest.main()
