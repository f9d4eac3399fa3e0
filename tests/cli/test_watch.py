# SPDX-License-Identifier: MIT
"""rocmmemctl watch: JSON lines, -n and -i, events for activity, plain text when piped, a
terminal redrawn in place (on a real pseudo-terminal), usage errors, a lost daemon."""
import errno
import fcntl
import json
import os
import pty
import re
import select
import signal
import struct
import subprocess
import termios
import time
import unittest

from daemon import BUDGET, MiB, CliTestCase, clean_env, poll_until, rocmmemctl_bin

ESC = "\x1b"
HIDE_CURSOR = "\x1b[?25l"
SHOW_CURSOR = "\x1b[?25h"
HOME = "\x1b[H"
CSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")

DEVICE_FIELDS = {
    "index": int, "name": str, "backend": str, "total_bytes": int, "budget_bytes": int,
    "leased_bytes": int, "free_bytes": int, "headroom_bytes": int, "reserved_bytes": int,
    "granule_bytes": int, "leases": int, "waiters": int, "oldest_wait_ms": int,
    "largest_grantable_bytes": int, "largest_with_eviction_bytes": int,
    "evictable_bytes": int, "models_resident": int, "state": str,
}
CLIENT_FIELDS = {"pid": int, "uid": int, "name": str, "leases": int, "leased_bytes": int,
                 "models": int, "reserved_bytes": int, "waiting": int, "client_id": int}
COUNTERS = ("grants", "denials", "timeouts", "evictions", "revocations", "trims",
            "bytes_trimmed", "releases", "reclaimed", "failures", "connections")
EVENT_FIELDS = {"type": str, "event": str, "timestamp_ms": int, "pid": int, "client_name": str,
                "client_id": int, "bytes": int, "lease_id": int, "model_id": int,
                "model_name": str, "error": int, "waited_ms": int, "detail": str,
                "dropped": int}


def json_lines(text):
    """Every line of text as a JSON object (each must parse and be an object)."""
    objects = []
    for line in text.splitlines():
        o = json.loads(line)
        if not isinstance(o, dict):
            raise AssertionError(f"not a JSON object: {line!r}")
        objects.append(o)
    return objects


class WatchCase(CliTestCase):
    def setUp(self):
        super().setUp()
        self.start_daemon()

    def watch(self, *args, timeout=10.0):
        return self.ctl("watch", *args, timeout=timeout)

    def watch_background(self, *args, name="watch"):
        return self.background([rocmmemctl_bin(), "--socket", self.sock, *args], name)

    def check_fields(self, obj, fields, what):
        for key, kind in fields.items():
            self.assertIn(key, obj, f"{what} lacks {key}: {obj}")
            self.assertIsInstance(obj[key], kind, f"{what}.{key}: {obj}")
            if kind is int:
                self.assertNotIsInstance(obj[key], bool, f"{what}.{key}: {obj}")


