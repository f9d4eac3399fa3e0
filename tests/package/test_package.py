# SPDX-License-Identifier: MIT
"""The Debian packages, built from the tree with Debian's own tools, checked, installed and
purged.

dpkg-buildpackage builds the binary packages (debian/) from a copy of the source tree in a
scratch directory; lintian must find nothing at its default level (no error, no warning).
Then, as root on this machine, `apt-get install ./*.deb` installs them (their dependencies
are the build's, already installed: nothing is downloaded): the users and the metrics
directory are created, rocmmemd.socket and rocmmem-exporter.socket are enabled (the per-user
units are not), the installed units pass `systemd-analyze verify`, the packaged daemon writes
its metrics textfile and a real Prometheus scrapes the packaged exporter, each run as its
installed unit says (tests/exporter's scenario on the packaged files; where systemd is PID 1,
also `rocmmemctl status` through the socket the package enabled, and the exporter through
its own), and a program builds against librocmmem-dev through pkg-config without a
single -I or -L. `apt-get purge` then must leave none of the packages' files, no
configuration, no state and no enablement behind (the system users stay, as Debian keeps
them).

The machine is left as found: the install part is skipped where any of the packages is
installed already or where /etc/rocmmemd or /var/lib/rocmmemd exist (a purge would take them).

Environment (set by CMake): ROCMMEM_SOURCE_DIR, CC.
"""
import glob
import io
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "exporter"))
import test_service  # noqa: E402  (the services as their units run them, and Prometheus)

PACKAGES = ("librocmmem1", "librocmmem-dev", "rocmmemd", "rocmmemctl", "rocmmem-exporter")
TOOLS = ("dpkg-buildpackage", "lintian", "apt-get", "git")


def packaged_service():
    """tests/exporter's scenario on what the packages installed: their units in
    /lib/systemd/system, their programs in /usr, their users and metrics directory. (A class
    made here, not at module level, so that unittest does not run it outside the install.)"""

    class PackagedService(test_service.Service):
        @classmethod
        def setUpClass(cls):
            cls.tmp = tempfile.mkdtemp(prefix="rocmmem-packaged-")
            os.chmod(cls.tmp, 0o755)  # the service users reach the socket
            cls.units = "/lib/systemd/system"
            cls.made_var = False  # the package's: its purge takes it

        def test_exporter_without_daemon(self):
            self.skipTest("covered by tests/exporter on the installed build tree")

    return PackagedService


def run(args, timeout=600, check=True, **kw):
    kw.setdefault("stdout", subprocess.PIPE)
    kw.setdefault("stderr", subprocess.STDOUT)
    r = subprocess.run(args, text=True, timeout=timeout, **kw)
    if check and r.returncode != 0:
        raise AssertionError(f"{' '.join(args)} exited {r.returncode}:\n{r.stdout[-8000:]}")
    return r


def installed(pkg):
    r = subprocess.run(["dpkg-query", "-W", "-f=${Status}", pkg], capture_output=True,
                       text=True)
    return r.returncode == 0 and "installed" in r.stdout and "not-installed" not in r.stdout


def apt_get(*args):
    """apt-get, waiting (bounded) while another process holds the dpkg lock."""
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    return run(["apt-get", "-o", "DPkg::Lock::Timeout=300", "-y", "-q", *args], env=env,
               timeout=900)


@unittest.skipUnless(all(shutil.which(t) for t in TOOLS),
                     f"needs {', '.join(TOOLS)} (scripts/setup.sh installs them)")
