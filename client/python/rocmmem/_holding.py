# SPDX-License-Identifier: MIT
"""What the host integrations (rocmmem.framepack, the ComfyUI node package) share: the models a
host registered with the daemon and what this process holds of each.

A Slot is one host model (a torch module) as a model of the daemon; Holdings keeps the slots of
one connection by host object and by model id, and registers, acquires (holds) and releases
them. Subclasses provide on_evict(handle) and on_revoked(handle, reason) and unload there.
Waiting calls (hold) must never run under the lock: while a call waits, the client's event
thread may need the lock to unload another model.
"""
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


class Holdings:
    """The slots of one connection. lock guards entries and by_id (the host's own lock may
    be passed); errors of calls that only give back (release, unregister) go to quiet()."""

    def __init__(self, client, lock, timeout):
        self.client = client
        self.lock = lock
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

    def slot_of(self, model_id):
        with self.lock:
            return self.by_id.get(model_id)

    def register(self, e, size):
        """Registers e's model with size, anew if it was registered already (a model that is
        not resident holds nothing: only its id changes)."""
        old = e.handle
        new = self.client.register_model(e.name, size=size, model_class=e.model_class,
                                         device=e.device, priority=e.priority, pinned=e.pinned,
                                         on_evict=self.on_evict, on_revoked=self.on_revoked)
        with self.lock:
            if old is not None:
                self.by_id.pop(old.id, None)
            self.by_id[new.id] = e
            e.handle = new
            e.registered = size
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
