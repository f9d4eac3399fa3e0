/* SPDX-License-Identifier: MIT */
/*
 * residency.c: what the residency decisions do to models: a reservation made, an owner asked to
 * unload, a model's memory taken back (acked or revoked), a model forgotten.
 */
#include "residency.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "adopt.h"
#include "base/log.h"
#include "memory.h"
#include "reply.h"
#include "size.h"
#include "trim.h"

void svc_model_grant(struct svc *svc, struct model *m, enum policy_grant grant, uint64_t bytes,
		     uint64_t target, uint64_t holder, uint64_t request_id, uint64_t waited_ms)
{
	struct device *d = &svc->state.devices[m->device];
	char sz[SIZE_FORMAT_MAX], who[128];

	if (grant == GRANT_MODEL_SHRINK) {
		device_unreserve(d, m->reservation - bytes);
		m->reservation = bytes;
		adopt_model_changed(svc, m);
	} else if (grant != GRANT_MODEL_IN_USE) {
		device_reserve(d, bytes);
		m->reservation += bytes;
		/* A resize sets the reservation: one that grew meanwhile shrinks back to it. */
		if (grant == GRANT_MODEL_GROW && m->reservation > target) {
			device_unreserve(d, m->reservation - target);
			m->reservation = target;
		}
		adopt_model_changed(svc, m);
	}
	if (grant == GRANT_MODEL_IN_USE || grant == GRANT_MODEL_LOAD) {
		if (m->use_count++ == 0)
			svc_hold_start(svc, m);
		m->last_used_ms = svc_now(svc);
	}
	if (grant == GRANT_MODEL_LOAD) {
		struct bus_event e = {.type = BUS_MODEL_LOADED,
				      .holder = m->owner,
				      .has_device = true,
				      .device = m->device,
				      .bytes = m->reservation,
				      .model_id = m->id,
				      .model_name = m->name,
				      .waited_ms = waited_ms};

		bus_emitf(&svc->bus, &e, LOG_LEVEL_DEBUG,
			  "model %" PRIu64 " '%s' of %s is resident (%s reserved) after %" PRIu64
			  " ms",
			  m->id, m->name, holder_label(m->owner, who, sizeof(who)),
			  size_format(m->reservation, sz, sizeof(sz)), waited_ms);
	}
	svc_reply_residency(svc, holder, request_id, m);
}

void svc_hold_start(struct svc *svc, struct model *m)
{
	uint64_t limit = policy_max_hold(&svc->cfg, m), now = svc_now(svc);

	m->in_use_since_ms = now;
	if (limit == 0)
		return;
	/* Without the deadline the model is only held as long as any other: logged, not fatal. */
	if (state_deadline_set(&svc->state, DUE_HOLD, m->id, now + limit, &m->hold_slot) < 0)
		log_error("Could not arm the maximum hold of model %" PRIu64 ": out of memory",
			  m->id);
	svc_due_changed(svc);
}

void svc_hold_end(struct svc *svc, struct model *m)
{
	if (!m->hold_slot)
		return;
	state_deadline_clear(&svc->state, &m->hold_slot);
	svc_due_changed(svc);
}

bool svc_evict(struct svc *svc, struct model *m, uint64_t bytes_needed, uint64_t for_holder,
	       uint64_t due_ms, const char *released)
{
	struct holder *whom = for_holder ? state_holder_find(&svc->state, for_holder) : NULL;
	struct bus_event e = {.type = BUS_EVICT_REQUESTED,
			      .holder = m->owner,
			      .has_device = true,
			      .device = m->device,
			      .bytes = model_resident(m),
			      .model_id = m->id,
			      .model_name = m->name};
	struct svc_notice n = {.kind = NOTE_EVICT_REQUEST,
			       .model_id = m->id,
			       .bytes_needed = bytes_needed,
			       .deadline_ms = due_ms - svc_now(svc)};
	char sz[SIZE_FORMAT_MAX], owner[128], who[128];

	m->evict_started_ms = svc_now(svc);
	m->evict_due_ms = due_ms;
	if (state_deadline_set(&svc->state, DUE_EVICTION, m->id, due_ms, &m->heap_slot) < 0) {
		/* Without a deadline an owner that never acks would hold the memory for good:
		 * not asked now, planned again on the next change. */
		log_error("Could not ask to unload model %" PRIu64 ": out of memory", m->id);
		return false;
	}
	svc_due_changed(svc);
	m->evicting = true;
	n.generation = m->generation;
	if (released)
		bus_emitf(&svc->bus, &e, LOG_LEVEL_WARN,
			  "asking %s to release and unload model %" PRIu64
			  " '%s' (%s %s) by its deadline in %.3g s: %s",
			  holder_label(m->owner, owner, sizeof(owner)), m->id, m->name,
			  model_class_name(m->model_class),
			  size_format(model_resident(m), sz, sizeof(sz)),
			  (double)(due_ms - m->evict_started_ms) / 1000.0, released);
	else
		bus_emitf(&svc->bus, &e, LOG_LEVEL_INFO,
			  "asking %s to unload model %" PRIu64 " '%s' (%s %s) for %s",
			  holder_label(m->owner, owner, sizeof(owner)), m->id, m->name,
			  model_class_name(m->model_class),
			  size_format(model_resident(m), sz, sizeof(sz)),
			  whom ? holder_label(whom, who, sizeof(who)) : "an administrator");
	svc_notify(svc, m->owner->id, &n);
	return true;
}

void svc_answer_admin(struct svc *svc, struct model *m, bool revoked, uint64_t bytes_freed)
{
	struct svc_reply r = {.kind = SVC_EVICTED, .bytes = bytes_freed, .revoked = revoked};
	uint64_t admin = m->evict_requester;

	if (!admin)
		return;
	m->evict_requester = 0;
	if (state_holder_find(&svc->state, admin))
		svc_reply(svc, admin, m->evict_request_id, &r);
}

