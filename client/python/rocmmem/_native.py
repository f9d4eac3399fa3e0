# SPDX-License-Identifier: MIT
"""_native: librocmmem loaded with ctypes: its structs, constants and function prototypes.

Every Structure here mirrors one struct of client/include/rocmmem.h field for field, in the
same order with the same C types; tests/python/test_abi.py checks sizes and offsets against
the compiler's (tests/python/abi_dump.c) and field names against the header.
"""
import ctypes
import os
import threading

from .errors import LibraryNotFound

SONAME = "librocmmem.so.1"
# The version of rocmmem.h this mirror follows (a library of the same major and at least this
# minor has every function and field it uses).
VERSION_MAJOR = 1
VERSION_MINOR = 1
VERSION_PATCH = 0
VERSION_NUMBER = VERSION_MAJOR * 10000 + VERSION_MINOR * 100 + VERSION_PATCH
LIBRARY_ENV = "ROCMMEM_LIBRARY"

c_int = ctypes.c_int
c_uint = ctypes.c_uint
c_char_p = ctypes.c_char_p
c_void_p = ctypes.c_void_p
c_size_t = ctypes.c_size_t
c_int32 = ctypes.c_int32
c_uint32 = ctypes.c_uint32
c_int64 = ctypes.c_int64
c_uint64 = ctypes.c_uint64
c_enum = ctypes.c_int  # every enum of the header fits an int
c_timeout_ms = ctypes.c_int64  # rocmmem_timeout_ms: ms, 0 no wait, < 0 no limit
c_device_index = ctypes.c_uint32  # rocmmem_device_index

NO_WAIT = 0
WAIT_FOREVER = -1
ALL_DEVICES = 0xFFFFFFFF  # rocmmem_trim's every device

# enum rocmmem_handle_kind
HANDLE_NONE = 0
HANDLE_MEMFD = 1
HANDLE_VMM_FD = 2
HANDLE_DMABUF = 3
HANDLE_IPC = 4
HANDLE_NAMES = {HANDLE_NONE: "none", HANDLE_MEMFD: "memfd", HANDLE_VMM_FD: "vmm-fd",
                HANDLE_DMABUF: "dmabuf", HANDLE_IPC: "ipc"}

LEASE_NOMAP = 0x1

DEVICE_HAS_RUNTIME = 1 << 0
DEVICE_HAS_VRAM = 1 << 1
DEVICE_HAS_GTT = 1 << 2
DEVICE_HAS_TEMPERATURE = 1 << 3
DEVICE_HAS_POWER = 1 << 4
DEVICE_HAS_BUSY = 1 << 5

# enum rocmmem_model_class, by the names status --json uses
MODEL_CLASSES = ("other", "transformer", "vae", "text_encoder", "image_encoder")
# enum rocmmem_model_state
MODEL_STATES = ("idle", "in_use", "evicting", "evicted", "waiting")

# enum rocmmem_event_type
EVENT_SHUTDOWN = 1
EVENT_EVICT_REQUEST = 2
EVENT_MODEL_REVOKED = 3
EVENT_LEASE_REVOKED = 4
EVENT_DISCONNECTED = 5
EVENT_SAMPLE = 6
EVENT_TELEMETRY = 7
EVENT_RECONNECTING = 8
EVENT_RECONNECTED = 9
EVENT_OTHER = 100

# Flags of struct rocmmem_connect_options, and enum rocmmem_connection_state
CONNECT_NO_RECONNECT = 0x1
CONNECT_NO_WAIT = 0x2
CONNECTION_STATES = ("connected", "reconnecting", "disconnected")

SUBSCRIBE_SAMPLES = 0x1
SUBSCRIBE_EVENTS = 0x2
SAMPLE_INTERVAL_MIN_MS = 10
SAMPLE_INTERVAL_MAX_MS = 60000


class _Sized(ctypes.Structure):
    """A struct that grows (rocmmem.h's Conventions): struct_size set to its size."""

    def __init__(self, **fields):
        super().__init__(struct_size=ctypes.sizeof(self), **fields)


