/* SPDX-License-Identifier: MIT */
/* explain.h: why a request is not granted now, in the words the client and the log get. */
#ifndef ROCMMEMD_EXPLAIN_H
#define ROCMMEMD_EXPLAIN_H

#include <stddef.h>
#include <stdint.h>

struct device;
struct policy_config;
struct state;
struct waiter;

/*
 * The longest explanation written. A refusal may put "model 'NAME': " and "timed out after N
 * ms: " before it, and both the reply and the kept refusal hold 1 KiB (DENIAL_REASON_MAX), so
 * an explanation this long is never cut.
 */
#define EXPLAIN_MAX 880u

/*
 * explain_refusal explains why w (a waiting request, or the template of one refused at once),
 * which needs need bytes now (policy_need), is not granted on d at now_ms: what was asked, what is
 * free and grantable, what waits ahead and what is being freed, who holds the memory, which
 * models were evictable and why they were not evicted, and one suggestion. The most important
 * numbers come first and lesser parts are left out rather than cut when room runs short. One
 * line, at most EXPLAIN_MAX bytes (or len - 1).
 */
void explain_refusal(const struct state *s, const struct policy_config *cfg, const struct device *d,
		     const struct waiter *w, uint64_t need, uint64_t now_ms, char *buf, size_t len);

/*
 * explain_too_big explains a request of requested bytes that is larger than d's whole budget
 * (rounded to granules, or beyond what 64 bits can round to), with a suggestion.
 */
void explain_too_big(const struct device *d, uint64_t requested, char *buf, size_t len);

#endif
