# SPDX-License-Identifier: MIT
"""_convert: librocmmem's status snapshots, samples and events as plain Python dicts.

The keys, their order and their values are those of `rocmmemctl status --json` and
`rocmmemctl --json watch` (client/ctl/json.c, status.c, models.c, watch.c), so that a dict
from this package and a line from rocmmemctl read the same. Everything is copied out of the
C structs at once: the structs live only as long as their snapshot or their callback.
"""
import errno as _errno

from . import _native as N
from ._native import text

STATUS_SCHEMA_VERSION = 1

# The errno names status --json gives a refusal (client/ctl/status.c); others "errno N".
_DENIAL_ERRNO_NAMES = ("ENOMEM", "ETIMEDOUT", "E2BIG", "EDEADLK", "ENODEV", "EIO", "EAGAIN",
                       "EBUSY", "ECANCELED", "EINVAL", "EPERM", "ENOSPC")
_DENIAL_NAMES = {getattr(_errno, name): name for name in _DENIAL_ERRNO_NAMES}


def denial_errno_name(err):
    """The name status --json gives a refusal's (negative) errno."""
    return _DENIAL_NAMES.get(-err, f"errno {-err}")


def model_class_name(value):
    return N.MODEL_CLASSES[value] if 0 <= value < len(N.MODEL_CLASSES) else "other"


def model_state_name(value):
    return N.MODEL_STATES[value] if 0 <= value < len(N.MODEL_STATES) else "unknown"


def _daemon(lib, st, fallback=True):
    """The daemon's part; a status says whether it fell back to host memory, a sample
    cannot (the daemon does not send it there)."""
    d = lib.rocmmem_status_daemon(st).contents
    out = {"version": text(d.version), "pid": d.pid, "uptime_s": d.uptime_s,
           "backend": text(d.backend), "protocol_version": d.protocol_version}
    if fallback:
        out["host_fallback"] = bool(d.host_fallback)
        out["host_fallback_reason"] = text(d.host_fallback_reason)
        # The daemon's descriptors against its limit (0: an older daemon), as rocmmemctl.
        out["fds_open"] = d.fds_open
        out["fds_limit"] = d.fds_limit
    return out


def _telemetry(v):
    t = {"source": text(v.telemetry_source)}
    if v.valid & N.DEVICE_HAS_VRAM:
        t["vram_total_bytes"] = v.vram_total_bytes
        t["vram_used_bytes"] = v.vram_used_bytes
    if v.valid & N.DEVICE_HAS_GTT:
        t["gtt_total_bytes"] = v.gtt_total_bytes
        t["gtt_used_bytes"] = v.gtt_used_bytes
    if v.valid & N.DEVICE_HAS_TEMPERATURE:
        t["temperature_mc"] = v.temperature_mc
    if v.valid & N.DEVICE_HAS_POWER:
        t["power_mw"] = v.power_mw
    if v.valid & N.DEVICE_HAS_BUSY:
        t["busy_percent"] = v.busy_percent
    return t


def device(lib, st, index):
    """One device of a snapshot, as status --json's devices[] entry."""
    v = lib.rocmmem_status_device(st, index).contents
    o = {
        "index": v.index,
        "name": text(v.name),
        "backend": text(v.backend),
        "total_bytes": v.total_bytes,
        "budget_bytes": v.budget_bytes,
        "leased_bytes": v.leased_bytes,
        "free_bytes": v.free_bytes,
        "headroom_bytes": v.headroom_bytes,
        "reserved_bytes": v.reserved_bytes,
        "granule_bytes": v.granule_bytes,
        "leases": v.leases,
        "waiters": v.waiters,
        "oldest_wait_ms": v.oldest_wait_ms,
        "largest_grantable_bytes": v.largest_grantable,
        "largest_with_eviction_bytes": v.largest_with_eviction,
        "evictable_bytes": v.evictable_bytes,
        "models_resident": v.models_resident,
        "awaiting_redeclare_bytes": v.awaiting_redeclare_bytes,
        "measurable": bool(v.measurable),
    }
    # The reconciled books: no numbers where nothing is measured (as rocmmemctl).
    if v.measurable:
        o["undeclared_bytes"] = v.undeclared_bytes
        o["outside_bytes"] = v.outside_bytes
    else:
        o["measured"] = "cannot measure: no per-process device memory here"
    o |= {
        "handle": N.HANDLE_NAMES.get(v.handle_kind, "none"),
        "sharing": text(v.sharing),
        "pci_bus_id": text(v.pci_bus_id),
        "integrated": bool(v.integrated),
        "state": text(v.state),
    }
    if v.valid & N.DEVICE_HAS_RUNTIME:
        o["runtime_total_bytes"] = v.runtime_total_bytes
        o["runtime_free_bytes"] = v.runtime_free_bytes
        o["external_bytes"] = v.external_bytes
    if v.pool_limit_bytes or v.pool_bytes:
        o["pool"] = {"bytes": v.pool_bytes, "chunks": v.pool_chunks,
                     "limit_bytes": v.pool_limit_bytes, "warm_grants": v.pool_warm_grants,
                     "dropped_bytes": v.pool_dropped_bytes}
    if v.telemetry_source:
        o["telemetry"] = _telemetry(v)
    nproc = lib.rocmmem_status_process_count(st, v.index)
    if nproc:
        procs = []
        for k in range(nproc):
            p = lib.rocmmem_status_process(st, v.index, k).contents
            procs.append({"pid": p.pid, "vram_bytes": p.vram_bytes, "client": bool(p.client)})
        o["processes"] = procs
    return o


