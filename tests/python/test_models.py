# SPDX-License-Identifier: MIT
"""Models from Python: registered, acquired and released; evicted on the daemon's request,
driven from another process (a lease that needs the room, rocmmemctl evict, evict_model), with
the owner's on_evict unloading the model and the package acking; revoked when on_evict fails."""
import os
import unittest

from fixture import MiB, PyTestCase, poll_until, rocmmem

# A model host in a child: a 48 MiB transformer whose "weights" are a bytearray that on_evict
# deletes. Events reach it through the event thread (argv[2] == "thread") or a select loop
# on fileno() (argv[2] == "select").
OWNER = """
    import select
    weights = {}
    def on_evict(model):
        weights.clear()
        say("unloaded", model.name, "resident" if model.resident else "not-resident")
    def on_revoked(model, reason):
        say("revoked", model.name, reason)
    c = rocmmem.connect(socket=SOCK, name="owner")
    m = c.register_model("weights", "48M", model_class="transformer", priority=1,
                         on_evict=on_evict, on_revoked=on_revoked)
    with m.use():
        weights["w"] = bytearray(1 << 20)
    say("ready", m.id, m.resident)
    if sys.argv[2] == "thread":
        c.start_event_thread()
        while True:
            time.sleep(0.05)
            if not weights and not m.resident:
                say("acked")
                break
        while True:
            time.sleep(1)
    else:
        fd = c.fileno()
        while True:
            r, _, _ = select.select([fd], [], [], 5)
            if r:
                c.dispatch()
                if not weights and not m.resident:
                    say("acked")
    """


