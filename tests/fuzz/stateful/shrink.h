/* SPDX-License-Identifier: MIT */
/* shrink.h: minimising a failure to a short sequence that replays it on a fresh daemon. */
#ifndef ROCMMEM_TEST_STATEFUL_SHRINK_H
#define ROCMMEM_TEST_STATEFUL_SHRINK_H

#include "stateful.h"

struct shrink_ctx {
	struct target *t;
	struct run *run;
	const struct gen_opts *gen;
	uint64_t seed, index; /* the run's seed, and the sequence that failed */
	enum fail_class cls;  /* the failure to keep */
	long deadline_ms;     /* give up shrinking then (target_now_ms) */
	unsigned tries;	      /* fresh daemons started */
};

/*
 * shrink_run finds the fewest of the run's sequences, ending with the failing one, that fail
 * alike on a fresh daemon, then removes every operation the failure does not need. Returns
 * false when no window reproduces it (it depended on timing); out is then the last tried.
 */
bool shrink_run(struct shrink_ctx *x, struct seq *out);

#endif
