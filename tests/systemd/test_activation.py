# SPDX-License-Identifier: MIT
"""Socket activation through the real systemd-socket-activate: the activator listens, a client
connects before rocmmemd runs, the activator execs rocmmemd with the socket ($LISTEN_FDS), and
the client is served. A socket of the wrong kind, or several, make rocmmemd refuse to start."""
import os
import shutil
import signal
import socket
import unittest

from fixture import (MiB, Background, Event, RawClient, ServiceTestCase, poll_until,
                     protocol_version, rocmmemd_bin, service_env)

ACTIVATE = shutil.which("systemd-socket-activate")
NEEDS = "rocmmemd needs a listening AF_UNIX SOCK_SEQPACKET socket (ListenSequentialPacket=)"


@unittest.skipUnless(ACTIVATE, "systemd-socket-activate is not installed")
class Activation(ServiceTestCase):
    def activate(self, listen_args, name="activated"):
        """systemd-socket-activate LISTEN_ARGS rocmmemd ...: listening, rocmmemd not started."""
        args = [ACTIVATE, *listen_args, rocmmemd_bin(), "--socket", self.sock, "--config",
                "/dev/null", "--backend", "host", "--budget", "64M", "--log-level", "debug"]
        a = Background(args, self.dir, name, env=service_env())
        self.addCleanup(a.kill)
        poll_until(lambda: "Listening on" in a.stderr() or not a.running(),
                   what="systemd-socket-activate to listen")
        self.assertTrue(a.running(), a)
        self.assertNotIn("rocmmemd:", a.stderr(), "rocmmemd must not have started yet")
        return a

    def test_a_client_that_came_first_is_served(self):
        # The activator gives its child a fresh environment: -E passes $NOTIFY_SOCKET on.
        a = self.activate(["--seqpacket", "-l", self.sock, "-E",
                           f"NOTIFY_SOCKET={self.notify.path}"])
        # Connect and say hello before the daemon runs: the activator starts it for us.
        early = RawClient(self.sock, timeout=15.0)
        self.addCleanup(early.close)
        hello = early.hello("early")
        self.assertEqual(hello[1][0], protocol_version())
        self.assertIn("Execing", a.stderr())
        self.assertIn(f"using the socket systemd passed ({self.sock})", a.stderr())
        self.notify.wait_for(lambda n: n.get("READY") == "1", what="READY=1")
        # The activator became rocmmemd (same pid), and leases work.
        self.assertEqual(self.status()["daemon"]["pid"], a.pid)
        h = self.holder("10M", "--hold", "60")
        h.wait_stdout(r"^lease \d+:")
        st = self.status()
        self.assertEqual([l["bytes"] for l in st["leases"]], [10 * MiB])
        self.assertFalse(os.path.lexists(self.sock + ".lock"), "no lock: systemd owns the path")
        # SIGTERM stops it cleanly; the socket file is the activator's to remove, not ours.
        a.signal(signal.SIGTERM)
        self.assertEqual(a.wait(), 0, a)
        ev = early.receive()
        self.assertIsInstance(ev, Event)
        self.assertIn("SIGTERM", ev.shutdown_reason())
        self.assertIsNone(early.receive())
        self.assertEqual(h.wait(), 3, h)
        self.assertTrue(os.path.lexists(self.sock), "the passed socket's path is left alone")
        self.assertFalse(os.path.lexists(self.sock + ".lock"))
        self.assertRegex(a.stderr(), r"rocmmemd: info: stopped")

    def refused(self, a, message):
        self.assertEqual(a.wait(), 1, a)
        self.assertIn(message, a.stderr())
        self.assertIn(NEEDS, a.stderr())
        self.assertNotIn("listening on", a.stderr())

    def test_a_datagram_socket_is_refused(self):
        a = self.activate(["--datagram", "-l", self.sock])
        s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        s.sendto(b"wake up", self.sock)
        s.close()
        self.refused(a, "Could not use the socket systemd passed: it is a datagram "
                        "(SOCK_DGRAM) socket of family AF_UNIX;")

    def test_a_stream_socket_is_refused(self):
        a = self.activate(["-l", self.sock])
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(self.sock)
        self.addCleanup(s.close)
        self.refused(a, "Could not use the socket systemd passed: it is a stream "
                        "(SOCK_STREAM) socket of family AF_UNIX;")

    def test_several_sockets_are_refused(self):
        other = os.path.join(self.dir, "other.sock")
        a = self.activate(["--seqpacket", "-l", self.sock, "-l", other])
        s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        s.connect(self.sock)
        self.addCleanup(s.close)
        self.assertEqual(a.wait(), 1, a)
        self.assertIn("systemd passed 2 file descriptors; rocmmemd serves exactly one "
                      "listening socket", a.stderr())


if __name__ == "__main__":
    unittest.main()
