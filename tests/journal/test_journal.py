# SPDX-License-Identifier: MIT
"""rocmmemd's log under systemd: native journal entries with structured fields, read back from a
real systemd-journald with journalctl; and plain leveled lines on stderr otherwise.

The journal tests need root: this script re-runs itself inside `unshare` with private mount and
pid namespaces, mounts tmpfs on /run (and /var/log/journal), starts systemd-journald there and
runs the daemon as systemd would (stderr connected to the journal's stream, $JOURNAL_STREAM
naming it). The host's journal is never touched; when the namespace's first process ends, the
kernel kills whatever else still runs in it (journald, daemons, clients), even after a crash.

Exit status: 0 passed, 1 failed, 77 the journal tests skipped (what is missing is printed), the
plain-stderr tests having passed.
"""
import ctypes
import errno
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "cli"))
from daemon import (MiB, Background, CliTestCase, can_connect, clean_env,  # noqa: E402
                    poll_until, rocmmemd_bin)

SKIP = 77
INNER_ENV = "ROCMMEM_JOURNAL_NAMESPACE"
JOURNALD_PATHS = ("/lib/systemd/systemd-journald", "/usr/lib/systemd/systemd-journald")
JOURNAL_DIR = "/run/systemd/journal"
NATIVE_SOCKET = JOURNAL_DIR + "/socket"
STREAM_SOCKET = JOURNAL_DIR + "/stdout"
# Volatile, nothing forwarded: the namespace's journal lives and dies in its tmpfs.
JOURNALD_CONF = """[Journal]
Storage=volatile
ForwardToSyslog=no
ForwardToKMsg=no
ForwardToConsole=no
ForwardToWall=no
RateLimitBurst=0
"""
# Every field the daemon may add, besides MESSAGE, PRIORITY and SYSLOG_IDENTIFIER.
ROCMMEM_FIELDS = {"ROCMMEM_EVENT", "ROCMMEM_CLIENT_PID", "ROCMMEM_CLIENT_NAME",
                  "ROCMMEM_CLIENT_ID", "ROCMMEM_BYTES", "ROCMMEM_DEVICE", "ROCMMEM_LEASE_ID",
                  "ROCMMEM_MODEL_ID", "ROCMMEM_MODEL_NAME", "ROCMMEM_WAITED_MS", "ROCMMEM_ERRNO"}
OWN_FIELDS = {"MESSAGE", "PRIORITY", "SYSLOG_IDENTIFIER"} | ROCMMEM_FIELDS
# syslog priorities of the daemon's levels.
ERR, WARNING, INFO, DEBUG = "3", "4", "6", "7"
PLAIN_LINE = re.compile(r"^rocmmemd: (error|warn|info|debug): \S")
# Valid client-chosen text that looks like fields: it must stay one value.
TRICKY_NAME = "name=X FOO=bar ROCMMEM_BYTES=1 été ✓"
TRICKY_MODEL = "beta=1 ROCMMEM_CLIENT_PID=0 ü"


def _binary(var):
    path = os.environ.get(var)
    if not path or not os.access(path, os.X_OK):
        raise RuntimeError(f"${var} is not set to the built binary: run this test through "
                           f"ctest -L journal")
    return path


# --- without the journal -------------------------------------------------------------------