class ModelTest(PyTestCase):
    def start(self, *extra):
        self.start_daemon(extra=extra)

    def owner(self, mode="thread", code=OWNER):
        p = self.python(code, mode, name=f"owner-{mode}")
        m = p.wait_stdout(r"^ready (\d+) True$", timeout=10)
        return p, int(m.group(1))

    def model(self, model_id):
        return [x for x in self.status()["models"] if x["id"] == model_id][0]

    def test_evicted_for_another_process_lease_event_thread(self):
        self.start()
        p, mid = self.owner("thread")
        self.assertEqual(self.model(mid)["state"], "idle")
        self.assertEqual(self.model(mid)["bytes"], 48 * MiB)
        c = self.connect(name="needs-room")
        with c.lease("32M", timeout=10) as lease:  # fits only once the model is unloaded
            self.assertEqual(lease.size, 32 * MiB)
            p.wait_stdout(r"^unloaded weights resident$")
            p.wait_stdout(r"^acked$")
            m = self.model(mid)
            self.assertEqual(m["state"], "evicted")
            self.assertEqual(m["evictions"], 1)
            self.assertEqual(m["bytes"], 0)
        st = self.status()
        self.assertEqual(st["counters"]["evictions"], 1)
        self.assertEqual(st["counters"]["revocations"], 0)
        self.assertNotIn("Traceback", p.stderr())

    def test_evicted_for_another_process_select_loop(self):
        self.start()
        p, mid = self.owner("select")
        c = self.connect(name="needs-room")
        lease = c.lease("40M", timeout=10)
        p.wait_stdout(r"^unloaded weights")
        p.wait_stdout(r"^acked$")
        self.assertEqual(self.model(mid)["state"], "evicted")
        lease.release()

    def test_rocmmemctl_evict_and_evict_model(self):
        self.start()
        p, mid = self.owner("thread")
        r = self.ctl("evict", "weights", timeout=20)
        self.assertEqual(r.rc, 0, r)
        self.assertRegex(r.stdout, rf"^evicted model {mid} 'weights' of pid {p.pid}: 48 MiB "
                                   r"freed in")
        p.wait_stdout(r"^unloaded weights")
        # Again through the package, as the admin side (root may evict anyone's model).
        p2, mid2 = self.owner("select")
        c = self.connect(name="admin")
        ev = c.evict_model(mid2)
        self.assertEqual(ev, rocmmem.Eviction(bytes_freed=48 * MiB, revoked=False))
        p2.wait_stdout(r"^unloaded weights")
        self.assertEqual(c.evict_model(mid2), (0, False))  # holds nothing now

    def test_on_evict_that_raises_is_not_acked_and_the_daemon_revokes(self):
        self.start("--evict-deadline", "0.5")
        code = OWNER.replace("weights.clear()", "raise RuntimeError('cannot unload now')")
        p, mid = self.owner("thread", code)
        c = self.connect(name="needs-room")
        with c.lease("32M", timeout=10):
            p.wait_stdout(r"^revoked weights did not unload within 0.5 s")
            self.assertEqual(self.model(mid)["state"], "evicted")
        err = p.stderr()
        self.assertIn("RuntimeError: cannot unload now", err)
        self.assertIn("on_evict of model", err)
        self.assertEqual(self.status()["counters"]["revocations"], 1)

    def test_tagged_lease_revoked_with_its_model(self):
        self.start("--evict-deadline", "0.3")
        owner = self.connect(name="slow-owner")
        revoked = []

        def refuse(model):
            raise RuntimeError("still computing")

        m = owner.register_model("tiles", model_class="vae", on_evict=refuse,
                                 on_revoked=lambda model, why: revoked.append(why))
        with m.use():
            tile = owner.lease("48M", model=m)
            tile.buffer[:4] = b"tile"
            view = tile.buffer
        owner.start_event_thread()
        other = self.connect(name="needs-room")
        with self.assertLogs("rocmmem", "ERROR"):
            with other.lease("32M", timeout=10):
                poll_until(lambda: revoked, 5, what="on_revoked")
        self.assertTrue(tile.revoked)
        self.assertTrue(tile.released)
        self.assertEqual(tile.revoked_reason, revoked[0])
        self.assertIn("did not unload within 0.3 s", revoked[0])
        self.assertIsNone(tile.buffer)
        with self.assertRaises(ValueError):
            view[0]
        self.assertFalse(m.resident)
        tile.release()  # after the revocation: nothing to do

    def test_own_model_evicted_inside_a_waiting_call(self):
        self.start()
        c = self.connect(name="single-threaded")
        log = []
        vae = c.register_model("vae", "40M", model_class="vae",
                               on_evict=lambda m: log.append(("evict", m.name)))
        with vae.use():
            pass
        self.assertTrue(vae.resident)
        tagged = c.lease("8M", model=vae)  # counts toward vae: released with it
        self.assertEqual(self.model(vae.id)["bytes"], 48 * MiB)
        with c.lease("40M", timeout=10) as lease:  # no dispatch: delivered inside the wait
            self.assertEqual(log, [("evict", "vae")])
            self.assertFalse(vae.resident)
            self.assertTrue(tagged.released)
            self.assertEqual(lease.size, 40 * MiB)
        # Acquiring again reserves it again.
        with vae.use(timeout=10):
            self.assertTrue(vae.resident)
            self.assertEqual(self.model(vae.id)["state"], "in_use")

    def test_register_acquire_release_resize_pin_unregister(self):
        self.start()
        c = self.connect(name="lifecycle")
        m = c.register_model("te", size="4M", model_class="text_encoder", priority=3)
        self.assertGreater(m.id, 0)
        self.assertEqual((m.name, m.size, m.model_class, m.priority, m.pinned, m.resident),
                         ("te", 4 * MiB, "text_encoder", 3, False, False))
        info = self.model(m.id)
        self.assertEqual((info["name"], info["class"], info["owner_pid"], info["state"],
                          info["size"], info["priority"]),
                         ("te", "text_encoder", os.getpid(), "evicted", 4 * MiB, 3))
        self.assertIs(m.acquire(timeout=5), m)
        m.acquire()  # acquires nest
        self.assertEqual(self.model(m.id)["use_count"], 2)
        m.release()
        m.release()
        self.assertEqual(self.model(m.id)["state"], "idle")
        m.resize("8M", timeout=5)
        self.assertEqual(self.model(m.id)["reservation_bytes"], 8 * MiB)
        m.pin()
        self.assertTrue(self.model(m.id)["pinned"])
        self.assertTrue(m.pinned)
        c.pin_model(m.id, False)
        self.assertFalse(self.model(m.id)["pinned"])
        self.assertEqual(c.models(), [m])
        m.unregister()
        self.assertEqual(c.models(), [])
        self.assertEqual(self.status()["models"], [])

    def test_evict_request_through_on_event_and_a_manual_ack(self):
        self.start()
        c = self.connect(name="manual")
        seen = []

        def on_event(event):
            seen.append(event)
            if event["type"] == "evict_request":
                c.evict_ack(event["model_id"])

        c.on_event = on_event
        m = c.register_model("manual", "48M")
        with m.use():
            pass
        c.start_event_thread()
        other = self.connect(name="other")
        with other.lease("32M", timeout=10):
            pass
        ev = [e for e in seen if e["type"] == "evict_request"]
        self.assertEqual(len(ev), 1, seen)
        self.assertEqual(ev[0]["model_id"], m.id)
        self.assertEqual(ev[0]["bytes_needed"], 32 * MiB)
        self.assertEqual(ev[0]["deadline_ms"], 20000)
        self.assertFalse(m.resident)

    def test_owner_killed_mid_eviction(self):
        self.start("--evict-deadline", "30")
        code = OWNER.replace("weights.clear()", "say('stalling'); time.sleep(60)")
        p, mid = self.owner("thread", code)
        c = self.connect(name="needs-room")
        result = {}
        import threading

        def take():
            with c.lease("32M", timeout=20) as lease:
                result["size"] = lease.size

        t = threading.Thread(target=take)
        t.start()
        p.wait_stdout(r"^stalling$")
        p.kill()
        t.join(20)
        self.assertEqual(result, {"size": 32 * MiB})
        self.wait_client_gone(p.pid)


if __name__ == "__main__":
    unittest.main()
