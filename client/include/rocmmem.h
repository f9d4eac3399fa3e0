/* SPDX-License-Identifier: MIT */
/* rocmmem.h: librocmmem, the client library of rocmmemd (the GPU memory daemon). */
#ifndef ROCMMEM_H
#define ROCMMEM_H

/*
 * librocmmem connects a process to rocmmemd, which owns a machine's GPU (or host) memory and
 * leases it to processes under one budget per device.
 *
 * Conventions, for every function below:
 * - Returns: 0 on success or a negative errno value. Functions that return a value by nature
 *   say so (a getter's value, a count, a pointer); none returns a positive code with a meaning
 *   of its own. When the daemon refused a request, the errno is the daemon's and
 *   rocmmem_last_error() gives its human explanation ("requested 8 GiB on device 0: 2 GiB of
 *   its 16 GiB budget is free; held by pid 4242 'ComfyUI' 14 GiB").
 * - Handles: a NULL client, lease or status is refused with -EINVAL by the functions that
 *   return an errno (and ignored by those that free); the getters need a valid one.
 * - Timeouts are rocmmem_timeout_ms: milliseconds, ROCMMEM_NO_WAIT (0) not to wait,
 *   ROCMMEM_WAIT_FOREVER (or any negative value) to wait without limit. Devices are
 *   rocmmem_device_index: the daemon's index of a device, from 0.
 * - Structs the caller fills (rocmmem_connect_options, rocmmem_lease_request,
 *   rocmmem_model_desc) or provides for the library to fill (rocmmem_evict_result) start with
 *   struct_size, set to sizeof the struct as the caller's header declares it (the _INIT macros
 *   do). Later versions only append fields, so a program built against an older header keeps
 *   working: the fields it does not know take their defaults. A struct_size smaller than this
 *   library's first version of the struct is refused with -EINVAL; a larger one (a program
 *   built against a newer header) is accepted when every byte beyond what this library knows is
 *   zero, else refused with -EOPNOTSUPP (it asks for something this library cannot do).
 * - Structs the library fills and hands out (rocmmem_event, the *_info structs of a status,
 *   rocmmem_sample_info, rocmmem_telemetry_event) are read through pointers the library owns:
 *   their fields are only ever appended, never removed or reordered.
 * - The library never prints, never exits, never aborts, and never raises signals (SIGPIPE
 *   included). It sets no signal handlers and spawns no threads.
 * - Threads: a rocmmem_client may be used from several threads at once; requests from
 *   different threads proceed concurrently (a thread waiting for memory never blocks another
 *   thread's release). A rocmmem_lease or rocmmem_status is not to be used from two threads at
 *   once. rocmmem_strerror, rocmmem_last_error and rocmmem_version are safe anywhere.
 *   rocmmem_disconnect is the exception: no other thread may be using the client (see there).
 * - Blocking: calls that talk to the daemon block the calling thread; each says for how long
 *   (a request's own timeout, else 10 s for an answer). Getters never block.
 * - The event callback (rocmmem_set_event_callback) may call any function of the library on
 *   its client except rocmmem_disconnect.
 * - Ownership is stated per function: who frees a handle, who closes an fd, who unmaps.
 * - fork(): a child must not use a client its parent created (they would share one
 *   connection); it connects anew. Leases are not inherited in any useful way: their memory
 *   belongs to the parent's connection.
 */

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__) && defined(ROCMMEM_BUILDING)
#define ROCMMEM_EXPORT __attribute__((visibility("default")))
#else
#define ROCMMEM_EXPORT
#endif

/* ----------------------------------------------------------------------------------------- */
/* Versions */

/*
 * The version of this header, and of the library's API and ABI: a new MAJOR breaks the ABI
 * (and changes the library's SONAME, librocmmem.so.MAJOR); a new MINOR adds to it (functions,
 * flags, fields appended to structs); a new PATCH changes neither.
 */
#define ROCMMEM_VERSION_MAJOR 1
#define ROCMMEM_VERSION_MINOR 1
#define ROCMMEM_VERSION_PATCH 0

/* A version as one number, MAJOR * 10000 + MINOR * 100 + PATCH: 10000 is 1.0.0. */
#define ROCMMEM_MAKE_VERSION(major, minor, patch) ((major)*10000 + (minor)*100 + (patch))
#define ROCMMEM_VERSION_NUMBER \
	ROCMMEM_MAKE_VERSION(ROCMMEM_VERSION_MAJOR, ROCMMEM_VERSION_MINOR, ROCMMEM_VERSION_PATCH)

/* Whether this header is at least version major.minor (for what a program may use). */
#define ROCMMEM_VERSION_AT_LEAST(major, minor) \
	(ROCMMEM_VERSION_NUMBER >= ROCMMEM_MAKE_VERSION(major, minor, 0))

/*
 * rocmmem_version returns the version of the library loaded at run time, "MAJOR.MINOR.PATCH"
 * (a static string), and rocmmem_version_number the same as one number (as
 * ROCMMEM_VERSION_NUMBER): a program compares them with the header it was built against (the
 * loaded library's MINOR may be higher, never lower, for what the program uses).
 */
ROCMMEM_EXPORT const char *rocmmem_version(void);
ROCMMEM_EXPORT uint32_t rocmmem_version_number(void);

/* The version of the protocol the library speaks to the daemon. */
#define ROCMMEM_PROTOCOL_VERSION_1 1

/* ----------------------------------------------------------------------------------------- */
/* Timeouts and devices */

/* How long to wait, in milliseconds: 0 (ROCMMEM_NO_WAIT) not at all, < 0 without limit. */
typedef int64_t rocmmem_timeout_ms;
#define ROCMMEM_NO_WAIT ((rocmmem_timeout_ms)0)
#define ROCMMEM_WAIT_FOREVER ((rocmmem_timeout_ms)-1)

/* A device, by the daemon's index of it (from 0; rocmmem_client_device_count of them). */
typedef uint32_t rocmmem_device_index;
/* rocmmem_trim's "every device". */
#define ROCMMEM_ALL_DEVICES ((rocmmem_device_index)UINT32_MAX)

/* ----------------------------------------------------------------------------------------- */
/* Errors */

/*
 * rocmmem_strerror returns a static description of a negative errno value as this library
 * and the daemon use it (e.g. -ENOMEM: "not enough memory free within the budget"). Never NULL.
 */
ROCMMEM_EXPORT const char *rocmmem_strerror(int err);

/*
 * rocmmem_last_error returns the human message of the most recent failing call made by the
 * calling thread: the daemon's own explanation when it refused a request, else a library
 * message. The string is owned by the library and valid until this thread's next call into the
 * library. Returns "" when the thread's last failing call left no message.
 */
ROCMMEM_EXPORT const char *rocmmem_last_error(void);

/* ----------------------------------------------------------------------------------------- */
/* Connection */

typedef struct rocmmem_client rocmmem_client;

/*
 * rocmmem_connect connects to rocmmemd and says hello.
 * socket_path: NULL or "" resolves the path: $ROCMMEM_SOCKET, else the caller's per-user socket
 *   ($XDG_RUNTIME_DIR/rocmmemd.sock) if it exists and the caller is not root, else the system
 *   socket /run/rocmmemd/rocmmemd.sock.
 * name: shown in the daemon's status and logs (at most 64 bytes of UTF-8 without control
 *   characters); NULL lets the daemon name the client after its process.
 * timeout_ms: how long to keep trying while the socket is absent or refusing (a daemon that is
 *   starting) and to wait for the hello reply; ROCMMEM_NO_WAIT tries once (and waits 10 s for
 *   the hello); ROCMMEM_WAIT_FOREVER waits without limit. The call blocks that long at most.
 * Connecting to a daemon on the HIP backend sets HSA_ENABLE_IPC_MODE_LEGACY=0 in the
 * environment unless it is set (HIP reads it when it initialises: connect before loading
 * models). Besides its socket and the descriptors behind rocmmem_event_fd, a connection to a
 * daemon that offers one holds a request lane: an eventfd and a 4 KiB page shared with the
 * daemon, through which a request without descriptors goes with an eventfd write and a futex
 * wait instead of a send and a receive (ROCMMEM_LANE=0 in the environment at connect keeps
 * every request on the socket); and the host arena's memfd from its first host lease. On
 * success stores a new client in *out, owned by the caller and freed with
 * rocmmem_disconnect. Returns 0, -ENOENT or -ECONNREFUSED (no daemon), -EACCES (no permission
 * on the socket), -ETIMEDOUT, -EPROTONOSUPPORT (the daemon speaks another protocol version),
 * -EINVAL (bad name, or out NULL), or another negative errno.
 */
