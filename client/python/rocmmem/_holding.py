# SPDX-License-Identifier: MIT
"""What the host integrations (rocmmem.framepack, the ComfyUI node package) share: the models a
host registered with the daemon and what this process holds of each.

A Slot is one host model (a torch module) as a model of the daemon; Holdings keeps the slots of
one connection by host object and by model id, and registers, acquires (holds) and releases
them. Subclasses provide on_evict(handle) and on_revoked(handle, reason) and unload there.
Waiting calls (hold) must never run under the lock: while a call waits, the client's event
thread may need the lock to unload another model.

Evictions and revocations name the residency generation they end (docs/residency.md). One of
a residency older than the one a hold got is stale and never reaches the subclass; one that
began unloading just before a hold's acquire returned is waited for by that hold, so that
the host loads the weights again instead of using what the unload is taking away.
"""
import threading
import weakref


class Slot:
    """One host model as a model of the daemon."""

    def __init__(self, model, device, name, model_class, budget, *, priority=0, pinned=False):
        try:
            self.ref = weakref.ref(model)
        except TypeError:  # objects without weak references are kept alive
            self.ref = lambda model=model: model
        self.handle = None  # the rocmmem.Model, registered on the first hold
        self.device = device
        self.name = name
        self.model_class = model_class
        self.budget = budget  # the device's, when the model was first seen
        self.priority = priority
        self.pinned = pinned  # the host keeps it on the GPU: unloading would free nothing
        self.registered = 0  # what an acquire reserves when it is not resident
        self.reserved = 0  # what the daemon holds for it, as far as this process knows
        self.held = False  # acquired by this process
        self.generation = 0  # the residency generation the latest hold got
        self.unloading = 0  # unloads (on_evict, on_revoked) running now


class Holdings:
    """The slots of one connection. lock guards entries and by_id (the host's own lock may
    be passed); errors of calls that only give back (release, unregister) go to quiet()."""

    def __init__(self, client, lock, timeout):
        self.client = client
        self.lock = lock
        self.cond = threading.Condition(lock)  # signalled when an unload ends
        self.timeout = timeout
        self.entries = {}  # id(host model) -> Slot
        self.by_id = {}  # model id -> Slot

    def quiet(self, what, slot, err):
        """A release or unregister that failed: nothing to undo (the daemon is going or has
        gone). Subclasses log it."""

    def on_evict(self, handle):
        raise NotImplementedError

    def on_revoked(self, handle, reason):
        raise NotImplementedError

    def _unload_begins(self, handle):
        """Whether an eviction or revocation of handle's event_generation may unload the
        slot: not when a hold got a later residency since (stale). Counts the unload."""
        with self.cond:
            e = self.by_id.get(handle.id)
            gen = handle.event_generation
            if e is not None and gen and e.generation > gen:
                return None
            if e is not None:
                e.unloading += 1
            return e or False

    def _unload_ends(self, e):
        if e:
            with self.cond:
                e.unloading -= 1
                self.cond.notify_all()

    def _evicted(self, handle):
        e = self._unload_begins(handle)
        if e is None:
            return
        try:
            self.on_evict(handle)
        finally:
            self._unload_ends(e)

    def _revoked(self, handle, reason):
        e = self._unload_begins(handle)
        if e is None:
            return
        try:
            self.on_revoked(handle, reason)
        finally:
            self._unload_ends(e)

    def _settle(self, e, timeout):
        """After an acquire returned: records its residency, and waits out an unload of
        the slot that began before (up to timeout seconds; None: as long as it takes)."""
        gen = e.handle.generation
        with self.cond:
            e.generation = max(e.generation, gen)
            self.cond.wait_for(lambda: e.unloading == 0, timeout)

    def slot_of(self, model_id):
        with self.lock:
            return self.by_id.get(model_id)

    def register(self, e, size):
        """Registers e's model with size, anew if it was registered already (a model that is
        not resident holds nothing: only its id changes)."""
        old = e.handle
        new = self.client.register_model(e.name, size=size, model_class=e.model_class,
                                         device=e.device, priority=e.priority, pinned=e.pinned,
                                         on_evict=self._evicted, on_revoked=self._revoked)
        with self.lock:
            if old is not None:
                self.by_id.pop(old.id, None)
            self.by_id[new.id] = e
            e.handle = new
            e.registered = size
            e.generation = 0  # a new model: generations of its own
        if old is not None:
            self._give_back("unregister", e, old.unregister)
        return new

    def hold(self, e, target, timeout=None, shrink=True):
        """Makes e in use with target bytes reserved, waiting up to timeout (default: the
        holdings' own) while the daemon makes room.

        One request: a model that is not resident is acquired whole (registered anew first
        when target differs from what it was registered with: an acquire reserves the
        registered size), a resident one is grown while still idle and then acquired, which
        marks it in use at once. shrink: a resident model reserving more than target gives
        the difference back (shrinking is immediate)."""
        timeout = self.timeout if timeout is None else timeout
        target = max(1, min(target, e.budget))
        if not e.held:
            if e.reserved == 0 and target != e.registered:
                self.register(e, target)
            elif 0 < e.reserved < target:
                e.handle.resize(target, timeout=timeout)
                e.reserved = target
            e.handle.acquire(timeout=timeout)
            self._settle(e, timeout)
            e.held = True
            if e.reserved == 0:
                # It was not resident (or was evicted since the resize: on_evict zeroed it):
                # the acquire reserved the registered size.
                e.reserved = e.registered
        if e.reserved < target or (shrink and e.reserved > target):
            e.handle.resize(target, timeout=timeout)
            e.reserved = target

    def release(self, e):
        """Ends this process's use of e; its memory stays reserved until the daemon needs
        the room."""
        if e.held:
            e.held = False
            self._give_back("release", e, e.handle.release)

    def forget(self, e):
        """Drops e (its host model is gone or moved to another device) and unregisters it."""
        with self.lock:
            for key in [k for k, v in self.entries.items() if v is e]:
                del self.entries[key]
            if e.handle is not None:
                self.by_id.pop(e.handle.id, None)
        if e.handle is not None:
            self._give_back("unregister", e, e.handle.unregister)

    def _give_back(self, what, e, call):
        try:
            call()
        except Exception as err:  # the connection is going: nothing is lost by going on
            self.quiet(what, e, err)
