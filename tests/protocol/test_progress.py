# SPDX-License-Identifier: MIT
"""Progress of a waiting request (docs/protocol.md, "Progress of a waiting request"), against a
real rocmmemd on the host backend, through plain sockets and the Python code protoc generates
from proto/rocmmem.proto: a waiter behind a stopped owner (SIGSTOP) is told the model, its owner
and the deadline, then that the eviction ended in a revocation, before its grant; its position
goes down as requests ahead leave; a client that leaves while waiting is told nothing more; a
client that did not ask, or was built from the proto before WaitProgress, is unaffected.
"""
import errno
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from test_third_party import Conn, MiB, pb  # noqa: E402
from daemon import CliTestCase, poll_until  # noqa: E402

PROTO = os.path.join(HERE, "..", "..", "proto", "rocmmem.proto")


def model_host_bin():
    path = os.environ.get("ROCMMEM_MODEL_HOST")
    if not path or not os.access(path, os.X_OK):
        raise RuntimeError("$ROCMMEM_MODEL_HOST is not set to the built model_host: run these "
                           "tests through ctest -R protocol_progress")
    return path


def old_schema(workdir):
    """The generated module of the proto as it was before WaitProgress (its message, enums
    and fields cut out), as a client built before them has it."""
    with open(PROTO) as f:
        text = f.read()
    text = re.sub(r"\n// What a waiting request waits for.*?\n}\n", "\n", text, flags=re.S)
    text = re.sub(r"\n// What kind of request waits.*?\n}\n", "\n", text, flags=re.S)
    text = re.sub(r"\n// How the eviction a request waited for ended.*?\n}\n", "\n", text,
                  flags=re.S)
    text = re.sub(r"\n// Sent to a client whose request waits.*?\n}\n", "\n", text, flags=re.S)
    text = re.sub(r"\n *WaitProgress progress = 8;[^\n]*", "", text)
    text = re.sub(r"\n *optional bool progress = \d+;[^\n]*(\n *//[^\n]*)?", "", text)
    assert "WaitProgress" not in text and "progress" not in text, "the cut missed something"
    # Its own package: the new module's names are taken in the process's descriptor pool.
    text = text.replace("package rocmmem.wire;", "package rocmmem.old;")
    assert "package rocmmem.old;" in text
    src = os.path.join(workdir, "old")
    os.makedirs(src)
    with open(os.path.join(src, "rocmmem_old.proto"), "w") as f:
        f.write(text)
    subprocess.run([shutil.which("protoc"), f"--python_out={src}", f"-I{src}",
                    "rocmmem_old.proto"], check=True)
    sys.path.insert(0, src)
    import rocmmem_old_pb2
    return rocmmem_old_pb2


@unittest.skipIf(pb is None or not shutil.which("protoc"),
                 "protoc (protobuf-compiler) and python3-protobuf are needed")
