# SPDX-License-Identifier: MIT
"""F4 through the Python package: events of an old eviction against a model acquired again.

An owner process (the package, its event thread) holds a model with a tagged lease; a requester
needs the room. Replayed for many rounds ($ROCMMEM_F4_ROUNDS, more under the label long) with a
short --evict-deadline: (a) an on_evict slower than the deadline while the host acquires the
model again and leases anew, (b) the owner stopped (SIGSTOP) past the deadline and continued
(SIGCONT), at random moments of the eviction. The new residency's lease is never released or
revoked because of an old event, no stale event reaches a callback of a host that acquired
since, and the daemon refuses the stale ack with a warning."""
import os
import random
import select
import signal
import subprocess
import threading
import time
import unittest

from fixture import PYTHON, PyTestCase, child_env, poll_until

DEADLINE = 0.02  # --evict-deadline
SLOW = 0.06  # the slow on_evict: well past the deadline
ROUNDS = int(os.environ.get("ROCMMEM_F4_ROUNDS", "100"))

OWNER = r"""
import logging, sys, threading, time
import rocmmem

SOCK, MODE, SLOW = sys.argv[1], sys.argv[2], float(sys.argv[3])
acks = {"ok": 0, "stale": 0, "other": 0}
ack_done = threading.Event()


class AckLog(logging.Handler):
    # The package logs each ack's answer at debug level: it tells when _evict is over.
    def emit(self, record):
        msg = record.getMessage()
        if "acked the eviction" in msg:
            acks["ok"] += 1
        elif "ack of model" in msg:
            acks["stale" if "ESTALE" in msg else "other"] += 1
        else:
            return
        ack_done.set()


log = logging.getLogger("rocmmem")
log.addHandler(AckLog())
log.setLevel(logging.DEBUG)
c = rocmmem.connect(socket=SOCK, name="py-f4-owner")
seen = threading.Event()
state = {"threaded": False, "host_gen": 0, "stale": 0, "broken": 0, "seed": 0}


def check_stale(model):
    # Single-threaded, the host knows whether its acquire has returned: then nothing older
    # than the residency it got may reach it.
    if not state["threaded"] and model.event_generation < state["host_gen"]:
        state["stale"] += 1


def on_evict(model):
    check_stale(model)
    seen.set()
    if MODE == "slow":
        time.sleep(SLOW)


def on_revoked(model, reason):
    check_stale(model)


m = c.register_model("replayed", "8M", on_evict=on_evict, on_revoked=on_revoked)
current = None


def pattern(seed):
    return bytes((seed * 7 + i) % 251 for i in range(64))


def intact(lease):
    p = pattern(state["seed"])
    return (lease is not None and not lease.released and not lease.revoked and
            bytes(lease.buffer[:64]) == p and bytes(lease.buffer[-64:]) == p)


def reacquire():
    global current
    m.acquire(timeout=15)
    state["host_gen"] = m.generation
    state["seed"] += 1
    lease = c.lease("4M", model=m, timeout=15, tag="weights")
    if lease.generation != state["host_gen"]:
        raise SystemExit(f"lease of generation {lease.generation}, "
                         f"model at {state['host_gen']}")
    lease.buffer[:64] = lease.buffer[-64:] = pattern(state["seed"])
    old, current = current, lease
    return old


reacquire()
m.release()
print("up", flush=True)
for line in sys.stdin:
    cmd = line.split()
    if cmd[0] == "exit":
        break
    threaded = cmd[1] == "1"
    if threaded and not state["threaded"]:
        c.start_event_thread()
    elif not threaded and state["threaded"]:
        c.stop_event_thread()
    state["threaded"] = threaded
    state["broken"] += not intact(current)  # what the last round left
    seen.clear()
    ack_done.clear()
    print("ready", flush=True)
    if MODE == "slow":
        seen.wait(15)  # the host wants the model again as soon as on_evict starts
    else:
        sys.stdin.readline()  # continued: go on
    old = reacquire()
    if MODE == "slow":
        ack_done.wait(5)  # its on_evict returned, its leases released, its ack answered
    while c.dispatch() > 0:
        pass
    if old is not None:
        old.release()
    state["broken"] += not intact(current)
    m.release()
    print("done", current.id, state["broken"], state["stale"], acks["stale"], acks["other"],
          flush=True)
"""


class Lines:
    """Lines from a child's stdout, with a deadline (no sleeps)."""

    def __init__(self, proc):
        self.proc, self.buf = proc, b""

    def next(self, timeout=15.0):
        end = time.monotonic() + timeout
        while b"\n" not in self.buf:
            left = end - time.monotonic()
            if left <= 0 or not select.select([self.proc.stdout], [], [], left)[0]:
                raise AssertionError("the owner went quiet")
            chunk = os.read(self.proc.stdout.fileno(), 4096)
            if not chunk:
                raise AssertionError(f"the owner exited with {self.proc.wait()}")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return line.decode().split()


def stopped(pid):
    with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
        return f.read().rsplit(")", 1)[1].split()[0] == "T"


