#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""build_node: builds the ComfyUI node comfyui-rocmmem, a folder whose root is the node, from
integrations/comfyui and client/python (the CMake target comfyui_node runs it into
build/comfyui-rocmmem/); --publish copies a build into a checkout of the node's own repository
and commits it there (what the release CI step runs, before it pushes).

    build_node.py --out DIR [--version V] [--repository URL] [--publisher ID] [--icon URL]
    build_node.py --publish CHECKOUT --out DIR [--message TEXT]

The node: rocmmem_comfyui's modules at the root (__init__.py with NODE_CLASS_MAPPINGS),
vendor/rocmmem/ (the pure-Python rocmmem package, which __init__.py puts on sys.path),
pyproject.toml with [project] and [tool.comfy], README.md, LICENSE, icon.svg. Only regular
files are written (no symlinks: managed installs refuse them), and the output is made anew
each time, so that a file removed from the sources does not linger in it.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
NODE = os.path.join(HERE, "rocmmem_comfyui")
PACKAGE = os.path.join(ROOT, "client", "python", "rocmmem")
REPOSITORY = "https://github.com/rocmmemd/comfyui-rocmmem"
SOURCE = "https://github.com/rocmmemd/rocmmemd"


def package_version():
    with open(os.path.join(PACKAGE, "_version.py"), encoding="utf-8") as f:
        m = re.search(r'^__version__ = "([^"]+)"', f.read(), re.M)
    if not m:
        raise SystemExit("build_node: no __version__ in client/python/rocmmem/_version.py")
    return m.group(1)


def icon_url(repository):
    """The icon's address in the published repository (GitHub serves raw files from
    raw.githubusercontent.com)."""
    m = re.match(r"https://github\.com/([^/]+)/([^/]+?)(\.git)?/?$", repository)
    if m:
        return f"https://raw.githubusercontent.com/{m.group(1)}/{m.group(2)}/main/icon.svg"
    return repository.rstrip("/") + "/icon.svg"


def python_files(directory):
    return sorted(n for n in os.listdir(directory)
                  if n.endswith(".py") and os.path.isfile(os.path.join(directory, n)))


def render(template, out, values):
    with open(template, encoding="utf-8") as f:
        text = f.read()
    for key, value in values.items():
        text = text.replace(f"@{key}@", value)
    left = re.findall(r"@[A-Z_]+@", text)
    if left:
        raise SystemExit(f"build_node: {template}: no value for {', '.join(left)}")
    with open(out, "w", encoding="utf-8") as f:
        f.write(text)


def build(out, values):
    """Writes the node into out (replaced whole)."""
    parent = os.path.dirname(os.path.abspath(out)) or "."
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=".comfyui-rocmmem-", dir=parent)
    try:
        for name in python_files(NODE):
            shutil.copyfile(os.path.join(NODE, name), os.path.join(tmp, name))
        vendor = os.path.join(tmp, "vendor", "rocmmem")
        os.makedirs(vendor)
        for name in python_files(PACKAGE):
            shutil.copyfile(os.path.join(PACKAGE, name), os.path.join(vendor, name))
        render(os.path.join(HERE, "pyproject.toml.in"), os.path.join(tmp, "pyproject.toml"),
               values)
        render(os.path.join(HERE, "README.md.in"), os.path.join(tmp, "README.md"), values)
        shutil.copyfile(os.path.join(HERE, "icon.svg"), os.path.join(tmp, "icon.svg"))
        shutil.copyfile(os.path.join(ROOT, "LICENSE"), os.path.join(tmp, "LICENSE"))
        for d, _, files in os.walk(tmp):
            os.chmod(d, 0o755)
            for f in files:
                os.chmod(os.path.join(d, f), 0o644)
        if os.path.isdir(out):
            shutil.rmtree(out)
        os.rename(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def publish(built, checkout, message):
    """Makes checkout (a git work tree of the node's repository) hold exactly the build, and
    commits the difference. Returns whether there was one."""
    if not os.path.isfile(os.path.join(built, "pyproject.toml")):
        raise SystemExit(f"build_node: {built} holds no built node")
    if not os.path.isdir(os.path.join(checkout, ".git")):
        raise SystemExit(f"build_node: {checkout} is not a git checkout")
    for name in os.listdir(checkout):
        path = os.path.join(checkout, name)
        if name == ".git":
            continue
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        else:
            os.remove(path)
    for name in os.listdir(built):
        src, dst = os.path.join(built, name), os.path.join(checkout, name)
        if os.path.isdir(src):
            shutil.copytree(src, dst)
        else:
            shutil.copyfile(src, dst)
    git = ["git", "-C", checkout]
    subprocess.run(git + ["add", "--all"], check=True)
    if subprocess.run(git + ["diff", "--cached", "--quiet"]).returncode == 0:
        return False
    subprocess.run(git + ["commit", "--quiet", "-m", message], check=True)
    return True


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True, help="the node's folder (replaced whole)")
    p.add_argument("--version", help="default: the rocmmem package's version")
    p.add_argument("--repository", default=REPOSITORY, help="the node's published repository")
    p.add_argument("--source", default=SOURCE, help="rocmmemd's own repository")
    p.add_argument("--publisher", default="rocmmemd", help="the Comfy registry PublisherId")
    p.add_argument("--icon", help="the icon's URL (default: icon.svg in the repository)")
    p.add_argument("--publish", metavar="CHECKOUT",
                   help="commit the node built in --out into this checkout instead")
    p.add_argument("--message", help="the commit message for --publish")
    a = p.parse_args(argv)
    version = a.version or package_version()
    if a.publish:
        changed = publish(a.out, a.publish, a.message or f"comfyui-rocmmem {version}")
        print(f"build_node: {a.publish}: {'committed' if changed else 'already up to date'}")
        return 0
    build(a.out, {"VERSION": version, "REPOSITORY": a.repository, "SOURCE": a.source,
                  "PUBLISHER": a.publisher, "ICON": a.icon or icon_url(a.repository)})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
