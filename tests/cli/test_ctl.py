# SPDX-License-Identifier: MIT
"""rocmmemctl's exit codes (0 ok, 1 usage, 2 refused, 3 unreachable), socket choice, help."""
import os
import re
import signal
import time
import unittest

from daemon import BUDGET, MiB, CliTestCase, clean_env, rocmmemctl_bin, rocmmemd_bin, run

LEASE_LINE = r"^lease (\d+): (.+) on device (\d+)"
VERSION_LINE = r"^{} (\d+\.\d+\.\d+\S*) \(protocol (\d+)\)\n$"


class UsageErrors(CliTestCase):
    """Exit 1, a message on stderr, nothing on stdout; checked against a live daemon so that a
    command that wrongly went ahead would show up as a different exit status or a lease."""

    def setUp(self):
        super().setUp()
        self.start_daemon()

    def usage(self, args, message, sock=True):
        r = self.ctl(*args, sock=sock)
        self.assertEqual(r.rc, 1, r)
        self.assertEqual(r.stdout, "", r)
        self.assertRegex(r.stderr, message, r)
        return r

    def test_no_command(self):
        r = self.usage([], r"^Usage: rocmmemctl ")
        self.assertIn("status", r.stderr)
        self.assertIn("lease", r.stderr)
        self.usage([], r"^Usage: rocmmemctl ", sock=False)

    def test_unknown_command(self):
        self.usage(["frobnicate"], r"^rocmmemctl: unknown command 'frobnicate'")

    def test_unknown_options(self):
        self.usage(["--frob", "status"], r"^rocmmemctl: unknown option '--frob'")
        self.usage(["-x", "status"], r"^rocmmemctl: unknown option")
        self.usage(["status", "--frob"], r"^rocmmemctl status: unknown option '--frob'")
        self.usage(["lease", "4M", "--frob"], r"^rocmmemctl lease: unknown option '--frob'")

    def test_missing_option_values(self):
        self.usage(["--socket"], r"^rocmmemctl: option '--socket' needs a value", sock=False)
        self.usage(["lease", "4M", "--hold"], r"^rocmmemctl lease: option '--hold' needs a value")

    def test_status_option_without_value(self):
        # Like the global options and lease's, a missing value is named as such.
        self.usage(["status", "--socket"], r"^rocmmemctl status: option '--socket' needs a value")

    def test_lease_without_size(self):
        self.usage(["lease"], r"^rocmmemctl lease: missing SIZE")
        self.usage(["lease", "--hold", "1"], r"^rocmmemctl lease: missing SIZE")

    def test_bad_sizes(self):
        for size in ("12X", "4GB", "1.5", "M", "", "1.2.3M", "4 M", "0x10", "1.G", ".5G",
                     "1e3G", "0x10M", "1,5G", "0.9 G", "0.1234567890123456789G"):
            with self.subTest(size=size):
                self.usage(["lease", size], rf"^rocmmemctl lease: invalid SIZE '{re.escape(size)}'")
        for size in ("0", "0M", "0.0G", "0.0000000001G"):
            with self.subTest(size=size):
                self.usage(["lease", size], r"^rocmmemctl lease: SIZE must be larger than 0")
        # "-1" looks like an option to the parser; either way it is a usage error.
        self.usage(["lease", "-1"], r"^rocmmemctl lease: ")
        self.usage(["lease", "99999999999T"], r"^rocmmemctl lease: invalid SIZE .*too large")

    def test_bad_hold_timeout_device(self):
        for opt in ("--hold", "--timeout"):
            for value in ("abc", "-5", "1x", "", "1.2.3"):
                with self.subTest(opt=opt, value=value):
                    self.usage(["lease", "4M", opt, value],
                               rf"^rocmmemctl lease: invalid {opt} '{re.escape(value)}'")
        for value in ("abc", "-1", "1.5", "", "99999"):
            with self.subTest(device=value):
                self.usage(["lease", "4M", "--device", value],
                           rf"^rocmmemctl lease: invalid --device '{re.escape(value)}'")

    def test_extra_arguments(self):
        self.usage(["lease", "4M", "8M"], r"^rocmmemctl lease: unexpected argument '8M'")
        self.usage(["status", "extra"], r"^rocmmemctl status: unexpected argument 'extra'")

    def tearDown(self):
        # Nothing went ahead: no lease, nobody waiting, no client left behind (status leaves
        # its own connection out). The fixture's readiness probe may linger a moment: poll.
        st = self.wait_status(lambda s: not s["clients"], what="no other client")
        self.assertEqual(st["leases"], [])
        self.assertEqual(st["queue"], [])
        super().tearDown()


