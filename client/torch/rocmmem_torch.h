/* SPDX-License-Identifier: MIT */
/* rocmmem_torch.h: librocmmem_torch, a PyTorch allocator that sub-allocates rocmmemd leases. */
#ifndef ROCMMEM_TORCH_H
#define ROCMMEM_TORCH_H

/*
 * librocmmem_torch.so is loaded by PyTorch through torch.cuda.memory.CUDAPluggableAllocator
 * (rocmmem.torch.install() does it; docs/torch.md). PyTorch calls rocmmem_torch_alloc for
 * every tensor and rocmmem_torch_free when it dies; the library takes memory from rocmmemd in
 * large leases (64 MiB, or the tensor rounded up to 2 MiB when larger) and carves tensors out
 * of them locally, so that a tensor costs no round trip to the daemon. A lease goes back to
 * the daemon as soon as its last tensor is freed, except one empty lease of at most the keep
 * size (default: the chunk size), kept against allocate-free loops until
 * rocmmem_torch_trim, another lease emptying, or rocmmem_torch_shutdown.
 *
 * Conventions: errors are negative errno values; the library never prints, exits or aborts;
 * every function may be called from any thread (one mutex guards the bookkeeping, and no
 * call to the daemon or the GPU runtime is made while holding it). Blocks are aligned to 512
 * bytes. Memory of different streams, devices and models (rocmmem_torch_set_model) never
 * shares a lease: a block freed on one stream is reused only by the same stream, as PyTorch's
 * own caching allocator does, so that stream-ordered work never sees its memory reused by
 * another stream.
 *
 * Environment, read when the library connects: ROCMMEM_TORCH_CHUNK_SIZE (the lease size, in
 * the size syntax of every rocmmem tool: "64M", "0.9G" truncated to bytes; default 64M),
 * ROCMMEM_TORCH_KEEP_EMPTY (the largest empty lease kept; 0: none), ROCMMEM_TORCH_TIMEOUT
 * (seconds a lease request may wait for memory; default 30; 0 fails at once), ROCMMEM_SOCKET
 * (the daemon, as for librocmmem).
 */

#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__) && defined(ROCMMEM_TORCH_BUILDING)
#define ROCMMEM_TORCH_EXPORT __attribute__((visibility("default")))
#else
#define ROCMMEM_TORCH_EXPORT
#endif

typedef struct rocmmem_client rocmmem_client;

/* The alignment of every block, in bytes. */
#define ROCMMEM_TORCH_ALIGN 512

/*
 * rocmmem_torch_alloc: PyTorch's allocation hook. Returns size bytes on device (PyTorch's
 * ordinal in this process) for use on stream (a cudaStream_t or hipStream_t; NULL is the
 * default stream), aligned to ROCMMEM_TORCH_ALIGN: a device address on a GPU backend, a host
 * address on the host backend. Connects on the first call unless rocmmem_torch_init or
 * rocmmem_torch_init_client did. Returns NULL for size 0, and on failure (the reason, with
 * the daemon's explanation of a refusal, is in rocmmem_torch_stats' last_error).
 */
ROCMMEM_TORCH_EXPORT void *rocmmem_torch_alloc(ssize_t size, int device, void *stream);

/*
 * rocmmem_torch_free: PyTorch's release hook, with the size, device and stream given at
 * allocation. A pointer that is not a live allocation (unknown, already freed) or a size that
 * differs is counted as a bad free and described in last_error; nothing else happens (a block
 * freed with the wrong size stays allocated). NULL is ignored.
 */
ROCMMEM_TORCH_EXPORT void rocmmem_torch_free(void *ptr, ssize_t size, int device, void *stream);

/*
 * rocmmem_torch_init connects to the daemon at socket (NULL: $ROCMMEM_SOCKET or the default
 * path) as name (NULL: the process's name). Optional: the first allocation connects with the
 * defaults. Returns 0, -EALREADY (connected already), or librocmmem's error for
 * rocmmem_connect.
 */
