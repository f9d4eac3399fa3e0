/* SPDX-License-Identifier: MIT */
/*
 * bypass.c: the hold-and-wait rule: one request from behind a head that cannot be granted is
 * let through when the head waits for memory held in use by that request's holder, which also
 * waits behind it (docs/residency.md, "How the daemon decides").
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

void policy_scratch_init(struct policy_scratch *x)
{
	memset(x, 0, sizeof(*x));
}

void policy_scratch_finish(struct policy_scratch *x)
{
	free(x->marked);
	free(x->cleared);
	memset(x, 0, sizeof(*x));
}

static int cmp_id(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* mark_add adds holder id to the marks (unsorted until mark_seal). Returns false on no memory. */
static bool mark_add(struct policy_scratch *x, uint64_t id)
{
	if (x->n == x->cap) {
		size_t cap = x->cap ? x->cap * 2 : 64;
		uint64_t *marked = realloc(x->marked, cap * sizeof(*marked));
		bool *cleared;

		if (!marked)
			return false;
		x->marked = marked;
		cleared = realloc(x->cleared, cap * sizeof(*cleared));
		if (!cleared)
			return false;
		x->cleared = cleared;
		x->cap = cap;
	}
	x->marked[x->n] = id;
	x->cleared[x->n] = false;
	x->n++;
	return true;
}

/* mark_find returns the index of holder id's mark, or -1 when it has none (or it was taken off). */
static long mark_find(const struct policy_scratch *x, uint64_t id)
{
	const uint64_t *p = x->n ? bsearch(&id, x->marked, x->n, sizeof(id), cmp_id) : NULL;

	return p && !x->cleared[p - x->marked] ? p - x->marked : -1;
}

/*
 * held_in_use: the bytes on d that only h can give back, by releasing: its leases and the
 * reservations of its unpinned models in use. Its idle models (evictable), models being
 * evicted (coming anyway), pinned models (never coming) and skip (the head's own model) are
 * counted elsewhere.
 */
static uint64_t held_in_use(const struct holder *h, const struct device *d,
			    const struct model *skip)
{
	uint64_t bytes = h->device_bytes[d->index];
	const struct model *m;

	TAILQ_FOREACH (m, &h->models, holder_link) {
		if (m->device != d->index)
			continue;
		if (m != skip && !m->pinned && model_state(m) == MODEL_IN_USE)
			bytes += m->reservation;
		else
			bytes -= m->lease_bytes < bytes ? m->lease_bytes : bytes;
	}
	return bytes;
}

/* minus subtracts, stopping at 0. */
static uint64_t minus(uint64_t a, uint64_t b)
{
	return a > b ? a - b : 0;
}

/*
 * begin marks the holders with a request behind head (in x) and fills b. Returns false when
 * no later request may overtake it: it does not wait for any of those holders.
 */
static bool begin(const struct device *d, const struct waiter *head, struct policy_scratch *x,
		  struct placement_bypass *b)
{
	uint64_t waiting = 0, other, aside = 0;
	const struct waiter *w;
	const struct model *m;

	memset(b, 0, sizeof(*b));
	x->n = 0;
	b->head_bytes = policy_need(head);
	/* The holders behind the head, each once, and what they hold. */
	for (w = TAILQ_NEXT(head, queue_link); w; w = TAILQ_NEXT(w, queue_link))
		if (w->holder != head->holder && !mark_add(x, w->holder->id))
			return false; /* out of memory: tried again on the next change */
	if (x->n == 0)
		return false;
	qsort(x->marked, x->n, sizeof(x->marked[0]), cmp_id);
	{
		size_t out = 0;

		for (size_t i = 0; i < x->n; i++)
			if (out == 0 || x->marked[out - 1] != x->marked[i])
				x->marked[out++] = x->marked[i];
		x->n = out;
	}
	for (w = TAILQ_NEXT(head, queue_link); w; w = TAILQ_NEXT(w, queue_link)) {
		long i = w->holder != head->holder ? mark_find(x, w->holder->id) : -1;

		/* Each holder once: counted, then its mark set aside while counting. */
		if (i < 0)
			continue;
		x->cleared[i] = true;
		waiting += held_in_use(w->holder, d, head->model);
	}
	memset(x->cleared, 0, x->n * sizeof(x->cleared[0]));
	/* Every byte accounted on d is: coming for the head now (free, being evicted, idle),
	 * never (pinned, the head's own model and holder), the waiting holders', or other
	 * holders' (in use, leases, allocations and releases under way), which they may free. */
	b->coming = device_free(d);
	TAILQ_FOREACH (m, &d->models, device_link) {
		if (m->evicting) {
			b->coming += model_resident(m);
		} else if (m == head->model || m->pinned) {
			aside += model_resident(m);
		} else if (model_state(m) == MODEL_IDLE) {
			b->coming += model_resident(m);
		} else if (model_state(m) == MODEL_IN_USE && head->model &&
			   mark_find(x, m->owner->id) >= 0 &&
			   class_exclusion_conflict(&d->exclusive, head->model->model_class,
						    m->model_class)) {
			b->rival_waits = true;
		}
	}
	aside += held_in_use(head->holder, d, head->model);
	other = minus(d->leased + d->reserved, minus(b->coming, device_free(d)) + aside + waiting);
	b->coming += other;
	return b->coming < b->head_bytes || b->rival_waits;
}

bool policy_bypass(const struct state *s, const struct device *d, const struct waiter *head,
		   uint64_t now_ms, struct policy_scratch *x, struct policy_decision *out)
{
	struct placement_bypass b;
	const struct waiter *w;

	(void)s;
	if (!begin(d, head, x, &b))
		return false;
	for (w = TAILQ_NEXT(head, queue_link); w; w = TAILQ_NEXT(w, queue_link)) {
		long i = w->holder != head->holder ? mark_find(x, w->holder->id) : -1;

		if (i < 0)
			continue;
		/* Only a holder with memory in use here, and only its first request behind the
		 * head that fits now without eviction and takes nothing the head could have (the
		 * cheaper questions first: the fit walks the device's models). */
		if (held_in_use(w->holder, d, head->model) == 0 ||
		    !placement_may_bypass(&b, policy_need(w)) || !policy_fits(d, w)) {
			x->cleared[i] = true; /* its later requests stay behind this one */
			continue;
		}
		out->verdict = POLICY_GRANT;
		out->device = w->device;
		out->waiter = w->seq;
		out->holder = w->holder->id;
		out->bytes = policy_need(w);
		out->waited_ms = now_ms - w->enqueued_ms;
		out->bypass = true;
		out->for_holder = head->holder->id;
		out->grant = w->kind == WAIT_LEASE	     ? GRANT_LEASE
			     : w->kind == WAIT_MODEL_ACQUIRE ? GRANT_MODEL_LOAD
							     : GRANT_MODEL_GROW;
		return true;
	}
	return false;
}
