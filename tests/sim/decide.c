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
#include <stdlib.h>

#include "sim.h"

/* What the head waits for (docs/residency.md): coming without any release of memory in use,
 * the loose bytes that other clients' releases bring in pieces of any size, and the models in
 * use that come whole (w->pieces, ascending, with their running sums in w->sums). */
struct head_view {
	uint64_t need;
	uint64_t coming;
	uint64_t loose;
	size_t npieces;
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

static int by_size(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* add_piece keeps a model in use that comes to the head whole (v NULL: room only). */
static void add_piece(struct world *w, struct head_view *v, uint64_t bytes)
{
	size_t n = v ? v->npieces : 0;

	if (n == w->pieces_cap || !w->sums) {
		size_t cap = w->pieces_cap ? 2 * w->pieces_cap : 256;
		uint64_t *p = realloc(w->pieces, cap * sizeof(*p));
		uint64_t *s = p ? realloc(w->sums, (cap + 1) * sizeof(*s)) : NULL;

		if (p)
			w->pieces = p;
		if (!s) {
			sim_fail(w, "sim", "out of memory");
			return;
		}
		w->sums = s;
		w->pieces_cap = cap;
	}
	if (v)
		w->pieces[v->npieces++] = bytes;
}

static void view_of(struct world *w, const struct device *d, const struct waiter *head,
		    struct head_view *v)
{
	uint64_t held = d->leased + d->reserved, resident = 0;
	const struct model *m;

	v->need = need_of(head);
	v->coming = minus(d->budget, held) + d->releasing;
	v->npieces = 0;
	add_piece(w, NULL, 0);
	TAILQ_FOREACH (m, &d->models, device_link) {
		bool idle = !m->evicting && m->use_count == 0 && !m->pinned;

		resident += model_resident(m);
		if (m->evicting || (idle && m != head->model))
			v->coming += model_resident(m);
		else if (!m->evicting && m->use_count > 0 && !m->pinned && m != head->model &&
			 m->owner != head->holder && model_resident(m) > 0 && !w->failed)
			add_piece(w, v, model_resident(m));
	}
	v->loose = minus(held, d->releasing + resident + plain_leases(head->holder, d->index));
	/* The pieces matter only when what is coming falls short of the head's need. */
	if (w->failed || v->coming >= v->need)
		return;
	qsort(w->pieces, v->npieces, sizeof(*w->pieces), by_size);
	w->sums[0] = 0;
	for (size_t i = 0; i < v->npieces; i++)
		w->sums[i + 1] = w->sums[i] + w->pieces[i];
}

/* delays_head says whether granting bytes now would move the head's start. */
static bool delays_head(const struct world *w, const struct head_view *v, uint64_t bytes)
{
	size_t lo = 0, hi = v->npieces;
	uint64_t deficit;

	if (v->coming >= v->need)
		return bytes > v->coming - v->need; /* only the surplus may go */
	deficit = v->need - v->coming;
	/* A release that brings at least the deficit but less than deficit + bytes would start
	 * the head without the grant and not with it: models in use come whole, so only those
	 * smaller than deficit + bytes, with the loose bytes, can make such a release. */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (w->pieces[mid] < deficit + bytes)
			lo = mid + 1;
		else
			hi = mid;
	}
	return v->loose + w->sums[lo] >= deficit;
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
	view_of(w, d, head, &v);
	if (!oracle_fits(d, x) || rival_of_head(d, head, x) || dec->bytes != need_of(x) ||
	    delays_head(w, &v, dec->bytes))
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

/* seen_before marks x's holder as seen in this walk; true when it was already (x is not its
 * holder's earliest request on the device). */
static bool seen_before(struct world *w, const struct waiter *x)
{
	struct sim_client *c = world_client(w, x->holder->id);

	if (!c || c->idle_stamp == w->idle_stamp)
		return true;
	c->idle_stamp = w->idle_stamp;
	return false;
}

/* check_idle: invariant 11 on device d once the pump has settled. */
static void check_idle(struct world *w, const struct device *d)
{
	const struct waiter *head = queue_head(&d->queue), *x;
	uint64_t free = minus(d->budget, d->leased + d->reserved);
	struct head_view v;
	bool viewed = false;

	if (!head || d->lost || free == 0 || oracle_fits(d, head))
		return;
	w->idle_stamp++;
	seen_before(w, head);
	for (x = TAILQ_NEXT(head, queue_link); x && !w->failed; x = TAILQ_NEXT(x, queue_link)) {
		uint64_t need = need_of(x);

		/* The cheap questions first: most requests behind a stuck head would delay it. */
		if (!seen_before(w, x) && need <= free && !rival_of_head(d, head, x)) {
			if (!viewed)
				view_of(w, d, head, &v);
			viewed = true;
			if (!w->failed && !delays_head(w, &v, need) && oracle_fits(d, x)) {
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
