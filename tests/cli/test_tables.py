# SPDX-License-Identifier: MIT
"""rocmmemctl's tables against a real rocmmemd: RESERVED and MODELS of clients, -o, --csv,
--bytes, --noheadings, whole device names, the query's own connection left out."""
import csv
import io
import os
import re
import unittest

from daemon import MiB, clean_env, poll_until, rocmmemctl_bin
from test_models import ModelTestCase


def table(text):
    """A table's lines split into cells on runs of blanks: [[heading...], [cell...], ...]."""
    return [line.split() for line in text.splitlines()]


class Clients(ModelTestCase):
    def setUp(self):
        super().setUp()
        self.start_daemon()

    def test_reserved_and_models(self):
        """What a client holds through its models is in its row, and in --json."""
        h, _ = self.host("flux:transformer:24M", "vae:vae:6M")
        lease = self.holder("4M", "--hold", "30")
        lease.wait_stdout(r"^lease \d+:")
        st = self.wait_status(lambda s: len(s["clients"]) == 2, what="two clients")
        mine = {c["pid"]: c for c in st["clients"]}
        self.assertEqual((mine[h.pid]["reserved_bytes"], mine[h.pid]["models"]),
                         (30 * MiB, 2))
        self.assertEqual((mine[h.pid]["leased_bytes"], mine[lease.pid]["leased_bytes"]),
                         (0, 4 * MiB))
        self.assertEqual((mine[lease.pid]["reserved_bytes"], mine[lease.pid]["models"]), (0, 0))
        r = self.ctl("status", "clients")
        self.assertEqual(r.rc, 0, r)
        rows = table(r.stdout)
        self.assertEqual(rows[0], ["PID", "UID", "CLIENT", "LEASES", "LEASED", "RESERVED",
                                   "MODELS", "CONNECTED", "DECLARED", "MEASURED", "UNDECLARED"])
        by_pid = {row[0]: row for row in rows[1:]}
        self.assertEqual(by_pid[str(h.pid)][2:9], ["model_host", "0", "0", "B", "30", "MiB",
                                                   "2"])
        self.assertEqual(by_pid[str(lease.pid)][2:9], ["rocmmemctl", "1", "4", "MiB", "0", "B",
                                                       "0"])
        # Host memory: what each declared, and that nothing measures what it holds.
        self.assertEqual(by_pid[str(h.pid)][-5:], ["30", "MiB", "cannot", "measure", "-"])
        self.assertEqual(by_pid[str(lease.pid)][-5:], ["4", "MiB", "cannot", "measure", "-"])
        self.assertEqual((mine[h.pid]["declared_bytes"], mine[h.pid]["measurable"],
                          mine[h.pid]["measured"], mine[h.pid]["books"]),
                         (30 * MiB, False, "cannot measure: no per-process device memory here",
                          [{"device": 0, "declared_bytes": 30 * MiB, "measurable": False}]))
        self.assertNotIn("measured_bytes", mine[lease.pid])
        self.assertNotIn(str(r.pid), by_pid, "the query itself is no client to list")
        # The whole view shows the same table.
        view = self.ctl("status").stdout
        self.assertRegex(view, rf"(?m)^{h.pid}\s+\d+\s+model_host\s+0\s+0 B\s+30 MiB\s+2\s")

    def test_arena(self):
        """A client's host arena (twice the 64M budget) in --json, -o +ARENA and the view's
        line under the table; a client without arenas has none."""
        a = self.holder("6M", "--hold", "30", name="arena")
        b = self.background([rocmmemctl_bin(), "--socket", self.sock, "lease", "4M", "--hold",
                             "30"], "no-arena", env=clean_env(ROCMMEM_HOST_ARENA="0"))
        for h in (a, b):
            h.wait_stdout(r"^lease \d+:")
        st = self.wait_status(lambda s: len(s["clients"]) == 2, what="two clients")
        mine = {c["pid"]: c for c in st["clients"]}
        self.assertEqual(mine[a.pid]["arena"],
                         {"size_bytes": 128 * MiB, "used_bytes": 6 * MiB,
                          "free_bytes": 122 * MiB, "largest_free_bytes": 122 * MiB,
                          "fallbacks": 0})
        self.assertNotIn("arena", mine[b.pid])
        r = self.ctl("status", "clients", "-o", "PID,LEASED,ARENA")
        rows = table(r.stdout)
        self.assertEqual(rows[0], ["PID", "LEASED", "ARENA"])
        self.assertEqual({row[0]: row[1:] for row in rows[1:]},
                         {str(a.pid): ["6", "MiB", "6", "MiB", "of", "128", "MiB"],
                          str(b.pid): ["4", "MiB", "-"]})
        r = self.ctl("status", "clients", "-o", "ARENA", "--bytes", "-n", "--csv")
        self.assertEqual(sorted(r.stdout.splitlines()), sorted(
            [f"{6 * MiB} of {128 * MiB}", "-"]))
        view = self.ctl("status").stdout
        self.assertRegex(view, rf"(?m)^  pid {a.pid}: arena 6 MiB used of 128 MiB, 0\.0% "
                               r"fragmented \(longest free 122 MiB\)$")
        self.assertNotIn(f"pid {b.pid}: arena", view)

    def test_own_connection_left_out(self):
        poll_until(lambda: self.status()["clients"] == [], what="no client")
        r = self.ctl("status")
        self.assertIn("\nno clients connected\n", r.stdout)
        self.assertNotIn(f"{r.pid} ", r.stdout)
        self.assertEqual(table(self.ctl("status", "clients").stdout),
                         [["PID", "UID", "CLIENT", "LEASES", "LEASED", "RESERVED", "MODELS",
                           "CONNECTED", "DECLARED", "MEASURED", "UNDECLARED"]],
                         "an empty table still says what is empty")
        w = self.ctl("--json", "watch", "-n", "1")
        self.assertEqual(w.json()["clients"], [])