class Refused(CliTestCase):
    def setUp(self):
        super().setUp()
        self.start_daemon()

    def test_larger_than_the_budget(self):
        r = self.ctl("lease", "1T")
        self.assert_no_output_but_error(r, 2)
        self.assertIn("budget", r.stderr)
        self.assertIn("64 MiB", r.stderr)
        self.assertIn("1 TiB", r.stderr)
        # One granule over the budget is as impossible as a terabyte.
        r = self.ctl("lease", str(BUDGET + 1))
        self.assert_no_output_but_error(r, 2)
        self.assertIn("budget", r.stderr)

    def test_the_whole_budget_is_grantable(self):
        r = self.ctl("--json", "lease", "64M", "--hold", "0")
        self.assertEqual(r.rc, 0, r)
        self.assertEqual(r.json()["bytes"], BUDGET)

    def test_no_such_device(self):
        r = self.ctl("lease", "4M", "--device", "1")
        self.assert_no_output_but_error(r, 2)
        self.assertIn("no device 1", r.stderr)

    def test_not_enough_free_names_the_holder(self):
        h = self.holder("30M", "--hold", "30")
        h.wait_stdout(LEASE_LINE)
        t0 = time.monotonic()
        r = self.ctl("lease", "40M")
        self.assertLess(time.monotonic() - t0, 5.0, "the default --timeout is 0: no waiting")
        self.assert_no_output_but_error(r, 2)
        self.assertIn("40 MiB", r.stderr)
        self.assertIn("34 MiB", r.stderr, "how much is free")
        self.assertIn(f"pid {h.pid}", r.stderr, "who holds the memory")
        st = self.status()
        self.assertEqual(st["queue"], [])
        self.assertEqual(st["devices"][0]["leased_bytes"], 30 * MiB)
        # What does fit is still granted.
        r = self.ctl("--json", "lease", "34M", "--hold", "0")
        self.assertEqual(r.rc, 0, r)

    def test_wait_that_times_out(self):
        h = self.holder("30M", "--hold", "30")
        h.wait_stdout(LEASE_LINE)
        t0 = time.monotonic()
        r = self.ctl("lease", "40M", "--timeout", "0.3")
        elapsed = time.monotonic() - t0
        self.assert_no_output_but_error(r, 2)
        self.assertIn("timed out", r.stderr)
        self.assertGreaterEqual(elapsed, 0.3, "it waited for the timeout")
        st = self.status()
        self.assertEqual(st["queue"], [], "the expired request left the queue")
        self.assertEqual(len(st["leases"]), 1)


