# SPDX-License-Identifier: MIT
"""rocmmemctl models, evict, pin and unpin, and models in status, with model_host as the owner."""
import json
import os
import re
import signal
import subprocess
import unittest

from daemon import MiB, CliTestCase, poll_until, reachable_ctl

ROOT = os.geteuid() == 0
MODEL_KEYS = {"id", "name", "class", "owner_pid", "device", "bytes", "state", "priority",
              "pinned", "size", "reservation_bytes", "lease_bytes", "idle_ms", "use_count",
              "evictions"}
INT_KEYS = MODEL_KEYS - {"name", "class", "state", "pinned"}
TABLE_HEADER = (r"(?m)^ID\s+NAME\s+CLASS\s+PID\s+DEVICE\s+STATE\s+RESIDENT\s+SIZE\s+PRIORITY\s+"
                r"PINNED\s+IDLE\s+EVICTIONS$")


def model_host_bin():
    path = os.environ.get("ROCMMEM_MODEL_HOST")
    if not path or not os.access(path, os.X_OK):
        raise RuntimeError("$ROCMMEM_MODEL_HOST is not set to the built model_host: run these "
                           "tests through ctest -L cli")
    return path


class ModelTestCase(CliTestCase):
    def host(self, *specs, args=(), name=None, ready=True):
        """Starts model_host with NAME:CLASS:SIZE[:PRIORITY[:pinned]] specs; returns the host and,
        once every model is resident ({} when ready is False), {name: id}."""
        self._hosts = getattr(self, "_hosts", 0) + 1
        h = self.background([model_host_bin(), self.sock, *args, *specs],
                            name or f"host-{self._hosts}")
        ids = {}
        if ready:
            for spec in specs:
                model = spec.split(":")[0]
                ids[model] = int(h.wait_stdout(rf"^registered {re.escape(model)} (\d+)$").group(1))
        return h, ids

    def models(self, *args):
        r = self.ctl("models", "--json", *args)
        self.assertEqual(r.rc, 0, r)
        self.assertEqual(r.stderr, "", r)
        self.assertEqual(r.stdout.count("\n"), 1, "one JSON document on one line")
        doc = r.json()
        self.assertEqual(doc["schema_version"], 1)
        self.assertEqual(set(doc), {"schema_version", "models"})
        return {m["id"]: m for m in doc["models"]}

    def check_model(self, m):
        """The fields and types of one models[] entry (models --json and status --json)."""
        self.assertEqual(set(m), MODEL_KEYS, m)
        for key in INT_KEYS:
            self.assertIs(type(m[key]), int, key)
        self.assertIs(type(m["pinned"]), bool)
        self.assertIn(m["class"], ("other", "transformer", "vae", "text_encoder", "image_encoder"))
        self.assertIn(m["state"], ("idle", "in_use", "evicting", "evicted", "waiting"))
        self.assertEqual(m["bytes"], m["reservation_bytes"] + m["lease_bytes"], m)

    def failed(self, r, rc, message):
        self.assert_no_output_but_error(r, rc)
        self.assertRegex(r.stderr, message, r)


