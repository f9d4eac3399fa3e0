# SPDX-License-Identifier: MIT
"""rocmmemd's command line: options and exit codes, claiming the socket path, stopping."""
import os
import signal
import socket
import stat
import unittest

from daemon import (BUDGET, GRANULE, CliTestCase, Daemon, can_connect, clean_env, poll_until,
                    rocmmemd_bin, run)


class Options(CliTestCase):
    def bad(self, args, rc, message):
        """rocmmemd ARGS exits rc with message on stderr, nothing on stdout, and no socket."""
        r = run([rocmmemd_bin(), "--socket", self.sock, *args], timeout=5.0)
        self.assertEqual(r.rc, rc, r)
        self.assertEqual(r.stdout, "", r)
        self.assertRegex(r.stderr, message, r)
        self.assertFalse(os.path.exists(self.sock), "no socket is left behind")
        return r

    def test_bad_budget(self):
        for value in ("12X", "1.5", "4GB", "-1", "", "M", "1.5.5G"):
            with self.subTest(budget=value):
                self.bad(["--budget", value], 2, r"--budget")
        self.bad(["--budget", "0"], 2, r"invalid --budget '0': must be larger than 0")
        self.bad(["--budget", "99999999999T"], 2, r"--budget.*too large")
        self.bad(["--budget"], 2, r"option '--budget' needs a value")

    def test_budget_larger_than_the_machine(self):
        r = self.bad(["--budget", "1000T"], 2, r"budget 1000 TiB exceeds")
        self.assertNotIn("listening", r.stderr)

    def test_budget_smaller_than_a_granule(self):
        self.bad(["--budget", "1M"], 2, r"smaller than one 2 MiB granule")

    def test_bad_headroom(self):
        self.bad(["--headroom", "1000T"], 2, r"headroom 1000 TiB leaves nothing")
        self.bad(["--headroom", "12X"], 2, r"--headroom")

    def test_unknown_backend(self):
        self.bad(["--backend", "tpu"], 2, r"invalid --backend 'tpu': unknown backend")
        self.bad(["-b", ""], 2, r"unknown backend")

    def test_other_usage_errors(self):
        self.bad(["--frobnicate"], 2, r"unknown option '--frobnicate'")
        self.bad(["-x"], 2, r"unknown option")
        self.bad(["extra"], 2, r"unexpected argument 'extra'")
        self.bad(["--log-level", "loud"], 2, r"invalid --log-level 'loud': a log level")
        r = run([rocmmemd_bin(), "--socket", ""], timeout=5.0)
        self.assertEqual(r.rc, 2, r)
        self.assertIn("--socket", r.stderr)

    def test_socket_path_too_long(self):
        long_path = os.path.join(self.dir, "x" * 120 + ".sock")
        r = run([rocmmemd_bin(), "--socket", long_path, "--budget", "64M"], timeout=5.0)
        self.assertEqual(r.rc, 2, r)
        self.assertIn("too long", r.stderr)
        self.assertFalse(os.path.lexists(long_path))

    def test_budget_spellings(self):
        for value in ("64M", "64MiB", "64m", "67108864", "0.0625G", "65536K"):
            with self.subTest(budget=value):
                d = self.start_daemon(budget=value, name=f"rocmmemd-{value}")
                self.assertEqual(self.status()["devices"][0]["budget_bytes"], BUDGET)
                self.assertEqual(d.stop(), 0, d.log())

    def test_budget_rounds_down_to_granules(self):
        self.start_daemon(budget="5M")
        dev = self.status()["devices"][0]
        self.assertEqual(dev["budget_bytes"], 2 * GRANULE)
        r = self.ctl("lease", "5M", "--hold", "0")
        self.assertEqual(r.rc, 2, r)

    def test_budget_wins_over_headroom(self):
        d = self.start_daemon(extra=["--headroom", "1G"])
        self.assertEqual(self.status()["devices"][0]["budget_bytes"], BUDGET)
        self.assertIn("the headroom is ignored", d.log())

    def test_default_budget_and_backend(self):
        d = Daemon(self.dir, self.sock, [])
        self.addCleanup(d.kill)
        d.wait_ready()
        st = self.status()
        self.assertIn(st["daemon"]["backend"], ("host", "hip", "cuda"))
        dev = st["devices"][0]
        self.assertGreater(dev["budget_bytes"], 0)
        self.assertLess(dev["budget_bytes"], dev["total_bytes"])
        self.assertEqual(dev["budget_bytes"] % GRANULE, 0)
        self.assertEqual(d.stop(), 0, d.log())


