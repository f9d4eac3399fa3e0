# SPDX-License-Identifier: MIT
"""Warning lines a client causes at will are rate-limited per client (daemon/service/eventlog.c):
a client polling at 20 Hz with requests that are refused writes a bounded number of lines (at
most EVENTLOG_CLIENT_BURST per EVENTLOG_CLIENT_INTERVAL_MS, from the run's duration), the lines
held back are counted and said (with the next line written, and in a summary when the client
leaves), and another client's lines are not held back by it. Real daemon, real socket, the
Python code protoc generates from proto/rocmmem.proto."""
import errno
import os
import re
import sys
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from test_third_party import Conn, MiB, pb  # noqa: E402
from daemon import CliTestCase, poll_until  # noqa: E402

BURST, INTERVAL_S = 10, 10.0  # EVENTLOG_CLIENT_BURST, EVENTLOG_CLIENT_INTERVAL_MS (eventlog.h)
HELD = re.compile(r" \(and (\d+) more line\(s\) about this client not logged\)$")
SUMMARY = re.compile(r"pid \d+ '(\S+)': (\d+) more warning line\(s\) about it not logged")


@unittest.skipIf(pb is None, "protoc (protobuf-compiler) and python3-protobuf are needed")
class Warnings(CliTestCase):
    def conn(self, name):
        c = Conn(self.sock)
        self.addCleanup(c.close)
        c.hello(name)
        return c

    def refuse(self, c, size, n, hz):
        """Sends n lease requests of size that are refused at once, hz per second."""
        t0 = time.monotonic()
        for i in range(n):
            r = c.call(lease_acquire=pb.LeaseAcquire(size=size))
            self.assertEqual(r.error, -errno.ENOMEM, r)
            pause = t0 + (i + 1) / hz - time.monotonic()
            if pause > 0:
                time.sleep(pause)
        return time.monotonic() - t0

    def test_poller(self):
        d = self.start_daemon(budget="64M")
        full = self.conn("full")
        self.assertEqual(full.call(lease_acquire=pb.LeaseAcquire(size=64 * MiB)).error, 0)
        poller = self.conn("poller")
        n = 60
        spent = self.refuse(poller, 40 * MiB, n, 20)
        # Another client is not held back by the poller's lines.
        other = self.conn("other")
        self.refuse(other, 24 * MiB, 1, 20)
        poller.close()
        poll_until(lambda: SUMMARY.search(d.log()), timeout=10, what="the poller's summary")
        lines = [l for l in d.log().splitlines() if "requested 40 MiB" in l]
        bound = BURST * (int(spent // INTERVAL_S) + 1)
        self.assertGreaterEqual(len(lines), 1)
        self.assertLessEqual(len(lines), bound, "\n".join(lines))
        held = sum(int(m.group(1)) for m in map(HELD.search, lines) if m)
        said = [m for m in map(SUMMARY.search, d.log().splitlines()) if m]
        self.assertEqual([m.group(1) for m in said], ["poller"])
        # Every refusal is either a line or counted in one.
        self.assertEqual(len(lines) + held + int(said[0].group(2)), n, (lines, said))
        self.assertEqual(len([l for l in d.log().splitlines() if "requested 24 MiB" in l]), 1)


if __name__ == "__main__":
    unittest.main()