ROCMMEM_EXPORT int rocmmem_connect(const char *socket_path, const char *name,
				   rocmmem_timeout_ms timeout_ms, rocmmem_client **out);

/*
 * Reconnection. When the daemon goes away without saying it stops (it crashed, was killed, or
 * its watchdog restarted it) while this client holds leases or models, the library brings the
 * connection back by itself: it tries again after 50 ms, then doubling to 2 s, with jitter,
 * for a window of 60 s; on the new connection it registers its models again (same names,
 * classes, sizes, priorities, pinned state, resident reservations and acquires) and
 * re-declares the host and VMM leases it still holds, with their fds, so that the new daemon
 * accounts them again under the same ids. Memory stays mapped throughout: no data is lost.
 * The new daemon takes back only what its record of the old daemon's grants confirms; a lease
 * it refuses is revoked (ROCMMEM_EVENT_LEASE_REVOKED; it stays mapped until released: its
 * memory is outside any budget meanwhile), a model whose reservation it refuses is revoked
 * (ROCMMEM_EVENT_MODEL_REVOKED: unload it). dma-buf and IPC leases cannot outlive the daemon
 * and are revoked. A model keeps its id unless a daemon that lost its records gave the id to
 * another model: then the library maps the host's id to the new one in every call and event
 * (status and telemetry show the daemon's ids).
 *
 * Attempts are made by the threads that need the daemon and by rocmmem_dispatch, which the
 * event fd wakes when one is due (no thread of the library's own): a host that neither calls
 * nor dispatches reconnects at its next call, and what it held is forgotten by the new daemon
 * if that is after the daemon's grace period (60 s). While the library reconnects, a call that
 * needs the daemon waits for it up to its own timeout (a lease or model acquire's timeout_ms;
 * 10 s for calls without one), then is made on the new connection (one in flight when the
 * daemon went away is made again, for what is left of its time), or fails with -ENOTCONN
 * (rocmmem_last_error says since when and when the next attempt is due). Releases and evict
 * acks do not wait: the lease is freed here and forgotten by the new daemon, the eviction ended
 * with the old one (a release returns -ENOTCONN to say the daemon was not told). A daemon that
 * stops on purpose (SIGTERM: ROCMMEM_EVENT_SHUTDOWN) reclaims everything: its end is final.
 * When the window passes, the connection ends for good: ROCMMEM_EVENT_DISCONNECTED, and calls
 * fail with -ECONNRESET as without reconnection.
 *
 * $ROCMMEM_RECONNECT=0 turns reconnection off for every client of the process (the old
 * behaviour: the first loss is final); ROCMMEM_RECONNECT=SECONDS sets the window.
 */

/*
 * Flags for rocmmem_connect_options.flags. ROCMMEM_CONNECT_NO_RECONNECT: when the daemon goes
 * away, the end is final. ROCMMEM_CONNECT_NO_WAIT: while reconnecting, calls fail at once
 * (-ENOTCONN), after an attempt if one is due: for hosts that must never wait for the daemon
 * (fail-safe).
 */
#define ROCMMEM_CONNECT_NO_RECONNECT 0x1u
#define ROCMMEM_CONNECT_NO_WAIT 0x2u

/* What rocmmem_connect_with takes. Zeroed fields mean the defaults. */
struct rocmmem_connect_options {
	size_t struct_size;	 /* sizeof(struct rocmmem_connect_options) (see Conventions) */
	const char *socket_path; /* as rocmmem_connect's */
	const char *name;	 /* as rocmmem_connect's */
	rocmmem_timeout_ms timeout_ms; /* as rocmmem_connect's */
	uint32_t flags;		       /* ROCMMEM_CONNECT_* */
	/* How long to try to reconnect: ROCMMEM_NO_WAIT (0) the default (60 s, or
	 * $ROCMMEM_RECONNECT), ROCMMEM_WAIT_FOREVER (< 0) no limit. */
	rocmmem_timeout_ms reconnect_window_ms;
};

/* Options with their size set and every other field at its default. */
/* clang-format off */
#define ROCMMEM_CONNECT_OPTIONS_INIT {.struct_size = sizeof(struct rocmmem_connect_options)}
/* clang-format on */

/*
 * rocmmem_connect_with is rocmmem_connect with options (reconnection). Returns as
 * rocmmem_connect; -EINVAL for options NULL or with a struct_size too small, or unknown flags;
 * -EOPNOTSUPP for options of a newer header that set fields this library does not know.
 */
ROCMMEM_EXPORT int rocmmem_connect_with(const struct rocmmem_connect_options *options,
					rocmmem_client **out);

enum rocmmem_connection_state {
	ROCMMEM_CONNECTED = 0,
	ROCMMEM_RECONNECTING = 1, /* the daemon went away; the library is bringing it back */
	ROCMMEM_DISCONNECTED = 2, /* for good: calls fail with -ECONNRESET */
};

/* rocmmem_client_state says where the connection stands. Thread-safe. */
ROCMMEM_EXPORT enum rocmmem_connection_state rocmmem_client_state(rocmmem_client *client);

/*
 * rocmmem_disconnect closes the connection and frees the client, with everything it owns:
 * - every rocmmem_lease still held through it: its mapping is unmapped, its GPU import undone
 *   and its fds closed, so pointers into it, the handle itself and the fds of
 *   rocmmem_lease_fd/_fd_at must no longer be used (dup() an fd to keep it); the daemon
 *   reclaims the memory at once;
 * - the strings of rocmmem_client_daemon_version and rocmmem_client_backend (those a
 *   reconnection replaced too);
 * - the event fd (take it out of your poll set or event loop first);
 * - every event not yet delivered: the event callback is not called again.
 * It does not free rocmmem_status snapshots (they own their data and stay valid until
 * rocmmem_status_free) nor the text of rocmmem_metrics (the caller's, for free()).
 * No other thread may be using the client, and the event callback may not call it: the
 * library refuses with -EBUSY, freeing nothing, when it sees another thread waiting in a call
 * on this client (for a reply, a reconnection or memory), reading or sending on its
 * connection, reconnecting it or running its event callback, or when it is called from the
 * callback; it cannot see a thread only about to enter a call, which must not be. Returns 0
 * (also for NULL), or -EBUSY. Blocks only to close the socket.
 */
ROCMMEM_EXPORT int rocmmem_disconnect(rocmmem_client *client);

/* rocmmem_client_daemon_version returns the daemon's version string, owned by the client and
 * valid until rocmmem_disconnect (a reconnection to another daemon version keeps it valid). */
ROCMMEM_EXPORT const char *rocmmem_client_daemon_version(const rocmmem_client *client);

/* rocmmem_client_backend returns the daemon's backend name ("host", "hip", "cuda"), owned like
 * rocmmem_client_daemon_version's. */
ROCMMEM_EXPORT const char *rocmmem_client_backend(const rocmmem_client *client);

/* rocmmem_client_device_count returns how many devices the daemon manages: their indexes are
 * 0 to this, excluded. */
ROCMMEM_EXPORT rocmmem_device_index rocmmem_client_device_count(const rocmmem_client *client);

/* ----------------------------------------------------------------------------------------- */
/* Leases */

typedef struct rocmmem_lease rocmmem_lease;

/* How a lease's memory is handed over. */
enum rocmmem_handle_kind {
	ROCMMEM_HANDLE_NONE = 0,
	ROCMMEM_HANDLE_MEMFD = 1,  /* host memory: one sealed memfd, mapped by the library */
	ROCMMEM_HANDLE_VMM_FD = 2, /* GPU physical memory exported as fds */
	ROCMMEM_HANDLE_DMABUF = 3, /* a dma-buf fd */
	ROCMMEM_HANDLE_IPC = 4,	   /* a runtime IPC handle */
};

