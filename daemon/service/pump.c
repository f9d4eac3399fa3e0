/* SPDX-License-Identifier: MIT */
/* pump.c: applying the policy's decisions: the queues' (policy_next) and the deadlines'. */
#include "pump.h"

#include <inttypes.h>
#include <stdio.h>

#include "adopt.h"
#include "arena.h"
#include "measure.h"
#include "memory.h"
#include "progress_tell.h"
#include "reply.h"
#include "residency.h"
#include "size.h"

void svc_apply_grant(struct svc *svc, const struct policy_decision *d, struct holder *h,
		     uint64_t request_id, struct waiter *w, const char *tag, uint64_t target,
		     bool own_memfd)
{
	struct model *m = d->model ? state_model_find(&svc->state, d->model) : NULL;
	char tagged[ROCMMEM_NAME_MAX + 1];

	if (w) {
		/* The waiter goes first: what the grant does may look at the queue again. */
		m = w->model;
		target = w->target;
		snprintf(tagged, sizeof(tagged), "%s", w->tag);
		tag = tagged;
		own_memfd = w->own_memfd;
		state_waiter_drop(&svc->state, w);
		svc_due_changed(svc);
	}
	if (d->grant == GRANT_LEASE)
		svc_grant_lease(svc, h, request_id, d->device, d->bytes, tag, m ? m->id : 0,
				d->waited_ms, own_memfd);
	else if (m)
		svc_model_grant(svc, m, d->grant, d->bytes, target, h->id, request_id,
				d->waited_ms);
}

bool svc_apply_evict(struct svc *svc, const struct policy_decision *d)
{
	bool any = false;

	for (unsigned i = 0; i < d->nvictims; i++) {
		struct model *m = state_model_find(&svc->state, d->victims[i]);

		uint64_t due = d->victim_due_ms[i] ? d->victim_due_ms[i] : d->due_ms;

		if (m && !m->evicting &&
		    svc_evict(svc, m, d->bytes, d->for_holder, due, d->force ? d->reason : NULL))
			any = true;
	}
	return any;
}

/* bypassed tells the bus a request is granted ahead of a head waiting for its holder. */
static void bypassed(struct svc *svc, const struct policy_decision *d, const struct holder *h)
{
	const struct holder *head = state_holder_find(&svc->state, d->for_holder);
	struct bus_event e = {.type = BUS_BYPASS, .holder = h};
	char sz[SIZE_FORMAT_MAX], who[128], whom[128];

	/* The count in the line is this bypass's: the counters see it next. */
	bus_emitf(&svc->bus, &e, LOG_LEVEL_DEBUG,
		  "granting %s on device %u to %s ahead of %s, which waits for memory it holds in "
		  "use (%" PRIu64 " bypasses)",
		  size_format(d->bytes, sz, sizeof(sz)), d->device,
		  holder_label(h, who, sizeof(who)),
		  head ? holder_label(head, whom, sizeof(whom)) : "?", svc->counters.bypasses + 1);
}

/* backfilled counts the requests a backfill passes over and tells the bus. */
static void backfilled(struct svc *svc, const struct policy_decision *d, struct waiter *w)
{
	const struct holder *head = state_holder_find(&svc->state, d->for_holder);
	struct bus_event e = {.type = BUS_BACKFILL, .holder = w->holder};
	char sz[SIZE_FORMAT_MAX], who[128], whom[128];
	unsigned ahead = queue_position(&svc->state.devices[w->device].queue, w);

	queue_pass_over(&svc->state.devices[w->device].queue, w, svc_now(svc));
	bus_emitf(&svc->bus, &e, LOG_LEVEL_DEBUG,
		  "backfilling %s on device %u to %s ahead of %u request(s): it fits now and "
		  "does not delay %s at the head",
		  size_format(d->bytes, sz, sizeof(sz)), d->device,
		  holder_label(w->holder, who, sizeof(who)), ahead,
		  head ? holder_label(head, whom, sizeof(whom)) : "?");
}

/* apply_next applies one decision of policy_next. Returns false when the books did not
 * change (nothing more to do). */
