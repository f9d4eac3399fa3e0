# SPDX-License-Identifier: MIT
"""Events in Python: fileno() in select, dispatch(), the event thread, asyncio, telemetry
subscriptions delivering dicts shaped like `rocmmemctl --json watch` lines, and callbacks
that raise (logged, never into C)."""
import asyncio
import json
import logging
import select
import threading
import time
import unittest

from fixture import MiB, PyTestCase, poll_until, rocmmem, rocmmemctl_bin, run


def keys(d):
    """The key structure of a JSON value: nested dicts by key, lists by their first item."""
    if isinstance(d, dict):
        return {k: keys(v) for k, v in d.items()}
    if isinstance(d, list):
        return [keys(d[0])] if d else []
    return None


class EventTest(PyTestCase):
    def setUp(self):
        super().setUp()
        self.start_daemon()

    def test_fileno_select_and_dispatch(self):
        c = self.connect(name="selecting")
        got = []
        c.on_event = got.append
        fd = c.fileno()
        self.assertIsInstance(fd, int)
        self.assertEqual(c.dispatch(), 0)
        r, _, _ = select.select([fd], [], [], 0)
        self.assertEqual(r, [])
        self.assertEqual(c.subscribe(samples=False, events=True), 0.0)
        other = self.connect(name="other")
        with other.lease("4M"):
            pass
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and not any(
                e.get("event") == "lease_released" for e in got):
            r, _, _ = select.select([fd], [], [], 1)
            if r:
                self.assertGreaterEqual(c.dispatch(), 0)
        names = [e["event"] for e in got]
        self.assertIn("lease_granted", names)
        self.assertIn("lease_released", names)
        granted = [e for e in got if e["event"] == "lease_granted"][0]
        self.assertEqual(granted["type"], "event")
        self.assertEqual(granted["client_name"], "other")
        self.assertEqual(granted["bytes"], 4 * MiB)
        self.assertEqual(granted["device"], 0)
        self.assertIn("granted lease", granted["detail"])

    def test_event_thread_delivers_samples_and_events(self):
        c = self.connect(name="watching")
        samples, events = [], []
        threads = set()

        def on_event(e):
            threads.add(threading.current_thread().name)
            (samples if e["type"] == "sample" else events).append(e)

        c.on_event = on_event
        t = c.start_event_thread()
        self.assertIs(c.start_event_thread(), t)
        self.assertEqual(c.subscribe(samples=True, events=True, interval=0.05), 0.05)
        poll_until(lambda: len(samples) >= 3, 5, what="three samples")
        other = self.connect(name="other")
        lease = other.lease("6M")
        poll_until(lambda: any(e["event"] == "lease_granted" for e in events), 5,
                   what="the grant event")
        poll_until(lambda: any(s["devices"][0]["leased_bytes"] == 6 * MiB for s in samples), 5,
                   what="a sample with the lease")
        lease.release()
        self.assertEqual(threads, {"rocmmem-events"})
        s = samples[-1]
        self.assertEqual(s["type"], "sample")
        self.assertEqual(s["interval_ms"], 50)
        self.assertEqual(s["daemon"]["backend"], "host")
        self.assertIn("connections", s["counters"])
        # The same shape as the lines of rocmmemctl --json watch.
        r = run([rocmmemctl_bin(), "--socket", self.sock, "--json", "watch", "-n", "1"])
        self.assertEqual(r.rc, 0, r)
        line = json.loads(r.stdout.splitlines()[0])
        self.assertEqual(line["type"], "sample")
        self.assertEqual(keys(s)["devices"], keys(line)["devices"])
        self.assertEqual(list(s), list(line))
        self.assertEqual(list(s["daemon"]), list(line["daemon"]))
        self.assertEqual(list(s["counters"]), list(line["counters"]))
        # Client by client ("other" has a host arena, "watching" none).
        for name in ("watching", "other"):
            mine = [x for x in s["clients"] if x["name"] == name]
            theirs = [x for x in line["clients"] if x["name"] == name]
            self.assertEqual([list(x) for x in mine], [list(x) for x in theirs], name)
        self.assertIn("arena", [x for x in line["clients"] if x["name"] == "other"][0])
        c.unsubscribe()
        c.stop_event_thread()
        self.assertFalse(t.is_alive())
        n = len(samples)
        time.sleep(0.2)
        self.assertEqual(len(samples), n, "samples after unsubscribe and stop")

    def test_event_keys_match_watch_lines(self):
        c = self.connect(name="watching")
        events = []
        c.on_event = events.append
        c.subscribe(samples=False, events=True)
        c.start_event_thread()
        watch = self.background([rocmmemctl_bin(), "--socket", self.sock, "--json", "watch",
                                 "-i", "10"], "watch")
        watch.wait_stdout(r'"type":"sample"')
        other = self.connect(name="other")
        with other.lease("2M"):
            pass
        watch.wait_stdout(r'"event":"lease_released"')
        poll_until(lambda: any(e.get("event") == "lease_released" for e in events), 5,
                   what="the release event")
        ctl = {}
        for line in watch.stdout().splitlines():
            o = json.loads(line)
            if o["type"] == "event":
                ctl[o["event"]] = o
        mine = {e["event"]: e for e in events if e["type"] == "event"}
        for name in ("lease_granted", "lease_released"):
            self.assertEqual(list(mine[name]), list(ctl[name]), name)
            for k in ("bytes", "lease_id", "client_name", "device", "detail"):
                self.assertEqual(mine[name][k], ctl[name][k], (name, k))
        connected = [e for e in events if e["event"] == "client_connected"]
        self.assertTrue(connected)
        self.assertIsNone(connected[0]["device"])

    def test_a_callback_that_raises_is_logged(self):
        c = self.connect(name="raising")

        def on_event(e):
            raise ValueError("bad handler")

        c.on_event = on_event
        c.subscribe(samples=True, events=False, interval=0.02)
        with self.assertLogs("rocmmem", logging.ERROR) as logs:
            poll_until(lambda: c.dispatch() > 0, 5, what="a sample dispatched")
        self.assertIn("ValueError: bad handler", "\n".join(logs.output))
        self.assertTrue(c.available)  # nothing reached C, the client goes on

    def test_close_from_a_callback_on_the_event_thread(self):
        c = rocmmem.connect(socket=self.sock, name="closing-itself")
        done = threading.Event()

        def on_event(e):
            c.close()
            done.set()

        c.on_event = on_event
        t = c.start_event_thread()
        c.subscribe(samples=True, events=False, interval=0.02)
        self.assertTrue(done.wait(5))
        t.join(5)
        self.assertFalse(t.is_alive())
        self.assertTrue(c.closed)
        self.wait_status(lambda st: all(x["name"] != "closing-itself" for x in st["clients"]),
                         what="the client to disconnect")

    def test_asyncio_loop(self):
        async def main():
            c = self.connect(name="asyncio")
            got = asyncio.Queue()
            c.on_event = got.put_nowait
            c.attach_loop()
            c.subscribe(samples=True, events=False, interval=0.02)
            first = await asyncio.wait_for(got.get(), 5)
            second = await asyncio.wait_for(got.get(), 5)
            c.detach_loop()
            return first, second

        first, second = asyncio.run(main())
        self.assertEqual((first["type"], second["type"]), ("sample", "sample"))

    def test_daemon_stopping_ends_the_event_thread(self):
        c = self.connect(name="left")
        events = []
        c.on_event = events.append
        t = c.start_event_thread()
        self.daemon.stop()
        t.join(10)
        self.assertFalse(t.is_alive())
        types = [e["type"] for e in events]
        self.assertIn("shutdown", types)
        self.assertEqual(types[-1], "disconnected")
        self.assertFalse(c.available)
        self.assertTrue(c.unavailable_reason)
        with self.assertRaises(rocmmem.DaemonUnavailable):
            c.dispatch()


if __name__ == "__main__":
    unittest.main()
