# SPDX-License-Identifier: MIT
"""sizes: byte sizes as every rocmmem tool writes them ("512M", "1.5G", "2GiB", "4096")."""
import re

__all__ = ["parse_size", "format_size"]

_SHIFTS = {"": 0, "K": 10, "M": 20, "G": 30, "T": 40}
# digits[.digits] then nothing, "B", or K/M/G/T optionally followed by "iB" (any case).
_SIZE = re.compile(r"([0-9]+)(?:\.([0-9]{1,6}))?(?:([KMGT])(?:[iI][bB])?|([bB]))?\Z",
                   re.IGNORECASE)


def parse_size(value):
    """Returns a size in bytes: an int as it is, or a string in the daemon's syntax.

    Strings are bytes or a binary suffix K, M, G, T (also KiB ... TiB, any case), fractions
    only with a suffix and only when they come to whole bytes ("1.5G"); "4GB" is refused as
    ambiguous, as rocmmemd and rocmmemctl refuse it. Raises ValueError (TypeError for other
    types).
    """
    if isinstance(value, bool):
        raise TypeError("a size is an int or a string such as '512M', not a bool")
    if isinstance(value, int):
        if value < 0:
            raise ValueError(f"a size cannot be negative: {value}")
        return value
    if not isinstance(value, str):
        raise TypeError(f"a size is an int or a string such as '512M', not "
                        f"{type(value).__name__}")
    m = _SIZE.match(value.strip())
    if not m:
        raise ValueError(f"invalid size {value!r}: expected bytes with an optional K, M, G or "
                         f"T suffix, e.g. 512M")
    whole, frac, unit, _ = m.groups()
    shift = _SHIFTS[(unit or "").upper()]
    if frac and not shift:
        raise ValueError(f"invalid size {value!r}: a fraction needs a suffix (K, M, G or T)")
    n = int(whole) << shift
    if frac:
        num = int(frac) << shift
        div = 10 ** len(frac)
        if num % div:
            raise ValueError(f"invalid size {value!r}: not a whole number of bytes")
        n += num // div
    if n >= 1 << 64:
        raise ValueError(f"invalid size {value!r}: too large")
    return n


def format_size(n):
    """Formats bytes the way the daemon's messages do: "512 MiB", "1.50 GiB", "0 B"."""
    units = ("B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB")
    u = 0
    v = n
    while v >= 1024 and u + 1 < len(units):
        v >>= 10
        u += 1
    if u == 0 or n % (1 << (10 * u)) == 0:
        return f"{v} {units[u]}"
    return f"{n / (1 << (10 * u)):.2f} {units[u]}"