/*
 * Flags for rocmmem_lease_request.flags.
 * ROCMMEM_LEASE_NOMAP: do not map the lease into this process; rocmmem_lease_ptr returns NULL
 * and the raw handles stay open for the caller to import (rocmmem_lease_fd_at,
 * rocmmem_lease_ipc_handle): for hosts that drive the GPU runtime themselves. A host lease
 * asked this way always has a sealed memfd of its own (never a range of the host arena).
 */
#define ROCMMEM_LEASE_NOMAP 0x1u

struct rocmmem_lease_request {
	size_t struct_size;	     /* sizeof(struct rocmmem_lease_request) (see Conventions) */
	rocmmem_device_index device; /* the device */
	uint64_t size; /* bytes, > 0; granted rounded up to the device's granule (2 MiB) */
	/* How long to wait for memory: ROCMMEM_NO_WAIT fails at once when it does not fit,
	 * ROCMMEM_WAIT_FOREVER waits as long as it takes. */
	rocmmem_timeout_ms timeout_ms;
	const char *tag;   /* NULL, or at most 64 bytes shown in status */
	uint32_t flags;	   /* ROCMMEM_LEASE_* */
	uint64_t model_id; /* 0, or one of this client's models on the same device: the lease
			    * counts towards it, and goes when the model is evicted */
};

/* A request with its size set and every other field 0 (device 0, no wait, no tag). */
/* clang-format off */
#define ROCMMEM_LEASE_REQUEST_INIT {.struct_size = sizeof(struct rocmmem_lease_request)}
/* clang-format on */

/*
 * rocmmem_lease_acquire asks for memory and waits (up to req->timeout_ms) until the daemon
 * grants it. Host memory is mapped read-write into this process, aligned to 2 MiB so that
 * transparent huge pages can back it; the pages are not touched. GPU memory is imported with
 * the runtime the daemon uses (HIP or the CUDA driver, loaded on the first GPU lease; for HIP
 * the library sets HSA_ENABLE_IPC_MODE_LEGACY=0 unless set, which only helps if HIP has not
 * initialised yet), on the device with the lease's PCI bus id, as one contiguous device
 * range even when the daemon had to build it from several physical chunks.
 * Blocks up to req->timeout_ms plus 10 s for the daemon's answer (and waits for a daemon that
 * went away within the same timeout: see Reconnection).
 * On success stores a new lease in *out, owned by the caller and freed by
 * rocmmem_lease_release (or by rocmmem_disconnect). Returns 0; -EINVAL (bad request, a
 * struct_size too small, NULL arguments); -EOPNOTSUPP (a newer header's fields set);
 * -E2BIG (larger than the device's whole budget: it can never be granted); -ENOMEM (does not
 * fit now and timeout_ms was 0); -ETIMEDOUT (did not fit in time); -ENODEV (no such device);
 * -EDQUOT or -EBUSY (a limit of this connection); -ENOTCONN (the daemon went away and is not
 * back within timeout_ms: see Reconnection); -ECONNRESET (the connection ended for good); or
 * another negative errno. rocmmem_last_error() explains a refusal: what was free and who holds
 * the rest.
 */
ROCMMEM_EXPORT int rocmmem_lease_acquire(rocmmem_client *client,
					 const struct rocmmem_lease_request *req,
					 rocmmem_lease **out);

/*
 * rocmmem_lease_release unmaps the lease, closes its fds, tells the daemon and frees the handle,
 * whatever the result: the lease must not be used afterwards. Returns 0, or a negative errno
 * when the daemon could not be told (the daemon reclaims the memory anyway when the connection
 * ends). A lease the daemon revoked (ROCMMEM_EVENT_LEASE_REVOKED) is freed here without asking
 * it. Blocks up to 10 s for the daemon's answer, never for a daemon that went away. NULL is
 * ignored and returns 0.
 */
ROCMMEM_EXPORT int rocmmem_lease_release(rocmmem_lease *lease);

/* rocmmem_lease_id returns the daemon's id of the lease (as shown in status). */
ROCMMEM_EXPORT uint64_t rocmmem_lease_id(const rocmmem_lease *lease);

/* rocmmem_lease_size returns the granted size in bytes (a whole number of granules). */
ROCMMEM_EXPORT uint64_t rocmmem_lease_size(const rocmmem_lease *lease);

/* rocmmem_lease_device returns the lease's device. */
ROCMMEM_EXPORT rocmmem_device_index rocmmem_lease_device(const rocmmem_lease *lease);

/* rocmmem_lease_handle_kind returns how the memory was handed over. */
ROCMMEM_EXPORT enum rocmmem_handle_kind rocmmem_lease_handle_kind(const rocmmem_lease *lease);

/*
 * rocmmem_lease_ptr returns where the lease's rocmmem_lease_size bytes are: for a host lease
 * its read-write mapping in this process; for a GPU lease its device address (pass it to
 * hipMemcpy, cuMemcpy, kernels or torch); NULL for a lease acquired with ROCMMEM_LEASE_NOMAP.
 * The library unmaps it at release; a host lease in the client's arena (below) stays mapped:
 * the daemon keeps the range as it was for up to 250 ms, for this client's next lease of the
 * same size, then punches it (it reads zeros); a trim or a request waiting for memory on the
 * device punches it at once (docs/protocol.md, "Host arenas").
 */
ROCMMEM_EXPORT void *rocmmem_lease_ptr(const rocmmem_lease *lease);

/*
 * rocmmem_lease_fd returns the lease's first fd kept open (a host lease's sealed memfd; a
 * NOMAP GPU lease's first handle), or -1 when it has none (an imported GPU lease: its handles
 * were closed once imported; a host lease that is a range of the client's host arena, the
 * default with a daemon that offers arenas: one memfd per client and device, mapped once, which
 * the library keeps until disconnect; ROCMMEM_HOST_ARENA=0 in the environment at connect gives
 * every host lease a memfd of its own). The fd stays owned by the library and is closed at
 * release: dup() it to keep it.
 */
ROCMMEM_EXPORT int rocmmem_lease_fd(const rocmmem_lease *lease);

/* rocmmem_lease_fd_count / _fd_at: every fd kept open, as rocmmem_lease_fd (-1 past the end). */
ROCMMEM_EXPORT unsigned rocmmem_lease_fd_count(const rocmmem_lease *lease);
ROCMMEM_EXPORT int rocmmem_lease_fd_at(const rocmmem_lease *lease, unsigned index);

/*
 * rocmmem_lease_chunk_count / _chunk_size: a VMM lease is 1 to 16 physical chunks, one fd
 * each, to be mapped back to back in order; 0 for other kinds (0 past the end).
 */
ROCMMEM_EXPORT unsigned rocmmem_lease_chunk_count(const rocmmem_lease *lease);
ROCMMEM_EXPORT uint64_t rocmmem_lease_chunk_size(const rocmmem_lease *lease, unsigned index);

/*
 * rocmmem_lease_ipc_handle copies an IPC lease's 64-byte runtime handle into handle and the
 * lease's offset inside the allocation it opens into *offset (may be NULL): hipIpcOpenMemHandle
 * returns the allocation's base, the lease starts offset bytes further. Returns 0, -ENOENT for
 * leases of other kinds, or -EINVAL (handle NULL).
 */
ROCMMEM_EXPORT int rocmmem_lease_ipc_handle(const rocmmem_lease *lease, void *handle,
					    uint64_t *offset);

/* rocmmem_lease_pci_bus_id returns the GPU's PCI bus id ("0000:03:00.0"), "" for host memory;
 * owned by the lease. */
ROCMMEM_EXPORT const char *rocmmem_lease_pci_bus_id(const rocmmem_lease *lease);

/* rocmmem_lease_waited_ms returns how long the request waited in the daemon's queue. */
ROCMMEM_EXPORT uint64_t rocmmem_lease_waited_ms(const rocmmem_lease *lease);

/*
 * rocmmem_lease_generation returns, for a lease tagged with a model, the model's residency
 * generation it was granted in (see Models); 0 for a plain lease, or from a daemon that does
 * not number residencies. An eviction of generation G concerns the model's tagged leases of
 * generation G or older, never a lease of a later generation.
 */
ROCMMEM_EXPORT uint64_t rocmmem_lease_generation(const rocmmem_lease *lease);

