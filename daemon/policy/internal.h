/* SPDX-License-Identifier: MIT */
/* internal.h: what the policy's files share among themselves (not part of policy.h). */
#ifndef ROCMMEMD_POLICY_INTERNAL_H
#define ROCMMEMD_POLICY_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "policy.h"

/* policy_device_models lists a device's models for the placement rules (caller frees). */
struct model **policy_device_models(const struct device *d, size_t *n);

/* policy_request_of describes waiter w needing need bytes on d for the placement rules. */
void policy_request_of(const struct device *d, const struct waiter *w, uint64_t need,
		       struct placement_request *r);

/*
 * policy_blocked says whether a waiter that fits the budget must still wait: its model is
 * being evicted, or a model of an exclusive class is resident.
 */
bool policy_blocked(const struct device *d, const struct waiter *w);

/* policy_fits says whether w could be granted now: the budget and residency agree. */
bool policy_fits(const struct device *d, const struct waiter *w);

/*
 * policy_impossible says why a request of need bytes could never be granted as things stand
 * (-E2BIG, -EDEADLK, with the reason in why), or returns 0.
 */
int policy_impossible(const struct device *d, const struct waiter *w, uint64_t need, char *why,
		      size_t why_len);

/*
 * policy_bypass looks behind head, which does not fit and has no eviction to ask for: true
 * with a GRANT (bypass) in out for the request the hold-and-wait rule lets through first.
 */
bool policy_bypass(const struct state *s, const struct device *d, const struct waiter *head,
		   uint64_t now_ms, struct policy_scratch *x, struct policy_decision *out);

/*
 * policy_backfill looks behind head, which cannot be granted now and has no eviction left to
 * ask for: true with a GRANT (backfill) in out for the first later request that fits now and
 * whose grant does not delay head (docs/residency.md, "Backfilling").
 */
bool policy_backfill(const struct policy_config *cfg, const struct device *d,
		     const struct waiter *head, uint64_t now_ms, struct policy_decision *out);

/* policy_grant_of fills out with the GRANT of waiting request w at now_ms. */
void policy_grant_of(const struct waiter *w, uint64_t now_ms, struct policy_decision *out);

/* policy_ask_release makes d an EVICT (force) of m in use: release and unload by its deadline. */
void policy_ask_release(const struct policy_config *cfg, const struct model *m, uint64_t now_ms,
			struct policy_decision *d);

/* policy_hold_over decides what m's passed maximum hold calls for: EVICT (force), or NONE. */
void policy_hold_over(const struct policy_config *cfg, const struct model *m, uint64_t now_ms,
		      struct policy_decision *d);

/* policy_owned finds h's model, or fills a refusal (-ENOENT, -EPERM) and returns NULL. */
const struct model *policy_owned(const struct state *s, const struct holder *h, uint64_t model_id,
				 struct policy_decision *d);

#endif
