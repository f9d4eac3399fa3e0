/* SPDX-License-Identifier: MIT */
/*
 * expire.c: what a passed deadline means: a waiting request times out, an owner is revoked, a
 * model in use past its maximum hold is asked back.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>

#include "explain.h"
#include "internal.h"

/* timed_out refuses waiter w at now_ms: the explanation of why it was not granted. */
static void timed_out(const struct state *s, const struct policy_config *cfg,
		      const struct waiter *w, uint64_t now_ms, struct policy_decision *d)
{
	const struct device *dev = &s->devices[w->device];
	char why[EXPLAIN_MAX + 1], text[EXPLAIN_MAX + 64];

	explain_refusal(s, cfg, dev, w, policy_need(w), now_ms, why, sizeof(why));
	snprintf(text, sizeof(text), "timed out after %" PRId64 " ms: %s", w->timeout_ms, why);
	if (w->model)
		policy_refuse(d, REFUSE_DENIAL, -ETIMEDOUT, "model '%s': %s", w->model->name, text);
	else
		policy_refuse(d, REFUSE_DENIAL, -ETIMEDOUT, "%s", text);
	d->device = w->device;
	d->waiter = w->seq;
	d->holder = w->holder->id;
	d->bytes = w->requested;
	d->model = w->model ? w->model->id : 0;
	d->waited_ms = now_ms - w->enqueued_ms;
}

void policy_expired(const struct state *s, const struct policy_config *cfg, uint64_t now_ms,
		    struct policy_decision *d)
{
	const struct heap_entry *e = heap_top(&s->deadlines, NULL);
	const struct waiter *w;
	const struct model *m;

	policy_decision_init(d);
	if (!e || e->due_ms > now_ms)
		return;
	switch (e->kind) {
	case DUE_WAITER:
		w = state_waiter_find(s, e->id);
		if (w)
			timed_out(s, cfg, w, now_ms, d);
		break;
	case DUE_EVICTION:
		m = state_model_find(s, e->id);
		if (!m || !m->evicting)
			break;
		d->verdict = POLICY_REVOKE;
		d->model = m->id;
		d->holder = m->owner->id;
		d->device = m->device;
		d->due_ms = e->due_ms;
		/* The deadline it was given: its class's when it was asked. */
		snprintf(d->reason, sizeof(d->reason), "did not %s within %.3g s of being asked",
			 m->use_count ? "release and unload it" : "unload",
			 (double)(e->due_ms - m->evict_started_ms) / 1000.0);
		break;
	case DUE_HOLD:
		m = state_model_find(s, e->id);
		if (m)
			policy_hold_over(cfg, m, now_ms, d);
		break;
	default:
		break;
	}
}
