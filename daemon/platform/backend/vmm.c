/* SPDX-License-Identifier: MIT */
/* vmm.c: leases made of VMM physical chunks, exported as fds: one policy for every runtime. */
#include "vmm.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* export_all exports each chunk of v as an fd into out, all or none (then none is open). */
static int export_all(const struct vmm_runtime *rt, const struct vmm_chunks *v,
		      struct backend_alloc *out, char *why, size_t why_len)
{
	for (unsigned i = 0; i < v->n; i++) {
		int fd = -1;
		int err = rt->export_fd(rt->ctx, v->handles[i], &fd);

		if (err || fd < 0) {
			backend_alloc_close_fds(out);
			if (!err) {
				snprintf(why, why_len, "%s gave no fd", rt->export_name);
				return -EIO;
			}
			return rt->fail(rt->ctx, rt->export_name, err, why, why_len);
		}
		out->fds[out->nfds++] = fd;
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
	err = export_all(rt, v, out, why, why_len);
	if (err) {
		for (unsigned j = 0; j < v->n; j++)
			rt->release(rt->ctx, v->handles[j]);
		free(v);
		return err;
	}
	out->handle_kind = BACKEND_HANDLE_VMM_FD;
	out->nchunks = v->n;
	out->transient_fds = true;
	out->priv = v;
	return 0;
}

int vmm_adopt(const struct vmm_runtime *rt, uint64_t granule, struct backend_alloc *a, char *why,
	      size_t why_len)
{
	struct vmm_chunks *v;
	uint64_t sum = 0;
	int err = 0;

	if (!rt->import_fd || !rt->check_size) {
		snprintf(why, why_len, "this runtime cannot import VMM memory");
		err = -EOPNOTSUPP;
		goto out;
	}
	if (a->nchunks == 0 || a->nchunks != a->nfds || a->nchunks > BACKEND_MAX_CHUNKS) {
		snprintf(why, why_len, "%u fd(s) for %u chunk(s)", a->nfds, a->nchunks);
		err = -EINVAL;
		goto out;
	}
	for (unsigned i = 0; i < a->nchunks; i++) {
		if (a->chunk_sizes[i] == 0 || a->chunk_sizes[i] % granule != 0) {
			snprintf(why, why_len, "chunk %u is not a whole number of granules", i);
			err = -EINVAL;
			goto out;
		}
		sum += a->chunk_sizes[i];
	}
	if (sum != a->size) {
		snprintf(why, why_len, "the chunks do not add up to the lease's size");
		err = -EINVAL;
		goto out;
	}
	v = calloc(1, sizeof(*v));
	if (!v) {
		err = -ENOMEM;
		snprintf(why, why_len, "out of memory");
		goto out;
	}
	for (; v->n < a->nchunks; v->n++) {
		int rc = rt->import_fd(rt->ctx, a->fds[v->n], &v->handles[v->n]);

		if (rc == 0) {
			rc = rt->check_size(rt->ctx, v->handles[v->n], a->chunk_sizes[v->n]);
			if (rc != 0) {
				rt->release(rt->ctx, v->handles[v->n]);
				err = rt->fail(rt->ctx, "mapping the chunk at its size", rc, why,
					       why_len);
			}
		} else {
			err = rt->fail(rt->ctx, rt->import_name, rc, why, why_len);
		}
		if (rc != 0) {
			while (v->n > 0)
				rt->release(rt->ctx, v->handles[--v->n]);
			free(v);
			if (err == 0)
				err = -EIO;
			goto out;
		}
	}
	a->handle_kind = BACKEND_HANDLE_VMM_FD;
	a->transient_fds = true;
	a->priv = v;
out:
	/* The imported handles hold the memory; the daemon keeps no fd of a VMM lease. */
	backend_alloc_close_fds(a);
	return err;
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
	/* Exported fds kept after the grant hold the memory too. */
	backend_alloc_close_fds(a);
}

int vmm_reexport(const struct vmm_runtime *rt, struct backend_alloc *a, char *why, size_t why_len)
{
	const struct vmm_chunks *v = a->priv;

	backend_alloc_close_fds(a);
	if (!v || v->n != a->nchunks) {
		snprintf(why, why_len, "not an allocation of VMM chunks");
		return -EINVAL;
	}
	a->transient_fds = true;
	return export_all(rt, v, a, why, why_len);
}