class Models(ModelTestCase):
    def setUp(self):
        super().setUp()
        self.start_daemon()

    def start_hosts(self):
        self.h1, ids = self.host("flux:transformer:24M:5", "vae:vae:8M::pinned",
                                 "enc:text_encoder:4M:-3")
        self.h2, busy = self.host("busy:image_encoder:6M", args=["--in-use", "busy"])
        ids.update(busy)
        return ids

    def test_json(self):
        ids = self.start_hosts()
        models = self.models()
        self.assertEqual(sorted(models), sorted(ids.values()))
        for m in models.values():
            self.check_model(m)
        expect = {  # name: class, owner, size, state, priority, pinned, use_count
            "flux": ("transformer", self.h1.pid, 24 * MiB, "idle", 5, False, 0),
            "vae": ("vae", self.h1.pid, 8 * MiB, "idle", 0, True, 0),
            "enc": ("text_encoder", self.h1.pid, 4 * MiB, "idle", -3, False, 0),
            "busy": ("image_encoder", self.h2.pid, 6 * MiB, "in_use", 0, False, 1),
        }
        for name, (cls, pid, size, state, prio, pinned, uses) in expect.items():
            with self.subTest(model=name):
                m = models[ids[name]]
                self.assertEqual(m["name"], name)
                self.assertEqual(
                    (m["class"], m["owner_pid"], m["device"], m["size"], m["bytes"],
                     m["reservation_bytes"], m["lease_bytes"], m["state"], m["priority"],
                     m["pinned"], m["use_count"], m["evictions"]),
                    (cls, pid, 0, size, size, size, 0, state, prio, pinned, uses, 0))
        self.assertEqual(models[ids["busy"]]["idle_ms"], 0, "in use: not idle")
        self.assertEqual(sorted(self.models("--device", "0")), sorted(models))

    def test_table(self):
        ids = self.start_hosts()
        r = self.ctl("models")
        self.assertEqual(r.rc, 0, r)
        self.assertEqual(r.stderr, "", r)
        lines = r.stdout.splitlines()
        self.assertRegex(lines[0], TABLE_HEADER)
        self.assertEqual(len(lines), 5, r)
        rows = {  # name: class, pid, state, resident, size, priority, pinned, idle, evictions
            "flux": ("transformer", self.h1.pid, "idle", "24 MiB", "24 MiB", 5, "no", r"\d+s", 0),
            "vae": ("vae", self.h1.pid, "idle", "8 MiB", "8 MiB", 0, "yes", r"\d+s", 0),
            "enc": ("text_encoder", self.h1.pid, "idle", "4 MiB", "4 MiB", -3, "no", r"\d+s", 0),
            "busy": ("image_encoder", self.h2.pid, "in use", "6 MiB", "6 MiB", 0, "no", "-", 0),
        }
        for name, (cls, pid, state, res, size, prio, pinned, idle, evictions) in rows.items():
            self.assertRegex(r.stdout, rf"(?m)^{ids[name]}\s+{name}\s+{cls}\s+{pid}\s+0\s+{state}"
                                       rf"\s+{res}\s+{size}\s+{prio}\s+{pinned}\s+{idle}"
                                       rf"\s+{evictions}$")

    def test_long_names_are_not_cut(self):
        name = "a-rather-long-model-name-of-forty-bytes-"
        _, ids = self.host(f"{name}:other:2M")
        r = self.ctl("models")
        self.assertEqual(r.rc, 0, r)
        self.assertRegex(r.stdout, rf"(?m)^{ids[name]}\s+{name}\s+other\s")
        r = self.ctl("status")
        self.assertRegex(r.stdout, rf"(?m)^{ids[name]}\s+{name}\s+other\s")

    def test_none(self):
        r = self.ctl("models")
        self.assertEqual(r.rc, 0, r)
        self.assertRegex(r.stdout, TABLE_HEADER)
        self.assertEqual(r.stdout.count("\n"), 1, r)
        self.assertEqual(self.models(), {})
        r = self.ctl("status")
        self.assertNotRegex(r.stdout, r"(?m)^ID\s+NAME", "no models section without models")

    def test_device(self):
        _, ids = self.host("flux:transformer:24M")
        self.assertEqual(list(self.models("--device", "0")), [ids["flux"]])
        r = self.ctl("models", "--device", "1")
        self.failed(r, 2, r"^rocmmemctl: models: no device 1: the daemon manages 1 device")

    def test_status_table_and_json(self):
        ids = self.start_hosts()
        r = self.ctl("status")
        self.assertEqual(r.rc, 0, r)
        self.assertRegex(r.stdout, TABLE_HEADER)
        self.assertRegex(r.stdout, rf"(?m)^{ids['flux']}\s+flux\s+transformer\s+{self.h1.pid}\s+"
                                   r"0\s+idle\s+24 MiB\s+24 MiB\s+5\s+no\s")
        self.assertRegex(r.stdout, rf"(?m)^{ids['busy']}\s+busy\s+image_encoder\s+.*\sin use\s")
        # What models hold is reserved: neither leased nor free.
        self.assertRegex(r.stdout, r"(?m)^  device 0: 42 MiB reserved for models")
        st = self.status()
        mine = {m["id"]: m for m in st["models"]}
        listed = self.models()
        self.assertEqual(sorted(mine), sorted(ids.values()))
        for mid, m in mine.items():
            self.check_model(m)
            # The same entry in both documents (idle_ms moves on between the two).
            self.assertEqual({**m, "idle_ms": 0}, {**listed[mid], "idle_ms": 0})
        self.assertEqual(st["devices"][0]["reserved_bytes"], 42 * MiB)
        self.assertEqual(st["devices"][0]["free_bytes"], 22 * MiB)

    def test_waiting_request_shows_its_model(self):
        a, _ = self.host("big:transformer:48M", args=["--in-use", "big"])
        b, _ = self.host("small:vae:32M", ready=False)
        st = self.wait_status(lambda s: s["queue"], what="the model request in the queue")
        small = [m for m in st["models"] if m["name"] == "small"][0]
        self.assertEqual(small["state"], "waiting")
        self.assertEqual(small["owner_pid"], b.pid)
        self.assertEqual(len(st["queue"]), 1, st)
        w = st["queue"][0]
        self.assertEqual((w["owner_pid"], w["bytes"], w["model_id"]),
                         (b.pid, 32 * MiB, small["id"]))
        r = self.ctl("status")
        self.assertRegex(r.stdout,
                         r"(?m)^PID\s+DEVICE\s+SIZE\s+WAITED\s+TIMEOUT\s+MODEL\s+TAG$")
        self.assertRegex(r.stdout, rf"(?m)^{b.pid}\s+0\s+32 MiB\s+\S+\s+30s\s+"
                                   rf"small \({small['id']}\)\s+small$")
        self.assertRegex(r.stdout, rf"(?m)^{small['id']}\s+small\s+vae\s+{b.pid}\s+0\s+waiting\s")
        r = self.ctl("models")
        self.assertRegex(r.stdout, rf"(?m)^{small['id']}\s+small\s+.*\swaiting\s+0 B\s+32 MiB\s")
        # The holder goes: the waiting model becomes resident.
        a.signal(signal.SIGTERM)
        self.assertEqual(a.wait(), 0, a)
        b.wait_stdout(rf"^registered small {small['id']}$")
        self.assertEqual(self.models()[small["id"]]["state"], "idle")

    def test_lease_queue_entries_have_model_id_0(self):
        self.holder("60M").wait_stdout(r"^lease \d+: ")
        w = self.holder("10M", "--timeout", "20")
        st = self.wait_status(lambda s: s["queue"], what="the lease request in the queue")
        self.assertEqual(st["queue"][0]["owner_pid"], w.pid)
        self.assertEqual(st["queue"][0]["model_id"], 0)
        self.assertEqual(st["leases"][0]["model_id"], 0)
        r = self.ctl("status")
        self.assertRegex(r.stdout, rf"(?m)^{w.pid}\s+0\s+10 MiB\s+\S+\s+20s\s+-\s*$")