class Lease(CliTestCase):
    def setUp(self):
        super().setUp()
        self.start_daemon()

    def test_hold_expires(self):
        t0 = time.monotonic()
        r = self.ctl("lease", "4M", "--hold", "0.5", "--tag", "short")
        elapsed = time.monotonic() - t0
        self.assertEqual(r.rc, 0, r)
        self.assertEqual(r.stderr, "", r)
        m = re.match(r"lease (\d+): 4 MiB on device 0 \(tag 'short'\); holding it for 0.5 s "
                     r"\(pid (\d+)\)\nreleased lease (\d+)\n$", r.stdout)
        self.assertIsNotNone(m, r)
        self.assertEqual(m.group(1), m.group(3))
        self.assertEqual(int(m.group(2)), r.pid)
        self.assertGreaterEqual(elapsed, 0.5)
        self.assertEqual(self.status()["leases"], [])

    def test_hold_message_in_seconds(self):
        """Long holds print as plain seconds (%.3g would print 3600 as 3.6e+03)."""
        for hold in ("3600", "1234.5"):
            with self.subTest(hold=hold):
                h = self.holder("4M", "--hold", hold)
                h.wait_stdout(LEASE_LINE)
                h.signal(signal.SIGINT)
                self.assertEqual(h.wait(), 0, h)
                self.assertIn(f"; holding it for {hold} s (pid {h.pid})\n", h.stdout())

    def test_sighup_and_sigterm_release(self):
        for sig in (signal.SIGHUP, signal.SIGTERM):
            with self.subTest(signal=sig.name):
                h = self.holder("4M")
                m = h.wait_stdout(LEASE_LINE)
                self.assertIn("holding it until interrupted", h.stdout())
                h.signal(sig)
                self.assertEqual(h.wait(), 0, h)
                self.assertIn(f"released lease {m.group(1)}\n", h.stdout())
                self.assertEqual(self.status()["leases"], [])

    def test_interrupted_waiter_leaves_the_queue(self):
        h = self.holder("40M", "--hold", "30")
        h.wait_stdout(LEASE_LINE)
        w = self.holder("40M", "--timeout", "30")
        self.wait_status(lambda s: s["queue"], what="the waiter")
        w.signal(signal.SIGINT)  # while waiting, Ctrl-C simply ends the process
        self.assertEqual(w.wait(), -signal.SIGINT, w)
        self.assertEqual(w.stdout(), "")
        st = self.wait_status(lambda s: not s["queue"], timeout=2.0, what="an empty queue")
        self.assertEqual(st["devices"][0]["leased_bytes"], 40 * MiB)
        self.assertEqual(len(st["leases"]), 1)

    def test_tags(self):
        for tag in ("x" * 64, "ééé", ""):
            with self.subTest(tag=tag):
                r = self.ctl("--json", "lease", "4M", "--hold", "0", "--tag", tag)
                self.assertEqual(r.rc, 0, r)
                self.assertEqual(r.json()["tag"], tag)
        for tag in ("x" * 65, "a\tb", "a\nb"):
            with self.subTest(tag=tag):
                r = self.ctl("lease", "4M", "--hold", "0", "--tag", tag)
                self.assert_no_output_but_error(r, 2)
                self.assertIn("lease tag must be at most 64 bytes", r.stderr)


class Unreachable(CliTestCase):
    def check(self, r):
        self.assert_no_output_but_error(r, 3)
        self.assertGreater(len(r.stderr.strip()), len("rocmmemctl:"))

    def test_missing_socket(self):
        missing = os.path.join(self.dir, "nowhere", "d.sock")
        self.check(self.ctl("status", sock=missing))
        self.check(self.ctl("status", "--json", sock=missing))
        self.check(self.ctl("lease", "4M", sock=missing))
        self.assertFalse(os.path.exists(os.path.dirname(missing)), "the client creates nothing")

    def test_regular_file(self):
        path = os.path.join(self.dir, "file.sock")
        with open(path, "w") as f:
            f.write("not a socket\n")
        self.check(self.ctl("status", sock=path))
        self.check(self.ctl("lease", "4M", "--hold", "0", sock=path))
        with open(path) as f:
            self.assertEqual(f.read(), "not a socket\n")

    def test_env_pointing_nowhere(self):
        env = clean_env(ROCMMEM_SOCKET=os.path.join(self.dir, "gone.sock"))
        self.check(self.ctl("status", sock=False, env=env))
        self.check(self.ctl("lease", "4M", sock=False, env=env))

    def test_stopped_daemon(self):
        d = self.start_daemon()
        self.assertEqual(self.ctl("status").rc, 0)
        self.assertEqual(d.stop(signal.SIGTERM), 0, d.log())
        self.check(self.ctl("status"))


