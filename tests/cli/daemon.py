# SPDX-License-Identifier: MIT
"""Shared fixture of the command-line tests: a real rocmmemd, rocmmemctl runs, polling.

The binaries come from the environment (CTest sets them): ROCMMEMD and ROCMMEMCTL.
Nothing here sleeps for correctness: every wait polls a condition against a deadline.
"""
import atexit
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import unittest

BUDGET = 64 << 20  # what the fixture daemon is started with (--budget 64M)
MiB = 1 << 20
GRANULE = 2 * MiB


def _binary(name):
    path = os.environ.get(name)
    if not path:
        raise RuntimeError(f"${name} is not set: run these tests through ctest -L cli "
                           f"(or set {name} to the built binary)")
    if not os.access(path, os.X_OK):
        raise RuntimeError(f"${name}={path} is not an executable file")
    return path


def rocmmemd_bin():
    return _binary("ROCMMEMD")


def rocmmemctl_bin():
    return _binary("ROCMMEMCTL")


_reachable_dir = None


def reachable_copy(path, name=None):
    """A copy of path (a file, or a directory tree) in a directory every user may read, for
    children run as another user: the build and source trees may sit where that user cannot
    reach (a clone under /root, mode 0700). Symbolic links are followed; the copy is named
    name (default: path's own name) and removed at exit. Returns the copy's path."""
    global _reachable_dir
    if _reachable_dir is None:
        _reachable_dir = tempfile.mkdtemp(prefix="rocmmem-reachable-")
        os.chmod(_reachable_dir, 0o755)
        atexit.register(shutil.rmtree, _reachable_dir, True)
    dest = os.path.join(_reachable_dir, name or os.path.basename(path.rstrip("/")))
    if not os.path.exists(dest):
        if os.path.isdir(path):
            shutil.copytree(path, dest, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(os.path.realpath(path), dest)
        for root, dirs, files in os.walk(dest) if os.path.isdir(dest) else [("", [], [dest])]:
            for entry in dirs + files:
                os.chmod(os.path.join(root, entry), 0o755)
    return dest


def reachable_ctl():
    """rocmmemctl and its librocmmem.so.1 where any user may run them (reachable_copy), and
    the environment that makes the copy use the copied library."""
    ctl = rocmmemctl_bin()
    lib = reachable_copy(os.path.join(os.path.dirname(ctl), "librocmmem.so.1"))
    return reachable_copy(ctl), clean_env(LD_LIBRARY_PATH=os.path.dirname(lib))


def clean_env(**overrides):
    """The environment for a child: no inherited socket choice, plus overrides (None drops)."""
    env = dict(os.environ)
    for key in ("ROCMMEM_SOCKET", "XDG_RUNTIME_DIR"):
        env.pop(key, None)
    for key, value in overrides.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return env


def poll_until(fn, timeout=5.0, interval=0.02, what="the condition"):
    """Calls fn until it returns something truthy and returns that; fails at the deadline."""
    deadline = time.monotonic() + timeout
    last = None
    while True:
        last = fn()
        if last:
            return last
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}; "
                                 f"last value: {last!r}")
        time.sleep(interval)


