# SPDX-License-Identifier: MIT
"""Access control and limits, from the outside: the socket's owner, group and mode, users not
allowed, the connection caps (in all and per uid), the handshake timeout, the memory quota per
uid, the subscriber cap, the limits in status, and bad values at start and on SIGHUP.

Other users are real: rocmmemctl runs as uid 65534 (and others) through subprocess's user=,
group= and extra_groups=. Needs root (skipped otherwise) and the groups 'users' and 'adm'.
"""
import grp
import json
import os
import pwd
import re
import select
import shutil
import signal
import socket
import stat
import subprocess
import time
import unittest

from daemon import (CliTestCase, clean_env, poll_until, reachable_ctl, rocmmemctl_bin,
                    rocmmemd_bin, run)

ROOT = os.geteuid() == 0
NOBODY = 65534
DEFAULT_LIMITS = {
    "clients": 4096, "clients_per_uid": 256, "pending": 64, "leases": 65536, "models": 256,
    "queued": 1 << 20, "bytes_per_uid": 0, "message_size": 64 << 10, "handshake_timeout": 10000,
    "subscribers": 64,
}


def open_files_limit(pid):
    """The soft "Max open files" of a process, from /proc/PID/limits."""
    with open(f"/proc/{pid}/limits") as f:
        for line in f:
            if line.startswith("Max open files"):
                return int(line.split()[3])
    raise AssertionError(f"no open-files limit for pid {pid}")


def gid_of(name):
    try:
        return grp.getgrnam(name).gr_gid
    except KeyError:
        return None


def ctl_as(sock, *args, uid=NOBODY, gid=NOBODY, groups=(), timeout=10.0):
    """Runs rocmmemctl --socket SOCK ARGS as another user; returns a CompletedProcess (rc)."""
    ctl, env = reachable_ctl()
    p = subprocess.run([ctl, "--socket", sock, *args], stdin=subprocess.DEVNULL,
                       capture_output=True, text=True, env=env, user=uid, group=gid,
                       extra_groups=list(groups), timeout=timeout)
    p.rc = p.returncode
    return p


