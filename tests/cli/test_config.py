# SPDX-License-Identifier: MIT
"""rocmmemd's configuration file: precedence, bad values, --check-config, SIGHUP reload."""
import os
import re
import signal
import unittest

from daemon import MiB, CliTestCase, can_connect, clean_env, poll_until, rocmmemd_bin, run

ROOT = os.geteuid() == 0


class ConfigTestCase(CliTestCase):
    def write_config(self, text, name="rocmmemd.conf"):
        path = os.path.join(self.dir, name)
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, path)  # a reload never sees a half-written file
        return path

    def check(self, *args, env=None):
        return run([rocmmemd_bin(), "--socket", self.sock, *args, "--check-config"], env=env,
                   timeout=5.0)

    def budget(self):
        return self.status()["devices"][0]["budget_bytes"]

    def reload(self, d, pattern):
        """Sends SIGHUP and waits for the log line that says how it went."""
        before = d.log().count("SIGHUP: reloading")
        d.signal(signal.SIGHUP)
        poll_until(lambda: d.log().count("SIGHUP: reloading") > before, what="the reload")
        return poll_until(lambda: re.search(pattern, d.log().split("SIGHUP: reloading")[-1]),
                          what=f"/{pattern}/ after the reload")


class CheckConfig(ConfigTestCase):
    def test_defaults_and_sources(self):
        r = self.check("--config", "/dev/null")
        self.assertEqual(r.rc, 0, r)
        self.assertIn("[daemon]", r.stdout)
        self.assertRegex(r.stdout, rf"socket = {re.escape(self.sock)} +; command line")
        self.assertRegex(r.stdout, r"log_level = info +; default")
        self.assertRegex(r.stdout, r"evict_deadline = 20 +; default")
        self.assertRegex(r.stdout, r"clients = 4096 +; default")
        self.assertEqual(r.stderr, "")

    def test_file_and_flags(self):
        path = self.write_config("[daemon]\nlog_level = warn\nshutdown_timeout = 1.5\n"
                                 "[policy]\nevict_deadline = 9\nexclusive = transformer,vae\n"
                                 "[limits]\npending = 8\n[devices]\nbudget = 32M\n"
                                 "[device 0]\nheadroom = 1G\n")
        r = self.check("--config", path, "--evict-deadline", "3", "--max-pending", "16")
        self.assertEqual(r.rc, 0, r)
        self.assertIn(f"read from {path}", r.stdout)
        self.assertRegex(r.stdout, r"log_level = warn +; file")
        self.assertRegex(r.stdout, r"shutdown_timeout = 1.5 +; file")
        self.assertRegex(r.stdout, r"evict_deadline = 3 +; command line")
        self.assertRegex(r.stdout, r"pending = 16 +; command line")
        self.assertRegex(r.stdout, r"exclusive = transformer,vae +; file")
        self.assertRegex(r.stdout, r"\[devices\]\nbudget = 32M +; file")
        self.assertRegex(r.stdout, r"\[device 0\]\nheadroom = 1G +; file")
        # What --check-config prints is itself a valid configuration file.
        again = self.write_config(r.stdout, "printed.conf")
        r2 = self.check("--config", again, "--evict-deadline", "3", "--max-pending", "16")
        self.assertEqual(r2.rc, 0, r2)

        def values(text):  # the key = value lines, comments and sources dropped
            return [line.split(";")[0].strip() for line in text.splitlines()
                    if "=" in line.split(";")[0]]

        self.assertEqual(values(r2.stdout), values(r.stdout))

    def test_bad_values_name_file_line_and_key(self):
        cases = [
            ("[daemon]\nlog_level = info\nbudget = 1G\n", 3, r"\[daemon\] budget: unknown key"),
            ("[devices]\nbudget = 4GB\n", 2, r"\[devices\] budget = 4GB: expected bytes"),
            ("[devices]\nheadroom = -1G\n", 2, r"\[devices\] headroom = -1G"),
            ("[limits]\nclients = 0\n", 2, r"\[limits\] clients = 0: a whole number from 1"),
            ("[policy]\nevict_deadline = 7200\n", 2, r"at most 3600"),
            ("[daemon]\n[limits\n", 2, r"syntax error"),
            ("[frobs]\nx = 1\n", 2, r"\[frobs\]: unknown section"),
            ("[devices]\nbudget = 1G\nbudget = 2G\n", 3, r"given twice"),
        ]
        for text, line, message in cases:
            with self.subTest(text=text):
                path = self.write_config(text)
                r = self.check("--config", path)
                self.assertEqual(r.rc, 2, r)
                self.assertEqual(r.stdout, "", r)
                self.assertRegex(r.stderr,
                                 rf"^rocmmemd: {re.escape(path)}:{line}: .*{message}")
                # The daemon refuses to start on it just the same, before anything else.
                rd = run([rocmmemd_bin(), "--socket", self.sock, "--config", path], timeout=5.0)
                self.assertEqual(rd.rc, 2, rd)
                self.assertFalse(os.path.exists(self.sock))

    def test_missing_file(self):
        r = self.check("--config", os.path.join(self.dir, "nope.conf"))
        self.assertEqual(r.rc, 2, r)
        self.assertIn("nope.conf: No such file or directory", r.stderr)

    @unittest.skipUnless(ROOT, "needs root to run the daemon as another user")
    def test_user_mode_default_file(self):
        """Not root: $XDG_CONFIG_HOME/rocmmemd/rocmmemd.conf, or nothing when it is missing."""
        os.chmod(self.dir, 0o755)
        conf_dir = os.path.join(self.dir, "xdg", "rocmmemd")
        os.makedirs(conf_dir)
        for d in (os.path.join(self.dir, "xdg"), conf_dir):
            os.chmod(d, 0o755)
        env = clean_env(XDG_CONFIG_HOME=os.path.join(self.dir, "xdg"), HOME="/nonexistent")
        as_nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
        r = run([*as_nobody, rocmmemd_bin(), "--socket", self.sock, "--check-config"], env=env)
        self.assertEqual(r.rc, 0, r)
        self.assertIn("no configuration file found", r.stdout)
        path = os.path.join(conf_dir, "rocmmemd.conf")
        with open(path, "w") as f:
            f.write("[daemon]\nlog_level = debug\n")
        os.chmod(path, 0o644)
        r = run([*as_nobody, rocmmemd_bin(), "--socket", self.sock, "--check-config"], env=env)
        self.assertEqual(r.rc, 0, r)
        self.assertIn(f"read from {path}", r.stdout)
        self.assertRegex(r.stdout, r"log_level = debug +; file")