/*
 * rocmmem_lease_revoked returns 1 once the daemon has taken the lease's memory back, else 0 (a
 * truth value, not an error code):
 * revoked with its model, not taken back by a restarted daemon, or reclaimed when the daemon
 * stopped (the connection ended after ROCMMEM_EVENT_SHUTDOWN, at its shutdown deadline) or
 * closed the connection. A ROCMMEM_EVENT_LEASE_REVOKED says so too. The mapping stays until
 * rocmmem_lease_release; host memory then reads zeros.
 */
ROCMMEM_EXPORT int rocmmem_lease_revoked(const rocmmem_lease *lease);

/* ----------------------------------------------------------------------------------------- */
/* Status */

typedef struct rocmmem_status rocmmem_status;

/*
 * The structs below are owned by the rocmmem_status they came from and valid until
 * rocmmem_status_free. Fields may be appended in later versions, never removed or reordered.
 */
struct rocmmem_daemon_info {
	const char *version;
	int32_t pid;
	uint64_t uptime_s;
	const char *backend;
	uint32_t protocol_version;
	/*
	 * Non-zero when `--backend auto` found no usable GPU runtime and the daemon serves host
	 * memory (system RAM) instead; host_fallback_reason then says why ("hip: ...; cuda:
	 * ..."), else "". Known from rocmmem_status_get only (0 in a telemetry sample).
	 */
	int host_fallback;
	const char *host_fallback_reason;
	uint64_t heap_bytes; /* the daemon's heap in use (malloc's own count); 0: unknown */
	/* The daemon's open file descriptors and its limit (RLIMIT_NOFILE); 0: unknown (an older
	 * daemon, or a telemetry sample). Host leases cost it one fd per client arena, not one
	 * per lease. */
	uint64_t fds_open;
	uint64_t fds_limit;
};

struct rocmmem_device_info {
	rocmmem_device_index index;
	const char *name;
	const char *backend;
	uint64_t total_bytes;	 /* what the backend reports for the device */
	uint64_t budget_bytes;	 /* the most the daemon leases at once */
	uint64_t headroom_bytes; /* total - budget */
	uint64_t leased_bytes;
	uint64_t reserved_bytes; /* accounted without a lease (model reservations) */
	uint64_t free_bytes;	 /* budget - leased - reserved */
	uint64_t granule_bytes;
	uint32_t waiters; /* requests waiting for memory */
	uint64_t leases;
	enum rocmmem_handle_kind handle_kind;
	const char *pci_bus_id;	      /* "" for host memory */
	int integrated;		      /* an APU sharing host memory */
	const char *sharing;	      /* "memfd", "vmm-fd", "dmabuf" or "ipc" */
	const char *state;	      /* "ok", or why the device is unusable */
	uint32_t valid;		      /* ROCMMEM_DEVICE_HAS_* bits: which fields below are known */
	uint64_t runtime_total_bytes; /* the GPU runtime's own figures */
	uint64_t runtime_free_bytes;
	uint64_t external_bytes;      /* used on the device by processes outside rocmmemd */
	const char *telemetry_source; /* "rocm-smi", "sysfs", "nvml" or "" */
	uint64_t vram_total_bytes;
	uint64_t vram_used_bytes;
	uint64_t gtt_total_bytes;
	uint64_t gtt_used_bytes;
	int32_t temperature_mc;
	uint32_t power_mw;
	uint32_t busy_percent;
	uint64_t largest_grantable;	/* the largest request granted at once right now */
	uint64_t evictable_bytes;	/* resident in idle, unpinned models */
	uint64_t largest_with_eviction; /* granted once those models are evicted */
	uint64_t oldest_wait_ms;	/* how long the head of its queue has waited */
	uint32_t models_resident;
	/* After a restart: of leased_bytes and reserved_bytes, what the previous daemon's clients
	 * have not re-declared yet (rocmmem_status_awaiting). */
	uint64_t awaiting_redeclare_bytes;
	/* Added in 1.1 (the struct grows at its end only). The reconciled books: measurable is
	 * non-zero where per-process device memory is read (KFD, NVML); 0 on host memory, where
	 * the two figures below are 0 and mean nothing. undeclared_bytes: what the measured
	 * side charges beyond the declarations (clients past theirs and their tolerance, and
	 * processes outside rocmmemd), taken from free_bytes; outside_bytes: of that, processes
	 * outside rocmmemd. */
	int measurable;
	uint64_t undeclared_bytes;
	uint64_t outside_bytes;
	/* Appended after 1.1's fields. The VMM chunk pool (GPU devices that share VMM memory; all 0
	 * elsewhere): memory of released leases the daemon keeps for the clients that held them,
	 * counted in free_bytes (a grant that needs it has it released first); pool_limit_bytes is
	 * the most it keeps (0: no pool); warm grants came from it without an allocation. */
	uint64_t pool_bytes;
	uint64_t pool_chunks;
	uint64_t pool_limit_bytes;
	uint64_t pool_warm_grants;
	uint64_t pool_dropped_bytes;
};

/* A process holding memory on a device, as the device's telemetry sees it. */
struct rocmmem_process_info {
	int32_t pid;
	uint64_t vram_bytes;
	int client; /* connected to rocmmemd; else its memory is held outside rocmmemd */
};

#define ROCMMEM_DEVICE_HAS_RUNTIME (1u << 0) /* runtime_*_bytes and external_bytes */
#define ROCMMEM_DEVICE_HAS_VRAM (1u << 1)
#define ROCMMEM_DEVICE_HAS_GTT (1u << 2)
#define ROCMMEM_DEVICE_HAS_TEMPERATURE (1u << 3)
#define ROCMMEM_DEVICE_HAS_POWER (1u << 4)
#define ROCMMEM_DEVICE_HAS_BUSY (1u << 5)

/*
 * A client process's books on one device (since 1.1): what every connection of its pid
 * declared (leases and reservations) against what the device's telemetry measures the process
 * to hold (KFD on AMD, NVML on NVIDIA). Where measurable is 0 (host memory) nothing is measured:
 * measured_bytes and undeclared_bytes are 0 and mean nothing.
 */
struct rocmmem_client_books {
	rocmmem_device_index device;
	int measurable;
	uint64_t declared_bytes;
	uint64_t measured_bytes;   /* smoothed over a few samples (docs/backends.md) */
	uint64_t undeclared_bytes; /* charged beyond declared_bytes: measured past the tolerance */
};

struct rocmmem_client_info {
	int32_t pid;
	uint32_t uid;
	uint32_t gid;
	const char *name;
	uint32_t leases;
	uint64_t leased_bytes;
	uint64_t connected_s;
	uint64_t client_id;
	uint32_t models;	 /* registered models */
	uint64_t reserved_bytes; /* its models' reservations */
	uint32_t waiting;	 /* its requests waiting for memory */
	int pidfd;		 /* the daemon holds a pidfd of the process (docs/security.md) */
	/* Added in 1.1 (the struct grows at its end only). The reconciled books of its process,
	 * per device where it declared or holds anything (nbooks entries, owned by the status),
	 * and summed over them. measurable: non-zero when the daemon measures every device of
	 * its books (or, without books, any device); 0 on host memory, where measured_bytes and
	 * undeclared_bytes mean nothing. */
	const struct rocmmem_client_books *books;
	size_t nbooks;
	int measurable;
	uint64_t declared_bytes;
	uint64_t measured_bytes;
	uint64_t undeclared_bytes;
	/* Appended after 1.1's fields. Its host arena (all 0 when it has none): the arena's size
	 * (address space, not memory), the bytes in its leases (arena_used_bytes), what is free
	 * in its allocator (a range released within the last 250 ms, kept warm for its next
	 * lease, is neither) and the longest free range; arena_fallbacks: its host leases that
	 * fitted no free range of it and got a memfd of their own, no part of the arena. */
	uint64_t arena_bytes;
	uint64_t arena_used_bytes;
	uint64_t arena_free_bytes;
	uint64_t arena_largest_free;
	uint64_t arena_fallbacks;
};

struct rocmmem_lease_info {
	uint64_t id;
	int32_t owner_pid;
	rocmmem_device_index device;
	uint64_t bytes;
	const char *tag;
	uint64_t age_ms;
	uint64_t model_id; /* 0: none */
};

