# SPDX-License-Identifier: MIT
"""rocmmemctl's habits, against a real rocmmemd: --help of every command, size hints, JSON
errors, colour only on a terminal (NO_COLOR respected), and the host-memory warning."""
import fcntl
import os
import pty
import re
import struct
import subprocess
import termios
import unittest

from daemon import GRANULE, CliTestCase, Daemon, clean_env, rocmmemctl_bin, run

USAGE = "Usage: rocmmemctl [--socket PATH] [--json] "


def commands():
    """The commands `rocmmemctl --help` lists."""
    out = run([rocmmemctl_bin(), "--help"]).stdout
    return re.findall(r"(?m)^  ([a-z]+)\b", out.split("Commands:")[1].split("Options:")[0])


def on_terminal(args, env, cols=100):
    """Runs args with stdout and stderr on a pseudo-terminal cols wide; returns (rc, output)."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, cols, 0, 0))
    p = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=slave, stderr=slave, env=env)
    os.close(slave)
    out = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the terminal's last writer is gone
            break
        if not chunk:
            break
        out += chunk
    os.close(master)
    return p.wait(timeout=10), out.decode().replace("\r\n", "\n")


class Help(CliTestCase):
    def test_every_command_has_help(self):
        names = commands()
        self.assertEqual(names, ["status", "watch", "lease", "trim", "models", "evict", "pin",
                                 "unpin", "metrics", "help", "version"])
        # A socket where nothing listens: --help answers without the daemon.
        nowhere = os.path.join(self.dir, "nowhere.sock")
        for name in names:
            with self.subTest(command=name):
                r = self.ctl(name, "--help", sock=nowhere)
                self.assertEqual((r.rc, r.stderr), (0, ""), r)
                self.assertTrue(r.stdout.startswith(USAGE + name), r)
                self.assertRegex(r.stdout, r"(?m)^Options:$")
                for opt in ("--json", "--socket", "--help"):
                    self.assertRegex(r.stdout, rf"(?m)^  -\w, {opt}\b", r)
                self.assertIn("Exit status: 0 success, 1 usage error", r.stdout)
                for line in r.stdout.splitlines():
                    self.assertLessEqual(len(line), 80, line)
                self.assertEqual(self.ctl(name, "-h", sock=nowhere).stdout, r.stdout)
                self.assertEqual(self.ctl("help", name, sock=nowhere).stdout, r.stdout)

    def test_help_wins_over_the_rest(self):
        """--help among other arguments prints the help and does nothing else."""
        self.start_daemon()
        for args in (["lease", "4M", "--hold", "30", "--help"], ["evict", "x", "-h"],
                     ["status", "clients", "-o", "PID", "--help"],
                     ["watch", "-n", "1", "--help"]):
            with self.subTest(args=args):
                r = self.ctl(*args)
                self.assertEqual(r.rc, 0, r)
                self.assertTrue(r.stdout.startswith(USAGE + args[0]), r)
        st = self.status()
        self.assertEqual((st["leases"], st["queue"]), ([], []))

    def test_options_in_help_are_the_parsed_ones(self):
        """Each option CMD --help lists is taken by CMD; one it does not list is refused."""
        self.start_daemon()
        r = self.ctl("status", "--help")
        self.assertIn("Columns of clients", r.stdout)
        for table in ("devices", "clients", "leases", "models", "queue", "denials"):
            self.assertIn(f"Columns of {table} (-o;", r.stdout)
        flags = re.findall(r"(?m)^ +(?:-\w, )?(--[a-z]+)\b(?! [A-Z])", r.stdout)
        self.assertEqual(flags, ["--csv", "--noheadings", "--bytes", "--json", "--help"])
        for opt in flags[:3]:
            with self.subTest(opt=opt):
                self.assertEqual(self.ctl("status", "clients", opt).rc, 0)
        r = self.ctl("trim", "--csv")
        self.assertEqual(r.rc, 1, r)
        self.assertIn("unknown option '--csv'", r.stderr)

    def test_help_of_an_unknown_command(self):
        r = self.ctl("help", "frob", sock=False)
        self.assertEqual(r.rc, 1, r)
        self.assertRegex(r.stderr, r"^rocmmemctl help: unknown command 'frob'")


class SizeHints(CliTestCase):
    def test_decimal_and_spelled_units(self):
        for text, meant, unit in (("4GB", "4G", "GiB"), ("4gb", "4G", "GiB"),
                                  ("512MB", "512M", "MiB"), ("1.5GB", "1.5G", "GiB"),
                                  ("2 GiB", "2G", "GiB"), ("3Gi", "3G", "GiB"),
                                  ("64kb", "64K", "KiB"), ("1TB", "1T", "TiB"),
                                  ("8 bytes", "8", "bytes"), ("4 M", "4M", "MiB"),
                                  ("0.9GB", "0.9G", "GiB"), ("0.3 mb", "0.3M", "MiB")):
            with self.subTest(size=text):
                r = self.ctl("lease", text, sock=False)
                self.assertEqual((r.rc, r.stdout), (1, ""), r)
                self.assertTrue(r.stderr.startswith(
                    f"rocmmemctl lease: invalid SIZE '{text}': did you mean {meant} ({unit})?"),
                    r)
                self.assertIn("Try 'rocmmemctl lease --help'.", r.stderr)

    def test_no_hint_for_what_is_no_size(self):
        for text in ("12X", "GB", "1.5", "0x10", "4 GBs", "1.5 bytes", "4PB"):
            with self.subTest(size=text):
                r = self.ctl("lease", text, sock=False)
                self.assertEqual(r.rc, 1, r)
                self.assertRegex(r.stderr, rf"^rocmmemctl lease: invalid SIZE '{re.escape(text)}'")
                self.assertNotIn("did you mean", r.stderr)


class FractionalSizes(CliTestCase):
    """A fraction with a suffix is read as docker and systemd read it: the value times the
    unit, truncated to whole bytes (common/size.c, for the daemon's options and rocmmemctl
    alike); the daemon then grants whole 2 MiB granules."""

    def test_lease_of_a_fraction(self):
        # --budget 0.95G: floor(0.95 * 2**30) = 1020054732 bytes, 486 whole granules.
        self.start_daemon(budget="0.95G")
        self.assertEqual(self.status()["devices"][0]["budget_bytes"], 486 * GRANULE)
        # 0.9G: floor(0.9 * 2**30) = 966367641 bytes (966367641.6), granted as 461 granules.
        r = self.ctl("--json", "lease", "0.9G", "--hold", "0")
        self.assertEqual(r.rc, 0, r)
        self.assertEqual(r.json()["bytes"], 461 * GRANULE)
        r = self.ctl("lease", "0.9g", "--hold", "0")
        self.assertEqual(r.rc, 0, r)
        self.assertRegex(r.stdout, r"^lease \d+: 922 MiB on device 0;")
        # Truncated, not rounded: one byte past 4 MiB needs a third granule, less does not.
        for text, granules in (("4.0000001M", 2), ("4.000001M", 3), ("0.0000001M", None)):
            with self.subTest(size=text):
                r = self.ctl("--json", "lease", text, "--hold", "0")
                if granules is None:  # 0.1048576 bytes: 0, which is no size to lease
                    self.assertEqual(r.rc, 1, r)
                    self.assertIn("SIZE must be larger than 0", r.stderr)
                else:
                    self.assertEqual(r.rc, 0, r)
                    self.assertEqual(r.json()["bytes"], granules * GRANULE)
        self.assertEqual(self.status()["leases"], [])


class JsonErrors(CliTestCase):
    def test_daemon_absent(self):
        nowhere = os.path.join(self.dir, "nowhere.sock")
        for args in (["status", "--json"], ["--json", "lease", "4M"], ["-j", "models"],
                     ["trim", "--json"], ["watch", "--json", "-n", "1"]):
            with self.subTest(args=args):
                r = self.ctl(*args, sock=nowhere)
                e = self.json_error(r, 3)
                self.assertEqual((e["code"], e["errno"]), ("ENOENT", 2), r)
                self.assertIn(nowhere, e["message"])
        # Without --json: nothing on stdout.
        r = self.ctl("status", sock=nowhere)
        self.assertEqual((r.rc, r.stdout), (3, ""), r)

    def test_usage_error(self):
        r = self.ctl("status", "--json", "--frob", sock=False)
        e = self.json_error(r, 1)
        self.assertEqual((e["code"], e["errno"]), ("EINVAL", 22))
        self.assertEqual(e["message"], "unknown option '--frob'")
        r = self.ctl("--json", "lease", "4GB", sock=False)
        self.assertIn("did you mean 4G (GiB)?", self.json_error(r, 1)["message"])

    def test_refused(self):
        self.start_daemon()
        r = self.ctl("--json", "lease", "1G")
        e = self.json_error(r, 2)
        self.assertEqual((e["code"], e["errno"]), ("E2BIG", 7))
        self.assertIn("more than its whole budget of 64 MiB", e["message"])
        r = self.ctl("--json", "evict", "nosuch")
        self.assertEqual(self.json_error(r, 2)["code"], "ENOENT")


class Colour(CliTestCase):
    def setUp(self):
        super().setUp()
        self.start_daemon()

    def status_on_terminal(self, **env):
        rc, out = on_terminal([rocmmemctl_bin(), "--socket", self.sock, "status"],
                              clean_env(**env))
        self.assertEqual(rc, 0, out)
        return out

    def test_only_on_a_terminal(self):
        out = self.status_on_terminal(NO_COLOR=None, TERM="xterm")
        self.assertIn("\033[1mDEVICE", out, "bold headings on a terminal")
        piped = self.ctl("status", env=clean_env(NO_COLOR=None, TERM="xterm"))
        self.assertNotIn("\033", piped.stdout, "none through a pipe")

    def test_no_color(self):
        for env in ({"NO_COLOR": "1"}, {"NO_COLOR": "yes please"}, {"TERM": "dumb"}):
            with self.subTest(env=env):
                self.assertNotIn("\033", self.status_on_terminal(**env))
        # NO_COLOR set but empty does not count (no-color.org).
        self.assertIn("\033[1m", self.status_on_terminal(NO_COLOR="", TERM="xterm"))


class HostFallback(CliTestCase):
    """--backend auto without a GPU runtime: a warning, loud; under systemd with a GPU device
    node present, an error. The runtimes are made absent by naming files that do not exist."""

    def env(self, **extra):
        env = {"ROCMMEM_HIP_LIBRARY": os.path.join(self.dir, "no", "libamdhip64.so"),
               "ROCMMEM_CUDA_LIBRARY": os.path.join(self.dir, "no", "libcuda.so.1"),
               "NOTIFY_SOCKET": None, "INVOCATION_ID": None, "ROCMMEM_DEV_ROOT": None}
        env.update(extra)
        return clean_env(**env)

    def test_warning_first_in_status_and_watch(self):
        d = self.start_daemon(budget="64M", env=self.env(), extra=["--backend", "auto"])
        self.assertRegex(d.log(), r"(?m)^rocmmemd: warn: no GPU runtime found \(hip: .*; cuda: "
                                  r".*\): serving host memory")
        r = self.ctl("status")
        self.assertEqual(r.rc, 0, r)
        first, second = r.stdout.splitlines()[:2]
        self.assertRegex(first, r"^WARNING: host memory, not GPU memory: rocmmemd found no GPU "
                                r"runtime \(hip: .*libamdhip64\.so.*; cuda: .*libcuda\.so\.1.*\); "
                                r"leases are system RAM\. Set backend = host if that is meant\.$")
        self.assertRegex(second, r"^rocmmemd \S+, pid \d+, up \S+, backend host$")
        d_json = self.status()["daemon"]
        self.assertIs(d_json["host_fallback"], True)
        self.assertRegex(d_json["host_fallback_reason"], r"^hip: .+; cuda: .+$")
        self.assertIn(d_json["host_fallback_reason"], first)
        w = self.ctl("watch", "-n", "1")
        self.assertEqual(w.rc, 0, w)
        self.assertEqual(w.stdout.splitlines()[0], first)
        rc, out = on_terminal([rocmmemctl_bin(), "--socket", self.sock, "status"],
                              clean_env(TERM="xterm", NO_COLOR=None))
        self.assertTrue(out.startswith("\033[1;33mWARNING\033[0m: host memory"), out[:80])

    def test_host_named_is_no_fallback(self):
        self.start_daemon(env=self.env(INVOCATION_ID="1", ROCMMEM_DEV_ROOT=self.gpu_nodes()))
        st = self.status()
        self.assertEqual((st["daemon"]["host_fallback"], st["daemon"]["backend"]), (False, "host"))
        self.assertNotIn("WARNING", self.ctl("status").stdout)
        self.assertNotIn("no GPU runtime", self.daemon.log())

    def gpu_nodes(self, node="kfd"):
        """A directory standing in for /dev with one GPU device node (a plain file)."""
        root = os.path.join(self.dir, "dev-" + node.replace("/", "-"))
        os.makedirs(os.path.dirname(os.path.join(root, node)), exist_ok=True)
        open(os.path.join(root, node), "w").close()
        return root

    def test_error_under_systemd_with_a_gpu_node(self):
        for node in ("kfd", "nvidia0", "dri/renderD128"):
            for service in ({"INVOCATION_ID": "0123abcd"},
                            {"NOTIFY_SOCKET": os.path.join(self.dir, "notify")}):
                with self.subTest(node=node, service=service):
                    env = self.env(ROCMMEM_DEV_ROOT=self.gpu_nodes(node), **service)
                    r = self.rocmmemd("--socket", os.path.join(self.dir, "e.sock"),
                                      "--config", "/dev/null", env=env)
                    self.assertEqual(r.rc, 2, r)
                    self.assertIn(f"error: Could not use the GPU: "
                                  f"{env['ROCMMEM_DEV_ROOT']}/{node} is present but no GPU "
                                  f"runtime loaded (hip: ", r.stderr)
                    self.assertIn("set backend = host", r.stderr)
                    self.assertFalse(os.path.exists(os.path.join(self.dir, "e.sock")))

    def test_warning_only_without_node_or_service(self):
        for env in (self.env(INVOCATION_ID="1", ROCMMEM_DEV_ROOT=os.path.join(self.dir, "e")),
                    self.env(ROCMMEM_DEV_ROOT=self.gpu_nodes())):
            with self.subTest(env={k: env.get(k) for k in ("INVOCATION_ID",
                                                            "ROCMMEM_DEV_ROOT")}):
                sock = os.path.join(self.dir, f"w{len(os.listdir(self.dir))}.sock")
                d = Daemon(self.dir, sock, ["--budget", "64M"], name=os.path.basename(sock),
                           env=env)
                self.addCleanup(d.kill)
                d.wait_ready()
                self.assertIs(self.status(sock=sock)["daemon"]["host_fallback"], True)
                self.assertEqual(d.stop(), 0, d.log())


if __name__ == "__main__":
    unittest.main()