class LeaseRequest(_Sized):
    _fields_ = [("struct_size", c_size_t), ("device", c_device_index), ("size", c_uint64),
                ("timeout_ms", c_timeout_ms), ("tag", c_char_p), ("flags", c_uint32),
                ("model_id", c_uint64)]


class DaemonInfo(ctypes.Structure):
    _fields_ = [("version", c_char_p), ("pid", c_int32), ("uptime_s", c_uint64),
                ("backend", c_char_p), ("protocol_version", c_uint32),
                ("host_fallback", c_int), ("host_fallback_reason", c_char_p),
                ("heap_bytes", c_uint64), ("fds_open", c_uint64), ("fds_limit", c_uint64)]


class DeviceInfo(ctypes.Structure):
    _fields_ = [("index", c_device_index), ("name", c_char_p), ("backend", c_char_p),
                ("total_bytes", c_uint64), ("budget_bytes", c_uint64),
                ("headroom_bytes", c_uint64), ("leased_bytes", c_uint64),
                ("reserved_bytes", c_uint64), ("free_bytes", c_uint64),
                ("granule_bytes", c_uint64), ("waiters", c_uint32), ("leases", c_uint64),
                ("handle_kind", c_enum), ("pci_bus_id", c_char_p), ("integrated", c_int),
                ("sharing", c_char_p), ("state", c_char_p), ("valid", c_uint32),
                ("runtime_total_bytes", c_uint64), ("runtime_free_bytes", c_uint64),
                ("external_bytes", c_uint64), ("telemetry_source", c_char_p),
                ("vram_total_bytes", c_uint64), ("vram_used_bytes", c_uint64),
                ("gtt_total_bytes", c_uint64), ("gtt_used_bytes", c_uint64),
                ("temperature_mc", c_int32), ("power_mw", c_uint32),
                ("busy_percent", c_uint32), ("largest_grantable", c_uint64),
                ("evictable_bytes", c_uint64), ("largest_with_eviction", c_uint64),
                ("oldest_wait_ms", c_uint64), ("models_resident", c_uint32),
                ("awaiting_redeclare_bytes", c_uint64),
                # 1.1: the reconciled books
                ("measurable", c_int), ("undeclared_bytes", c_uint64),
                ("outside_bytes", c_uint64),
                # appended after 1.1's: the VMM chunk pool
                ("pool_bytes", c_uint64), ("pool_chunks", c_uint64),
                ("pool_limit_bytes", c_uint64), ("pool_warm_grants", c_uint64),
                ("pool_dropped_bytes", c_uint64)]


class AwaitingInfo(ctypes.Structure):
    _fields_ = [("device", c_device_index), ("pid", c_int32), ("uid", c_uint32),
                ("leases", c_uint32),
                ("lease_bytes", c_uint64), ("models", c_uint32), ("reserved_bytes", c_uint64),
                ("grace_left_ms", c_uint64)]


class ProcessInfo(ctypes.Structure):
    _fields_ = [("pid", c_int32), ("vram_bytes", c_uint64), ("client", c_int)]


class ClientBooks(ctypes.Structure):
    _fields_ = [("device", c_device_index), ("measurable", c_int),
                ("declared_bytes", c_uint64), ("measured_bytes", c_uint64),
                ("undeclared_bytes", c_uint64)]


class ClientInfo(ctypes.Structure):
    _fields_ = [("pid", c_int32), ("uid", c_uint32), ("gid", c_uint32), ("name", c_char_p),
                ("leases", c_uint32), ("leased_bytes", c_uint64), ("connected_s", c_uint64),
                ("client_id", c_uint64), ("models", c_uint32), ("reserved_bytes", c_uint64),
                ("waiting", c_uint32), ("pidfd", c_int),
                # 1.1: the reconciled books of its process
                ("books", ctypes.POINTER(ClientBooks)), ("nbooks", c_size_t),
                ("measurable", c_int), ("declared_bytes", c_uint64),
                ("measured_bytes", c_uint64), ("undeclared_bytes", c_uint64),
                # appended after 1.1's: its host arena
                ("arena_bytes", c_uint64), ("arena_used_bytes", c_uint64),
                ("arena_free_bytes", c_uint64), ("arena_largest_free", c_uint64),
                ("arena_fallbacks", c_uint64)]


