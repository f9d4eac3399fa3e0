/* SPDX-License-Identifier: MIT */
/*
 * schedule.c: what the queues call for: grants in arrival order while the head fits, evictions
 * for a head that does not, then a later request backfilled or let through (backfill.c,
 * bypass.c), refusals on lost devices.
 */
#include "policy.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/*
 * plan_for asks owners of idle models to unload so that head fits: EVICT with the victims
 * not yet asked, or false when there are none to ask.
 */
static bool plan_for(const struct device *d, const struct policy_config *cfg,
		     const struct waiter *head, uint64_t now_ms, struct policy_decision *out)
{
	struct placement_request r;
	struct placement_plan plan;
	struct model **v;
	size_t n;

	if (d->nmodels == 0)
		return false;
	policy_request_of(d, head, policy_need(head), &r);
	v = policy_device_models(d, &n);
	if (!v)
		return false;
	placement_plan(&r, v, n, &plan);
	free(v);
	if (plan.nvictims == 0)
		return false;
	out->verdict = POLICY_EVICT;
	out->device = d->index;
	out->bytes = r.bytes;
	out->for_holder = head->holder->id;
	out->holder = head->holder->id;
	out->waiter = head->seq;
	out->nvictims = plan.nvictims;
	for (unsigned i = 0; i < plan.nvictims; i++) {
		/* Each victim has its class's deadline; due_ms is the latest of them. */
		out->victims[i] = plan.victims[i]->id;
		out->victim_due_ms[i] = now_ms + policy_evict_deadline(cfg, plan.victims[i]);
		if (i == 0 || out->victim_due_ms[i] > out->due_ms)
			out->due_ms = out->victim_due_ms[i];
	}
	return true;
}

/* next_on decides for device d: true with d filled when something is to be done there. */
static bool next_on(const struct state *s, const struct policy_config *cfg, const struct device *d,
		    uint64_t now_ms, struct policy_scratch *x, struct policy_decision *out)
{
	const struct waiter *head = queue_head(&d->queue);

	if (!head)
		return false;
	if (d->lost) {
		out->verdict = POLICY_REFUSE;
		out->device = d->index;
		out->waiter = head->seq;
		out->holder = head->holder->id;
		out->refusal.err = -ENODEV;
		snprintf(out->refusal.text, sizeof(out->refusal.text),
			 "device %u (%s) became unusable: %s", d->index, d->name, d->lost_reason);
		return true;
	}
	if (policy_fits(d, head)) {
		policy_grant_of(head, now_ms, out);
		return true;
	}
	if (plan_for(d, cfg, head, now_ms, out))
		return true;
	/* Backfilling first: it never takes what the head will need; the bypass may. */
	if (policy_backfill(cfg, d, head, now_ms, out))
		return true;
	return policy_bypass(s, d, head, now_ms, x, out);
}

void policy_next(const struct state *s, const struct policy_config *cfg, uint64_t now_ms,
		 struct policy_scratch *x, struct policy_decision *d)
{
	policy_decision_init(d);
	/* Everyone is being disconnected: granting now would be wasted work. */
	if (cfg->stopping)
		return;
	for (unsigned i = 0; i < s->ndevices; i++)
		if (next_on(s, cfg, &s->devices[i], now_ms, x, d))
			return;
}
