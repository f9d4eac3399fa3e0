/* SPDX-License-Identifier: MIT */
/*
 * holder.c: what one client process holds through one connection, and the accounts of the
 * uids holders belong to.
 */
#include "holder.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *holder_label(const struct holder *h, char *buf, size_t len)
{
	snprintf(buf, len, "pid %d '%s'", (int)h->who.pid, h->name[0] ? h->name : "?");
	return buf;
}

uint64_t holder_bytes(const struct holder *h)
{
	const struct model *m;
	uint64_t bytes = h->leased_bytes;

	TAILQ_FOREACH (m, &h->models, holder_link)
		bytes += m->reservation;
	return bytes;
}

uint64_t holder_bytes_on(const struct holder *h, unsigned dev, uint64_t *in_models)
{
	const struct model *m;
	uint64_t bytes = h->device_bytes[dev], models = 0;

	TAILQ_FOREACH (m, &h->models, holder_link) {
		if (m->device != dev)
			continue;
		bytes += m->reservation; /* its tagged leases are in device_bytes already */
		models += model_resident(m);
	}
	if (in_models)
		*in_models = models;
	return bytes;
}

bool holder_holds_memory(const struct holder *h)
{
	return h->lease_count > 0 || holder_bytes(h) > 0 || h->jobs > 0;
}

/* ------------------------------------------------------------------------------------------ */
/* Accounts per uid */

void uid_accounts_init(struct uid_accounts *u)
{
	memset(u, 0, sizeof(*u));
	for (unsigned i = 0; i < UID_BUCKETS; i++)
		TAILQ_INIT(&u->buckets[i]);
}

void uid_accounts_finish(struct uid_accounts *u)
{
	struct uid_account *a;

	for (unsigned i = 0; i < UID_BUCKETS; i++) {
		while ((a = TAILQ_FIRST(&u->buckets[i]))) {
			TAILQ_REMOVE(&u->buckets[i], a, link);
			free(a);
		}
	}
}

static struct uid_bucket *bucket(const struct uid_accounts *u, uid_t uid)
{
	return (struct uid_bucket *)&u->buckets[(unsigned)uid % UID_BUCKETS];
}

static struct uid_account *account(const struct uid_accounts *u, uid_t uid)
{
	struct uid_account *a;

	TAILQ_FOREACH (a, bucket(u, uid), link) {
		if (a->uid == uid)
			return a;
	}
	return NULL;
}

unsigned uid_connections(const struct uid_accounts *u, uid_t uid)
{
	const struct uid_account *a = account(u, uid);

	return a ? a->connections : 0;
}

int uid_attach(struct uid_accounts *u, struct holder *h)
{
	struct uid_account *a = account(u, h->who.uid);
	struct holder *k;

	if (!a) {
		a = calloc(1, sizeof(*a));
		if (!a)
			return -ENOMEM;
		a->uid = h->who.uid;
		TAILQ_INIT(&a->holders);
		TAILQ_INSERT_TAIL(bucket(u, h->who.uid), a, link);
	}
	h->proc_next = h->proc_prev = h;
	TAILQ_FOREACH (k, &a->holders, uid_link) {
		if (k->who.pid != h->who.pid)
			continue;
		h->proc_next = k->proc_next; /* into k's ring, after k */
		h->proc_prev = k;
		k->proc_next->proc_prev = h;
		k->proc_next = h;
		break;
	}
	TAILQ_INSERT_TAIL(&a->holders, h, uid_link);
	a->connections++;
	h->account = a;
	return 0;
}

void uid_detach(struct uid_accounts *u, struct holder *h)
{
	struct uid_account *a = h->account;

	if (!a)
		return;
	TAILQ_REMOVE(&a->holders, h, uid_link);
	h->proc_prev->proc_next = h->proc_next;
	h->proc_next->proc_prev = h->proc_prev;
	h->proc_next = h->proc_prev = h;
	a->fd_leases -= h->fd_leases; /* what it still holds is given back to the total only */
	h->account = NULL;
	/* Uids come and go: an account lives as long as one of its holders. */
	if (--a->connections == 0) {
		TAILQ_REMOVE(bucket(u, a->uid), a, link);
		free(a);
	}
}
