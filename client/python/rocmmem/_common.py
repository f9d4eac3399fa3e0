# SPDX-License-Identifier: MIT
"""_common: what the client's modules share: the logger, timeouts and strings as librocmmem
takes them, and user callbacks that must never raise into C."""
import logging
import math
import threading

log = logging.getLogger("rocmmem")

_INT64_MAX = (1 << 63) - 1

# KeyboardInterrupt or SystemExit raised inside a callback cannot cross C: it is kept here and
# raised in the same thread once the call into C returns.
_pending = threading.local()


def _timeout_ms(timeout, what="timeout"):
    """Seconds (None or inf: no limit) as librocmmem's milliseconds (-1: no limit)."""
    if timeout is None:
        return -1
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
        raise TypeError(f"{what} is a number of seconds or None, not {timeout!r}")
    t = float(timeout)
    if math.isnan(t) or t < 0:
        raise ValueError(f"{what} must be >= 0 seconds (or None to wait as long as it takes), "
                         f"not {timeout!r}")
    if math.isinf(t):
        return -1
    return min(math.ceil(t * 1000), _INT64_MAX)


def _encode(value, what):
    if value is None:
        return None
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8")
    raise TypeError(f"{what} must be a str, not {type(value).__name__}")


def _call_user(fn, *args, what):
    """Calls a user callback; logs what it raises (it must never reach C). Returns
    (True, result) on success, (False, None) when it raised."""
    try:
        return True, fn(*args)
    except (KeyboardInterrupt, SystemExit) as e:
        _pending.exc = e
    except BaseException:
        log.exception("rocmmem: %s raised", what)
    return False, None