def _books(b):
    o = {"device": b.device, "declared_bytes": b.declared_bytes,
         "measurable": bool(b.measurable)}
    if b.measurable:
        o["measured_bytes"] = b.measured_bytes
        o["undeclared_bytes"] = b.undeclared_bytes
    return o


def client_info(v):
    o = {"pid": v.pid, "uid": v.uid, "name": text(v.name), "leases": v.leases,
         "leased_bytes": v.leased_bytes, "gid": v.gid, "connected_s": v.connected_s,
         "client_id": v.client_id, "models": v.models, "reserved_bytes": v.reserved_bytes,
         "waiting": v.waiting, "pidfd": bool(v.pidfd),
         "declared_bytes": v.declared_bytes, "measurable": bool(v.measurable)}
    # The reconciled books of its process: no numbers where nothing is measured.
    if v.measurable:
        o["measured_bytes"] = v.measured_bytes
        o["undeclared_bytes"] = v.undeclared_bytes
    else:
        o["measured"] = "cannot measure: no per-process device memory here"
    o["books"] = [_books(v.books[i]) for i in range(v.nbooks)]
    if v.arena_bytes:  # its host arena, when it has one
        o["arena"] = {"size_bytes": v.arena_bytes, "used_bytes": v.arena_used_bytes,
                      "free_bytes": v.arena_free_bytes,
                      "largest_free_bytes": v.arena_largest_free,
                      "fallbacks": v.arena_fallbacks}
    return o


def model_info(v):
    """One model, as status --json's models[] entry (and models --json's)."""
    return {"name": text(v.name), "class": model_class_name(v.model_class),
            "owner_pid": v.owner_pid, "device": v.device, "bytes": v.bytes,
            "state": model_state_name(v.state), "id": v.id, "priority": v.priority,
            "pinned": bool(v.pinned), "size": v.size, "reservation_bytes": v.reservation_bytes,
            "lease_bytes": v.lease_bytes, "idle_ms": v.idle_ms, "use_count": v.use_count,
            "evictions": v.evictions}


def counters(lib, st, connections):
    k = lib.rocmmem_status_counters(st).contents
    o = {"grants": k.grants, "denials": k.denials, "timeouts": k.timeouts,
         "releases": k.releases, "reclaimed": k.reclaimed, "failures": k.failures,
         "evictions": k.evictions, "revocations": k.revocations, "trims": k.trims,
         "bytes_trimmed": k.bytes_trimmed}
    if connections:
        o["connections"] = k.connections
    return o


def _each(lib, st, kind):
    count = getattr(lib, f"rocmmem_status_{kind}_count")
    item = getattr(lib, f"rocmmem_status_{kind}")
    return (item(st, i).contents for i in range(count(st)))


