/* SPDX-License-Identifier: MIT */
/* backend.h: the interface every memory backend (host, HIP, CUDA) implements. */
#ifndef ROCMMEMD_BACKEND_H
#define ROCMMEMD_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The most devices the daemon manages; further devices a runtime reports are ignored. */
#define BACKEND_MAX_DEVICES 16u
/*
 * The most chunks one lease is made of. A large VMM lease that cannot get one contiguous
 * physical allocation is split into up to this many, mapped back to back by the client: a
 * bounded number of fds per lease, closed once imported.
 */
#define BACKEND_MAX_CHUNKS 16u
#define BACKEND_IPC_HANDLE_SIZE 64u

/*
 * How a lease's memory reaches its client: the wire's HandleKind numbers (net/ checks that they
 * stay equal), so that this layer needs no protobuf.
 */
enum backend_handle {
	BACKEND_HANDLE_NONE = 0,
	BACKEND_HANDLE_MEMFD = 1,  /* host memory: one sealed memfd */
	BACKEND_HANDLE_VMM_FD = 2, /* GPU VMM physical memory as POSIX fds, one per chunk */
	BACKEND_HANDLE_DMABUF = 3, /* a dma-buf fd */
	BACKEND_HANDLE_IPC = 4,	   /* a runtime IPC handle (no fd) plus an offset */
	BACKEND_HANDLE_ARENA =
	    5, /* host memory: a range of the client's arena (its memfd sent once) */
};

struct backend_device {
	char name[64];
	char pci_bus_id[32];	   /* "0000:03:00.0", or "" for host memory */
	bool integrated;	   /* shares host memory (an APU) */
	uint64_t total_bytes;	   /* what the device honestly offers */
	uint64_t granule;	   /* allocation granule, a power of two */
	uint32_t handle_kind;	   /* enum backend_handle: the sharing method in use */
	uint64_t default_headroom; /* headroom when neither --budget nor --headroom is given */
};

/* What the runtime says about a device now. */
struct backend_meminfo {
	uint64_t total_bytes;
	uint64_t free_bytes;
};

/* One allocation backing one lease. */
struct backend_alloc {
	uint32_t handle_kind;
	uint64_t size;
	/* The fds handed to the client with the grant. */
	unsigned nfds;
	int fds[BACKEND_MAX_CHUNKS];
	/* true: the fds were exported for this grant and the daemon closes them once sent;
	 * false: the backend owns them until release (host memfds). */
	bool transient_fds;
	/* true: exported fds kept open after their grant (backend_alloc_keep_fds): the memory's
	 * next grant sends them again without exporting it anew; closed with the allocation. */
	bool kept_fds;
	unsigned nchunks; /* HANDLE_VMM_FD: one fd per chunk */
	uint64_t chunk_sizes[BACKEND_MAX_CHUNKS];
	bool has_ipc;
	uint8_t ipc_handle[BACKEND_IPC_HANDLE_SIZE];
	uint64_t ipc_offset;
	void *priv; /* the backend's own record of the allocation */
};

struct backend;

/*
 * Unless `blocking` is false, alloc, release, trim and meminfo may take milliseconds (GPU
 * runtime calls): the daemon runs them on worker threads, never on its event loop, possibly
 * several at once. device_count and device_info only read what create found.
 */
