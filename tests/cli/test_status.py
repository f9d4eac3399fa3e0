# SPDX-License-Identifier: MIT
"""rocmmemctl status (JSON contract and table) and lease, against a real rocmmemd."""
import json
import os
import re
import signal
import unittest

from daemon import BUDGET, MiB, CliTestCase, poll_until

LEASE_LINE = r"^lease (\d+): (.+) on device (\d+)(?: \(tag '([^']*)'\))?; holding it"


class StatusJson(CliTestCase):
    def setUp(self):
        super().setUp()
        self.start_daemon()

    def check_schema(self, st):
        """The fields of the stable contract, with their types."""
        self.assertEqual(st["schema_version"], 1)
        for key in ("daemon", "devices", "clients", "leases", "models", "queue"):
            self.assertIn(key, st)
        self.assertIsInstance(st["daemon"], dict)
        for key in ("devices", "clients", "leases", "models", "queue"):
            self.assertIsInstance(st[key], list, key)
        d = st["daemon"]
        self.assertIsInstance(d["version"], str)
        self.assertRegex(d["version"], r"^\d+\.\d+\.\d+")
        self.assertIs(type(d["pid"]), int)
        self.assertIs(type(d["uptime_s"]), int)
        self.assertGreaterEqual(d["uptime_s"], 0)
        self.assertEqual(d["backend"], "host")
        self.assertGreater(d["fds_open"], 0)
        self.assertGreaterEqual(d["fds_limit"], d["fds_open"])
        for dev in st["devices"]:
            for key in ("index", "total_bytes", "budget_bytes", "leased_bytes", "free_bytes"):
                self.assertIs(type(dev[key]), int, key)
            self.assertIsInstance(dev["name"], str)
            self.assertEqual(dev["backend"], "host")
        for c in st["clients"]:
            for key in ("pid", "uid", "leases", "leased_bytes"):
                self.assertIs(type(c[key]), int, key)
            self.assertIsInstance(c["name"], str)
        for l in st["leases"]:
            for key in ("id", "owner_pid", "device", "bytes"):
                self.assertIs(type(l[key]), int, key)
            self.assertIsInstance(l["tag"], str)
        for w in st["queue"]:
            for key in ("owner_pid", "device", "bytes"):
                self.assertIs(type(w[key]), int, key)

    def check_consistent(self, st):
        """Devices, clients and leases add up."""
        for dev in st["devices"]:
            mine = [l for l in st["leases"] if l["device"] == dev["index"]]
            self.assertEqual(dev["leased_bytes"], sum(l["bytes"] for l in mine))
            self.assertEqual(dev["free_bytes"], dev["budget_bytes"] - dev["leased_bytes"])
        for c in st["clients"]:
            mine = [l for l in st["leases"] if l["owner_pid"] == c["pid"]]
            self.assertEqual(c["leases"], len(mine))
            self.assertEqual(c["leased_bytes"], sum(l["bytes"] for l in mine))

    def test_idle_daemon(self):
        # The status process is a client too, but not one status lists. Poll until there is
        # none: the fixture's readiness probe may still be connected for a moment.
        box = {}

        def alone():
            box["r"] = r = self.ctl("status", "--json")
            self.assertEqual(r.rc, 0, r)
            return r.json()["clients"] == []

        poll_until(alone, what="no client but the status query")
        r = box["r"]
        self.assertEqual(r.stderr, "")
        self.assertEqual(r.stdout.count("\n"), 1, "one JSON document on one line")
        st = r.json()
        self.check_schema(st)
        self.assertEqual(st["daemon"]["pid"], self.daemon.pid)
        self.assertEqual(len(st["devices"]), 1)
        dev = st["devices"][0]
        self.assertEqual(dev["index"], 0)
        self.assertEqual(dev["budget_bytes"], BUDGET)
        self.assertEqual(dev["budget_bytes"], 67108864)
        self.assertEqual(dev["leased_bytes"], 0)
        self.assertEqual(dev["free_bytes"], BUDGET)
        self.assertGreaterEqual(dev["total_bytes"], BUDGET)
        self.assertEqual(st["leases"], [])
        self.assertEqual(st["models"], [])
        self.assertEqual(st["queue"], [])
        self.assertEqual(st["clients"], [], "the query's own connection is left out")
        # --backend host was asked for: no fallback.
        self.assertIs(st["daemon"]["host_fallback"], False)
        self.assertEqual(st["daemon"]["host_fallback_reason"], "")

    def test_global_json_option_is_the_same(self):
        a = self.ctl("--json", "status")
        b = self.ctl("status", "--json")
        c = self.ctl("-j", "status")
        for r in (a, b, c):
            self.assertEqual(r.rc, 0, r)
            self.assertEqual(r.stderr, "", r)
            self.check_schema(r.json())
        # Equal but for the per-run parts: the querying client and the uptime.
        sa, sb = a.json(), b.json()
        for s in (sa, sb):
            s["daemon"].pop("uptime_s")
            s.pop("clients")
        self.assertEqual(sa, sb)

    def test_lease_appears_and_goes_in_real_time(self):
        h = self.holder("10M", "--hold", "30", "--tag", "alpha")
        m = h.wait_stdout(LEASE_LINE)
        lease_id = int(m.group(1))
        self.assertEqual(m.group(2), "10 MiB")
        self.assertEqual(m.group(3), "0")
        self.assertEqual(m.group(4), "alpha")
        self.assertIn(f"(pid {h.pid})", h.stdout())

        st = self.wait_status(lambda s: self.lease_by_owner(s, h.pid), what="lease alpha")
        self.check_schema(st)
        self.check_consistent(st)
        l = self.lease_by_owner(st, h.pid)
        self.assertEqual(l["id"], lease_id)
        self.assertEqual(l["bytes"], 10485760)
        self.assertEqual(l["tag"], "alpha")
        self.assertEqual(l["device"], 0)
        dev = st["devices"][0]
        self.assertEqual(dev["leased_bytes"], 10 * MiB)
        self.assertEqual(dev["free_bytes"], BUDGET - 10 * MiB)
        holder = [c for c in st["clients"] if c["pid"] == h.pid]
        self.assertEqual(len(holder), 1, st["clients"])
        self.assertEqual(holder[0]["leases"], 1)
        self.assertEqual(holder[0]["leased_bytes"], 10 * MiB)
        self.assertEqual(holder[0]["uid"], os.getuid())
        self.assertEqual(holder[0]["name"], "rocmmemctl")

        # 3M is granted as two 2 MiB granules.
        h3 = self.holder("3M", "--hold", "30")
        m3 = h3.wait_stdout(LEASE_LINE)
        self.assertEqual(m3.group(2), "4 MiB")
        self.assertIsNone(m3.group(4))
        self.assertNotEqual(int(m3.group(1)), lease_id)
        st = self.wait_status(lambda s: self.lease_by_owner(s, h3.pid), what="the 3M lease")
        self.check_consistent(st)
        l3 = self.lease_by_owner(st, h3.pid)
        self.assertEqual(l3["bytes"], 4 * MiB)
        self.assertEqual(l3["tag"], "")
        self.assertEqual(st["devices"][0]["leased_bytes"], 14 * MiB)
        self.assertEqual(st["devices"][0]["free_bytes"], BUDGET - 14 * MiB)

        # Ctrl-C releases cleanly.
        h.signal(signal.SIGINT)
        self.assertEqual(h.wait(), 0, h)
        self.assertRegex(h.stdout(), rf"(?m)^released lease {lease_id}$")
        self.assertEqual(h.stderr(), "")
        st = self.status()
        self.assertIsNone(self.lease_by_owner(st, h.pid))
        self.assertEqual(st["devices"][0]["leased_bytes"], 4 * MiB)
        self.wait_status(lambda s: h.pid not in [c["pid"] for c in s["clients"]],
                         what="the released holder to disconnect")

        # SIGKILL: the daemon reclaims the lease when the connection drops, within 1 s.
        h3.signal(signal.SIGKILL)
        self.assertEqual(h3.wait(), -signal.SIGKILL)
        st = self.wait_status(lambda s: not s["leases"], timeout=1.0,
                              what="the killed holder's lease to go")
        self.check_consistent(st)
        self.assertEqual(st["devices"][0]["leased_bytes"], 0)
        self.assertEqual(st["devices"][0]["free_bytes"], BUDGET)
        self.assertEqual([c for c in st["clients"] if c["pid"] == h3.pid], [])

    def test_waiter_shows_in_queue_then_is_granted(self):
        h = self.holder("10M", "--hold", "30")
        h.wait_stdout(LEASE_LINE)
        w = self.holder("60M", "--timeout", "10", "--tag", "waiting")
        st = self.wait_status(lambda s: s["queue"], what="the 60M request in the queue")
        self.check_schema(st)
        self.assertEqual(len(st["queue"]), 1, st["queue"])
        q = st["queue"][0]
        self.assertEqual(q["owner_pid"], w.pid)
        self.assertEqual(q["bytes"], 60 * MiB)
        self.assertEqual(q["device"], 0)
        self.assertEqual(st["devices"][0]["leased_bytes"], 10 * MiB)
        self.assertIsNone(self.lease_by_owner(st, w.pid))
        self.assertTrue(w.running())
        self.assertEqual(w.stdout(), "")

        h.signal(signal.SIGINT)
        self.assertEqual(h.wait(), 0, h)
        m = w.wait_stdout(LEASE_LINE)
        self.assertEqual(m.group(2), "60 MiB")
        self.assertEqual(m.group(4), "waiting")
        st = self.status()
        self.assertEqual(st["queue"], [])
        l = self.lease_by_owner(st, w.pid)
        self.assertIsNotNone(l, st)
        self.assertEqual(l["id"], int(m.group(1)))
        self.assertEqual(l["bytes"], 60 * MiB)
        self.assertEqual(l["tag"], "waiting")
        self.assertEqual(st["devices"][0]["leased_bytes"], 60 * MiB)
        self.assertEqual(st["devices"][0]["free_bytes"], 4 * MiB)

        w.signal(signal.SIGTERM)
        self.assertEqual(w.wait(), 0, w)
        self.assertIn(f"released lease {m.group(1)}", w.stdout())
        self.assertEqual(self.status()["leases"], [])


