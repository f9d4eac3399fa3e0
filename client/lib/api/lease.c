/* SPDX-License-Identifier: MIT */
/* lease.c: acquiring, mapping and releasing leases. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/abi.h"
#include "base/error.h"
#include "base/gpu.h"
#include "conn/client.h"

/* The size of the first version (1.0) of struct rocmmem_lease_request: every caller's. */
#define LEASE_REQUEST_1_0 ABI_END(struct rocmmem_lease_request, model_id)

/*
 * send_release tells the daemon to release id and waits for its answer. Never waits for a
 * daemon that went away: the lease is no longer re-declared, so a restarted daemon forgets it
 * (-ENOTCONN says that it was not told).
 */
static int send_release(rocmmem_client *c, uint64_t id)
{
	Rocmmem__Wire__ClientMessage msg = ROCMMEM__WIRE__CLIENT_MESSAGE__INIT;
	Rocmmem__Wire__LeaseRelease rel = ROCMMEM__WIRE__LEASE_RELEASE__INIT;
	struct call_opts o = conn_default_opts(CONN_REPLY_GRACE_MS);
	struct inmsg *m;
	int err;

	o.once = true;
	rel.has_lease_id = true;
	rel.lease_id = id;
	msg.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_LEASE_RELEASE;
	msg.lease_release = &rel;
	err = conn_call_opts(c, &msg, &o, &m);
	inmsg_free(m);
	return err;
}

/* take_fds moves the first n received fds into the lease (the message no longer owns them). */
static void take_fds(struct rocmmem_lease *l, struct inmsg *m, unsigned n)
{
	for (unsigned i = 0; i < n && i < LEASE_MAX_FDS; i++) {
		l->fds[l->nfds++] = m->fds[i];
		m->fds[i] = -1;
	}
}

static int adopt_host(struct rocmmem_lease *l, struct inmsg *m, uint32_t flags)
{
	if (m->nfds != 1)
		return error_set(-EPROTO, "a host lease arrived with %u fds instead of 1", m->nfds);
	take_fds(l, m, 1);
	if (!(flags & ROCMMEM_LEASE_NOMAP)) {
		void *p = held_map_aligned(l->fds[0], (size_t)l->size);

		if (p == MAP_FAILED)
			return error_set(-errno, "Could not map the lease: %s", strerror(errno));
		l->ptr = p;
	}
	return 0;
}

/* adopt_arena makes l a range of the arena the grant names (mapped when its fd came). */
static int adopt_arena(rocmmem_client *c, struct rocmmem_lease *l,
		       const Rocmmem__Wire__LeaseGrant *g, uint32_t flags)
{
	struct lib_arena *a;
	int err = 0;

	if (!g->has_arena_id || !g->has_offset)
		return error_set(-EPROTO, "an arena lease arrived without its arena and offset");
	pthread_mutex_lock(&c->lock);
	a = held_arena(c, g->arena_id);
	if (!a)
		err = error_set(-EPROTO, "a lease in arena %llu, whose fd never came",
				(unsigned long long)g->arena_id);
	else if (g->offset > a->size || l->size > a->size - g->offset)
		err = error_set(-EPROTO, "a lease beyond the end of its arena");
	else if (!a->base)
		err = error_set(a->map_err, "Could not map the arena: %s", strerror(-a->map_err));
	if (!err) {
		/* Public kind: host memory in a memfd, as before; it has no fd of its own. */
		l->kind = ROCMMEM_HANDLE_MEMFD;
		l->arena = a;
		l->offset = g->offset;
		l->ptr = (flags & ROCMMEM_LEASE_NOMAP) ? NULL : a->base + g->offset;
	}
	pthread_mutex_unlock(&c->lock);
	return err;
}