struct backend_ops {
	const char *name;
	bool blocking;
	/*
	 * create opens the backend. On failure returns a negative errno and writes why into
	 * `why` (for the log: "--backend auto" moves on to the next backend).
	 */
	int (*create)(struct backend **out, char *why, size_t why_len);
	void (*destroy)(struct backend *b);
	unsigned (*device_count)(const struct backend *b);
	int (*device_info)(const struct backend *b, unsigned index, struct backend_device *out);
	/*
	 * alloc allocates size bytes (a multiple of the granule) on device index; label names the
	 * allocation for debugging. Returns 0 or a negative errno with nothing allocated, and
	 * then a reason in `why` (-ENOMEM: the device itself is out of memory; -ENODEV: the
	 * device is gone).
	 */
	int (*alloc)(struct backend *b, unsigned index, uint64_t size, const char *label,
		     struct backend_alloc *out, char *why, size_t why_len);
	/* release frees an allocation: its memory is returned even if a client still maps it
	 * where the runtime allows that (host memory). Closes non-transient fds. */
	void (*release)(struct backend *b, unsigned index, struct backend_alloc *a);
	/* trim returns cached memory to the driver; *released says how much (may be NULL op). */
	int (*trim)(struct backend *b, unsigned index, uint64_t *released);
	/* meminfo reads the runtime's view of a device (may be NULL: host memory). */
	int (*meminfo)(struct backend *b, unsigned index, struct backend_meminfo *out);
	/*
	 * adopt takes over memory that a client re-declared after a restart of the daemon
	 * (daemon/service/adopt.c checked it against the record first). In: a->handle_kind,
	 * a->size, a->fds (a->nfds of them, owned by the call from then on: kept or closed) and,
	 * for VMM memory, a->nchunks and a->chunk_sizes. It imports them with the runtime and
	 * checks that each is memory of device index of its chunk's size, then fills a as alloc
	 * would, so that release frees it. Returns 0, or a negative errno with nothing held (every
	 * fd closed) and the reason in why. NULL: the backend cannot adopt anything.
	 */
	int (*adopt)(struct backend *b, unsigned index, struct backend_alloc *a, char *why,
		     size_t why_len);
	/*
	 * reexport exports an allocation's memory as fds again (a->fds, transient), so that the
	 * memory of a released lease can be granted once more to the client that had it (the
	 * chunk pool, daemon/service/pool.c) with no allocation. Returns 0, or a negative errno
	 * with no fd open and the reason in why. NULL: the backend cannot (host memory, dma-buf,
	 * IPC).
	 */
	int (*reexport)(struct backend *b, unsigned index, struct backend_alloc *a, char *why,
			size_t why_len);
};

struct backend {
	const struct backend_ops *ops;
};

/* Tests point this at a directory standing in for /dev (a file "kfd" in it, say). */
#define BACKEND_DEV_ROOT_ENV "ROCMMEM_DEV_ROOT"

/*
 * backend_gpu_node looks for a GPU device node: /dev/kfd (AMD), /dev/nvidia0 (NVIDIA) or a
 * /dev/dri/renderD* node. Returns true and writes the first one found into path, else false.
 */
bool backend_gpu_node(char *path, size_t len);

static inline const char *backend_name(const struct backend *b)
{
	return b->ops->name;
}

/* backend_sharing_name names a handle kind as status shows it ("vmm-fd", "ipc", ...). */
const char *backend_sharing_name(uint32_t handle_kind);

/* backend_set_sharing forces a sharing method for GPU backends ("auto", "vmm", "dmabuf",
 * "ipc"), before backend_open. Returns 0 or -EINVAL. */
int backend_set_sharing(const char *name);
const char *backend_sharing_choice(void);

/* backend_alloc_close_fds closes an allocation's fds (after a grant carried them). */
void backend_alloc_close_fds(struct backend_alloc *a);

/*
 * backend_alloc_keep_fds keeps the fds a grant exported (transient) open afterwards, as long as
 * the process keeps fewer than cap such fds in all: exporting is the costly part of a VMM grant
 * (about a millisecond a chunk with the CUDA driver), and a pooled lease granted again with
 * its fds still open needs none. Returns true when kept (then the allocation's release closes
 * them), false when a holds no transient fds or the cap is reached (the caller closes them).
 * backend_kept_fds says how many are kept now; safe from any thread.
 */
bool backend_alloc_keep_fds(struct backend_alloc *a, uint64_t cap);
uint64_t backend_kept_fds(void);

/*
 * backend_chunk_plan splits size (a multiple of granule) into n chunks, each a multiple of
 * granule and as even as possible, largest first. Returns 0, or -EINVAL when n is 0, above
 * BACKEND_MAX_CHUNKS, or more than size has granules.
 */
int backend_chunk_plan(uint64_t size, uint64_t granule, unsigned n, uint64_t *sizes);

/* backend_host_mem_available reads MemAvailable from /proc/meminfo in bytes, or 0. */
uint64_t backend_host_mem_available(void);

/*
 * backend_default_headroom picks the headroom a GPU device gets by default: on a discrete card
 * 5% of its memory (at least 512 MiB); on an APU, whose memory is the host's, enough to keep a
 * quarter of what the host has available for the host. Rounded to granule.
 */
uint64_t backend_default_headroom(uint64_t total, bool integrated, uint64_t granule);

/* The implementations (host.c, hip.c, cuda.c), which registry.c offers. */
extern const struct backend_ops backend_host_ops;
extern const struct backend_ops backend_hip_ops;
extern const struct backend_ops backend_cuda_ops;

#endif
