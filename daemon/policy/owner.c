/* SPDX-License-Identifier: MIT */
/*
 * owner.c: what only a lease's or model's owner (or an administrator) may do, and when: release,
 * unregister, ack an eviction, evict or pin on request; trims.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>

#include "internal.h"

const struct model *policy_owned(const struct state *s, const struct holder *h, uint64_t model_id,
				 struct policy_decision *d)
{
	const struct model *m = state_model_find(s, model_id);
	char who[128];

	if (!m) {
		policy_refuse(d, REFUSE_PLAIN, -ENOENT, "no model %" PRIu64, model_id);
		return NULL;
	}
	if (m->owner != h) {
		policy_refuse(d, REFUSE_ACCESS, -EPERM, "model %" PRIu64 " '%s' belongs to %s",
			      model_id, m->name, holder_label(m->owner, who, sizeof(who)));
		return NULL;
	}
	return m;
}

void policy_release(const struct state *s, const struct holder *h, uint64_t lease_id,
		    struct policy_decision *d)
{
	const struct lease *l = lease_table_find(&s->leases, lease_id);
	char owner[128];

	policy_decision_init(d);
	if (!l) {
		policy_refuse(d, REFUSE_PLAIN, -ENOENT, "no lease %" PRIu64, lease_id);
		return;
	}
	if (l->owner != h)
		policy_refuse(d, REFUSE_ACCESS, -EPERM,
			      "lease %" PRIu64 " belongs to %s: only its owner may release it",
			      lease_id, holder_label(l->owner, owner, sizeof(owner)));
}

void policy_model_op(const struct state *s, const struct holder *h, uint64_t model_id,
		     enum policy_model_op op, struct policy_decision *d)
{
	const struct model *m;

	policy_decision_init(d);
	m = policy_owned(s, h, model_id, d);
	if (!m)
		return;
	d->model = m->id;
	if (op == OP_RELEASE && m->use_count == 0)
		policy_refuse(d, REFUSE_PLAIN, -EINVAL, "model %" PRIu64 " '%s' is not in use",
			      m->id, m->name);
}

/*
 * stale_ack refuses an ack that does not name the eviction under way: a late ack must never
 * end a later eviction. Returns true when it refused.
 */
static bool stale_ack(const struct model *m, bool has_generation, uint64_t generation,
		      struct policy_decision *d)
{
	if (!has_generation) {
		/* An older client: it acks whatever eviction is under way, as it always did. */
		if (m->evicting)
			return false;
		policy_refuse(d, REFUSE_ACK, -EINVAL,
			      "model %" PRIu64 " '%s' was not asked to unload%s (an ack without a "
			      "generation)",
			      m->id, m->name,
			      m->evictions ? " (or its eviction is already over)" : "");
	} else if (generation == 0 || generation > m->generation) {
		policy_refuse(d, REFUSE_ACK, -EINVAL,
			      "model %" PRIu64 " '%s' has no generation %" PRIu64
			      " (its residency is generation %" PRIu64 ")",
			      m->id, m->name, generation, m->generation);
	} else if (generation < m->generation) {
		policy_refuse(d, REFUSE_ACK, -ESTALE,
			      "the eviction of model %" PRIu64 " '%s' generation %" PRIu64
			      " is over (acked, or revoked at its deadline); the model is in "
			      "generation %" PRIu64 " now",
			      m->id, m->name, generation, m->generation);
	} else if (!m->evicting) {
		policy_refuse(d, REFUSE_ACK, -EINVAL,
			      "model %" PRIu64 " '%s' was not asked to unload (generation %" PRIu64
			      ")",
			      m->id, m->name, m->generation);
	} else {
		return false;
	}
	return true;
}

void policy_evict_ack(const struct state *s, const struct holder *h, uint64_t model_id,
		      bool has_generation, uint64_t generation, struct policy_decision *d)
{
	const struct model *m;

	policy_decision_init(d);
	m = policy_owned(s, h, model_id, d);
	if (!m || stale_ack(m, has_generation, generation, d))
		return;
	d->model = m->id;
	if (m->use_count > 0)
		policy_refuse(d, REFUSE_PLAIN, -EBUSY,
			      "model %" PRIu64 " '%s' is in use: release it before acking", m->id,
			      m->name);
}

/* administered finds a model h may evict or pin (its owner, root, the admin group). */
static const struct model *administered(const struct state *s, const struct policy_config *cfg,
					const struct holder *h, uint64_t model_id,
					struct policy_decision *d)
{
	const struct model *m = state_model_find(s, model_id);
	const char *group;
	char who[128];