static int adopt_gpu(rocmmem_client *c, struct rocmmem_lease *l, struct inmsg *m,
		     const Rocmmem__Wire__LeaseGrant *g, uint32_t flags)
{
	struct gpu_grant gg = {0};
	int fds[LEASE_MAX_FDS];
	int rc;

	if (m->nfds > LEASE_MAX_FDS || g->n_chunk_sizes > LEASE_MAX_FDS)
		return error_set(-EPROTO, "a lease of %u fds and %zu chunks is more than expected",
				 m->nfds, g->n_chunk_sizes);
	l->nchunks = (unsigned)g->n_chunk_sizes;
	if (l->nchunks)
		memcpy(l->chunk_sizes, g->chunk_sizes, l->nchunks * sizeof(uint64_t));
	if (g->has_ipc_handle) {
		if (g->ipc_handle.len != sizeof(l->ipc_handle))
			return error_set(-EPROTO, "an IPC handle of %zu bytes", g->ipc_handle.len);
		memcpy(l->ipc_handle, g->ipc_handle.data, sizeof(l->ipc_handle));
		l->has_ipc = true;
		l->ipc_offset = g->offset;
	}
	snprintf(l->pci_bus_id, sizeof(l->pci_bus_id), "%s", g->pci_bus_id ? g->pci_bus_id : "");
	if (flags & ROCMMEM_LEASE_NOMAP) {
		/* The host imports the handles itself: they stay open until release. */
		take_fds(l, m, m->nfds);
		return 0;
	}
	gg.runtime = strcmp(c->backend, "cuda") == 0 ? GPU_CUDA : GPU_HIP;
	gg.kind = l->kind;
	gg.size = l->size;
	gg.pci_bus_id = l->pci_bus_id;
	gg.nfds = m->nfds;
	if (m->nfds)
		memcpy(fds, m->fds, m->nfds * sizeof(int));
	gg.fds = fds;
	gg.nchunks = l->nchunks;
	gg.chunk_sizes = l->chunk_sizes;
	gg.ipc_handle = l->has_ipc ? l->ipc_handle : NULL;
	gg.ipc_offset = l->ipc_offset;
	rc = gpu_import(&gg, &l->gpu, &l->ptr);
	if (rc == 0 && gpu_dmabuf_takes_fd(l->kind)) {
		m->fds[0] = -1; /* the runtime owns it now */
	}
	/*
	 * To re-declare it to a restarted daemon the library exports the imported handles again;
	 * where this runtime cannot, it keeps the fds the lease came with (one per chunk, counted
	 * against RLIMIT_NOFILE).
	 */
	if (rc == 0 && l->kind == ROCMMEM_HANDLE_VMM_FD &&
	    !(c->flags & ROCMMEM_CONNECT_NO_RECONNECT) && !gpu_can_export(l->gpu)) {
		for (unsigned i = 0; i < m->nfds; i++) {
			l->kept[l->nkept++] = m->fds[i];
			m->fds[i] = -1;
		}
	}
	/* Imported handles hold the memory; the fds are no longer needed (inmsg_free closes). */
	return rc;
}

/* adopt turns a grant into a lease handle; takes what it keeps out of m. */
static int adopt(rocmmem_client *c, struct inmsg *m, const struct rocmmem_lease_request *req,
		 rocmmem_lease **out)
{
	Rocmmem__Wire__LeaseGrant *g = conn_reply(m)->lease;
	struct rocmmem_lease *l;
	int err;

	if (!g->has_lease_id || !g->has_size || g->size == 0 || g->size > SIZE_MAX)
		return error_set(-EPROTO, "the daemon's grant is incomplete");
	/* Zeroed by assignment, not calloc: glibc's calloc passes its per-thread cache by, and a
	 * lease is made and freed per request (gcc turns malloc and memset into calloc). */
	l = malloc(sizeof(*l));
	if (!l)
		return error_set(-ENOMEM, "out of memory");
	*l = (struct rocmmem_lease){.client = c};
	l->id = g->lease_id;
	l->size = g->size;
	l->device = g->has_device ? g->device : req->device;
	l->kind =
	    g->has_handle_kind ? (enum rocmmem_handle_kind)g->handle_kind : ROCMMEM_HANDLE_NONE;
	l->waited_ms = g->waited_ms;
	l->model_id = req->model_id;
	l->generation = g->has_model_generation ? g->model_generation : 0;
	if (g->has_handle_kind && g->handle_kind == ROCMMEM__WIRE__HANDLE_KIND__HANDLE_ARENA) {
		err = adopt_arena(c, l, g, req->flags);
		goto adopted;
	}
	switch (l->kind) {
	case ROCMMEM_HANDLE_MEMFD:
		err = adopt_host(l, m, req->flags);
		break;
	case ROCMMEM_HANDLE_VMM_FD:
	case ROCMMEM_HANDLE_DMABUF:
	case ROCMMEM_HANDLE_IPC:
		err = adopt_gpu(c, l, m, g, req->flags);
		break;
	default:
		err = error_set(-EPROTO, "a lease of unknown kind %d", (int)l->kind);
		break;
	}
adopted:
	if (err) {
		held_lease_unmap(l);
		free(l);
		return err;
	}
	held_lease_link(c, l);
	if (l->model_id && l->generation)
		held_model_granted(c, l->model_id, l->generation);
	*out = l;
	return 0;
}

