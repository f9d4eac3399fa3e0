# SPDX-License-Identifier: MIT
"""errors: the exceptions of the rocmmem package, one class per kind of refusal.

Every failure the daemon or librocmmem reports is an Error (an OSError): .errno is the
positive errno and .strerror the daemon's own explanation (rocmmem_last_error()), e.g.
"requested 8 GiB on device 0: 2 GiB of its 16 GiB budget is free; ...".
"""
import errno as _errno

__all__ = ["Error", "DaemonUnavailable", "OutOfMemory", "Timeout", "TooLarge", "Deadlock",
           "PermissionDenied", "Busy", "NotFound", "InvalidArgument", "Stale", "ClientClosed",
           "LibraryNotFound"]


class LibraryNotFound(ImportError):
    """librocmmem.so.1 (or $ROCMMEM_LIBRARY) could not be loaded."""


class Error(OSError):
    """A request librocmmem or the daemon refused: .errno (positive), .strerror (the reason)."""

    def __init__(self, code, message=None):
        code = abs(int(code))
        if not message:
            message = _errno.errorcode.get(code, f"errno {code}")
        super().__init__(code, message)

    def __str__(self):
        name = _errno.errorcode.get(self.errno, str(self.errno))
        return f"{self.strerror} ({name})"

    def __reduce__(self):
        return (type(self), (self.errno, self.strerror))


class DaemonUnavailable(Error, ConnectionError):
    """No daemon to talk to: not running, no socket, or the connection ended."""


class OutOfMemory(Error):
    """ENOMEM: not enough memory free within the budget now (and no time to wait)."""


class Timeout(Error, TimeoutError):
    """ETIMEDOUT: the request waited its whole timeout in vain."""


class TooLarge(Error):
    """E2BIG: larger than the device's budget (or than pinned models leave): never granted."""


class Deadlock(Error):
    """EDEADLK: only this client's own models in use (or a pinned rival) could make room."""


class PermissionDenied(Error, PermissionError):
    """EPERM, EACCES: not this client's model, or no permission on the socket."""


class Busy(Error):
    """EBUSY: in use, already being evicted or trimmed, or a limit of this connection."""


class NotFound(Error, LookupError):
    """ENOENT, ENODEV: no such model, lease or device."""


class InvalidArgument(Error, ValueError):
    """EINVAL: a request the daemon or the library cannot take as given."""


class Stale(Error):
    """ESTALE: what the request names is over: an eviction acked or revoked already, or a
    record a restarted daemon no longer keeps."""


class ClientClosed(Error):
    """EBADF: the client was closed (by close(), or at exit)."""


# The errnos that mean "no daemon": a connection that failed or ended.
UNAVAILABLE_ERRNOS = frozenset({_errno.ECONNREFUSED, _errno.ECONNRESET, _errno.EPIPE,
                                _errno.ESHUTDOWN, _errno.ENOTCONN, _errno.ECONNABORTED})

_BY_ERRNO = {
    _errno.ENOMEM: OutOfMemory,
    _errno.ETIMEDOUT: Timeout,
    _errno.E2BIG: TooLarge,
    _errno.EDEADLK: Deadlock,
    _errno.EPERM: PermissionDenied,
    _errno.EACCES: PermissionDenied,
    _errno.EBUSY: Busy,
    _errno.ENOENT: NotFound,
    _errno.ENODEV: NotFound,
    _errno.EINVAL: InvalidArgument,
    _errno.ESTALE: Stale,
    _errno.EBADF: ClientClosed,
}


def error_class(code, connecting=False):
    """The exception class for a (positive or negative) errno.

    connecting: the error came from rocmmem_connect, where ENOENT means a missing socket
    (DaemonUnavailable) rather than an unknown model or lease (NotFound).
    """
    code = abs(code)
    if code in UNAVAILABLE_ERRNOS or (connecting and code == _errno.ENOENT):
        return DaemonUnavailable
    return _BY_ERRNO.get(code, Error)


def make_error(code, message=None, connecting=False):
    """An instance of the right Error subclass for code, carrying message."""
    return error_class(code, connecting)(code, message)