class PlainStderr(CliTestCase):
    """Not under journald: plain "rocmmemd: LEVEL: message" lines, no priority prefixes."""

    def check_plain(self, log):
        lines = log.splitlines()
        self.assertTrue(lines, "the daemon logged nothing")
        for line in lines:
            self.assertRegex(line, PLAIN_LINE, log)
        self.assertNotRegex(log, r"(?m)^<\d>", log)

    def activity(self):
        r = self.ctl("lease", "4M", "--hold", "0")
        self.assertEqual(r.rc, 0, r)
        r = self.ctl("lease", "128M")
        self.assertEqual(r.rc, 2, r)

    def test_plain_lines_without_journal_stream(self):
        d = self.start_daemon(env=clean_env(JOURNAL_STREAM=None))
        self.activity()
        self.assertEqual(d.stop(), 0, d.log())
        log = d.log()
        self.check_plain(log)
        self.assertRegex(log, r"(?m)^rocmmemd: debug: granted lease \d+ \(4 MiB on device 0")
        self.assertRegex(log, r"(?m)^rocmmemd: warn: requested 128 MiB on device 0")

    def test_default_level_leaves_routine_out(self):
        """At the default level (info) a client that connects, leases, releases and goes
        writes nothing; a refusal, an eviction and a revocation are written."""
        d = self.start_daemon(extra=["--log-level", "info", "--evict-deadline", "0.5"],
                              env=clean_env(JOURNAL_STREAM=None))
        quiet = [self.ctl("status"), self.ctl("--json", "status"),
                 self.ctl("lease", "4M", "--hold", "0", "--tag", "routine")]
        for r in quiet:
            self.assertEqual(r.rc, 0, r)
        model_host = _binary("ROCMMEM_MODEL_HOST")
        mute = self.background([model_host, self.sock, "--no-ack", "big:vae:40M"], "mute")
        mute.wait_stdout(r"^registered big \d+$")
        taker = self.holder("40M", "--timeout", "20", name="taker")
        mute.wait_stdout(r"^revoked big", timeout=20)
        taker.wait_stdout(r"^lease \d+:", timeout=20)
        refused = self.ctl("lease", "128M")
        self.assertEqual(refused.rc, 2, refused)
        for p in (taker, mute):
            p.signal(signal.SIGTERM)
            p.wait()
        self.assertEqual(d.stop(), 0, d.log())
        log = d.log()
        self.check_plain(log)
        self.assertNotRegex(log, r"(?m)^rocmmemd: debug:", "nothing below the level")
        for r in quiet:
            self.assertNotIn(f"pid {r.pid} ", log, "a routine client is not in the log")
        self.assertNotRegex(log, r"granted lease|released lease|' (dis)?connected|"
                                 r"registered model")
        self.assertRegex(log, r"(?m)^rocmmemd: warn: requested 128 MiB on device 0")
        self.assertRegex(log, rf"(?m)^rocmmemd: info: asking pid {mute.pid} .* to unload model "
                              r"\d+ 'big'")
        self.assertRegex(log, rf"(?m)^rocmmemd: warn: revoked model \d+ 'big' .* of pid "
                              rf"{mute.pid}")

    def test_plain_lines_when_journal_stream_names_another_file(self):
        # systemd's variable inherited by a daemon whose stderr was redirected elsewhere.
        st = os.stat("/dev/null")
        d = self.start_daemon(env=clean_env(JOURNAL_STREAM=f"{st.st_dev}:{st.st_ino}"))
        self.activity()
        self.assertEqual(d.stop(), 0, d.log())
        self.check_plain(d.log())


# --- under a real journald -------------------------------------------------------------------


def journalctl(*matches):
    """Every entry of the namespace's journal matching FIELD=VALUE matches, as dicts."""
    r = subprocess.run(["journalctl", "-o", "json", "--all", "--no-pager", "-q", *matches],
                       stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=30)
    if r.returncode != 0:
        raise AssertionError(f"journalctl failed ({r.returncode}): {r.stderr}")
    return [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]


class JournalDaemon(Background):
    """rocmmemd started as systemd starts a service: stderr is the journal's stream."""

    def __init__(self, workdir, sock, extra=(), level_prefix=True, name="rocmmemd"):
        self.sock = sock
        # systemd-cat connects stdout and stderr to the journal and execs the command (so the
        # daemon keeps this pid), but does not set JOURNAL_STREAM as systemd does: sh does.
        script = ('export JOURNAL_STREAM="$(stat -L -c %d:%i /proc/self/fd/2)" && '
                  'exec "$@"')
        args = ["systemd-cat", "-t", "rocmmemd", f"--level-prefix={str(level_prefix).lower()}",
                "sh", "-c", script, "sh", rocmmemd_bin(), "--socket", sock, "--backend", "host",
                "--log-level", "debug", *extra]
        super().__init__(args, workdir, name, env=clean_env(JOURNAL_STREAM=None))

    def wait_ready(self, timeout=10.0):
        def ready():
            if not self.running():
                raise AssertionError(f"rocmmemd exited before serving {self.sock}: {self!r}")
            return can_connect(self.sock)

        poll_until(ready, timeout, what=f"rocmmemd to accept connections on {self.sock}")
        return self

    def stop(self, sig=signal.SIGTERM, timeout=10.0):
        """Sends sig and returns the exit status."""
        if self.running():
            self.signal(sig)
        return self.wait(timeout)


