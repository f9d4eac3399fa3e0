/* SPDX-License-Identifier: MIT */
/* placement.h: which idle models to evict so that a waiting request fits, and when it never can. */
#ifndef ROCMMEMD_PLACEMENT_H
#define ROCMMEMD_PLACEMENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "state/model.h"

struct holder;

/* The most models one plan evicts at once. */
#define PLACEMENT_MAX_VICTIMS 64u

/* A request waiting for memory on one device. */
struct placement_request {
	uint64_t bytes;		 /* what it needs beyond what it holds */
	uint64_t free_bytes;	 /* free within the budget now */
	uint64_t evicting_bytes; /* resident in models whose eviction is under way */
	const struct class_exclusion *exclusive; /* the device's; NULL: none */
	const struct model *model;		 /* the model it is for, or NULL (a plain lease) */
	const struct holder *requester;
};

struct placement_plan {
	unsigned nvictims;
	struct model *victims[PLACEMENT_MAX_VICTIMS];
	/* The request cannot proceed until a model in use is released (or a lease freed). */
	bool must_wait;
};

/*
 * placement_conflicts says whether a model of a class that excludes the request's model's class
 * is resident (or being evicted) on the device: then the request waits even if it fits.
 */
bool placement_conflicts(const struct placement_request *r, struct model *const *models, size_t n);

/*
 * placement_plan picks victims among the device's models: every idle exclusive-class conflict,
 * then, for the bytes still missing, idle unpinned models by priority (lowest first), then
 * least recently used, then oldest: only as many as needed, and none for bytes when evicting
 * everything evictable would still not be enough (must_wait instead). Never the request's own
 * model, a pinned model, one in use or one already being evicted.
 */
void placement_plan(const struct placement_request *r, struct model *const *models, size_t n,
		    struct placement_plan *out);

/*
 * placement_impossible says why a request could never be satisfied whatever the other clients
 * do: more than the budget minus what pinned models hold (-E2BIG), an exclusive conflict with
 * a pinned model, or memory only this requester's own in-use models could free (-EDEADLK: a
 * single-threaded host would wait forever). Returns 0 when it can be satisfied some day.
 */
int placement_impossible(const struct placement_request *r, struct model *const *models, size_t n,
			 uint64_t budget, char *why, size_t why_len);

/*
 * What decides whether a later request may overtake a head that cannot be granted (the hold
 * and wait rule, docs/residency.md "How the daemon decides"), all on the head's device.
 */
struct placement_bypass {
	uint64_t head_bytes; /* what the head needs */
	/* What the head could have without any client waiting behind it releasing anything:
	 * free, being evicted, idle and unpinned (not its own model), and what clients that wait
	 * for nothing hold and may release. */
	uint64_t coming;
	/* A model of a class that excludes the head's is in use by a client waiting behind it. */
	bool rival_waits;
};

/*
 * placement_may_bypass says whether a later request of bytes, from a client that holds memory
 * in use on the device and fits now, may be granted before the head: when the head cannot be
 * granted without a client behind it releasing (coming < head_bytes, or rival_waits), and the
 * request takes nothing of what the head could otherwise have (with rival_waits alone, coming
 * must still cover the head after the request).
 */
bool placement_may_bypass(const struct placement_bypass *b, uint64_t bytes);

#endif
