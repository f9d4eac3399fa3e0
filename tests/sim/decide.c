/* SPDX-License-Identifier: MIT */
/*
 * decide.c: the queues' decisions judged before the service applies them, with the books as
 * the policy saw them (svc.decided), and what backfilling must leave after the pump settles:
 * arrival order kept but for reported backfills and bypasses (invariant 8), a backfill never
 * delays the head (9), nobody passed over beyond the bounds (10), no free memory left idle
 * while a waiting request fits and its grant delays nobody (11). The rule of
 * docs/residency.md ("Backfilling") is done again here on its own, from the books.
 */
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>

#include "sim.h"

/* What the head waits for (docs/residency.md): coming without any release of memory in use,
 * and the loose bytes that other clients' releases bring in pieces of any size. */
struct head_view {
	uint64_t need;
	uint64_t coming;
	uint64_t loose;
};

static uint64_t minus(uint64_t a, uint64_t b)
{
	return a > b ? a - b : 0;
}

/* need_of is what w takes now: a lease its size, a model request what its model lacks. */
static uint64_t need_of(const struct waiter *w)
{
	if (w->kind == WAIT_LEASE || !w->model)
		return w->size;
	if (w->model->evicting)
		return w->target;
	return minus(w->target, w->model->reservation);
}

/* plain_leases is what h holds on device in leases tagged with no model. */
static uint64_t plain_leases(const struct holder *h, unsigned device)
{
	const struct lease *l;
	uint64_t bytes = 0;

	TAILQ_FOREACH (l, &h->leases, holder_link)
		if (l->device == device && !l->model)
			bytes += l->size;
	return bytes;
}

static void view_of(const struct device *d, const struct waiter *head, struct head_view *v)
{
	uint64_t held = d->leased + d->reserved, resident = 0;
	const struct model *m;

	v->need = need_of(head);
	v->coming = minus(d->budget, held) + d->releasing;
	TAILQ_FOREACH (m, &d->models, device_link) {
		bool idle = !m->evicting && m->use_count == 0 && !m->pinned;

		resident += model_resident(m);
		if (m->evicting || (idle && m != head->model))
			v->coming += model_resident(m);
	}
	v->loose = minus(held, d->releasing + resident + plain_leases(head->holder, d->index));
}

/* delays_head says whether granting bytes now would move the head's start (0 when not). */
static bool delays_head(const struct device *d, const struct waiter *head,
			const struct head_view *v, uint64_t bytes)
{
	uint64_t deficit, small;
	const struct model *m;

	if (v->coming >= v->need)
		return bytes > v->coming - v->need; /* only the surplus may go */
	deficit = v->need - v->coming;
	small = v->loose;
	/* A release that brings at least the deficit but less than deficit + bytes would start
	 * the head without the grant and not with it: models in use come whole. */
	TAILQ_FOREACH (m, &d->models, device_link)
		if (!m->evicting && m->use_count > 0 && !m->pinned && m != head->model &&
		    m->owner != head->holder && model_resident(m) < deficit + bytes)
			small += model_resident(m);
	return small >= deficit;
}

/* rival_of_head says whether w's model is of a class the device keeps apart from head's. */
static bool rival_of_head(const struct device *d, const struct waiter *head, const struct waiter *w)
{
	return head->model && w->model && w->model != head->model &&
	       class_exclusion_conflict(&d->exclusive, head->model->model_class,
					w->model->model_class);
}

static bool passed_enough(const struct world *w, const struct waiter *x)
{
	const struct policy_schedule *p = &w->svc.cfg.sched;

	return x->passed >= p->backfill_passes ||
	       (x->passed > 0 && w->now - x->first_passed_ms >= p->backfill_wait_ms);
}

/* check_order: invariant 8 for a grant of x: its holder has nothing ahead of it on the
 * device, and only a reported backfill or bypass takes it past the head; invariant 10 for
 * the requests a backfill passes. */
static void check_order(struct world *w, const struct device *d, const struct waiter *x,
			const struct policy_decision *dec)
{
	const struct waiter *head = queue_head(&d->queue), *v;

	if (x != head && !dec->backfill && !dec->bypass)
		sim_fail(w, "8 arrival order",
			 "device %u: waiter %" PRIu64 " granted past the head %" PRIu64
			 " with no backfill or bypass reported",
			 d->index, x->seq, head->seq);
	for (v = head; v && v != x && !w->failed; v = TAILQ_NEXT(v, queue_link)) {
		if (v->holder == x->holder)
			sim_fail(w, "8 arrival order",
				 "device %u: waiter %" PRIu64 " of holder %" PRIu64
				 " granted before its own earlier waiter %" PRIu64,
				 d->index, x->seq, x->holder->id, v->seq);
		else if (dec->backfill && v != head && passed_enough(w, v))
			sim_fail(w, "10 passes bounded",
				 "device %u: waiter %" PRIu64 " backfilled past waiter %" PRIu64
				 ", passed %u times since %" PRIu64 " (bounds %u passes, %" PRIu64
				 " ms)",
				 d->index, x->seq, v->seq, v->passed, v->first_passed_ms,
				 w->svc.cfg.sched.backfill_passes,
				 w->svc.cfg.sched.backfill_wait_ms);
	}
}

