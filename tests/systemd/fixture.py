# SPDX-License-Identifier: MIT
"""Shared fixture of the systemd tests: a service manager's notification socket, and a raw
protocol client that speaks rocmmemd's wire format by hand (so that a test controls exactly what
is sent and when: before the daemon runs, while it drains).

The binaries come from the environment (CTest sets them): ROCMMEMD and ROCMMEMCTL. What the
tests use from tests/cli/daemon.py is re-exported from here.
"""
import array
import os
import re
import signal
import socket
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "cli"))
from daemon import (MiB, Background, CliTestCase, Daemon, clean_env,  # noqa: E402,F401
                    poll_until, rocmmemd_bin)

SOURCE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


def protocol_version():
    """ROCMMEM_PROTOCOL_VERSION from common/version.h (the version the hello must carry)."""
    with open(os.path.join(SOURCE_DIR, "common", "version.h"), encoding="utf-8") as f:
        m = re.search(r"#define ROCMMEM_PROTOCOL_VERSION (\d+)u?", f.read())
    return int(m.group(1))


def service_env(notify_path=None, **extra):
    """A daemon's environment under a (test) service manager: nothing inherited from ours."""
    env = clean_env()
    for key in ("NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID", "LISTEN_FDS", "LISTEN_PID",
                "LISTEN_FDNAMES"):
        env.pop(key, None)
    if notify_path:
        env["NOTIFY_SOCKET"] = notify_path
    env.update(extra)
    return env


class Notification:
    """One datagram a service sent: its assignments in order, and when it arrived."""

    def __init__(self, data, at):
        self.at = at
        self.text = data.decode("utf-8", errors="replace")
        self.items = [tuple(line.split("=", 1)) for line in self.text.split("\n")
                      if "=" in line]

    def get(self, key):
        for k, v in self.items:
            if k == key:
                return v
        return None

    def __repr__(self):
        return f"<notification at {self.at:.3f}: {self.text!r}>"


class NotifyListener:
    """The service manager's end of $NOTIFY_SOCKET: an AF_UNIX datagram socket the test binds."""

    def __init__(self, path):
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(path)
        self.seen = []

    def close(self):
        self.sock.close()

    def receive(self, timeout):
        """The next notification within timeout seconds, or None."""
        self.sock.settimeout(max(timeout, 0.001))
        try:
            data = self.sock.recv(65536)
        except socket.timeout:
            return None
        n = Notification(data, time.monotonic())
        self.seen.append(n)
        return n

    def wait_for(self, pred, timeout=10.0, what="a notification", on_each=None):
        """Receives until pred(notification) is truthy and returns that notification."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"no {what} within {timeout} s; received: {self.seen!r}")
            n = self.receive(left)
            if n is None:
                continue
            if on_each:
                on_each(n)
            if pred(n):
                return n

    def collect(self, seconds):
        """Every notification that arrives within the next seconds."""
        got = []
        end = time.monotonic() + seconds
        while (left := end - time.monotonic()) > 0:
            n = self.receive(left)
            if n is not None:
                got.append(n)
        return got

# --- the wire format, by hand (proto/rocmmem.proto) ------------------------------------------

def _varint(n):
    n &= (1 << 64) - 1  # negative int32/int64 values travel as 64-bit two's complement
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def field_int(num, value):
    return _varint(num << 3) + _varint(value)


def field_msg(num, body):
    return _varint(num << 3 | 2) + _varint(len(body)) + body


def decode(buf):
    """A message's fields: number -> list of values (int for varints, bytes otherwise)."""
    fields, i = {}, 0
    while i < len(buf):
        key, i = _read_varint(buf, i)
        num, wire = key >> 3, key & 7
        if wire == 0:
            value, i = _read_varint(buf, i)
        elif wire == 2:
            length, i = _read_varint(buf, i)
            value, i = bytes(buf[i:i + length]), i + length
        elif wire == 1:
            value, i = int.from_bytes(buf[i:i + 8], "little"), i + 8
        elif wire == 5:
            value, i = int.from_bytes(buf[i:i + 4], "little"), i + 4
        else:
            raise ValueError(f"wire type {wire} in {buf!r}")
        fields.setdefault(num, []).append(value)
    return fields


def _read_varint(buf, i):
    shift = value = 0
    while True:
        b = buf[i]
        i += 1
        value |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return value, i


def signed(value):
    """A varint read back as the signed integer it was (int32/int64 fields)."""
    return value - (1 << 64) if value >= 1 << 63 else value

# ClientMessage body fields.
HELLO, LEASE_ACQUIRE, LEASE_RELEASE, STATUS = 2, 3, 4, 5
# Reply fields.
REPLY_ID, REPLY_ERROR, REPLY_MESSAGE, REPLY_HELLO, REPLY_LEASE = 1, 2, 3, 10, 11
# Event fields.
EVENT_SHUTDOWN = 2


class Reply:
    def __init__(self, fields):
        self.fields = fields
        self.id = fields.get(REPLY_ID, [0])[0]
        self.error = signed(fields.get(REPLY_ERROR, [0])[0])
        self.message = fields.get(REPLY_MESSAGE, [b""])[0].decode("utf-8", errors="replace")

    def body(self, num):
        return decode(self.fields[num][0]) if num in self.fields else None

    def __repr__(self):
        return f"<reply {self.id}: error {self.error} {self.message!r} {self.fields!r}>"


