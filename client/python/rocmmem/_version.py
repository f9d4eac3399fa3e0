# SPDX-License-Identifier: MIT
"""_version: the package's version, kept equal to the project's (CMakeLists.txt project()
VERSION; tests/python/test_packaging.py checks it)."""
__version__ = "0.1.0"