@unittest.skipUnless(ROOT, "the daemon lets only a model's owner or root evict or pin it")
class EvictAndPin(ModelTestCase):
    def setUp(self):
        super().setUp()
        self.start_daemon()

    def test_evict_by_id(self):
        h, ids = self.host("flux:transformer:24M", "vae:vae:8M")
        r = self.ctl("evict", str(ids["flux"]))
        self.assertEqual(r.rc, 0, r)
        self.assertEqual(r.stderr, "", r)
        self.assertRegex(r.stdout, rf"^evicted model {ids['flux']} 'flux' of pid {h.pid}: "
                                   r"24 MiB freed in \d+\.\d\d s\n$")
        h.wait_stdout(r"^evict flux\nacked flux$")
        m = self.models()
        self.assertEqual((m[ids["flux"]]["state"], m[ids["flux"]]["bytes"],
                          m[ids["flux"]]["reservation_bytes"], m[ids["flux"]]["evictions"]),
                         ("evicted", 0, 0, 1))
        self.assertEqual((m[ids["vae"]]["state"], m[ids["vae"]]["bytes"]), ("idle", 8 * MiB))
        self.assertEqual(self.status()["devices"][0]["reserved_bytes"], 8 * MiB)
        # Evicted already: nothing to do, and the owner is not asked again.
        r = self.ctl("evict", str(ids["flux"]))
        self.assertEqual(r.rc, 0, r)
        self.assertEqual(r.stdout, f"model {ids['flux']} 'flux' of pid {h.pid} holds no memory: "
                                   "nothing to evict\n")
        self.assertEqual(self.models()[ids["flux"]]["evictions"], 1)
        self.assertEqual(h.stdout().count("evict flux"), 1, h)
        r = self.ctl("evict", str(ids["flux"]), "--json")
        self.assertEqual(r.rc, 0, r)
        self.assertEqual({k: r.json()[k] for k in ("evicted", "revoked", "bytes_freed")},
                         {"evicted": False, "revoked": False, "bytes_freed": 0})

    def test_evict_by_name_json(self):
        h, ids = self.host("flux:transformer:24M", "vae:vae:8M")
        r = self.ctl("--json", "evict", "vae")
        self.assertEqual(r.rc, 0, r)
        self.assertEqual(r.stdout.count("\n"), 1, r)
        o = r.json()
        self.assertIs(type(o["elapsed_ms"]), int)
        del o["elapsed_ms"]
        self.assertEqual(o, {"id": ids["vae"], "name": "vae", "owner_pid": h.pid, "device": 0,
                             "evicted": True, "revoked": False, "bytes_freed": 8 * MiB})
        h.wait_stdout(r"^acked vae$")
        self.assertNotIn("evict flux", h.stdout())
        m = self.models()
        self.assertEqual((m[ids["vae"]]["state"], m[ids["vae"]]["bytes"]), ("evicted", 0))
        self.assertEqual(m[ids["flux"]]["state"], "idle")

    def test_unknown_model(self):
        self.host("flux:transformer:24M")
        for cmd in ("evict", "pin", "unpin"):
            with self.subTest(cmd=cmd):
                self.failed(self.ctl(cmd, "999"), 2, rf"^rocmmemctl: {cmd}: no model 999\b")
                self.failed(self.ctl(cmd, "nope"), 2,
                            rf"^rocmmemctl: {cmd}: no model named 'nope'")
                self.failed(self.ctl(cmd, "99999999999999999999999"), 2,
                            rf"^rocmmemctl: {cmd}: no model 9+\b")

    def test_ambiguous_name(self):
        h1, a = self.host("dup:vae:4M", "solo:vae:2M")
        h2, b = self.host("dup:transformer:8M")
        for cmd in ("evict", "pin", "unpin"):
            with self.subTest(cmd=cmd):
                r = self.ctl(cmd, "dup")
                self.failed(r, 2, rf"^rocmmemctl: {cmd}: 2 models are named 'dup'; name one by "
                                  r"its id:\n")
                self.assertRegex(r.stderr, rf"(?m)^  id {a['dup']}: pid {h1.pid}, device 0, idle, "
                                           r"4 MiB$")
                self.assertRegex(r.stderr, rf"(?m)^  id {b['dup']}: pid {h2.pid}, device 0, idle, "
                                           r"8 MiB$")
        self.assertNotIn("evict", h1.stdout() + h2.stdout())
        self.assertFalse(any(m["pinned"] for m in self.models().values()))
        # The id picks one.
        r = self.ctl("evict", str(b["dup"]))
        self.assertEqual(r.rc, 0, r)
        h2.wait_stdout(r"^acked dup$")
        m = self.models()
        self.assertEqual((m[a["dup"]]["state"], m[b["dup"]]["state"]), ("idle", "evicted"))
        self.assertNotIn("evict", h1.stdout())

    def test_in_use_is_refused(self):
        h, ids = self.host("busy:vae:4M", args=["--in-use", "busy"])
        self.failed(self.ctl("evict", "busy"), 2,
                    rf"^rocmmemctl: evict: model {ids['busy']} 'busy' is in use")
        self.assertEqual(self.models()[ids["busy"]]["state"], "in_use")
        self.assertNotIn("evict", h.stdout())

    def test_pin_and_unpin(self):
        h, ids = self.host("flux:transformer:24M")
        fid = ids["flux"]
        r = self.ctl("pin", "flux")
        self.assertEqual((r.rc, r.stderr), (0, ""), r)
        self.assertEqual(r.stdout, f"pinned model {fid} 'flux' of pid {h.pid}: the daemon will not "
                                   "evict it to make room\n")
        self.assertTrue(self.models()[fid]["pinned"])
        r = self.ctl("pin", str(fid))
        self.assertEqual(r.stdout, f"model {fid} 'flux' of pid {h.pid} was already pinned\n")
        r = self.ctl("pin", str(fid), "--json")
        self.assertEqual(r.json(), {"id": fid, "name": "flux", "owner_pid": h.pid, "device": 0,
                                    "pinned": True, "changed": False})
        # Pinned: a request that needs its memory is not served by evicting it.
        r = self.ctl("lease", "48M", "--timeout", "0.3", "--hold", "0")
        self.failed(r, 2, r"^rocmmemctl: lease refused")
        self.assertNotIn("evict", h.stdout())
        self.assertEqual(self.models()[fid]["state"], "idle")
        # An administrator's explicit eviction is honoured all the same, and it stays pinned.
        r = self.ctl("evict", "flux")
        self.assertEqual(r.rc, 0, r)
        h.wait_stdout(r"^acked flux$")
        m = self.models()[fid]
        self.assertEqual((m["state"], m["bytes"], m["pinned"], m["evictions"]),
                         ("evicted", 0, True, 1))
        r = self.ctl("unpin", "flux", "--json")
        self.assertEqual(r.json(), {"id": fid, "name": "flux", "owner_pid": h.pid, "device": 0,
                                    "pinned": False, "changed": True})
        self.assertFalse(self.models()[fid]["pinned"])
        r = self.ctl("unpin", "flux")
        self.assertEqual(r.stdout, f"model {fid} 'flux' of pid {h.pid} was already unpinned\n")

    def test_unpinned_model_makes_room(self):
        h, ids = self.host("flux:transformer:24M::pinned")
        self.assertTrue(self.models()[ids["flux"]]["pinned"])
        r = self.ctl("unpin", "flux")
        self.assertEqual(r.stdout, f"unpinned model {ids['flux']} 'flux' of pid {h.pid}: the "
                                   "daemon may evict it when it is idle\n")
        r = self.ctl("lease", "48M", "--timeout", "5", "--hold", "0")
        self.assertEqual(r.rc, 0, r)
        h.wait_stdout(r"^evict flux\nacked flux$")
        self.assertEqual(self.models()[ids["flux"]]["evictions"], 1)


