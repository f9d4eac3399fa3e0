/* SPDX-License-Identifier: MIT */
/* state.c: the books, and the changes that keep them consistent. */
#include "state.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void state_init(struct state *s)
{
	memset(s, 0, sizeof(*s));
	lease_table_init(&s->leases);
	idtable_init(&s->models);
	idtable_init(&s->holders);
	uid_accounts_init(&s->uids);
	idtable_init(&s->waiters);
	heap_init(&s->deadlines);
}

void state_finish(struct state *s)
{
	lease_table_finish(&s->leases);
	idtable_finish(&s->models);
	idtable_finish(&s->holders);
	uid_accounts_finish(&s->uids);
	idtable_finish(&s->waiters);
	heap_finish(&s->deadlines);
	free(s->adoption.leases.v);
	free(s->adoption.models.v);
	memset(&s->adoption, 0, sizeof(s->adoption));
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
	if (l->model) {
		l->model->lease_bytes += l->size;
		TAILQ_INSERT_TAIL(&l->model->leases, l, model_link);
	}
	l->created_ms = now_ms;
	TAILQ_INSERT_TAIL(&h->leases, l, holder_link);
	h->lease_count++;
	h->leased_bytes += l->size;
	h->device_bytes[l->device] += l->size;
}

void state_lease_unlink(struct state *s, struct lease *l)
{
	struct holder *h = l->owner;

	if (l->model) {
		l->model->lease_bytes -= l->size;
		TAILQ_REMOVE(&l->model->leases, l, model_link);
	}
	lease_table_remove(&s->leases, l);
	TAILQ_REMOVE(&h->leases, l, holder_link);
	h->lease_count--;
	h->leased_bytes -= l->size;
	h->device_bytes[l->device] -= l->size;
}

int state_waiter_add(struct state *s, const struct waiter *t, uint64_t now_ms, uint64_t due_ms,
		     struct waiter **out)
{
	struct waiter *w = calloc(1, sizeof(*w));
	struct holder *h = t->holder;
	int err;

	if (!w)
		return -ENOMEM;
	*w = *t;
	w->enqueued_ms = now_ms;
	w->due_ms = due_ms;
	w->heap_slot = 0;
	w->passed = 0;
	w->first_passed_ms = 0;
	err = idtable_add(&s->waiters, w, &w->seq);
	if (err == 0 && due_ms != UINT64_MAX) {
		err = state_deadline_set(s, DUE_WAITER, w->seq, due_ms, &w->heap_slot);
		if (err)
			idtable_remove(&s->waiters, w->seq);
	}
	if (err) {
		free(w);
		return err;
	}
	queue_push(&s->devices[w->device].queue, w);
	TAILQ_INSERT_TAIL(&h->waiters, w, holder_link);
	h->waiter_count++;
	if (w->model)
		w->model->waiters++;
	*out = w;
	return 0;
}

void state_waiter_drop(struct state *s, struct waiter *w)
{
	struct holder *h = w->holder;

	queue_remove(&s->devices[w->device].queue, w);
	TAILQ_REMOVE(&h->waiters, w, holder_link);
	h->waiter_count--;
	if (w->model)
		w->model->waiters--;
	idtable_remove(&s->waiters, w->seq);
	state_deadline_clear(s, &w->heap_slot);
	free(w);
}

struct waiter *state_waiter_find(const struct state *s, uint64_t seq)
{
	return idtable_find(&s->waiters, seq);
}

int state_deadline_set(struct state *s, enum deadline_kind kind, uint64_t id, uint64_t due_ms,
		       uint32_t *slot)
{
	struct heap_entry e = {.due_ms = due_ms, .kind = kind, .id = id};

	if (*slot && heap_update(&s->deadlines, *slot, due_ms) == 0)
		return 0;
	return heap_push(&s->deadlines, &e, slot);
}

void state_deadline_clear(struct state *s, uint32_t *slot)
{
	if (*slot)
		heap_remove(&s->deadlines, *slot);
	*slot = 0;
}

uint64_t state_next_due(const struct state *s)
{
	const struct heap_entry *e = heap_top(&s->deadlines, NULL);

	return e ? e->due_ms : UINT64_MAX;
}

bool state_deadline_due(struct state *s, uint64_t now_ms, struct heap_entry *out)
{
	const struct heap_entry *e = heap_top(&s->deadlines, NULL);

	if (!e || e->due_ms > now_ms)
		return false;
	return heap_pop(&s->deadlines, out);
}

void state_fd_take(struct state *s, struct holder *h)
{
	h->fd_leases++;
	if (h->account)
		h->account->fd_leases++;
	s->fd_leases++;
}

void state_fd_release(struct state *s, struct holder *h)
{
	if (h && h->fd_leases == 0)
		return; /* cannot be: every release follows a take */
	if (h) {
		h->fd_leases--;
		if (h->account)
			h->account->fd_leases--;
	}
	s->fd_leases--;
}

int state_model_add(struct state *s, struct model *m, uint64_t want_id)
{
	struct device *d = &s->devices[m->device];
	int err;

	/* The id table takes a chosen id only below its counter: the counter is never moved. */
	if (want_id && idtable_fill(&s->models, want_id, m) < 0 &&
	    idtable_insert(&s->models, want_id, m) < 0)
		want_id = 0; /* taken meanwhile: a fresh id, which the client maps */
	m->id = want_id;
	err = want_id ? 0 : idtable_add(&s->models, m, &m->id);
	if (err)
		return err;
	TAILQ_INIT(&m->leases);
	TAILQ_INSERT_TAIL(&m->owner->models, m, holder_link);
	m->owner->model_count++;
	TAILQ_INSERT_TAIL(&d->models, m, device_link);
	d->nmodels++;
	return 0;
}

void state_model_remove(struct state *s, struct model *m)
{
	struct device *d = &s->devices[m->device];
	struct holder *h = m->owner;
	struct lease *l;

	/* Leases outlive their model's registration as plain leases. */
	while ((l = TAILQ_FIRST(&m->leases))) {
		TAILQ_REMOVE(&m->leases, l, model_link);
		l->model = NULL;
	}
	idtable_remove(&s->models, m->id);
	TAILQ_REMOVE(&h->models, m, holder_link);
	h->model_count--;
	TAILQ_REMOVE(&d->models, m, device_link);
	d->nmodels--;
	free(m);
}

bool state_device_lost(struct state *s, unsigned device, const char *why)
{
	struct device *d = &s->devices[device];

	if (d->lost)
		return false;
	d->lost = true;
	snprintf(d->lost_reason, sizeof(d->lost_reason), "%s", why);
	return true;
}