enum rocmmem_model_class {
	ROCMMEM_MODEL_OTHER = 0,
	ROCMMEM_MODEL_TRANSFORMER = 1,
	ROCMMEM_MODEL_VAE = 2,
	ROCMMEM_MODEL_TEXT_ENCODER = 3,
	ROCMMEM_MODEL_IMAGE_ENCODER = 4,
};

enum rocmmem_model_state {
	ROCMMEM_MODEL_IDLE = 0,
	ROCMMEM_MODEL_IN_USE = 1,
	ROCMMEM_MODEL_EVICTING = 2,
	ROCMMEM_MODEL_EVICTED = 3,
	ROCMMEM_MODEL_WAITING = 4,
};

struct rocmmem_model_info {
	uint64_t id;
	const char *name;
	enum rocmmem_model_class model_class;
	int32_t owner_pid;
	rocmmem_device_index device;
	uint64_t bytes;
	enum rocmmem_model_state state;
	int32_t priority;
	int pinned;
	uint64_t size; /* as registered */
	uint64_t reservation_bytes;
	uint64_t lease_bytes;
	uint64_t idle_ms; /* since last released; 0 while in use */
	uint32_t use_count;
	uint64_t evictions;
};

struct rocmmem_waiter_info {
	int32_t owner_pid;
	rocmmem_device_index device;
	uint64_t bytes;
	uint64_t waited_ms;
	rocmmem_timeout_ms timeout_ms; /* < 0: no limit */
	const char *tag;
	uint64_t model_id; /* a model waiting to become resident or grow; 0 for a lease */
};

/*
 * rocmmem_status_get asks the daemon for its state: devices, clients, leases, models and the
 * queue. On success stores a snapshot in *out, owned by the caller and freed with
 * rocmmem_status_free; it owns its data and outlives the client. Large tables arrive in
 * several parts, each consistent in itself. Blocks up to 10 s for each part. Returns 0 or a
 * negative errno.
 */
ROCMMEM_EXPORT int rocmmem_status_get(rocmmem_client *client, rocmmem_status **out);

/* rocmmem_status_free frees a status snapshot and everything it returned. NULL is ignored. */
ROCMMEM_EXPORT void rocmmem_status_free(rocmmem_status *status);

ROCMMEM_EXPORT const struct rocmmem_daemon_info *rocmmem_status_daemon(const rocmmem_status *st);

/* What the daemon has done since it started. */
struct rocmmem_counters {
	uint64_t grants;
	uint64_t denials; /* refused at once (or the runtime failed the allocation) */
	uint64_t timeouts;
	uint64_t evictions; /* evict requests sent */
	uint64_t revocations;
	uint64_t trims;
	uint64_t bytes_trimmed;
	uint64_t releases;
	uint64_t reclaimed; /* leases of clients that went away */
	uint64_t failures;  /* allocations the runtime refused */
	uint64_t connections;
};

ROCMMEM_EXPORT const struct rocmmem_counters *rocmmem_status_counters(const rocmmem_status *st);

/* A refused request, as the daemon explained it to its client. */
struct rocmmem_denial_info {
	uint64_t timestamp_ms; /* wall clock, ms since the epoch */
	int32_t pid;
	const char *client_name;
	rocmmem_device_index device;
	uint64_t bytes; /* requested */
	uint64_t model_id;
	const char *model_name; /* "" for a lease */
	int error;		/* negative errno: -ENOMEM, -ETIMEDOUT, -E2BIG, -EDEADLK, ... */
	const char *reason;
};

/* The latest refusals the daemon keeps (a few), oldest first. */
ROCMMEM_EXPORT size_t rocmmem_status_denial_count(const rocmmem_status *st);
ROCMMEM_EXPORT const struct rocmmem_denial_info *rocmmem_status_denial(const rocmmem_status *st,
								       size_t index);

/*
 * A limit that keeps clients from growing the daemon without bound (docs/security.md), as a
 * status reports it: name is its key in the configuration's [limits] section.
 */
struct rocmmem_limit_info {
	const char *name;
	uint64_t value; /* in force: a count, bytes, or ms for handshake_timeout; 0 if unlimited */
	int unlimited;
	uint64_t hits; /* times a client ran into it since the daemon started */
};

/* Every limit, in the daemon's order (none from a daemon that does not report them). */
ROCMMEM_EXPORT size_t rocmmem_status_limit_count(const rocmmem_status *st);
ROCMMEM_EXPORT const struct rocmmem_limit_info *rocmmem_status_limit(const rocmmem_status *st,
								     size_t index);

/* What the daemon's access policy refused since it started. */
struct rocmmem_access_info {
	uint64_t peers_refused;	   /* connections of users and groups not allowed */
	uint64_t requests_refused; /* requests refused with -EPERM: not the owner, not an admin */
};

ROCMMEM_EXPORT const struct rocmmem_access_info *rocmmem_status_access(const rocmmem_status *st);

/*
 * What awaits re-declaration after a restart of the daemon, for one process on one device: the
 * previous daemon granted it, the state file recorded it, and the new daemon accounts it in
 * leased_bytes and reserved_bytes until its holder re-declares it or the grace period ends. It
 * belongs to no connection yet, so it is listed here and not among clients, leases and models.
 */
struct rocmmem_awaiting_info {
	rocmmem_device_index device;
	int32_t pid; /* the process that held it */
	uint32_t uid;
	uint32_t leases;
	uint64_t lease_bytes;
	uint32_t models; /* model reservations */
	uint64_t reserved_bytes;
	uint64_t grace_left_ms; /* forgotten then, unless re-declared before */
};

/* Largest first; only in a status reply (rocmmem_status_get), never in a sample. */
ROCMMEM_EXPORT size_t rocmmem_status_awaiting_count(const rocmmem_status *st);
ROCMMEM_EXPORT const struct rocmmem_awaiting_info *rocmmem_status_awaiting(const rocmmem_status *st,
									   size_t index);

/* Counts and items: index must be below the count, else NULL is returned. */
ROCMMEM_EXPORT size_t rocmmem_status_device_count(const rocmmem_status *st);
ROCMMEM_EXPORT const struct rocmmem_device_info *rocmmem_status_device(const rocmmem_status *st,
								       size_t index);
/* The processes holding memory on device (the device_info whose index it is), largest first;
 * none when unknown or for a device the status does not list. */
ROCMMEM_EXPORT size_t rocmmem_status_process_count(const rocmmem_status *st,
						   rocmmem_device_index device);
ROCMMEM_EXPORT const struct rocmmem_process_info *
rocmmem_status_process(const rocmmem_status *st, rocmmem_device_index device, size_t index);
ROCMMEM_EXPORT size_t rocmmem_status_client_count(const rocmmem_status *st);
ROCMMEM_EXPORT const struct rocmmem_client_info *rocmmem_status_client(const rocmmem_status *st,
								       size_t index);
ROCMMEM_EXPORT size_t rocmmem_status_lease_count(const rocmmem_status *st);
ROCMMEM_EXPORT const struct rocmmem_lease_info *rocmmem_status_lease(const rocmmem_status *st,
								     size_t index);
ROCMMEM_EXPORT size_t rocmmem_status_model_count(const rocmmem_status *st);
ROCMMEM_EXPORT const struct rocmmem_model_info *rocmmem_status_model(const rocmmem_status *st,
								     size_t index);
ROCMMEM_EXPORT size_t rocmmem_status_waiter_count(const rocmmem_status *st);
ROCMMEM_EXPORT const struct rocmmem_waiter_info *rocmmem_status_waiter(const rocmmem_status *st,
								       size_t index);

/*
 * rocmmem_trim asks the daemon to return memory its GPU runtime caches to the driver, on one
 * device or on all (ROCMMEM_ALL_DEVICES), and stores the bytes released in *released (may be
 * NULL). Blocks up to 60 s (the runtime may take its time). Returns 0 or a negative errno
 * (-ENODEV: no such device; -EBUSY: a trim of that device is already running; with
 * ROCMMEM_ALL_DEVICES, devices being trimmed already are skipped).
 */
ROCMMEM_EXPORT int rocmmem_trim(rocmmem_client *client, rocmmem_device_index device,
				uint64_t *released);

