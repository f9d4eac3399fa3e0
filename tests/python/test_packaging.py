# SPDX-License-Identifier: MIT
"""The package installs from the source tree as ComfyUI and FramePack users install it: with
pip (into a directory, and into a plain venv, with and without build isolation, and editable)
and with uv where uv exists, offline, through its own build backend (standard library only:
no setuptools, no wheel package); the installed copy imports and talks to a daemon. Its
version is the project's."""
import ast
import os
import re
import shutil
import subprocess
import sys
import unittest

from fixture import PYTHON, SOURCE_DIR, PyTestCase, child_env, read, rocmmem, run_python

PACKAGE_DIR = os.path.join(SOURCE_DIR, "client", "python")

# Run by the installed copy: imported from where it was installed, a lease from the daemon.
SMOKE = """
    import os, sys
    import rocmmem
    where = os.path.dirname(rocmmem.__file__)
    assert where.startswith(sys.argv[1]), (where, sys.argv[1])
    with rocmmem.connect(socket=sys.argv[2], name="installed") as c:
        with c.lease("2M") as lease:
            lease.buffer[:2] = b"ok"
            print(rocmmem.__version__, bytes(lease.buffer[:2]).decode(), c.backend)
    """


def pip_available():
    return subprocess.run([PYTHON, "-m", "pip", "--version"], capture_output=True).returncode == 0


