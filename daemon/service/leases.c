/* SPDX-License-Identifier: MIT */
/* leases.c: memory requests (leases, and models' acquires and resizes), releases and trims. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>

#include "arena.h"
#include "base/log.h"
#include "measure.h"
#include "memory.h"
#include "pool.h"
#include "pump.h"
#include "progress_tell.h"
#include "reply.h"
#include "service.h"
#include "size.h"
#include "trim.h"

/* queue puts request r, as the policy checked it (d), in its device's queue. */
static void queue(struct svc *svc, struct holder *h, const struct policy_request *r,
		  const struct policy_decision *d)
{
	struct model *m = d->model ? state_model_find(&svc->state, d->model) : NULL;
	struct waiter t = {.holder = h,
			   .model = m,
			   .request_id = r->request_id,
			   .device = d->device,
			   .size = d->bytes,
			   .requested = d->requested,
			   .target = d->target,
			   .timeout_ms = r->timeout_ms};
	char s1[SIZE_FORMAT_MAX];
	struct waiter *w;

	t.kind = r->kind == POLICY_LEASE	   ? WAIT_LEASE
		 : r->kind == POLICY_MODEL_ACQUIRE ? WAIT_MODEL_ACQUIRE
						   : WAIT_MODEL_RESIZE;
	snprintf(t.tag, sizeof(t.tag), "%s",
		 r->kind == POLICY_LEASE ? (r->tag ? r->tag : "") : (m ? m->name : ""));
	if (state_waiter_add(&svc->state, &t, svc_now(svc), d->due_ms, &w) < 0) {
		svc_reply_error(svc, h->id, r->request_id, -ENOMEM, "the daemon is out of memory");
		return;
	}
	svc_due_changed(svc);
	/* Memory is short there: what clients keep warm in their arenas goes back first. */
	svc_arenas_cool_device(svc, w->device);
	if (r->progress && svc_progress_track(svc, w) < 0)
		log_warn("out of memory: a waiting request is not told its progress");
	log_debug("queued %s on device %u for connection %" PRIu64 " (%u waiting)",
		  size_format(w->size, s1, sizeof(s1)), w->device, h->id,
		  svc->state.devices[w->device].queue.count);
	/* If it is first in line, owners of idle models may have to make room. */
	svc->pump(svc);
}

void svc_request(struct svc *svc, const struct policy_request *r)
{
	struct holder *h = state_holder_find(&svc->state, r->holder);
	struct policy_decision d;

	if (!h)
		return;
	svc_truth_refresh(svc);
	policy_admit(&svc->state, &svc->cfg, r, svc_now(svc), &d);
	switch (d.verdict) {
	case POLICY_REFUSE:
		svc_refuse(svc, h->id, r->request_id, &d, 0);
		break;
	case POLICY_GRANT:
		svc_apply_grant(svc, &d, h, r->request_id, NULL, r->tag, d.target, r->own_memfd);
		/* Smaller now: what it gave back may be what a waiter needs. */
		if (d.grant == GRANT_MODEL_SHRINK)
			svc->pump(svc);
		break;
	case POLICY_QUEUE:
		queue(svc, h, r, &d);
		break;
	default:
		break;
	}
}

void svc_lease_release(struct svc *svc, uint64_t holder, uint64_t request_id, uint64_t lease_id)
{
	struct holder *h = state_holder_find(&svc->state, holder);
	struct policy_decision d;
	struct lease *l;

	if (!h)
		return;
	policy_release(&svc->state, h, lease_id, &d);
	if (d.verdict == POLICY_REFUSE) {
		svc_refuse(svc, holder, request_id, &d, 0);
		return;
	}
	l = lease_table_find(&svc->state.leases, lease_id);
	svc_lease_released(svc, l, LOG_LEVEL_DEBUG, "released");
	/* Its client's own memory, kept for its next lease of that size (service/pool.c),
	 * which answers once it is ready for that. */
	if (!svc_pool_park(svc, l, request_id)) {
		svc_lease_give_back(svc, l);
		svc_reply_ok(svc, holder, request_id);
	}
	svc->pump(svc);
}

void svc_trim(struct svc *svc, uint64_t holder, uint64_t request_id, bool all, unsigned device)
{
	struct policy_decision d;

	if (!state_holder_find(&svc->state, holder))
		return;
	policy_trim(&svc->state, all, device, &d);
	if (d.verdict == POLICY_REFUSE)
		svc_refuse(svc, holder, request_id, &d, 0);
	else
		svc_trim_start(svc, holder, request_id, all, device);
}
