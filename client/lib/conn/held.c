/* SPDX-License-Identifier: MIT */
/*
 * held.c: what the client holds, as the library knows it: its leases (mapped, with their fds)
 * and the models it registered, with the host's and the current daemon's ids of each.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/gpu.h"
#include "client.h"

/* ------------------------------------------------------------------------------------------ */
/* Leases */

/* Host leases are mapped on this boundary so that transparent huge pages can back them. */
#define LEASE_ALIGN ((size_t)2 << 20)

/*
 * held_map_aligned maps size bytes of fd at a LEASE_ALIGN-aligned address: reserve a larger range,
 * map the file over its aligned part, give back the slack on either side.
 */
void *held_map_aligned(int fd, size_t size)
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

void held_lease_link(rocmmem_client *c, struct rocmmem_lease *l)
{
	pthread_mutex_lock(&c->lock);
	l->prev = NULL;
	l->next = c->leases;
	if (c->leases)
		c->leases->prev = l;
	c->leases = l;
	pthread_mutex_unlock(&c->lock);
}

void held_lease_unlink(rocmmem_client *c, struct rocmmem_lease *l)
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

void held_lease_unmap(struct rocmmem_lease *l)
{
	if (l->arena) {
		/* The arena stays mapped: the daemon punches the range out. */
		l->arena = NULL;
		l->ptr = NULL;
	} else if (l->gpu)
		gpu_unmap(l->gpu);
	else if (l->ptr)
		munmap(l->ptr, (size_t)l->size);
	for (unsigned i = 0; i < l->nfds; i++)
		close(l->fds[i]);
	for (unsigned i = 0; i < l->nkept; i++)
		close(l->kept[i]);
	l->gpu = NULL;
	l->ptr = NULL;
	l->nfds = 0;
	l->nkept = 0;
}

void held_lease_forget_all(rocmmem_client *c)
{
	struct rocmmem_lease *l;

	struct lib_arena *a;

	while ((l = c->leases)) {
		c->leases = l->next;
		held_lease_unmap(l);
		free(l);
	}
	while ((a = c->arenas)) {
		c->arenas = a->next;
		if (a->base)
			munmap(a->base, (size_t)a->size);
		close(a->fd);
		free(a);
	}
}

bool held_arena_wanted(void)
{
	const char *e = getenv("ROCMMEM_HOST_ARENA");

	return !(e && strcmp(e, "0") == 0);
}

struct lib_arena *held_arena(rocmmem_client *c, uint64_t id)
{
	for (struct lib_arena *a = c->arenas; a; a = a->next)
		if (a->id == id)
			return a;
	return NULL;
}

void held_arena_note(rocmmem_client *c, struct inmsg *m)
{
	Rocmmem__Wire__Reply *r = conn_reply(m);
	const Rocmmem__Wire__LeaseGrant *g;
	struct lib_arena *a;
	struct stat st;

	if (!r || r->body_case != ROCMMEM__WIRE__REPLY__BODY_LEASE)
		return;
	g = r->lease;
	if (!g->has_handle_kind || g->handle_kind != ROCMMEM__WIRE__HANDLE_KIND__HANDLE_ARENA ||
	    m->nfds != 1 || !g->has_arena_id || !g->has_arena_size)
		return;
	/* Sent again after a restart that did not take the arena over: the one held stays. */
	if (held_arena(c, g->arena_id) || g->arena_size == 0 || g->arena_size > SIZE_MAX / 2 ||
	    fstat(m->fds[0], &st) < 0 || (uint64_t)st.st_size != g->arena_size)
		return;
	a = calloc(1, sizeof(*a));
	if (!a)
		return;
	a->id = g->arena_id;
	a->size = g->arena_size;
	a->fd = m->fds[0];
	m->fds[0] = -1;
	m->nfds = 0;
	a->base = held_map_aligned(a->fd, (size_t)a->size);
	if (a->base == MAP_FAILED) {
		a->map_err = -errno;
		a->base = NULL;
	}
	a->next = c->arenas;
	c->arenas = a;
}

/* ------------------------------------------------------------------------------------------ */
/* Models */

struct lib_model *held_model(rocmmem_client *c, uint64_t host_id)
{
	for (struct lib_model *m = c->models; m; m = m->next)
		if (m->id == host_id)
			return m;
	return NULL;
}

struct lib_model *held_model_by_daemon_id(rocmmem_client *c, uint64_t daemon_id)
{
	for (struct lib_model *m = c->models; daemon_id && m; m = m->next)
		if (m->daemon_id == daemon_id)
			return m;
	return NULL;
}

int held_model_track(rocmmem_client *c, uint64_t daemon_id, const struct rocmmem_model_desc *desc,
		     uint64_t *host_id)
{
	struct lib_model *m = calloc(1, sizeof(*m));

	if (!m)
		return -ENOMEM;
	m->daemon_id = daemon_id;
	m->device = desc->device;
	snprintf(m->name, sizeof(m->name), "%s", desc->name ? desc->name : "");
	m->model_class = (uint32_t)desc->model_class;
	m->size = desc->size;
	m->priority = desc->priority;
	m->pinned = desc->pinned != 0;
	pthread_mutex_lock(&c->lock);
	/* The host's id is the daemon's; only a daemon that lost track of the ids it gave (its
	 * state file gone) can give one the host already knows: then the host gets another. */
	m->id = daemon_id;
	if (held_model(c, m->id)) {
		for (struct lib_model *k = c->models; k; k = k->next)
			if (k->id >= m->id)
				m->id = k->id + 1;
	}
	m->next = c->models;
	c->models = m;
	*host_id = m->id;
	pthread_mutex_unlock(&c->lock);
	return 0;
}

void held_model_untrack(rocmmem_client *c, uint64_t host_id)
{
	pthread_mutex_lock(&c->lock);
	for (struct lib_model **p = &c->models; *p; p = &(*p)->next) {
		if ((*p)->id == host_id) {
			struct lib_model *m = *p;

			*p = m->next;
			free(m);
			break;
		}
	}
	pthread_mutex_unlock(&c->lock);
}

uint64_t held_model_daemon_id(rocmmem_client *c, uint64_t host_id)
{
	struct lib_model *m;
	uint64_t id = host_id;

	pthread_mutex_lock(&c->lock);
	m = held_model(c, host_id);
	if (m)
		id = m->daemon_id;
	pthread_mutex_unlock(&c->lock);
	return id;
}

void held_model_granted(rocmmem_client *c, uint64_t host_id, uint64_t generation)
{
	struct lib_model *lm;

	pthread_mutex_lock(&c->lock);
	lm = held_model(c, host_id);
	/* The host holds this residency now: events of older ones are stale from here on. */
	if (lm && generation > lm->generation)
		lm->generation = generation;
	pthread_mutex_unlock(&c->lock);
}