def raw_connect(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s.connect(path)
    return s


def refusal(s, timeout=3.0):
    """What the daemon sent before hanging up on s (bytes, b"" when nothing), or None while it
    keeps the connection open."""
    s.settimeout(timeout)
    got = b""
    try:
        while True:
            chunk = s.recv(65536)
            if not chunk:
                return got
            got += chunk
    except (socket.timeout, BlockingIOError):
        return None
    except ConnectionResetError:
        return got


@unittest.skipUnless(ROOT, "needs root: other users are real users")
class AccessTestCase(CliTestCase):
    def setUp(self):
        super().setUp()
        # Other users must reach the socket in the test's directory: its mode decides.
        os.chmod(self.dir, 0o711)
        self.users = gid_of("users")
        self.adm = gid_of("adm")
        if self.users is None or self.adm is None:
            self.skipTest("needs the groups 'users' and 'adm'")

    def write_config(self, text, name="rocmmemd.conf"):
        path = os.path.join(self.dir, name)
        with open(path + ".tmp", "w") as f:
            f.write(text)
        os.replace(path + ".tmp", path)
        return path

    def limits(self, st=None):
        st = st or self.status()
        return st["limits"]

    def hits(self, name):
        return self.limits()[name]["hits"]

    def wait_alone(self):
        """Waits until the daemon has seen the start-up probe's connection go."""
        poll_until(lambda: not self.status()["clients"], what="no other client")


class Socket(AccessTestCase):
    def test_configured_owner_group_and_mode(self):
        """--socket-user, --socket-group and --socket-mode, and [access] in a file."""
        d = self.start_daemon(extra=["--socket-user", "nobody", "--socket-group", "users",
                                     "--socket-mode", "0640"])
        st = os.stat(self.sock)
        self.assertTrue(stat.S_ISSOCK(st.st_mode))
        self.assertEqual((st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)),
                         (pwd.getpwnam("nobody").pw_uid, self.users, 0o640))
        self.assertIn(f"socket {self.sock}: user nobody, group users, mode 0640", d.log())
        # The group may open it for reading only: connecting needs write permission.
        r = ctl_as(self.sock, "status", groups=[self.users], uid=NOBODY - 1)
        self.assertEqual(r.rc, 3, r)
        self.assertIn("permission denied", r.stderr)
        # Its owner (write permission) is served.
        self.assertEqual(ctl_as(self.sock, "status").rc, 0)

        sock2 = os.path.join(self.dir, "file.sock")
        conf = self.write_config("[access]\nsocket_group = adm\nsocket_mode = 0660\n")
        self.start_daemon(sock=sock2, extra=["--config", conf], name="from-file")
        st = os.stat(sock2)
        self.assertEqual((st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)), (0, self.adm, 0o660))

    def test_the_group_decides(self):
        """With 0660 and group users, uid 65534 connects only as a member of users."""
        self.start_daemon(extra=["--socket-group", "users"])
        self.assertEqual(stat.S_IMODE(os.stat(self.sock).st_mode), 0o660)
        r = ctl_as(self.sock, "status")
        self.assertEqual(r.rc, 3, r)
        self.assertIn("permission denied", r.stderr)
        r = ctl_as(self.sock, "status", groups=[self.users])
        self.assertEqual(r.rc, 0, r)

    def test_default_as_root(self):
        """As root: root, group rocmmem, 0660; without that group, root's group and a warning."""
        d = self.start_daemon()
        st = os.stat(self.sock)
        self.assertEqual((st.st_uid, stat.S_IMODE(st.st_mode)), (0, 0o660))
        rocmmem = gid_of("rocmmem")
        if rocmmem is not None:
            self.assertEqual(st.st_gid, rocmmem)
            return
        self.assertEqual(st.st_gid, 0)
        self.assertIn("warn: the socket keeps root's group: no group named 'rocmmem'", d.log())
        # The group made (as systemd-sysusers would), the next start uses it.
        if not shutil.which("groupadd"):
            return
        subprocess.run(["groupadd", "--system", "rocmmem"], check=True)
        self.addCleanup(subprocess.run, ["groupdel", "rocmmem"], check=False)
        sock2 = os.path.join(self.dir, "second.sock")
        d2 = self.start_daemon(sock=sock2, name="with-group")
        self.assertEqual(os.stat(sock2).st_gid, gid_of("rocmmem"))
        self.assertNotIn("keeps root's group", d2.log())

    def test_socket_activation_ignores_them(self):
        """A socket systemd passed is systemd's: the settings are said not to apply."""
        if not shutil.which("systemd-socket-activate"):
            self.skipTest("needs systemd-socket-activate")
        p = subprocess.Popen(["systemd-socket-activate", "--seqpacket", "-l", self.sock,
                              rocmmemd_bin(), "--socket", self.sock, "--config", "/dev/null",
                              "--backend", "host", "--budget", "64M", "--socket-mode", "0600"],
                             stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, text=True, env=clean_env())
        self.addCleanup(p.kill)
        poll_until(lambda: os.path.exists(self.sock), what="the activation socket")
        r = self.ctl("status")  # starts the daemon
        self.assertEqual(r.rc, 0, r)
        p.send_signal(signal.SIGTERM)
        _, err = p.communicate(timeout=10)
        self.assertIn("socket_user, socket_group and socket_mode do not apply to the socket "
                      "systemd passed", err)


class Allowed(AccessTestCase):
    def test_not_allowed_user_refused(self):
        """--allowed-users: others get EPERM with the reason (exit 2), counted and logged."""
        d = self.start_daemon(extra=["--socket-mode", "0666", "--allowed-users", "nobody"])
        r = ctl_as(self.sock, "status")
        self.assertEqual(r.rc, 0, r)
        r = ctl_as(self.sock, "status", uid=NOBODY - 1, gid=NOBODY - 1)
        self.assertEqual(r.rc, 2, r)
        self.assertEqual(r.stdout, "")
        self.assertRegex(r.stderr, r"^rocmmemctl: uid 65533 is not allowed to use this "
                                   r"rocmmemd: neither it nor any of its groups is among "
                                   r"allowed_users and allowed_groups\n$")
        self.assertRegex(d.log(), r"warn: refused a connection from pid \d+ uid 65533 gid "
                                  r"65533: not an allowed user or group")
        st = self.status()  # root is always allowed
        self.assertEqual(st["access"], {"peers_refused": 1, "requests_refused": 0})

    def test_allowed_group(self):
        """--allowed-groups: a supplementary group is enough; the primary one too."""
        self.start_daemon(extra=["--socket-mode", "0666", "--allowed-groups", "adm,users"])
        self.assertEqual(ctl_as(self.sock, "status").rc, 2)
        self.assertEqual(ctl_as(self.sock, "status", groups=[self.users]).rc, 0)
        self.assertEqual(ctl_as(self.sock, "status", gid=self.adm).rc, 0)
        self.assertEqual(self.status()["access"]["peers_refused"], 1)