@unittest.skipUnless(ROOT, "the daemon lets only a model's owner or root evict or pin it")
class EvictDeadline(ModelTestCase):
    def test_owner_that_never_acks(self):
        self.start_daemon(extra=["--evict-deadline", "1"])
        h, ids = self.host("slow:transformer:16M", args=["--no-ack"])
        r = self.ctl("evict", "slow", "--json", timeout=10)
        self.assertEqual(r.rc, 0, r)
        o = r.json()
        self.assertTrue(o["evicted"])
        self.assertTrue(o["revoked"], "the owner never acked: the daemon took the memory back")
        self.assertEqual(o["bytes_freed"], 16 * MiB)
        self.assertGreaterEqual(o["elapsed_ms"], 900, "answered once the deadline passed")
        h.wait_stdout(r"^evict slow\nrevoked slow$")
        self.assertNotIn("acked", h.stdout())
        m = self.models()[ids["slow"]]
        self.assertEqual((m["state"], m["bytes"], m["evictions"]), ("evicted", 0, 1))

    def test_owner_that_never_acks_text(self):
        self.start_daemon(extra=["--evict-deadline", "1"])
        h, ids = self.host("slow:transformer:16M", args=["--no-ack"])
        r = self.ctl("evict", str(ids["slow"]), timeout=10)
        self.assertEqual(r.rc, 0, r)
        self.assertRegex(r.stdout, rf"^model {ids['slow']} 'slow' of pid {h.pid} did not unload "
                                   r"in time: its 16 MiB were revoked after \d+\.\d\d s\n$")
        h.wait_stdout(r"^evict slow\nrevoked slow$")