def status(lib, st):
    """A snapshot (rocmmem_status *) as the dict `rocmmemctl status --json` prints."""
    access = lib.rocmmem_status_access(st).contents
    leases = [{"id": v.id, "owner_pid": v.owner_pid, "device": v.device, "bytes": v.bytes,
               "tag": text(v.tag), "age_ms": v.age_ms, "model_id": v.model_id}
              for v in _each(lib, st, "lease")]
    queue = [{"owner_pid": v.owner_pid, "device": v.device, "bytes": v.bytes,
              "waited_ms": v.waited_ms, "timeout_ms": v.timeout_ms, "tag": text(v.tag),
              "model_id": v.model_id}
             for v in _each(lib, st, "waiter")]
    denials = [{"timestamp_ms": v.timestamp_ms, "pid": v.pid,
                "client_name": text(v.client_name), "device": v.device, "bytes": v.bytes,
                "model_id": v.model_id, "model_name": text(v.model_name),
                "error": denial_errno_name(v.error), "errno": -v.error,
                "reason": text(v.reason)}
               for v in _each(lib, st, "denial")]
    return {
        "schema_version": STATUS_SCHEMA_VERSION,
        "daemon": _daemon(lib, st),
        "devices": [device(lib, st, i) for i in range(lib.rocmmem_status_device_count(st))],
        "clients": [client_info(v) for v in _each(lib, st, "client")],
        "leases": leases,
        "models": [model_info(v) for v in _each(lib, st, "model")],
        "queue": queue,
        "denials": denials,
        "counters": counters(lib, st, False),
        "limits": {text(v.name): {"value": v.value, "unlimited": bool(v.unlimited),
                                  "hits": v.hits}
                   for v in _each(lib, st, "limit")},
        "access": {"peers_refused": access.peers_refused,
                   "requests_refused": access.requests_refused},
        "awaiting_redeclare": [
            {"device": v.device, "pid": v.pid, "uid": v.uid, "leases": v.leases,
             "lease_bytes": v.lease_bytes, "models": v.models,
             "reserved_bytes": v.reserved_bytes, "bytes": v.lease_bytes + v.reserved_bytes,
             "grace_left_ms": v.grace_left_ms}
            for v in _each(lib, st, "awaiting")],
    }


def sample(lib, st, info):
    """A telemetry sample as the line `rocmmemctl --json watch` prints for it."""
    return {
        "type": "sample",
        "timestamp_ms": info.timestamp_ms,
        "interval_ms": info.interval_ms,
        "dropped": info.dropped,
        "uptime_ms": info.uptime_ms,
        "daemon": _daemon(lib, st, fallback=False),
        "devices": [device(lib, st, i) for i in range(lib.rocmmem_status_device_count(st))],
        "clients": [client_info(v) for v in _each(lib, st, "client")],
        "models": [model_info(v) for v in _each(lib, st, "model")],
        "clients_omitted": info.clients_omitted,
        "models_omitted": info.models_omitted,
        "waiters": info.waiters,
        "oldest_wait_ms": info.oldest_wait_ms,
        "counters": counters(lib, st, True),
    }


def telemetry(lib, e):
    """A telemetry event as the line `rocmmemctl --json watch` prints for it."""
    return {
        "type": "event",
        "event": text(lib.rocmmem_telemetry_name(e.type)),
        "timestamp_ms": e.timestamp_ms,
        "pid": e.pid,
        "client_name": text(e.client_name),
        "client_id": e.client_id,
        "device": e.device if e.has_device else None,
        "bytes": e.bytes,
        "lease_id": e.lease_id,
        "model_id": e.model_id,
        "model_name": text(e.model_name),
        "error": e.error,
        "waited_ms": e.waited_ms,
        "detail": text(e.detail),
        "dropped": e.dropped,
        "declared_bytes": e.declared_bytes,
    }


# The library's own events (not telemetry), by the "type" their dicts carry.
EVENT_TYPE_NAMES = {
    N.EVENT_SHUTDOWN: "shutdown",
    N.EVENT_EVICT_REQUEST: "evict_request",
    N.EVENT_MODEL_REVOKED: "model_revoked",
    N.EVENT_LEASE_REVOKED: "lease_revoked",
    N.EVENT_DISCONNECTED: "disconnected",
    N.EVENT_RECONNECTING: "reconnecting",
    N.EVENT_RECONNECTED: "reconnected",
}


def event(lib, ev):
    """Any rocmmem_event as a dict: samples and telemetry as watch prints them, the rest as
    {"type": "evict_request" | "model_revoked" | "lease_revoked" | "shutdown" |
    "disconnected" | "reconnecting" | "reconnected" | "other", "seq", "reason", and the ids
    and the model's residency generation that apply}."""
    if ev.type == N.EVENT_SAMPLE and ev.sample and ev.sample_info:
        return sample(lib, ev.sample, ev.sample_info.contents)
    if ev.type == N.EVENT_TELEMETRY and ev.telemetry:
        return telemetry(lib, ev.telemetry.contents)
    o = {"type": EVENT_TYPE_NAMES.get(ev.type, "other"), "seq": ev.seq,
         "reason": text(ev.reason) or ""}
    if ev.type in (N.EVENT_EVICT_REQUEST, N.EVENT_MODEL_REVOKED):
        o["model_id"] = ev.model_id
    if ev.type == N.EVENT_EVICT_REQUEST:
        o["bytes_needed"] = ev.bytes_needed
        o["deadline_ms"] = ev.deadline_ms
    if ev.type == N.EVENT_LEASE_REVOKED:
        o["lease_id"] = ev.lease_id
    if ev.type in (N.EVENT_EVICT_REQUEST, N.EVENT_MODEL_REVOKED, N.EVENT_LEASE_REVOKED):
        o["generation"] = ev.generation
    return o
