/* SPDX-License-Identifier: MIT */
/* lease.c: acquiring, mapping and releasing leases. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "internal.h"

/* Host leases are mapped on this boundary so that transparent huge pages can back them. */
#define LEASE_ALIGN ((size_t)2 << 20)

/*
 * map_aligned maps size bytes of fd at a LEASE_ALIGN-aligned address: reserve a larger range,
 * map the file over its aligned part, give back the slack on either side.
 */
static void *map_aligned(int fd, size_t size)
{
	size_t span = size + LEASE_ALIGN;
	uint8_t *base, *aligned, *map;

	if (size > SIZE_MAX - LEASE_ALIGN)
		return MAP_FAILED;
	base = mmap(NULL, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (base == MAP_FAILED)
		return MAP_FAILED;
	aligned = (uint8_t *)(((uintptr_t)base + LEASE_ALIGN - 1) & ~(uintptr_t)(LEASE_ALIGN - 1));
	map = mmap(aligned, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0);
	if (map == MAP_FAILED) {
		munmap(base, span);
		return MAP_FAILED;
	}
	if (aligned > base)
		munmap(base, (size_t)(aligned - base));
	if (base + span > aligned + size)
		munmap(aligned + size, (size_t)(base + span - (aligned + size)));
	/* Best effort: huge pages make first touch of a large lease an order faster. */
	madvise(aligned, size, MADV_HUGEPAGE);
	return aligned;
}

static void link_lease(rocmmem_client *c, struct rocmmem_lease *l)
{
	pthread_mutex_lock(&c->lock);
	l->prev = NULL;
	l->next = c->leases;
	if (c->leases)
		c->leases->prev = l;
	c->leases = l;
	pthread_mutex_unlock(&c->lock);
}

static void unlink_lease(rocmmem_client *c, struct rocmmem_lease *l)
{
	pthread_mutex_lock(&c->lock);
	if (l->prev)
		l->prev->next = l->next;
	else
		c->leases = l->next;
	if (l->next)
		l->next->prev = l->prev;
	pthread_mutex_unlock(&c->lock);
}

static void unmap_and_close(struct rocmmem_lease *l)
{
	if (l->ptr)
		munmap(l->ptr, (size_t)l->size);
	if (l->fd >= 0)
		close(l->fd);
	l->ptr = NULL;
	l->fd = -1;
}

void lease_forget_all(rocmmem_client *c)
{
	struct rocmmem_lease *l;

	while ((l = c->leases)) {
		c->leases = l->next;
		unmap_and_close(l);
		free(l);
	}
}

/* send_release tells the daemon to release id and waits for its answer. */
static int send_release(rocmmem_client *c, uint64_t id)
{
	Rocmmem__Wire__ClientMessage msg = ROCMMEM__WIRE__CLIENT_MESSAGE__INIT;
	Rocmmem__Wire__LeaseRelease rel = ROCMMEM__WIRE__LEASE_RELEASE__INIT;
	struct inmsg *m;
	int err;

	rel.has_lease_id = true;
	rel.lease_id = id;
	msg.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_LEASE_RELEASE;
	msg.lease_release = &rel;
	err = conn_call(c, &msg, CONN_REPLY_GRACE_MS, &m);
	inmsg_free(m);
	return err;
}

/* adopt turns a grant into a lease handle; takes the fds out of m. */
static int adopt(rocmmem_client *c, struct inmsg *m, const struct rocmmem_lease_request *req,
		 rocmmem_lease **out)
{
	Rocmmem__Wire__LeaseGrant *g = conn_reply(m)->lease;
	struct rocmmem_lease *l;
	int err;

	if (!g->has_lease_id || !g->has_size || g->size == 0 || g->size > SIZE_MAX)
		return error_set(-EPROTO, "the daemon's grant is incomplete");
	l = calloc(1, sizeof(*l));
	if (!l)
		return error_set(-ENOMEM, "out of memory");
	l->client = c;
	l->id = g->lease_id;
	l->size = g->size;
	l->device = g->has_device ? g->device : req->device;
	l->kind =
	    g->has_handle_kind ? (enum rocmmem_handle_kind)g->handle_kind : ROCMMEM_HANDLE_NONE;
	l->waited_ms = g->waited_ms;
	l->fd = -1;
	if (l->kind == ROCMMEM_HANDLE_MEMFD) {
		if (m->nfds != 1) {
			free(l);
			return error_set(-EPROTO, "a host lease arrived with %u fds instead of 1",
					 m->nfds);
		}
		l->fd = m->fds[0];
		m->fds[0] = -1;
		m->nfds = 0;
		if (!(req->flags & ROCMMEM_LEASE_NOMAP)) {
			void *p = map_aligned(l->fd, (size_t)l->size);

			if (p == MAP_FAILED) {
				err = -errno;
				close(l->fd);
				free(l);
				return error_set(err, "Could not map the lease: %s",
						 strerror(-err));
			}
			l->ptr = p;
		}
	} else if (m->nfds > 0) {
		/* Other kinds are imported by their GPU runtimes; keep the first fd for them. */
		l->fd = m->fds[0];
		m->fds[0] = -1;
	}
	link_lease(c, l);
	*out = l;
	return 0;
}

ROCMMEM_EXPORT int rocmmem_lease_acquire(rocmmem_client *c, const struct rocmmem_lease_request *req,
					 rocmmem_lease **out)
{
	Rocmmem__Wire__ClientMessage msg = ROCMMEM__WIRE__CLIENT_MESSAGE__INIT;
	Rocmmem__Wire__LeaseAcquire acq = ROCMMEM__WIRE__LEASE_ACQUIRE__INIT;
	Rocmmem__Wire__Reply *r;
	int64_t wait;
	struct inmsg *m;
	uint64_t id;
	int err;

	if (!c || !req || !out)
		return error_set(-EINVAL, "rocmmem_lease_acquire needs a client, a request and an "
					  "out pointer");
	*out = NULL;
	if (req->flags & ~ROCMMEM_LEASE_NOMAP)
		return error_set(-EINVAL, "unknown lease flags 0x%x", req->flags);
	acq.has_device = true;
	acq.device = req->device;
	acq.has_size = true;
	acq.size = req->size;
	acq.has_timeout_ms = true;
	acq.timeout_ms = req->timeout_ms;
	acq.tag = (char *)req->tag;
	msg.body_case = ROCMMEM__WIRE__CLIENT_MESSAGE__BODY_LEASE_ACQUIRE;
	msg.lease_acquire = &acq;
	/* The daemon answers by the request's own deadline; wait a grace period beyond it. */
	wait = req->timeout_ms < 0 ? -1 : req->timeout_ms + CONN_REPLY_GRACE_MS;
	if (req->timeout_ms > INT64_MAX - CONN_REPLY_GRACE_MS)
		wait = -1;
	msg.has_id = true;
	msg.id = id = conn_next_id(c);
	err = conn_send(c, &msg);
	if (err)
		return err;
	err = conn_wait(c, id, wait, &m);
	if (err)
		return err;
	r = conn_reply(m);
	if (r->has_error && r->error != 0) {
		err = error_from_reply(r);
	} else if (r->body_case != ROCMMEM__WIRE__REPLY__BODY_LEASE) {
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
	int err;

	if (!l)
		return 0;
	c = l->client;
	/* Unmap first: once the daemon has it back, the memory is gone. */
	unmap_and_close(l);
	unlink_lease(c, l);
	err = send_release(c, l->id);
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

ROCMMEM_EXPORT unsigned rocmmem_lease_device(const rocmmem_lease *l)
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
	return l->fd;
}

ROCMMEM_EXPORT uint64_t rocmmem_lease_waited_ms(const rocmmem_lease *l)
{
	return l->waited_ms;
}
