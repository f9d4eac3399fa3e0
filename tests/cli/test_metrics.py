# SPDX-License-Identifier: MIT
"""Prometheus metrics: rocmmemctl metrics, rocmmemd --metrics-textfile, promtool and a real
node_exporter serving the textfile, and metrics requests sent as raw protocol."""
import os
import re
import shutil
import signal
import socket
import stat
import subprocess
import time
import unittest
import urllib.request

from daemon import BUDGET, MiB, Background, CliTestCase, clean_env, poll_until

PROMTOOL = shutil.which("promtool")
NODE_EXPORTER = shutil.which("prometheus-node-exporter") or shutil.which("node_exporter")
MISSING = "not installed (scripts/setup.sh installs Debian's {} package)"

SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\[\\"n])*)"')
# The last family the daemon writes (one sample): a file that has its line is whole.
LAST_FAMILY = "rocmmemd_client_series_omitted"


def unescape(value):
    return re.sub(r'\\(.)', lambda m: "\n" if m.group(1) == "n" else m.group(1), value)


class Metrics:
    """Parsed exposition text: families {name: (type, help)} and samples [(name, labels, v)].
    Parsing is strict about what rocmmemd writes: HELP then TYPE before each family's samples,
    each family once, its samples together, no timestamps, a newline at the end."""

    def __init__(self, text):
        if not text.endswith("\n"):
            raise AssertionError(f"metrics text does not end with a newline: {text[-200:]!r}")
        self.text = text
        self.families = {}
        self.samples = []
        current = None
        help_text = None
        for n, line in enumerate(text.splitlines(), 1):
            where = f"line {n}: {line!r}"
            if line.startswith("# HELP "):
                name, _, help_text = line[7:].partition(" ")
                if name in self.families:
                    raise AssertionError(f"family {name} appears twice ({where})")
                if not help_text:
                    raise AssertionError(f"empty HELP ({where})")
                current = ("help", name)
            elif line.startswith("# TYPE "):
                name, _, kind = line[7:].partition(" ")
                if current != ("help", name):
                    raise AssertionError(f"TYPE not right after its HELP ({where})")
                self.families[name] = (kind, help_text)
                current = ("family", name)
            else:
                m = SAMPLE.match(line)
                if not m:
                    raise AssertionError(f"not a sample ({where})")
                name, labels, value = m.groups()
                if current != ("family", name):
                    raise AssertionError(f"sample outside its family ({where})")
                parsed = {}
                if labels:
                    pos = 0
                    for lm in LABEL.finditer(labels):
                        if lm.start() != pos:
                            raise AssertionError(f"bad labels ({where})")
                        parsed[lm.group(1)] = unescape(lm.group(2))
                        pos = lm.end() + 1
                    if pos != len(labels) + 1:
                        raise AssertionError(f"bad labels ({where})")
                self.samples.append((name, parsed, float(value)))

    def values(self, metric, /, **labels):
        return [v for n, l, v in self.samples
                if n == metric and all(l.get(k) == str(w) for k, w in labels.items())]

    def get(self, metric, /, **labels):
        found = self.values(metric, **labels)
        if len(found) != 1:
            raise AssertionError(f"{len(found)} samples of {metric}{labels}, expected 1:\n"
                                 f"{self.text}")
        return found[0]

    def dev(self, name, device=0):
        return self.get(f"rocmmemd_device_{name}", device=device)


class MetricsCase(CliTestCase):
    def metrics(self, sock=None):
        r = self.ctl("metrics", sock=sock or True)
        self.assertEqual(r.rc, 0, r)
        self.assertEqual(r.stderr, "", r)
        return Metrics(r.stdout)

    def promtool(self, text):
        """promtool check metrics: exit 0 and not one problem printed."""
        if not PROMTOOL:
            self.skipTest("promtool " + MISSING.format("prometheus"))
        r = subprocess.run([PROMTOOL, "check", "metrics"], input=text, capture_output=True,
                           text=True, timeout=60, env=clean_env())
        self.assertEqual((r.returncode, r.stdout, r.stderr), (0, "", ""),
                         f"promtool check metrics found problems:\n--- text ---\n{text}")

    def check_conventions(self, m):
        """Prometheus' naming conventions, and no label that identifies a process or lease."""
        self.assertIn("rocmmemd_build_info", m.families)
        for name, (kind, help_text) in m.families.items():
            with self.subTest(family=name):
                self.assertTrue(name.startswith("rocmmemd_"), name)
                self.assertIn(kind, ("gauge", "counter"))
                self.assertEqual(kind == "counter", name.endswith("_total"), name)
                self.assertNotRegex(name, r"_(percent|milliseconds|ms|kb|mb|mib|bytes_bytes)\b")
                self.assertTrue(help_text.endswith(")") or help_text.endswith("."), help_text)
        for name, labels, value in m.samples:
            # Only the reconciled books name a client process, a bounded number of them.
            ids = {"lease", "lease_id", "client", "client_id", "owner_pid"}
            if not name.startswith("rocmmemd_client_") or not name.endswith("_bytes"):
                ids.add("pid")
            self.assertFalse(ids & set(labels), (name, labels))
            if name.startswith("rocmmemd_device_"):
                self.assertIn("device", labels, name)
                self.assertIn("name", labels, name)


def model_host_bin():
    path = os.environ.get("ROCMMEM_MODEL_HOST")
    if not path or not os.access(path, os.X_OK):
        raise RuntimeError("$ROCMMEM_MODEL_HOST is not set to the built model_host: run these "
                           "tests through ctest -L cli")
    return path


class Command(MetricsCase):
    def test_idle(self):
        self.start_daemon()
        m = self.metrics()
        self.promtool(m.text)
        self.check_conventions(m)
        st = self.status()
        dev = st["devices"][0]
        self.assertEqual(m.get("rocmmemd_build_info", version=st["daemon"]["version"],
                               backend="host"), 1)
        self.assertEqual(m.dev("budget_bytes"), BUDGET)
        self.assertEqual(m.dev("total_bytes"), dev["total_bytes"])
        self.assertEqual(m.dev("headroom_bytes"), dev["headroom_bytes"])
        for name in ("leased_bytes", "reserved_bytes", "leases", "waiters", "evictable_bytes",
                     "oldest_wait_seconds", "lost"):
            self.assertEqual(m.dev(name), 0, name)
        for name in ("free_bytes", "largest_grantable_bytes", "largest_with_eviction_bytes"):
            self.assertEqual(m.dev(name), BUDGET, name)
        self.assertEqual(m.get("rocmmemd_device_info", device=0, name="host memory",
                               sharing="memfd"), 1)
        for state in ("idle", "in_use", "evicting", "evicted", "waiting"):
            self.assertEqual(m.get("rocmmemd_device_models", device=0, state=state), 0)
        self.assertEqual(len(m.values("rocmmemd_device_total_bytes")), 1, "one device")
        # The host backend samples no runtime and no hardware: those families are left out.
        for name in ("runtime_free_bytes", "external_bytes", "temperature_celsius",
                     "power_watts", "busy_ratio"):
            self.assertNotIn("rocmmemd_device_" + name, m.families)
        # This rocmmemctl was the first to say hello; it is connected while it asks.
        self.assertEqual(m.get("rocmmemd_connections_total"), 1)
        self.assertGreaterEqual(m.get("rocmmemd_clients"), 1)
        for name in ("grants", "denials", "timeouts", "evictions", "revocations", "trims",
                     "trimmed_bytes", "releases", "reclaimed", "failures"):
            self.assertEqual(m.get(f"rocmmemd_{name}_total"), 0, name)
        started = m.get("rocmmemd_start_time_seconds")
        self.assertLessEqual(started, time.time() + 1)
        self.assertGreater(started, time.time() - 3600)

    def test_busy(self):
        self.start_daemon()
        before = self.metrics()
        a = self.holder("8M", "--hold", "120", "--tag", "a")
        b = self.holder("4M", "--hold", "120", "--tag", "b")
        for h in (a, b):
            h.wait_stdout(r"lease \d+")
        host = self.background([model_host_bin(), self.sock, "flux:transformer:10M"], "host")
        host.wait_stdout(r"^registered flux \d+$")
        # Refusals: larger than the budget, then one that does not fit now (timeout 0), then
        # one whose wait times out.
        for args, rc in ((("100M",), 2), (("60M",), 2), (("60M", "--timeout", "0.2"), 2)):
            r = self.ctl("lease", *args)
            self.assertEqual(r.rc, rc, r)
        m = self.metrics()
        self.promtool(m.text)
        self.check_conventions(m)

        def grew(name):
            return m.get(name) - before.get(name)

        self.assertEqual(m.dev("leased_bytes"), 12 * MiB)
        self.assertEqual(m.dev("reserved_bytes"), 10 * MiB)
        self.assertEqual(m.dev("leases"), 2)
        self.assertEqual(m.dev("free_bytes"), BUDGET - 22 * MiB)
        self.assertEqual(m.dev("largest_grantable_bytes"), BUDGET - 22 * MiB)
        self.assertEqual(m.dev("evictable_bytes"), 10 * MiB)
        self.assertEqual(m.dev("largest_with_eviction_bytes"), BUDGET - 12 * MiB)
        self.assertEqual(m.get("rocmmemd_device_models", device=0, state="idle"), 1)
        self.assertEqual(m.get("rocmmemd_device_models", device=0, state="in_use"), 0)
        self.assertEqual(grew("rocmmemd_grants_total"), 2)
        self.assertEqual(grew("rocmmemd_denials_total"), 2)
        self.assertEqual(grew("rocmmemd_timeouts_total"), 1)
        self.assertGreaterEqual(m.get("rocmmemd_clients"), 4)  # two holders, the host, us
        self.assertEqual(m.get("rocmmemd_connections_total"), 8)

        # One holder lets go, the other is killed: a release and a reclaim.
        a.signal(signal.SIGTERM)
        a.wait()
        b.proc.kill()
        b.wait()
        poll_until(lambda: self.metrics().dev("leases") == 0, what="the leases to go")
        m = self.metrics()
        self.assertEqual(m.dev("leased_bytes"), 0)
        self.assertEqual(m.get("rocmmemd_releases_total"), 1)
        self.assertEqual(m.get("rocmmemd_reclaimed_total"), 1)
        self.promtool(m.text)

    def test_waiting(self):
        """A queued request shows as a waiter whose wait grows; it is the oldest."""
        self.start_daemon()
        holder = self.holder("60M", "--hold", "120")
        holder.wait_stdout(r"lease \d+")
        waiter = self.holder("32M", "--timeout", "60", "--hold", "120", name="waiter")
        m = poll_until(lambda: (lambda x: x if x.dev("waiters") == 1 else None)(self.metrics()),
                       what="a waiter")
        self.promtool(m.text)
        m2 = poll_until(lambda: (lambda x: x if x.dev("oldest_wait_seconds") > 0 else None)(
            self.metrics()), what="the wait to grow")
        self.assertEqual(m2.dev("waiters"), 1)
        holder.signal(signal.SIGTERM)
        waiter.wait_stdout(r"lease \d+", timeout=10)
        m = self.metrics()
        self.assertEqual((m.dev("waiters"), m.dev("oldest_wait_seconds")), (0, 0))
        self.assertEqual(m.dev("leased_bytes"), 32 * MiB)

    def test_usage(self):
        self.start_daemon()
        for args in (("metrics", "extra"), ("metrics", "--bogus"), ("metrics", "--socket"),
                     ("--json", "metrics")):
            with self.subTest(args=args):
                self.assert_no_output_but_error(self.ctl(*args), 1)
        r = self.ctl("--socket", self.sock, "metrics", sock=False)
        self.assertEqual(r.rc, 0, r)
        r = self.ctl("metrics", "--socket", self.sock, sock=os.path.join(self.dir, "nowhere"))
        self.assertEqual(r.rc, 0, r)
        r = self.ctl("help")
        self.assertRegex(r.stdout, r"(?m)^  metrics$")
        r = self.ctl("metrics", sock=os.path.join(self.dir, "nowhere.sock"))
        self.assert_no_output_but_error(r, 3)


# --- raw protocol ----------------------------------------------------------------------------

def varint(n):
    out = bytearray()
    n &= (1 << 64) - 1
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def field(num, value):
    if isinstance(value, int):
        return varint(num << 3) + varint(value)
    return varint(num << 3 | 2) + varint(len(value)) + value


def decode(buf):
    """Protobuf fields of one message: {number: [int or bytes, ...]}."""
    out, i = {}, 0

    def read_varint():
        nonlocal i
        shift = value = 0
        while True:
            b = buf[i]
            i += 1
            value |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                return value

    while i < len(buf):
        key = read_varint()
        num, kind = key >> 3, key & 7
        if kind == 0:
            value = read_varint()
        elif kind == 2:
            n = read_varint()
            value = buf[i:i + n]
            i += n
        elif kind in (1, 5):
            n = 8 if kind == 1 else 4
            value = buf[i:i + n]
            i += n
        else:
            raise AssertionError(f"unexpected wire type {kind} in {buf!r}")
        out.setdefault(num, []).append(value)
    return out


def hello(request_id=1):
    return field(1, request_id) + field(2, field(1, 1) + field(2, b"metrics-test"))


def metrics_request(request_id, body=b""):
    return field(1, request_id) + field(16, body)


class Raw(MetricsCase):
    """Metrics requests as bytes on the socket: out of order, malformed, pipelined."""

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        s.settimeout(10)
        s.connect(self.sock)
        self.addCleanup(s.close)
        return s

    def reply(self, s):
        """The next reply: (id, error, message, metrics text or None)."""
        msg = decode(s.recv(1 << 17))
        self.assertIn(1, msg, "a reply, not an event")
        r = decode(msg[1][0])
        error = r.get(2, [0])[0]
        if error >= 1 << 63:
            error -= 1 << 64
        text = decode(r[17][0]).get(1, [b""])[0].decode() if 17 in r else None
        return r.get(1, [0])[0], error, r.get(3, [b""])[0].decode(), text

    def greeted(self):
        s = self.connect()
        s.send(hello())
        self.assertEqual(self.reply(s)[:2], (1, 0))
        return s

    def test_before_hello(self):
        self.start_daemon()
        s = self.connect()
        s.send(metrics_request(7))
        rid, error, message, text = self.reply(s)
        self.assertEqual((rid, text), (7, None))
        self.assertLess(error, 0)
        self.assertEqual(s.recv(1 << 17), b"", "disconnected")
        self.metrics()  # still serving

    def test_pipelined(self):
        """Many requests sent before reading any: each answered, in order, whole."""
        self.start_daemon()
        s = self.greeted()
        for i in range(2, 66):
            s.send(metrics_request(i))
        for i in range(2, 66):
            rid, error, message, text = self.reply(s)
            self.assertEqual((rid, error), (i, 0), message)
            Metrics(text).get("rocmmemd_build_info", backend="host")
        self.promtool(text)

    def test_unknown_and_malformed_bodies(self):
        self.start_daemon()
        s = self.greeted()
        # Fields a newer client might add are ignored.
        s.send(metrics_request(2, field(1, 5) + field(9, b"future")))
        rid, error, message, text = self.reply(s)
        self.assertEqual((rid, error), (2, 0), message)
        Metrics(text)
        # A body whose length runs past the packet: undecodable, so a protocol error.
        s.send(field(1, 3) + varint(16 << 3 | 2) + varint(50) + b"\x08")
        rid, error, message, text = self.reply(s)
        self.assertLess(error, 0)
        self.assertIsNone(text)
        self.assertEqual(s.recv(1 << 17), b"", "disconnected")
        # A request without an id, on a fresh connection.
        s = self.greeted()
        s.send(field(16, b""))
        self.assertLess(self.reply(s)[1], 0)
        self.assertEqual(s.recv(1 << 17), b"", "disconnected")
        m = self.metrics()
        self.assertEqual(m.dev("leases"), 0)

    def test_reader_that_never_reads(self):
        """A client that floods requests and never reads stalls itself alone."""
        self.start_daemon()
        s = self.greeted()
        s.setblocking(False)
        sent = 0
        try:
            for i in range(2, 2000):
                s.send(metrics_request(i))
                sent += 1
        except (BlockingIOError, BrokenPipeError, ConnectionResetError):
            pass
        self.assertGreater(sent, 0)
        self.metrics()


# --- the textfile ----------------------------------------------------------------------------

class Textfile(MetricsCase):
    def setUp(self):
        super().setUp()
        self.prom_dir = os.path.join(self.dir, "textfile")
        os.mkdir(self.prom_dir)
        self.prom = os.path.join(self.prom_dir, "rocmmemd.prom")

    def start(self, interval="1", path=None):
        return self.start_daemon(extra=["--metrics-textfile", path or self.prom,
                                        "--metrics-interval", interval])

    def read_prom(self, path=None):
        try:
            with open(path or self.prom, encoding="utf-8") as f:
                return os.fstat(f.fileno()).st_ino, f.read()
        except FileNotFoundError:
            return None

    def wait_prom(self, pred=lambda m: True, what="the metrics file", path=None):
        def check():
            got = self.read_prom(path)
            if got:
                m = Metrics(got[1])
                if pred(m):
                    return m
            return None

        return poll_until(check, timeout=15, what=what)

    def test_bad_options(self):
        """Bad values: exit 2 at once; nothing is created."""
        cases = [
            ("--metrics-textfile", os.path.join(self.prom_dir, "rocmmemd.txt")),
            ("--metrics-textfile", os.path.join(self.prom_dir, "rocmmemd.prom.tmp")),
            ("--metrics-textfile", os.path.join(self.prom_dir, ".prom")),
            ("--metrics-textfile", self.prom_dir + "/"),
            ("--metrics-textfile", ""),
            ("--metrics-textfile",),
            ("--metrics-textfile", self.prom, "--metrics-interval", "0"),
            ("--metrics-textfile", self.prom, "--metrics-interval", "0.5"),
            ("--metrics-textfile", self.prom, "--metrics-interval", "3601"),
            ("--metrics-textfile", self.prom, "--metrics-interval", "-1"),
            ("--metrics-textfile", self.prom, "--metrics-interval", "soon"),
            ("--metrics-textfile", self.prom, "--metrics-interval", ""),
            ("--metrics-interval", "5"),
        ]
        for args in cases:
            with self.subTest(args=args):
                r = self.rocmmemd("--socket", self.sock, "--backend", "host", "--budget",
                                  "64M", *args)
                self.assertEqual(r.rc, 2, r)
                self.assertRegex(r.stderr, r"^rocmmemd: .*(metrics|needs a value)", r)
                self.assertEqual(r.stdout, "", r)
        self.assertEqual(os.listdir(self.prom_dir), [])
        self.assertFalse(os.path.exists(self.sock))

    def test_unusable_path(self):
        """A path that names a directory can never be written: exit 2 (a configuration
        error: systemd does not restart it), said why, nothing created."""
        os.mkdir(os.path.join(self.prom_dir, "dir.prom"))
        path = os.path.join(self.prom_dir, "dir.prom")
        r = self.rocmmemd("--socket", self.sock, "--backend", "host", "--budget", "64M",
                          "--metrics-textfile", path)
        self.assertEqual(r.rc, 2, r)
        self.assertRegex(r.stderr, rf"Could not write the metrics to {re.escape(path)}: "
                                   r"it is a directory", r)
        self.assertFalse(os.path.exists(self.sock))
        self.assertEqual(os.listdir(self.prom_dir), ["dir.prom"])

    def test_unusable_directory_serves_anyway(self):
        """A directory that is missing, not a directory or not writable at start never stops
        the daemon (a service would be restarted over and over): it says why, serves, and
        writes the file once the directory is there."""
        plain = os.path.join(self.dir, "plain")
        open(plain, "w").close()
        cases = [
            (os.path.join(plain, "rocmmemd.prom"), r"not a directory"),
            (os.path.join(self.dir, "later", "rocmmemd.prom"), r"does not exist"),
        ]
        if os.geteuid() != 0:  # root writes anywhere: a read-only directory stops only others
            ro = os.path.join(self.dir, "ro")
            os.mkdir(ro, 0o555)
            cases.insert(0, (os.path.join(ro, "rocmmemd.prom"), r"could not create a file"))
        for n, (path, why) in enumerate(cases):
            with self.subTest(path=path):
                sock = os.path.join(self.dir, f"d{n}.sock")
                d = self.start_daemon(sock=sock, extra=["--metrics-textfile", path,
                                                        "--metrics-interval", "1"])
                self.assertRegex(d.log(), rf"Could not write the metrics to "
                                          rf"{re.escape(path)}: .*{why}.*serving anyway")
                self.assertEqual(self.ctl("status", sock=sock).rc, 0)
        # The last case's directory appears: the next interval writes the file.
        os.mkdir(os.path.dirname(path))
        m = self.wait_prom(path=path, what="the file once its directory exists")
        self.promtool(m.text)
        self.assertTrue(d.running(), d.log())

    def test_written_replaced_removed(self):
        """Written at start, rewritten every interval through a rename (a reader never sees
        part of a file), readable by others, and removed at a clean stop."""
        self.start()
        m = self.wait_prom()
        self.promtool(m.text)
        self.check_conventions(m)
        self.assertEqual(m.dev("budget_bytes"), BUDGET)
        self.assertEqual(stat.S_IMODE(os.stat(self.prom).st_mode), 0o644)
        h = self.holder("6M", "--hold", "120")
        h.wait_stdout(r"lease \d+")
        m = self.wait_prom(lambda m: m.dev("leased_bytes") == 6 * MiB, "the lease in the file")
        self.promtool(m.text)
        # Read it over and over while it is replaced: every read is one whole rendering.
        # A replaced file is a new inode (its number may be reused later: count changes).
        last, changes, reads = None, 0, 0
        deadline = time.monotonic() + 30
        while changes < 3 and time.monotonic() < deadline:
            ino, text = self.read_prom()
            reads += 1
            m = Metrics(text)  # whole: ends with a newline, every family complete
            self.assertEqual(len(m.values(LAST_FAMILY)), 1, text)
            self.assertEqual(m.dev("leased_bytes"), 6 * MiB)
            changes += last is not None and ino != last
            last = ino
            time.sleep(0.002)
        self.assertEqual(changes, 3, f"rewrites seen in {reads} reads")
        self.assertEqual(self.daemon.stop(), 0, self.daemon.log())
        self.assertEqual(os.listdir(self.prom_dir), [], "the file (and no temporary) is gone")
        self.assertIn("writing the metrics to", self.daemon.log())

    def test_write_errors_logged_once(self):
        """A directory that goes away: one warning, retried every interval, one line when the
        writes succeed again."""
        sub = os.path.join(self.prom_dir, "sub")
        os.mkdir(sub)
        path = os.path.join(sub, "rocmmemd.prom")
        self.start(path=path)
        self.wait_prom(path=path)
        os.rename(sub, sub + ".gone")  # at once, even while a write is in flight
        warning = re.compile(r"Could not update the metrics file .*: No such file")
        poll_until(lambda: warning.search(self.daemon.log()), timeout=15, what="the warning")
        # A write caught mid-way fails at its rename, the later ones creating the temporary:
        # two distinct errors at most, then silence while the attempts go on failing.
        warned = len(warning.findall(self.daemon.log()))
        self.assertLessEqual(warned, 2, self.daemon.log())
        time.sleep(2.5)  # more attempts fail meanwhile (fewer on a slow machine: still true)
        self.assertEqual(len(warning.findall(self.daemon.log())), warned, self.daemon.log())
        os.mkdir(sub)
        m = self.wait_prom(path=path, what="the file written again")
        self.promtool(m.text)
        log = self.daemon.log()
        self.assertEqual(len(warning.findall(log)), warned, log)
        self.assertEqual(log.count("is updated again"), 1, log)
        self.assertEqual(self.daemon.stop(), 0, self.daemon.log())
        self.assertEqual(os.listdir(sub), [])

    def test_node_exporter(self):
        """A real node_exporter on loopback serves the daemon's metrics from the textfile, and
        stops serving them once the daemon has stopped."""
        if not NODE_EXPORTER:
            self.skipTest("prometheus-node-exporter " + MISSING.format(
                "prometheus-node-exporter"))
        self.start()
        self.wait_prom()
        exporter, url = self.start_node_exporter()

        def scrape():
            with urllib.request.urlopen(url, timeout=10) as resp:
                return resp.read().decode()

        def served(pred):
            def check():
                if not exporter.running():
                    raise AssertionError(f"node_exporter exited: {exporter!r}")
                try:
                    text = scrape()
                except OSError:
                    return None
                ours = "".join(line + "\n" for line in text.splitlines()
                               if re.match(r"(# (HELP|TYPE) )?rocmmemd_", line))
                return text if ours and pred(Metrics(ours), text) else None
            return poll_until(check, timeout=20, what="node_exporter to serve the metrics")

        text = served(lambda m, t: m.dev("budget_bytes") == BUDGET)
        self.assertRegex(text, r"(?m)^node_textfile_scrape_error 0$")
        self.assertRegex(text, r'(?m)^rocmmemd_build_info\{backend="host",version="[^"]+"\} 1$')
        h = self.holder("10M", "--hold", "120")
        h.wait_stdout(r"lease \d+")
        text = served(lambda m, t: m.dev("leased_bytes") == 10 * MiB
                      and m.get("rocmmemd_grants_total") == 1)
        self.assertRegex(text, r"(?m)^node_textfile_scrape_error 0$")
        self.assertEqual(self.daemon.stop(), 0, self.daemon.log())

        def gone():
            return "rocmmemd_" not in scrape()
        poll_until(gone, timeout=20, what="node_exporter to stop serving rocmmemd_ metrics")

    def start_node_exporter(self):
        """Starts node_exporter on a free loopback port with only the textfile collector;
        it is stopped at cleanup whatever happens. Returns it and its metrics URL."""
        for attempt in range(5):
            probe = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
            probe.close()
            exporter = Background([NODE_EXPORTER, f"--web.listen-address=127.0.0.1:{port}",
                                   "--collector.disable-defaults", "--collector.textfile",
                                   f"--collector.textfile.directory={self.prom_dir}"],
                                  self.dir, f"node_exporter-{attempt}")
            self.addCleanup(self.stop_process, exporter)

            def up():
                if not exporter.running():
                    return "exited"
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    return "up"
                except OSError:
                    return None

            if poll_until(up, timeout=20, what="node_exporter to listen") == "up":
                return exporter, f"http://127.0.0.1:{port}/metrics"
            if "address already in use" not in exporter.stderr():
                raise AssertionError(f"node_exporter did not start: {exporter!r}")
        raise AssertionError("node_exporter found no free port")

    def stop_process(self, proc):
        if proc.running():
            proc.signal(signal.SIGTERM)
            try:
                proc.wait(10)
            except AssertionError:
                pass
        proc.kill()


if __name__ == "__main__":
    unittest.main()