class JournalTestCase(CliTestCase):
    def start_journal_daemon(self, budget="64M", extra=(), level_prefix=False):
        """Starts the daemon under the journal; cleanup kills it if a test left it running."""
        d = JournalDaemon(self.dir, self.sock, ["--budget", budget, *extra],
                          level_prefix=level_prefix)
        self.addCleanup(d.kill)
        d.wait_ready()
        self.daemon = d
        return d

    def stop_and_collect(self, d):
        """Stops d (it must exit 0) and returns its entries, in order, once all have arrived:
        "stopped" is the last line it logs."""
        self.assertEqual(d.stop(signal.SIGTERM), 0, d)

        def arrived():
            found = journalctl(f"_PID={d.pid}")
            return found if any(e.get("MESSAGE") == "stopped" for e in found) else None

        return poll_until(arrived, 20.0, what=f"the daemon's 'stopped' entry (pid {d.pid})")

    def event(self, entries, name, **fields):
        """The one entry of event name whose fields have the given values."""
        found = [e for e in entries if e.get("ROCMMEM_EVENT") == name and
                 all(e.get(k) == v for k, v in fields.items())]
        self.assertEqual(len(found), 1, f"{name} {fields}: found {found} among\n" +
                         "\n".join(json.dumps(e) for e in entries))
        return found[0]

    def check_native(self, entries):
        """Every entry was sent natively, with only the daemon's own fields, each once."""
        for e in entries:
            self.assertEqual(e.get("_TRANSPORT"), "journal", e)
            self.assertEqual(e.get("SYSLOG_IDENTIFIER"), "rocmmemd", e)
            self.assertIn(e.get("PRIORITY"), (ERR, WARNING, INFO, DEBUG), e)
            self.assertNotRegex(e["MESSAGE"], r"^<\d>", e)
            extra = {k for k in e if not k.startswith("_")} - OWN_FIELDS
            self.assertEqual(extra, set(), f"fields the daemon never adds: {e}")
            for key in OWN_FIELDS & set(e):
                self.assertIsInstance(e[key], str, f"{key} is not one text value: {e}")


