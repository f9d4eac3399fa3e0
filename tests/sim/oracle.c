/* SPDX-License-Identifier: MIT */
/*
 * oracle.c: docs/residency.md's rules done again, slowly and on their own, to judge what the
 * policy did: whether a waiting request fits now (invariant 3), and the hold-and-wait rule
 * (invariant 4: no head left waiting for holders queued behind it while one of them has a
 * request that fits and may go first). Also the stall detector: every client waiting and
 * nothing but timeouts to come.
 */
#include <inttypes.h>
#include <stdlib.h>

#include "sim.h"

/* rival says whether a model other than want of a class that excludes want's is loaded on d:
 * in use (even holding no bytes of its own), resident, or still being unloaded. */
static bool rival(const struct device *d, const struct model *want)
{
	const struct model *m;

	TAILQ_FOREACH (m, &d->models, device_link) {
		if (m == want ||
		    !class_exclusion_conflict(&d->exclusive, want->model_class, m->model_class))
			continue;
		if (m->evicting || m->use_count > 0 || m->reservation + m->lease_bytes > 0)
			return true;
	}
	return false;
}

/* need is what w takes now: a lease its size, a model request what its model lacks. */
static uint64_t need(const struct waiter *w)
{
	if (w->kind == WAIT_LEASE || !w->model)
		return w->size;
	if (w->model->evicting)
		return w->target;
	return w->target > w->model->reservation ? w->target - w->model->reservation : 0;
}

bool oracle_fits(const struct device *d, const struct waiter *w)
{
	uint64_t used = d->leased + d->reserved;

	/* Nothing needed (a resident model's acquire) fits even when a reload put the budget
	 * below what is held. */
	if (need(w) > 0 && (used > d->budget || need(w) > d->budget - used))
		return false;
	return !w->model || (!w->model->evicting && !rival(d, w->model));
}

/*
 * in_use is what h holds on d that only its own release gives back: its leases but those
 * tagged with a model that is idle, being evicted, pinned or skip, and the reservations of its
 * unpinned models in use but skip.
 */
static uint64_t in_use(const struct holder *h, unsigned device, const struct model *skip)
{
	const struct lease *l;
	const struct model *m;
	uint64_t bytes = 0;

	TAILQ_FOREACH (l, &h->leases, holder_link) {
		const struct model *t = l->model;

		if (l->device == device &&
		    (!t || (t != skip && !t->pinned && !t->evicting && t->use_count > 0)))
			bytes += l->size;
	}
	TAILQ_FOREACH (m, &h->models, holder_link)
		if (m->device == device && m != skip && !m->pinned && !m->evicting &&
		    m->use_count > 0)
			bytes += m->reservation;
	return bytes;
}

/* client_of is h's client; a holder without one breaks the books (invariant 2). */
static struct sim_client *client_of(struct world *w, const struct holder *h)
{
	struct sim_client *c = world_client(w, h->id);

	if (!c)
		sim_fail(w, "2 books = holders", "holder %" PRIu64 " has no client", h->id);
	return c;
}

/*
 * mark_behind marks (with a new stamp) the clients with a request queued behind head, but the
 * head's own, each at its first such request; returns what they hold in use between them.
 */
static uint64_t mark_behind(struct world *w, const struct device *d, const struct waiter *head)
{
	uint64_t waiting = 0;

	w->stamp++;
	for (const struct waiter *x = TAILQ_NEXT(head, queue_link); x && !w->failed;
	     x = TAILQ_NEXT(x, queue_link)) {
		struct sim_client *c;

		if (x->holder == head->holder || !(c = client_of(w, x->holder)) ||
		    c->stamp == w->stamp)
			continue;
		c->stamp = w->stamp;
		c->first_seq = x->seq;
		waiting += in_use(x->holder, d->index, head->model);
	}
	return waiting;
}

/* behind says whether h was marked by the last mark_behind. */
static bool behind(struct world *w, const struct holder *h)
{
	const struct sim_client *c = world_client(w, h->id);

	return c && c->stamp == w->stamp;
}

/* reach is what the head could have without the holders behind it (marked first); *rival_waits
 * says whether an exclusive rival in use belongs to one of them. */
