# SPDX-License-Identifier: MIT
"""_events: how a Client delivers what the daemon says unprompted: fileno() and dispatch(), an
event thread or an asyncio loop, and the models' evict and revocation callbacks."""
import errno as _errno
import os
import select
import threading
import time

from . import _convert
from . import _native as N
from ._common import _call_user, _pending, log
from .errors import ClientClosed, DaemonUnavailable, Error

__all__ = []


def _trampoline(client_ref):
    """The C event callback of one client (holding it weakly)."""

    def on_event(_handle, event_p, _userdata):
        try:
            client = client_ref()
            if client is not None:
                client._deliver(event_p.contents)
        except (KeyboardInterrupt, SystemExit) as e:
            _pending.exc = e
        except BaseException:
            log.exception("rocmmem: an event could not be delivered")

    return N.EVENT_FN(on_event)


class _Events:
    """The event half of Client (a mixin: Client provides _lock, _native, _call, ...)."""

    def fileno(self):
        """An fd that polls readable when events may be waiting: put it in select, poll or an
        asyncio loop and call dispatch() when it is (see also attach_loop()). Owned by the
        client: do not read or close it. A client without a connection returns an fd that
        never becomes readable."""
        with self._lock:
            if self._closed:
                raise ClientClosed(_errno.EBADF, "the client is closed")
            return self._epoll.fileno()

    def _end_events(self):
        """After the connection's end was delivered: fileno() never polls readable again."""
        with self._lock:
            fd, self._event_fd = self._event_fd, None
            if fd is not None and not self._closed:
                try:
                    self._epoll.unregister(fd)
                except OSError:
                    pass

    def dispatch(self):
        """Delivers the events that have arrived, without blocking, to the Models' callbacks
        and on_event, from the calling thread. Returns how many. Once the connection has
        ended it raises DaemonUnavailable (a fail-safe client returns 0)."""
        try:
            with self._native() as handle:
                rc = self._lib.rocmmem_dispatch(handle)
                if rc < 0:
                    raise self._error(rc)
        except DaemonUnavailable:
            if self._handle is not None:
                self._ended = True  # -ECONNRESET: the end was delivered already
            self._end_events()
            if self._fail_safe and not self._closed:
                return 0
            raise
        if self._ended:
            self._end_events()
        return rc

    def start_event_thread(self):
        """Starts a daemon thread that waits on fileno() and dispatches: callbacks then run on
        it. Returns the thread (None for a client without a connection); a second call
        returns the running one. stop_event_thread() or close() stops it."""
        with self._lock:
            if self._thread is not None and self._thread.is_alive():
                return self._thread
            if self._closed:
                raise ClientClosed(_errno.EBADF, "the client is closed")
            if self._handle is None:
                return None
            fd = self._epoll.fileno()
            stop_r, stop_w = os.pipe()
            self._thread_stop = stop_w
            self._thread = threading.Thread(target=self._event_loop, args=(fd, stop_r),
                                            name="rocmmem-events", daemon=True)
            self._thread.start()
            return self._thread

    def stop_event_thread(self, timeout=5.0):
        """Stops the event thread and waits for it (unless called from it)."""
        with self._lock:
            thread, stop_w = self._thread, self._thread_stop
            self._thread = self._thread_stop = None
        if stop_w is not None:
            try:
                os.write(stop_w, b"x")
            except OSError:
                pass
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)
            if thread.is_alive():
                log.warning("rocmmem: the event thread did not stop within %s s (a callback "
                            "still running?)", timeout)
        if stop_w is not None:
            os.close(stop_w)

    def _event_loop(self, fd, stop_r):
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        poller.register(stop_r, select.POLLIN)
        try:
            while True:
                ready = poller.poll()
                if any(f == stop_r for f, _ in ready) or self._closed:
                    return
                try:
                    n = self.dispatch()
                except Error:
                    return  # the connection ended (DISCONNECTED was delivered) or closed
                if self._closed or self._ended:
                    return
                if n == 0:
                    # Another thread is reading the socket for everyone (a call waiting for
                    # the daemon): it will queue what arrives. Do not spin meanwhile.
                    time.sleep(0.002)
        finally:
            os.close(stop_r)

    def attach_loop(self, loop=None):
        """Has an asyncio loop (default: the running one) dispatch this client's events:
        loop.add_reader(fileno(), ...), removed again when the connection ends or at
        close()."""
        if loop is None:
            import asyncio
            loop = asyncio.get_running_loop()
        fd = self.fileno()
        with self._lock:
            self._loop = (loop, fd)
        loop.add_reader(fd, self._loop_readable)

    def detach_loop(self):
        """Undoes attach_loop (from the loop's thread)."""
        with self._lock:
            attached, self._loop = self._loop, None
        if attached is not None:
            loop, fd = attached
            if not loop.is_closed():
                loop.remove_reader(fd)

    def _loop_readable(self):
        try:
            self.dispatch()
        except Error as e:
            log.debug("rocmmem: dispatch from the asyncio loop: %s", e)
        if self._closed or self._ended:
            self.detach_loop()

    def _deliver(self, ev):
        """Handles one event, inside the C callback: ev and what it points to are valid only
        until this returns, so everything is copied out first. librocmmem has already dropped
        evict requests and revocations of a residency older than one this host acquired."""
        t = ev.type
        if t == N.EVENT_EVICT_REQUEST:
            model = self._models.get(ev.model_id)
            if model is not None and model.on_evict is not None:
                self._evict(model, ev.generation)
                return
            if self.on_event is None:
                log.warning("rocmmem: the daemon asks to unload model %d%s, which has no "
                            "on_evict and no on_event: not acked, so its memory is revoked "
                            "at the deadline (%d ms)", ev.model_id,
                            f" '{model.name}'" if model else "", ev.deadline_ms)
        elif t == N.EVENT_MODEL_REVOKED:
            model = self._models.get(ev.model_id)
            if model is not None:
                if not model._newer_than(ev.generation):
                    model.resident = False
                if model.on_revoked is not None:
                    model.event_generation = ev.generation
                    try:
                        _call_user(model.on_revoked, model, N.text(ev.reason),
                                   what=f"on_revoked of model '{model.name}'")
                    finally:
                        model.event_generation = 0
                    return
        elif t == N.EVENT_LEASE_REVOKED:
            lease = self._leases.get(ev.lease_id)
            if lease is not None:
                lease._on_revoked(N.text(ev.reason))
        elif t == N.EVENT_DISCONNECTED:
            self._ended = True
            self._lost(N.text(ev.reason) or "the connection to rocmmemd ended")
        elif t == N.EVENT_RECONNECTING:
            self._away(N.text(ev.reason) or "the connection to rocmmemd ended")
        elif t == N.EVENT_RECONNECTED:
            self._back(N.text(ev.reason) or "reconnected to rocmmemd")
        elif t == N.EVENT_SHUTDOWN:
            log.info("rocmmem: rocmmemd is stopping: %s", N.text(ev.reason))
        fn = self.on_event
        if fn is not None:
            event = _convert.event(self._lib, ev)
            _call_user(fn, event, what="on_event")

    def _evict(self, model, generation):
        """Runs a model's on_evict, releases the leases still tagged with it and acks the
        eviction of that generation. A slow on_evict may outlast the deadline: the model is
        then revoked and may be acquired again meanwhile; the leases of that newer residency
        stay, and the ack, stale, is refused by the daemon."""
        model.event_generation = generation
        try:
            ok, _ = _call_user(model.on_evict, model,
                               what=f"on_evict of model {model.id} '{model.name}' (not "
                                    f"acked: the daemon revokes it at its deadline)")
        finally:
            model.event_generation = 0
        if not ok:
            return
        for lease in self.leases():
            if lease.model is model and not lease._newer_than(generation):
                lease.release()
        if not model._newer_than(generation):
            model.resident = False
        try:
            self._call("rocmmem_model_evict_ack_generation", model.id, generation)
            log.debug("rocmmem: acked the eviction of model %d '%s' generation %d", model.id,
                      model.name, generation)
        except Error as e:
            # ESTALE: the eviction is over already (revoked at its deadline; the daemon logs
            # it); closed or gone: nothing to tell.
            log.debug("rocmmem: ack of model %d '%s' generation %d: %s", model.id, model.name,
                      generation, e)
