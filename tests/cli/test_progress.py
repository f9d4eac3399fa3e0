# SPDX-License-Identifier: MIT
"""A queued `rocmmemctl lease` says on stderr where it stands, and how long it waited once
granted: a line per change through a pipe, one line rewritten in place on a terminal."""
import fcntl
import json
import os
import pty
import re
import signal
import struct
import subprocess
import termios
import threading
import time
import unittest

from daemon import CliTestCase, clean_env, poll_until, rocmmemctl_bin

WAITING = (r"rocmmemctl: lease: waiting for (\d+) MiB on device 0: position (\d+) of (\d+) in "
           r"the queue, (\d+)s so far; (\d+) MiB free of 64 MiB")
GRANTED = r"rocmmemctl: lease: granted after waiting (\d+\.\d) s"
# What the daemon says the request waits for (since 1.1), after "; ".
WHY = r"(; (waits for|the eviction of) [^\r\n\033]*)?"


class Terminal:
    """A process whose stderr is a pseudo-terminal cols wide (stdout a file); what it writes
    there is collected by a thread."""

    def __init__(self, args, workdir, cols=200):
        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, cols, 0, 0))
        self.out_path = os.path.join(workdir, "terminal.out")
        with open(self.out_path, "wb") as out:
            self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=out,
                                         stderr=slave, env=clean_env())
        os.close(slave)
        self.master, self.data, self.lock = master, b"", threading.Lock()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        while True:
            try:
                chunk = os.read(self.master, 4096)
            except OSError:  # EIO: the last writer is gone
                break
            if not chunk:
                break
            with self.lock:
                self.data += chunk

    def text(self):
        with self.lock:
            return self.data.decode()

    def stdout(self):
        with open(self.out_path) as f:
            return f.read()

    def finish(self, timeout=10):
        rc = self.proc.wait(timeout=timeout)
        self.reader.join(timeout)
        os.close(self.master)
        return rc

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.finish()


class Progress(CliTestCase):
    def setUp(self):
        super().setUp()
        self.start_daemon()
        self.first = self.holder("40M", "--hold", "30", name="first")
        self.first.wait_stdout(r"^lease \d+:")

    def test_piped(self):
        w = self.holder("40M", "--timeout", "30", "--hold", "0", name="waiter")
        poll_until(lambda: re.search(WAITING, w.stderr()), timeout=10, what="the first line")
        m = re.search(WAITING, w.stderr())
        self.assertEqual((m.group(1), m.group(2), m.group(3), m.group(5)), ("40", "1", "1", "24"))
        self.assertEqual(w.stdout(), "")
        # A second request behind it: the first says its queue grew, the second where it is.
        w2 = self.holder("40M", "--timeout", "30", "--hold", "0", name="waiter2")
        poll_until(lambda: re.search(r"position 2 of 2", w2.stderr()), timeout=10,
                   what="the second waiter's line")
        poll_until(lambda: re.search(r"position 1 of 2", w.stderr()), timeout=10,
                   what="the first waiter's queue growing")
        st = self.status()
        self.assertEqual([q["owner_pid"] for q in st["queue"]], [w.pid, w2.pid])
        waited_ms = st["queue"][0]["waited_ms"]
        self.first.signal(signal.SIGINT)
        self.assertEqual(w.wait(), 0, w)
        err = w.stderr()
        self.assertNotIn("\r", err)
        self.assertNotIn("\033", err)
        lines = err.splitlines()
        for line in lines[:-1]:
            self.assertRegex(line, "^" + WAITING + WHY + "$")
        self.assertEqual(len(lines) - 1, len(set(lines[:-1])), "a line when something changed")
        g = re.fullmatch(GRANTED, lines[-1])
        self.assertIsNotNone(g, lines)
        self.assertGreaterEqual(float(g.group(1)) + 0.05, waited_ms / 1000)
        self.assertRegex(w.stdout(), r"^lease \d+: 40 MiB on device 0; holding it for 0 s")
        self.assertEqual(w2.wait(), 0, w2)
        self.assertRegex(w2.stderr(), GRANTED + "\n$")

    def test_on_a_terminal(self):
        t = Terminal([rocmmemctl_bin(), "--socket", self.sock, "lease", "40M", "--timeout", "30",
                      "--hold", "0"], self.dir)
        self.addCleanup(t.kill)
        poll_until(lambda: re.search(r"\r" + WAITING + WHY + r"\033\[K", t.text()), timeout=10,
                   what="the line on the terminal")
        # Rewritten in place (each a \r, never a newline) while it waits.
        poll_until(lambda: len(re.findall(r"\r" + WAITING, t.text())) >= 2, timeout=10,
                   what="the line rewritten")
        self.assertNotIn("\n", t.text())
        self.first.signal(signal.SIGINT)
        self.assertEqual(t.finish(), 0, t.text())
        text = t.text()
        # Cleared, then the grant on a line of its own.
        self.assertRegex(text, r"\033\[K\r\033\[K" + GRANTED + r"\r?\n$")
        self.assertRegex(t.stdout(), r"^lease \d+: 40 MiB on device 0;")

    def test_cut_to_a_narrow_terminal(self):
        t = Terminal([rocmmemctl_bin(), "--socket", self.sock, "lease", "40M", "--timeout", "30",
                      "--hold", "0"], self.dir, cols=50)
        self.addCleanup(t.kill)
        poll_until(lambda: "\033[K" in t.text(), timeout=10, what="the line")
        first = t.text().split("\033[K")[0]
        self.assertEqual(first, "\r" + "rocmmemctl: lease: waiting for 40 MiB on device 0: p"[:49])
        self.first.signal(signal.SIGINT)
        self.assertEqual(t.finish(), 0, t.text())

    def test_refused_after_waiting(self):
        t = Terminal([rocmmemctl_bin(), "--socket", self.sock, "lease", "40M", "--timeout",
                      "1.5"], self.dir)
        self.addCleanup(t.kill)
        self.assertEqual(t.finish(), 2, t.text())
        text = t.text()
        self.assertRegex(text, r"^\r" + WAITING)
        # The line is cleared before the error: it is not left half-overwritten.
        self.assertRegex(text, r"\r\033\[Krocmmemctl: lease refused: timed out after 1500 ms")
        self.assertNotIn("granted", text)
        self.assertEqual(t.stdout(), "")

    def test_quiet_when_granted_at_once(self):
        t0 = time.monotonic()
        r = self.ctl("lease", "20M", "--timeout", "30", "--hold", "0")
        self.assertEqual((r.rc, r.stderr), (0, ""), r)
        self.assertLess(time.monotonic() - t0, 30)


