# SPDX-License-Identifier: MIT
"""layers.py: the layers of daemon/, client/ and common/, as one table (docs/architecture.md).

A unit is a file pair X.c/X.h (or a lone file) named by its path without the extension. A unit
may use units of its own layer and of the layers below it in its own program, and the
programs that program lists in USES; never a layer above, and no two units may use each other,
directly or round a circle. Each entry of LAYERS is a folder (everything under it) or one unit,
and the longest entry that matches a unit decides its layer.
"""

# program: (folder, the other programs its files may use)
PROGRAMS = {
    "common": ("common", ()),
    "daemon": ("daemon", ("common",)),
    "include": ("client/include", ()),
    "lib": ("client/lib", ("common", "include")),
    "ctl": ("client/ctl", ("common", "include")),
    "torch": ("client/torch", ("common", "include")),
}

# folder or unit: (rank within its program, what the layer owns)
LAYERS = {
    "common": (0, "sizes, text, socket paths, framing, GPU runtime loaders: shared by all"),
    "daemon/base": (1, "ids, the log, the deadline heap: what knows no other part"),
    "daemon/platform": (2, "the machine: backends, telemetry, jobs, state file, systemd, peers"),
    "daemon/state": (3, "the books: devices, holders, leases, models, waiters; plain data"),
    "daemon/policy": (4, "decisions: admission, queue order, placement, eviction, quotas, "
                         "access, explanations; pure functions of state, input and time"),
    "daemon/service": (5, "applies decisions: handlers, backend jobs, deadlines, adoption, "
                          "the event bus and its log, counters and denials, metrics text"),
    "daemon/net": (6, "sockets and the wire: listener, connections, protobuf, dispatch, "
                      "handshake, status stream, telemetry feed, drain"),
    "daemon/app": (7, "the process: main, options, configuration, reload, signals"),
    "client/include": (0, "the public header"),
    "client/lib/base": (1, "errors, GPU import, views of received messages"),
    "client/lib/conn": (2, "one connection: socket, hello, requests, replies, event queues"),
    "client/lib/api": (3, "the requests: leases, models, status, feed, metrics, trim"),
    "client/lib/session": (4, "connect, disconnect, reconnection and re-declaration"),
    "client/ctl/ctl": (1, "rocmmemctl's shared types: a command, its options, the run"),
    "client/ctl/common": (1, "options parsed and help written from a command's table, "
                             "connecting, SIZE arguments"),
    "client/ctl/errors": (1, "failures on stderr and as JSON"),
    "client/ctl/details": (1, "the lines under status's devices and clients tables"),
    "client/ctl/format": (1, "sizes, durations, devices, names: values read and written"),
    "client/ctl/json": (1, "JSON output helpers and shapes"),
    "client/ctl/progress": (1, "what a queued lease says while it waits"),
    "client/ctl/show": (1, "the models table, shared by status and models"),
    "client/ctl/table": (1, "tables over libsmartcols"),
    "client/ctl/lease": (2, "a command"),
    "client/ctl/metrics": (2, "a command"),
    "client/ctl/models": (2, "a command"),
    "client/ctl/status": (2, "a command"),
    "client/ctl/trim": (2, "a command"),
    "client/ctl/watch": (2, "a command"),
    "client/ctl/main": (3, "the table of commands"),
    "client/torch/rocmmem_torch": (0, "the allocator's public header"),
    "client/torch/books": (1, "the allocator's lock, counters and failures"),
    "client/torch/config": (1, "the allocator's settings"),
    "client/torch/runtime": (1, "the GPU runtime calls"),
    "client/torch/suballoc": (1, "the sub-allocator"),
    "client/torch/suballoc_verify": (1, "the sub-allocator's invariants, for its tests"),
    "client/torch/connect": (2, "the connection to the daemon, leases through it"),
    "client/torch/allocator": (3, "PyTorch's hooks: arenas over leases"),
}

# Headers a layer may not include, directly or through the project's own headers: the
# policy core and the books know no event loop, socket, protobuf or clock.
_LOOP = ("uv.h",)
_WIRE = ("rocmmem.pb-c.h", "protobuf-c/protobuf-c.h")
_OS = ("sys/socket.h", "time.h", "systemd/sd-daemon.h", "systemd/sd-journal.h")
FORBIDDEN = {
    "daemon/base": _LOOP + _WIRE,
    "daemon/platform": _WIRE,
    "daemon/state": _LOOP + _WIRE + _OS,
    "daemon/policy": _LOOP + _WIRE + _OS,
    "daemon/service": _LOOP + _WIRE + ("sys/socket.h",),
}

# Today's files outside layer folders, and the layer each is cut for (docs/architecture.md
# says where each part goes). A key is one unit, or a folder followed by "/*"; these are
# looked at before LAYERS. The refactor moves the files into their layers and empties this.
LEGACY: dict = {}