ROCMMEM_TORCH_EXPORT int rocmmem_torch_init(const char *socket, const char *name);

/*
 * rocmmem_torch_init_client makes the allocator take its leases through client, a connection
 * the caller made and keeps open until rocmmem_torch_shutdown (the library never disconnects
 * it): the one whose models rocmmem_torch_set_model names. Returns 0, -EINVAL (NULL), or
 * -EALREADY (connected already).
 */
ROCMMEM_TORCH_EXPORT int rocmmem_torch_init_client(rocmmem_client *client);

/*
 * rocmmem_torch_set_model makes the calling thread's next allocations count toward model_id,
 * a model registered on the allocator's connection (0: none). They come from leases tagged
 * with that model, never shared with other models' memory. Returns the previous value.
 */
ROCMMEM_TORCH_EXPORT uint64_t rocmmem_torch_set_model(uint64_t model_id);

/* rocmmem_torch_get_model returns the calling thread's model id (0: none). */
ROCMMEM_TORCH_EXPORT uint64_t rocmmem_torch_get_model(void);

/*
 * rocmmem_torch_set_timeout sets how long a lease request may wait for memory in the
 * daemon's queue (0: fail at once; < 0: no limit), for every thread. Returns 0.
 */
ROCMMEM_TORCH_EXPORT int rocmmem_torch_set_timeout(int64_t timeout_ms);

/*
 * rocmmem_torch_set_chunk_size sets the size of the leases small tensors share (rounded up
 * to 2 MiB; 0: the default, 64 MiB). Returns 0, or -EINVAL (above 1 TiB).
 */
ROCMMEM_TORCH_EXPORT int rocmmem_torch_set_chunk_size(uint64_t bytes);

/* rocmmem_torch_set_keep_empty sets the largest empty lease kept for reuse (0: return every
 * lease at once). Returns 0. */
ROCMMEM_TORCH_EXPORT int rocmmem_torch_set_keep_empty(uint64_t bytes);

struct rocmmem_torch_stats {
	uint64_t leases;	  /* leases held now */
	uint64_t leased_bytes;	  /* their sizes */
	uint64_t used_bytes;	  /* bytes of live allocations, each rounded up to 512 */
	uint64_t requested_bytes; /* bytes of live allocations as asked */
	uint64_t allocations;	  /* live allocations */
	uint64_t bad_frees;	  /* frees of unknown pointers, twice, or with a wrong size */
	uint64_t allocs_total;	  /* allocations served since the library was loaded */
	uint64_t frees_total;	  /* allocations freed */
	uint64_t failed_allocs;	  /* allocations that returned NULL */
	uint64_t lease_acquires;  /* leases taken from the daemon (round trips) */
	uint64_t lease_releases;  /* leases given back */
	uint64_t kept_bytes;	  /* the empty lease kept for reuse, 0 when none */
	uint64_t arenas;	  /* (device, model, stream) groups with leases */
	char last_error[512];	  /* the latest failure or bad free; "" when none */
};

/* rocmmem_torch_stats copies the counters into *out. Returns 0, or -EINVAL (NULL). */
ROCMMEM_TORCH_EXPORT int rocmmem_torch_stats(struct rocmmem_torch_stats *out);

/* rocmmem_torch_trim gives every empty lease back to the daemon. Returns the bytes given
 * back (>= 0). */
ROCMMEM_TORCH_EXPORT int64_t rocmmem_torch_trim(void);

/*
 * rocmmem_torch_shutdown gives every lease back and disconnects (a connection from
 * rocmmem_torch_init_client is left open). Memory still allocated becomes invalid: call it
 * once PyTorch is done with its tensors. Later allocations connect again. Returns the number
 * of allocations that were still live.
 */
ROCMMEM_TORCH_EXPORT int64_t rocmmem_torch_shutdown(void);

#ifdef __cplusplus
}
#endif

#endif