class LimitInfo(ctypes.Structure):
    _fields_ = [("name", c_char_p), ("value", c_uint64), ("unlimited", c_int),
                ("hits", c_uint64)]


class AccessInfo(ctypes.Structure):
    _fields_ = [("peers_refused", c_uint64), ("requests_refused", c_uint64)]


class LeaseInfo(ctypes.Structure):
    _fields_ = [("id", c_uint64), ("owner_pid", c_int32), ("device", c_device_index),
                ("bytes", c_uint64), ("tag", c_char_p), ("age_ms", c_uint64),
                ("model_id", c_uint64)]


class ModelInfo(ctypes.Structure):
    _fields_ = [("id", c_uint64), ("name", c_char_p), ("model_class", c_enum),
                ("owner_pid", c_int32), ("device", c_device_index), ("bytes", c_uint64),
                ("state", c_enum), ("priority", c_int32), ("pinned", c_int),
                ("size", c_uint64), ("reservation_bytes", c_uint64),
                ("lease_bytes", c_uint64), ("idle_ms", c_uint64), ("use_count", c_uint32),
                ("evictions", c_uint64)]


class WaiterInfo(ctypes.Structure):
    _fields_ = [("owner_pid", c_int32), ("device", c_device_index), ("bytes", c_uint64),
                ("waited_ms", c_uint64), ("timeout_ms", c_timeout_ms), ("tag", c_char_p),
                ("model_id", c_uint64)]


class Counters(ctypes.Structure):
    _fields_ = [("grants", c_uint64), ("denials", c_uint64), ("timeouts", c_uint64),
                ("evictions", c_uint64), ("revocations", c_uint64), ("trims", c_uint64),
                ("bytes_trimmed", c_uint64), ("releases", c_uint64), ("reclaimed", c_uint64),
                ("failures", c_uint64), ("connections", c_uint64)]


class DenialInfo(ctypes.Structure):
    _fields_ = [("timestamp_ms", c_uint64), ("pid", c_int32), ("client_name", c_char_p),
                ("device", c_device_index), ("bytes", c_uint64), ("model_id", c_uint64),
                ("model_name", c_char_p), ("error", c_int), ("reason", c_char_p)]


class ModelDesc(_Sized):
    _fields_ = [("struct_size", c_size_t), ("device", c_device_index), ("name", c_char_p),
                ("model_class", c_enum), ("size", c_uint64), ("priority", c_int32),
                ("pinned", c_int)]


class SampleInfo(ctypes.Structure):
    _fields_ = [("timestamp_ms", c_uint64), ("interval_ms", c_uint32), ("dropped", c_uint32),
                ("clients_omitted", c_uint32), ("models_omitted", c_uint32),
                ("waiters", c_uint32), ("oldest_wait_ms", c_uint64), ("uptime_ms", c_uint64)]


class TelemetryEvent(ctypes.Structure):
    _fields_ = [("type", c_enum), ("timestamp_ms", c_uint64), ("pid", c_int32),
                ("client_name", c_char_p), ("client_id", c_uint64), ("has_device", c_int),
                ("device", c_device_index), ("bytes", c_uint64), ("lease_id", c_uint64),
                ("model_id", c_uint64), ("model_name", c_char_p), ("error", c_int),
                ("waited_ms", c_uint64), ("detail", c_char_p), ("dropped", c_uint32),
                ("declared_bytes", c_uint64)]


class Event(ctypes.Structure):
    _fields_ = [("type", c_enum), ("seq", c_uint64), ("reason", c_char_p),
                ("model_id", c_uint64), ("lease_id", c_uint64), ("bytes_needed", c_uint64),
                ("deadline_ms", c_timeout_ms), ("sample", c_void_p),
                ("sample_info", ctypes.POINTER(SampleInfo)),
                ("telemetry", ctypes.POINTER(TelemetryEvent)), ("generation", c_uint64)]


