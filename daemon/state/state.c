/* SPDX-License-Identifier: MIT */
/* state.c: the books, and the changes that keep them consistent. */
#include "state.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

void state_init(struct state *s)
{
	memset(s, 0, sizeof(*s));
	lease_table_init(&s->leases);
	idtable_init(&s->models);
	idtable_init(&s->holders);
	uid_accounts_init(&s->uids);
}

void state_finish(struct state *s)
{
	lease_table_finish(&s->leases);
	idtable_finish(&s->models);
	idtable_finish(&s->holders);
	uid_accounts_finish(&s->uids);
}

int state_holder_add(struct state *s, struct identity *who, uint64_t now_ms, struct holder **out)
{
	struct holder *h = calloc(1, sizeof(*h));
	int err;

	if (!h)
		return -ENOMEM;
	h->who = *who;
	h->connected_ms = now_ms;
	TAILQ_INIT(&h->leases);
	TAILQ_INIT(&h->waiters);
	TAILQ_INIT(&h->models);
	err = uid_attach(&s->uids, h);
	if (err == 0) {
		err = idtable_add(&s->holders, h, &h->id);
		if (err)
			uid_detach(&s->uids, h);
	}
	if (err) {
		free(h);
		return err;
	}
	/* Its groups are the holder's from here on. */
	identity_take(&h->who, who);
	*out = h;
	return 0;
}

void state_holder_leave(struct state *s, struct holder *h)
{
	idtable_remove(&s->holders, h->id);
	uid_detach(&s->uids, h);
}

void state_holder_free(struct holder *h)
{
	identity_forget(&h->who);
	free(h);
}

struct holder *state_holder_find(const struct state *s, uint64_t id)
{
	return idtable_find(&s->holders, id);
}

struct holder *state_holder_next(const struct state *s, uint64_t after_id)
{
	uint64_t id;

	return idtable_next(&s->holders, after_id, &id);
}

struct model *state_model_find(const struct state *s, uint64_t model_id)
{
	return idtable_find(&s->models, model_id);
}

void state_lease_link(struct state *s, struct holder *h, struct lease *l, uint64_t model_id,
		      uint64_t now_ms)
{
	l->owner = h;
	/* Tagged with its model, if that is still registered to the same holder, same device. */
	l->model = model_id ? state_model_find(s, model_id) : NULL;
	if (l->model && (l->model->owner != h || l->model->device != l->device))
		l->model = NULL;
	if (l->model)
		l->model->lease_bytes += l->size;
	l->created_ms = now_ms;
	TAILQ_INSERT_TAIL(&h->leases, l, holder_link);
	h->lease_count++;
	h->leased_bytes += l->size;
	h->device_bytes[l->device] += l->size;
}

void state_lease_unlink(struct state *s, struct lease *l)
{
	struct holder *h = l->owner;

	if (l->model)
		l->model->lease_bytes -= l->size;
	lease_table_remove(&s->leases, l);
	TAILQ_REMOVE(&h->leases, l, holder_link);
	h->lease_count--;
	h->leased_bytes -= l->size;
	h->device_bytes[l->device] -= l->size;
}
