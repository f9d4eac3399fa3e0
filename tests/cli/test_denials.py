# SPDX-License-Identifier: MIT
"""rocmmemctl status shows the latest refusals (text and --json) and the daemon's counters."""
import fcntl
import os
import pty
import re
import struct
import subprocess
import termios
import time
import unittest

from daemon import MiB, CliTestCase, clean_env, rocmmemctl_bin

LEASE_LINE = r"^lease (\d+): (.+) on device (\d+)(?: \(tag '([^']*)'\))?; holding it"
COUNTERS = ("grants", "denials", "timeouts", "releases", "reclaimed", "failures", "evictions",
            "revocations", "trims", "bytes_trimmed")
DENIAL_KEYS = {"timestamp_ms", "pid", "client_name", "device", "bytes", "model_id",
               "model_name", "error", "errno", "reason"}


class Denials(CliTestCase):
    def setUp(self):
        super().setUp()
        self.start_daemon()

    def refuse(self, *args):
        """Runs `rocmmemctl lease ARGS`, which must be refused; returns (result, reason)."""
        r = self.ctl("lease", *args)
        self.assert_no_output_but_error(r, 2)
        m = re.match(r"^rocmmemctl: lease refused: (.*)\n$", r.stderr)
        self.assertIsNotNone(m, r)
        return r, m.group(1)

    def holder_of(self, size):
        h = self.holder(size, "--hold", "60")
        h.wait_stdout(LEASE_LINE)
        return h

    def test_none_yet(self):
        st = self.status()
        self.assertEqual(st["schema_version"], 1)
        self.assertEqual(st["denials"], [])
        self.assertEqual(set(st["counters"]), set(COUNTERS))
        for key in COUNTERS:
            self.assertIs(type(st["counters"][key]), int, key)
            self.assertEqual(st["counters"][key], 0, key)
        r = self.ctl("status")
        self.assertEqual(r.rc, 0, r)
        self.assertRegex(r.stdout, r"(?m)^grants 0, denials 0, timeouts 0, releases 0, ")
        self.assertNotIn("RECENT DENIALS", r.stdout)

    def test_refusals_in_json(self):
        h = self.holder_of("30M")
        before = int(time.time() * 1000) - 1
        r1, why1 = self.refuse("40M", "--timeout", "0")
        r2, why2 = self.refuse("1G")
        r3, why3 = self.refuse("36M", "--timeout", "0.2")
        after = int(time.time() * 1000) + 1
        # The explanations name the numbers and end with a suggestion.
        self.assertIn("requested 40 MiB on device 0 (host memory): 34 MiB of its 64 MiB budget "
                      "is free", why1)
        self.assertIn(f"held by pid {h.pid} 'rocmmemctl' 30 MiB", why1)
        self.assertIn("; suggestion: ask for at most 34 MiB, or wait (timeout 0 never waits)",
                      why1)
        self.assertIn("more than its whole budget of 64 MiB", why2)
        self.assertIn("; suggestion: ask for at most 64 MiB", why2)
        self.assertTrue(why3.startswith("timed out after 200 ms: requested 36 MiB"), why3)

        st = self.status()
        self.assertEqual(len(st["denials"]), 3, st["denials"])
        for d, r, why, size, err, num in (
                (st["denials"][0], r1, why1, 40 * MiB, "ENOMEM", 12),
                (st["denials"][1], r2, why2, 1024 * MiB, "E2BIG", 7),
                (st["denials"][2], r3, why3, 36 * MiB, "ETIMEDOUT", 110)):
            self.assertEqual(set(d), DENIAL_KEYS)
            self.assertEqual(d["pid"], r.pid)
            self.assertEqual(d["client_name"], "rocmmemctl")
            self.assertEqual(d["device"], 0)
            self.assertEqual(d["bytes"], size)
            self.assertEqual(d["model_id"], 0)
            self.assertEqual(d["model_name"], "")
            self.assertEqual(d["error"], err)
            self.assertEqual(d["errno"], num)
            self.assertEqual(d["reason"], why, "status keeps what the client was told")
            self.assertIs(type(d["timestamp_ms"]), int)
            self.assertGreaterEqual(d["timestamp_ms"], before)
            self.assertLessEqual(d["timestamp_ms"], after)
        stamps = [d["timestamp_ms"] for d in st["denials"]]
        self.assertEqual(stamps, sorted(stamps), "oldest first")
        c = st["counters"]
        self.assertEqual((c["denials"], c["timeouts"]), (2, 1))
        self.assertGreaterEqual(c["grants"], 1)

    def test_refusals_in_the_table(self):
        h = self.holder_of("30M")
        r1, why1 = self.refuse("40M", "--timeout", "0")
        r2, why2 = self.refuse("36M", "--timeout", "0.2")
        r = self.ctl("status")
        self.assertEqual(r.rc, 0, r)
        self.assertRegex(r.stdout, r"(?m)^grants 1, denials 1, timeouts 1, releases 0, ")
        lines = r.stdout.splitlines()
        self.assertIn("RECENT DENIALS", lines)
        i = lines.index("RECENT DENIALS")
        self.assertRegex(lines[i + 1], r"^AGO\s+PID\s+CLIENT\s+DEVICE\s+SIZE\s+ERROR\s+REASON$")
        # Piped: the whole reason, however long.
        self.assertRegex(lines[i + 2],
                         rf"^\S+\s+{r1.pid}\s+rocmmemctl\s+0\s+40 MiB\s+ENOMEM\s+"
                         rf"{re.escape(why1)}$")
        self.assertRegex(lines[i + 3],
                         rf"^\S+\s+{r2.pid}\s+rocmmemctl\s+0\s+36 MiB\s+ETIMEDOUT\s+"
                         rf"{re.escape(why2)}$")
        self.assertEqual(len(lines), i + 4, "the section ends the table")
        self.assertIn(f"pid {h.pid}", why1)

    def test_the_latest_eight(self):
        self.holder_of("30M")
        reasons = []
        for mib in range(35, 45):
            _, why = self.refuse(f"{mib}M", "--timeout", "0")
            self.assertRegex(why, rf"^requested {mib} MiB (\({mib + mib % 2} MiB in 2 MiB "
                                  rf"granules\) )?on device 0")
            reasons.append(why)
        st = self.status()
        self.assertEqual([d["bytes"] for d in st["denials"]],
                         [mib * MiB for mib in range(37, 45)], "the latest 8, oldest first")
        self.assertEqual([d["reason"] for d in st["denials"]], reasons[2:])
        self.assertEqual(st["counters"]["denials"], 10)
        r = self.ctl("status")
        rows = [l for l in r.stdout.splitlines() if re.search(r"\sENOMEM\s", l)]
        self.assertEqual(len(rows), 8, r.stdout)
        self.assertIn("requested 37 MiB", rows[0])
        self.assertIn("requested 44 MiB", rows[-1])

    def test_wrapped_to_the_terminal(self):
        self.holder_of("30M")
        _, why = self.refuse("40M", "--timeout", "0")
        self.assertGreater(len(why), 100)
        # A terminal 100 columns wide: the reason wraps at blanks within its column, whole.
        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))
        p = subprocess.Popen([rocmmemctl_bin(), "--socket", self.sock, "status"],
                             stdin=subprocess.DEVNULL, stdout=slave, stderr=subprocess.PIPE,
                             env=clean_env(NO_COLOR="1"))
        os.close(slave)
        out = b""
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the terminal's last writer is gone
                break
            if not chunk:
                break
            out += chunk
        os.close(master)
        self.assertEqual(p.wait(timeout=10), 0)
        p.stderr.close()
        lines = out.decode().replace("\r\n", "\n").splitlines()
        self.assertNotIn("\033", out.decode(), "NO_COLOR: no escape sequences")
        table = lines[lines.index("RECENT DENIALS") + 1:]
        for line in table:
            self.assertLessEqual(len(line), 100, line)
        first = [i for i, l in enumerate(lines) if re.search(r"\sENOMEM\s", l)]
        self.assertEqual(len(first), 1, lines)
        start = lines[first[0]].index("requested")
        rest = []
        for line in lines[first[0] + 1:]:
            if line[:start].strip():
                break
            rest.append(line[start:])
        self.assertTrue(rest, "the reason went on below")
        self.assertEqual(" ".join([lines[first[0]][start:], *rest]), why,
                         "the whole reason, cut only at blanks")

if __name__ == "__main__":
    unittest.main()