	if (!m) {
		policy_refuse(d, REFUSE_PLAIN, -ENOENT, "no model %" PRIu64, model_id);
		return NULL;
	}
	if (h == m->owner || access_is_admin(&cfg->access, &h->who))
		return m;
	group = cfg->access.has_admin_group ? cfg->access.admin_group_name : "";
	policy_refuse(d, REFUSE_ACCESS, -EPERM,
		      "model %" PRIu64 " '%s' belongs to %s: only its owner%s%s%s may evict "
		      "or pin it",
		      m->id, m->name, holder_label(m->owner, who, sizeof(who)),
		      group[0] ? ", root or a member of group '" : " or root", group,
		      group[0] ? "' (admin_group)" : "");
	return NULL;
}

void policy_admin(const struct state *s, const struct policy_config *cfg, const struct holder *h,
		  uint64_t model_id, bool evict, uint64_t now_ms, struct policy_decision *d)
{
	const struct model *m;

	policy_decision_init(d);
	m = administered(s, cfg, h, model_id, d);
	if (!m)
		return;
	d->model = m->id;
	d->device = m->device;
	if (!evict)
		return;
	if (m->evict_requester) {
		policy_refuse(d, REFUSE_PLAIN, -EBUSY,
			      "model %" PRIu64 " '%s' is already being evicted on request", m->id,
			      m->name);
		return;
	}
	switch (model_state(m)) {
	case MODEL_EVICTED:
		/* Nothing resident: answered at once, as an eviction that freed nothing. */
		d->verdict = POLICY_DONE;
		break;
	case MODEL_IN_USE:
		policy_refuse(d, REFUSE_PLAIN, -EBUSY,
			      "model %" PRIu64 " '%s' is in use: it can be evicted once released",
			      m->id, m->name);
		break;
	case MODEL_EVICTING:
		break; /* answered when the eviction under way is over */
	case MODEL_IDLE:
		d->verdict = POLICY_EVICT;
		d->nvictims = 1;
		d->victims[0] = m->id;
		d->bytes = model_resident(m);
		d->victim_due_ms[0] = now_ms + policy_evict_deadline(cfg, m);
		d->due_ms = d->victim_due_ms[0];
		break;
	}
}

void policy_admin_force(const struct state *s, const struct policy_config *cfg,
			const struct holder *h, uint64_t model_id, uint64_t now_ms,
			struct policy_decision *d)
{
	const struct model *m;
	const char *group = cfg->access.has_admin_group ? cfg->access.admin_group_name : "";

	policy_decision_init(d);
	/* Taking memory in use from a process is an operator's act, never an owner's: an owner
	 * releases its own models. */
	if (!access_is_admin(&cfg->access, &h->who)) {
		policy_refuse(d, REFUSE_ACCESS, -EPERM,
			      "a forced eviction takes root%s%s%s: uid %u is not an administrator",
			      group[0] ? " or a member of group '" : "", group,
			      group[0] ? "' (admin_group)" : "", (unsigned)h->who.uid);
		return;
	}
	m = state_model_find(s, model_id);
	if (!m || m->use_count == 0 || m->evicting || m->evict_requester) {
		/* Not in use (or an eviction under way): the plain eviction's rules. */
		policy_admin(s, cfg, h, model_id, true, now_ms, d);
		return;
	}
	policy_ask_release(cfg, m, now_ms, d);
	snprintf(d->reason, sizeof(d->reason), "an administrator forced its eviction");
}

void policy_trim(const struct state *s, bool all_devices, unsigned device,
		 struct policy_decision *d)
{
	policy_decision_init(d);
	/*
	 * One trim per device at a time: the replies come later, so backpressure would not stop
	 * a client that pipelines trims from queueing runtime calls without bound.
	 */
	if (!all_devices && s->devices[device].trimming) {
		policy_refuse(d, REFUSE_PLAIN, -EBUSY, "a trim of device %u is already running",
			      device);
		return;
	}
	d->verdict = POLICY_TRIM;
	d->all = all_devices;
	d->device = device;
}

void policy_auto_trim(const struct state *s, const struct policy_config *cfg, unsigned device,
		      bool can_trim, struct policy_decision *d)
{
	const struct device *dev = &s->devices[device];
	bool tight = !queue_empty(&dev->queue) ||
		     (dev->has_meminfo && dev->runtime_free < dev->runtime_total / 10);

	policy_decision_init(d);
	if (!can_trim || dev->trimming || dev->lost || !tight || cfg->stopping)
		return;
	d->verdict = POLICY_TRIM;
	d->device = device;
}
