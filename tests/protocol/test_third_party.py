# SPDX-License-Identifier: MIT
"""A client written from docs/protocol.md and proto/rocmmem.proto alone: Python code generated
by Debian's protoc, Debian's python3-protobuf, plain sockets (not the project's package, not
librocmmem), against a real rocmmemd on the host backend. Each test checks one promise of
docs/protocol.md: the framing (packet sizes each way, fds, empty packets), the handshake and
refusals before it, request ids, Reply.error, absent fields, the errors of each request, and
the order of events around eviction and revocation. The walkthrough of the page runs as it
is written.
"""
import array
import errno
import mmap
import os
import re
import socket
import subprocess
import sys
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "cli"))
from daemon import CliTestCase, clean_env, poll_until  # noqa: E402

PB2_DIR = os.environ.get("ROCMMEM_PB2_DIR", "")
try:
    sys.path.insert(0, PB2_DIR)
    import rocmmem_pb2 as pb  # noqa: E402
except ImportError:
    pb = None
DOC = os.path.join(HERE, "..", "..", "docs", "protocol.md")
MiB = 1 << 20
MAX_FDS = 64


class Conn:
    """One connection, as docs/protocol.md describes it."""

    def __init__(self, path, timeout=10.0):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.sock.settimeout(timeout)
        self.sock.connect(path)
        self.next_id = 0
        self.events = []
        self.max_daemon_frame = 65536

    def close(self):
        self.sock.close()

    def send(self, rid=None, **body):
        if rid is None:
            self.next_id += 1
            rid = self.next_id
        self.sock.send(pb.ClientMessage(id=rid, **body).SerializeToString())
        return rid

    def receive(self, timeout=10.0):
        """(ServerMessage, fds, packet size), or (None, [], 0) at the end of the connection."""
        self.sock.settimeout(timeout)
        fds = array.array("i")
        data, anc, flags, _ = self.sock.recvmsg(self.max_daemon_frame + 1,
                                                socket.CMSG_SPACE(MAX_FDS * fds.itemsize))
        for level, kind, payload in anc:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds.frombytes(payload[:len(payload) - len(payload) % fds.itemsize])
        assert not flags & (socket.MSG_TRUNC | socket.MSG_CTRUNC), flags
        if not data:
            return None, list(fds), 0
        return pb.ServerMessage.FromString(data), list(fds), len(data)

    def reply_to(self, rid, timeout=10.0):
        """The next reply to rid (events before it are kept in self.events); fds with it."""
        deadline = time.monotonic() + timeout
        while True:
            m, fds, _ = self.receive(max(deadline - time.monotonic(), 0.01))
            if m is None:
                raise AssertionError(f"closed before the reply to {rid}; events {self.events}")
            if m.HasField("event"):
                self.events.append(m.event)
                continue
            if m.reply.id == rid:
                return m.reply, fds
            for fd in fds:
                os.close(fd)

    def call(self, timeout=10.0, **body):
        """Sends a request and returns its reply (fds closed)."""
        r, fds = self.reply_to(self.send(**body), timeout)
        for fd in fds:
            os.close(fd)
        return r

    def hello(self, name="third-party"):
        r = self.call(hello=pb.Hello(protocol_version=1, client_name=name))
        assert r.HasField("error") and r.error == 0, r
        self.max_daemon_frame = r.hello.max_daemon_frame
        return r.hello

    def expect_error_then_close(self, err, id_=0, needle=""):
        m, fds, _ = self.receive()
        assert m is not None and m.HasField("reply"), m
        assert (m.reply.id, m.reply.error) == (id_, -err), m
        assert needle in m.reply.message, m
        m, _, _ = self.receive()
        assert m is None, f"still open after the error: {m}"

    def next_event(self, timeout=10.0):
        if self.events:
            return self.events.pop(0)
        m, fds, _ = self.receive(timeout)
        assert m is not None and m.HasField("event"), m
        return m.event


@unittest.skipIf(pb is None, f"no rocmmem_pb2 in '{PB2_DIR}': protoc (protobuf-compiler) and "
                 "python3-protobuf are needed (scripts/setup.sh installs them)")