/*
 * rocmmem_metrics fetches the daemon's metrics in the Prometheus text exposition format 0.0.4
 * (what `rocmmemctl metrics` prints and `rocmmemd --metrics-textfile` writes). On success
 * *text is a NUL-terminated string the caller frees with free() (it outlives the client); on
 * failure *text is NULL. Blocks up to 10 s. Returns 0 or a negative errno (-EINVAL: client or
 * text NULL; -ENOMEM; the connection's error).
 */
ROCMMEM_EXPORT int rocmmem_metrics(rocmmem_client *client, char **text);

/* ----------------------------------------------------------------------------------------- */
/* Models: let the daemon decide what is resident across processes */

/*
 * A host declares its models; the daemon keeps the budget across every process and, when a
 * request does not fit, asks owners of idle models to unload them (ROCMMEM_EVENT_EVICT_REQUEST)
 * before granting it: lower priority first, then least recently used, never pinned or in use.
 * A model's memory is either a reservation (bytes the daemon accounts for a host that keeps
 * its own allocator, e.g. PyTorch: the host allocates them itself once acquire returns) or
 * leases tagged with it (rocmmem_lease_request.model_id), or both.
 *
 * Evict requests reach the event callback (rocmmem_set_event_callback) from rocmmem_dispatch
 * and also from inside any call of this client that is waiting for the daemon (acquire,
 * model acquire, resize, ...), so a single-threaded host blocked waiting for memory still
 * unloads its own idle models when asked. The callback unloads the model (frees its tensors,
 * empties its allocator's cache), releases the model's tagged leases, and calls
 * rocmmem_model_evict_ack; it may do so from inside the callback. An owner that does not ack
 * before the deadline loses the model's memory: ROCMMEM_EVENT_MODEL_REVOKED, and its tagged
 * leases are revoked (ROCMMEM_EVENT_LEASE_REVOKED). Models belong to the connection: a host
 * whose threads release each other's models should give each thread its own connection.
 *
 * Generations: each time the daemon takes a model's memory back (an ack, or a revocation) the
 * model's residency generation goes up by one. Evict requests and revocations name the
 * generation they concern (rocmmem_event.generation), acks echo it. An event can arrive late:
 * the host was stopped past the deadline, or its callback ran too long, and meanwhile the
 * model was revoked and acquired again. The library then does not deliver evict requests and
 * model revocations of a generation older than the newest the host has been granted something
 * in (an acquire, a resize, a tagged lease), nor evict requests of a daemon that went away. A
 * callback still running when the host acquires the model again releases only tagged leases
 * of the event's generation or older (rocmmem_lease_generation), never a newer one.
 */
struct rocmmem_model_desc {
	size_t struct_size; /* sizeof(struct rocmmem_model_desc) (see Conventions) */
	rocmmem_device_index device;
	const char *name;		      /* at most 64 bytes, shown in status */
	enum rocmmem_model_class model_class; /* for --exclusive classes on the daemon */
	uint64_t size;	  /* bytes reserved when acquire makes it resident; 0: leases only */
	int32_t priority; /* higher stays resident longer */
	int pinned;	  /* never evicted */
};

/* A description with its size set and every other field 0. */
/* clang-format off */
#define ROCMMEM_MODEL_DESC_INIT {.struct_size = sizeof(struct rocmmem_model_desc)}
/* clang-format on */

/*
 * rocmmem_model_register declares a model; it holds no memory yet. Stores its id in
 * *model_id. Blocks up to 10 s. Returns 0, -EINVAL (also for a struct_size too small),
 * -EOPNOTSUPP (a newer header's fields set), -ENODEV, -E2BIG (larger than the device's
 * budget), -EDQUOT (too many models on this connection) or another negative errno.
 */
ROCMMEM_EXPORT int rocmmem_model_register(rocmmem_client *client,
					  const struct rocmmem_model_desc *desc,
					  uint64_t *model_id);

/*
 * rocmmem_model_acquire marks the model in use (it cannot be evicted until released). If it
 * is not resident, its size is reserved first, waiting up to timeout_ms (ROCMMEM_NO_WAIT:
 * fail at once; ROCMMEM_WAIT_FOREVER: no limit) while the daemon has other models evicted;
 * the host then loads the weights. Blocks up to timeout_ms plus 10 s.
 * Acquires nest: each needs a release. Returns 0; -ENOMEM (timeout 0 and no room);
 * -ETIMEDOUT; -EDEADLK (only this client's own models in use could make room, or a pinned
 * model of an exclusive class is resident: it would wait forever); -E2BIG; -ENOENT/-EPERM
 * (not this client's model).
 */
ROCMMEM_EXPORT int rocmmem_model_acquire(rocmmem_client *client, uint64_t model_id,
					 rocmmem_timeout_ms timeout_ms);

/* rocmmem_model_release ends one acquire; when the last ends the model is idle (evictable
 * unless pinned) but stays resident. Blocks up to 10 s. Returns 0, or -EINVAL when it was not
 * in use. */
ROCMMEM_EXPORT int rocmmem_model_release(rocmmem_client *client, uint64_t model_id);

/*
 * rocmmem_model_resize sets the model's reservation (rounded up to the granule): shrinking is
 * immediate, growing waits like an acquire (up to timeout_ms, plus 10 s for the answer).
 * Returns 0 or a negative errno (-EBUSY while the model is being evicted).
 */
ROCMMEM_EXPORT int rocmmem_model_resize(rocmmem_client *client, uint64_t model_id,
					uint64_t reservation, rocmmem_timeout_ms timeout_ms);

/* rocmmem_model_unregister forgets the model: its reservation is returned, its tagged leases
 * stay as plain leases, requests waiting on its behalf fail with -ECANCELED. Blocks up to
 * 10 s. Returns 0 or a negative errno (the library forgets the model whatever it is). */
ROCMMEM_EXPORT int rocmmem_model_unregister(rocmmem_client *client, uint64_t model_id);

/*
 * rocmmem_model_evict_ack tells the daemon the model asked to be evicted has been unloaded:
 * its reservation (and any tagged lease still held) goes back. It acks the eviction of the
 * latest evict request delivered for the model (its generation). Returns 0; -ESTALE when that
 * eviction is over already (acked, or revoked at its deadline: the daemon logs it as a
 * warning, and the model's current residency is untouched); -EINVAL when the model was not
 * asked to unload; -EBUSY (in use); -ENOENT/-EPERM (not this client's model). A model being
 * evicted is never in use: an acquire of it waits until the eviction is over and then
 * reserves the model's whole size again. Blocks up to 10 s, never for a daemon that went away
 * (its eviction ended with it: 0). May be called from the event callback.
 */
ROCMMEM_EXPORT int rocmmem_model_evict_ack(rocmmem_client *client, uint64_t model_id);

/*
 * rocmmem_model_evict_ack_generation acks the eviction of generation generation (an evict
 * request's rocmmem_event.generation; 0: as rocmmem_model_evict_ack). Returns as
 * rocmmem_model_evict_ack; -EINVAL also for a generation the model never had.
 */
ROCMMEM_EXPORT int rocmmem_model_evict_ack_generation(rocmmem_client *client, uint64_t model_id,
						      uint64_t generation);

/*
 * rocmmem_model_generation returns the newest residency generation of this client's model
 * that the host was granted something in (an acquire, a resize, a tagged lease), 0 before any
 * or for a model that is not this client's.
 */
ROCMMEM_EXPORT uint64_t rocmmem_model_generation(rocmmem_client *client, uint64_t model_id);

/* What rocmmem_model_evict did, filled by the library. */
struct rocmmem_evict_result {
	size_t struct_size;   /* sizeof(struct rocmmem_evict_result), set by the caller */
	uint64_t bytes_freed; /* the bytes that came back, as the daemon reports them */
	int revoked;	      /* 1: the owner missed its deadline and the daemon took the memory
			       * back; 0: the owner unloaded it (or it held nothing) */
};

/* A result with its size set, for rocmmem_model_evict to fill. */
/* clang-format off */
#define ROCMMEM_EVICT_RESULT_INIT {.struct_size = sizeof(struct rocmmem_evict_result)}
/* clang-format on */

/*
 * rocmmem_model_evict asks the owner of any model (this client's own, or any as root) to
 * unload it now, and waits until it has, or until the owner's deadline passed and the daemon
 * took the memory back: it blocks that long (the daemon's eviction deadline, 20 s by default),
 * without a limit of its own. Fills *result (may be NULL) with what happened. Returns 0 (the
 * model is unloaded either way: result->revoked says how), -EBUSY (in use; or already being
 * evicted on another request), -EPERM, -ENOENT, -EINVAL (result's struct_size too small).
 */