class Package(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        source = os.environ.get("ROCMMEM_SOURCE_DIR")
        if not source:
            raise unittest.SkipTest("ROCMMEM_SOURCE_DIR is not set: run this test through ctest")
        cls.tmp = tempfile.mkdtemp(prefix="rocmmem-package-")
        src = os.path.join(cls.tmp, "rocmmem")
        # The tree as git sees it (committed or not, ignored files left out): no build trees.
        files = run(["git", "-C", source, "ls-files", "-z", "--cached", "--others",
                     "--exclude-standard"]).stdout.split("\0")
        for f in filter(None, files):
            if os.path.isfile(os.path.join(source, f)):
                os.makedirs(os.path.join(src, os.path.dirname(f)), exist_ok=True)
                shutil.copy2(os.path.join(source, f), os.path.join(src, f))
        start = time.monotonic()
        env = dict(os.environ, DEB_BUILD_OPTIONS=f"parallel={os.cpu_count() or 1} nocheck")
        cls.build_log = run(["dpkg-buildpackage", "-us", "-uc", "-b"], cwd=src, env=env,
                            timeout=1200).stdout
        cls.build_seconds = time.monotonic() - start
        cls.debs = {os.path.basename(d).split("_")[0]: d
                    for d in glob.glob(os.path.join(cls.tmp, "*.deb"))}
        cls.changes = glob.glob(os.path.join(cls.tmp, "*.changes"))

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_built(self):
        """one package each for the daemon, library, -dev files, CLI and exporter."""
        print(f"\ndpkg-buildpackage: {self.build_seconds:.0f} s", flush=True)
        for pkg in PACKAGES:
            self.assertIn(pkg, self.debs, self.build_log[-4000:])
        self.assertEqual(len(self.changes), 1)

    def test_lintian_clean(self):
        """lintian's default level finds nothing in the packages."""
        r = run(["lintian", *self.changes], check=False)
        findings = [line for line in r.stdout.splitlines()
                    if "running with root privileges" not in line]
        self.assertEqual((findings, r.returncode), ([], 0), r.stdout)

    def contents(self, pkg):
        """The paths a package ships (files and links, not directories)."""
        out = run(["dpkg-deb", "-c", self.debs[pkg]]).stdout
        paths = []
        for line in out.splitlines():
            path = line.split(None, 5)[5].split(" -> ")[0].lstrip(".")
            if not line.startswith("d"):
                paths.append(path)
        return paths

    def test_split(self):
        """what goes where: the library and its plugin, -dev files, daemon and units."""
        lib = self.contents("librocmmem1")
        self.assertTrue(any(p.endswith("/librocmmem.so.1") for p in lib), lib)
        self.assertTrue(any(p.endswith("/rocmmem/librocmmem_torch.so") for p in lib), lib)
        dev = self.contents("librocmmem-dev")
        for want in ("/usr/include/rocmmem.h", "/librocmmem.so", "/librocmmem.a",
                     "/pkgconfig/rocmmem.pc", "/cmake/rocmmem/rocmmemConfig.cmake"):
            self.assertTrue(any(p.endswith(want) for p in dev), (want, dev))
        daemon = self.contents("rocmmemd")
        for want in ("/usr/sbin/rocmmemd", "/lib/systemd/system/rocmmemd.service",
                     "/lib/systemd/system/rocmmemd.socket", "/usr/lib/sysusers.d/rocmmemd.conf",
                     "/usr/lib/tmpfiles.d/rocmmemd.conf", "/etc/rocmmemd/rocmmemd.conf",
                     "/usr/share/man/man8/rocmmemd.8.gz", "/usr/share/man/man5/rocmmemd.conf.5.gz"):
            self.assertIn(want, daemon)
        self.assertIn("/usr/bin/rocmmemctl", self.contents("rocmmemctl"))
        exporter = self.contents("rocmmem-exporter")
        for want in ("/usr/bin/rocmmem-exporter", "/lib/systemd/system/rocmmem-exporter.socket",
                     "/usr/share/man/man8/rocmmem-exporter.8.gz"):
            self.assertIn(want, exporter)

    @unittest.skipIf(os.geteuid() != 0, "installing needs root")
    def test_install_and_purge(self):
        """apt-get install ./*.deb sets everything up the Debian way; purge leaves nothing."""
        found = [p for p in PACKAGES if installed(p)]
        found += [d for d in ("/etc/rocmmemd", "/var/lib/rocmmemd") if os.path.exists(d)]
        if found:
            self.skipTest(f"this machine has {', '.join(found)} already: installing and purging "
                          "would change it")
        shipped = {p: self.contents(p) for p in PACKAGES}
        debs = [self.debs[p] for p in PACKAGES]
        self.addCleanup(lambda: [installed(p) and apt_get("purge", p) for p in PACKAGES])
        apt_get("install", *debs)
        self.check_installed()
        apt_get("purge", *PACKAGES)
        for pkg in PACKAGES:
            self.assertFalse(installed(pkg), pkg)
        left = [p for paths in shipped.values() for p in paths
                if os.path.lexists(p) and not p.startswith("/usr/share/doc/")]
        # Shared with other packages: directories only; a file left is the package's.
        self.assertEqual(left, [])
        for path in ("/etc/rocmmemd", "/var/lib/rocmmemd",
                     "/etc/systemd/system/sockets.target.wants/rocmmemd.socket",
                     "/etc/systemd/system/sockets.target.wants/rocmmem-exporter.socket",
                     "/var/lib/systemd/deb-systemd-helper-enabled/rocmmemd.socket.dsh-also",
                     "/var/lib/systemd/deb-systemd-helper-enabled/rocmmem-exporter.socket."
                     "dsh-also"):
            self.assertFalse(os.path.lexists(path), f"{path} is left after purge")

    def check_installed(self):
        import grp
        import pwd
        for user in ("rocmmemd", "rocmmem-exporter"):
            self.assertEqual(grp.getgrgid(pwd.getpwnam(user).pw_gid).gr_name, "rocmmem")
        grp.getgrnam("rocmmem-metrics")
        st = os.stat("/var/lib/rocmmemd/metrics")
        self.assertEqual((oct(st.st_mode & 0o7777), pwd.getpwuid(st.st_uid).pw_name,
                          grp.getgrgid(st.st_gid).gr_name),
                         (oct(0o2750), "rocmmemd", "rocmmem-metrics"))
        conffiles = run(["dpkg-query", "-W", "-f=${Conffiles}", "rocmmemd"]).stdout
        self.assertIn("/etc/rocmmemd/rocmmemd.conf", conffiles)
        # The sockets are enabled; the services start on the first connection; the per-user
        # units are left to the users who want them.
        wants = "/etc/systemd/system/sockets.target.wants"
        for sock in ("rocmmemd.socket", "rocmmem-exporter.socket"):
            self.assertEqual(os.readlink(os.path.join(wants, sock)),
                             f"/lib/systemd/system/{sock}")
        self.assertFalse(os.path.lexists("/etc/systemd/system/multi-user.target.wants/"
                                         "rocmmemd.service"))
        self.assertFalse(glob.glob("/etc/systemd/user/*/rocmmemd.*"))
        units = [f"/lib/systemd/system/{u}" for u in
                 ("rocmmemd.socket", "rocmmemd.service", "rocmmem-exporter.socket",
                  "rocmmem-exporter.service")]
        r = run(["systemd-analyze", "verify", *units], check=False,
                env=dict(os.environ, SYSTEMD_PAGER=""))
        self.assertEqual((r.returncode, r.stdout), (0, ""))
        if os.path.isdir("/run/systemd/system"):  # systemd is PID 1: the real thing
            r = run(["rocmmemctl", "status"], check=False, timeout=60)
            self.assertEqual(r.returncode, 0, r.stdout)
            r = run(["curl", "-sf", "http://127.0.0.1:10437/metrics"], check=False, timeout=60)
            self.assertIn("rocmmemd_up 1", r.stdout)
        self.scrape_packaged()
        # The programs run from /usr with the packaged library.
        for exe in ("/usr/sbin/rocmmemd", "/usr/bin/rocmmemctl", "/usr/bin/rocmmem-exporter"):
            self.assertIn("0.1.0", run([exe, "--version"]).stdout)
            self.assertNotIn("RUNPATH", run(["readelf", "-d", exe]).stdout, exe)
        # librocmmem-dev: pkg-config names only what is outside the system's directories.
        self.assertEqual(run(["pkg-config", "--cflags", "rocmmem"]).stdout.strip(), "")
        self.assertEqual(run(["pkg-config", "--libs", "rocmmem"]).stdout.split(), ["-lrocmmem"])
        exe = os.path.join(self.tmp, "consumer")
        source = os.path.join(os.environ["ROCMMEM_SOURCE_DIR"], "tests", "install", "consumer",
                              "consumer.c")
        run([os.environ.get("CC", "cc"), "-std=c11", "-Wall", "-Werror", source, "-o", exe,
             *run(["pkg-config", "--libs", "rocmmem"]).stdout.split()])
        self.assertIn("librocmmem.so.1 => /", run(["ldd", exe]).stdout)

    def scrape_packaged(self):
        """The packaged daemon writes its textfile and the packaged exporter is scraped by a
        real Prometheus, each run as its installed unit says (where systemd is not PID 1, the
        way tests/exporter plays the service manager)."""
        if not (test_service.ACTIVATE and test_service.PROMTOOL and test_service.PROMETHEUS):
            return  # the exporter test says what is missing
        out = io.StringIO()
        suite = unittest.defaultTestLoader.loadTestsFromTestCase(packaged_service())
        result = unittest.TextTestRunner(stream=out, verbosity=2).run(suite)
        self.assertTrue(result.wasSuccessful(), out.getvalue())
        self.assertEqual(result.testsRun - len(result.skipped), 1, out.getvalue())


if __name__ == "__main__":
    unittest.main()