class Event:
    def __init__(self, fields):
        self.fields = fields

    def shutdown_reason(self):
        if EVENT_SHUTDOWN not in self.fields:
            return None
        return decode(self.fields[EVENT_SHUTDOWN][0]).get(1, [b""])[0].decode()

    def __repr__(self):
        return f"<event {self.fields!r}>"


class RawClient:
    """One SOCK_SEQPACKET connection speaking the protocol by hand."""

    def __init__(self, path, timeout=10.0):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.sock.settimeout(timeout)
        self.sock.connect(path)
        self.next_id = 1
        self.events = []

    def close(self):
        self.sock.close()

    def send(self, body_field, body=b""):
        """Sends a request; returns its id."""
        rid = self.next_id
        self.next_id += 1
        self.sock.send(field_int(1, rid) + field_msg(body_field, body))
        return rid

    def receive(self, timeout=10.0):
        """The next message as a Reply or an Event; None when the daemon closed the connection.
        Descriptors that come with it (host leases) are closed at once."""
        self.sock.settimeout(timeout)
        fds = array.array("i")
        try:
            data, anc, _flags, _addr = self.sock.recvmsg(65536,
                                                         socket.CMSG_SPACE(16 * fds.itemsize))
        except ConnectionResetError:
            return None
        for level, kind, payload in anc:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds.frombytes(payload[:len(payload) - len(payload) % fds.itemsize])
        for fd in fds:
            os.close(fd)
        if not data:
            return None
        top = decode(data)
        if 1 in top:
            return Reply(decode(top[1][0]))
        return Event(decode(top[2][0]))

    def reply_to(self, rid, timeout=10.0):
        """Waits for the reply to request rid, keeping the events that come before it."""
        deadline = time.monotonic() + timeout
        while True:
            m = self.receive(max(deadline - time.monotonic(), 0.001))
            if m is None:
                raise AssertionError(f"the daemon closed the connection before replying to "
                                     f"{rid}; events: {self.events!r}")
            if isinstance(m, Event):
                self.events.append(m)
            elif m.id == rid:
                return m

    def hello(self, name="systemd-test"):
        body = field_int(1, protocol_version()) + field_msg(2, name.encode())
        r = self.reply_to(self.send(HELLO, body))
        if r.error:
            raise AssertionError(f"hello refused: {r!r}")
        return r.body(REPLY_HELLO)

    def acquire(self, size, timeout_ms=0):
        """Sends a lease request (device 0); returns its id."""
        return self.send(LEASE_ACQUIRE, field_int(1, 0) + field_int(2, size) +
                         field_int(3, timeout_ms))

    def lease(self, size):
        """Acquires a lease at once; returns its id."""
        r = self.reply_to(self.acquire(size))
        if r.error:
            raise AssertionError(f"lease refused: {r!r}")
        return r.body(REPLY_LEASE)[1][0]

    def release(self, lease_id):
        return self.send(LEASE_RELEASE, field_int(1, lease_id))


class ServiceDaemon(Daemon):
    """A real rocmmemd started as a service manager would: in env, and, with own_watchdog_pid,
    with $WATCHDOG_PID set to its own pid (a shell sets it, then execs the daemon in place)."""

    def __init__(self, workdir, sock, extra=(), env=None, own_watchdog_pid=False,
                 name="rocmmemd"):
        self.sock = sock
        args = [rocmmemd_bin(), "--socket", sock, "--log-level", "debug", "--config",
                "/dev/null", *extra]  # never the machine's own configuration file
        if own_watchdog_pid:
            args = ["/bin/sh", "-c", 'WATCHDOG_PID=$$; export WATCHDOG_PID; exec "$@"', "sh",
                    *args]
        Background.__init__(self, args, workdir, name, env=env)


class ServiceTestCase(CliTestCase):
    """A private directory, a notification socket in it, and daemons started under it."""

    def setUp(self):
        super().setUp()
        self.notify = NotifyListener(os.path.join(self.dir, "notify.sock"))
        self.addCleanup(self.notify.close)

    def start_service(self, extra=(), env=None, own_watchdog_pid=False, budget="64M"):
        """Starts rocmmemd (host backend) under the test's notification socket; at cleanup
        SIGTERM must give exit 0. Does not wait: the tests wait for READY=1 themselves."""
        env = env if env is not None else service_env(self.notify.path)
        budget_args = ["--budget", budget] if budget else []
        d = ServiceDaemon(self.dir, self.sock, ["--backend", "host", *budget_args, *extra],
                          env=env, own_watchdog_pid=own_watchdog_pid)
        self.spawned_at = time.monotonic()
        self.addCleanup(self._stop_daemon, d, True)
        return d

    def wait_ready(self, d, timeout=10.0):
        def check(n):
            if not d.running():
                raise AssertionError(f"rocmmemd exited before READY=1:\n{d.log()}")
            return n.get("READY") == "1"

        return self.notify.wait_for(check, timeout, what="READY=1")

    def freeze(self, proc):
        """SIGSTOPs a process (a client that hangs), SIGCONT at cleanup whatever happens."""
        proc.signal(signal.SIGSTOP)
        self.addCleanup(lambda: proc.running() and proc.signal(signal.SIGCONT))