class Json(WatchCase):
    def test_samples_carry_the_state(self):
        h = self.holder("4M", "--tag", "held")
        h.wait_stdout(r"^lease \d+")
        r = self.ctl("--json", "watch", "-i", "0.05", "-n", "5")
        self.assertEqual(r.rc, 0, r)
        self.assertEqual(r.stderr, "", r)
        self.assertTrue(r.stdout.endswith("\n"), r)
        objects = json_lines(r.stdout)
        samples = [o for o in objects if o["type"] == "sample"]
        self.assertEqual(len(samples), 5, r)
        self.assertEqual(objects[-1]["type"], "sample", "it stops right after the fifth")
        last = 0
        for s in samples:
            self.check_fields(s, {"timestamp_ms": int, "interval_ms": int, "dropped": int,
                                  "uptime_ms": int, "waiters": int, "oldest_wait_ms": int,
                                  "clients_omitted": int, "models_omitted": int,
                                  "daemon": dict, "devices": list, "clients": list,
                                  "models": list, "counters": dict}, "sample")
            self.assertEqual(s["interval_ms"], 50)
            self.assertGreaterEqual(s["timestamp_ms"], last)
            last = s["timestamp_ms"]
            self.assertEqual(s["daemon"]["backend"], "host")
            self.assertEqual(s["daemon"]["pid"], self.daemon.pid)
            self.assertEqual(len(s["devices"]), 1)
            d = s["devices"][0]
            self.check_fields(d, DEVICE_FIELDS, "device")
            self.assertEqual(d["budget_bytes"], BUDGET)
            self.assertEqual(d["leased_bytes"], 4 * MiB)
            self.assertEqual(d["free_bytes"], BUDGET - 4 * MiB)
            self.assertEqual(d["largest_grantable_bytes"], BUDGET - 4 * MiB)
            self.assertEqual(d["reserved_bytes"], 0)
            self.assertEqual(d["waiters"], 0)
            for c in s["clients"]:
                self.check_fields(c, CLIENT_FIELDS, "client")
            mine = [c for c in s["clients"] if c["pid"] == h.pid]
            self.assertEqual(len(mine), 1, s["clients"])
            self.assertEqual(mine[0]["leased_bytes"], 4 * MiB)
            self.assertEqual(mine[0]["leases"], 1)
            self.assertEqual(sorted(s["counters"]), sorted(COUNTERS))
            self.assertGreaterEqual(s["counters"]["grants"], 1)
        # Timestamps are wall-clock milliseconds.
        self.assertLess(abs(samples[0]["timestamp_ms"] / 1000 - time.time()), 600)

    def test_events_follow_activity(self):
        w = self.watch_background("--json", "watch", "-i", "0.2")
        w.wait_stdout(r'"type":"sample"')
        r = self.ctl("lease", "4M", "--hold", "0", "--tag", "seen")
        self.assertEqual(r.rc, 0, r)
        denied = self.ctl("lease", "128M")
        self.assertEqual(denied.rc, 2, denied)

        def events():
            done = [o for o in json_lines(w.stdout())
                    if o["type"] == "event" and o["pid"] == denied.pid
                    and o["event"] == "client_disconnected"]
            return done and json_lines(w.stdout())

        objects = poll_until(events, 10.0, what="the events of both leases")
        self.assertTrue(w.running(), w)
        for o in objects:
            if o["type"] == "event":
                self.check_fields(o, EVENT_FIELDS, "event")
                self.assertIn("device", o)
        mine = [o for o in objects if o["type"] == "event" and o["pid"] == r.pid]
        self.assertEqual([o["event"] for o in mine],
                         ["client_connected", "lease_granted", "lease_released",
                          "client_disconnected"], mine)
        granted, released = mine[1], mine[2]
        self.assertEqual(granted["bytes"], 4 * MiB)
        self.assertEqual(granted["device"], 0)
        self.assertEqual(granted["client_name"], "rocmmemctl")
        self.assertGreater(granted["lease_id"], 0)
        self.assertEqual(released["lease_id"], granted["lease_id"])
        self.assertIsNone(mine[0]["device"])  # connecting concerns no device
        refused = [o for o in objects if o["type"] == "event" and o["pid"] == denied.pid
                   and o["event"] == "lease_denied"]
        self.assertEqual(len(refused), 1, objects)
        self.assertEqual(refused[0]["error"], -errno.E2BIG)
        self.assertEqual(refused[0]["bytes"], 128 * MiB)
        self.assertIn("budget", refused[0]["detail"])
        # The samples saw the counters move.
        samples = [o for o in objects if o["type"] == "sample"]
        self.assertGreaterEqual(samples[-1]["counters"]["grants"],
                                samples[0]["counters"]["grants"])
        w.signal(signal.SIGINT)
        self.assertEqual(w.wait(), 0, w)
        self.assertEqual(w.stderr(), "", w)
        json_lines(w.stdout())  # complete lines only, even when interrupted

    def test_count_and_interval(self):
        r = self.ctl("--json", "watch", "-i", "0.2", "-n", "4")
        self.assertEqual(r.rc, 0, r)
        samples = [o for o in json_lines(r.stdout) if o["type"] == "sample"]
        self.assertEqual(len(samples), 4, r)
        self.assertTrue(all(s["interval_ms"] == 200 for s in samples), samples)
        # Never faster than asked (a busy machine may be slower: no upper bound).
        span = samples[-1]["timestamp_ms"] - samples[0]["timestamp_ms"]
        self.assertGreaterEqual(span, 3 * 200 * 0.8, r)
        r = self.ctl("watch", "--json", "--interval", "0.01", "--count", "3")
        self.assertEqual(r.rc, 0, r)
        samples = [o for o in json_lines(r.stdout) if o["type"] == "sample"]
        self.assertEqual([s["interval_ms"] for s in samples], [10, 10, 10])
        # The first sample comes at once, whatever the interval.
        r = self.ctl("--json", "watch", "-i", "60", "-n", "1", timeout=20)
        self.assertEqual(r.rc, 0, r)
        self.assertEqual(json_lines(r.stdout)[-1]["interval_ms"], 60000)

    def test_device_filter(self):
        r = self.ctl("--json", "watch", "--device", "0", "-n", "1")
        self.assertEqual(r.rc, 0, r)
        self.assertEqual([d["index"] for d in json_lines(r.stdout)[-1]["devices"]], [0])
        r = self.ctl("watch", "--device", "3", "-n", "1")
        self.assert_no_output_but_error(r, 2)
        self.assertIn("no device 3", r.stderr)