class Progress(CliTestCase):
    def conn(self, name):
        c = Conn(self.sock)
        self.addCleanup(c.close)
        c.hello(name)
        return c

    def progress(self, c, rid, timeout=10.0):
        """The next WaitProgress for request rid (other events are kept)."""
        deadline = time.monotonic() + timeout
        while True:
            for i, ev in enumerate(c.events):
                if ev.WhichOneof("body") == "progress":
                    del c.events[i]
                    self.assertEqual(ev.progress.request_id, rid, ev)
                    return ev
            m, fds, _ = c.receive(max(deadline - time.monotonic(), 0.01))
            self.assertIsNotNone(m, "closed while waiting for progress")
            self.assertTrue(m.HasField("event"), f"a reply before the progress: {m}")
            c.events.append(m.event)

    def stopped_owner(self, size):
        """model_host with one idle model of size, stopped (SIGSTOP): (host, model id)."""
        host = self.background([model_host_bin(), self.sock, f"flux:transformer:{size}"],
                               "host")
        mid = int(host.wait_stdout(r"^registered flux (\d+)$").group(1))
        host.signal(signal.SIGSTOP)
        self.addCleanup(host.signal, signal.SIGCONT)
        return host, mid

    def test_stopped_owner(self):
        """The waiter is told the model, its owner, the deadline; then the revocation; then
        granted. A request that did not ask for progress gets none."""
        self.start_daemon(budget="64M", extra=["--evict-deadline", "1.5"])
        host, mid = self.stopped_owner("48M")
        w = self.conn("waiter")
        t0 = time.monotonic()
        rid = w.send(lease_acquire=pb.LeaseAcquire(size=32 * MiB, timeout_ms=30000,
                                                   progress=True))
        quiet = self.conn("quiet")
        qid = quiet.send(lease_acquire=pb.LeaseAcquire(size=16 * MiB, timeout_ms=30000))
        p = self.progress(w, rid).progress
        self.assertEqual(p.reason, pb.WAIT_EVICTION, p)
        self.assertEqual((p.model_id, p.model_name), (mid, "flux"))
        self.assertEqual((p.owner_pid, p.owner_name), (host.pid, "model_host"))
        self.assertTrue(0 < p.deadline_ms <= 1500, p)
        self.assertEqual((p.position, p.device, p.evictions), (0, 0, 1))
        self.assertEqual((p.request, p.requested, p.needed), (pb.WAIT_LEASE, 32 * MiB, 32 * MiB))
        self.assertEqual(p.bytes, 48 * MiB)
        self.assertFalse(p.HasField("eviction_ended"))
        # The request behind it that asked too would be told; this one did not ask.
        ended = self.progress(w, rid, timeout=20)
        self.assertEqual(ended.progress.eviction_ended, pb.EVICTION_REVOKED, ended)
        self.assertEqual(ended.progress.model_id, mid)
        self.assertGreaterEqual(time.monotonic() - t0, 1.4)
        r, fds = w.reply_to(rid, timeout=20)
        for fd in fds:
            os.close(fd)
        self.assertEqual(r.error, 0, r)
        self.assertEqual([e for e in w.events if e.WhichOneof("body") == "progress"], [])
        r, fds = quiet.reply_to(qid, timeout=20)
        for fd in fds:
            os.close(fd)
        self.assertEqual(r.error, 0, r)
        self.assertEqual(quiet.events, [], "progress to a request that did not ask")

    def test_position(self):
        """Behind another request, the position says so and goes down as it leaves; the
        holder whose bytes it needs is named; few events for many changes of the books."""
        self.start_daemon(budget="64M")
        big = self.conn("big")
        held = big.call(lease_acquire=pb.LeaseAcquire(size=56 * MiB))
        self.assertEqual(held.error, 0, held)
        ahead = self.conn("ahead")
        aid = ahead.send(lease_acquire=pb.LeaseAcquire(size=32 * MiB, timeout_ms=30000,
                                                       progress=True))
        self.assertEqual(self.progress(ahead, aid).progress.position, 0)
        w = self.conn("behind")
        rid = w.send(lease_acquire=pb.LeaseAcquire(size=16 * MiB, timeout_ms=30000,
                                                   progress=True))
        p = self.progress(w, rid).progress
        self.assertEqual((p.position, p.queued, p.reason), (1, 2, pb.WAIT_HOLDER), p)
        self.assertEqual((p.owner_pid, p.owner_name), (os.getpid(), "big"))
        self.assertEqual(p.bytes, 56 * MiB)
        # Churn that changes nothing the waiter is told: small requests come and go (refused
        # behind the queue, or granted ahead of it where that delays nobody).
        churn = self.conn("churn")
        t0 = time.monotonic()
        for _ in range(40):
            r = churn.call(lease_acquire=pb.LeaseAcquire(size=2 * MiB))
            self.assertIn(r.error, (0, -errno.ENOMEM), r)
            if r.error == 0:
                self.assertEqual(churn.call(lease_release=pb.LeaseRelease(
                    lease_id=r.lease.lease_id)).error, 0)
        ahead.close()
        p = self.progress(w, rid).progress
        self.assertEqual((p.position, p.queued), (0, 1), p)
        elapsed = time.monotonic() - t0
        # Nothing else is pending; whatever was sent meanwhile is within the rate.
        extra = [e for e in w.events if e.WhichOneof("body") == "progress"]
        self.assertLessEqual(len(extra), elapsed / 0.25 + 1, extra)
        big.call(lease_release=pb.LeaseRelease(lease_id=held.lease.lease_id))
        r, fds = w.reply_to(rid)
        for fd in fds:
            os.close(fd)
        self.assertEqual(r.error, 0, r)

    def test_leaving_while_waiting(self):
        """A waiter that disconnects is told nothing more; the daemon keeps serving, holds
        nothing for it, and the next waiter is told its place."""
        self.start_daemon(budget="64M", extra=["--evict-deadline", "30"])
        host, mid = self.stopped_owner("48M")
        for i in range(20):
            w = self.conn(f"leaver-{i}")
            rid = w.send(lease_acquire=pb.LeaseAcquire(size=32 * MiB, timeout_ms=30000,
                                                       progress=True))
            self.assertEqual(self.progress(w, rid).progress.model_id, mid)
            w.close()
        probe = self.conn("probe")
        poll_until(lambda: not probe.call(status=pb.StatusRequest()).status.queue,
                   timeout=10, what="the queue empty")
        w = self.conn("last")
        rid = w.send(lease_acquire=pb.LeaseAcquire(size=32 * MiB, timeout_ms=30000,
                                                   progress=True))
        p = self.progress(w, rid).progress
        self.assertEqual((p.position, p.queued, p.model_id), (0, 1, mid), p)

    def test_old_client(self):
        """A client built from the proto before WaitProgress cannot ask for it; were it sent
        one, it decodes as an event with no body it knows, and the connection goes on."""
        old = old_schema(tempfile.mkdtemp(dir=self.dir))
        self.start_daemon(budget="64M", extra=["--evict-deadline", "30"])
        host, mid = self.stopped_owner("48M")
        w = self.conn("new")
        rid = w.send(lease_acquire=pb.LeaseAcquire(size=32 * MiB, timeout_ms=30000,
                                                   progress=True))
        w.sock.settimeout(10)
        raw = w.sock.recv(65536)
        self.assertEqual(pb.ServerMessage.FromString(raw).event.WhichOneof("body"), "progress")
        m = old.ServerMessage.FromString(raw)
        self.assertTrue(m.HasField("event"))
        self.assertIsNone(m.event.WhichOneof("body"))
        # Old requests (no progress field) wait and are answered as before, with no event.
        oc = Conn(self.sock)
        self.addCleanup(oc.close)
        oc.sock.send(old.ClientMessage(id=1, hello=old.Hello(
            protocol_version=1, client_name="old")).SerializeToString())
        self.assertEqual(old.ServerMessage.FromString(oc.sock.recv(65536)).reply.error, 0)
        oc.sock.send(old.ClientMessage(id=2, lease_acquire=old.LeaseAcquire(
            size=32 * MiB, timeout_ms=400)).SerializeToString())
        oc.sock.settimeout(10)
        m = old.ServerMessage.FromString(oc.sock.recv(65536))
        self.assertEqual((m.WhichOneof("kind"), m.reply.id, m.reply.error),
                         ("reply", 2, -errno.ETIMEDOUT), m)


if __name__ == "__main__":
    unittest.main()
