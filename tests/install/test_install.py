# SPDX-License-Identifier: MIT
"""`cmake --install` from the outside: what lands where, and whether it works once there.

The build tree is installed into a temporary prefix (as `cmake --install build --prefix DIR`)
and, like a distribution package, with DESTDIR and the prefix /usr. Then: the file list, the
library's SONAME links, the units checked by `systemd-analyze verify` and scored by
`systemd-analyze security --offline=true` (the exposure level is printed), sysusers.d and
tmpfiles.d applied to a scratch root, the man pages rendered by man(1) without a warning and in
step with --help, the example configuration checked by `rocmmemd --check-config`, and a program
built against the installed library through pkg-config and through the CMake package (from a
copy of the prefix moved elsewhere), run against a daemon from the build tree.

Environment (set by CMake): ROCMMEM_BUILD_DIR, ROCMMEM_SOURCE_DIR, ROCMMEM_VERSION (the
project's), ROCMMEM_LIBRARY_VERSION (librocmmem's, from rocmmem.h), CMAKE,
CC, ROCMMEMD (the build tree's daemon), and ROCMMEM_DIR_<NAME>: the install directories as
configured (BINDIR, SBINDIR, LIBDIR, INCLUDEDIR, DATADIR, MANDIR, SYSTEM_UNIT_DIR,
USER_UNIT_DIR, SYSUSERS_DIR, TMPFILES_DIR), relative to the prefix.
"""
import os
import re
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
import unittest

MAX_EXPOSURE = 3.0


def env(name):
    value = os.environ.get(name)
    if not value:
        raise unittest.SkipTest(f"{name} is not set: run this test through ctest")
    return value


def run(args, check=True, **kwargs):
    """run runs a command, capturing its output; a failure shows the command and its output."""
    kwargs.setdefault("stdout", subprocess.PIPE)
    kwargs.setdefault("stderr", subprocess.STDOUT)
    r = subprocess.run(args, text=True, timeout=120, **kwargs)
    if check and r.returncode != 0:
        raise AssertionError(f"{' '.join(map(str, args))} exited {r.returncode}:\n"
                             f"{r.stdout or ''}{r.stderr or ''}")
    return r


def readelf_dynamic(path):
    return run(["readelf", "-d", path]).stdout


def loaded_librocmmem(exe):
    """loaded_librocmmem is the real path of the librocmmem.so.N exe loads (None: none)."""
    clean = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
    m = re.search(r"^\s*librocmmem\.so\.\d+ => (\S+) ", run(["ldd", exe], env=clean).stdout,
                  re.M)
    return os.path.realpath(m.group(1)) if m else None