class SocketPath(CliTestCase):
    def test_creates_missing_parents(self):
        sock = os.path.join(self.dir, "a", "b", "c", "d.sock")
        d = self.start_daemon(sock=sock, umask=0o022)
        want_dir = 0o755 if os.geteuid() == 0 else 0o700
        want_sock = 0o660 if os.geteuid() == 0 else 0o600
        for sub in ("a", "a/b", "a/b/c"):
            st = os.stat(os.path.join(self.dir, sub))
            self.assertTrue(stat.S_ISDIR(st.st_mode), sub)
            self.assertEqual(stat.S_IMODE(st.st_mode), want_dir, sub)
        st = os.lstat(sock)
        self.assertTrue(stat.S_ISSOCK(st.st_mode))
        self.assertEqual(stat.S_IMODE(st.st_mode), want_sock)
        self.assertEqual(self.status(sock=sock)["daemon"]["pid"], d.pid)
        self.assertEqual(d.stop(signal.SIGTERM), 0, d.log())
        self.assertFalse(os.path.exists(sock))
        self.assertTrue(os.path.isdir(os.path.join(self.dir, "a", "b", "c")))

    def test_parent_is_a_file(self):
        with open(os.path.join(self.dir, "a"), "w") as f:
            f.write("file\n")
        r = run([rocmmemd_bin(), "--socket", os.path.join(self.dir, "a", "d.sock"),
                 "--budget", "64M"], timeout=5.0)
        self.assertEqual(r.rc, 1, r)
        self.assertIn("not a directory", r.stderr)

    def test_refuses_a_live_daemon_socket(self):
        d1 = self.start_daemon()
        r = run([rocmmemd_bin(), "--socket", self.sock, "--budget", "64M"], timeout=5.0)
        self.assertEqual(r.rc, 1, r)
        self.assertIn("another", r.stderr)
        self.assertTrue(stat.S_ISSOCK(os.lstat(self.sock).st_mode), "the socket stays")
        self.assertEqual(self.status()["daemon"]["pid"], d1.pid)
        # The first daemon still serves leases too.
        r = self.ctl("--json", "lease", "4M", "--hold", "0")
        self.assertEqual(r.rc, 0, r)

    def test_refuses_a_live_foreign_socket(self):
        """Someone else listens at the path (no rocmmemd lock held): still not stolen."""
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.addCleanup(listener.close)
        listener.bind(self.sock)
        listener.listen(8)
        ino = os.lstat(self.sock).st_ino
        r = run([rocmmemd_bin(), "--socket", self.sock, "--budget", "64M"], timeout=5.0)
        self.assertEqual(r.rc, 1, r)
        self.assertIn("another daemon is serving it", r.stderr)
        self.assertEqual(os.lstat(self.sock).st_ino, ino, "the listener's socket file stays")
        self.assertTrue(can_connect(self.sock))

    def test_refuses_a_live_stream_socket(self):
        """A SOCK_STREAM listener answers EPROTOTYPE: alive, so not removed either."""
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.addCleanup(listener.close)
        listener.bind(self.sock)
        listener.listen(8)
        ino = os.lstat(self.sock).st_ino
        r = run([rocmmemd_bin(), "--socket", self.sock, "--budget", "64M"], timeout=5.0)
        self.assertEqual(r.rc, 1, r)
        self.assertEqual(os.lstat(self.sock).st_ino, ino)

    def test_removes_a_stale_socket(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        s.bind(self.sock)
        s.close()
        self.assertTrue(stat.S_ISSOCK(os.lstat(self.sock).st_mode), "the stale file stays")
        self.assertFalse(can_connect(self.sock))
        d = self.start_daemon()
        self.assertIn("removed the stale socket", d.log())
        self.assertEqual(self.status()["daemon"]["pid"], d.pid)

    def test_restarts_after_a_killed_daemon(self):
        d1 = self.start_daemon(check_exit=False)
        d1.signal(signal.SIGKILL)
        self.assertEqual(d1.wait(), -signal.SIGKILL)
        self.assertTrue(stat.S_ISSOCK(os.lstat(self.sock).st_mode), "SIGKILL leaves the file")
        d2 = self.start_daemon(name="rocmmemd2")
        self.assertEqual(self.status()["daemon"]["pid"], d2.pid)
        r = self.ctl("--json", "lease", "64M", "--hold", "0")
        self.assertEqual(r.rc, 0, r)

    def test_regular_file_is_untouched(self):
        data = b"precious data, not a socket\n"
        with open(self.sock, "wb") as f:
            f.write(data)
        before = os.lstat(self.sock)
        r = run([rocmmemd_bin(), "--socket", self.sock, "--budget", "64M"], timeout=5.0)
        self.assertEqual(r.rc, 1, r)
        self.assertIn("not a socket", r.stderr)
        after = os.lstat(self.sock)
        self.assertEqual((after.st_ino, after.st_size, after.st_mtime_ns),
                         (before.st_ino, before.st_size, before.st_mtime_ns))
        with open(self.sock, "rb") as f:
            self.assertEqual(f.read(), data)

    def test_directory_is_untouched(self):
        os.mkdir(self.sock)
        r = run([rocmmemd_bin(), "--socket", self.sock, "--budget", "64M"], timeout=5.0)
        self.assertEqual(r.rc, 1, r)
        self.assertTrue(os.path.isdir(self.sock))

    def test_env_socket(self):
        """Without --socket the daemon listens on $ROCMMEM_SOCKET."""
        env = clean_env(ROCMMEM_SOCKET=self.sock)
        d = self.background([rocmmemd_bin(), "--budget", "64M"], "rocmmemd-env", env=env)
        poll_until(lambda: can_connect(self.sock) or not d.running(),
                   what="rocmmemd on $ROCMMEM_SOCKET")
        self.assertTrue(d.running(), d)
        self.assertEqual(self.status()["daemon"]["pid"], d.pid)
        d.signal(signal.SIGTERM)
        self.assertEqual(d.wait(), 0, d)
        self.assertFalse(os.path.lexists(self.sock))

    def test_option_beats_env_socket(self):
        env = clean_env(ROCMMEM_SOCKET=os.path.join(self.dir, "env.sock"))
        d = Daemon(self.dir, self.sock, ["--budget", "64M"], env=env)
        self.addCleanup(d.kill)
        d.wait_ready()
        self.assertFalse(os.path.lexists(os.path.join(self.dir, "env.sock")))
        self.assertEqual(d.stop(), 0, d.log())


class Stopping(CliTestCase):
    def test_sigint_removes_the_socket(self):
        d = self.start_daemon()
        self.assertEqual(self.ctl("status").rc, 0)
        self.assertEqual(d.stop(signal.SIGINT), 0, d.log())
        self.assertFalse(os.path.lexists(self.sock))
        self.assertEqual(sorted(os.listdir(self.dir)), ["rocmmemd.err", "rocmmemd.out"],
                         "a clean stop leaves nothing behind (no socket, no lock file)")
        self.assertIn("interrupted (SIGINT)", d.log())
        r = self.ctl("status")
        self.assertEqual(r.rc, 3, r)

    def test_sigterm_with_clients_removes_the_socket(self):
        d = self.start_daemon()
        h1 = self.holder("10M", "--hold", "30")
        h1.wait_stdout(r"^lease \d+:")
        h2 = self.holder("60M", "--timeout", "30")  # waits in the queue
        self.wait_status(lambda s: s["queue"], what="the waiter")
        self.assertEqual(d.stop(signal.SIGTERM), 0, d.log())
        self.assertFalse(os.path.lexists(self.sock))
        self.assertIn("terminated (SIGTERM)", d.log())
        self.assertEqual(h1.wait(5.0), 3, h1)
        self.assertIn("lost the lease", h1.stderr())
        # The waiter never got its lease: the daemon is unreachable, not a refusal or a grant.
        self.assertEqual(h2.wait(5.0), 3, h2)
        self.assertEqual(h2.stdout(), "")


if __name__ == "__main__":
    unittest.main()
