# SPDX-License-Identifier: MIT
"""rocmmemd and rocmmem-exporter as their installed units run them, scraped by a real Prometheus.

systemd is not PID 1 on the machines this runs on, so the test plays the service manager with
real tools and the installed files: the build tree is installed into a scratch prefix
(`cmake --install`), its sysusers.d and tmpfiles.d entries are applied to this machine (the
users rocmmemd and rocmmem-exporter, /var/lib/rocmmemd/metrics), and each service is started
the way its unit says: systemd-socket-activate listens where the .socket unit would, then
execs the unit's ExecStart= as its User=, Group= and SupplementaryGroups= (setpriv), inside a
mount namespace whose file system is read-only but for the unit's ReadWritePaths= and
RuntimeDirectory= (ProtectSystem=strict, as far as it matters for writing). Then: the daemon
writes the metrics textfile there; the exporter answers GET /metrics (urllib) with text
promtool finds clean, with a client whose name needs escaping; and Prometheus, started on
loopback with one scrape target, returns the series through its HTTP API.

Environment (set by CMake): ROCMMEM_BUILD_DIR, CMAKE, ROCMMEM_DIR_* as tests/install.
"""
import json
import os
import pwd
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.parse
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "systemd"))
from fixture import Background, RawClient, poll_until  # noqa: E402

MiB = 1 << 20
ACTIVATE = shutil.which("systemd-socket-activate")
PROMTOOL = shutil.which("promtool")
PROMETHEUS = shutil.which("prometheus")
METRICS_DIR = "/var/lib/rocmmemd/metrics"
# A client name with every character the text format escapes in a label value but a newline
# (which no client name may hold).
ODD_NAME = 'odd "name" \\ here'


def env(name):
    value = os.environ.get(name)
    if not value:
        raise unittest.SkipTest(f"{name} is not set: run this test through ctest")
    return value


def run(args, **kw):
    r = subprocess.run(args, text=True, capture_output=True, timeout=120, **kw)
    if r.returncode != 0:
        raise AssertionError(f"{args} exited {r.returncode}:\n{r.stdout}{r.stderr}")
    return r


def unit(path):
    """A unit file's settings: key -> list of values, in order (comments and sections
    dropped; every key in this project's units is unique to its section)."""
    settings = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if line and not line.startswith(("#", ";", "[")):
                key, value = line.split("=", 1)
                settings.setdefault(key, []).append(value)
    return settings


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def sandboxed(settings, writable):
    """The command that runs a unit's ExecStart= as its user, on a read-only file system but
    for the paths in writable (ReadWritePaths=, RuntimeDirectory=), in a mount namespace."""
    binds = " ".join(f'mount --bind "{p}" "{p}" && mount -o remount,bind,rw "{p}" &&'
                     for p in writable)
    groups = ",".join(" ".join(settings.get("SupplementaryGroups", [])).split()) or None
    privs = ["setpriv", f"--reuid={settings['User'][0]}", f"--regid={settings['Group'][0]}",
             f"--groups={groups}" if groups else "--clear-groups", "--no-new-privs",
             "--inh-caps=-all", "--bounding-set=-all"]
    script = f'mount -o remount,bind,ro / && {binds} exec "$@"'
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh",
            *privs, *settings["ExecStart"][0].split()]


@unittest.skipIf(os.geteuid() != 0, "needs root: it creates the service users and switches to "
                 "them")
@unittest.skipUnless(ACTIVATE and PROMTOOL and PROMETHEUS and shutil.which("setpriv"),
                     "needs systemd-socket-activate, promtool, prometheus and setpriv "
                     "(scripts/setup.sh installs them)")