class Models(WatchCase):
    """Models as a sample shows them, and the events of an eviction (model_host owns them)."""

    def start_host(self):
        path = os.environ.get("ROCMMEM_MODEL_HOST")
        if not path or not os.access(path, os.X_OK):
            raise RuntimeError("$ROCMMEM_MODEL_HOST is not set: run these tests through ctest")
        h = self.background([path, self.sock, "--in-use", "vae", "flux:transformer:8M",
                             "vae:vae:4M"], "host")
        h.wait_stdout(r"^registered vae \d+$")
        return h

    def test_models_in_samples_and_frames(self):
        h = self.start_host()
        r = self.ctl("--json", "watch", "-n", "1")
        self.assertEqual(r.rc, 0, r)
        s = json_lines(r.stdout)[-1]
        models = {m["name"]: m for m in s["models"]}
        self.assertEqual(set(models), {"flux", "vae"})
        self.assertEqual((models["flux"]["state"], models["flux"]["bytes"]), ("idle", 8 * MiB))
        self.assertEqual((models["vae"]["state"], models["vae"]["bytes"]), ("in_use", 4 * MiB))
        self.assertEqual(models["flux"]["owner_pid"], h.pid)
        d = s["devices"][0]
        self.assertEqual(d["models_resident"], 2)
        self.assertEqual(d["reserved_bytes"], 12 * MiB)
        self.assertEqual(d["evictable_bytes"], 8 * MiB)
        self.assertEqual(d["largest_grantable_bytes"], BUDGET - 12 * MiB)
        self.assertEqual(d["largest_with_eviction_bytes"], BUDGET - 4 * MiB)
        mine = [c for c in s["clients"] if c["pid"] == h.pid][0]
        self.assertEqual((mine["models"], mine["reserved_bytes"]), (2, 12 * MiB))
        r = self.watch("-n", "1")
        self.assertEqual(r.rc, 0, r)
        self.assertRegex(r.stdout, rf"(?m)^\d+\s+flux\s+{h.pid}\s+0\s+idle\s+8 MiB\s+no$")
        self.assertRegex(r.stdout, rf"(?m)^\d+\s+vae\s+{h.pid}\s+0\s+in use\s+4 MiB\s+no$")
        self.assertIn("models   2 resident, 8 MiB evictable", r.stdout)

    def test_eviction_events(self):
        h = self.start_host()
        w = self.watch_background("--json", "watch", "-i", "0.2")
        w.wait_stdout(r'"type":"sample"')
        r = self.ctl("evict", "flux")
        self.assertEqual(r.rc, 0, r)

        def acked():
            return [o for o in json_lines(w.stdout())
                    if o["type"] == "event" and o["event"] == "evict_acked"]

        poll_until(acked, 10.0, what="the evict_acked event")
        flux = [o for o in json_lines(w.stdout()) if o["type"] == "event"
                and o["model_name"] == "flux"]
        self.assertEqual([o["event"] for o in flux], ["evict_requested", "evict_acked"], flux)
        for o in flux:
            self.assertEqual(o["pid"], h.pid)
            self.assertEqual(o["device"], 0)
            self.assertGreater(o["model_id"], 0)
        self.assertEqual(flux[0]["bytes"], 8 * MiB)
        w.signal(signal.SIGINT)
        self.assertEqual(w.wait(), 0, w)


