/* SPDX-License-Identifier: MIT */
/* backend.h: the interface every memory backend (host, and later GPU runtimes) implements. */
#ifndef ROCMMEMD_BACKEND_H
#define ROCMMEMD_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "wire.h"

/* The most devices the daemon manages; further devices a runtime reports are ignored. */
#define BACKEND_MAX_DEVICES 16u
/* The most fds one allocation is handed out as. */
#define BACKEND_MAX_FDS WIRE_MAX_FDS

struct backend_device {
	char name[64];
	uint64_t total_bytes;	   /* what the device honestly offers */
	uint64_t granule;	   /* allocation granule, a power of two */
	uint32_t handle_kind;	   /* ROCMMEM__WIRE__HANDLE_KIND__* */
	uint64_t default_headroom; /* headroom when neither --budget nor --headroom is given */
};

/* One allocation backing one lease. The backend owns the fds until release. */
struct backend_alloc {
	uint32_t handle_kind;
	unsigned nfds;
	int fds[BACKEND_MAX_FDS];
	uint64_t size;
	void *priv;
};

struct backend;

struct backend_ops {
	const char *name;
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
	 * allocation for debugging. Returns 0 or a negative errno with nothing allocated.
	 */
	int (*alloc)(struct backend *b, unsigned index, uint64_t size, const char *label,
		     struct backend_alloc *out);
	/* release frees an allocation: its memory is returned even if a client still maps it. */
	void (*release)(struct backend *b, struct backend_alloc *a);
};

struct backend {
	const struct backend_ops *ops;
};

/* backend_names lists the accepted --backend values, for help and errors. */
const char *backend_names(void);
bool backend_known(const char *name);

/*
 * backend_open opens the backend called name, or for "auto" the first that works in order of
 * preference, logging why each one before it was skipped. Returns 0 or a negative errno.
 */
int backend_open(const char *name, struct backend **out);

static inline const char *backend_name(const struct backend *b)
{
	return b->ops->name;
}

extern const struct backend_ops backend_host_ops;

#endif
