/* SPDX-License-Identifier: MIT */
/*
 * hold.c: deadlines by model class: how long an owner has to unload, how long a model may stay
 * in use (maximum hold), and what asking an owner to release a model in use looks like
 * (docs/residency.md, "Evict deadlines by class" and "Maximum hold").
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>

#include "internal.h"

uint64_t policy_evict_deadline(const struct policy_config *cfg, const struct model *m)
{
	uint64_t own =
	    m->model_class < MODEL_CLASSES ? cfg->sched.evict_deadline_ms[m->model_class] : 0;

	return own ? own : cfg->evict_deadline_ms;
}

uint64_t policy_max_hold(const struct policy_config *cfg, const struct model *m)
{
	uint64_t own =
	    m->model_class < MODEL_CLASSES ? cfg->sched.max_hold_class_ms[m->model_class] : 0;

	if (own == POLICY_CLASS_OFF)
		return 0;
	return own ? own : cfg->sched.max_hold_ms;
}

void policy_ask_release(const struct policy_config *cfg, const struct model *m, uint64_t now_ms,
			struct policy_decision *d)
{
	d->verdict = POLICY_EVICT;
	d->force = true;
	d->device = m->device;
	d->holder = m->owner->id;
	d->model = m->id;
	d->nvictims = 1;
	d->victims[0] = m->id;
	d->bytes = model_resident(m);
	d->victim_due_ms[0] = now_ms + policy_evict_deadline(cfg, m);
	d->due_ms = d->victim_due_ms[0];
}

void policy_hold_over(const struct policy_config *cfg, const struct model *m, uint64_t now_ms,
		      struct policy_decision *d)
{
	uint64_t limit = policy_max_hold(cfg, m);

	/* Released meanwhile, asked already, or the limit lifted by a reload: nothing. */
	if (m->use_count == 0 || m->evicting || limit == 0)
		return;
	policy_ask_release(cfg, m, now_ms, d);
	snprintf(d->reason, sizeof(d->reason),
		 "in use for %.3g s, longer than its maximum hold of %.3g s (max_hold)",
		 (double)(now_ms - m->in_use_since_ms) / 1000.0, (double)limit / 1000.0);
}