ROCMMEM_EXPORT int rocmmem_lease_acquire(rocmmem_client *c,
					 const struct rocmmem_lease_request *request,
					 rocmmem_lease **out)
{
	Rocmmem__Wire__ClientMessage msg = ROCMMEM__WIRE__CLIENT_MESSAGE__INIT;
	Rocmmem__Wire__LeaseAcquire acq = ROCMMEM__WIRE__LEASE_ACQUIRE__INIT;
	struct call_opts o = conn_default_opts(0);
	struct rocmmem_lease_request copy, *req = &copy;
	Rocmmem__Wire__Reply *r;
	struct inmsg *m;
	int err;

	if (!c || !request || !out)
		return error_set(-EINVAL, "rocmmem_lease_acquire needs a client, a request and an "
					  "out pointer");
	*out = NULL;
	err = abi_take(&copy, sizeof(copy), request, request->struct_size, LEASE_REQUEST_1_0,
		       "rocmmem_lease_request");
	if (err)
		return err;
	if (req->flags & ~(uint32_t)ROCMMEM_LEASE_NOMAP)
		return error_set(-EINVAL, "unknown lease flags 0x%x", req->flags);
	acq.has_device = true;
	acq.device = req->device;
	acq.has_size = true;
	acq.size = req->size;
	acq.has_timeout_ms = true;
	acq.timeout_ms = req->timeout_ms;
	acq.tag = (char *)req->tag;
	acq.has_progress = acq.progress = conn_progress_wanted(c);
	/* Not mapped here: the caller gets a memfd of its own to hand on (an arena's range
	 * would have no fd). */
	acq.has_own_memfd = acq.own_memfd = (req->flags & ROCMMEM_LEASE_NOMAP) != 0;
	if (req->model_id) {
		acq.has_model_id = true;
		acq.model_id = held_model_daemon_id(c, req->model_id);
	}
	msg.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_LEASE_ACQUIRE;
	msg.lease_acquire = &acq;
	/* The daemon answers by the request's own deadline; wait a grace period beyond it. While
	 * the daemon restarts, the request waits for it within its own timeout. */
	o.reply_ms = req->timeout_ms < 0 ? -1 : req->timeout_ms + CONN_REPLY_GRACE_MS;
	if (req->timeout_ms > INT64_MAX - CONN_REPLY_GRACE_MS)
		o.reply_ms = -1;
	o.reconnect_ms = req->timeout_ms;
	o.timeout_field = &acq.timeout_ms;
	err = conn_call_opts(c, &msg, &o, &m);
	if (err)
		return err;
	r = conn_reply(m);
	if (r->body_case != ROCMMEM__WIRE__REPLY__BODY_LEASE) {
		err = error_set(-EPROTO, "the daemon answered a lease request with something else");
	} else {
		uint64_t lease_id = r->lease->lease_id;

		err = adopt(c, m, req, out);
		if (err && lease_id) {
			/* Granted but unusable here: hand it straight back. */
			char keep[1024];

			snprintf(keep, sizeof(keep), "%s", rocmmem_last_error());
			send_release(c, lease_id);
			error_set(err, "%s", keep);
		}
	}
	inmsg_free(m);
	return err;
}