static uint64_t reach(struct world *w, const struct device *d, const struct waiter *head,
		      bool *rival_waits)
{
	uint64_t held = d->leased + d->reserved, never = 0, waiting = mark_behind(w, d, head);
	const struct model *m;

	*rival_waits = false;
	TAILQ_FOREACH (m, &d->models, device_link) {
		if (m->evicting)
			continue;
		if (m == head->model || m->pinned)
			never += m->reservation + m->lease_bytes;
		else if (head->model && m->use_count > 0 && m->owner != head->holder &&
			 behind(w, m->owner) &&
			 class_exclusion_conflict(&d->exclusive, head->model->model_class,
						  m->model_class))
			*rival_waits = true;
	}
	never += in_use(head->holder, d->index, head->model);
	/* Free now, and everything held but what never comes and what the holders behind keep. */
	return (held < d->budget ? d->budget - held : 0) +
	       (held > never + waiting ? held - never - waiting : 0);
}

/* check_device: at quiescence, no request behind a head that waits for its holder may go. */
static void check_device(struct world *w, const struct device *d)
{
	const struct waiter *head = queue_head(&d->queue);
	uint64_t coming, head_need;
	bool rival_waits;

	if (!head || d->lost || oracle_fits(d, head))
		return;
	coming = reach(w, d, head, &rival_waits);
	head_need = need(head);
	if (w->failed || (coming >= head_need && !rival_waits))
		return; /* the others can make room: it waits as the queue says */
	for (const struct waiter *x = TAILQ_NEXT(head, queue_link); x;
	     x = TAILQ_NEXT(x, queue_link)) {
		const struct sim_client *c = world_client(w, x->holder->id);

		/* Only each holder's first request behind the head, holding memory in use. */
		if (x->holder == head->holder || !c || c->first_seq != x->seq ||
		    in_use(x->holder, d->index, head->model) == 0 || !oracle_fits(d, x))
			continue;
		if (coming < head_need || coming - head_need >= need(x)) {
			sim_fail(w, "4 hold and wait",
				 "device %u: the head (waiter %" PRIu64 " of holder %" PRIu64
				 ", %" PRIu64 " bytes) waits for holders behind it (it could have "
				 "%" PRIu64 " without them%s), and waiter %" PRIu64
				 " of holder %" PRIu64 " (%" PRIu64
				 " bytes, holding memory in use) fits but is not let through",
				 d->index, head->seq, head->holder->id, head_need, coming,
				 rival_waits ? "; a rival in use is theirs" : "", x->seq,
				 x->holder->id, need(x));
			return;
		}
	}
}

/* any_fits says whether some request waiting anywhere could be granted now. */
static bool any_fits(const struct world *w)
{
	for (unsigned i = 0; i < w->svc.state.ndevices; i++) {
		const struct device *d = &w->svc.state.devices[i];
		const struct waiter *q;

		TAILQ_FOREACH (q, &d->queue.head, queue_link)
			if (oracle_fits(d, q))
				return true;
	}
	return false;
}

/*
 * check_stall: every client waits for memory, nothing else is under way (no job, no ack, no
 * eviction: only the waiting requests' timeouts are to come), and yet a request could be
 * granted now: only timeouts end that. (When none fits, the clients hold more than the device
 * has between them: a deadlock of theirs, which timeouts are there to end.)
 */
static void check_stall(struct world *w)
{
	unsigned waiting = 0;

	/* A job, an ack or an eviction's deadline still to come can change everything. */
	if (w->nclients == 0 || w->njobs || w->nlater || w->nevictions)
		return;
	for (unsigned i = 0; i < w->svc.state.ndevices; i++)
		waiting += w->svc.state.devices[i].queue.count;
	if (waiting < w->nclients)
		return;
	for (unsigned i = 0; i < w->nclients; i++) {
		const struct holder *h = state_holder_find(&w->svc.state, w->clients[i]->holder);

		if (!h || h->waiter_count == 0)
			return;
	}
	if (!any_fits(w))
		return;
	/* Counted, not failed: the rules leave some of these to the timeouts on purpose (a
	 * request that would take what the head needs is never let through). Invariant 4 is the
	 * one that fails, where the hold-and-wait rule should have let one through. */
	if (!w->stats.stalls++)
		w->stats.first_stall = w->step;
	if (w->step >= w->opt.trace_from)
		sim_trace(w, "stall: all %u clients wait, one for what fits now", w->nclients);
}

void oracle_check(struct world *w)
{
	w->stats.oracle_checks++;
	for (unsigned i = 0; i < w->svc.state.ndevices && !w->failed; i++)
		check_device(w, &w->svc.state.devices[i]);
	if (!w->failed)
		check_stall(w);
}