def can_connect(path):
    """True when a SOCK_SEQPACKET connection to path is accepted."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        s.connect(path)
        return True
    except OSError:
        return False
    finally:
        s.close()


class Result:
    """A finished command: args, pid, rc, stdout, stderr."""

    def __init__(self, args, pid, rc, stdout, stderr):
        self.args, self.pid, self.rc, self.stdout, self.stderr = args, pid, rc, stdout, stderr

    def __repr__(self):
        return (f"<{' '.join(self.args)}: rc {self.rc}, pid {self.pid}\n"
                f"--- stdout ---\n{self.stdout}--- stderr ---\n{self.stderr}--->")

    def json(self):
        return json.loads(self.stdout)


def run(args, env=None, timeout=10.0):
    """Runs a command to its end (killed at the timeout, which fails) and captures it."""
    p = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, env=env if env is not None else clean_env(),
                         text=True)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
        raise AssertionError(f"{' '.join(args)} did not finish in {timeout} s\n"
                             f"--- stdout ---\n{out}--- stderr ---\n{err}")
    return Result(list(args), p.pid, p.returncode, out, err)


class Background:
    """A long-running process whose stdout and stderr go to files, so nothing ever blocks."""

    def __init__(self, args, workdir, name, env=None, umask=-1, cwd=None):
        self.args = list(args)
        self.out_path = os.path.join(workdir, name + ".out")
        self.err_path = os.path.join(workdir, name + ".err")
        with open(self.out_path, "wb") as out, open(self.err_path, "wb") as err:
            self.proc = subprocess.Popen(self.args, stdin=subprocess.DEVNULL, stdout=out,
                                         stderr=err,
                                         env=env if env is not None else clean_env(),
                                         umask=umask, cwd=cwd)
        self.pid = self.proc.pid

    def stdout(self):
        with open(self.out_path, encoding="utf-8", errors="replace") as f:
            return f.read()

    def stderr(self):
        with open(self.err_path, encoding="utf-8", errors="replace") as f:
            return f.read()

    def running(self):
        return self.proc.poll() is None

    def wait_stdout(self, pattern, timeout=5.0):
        """Polls stdout until pattern (a regex, MULTILINE) matches; returns the match."""
        rx = re.compile(pattern, re.MULTILINE)

        def check():
            m = rx.search(self.stdout())
            if not m and not self.running():
                raise AssertionError(f"{self!r} exited before printing /{pattern}/")
            return m

        return poll_until(check, timeout, what=f"/{pattern}/ on the stdout of {self!r}")

    def signal(self, sig):
        self.proc.send_signal(sig)

    def wait(self, timeout=10.0):
        """Waits for the exit and returns the status (negative: killed by that signal)."""
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"{self!r} did not exit within {timeout} s") from None

    def kill(self):
        """Cleanup: SIGKILL if still running, and reap."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()

    def __repr__(self):
        return (f"<{' '.join(self.args)} (pid {self.pid}, rc {self.proc.poll()})\n"
                f"--- stdout ---\n{self.stdout()}--- stderr ---\n{self.stderr()}--->")


class Daemon(Background):
    """A real rocmmemd on a socket in a test's directory."""

    def __init__(self, workdir, sock, extra=(), name="rocmmemd", env=None, umask=-1):
        self.sock = sock
        # Never the machine's own configuration file (a --config in extra wins).
        args = [rocmmemd_bin(), "--socket", sock, "--log-level", "debug", "--config",
                "/dev/null", *extra]
        super().__init__(args, workdir, name, env=env, umask=umask)

    def log(self):
        return self.stderr()

    def wait_ready(self, timeout=10.0):
        def ready():
            if not self.running():
                raise AssertionError(f"rocmmemd exited with {self.proc.poll()} before "
                                     f"serving {self.sock}:\n{self.log()}")
            return can_connect(self.sock)

        poll_until(ready, timeout, what=f"rocmmemd to accept connections on {self.sock}")
        return self

    def stop(self, sig=signal.SIGTERM, timeout=10.0):
        """Sends sig and returns the exit status."""
        if self.running():
            self.signal(sig)
        return self.wait(timeout)


