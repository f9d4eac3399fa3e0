/* SPDX-License-Identifier: MIT */
/* placement.c: the eviction policy: conflicts, victims in priority and LRU order, dead ends. */
#include "placement.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "size.h"

/* conflicting says whether m's residency excludes the request's model. */
static bool conflicting(const struct placement_request *r, const struct model *m)
{
	const struct model *want = r->model;

	return want && m != want && r->exclusive &&
	       class_exclusion_conflict(r->exclusive, want->model_class, m->model_class) &&
	       model_state(m) != MODEL_EVICTED;
}

bool placement_conflicts(const struct placement_request *r, struct model *const *models, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (conflicting(r, models[i]))
			return true;
	return false;
}

/* victim_order: lower priority first, then least recently used, then oldest. */
static int victim_order(const void *pa, const void *pb)
{
	const struct model *a = *(struct model *const *)pa, *b = *(struct model *const *)pb;

	if (a->priority != b->priority)
		return a->priority < b->priority ? -1 : 1;
	if (a->last_used_ms != b->last_used_ms)
		return a->last_used_ms < b->last_used_ms ? -1 : 1;
	return a->id < b->id ? -1 : a->id > b->id;
}

static bool chosen(const struct placement_plan *p, const struct model *m)
{
	for (unsigned i = 0; i < p->nvictims; i++)
		if (p->victims[i] == m)
			return true;
	return false;
}

void placement_plan(const struct placement_request *r, struct model *const *models, size_t n,
		    struct placement_plan *out)
{
	struct model **candidates;
	uint64_t coming = r->free_bytes + r->evicting_bytes, evictable = 0;
	size_t ncand = 0;

	out->nvictims = 0;
	out->must_wait = false;
	/* Exclusive conflicts go whatever the bytes say. */
	for (size_t i = 0; i < n; i++) {
		struct model *m = models[i];

		if (!conflicting(r, m) || model_state(m) == MODEL_EVICTING)
			continue;
		if (model_evictable(m) && out->nvictims < PLACEMENT_MAX_VICTIMS) {
			out->victims[out->nvictims++] = m;
			coming += model_resident(m);
		} else {
			out->must_wait = true; /* in use (or pinned: refused at request time) */
		}
	}
	if (coming >= r->bytes)
		return;
	/* Every evictable model competes, however many: sorted, then taken in order. */
	candidates = malloc((n ? n : 1) * sizeof(*candidates));
	if (!candidates) {
		out->must_wait = true; /* try again on the next change */
		return;
	}
	for (size_t i = 0; i < n; i++) {
		struct model *m = models[i];

		if (m != r->model && model_evictable(m) && !chosen(out, m)) {
			candidates[ncand++] = m;
			evictable += model_resident(m);
		}
	}
	if (coming + evictable < r->bytes) {
		/* Evicting everything idle would not be enough: wait for a release instead of
		 * unloading models for nothing. */
		out->must_wait = true;
		free(candidates);
		return;
	}
	qsort(candidates, ncand, sizeof(candidates[0]), victim_order);
	for (size_t i = 0; i < ncand && coming < r->bytes; i++) {
		if (out->nvictims == PLACEMENT_MAX_VICTIMS)
			break; /* the rest on the next plan, once these are out */
		out->victims[out->nvictims++] = candidates[i];
		coming += model_resident(candidates[i]);
	}
	free(candidates);
}

/* larger keeps the larger resident of two models (either may be NULL). */
static const struct model *larger(const struct model *a, const struct model *b)
{
	return !a || (b && model_resident(b) > model_resident(a)) ? b : a;
}

int placement_impossible(const struct placement_request *r, struct model *const *models, size_t n,
			 uint64_t budget, char *why, size_t why_len)
{
	uint64_t pinned = 0, own_in_use = 0;
	const struct model *top_pinned = NULL, *top_own = NULL;
	char a[SIZE_FORMAT_MAX], b[SIZE_FORMAT_MAX], c[SIZE_FORMAT_MAX], d[SIZE_FORMAT_MAX];
	char e[SIZE_FORMAT_MAX];

	for (size_t i = 0; i < n; i++) {
		const struct model *m = models[i];

		if (m == r->model)
			continue;
		if (conflicting(r, m) && m->pinned) {
			snprintf(
			    why, why_len,
			    "%s '%s' is pinned and its class excludes %s on this device (it "
			    "holds %s); suggestion: unpin model '%s' (rocmmemctl unpin %" PRIu64
			    ")",
			    model_class_name(m->model_class), m->name,
			    model_class_name(r->model->model_class),
			    size_format(model_resident(m), a, sizeof(a)), m->name, m->id);
			return -EDEADLK;
		}
		if (conflicting(r, m) && m->owner == r->requester &&
		    model_state(m) == MODEL_IN_USE) {
			snprintf(
			    why, why_len,
			    "%s '%s' (%s) is in use by this client and its class excludes %s on "
			    "this device; suggestion: release model '%s' first",
			    model_class_name(m->model_class), m->name,
			    size_format(model_resident(m), a, sizeof(a)),
			    model_class_name(r->model->model_class), m->name);
			return -EDEADLK;
		}
		if (m->pinned) {
			pinned += model_resident(m);
			top_pinned = larger(top_pinned, m);
		} else if (m->owner == r->requester && model_state(m) == MODEL_IN_USE) {
			own_in_use += model_resident(m);
			top_own = larger(top_own, m);
		}
	}
	if (r->bytes > budget) {
		snprintf(why, why_len,
			 "%s is more than the whole %s budget: it can never fit; suggestion: ask "
			 "for at most %s",
			 size_format(r->bytes, a, sizeof(a)), size_format(budget, b, sizeof(b)), b);
		return -E2BIG;
	}
	if (pinned > budget - r->bytes) {
		int len =
		    snprintf(why, why_len,
			     "pinned models hold %s of the %s budget: %s can never fit beside "
			     "them; suggestion: ",
			     size_format(pinned, a, sizeof(a)), size_format(budget, b, sizeof(b)),
			     size_format(r->bytes, c, sizeof(c)));

		if (len > 0 && (size_t)len < why_len)
			snprintf(why + len, why_len - (size_t)len,
				 "%s%s%sunpin model '%s' (rocmmemctl unpin %" PRIu64 ")",
				 pinned < budget ? "ask for at most " : "",
				 pinned < budget ? size_format(budget - pinned, d, sizeof(d)) : "",
				 pinned < budget ? ", or " : "", top_pinned->name, top_pinned->id);
		return -E2BIG;
	}
	if (own_in_use > budget - pinned - r->bytes) {
		snprintf(why, why_len,
			 "this client's models in use hold %s of the %s budget (pinned models %s): "
			 "%s fits only if it releases some first; suggestion: release model '%s' "
			 "(%s) first",
			 size_format(own_in_use, a, sizeof(a)), size_format(budget, b, sizeof(b)),
			 size_format(pinned, c, sizeof(c)), size_format(r->bytes, d, sizeof(d)),
			 top_own->name, size_format(model_resident(top_own), e, sizeof(e)));
		return -EDEADLK;
	}
	return 0;
}

bool placement_may_bypass(const struct placement_bypass *b, uint64_t bytes)
{
	/* Short of bytes without the waiting holders: they release first whatever happens, and
	 * what this request takes comes back with their release (idle models are evictable). */
	if (b->coming < b->head_bytes)
		return true;
	/* Bytes enough, but a rival in use by a waiting holder: only from the surplus. */
	return b->rival_waits && b->coming - b->head_bytes >= bytes;
}
