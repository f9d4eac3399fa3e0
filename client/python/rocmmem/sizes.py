# SPDX-License-Identifier: MIT
"""sizes: byte sizes as every rocmmem tool writes them ("512M", "1.5G", "2GiB", "4096")."""
import re

__all__ = ["parse_size", "format_size"]

_SHIFTS = {"": 0, "K": 10, "M": 20, "G": 30, "T": 40}
# The rule of common/size.c (size_parse), which rocmmemd and rocmmemctl use: ASCII digits, a
# fraction of 1 to 18 digits, then nothing, "B", or K/M/G/T optionally followed by "iB" (any
# case; ASCII only: no Kelvin sign for K). No space, sign, exponent or decimal comma.
_FRAC_DIGITS = 18
_SIZE = re.compile(r"([0-9]+)(?:\.([0-9]{1,%d}))?(?:([KMGT])(?:IB)?|(B))?" % _FRAC_DIGITS,
                   re.IGNORECASE | re.ASCII)


def parse_size(value):
    """Returns a size in bytes: an int as it is, or a string in the daemon's syntax.

    Strings are bytes or a binary suffix K, M, G, T (also KiB ... TiB, any case). A fraction
    (at most 18 digits) needs a suffix and is truncated to whole bytes: "0.9G" is 966367641,
    floor(0.9 * 2**30), as rocmmemd and rocmmemctl read it. "4GB" is refused as ambiguous, as
    they refuse it; so are spaces around the text. Raises ValueError (TypeError for other
    types); a size must fit in 64 bits.
    """
    if isinstance(value, bool):
        raise TypeError("a size is an int or a string such as '512M', not a bool")
    if isinstance(value, int):
        if value < 0:
            raise ValueError(f"a size cannot be negative: {value}")
        if value >= 1 << 64:
            raise ValueError(f"a size must fit in 64 bits: {value}")
        return int(value)
    if not isinstance(value, str):
        raise TypeError(f"a size is an int or a string such as '512M', not "
                        f"{type(value).__name__}")
    m = _SIZE.fullmatch(value)
    if not m:
        raise ValueError(f"invalid size {value!r}: expected bytes with an optional K, M, G or "
                         f"T suffix, e.g. 512M or 0.9G")
    whole, frac, unit, _ = m.groups()
    shift = _SHIFTS[(unit or "").upper()]
    if frac and not shift:
        raise ValueError(f"invalid size {value!r}: a fraction needs a suffix (K, M, G or T)")
    # Past 20 digits (leading zeros aside) nothing fits, and int() would refuse 4300 digits.
    whole = whole.lstrip("0")
    if len(whole) > 20 or (int(whole or "0") << shift) >= 1 << 64:
        raise ValueError(f"invalid size {value!r}: too large")
    n = int(whole or "0") << shift
    if frac:
        n += (int(frac) << shift) // 10 ** len(frac)
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