class NotTheOwner(ModelTestCase):
    """Another user's models: the daemon refuses (exit 2) unless rocmmemctl runs as root."""

    def test_refused(self):
        self.start_daemon()
        h, ids = self.host("flux:transformer:24M")
        if ROOT:
            # Run rocmmemctl as nobody, on a socket nobody may reach.
            os.chmod(self.dir, 0o755)
            os.chmod(self.sock, 0o666)

            ctl_copy, ctl_env = reachable_ctl()

            def ctl(*args):
                p = subprocess.run([ctl_copy, "--socket", self.sock, *args],
                                   stdin=subprocess.DEVNULL, capture_output=True, text=True,
                                   env=ctl_env, user=65534, group=65534, extra_groups=[],
                                   timeout=10)
                p.rc = p.returncode
                return p
        else:
            ctl = self.ctl
        for args in (["evict", "flux"], ["pin", "flux"], ["unpin", str(ids["flux"])]):
            with self.subTest(args=args):
                r = ctl(*args)
                self.failed(r, 2, rf"^rocmmemctl: {args[0]}: model {ids['flux']} 'flux' belongs "
                                  r"to .*only its owner or root may evict or pin it")
        r = ctl("models")
        self.assertEqual(r.rc, 0, r)
        m = self.models()[ids["flux"]]
        self.assertEqual((m["state"], m["pinned"]), ("idle", False))
        self.assertNotIn("evict", h.stdout())


