/* SPDX-License-Identifier: MIT */
/* host.c: the host-memory backend: each lease is a sealed memfd the client maps. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "backend.h"
#include "version.h"

struct host_backend {
	struct backend base;
	uint64_t mem_available;
};

static int host_create(struct backend **out, char *why, size_t why_len)
{
	struct host_backend *h;
	uint64_t avail = backend_host_mem_available();

	if (avail < ROCMMEM_GRANULE) {
		snprintf(why, why_len, "could not read MemAvailable from /proc/meminfo");
		return -ENODEV;
	}
	h = calloc(1, sizeof(*h));
	if (!h) {
		snprintf(why, why_len, "out of memory");
		return -ENOMEM;
	}
	h->base.ops = &backend_host_ops;
	h->mem_available = avail;
	*out = &h->base;
	return 0;
}

static void host_destroy(struct backend *b)
{
	free(b);
}

static unsigned host_device_count(const struct backend *b)
{
	(void)b;
	return 1;
}

static int host_device_info(const struct backend *b, unsigned index, struct backend_device *out)
{
	const struct host_backend *h = (const struct host_backend *)b;

	if (index != 0)
		return -ENODEV;
	memset(out, 0, sizeof(*out));
	snprintf(out->name, sizeof(out->name), "host memory");
	/* Round down so that a budget taken from it is a whole number of granules. */
	out->total_bytes = h->mem_available & ~(ROCMMEM_GRANULE - 1);
	out->granule = ROCMMEM_GRANULE;
	out->handle_kind = BACKEND_HANDLE_MEMFD;
	/* By default lease at most half of what was available: the host needs the rest. */
	out->default_headroom = (out->total_bytes / 2) & ~(ROCMMEM_GRANULE - 1);
	return 0;
}

static int host_alloc(struct backend *b, unsigned index, uint64_t size, const char *label,
		      struct backend_alloc *out, char *why, size_t why_len)
{
	int fd, err;

	(void)b;
	if (index != 0)
		return -ENODEV;
	if (size == 0 || size > (uint64_t)INT64_MAX)
		return -EINVAL;
	fd = memfd_create(label, MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0) {
		err = -errno;
		snprintf(why, why_len, "memfd_create: %s", strerror(-err));
		return err;
	}
	if (ftruncate(fd, (off_t)size) < 0)
		goto fail;
	/*
	 * Sealing stops the client from growing the file past its lease (memory outside the
	 * budget) or shrinking it, and F_SEAL_SEAL stops it adding F_SEAL_WRITE, which would
	 * block the hole punch that returns the memory at release.
	 */
	if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0)
		goto fail;
	memset(out, 0, sizeof(*out));
	out->handle_kind = BACKEND_HANDLE_MEMFD;
	out->nfds = 1;
	out->fds[0] = fd;
	out->size = size;
	return 0;
fail:
	err = -errno;
	snprintf(why, why_len, "sizing and sealing a memfd: %s", strerror(-err));
	close(fd);
	return err;
}

static void host_release(struct backend *b, unsigned index, struct backend_alloc *a)
{
	(void)b;
	(void)index;
	for (unsigned i = 0; i < a->nfds; i++) {
		/*
		 * Punch the pages out before closing: a client that released the lease but kept
		 * its mapping must not keep the memory alive outside the budget.
		 */
		if (fallocate(a->fds[i], FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0,
			      (off_t)a->size) < 0) {
			/* Nothing more to do: close below still frees it once unmapped. */
		}
		close(a->fds[i]);
		a->fds[i] = -1;
	}
	a->nfds = 0;
}

static int host_adopt(struct backend *b, unsigned index, struct backend_alloc *a, char *why,
		      size_t why_len)
{
	(void)b;
	/* daemon/service/adopt.c has checked the memfd against the record (inode, size, seals). */
	if (index != 0 || a->handle_kind != BACKEND_HANDLE_MEMFD || a->nfds != 1) {
		backend_alloc_close_fds(a);
		snprintf(why, why_len, "a host lease is one memfd on device 0");
		return -EINVAL;
	}
	/* Kept until release, which punches the memory out as for any host lease. */
	a->transient_fds = false;
	a->nchunks = 0;
	return 0;
}

const struct backend_ops backend_host_ops = {
    .name = "host",
    .create = host_create,
    .destroy = host_destroy,
    .device_count = host_device_count,
    .device_info = host_device_info,
    .alloc = host_alloc,
    .release = host_release,
    .adopt = host_adopt,
};