class Journal(JournalTestCase):
    def test_lease_denial_and_trim_entries(self):
        d = self.start_journal_daemon()
        granted = self.ctl("lease", "4M", "--hold", "0", "--tag", "t")
        self.assertEqual(granted.rc, 0, granted)
        too_big = self.ctl("lease", "128M")
        self.assertEqual(too_big.rc, 2, too_big)
        full = self.holder("64M")
        full.wait_stdout(r"^lease \d+:")
        no_room = self.ctl("lease", "2M", "--timeout", "0")
        self.assertEqual(no_room.rc, 2, no_room)
        full.signal(signal.SIGTERM)
        self.assertEqual(full.wait(), 0, full)
        trim = self.ctl("trim")
        self.assertEqual(trim.rc, 0, trim)
        entries = self.stop_and_collect(d)
        self.check_native(entries)

        pid = str(granted.pid)
        # Routine work is debug: a polling client does not fill the journal.
        g = self.event(entries, "lease_granted", ROCMMEM_CLIENT_PID=pid)
        self.assertEqual(g["PRIORITY"], DEBUG, g)
        self.assertEqual(g["ROCMMEM_BYTES"], str(4 * MiB), g)
        self.assertEqual(g["ROCMMEM_DEVICE"], "0", g)
        self.assertEqual(g["ROCMMEM_CLIENT_NAME"], "rocmmemctl", g)
        self.assertRegex(g["ROCMMEM_LEASE_ID"], r"^[1-9]\d*$", g)
        self.assertRegex(g["MESSAGE"], r"^granted lease \d+ \(4 MiB on device 0", g)
        r = self.event(entries, "lease_released", ROCMMEM_CLIENT_PID=pid)
        self.assertEqual(r["PRIORITY"], DEBUG, r)
        self.assertEqual(r["ROCMMEM_LEASE_ID"], g["ROCMMEM_LEASE_ID"], r)
        self.assertEqual(r["ROCMMEM_BYTES"], str(4 * MiB), r)
        for name in ("client_connected", "client_disconnected"):
            c = self.event(entries, name, ROCMMEM_CLIENT_PID=pid)
            self.assertEqual(c["PRIORITY"], DEBUG, c)
            self.assertEqual(c["ROCMMEM_CLIENT_ID"], g["ROCMMEM_CLIENT_ID"], c)

        big = self.event(entries, "lease_denied", ROCMMEM_CLIENT_PID=str(too_big.pid))
        self.assertEqual(big["PRIORITY"], WARNING, big)
        self.assertEqual(big["ROCMMEM_BYTES"], str(128 * MiB), big)
        self.assertEqual(big["ROCMMEM_ERRNO"], str(errno.E2BIG), big)
        self.assertEqual(big["ROCMMEM_DEVICE"], "0", big)
        self.assertIn("128 MiB", big["MESSAGE"])
        self.assertNotIn("ROCMMEM_LEASE_ID", big)
        full_deny = self.event(entries, "lease_denied", ROCMMEM_CLIENT_PID=str(no_room.pid))
        self.assertEqual(full_deny["PRIORITY"], WARNING, full_deny)
        self.assertEqual(full_deny["ROCMMEM_BYTES"], str(2 * MiB), full_deny)
        self.assertEqual(full_deny["ROCMMEM_ERRNO"], str(errno.ENOMEM), full_deny)
        held = self.event(entries, "lease_granted", ROCMMEM_CLIENT_PID=str(full.pid))
        self.assertEqual(held["ROCMMEM_BYTES"], str(64 * MiB), held)

        t = self.event(entries, "trim_done", ROCMMEM_CLIENT_PID=str(trim.pid))
        # A trim that returned nothing is a debug line, one that did is info.
        self.assertEqual(t["PRIORITY"], INFO if "ROCMMEM_BYTES" in t else DEBUG, t)
        self.assertEqual(t["ROCMMEM_DEVICE"], "0", t)

        # Lines without an event are entries too, at their level.
        self.assertTrue(any(e["MESSAGE"].startswith("rocmmemd ") and "listening on" in
                            e["MESSAGE"] and e["PRIORITY"] == INFO for e in entries), entries)
        self.assertTrue(any(e["PRIORITY"] == DEBUG and "ROCMMEM_EVENT" not in e
                            for e in entries), "no debug line")

    def test_client_name_cannot_add_fields(self):
        d = self.start_journal_daemon()
        r = run_named_client(self.sock, TRICKY_NAME, "2M")
        self.assertEqual(r.returncode, 0, r)
        entries = self.stop_and_collect(d)
        self.check_native(entries)
        mine = [e for e in entries if e.get("ROCMMEM_CLIENT_PID") == str(r.pid)]
        self.assertEqual({e["ROCMMEM_EVENT"] for e in mine},
                         {"client_connected", "lease_granted", "lease_released",
                          "client_disconnected"}, mine)
        for e in mine:
            self.assertEqual(e["ROCMMEM_CLIENT_NAME"], TRICKY_NAME, e)
            self.assertNotIn("FOO", e)
            self.assertNotIn("NAME", e)
        g = self.event(entries, "lease_granted", ROCMMEM_CLIENT_PID=str(r.pid))
        self.assertEqual(g["ROCMMEM_BYTES"], str(2 * MiB), g)
        self.assertIn(TRICKY_NAME, g["MESSAGE"])

    def test_eviction_and_revocation_entries(self):
        model_host = _binary("ROCMMEM_MODEL_HOST")
        d = self.start_journal_daemon(extra=["--evict-deadline", "0.5"])
        # alpha answers evictions; the lower-priority model is chosen first and never answers.
        acks = self.background([model_host, self.sock, "alpha:transformer:24M:5"], "alpha")
        acks.wait_stdout(r"^registered alpha \d+$")
        mute = self.background([model_host, self.sock, "--no-ack",
                                f"{TRICKY_MODEL}:vae:24M:-5"], "beta")
        mute.wait_stdout(r"^registered beta")
        first = self.holder("32M", "--timeout", "20", name="first")
        mute.wait_stdout(r"^revoked beta", timeout=20)
        first.wait_stdout(r"^lease \d+:", timeout=20)
        second = self.holder("24M", "--timeout", "20", name="second")
        acks.wait_stdout(r"^acked alpha$", timeout=20)
        second.wait_stdout(r"^lease \d+:", timeout=20)
        for p in (first, second, acks, mute):
            p.signal(signal.SIGTERM)
            p.wait()
        entries = self.stop_and_collect(d)
        self.check_native(entries)

        asked = self.event(entries, "evict_requested", ROCMMEM_MODEL_NAME=TRICKY_MODEL)
        self.assertEqual(asked["PRIORITY"], INFO, asked)
        self.assertEqual(asked["ROCMMEM_CLIENT_PID"], str(mute.pid), asked)
        self.assertEqual(asked["ROCMMEM_BYTES"], str(24 * MiB), asked)
        self.assertRegex(asked["ROCMMEM_MODEL_ID"], r"^[1-9]\d*$", asked)
        revoked = self.event(entries, "revoked", ROCMMEM_MODEL_NAME=TRICKY_MODEL)
        self.assertEqual(revoked["PRIORITY"], WARNING, revoked)
        self.assertEqual(revoked["ROCMMEM_CLIENT_PID"], str(mute.pid), revoked)
        self.assertEqual(revoked["ROCMMEM_MODEL_ID"], asked["ROCMMEM_MODEL_ID"], revoked)

        asked = self.event(entries, "evict_requested", ROCMMEM_MODEL_NAME="alpha")
        self.assertEqual(asked["PRIORITY"], INFO, asked)
        self.assertEqual(asked["ROCMMEM_CLIENT_PID"], str(acks.pid), asked)
        self.assertEqual(asked["ROCMMEM_BYTES"], str(24 * MiB), asked)
        acked = self.event(entries, "evict_acked", ROCMMEM_MODEL_NAME="alpha")
        self.assertEqual(acked["PRIORITY"], INFO, acked)
        self.assertEqual(acked["ROCMMEM_CLIENT_PID"], str(acks.pid), acked)

        g = self.event(entries, "lease_granted", ROCMMEM_CLIENT_PID=str(second.pid))
        self.assertEqual(g["ROCMMEM_BYTES"], str(24 * MiB), g)
        self.assertRegex(g.get("ROCMMEM_WAITED_MS", "0"), r"^\d+$", g)


