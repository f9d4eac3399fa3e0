/* SPDX-License-Identifier: MIT */
/* placement.h: which idle models to evict so that a waiting request fits, and when it never can. */
#ifndef ROCMMEMD_PLACEMENT_H
#define ROCMMEMD_PLACEMENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model.h"

struct client;

/* The most models one plan evicts at once. */
#define PLACEMENT_MAX_VICTIMS 64u

/* A request waiting for memory on one device. */
struct placement_request {
	uint64_t bytes;		 /* what it needs beyond what it holds */
	uint64_t free_bytes;	 /* free within the budget now */
	uint64_t evicting_bytes; /* resident in models whose eviction is under way */
	const struct class_exclusion *exclusive; /* the device's; NULL: none */
	const struct model *model;		 /* the model it is for, or NULL (a plain lease) */
	const struct client *requester;
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

#endif