ROCMMEM_EXPORT int rocmmem_model_evict(rocmmem_client *client, uint64_t model_id,
				       struct rocmmem_evict_result *result);

/*
 * rocmmem_model_evict_force is rocmmem_model_evict for an operator: a model in use is taken
 * too. Its owner is asked to release and unload it by the deadline of its class and is revoked
 * when it has not (the daemon logs who forced it: uid, pid, name). Only root or a member of
 * the daemon's admin group may, the model's owner included: -EPERM otherwise. Returns as
 * rocmmem_model_evict (never -EBUSY for a model in use). Since 1.1.
 */
ROCMMEM_EXPORT int rocmmem_model_evict_force(rocmmem_client *client, uint64_t model_id,
					     struct rocmmem_evict_result *result);

/* rocmmem_model_pin pins (pinned != 0) or unpins a model: the owner's, or any as root. Blocks up
 * to 10 s. Returns 0, -EPERM, -ENOENT or another negative errno. */
ROCMMEM_EXPORT int rocmmem_model_pin(rocmmem_client *client, uint64_t model_id, int pinned);

/* ----------------------------------------------------------------------------------------- */
/* Events: what the daemon says unprompted */

enum rocmmem_event_type {
	ROCMMEM_EVENT_SHUTDOWN = 1,	 /* the daemon is stopping: reason */
	ROCMMEM_EVENT_EVICT_REQUEST = 2, /* unload model_id and ack within deadline_ms */
	ROCMMEM_EVENT_MODEL_REVOKED = 3, /* model_id's memory was taken back: reason */
	ROCMMEM_EVENT_LEASE_REVOKED = 4, /* lease_id was revoked by an administrator: reason */
	ROCMMEM_EVENT_DISCONNECTED = 5,	 /* the connection ended (the library's own event) */
	ROCMMEM_EVENT_SAMPLE = 6,	 /* a telemetry sample: sample, sample_info (Telemetry) */
	ROCMMEM_EVENT_TELEMETRY = 7,	 /* something happened in the daemon: telemetry */
	ROCMMEM_EVENT_RECONNECTING = 8,	 /* the daemon went away: reconnecting (reason why) */
	ROCMMEM_EVENT_RECONNECTED = 9,	 /* back, what it holds re-declared (reason: a summary;
					  * what was refused came just before as revocations) */
	ROCMMEM_EVENT_OTHER = 100,	 /* a kind this library version does not know */
};

struct rocmmem_sample_info;
struct rocmmem_telemetry_event;

/*
 * One event, owned by the library and valid only during the callback that receives it, and
 * so is everything it points to. Fields are only ever appended.
 */
struct rocmmem_event {
	enum rocmmem_event_type type;
	uint64_t seq;
	const char *reason; /* never NULL */
	uint64_t model_id;
	uint64_t lease_id;
	uint64_t bytes_needed;
	rocmmem_timeout_ms deadline_ms; /* EVICT_REQUEST: how long the owner has to ack */
	/* ROCMMEM_EVENT_SAMPLE: the daemon's state, read with the rocmmem_status_* accessors
	 * (never freed by the callback), and what only a sample has. NULL for other types. */
	const rocmmem_status *sample;
	const struct rocmmem_sample_info *sample_info;
	/* ROCMMEM_EVENT_TELEMETRY: the event. NULL for other types. */
	const struct rocmmem_telemetry_event *telemetry;
	/* EVICT_REQUEST, MODEL_REVOKED: the model's residency generation it concerns (see
	 * Models); LEASE_REVOKED of a model's lease: that model's generation. 0: none named. */
	uint64_t generation;
};

typedef void (*rocmmem_event_fn)(rocmmem_client *client, const struct rocmmem_event *event,
				 void *userdata);

/*
 * rocmmem_set_event_callback sets the function called for each event (NULL drops events): by
 * rocmmem_dispatch, and by any call of this client while it waits for the daemon (see Models).
 * One event is delivered at a time, in order, with no library lock held: the callback may call
 * the library, except rocmmem_disconnect. Returns 0, or -EINVAL (client NULL).
 */
ROCMMEM_EXPORT int rocmmem_set_event_callback(rocmmem_client *client, rocmmem_event_fn fn,
					      void *userdata);

/*
 * rocmmem_event_fd returns an fd that polls readable (POLLIN) whenever events may be waiting,
 * or a reconnection attempt is due (see Reconnection); put it in poll/epoll/select or an
 * asyncio loop and call rocmmem_dispatch when it is.
 * Owned by the client: do not read or close it.
 */
ROCMMEM_EXPORT int rocmmem_event_fd(const rocmmem_client *client);

/*
 * rocmmem_dispatch handles whatever events have arrived, without blocking, calling the event
 * callback for each from the calling thread (with no library lock held: the callback may call
 * the library). Returns the number of events handled (a count, >= 0), or -ECONNRESET once the
 * connection has ended (after delivering ROCMMEM_EVENT_DISCONNECTED once). While the library
 * reconnects it makes the attempt that is due, which takes a connect and, when the daemon answers,
 * the re-declarations (milliseconds; each step waits for the daemon at most 2 s before hello, and
 * longer once memory is being taken over, when giving up would hand it back). It also gives
 * back a lease granted too late for a request that gave up (-ETIMEDOUT) in the request lane,
 * which makes nothing readable (docs/protocol.md, "A request given up on").
 */
ROCMMEM_EXPORT int rocmmem_dispatch(rocmmem_client *client);

/* ----------------------------------------------------------------------------------------- */
/* Progress of a waiting request (since 1.1) */

/*
 * While a lease, a model's acquire or a resize waits for memory, the daemon can say where it
 * stands and what it waits for: its place in its device's queue, and the eviction of which
 * model (and that eviction's deadline), or which client's bytes, or the budget. Once a progress
 * callback is set, every such request this client sends asks for it (an older daemon sends
 * none): it comes when the request starts waiting, when what it waits for changes (at most 4
 * times a second per request; changes in between are folded into the next), and at once when
 * the eviction it waited for ends. Requests that do not wait get none.
 */
enum rocmmem_wait_reason {
	ROCMMEM_WAIT_UNKNOWN = 0,   /* a reason this library does not know */
	ROCMMEM_WAIT_GRANTING = 1,  /* it fits: being granted */
	ROCMMEM_WAIT_QUEUE = 2,	    /* requests ahead of it go first (owner_*: the first's) */
	ROCMMEM_WAIT_EVICTION = 3,  /* model_id's eviction: owner_*, deadline_ms */
	ROCMMEM_WAIT_HOLDER = 4,    /* bytes a client holds in use: owner_*, bytes */
	ROCMMEM_WAIT_EXCLUSIVE = 5, /* model_id, of a class that excludes its own, is resident */
	ROCMMEM_WAIT_BUDGET = 6,    /* nobody's: memory being freed, or a budget lowered */
};

/* What kind of request waits. */
enum rocmmem_wait_request {
	ROCMMEM_WAITING_LEASE = 1,
	ROCMMEM_WAITING_MODEL_ACQUIRE = 2,
	ROCMMEM_WAITING_MODEL_RESIZE = 3,
};

/* How the eviction the request waited for ended (eviction_ended). */
enum rocmmem_eviction_end {
	ROCMMEM_EVICTION_UNDER_WAY = 0, /* it has not (or the reason is not an eviction) */
	ROCMMEM_EVICTION_ACKED = 1,	/* its owner unloaded the model */
	ROCMMEM_EVICTION_REVOKED = 2,	/* its owner missed the deadline: taken back */
};

/*
 * One progress report, owned by the library and valid only during the callback that receives
 * it (its strings too). struct_size is the size of the struct as this library fills it: a
 * program built against a newer header reads a field only when struct_size covers it. Fields
 * are only ever appended.
 */