class Plain(WatchCase):
    def test_no_escape_codes_when_piped(self):
        h = self.holder("6M")
        h.wait_stdout(r"^lease \d+")
        r = self.watch("-i", "0.05", "-n", "3")
        self.assertEqual(r.rc, 0, r)
        self.assertEqual(r.stderr, "", r)
        self.assertNotIn(ESC, r.stdout)
        self.assertTrue(r.stdout.endswith("\n\n"), r)
        frames = [f for f in r.stdout.split("\n\nrocmmemd ")]
        self.assertEqual(len(frames), 3, r)
        self.assertEqual(len(re.findall(r"^rocmmemd \S+, backend host, pid \d+", r.stdout,
                                        re.MULTILINE)), 3, r)
        for needle in ("DEVICE 0", "used ", "of 64 MiB budget", "leased ", "largest ",
                       "queue ", "runtime ", "temperature -", "CLIENT", "EVENTS"):
            self.assertIn(needle, r.stdout)
        self.assertRegex(r.stdout, rf"(?m)^{h.pid}\s+rocmmemctl\s+1\s+6 MiB")

    def test_events_in_the_frames(self):
        w = self.watch_background("watch", "-i", "0.1")
        w.wait_stdout(r"^EVENTS")
        r = self.ctl("lease", "2M", "--hold", "0")
        self.assertEqual(r.rc, 0, r)
        w.wait_stdout(r"lease_released\s+released lease \d+", timeout=10)
        self.assertNotIn(ESC, w.stdout())
        w.signal(signal.SIGTERM)
        self.assertEqual(w.wait(), 0, w)


def winsize(fd, rows, cols):
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))


class Terminal(WatchCase):
    """rocmmemctl on a pseudo-terminal: what a person at a terminal gets."""

    def start_on_pty(self, *args, rows=40, cols=100):
        master, slave = pty.openpty()
        winsize(slave, rows, cols)
        self.pty_stderr = os.path.join(self.dir, "watch-pty.err")
        with open(self.pty_stderr, "wb") as err:
            p = subprocess.Popen([rocmmemctl_bin(), "--socket", self.sock, "watch", *args],
                                 stdin=subprocess.DEVNULL, stdout=slave, stderr=err,
                                 env=clean_env(), start_new_session=True)
        os.close(slave)
        self.addCleanup(os.close, master)
        self.addCleanup(lambda: p.poll() is None and p.kill())
        return p, master

    def read_until(self, master, p, pred, timeout=10.0):
        """Reads the terminal until pred(text) holds or the process ended; returns text."""
        out = b""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            text = out.decode("utf-8", "replace")
            if pred(text):
                return text
            ready, _, _ = select.select([master], [], [], 0.1)
            if ready:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # EIO: the other side is closed
                    chunk = b""
                if not chunk and p.poll() is not None:
                    return out.decode("utf-8", "replace")
                out += chunk
        raise AssertionError(f"timed out; terminal so far:\n{out!r}")

    def lines_of(self, text):
        """The visible lines the view wrote (escape sequences removed)."""
        return [CSI.sub("", line) for line in re.split(r"\r?\n", text)]

    def test_redraws_in_place_and_restores_the_cursor(self):
        p, master = self.start_on_pty("-i", "0.05", "-n", "3")
        text = self.read_until(master, p, lambda t: t.endswith(SHOW_CURSOR))
        with open(self.pty_stderr) as err:
            self.assertEqual(p.wait(5), 0, err.read())
        self.assertTrue(text.startswith(HIDE_CURSOR), repr(text[:40]))
        self.assertTrue(text.endswith(SHOW_CURSOR), repr(text[-40:]))
        # Each frame starts at the top left and overwrites the previous one.
        self.assertGreaterEqual(text.count(HOME), 3)
        self.assertEqual(len(re.findall(r"rocmmemd \S+, backend host", text)), 3)
        self.assertIn("\x1b[K", text)
        self.assertIn("\x1b[J", text)
        for line in self.lines_of(text):
            self.assertLessEqual(len(line), 100, line)

    def test_fits_a_small_terminal(self):
        p, master = self.start_on_pty("-i", "0.05", "-n", "2", rows=12, cols=50)
        text = self.read_until(master, p, lambda t: t.endswith(SHOW_CURSOR))
        self.assertEqual(p.wait(5), 0)
        for frame in text.split(HOME)[1:]:
            lines = self.lines_of(frame)
            self.assertLessEqual(len([l for l in lines if l]), 11, frame)
            for line in lines:
                self.assertLessEqual(len(line), 50, line)

    def test_interrupt_restores_the_cursor(self):
        p, master = self.start_on_pty("-i", "0.1")
        self.read_until(master, p, lambda t: "DEVICE 0" in t)
        p.send_signal(signal.SIGINT)
        text = self.read_until(master, p, lambda t: t.endswith(SHOW_CURSOR))
        self.assertEqual(p.wait(5), 0)
        self.assertTrue(text.endswith(SHOW_CURSOR))

    def test_resize_adapts(self):
        p, master = self.start_on_pty("-i", "0.05", rows=40, cols=120)
        self.read_until(master, p, lambda t: "DEVICE 0" in t)
        winsize(master, 40, 60)
        p.send_signal(signal.SIGWINCH)
        text = ""
        # Frames drawn after the resize fit the new width.
        text = self.read_until(master, p, lambda t: t.count(HOME) >= 4)
        p.send_signal(signal.SIGTERM)
        self.read_until(master, p, lambda t: t.endswith(SHOW_CURSOR))
        self.assertEqual(p.wait(5), 0)
        for line in self.lines_of(text.split(HOME)[-2]):
            self.assertLessEqual(len(line), 60, line)

    def test_json_on_a_terminal_is_plain(self):
        p, master = self.start_on_pty("--json", "-n", "2", "-i", "0.05")
        text = self.read_until(master, p, lambda t: t.count('"type":"sample"') >= 2
                               and t.endswith("\n"))
        self.assertEqual(p.wait(5), 0)
        self.assertNotIn(ESC, text)
        json_lines(text.replace("\r\n", "\n"))