class Usage(ModelTestCase):
    """Exit 1, a message on stderr, nothing on stdout, nothing done."""

    def setUp(self):
        super().setUp()
        self.start_daemon()

    def test_usage_errors(self):
        cases = [
            (["models", "extra"], r"^rocmmemctl models: unexpected argument 'extra'"),
            (["models", "--frob"], r"^rocmmemctl models: unknown option '--frob'"),
            (["models", "--device"], r"^rocmmemctl models: option '--device' needs a value"),
            (["models", "--device", "abc"], r"^rocmmemctl models: invalid --device 'abc'"),
            (["models", "--device", "-1"], r"^rocmmemctl models: invalid --device '-1'"),
            (["evict"], r"^rocmmemctl evict: missing MODEL"),
            (["evict", "--json"], r"^rocmmemctl evict: missing MODEL"),
            (["evict", "a", "b"], r"^rocmmemctl evict: unexpected argument 'b'"),
            (["evict", ""], r"^rocmmemctl evict: MODEL must not be empty"),
            (["evict", "--frob", "a"], r"^rocmmemctl evict: unknown option '--frob'"),
            (["pin"], r"^rocmmemctl pin: missing MODEL"),
            (["pin", "a", "b"], r"^rocmmemctl pin: unexpected argument 'b'"),
            (["pin", "--socket"], r"^rocmmemctl pin: option '--socket' needs a value"),
            (["unpin"], r"^rocmmemctl unpin: missing MODEL"),
            (["unpin", "1", "2"], r"^rocmmemctl unpin: unexpected argument '2'"),
        ]
        for args, message in cases:
            with self.subTest(args=args):
                self.failed(self.ctl(*args), 1, message)
                self.assertIn(f"Try 'rocmmemctl {args[0]} --help'", self.ctl(*args).stderr)

    def test_help_lists_the_commands(self):
        r = self.ctl("--help", sock=False)
        self.assertEqual(r.rc, 0, r)
        for line in (r"^  models \[--device N\]", r"^  evict MODEL \[--force\]$", r"^  pin MODEL$",
                     r"^  unpin MODEL$"):
            self.assertRegex(r.stdout, "(?m)" + line)
        self.assertIn("MODEL is a model's id", r.stdout)


class Unreachable(ModelTestCase):
    def test_no_daemon(self):
        missing = os.path.join(self.dir, "missing.sock")
        for args in (["models"], ["models", "--json"], ["evict", "flux"], ["pin", "1"],
                     ["unpin", "flux"]):
            with self.subTest(args=args):
                self.failed(self.ctl(*args, sock=missing), 3, r"^rocmmemctl: ")


if __name__ == "__main__":
    unittest.main()
