/* SPDX-License-Identifier: MIT */
/*
 * facts.c: what every rule reads: what a waiting request needs, whether it fits, what is being
 * evicted, what can never be; and how a decision is made up.
 */
#include "policy.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

void policy_decision_init(struct policy_decision *d)
{
	d->verdict = POLICY_NONE;
	d->device = 0;
	d->waiter = 0;
	d->holder = 0;
	d->grant = GRANT_LEASE;
	d->bytes = 0;
	d->requested = 0;
	d->target = 0;
	d->waited_ms = 0;
	d->bypass = false;
	d->backfill = false;
	d->force = false;
	d->due_ms = UINT64_MAX;
	d->all = false;
	d->refusal.err = 0;
	d->refusal.kind = REFUSE_PLAIN;
	d->refusal.limit = LIMIT_COUNT;
	d->refusal.text[0] = '\0';
	d->refusal.log[0] = '\0';
	d->nvictims = 0;
	d->for_holder = 0;
	d->model = 0;
	d->reason[0] = '\0';
}

uint64_t policy_need(const struct waiter *w)
{
	const struct model *m = w->model;

	if (w->kind == WAIT_LEASE || !m)
		return w->size;
	if (m->evicting)
		return w->target;
	return w->target > m->reservation ? w->target - m->reservation : 0;
}

uint64_t policy_evicting_bytes(const struct device *d)
{
	const struct model *m;
	uint64_t bytes = 0;

	TAILQ_FOREACH (m, &d->models, device_link) {
		if (m->evicting)
			bytes += model_resident(m);
	}
	return bytes;
}

/* list_models puts d's models into v (room for d->nmodels); returns how many. */
static size_t list_models(const struct device *d, struct model **v)
{
	struct model *m;
	size_t n = 0;

	TAILQ_FOREACH (m, &d->models, device_link) {
		if (n < d->nmodels)
			v[n++] = m;
	}
	return n;
}

struct model **policy_device_models(const struct device *d, size_t *n)
{
	struct model **v = calloc(d->nmodels ? d->nmodels : 1, sizeof(*v));

	*n = 0;
	if (!v)
		return NULL;
	*n = list_models(d, v);
	return v;
}

void policy_request_of(const struct device *d, const struct waiter *w, uint64_t need,
		       struct placement_request *r)
{
	memset(r, 0, sizeof(*r));
	r->bytes = need;
	r->free_bytes = device_free(d);
	r->evicting_bytes = policy_evicting_bytes(d);
	r->exclusive = &d->exclusive;
	r->model = w->model;
	r->requester = w->holder;
}

bool policy_blocked(const struct device *d, const struct waiter *w)
{
	struct placement_request r;
	struct model **v;
	size_t n;
	bool blocked;

	if (!w->model)
		return false;
	if (w->model->evicting)
		return true;
	if (!class_exclusion_any(&d->exclusive))
		return false;
	/* A conflict is the model's and the rules' alone: no bytes to count. */
	memset(&r, 0, sizeof(r));
	r.exclusive = &d->exclusive;
	r.model = w->model;
	r.requester = w->holder;
	v = policy_device_models(d, &n);
	blocked = v ? placement_conflicts(&r, v, n) : true;
	free(v);
	return blocked;
}

bool policy_fits(const struct device *d, const struct waiter *w)
{
	return device_fits(d, policy_need(w)) && !policy_blocked(d, w);
}

/* The models policy_impossible lists on its stack: every request asks it, mostly with none. */
#define MODELS_ON_STACK 16u

int policy_impossible(const struct device *d, const struct waiter *w, uint64_t need, char *why,
		      size_t why_len)
{
	struct model *small[MODELS_ON_STACK], **v = small;
	struct placement_request r;
	size_t n;
	int rc;

	policy_request_of(d, w, need, &r);
	if (d->nmodels <= MODELS_ON_STACK)
		n = list_models(d, small);
	else if (!(v = policy_device_models(d, &n)))
		return 0;
	rc = placement_impossible(&r, v, n, d->budget, why, why_len);
	if (v != small)
		free(v);
	return rc;
}

void policy_refuse(struct policy_decision *d, enum policy_refusal_kind kind, int err,
		   const char *fmt, ...)
{
	va_list ap;

	d->verdict = POLICY_REFUSE;
	d->refusal.kind = kind;
	d->refusal.err = err;
	va_start(ap, fmt);
	vsnprintf(d->refusal.text, sizeof(d->refusal.text), fmt, ap);
	va_end(ap);
}

void policy_grant_of(const struct waiter *w, uint64_t now_ms, struct policy_decision *d)
{
	d->verdict = POLICY_GRANT;
	d->device = w->device;
	d->waiter = w->seq;
	d->holder = w->holder->id;
	d->bytes = policy_need(w);
	d->waited_ms = now_ms - w->enqueued_ms;
	d->grant = w->kind == WAIT_LEASE	   ? GRANT_LEASE
		   : w->kind == WAIT_MODEL_ACQUIRE ? GRANT_MODEL_LOAD
						   : GRANT_MODEL_GROW;
}
