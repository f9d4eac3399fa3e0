# SPDX-License-Identifier: MIT
"""_model: Model, a model registered with the daemon through a Client, and Eviction."""
import contextlib
from collections import namedtuple

from ._common import _timeout_ms
from .errors import Error
from .sizes import parse_size

__all__ = ["Model", "Eviction"]

Eviction = namedtuple("Eviction", "bytes_freed revoked")
Eviction.__doc__ = """What evict_model did: bytes_freed (as the daemon reports them) and revoked
(True when the owner missed the deadline and the daemon took the memory back)."""


class Model:
    """A model registered with the daemon (Client.register_model): the daemon decides across
    every process when it must be unloaded to make room."""

    def __init__(self, client, model_id, *, name, size, model_class, device, priority, pinned,
                 on_evict, on_revoked):
        self._client = client
        self.id = model_id
        self.name = name
        self.size = size
        self.model_class = model_class
        self.device = device
        self.priority = priority
        self.pinned = pinned
        self.on_evict = on_evict
        self.on_revoked = on_revoked
        self.resident = False  # as far as this process knows
        # During on_evict and on_revoked: the residency generation the event concerns.
        self.event_generation = 0
        self._uses = 0

    @property
    def generation(self):
        """The newest residency generation of the model this process was granted something
        in (an acquire, a resize, a tagged lease); 0 before any. The daemon advances it each
        time it takes the model's memory back (docs/residency.md)."""
        c = self._client
        if self.id == 0 or c._closed or c._handle is None:
            return 0
        try:
            with c._native() as handle:
                return c._lib.rocmmem_model_generation(handle, self.id)
        except Error:
            return 0

    def _newer_than(self, generation):
        """Whether this process holds a residency of the model later than generation."""
        return bool(generation) and self.generation > generation

    @property
    def offline(self):
        """True for a model a fail-safe client registered without a daemon."""
        return self.id == 0

    @property
    def client(self):
        """The Client whose connection registered the model (models belong to it)."""
        return self._client

    def __repr__(self):
        return (f"<rocmmem.Model {self.id} '{self.name}' ({self.model_class}, {self.size} "
                f"bytes, device {self.device}{', resident' if self.resident else ''})>")

    def _soft(self):
        """Whether calls are no-ops: a fail-safe client's model without a daemon (one that
        went away is given the chance to come back first)."""
        c = self._client
        if not c._fail_safe or c._closed:
            return False
        return self.id == 0 or not (c.available or c._revive())

    def acquire(self, timeout=None, on_progress=None):
        """Marks the model in use (never evicted until release()). If it is not resident its
        size is reserved first, waiting up to timeout seconds (None: as long as it takes)
        while the daemon has other models unloaded. on_progress(WaitProgress) is told, while
        it waits, what it waits for. Acquires nest. Returns the model."""
        ms = _timeout_ms(timeout)
        if not self._soft():
            def match(p):
                return p.request == "model_acquire" and p.request_model_id == self.id

            with self._client._watching(match, on_progress):
                if self._client._call("rocmmem_model_acquire", self.id, ms, soft=-1,
                                      has_soft=True) != -1:
                    self.resident = True
        self._uses += 1
        return self

    def release(self):
        """Ends one acquire; after the last the model is idle: it stays resident, evictable
        when the daemon needs the room."""
        self._uses = max(0, self._uses - 1)
        if not self._soft():
            self._client._call("rocmmem_model_release", self.id, has_soft=True)

    @contextlib.contextmanager
    def use(self, timeout=None):
        """with model.use(): acquire() at entry, release() at exit."""
        self.acquire(timeout)
        try:
            yield self
        finally:
            self.release()

    def resize(self, nbytes, timeout=0.0):
        """Sets the model's reservation (bytes or "4G"): shrinking is immediate, growing waits
        like an acquire (up to timeout seconds)."""
        n = parse_size(nbytes)
        ms = _timeout_ms(timeout)
        if not self._soft():
            if self._client._call("rocmmem_model_resize", self.id, n, ms, soft=-1,
                                  has_soft=True) != -1:
                self.size = n

    def unregister(self):
        """Forgets the model: its reservation goes back, its tagged leases stay as plain
        leases."""
        c = self._client
        with c._lock:
            c._models.pop(self.id, None)
        self.resident = False
        if not self._soft() and not c._closed:
            c._call("rocmmem_model_unregister", self.id, has_soft=True)
        for lease in c.leases():
            if lease.model is self:
                lease.model = None

    def evict_ack(self, generation=None):
        """Acks an evict request by hand (for hosts that handle it through on_event):
        generation as Client.evict_ack."""
        if generation is None or not self._newer_than(generation):
            self.resident = False
        if not self._soft():
            self._client.evict_ack(self.id, generation)

    def evict(self):
        """Asks the daemon to evict this model now (Client.evict_model)."""
        if self._soft():
            return Eviction(0, False)
        return self._client.evict_model(self.id)

    def pin(self, pinned=True):
        """Pins or unpins the model (Client.pin_model)."""
        if not self._soft():
            self._client.pin_model(self.id, pinned)
        self.pinned = bool(pinned)