class PackagingTest(PyTestCase):
    def setUp(self):
        super().setUp()
        # Build from a copy: setuptools writes build/ and *.egg-info beside the sources.
        self.src = os.path.join(self.dir, "src")
        shutil.copytree(PACKAGE_DIR, self.src,
                        ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))

    def installed_env(self, path):
        """A child environment that sees only the installed copy, not client/python."""
        env = child_env()
        env["PYTHONPATH"] = path
        return env

    def smoke(self, python, prefix, env):
        if not getattr(self, "smoke_daemon", None):
            self.smoke_daemon = self.start_daemon()
        p = subprocess.run([python, "-c", SMOKE.replace("\n    ", "\n"), prefix, self.sock],
                           env=env, capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout, f"{rocmmem.__version__} ok host\n")

    def test_version_is_the_projects(self):
        cmake = read(os.path.join(SOURCE_DIR, "CMakeLists.txt"))
        version = re.search(r"project\(rocmmem VERSION ([0-9.]+)", cmake).group(1)
        self.assertEqual(rocmmem.__version__, version,
                         "bump client/python/rocmmem/_version.py with the project's version")
        # pyproject.toml leaves it to the build backend, which reads the assignment.
        pyproject = read(os.path.join(PACKAGE_DIR, "pyproject.toml"))
        self.assertIn('dynamic = ["version"]', pyproject)
        self.assertIn('build-backend = "rocmmem_build"', pyproject)
        tree = ast.parse(read(os.path.join(PACKAGE_DIR, "rocmmem", "_version.py")))
        literal = [n.value.value for n in tree.body if isinstance(n, ast.Assign)]
        self.assertEqual(literal, [version])

    def test_no_runtime_dependency(self):
        pyproject = read(os.path.join(PACKAGE_DIR, "pyproject.toml"))
        self.assertIn("dependencies = []", pyproject)
        # Every import of the package is of itself or of the standard library.
        stdlib = sys.stdlib_module_names
        # The integrations import their host's modules (torch, FramePack's) lazily.
        own = {"torch", "framepack", "_fptorch"}
        for name in os.listdir(os.path.join(PACKAGE_DIR, "rocmmem")):
            if not name.endswith(".py") or name[:-3] in own:
                continue
            tree = ast.parse(read(os.path.join(PACKAGE_DIR, "rocmmem", name)))
            for node in ast.walk(tree):
                if isinstance(node, ast.Import):
                    mods = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0:
                    mods = [node.module]
                else:
                    continue
                for m in mods:
                    self.assertIn(m.split(".")[0], stdlib, f"{name} imports {m}")

    def test_pip_install_target(self):
        if not pip_available():
            self.skipTest(f"{PYTHON} -m pip is missing (Debian: apt-get install python3-pip "
                          f"python3-setuptools python3-wheel)")
        target = os.path.join(self.dir, "target")
        p = subprocess.run([PYTHON, "-m", "pip", "install", "--no-index", "--no-build-isolation",
                            "--disable-pip-version-check", "--target", target, self.src],
                           capture_output=True, text=True, timeout=300)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        files = sorted(os.listdir(os.path.join(target, "rocmmem")))
        for f in ("__init__.py", "_native.py", "client.py", "errors.py", "_version.py"):
            self.assertIn(f, files)
        self.assertIn(f"rocmmem-{rocmmem.__version__}.dist-info", os.listdir(target))
        self.smoke(PYTHON, target, self.installed_env(target))

    def test_pip_install_into_a_plain_venv(self):
        """A venv that sees nothing of the system's packages (no wheel, Debian's setuptools
        or not): the documented commands work offline, with build isolation and without."""
        if not pip_available():
            self.skipTest(f"{PYTHON} -m pip is missing")
        venv = os.path.join(self.dir, "venv")
        p = subprocess.run([PYTHON, "-m", "venv", venv], capture_output=True, text=True,
                           timeout=300)
        if p.returncode != 0:
            self.skipTest(f"python3 -m venv does not work here (Debian: python3-venv): "
                          f"{p.stderr.strip()}")
        vpython = os.path.join(venv, "bin", "python")
        env = child_env()
        env.pop("PYTHONPATH")
        for how in (["--no-index"], ["--no-index", "--no-build-isolation"]):
            with self.subTest(how=how):
                p = subprocess.run([vpython, "-m", "pip", "install", *how,
                                    "--disable-pip-version-check", self.src],
                                   capture_output=True, text=True, timeout=300, env=env)
                self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
                self.smoke(vpython, venv, env)
                p = subprocess.run([vpython, "-m", "pip", "uninstall", "-y", "rocmmem"],
                                   capture_output=True, text=True, timeout=120, env=env)
                self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        # Editable: the venv imports the sources themselves.
        p = subprocess.run([vpython, "-m", "pip", "install", "--no-index", "-e", self.src,
                            "--disable-pip-version-check"],
                           capture_output=True, text=True, timeout=300, env=env)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.smoke(vpython, self.src, env)

    def test_wheel_record(self):
        """The backend's wheel: every file in RECORD with its true hash and size."""
        import base64
        import hashlib
        import zipfile
        sys.path.insert(0, os.path.join(self.src, "_build"))
        try:
            import rocmmem_build
            name = rocmmem_build.build_wheel(self.dir)
        finally:
            sys.path.pop(0)
            sys.modules.pop("rocmmem_build", None)
        self.assertEqual(name, f"rocmmem-{rocmmem.__version__}-py3-none-any.whl")
        with zipfile.ZipFile(os.path.join(self.dir, name)) as z:
            names = set(z.namelist())
            info = f"rocmmem-{rocmmem.__version__}.dist-info"
            record = z.read(f"{info}/RECORD").decode().splitlines()
            listed = set()
            for line in record:
                path, digest, size = line.rsplit(",", 2)
                listed.add(path)
                if path == f"{info}/RECORD":
                    continue
                data = z.read(path)
                want = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
                self.assertEqual((digest, int(size)), (f"sha256={want.decode()}", len(data)))
            self.assertEqual(listed, names)
            self.assertIn("rocmmem/client.py", names)
            self.assertIn(f"Version: {rocmmem.__version__}\n",
                          z.read(f"{info}/METADATA").decode())

    def test_uv_install(self):
        uv = shutil.which("uv")
        if not uv:
            self.skipTest("uv is not installed: the uv install is not checked here")
        target = os.path.join(self.dir, "uv-target")
        p = subprocess.run([uv, "pip", "install", "--offline", "--no-build-isolation",
                            "--python", PYTHON, "--target", target, self.src],
                           capture_output=True, text=True, timeout=300,
                           env=dict(os.environ, UV_CACHE_DIR=os.path.join(self.dir, "uv-cache")))
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.smoke(PYTHON, target, self.installed_env(target))

    def test_imports_without_the_library(self):
        p = run_python("import rocmmem; print(rocmmem.__version__)",
                       env=child_env(ROCMMEM_LIBRARY="/nonexistent.so"))
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout.strip(), rocmmem.__version__)


if __name__ == "__main__":
    unittest.main()
