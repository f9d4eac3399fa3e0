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
import os
import select
import threading
import weakref

from . import _convert
from . import _native as N
from ._common import _encode, _pending, _timeout_ms, log
from ._events import _Events, _trampoline
from ._lease import Lease
from ._model import Eviction, Model
from ._progress import _Progress
from .errors import ClientClosed, DaemonUnavailable, Error, LibraryNotFound, make_error
from .sizes import parse_size

__all__ = ["connect", "Client", "Lease", "Model", "Eviction"]

# Clients still open, closed at interpreter exit (their event threads stopped first).
_live = weakref.WeakSet()
_live_lock = threading.Lock()


def _model_id(model):
    if isinstance(model, Model):
        return model.id
    if isinstance(model, bool) or not isinstance(model, int):
        raise TypeError(f"a model is a rocmmem.Model or its id (int), not {model!r}")
    return model


class Client(_Events, _Progress):
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
        self._progress_init(lib, handle)  # on_progress, and the watchers of waiting calls
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

    def lease(self, size, device=0, timeout=0.0, tag=None, model=None, nomap=False,
              on_progress=None):
        """Leases size bytes (an int or "512M") on device, waiting up to timeout seconds
        (0: refuse at once; None: as long as it takes). tag is shown in status; model (a
        Model or its id) counts the lease toward that model, which must be on the same
        device. nomap=True leaves a GPU lease's handles open instead of importing them.
        on_progress(WaitProgress) is told, while it waits, what it waits for (from the
        thread that delivers events; with several such leases of one size and device at
        once, each is told the others' too). Returns a Lease. Raises OutOfMemory, Timeout, TooLarge, ... with the daemon's
        explanation; DaemonUnavailable without a daemon, even in fail-safe mode."""
        nbytes = parse_size(size)
        req = N.LeaseRequest(device=device, size=nbytes, timeout_ms=_timeout_ms(timeout),
                             tag=_encode(tag, "tag"), flags=N.LEASE_NOMAP if nomap else 0,
                             model_id=0 if model is None else _model_id(model))
        model_obj = model if isinstance(model, Model) else self._models.get(req.model_id)
        out = ctypes.c_void_p()
        def match(p):
            return (p.request, p.device, p.requested) == ("lease", device, nbytes)

        with self._native() as handle, self._watching(match, on_progress):
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
        result = N.EvictResult()
        self._call("rocmmem_model_evict", _model_id(model), ctypes.byref(result), has_soft=True)
        return Eviction(result.bytes_freed, bool(result.revoked))

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
        if self._call("rocmmem_trim", N.ALL_DEVICES if device is None else device,
                      ctypes.byref(released),
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
        got = ctypes.c_uint32()
        rc = self._call("rocmmem_subscribe", what, ms, ctypes.byref(got), soft=-1,
                        has_soft=True)
        return None if rc == -1 else got.value / 1000.0

    def unsubscribe(self):
        """Ends the subscription; nothing received but undelivered is delivered afterwards."""
        self._call("rocmmem_unsubscribe", has_soft=True)

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
    handle = ctypes.c_void_p()
    flags = (0 if reconnect else N.CONNECT_NO_RECONNECT) | (N.CONNECT_NO_WAIT if fail_safe
                                                            else 0)
    window = 0 if reconnect_window is None else _timeout_ms(reconnect_window, "reconnect_window")
    if reconnect_window is not None and window == 0:
        raise ValueError("reconnect_window must be more than 0 seconds (or reconnect=False)")
    # Fail-safe: one quick try first, so that a host without a daemon starts at once.
    tries = [0, ms] if fail_safe and ms != 0 else [ms]
    for i, wait in enumerate(tries):
        opts = N.ConnectOptions(socket_path=path, name=cname, timeout_ms=wait, flags=flags,
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
