#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""gpu_bundle.py: copies what the GPU tests and the GPU benchmark need out of a build into one
directory that runs on another machine (scripts/gpu-bundle.sh builds first, then calls this).

The tests are CTest's own list, `ctest -L '^gpu$'`, read as JSON: each test's command,
environment, working directory, time limit and skip code, with every path into the build or
the source tree rewritten to the bundle's copy of it ({BUNDLE}/build/..., {BUNDLE}/src/...) and
a Python interpreter to {PYTHON} (the target machine's own, with its own PyTorch). Programs
are copied with the shared libraries they need beyond the C library (as scripts/bench.sh
--bundle does); the target needs no compiler, no CMake, no network and no apt. The runner,
gpu_run.py, and manifest.json describing all of this go with them.
"""

import argparse
import datetime
import json
import os
import platform
import shutil
import subprocess
import sys

# What Python tests load besides the files their working directory holds: torch_fixture.py
# runs tests/cli/daemon.py (can_connect) by path.
EXTRA_SOURCES = ["tests/cli/daemon.py"]
# Always carried: the daemon and rocmmemctl (the runner's own check of the bundle), the GPU
# benchmark and its runner, and the C library with its Python package.
ALWAYS_BUILT = ["rocmmemd", "rocmmemctl", "bench/bench_gpu", "bench/build_info.json"]
SYSTEM_LIBS = ("libc.so", "libm.so", "libdl.so", "libpthread.so", "librt.so", "ld-linux")


class Bundle:
    def __init__(self, build, source, out):
        self.build, self.source, self.out = build, source, out
        self.elves = []

    def copy_built(self, rel):
        """Copies BUILD/rel (a file; a directory is only made) into the bundle once; returns
        its bundle path."""
        src = os.path.join(self.build, rel)
        dst = os.path.join(self.out, "build", rel)
        if os.path.isdir(src):
            os.makedirs(dst, exist_ok=True)  # a working directory: only its place
        elif not os.path.exists(dst):
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            shutil.copy2(src, dst, follow_symlinks=True)
            with open(src, "rb") as f:
                if f.read(4) == b"\x7fELF":
                    self.elves.append(dst)
        return "{BUNDLE}/build/" + rel

    def copy_source(self, rel):
        """Copies SOURCE/rel (a file or a directory of Python files) into the bundle."""
        src = os.path.join(self.source, rel)
        dst = os.path.join(self.out, "src", rel)
        if os.path.isdir(src):
            for root, dirs, files in os.walk(src):
                dirs[:] = [d for d in dirs if d != "__pycache__"]
                for name in files:
                    if name.endswith((".py", ".pyi", ".typed", ".cfg", ".toml", ".txt", ".md")):
                        path = os.path.join(root, name)
                        self.copy_source(os.path.relpath(path, self.source))
        elif not os.path.exists(dst):
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            shutil.copy2(src, dst)
        return "{BUNDLE}/src/" + rel

    def path(self, value):
        """A path as the bundle sees it (copying what it names), or value unchanged."""
        for root, copy in ((self.build, self.copy_built), (self.source, self.copy_source)):
            if value == root:
                return "{BUNDLE}/" + ("build" if root == self.build else "src")
            if value.startswith(root + os.sep) and os.path.exists(value):
                return copy(os.path.relpath(value, root))
        return value

    def paths(self, value):
        """As path, for a ':'-separated list (PYTHONPATH, LD_LIBRARY_PATH)."""
        return ":".join(self.path(v) for v in value.split(":"))

    def libraries(self):
        """Copies the shared libraries the programs need, but the C library's own, to lib/."""
        libdir = os.path.join(self.out, "lib")
        os.makedirs(libdir, exist_ok=True)
        needed = set()
        for elf in self.elves:
            try:
                out = subprocess.run(["ldd", elf], capture_output=True, text=True, timeout=60)
            except (OSError, subprocess.SubprocessError):
                continue
            for line in out.stdout.splitlines():
                parts = line.split()
                if "=>" in parts and len(parts) > parts.index("=>") + 1:
                    lib = parts[parts.index("=>") + 1]
                    if lib.startswith("/") and not os.path.basename(lib).startswith(SYSTEM_LIBS):
                        needed.add(lib)
        for lib in sorted(needed):
            shutil.copy2(lib, os.path.join(libdir, os.path.basename(lib)), follow_symlinks=True)
        return sorted(os.path.basename(lib) for lib in needed)


def is_python(program):
    return os.path.basename(program).startswith("python")


def gpu_tests(build):
    """CTest's tests labelled exactly gpu, as its JSON lists them."""
    out = subprocess.run(["ctest", "--show-only=json-v1", "-L", "^gpu$"], cwd=build,
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout)["tests"]


def bundle_test(b, t):
    props = {p["name"]: p["value"] for p in t.get("properties", [])}
    argv = list(t["command"])
    argv[0] = "{PYTHON}" if is_python(argv[0]) else b.path(argv[0])
    cwd = props.get("WORKING_DIRECTORY", b.build)
    if is_python(t["command"][0]):
        # A Python test's scripts sit in its working directory: all of them go.
        b.copy_source(os.path.relpath(cwd, b.source))
    argv[1:] = [b.path(os.path.join(cwd, a)) if os.path.exists(os.path.join(cwd, a)) else
                b.path(a) for a in argv[1:]]
    env = {}
    for kv in props.get("ENVIRONMENT", []):
        name, _, value = kv.partition("=")
        env[name] = b.paths(value)
    return {"name": t["name"], "argv": argv, "env": env, "cwd": b.path(cwd),
            "timeout": props.get("TIMEOUT", 1500), "skip_code": props.get("SKIP_RETURN_CODE")}


def git(source, *args):
    try:
        out = subprocess.run(["git", "-C", source] + list(args), capture_output=True,
                             text=True, timeout=30)
        return out.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build-dir", required=True)
    ap.add_argument("--source-dir", required=True)
    ap.add_argument("--out", required=True, help="the bundle directory (made afresh)")
    args = ap.parse_args()
    build, source = os.path.realpath(args.build_dir), os.path.realpath(args.source_dir)
    out = os.path.abspath(args.out)
    if os.path.exists(out):
        shutil.rmtree(out)
    os.makedirs(out)
    b = Bundle(build, source, out)
    tests = [bundle_test(b, t) for t in gpu_tests(build)]
    if not tests:
        print("gpu_bundle: CTest lists no test labelled gpu in %s" % build, file=sys.stderr)
        return 1
    carried = {rel: b.copy_built(rel) for rel in ALWAYS_BUILT}
    library = os.path.realpath(os.path.join(build, "librocmmem.so.1"))
    carried["library"] = b.path(library)
    carried["python_package"] = b.copy_source("client/python")
    for rel in EXTRA_SOURCES:
        b.copy_source(rel)
    shutil.copy2(os.path.join(source, "bench", "run.py"), os.path.join(out, "bench_run.py"))
    shutil.copy2(os.path.join(source, "scripts", "gpu_run.py"), os.path.join(out, "gpu_run.py"))
    libs = b.libraries()
    manifest = {
        "made": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "made_on": {"host": platform.node(), "kernel": platform.release(),
                    "python": platform.python_version()},
        "git_commit": git(source, "rev-parse", "HEAD"),
        "git_dirty": bool(git(source, "status", "--porcelain", "--untracked-files=no")),
        "carried": carried,
        "libraries": libs,
        "tests": tests,
    }
    with open(os.path.join(out, "manifest.json"), "w", encoding="utf-8") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")
    with open(os.path.join(out, "run-gpu.sh"), "w", encoding="utf-8") as f:
        f.write("#!/bin/sh\n# run-gpu.sh: the GPU tests and benchmark of this bundle, one report"
                " (gpu_run.py --help).\nexec python3 \"$(dirname \"$0\")/gpu_run.py\" \"$@\"\n")
    os.chmod(os.path.join(out, "run-gpu.sh"), 0o755)
    print("gpu_bundle: %d tests (%s), %d libraries, in %s" %
          (len(tests), ", ".join(t["name"] for t in tests), len(libs), out), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
