# SPDX-License-Identifier: MIT
"""rocmmem: Python over librocmmem, the client library of rocmmemd (the GPU memory daemon).

    import rocmmem

    with rocmmem.connect(name="my-host", fail_safe=True) as client:
        with client.lease("64M", timeout=30) as lease:
            lease.buffer[:5] = b"hello"

Standard library only: librocmmem.so.1 is loaded with ctypes when connect() is first called
($ROCMMEM_LIBRARY overrides where from), so importing this package never fails for lack of it.
See docs/python.md for the whole API.
"""
import atexit as _atexit

from ._version import __version__
from .client import Client, Eviction, Lease, Model, connect, _close_all
from .errors import (Busy, ClientClosed, DaemonUnavailable, Deadlock, Error, InvalidArgument,
                     LibraryNotFound, NotFound, OutOfMemory, PermissionDenied, Stale, Timeout,
                     TooLarge)
from ._native import MODEL_CLASSES
from .sizes import format_size, parse_size
from ._progress import WaitProgress

__all__ = [
    "__version__", "connect", "Client", "Lease", "Model", "Eviction", "WaitProgress", "Error",
    "DaemonUnavailable", "OutOfMemory", "Timeout", "TooLarge", "Deadlock", "PermissionDenied",
    "Busy", "NotFound", "InvalidArgument", "Stale", "ClientClosed", "LibraryNotFound",
    "parse_size",
    "format_size", "MODEL_CLASSES",
]

_atexit.register(_close_all)
