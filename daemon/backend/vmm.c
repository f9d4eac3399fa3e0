/* SPDX-License-Identifier: MIT */
/* vmm.c: leases made of VMM physical chunks, exported as fds: one policy for every runtime. */
#include "vmm.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rocmmem.pb-c.h"

struct vmm_chunks {
	unsigned n;
	uint64_t handles[BACKEND_MAX_CHUNKS];
};

/* create_all makes the n chunks of a plan, all or none. */
static int create_all(const struct vmm_runtime *rt, unsigned n, const uint64_t *sizes,
		      struct vmm_chunks *v)
{
	for (v->n = 0; v->n < n; v->n++) {
		int err = rt->create(rt->ctx, sizes[v->n], &v->handles[v->n]);

		if (err) {
			while (v->n > 0)
				rt->release(rt->ctx, v->handles[--v->n]);
			return err;
		}
	}
	return 0;
}

int vmm_alloc(const struct vmm_runtime *rt, uint64_t size, uint64_t granule,
	      struct backend_alloc *out, char *why, size_t why_len)
{
	struct vmm_chunks *v = calloc(1, sizeof(*v));
	bool trimmed = false;
	unsigned n = 1;
	int err = rt->oom;

	if (!v)
		return -ENOMEM;
	/*
	 * One contiguous physical allocation first; when the device has the memory but not in one
	 * piece, 2, 4, ... chunks that the client maps back to back into one range.
	 */
	while (n <= BACKEND_MAX_CHUNKS) {
		if (backend_chunk_plan(size, granule, n, out->chunk_sizes) < 0)
			break;
		err = create_all(rt, n, out->chunk_sizes, v);
		if (err != rt->oom)
			break;
		if (!trimmed && rt->trim) {
			/* Freed memory may still sit in the runtime's caches. */
			rt->trim(rt->ctx);
			trimmed = true;
			continue;
		}
		n *= 2;
	}
	if (err) {
		free(v);
		return rt->fail(rt->ctx, rt->create_name, err, why, why_len);
	}
	for (unsigned i = 0; i < v->n; i++) {
		int fd = -1;

		err = rt->export_fd(rt->ctx, v->handles[i], &fd);
		if (err || fd < 0) {
			backend_alloc_close_fds(out);
			for (unsigned j = 0; j < v->n; j++)
				rt->release(rt->ctx, v->handles[j]);
			free(v);
			if (!err) {
				snprintf(why, why_len, "%s gave no fd", rt->export_name);
				return -EIO;
			}
			return rt->fail(rt->ctx, rt->export_name, err, why, why_len);
		}
		out->fds[out->nfds++] = fd;
	}
	out->handle_kind = ROCMMEM__WIRE__HANDLE_KIND__HANDLE_VMM_FD;
	out->nchunks = v->n;
	out->transient_fds = true;
	out->priv = v;
	return 0;
}

void vmm_release(const struct vmm_runtime *rt, struct backend_alloc *a)
{
	struct vmm_chunks *v = a->priv;

	/* No VA reservation is held here, so releasing returns the memory (once every importer
	 * has released its handle too). */
	for (unsigned i = 0; v && i < v->n; i++)
		rt->release(rt->ctx, v->handles[i]);
	free(v);
	a->priv = NULL;
}
