/* SPDX-License-Identifier: MIT */
/*
 * notices.c: what owners and waiters are told, judged against the books: evict requests carry
 * their victim's class deadline and reach a model in use only past its maximum hold or by an
 * administrator's force, and a maximum hold is armed exactly while a model is in use
 * (invariant 12); progress notices go only to requests that asked and still wait, at most one
 * per PROGRESS_INTERVAL_MS but an eviction's end, and name what the books show (13).
 */
#include <inttypes.h>
#include <stdio.h>

#include "service/progress.h"
#include "sim.h"

/* deadline_of is how long the owner of m has to unload it: its class's, or the default. */
static uint64_t deadline_of(const struct world *w, const struct model *m)
{
	uint64_t own =
	    m->model_class < MODEL_CLASSES ? w->cfg.sched.evict_deadline_ms[m->model_class] : 0;

	return own ? own : w->residency.evict_deadline_ms;
}

/* hold_of is the longest m may stay in use (0: no limit), from the simulator's settings. */
static uint64_t hold_of(const struct world *w, const struct model *m)
{
	uint64_t own =
	    m->model_class < MODEL_CLASSES ? w->cfg.sched.max_hold_class_ms[m->model_class] : 0;

	if (own == POLICY_CLASS_OFF)
		return 0;
	return own ? own : w->cfg.sched.max_hold_ms;
}

void notices_evict(struct world *w, const struct svc_notice *n)
{
	const struct model *m = state_model_find(&w->svc.state, n->model_id);
	uint64_t limit;

	if (!m) {
		sim_fail(w, "12 evict requests",
			 "an evict request for model %" PRIu64 ", which is not in the books",
			 n->model_id);
		return;
	}
	if (n->deadline_ms != deadline_of(w, m))
		sim_fail(w, "12 evict requests",
			 "model %" PRIu64 " (class %u) asked to unload within %" PRIu64
			 " ms; its class's deadline is %" PRIu64 " ms",
			 m->id, m->model_class, n->deadline_ms, deadline_of(w, m));
	if (m->use_count == 0)
		return;
	limit = hold_of(w, m);
	if (w->forcing) {
		w->stats.forced++;
	} else if (limit && w->now >= m->in_use_since_ms + limit) {
		w->stats.hold_asks++;
	} else {
		sim_fail(w, "12 evict requests",
			 "model %" PRIu64 " (class %u) in use since %" PRIu64
			 " asked to release at %" PRIu64 " with a maximum hold of %" PRIu64
			 " ms and no forced eviction",
			 m->id, m->model_class, m->in_use_since_ms, w->now, limit);
	}
}

/* check_hold: invariant 12 for model m: its maximum hold is armed exactly while it is in use
 * (and not yet asked to go), and a model in use past it has been asked. */
static void check_hold(struct world *w, const struct model *m)
{
	uint64_t limit = hold_of(w, m);
	const char *wrong = NULL;

	if (m->use_count == 0 && m->hold_slot)
		wrong = "a maximum hold armed for a model not in use";
	else if (m->use_count > 0 && !m->evicting && limit && !m->hold_slot)
		wrong = "a model in use without its maximum hold armed";
	else if (!limit && m->hold_slot)
		wrong = "a maximum hold armed for a model of a class without one";
	else if (m->use_count > 0 && !m->evicting && limit && w->now >= m->in_use_since_ms + limit)
		wrong = "a model in use past its maximum hold, not asked to release";
	if (wrong)
		sim_fail(w, "12 maximum hold",
			 "%s: model %" PRIu64 " (class %u) in use %u since %" PRIu64
			 ", limit %" PRIu64 " ms, deadline slot %u%s",
			 wrong, m->id, m->model_class, m->use_count, m->in_use_since_ms, limit,
			 (unsigned)m->hold_slot, m->evicting ? ", evicting" : "");
}

