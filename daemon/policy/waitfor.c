/* SPDX-License-Identifier: MIT */
/* waitfor.c: what a waiting request waits for, read off the books (for its progress events). */
#include "waitfor.h"

#include <string.h>

#include "internal.h"
#include "policy.h"

/* rival finds a resident model on d of a class that excludes w's model's, or NULL. */
static const struct model *rival(const struct device *d, const struct waiter *w)
{
	const struct model *m;

	if (!w->model || !class_exclusion_any(&d->exclusive))
		return NULL;
	TAILQ_FOREACH (m, &d->models, device_link) {
		if (m == w->model || (model_resident(m) == 0 && !m->evicting))
			continue;
		if (class_exclusion_conflict(&d->exclusive, m->model_class, w->model->model_class))
			return m;
	}
	return NULL;
}

/* first_eviction finds the eviction under way on d that is due first (ties: the lowest id),
 * counting them in *n. */
static const struct model *first_eviction(const struct device *d, unsigned *n)
{
	const struct model *m, *first = NULL;

	*n = 0;
	TAILQ_FOREACH (m, &d->models, device_link) {
		if (!m->evicting)
			continue;
		(*n)++;
		if (!first || m->evict_due_ms < first->evict_due_ms ||
		    (m->evict_due_ms == first->evict_due_ms && m->id < first->id))
			first = m;
	}
	return first;
}

/* on_model fills out with reason about model m (its owner, bytes, deadline if evicting). */
static void on_model(struct waitfor *out, enum waitfor_reason reason, const struct model *m)
{
	out->reason = m->evicting ? WAITFOR_EVICTION : reason;
	out->model = m->id;
	out->owner = m->owner ? m->owner->id : 0;
	out->bytes = model_resident(m);
	out->due_ms = m->evicting ? m->evict_due_ms : 0;
}

/* largest_holder finds the holder holding the most on device dev (ties: the lowest id). */
static const struct holder *largest_holder(const struct state *s, unsigned dev, uint64_t *bytes)
{
	const struct holder *h, *best = NULL;
	uint64_t after = 0, id;

	*bytes = 0;
	while ((h = idtable_next(&s->holders, after, &id))) {
		uint64_t b = holder_bytes_on(h, dev, NULL);

		if (b > *bytes) {
			*bytes = b;
			best = h;
		}
		after = id;
	}
	return best;
}

void waitfor_compute(const struct state *s, const struct waiter *w, struct waitfor *out)
{
	const struct device *d = &s->devices[w->device];
	const struct waiter *head = queue_head(&d->queue);
	const struct model *m, *ev;
	const struct holder *h;

	memset(out, 0, sizeof(*out));
	out->device = w->device;
	out->position = queue_position(&d->queue, w);
	out->queued = d->queue.count;
	out->need = policy_need(w);
	out->free = device_free(d);
	ev = first_eviction(d, &out->evictions);
	if (w->model && w->model->evicting) {
		on_model(out, WAITFOR_EVICTION, w->model);
	} else if ((m = rival(d, w))) {
		on_model(out, WAITFOR_EXCLUSIVE, m);
		if (!m->evicting && m->use_count > 0)
			out->reason = WAITFOR_HOLDER;
	} else if (ev) {
		on_model(out, WAITFOR_EVICTION, ev);
	} else if (device_fits(d, out->need)) {
		out->reason = out->position == 0 || !head ? WAITFOR_GRANTING : WAITFOR_QUEUE;
		if (out->reason == WAITFOR_QUEUE) {
			out->owner = head->holder->id;
			out->bytes = policy_need(head);
		}
	} else if ((h = largest_holder(s, w->device, &out->bytes))) {
		out->reason = WAITFOR_HOLDER;
		out->owner = h->id;
	} else {
		out->reason = WAITFOR_BUDGET;
	}
}

bool waitfor_changed(const struct waitfor *a, const struct waitfor *b)
{
	return a->device != b->device || a->position != b->position || a->reason != b->reason ||
	       a->model != b->model || a->owner != b->owner || a->due_ms != b->due_ms ||
	       a->evictions != b->evictions;
}