class StatusTable(CliTestCase):
    def setUp(self):
        super().setUp()
        self.start_daemon()

    def test_idle_table(self):
        r = self.ctl("status")
        self.assertEqual(r.rc, 0, r)
        self.assertEqual(r.stderr, "")
        self.assertIn(f"pid {self.daemon.pid}", r.stdout)
        self.assertRegex(r.stdout, r"(?m)^DEVICE\s+NAME\s+TOTAL\s+BUDGET\s+LEASED\s+FREE")
        self.assertRegex(r.stdout, r"(?m)^0\s+.*\s64 MiB\s+0 B\s+64 MiB\s")
        self.assertNotRegex(r.stdout, r"(?m)^LEASE\s+PID", "no lease table without leases")
        # The daemon's descriptors against its limit, as /proc counts them: rocmmemctl's
        # connection was among them and is gone by the time /proc is read (a connection costs
        # the daemon up to three: its socket, a pidfd, a grant's fd; docs/security.md).
        fds = re.search(r"(?m)^fds (\d+) of (\d+)$", r.stdout)
        self.assertIsNotNone(fds, r.stdout)
        now = len(os.listdir(f"/proc/{self.daemon.pid}/fd"))
        self.assertLessEqual(abs(int(fds.group(1)) - now), 3, (fds.group(0), now))
        self.assertLessEqual(int(fds.group(1)), int(fds.group(2)))
        with self.assertRaises(ValueError):
            r.json()

    def test_table_lists_the_lease(self):
        h = self.holder("10M", "--hold", "30", "--tag", "alpha")
        m = h.wait_stdout(LEASE_LINE)
        r = self.ctl("status")
        self.assertEqual(r.rc, 0, r)
        self.assertRegex(r.stdout, r"(?m)^DEVICE\s+NAME")
        self.assertRegex(r.stdout, r"(?m)^0\s+.*\s64 MiB\s+10 MiB\s+54 MiB\s+1\s+0$")
        self.assertRegex(r.stdout, r"(?m)^LEASE\s+PID\s+DEVICE\s+SIZE\s+AGE\s+TAG$")
        self.assertRegex(r.stdout, rf"(?m)^{m.group(1)}\s+{h.pid}\s+0\s+10 MiB\s+\S+\s+alpha$")


