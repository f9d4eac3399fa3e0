# SPDX-License-Identifier: MIT
"""_lease: Lease, memory leased from the daemon through a Client."""
import ctypes
import mmap
import os

from . import _native as N
from ._common import log
from .errors import DaemonUnavailable

__all__ = ["Lease"]


class Lease:
    """Memory leased from the daemon: id, size (granted, whole granules), device, ptr (its
    address: a host mapping or a device pointer), buffer (a writable memoryview of a host
    lease; None for GPU memory). Released by release(), at the end of a with block, by the
    client's close(), or when garbage-collected."""

    def __init__(self, client, handle, tag, model):
        lib = client._lib
        self._client = client
        self._handle = handle
        self._released = False
        self._revoked = False
        self.revoked_reason = None
        self.tag = tag
        self.model = model
        self.id = lib.rocmmem_lease_id(handle)
        # A lease tagged with a model: the model's residency generation it was granted in.
        self.generation = lib.rocmmem_lease_generation(handle)
        self.size = lib.rocmmem_lease_size(handle)
        self.device = lib.rocmmem_lease_device(handle)
        self.handle_kind = N.HANDLE_NAMES.get(lib.rocmmem_lease_handle_kind(handle), "none")
        self.pci_bus_id = N.text(lib.rocmmem_lease_pci_bus_id(handle))
        self.waited_ms = lib.rocmmem_lease_waited_ms(handle)
        self._ptr = lib.rocmmem_lease_ptr(handle) or None
        self._map = None
        self._view = None
        fd = lib.rocmmem_lease_fd(handle)
        if self.handle_kind == "memfd" and fd >= 0:
            # The buffer is a mapping of the lease's memfd of its own (mmap dups the fd), so
            # that a view kept after release stays mapped: it reads what the daemon left
            # (zeros) instead of faulting, and is unmapped when the last view goes.
            self._map = mmap.mmap(fd, self.size, mmap.MAP_SHARED,
                                  mmap.PROT_READ | mmap.PROT_WRITE)
            self._view = memoryview(self._map)
        elif self.handle_kind == "memfd" and self._ptr:
            # A range of the client's arena (no fd of its own): librocmmem keeps the arena
            # mapped until disconnect, and a release punches the range, so a view kept after
            # release reads zeros here too.
            self._view = memoryview(
                (ctypes.c_ubyte * self.size).from_address(self._ptr)).cast("B")

    @property
    def released(self):
        return self._released

    @property
    def revoked(self):
        """True once the daemon has taken the lease's memory back: revoked with its model,
        not taken back by a restarted daemon, or reclaimed when the daemon stopped at its
        shutdown deadline (as librocmmem knows it: once it has read the end of the
        connection, in a call, dispatch() or the event thread). revoked_reason says why
        once the revocation was delivered."""
        if self._revoked:
            return True
        c = self._client
        with c._lock:
            if self._handle is None or c._closed or c._handle is None or \
                    c._pid != os.getpid():
                return False
            return bool(c._lib.rocmmem_lease_revoked(self._handle))

    def _newer_than(self, generation):
        """Whether the lease belongs to a residency of its model later than generation (an
        eviction of that generation must leave it alone)."""
        return bool(generation) and self.generation > generation

    @property
    def ptr(self):
        """The lease's address as an int (None once released, or for a NOMAP lease)."""
        return None if self._released else self._ptr

    @property
    def buffer(self):
        """A writable memoryview of the lease's size bytes (host memory); None for a GPU
        lease and once released. Do not use it, or anything made from it, after release."""
        return None if self._released else self._view

    @property
    def fd(self):
        """The lease's first fd kept open by librocmmem (a host lease's memfd), or -1; owned
        by the library: dup() it to keep it."""
        if self._released:
            return -1
        with self._client._native():
            return -1 if self._released else self._client._lib.rocmmem_lease_fd(self._handle)

    def __repr__(self):
        state = "released" if self._released else f"{self.handle_kind}"
        return (f"<rocmmem.Lease {self.id}: {self.size} bytes on device {self.device}, "
                f"{state}>")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.release()

    def _drop_views(self):
        view, self._view = self._view, None
        m, self._map = self._map, None
        if view is not None:
            view.release()
        if m is not None:
            try:
                m.close()
            except BufferError:
                pass  # views made from the buffer still exist: unmapped when they go

    def _forget(self):
        """The C lease is gone with its connection: only the Python side is left to undo."""
        self._released = True
        self._handle = None
        self._drop_views()

    def release(self):
        """Releases the lease: unmaps it and tells the daemon. The buffer must not be used
        afterwards (views of it read zeros, and what is written to them is lost). Releasing
        twice, after a revocation or after the daemon went away is fine: never raises."""
        client = self._client
        with client._lock:
            if self._released:
                return
            self._released = True
            handle, self._handle = self._handle, None
            client._leases.pop(self.id, None)
            usable = not client._closed and client._handle is not None and \
                client._pid == os.getpid()
            if usable:
                client._inflight += 1
        self._drop_views()
        if not usable or handle is None:
            return
        try:
            rc = client._lib.rocmmem_lease_release(handle)
            if rc < 0:
                e = client._error(rc)
                if not isinstance(e, DaemonUnavailable):
                    log.warning("rocmmem: release of lease %d: %s", self.id, e)
        finally:
            client._leave()

    def _on_revoked(self, reason):
        self._revoked = True
        self.revoked_reason = reason
        self.release()  # frees the handle without asking the daemon

    def __del__(self):
        try:
            if not self._released and self._client._pid == os.getpid():
                self.release()
        except Exception:
            pass
