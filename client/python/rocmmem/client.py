# SPDX-License-Identifier: MIT
"""client: connections to rocmmemd, leases and models, over librocmmem (ctypes).

Thread safety: librocmmem's client is thread-safe and so is this wrapper. Python-side state
(the leases and models a client knows, its open/closed state) is kept under one re-entrant lock
per client that is never held across a call into C, so that a thread waiting for memory never
blocks another thread's release, and event callbacks may call the client.

Lifetime: every call into C with a client's handle is counted (the "gate"); close() marks the
client closed at once and frees the C client only when the last call in flight has returned,
so that no thread ever uses a freed client. Leases and models hold a reference to their client;
a client holds its leases weakly, so that a lease dropped by its user is released by garbage
collection, and its models strongly (their callbacks must run while the client lives).
"""
import contextlib
import ctypes
import errno as _errno
import logging
import math
import mmap
import os
import select
import threading
import time
import weakref
from collections import namedtuple

from . import _convert
from . import _native as N
from .errors import ClientClosed, DaemonUnavailable, Error, LibraryNotFound, make_error
from .sizes import parse_size

__all__ = ["connect", "Client", "Lease", "Model", "Eviction"]

log = logging.getLogger("rocmmem")

Eviction = namedtuple("Eviction", "bytes_freed revoked")
Eviction.__doc__ = """What evict_model did: bytes_freed (as the daemon reports them) and revoked
(True when the owner missed the deadline and the daemon took the memory back)."""

_INT_MAX = (1 << 31) - 1
_INT64_MAX = (1 << 63) - 1

# Clients still open, closed at interpreter exit (their event threads stopped first).
_live = weakref.WeakSet()
_live_lock = threading.Lock()

# KeyboardInterrupt or SystemExit raised inside a callback cannot cross C: it is kept here and
# raised in the same thread once the call into C returns.
_pending = threading.local()


def _timeout_ms(timeout, what="timeout"):
    """Seconds (None or inf: no limit) as librocmmem's milliseconds (-1: no limit)."""
    if timeout is None:
        return -1
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
        raise TypeError(f"{what} is a number of seconds or None, not {timeout!r}")
    t = float(timeout)
    if math.isnan(t) or t < 0:
        raise ValueError(f"{what} must be >= 0 seconds (or None to wait as long as it takes), "
                         f"not {timeout!r}")
    if math.isinf(t):
        return -1
    return min(math.ceil(t * 1000), _INT64_MAX)


def _encode(value, what):
    if value is None:
        return None
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8")
    raise TypeError(f"{what} must be a str, not {type(value).__name__}")


def _model_id(model):
    if isinstance(model, Model):
        return model.id
    if isinstance(model, bool) or not isinstance(model, int):
        raise TypeError(f"a model is a rocmmem.Model or its id (int), not {model!r}")
    return model


def _call_user(fn, *args, what):
    """Calls a user callback; logs what it raises (it must never reach C). Returns
    (True, result) on success, (False, None) when it raised."""
    try:
        return True, fn(*args)
    except (KeyboardInterrupt, SystemExit) as e:
        _pending.exc = e
    except BaseException:
        log.exception("rocmmem: %s raised", what)
    return False, None


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