class Generations(PyTestCase):
    def take_room(self, req):
        """A lease only the owner's model's eviction makes room for, given back at once."""
        req.lease("24M", timeout=15, tag="needs").release()

    def replay(self, mode):
        d = self.start_daemon(budget="32M", extra=["--evict-deadline", str(DEADLINE)])
        err = open(os.path.join(self.dir, "owner.err"), "wb")
        self.addCleanup(err.close)
        p = subprocess.Popen([PYTHON, "-c", OWNER, self.sock, mode, str(SLOW)],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err,
                             env=child_env())
        self.addCleanup(lambda: p.poll() is None and (p.kill(), p.wait()))
        out = Lines(p)
        self.assertEqual(out.next(), ["up"])
        req = self.connect(name="py-f4-requester")
        rng = random.Random(os.getpid())
        done = None
        for r in range(ROUNDS):
            threaded = mode == "slow" or r % 2 == 1
            p.stdin.write(f"round {int(threaded)}\n".encode())
            p.stdin.flush()
            self.assertEqual(out.next(), ["ready"])
            if mode == "slow":
                self.take_room(req)
            else:
                t = None
                if threaded:  # stopped at any moment of the eviction
                    t = threading.Thread(target=self.take_room, args=(req,))
                    t.start()
                    time.sleep(rng.uniform(0, 2 * DEADLINE))
                p.send_signal(signal.SIGSTOP)
                poll_until(lambda: stopped(p.pid), 15, what="the owner to stop")
                if t is None:
                    self.take_room(req)
                else:
                    t.join(30)
                p.send_signal(signal.SIGCONT)
                p.stdin.write(b"go\n")
                p.stdin.flush()
            done = out.next()
            self.assertEqual(done[0], "done", done)
            lease_id, broken, stale, _, other = (int(x) for x in done[1:])
            self.assertEqual((broken, stale, other), (0, 0, 0),
                             f"round {r}: the new lease broken, stale events delivered, "
                             f"acks refused otherwise than as stale")
            st = req.status()
            self.assertIn((lease_id, 4 << 20), [(l["id"], l["bytes"]) for l in st["leases"]])
            [model] = st["models"]
            self.assertEqual((model["state"], model["bytes"]), ("idle", 12 << 20), model)
        p.stdin.write(b"exit\n")
        p.stdin.close()
        self.assertEqual(p.wait(15), 0)
        p.stdout.close()
        stale_acks = int(done[4])
        print(f"{ROUNDS} rounds ({mode}): {stale_acks} late acks refused as stale")
        if mode == "slow":
            self.assertGreaterEqual(stale_acks, ROUNDS // 4)
        if stale_acks:
            self.assertIn("warn: refused an evict ack of", d.log())

    def test_slow_on_evict(self):
        self.replay("slow")

    def test_holdings_wait_for_the_unload_and_skip_stale_ones(self):
        # What the integrations share (rocmmem._holding): an unload that began before a
        # hold's acquire returned is waited for, so the host reloads; none of an older
        # residency runs after the hold.
        from rocmmem import _holding

        self.start_daemon(budget="24M", extra=["--evict-deadline", str(DEADLINE)])
        lock = threading.RLock()
        log = []

        class Host(_holding.Holdings):
            def on_evict(self, handle):
                log.append(("begin", "evict"))
                time.sleep(SLOW)
                with lock:
                    slot.loaded = False
                log.append(("end", "evict"))

            def on_revoked(self, handle, reason):
                log.append(("begin", "revoked"))
                with lock:
                    slot.loaded = False
                log.append(("end", "revoked"))

        c = self.connect(name="py-f4-holdings")
        c.start_event_thread()
        req = self.connect(name="py-f4-requester")
        host = Host(c, lock, 15)
        slot = _holding.Slot(object, 0, "held", "other", 32 << 20)
        with lock:
            host.entries[id(object)] = slot
        host.register(slot, 8 << 20)
        for r in range(max(10, ROUNDS // 10)):
            host.hold(slot, 8 << 20)
            slot.loaded = True  # the host loads the weights
            gen = slot.generation
            host.release(slot)
            del log[:]
            t = threading.Thread(target=self.take_room, args=(req,))
            t.start()
            poll_until(lambda: log, 15, what="the unload to start")
            host.hold(slot, 8 << 20)  # while the slow unload runs past the deadline
            # It returned once every unload that had begun was over: the host sees that it
            # must load the weights again.
            self.assertEqual(log.count(("begin", "evict")), 1, log)
            self.assertEqual([k for k, _ in log].count("begin"),
                             [k for k, _ in log].count("end"), log)
            self.assertFalse(slot.loaded)
            self.assertGreater(slot.generation, gen)
            slot.loaded = True
            seen = len(log)
            t.join(30)
            # What is left of the old residency (its revocation) never reaches the host.
            c.dispatch()
            self.assertTrue(slot.loaded, log)
            self.assertEqual(len(log), seen, log)
            host.release(slot)

    def test_owner_stopped_and_continued(self):
        self.replay("stop")


if __name__ == "__main__":
    unittest.main()
