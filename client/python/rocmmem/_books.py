# SPDX-License-Identifier: MIT
"""_books: what rocmmemd's reconciled books say of one process on one device, read from a
status() dict, in the words the integrations' log lines and status node use.

The daemon compares what every connection of a process declared (leases and reservations)
with what the device's telemetry measures the process to hold (KFD on AMD, NVML on NVIDIA),
smoothed over a few samples; what is held past the declaration and its tolerance is
"undeclared" and charged to the process. On the host backend nothing is measured.
"""
from .sizes import format_size

CANNOT = "rocmmemd cannot measure a process's GPU memory here (host memory)"


def books_of(st, pid, device):
    """(declared, measured, undeclared) of process pid on device, as status() reports them;
    (declared, None, None) where the device is not measurable; None when status() lists no
    client of pid (or comes from a daemon without reconciled books)."""
    for c in (st or {}).get("clients", []):
        if c.get("pid") != pid or "books" not in c:
            continue
        b = next((x for x in c["books"] if x.get("device") == device), None)
        if b is None:  # declared nothing and holds nothing measured there
            measurable = c.get("measurable", False)
            return (0, 0, 0) if measurable else (0, None, None)
        if not b.get("measurable"):
            return b.get("declared_bytes", 0), None, None
        return b.get("declared_bytes", 0), b.get("measured_bytes", 0), \
            b.get("undeclared_bytes", 0)
    return None


def books_text(st, pid, device):
    """The books of pid on device as words ("rocmmemd measures the process at 3 GiB, 1 GiB
    declared: 2 GiB undeclared, charged"), or None when status() has no books for it."""
    books = books_of(st, pid, device)
    if books is None:
        return None
    declared, measured, undeclared = books
    if measured is None:
        return f"the process declared {format_size(declared)}; {CANNOT}"
    text = (f"rocmmemd measures the process at {format_size(measured)}, "
            f"{format_size(declared)} declared")
    if undeclared:
        text += f": {format_size(undeclared)} undeclared, charged"
    return text