class Client:
    """A connection to rocmmemd (see connect()). Use as a context manager, or close() it."""

    def __init__(self, lib, handle, *, fail_safe=False, reason=None,
                 reason_errno=_errno.ECONNREFUSED):
        self._lib = lib
        self._handle = handle  # the rocmmem_client * (int), None once freed or never made
        self._lock = threading.RLock()
        self._inflight = 0
        self._closed = False
        self._pid = os.getpid()
        self._fail_safe = fail_safe
        self._warned_away = False  # the daemon's absence was logged (once per absence)
        self._reason = reason  # why the daemon is unavailable
        self._reason_errno = reason_errno
        self._leases = weakref.WeakValueDictionary()  # lease id -> Lease
        self._models = {}  # model id -> Model
        self._thread = None
        self._thread_stop = None  # the write end of the event thread's stop pipe
        # What fileno() returns: an epoll of our own over the library's event fd, which is
        # taken out of it once the connection has ended (its socket would poll readable for
        # ever after), so that loops waiting on fileno() do not spin on a dead connection.
        self._epoll = select.epoll()
        self._event_fd = None  # the library's, while it is in self._epoll
        self._ended = False  # the connection's end was delivered (DISCONNECTED)
        self._loop = None  # (loop, fd) of attach_loop
        self._callback = None
        self.on_event = None
        self.daemon_version = None
        self.backend = None
        self.device_count = 0
        if handle is not None:
            self.daemon_version = N.text(lib.rocmmem_client_daemon_version(handle))
            self.backend = N.text(lib.rocmmem_client_backend(handle))
            self.device_count = lib.rocmmem_client_device_count(handle)
            # Kept for the client's whole life: C holds the pointer.
            self._callback = _trampoline(weakref.ref(self))
            lib.rocmmem_set_event_callback(handle, self._callback, None)
            self._event_fd = lib.rocmmem_event_fd(handle)
            self._epoll.register(self._event_fd, select.EPOLLIN)
            with _live_lock:
                _live.add(self)

    # --- state ---------------------------------------------------------------------------

    @property
    def available(self):
        """Whether the daemon is there: state == "connected". False for a fail-safe client
        without one, once the connection has ended, and while librocmmem reconnects to a
        daemon that went away (True again once it is back). Read from librocmmem's state, as
        state is: the two never disagree, whichever thread delivers events."""
        return self.state == "connected"

    @property
    def state(self):
        """Where the connection stands: "connected", "reconnecting" (the daemon went away
        without saying it stops; librocmmem brings the connection back, re-declaring this
        client's leases and models) or "disconnected" (for good, or never connected). The
        one source of available, as librocmmem knows it right now (its events may be
        delivered later)."""
        with self._lock:
            if self._closed or self._handle is None or self._pid != os.getpid():
                return "disconnected"
        try:
            with self._native() as handle:
                return N.CONNECTION_STATES[self._lib.rocmmem_client_state(handle)]
        except Error:
            return "disconnected"

    @property
    def closed(self):
        return self._closed

    @property
    def fail_safe(self):
        return self._fail_safe

    @property
    def unavailable_reason(self):
        """Why the daemon is unavailable (None while it is available)."""
        state = self.state
        if state == "connected":
            return None
        if self._closed:
            return "the client is closed"
        if state == "reconnecting":
            return self._reason or "rocmmemd went away: reconnecting"
        return self._reason or "the connection to rocmmemd ended"

    def __repr__(self):
        if self._closed:
            state = "closed"
        elif not self.available:
            state = f"unavailable: {self.unavailable_reason}"
        else:
            state = f"rocmmemd {self.daemon_version}, backend {self.backend}"
        return f"<rocmmem.Client {state}>"

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # --- the gate: calls into C with the handle --------------------------------------------

    @contextlib.contextmanager
    def _native(self):
        """Yields the handle for one call into C; the C client is not freed meanwhile."""
        with self._lock:
            if self._pid != os.getpid():
                raise Error(_errno.ECHILD, "this client belongs to the parent process: a child "
                                           "after fork() must connect anew")
            if self._closed or self._handle is None:
                if self._closed:
                    raise ClientClosed(_errno.EBADF, "the client is closed")
                raise DaemonUnavailable(self._reason_errno, self._reason)
            self._inflight += 1
            handle = self._handle
        try:
            yield handle
        finally:
            self._leave()
            exc = getattr(_pending, "exc", None)
            if exc is not None:
                _pending.exc = None
                raise exc

    def retain_handle(self):
        """For C code that calls librocmmem with this client's connection itself (a C
        extension, librocmmem_torch): returns the rocmmem_client * as an int and keeps it valid
        until release_handle(), even across close() (which then frees it at that release).
        Raises ClientClosed, or DaemonUnavailable for a client without a connection."""
        with self._lock:
            if self._pid != os.getpid():
                raise Error(_errno.ECHILD, "this client belongs to the parent process")
            if self._closed:
                raise ClientClosed(_errno.EBADF, "the client is closed")
            if self._handle is None:
                raise DaemonUnavailable(self._reason_errno, self._reason)
            self._inflight += 1
            return self._handle

    def release_handle(self):
        """Ends one retain_handle(): the handle must no longer be used."""
        self._leave()

    def _leave(self):
        handle = None
        with self._lock:
            self._inflight -= 1
            if self._inflight == 0 and self._closed and self._handle is not None:
                handle, self._handle = self._handle, None
        if handle is not None:
            self._lib.rocmmem_disconnect(handle)

    def _error(self, err, connecting=False):
        """The exception for a negative errno a call just returned, with this thread's
        message."""
        message = N.text(self._lib.rocmmem_last_error()) or N.text(
            self._lib.rocmmem_strerror(err))
        e = make_error(err, message, connecting=connecting)
        if isinstance(e, DaemonUnavailable):
            if -err == _errno.ENOTCONN:
                self._away(message)  # librocmmem is reconnecting
            else:
                self._lost(message)
        return e

    # _lost, _away and _back only keep the reason and log: whether the daemon is available
    # is librocmmem's state (see state), never a flag of this package's.

    def _lost(self, reason):
        """The connection has ended: the client is unavailable from now on."""
        with self._lock:
            warn = not self._warned_away and self._reason is None
            self._warned_away = True
            self._reason = reason
        if warn and self._fail_safe:
            log.warning("rocmmem: rocmmemd is unavailable (%s): carrying on without it",
                        reason)

    def _away(self, reason):
        """The daemon went away and librocmmem reconnects: unavailable until it is back."""
        with self._lock:
            warn = not self._warned_away
            self._warned_away = True
            self._reason = reason
        if warn:
            log.warning("rocmmem: rocmmemd went away (%s)%s", reason,
                        "; carrying on without it meanwhile" if self._fail_safe else "")

    def _back(self, summary):
        """librocmmem reconnected, this client's leases and models re-declared."""
        with self._lock:
            self._warned_away = False
            self._reason = None
        log.info("rocmmem: %s", summary)

    def _revive(self):
        """For a fail-safe client whose daemon went away: gives librocmmem the chance to
        reconnect (an attempt, if one is due) without waiting. Returns available."""
        with self._lock:
            if self._closed or self._handle is None or self._pid != os.getpid():
                return False
        try:
            with self._native() as handle:
                self._lib.rocmmem_dispatch(handle)
        except Error:
            pass
        return self.available

    def _call(self, name, *args, soft=None, has_soft=False):
        """lib.name(handle, *args) under the gate; a negative result raises. With has_soft,
        a fail-safe client returns soft instead of raising DaemonUnavailable (and at once when
        it is unavailable already)."""
        fail_safe = has_soft and self._fail_safe
        if fail_safe and not self.available and not self._closed and not self._revive():
            return soft
        try:
            with self._native() as handle:
                rc = getattr(self._lib, name)(handle, *args)
                if rc < 0:
                    raise self._error(rc)
                return rc
        except DaemonUnavailable:
            if fail_safe:
                return soft
            raise

    # --- leases --------------------------------------------------------------------------

    def lease(self, size, device=0, timeout=0.0, tag=None, model=None, nomap=False):
        """Leases size bytes (an int or "512M") on device, waiting up to timeout seconds
        (0: refuse at once; None: as long as it takes). tag is shown in status; model (a
        Model or its id) counts the lease toward that model, which must be on the same
        device. nomap=True leaves a GPU lease's handles open instead of importing them.
        Returns a Lease. Raises OutOfMemory, Timeout, TooLarge, ... with the daemon's
        explanation; DaemonUnavailable without a daemon, even in fail-safe mode."""
        nbytes = parse_size(size)
        req = N.LeaseRequest(device=device, size=nbytes, timeout_ms=_timeout_ms(timeout),
                             tag=_encode(tag, "tag"), flags=N.LEASE_NOMAP if nomap else 0,
                             model_id=0 if model is None else _model_id(model))
        model_obj = model if isinstance(model, Model) else self._models.get(req.model_id)
        out = ctypes.c_void_p()
        with self._native() as handle:
            rc = self._lib.rocmmem_lease_acquire(handle, ctypes.byref(req), ctypes.byref(out))
            if rc < 0:
                raise self._error(rc)
            try:
                lease = Lease(self, out.value, tag, model_obj)
            except BaseException:
                self._lib.rocmmem_lease_release(out.value)
                raise
            with self._lock:
                if self._closed:
                    # close() ran meanwhile: the C lease goes with the connection.
                    lease._forget()
                    raise ClientClosed(_errno.EBADF, "the client was closed while the lease "
                                                     "was being granted")
                self._leases[lease.id] = lease
        return lease

    def leases(self):
        """The leases this client holds, as Lease objects."""
        with self._lock:
            return [l for l in self._leases.values() if not l.released]

    # --- models --------------------------------------------------------------------------

    def register_model(self, name, size=0, model_class="other", device=0, priority=0,
                       pinned=False, on_evict=None, on_revoked=None):
        """Declares a model (it holds no memory yet) and returns its Model.

        size: bytes (or "4G") reserved when acquire makes it resident; 0 for a model whose
        memory is leases tagged with it. model_class: "other", "transformer", "vae",
        "text_encoder" or "image_encoder". on_evict(model): unload the model when the daemon
        asks (the package then acks); on_revoked(model, reason): its memory was taken back.
        A fail-safe client without a daemon returns a Model whose calls do nothing."""
        nbytes = parse_size(size)
        if isinstance(model_class, str):
            try:
                cls = N.MODEL_CLASSES.index(model_class)
            except ValueError:
                raise ValueError(f"unknown model class {model_class!r}: one of "
                                 f"{', '.join(N.MODEL_CLASSES)}") from None
        else:
            cls = int(model_class)
        desc = N.ModelDesc(device=device, name=_encode(name, "name"), model_class=cls,
                           size=nbytes, priority=priority, pinned=1 if pinned else 0)
        model_id = ctypes.c_uint64()
        args = dict(name=name, size=nbytes, model_class=_convert.model_class_name(cls),
                    device=device, priority=priority, pinned=bool(pinned), on_evict=on_evict,
                    on_revoked=on_revoked)
        if self._call("rocmmem_model_register", ctypes.byref(desc), ctypes.byref(model_id),
                      soft=-1, has_soft=True) == -1:
            return Model(self, 0, **args)  # fail-safe, no daemon: a model that does nothing
        model = Model(self, model_id.value, **args)
        with self._lock:
            self._models[model.id] = model
        return model

    def models(self):
        """The models this client registered, as Model objects."""
        with self._lock:
            return list(self._models.values())

    def evict_model(self, model):
        """Asks the owner of a model (a Model or any model's id: this client's own, or any as
        root) to unload it now and waits until it has. Returns an Eviction (bytes_freed,
        revoked). Raises Busy (in use, or already being evicted), PermissionDenied,
        NotFound."""
        freed = ctypes.c_uint64()
        rc = self._call("rocmmem_model_evict", _model_id(model), ctypes.byref(freed), soft=0,
                        has_soft=True)
        return Eviction(freed.value, rc == 1)

    def pin_model(self, model, pinned=True):
        """Pins (never evicted to make room) or unpins a model: this client's own, or any as
        root."""
        self._call("rocmmem_model_pin", _model_id(model), 1 if pinned else 0, has_soft=True)
        own = self._models.get(_model_id(model))
        if own is not None:
            own.pinned = bool(pinned)

    def evict_ack(self, model, generation=None):
        """Tells the daemon a model it asked to evict has been unloaded (for hosts that answer
        evict requests through on_event instead of a Model's on_evict). generation: the evict
        request's (event["generation"]); None: the latest evict request delivered for the
        model. Raises Stale (ESTALE) when that eviction is over already: acked, or revoked at
        its deadline."""
        model_id = _model_id(model)
        gen = 0 if generation is None else int(generation)
        own = self._models.get(model_id)
        if own is not None and (gen == 0 or gen >= own.generation):
            own.resident = False  # before the ack: it lets the waiting request through
        self._call("rocmmem_model_evict_ack_generation", model_id, gen, has_soft=True)

    # --- status and telemetry ------------------------------------------------------------

    def status(self):
        """The daemon's state as the dict `rocmmemctl status --json` prints (None for a
        fail-safe client without a daemon)."""
        st = ctypes.c_void_p()
        if self._call("rocmmem_status_get", ctypes.byref(st), soft=-1, has_soft=True) == -1:
            return None
        try:
            return _convert.status(self._lib, st.value)
        finally:
            self._lib.rocmmem_status_free(st)

    def trim(self, device=None):
        """Has the daemon return what its GPU runtime caches to the driver (device None: all
        devices). Returns the bytes released (0 for a fail-safe client without a daemon)."""
        released = ctypes.c_uint64()
        if self._call("rocmmem_trim", -1 if device is None else device, ctypes.byref(released),
                      soft=-1, has_soft=True) == -1:
            return 0
        return released.value

    def metrics(self):
        """The daemon's metrics in the Prometheus text format (None for a fail-safe client
        without a daemon)."""
        out = ctypes.c_void_p()
        if self._call("rocmmem_metrics", ctypes.byref(out), soft=-1, has_soft=True) == -1:
            return None
        try:
            return ctypes.string_at(out.value).decode("utf-8", "backslashreplace")
        finally:
            N.free(out.value)

    def subscribe(self, samples=True, events=True, interval=1.0):
        """Subscribes to telemetry: a sample every interval seconds (0.01 to 60; the first at
        once) and/or every event as it happens, delivered to on_event as dicts shaped like
        `rocmmemctl --json watch` lines ({"type": "sample", ...}, {"type": "event", "event":
        "lease_granted", ...}). Replaces an earlier subscription. Returns the sample interval
        in effect in seconds (0.0 with events only; None for a fail-safe client without a
        daemon)."""
        what = (N.SUBSCRIBE_SAMPLES if samples else 0) | (N.SUBSCRIBE_EVENTS if events else 0)
        if not what:
            raise ValueError("subscribe to samples, events or both")
        ms = round(float(interval) * 1000) if samples else 0
        if samples and not N.SAMPLE_INTERVAL_MIN_MS <= ms <= N.SAMPLE_INTERVAL_MAX_MS:
            raise ValueError(f"the sample interval is 0.01 to 60 seconds, not {interval!r}")
        rc = self._call("rocmmem_subscribe", what, ms, soft=-1, has_soft=True)
        return None if rc == -1 else rc / 1000.0

    def unsubscribe(self):
        """Ends the subscription; nothing received but undelivered is delivered afterwards."""
        self._call("rocmmem_unsubscribe", has_soft=True)

    # --- events --------------------------------------------------------------------------

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

    # --- closing -------------------------------------------------------------------------

    def close(self):
        """Closes the connection: every lease still held is released (its buffer must no
        longer be used), every model forgotten, the event thread stopped. Calls running in
        other threads finish first: the C client is freed when the last returns. Closing
        twice is fine."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if self._pid != os.getpid():
                self._handle = None  # the parent's connection: leave it alone
                return
            leases = list(self._leases.values())
            self._leases.clear()
            self._models.clear()
        with _live_lock:
            _live.discard(self)
        self.stop_event_thread()
        if self._loop is not None:
            try:
                self.detach_loop()
            except Exception as e:  # another thread's loop: it removes the reader itself
                log.debug("rocmmem: could not detach the asyncio loop: %s", e)
        for lease in leases:
            lease._forget()
        with self._lock:
            handle = None
            if self._inflight == 0 and self._handle is not None:
                handle, self._handle = self._handle, None
        if handle is not None:
            self._lib.rocmmem_disconnect(handle)
        self._epoll.close()

    def __del__(self):
        try:
            if not self._closed and self._pid == os.getpid():
                self.close()
        except Exception:
            pass


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

    def acquire(self, timeout=None):
        """Marks the model in use (never evicted until release()). If it is not resident its
        size is reserved first, waiting up to timeout seconds (None: as long as it takes)
        while the daemon has other models unloaded. Acquires nest. Returns the model."""
        ms = _timeout_ms(timeout)
        if not self._soft():
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


def connect(socket=None, name=None, timeout=5.0, fail_safe=False, reconnect=True,
            reconnect_window=None):
    """Connects to rocmmemd and returns a Client.

    socket: the daemon's socket path (None: $ROCMMEM_SOCKET, else the per-user socket when it
    exists, else /run/rocmmemd/rocmmemd.sock). name: shown in the daemon's status and logs
    (None: the process's name). timeout: seconds to keep trying while the socket is absent or
    refusing (a daemon that is starting) and to wait for its answer (0: try once; None: no
    limit).

    fail_safe=True: when the daemon is unreachable or librocmmem is missing, returns a Client
    whose available is False and whose model, status and telemetry calls do nothing (lease()
    still raises DaemonUnavailable); a missing socket is not waited for. Such a client whose
    daemon goes away later degrades the same way instead of raising.

    reconnect=True: when the daemon goes away without saying it stops (a crash, SIGKILL, its
    watchdog) while the client holds leases or models, librocmmem brings the connection back
    (re-declaring them: the memory and the data stay) for reconnect_window seconds (None: 60,
    or $ROCMMEM_RECONNECT; inf: no limit). Meanwhile available is False and state is
    "reconnecting"; calls wait for the daemon up to their own timeout (a fail-safe client's
    do not wait: they do nothing, as without a daemon, until it is back). on_event gets
    {"type": "reconnecting"} and {"type": "reconnected"}. reconnect=False: the first loss is
    final, as with $ROCMMEM_RECONNECT=0.
    """
    try:
        lib = N.load()
    except LibraryNotFound as e:
        if not fail_safe:
            raise
        log.warning("rocmmem: %s: carrying on without rocmmemd", e)
        return Client(None, None, fail_safe=True, reason=str(e), reason_errno=_errno.ENOENT)
    path = None if socket is None else os.fsencode(socket)
    cname = _encode(name, "name")
    ms = _timeout_ms(timeout)
    ms = -1 if ms < 0 else min(ms, _INT_MAX)
    handle = ctypes.c_void_p()
    flags = (0 if reconnect else N.CONNECT_NO_RECONNECT) | (N.CONNECT_NO_WAIT if fail_safe
                                                            else 0)
    window = 0 if reconnect_window is None else _timeout_ms(reconnect_window, "reconnect_window")
    if reconnect_window is not None and window == 0:
        raise ValueError("reconnect_window must be more than 0 seconds (or reconnect=False)")
    window = -1 if window < 0 else min(window, _INT_MAX)
    # Fail-safe: one quick try first, so that a host without a daemon starts at once.
    tries = [0, ms] if fail_safe and ms != 0 else [ms]
    for i, wait in enumerate(tries):
        opts = N.ConnectOptions(size=ctypes.sizeof(N.ConnectOptions), socket_path=path,
                                name=cname, timeout_ms=wait, flags=flags,
                                reconnect_window_ms=window)
        rc = lib.rocmmem_connect_with(ctypes.byref(opts), ctypes.byref(handle))
        if rc == 0:
            return Client(lib, handle.value, fail_safe=fail_safe)
        message = N.text(lib.rocmmem_last_error()) or N.text(lib.rocmmem_strerror(rc))
        e = make_error(rc, message, connecting=True)
        # A missing socket means no daemon: do not wait for one. A refusing one may be
        # restarting: worth the timeout.
        if i + 1 < len(tries) and -rc == _errno.ECONNREFUSED:
            continue
        break
    if not fail_safe or -rc == _errno.EINVAL:
        raise e  # EINVAL: a bad name or path, which no daemon would take
    log.warning("rocmmem: could not connect to rocmmemd (%s): carrying on without it", message)
    return Client(lib, None, fail_safe=True, reason=message, reason_errno=-rc)


def _close_all():
    """At interpreter exit: close every client still open (event threads stopped first)."""
    with _live_lock:
        clients = list(_live)
    for c in clients:
        try:
            c.close()
        except Exception:
            pass