void notices_sweep(struct world *w)
{
	for (unsigned i = 0; i < w->svc.state.ndevices && !w->failed; i++) {
		const struct model *m;

		TAILQ_FOREACH (m, &w->svc.state.devices[i].models, device_link) {
			check_hold(w, m);
			if (w->failed)
				return;
		}
	}
}

/* waiter_of finds the waiter of holder for request_id, or NULL. */
static const struct waiter *waiter_of(const struct world *w, uint64_t holder, uint64_t request_id)
{
	const struct holder *h = state_holder_find(&w->svc.state, holder);
	const struct waiter *x;

	if (!h)
		return NULL;
	TAILQ_FOREACH (x, &h->waiters, holder_link)
		if (x->request_id == request_id)
			return x;
	return NULL;
}

/* reason_wrong says what in p disagrees with the books and with what q was told before. */
static const char *reason_wrong(const struct world *w, const struct waiter *x,
				const struct sim_req *q, const struct svc_progress *p)
{
	const struct waitfor *f = &p->wait;
	const struct model *m = f->model ? state_model_find(&w->svc.state, f->model) : NULL;

	if (f->device != x->device || f->position >= f->queued ||
	    f->position != queue_position(&w->svc.state.devices[x->device].queue, x))
		return "its device or position is not the books'";
	if (p->ended != PROGRESS_WAITING)
		return q->told && q->told_reason == WAITFOR_EVICTION && q->told_model == f->model &&
			       f->reason == WAITFOR_EVICTION
			   ? NULL
			   : "an eviction's end it was not told it waits for";
	switch (f->reason) {
	case WAITFOR_GRANTING:
		return f->position == 0 ? NULL : "granting, not first";
	case WAITFOR_QUEUE:
		return f->position > 0 ? NULL : "behind others, and first";
	case WAITFOR_EVICTION:
		if (!m || !m->evicting)
			return "an eviction that is not under way";
		/* Within a tick a deadline already passed may not have run yet: 0 left then. */
		if (m->evict_due_ms != f->due_ms ||
		    p->deadline_left_ms != (f->due_ms > w->now ? f->due_ms - w->now : 0))
			return "an eviction with another deadline";
		return NULL;
	case WAITFOR_HOLDER:
		return state_holder_find(&w->svc.state, f->owner) ? NULL : "a holder that is gone";
	case WAITFOR_EXCLUSIVE:
		return m && model_resident(m) > 0 ? NULL : "a rival that is not resident";
	case WAITFOR_BUDGET:
		return NULL;
	default:
		return "no reason";
	}
}

void notices_progress(struct world *w, struct sim_client *c, const struct svc_notice *n)
{
	const struct svc_progress *p = n->progress;
	const struct waiter *x = waiter_of(w, c->holder, p->request_id);
	struct sim_req *q = NULL;
	const char *wrong = NULL;

	w->stats.progress++;
	for (unsigned i = 0; i < c->nout; i++)
		if (c->out[i].id == p->request_id)
			q = &c->out[i];
	if (!q || !q->progress || !x)
		wrong = !q	       ? "a request not outstanding"
			: !q->progress ? "a request that did not ask"
				       : "a request that no longer waits";
	else if (p->ended == PROGRESS_WAITING && q->told &&
		 w->now < q->told_ms + PROGRESS_INTERVAL_MS)
		wrong = "a second notice within the interval";
	else
		wrong = reason_wrong(w, x, q, p);
	if (wrong) {
		sim_fail(w, "13 progress",
			 "holder %" PRIu64 " told about request %" PRIu64
			 " (reason %d, model %" PRIu64 ", ended %d, position %u of %u): %s",
			 c->holder, p->request_id, (int)p->wait.reason, p->wait.model,
			 (int)p->ended, p->wait.position, p->wait.queued, wrong);
		return;
	}
	q->told = true;
	q->told_ms = w->now;
	q->told_reason = p->wait.reason;
	q->told_model = p->wait.model;
}