/* check_backfill: invariant 9 for a backfilled grant of x. */
static void check_backfill(struct world *w, const struct device *d, const struct waiter *x,
			   const struct policy_decision *dec)
{
	const struct waiter *head = queue_head(&d->queue);
	struct head_view v;

	w->stats.backfills++;
	if (!w->svc.cfg.sched.backfill || !head || x == head) {
		sim_fail(w, "9 a backfill delays nobody",
			 "a backfill of waiter %" PRIu64
			 " with backfilling %s and the head %" PRIu64,
			 x->seq, w->svc.cfg.sched.backfill ? "on" : "off", head ? head->seq : 0);
		return;
	}
	view_of(d, head, &v);
	if (!oracle_fits(d, x) || rival_of_head(d, head, x) || dec->bytes != need_of(x) ||
	    delays_head(d, head, &v, dec->bytes))
		sim_fail(w, "9 a backfill delays nobody",
			 "device %u: waiter %" PRIu64 " (%" PRIu64
			 " bytes%s%s) backfilled ahead of "
			 "the head %" PRIu64 " (needs %" PRIu64 ", coming %" PRIu64
			 ", loose %" PRIu64 ")",
			 d->index, x->seq, dec->bytes, oracle_fits(d, x) ? "" : ", not fitting",
			 rival_of_head(d, head, x) ? ", a rival of the head's model" : "",
			 head->seq, v.need, v.coming, v.loose);
}

/* decided judges one decision of policy_next before it is applied. */
static void decided(struct svc *svc, const struct policy_decision *dec)
{
	struct world *w = (struct world *)((char *)svc - offsetof(struct world, svc));
	const struct waiter *x;
	const struct device *d;

	if (w->failed || dec->verdict != POLICY_GRANT)
		return;
	x = state_waiter_find(&svc->state, dec->waiter);
	if (!x) {
		sim_fail(w, "8 arrival order",
			 "a grant of waiter %" PRIu64 ", which is not waiting", dec->waiter);
		return;
	}
	d = &svc->state.devices[x->device];
	check_order(w, d, x, dec);
	if (dec->backfill && !w->failed)
		check_backfill(w, d, x, dec);
}

void decide_install(struct world *w)
{
	w->svc.decided = decided;
}

/* first_of_holder says whether x is its holder's earliest request on its device. */
static bool first_of_holder(const struct device *d, const struct waiter *x)
{
	const struct waiter *v;

	for (v = queue_head(&d->queue); v && v != x; v = TAILQ_NEXT(v, queue_link))
		if (v->holder == x->holder)
			return false;
	return true;
}

/* check_idle: invariant 11 on device d once the pump has settled. */
static void check_idle(struct world *w, const struct device *d)
{
	const struct waiter *head = queue_head(&d->queue), *x;
	struct head_view v;
	bool viewed = false;

	if (!head || d->lost || oracle_fits(d, head))
		return;
	for (x = TAILQ_NEXT(head, queue_link); x; x = TAILQ_NEXT(x, queue_link)) {
		uint64_t need = need_of(x);

		if (need <= minus(d->budget, d->leased + d->reserved) && oracle_fits(d, x) &&
		    !rival_of_head(d, head, x) && first_of_holder(d, x)) {
			if (!viewed)
				view_of(d, head, &v);
			viewed = true;
			if (!delays_head(d, head, &v, need)) {
				sim_fail(w, "11 no memory idle",
					 "device %u: waiter %" PRIu64 " (%" PRIu64
					 " bytes) fits, delays nobody (the head %" PRIu64
					 " needs %" PRIu64 ", coming %" PRIu64 ") and still waits",
					 d->index, x->seq, need, head->seq, v.need, v.coming);
				return;
			}
		}
		if (passed_enough(w, x))
			return;
	}
}

void decide_step(struct world *w)
{
	if (!w->svc.cfg.sched.backfill)
		return;
	w->stats.idle_checks++;
	for (unsigned i = 0; i < w->svc.state.ndevices && !w->failed; i++)
		check_idle(w, &w->svc.state.devices[i]);
}

void decide_sweep(struct world *w)
{

	for (unsigned i = 0; i < w->svc.state.ndevices && !w->failed; i++) {
		const struct device *d = &w->svc.state.devices[i];
		const struct waiter *x;

		TAILQ_FOREACH (x, &d->queue.head, queue_link)
			if (x->passed > w->passes_max) {
				sim_fail(w, "10 passes bounded",
					 "device %u: waiter %" PRIu64
					 " passed over %u times (bound %u)",
					 i, x->seq, x->passed, w->passes_max);
				return;
			}
	}
}
