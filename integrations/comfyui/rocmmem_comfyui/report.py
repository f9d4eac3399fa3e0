# SPDX-License-Identifier: MIT
"""report: what the status node and ComfyUI's log show: rocmmemd's status, and for this ComfyUI,
per model, what is declared to the daemon beside what is really held.

"Declared" is what rocmmemd reserves for a model (books.py). "Real" is, per model, what
ComfyUI itself counts as loaded (LoadedModel.model_loaded_memory()) and, per process and
device, PyTorch's own counters (torch.cuda.memory_allocated and memory_reserved, where PyTorch
has a GPU) and what rocmmemd measures of the process (its telemetry: KFD's per-process VRAM on
AMD, NVML's on NVIDIA; nothing on the host backend). measured() is the one place that reads
the daemon's measurement: its reconciled books (status' per-client declared, measured and
undeclared bytes, rocmmem._books), or with a daemon without them, the device's process list.
"""
import logging
import sys

log = logging.getLogger("rocmmem.comfyui")

_said = set()  # messages logged once


def once(level, key, message, *args):
    if key not in _said:
        _said.add(key)
        log.log(level, "rocmmem: " + message, *args)


def size(n):
    try:
        from rocmmem import format_size
    except ImportError:
        return f"{int(n)} B"
    return format_size(int(n))


def count(n, what):
    return f"{n} {what}{'' if n == 1 else 's'}"


def torch_bytes(device):
    """(allocated, reserved) by PyTorch's caching allocator on device, or None where
    PyTorch has no GPU (or is not loaded: this never imports it)."""
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    try:
        if not torch.cuda.is_available():
            return None
        return (int(torch.cuda.memory_allocated(device)),
                int(torch.cuda.memory_reserved(device)))
    except Exception:
        return None


def books(st, pid, device):
    """rocmmemd's reconciled books of process pid on device, as rocmmem._books.books_of
    ((declared, measured, undeclared); measured None: not measurable), or None."""
    try:
        from rocmmem._books import books_of
    except ImportError:
        return None
    return books_of(st, pid, device)


def books_line(st, pid, device):
    """The books of pid on device in words, or None (rocmmem._books.books_text)."""
    try:
        from rocmmem._books import books_text
    except ImportError:
        return None
    return books_text(st, pid, device)


def measured(st, pid, device):
    """(bytes, source) rocmmemd measured for process pid on device, or (None, why not)."""
    b = books(st, pid, device)
    if b is not None:
        if b[1] is None:
            return None, "rocmmemd cannot measure a process's GPU memory on its host backend"
        return b[1], "reconciled books"
    d = next((x for x in st.get("devices", []) if x.get("index") == device), None)
    if d is None:
        return None, "no such device"
    if (st.get("daemon", {}).get("backend") or d.get("backend")) == "host":
        return None, "rocmmemd cannot measure a process's GPU memory on its host backend"
    procs = d.get("processes")
    source = d.get("telemetry", {}).get("source")
    if procs is None or not source:
        return None, "rocmmemd has no per-process telemetry for this device"
    held = sum(p.get("vram_bytes", 0) for p in procs if p.get("pid") == pid)
    return held, source


def format_status(st, hooked=None):
    """rocmmemd's status (a status --json dict) as text: daemon, devices, clients, models."""
    d = st.get("daemon", {})
    lines = [f"rocmmemd {d.get('version', '?')}, pid {d.get('pid', '?')}, backend "
             f"{d.get('backend', '?')}"]
    if hooked is not None:
        lines.append(hooked)
    lines.append("")
    lines.append("devices:")
    for dev in st.get("devices", []):
        lines.append(f"  {dev['index']} {dev.get('name', '')}: budget "
                     f"{size(dev['budget_bytes'])}, leased {size(dev['leased_bytes'])}, "
                     f"reserved {size(dev.get('reserved_bytes', 0))}, free "
                     f"{size(dev['free_bytes'])}")
    lines.append("clients:")
    for c in st.get("clients", []):
        line = (f"  pid {c['pid']} {c.get('name', '')}: "
                f"{count(c.get('models', 0), 'model')}, "
                f"{size(c.get('reserved_bytes', 0))} reserved, "
                f"{count(c.get('leases', 0), 'lease')}, "
                f"{size(c.get('leased_bytes', 0))} leased")
        if c.get("measurable"):
            line += (f"; measured {size(c.get('measured_bytes', 0))}, "
                     f"{size(c.get('undeclared_bytes', 0))} undeclared")
        elif "measurable" in c:
            line += "; cannot measure"
        lines.append(line)
    models = st.get("models", [])
    lines.append("models:" if models else "models: none")
    for m in models:
        lines.append(f"  {m.get('id', '?')} {m['name']} ({m['class']}) pid {m['owner_pid']} "
                     f"device {m['device']}: {m['state'].replace('_', ' ')}, "
                     f"{size(m['bytes'])}")
    queue = st.get("queue", [])
    if queue:
        lines.append(f"queue: {len(queue)} waiting")
    return "\n".join(lines)


def _row(name, declared, real, state):
    return f"  {name:<34} {declared:>12} {real:>12}  {state}"


def format_own(st, pid, rows, torch_for):
    """This ComfyUI's part: per device, each holding's declared bytes (as rocmmemd holds them:
    rounded up to its granule) and real bytes, then the process's totals by PyTorch and by
    rocmmemd. rows: [(device, name, declared, real or None, state, model id)];
    torch_for(device): torch_bytes of that device."""
    held = {m.get("id"): m.get("bytes", 0) for m in st.get("models", [])}
    lines = []
    for device in sorted({r[0] for r in rows}):
        mine = [(r[1], held.get(r[5], r[2]), r[3], r[4]) for r in rows if r[0] == device]
        lines.append(f"this ComfyUI (pid {pid}), device {device}:")
        lines.append(_row("", "declared", "real", ""))
        for name, declared, real, state in mine:
            lines.append(_row(name, size(declared), "-" if real is None else size(real),
                              state))
        total = sum(r[1] for r in mine)
        real = sum(r[2] or 0 for r in mine)
        lines.append(_row("total", size(total), size(real), "(real: ComfyUI's own count)"))
        t = torch_for(device)
        if t is not None:
            lines.append(f"  PyTorch on this device: {size(t[0])} allocated, {size(t[1])} "
                         "held by its cache")
        b = books(st, pid, device)
        got, source = measured(st, pid, device)
        if got is None:
            lines.append(f"  measured: {source}")
        elif b is not None:
            line = (f"  measured by rocmmemd ({source}): {size(got)}, declared "
                    f"{size(b[0])}")
            lines.append(line + (f": {size(b[2])} undeclared, charged" if b[2] else ""))
        else:
            lines.append(f"  measured by rocmmemd ({source}): {size(got)}")
    return "\n".join(lines)


def step_line(device, rows, torch_pair, measured_text=None):
    """The log line after ComfyUI loads models for a step: what is declared for it, and the
    real bytes beside (ComfyUI's count per model, PyTorch's for the process, and rocmmemd's
    books of the process: measured_text, books_line's words)."""
    parts = []
    for _, name, declared, real, *_ in rows:
        if real is None:
            parts.append(f"{name} {size(declared)}")
        else:
            parts.append(f"{name} {size(declared)} (loaded {size(real)})")
    line = (f"device {device}: declared {size(sum(r[2] for r in rows))} for this step: "
            + ", ".join(parts))
    if torch_pair is not None:
        line += f"; PyTorch: {size(torch_pair[0])} allocated"
    if measured_text:
        line += f"; {measured_text}"
    return line