static bool apply_next(struct svc *svc, const struct policy_decision *d)
{
	struct waiter *w = d->waiter ? state_waiter_find(&svc->state, d->waiter) : NULL;
	struct holder *h;
	uint64_t request_id;

	switch (d->verdict) {
	case POLICY_GRANT:
		if (!w)
			return false;
		h = w->holder;
		request_id = w->request_id;
		if (d->bypass)
			bypassed(svc, d, h);
		if (d->backfill)
			backfilled(svc, d, w);
		svc_apply_grant(svc, d, h, request_id, w, NULL, 0, false);
		return true;
	case POLICY_REFUSE:
		if (!w)
			return false;
		request_id = w->request_id;
		h = w->holder;
		state_waiter_drop(&svc->state, w);
		svc_due_changed(svc);
		svc_refuse(svc, h->id, request_id, d, 0);
		return true;
	case POLICY_EVICT:
		return svc_apply_evict(svc, d);
	default:
		return false;
	}
}

void svc_pump(struct svc *svc)
{
	struct policy_decision d;

	if (svc->cfg.stopping)
		return; /* everyone is being disconnected: granting now would be wasted work */
	if (svc->pumping) {
		svc->pump_again = true;
		return;
	}
	svc->pumping = true;
	svc->pump_decisions = 0;
	do {
		svc->pump_again = false;
		for (;;) {
			svc_truth_refresh(svc);
			policy_next(&svc->state, &svc->cfg, svc_now(svc), &svc->scratch, &d);
			if (d.verdict != POLICY_NONE && svc->decided)
				svc->decided(svc, &d);
			if (d.verdict == POLICY_NONE || !apply_next(svc, &d))
				break;
			svc->pump_decisions++;
		}
	} while (svc->pump_again);
	svc->pumping = false;
	/* The queues have settled: tell the waiters who asked what they wait for now. */
	svc_progress_update(svc);
}

/* hold_over applies what a model's passed maximum hold calls for; its deadline goes. */
static void hold_over(struct svc *svc, uint64_t now, uint64_t model_id)
{
	struct model *m = state_model_find(&svc->state, model_id);
	struct policy_decision d;
	struct heap_entry gone;

	if (!m || !m->hold_slot) {
		heap_pop(&svc->state.deadlines, &gone); /* nobody's any more */
		return;
	}
	policy_expired(&svc->state, &svc->cfg, now, &d);
	state_deadline_clear(&svc->state, &m->hold_slot);
	svc_due_changed(svc);
	if (d.verdict == POLICY_EVICT && svc_apply_evict(svc, &d))
		svc->pump(svc); /* its memory now counts as coming for the queues' heads */
}

/* expired applies what a passed deadline means; false when there was nothing to apply. */
static bool expired(struct svc *svc, uint64_t now)
{
	struct policy_decision d;
	struct waiter *w;
	struct model *m;

	policy_expired(&svc->state, &svc->cfg, now, &d);
	switch (d.verdict) {
	case POLICY_REFUSE:
		w = state_waiter_find(&svc->state, d.waiter);
		if (!w)
			return false;
		{
			uint64_t holder = w->holder->id, request_id = w->request_id;

			state_waiter_drop(&svc->state, w);
			svc_due_changed(svc);
			svc_refuse(svc, holder, request_id, &d, 0);
		}
		/* The queue's head may have changed: whoever is now first may fit. */
		svc->pump(svc);
		return true;
	case POLICY_REVOKE:
		m = state_model_find(&svc->state, d.model);
		if (!m)
			return false;
		svc_unload(svc, m, d.reason);
		svc->pump(svc);
		return true;
	default:
		return false;
	}
}

void svc_run_deadlines(struct svc *svc)
{
	uint64_t now = svc_now(svc);
	const struct heap_entry *e;

	while ((e = heap_top(&svc->state.deadlines, NULL)) && e->due_ms <= now) {
		struct heap_entry gone;

		if (e->kind == DUE_GRACE) {
			state_deadline_clear(&svc->state, &svc->state.adoption.grace_slot);
			adopt_grace_over(svc);
			continue;
		}
		if (e->kind == DUE_HOLD) {
			hold_over(svc, now, e->id);
			continue;
		}
		if (e->kind == DUE_ARENA && svc_arenas_cool(svc, e->id))
			continue;
		if (!expired(svc, now))
			heap_pop(&svc->state.deadlines, &gone); /* nobody's any more */
	}
	svc_progress_update(svc); /* changes folded until now */
	/* Said again whatever it is: the user's timer has just fired. */
	svc->due_ms = 0;
	svc_due_changed(svc);
}