class ThirdParty(CliTestCase):
    def conn(self, sock=None, hello=True, name="third-party"):
        c = Conn(sock or self.sock)
        self.addCleanup(c.close)
        if hello:
            c.hello(name)
        return c

    def test_walkthrough(self):
        """the page's Python walkthrough runs as written."""
        self.start_daemon()
        with open(DOC, encoding="utf-8") as f:
            blocks = re.findall(r"```python\n(.*?)```", f.read(), re.S)
        self.assertEqual(len(blocks), 1)
        r = subprocess.run([sys.executable, "-c", blocks[0]], capture_output=True, text=True,
                           timeout=60, env=clean_env(ROCMMEM_SOCKET=self.sock,
                                                     PYTHONPATH=PB2_DIR))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertRegex(r.stdout, r"host 65536\n\[\(\d+, 4194304, 'demo'\)\]\n")

    def test_hello_and_frames(self):
        """max_frame is the request cap, max_daemon_frame the daemon's: status parts beyond
        the request cap arrive whole; a request beyond it is -EMSGSIZE, then the close."""
        self.start_daemon(budget="128M", extra=["--max-message-size", "1K"])
        c = self.conn(hello=False)
        h = c.hello()
        self.assertEqual((h.protocol_version, h.max_frame, h.max_daemon_frame), (1, 1024, 65536))
        self.assertEqual(h.backend, "host")
        self.assertTrue(h.HasField("client_id") and h.HasField("device_count"))
        # Enough leases with long tags that status is larger than 1 KiB.
        for i in range(40):
            r = c.call(lease_acquire=pb.LeaseAcquire(size=1, tag=f"{i:02d}" + "t" * 62))
            self.assertEqual(r.error, 0, r)
        rid = c.send(status=pb.StatusRequest())
        sizes, leases = [], 0
        while True:
            m, fds, n = c.receive()
            if m.HasField("event"):
                continue
            self.assertEqual(m.reply.id, rid)
            sizes.append(n)
            leases += len(m.reply.status.leases)
            if not m.reply.more:
                break
        self.assertEqual(leases, 40)
        self.assertGreater(max(sizes), 1024, sizes)
        self.assertLessEqual(max(sizes), 65536)
        # A request one byte over max_frame.
        c.sock.send(pb.ClientMessage(id=99, lease_acquire=pb.LeaseAcquire(
            size=1, tag="x" * 64)).SerializeToString() + b"\0" * 1024)
        c.expect_error_then_close(errno.EMSGSIZE, needle="1024")

    def test_reply_error_always_present(self):
        """Reply.error is there, 0, on every successful reply."""
        self.start_daemon()
        c = self.conn()
        replies = [
            c.call(lease_acquire=pb.LeaseAcquire(size=MiB)),
            c.call(status=pb.StatusRequest()),
            c.call(metrics=pb.MetricsRequest()),
            c.call(subscribe=pb.Subscribe(events=True)),
            c.call(unsubscribe=pb.Unsubscribe()),
            c.call(model_register=pb.ModelRegister(name="m", size=MiB)),
            c.call(trim=pb.TrimRequest()),
        ]
        replies.append(c.call(lease_release=pb.LeaseRelease(lease_id=replies[0].lease.lease_id)))
        for r in replies:
            self.assertTrue(r.HasField("error"), r)
            self.assertEqual(r.error, 0, r)
        self.assertEqual(replies[1].status.leases[0].bytes, 2 * MiB)  # a granule
        self.assertIn("rocmmemd_build_info", replies[2].metrics.text)

    def test_lease_fd_and_absent_fields(self):
        """a memfd rides with its grant; absent device and timeout mean 0: device 0, no wait."""
        self.start_daemon()
        c = self.conn()
        r, fds = c.reply_to(c.send(lease_acquire=pb.LeaseAcquire(size=3 * MiB)))
        self.assertEqual((r.error, r.lease.device, r.lease.size, r.lease.handle_kind,
                          r.lease.fd_count, len(fds)), (0, 0, 4 * MiB, pb.HANDLE_MEMFD, 1, 1))
        with mmap.mmap(fds[0], r.lease.size) as mem:
            mem[:4] = b"ok!!"
        os.close(fds[0])
        # The rest of the 64 MiB budget is 60 MiB: 61 MiB does not fit and is refused at once.
        start = time.monotonic()
        r = c.call(lease_acquire=pb.LeaseAcquire(size=61 * MiB))
        self.assertEqual(r.error, -errno.ENOMEM, r)
        self.assertLess(time.monotonic() - start, 5)
        self.assertIn("61 MiB", r.message)
        self.assertFalse(r.HasField("lease"))
        # TrimRequest without a device: every device.
        self.assertTrue(c.call(trim=pb.TrimRequest()).HasField("trim"))

    def test_request_errors(self):
        """the errors the page lists, by request."""
        self.start_daemon()
        c, other = self.conn(), self.conn(name="other")
        lease = other.call(lease_acquire=pb.LeaseAcquire(size=MiB)).lease.lease_id
        model = other.call(model_register=pb.ModelRegister(name="theirs")).model.model_id
        cases = [
            (dict(lease_acquire=pb.LeaseAcquire(size=0)), errno.EINVAL),
            (dict(lease_acquire=pb.LeaseAcquire(size=MiB, device=7)), errno.ENODEV),
            (dict(lease_acquire=pb.LeaseAcquire(size=1 << 40)), errno.E2BIG),
            (dict(lease_acquire=pb.LeaseAcquire(size=MiB, tag="\x01")), errno.EINVAL),
            (dict(lease_acquire=pb.LeaseAcquire(size=MiB, model_id=12345)), errno.ENOENT),
            (dict(lease_acquire=pb.LeaseAcquire(size=MiB, model_id=model)), errno.EPERM),
            (dict(lease_release=pb.LeaseRelease()), errno.EINVAL),
            (dict(lease_release=pb.LeaseRelease(lease_id=12345)), errno.ENOENT),
            (dict(lease_release=pb.LeaseRelease(lease_id=lease)), errno.EPERM),
            (dict(model_register=pb.ModelRegister()), errno.EINVAL),
            (dict(model_register=pb.ModelRegister(name="x", size=1 << 40)), errno.E2BIG),
            (dict(model_acquire=pb.ModelAcquire(model_id=12345)), errno.ENOENT),
            (dict(model_acquire=pb.ModelAcquire(model_id=model)), errno.EPERM),
            (dict(evict_ack=pb.EvictAck(model_id=model)), errno.EPERM),
            (dict(subscribe=pb.Subscribe()), errno.EINVAL),
            (dict(subscribe=pb.Subscribe(samples=True, interval_ms=5)), errno.EINVAL),
            (dict(trim=pb.TrimRequest(device=9)), errno.ENODEV),
            (dict(admin=pb.AdminRequest(evict_model=pb.AdminEvictModel(model_id=12345))),
             errno.ENOENT),
            (dict(admin=pb.AdminRequest(set_budget=pb.AdminSetBudget(budget=1))),
             errno.EOPNOTSUPP),
        ]
        for body, err in cases:
            with self.subTest(body=body):
                r = c.call(**body)
                self.assertEqual(r.error, -err, r)
                self.assertTrue(r.message)
        mine = c.call(model_register=pb.ModelRegister(name="mine", size=MiB)).model.model_id
        self.assertEqual(c.call(model_release=pb.ModelRelease(model_id=mine)).error,
                         -errno.EINVAL)  # not in use
        self.assertEqual(c.call(evict_ack=pb.EvictAck(model_id=mine)).error,
                         -errno.EINVAL)  # not asked to unload
        # An unknown request type: -EOPNOTSUPP, and the connection stays.
        c.sock.send(pb.ClientMessage(id=500).SerializeToString())
        r, _ = c.reply_to(500)
        self.assertEqual(r.error, -errno.EOPNOTSUPP)
        self.assertEqual(c.call(status=pb.StatusRequest()).error, 0)

    def test_request_ids(self):
        """ids are echoed, not checked: two in flight with one id are both answered with it;
        a request without an id is -EPROTO and the end."""
        self.start_daemon()
        c = self.conn()
        c.send(rid=7, lease_acquire=pb.LeaseAcquire(size=MiB))
        c.send(rid=7, lease_acquire=pb.LeaseAcquire(size=MiB))
        first, f1 = c.reply_to(7)
        second, f2 = c.reply_to(7)
        for fd in f1 + f2:
            os.close(fd)
        self.assertEqual((first.error, second.error), (0, 0))
        self.assertNotEqual(first.lease.lease_id, second.lease.lease_id)
        c.sock.send(pb.ClientMessage(status=pb.StatusRequest()).SerializeToString())
        c.expect_error_then_close(errno.EPROTO, needle="without an id")

    def test_protocol_errors(self):
        """empty packets, hello rules and stray fds: the error first, then the close."""
        self.start_daemon()
        c = self.conn(hello=False)
        c.sock.send(b"")
        c.expect_error_then_close(errno.EPROTO, needle="empty packet")
        c = self.conn()
        c.sock.send(b"")
        c.expect_error_then_close(errno.EPROTO, needle="empty packet")
        c = self.conn(hello=False)
        c.sock.send(pb.ClientMessage(id=1, status=pb.StatusRequest()).SerializeToString())
        c.expect_error_then_close(errno.EPROTO, id_=1, needle="hello")
        c = self.conn(hello=False)
        c.sock.send(pb.ClientMessage(id=1, hello=pb.Hello()).SerializeToString())
        c.expect_error_then_close(errno.EPROTO, id_=1)
        c = self.conn(hello=False)
        c.sock.send(pb.ClientMessage(id=1, hello=pb.Hello(protocol_version=99))
                    .SerializeToString())
        c.expect_error_then_close(errno.EPROTONOSUPPORT, id_=1, needle="version 1")
        c = self.conn()
        c.sock.send(pb.ClientMessage(id=2, hello=pb.Hello(protocol_version=1))
                    .SerializeToString())
        c.expect_error_then_close(errno.EPROTO, id_=2, needle="twice")
        c = self.conn()
        r, w = os.pipe()
        c.sock.sendmsg([pb.ClientMessage(id=3, status=pb.StatusRequest()).SerializeToString()],
                       [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [w]))])
        os.close(w)
        c.expect_error_then_close(errno.EBADMSG, id_=3, needle="file descriptor")
        # The daemon closed the fd it was sent: the pipe's read end sees the hang-up.
        self.assertEqual(os.read(r, 1), b"")
        os.close(r)
        c = self.conn()
        c.sock.send(b"\xff\xff\xff")
        c.expect_error_then_close(errno.EBADMSG)

    def test_refused_before_hello(self):
        """a refused connection reads the refusal (no id, -EUSERS) first, then the end: no
        ECONNRESET in its way, whether its hello went out or not."""
        self.start_daemon(extra=["--max-clients", "1"])

        def the_one():  # once the readiness probe's connection is gone
            try:
                return self.conn(name="the one")
            except (AssertionError, OSError):  # refused: the probe's connection still counts
                return None

        poll_until(the_one, timeout=10, what="the one connection the daemon takes")
        for i in range(20):
            c = Conn(self.sock)
            try:
                try:
                    c.send(hello=pb.Hello(protocol_version=1, client_name="refused"))
                except BrokenPipeError:
                    pass  # the daemon shut its reading side first: read anyway
                m, _, _ = c.receive()
                self.assertIsNotNone(m, f"attempt {i}: closed without the refusal")
                self.assertFalse(m.reply.HasField("id"), m)
                self.assertEqual(m.reply.error, -errno.EUSERS, m)
                self.assertIn("clients", m.reply.message)
                self.assertIsNone(c.receive()[0])
            finally:
                c.close()

    def test_eviction_order(self):
        """ack: the tagged lease's LeaseRevoked, then the ack's reply, then the waiter's grant;
        the deadline: LeaseRevoked, then ModelRevoked, then the grant."""
        self.start_daemon(budget="32M", extra=["--evict-deadline", "0.3"])
        for ack in (True, False):
            with self.subTest(ack=ack):
                owner, needy = self.conn(name="owner"), self.conn(name="needy")
                mid = owner.call(model_register=pb.ModelRegister(name="big", size=16 * MiB)
                                 ).model.model_id
                self.assertEqual(owner.call(model_acquire=pb.ModelAcquire(model_id=mid)).error, 0)
                tagged = owner.call(lease_acquire=pb.LeaseAcquire(size=8 * MiB, model_id=mid))
                self.assertEqual(tagged.error, 0, tagged)
                self.assertEqual(owner.call(model_release=pb.ModelRelease(model_id=mid)).error, 0)
                want = needy.send(lease_acquire=pb.LeaseAcquire(size=24 * MiB, timeout_ms=20000))
                ev = owner.next_event()
                self.assertEqual(ev.WhichOneof("body"), "evict_request", ev)
                self.assertEqual(ev.evict_request.model_id, mid)
                self.assertEqual(ev.evict_request.deadline_ms, 300)
                seqs = [ev.seq]
                if ack:
                    rid = owner.send(evict_ack=pb.EvictAck(model_id=mid))
                    m, _, _ = owner.receive()
                    self.assertEqual(m.event.lease_revoked.lease_id, tagged.lease.lease_id, m)
                    seqs.append(m.event.seq)
                    m, _, _ = owner.receive()
                    self.assertEqual((m.reply.id, m.reply.error), (rid, 0), m)
                else:
                    m, _, _ = owner.receive(timeout=20)
                    self.assertEqual(m.event.lease_revoked.lease_id, tagged.lease.lease_id, m)
                    seqs.append(m.event.seq)
                    m, _, _ = owner.receive()
                    self.assertEqual(m.event.model_revoked.model_id, mid, m)
                    self.assertIn("did not unload", m.event.model_revoked.reason)
                    seqs.append(m.event.seq)
                    # A late ack: the eviction is over.
                    self.assertEqual(owner.call(evict_ack=pb.EvictAck(model_id=mid)).error,
                                     -errno.EINVAL)
                self.assertEqual(seqs, sorted(seqs))
                self.assertEqual(seqs, list(range(seqs[0], seqs[0] + len(seqs))))
                r, fds = needy.reply_to(want, timeout=20)
                for fd in fds:
                    os.close(fd)
                self.assertEqual(r.error, 0, r)
                owner.close()
                needy.close()
                probe = self.conn(name="probe")

                def all_free():
                    d = probe.call(status=pb.StatusRequest()).status.devices[0]
                    return d.leased_bytes == 0 and d.reserved_bytes == 0

                poll_until(all_free, timeout=10, what="the memory of both back")


if __name__ == "__main__":
    unittest.main()
