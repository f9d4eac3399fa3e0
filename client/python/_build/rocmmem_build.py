# SPDX-License-Identifier: MIT
"""rocmmem_build: the package's own PEP 517 build backend, standard library only.

Why not setuptools: with Debian's setuptools (66) a wheel needs the `wheel` package, which a
plain venv does not have, and offline nothing can fetch it (`invalid command 'bdist_wheel'`).
The package is pure Python with no build step, so a wheel is a zip of its files plus the
metadata of PEP 566/627 (METADATA, WHEEL, RECORD): this backend writes exactly that, so that
`pip install ./client/python` works in any venv, offline, with or without build isolation
(it requires nothing). `uv pip install` uses it the same way.

The metadata comes from pyproject.toml's [project] table (read with tomllib, Python 3.11; on
older Pythons with tomli if it is installed); the version from rocmmem/_version.py.
"""
import ast
import base64
import hashlib
import io
import os
import tarfile
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = "rocmmem"
TAG = "py3-none-any"


def _pyproject():
    try:
        import tomllib as toml
    except ImportError:
        try:
            import tomli as toml
        except ImportError:
            raise RuntimeError("building rocmmem needs Python 3.11 or later (tomllib), or the "
                               "tomli package, to read pyproject.toml") from None
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        return toml.load(f)["project"]


def _version():
    with open(os.path.join(ROOT, PACKAGE, "_version.py"), encoding="utf-8") as f:
        tree = ast.parse(f.read())
    for node in tree.body:
        if isinstance(node, ast.Assign) and node.targets[0].id == "__version__":
            return node.value.value
    raise RuntimeError("rocmmem/_version.py has no __version__")


def _metadata():
    """METADATA (core metadata 2.1) of the package, as text."""
    p = _pyproject()
    lines = ["Metadata-Version: 2.1", f"Name: {p['name']}", f"Version: {_version()}",
             f"Summary: {p['description']}", f"License: {p['license']['text']}",
             f"Requires-Python: {p['requires-python']}"]
    lines += [f"Classifier: {c}" for c in p.get("classifiers", [])]
    lines += [f"Requires-Dist: {d}" for d in p.get("dependencies", [])]
    with open(os.path.join(ROOT, p["readme"]), encoding="utf-8") as f:
        readme = f.read()
    lines.append("Description-Content-Type: text/markdown")
    return "\n".join(lines) + "\n\n" + readme


def _sources():
    """The package's modules: (path in the archive, path on disk), sorted."""
    out = []
    for name in sorted(os.listdir(os.path.join(ROOT, PACKAGE))):
        if name.endswith(".py"):
            out.append((f"{PACKAGE}/{name}", os.path.join(ROOT, PACKAGE, name)))
    return out


def _dist_info():
    return f"{PACKAGE}-{_version()}.dist-info"


def _wheel_name():
    return f"{PACKAGE}-{_version()}-{TAG}.whl"


def _record_line(arcname, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{arcname},sha256={digest},{len(data)}"


def _write_wheel(directory, files):
    """A wheel in directory holding files ((arcname, bytes)) and the dist-info; its name."""
    info = _dist_info()
    files = list(files) + [
        (f"{info}/METADATA", _metadata().encode()),
        (f"{info}/WHEEL", (f"Wheel-Version: 1.0\nGenerator: rocmmem_build\n"
                           f"Root-Is-Purelib: true\nTag: {TAG}\n").encode()),
        (f"{info}/top_level.txt", f"{PACKAGE}\n".encode()),
    ]
    record = [_record_line(name, data) for name, data in files] + [f"{info}/RECORD,,"]
    files.append((f"{info}/RECORD", ("\n".join(record) + "\n").encode()))
    name = _wheel_name()
    with zipfile.ZipFile(os.path.join(directory, name), "w", zipfile.ZIP_DEFLATED) as z:
        for arcname, data in files:
            z.writestr(zipfile.ZipInfo(arcname, date_time=(1980, 1, 1, 0, 0, 0)), data,
                       zipfile.ZIP_DEFLATED)
    return name


def _read(path):
    with open(path, "rb") as f:
        return f.read()


# --- PEP 517 and PEP 660 hooks ---------------------------------------------------------------

def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    info = os.path.join(metadata_directory, _dist_info())
    os.makedirs(info, exist_ok=True)
    with open(os.path.join(info, "METADATA"), "w", encoding="utf-8") as f:
        f.write(_metadata())
    return _dist_info()


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    return _write_wheel(wheel_directory, [(a, _read(p)) for a, p in _sources()])


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    """An editable install: a .pth file that puts this source directory on sys.path."""
    return _write_wheel(wheel_directory, [(f"__editable__.{PACKAGE}.pth",
                                           (ROOT + "\n").encode())])


def build_sdist(sdist_directory, config_settings=None):
    base = f"{PACKAGE}-{_version()}"
    name = f"{base}.tar.gz"
    members = [("pyproject.toml", os.path.join(ROOT, "pyproject.toml")),
               ("README.md", os.path.join(ROOT, "README.md")),
               ("_build/rocmmem_build.py", os.path.abspath(__file__))] + _sources()
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz", format=tarfile.PAX_FORMAT) as t:
        for arcname, path in members:
            t.add(path, arcname=f"{base}/{arcname}", recursive=False)
        data = _metadata().encode()
        pkg_info = tarfile.TarInfo(f"{base}/PKG-INFO")
        pkg_info.size = len(data)
        t.addfile(pkg_info, io.BytesIO(data))
    return name
