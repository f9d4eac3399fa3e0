/* SPDX-License-Identifier: MIT */
/* models.c: an owner's requests on its models, and an administrator's evict and pin. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>

#include "base/log.h"
#include "pump.h"
#include "reply.h"
#include "residency.h"
#include "service.h"

void svc_model_register(struct svc *svc, uint64_t holder, uint64_t request_id,
			const struct svc_model_desc *desc)
{
	struct holder *h = state_holder_find(&svc->state, holder);
	struct svc_reply r = {.kind = SVC_MODEL};

	if (!h)
		return;
	r.model = svc_model_create(svc, h, request_id, desc, 0);
	if (r.model)
		svc_reply(svc, holder, request_id, &r);
}

void svc_model_release(struct svc *svc, uint64_t holder, uint64_t request_id, uint64_t model_id)
{
	struct holder *h = state_holder_find(&svc->state, holder);
	struct policy_decision d;
	struct model *m;

	if (!h)
		return;
	policy_model_op(&svc->state, h, model_id, OP_RELEASE, &d);
	if (d.verdict == POLICY_REFUSE) {
		svc_refuse(svc, holder, request_id, &d, 0);
		return;
	}
	m = state_model_find(&svc->state, model_id);
	if (--m->use_count == 0)
		svc_hold_end(svc, m);
	m->last_used_ms = svc_now(svc);
	svc_reply_ok(svc, holder, request_id);
	/* Idle now: it may be what a waiting request needs evicted. */
	if (m->use_count == 0)
		svc->pump(svc);
}

void svc_model_unregister(struct svc *svc, uint64_t holder, uint64_t request_id, uint64_t model_id)
{
	struct holder *h = state_holder_find(&svc->state, holder);
	struct policy_decision d;
	struct waiter *w, *next;
	struct model *m;

	if (!h)
		return;
	policy_model_op(&svc->state, h, model_id, OP_UNREGISTER, &d);
	if (d.verdict == POLICY_REFUSE) {
		svc_refuse(svc, holder, request_id, &d, 0);
		return;
	}
	m = state_model_find(&svc->state, model_id);
	/* This holder's own requests on the model's behalf end with it. */
	for (w = TAILQ_FIRST(&h->waiters); w; w = next) {
		next = TAILQ_NEXT(w, holder_link);
		if (w->model != m)
			continue;
		svc_reply_error(svc, holder, w->request_id, -ECANCELED, "%s",
				"the model was unregistered");
		state_waiter_drop(&svc->state, w);
	}
	svc_due_changed(svc);
	svc_model_destroy(svc, m);
	svc_reply_ok(svc, holder, request_id);
	svc->pump(svc);
}

void svc_evict_ack(struct svc *svc, uint64_t holder, uint64_t request_id, uint64_t model_id,
		   bool has_generation, uint64_t generation)
{
	struct holder *h = state_holder_find(&svc->state, holder);
	struct policy_decision d;

	if (!h)
		return;
	policy_evict_ack(&svc->state, h, model_id, has_generation, generation, &d);
	if (d.verdict == POLICY_REFUSE) {
		svc_refuse(svc, holder, request_id, &d, 0);
		return;
	}
	svc_unload(svc, state_model_find(&svc->state, model_id), NULL);
	svc_reply_ok(svc, holder, request_id);
	svc->pump(svc);
}

void svc_admin_evict(struct svc *svc, uint64_t holder, uint64_t request_id, uint64_t model_id,
		     bool force)
{
	struct holder *h = state_holder_find(&svc->state, holder);
	struct policy_decision d;
	char who[128], owner[128];
	struct model *m;

	if (!h)
		return;
	if (force)
		policy_admin_force(&svc->state, &svc->cfg, h, model_id, svc_now(svc), &d);
	else
		policy_admin(&svc->state, &svc->cfg, h, model_id, true, svc_now(svc), &d);
	if (d.verdict == POLICY_REFUSE) {
		svc_refuse(svc, holder, request_id, &d, 0);
		return;
	}
	m = state_model_find(&svc->state, model_id);
	/* Who took memory in use from whom: the operator's uid, pid and name, in the log. */
	if (force)
		log_warn("%s (uid %u) forces the eviction of model %" PRIu64 " '%s' (%s) of %s",
			 holder_label(h, who, sizeof(who)), (unsigned)h->who.uid, m->id, m->name,
			 m->use_count ? "in use" : "not in use",
			 holder_label(m->owner, owner, sizeof(owner)));
	if (d.verdict == POLICY_EVICT)
		svc_apply_evict(svc, &d);
	/* Answered when the eviction is over (at once when there is nothing to evict). */
	m->evict_requester = holder;
	m->evict_request_id = request_id;
	if (d.verdict == POLICY_DONE)
		svc_answer_admin(svc, m, false, 0);
	/* A model in use being evicted now counts as coming for the queues' heads. */
	if (d.verdict == POLICY_EVICT)
		svc->pump(svc);
}

void svc_admin_pin(struct svc *svc, uint64_t holder, uint64_t request_id, uint64_t model_id,
		   bool pinned)
{
	struct holder *h = state_holder_find(&svc->state, holder);
	struct policy_decision d;
	struct model *m;
	char who[128];

	if (!h)
		return;
	policy_admin(&svc->state, &svc->cfg, h, model_id, false, svc_now(svc), &d);
	if (d.verdict == POLICY_REFUSE) {
		svc_refuse(svc, holder, request_id, &d, 0);
		return;
	}
	m = state_model_find(&svc->state, model_id);
	m->pinned = pinned;
	log_info("%s %s model %" PRIu64 " '%s'", holder_label(h, who, sizeof(who)),
		 m->pinned ? "pinned" : "unpinned", m->id, m->name);
	svc_reply_ok(svc, holder, request_id);
	svc->pump(svc);
}