class Service(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="rocmmem-service-")
        os.chmod(cls.tmp, 0o755)  # the service users reach the socket and the programs
        cls.prefix = os.path.join(cls.tmp, "prefix")
        run([env("CMAKE"), "--install", env("ROCMMEM_BUILD_DIR"), "--prefix", cls.prefix])
        dirs = {k[len("ROCMMEM_DIR_"):]: v for k, v in os.environ.items()
                if k.startswith("ROCMMEM_DIR_")}
        cls.units = os.path.join(cls.prefix, dirs["SYSTEM_UNIT_DIR"])
        # What a package's maintainer scripts do: the users, then the metrics directory.
        sysusers = os.path.join(cls.prefix, dirs["SYSUSERS_DIR"])
        run(["systemd-sysusers", os.path.join(sysusers, "rocmmemd.conf"),
             os.path.join(sysusers, "rocmmem-exporter.conf")])
        cls.made_var = not os.path.exists("/var/lib/rocmmemd")
        run(["systemd-tmpfiles", "--create", "--prefix=/var/lib/rocmmemd",
             os.path.join(cls.prefix, dirs["TMPFILES_DIR"], "rocmmemd.conf")])

    @classmethod
    def tearDownClass(cls):
        if cls.made_var:
            shutil.rmtree("/var/lib/rocmmemd", ignore_errors=True)
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def setUp(self):
        self.dir = tempfile.mkdtemp(dir=self.tmp)
        os.chmod(self.dir, 0o755)
        self.procs = []

    def tearDown(self):
        for p in reversed(self.procs):
            p.kill()

    def background(self, args, name, **kw):
        p = Background(args, self.dir, name, **kw)
        self.procs.append(p)
        return p

    def start_daemon(self, prom_path):
        """rocmmemd.socket and rocmmemd.service, as installed, with a textfile configured."""
        sock_unit = unit(os.path.join(self.units, "rocmmemd.socket"))
        svc = unit(os.path.join(self.units, "rocmmemd.service"))
        self.assertEqual(sock_unit["ListenSequentialPacket"], ["/run/rocmmemd/rocmmemd.sock"])
        self.assertIn("-/var/lib/rocmmemd/metrics", svc["ReadWritePaths"])
        self.assertEqual(svc["ProtectSystem"], ["strict"])
        # The configuration the unit names, replaced by the test's own.
        self.assertIn("--config /etc/rocmmemd/rocmmemd.conf", svc["ExecStart"][0])
        conf = os.path.join(self.dir, "rocmmemd.conf")
        with open(conf, "w") as f:
            f.write(f"[daemon]\nbackend = host\n[devices]\nbudget = 64M\n"
                    f"[metrics]\ntextfile = {prom_path}\ninterval = 1\n")
        os.chmod(conf, 0o644)
        svc["ExecStart"] = [svc["ExecStart"][0].replace("/etc/rocmmemd/rocmmemd.conf", conf)]
        # RuntimeDirectory=rocmmemd/state: its own directory, the state file's.
        state = os.path.join(self.dir, "run", "rocmmemd", "state")
        os.makedirs(state, 0o700)
        shutil.chown(state, svc["User"][0], svc["Group"][0])
        self.sock = os.path.join(self.dir, "rocmmemd.sock")
        writable = [w.lstrip("-") for w in svc["ReadWritePaths"]] + [state]
        d = self.background([ACTIVATE, "--seqpacket", "-l", self.sock, "-E",
                             f"RUNTIME_DIRECTORY={state}", *sandboxed(svc, writable)],
                            "rocmmemd")
        # The path exists from bind() on, but connections are refused until listen(): wait
        # for systemd-socket-activate to say it listens.
        poll_until(lambda: "Listening on" in d.stderr() or not d.running(), timeout=10,
                   what="systemd-socket-activate to listen")
        self.assertTrue(d.running(), d.stderr())
        # SocketGroup=rocmmem, SocketMode=0660: systemd-socket-activate has no such options.
        shutil.chown(self.sock, group=sock_unit["SocketGroup"][0])
        os.chmod(self.sock, int(sock_unit["SocketMode"][0], 8))
        return d

    def start_exporter(self, port):
        """rocmmem-exporter.socket and .service, as installed, on a port of the test's."""
        sock_unit = unit(os.path.join(self.units, "rocmmem-exporter.socket"))
        svc = unit(os.path.join(self.units, "rocmmem-exporter.service"))
        self.assertEqual(sock_unit["ListenStream"], ["127.0.0.1:10437"])
        self.assertEqual(svc["PrivateNetwork"], ["yes"])
        # ExecStart= has no --socket: the unit reaches /run/rocmmemd/rocmmemd.sock by default.
        return self.background([ACTIVATE, "-l", f"127.0.0.1:{port}", "-E",
                                f"ROCMMEM_SOCKET={self.sock}", *sandboxed(svc, [])],
                               "exporter")

    def start_prometheus(self, target):
        port = free_port()
        conf = os.path.join(self.dir, "prometheus.yml")
        with open(conf, "w") as f:
            f.write("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
                    "scrape_configs:\n  - job_name: rocmmemd\n    static_configs:\n"
                    f"      - targets: ['{target}']\n")
        p = self.background([PROMETHEUS, f"--config.file={conf}",
                             f"--storage.tsdb.path={os.path.join(self.dir, 'tsdb')}",
                             f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"],
                            "prometheus")
        return p, f"http://127.0.0.1:{port}"

    def query(self, base, promql):
        url = f"{base}/api/v1/query?" + urllib.parse.urlencode({"query": promql})
        try:
            with urllib.request.urlopen(url, timeout=5) as r:
                body = json.load(r)
        except OSError:
            return None  # not up yet
        self.assertEqual(body["status"], "success", body)
        return body["data"]["result"]

    def promtool(self, text):
        r = subprocess.run([PROMTOOL, "check", "metrics"], input=text, text=True,
                           capture_output=True, timeout=60)
        self.assertEqual((r.returncode, r.stdout, r.stderr), (0, "", ""), text)

    def test_textfile_exporter_prometheus(self):
        prom_path = os.path.join(METRICS_DIR, "rocmmemd.prom")
        d = self.start_daemon(prom_path)
        # A client with a name to escape holds a lease; its connection starts the daemon.
        c = RawClient(self.sock, timeout=20)
        self.addCleanup(c.close)
        try:
            c.hello(ODD_NAME)
            c.lease(4 * MiB)
        except AssertionError as e:
            raise AssertionError(f"{e}\n{d!r}") from None
        self.assertTrue(d.running(), d)
        uid = pwd.getpwnam("rocmmemd").pw_uid
        with open(f"/proc/{d.pid}/status") as f:
            self.assertRegex(f.read(), rf"\nUid:\s+{uid}\s", "rocmmemd runs as its user")

        # The textfile, in the directory the unit lets it write, readable by the group.
        def written():
            try:
                with open(prom_path) as f:
                    text = f.read()
            except FileNotFoundError:
                return None
            return text if "rocmmemd_device_leased_bytes" in text and \
                re.search(r'^rocmmemd_device_leased_bytes\{.*\} 4194304$', text, re.M) else None

        text = poll_until(written, timeout=20, what=f"{prom_path} with the lease in it")
        self.promtool(text)
        st = os.stat(prom_path)
        import grp
        self.assertEqual((st.st_uid, st.st_gid, oct(st.st_mode & 0o777)),
                         (uid, grp.getgrnam("rocmmem-metrics").gr_gid, oct(0o644)))
        self.assertNotIn("Could not", d.stderr(), d)

        # The exporter, through a real HTTP client.
        port = free_port()
        e = self.start_exporter(port)
        poll_until(lambda: "Listening on" in e.stderr() or not e.running(), timeout=10,
                   what="systemd-socket-activate to listen")
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=20) as r:
            self.assertEqual(r.status, 200)
            self.assertEqual(r.headers["Content-Type"],
                             "text/plain; version=0.0.4; charset=utf-8")
            body = r.read().decode()
        self.promtool(body)
        self.assertRegex(body, r"(?m)^rocmmemd_up 1$")
        escaped = ODD_NAME.replace("\\", "\\\\").replace('"', '\\"')
        self.assertIn(f'rocmmemd_client_leased_bytes{{name="{escaped}"}} 4194304\n', body)
        self.assertNotIn('name="rocmmem-exporter"', body, "its own connection is left out")
        exporter_uid = pwd.getpwnam("rocmmem-exporter").pw_uid
        # systemd-socket-activate execs the service in its own place: e.pid is the exporter.
        with open(f"/proc/{e.pid}/status") as f:
            self.assertRegex(f.read(), rf"\nUid:\s+{exporter_uid}\s")
        with self.assertRaises(urllib.error.HTTPError) as cm:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/nothing", timeout=20)
        self.assertEqual(cm.exception.code, 404)

        # Prometheus scrapes it; its HTTP API gives the series back.
        p, base = self.start_prometheus(f"127.0.0.1:{port}")

        def scraped():
            if not p.running():
                raise AssertionError(f"prometheus exited: {p!r}")
            return self.query(base, 'rocmmemd_client_leased_bytes{job="rocmmemd"}')

        series = poll_until(scraped, timeout=90, interval=0.5, what="the series in Prometheus")
        self.assertEqual([(s["metric"]["name"], s["value"][1]) for s in series],
                         [(ODD_NAME, str(4 * MiB))])
        up = self.query(base, 'rocmmemd_up{job="rocmmemd"}')
        self.assertEqual([s["value"][1] for s in up], ["1"])
        budget = self.query(base, 'rocmmemd_device_budget_bytes{job="rocmmemd"}')
        self.assertEqual([s["value"][1] for s in budget], [str(64 * MiB)])

        # A clean stop removes the file (node_exporter serves nothing stale).
        c.close()
        d.signal(15)
        self.assertEqual(d.wait(20), 0, d)
        self.assertFalse(os.path.exists(prom_path))

    def test_exporter_without_daemon(self):
        """No daemon behind the socket: 200 with rocmmemd_up 0 and why, nothing else of it."""
        self.sock = os.path.join(self.dir, "absent.sock")
        port = free_port()
        e = self.start_exporter(port)
        poll_until(lambda: "Listening on" in e.stderr() or not e.running(), timeout=10,
                   what="systemd-socket-activate to listen")
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as r:
            body = r.read().decode()
        self.promtool(body)
        self.assertRegex(body, r"(?m)^rocmmemd_up 0$")
        self.assertRegex(body, r"(?m)^# rocmmemd could not be asked: .*absent\.sock")
        self.assertNotIn("rocmmemd_device_", body)


if __name__ == "__main__":
    unittest.main()