class CliTestCase(unittest.TestCase):
    """Gives each test a private directory; start_daemon() starts one (--budget 64M)."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="rocmmem-cli-")
        self.addCleanup(shutil.rmtree, self.dir, ignore_errors=True)
        self.sock = os.path.join(self.dir, "d.sock")
        self.daemon = None

    # --- processes -------------------------------------------------------------------------

    def start_daemon(self, sock=None, budget="64M", extra=(), name="rocmmemd", check_exit=True,
                     **kw):
        """Starts rocmmemd and waits until it serves; at cleanup SIGTERM must give exit 0."""
        sock = sock or self.sock
        args = ["--backend", "host"]
        if budget is not None:
            args += ["--budget", budget]
        d = Daemon(self.dir, sock, [*args, *extra], name=name, **kw)
        self.addCleanup(self._stop_daemon, d, check_exit)
        d.wait_ready()
        if self.daemon is None and sock == self.sock:
            self.daemon = d
        return d

    def _stop_daemon(self, d, check_exit):
        if not d.running():
            d.kill()
            return
        try:
            rc = d.stop(signal.SIGTERM)
        finally:
            d.kill()
        if check_exit:
            self.assertEqual(rc, 0, f"rocmmemd did not stop cleanly on SIGTERM:\n{d.log()}")

    def background(self, args, name, env=None):
        """Starts a process (killed at cleanup whatever happens)."""
        b = Background(args, self.dir, name, env=env)
        self.addCleanup(b.kill)
        return b

    def holder(self, *lease_args, name=None, sock=None):
        """Starts `rocmmemctl --socket SOCK lease ARGS...` in the background."""
        self._holders = getattr(self, "_holders", 0) + 1
        name = name or f"lease-{self._holders}"
        return self.background([rocmmemctl_bin(), "--socket", sock or self.sock, "lease",
                                *lease_args], name)

    def ctl(self, *args, sock=True, env=None, timeout=10.0):
        """Runs rocmmemctl ARGS (after --socket SOCK when sock is True, or SOCK if a path)."""
        head = []
        if sock is True:
            head = ["--socket", self.sock]
        elif sock:
            head = ["--socket", sock]
        return run([rocmmemctl_bin(), *head, *args], env=env, timeout=timeout)

    def rocmmemd(self, *args, env=None, timeout=10.0):
        """Runs rocmmemd ARGS to its end (for options that make it exit)."""
        return run([rocmmemd_bin(), *args], env=env, timeout=timeout)

    # --- status ----------------------------------------------------------------------------

    def status(self, sock=None):
        r = self.ctl("status", "--json", sock=sock or True)
        self.assertEqual(r.rc, 0, r)
        self.assertEqual(r.stderr, "", r)
        return r.json()

    def lease_by_owner(self, st, pid):
        found = [l for l in st["leases"] if l["owner_pid"] == pid]
        return found[0] if len(found) == 1 else None

    def wait_status(self, pred, timeout=5.0, what="a status"):
        """Polls status --json until pred(status) is truthy; returns that status."""
        box = {}

        def check():
            box["st"] = self.status()
            return pred(box["st"])

        try:
            poll_until(check, timeout, what=what)
        except AssertionError as e:
            raise AssertionError(f"{e}\nlast status: {json.dumps(box.get('st'), indent=1)}"
                                 ) from None
        return box["st"]

    def assert_no_output_but_error(self, r, rc):
        """A failed command: exit status rc, a rocmmemctl message on stderr, and on stdout
        nothing, or with --json only the error as one JSON object (json_error)."""
        self.assertEqual(r.rc, rc, r)
        self.assertRegex(r.stderr, r"^rocmmemctl", r)
        if "--json" in r.args or "-j" in r.args:
            self.json_error(r, rc)
        else:
            self.assertEqual(r.stdout, "", r)

    def json_error(self, r, rc):
        """The {"error": {...}} object a failed --json command prints, checked; returns it."""
        self.assertEqual(r.rc, rc, r)
        self.assertEqual(r.stdout.count("\n"), 1, r)
        o = json.loads(r.stdout)
        self.assertEqual(list(o), ["error"], r)
        e = o["error"]
        self.assertEqual(list(e), ["code", "errno", "message", "exit_status"], r)
        self.assertEqual(e["exit_status"], rc, r)
        self.assertIs(type(e["errno"]), int, r)
        self.assertRegex(e["code"], r"^E[A-Z0-9]+$", r)
        self.assertIn(e["message"], r.stderr, "the same message on stderr")
        return e