/* tell_revoked tells m's owner about its leases that go with it, and (revoked) about m. */
static void tell_revoked(struct svc *svc, struct model *m, const char *revoked)
{
	struct holder *h = m->owner;
	struct svc_notice n = {.model_id = m->id, .generation = m->generation};
	const struct lease *l;

	/* Leases still tagged with it: their memory goes too, and the owner is told. */
	TAILQ_FOREACH (l, &m->leases, model_link) {
		n.kind = NOTE_LEASE_REVOKED;
		n.lease_id = l->id;
		n.reason = revoked ? revoked : "its model was evicted";
		svc_notify(svc, h->id, &n);
	}
	if (revoked) {
		n.kind = NOTE_MODEL_REVOKED;
		n.lease_id = 0;
		n.reason = revoked;
		svc_notify(svc, h->id, &n);
	}
}

/*
 * svc_unload: everything said about the residency that ends goes out before its generation
 * moves on and before its leases are freed: freeing host memory grants waiting requests at
 * once, the model's own acquire among them, whose answer names the next generation.
 */
void svc_unload(struct svc *svc, struct model *m, const char *revoked)
{
	struct device *d = &svc->state.devices[m->device];
	struct holder *h = m->owner;
	char sz[SIZE_FORMAT_MAX], who[128];
	uint64_t bytes = model_resident(m);
	struct bus_event e = {.holder = h,
			      .has_device = true,
			      .device = m->device,
			      .bytes = bytes,
			      .model_id = m->id,
			      .model_name = m->name};
	struct lease *l, *next, *last;

	if (m->evicting) {
		state_deadline_clear(&svc->state, &m->heap_slot);
		svc_due_changed(svc);
		m->evicting = false;
		m->evictions++;
	}
	/* Revoked while still in use (maximum hold, a forced eviction): its uses are over. */
	m->use_count = 0;
	svc_hold_end(svc, m);
	tell_revoked(svc, m, revoked);
	e.type = revoked ? BUS_REVOKED : BUS_EVICT_ACKED;
	if (revoked)
		bus_emitf(&svc->bus, &e, LOG_LEVEL_WARN,
			  "revoked model %" PRIu64 " '%s' (%s) of %s: %s", m->id, m->name,
			  size_format(bytes, sz, sizeof(sz)), holder_label(h, who, sizeof(who)),
			  revoked);
	else
		bus_emitf(&svc->bus, &e, LOG_LEVEL_INFO,
			  "model %" PRIu64 " '%s' of %s unloaded (%s back)", m->id, m->name,
			  holder_label(h, who, sizeof(who)), size_format(bytes, sz, sizeof(sz)));
	/* This residency is over: whatever is granted from now on belongs to the next. */
	m->generation++;
	if (m->reservation) {
		device_unreserve(d, m->reservation);
		m->reservation = 0;
	}
	adopt_model_changed(svc, m);
	/* Freeing may grant a lease tagged with the model's next residency: it is linked after
	 * `last`, and stays. */
	last = TAILQ_LAST(&m->leases, lease_list);
	for (l = TAILQ_FIRST(&m->leases); l; l = next) {
		next = l == last ? NULL : TAILQ_NEXT(l, model_link);
		svc_lease_destroy(svc, l);
	}
	svc_answer_admin(svc, m, revoked != NULL, bytes);
	svc_auto_trim(svc, d->index);
}

void svc_model_destroy(struct svc *svc, struct model *m)
{
	struct device *d = &svc->state.devices[m->device];

	if (m->heap_slot) {
		state_deadline_clear(&svc->state, &m->heap_slot);
		svc_due_changed(svc);
	}
	svc_hold_end(svc, m);
	m->evicting = false;
	if (m->reservation)
		device_unreserve(d, m->reservation);
	m->reservation = 0;
	adopt_model_changed(svc, m);
	svc_answer_admin(svc, m, false, model_resident(m));
	state_model_remove(&svc->state, m);
}

struct model *svc_model_create(struct svc *svc, struct holder *h, uint64_t request_id,
			       const struct svc_model_desc *desc, uint64_t want_id)
{
	char sz[SIZE_FORMAT_MAX], who[128];
	struct policy_decision d;
	struct model *m;
	int err;

	policy_register(&svc->state, h, desc->device, desc->has_size, desc->size, desc->name, &d);
	if (d.verdict == POLICY_REFUSE) {
		svc_refuse(svc, h->id, request_id, &d, 0);
		return NULL;
	}
	m = calloc(1, sizeof(*m));
	if (!m) {
		svc_reply_error(svc, h->id, request_id, -ENOMEM, "the daemon is out of memory");
		return NULL;
	}
	m->owner = h;
	m->device = desc->device;
	snprintf(m->name, sizeof(m->name), "%s", desc->name);
	m->model_class = desc->model_class;
	m->size = d.bytes;
	m->priority = desc->priority;
	m->pinned = desc->pinned;
	m->last_used_ms = svc_now(svc);
	m->generation = 1;
	err = state_model_add(&svc->state, m, want_id);
	if (err) {
		free(m);
		svc_reply_error(svc, h->id, request_id, err,
				err == -EOVERFLOW ? "the daemon has handed out every model id"
						  : "the daemon is out of memory");
		return NULL;
	}
	log_debug("%s registered model %" PRIu64 " '%s' (%s, %s, priority %d%s) on device %u",
		  holder_label(h, who, sizeof(who)), m->id, m->name,
		  model_class_name(m->model_class), size_format(m->size, sz, sizeof(sz)),
		  (int)m->priority, m->pinned ? ", pinned" : "", m->device);
	adopt_model_registered(svc);
	return m;
}
