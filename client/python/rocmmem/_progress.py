# SPDX-License-Identifier: MIT
"""_progress: what a waiting request waits for, as the daemon reports it (librocmmem's progress
callback, docs/protocol.md "Progress of a waiting request"): Client.on_progress for every
report, on_progress= of one lease() or Model.acquire() for its own, and one info line in the
log when a wait is long."""
import contextlib
import dataclasses
import threading
import weakref

from . import _native as N
from ._common import _pending, log

# A wait this long (or one that ends in a revocation) is said once in the log, at info.
LONG_WAIT_MS = 1000


@dataclasses.dataclass(frozen=True)
class WaitProgress:
    """One report of a waiting request: where it stands and what it waits for."""
    request: str  # "lease", "model_acquire", "model_resize"
    request_model_id: int  # its model (this client's id), 0: none
    requested: int  # bytes as asked
    device: int
    position: int  # requests ahead of it in the device's queue (0: first)
    queued: int  # requests waiting on the device, it included
    reason: str  # "eviction", "holder", "exclusive", "queue", "budget", "granting", "unknown"
    needed: int
    free_bytes: int
    model_id: int  # eviction, exclusive: the model (the daemon's id)
    model_name: str
    owner_pid: int  # the model's owner or the client holding the bytes; 0: unknown
    owner_name: str
    deadline: float  # eviction under way: seconds left before its owner is revoked, or None
    bytes: int
    evictions: int
    waited: float  # seconds
    eviction_ended: str  # None, "acked", "revoked": the eviction of model_id is over

    def describe(self):
        """One sentence: what the request waits for."""
        owner = f" (pid {self.owner_pid} '{self.owner_name}')" if self.owner_pid else ""
        if self.reason == "eviction" and self.eviction_ended:
            return (f"the eviction of model {self.model_id} '{self.model_name}'{owner} ended: "
                    f"{self.eviction_ended}")
        if self.reason == "eviction":
            return (f"waits for the eviction of model {self.model_id} '{self.model_name}'"
                    f"{owner}, deadline in {self.deadline:.1f} s")
        if self.reason == "holder":
            return f"waits for memory held by{owner or ' a client'}: {self.bytes} bytes"
        if self.reason == "exclusive":
            return f"waits for model {self.model_id} '{self.model_name}'{owner} to go"
        if self.reason == "queue":
            return f"waits for the {self.position} request(s) ahead of it"
        return f"waits ({self.reason})"


def _convert(p):
    return WaitProgress(
        request=N.WAIT_REQUESTS[p.request] if p.request < len(N.WAIT_REQUESTS) else None,
        request_model_id=p.request_model_id, requested=p.requested, device=p.device,
        position=p.position, queued=p.queued,
        reason=N.WAIT_REASONS[p.reason] if p.reason < len(N.WAIT_REASONS) else "unknown",
        needed=p.needed, free_bytes=p.free_bytes, model_id=p.model_id,
        model_name=N.text(p.model_name) or "", owner_pid=p.owner_pid,
        owner_name=N.text(p.owner_name) or "",
        deadline=p.deadline_ms / 1000 if p.deadline_ms >= 0 else None, bytes=p.bytes,
        evictions=p.evictions, waited=p.waited_ms / 1000,
        eviction_ended=N.EVICTION_ENDS[p.eviction_ended]
        if p.eviction_ended < len(N.EVICTION_ENDS) else None)


def _progress_trampoline(client_ref):
    """The C progress callback of one client (holding it weakly)."""

    def on_progress(_handle, progress_p, _userdata):
        try:
            client = client_ref()
            if client is not None:
                client._deliver_progress(_convert(progress_p.contents))
        except (KeyboardInterrupt, SystemExit) as e:
            _pending.exc = e
        except BaseException:
            log.exception("rocmmem: a progress report could not be delivered")

    return N.PROGRESS_FN(on_progress)


class _Progress:
    """The progress half of Client (a mixin: Client calls _progress_init at connect)."""

    def _progress_init(self, lib, handle):
        self.on_progress = None
        self._watchers = []  # [(match, callback)] of calls waiting now
        self._watch_lock = threading.Lock()
        self._long_said = {}  # a wait's key -> its last waited, once it was logged
        self._progress_cb = None
        if handle is not None:
            self._progress_cb = _progress_trampoline(weakref.ref(self))  # C holds the pointer
            lib.rocmmem_set_progress_callback(handle, self._progress_cb, None)

    @contextlib.contextmanager
    def _watching(self, match, callback):
        """While the block runs, reports that match(report) are also given to callback."""
        if callback is None:
            yield
            return
        entry = (match, callback)
        with self._watch_lock:
            self._watchers.append(entry)
        try:
            yield
        finally:
            with self._watch_lock:
                self._watchers.remove(entry)

    def _deliver_progress(self, p):
        self._log_long(p)
        with self._watch_lock:
            mine = [cb for match, cb in self._watchers if match(p)]
        for cb in ([self.on_progress] if self.on_progress else []) + mine:
            try:
                cb(p)
            except (KeyboardInterrupt, SystemExit):
                raise
            except BaseException:
                log.exception("rocmmem: an on_progress callback failed")

    def _log_long(self, p):
        """Says a long wait once, at info: what it waits for."""
        key = (p.request, p.request_model_id, p.device, p.requested)
        last = self._long_said.get(key)
        if last is not None and p.waited >= last:
            self._long_said[key] = p.waited  # the same wait, said already
            return
        self._long_said.pop(key, None)  # a new wait of the same shape
        if p.waited * 1000 < LONG_WAIT_MS and p.eviction_ended != "revoked":
            return
        if len(self._long_said) > 64:
            self._long_said.clear()
        self._long_said[key] = p.waited
        log.info("rocmmem: %s of %d bytes on device %d has waited %.1f s, position %d: %s",
                 p.request, p.requested, p.device, p.waited, p.position, p.describe())