class WaitProgress(ctypes.Structure):
    _fields_ = [("struct_size", c_size_t), ("request", c_enum), ("request_model_id", c_uint64),
                ("requested", c_uint64), ("device", c_device_index), ("position", c_uint32),
                ("queued", c_uint32), ("reason", c_enum), ("needed", c_uint64),
                ("free_bytes", c_uint64), ("model_id", c_uint64), ("model_name", c_char_p),
                ("owner_pid", c_int32), ("owner_name", c_char_p), ("owner_client_id", c_uint64),
                ("deadline_ms", c_timeout_ms), ("bytes", c_uint64), ("evictions", c_uint32),
                ("waited_ms", c_uint64), ("eviction_ended", c_enum)]


# The names of rocmmem_wait_reason, rocmmem_wait_request and rocmmem_eviction_end.
WAIT_REASONS = ("unknown", "granting", "queue", "eviction", "holder", "exclusive", "budget")
WAIT_REQUESTS = (None, "lease", "model_acquire", "model_resize")
EVICTION_ENDS = (None, "acked", "revoked")


class ConnectOptions(_Sized):
    _fields_ = [("struct_size", c_size_t), ("socket_path", c_char_p), ("name", c_char_p),
                ("timeout_ms", c_timeout_ms), ("flags", c_uint32),
                ("reconnect_window_ms", c_timeout_ms)]


class EvictResult(_Sized):
    _fields_ = [("struct_size", c_size_t), ("bytes_freed", c_uint64), ("revoked", c_int)]


# Every mirrored struct by its C name (the ABI test walks this table).
STRUCTS = {
    "rocmmem_connect_options": ConnectOptions,
    "rocmmem_lease_request": LeaseRequest,
    "rocmmem_daemon_info": DaemonInfo,
    "rocmmem_device_info": DeviceInfo,
    "rocmmem_process_info": ProcessInfo,
    "rocmmem_client_info": ClientInfo,
    "rocmmem_client_books": ClientBooks,
    "rocmmem_lease_info": LeaseInfo,
    "rocmmem_model_info": ModelInfo,
    "rocmmem_waiter_info": WaiterInfo,
    "rocmmem_counters": Counters,
    "rocmmem_denial_info": DenialInfo,
    "rocmmem_limit_info": LimitInfo,
    "rocmmem_access_info": AccessInfo,
    "rocmmem_awaiting_info": AwaitingInfo,
    "rocmmem_model_desc": ModelDesc,
    "rocmmem_sample_info": SampleInfo,
    "rocmmem_telemetry_event": TelemetryEvent,
    "rocmmem_event": Event,
    "rocmmem_wait_progress": WaitProgress,
    "rocmmem_evict_result": EvictResult,
}

# void (*rocmmem_event_fn)(rocmmem_client *, const struct rocmmem_event *, void *)
EVENT_FN = ctypes.CFUNCTYPE(None, c_void_p, ctypes.POINTER(Event), c_void_p)

# void (*rocmmem_progress_fn)(rocmmem_client *, const struct rocmmem_wait_progress *, void *)
PROGRESS_FN = ctypes.CFUNCTYPE(None, c_void_p, ctypes.POINTER(WaitProgress), c_void_p)