class JournalFallback(JournalTestCase):
    """When entries cannot be sent natively, the lines reach the journal through the stream."""

    def setUp(self):
        super().setUp()
        self.away = NATIVE_SOCKET + ".away"
        os.rename(NATIVE_SOCKET, self.away)
        self.addCleanup(self.restore_socket)

    def restore_socket(self):
        """Puts journald's socket back (idempotent), over whatever stands in for it."""
        if not os.path.lexists(self.away):
            return
        if os.path.lexists(NATIVE_SOCKET):
            os.unlink(NATIVE_SOCKET)
        os.rename(self.away, NATIVE_SOCKET)

    def check_stream(self, e, priority):
        self.assertEqual(e.get("_TRANSPORT"), "stdout", e)
        self.assertEqual(e.get("PRIORITY"), priority, e)
        self.assertEqual(e.get("SYSLOG_IDENTIFIER"), "rocmmemd", e)
        self.assertNotRegex(e["MESSAGE"], r"^<\d>", e)
        self.assertFalse(ROCMMEM_FIELDS & set(e), e)

    def test_stream_when_native_socket_missing(self):
        # The stream parses the "<N>" prefixes into PRIORITY (systemd-cat --level-prefix=true).
        d = self.start_journal_daemon(level_prefix=True)
        denied = self.ctl("lease", "128M")
        self.assertEqual(denied.rc, 2, denied)
        entries = self.stop_and_collect(d)
        self.assertTrue(entries)
        for e in entries:
            self.assertEqual(e.get("_TRANSPORT"), "stdout", e)
        deny = [e for e in entries if e["MESSAGE"].startswith("requested 128 MiB")]
        self.assertEqual(len(deny), 1, entries)
        self.check_stream(deny[0], WARNING)
        listening = [e for e in entries if "listening on" in e["MESSAGE"]]
        self.assertEqual(len(listening), 1, entries)
        self.check_stream(listening[0], INFO)

    def test_stream_when_sending_fails(self):
        # Started with the socket in place, so that it sends natively ...
        self.restore_socket()
        d = self.start_journal_daemon(level_prefix=True)
        first = self.ctl("lease", "2M", "--hold", "0")
        self.assertEqual(first.rc, 0, first)
        # ... then nobody listens there any more: each send is refused.
        os.rename(NATIVE_SOCKET, self.away)
        dead = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        dead.bind(NATIVE_SOCKET)
        dead.close()
        denied = self.ctl("lease", "128M")
        self.assertEqual(denied.rc, 2, denied)
        # Back: native again.
        self.restore_socket()
        last = self.ctl("lease", "2M", "--hold", "0")
        self.assertEqual(last.rc, 0, last)
        entries = self.stop_and_collect(d)

        native = self.event(entries, "lease_granted", ROCMMEM_CLIENT_PID=str(first.pid))
        self.assertEqual(native["_TRANSPORT"], "journal", native)
        deny = [e for e in entries if e["MESSAGE"].startswith("requested 128 MiB")]
        self.assertEqual(len(deny), 1, entries)
        self.check_stream(deny[0], WARNING)
        told = [e for e in entries if e["MESSAGE"].startswith(
            "Could not send to the journal's socket")]
        self.assertEqual(len(told), 1, "the failure is told once:\n" +
                         "\n".join(json.dumps(e) for e in entries))
        self.check_stream(told[0], WARNING)
        again = self.event(entries, "lease_granted", ROCMMEM_CLIENT_PID=str(last.pid))
        self.assertEqual(again["_TRANSPORT"], "journal", again)