class LeaseJson(CliTestCase):
    def setUp(self):
        super().setUp()
        self.start_daemon()

    def test_lease_json_object(self):
        for args in (("lease", "--json", "3M", "--hold", "0", "--tag", "j"),
                     ("--json", "lease", "3M", "--hold", "0", "--tag", "j")):
            r = self.ctl(*args)
            self.assertEqual(r.rc, 0, r)
            self.assertEqual(r.stderr, "", r)
            self.assertEqual(r.stdout.count("\n"), 1, r)
            o = r.json()
            self.assertIsInstance(o, dict)
            self.assertIs(type(o["id"]), int)
            self.assertEqual(o["device"], 0)
            self.assertEqual(o["bytes"], 4 * MiB)
            self.assertEqual(o["tag"], "j")
        self.assertEqual(self.status()["leases"], [])

    def test_lease_json_matches_status(self):
        h = self.holder("--json", "8M", "--hold", "30")
        h.wait_stdout(r"^\{.*\}$")
        o = json.loads(h.stdout())
        self.assertEqual(o["bytes"], 8 * MiB)
        self.assertEqual(o["tag"], "")
        l = self.lease_by_owner(self.status(), h.pid)
        self.assertIsNotNone(l)
        self.assertEqual(l["id"], o["id"])
        self.assertEqual(l["bytes"], o["bytes"])
        h.signal(signal.SIGINT)
        self.assertEqual(h.wait(), 0, h)
        self.assertEqual(h.stdout().count("\n"), 1, "JSON mode prints only the object")
        self.assertEqual(self.status()["leases"], [])


if __name__ == "__main__":
    unittest.main()