P = ctypes.POINTER
# name: (restype, argtypes). Handles (rocmmem_client *, rocmmem_lease *, rocmmem_status *) are
# plain addresses (c_void_p): Python never looks inside them.
PROTOTYPES = {
    "rocmmem_version": (c_char_p, []),
    "rocmmem_version_number": (c_uint32, []),
    "rocmmem_strerror": (c_char_p, [c_int]),
    "rocmmem_last_error": (c_char_p, []),
    "rocmmem_connect": (c_int, [c_char_p, c_char_p, c_timeout_ms, P(c_void_p)]),
    "rocmmem_connect_with": (c_int, [P(ConnectOptions), P(c_void_p)]),
    "rocmmem_client_state": (c_enum, [c_void_p]),
    "rocmmem_disconnect": (c_int, [c_void_p]),
    "rocmmem_client_daemon_version": (c_char_p, [c_void_p]),
    "rocmmem_client_backend": (c_char_p, [c_void_p]),
    "rocmmem_client_device_count": (c_device_index, [c_void_p]),
    "rocmmem_lease_acquire": (c_int, [c_void_p, P(LeaseRequest), P(c_void_p)]),
    "rocmmem_lease_release": (c_int, [c_void_p]),
    "rocmmem_lease_id": (c_uint64, [c_void_p]),
    "rocmmem_lease_size": (c_uint64, [c_void_p]),
    "rocmmem_lease_device": (c_device_index, [c_void_p]),
    "rocmmem_lease_handle_kind": (c_enum, [c_void_p]),
    "rocmmem_lease_ptr": (c_void_p, [c_void_p]),
    "rocmmem_lease_fd": (c_int, [c_void_p]),
    "rocmmem_lease_fd_count": (c_uint, [c_void_p]),
    "rocmmem_lease_fd_at": (c_int, [c_void_p, c_uint]),
    "rocmmem_lease_chunk_count": (c_uint, [c_void_p]),
    "rocmmem_lease_chunk_size": (c_uint64, [c_void_p, c_uint]),
    "rocmmem_lease_ipc_handle": (c_int, [c_void_p, c_void_p, P(c_uint64)]),
    "rocmmem_lease_pci_bus_id": (c_char_p, [c_void_p]),
    "rocmmem_lease_waited_ms": (c_uint64, [c_void_p]),
    "rocmmem_lease_generation": (c_uint64, [c_void_p]),
    "rocmmem_lease_revoked": (c_int, [c_void_p]),
    "rocmmem_status_get": (c_int, [c_void_p, P(c_void_p)]),
    "rocmmem_status_free": (None, [c_void_p]),
    "rocmmem_status_daemon": (P(DaemonInfo), [c_void_p]),
    "rocmmem_status_counters": (P(Counters), [c_void_p]),
    "rocmmem_status_denial_count": (c_size_t, [c_void_p]),
    "rocmmem_status_denial": (P(DenialInfo), [c_void_p, c_size_t]),
    "rocmmem_status_limit_count": (c_size_t, [c_void_p]),
    "rocmmem_status_limit": (P(LimitInfo), [c_void_p, c_size_t]),
    "rocmmem_status_access": (P(AccessInfo), [c_void_p]),
    "rocmmem_status_device_count": (c_size_t, [c_void_p]),
    "rocmmem_status_device": (P(DeviceInfo), [c_void_p, c_size_t]),
    "rocmmem_status_process_count": (c_size_t, [c_void_p, c_device_index]),
    "rocmmem_status_process": (P(ProcessInfo), [c_void_p, c_device_index, c_size_t]),
    "rocmmem_status_client_count": (c_size_t, [c_void_p]),
    "rocmmem_status_client": (P(ClientInfo), [c_void_p, c_size_t]),
    "rocmmem_status_lease_count": (c_size_t, [c_void_p]),
    "rocmmem_status_lease": (P(LeaseInfo), [c_void_p, c_size_t]),
    "rocmmem_status_model_count": (c_size_t, [c_void_p]),
    "rocmmem_status_model": (P(ModelInfo), [c_void_p, c_size_t]),
    "rocmmem_status_waiter_count": (c_size_t, [c_void_p]),
    "rocmmem_status_waiter": (P(WaiterInfo), [c_void_p, c_size_t]),
    "rocmmem_status_awaiting_count": (c_size_t, [c_void_p]),
    "rocmmem_status_awaiting": (P(AwaitingInfo), [c_void_p, c_size_t]),
    "rocmmem_trim": (c_int, [c_void_p, c_device_index, P(c_uint64)]),
    "rocmmem_metrics": (c_int, [c_void_p, P(c_void_p)]),
    "rocmmem_model_register": (c_int, [c_void_p, P(ModelDesc), P(c_uint64)]),
    "rocmmem_model_acquire": (c_int, [c_void_p, c_uint64, c_timeout_ms]),
    "rocmmem_model_release": (c_int, [c_void_p, c_uint64]),
    "rocmmem_model_resize": (c_int, [c_void_p, c_uint64, c_uint64, c_timeout_ms]),
    "rocmmem_model_unregister": (c_int, [c_void_p, c_uint64]),
    "rocmmem_model_evict_ack": (c_int, [c_void_p, c_uint64]),
    "rocmmem_model_evict_ack_generation": (c_int, [c_void_p, c_uint64, c_uint64]),
    "rocmmem_model_generation": (c_uint64, [c_void_p, c_uint64]),
    "rocmmem_model_evict": (c_int, [c_void_p, c_uint64, P(EvictResult)]),
    "rocmmem_model_evict_force": (c_int, [c_void_p, c_uint64, P(EvictResult)]),
    "rocmmem_model_pin": (c_int, [c_void_p, c_uint64, c_int]),
    "rocmmem_set_event_callback": (c_int, [c_void_p, EVENT_FN, c_void_p]),
    "rocmmem_set_progress_callback": (c_int, [c_void_p, PROGRESS_FN, c_void_p]),
    "rocmmem_event_fd": (c_int, [c_void_p]),
    "rocmmem_dispatch": (c_int, [c_void_p]),
    "rocmmem_telemetry_name": (c_char_p, [c_enum]),
    "rocmmem_subscribe": (c_int, [c_void_p, c_uint, c_uint32, P(c_uint32)]),
    "rocmmem_unsubscribe": (c_int, [c_void_p]),
}