class Selection(ModelTestCase):
    def setUp(self):
        super().setUp()
        self.start_daemon()
        self.h = self.holder("6M", "--hold", "30", "--tag", 'odd, "quoted" tag')
        self.h.wait_stdout(r"^lease \d+:")

    def test_columns(self):
        r = self.ctl("status", "leases", "-o", "pid,SIZE,tag")
        self.assertEqual(r.rc, 0, r)
        lines = r.stdout.splitlines()
        self.assertRegex(lines[0], r"^PID\s+SIZE\s+TAG$")
        self.assertRegex(lines[1], rf'^{self.h.pid}\s+6 MiB\s+odd, "quoted" tag$')
        r = self.ctl("status", "leases", "--output", "+MODEL", "--noheadings", "--bytes")
        self.assertRegex(r.stdout, rf"^\d+\s+{self.h.pid}\s+0\s+{6 * MiB}\s+\S+\s+odd, "
                                   rf'"quoted" tag\s+-\n$')
        r = self.ctl("status", "devices", "-o", "DEVICE,BUDGET,FREE,RESERVED", "-b", "-n")
        self.assertEqual(table(r.stdout), [["0", str(64 * MiB), str(58 * MiB), "0"]])

    def test_bad_selections(self):
        for args, message in (
                (["status", "leases", "-o", "PID,NOPE"],
                 r"^rocmmemctl status: unknown column 'NOPE' of the leases table \(columns: "
                 r"LEASE, PID, DEVICE, SIZE, AGE, TAG, MODEL\)"),
                (["status", "leases", "-o", "PID,,TAG"], r"unknown column '' of the leases"),
                (["status", "-o", "PID"], r"-o and --csv print one table: name it"),
                (["status", "--csv"], r"-o and --csv print one table"),
                (["status", "tables"], r"unexpected argument 'tables' \(a table: devices, "),
                (["status", "leases", "queue"], r"unexpected argument 'queue'"),
                (["status", "leases", "--json"], r"--json prints the whole status"),
                (["models", "--json", "--csv"], r"--json prints every field")):
            with self.subTest(args=args):
                r = self.ctl(*args)
                self.assert_no_output_but_error(r, 1)
                self.assertRegex(r.stderr, message, r)

    def test_csv(self):
        r = self.ctl("status", "leases", "--csv", "--bytes")
        self.assertEqual(r.rc, 0, r)
        rows = list(csv.reader(io.StringIO(r.stdout)))
        self.assertEqual(rows[0], ["LEASE", "PID", "DEVICE", "SIZE", "AGE", "TAG"])
        lease = self.lease_by_owner(self.status(), self.h.pid)
        self.assertEqual(len(rows), 2, rows)
        self.assertEqual(rows[1][:4] + rows[1][5:],
                         [str(lease["id"]), str(self.h.pid), "0", str(6 * MiB),
                          'odd, "quoted" tag'])
        self.assertIn('"odd, ""quoted"" tag"', r.stdout, "RFC 4180 quoting")
        r = self.ctl("status", "devices", "--csv", "-o", "NAME,BUDGET", "--noheadings")
        self.assertEqual(r.stdout, "host memory,64 MiB\n")

    def test_models_table(self):
        _, ids = self.host("a-model-with-a-name-well-over-twenty-chars:vae:4M")
        r = self.ctl("models", "--csv", "-o", "ID,NAME,RESIDENT,USES", "--bytes")
        self.assertEqual(list(csv.reader(io.StringIO(r.stdout))),
                         [["ID", "NAME", "RESIDENT", "USES"],
                          [str(ids["a-model-with-a-name-well-over-twenty-chars"]),
                           "a-model-with-a-name-well-over-twenty-chars", str(4 * MiB), "0"]])
        r = self.ctl("status", "models", "-o", "NAME", "-n")
        self.assertEqual(r.stdout, "a-model-with-a-name-well-over-twenty-chars\n")

    def test_queue_heading(self):
        w = self.holder("62M", "--timeout", "30", name="waiter")
        self.wait_status(lambda s: s["queue"], what="the waiter")
        r = self.ctl("status", "queue")
        self.assertRegex(r.stdout, r"^PID\s+DEVICE\s+SIZE\s+WAITED\s+TIMEOUT\s+MODEL\s+TAG\n")
        self.assertRegex(r.stdout, rf"(?m)^{w.pid}\s+0\s+62 MiB\s")
        self.assertRegex(self.ctl("status").stdout, r"\nQUEUE\nPID\s+DEVICE\s+SIZE\s+WAITED")


class DeviceNames(ModelTestCase):
    """A GPU's name is shown whole, however long (the fake HIP runtime's has 23 characters)."""

    def test_whole_name(self):
        fake = os.environ.get("ROCMMEM_FAKEHIP")
        if not fake or not os.path.exists(fake):
            self.skipTest("$ROCMMEM_FAKEHIP is not set to the built fake HIP runtime")
        self.start_daemon(extra=["--backend", "hip"],
                          env=clean_env(ROCMMEM_HIP_LIBRARY=fake, FAKEHIP_DEVICES="1G,1G"))
        st = self.status()
        names = [d["name"] for d in st["devices"]]
        self.assertEqual(len(names), 2, st["devices"])
        self.assertGreater(len(names[0]), 20, names)
        r = self.ctl("status")
        for i, name in enumerate(names):
            self.assertRegex(r.stdout, rf"(?m)^{i}\s+{re.escape(name)}\s+1 GiB\s")
        r = self.ctl("status", "devices", "-o", "NAME,BUS,SHARING", "--csv", "-n")
        self.assertEqual([row[0] for row in csv.reader(io.StringIO(r.stdout))], names)


if __name__ == "__main__":
    unittest.main()
