/* SPDX-License-Identifier: MIT */
/* vmm.h: a lease built from VMM physical chunks, for any runtime that exports them as fds. */
#ifndef ROCMMEMD_BACKEND_VMM_H
#define ROCMMEMD_BACKEND_VMM_H

#include <stddef.h>
#include <stdint.h>

#include "backend.h"

/*
 * What a runtime provides for VMM leases. Handles are the runtime's own, carried as 64-bit
 * values (HIP's are pointers, CUDA's integers). Functions return 0 or the runtime's error code.
 */
struct vmm_runtime {
	void *ctx;
	int oom;		 /* the runtime's out-of-memory code */
	const char *create_name; /* for messages: "hipMemCreate" */
	const char *export_name;
	int (*create)(void *ctx, uint64_t size, uint64_t *handle);
	void (*release)(void *ctx, uint64_t handle);
	int (*export_fd)(void *ctx, uint64_t handle, int *fd);
	void (*trim)(void *ctx); /* returns cached memory to the driver; may be NULL */
	/* import_fd makes a handle of an exported fd (which stays the caller's). */
	int (*import_fd)(void *ctx, int fd, uint64_t *handle);
	/* check_size proves that handle is at least size bytes by mapping that much of it. */
	int (*check_size)(void *ctx, uint64_t handle, uint64_t size);
	const char *import_name;
	/* fail formats "call: description" into why and returns the negative errno of err. */
	int (*fail)(void *ctx, const char *call, int err, char *why, size_t len);
};

/*
 * vmm_alloc allocates size bytes (a multiple of granule) as one physical piece, else, when the
 * runtime is out of memory (after one trim), as 2, 4, 8 or 16 chunks, all or none, and
 * exports each as an fd. Fills out (handle kind, chunks, transient fds, priv). Returns 0 or a
 * negative errno with the reason in why.
 */
int vmm_alloc(const struct vmm_runtime *rt, uint64_t size, uint64_t granule,
	      struct backend_alloc *out, char *why, size_t why_len);

/*
 * vmm_adopt imports the fds a client re-declared (a->fds, a->nchunks, a->chunk_sizes: each
 * chunk a whole number of granules, adding up to a->size) and checks each chunk's size; the
 * handles then hold the memory as vmm_alloc's do. Closes every fd. Returns 0 or a negative
 * errno with the reason in why.
 */
int vmm_adopt(const struct vmm_runtime *rt, uint64_t granule, struct backend_alloc *a, char *why,
	      size_t why_len);

/*
 * vmm_reexport exports the chunks of an allocation made by vmm_alloc or vmm_adopt as fds
 * again (a->fds, transient), for a grant of the same memory to the same client (the pool:
 * daemon/service/pool.c). Returns 0, or a negative errno with no fd open and the reason in why.
 */
int vmm_reexport(const struct vmm_runtime *rt, struct backend_alloc *a, char *why, size_t why_len);

/* vmm_release releases the chunks of an allocation made by vmm_alloc or vmm_adopt. */
void vmm_release(const struct vmm_runtime *rt, struct backend_alloc *a);

#endif
