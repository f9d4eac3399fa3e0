/* SPDX-License-Identifier: MIT */
/*
 * held.c: what the client holds, as the library knows it: its leases (mapped, with their fds)
 * and the models it registered, with the host's and the current daemon's ids of each.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/gpu.h"
#include "client.h"

/* ------------------------------------------------------------------------------------------ */
/* Leases */

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
	if (l->gpu)
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

	while ((l = c->leases)) {
		c->leases = l->next;
		held_lease_unmap(l);
		free(l);
	}
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