class Precedence(ConfigTestCase):
    def test_file_over_default(self):
        path = self.write_config("[devices]\nbudget = 32M\n[limits]\nclients = 3\n")
        self.start_daemon(budget=None, extra=["--config", path])
        self.assertEqual(self.budget(), 32 * MiB)
        # clients = 3 from the file: with three holders connected, a fourth is turned away.
        # (No status query while a holder connects: it would take the holder's place.)
        holders = []
        for i in range(3):
            holders.append(self.holder("2M", "--hold", "30", name=f"h{i}"))
            holders[-1].wait_stdout(r"holding it for")
        r = self.ctl("status")
        self.assertEqual(r.rc, 3, r)
        holders[0].kill()
        poll_until(lambda: self.ctl("status").rc == 0, what="room for a connection again")

    def test_file_takes_fractions(self):
        # The one size rule: 0.95G is floor(0.95 * 2**30) = 1020054732 bytes, and a device's
        # budget is whole 2 MiB granules of it (486).
        path = self.write_config("[devices]\nbudget = 0.95G\n")
        self.start_daemon(budget=None, extra=["--config", path])
        self.assertEqual(self.budget(), 486 * 2 * MiB)
        r = self.check("--config", path)
        self.assertEqual(r.rc, 0, r)
        # --check-config prints the bytes the rule gave, before granules.
        self.assertRegex(r.stdout, r"\[devices\]\nbudget = 1020054732 +; file")

    def test_flag_wins(self):
        path = self.write_config("[devices]\nbudget = 32M\n")
        self.start_daemon(budget="48M", extra=["--config", path])
        self.assertEqual(self.budget(), 48 * MiB)