def run_named_client(sock, name, size):
    """Runs named_client to its end; returns the CompletedProcess with its pid as .pid."""
    p = subprocess.Popen([_binary("ROCMMEM_NAMED_CLIENT"), sock, name, size],
                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         env=clean_env(), text=True)
    out, err = p.communicate(timeout=30)
    r = subprocess.CompletedProcess(p.args, p.returncode, out, err)
    r.pid = p.pid
    return r


# --- the namespace ---------------------------------------------------------------------------


def journald_path():
    return next((p for p in JOURNALD_PATHS if os.access(p, os.X_OK)), None)


def missing_prerequisites():
    """What the journal tests lack on this machine, or None."""
    if os.geteuid() != 0:
        return "not running as root (a private journald needs mount namespaces)"
    for tool in ("unshare", "mount", "journalctl", "systemd-cat"):
        if not shutil.which(tool):
            return f"{tool} is not installed (Debian: apt-get install systemd util-linux)"
    if not journald_path():
        return ("systemd-journald is not installed (looked for " + ", ".join(JOURNALD_PATHS) +
                "; Debian: apt-get install systemd)")
    probe = subprocess.run(["unshare", "--mount", "--pid", "--fork", "--mount-proc", "true"],
                           stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=30)
    if probe.returncode != 0:
        return f"unshare cannot create mount and pid namespaces here: {probe.stderr.strip()}"
    return None