class Limits(AccessTestCase):
    def test_defaults_in_status(self):
        """Every limit in status --json with its default and no hits; a pidfd for each client."""
        self.start_daemon()
        st = self.status()
        # descriptors is no setting: the daemon's own open-files limit (its soft RLIMIT_NOFILE).
        self.assertEqual({k: v["value"] for k, v in st["limits"].items()},
                         dict(DEFAULT_LIMITS, descriptors=open_files_limit(self.daemon.pid)))
        self.assertEqual({k for k, v in st["limits"].items() if v["unlimited"]},
                         {"bytes_per_uid"})
        self.assertEqual({v["hits"] for v in st["limits"].values()}, {0})
        self.assertEqual(st["access"], {"peers_refused": 0, "requests_refused": 0})
        h = self.holder("2M")
        h.wait_stdout(r"^lease \d+:")
        st = self.wait_status(lambda s: s["clients"], what="the holder")
        self.assertEqual([(c["pid"], c["pidfd"]) for c in st["clients"]], [(h.pid, True)])
        self.assertRegex(self.daemon.log(), r"debug: connection \d+ accepted from pid \d+ uid 0 "
                                            r"gid 0 \(\d+ more group\(s\); pidfd: "
                                            r"(SO_PEERPIDFD|pidfd_open)\)")
        r = self.ctl("status")
        self.assertNotIn("limits hit", r.stdout)

    def test_per_uid_cap(self):
        """300 connections of root stop at the default 256 per uid; uid 65534 still connects."""
        self.start_daemon(extra=["--socket-mode", "0666", "--handshake-timeout", "120"])
        self.wait_alone()
        conns = []
        self.addCleanup(lambda: [s.close() for s in conns])
        for _ in range(300):
            conns.append(raw_connect(self.sock))
        # The refused ones are told why and hung up on; the others hear nothing (no hello).
        poller = select.poll()
        for s in conns:
            poller.register(s, select.POLLIN)

        def told():
            return [fd for fd, _ in poller.poll(100)]

        poll_until(lambda: len(told()) >= 300 - 256, what="the refusals")
        time.sleep(0.3)  # and no more than that
        refused = set(told())
        self.assertEqual(len(refused), 300 - 256)
        for s in [s for s in conns if s.fileno() in refused]:
            conns.remove(s)
            s.close()
        # What each refused one was told (the message rides as plain text in the reply).
        s = raw_connect(self.sock)
        told = refusal(s)
        s.close()
        self.assertIn(b"too many connections of uid 0: the daemon serves at most 256 per uid "
                      b"(clients_per_uid)", told)
        # Root's rocmmemctl is refused too, and says so (exit 3: out of reach for now).
        r = self.ctl("status")
        self.assertEqual(r.rc, 3, r)
        self.assertIn("too many connections of uid 0", r.stderr)
        # Another uid is served meanwhile; the hits are in its status.
        r = ctl_as(self.sock, "--json", "status")
        self.assertEqual(r.rc, 0, r)
        st = json.loads(r.stdout)
        self.assertEqual(st["limits"]["clients_per_uid"]["hits"], 300 - 256 + 2)
        self.assertEqual(len(st["clients"]), 256)  # root's (no hello yet), not this one
        r = ctl_as(self.sock, "status")
        self.assertIn("limits hit: clients_per_uid 46 time(s) (limit 256)", r.stdout)
        # One of root's goes: root gets in again.
        conns.pop().close()
        poll_until(lambda: self.ctl("status").rc == 0, what="root's status once below the cap")
        self.assertIn("refused a connection from pid", self.daemon.log())

    def test_total_cap(self):
        """--max-clients 3: the fourth connection gets EUSERS with the reason."""
        self.start_daemon(extra=["--max-clients", "3", "--handshake-timeout", "60"])
        self.wait_alone()
        conns = [raw_connect(self.sock) for _ in range(3)]
        self.addCleanup(lambda: [s.close() for s in conns])
        extra = raw_connect(self.sock)
        told = refusal(extra)
        extra.close()
        self.assertIn(b"too many clients: the daemon serves at most 3 (clients)", told)
        r = self.ctl("status")
        self.assertEqual(r.rc, 3, r)
        self.assertIn("too many clients: the daemon serves at most 3", r.stderr)
        conns.pop().close()
        st = poll_until(lambda: self.ctl("--json", "status").rc == 0 and self.status(),
                        what="a status once below the cap")
        self.assertEqual(st["limits"]["clients"]["hits"], 2)

    def test_handshake_timeout(self):
        """--handshake-timeout 1: a connection that never says hello is closed, and logged."""
        d = self.start_daemon(extra=["--handshake-timeout", "1"])
        s = raw_connect(self.sock)
        start = time.monotonic()
        self.assertEqual(refusal(s, 5.0), b"")
        took = time.monotonic() - start
        s.close()
        self.assertGreater(took, 0.8)
        self.assertLess(took, 3.0)
        self.assertRegex(d.log(), r"warn: closing connection \d+ from pid \d+ uid 0: no hello "
                                  r"within 1000 ms \(handshake_timeout\)")
        lim = self.limits()["handshake_timeout"]
        self.assertEqual((lim["value"], lim["hits"]), (1000, 1))

    def test_bytes_per_uid(self):
        """--max-bytes-per-uid 8M: root's second lease goes over (EDQUOT, exit 2); another
        uid has a quota of its own."""
        self.start_daemon(extra=["--socket-mode", "0666", "--max-bytes-per-uid", "8M"])
        h = self.holder("6M", "--hold", "60")
        h.wait_stdout(r"^lease \d+: ")
        r = self.ctl("lease", "4M", "--hold", "0")
        self.assertEqual(r.rc, 2, r)
        self.assertRegex(r.stderr, r"uid 0 would go over its memory quota of 8 MiB "
                                   r"\(bytes_per_uid\): it holds 6 MiB and waits for 0 B in "
                                   r"\d+ connection\(s\), and this request needs 4 MiB")
        r = self.ctl("lease", "2M", "--hold", "0")  # within: 8 MiB in all
        self.assertEqual(r.rc, 0, r)
        r = ctl_as(self.sock, "lease", "6M", "--hold", "0")
        self.assertEqual(r.rc, 0, r)
        lim = self.limits()["bytes_per_uid"]
        self.assertEqual(lim, {"value": 8 << 20, "unlimited": False, "hits": 1})

    def test_subscribers(self):
        """--max-subscribers 1: a second watch is refused (EUSERS, exit 2) and counted."""
        self.start_daemon(extra=["--max-subscribers", "1"])
        w = self.background([rocmmemctl_bin(), "--socket", self.sock, "--json", "watch"],
                            "watch")
        w.wait_stdout(r'"type":"sample"')
        r = self.ctl("watch", "-n", "1")
        self.assertEqual(r.rc, 2, r)
        self.assertIn("too many subscribers: the daemon feeds at most 1 at once (subscribers)",
                      r.stderr)
        self.assertEqual(self.hits("subscribers"), 1)
        w.signal(signal.SIGTERM)
        w.wait()
        poll_until(lambda: self.ctl("watch", "-n", "1").rc == 0, what="a watch once one left")