class SocketChoice(CliTestCase):
    def setUp(self):
        super().setUp()
        self.start_daemon()
        self.nowhere = os.path.join(self.dir, "nowhere.sock")

    def daemon_pid(self, r):
        self.assertEqual(r.rc, 0, r)
        return r.json()["daemon"]["pid"]

    def test_env_used_without_option(self):
        env = clean_env(ROCMMEM_SOCKET=self.sock)
        r = self.ctl("status", "--json", sock=False, env=env)
        self.assertEqual(self.daemon_pid(r), self.daemon.pid)
        r = self.ctl("--json", "lease", "4M", "--hold", "0", sock=False, env=env)
        self.assertEqual(r.rc, 0, r)

    def test_option_beats_env(self):
        env = clean_env(ROCMMEM_SOCKET=self.nowhere)
        r = self.ctl("status", "--json", sock=self.sock, env=env)
        self.assertEqual(self.daemon_pid(r), self.daemon.pid)
        # ... also when the option names nothing and the environment names the daemon.
        env = clean_env(ROCMMEM_SOCKET=self.sock)
        r = self.ctl("status", "--json", sock=self.nowhere, env=env)
        self.assert_no_output_but_error(r, 3)

    def test_option_after_the_command(self):
        env = clean_env(ROCMMEM_SOCKET=self.nowhere)
        r = self.ctl("status", "--json", "--socket", self.sock, sock=False, env=env)
        self.assertEqual(self.daemon_pid(r), self.daemon.pid)

    def test_two_daemons(self):
        other = os.path.join(self.dir, "other.sock")
        d2 = self.start_daemon(sock=other, name="rocmmemd2")
        env = clean_env(ROCMMEM_SOCKET=other)
        self.assertEqual(self.daemon_pid(self.ctl("status", "--json", sock=False, env=env)),
                         d2.pid)
        self.assertEqual(self.daemon_pid(self.ctl("status", "--json", env=env)), self.daemon.pid)


class HelpAndVersion(CliTestCase):
    def test_ctl_help(self):
        for args in (["-h"], ["--help"], ["help"], ["--socket", "/nonexistent", "--help"]):
            with self.subTest(args=args):
                r = run([rocmmemctl_bin(), *args])
                self.assertEqual(r.rc, 0, r)
                self.assertEqual(r.stderr, "", r)
                self.assertRegex(r.stdout, r"^Usage: rocmmemctl ")
                self.assertRegex(r.stdout, r"(?m)^  status\b")
                self.assertRegex(r.stdout, r"(?m)^  lease SIZE\b")
                self.assertIn("--socket", r.stdout)
                self.assertIn("--json", r.stdout)

    def test_ctl_version(self):
        outs = set()
        for args in (["-V"], ["--version"], ["version"]):
            with self.subTest(args=args):
                r = run([rocmmemctl_bin(), *args])
                self.assertEqual(r.rc, 0, r)
                self.assertEqual(r.stderr, "", r)
                self.assertRegex(r.stdout, VERSION_LINE.format("rocmmemctl"))
                outs.add(r.stdout)
        self.assertEqual(len(outs), 1, outs)

    def test_daemon_help(self):
        for args in (["-h"], ["--help"]):
            with self.subTest(args=args):
                r = run([rocmmemd_bin(), *args])
                self.assertEqual(r.rc, 0, r)
                self.assertEqual(r.stderr, "", r)
                self.assertRegex(r.stdout, r"^Usage: rocmmemd ")
                for opt in ("--socket", "--backend", "--budget", "--headroom", "--log-level"):
                    self.assertIn(opt, r.stdout)

    def test_daemon_version_matches_ctl_and_status(self):
        rd = run([rocmmemd_bin(), "--version"])
        rc = run([rocmmemctl_bin(), "--version"])
        self.assertEqual(rd.rc, 0, rd)
        self.assertEqual(rd.stderr, "", rd)
        md = re.match(VERSION_LINE.format("rocmmemd"), rd.stdout)
        mc = re.match(VERSION_LINE.format("rocmmemctl"), rc.stdout)
        self.assertIsNotNone(md, rd)
        self.assertIsNotNone(mc, rc)
        self.assertEqual(md.groups(), mc.groups())
        self.start_daemon()
        st = self.status()
        self.assertEqual(st["daemon"]["version"], md.group(1))


class LostLease(CliTestCase):
    def test_holder_learns_the_daemon_stopped(self):
        d = self.start_daemon()
        h = self.holder("10M")
        m = h.wait_stdout(LEASE_LINE)
        self.assertIn("holding it until interrupted", h.stdout())
        self.wait_status(lambda s: self.lease_by_owner(s, h.pid), what="the lease")
        self.assertEqual(d.stop(signal.SIGTERM), 0, d.log())
        self.assertFalse(os.path.exists(self.sock), "the daemon removes its socket")
        self.assertEqual(h.wait(5.0), 3, h)
        self.assertIn("lost the lease", h.stderr())
        self.assertNotIn("released lease", h.stdout())
        self.assertIn(f"lease {m.group(1)}", h.stdout())


if __name__ == "__main__":
    unittest.main()