ROCMMEM_EXPORT int rocmmem_lease_release(rocmmem_lease *l)
{
	rocmmem_client *c;
	bool revoked;
	int err;

	if (!l)
		return 0;
	c = l->client;
	/* Out of the client's list first (a reconnection no longer re-declares it), then
	 * unmapped: once the daemon has it back, the memory is gone. */
	held_lease_unlink(c, l);
	pthread_mutex_lock(&c->lock);
	revoked = l->revoked;
	/* No daemon punches a range of an arena none took over: the memory goes here. */
	if (l->arena && l->arena->orphaned)
		fallocate(l->arena->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
			  (off_t)l->offset, (off_t)l->size);
	pthread_mutex_unlock(&c->lock);
	held_lease_unmap(l);
	/* A revoked lease is already forgotten by the daemon: nothing to tell it. */
	err = revoked ? 0 : send_release(c, l->id);
	free(l);
	return err;
}

ROCMMEM_EXPORT uint64_t rocmmem_lease_id(const rocmmem_lease *l)
{
	return l->id;
}

ROCMMEM_EXPORT uint64_t rocmmem_lease_size(const rocmmem_lease *l)
{
	return l->size;
}

ROCMMEM_EXPORT rocmmem_device_index rocmmem_lease_device(const rocmmem_lease *l)
{
	return l->device;
}

ROCMMEM_EXPORT enum rocmmem_handle_kind rocmmem_lease_handle_kind(const rocmmem_lease *l)
{
	return l->kind;
}

ROCMMEM_EXPORT void *rocmmem_lease_ptr(const rocmmem_lease *l)
{
	return l->ptr;
}

ROCMMEM_EXPORT int rocmmem_lease_fd(const rocmmem_lease *l)
{
	return l->nfds > 0 ? l->fds[0] : -1;
}

ROCMMEM_EXPORT unsigned rocmmem_lease_fd_count(const rocmmem_lease *l)
{
	return l->nfds;
}

ROCMMEM_EXPORT int rocmmem_lease_fd_at(const rocmmem_lease *l, unsigned index)
{
	return index < l->nfds ? l->fds[index] : -1;
}

ROCMMEM_EXPORT unsigned rocmmem_lease_chunk_count(const rocmmem_lease *l)
{
	return l->nchunks;
}

ROCMMEM_EXPORT uint64_t rocmmem_lease_chunk_size(const rocmmem_lease *l, unsigned index)
{
	return index < l->nchunks ? l->chunk_sizes[index] : 0;
}

ROCMMEM_EXPORT int rocmmem_lease_ipc_handle(const rocmmem_lease *l, void *handle, uint64_t *offset)
{
	if (!handle)
		return error_set(-EINVAL, "rocmmem_lease_ipc_handle needs somewhere to copy to");
	if (!l->has_ipc)
		return -ENOENT;
	memcpy(handle, l->ipc_handle, sizeof(l->ipc_handle));
	if (offset)
		*offset = l->ipc_offset;
	return 0;
}

ROCMMEM_EXPORT const char *rocmmem_lease_pci_bus_id(const rocmmem_lease *l)
{
	return l->pci_bus_id;
}

ROCMMEM_EXPORT uint64_t rocmmem_lease_waited_ms(const rocmmem_lease *l)
{
	return l->waited_ms;
}

ROCMMEM_EXPORT uint64_t rocmmem_lease_generation(const rocmmem_lease *l)
{
	return l->generation;
}

ROCMMEM_EXPORT int rocmmem_lease_revoked(const rocmmem_lease *l)
{
	int revoked;

	pthread_mutex_lock(&l->client->lock);
	revoked = l->revoked;
	pthread_mutex_unlock(&l->client->lock);
	return revoked;
}
