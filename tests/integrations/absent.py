# SPDX-License-Identifier: MIT
"""absent: importable stand-ins for the Python packages that upstream ComfyUI imports and Debian 12
does not ship (safetensors, einops, transformers, tokenizers, torchsde, av, spandrel), for the
tests that import upstream ComfyUI with Debian's CPU-only PyTorch.

install() appends a finder at the END of sys.meta_path: a package that is really installed is
always found first and used. A stand-in lets its module import; every name in it is a class
that fails when it is used ("... is a test stand-in: PACKAGE is not in Debian 12"), so a code
path that needs the real package fails loudly instead of doing nothing. `av.logging` raises
ImportError, which makes torchvision treat PyAV as absent, as it is. spandrel alone is a
working stand-in (absent/spandrel/): the upscale-model nodes load a tiny model through it.
"""
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
import types

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGES = ("safetensors", "einops", "transformers", "tokenizers", "torchsde", "av")
WRITTEN = {"spandrel": os.path.join(HERE, "absent", "spandrel", "__init__.py")}


class _Unusable(type):
    def __getattr__(cls, name):
        if name.startswith("__"):
            raise AttributeError(name)
        raise NotImplementedError(cls._why)


def _placeholder(module, name):
    why = (f"{module}.{name} is a test stand-in: {module.split('.')[0]} is not in Debian 12 "
           "(tests/integrations/absent.py)")

    def fail(*args, **kwargs):
        raise NotImplementedError(why)

    return _Unusable(name, (), {"_why": why, "__init__": fail, "__call__": fail,
                                "__module__": module})


def _module_getattr(module):
    def __getattr__(name):
        if name.startswith("__"):
            raise AttributeError(name)
        if module == "av" and name == "logging":
            raise ImportError("av is a test stand-in, not PyAV")
        value = _placeholder(module, name)
        setattr(sys.modules[module], name, value)
        return value

    return __getattr__


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name, path, target=None):
        top = name.split(".")[0]
        if top in WRITTEN and name == top:
            return importlib.util.spec_from_file_location(name, WRITTEN[top])
        if top in PACKAGES:
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        return None

    def create_module(self, spec):
        m = types.ModuleType(spec.name)
        m.__path__ = []
        m.__getattr__ = _module_getattr(spec.name)
        m.STANDIN = True
        return m

    def exec_module(self, module):
        pass


_finder = _Finder()


def install():
    """Serves the stand-ins for the packages that are not installed (idempotent)."""
    if _finder not in sys.meta_path:
        sys.meta_path.append(_finder)


def stood_in():
    """The stand-ins imported so far."""
    return sorted(n for n, m in sys.modules.items() if getattr(m, "STANDIN", False))