def mount(*args):
    r = subprocess.run(["mount", *args], stdin=subprocess.DEVNULL, capture_output=True,
                       text=True, timeout=30)
    if r.returncode != 0:
        raise OSError(f"mount {' '.join(args)}: {r.stderr.strip()}")


def start_journald(log_path):
    """Inside the namespace: a private /run and journal, and journald serving them."""
    mount("-t", "tmpfs", "tmpfs", "/run")
    if os.path.isdir("/var/log/journal"):
        mount("-t", "tmpfs", "tmpfs", "/var/log/journal")
    # Keep journald off the host's kernel log: it reads and writes /dev/kmsg.
    if os.path.exists("/dev/kmsg"):
        mount("--bind", "/dev/null", "/dev/kmsg")
    for path in (JOURNAL_DIR, "/run/log/journal", "/run/systemd/journald.conf.d"):
        os.makedirs(path, exist_ok=True)
    with open("/run/systemd/journald.conf.d/rocmmem-test.conf", "w") as f:
        f.write(JOURNALD_CONF)
    with open(log_path, "wb") as log:
        journald = subprocess.Popen([journald_path()], stdin=subprocess.DEVNULL, stdout=log,
                                    stderr=log)

    def ready():
        if journald.poll() is not None:
            raise OSError(f"systemd-journald exited with {journald.returncode}")
        return os.path.exists(STREAM_SOCKET) and os.path.exists(NATIVE_SOCKET)

    try:
        poll_until(ready, 20.0, what="systemd-journald's sockets")
    except (AssertionError, OSError) as e:
        stop(journald)
        with open(log_path, errors="replace") as f:
            raise OSError(f"{e}; its output: {f.read().strip()}") from None
    return journald


def stop(proc):
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def run_tests(*cases):
    suite = unittest.TestSuite(unittest.defaultTestLoader.loadTestsFromTestCase(c)
                               for c in cases)
    verbosity = 2 if "-v" in sys.argv[1:] else 1
    return unittest.TextTestRunner(stream=sys.stdout, verbosity=verbosity).run(suite)


def inner():
    """The namespace's first process: journald up, the journal tests, everything stopped."""
    log_path = f"/tmp/rocmmem-journald-{os.getpid()}-{time.monotonic_ns()}.log"
    try:
        journald = start_journald(log_path)
    except OSError as e:
        print(f"SKIP: could not start a private systemd-journald: {e}", flush=True)
        return SKIP
    finally:
        if os.path.exists(log_path):
            os.unlink(log_path)
    try:
        result = run_tests(Journal, JournalFallback)
    finally:
        stop(journald)
    return 0 if result.wasSuccessful() else 1


def die_with_parent():
    """In the child, before exec: SIGKILL when this process ends (PR_SET_PDEATHSIG)."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(1, signal.SIGKILL, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG)")


def main():
    if os.environ.get(INNER_ENV) == "1":
        return inner()
    for var in ("ROCMMEMD", "ROCMMEMCTL", "ROCMMEM_MODEL_HOST", "ROCMMEM_NAMED_CLIENT"):
        _binary(var)
    plain = run_tests(PlainStderr)
    missing = missing_prerequisites()
    if missing:
        print(f"SKIP: journal tests: {missing}", flush=True)
        return SKIP if plain.wasSuccessful() else 1
    sys.stdout.flush()
    env = dict(os.environ, **{INNER_ENV: "1"})
    # Should this process die, unshare is killed (parent-death signal), which kills the
    # namespace's first process (--kill-child), and with it every process in the namespace.
    rc = subprocess.run(["unshare", "--mount", "--pid", "--fork", "--kill-child", "--mount-proc",
                         "--propagation", "private", sys.executable, os.path.abspath(__file__),
                         *sys.argv[1:]], stdin=subprocess.DEVNULL, env=env,
                        preexec_fn=die_with_parent).returncode
    if rc == SKIP:
        return SKIP if plain.wasSuccessful() else 1
    return 0 if rc == 0 and plain.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
