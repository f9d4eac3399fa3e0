# SPDX-License-Identifier: MIT
"""client.status() against `rocmmemctl status --json` (the same keys, in the same order, and
the same values for what does not move), trim() and metrics()."""
import os
import signal
import threading
import unittest

from fixture import MiB, PyTestCase, poll_until, rocmmem

# Values that change between two snapshots taken a moment apart.
MOVING = {"uptime_s", "age_ms", "waited_ms", "connected_s", "idle_ms", "oldest_wait_ms",
          "timestamp_ms", "fds_open"}  # fds_open: rocmmemctl is one more connection


def strip(value):
    if isinstance(value, dict):
        return {k: strip(v) for k, v in value.items() if k not in MOVING}
    if isinstance(value, list):
        return [strip(v) for v in value]
    return value


class StatusTest(PyTestCase):
    def setUp(self):
        super().setUp()
        self.start_daemon()

    def busy_daemon(self):
        """Leases, models (idle, in use), a waiting request and a refusal in the books."""
        c = self.connect(name="py-status")
        held = c.lease("20M", tag="python")
        m = c.register_model("vae", "8M", model_class="vae", priority=2)
        with m.use():
            pass
        t = c.register_model("dit", "16M", model_class="transformer", pinned=True)
        t.acquire()
        with self.assertRaises(rocmmem.OutOfMemory):
            c.lease("30M")
        waiter = self.holder("40M", "--timeout", "30", "--tag", "queued", name="waiter")
        self.wait_status(lambda st: st["queue"], what="the waiting request")
        self.addCleanup(waiter.kill)
        return c, held, m, t

    def test_same_keys_and_values_as_rocmmemctl(self):
        c, held, m, t = self.busy_daemon()
        mine = c.status()
        ctl = self.status()
        self.assertEqual(list(mine), ["schema_version", "daemon", "devices", "clients",
                                      "leases", "models", "queue", "denials", "counters",
                                      "limits", "access", "awaiting_redeclare"])
        self.assertEqual(list(mine), list(ctl))
        for section in ("daemon", "counters", "limits", "access"):
            self.assertEqual(list(mine[section]), list(ctl[section]), section)
        for section in ("devices", "clients", "leases", "models", "queue", "denials"):
            self.assertTrue(mine[section], section)
            if section != "clients":  # rocmmemctl's own connection is one more
                self.assertEqual(len(mine[section]), len(ctl[section]), section)
            for a, b in zip(mine[section], ctl[section]):
                self.assertEqual(list(a), list(b), section)
        # What does not move between the two snapshots is equal, value for value (the
        # clients differ by the rocmmemctl process itself).
        a, b = strip(mine), strip(ctl)
        for section in ("daemon", "devices", "leases", "models", "queue", "denials",
                        "counters", "limits", "access", "schema_version"):
            self.assertEqual(a[section], b[section], section)
        lease = mine["leases"][0]
        self.assertEqual((lease["id"], lease["owner_pid"], lease["bytes"], lease["tag"]),
                         (held.id, os.getpid(), 20 * MiB, "python"))
        models = {x["name"]: x for x in mine["models"]}
        self.assertEqual(models["vae"]["state"], "idle")
        self.assertEqual(models["dit"]["state"], "in_use")
        self.assertIs(models["dit"]["pinned"], True)
        self.assertEqual(mine["denials"][-1]["error"], "ENOMEM")
        self.assertEqual(mine["denials"][-1]["errno"], 12)
        self.assertEqual(mine["queue"][0]["tag"], "queued")
        self.assertIs(mine["devices"][0]["integrated"], False)
        t.release()

    def test_arena(self):
        """A client's host arena: used is the sum of its leases, as rocmmemctl shows it too;
        a release takes its bytes off at once, and its range is free once punched (a hole
        between two leases: fragmented); a client without arenas has no "arena"."""
        c = self.connect(name="arena")
        os.environ["ROCMMEM_HOST_ARENA"] = "0"
        try:
            plain = self.connect(name="no-arena")
        finally:
            del os.environ["ROCMMEM_HOST_ARENA"]
        leases = [c.lease(size) for size in ("6M", "10M", "4M")]
        plain_lease = plain.lease("2M")

        def mine(st, name):
            found = [x for x in st["clients"] if x["pid"] == os.getpid() and x["name"] == name]
            self.assertEqual(len(found), 1, st["clients"])
            return found[0]

        whole = {"size_bytes": 128 * MiB, "used_bytes": 20 * MiB, "free_bytes": 108 * MiB,
                 "largest_free_bytes": 108 * MiB, "fallbacks": 0}  # twice the 64M budget
        for st in (c.status(), self.status()):
            self.assertEqual(mine(st, "arena")["arena"], whole)
            self.assertEqual(mine(st, "arena")["leased_bytes"], 20 * MiB)
            self.assertNotIn("arena", mine(st, "no-arena"))
        leases[1].release()  # the middle one
        self.assertEqual(mine(c.status(), "arena")["arena"]["used_bytes"], 10 * MiB)
        st = self.wait_status(lambda s: mine(s, "arena")["arena"]["free_bytes"] == 118 * MiB,
                              what="the released range punched and free")
        self.assertEqual(mine(st, "arena")["arena"],
                         dict(whole, used_bytes=10 * MiB, free_bytes=118 * MiB))
        view = self.ctl("status").stdout
        self.assertRegex(view, rf"(?m)^  pid {os.getpid()}: arena 10 MiB used of 128 MiB, "
                               r"8\.5% fragmented \(longest free 108 MiB\)$")  # 1 - 108/118
        self.assertEqual(view.count(f"pid {os.getpid()}: arena"), 1, view)
        for lease in (leases[0], leases[2], plain_lease):
            lease.release()

    def test_status_from_threads(self):
        c = self.connect(name="threads")
        held = c.lease("4M")
        errors = []

        def poll():
            try:
                for _ in range(20):
                    st = c.status()
                    if st["devices"][0]["leased_bytes"] != 4 * MiB:
                        raise AssertionError(st)
            except BaseException as e:
                errors.append(e)

        threads = [threading.Thread(target=poll) for _ in range(4)]
        for th in threads:
            th.start()
        for th in threads:
            th.join(30)
        self.assertEqual(errors, [])
        held.release()

    def test_trim_and_metrics(self):
        c = self.connect(name="metrics")
        self.assertEqual(c.trim(), 0)  # the host backend caches nothing
        self.assertEqual(c.trim(0), 0)
        with self.assertRaises(rocmmem.NotFound):
            c.trim(5)
        with c.lease("4M"):
            text = c.metrics()
        self.assertIsInstance(text, str)
        self.assertIn('rocmmemd_build_info{version="', text)
        self.assertRegex(text, r'rocmmemd_device_leased_bytes\{device="0",[^}]*\} 4194304')
        r = self.ctl("metrics")
        self.assertEqual(r.rc, 0, r)
        def names(t):
            return [l.split("{")[0].split(" ")[0] for l in t.splitlines()]

        self.assertEqual(names(text), names(r.stdout))

    def test_version_and_daemon_info(self):
        c = self.connect(name="version")
        st = c.status()
        self.assertEqual(c.daemon_version, st["daemon"]["version"])
        self.assertEqual(c.daemon_version, rocmmem.__version__)
        self.assertEqual(st["daemon"]["pid"], self.daemon.pid)