class Reload(ConfigTestCase):
    def test_budget_change_keeps_every_lease(self):
        path = self.write_config("[devices]\nbudget = 64M\n")
        d = self.start_daemon(budget=None, extra=["--config", path])
        holders = [self.holder("16M", "--hold", "60", name=f"h{i}") for i in range(3)]
        poll_until(lambda: len(self.status()["leases"]) == 3, what="three leases")
        ids = sorted(l["id"] for l in self.status()["leases"])

        # Lower than what is held: nothing is dropped, nothing new is granted.
        self.write_config("[devices]\nbudget = 32M\n")
        self.reload(d, r"reloaded the configuration")
        st = self.status()
        self.assertEqual(st["devices"][0]["budget_bytes"], 32 * MiB)
        self.assertEqual(sorted(l["id"] for l in st["leases"]), ids)
        self.assertEqual(st["devices"][0]["leased_bytes"], 48 * MiB)
        self.assertEqual(st["devices"][0]["free_bytes"], 0)
        self.assertRegex(d.log(), r"budget 32 MiB \(was 64 MiB\).*more than that is held")
        r = self.ctl("lease", "2M", "--timeout", "0")
        self.assertEqual(r.rc, 2, r)

        # A request waits; raising the budget lets it through at once.
        w = self.holder("24M", "--timeout", "30", "--hold", "30", name="waiter")
        poll_until(lambda: self.status()["queue"], what="the waiting request")
        self.write_config("[devices]\nbudget = 96M\n")
        self.reload(d, r"reloaded the configuration")
        poll_until(lambda: len(self.status()["leases"]) == 4, what="the waiter's grant")
        self.assertEqual(self.budget(), 96 * MiB)
        for h in holders + [w]:
            self.assertTrue(h.running(), h)

    def test_log_level_and_policy_change(self):
        path = self.write_config("[daemon]\nlog_level = debug\n")
        d = self.start_daemon(extra=["--config", path, "--log-level", "debug"])
        # The flag keeps winning: the file's new level does not apply.
        self.write_config("[daemon]\nlog_level = error\n[policy]\nexclusive = transformer,vae\n")
        self.reload(d, r"reloaded the configuration")
        self.assertRegex(d.log(), r"device 0: never resident together: transformer/vae")
        self.ctl("status")
        self.assertRegex(d.log().split("reloaded")[-1], r"debug: connection \d+ accepted")

    def test_log_level_from_file(self):
        path = self.write_config("[daemon]\nlog_level = debug\n")
        # Not start_daemon: its --log-level flag would win over the file.
        d = self.background([rocmmemd_bin(), "--socket", self.sock, "--backend", "host",
                             "--budget", "64M", "--config", path], "rocmmemd")
        d.log = d.stderr
        poll_until(lambda: can_connect(self.sock), what="the daemon")
        self.write_config("[daemon]\nlog_level = warn\n")
        self.reload(d, r"")  # applied within the same signal callback, silently at warn
        before = len(d.log())
        self.ctl("status")
        self.ctl("lease", "2M", "--hold", "0")
        self.assertNotIn("info:", d.log()[before:], "warn level: no info lines any more")
        d.signal(signal.SIGTERM)
        self.assertEqual(d.wait(), 0)

    def test_broken_file_keeps_the_old_configuration(self):
        path = self.write_config("[devices]\nbudget = 48M\n")
        d = self.start_daemon(budget=None, extra=["--config", path])
        h = self.holder("16M", "--hold", "60")
        poll_until(lambda: self.status()["leases"], what="the lease")
        for text, pattern in [
            ("[devices]\nbudget = 4GB\n", r":2: \[devices\] budget = 4GB"),
            ("[devices\nbudget = 32M\n", r":1: syntax error"),
            ("[devices]\nbudget = 1000T\n", r"device 0 \(host memory\): budget 1000 TiB"),
            ("[device 7]\nbudget = 32M\n", r"names device 7, but there are 1 device"),
        ]:
            with self.subTest(text=text):
                self.write_config(text)
                self.reload(d, r"reload refused, the configuration in force is kept: .*"
                            + pattern)
                st = self.status()
                self.assertEqual(st["devices"][0]["budget_bytes"], 48 * MiB)
                self.assertEqual(len(st["leases"]), 1)
        os.unlink(path)
        self.reload(d, r"reload refused.*No such file")
        self.assertEqual(self.budget(), 48 * MiB)
        self.assertTrue(d.running())
        h.kill()

    def test_restart_only_settings_are_said(self):
        path = self.write_config("[daemon]\nsharing = auto\n")
        d = self.start_daemon(extra=["--config", path])
        prom = os.path.join(self.dir, "m.prom")
        self.write_config(f"[daemon]\nsharing = ipc\n[metrics]\ntextfile = {prom}\n")
        self.reload(d, r"reloaded the configuration")
        self.assertRegex(d.log(), r"reload: sharing changed: it takes effect at the next start")
        self.assertRegex(d.log(), r"reload: textfile changed: it takes effect at the next start")
        self.assertFalse(os.path.exists(prom))
        # A flag is never overridden by the file, so changing what it set warns of nothing.
        self.write_config("[daemon]\nbackend = hip\nsocket = /tmp/elsewhere.sock\n")
        self.reload(d, r"reloaded the configuration")
        self.assertNotRegex(d.log(), r"reload: (backend|socket) changed")
        self.assertTrue(os.path.exists(self.sock))
        self.assertEqual(self.status()["daemon"]["backend"], "host")

    def test_many_reloads_in_a_row(self):
        path = self.write_config("[devices]\nbudget = 32M\n")
        d = self.start_daemon(budget=None, extra=["--config", path])
        for i in range(20):
            self.write_config(f"[devices]\nbudget = {32 + 2 * (i % 4)}M\n")
            d.signal(signal.SIGHUP)
        poll_until(lambda: d.log().count("SIGHUP: reloading") >= 1, what="reloads")
        poll_until(lambda: self.budget() == 38 * MiB, what="the last budget")
        self.assertTrue(d.running())


if __name__ == "__main__":
    unittest.main()
