/* SPDX-License-Identifier: MIT */
/*
 * backfill.c: backfilling over bytes: a later request that fits in the memory free now is
 * granted ahead of a head that cannot be, when the grant does not delay the head's start
 * (EASY backfilling, with bytes for nodes); a request passed over too often or too long is
 * passed no more (docs/residency.md, "Backfilling").
 */
#include "internal.h"

/*
 * What the head waits for, on its device. Its start comes once the memory coming to it covers
 * its need: `coming` comes without anyone releasing memory in use (free, being freed, being
 * evicted, idle and evictable); the rest comes only as other clients release memory in use:
 * each model in use in one piece, `loose` (their plain leases, allocations in flight) in
 * pieces of any size.
 */
struct shadow {
	uint64_t need;
	uint64_t coming;
	uint64_t loose;
};

/* minus subtracts, stopping at 0. */
static uint64_t minus(uint64_t a, uint64_t b)
{
	return a > b ? a - b : 0;
}

/* released_piece says whether m is memory in use that another client will release in one
 * piece (not the head's own model or holder's, not pinned: those never come to the head). */
static bool released_piece(const struct waiter *head, const struct model *m)
{
	return !m->evicting && model_state(m) == MODEL_IN_USE && m != head->model &&
	       m->owner != head->holder && !m->pinned;
}

/* shadow_of computes what head, on d, waits for. */
static void shadow_of(const struct device *d, const struct waiter *head, struct shadow *sh)
{
	uint64_t held = d->leased + d->reserved, explained = d->releasing, own_leases;
	const struct holder *h = head->holder;
	const struct model *m;

	sh->need = policy_need(head);
	sh->coming = device_free(d) + d->releasing;
	own_leases = h->device_bytes[d->index];
	TAILQ_FOREACH (m, &d->models, device_link) {
		uint64_t bytes = model_resident(m);

		if (m->owner == h)
			own_leases = minus(own_leases, m->lease_bytes);
		explained += bytes; /* coming, a piece, or never (pinned, the head's own) */
		if (m->evicting || (model_evictable(m) && m != head->model))
			sh->coming += bytes;
	}
	/* The head's holder's plain leases never come to it either. */
	explained += own_leases;
	sh->loose = minus(held, explained);
}

/*
 * delays_nobody says whether granting bytes now leaves the head's start where it was. When
 * what is coming covers the head, only the surplus may go. Otherwise the head starts at the
 * first release that brings the deficit D; a grant of bytes delays it when some releases
 * bring at least D but less than D + bytes. Models in use come whole, so none of them that
 * is D + bytes or larger can end there: the others (and the loose bytes) must stay below D.
 */
static bool delays_nobody(const struct device *d, const struct waiter *head,
			  const struct shadow *sh, uint64_t bytes)
{
	uint64_t deficit, small;
	const struct model *m;

	if (sh->coming >= sh->need)
		return bytes <= sh->coming - sh->need;
	deficit = sh->need - sh->coming;
	small = sh->loose;
	TAILQ_FOREACH (m, &d->models, device_link) {
		if (released_piece(head, m) && model_resident(m) < deficit + bytes)
			small += model_resident(m);
	}
	return small < deficit;
}

/* first_of_its_holder says whether w is its holder's earliest request on its device: a
 * client's own requests keep their order. */
static bool first_of_its_holder(const struct waiter *w)
{
	const struct waiter *it;

	TAILQ_FOREACH (it, &w->holder->waiters, holder_link) {
		if (it->device == w->device)
			return it == w;
	}
	return false;
}

/* rival_of_head says whether granting w would make resident a class that excludes head's. */
static bool rival_of_head(const struct device *d, const struct waiter *head, const struct waiter *w)
{
	return head->model && w->model && w->model != head->model &&
	       class_exclusion_conflict(&d->exclusive, head->model->model_class,
					w->model->model_class);
}

/* passed_enough says whether w was passed over as often, or as long, as the settings allow. */
static bool passed_enough(const struct policy_schedule *p, const struct waiter *w, uint64_t now_ms)
{
	return w->passed >= p->backfill_passes ||
	       (w->passed > 0 && now_ms - w->first_passed_ms >= p->backfill_wait_ms);
}

bool policy_backfill(const struct policy_config *cfg, const struct device *d,
		     const struct waiter *head, uint64_t now_ms, struct policy_decision *out)
{
	const struct policy_schedule *p = &cfg->sched;
	const struct waiter *w;
	struct shadow sh = {0, 0, 0};
	bool computed = false;

	if (!p->backfill)
		return false;
	for (w = TAILQ_NEXT(head, queue_link); w; w = TAILQ_NEXT(w, queue_link)) {
		/* Cheap checks first: most waiters behind a stuck head do not fit either. */
		if (device_fits(d, policy_need(w)) && first_of_its_holder(w) &&
		    !rival_of_head(d, head, w) && policy_fits(d, w)) {
			if (!computed)
				shadow_of(d, head, &sh);
			computed = true;
			if (delays_nobody(d, head, &sh, policy_need(w))) {
				policy_grant_of(w, now_ms, out);
				out->backfill = true;
				out->for_holder = head->holder->id;
				return true;
			}
		}
		/* Nothing behind a request passed over enough may pass it again. */
		if (passed_enough(p, w, now_ms))
			break;
	}
	return false;
}