class WaitsFor(CliTestCase):
    """Behind a stopped owner (SIGSTOP) of an idle model, the line names the model, its owner
    and the deadline, then says the eviction ended; --json gives the daemon's reports as JSON
    lines on stderr."""

    def setUp(self):
        super().setUp()
        host = os.environ.get("ROCMMEM_MODEL_HOST")
        if not host:
            raise RuntimeError("$ROCMMEM_MODEL_HOST is not set: run through ctest -L cli")
        self.start_daemon(extra=["--evict-deadline", "2"])
        self.host = self.background([host, self.sock, "flux:transformer:48M"], "host")
        self.mid = int(self.host.wait_stdout(r"^registered flux (\d+)$").group(1))
        self.host.signal(signal.SIGSTOP)
        self.addCleanup(self.host.signal, signal.SIGCONT)

    def test_piped(self):
        w = self.holder("40M", "--timeout", "30", "--hold", "0", name="waiter")
        eviction = (WAITING + rf"; waits for the eviction of model {self.mid} 'flux' "
                    rf"\(pid {self.host.pid} 'model_host'\), deadline in ([12])s")
        poll_until(lambda: re.search(eviction, w.stderr()), timeout=10, what="the model named")
        self.assertEqual(w.wait(), 0, w)
        lines = w.stderr().splitlines()
        self.assertRegex(lines[-1], GRANTED)
        self.assertRegex(w.stdout(), r"^lease \d+: 40 MiB on device 0")
        for line in lines[:-1]:
            self.assertRegex(line, "^" + WAITING)

    def test_json_lines(self):
        r = self.ctl("--json", "lease", "40M", "--timeout", "30", "--hold", "0", timeout=30)
        self.assertEqual(r.rc, 0, r)
        self.assertEqual(json.loads(r.stdout)["bytes"], 40 << 20)
        reports = [json.loads(line) for line in r.stderr.splitlines()]
        self.assertGreaterEqual(len(reports), 2, r.stderr)
        for rep in reports:
            self.assertEqual(rep["event"], "wait_progress")
            self.assertEqual((rep["model_id"], rep["model_name"]), (self.mid, "flux"))
            self.assertEqual((rep["owner_pid"], rep["owner_name"]),
                             (self.host.pid, "model_host"))
            self.assertEqual((rep["reason"], rep["position"]), ("eviction", 0))
        self.assertTrue(0 < reports[0]["deadline_ms"] <= 2000, reports[0])
        self.assertIsNone(reports[0]["eviction_ended"])
        self.assertEqual(reports[-1]["eviction_ended"], "revoked")


if __name__ == "__main__":
    unittest.main()