class Errors(WatchCase):
    def usage(self, args, message):
        r = self.ctl(*args)
        self.assertEqual(r.rc, 1, r)
        self.assertEqual(r.stdout, "", r)
        self.assertRegex(r.stderr, message, r)

    def test_bad_interval(self):
        for value in ("0", "-1", "0.001", "0.009", "61", "60.5", "99999999999", "abc", "",
                      "inf", "1x", "-0.5"):
            with self.subTest(interval=value):
                self.usage(["watch", "-i", value], rf"^rocmmemctl watch: invalid -i")
        self.usage(["watch", "-i"], r"^rocmmemctl watch: option '-i' needs a value")

    def test_bad_count_and_device(self):
        for value in ("0", "-3", "abc", "1.5", "", "99999999999999999999999"):
            with self.subTest(count=value):
                self.usage(["watch", "-n", value], r"^rocmmemctl watch: invalid -n")
        for value in ("abc", "-1", "1.5", "", "99999"):
            with self.subTest(device=value):
                self.usage(["watch", "--device", value],
                           r"^rocmmemctl watch: invalid --device")

    def test_unknown_and_extra(self):
        self.usage(["watch", "--frob"], r"^rocmmemctl watch: unknown option '--frob'")
        self.usage(["watch", "now"], r"^rocmmemctl watch: unexpected argument 'now'")

    def test_unreachable(self):
        missing = os.path.join(self.dir, "nowhere.sock")
        for args in (["watch", "-n", "1"], ["--json", "watch"]):
            r = self.ctl(*args, sock=missing)
            self.assert_no_output_but_error(r, 3)

    def test_daemon_stops_mid_watch(self):
        for args in (["watch", "-i", "0.1"], ["--json", "watch", "-i", "0.1"]):
            with self.subTest(args=args):
                if not self.daemon.running():
                    self.daemon = None
                    self.start_daemon()
                w = self.watch_background(*args, name="watch-" + args[0])
                w.wait_stdout(r"DEVICE 0|\"type\":\"sample\"")
                self.assertEqual(self.daemon.stop(signal.SIGTERM), 0)
                self.assertEqual(w.wait(10), 3, w)
                self.assertIn("rocmmemctl: watch: lost the daemon", w.stderr())
                if "--json" in args:  # the last line says so too, as the error object
                    last = json.loads(w.stdout().splitlines()[-1])
                    self.assertEqual((last["error"]["code"], last["error"]["exit_status"]),
                                     ("ECONNRESET", 3), w)

    def test_help_lists_watch(self):
        r = self.ctl("--help", sock=False)
        self.assertEqual(r.rc, 0, r)
        self.assertRegex(r.stdout,
                         r"(?m)^  watch \[--interval SECONDS\] \[--count COUNT\] \[--device N\]")


if __name__ == "__main__":
    unittest.main()