class Installed(unittest.TestCase):
    """One install into a temporary prefix and one into DESTDIR, shared by every test."""

    @classmethod
    def setUpClass(cls):
        cls.build = env("ROCMMEM_BUILD_DIR")
        cls.source = env("ROCMMEM_SOURCE_DIR")
        cls.version = env("ROCMMEM_VERSION")
        cls.lib_version = env("ROCMMEM_LIBRARY_VERSION")
        cls.soname = "librocmmem.so." + cls.lib_version.split(".")[0]
        cls.cmake = env("CMAKE")
        cls.dirs = {k[len("ROCMMEM_DIR_"):]: v for k, v in os.environ.items()
                    if k.startswith("ROCMMEM_DIR_")}
        cls.tmp = tempfile.mkdtemp(prefix="rocmmem-install-")
        cls.prefix = os.path.join(cls.tmp, "prefix")
        cls.manifest = cls.install(["--prefix", cls.prefix])
        cls.destdir = os.path.join(cls.tmp, "destdir")
        cls.dest_manifest = cls.install(["--prefix", "/usr"], DESTDIR=cls.destdir)
        cls.daemon = None

    @classmethod
    def tearDownClass(cls):
        if cls.daemon:
            cls.stop_daemon()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    @classmethod
    def install(cls, args, **extra_env):
        """install runs cmake --install and returns the files it says it installed."""
        r = run([cls.cmake, "--install", cls.build] + args,
                env=dict(os.environ, **extra_env))
        return [line.split(": ", 1)[1] for line in r.stdout.splitlines()
                if line.startswith(("-- Installing: ", "-- Up-to-date: "))]

    def path(self, dir_name, *parts, root=None):
        """path is where an installed file lies: dir_name is a key of ROCMMEM_DIR_*."""
        d = self.dirs[dir_name]
        if root is not None:  # DESTDIR install with the prefix /usr
            return os.path.join(root, "usr", d, *parts) if not os.path.isabs(d) \
                else os.path.join(root, d.lstrip("/"), *parts)
        return os.path.join(d if os.path.isabs(d) else os.path.join(self.prefix, d), *parts)

    # ---------------------------------------------------------------------------------------
    # The daemon from the build tree, for the programs built against the installed library

    @classmethod
    def start_daemon(cls):
        if cls.daemon:
            return cls.sock
        cls.sock = os.path.join(cls.tmp, "rocmmemd.sock")
        conf = os.path.join(cls.tmp, "empty.conf")  # never the machine's /etc/rocmmemd
        open(conf, "w").close()
        cls.daemon = subprocess.Popen(
            [env("ROCMMEMD"), "--config", conf, "--backend", "host", "--budget", "64M",
             "--socket", cls.sock, "--log-level", "warn"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
            env={k: v for k, v in os.environ.items()
                 if k not in ("NOTIFY_SOCKET", "LISTEN_FDS", "LISTEN_PID", "JOURNAL_STREAM")})
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if cls.daemon.poll() is not None:
                raise AssertionError(f"rocmmemd exited {cls.daemon.returncode}: "
                                     f"{cls.daemon.stderr.read()}")
            try:
                with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as s:
                    s.connect(cls.sock)
                return cls.sock
            except OSError:
                time.sleep(0.02)
        raise AssertionError("rocmmemd did not listen within 10 s")

    @classmethod
    def stop_daemon(cls):
        cls.daemon.send_signal(signal.SIGTERM)
        try:
            _, err = cls.daemon.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            cls.daemon.kill()
            _, err = cls.daemon.communicate()
        rc = cls.daemon.returncode
        cls.daemon = None
        if rc != 0:
            raise AssertionError(f"rocmmemd exited {rc} at stop: {err}")

    def run_consumer(self, exe, lib_dir=None):
        """run_consumer runs a program built against the library; checks which one it loads."""
        sock = self.start_daemon()
        clean = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
        r = run([exe, sock], env=clean)
        self.assertIn("leased and wrote 4194304 bytes", r.stdout)
        self.assertIn(f"daemon {self.version}, backend host", r.stdout)
        self.assertIn(f"librocmmem {self.lib_version}, built against {self.lib_version}",
                      r.stdout)
        loaded = loaded_librocmmem(exe)
        if lib_dir is None:  # linked statically: no librocmmem at run time
            self.assertIsNone(loaded)
        else:
            self.assertEqual(loaded, os.path.realpath(os.path.join(lib_dir, self.soname)))

    # ---------------------------------------------------------------------------------------
    # What is installed where

    def test_file_list(self):
        """every artifact is installed where the install directories say, nothing else."""
        expected = [
            self.path("SBINDIR", "rocmmemd"),
            self.path("BINDIR", "rocmmemctl"),
            self.path("BINDIR", "rocmmem-exporter"),
            self.path("LIBDIR", f"librocmmem.so.{self.lib_version}"),
            self.path("LIBDIR", self.soname),
            self.path("LIBDIR", "librocmmem.so"),
            self.path("LIBDIR", "librocmmem.a"),
            self.path("LIBDIR", "librocmmem_torch.so"),
            self.path("INCLUDEDIR", "rocmmem.h"),
            self.path("LIBDIR", "pkgconfig", "rocmmem.pc"),
            self.path("LIBDIR", "cmake", "rocmmem", "rocmmemConfig.cmake"),
            self.path("LIBDIR", "cmake", "rocmmem", "rocmmemConfigVersion.cmake"),
            self.path("LIBDIR", "cmake", "rocmmem", "rocmmemTargets.cmake"),
            self.path("SYSTEM_UNIT_DIR", "rocmmemd.service"),
            self.path("SYSTEM_UNIT_DIR", "rocmmemd.socket"),
            self.path("SYSTEM_UNIT_DIR", "rocmmem-exporter.service"),
            self.path("SYSTEM_UNIT_DIR", "rocmmem-exporter.socket"),
            self.path("USER_UNIT_DIR", "rocmmemd.service"),
            self.path("USER_UNIT_DIR", "rocmmemd.socket"),
            self.path("SYSUSERS_DIR", "rocmmemd.conf"),
            self.path("SYSUSERS_DIR", "rocmmem-exporter.conf"),
            self.path("TMPFILES_DIR", "rocmmemd.conf"),
            self.path("DATADIR", "rocmmemd", "rocmmemd.conf"),
            self.path("MANDIR", "man8", "rocmmemd.8"),
            self.path("MANDIR", "man8", "rocmmem-exporter.8"),
            self.path("MANDIR", "man1", "rocmmemctl.1"),
            self.path("MANDIR", "man5", "rocmmemd.conf.5"),
            self.path("BASH_COMPLETION_DIR", "rocmmemctl"),
        ]
        for f in expected:
            self.assertTrue(os.path.lexists(f), f"not installed: {f}")
            self.assertIn(f, self.manifest)
        for f in expected[:3]:
            self.assertTrue(os.access(f, os.X_OK), f"not executable: {f}")
        # The build type's targets file, whatever the build type.
        targets = [f for f in self.manifest if re.search(r"/rocmmemTargets-\w+\.cmake$", f)]
        self.assertEqual(len(targets), 1, self.manifest)
        unexpected = set(self.manifest) - set(expected) - set(targets)
        self.assertFalse(unexpected, f"installed but not expected: {sorted(unexpected)}")

    def test_nothing_outside_the_prefix(self):
        """a temporary prefix (or DESTDIR) holds every installed file: no /lib/systemd, no /etc."""
        for f in self.manifest:
            self.assertTrue(f.startswith(self.prefix + "/"), f)
        for f in self.dest_manifest:
            self.assertTrue(f.startswith(self.destdir + "/usr/"), f)
        for name in ("SYSTEM_UNIT_DIR", "USER_UNIT_DIR", "SYSUSERS_DIR", "TMPFILES_DIR",
                     "BASH_COMPLETION_DIR"):
            self.assertFalse(os.path.isabs(self.dirs[name]),
                             f"{name} is absolute ({self.dirs[name]}): an install into a "
                             "temporary prefix would write outside it")

    def test_library_soname(self):
        """librocmmem.so -> .so.1 -> .so.1.0.0 (the header's version), SONAME librocmmem.so.1;
        the CLI finds it."""
        lib = self.path("LIBDIR")
        self.assertEqual(self.soname, "librocmmem.so.1")
        self.assertEqual(os.readlink(os.path.join(lib, "librocmmem.so")), self.soname)
        self.assertEqual(os.readlink(os.path.join(lib, self.soname)),
                         f"librocmmem.so.{self.lib_version}")
        self.assertIn(f"Library soname: [{self.soname}]",
                      readelf_dynamic(os.path.join(lib, f"librocmmem.so.{self.lib_version}")))
        # The installed rocmmemctl runs from the prefix with the prefix's library.
        ctl = self.path("BINDIR", "rocmmemctl")
        clean = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
        self.assertIn(self.version, run([ctl, "--version"], env=clean).stdout)
        self.assertEqual(loaded_librocmmem(ctl),
                         os.path.realpath(os.path.join(lib, f"librocmmem.so.{self.lib_version}")))
        self.assertIn(self.version, run([self.path("SBINDIR", "rocmmemd"), "--version"]).stdout)

    def test_paths_in_installed_files(self):
        """units name the installed daemon; DESTDIR never appears in what was installed."""
        for root, prefix in ((None, self.prefix), (self.destdir, "/usr")):
            daemon = os.path.join(prefix, self.dirs["SBINDIR"], "rocmmemd")
            example = os.path.join(prefix, self.dirs["DATADIR"], "rocmmemd", "rocmmemd.conf")
            with open(self.path("SYSTEM_UNIT_DIR", "rocmmemd.service", root=root)) as f:
                self.assertIn(f"\nExecStart={daemon} --config /etc/rocmmemd/rocmmemd.conf "
                              "--socket /run/rocmmemd/rocmmemd.sock\n",
                              f.read())
            with open(self.path("USER_UNIT_DIR", "rocmmemd.service", root=root)) as f:
                self.assertIn(f"\nExecStart={daemon}\n", f.read())
            exporter = os.path.join(prefix, self.dirs["BINDIR"], "rocmmem-exporter")
            with open(self.path("SYSTEM_UNIT_DIR", "rocmmem-exporter.service", root=root)) as f:
                self.assertIn(f"\nExecStart={exporter}\n", f.read())
            with open(self.path("TMPFILES_DIR", "rocmmemd.conf", root=root)) as f:
                self.assertIn(f" {example}\n", f.read())
        for f in self.dest_manifest:
            if os.path.isfile(f) and not os.path.islink(f):
                with open(f, "rb") as fh:
                    self.assertNotIn(self.destdir.encode(), fh.read(), f)

    # ---------------------------------------------------------------------------------------
    # systemd

    def analyze(self, args, **extra_env):
        man = self.path("MANDIR")  # Documentation=man:... is looked up: the installed pages
        return run(["systemd-analyze"] + args, check=False,
                   env=dict(os.environ, MANPATH=man, SYSTEMD_PAGER="", **extra_env))

    def test_verify_system_units(self):
        """systemd-analyze verify accepts the installed system units without a word."""
        units = ("rocmmemd.socket", "rocmmemd.service", "rocmmem-exporter.socket",
                 "rocmmem-exporter.service")
        r = self.analyze(["verify", *(self.path("SYSTEM_UNIT_DIR", u) for u in units)])
        self.assertEqual((r.returncode, r.stdout), (0, ""), f"systemd-analyze verify:\n{r.stdout}")

    def test_verify_user_units(self):
        """systemd-analyze --user verify accepts the installed user units without a word."""
        runtime = tempfile.mkdtemp(dir=self.tmp)
        r = self.analyze(["--user", "verify", self.path("USER_UNIT_DIR", "rocmmemd.socket"),
                          self.path("USER_UNIT_DIR", "rocmmemd.service")],
                         XDG_RUNTIME_DIR=runtime)
        self.assertEqual((r.returncode, r.stdout), (0, ""), f"systemd-analyze verify:\n{r.stdout}")

    def test_security_exposure(self):
        """systemd-analyze security --offline=true scores each service at most 3.0."""
        for unit in ("rocmmemd.service", "rocmmem-exporter.service"):
            r = self.analyze(["security", "--offline=true", "--no-pager",
                              self.path("SYSTEM_UNIT_DIR", unit)])
            m = re.search(rf"Overall exposure level for {re.escape(unit)}: ([0-9.]+)", r.stdout)
            self.assertIsNotNone(m, f"no exposure level in:\n{r.stdout}")
            exposure = float(m.group(1))
            print(f"\n{unit}: overall exposure level {exposure} (at most {MAX_EXPOSURE})",
                  file=sys.stderr)
            self.assertLessEqual(exposure, MAX_EXPOSURE, r.stdout)

    @unittest.skipIf(os.geteuid() != 0, "needs root: the files are owned by root")
    def test_sysusers(self):
        """sysusers.d creates the users rocmmemd and rocmmem-exporter (group rocmmem) and the
        groups rocmmem-metrics, render, video."""
        root = tempfile.mkdtemp(dir=self.tmp)
        os.makedirs(os.path.join(root, "etc"))
        run(["systemd-sysusers", f"--root={root}",
             self.path("SYSUSERS_DIR", "rocmmemd.conf", root=self.destdir),
             self.path("SYSUSERS_DIR", "rocmmem-exporter.conf", root=self.destdir)])
        with open(os.path.join(root, "etc", "group")) as f:
            groups = {line.split(":")[0]: line.split(":")[2] for line in f if line.strip()}
        with open(os.path.join(root, "etc", "passwd")) as f:
            users = {line.split(":")[0]: line.split(":") for line in f if line.strip()}
        self.assertLessEqual({"rocmmem", "rocmmem-metrics", "render", "video"}, set(groups))
        for user in ("rocmmemd", "rocmmem-exporter"):
            self.assertIn(user, users)
            self.assertEqual(users[user][3], groups["rocmmem"])
            self.assertLess(int(users[user][2]), 1000, "not a system user")

    @unittest.skipIf(os.geteuid() != 0, "needs root: the files are owned by root")
    def test_tmpfiles(self):
        """tmpfiles.d puts the example at /etc/rocmmemd/rocmmemd.conf, and never overwrites it;
        it makes the metrics directory the daemon writes and rocmmem-metrics reads."""
        root = self.destdir
        conf = os.path.join(root, "etc", "rocmmemd", "rocmmemd.conf")
        tmpfiles = self.path("TMPFILES_DIR", "rocmmemd.conf", root=root)
        # The users and groups the entries name, in the scratch root's own /etc.
        os.makedirs(os.path.join(root, "etc"), exist_ok=True)
        run(["systemd-sysusers", f"--root={root}",
             self.path("SYSUSERS_DIR", "rocmmemd.conf", root=root)])
        run(["systemd-tmpfiles", "--create", f"--root={root}", tmpfiles])
        with open(os.path.join(root, "etc", "group")) as f:
            groups = {line.split(":")[0]: int(line.split(":")[2]) for line in f if line.strip()}
        with open(os.path.join(root, "etc", "passwd")) as f:
            users = {line.split(":")[0]: int(line.split(":")[2]) for line in f if line.strip()}
        st = os.stat(os.path.join(root, "var", "lib", "rocmmemd", "metrics"))
        self.assertEqual((oct(stat.S_IMODE(st.st_mode)), st.st_uid, st.st_gid),
                         (oct(0o2750), users["rocmmemd"], groups["rocmmem-metrics"]))
        with open(conf) as f, open(self.path("DATADIR", "rocmmemd", "rocmmemd.conf",
                                             root=root)) as example:
            self.assertEqual(f.read(), example.read())
        with open(conf, "w") as f:
            f.write("[daemon]\nlog_level = debug\n")
        run(["systemd-tmpfiles", "--create", f"--root={root}", tmpfiles])
        with open(conf) as f:
            self.assertEqual(f.read(), "[daemon]\nlog_level = debug\n")

    # ---------------------------------------------------------------------------------------
    # Man pages and the example configuration

    def test_man_pages_render(self):
        """man renders each installed page without a warning, and finds it by name."""
        for section, name in (("8", "rocmmemd"), ("1", "rocmmemctl"), ("5", "rocmmemd.conf"),
                              ("8", "rocmmem-exporter")):
            page = self.path("MANDIR", f"man{section}", f"{name}.{section}")
            r = run(["man", "--warnings", "-E", "UTF-8", "-l", page], stderr=subprocess.PIPE,
                    env={k: v for k, v in dict(os.environ, MANWIDTH="80").items()
                         if k != "MAN_KEEP_FORMATTING"})
            self.assertEqual(r.stderr, "", f"{page}: {r.stderr}")
            self.assertIn("NAME", r.stdout)
            self.assertIn(f"{name} -", r.stdout)
            found = run(["man", "-M", self.path("MANDIR"), "-w", section, name]).stdout.strip()
            self.assertEqual(found, page)

    def help_options(self, exe):
        out = run([exe, "--help"]).stdout
        return set(re.findall(r"(?<![\w-])--[a-z][a-z-]*", out)), out

    def test_man_pages_match_help(self):
        """every option of rocmmemd --help and every command of rocmmemctl --help is in its page."""
        with open(os.path.join(self.source, "docs", "man", "rocmmemd.8")) as f:
            daemon_page = f.read().replace("\\-", "-")
        options, _ = self.help_options(self.path("SBINDIR", "rocmmemd"))
        self.assertIn("--check-config", options)
        for opt in options:
            self.assertIn(opt, daemon_page, f"rocmmemd.8 does not document {opt}")
        with open(os.path.join(self.source, "docs", "man", "rocmmemctl.1")) as f:
            ctl_page = f.read().replace("\\-", "-")
        options, out = self.help_options(self.path("BINDIR", "rocmmemctl"))
        for opt in options:
            self.assertIn(opt, ctl_page, f"rocmmemctl.1 does not document {opt}")
        with open(os.path.join(self.source, "docs", "man", "rocmmem-exporter.8")) as f:
            exporter_page = f.read().replace("\\-", "-")
        exporter_options, _ = self.help_options(self.path("BINDIR", "rocmmem-exporter"))
        self.assertIn("--listen", exporter_options)
        for opt in exporter_options:
            self.assertIn(opt, exporter_page, f"rocmmem-exporter.8 does not document {opt}")
        commands = re.findall(r"^  ([a-z]+)\b", out.split("Commands:")[1].split("Options:")[0],
                              re.M)
        self.assertGreaterEqual(len(commands), 11, out)
        for cmd in commands:
            self.assertRegex(ctl_page, rf"\n\.(TP\n\.)?B {cmd}\b",
                             f"rocmmemctl.1 has no entry for {cmd}")
            # ... with every option its own --help lists.
            r = run([self.path("BINDIR", "rocmmemctl"), cmd, "--help"])
            self.assertEqual(r.returncode, 0, r)
            for opt in re.findall(r"(?m)^  (?:-\w, )?(--[a-z][a-z-]*)", r.stdout):
                self.assertIn(opt, ctl_page, f"rocmmemctl.1 does not document {cmd} {opt}")

    def test_bash_completion(self):
        """bash-completion's own loader finds the installed completion under the prefix, and it
        completes commands, options and table columns from the installed rocmmemctl."""
        loader = "/usr/share/bash-completion/bash_completion"
        if not os.path.exists(loader) or not shutil.which("bash"):
            self.skipTest(f"{loader} or bash is missing (scripts/setup.sh installs them)")
        ctl = self.path("BINDIR", "rocmmemctl")
        data_dir = os.path.dirname(os.path.dirname(self.path("BASH_COMPLETION_DIR")))
        script = f"""
            source {loader}
            __load_completion rocmmemctl || exit 9
            complete -p rocmmemctl
            c() {{ COMP_WORDS=("$@"); COMP_CWORD=$((${{#COMP_WORDS[@]}} - 1))
                  COMPREPLY=(); _rocmmemctl; echo "${{COMPREPLY[*]}}"; }}
            c {ctl} st
            c {ctl} lease 4G --ti
            c {ctl} status clients -o PID,RES
            c {ctl} help mo
        """
        env = {k: v for k, v in os.environ.items() if not k.startswith("BASH_COMPLETION")}
        env["XDG_DATA_DIRS"] = data_dir
        r = subprocess.run(["bash", "--norc", "--noprofile", "-c", script], env=env,
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 0, r)
        lines = r.stdout.splitlines()
        self.assertRegex(lines[0], r"^complete -F _rocmmemctl rocmmemctl$", r)
        self.assertEqual(lines[1:], ["status", "--timeout", "PID,RESERVED", "models"], r)

    def check_config(self, path):
        r = run([self.path("SBINDIR", "rocmmemd"), "--check-config", "--config", path],
                stderr=subprocess.PIPE)
        settings = {}
        section = None
        for line in r.stdout.splitlines():
            if line.startswith("["):
                section = line
            elif "=" in line and not line.startswith(";"):
                key, rest = line.split("=", 1)
                value, _, source = rest.rpartition(";")
                settings.setdefault((section, key.strip()), []).append(
                    (value.strip(), source.strip()))
        return settings

    def test_example_config(self):
        """the example is valid, and each setting it comments out is the daemon's default."""
        example = self.path("DATADIR", "rocmmemd", "rocmmemd.conf")
        defaults = self.check_config(example)
        with open(example) as f:
            text = f.read()
        uncommented = os.path.join(self.tmp, "uncommented.conf")
        with open(uncommented, "w") as f:
            f.write(re.sub(r"^; ", "", text, flags=re.M))
        given = self.check_config(uncommented)
        # Every setting of --check-config's output is in the example.
        for section, key in defaults:
            self.assertIn((section, key), given, f"the example lacks {section} {key}")
        # What the example shows for a setting with a default is that default.
        for (section, key), values in defaults.items():
            if key == "socket" and os.geteuid() != 0:
                continue  # the system socket is the default as root only
            self.assertEqual([v for v, _ in given[(section, key)]], [v for v, _ in values],
                             f"{section} {key}")
        # Each option of rocmmemd --help that has a key in the file is shown by the example.
        options, _ = self.help_options(self.path("SBINDIR", "rocmmemd"))
        with open(self.path("MANDIR", "man5", "rocmmemd.conf.5")) as f:
            conf_page = f.read().replace("\\-", "-")
        for opt in options - {"--config", "--check-config", "--help", "--version"}:
            self.assertIn(f"({opt}", text, f"the example does not show {opt}")
            self.assertIn(opt, conf_page, f"rocmmemd.conf.5 does not name {opt}")

    # ---------------------------------------------------------------------------------------
    # Building against the installed library

    def test_pkg_config(self):
        """a program builds with pkg-config against the installed library, shared and static."""
        pc_env = dict(os.environ, PKG_CONFIG_PATH=self.path("LIBDIR", "pkgconfig"))
        cflags = run(["pkg-config", "--cflags", "rocmmem"], env=pc_env).stdout.split()
        libs = run(["pkg-config", "--libs", "rocmmem"], env=pc_env).stdout.split()
        static_libs = run(["pkg-config", "--static", "--libs", "rocmmem"],
                          env=pc_env).stdout.split()
        libdir = run(["pkg-config", "--variable=libdir", "rocmmem"], env=pc_env).stdout.strip()
        self.assertEqual(os.path.realpath(libdir), os.path.realpath(self.path("LIBDIR")))
        self.assertIn("-lrocmmem", libs)
        # The library's version, not the project's: what --atleast-version compares.
        self.assertEqual(run(["pkg-config", "--modversion", "rocmmem"], env=pc_env).stdout.strip(),
                         self.lib_version)
        # Directories named from ${prefix}, the library's static needs by their own .pc.
        with open(self.path("LIBDIR", "pkgconfig", "rocmmem.pc")) as f:
            pc = f.read()
        self.assertIn(f"\nincludedir=${{prefix}}/{self.dirs['INCLUDEDIR']}\n", pc)
        self.assertIn(f"\nlibdir=${{prefix}}/{self.dirs['LIBDIR']}\n", pc)
        self.assertIn("\nRequires.private: libprotobuf-c\n", pc)
        self.assertNotIn("pcfiledir", pc)
        self.assertIn("-lprotobuf-c", static_libs)
        # Installed into /usr (as by a package), the system's directories are left out.
        sys_env = dict(os.environ, PKG_CONFIG_PATH=self.path("LIBDIR", "pkgconfig",
                                                              root=self.destdir))
        with open(self.path("LIBDIR", "pkgconfig", "rocmmem.pc", root=self.destdir)) as f:
            self.assertTrue(f.read().startswith("prefix=/usr\n"))
        if not os.path.isabs(self.dirs["INCLUDEDIR"]) and self.dirs["INCLUDEDIR"] == "include":
            self.assertEqual(run(["pkg-config", "--cflags", "rocmmem"], env=sys_env).stdout.strip(),
                             "")
        source = os.path.join(self.source, "tests", "install", "consumer", "consumer.c")
        cc = env("CC")
        shared = os.path.join(self.tmp, "pc_shared")
        run([cc, "-std=c11", "-Wall", "-Werror", *cflags, source, "-o", shared, *libs,
             f"-Wl,-rpath,{libdir}"])
        self.run_consumer(shared, os.path.realpath(libdir))
        # The static archive with what Libs.private adds.
        static = os.path.join(self.tmp, "pc_static")
        static_libs = ["-l:librocmmem.a" if a == "-lrocmmem" else a for a in static_libs]
        run([cc, "-std=c11", "-Wall", "-Werror", *cflags, source, "-o", static, *static_libs])
        self.run_consumer(static)

    def test_cmake_package(self):
        """find_package(rocmmem CONFIG) from a moved copy of the prefix: both targets work."""
        moved = os.path.join(self.tmp, "moved", "elsewhere")
        shutil.copytree(self.prefix, moved, symlinks=True)
        build = os.path.join(self.tmp, "consumer-build")
        run([self.cmake, "-S", os.path.join(self.source, "tests", "install", "consumer"),
             "-B", build, f"-DCMAKE_PREFIX_PATH={moved}", f"-DCMAKE_C_COMPILER={env('CC')}",
             "-DCMAKE_BUILD_TYPE=Release"])
        with open(os.path.join(build, "CMakeCache.txt")) as f:
            self.assertIn(f"rocmmem_DIR:PATH={moved}/", f.read())
        run([self.cmake, "--build", build])
        lib_dir = self.dirs["LIBDIR"]
        self.run_consumer(os.path.join(build, "consumer_shared"),
                          lib_dir if os.path.isabs(lib_dir) else os.path.join(moved, lib_dir))
        self.run_consumer(os.path.join(build, "consumer_static"))


if __name__ == "__main__":
    unittest.main()