class BadValues(AccessTestCase):
    def test_refused_at_start(self):
        """Malformed values: exit 2 and a message naming the setting, flag or file line."""
        cases = [
            (["--socket-mode", "0999"], r"invalid --socket-mode '0999': an octal mode"),
            (["--socket-mode", "4660"], r"no setuid, setgid or sticky bit"),
            (["--socket-user", "no-such-user-x"], r"no user named 'no-such-user-x'"),
            (["--socket-group", "no-such-group-x"], r"no group named 'no-such-group-x'"),
            (["--allowed-users", "root,no-such-user-x"], r"no user named 'no-such-user-x'"),
            (["--allowed-groups", ""], r"a comma-separated list of group names"),
            (["--admin-group", "4294967295"], r"out of range"),
            (["--max-clients-per-uid", "-1"], r"a whole number from 1"),
            (["--max-clients-per-uid", "99999999999999999999"], r"a whole number from 1"),
            (["--max-bytes-per-uid", "0"], r"more than 0 bytes, or unlimited"),
            (["--max-bytes-per-uid", "-1G"], r"expected bytes"),
            (["--max-message-size", "128K"], r"from 1K to 64K"),
            (["--handshake-timeout", "-1"], r"seconds, more than 0"),
            (["--max-subscribers", "0"], r"a whole number from 1"),
        ]
        for args, pattern in cases:
            with self.subTest(args=args):
                r = run([rocmmemd_bin(), "--config", "/dev/null", "--socket", self.sock,
                         "--backend", "host", *args], timeout=5)
                self.assertEqual(r.rc, 2, r)
                self.assertRegex(r.stderr, pattern)
                self.assertFalse(os.path.exists(self.sock))
        conf = self.write_config("[access]\nadmin_group = no-such-group-x\n")
        r = run([rocmmemd_bin(), "--config", conf, "--socket", self.sock, "--backend", "host"],
                timeout=5)
        self.assertEqual(r.rc, 2, r)
        self.assertEqual(r.stderr, f"rocmmemd: {conf}:2: [access] admin_group = "
                                   f"no-such-group-x: no group named 'no-such-group-x'\n")

    def test_refused_on_reload(self):
        """SIGHUP: a bad value keeps what is in force; good ones apply, the socket's at the
        next start."""
        conf = self.write_config("[limits]\nclients_per_uid = 100\n[access]\nsocket_mode = 0666\n")
        d = self.start_daemon(extra=["--config", conf])
        self.assertEqual(self.limits()["clients_per_uid"]["value"], 100)
        for text, pattern in [
            ("[limits]\nclients_per_uid = -4\n", r"\[limits\] clients_per_uid = -4: a whole"),
            ("[access]\nsocket_mode = 0999\n", r"\[access\] socket_mode = 0999: an octal"),
            ("[access]\nallowed_users = nosuchuser\n", r"no user named 'nosuchuser'"),
            ("[limits]\nbytes_per_uid = 99999999999T\n", r"too large"),
        ]:
            with self.subTest(text=text):
                self.write_config(text)
                before = d.log().count("SIGHUP: reloading")
                d.signal(signal.SIGHUP)
                poll_until(lambda: re.search(r"reload refused, the configuration in force is "
                                             r"kept: .*" + pattern,
                                             d.log().split("SIGHUP: reloading")[-1]),
                           what="the refusal")
                self.assertEqual(d.log().count("SIGHUP: reloading"), before + 1)
                self.assertEqual(self.limits()["clients_per_uid"]["value"], 100)
        # Good values: limits and the allowed users apply at once; the socket's mode later.
        self.write_config("[limits]\nclients_per_uid = 7\nhandshake_timeout = 2.5\n"
                          "[access]\nallowed_users = nobody\nsocket_mode = 0600\n")
        d.signal(signal.SIGHUP)
        poll_until(lambda: "reloaded the configuration" in d.log(), what="the reload")
        self.assertIn("reload: socket_mode changed: it takes effect at the next start", d.log())
        lim = self.limits()
        self.assertEqual((lim["clients_per_uid"]["value"], lim["handshake_timeout"]["value"]),
                         (7, 2500))
        self.assertEqual(stat.S_IMODE(os.stat(self.sock).st_mode), 0o666)
        self.assertEqual(ctl_as(self.sock, "status").rc, 0)
        self.assertEqual(ctl_as(self.sock, "status", uid=NOBODY - 1, gid=NOBODY - 1).rc, 2)


if __name__ == "__main__":
    unittest.main()