class ArenaFallbackTest(PyTestCase):
    def write_budget(self, budget):
        path = os.path.join(self.dir, "rocmmemd.conf")
        with open(path + ".tmp", "w") as f:
            f.write(f"[devices]\nbudget = {budget}\n")
        os.replace(path + ".tmp", path)  # a reload never sees a half-written file
        return path

    def test_fallback_shown(self):
        """A lease that fits no free range of the arena (sized for a 32M budget, then a reload
        raised it) is no part of the arena but counted in its fallbacks, and the view says so."""
        d = self.start_daemon(budget=None, extra=["--config", self.write_budget("32M")])
        c = self.connect(name="grown")
        held = [c.lease("16M")]  # the arena: 64 MiB
        self.write_budget("256M")
        d.signal(signal.SIGHUP)
        poll_until(lambda: "reloaded the configuration" in d.log(), what="the reload")
        held += [c.lease("40M"), c.lease("32M")]  # 8 MiB left in the arena: its own memfd
        self.assertEqual([x.fd >= 0 for x in held], [False, False, True])
        st = self.status()
        grown = [x for x in st["clients"] if x["name"] == "grown"][0]
        self.assertEqual(grown["leased_bytes"], 88 * MiB)
        self.assertEqual(grown["arena"], {"size_bytes": 64 * MiB, "used_bytes": 56 * MiB,
                                          "free_bytes": 8 * MiB, "largest_free_bytes": 8 * MiB,
                                          "fallbacks": 1})
        self.assertRegex(self.ctl("status").stdout,
                         rf"(?m)^  pid {os.getpid()}: arena 56 MiB used of 64 MiB, 0\.0% "
                         r"fragmented \(longest free 8 MiB\), 1 lease\(s\) outside it$")
        for lease in held:
            lease.release()


if __name__ == "__main__":
    unittest.main()