_lock = threading.Lock()
_lib = None
_libc = None


def library_path():
    """The file or SONAME load() opens: $ROCMMEM_LIBRARY when set, else the SONAME."""
    return os.environ.get(LIBRARY_ENV) or SONAME


def load():
    """Loads librocmmem once (thread-safe) and returns the CDLL with every prototype set.

    Raises LibraryNotFound when it cannot be loaded or lacks a function this package needs.
    """
    global _lib, _libc
    with _lock:
        if _lib is not None:
            return _lib
        path = library_path()
        try:
            lib = ctypes.CDLL(path)
        except OSError as e:
            hint = (f" (set ${LIBRARY_ENV} to its path, or install rocmmemd's library and run "
                    f"ldconfig)" if path == SONAME else f" (from ${LIBRARY_ENV})")
            raise LibraryNotFound(f"Could not load {path}: {e}{hint}", name=path,
                                  path=path) from None
        for name, (restype, argtypes) in PROTOTYPES.items():
            try:
                fn = getattr(lib, name)
            except AttributeError:
                raise LibraryNotFound(f"{path} has no {name}: it is older than this rocmmem "
                                      f"package", name=path, path=path) from None
            fn.restype = restype
            fn.argtypes = argtypes
        have = lib.rocmmem_version_number()
        if have // 10000 != VERSION_MAJOR or have < VERSION_NUMBER:
            raise LibraryNotFound(f"{path} is librocmmem {text(lib.rocmmem_version())}; this "
                                  f"rocmmem package needs {VERSION_MAJOR}.{VERSION_MINOR} or a "
                                  f"later {VERSION_MAJOR}.x", name=path, path=path)
        # rocmmem_metrics' text is freed with the C library's free().
        libc = ctypes.CDLL(None)
        libc.free.restype = None
        libc.free.argtypes = [c_void_p]
        _libc = libc
        _lib = lib
        return lib


def free(ptr):
    """Frees memory librocmmem allocated for the caller (rocmmem_metrics' text)."""
    _libc.free(ptr)


def text(value):
    """A C string from the library as str (None for NULL); bytes that are not UTF-8 escaped."""
    if value is None:
        return None
    return value.decode("utf-8", "backslashreplace")