struct rocmmem_wait_progress {
	size_t struct_size;
	enum rocmmem_wait_request request;
	uint64_t request_model_id; /* the host's id of the request's model (a model request's, a
				    * tagged lease's), 0: none */
	uint64_t requested;	   /* bytes as asked: a lease's size, a resize's target */
	rocmmem_device_index device;
	uint32_t position; /* requests ahead of it in the device's queue (0: first) */
	uint32_t queued;   /* requests waiting on the device, it included */
	enum rocmmem_wait_reason reason;
	uint64_t needed;	/* bytes it needs now */
	uint64_t free_bytes;	/* free within the device's budget now */
	uint64_t model_id;	/* EVICTION, EXCLUSIVE: the model (the daemon's id, as in status) */
	const char *model_name; /* "" when none */
	int32_t owner_pid;	/* the model's owner, or the client (HOLDER, QUEUE); 0: unknown */
	const char *owner_name; /* "" when none */
	uint64_t owner_client_id;	/* the daemon's connection id of that client, 0: none */
	rocmmem_timeout_ms deadline_ms; /* EVICTION under way: ms left (when sent) before the
					 * owner is revoked; -1: none */
	uint64_t bytes;	    /* EVICTION, EXCLUSIVE: the model's; HOLDER: what the client holds */
	uint32_t evictions; /* evictions under way on the device */
	uint64_t waited_ms; /* how long it has waited */
	enum rocmmem_eviction_end eviction_ended; /* the eviction of model_id is over */
};

typedef void (*rocmmem_progress_fn)(rocmmem_client *client,
				    const struct rocmmem_wait_progress *progress, void *userdata);

/*
 * rocmmem_set_progress_callback sets the function told the progress of this client's waiting
 * requests (NULL: no more asked for). It is called like the event callback (one report at a
 * time, in order with the events, with no library lock held; from rocmmem_dispatch and from
 * inside any call of this client that waits for the daemon, on whichever thread delivers at
 * that moment, which need not be the waiting one): it may call the library, except
 * rocmmem_disconnect. While one is set, a call delivers the events and reports that came
 * before its answer before it returns (unless another thread is delivering). Requests already
 * sent keep what they asked. Returns 0, or -EINVAL.
 */
ROCMMEM_EXPORT int rocmmem_set_progress_callback(rocmmem_client *client, rocmmem_progress_fn fn,
						 void *userdata);

/* ----------------------------------------------------------------------------------------- */
/* Telemetry: samples of the daemon's state and its events, as they happen */

/*
 * A client subscribes to samples (the daemon's whole state every interval: devices, clients,
 * models, the queue, counters) and/or to events (leases granted, denied and released, evict
 * requests and acks, revocations, trims, clients coming and going). Both arrive through the
 * event callback (rocmmem_set_event_callback), from rocmmem_dispatch and from inside any call
 * of this client that waits for the daemon, as ROCMMEM_EVENT_SAMPLE and
 * ROCMMEM_EVENT_TELEMETRY, in the order the daemon sent them.
 *
 * Nothing piles up for a client that is slow or never dispatches: the daemon thins what its
 * socket cannot take, and the library keeps at most one undelivered sample (a newer one
 * replaces it) and a bounded number of undelivered events (the oldest go first). What was lost
 * is counted in the next one delivered (rocmmem_sample_info.dropped,
 * rocmmem_telemetry_event.dropped). Evict requests, revocations and shutdown are never lost
 * to telemetry.
 */
#define ROCMMEM_SUBSCRIBE_SAMPLES 0x1u /* a sample every interval_ms */
#define ROCMMEM_SUBSCRIBE_EVENTS 0x2u  /* every event as it happens */

/* The sample intervals the daemon accepts, in milliseconds. */
#define ROCMMEM_SAMPLE_INTERVAL_MIN_MS 10u
#define ROCMMEM_SAMPLE_INTERVAL_MAX_MS 60000u

/* What a sample has beyond what rocmmem_status_* show (owned like the event). */
struct rocmmem_sample_info {
	uint64_t timestamp_ms;	  /* when the daemon took it: wall clock, ms since the epoch */
	uint32_t interval_ms;	  /* the interval in effect */
	uint32_t dropped;	  /* samples not delivered since the previous one (thinned) */
	uint32_t clients_omitted; /* clients and models beyond what one sample lists (the */
	uint32_t models_omitted;  /* smallest are left out) */
	uint32_t waiters;	  /* requests waiting for memory, all devices */
	uint64_t oldest_wait_ms;  /* how long the longest-waiting of them has waited */
	uint64_t uptime_ms;	  /* the daemon's */
};

/*
 * The kinds of telemetry events (the same numbers as the protocol's). A newer daemon may send
 * kinds this library does not name: their name is "unknown".
 */
enum rocmmem_telemetry_type {
	ROCMMEM_TELEMETRY_LEASE_GRANTED = 1,
	ROCMMEM_TELEMETRY_LEASE_DENIED = 2, /* refused at once or timed out: error */
	ROCMMEM_TELEMETRY_LEASE_RELEASED = 3,
	ROCMMEM_TELEMETRY_EVICT_REQUESTED = 4, /* the daemon asked a model's owner to unload it */
	ROCMMEM_TELEMETRY_EVICT_ACKED = 5,
	ROCMMEM_TELEMETRY_REVOKED = 6, /* memory taken back from an owner that did not ack */
	ROCMMEM_TELEMETRY_TRIM_DONE = 7,
	ROCMMEM_TELEMETRY_CLIENT_CONNECTED = 8,
	ROCMMEM_TELEMETRY_CLIENT_DISCONNECTED = 9,
	ROCMMEM_TELEMETRY_MODEL_LOADED = 10, /* a model became resident */
	/* A client's measured use crossed what it declared plus the tolerance (since 1.1):
	 * bytes is what it holds, declared_bytes what it declared. */
	ROCMMEM_TELEMETRY_UNDECLARED_USE = 11,
};

/* One telemetry event (owned like the rocmmem_event that carries it). Unset numbers are 0. */
struct rocmmem_telemetry_event {
	enum rocmmem_telemetry_type type;
	uint64_t timestamp_ms;	 /* wall clock, ms since the epoch */
	int32_t pid;		 /* the client it concerns; 0: none */
	const char *client_name; /* "" when none */
	uint64_t client_id;	 /* the daemon's connection id */
	int has_device;		 /* whether device applies */
	rocmmem_device_index device;
	uint64_t bytes;
	uint64_t lease_id;
	uint64_t model_id;
	const char *model_name;	 /* "" when none */
	int error;		 /* a denial's negative errno (-ENOMEM, -ETIMEDOUT, -E2BIG, ...) */
	uint64_t waited_ms;	 /* time the request spent in the queue */
	const char *detail;	 /* the daemon's own words, as it logged them; never NULL */
	uint32_t dropped;	 /* events lost for this client just before this one */
	uint64_t declared_bytes; /* since 1.1: UNDECLARED_USE's declaration; else 0 */
};

/* rocmmem_telemetry_name returns a kind's stable name ("lease_granted", ...; "unknown"). */
ROCMMEM_EXPORT const char *rocmmem_telemetry_name(enum rocmmem_telemetry_type type);

/*
 * rocmmem_subscribe starts this connection's subscription, or replaces the one it has.
 * what: ROCMMEM_SUBSCRIBE_SAMPLES and/or ROCMMEM_SUBSCRIBE_EVENTS. interval_ms: how often
 * samples come (ROCMMEM_SAMPLE_INTERVAL_MIN_MS to _MAX_MS; ignored without samples); the first
 * comes at once. Set the event callback first, or samples and events are dropped as they are
 * delivered. Stores the sample interval in effect in *interval_in_effect_ms (may be NULL; 0
 * with events only). Blocks up to 10 s. Returns 0; -EINVAL (no or unknown bits in what, or an
 * interval out of range); -ECONNRESET; or another negative errno (-EOPNOTSUPP: a daemon
 * without telemetry).
 */
ROCMMEM_EXPORT int rocmmem_subscribe(rocmmem_client *client, unsigned what, uint32_t interval_ms,
				     uint32_t *interval_in_effect_ms);

/*
 * rocmmem_unsubscribe ends the subscription. Samples and events received but not yet
 * delivered are discarded, so none is delivered once it returns (except to a callback another
 * thread is running at that moment). Blocks up to 10 s. Returns 0 (also when there was no
 * subscription) or a negative errno.
 */
ROCMMEM_EXPORT int rocmmem_unsubscribe(rocmmem_client *client);

#ifdef __cplusplus
}
#endif

#endif
