/* SPDX-License-Identifier: MIT */
/* residency.c: models across processes: registration, use, and cooperative eviction. */
#include "residency.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service/adopt.h"
#include "arbiter.h"
#include "net/client.h"
#include "service/bus.h"
#include "state/device.h"
#include "base/log.h"
#include "state/model.h"
#include "placement.h"
#include "quota.h"
#include "net/server.h"
#include "size.h"

/* The most models one connection may register. */
#define RESIDENCY_MAX_MODELS QUOTA_MAX_MODELS

struct model *residency_find(const struct arbiter *a, uint64_t model_id)
{
	return state_model_find(&a->state, model_id);
}

/* owned finds a model the client may act on as its owner, replying the refusal otherwise. */
static struct model *owned(struct arbiter *a, struct client *c, uint64_t request_id,
			   uint64_t model_id)
{
	struct model *m = residency_find(a, model_id);
	char who[128];

	if (!m) {
		client_reply_error(c, request_id, -ENOENT, "no model %" PRIu64, model_id);
		return NULL;
	}
	if (m->owner != c->holder) {
		access_refuse(c, request_id, "model %" PRIu64 " '%s' belongs to %s", model_id,
			      m->name, holder_label(m->owner, who, sizeof(who)));
		return NULL;
	}
	return m;
}

uint64_t residency_evicting_bytes(const struct device *d)
{
	const struct model *m;
	uint64_t bytes = 0;

	TAILQ_FOREACH (m, &d->models, device_link) {
		if (m->evicting)
			bytes += model_resident(m);
	}
	return bytes;
}

/* device_models lists a device's models for the placement policy (caller frees). */
static struct model **device_models(const struct device *d, size_t *n)
{
	struct model **v = calloc(d->nmodels ? d->nmodels : 1, sizeof(*v));
	struct model *m;

	*n = 0;
	if (!v)
		return NULL;
	TAILQ_FOREACH (m, &d->models, device_link) {
		if (*n < d->nmodels)
			v[(*n)++] = m;
	}
	return v;
}

static void request_of(const struct arbiter *a, const struct device *d, const struct waiter *w,
		       struct placement_request *r)
{
	(void)a;
	memset(r, 0, sizeof(*r));
	r->bytes = w->size;
	r->free_bytes = device_free(d);
	r->evicting_bytes = residency_evicting_bytes(d);
	r->exclusive = &d->exclusive;
	r->model = w->model;
	r->requester = w->holder;
}

bool residency_blocked(const struct arbiter *a, const struct device *d, const struct waiter *w)
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
	request_of(a, d, w, &r);
	v = device_models(d, &n);
	blocked = v ? placement_conflicts(&r, v, n) : true;
	free(v);
	return blocked;
}

int residency_impossible(const struct arbiter *a, const struct device *d, const struct waiter *w,
			 char *why, size_t why_len)
{
	struct placement_request r;
	struct model **v;
	size_t n;
	int rc;

	request_of(a, d, w, &r);
	v = device_models(d, &n);
	if (!v)
		return 0;
	rc = placement_impossible(&r, v, n, d->budget, why, why_len);
	free(v);
	return rc;
}

/* answer_admin tells an administrator waiting on this eviction how it ended. */
static void answer_admin(struct arbiter *a, struct model *m, bool revoked, uint64_t bytes_freed)
{
	Rocmmem__Wire__Reply reply = ROCMMEM__WIRE__REPLY__INIT;
	Rocmmem__Wire__EvictResult body = ROCMMEM__WIRE__EVICT_RESULT__INIT;
	struct client *c;

	if (!m->evict_requester)
		return;
	c = arbiter_conn(a, state_holder_find(&a->state, m->evict_requester));
	m->evict_requester = 0;
	if (!c)
		return;
	body.has_revoked = true;
	body.revoked = revoked;
	body.has_bytes_freed = true;
	body.bytes_freed = bytes_freed;
	reply.has_id = true;
	reply.id = m->evict_request_id;
	reply.has_error = true;
	reply.error = 0;
	reply.body_case = ROCMMEM__WIRE__REPLY__BODY_EVICT;
	reply.evict = &body;
	client_reply(c, &reply, NULL, 0);
}

/* tell_lease_revoked tells l's owner that l goes with its model m's residency. */
static void tell_lease_revoked(struct client *c, const struct lease *l, const struct model *m,
			       const char *reason)
{
	Rocmmem__Wire__Event ev = ROCMMEM__WIRE__EVENT__INIT;
	Rocmmem__Wire__LeaseRevoked body = ROCMMEM__WIRE__LEASE_REVOKED__INIT;

	body.has_lease_id = true;
	body.lease_id = l->id;
	body.reason = (char *)reason;
	body.has_model_id = body.has_model_generation = true;
	body.model_id = m->id;
	body.model_generation = m->generation;
	ev.body_case = ROCMMEM__WIRE__EVENT__BODY_LEASE_REVOKED;
	ev.lease_revoked = &body;
	client_event(c, &ev);
}

static void tell_model_revoked(struct client *c, const struct model *m, const char *reason)
{
	Rocmmem__Wire__Event ev = ROCMMEM__WIRE__EVENT__INIT;
	Rocmmem__Wire__ModelRevoked body = ROCMMEM__WIRE__MODEL_REVOKED__INIT;

	body.has_model_id = true;
	body.model_id = m->id;
	body.reason = (char *)reason;
	body.has_generation = true;
	body.generation = m->generation;
	ev.body_case = ROCMMEM__WIRE__EVENT__BODY_MODEL_REVOKED;
	ev.model_revoked = &body;
	client_event(c, &ev);
}

/*
 * unload takes a model's memory back: after its owner's ack, or when revoked (reason set).
 * Everything said about the residency that ends goes out before its generation moves on and
 * before its leases are freed: freeing host memory grants waiting requests at once, the
 * model's own acquire among them, whose answer names the next generation.
 */
static void unload(struct arbiter *a, struct model *m, const char *revoked)
{
	struct device *d = &a->state.devices[m->device];
	struct holder *h = m->owner;
	struct client *c = arbiter_conn(a, h);
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
		state_deadline_clear(&a->state, &m->heap_slot);
		arbiter_deadlines_changed(a);
		m->evicting = false;
		m->evictions++;
	}
	/* Leases still tagged with it: their memory goes too, and the owner is told. */
	TAILQ_FOREACH (l, &h->leases, holder_link) {
		if (l->model == m)
			tell_lease_revoked(c, l, m, revoked ? revoked : "its model was evicted");
	}
	if (revoked) {
		tell_model_revoked(c, m, revoked);
		e.type = BUS_REVOKED;
		bus_emitf(&a->bus, &e, LOG_LEVEL_WARN,
			  "revoked model %" PRIu64 " '%s' (%s) of %s: %s", m->id, m->name,
			  size_format(bytes, sz, sizeof(sz)), holder_label(h, who, sizeof(who)),
			  revoked);
	} else {
		e.type = BUS_EVICT_ACKED;
		bus_emitf(&a->bus, &e, LOG_LEVEL_INFO,
			  "model %" PRIu64 " '%s' of %s unloaded (%s back)", m->id, m->name,
			  holder_label(h, who, sizeof(who)), size_format(bytes, sz, sizeof(sz)));
	}
	/* This residency is over: whatever is granted from now on belongs to the next. */
	m->generation++;
	if (m->reservation) {
		device_unreserve(d, m->reservation);
		m->reservation = 0;
	}
	adopt_model_changed(a, m);
	/* Freeing may grant a lease tagged with the model's next residency: it is linked after
	 * `last`, and stays. */
	last = TAILQ_LAST(&h->leases, lease_list);
	for (l = TAILQ_FIRST(&h->leases); l; l = next) {
		next = l == last ? NULL : TAILQ_NEXT(l, holder_link);
		if (l->model == m)
			arbiter_lease_destroy(a, l);
	}
	answer_admin(a, m, revoked != NULL, bytes);
	arbiter_auto_trim(a, d);
}

void residency_deadline(struct arbiter *a, uint64_t model_id)
{
	struct model *m = residency_find(a, model_id);
	char why[128];

	if (!m || !m->evicting)
		return;
	m->heap_slot = 0; /* taken off already */
	snprintf(why, sizeof(why), "did not unload within %.3g s of being asked",
		 (double)a->evict_deadline_ms / 1000.0);
	unload(a, m, why);
	arbiter_pump(a);
}

/* send_evict asks m's owner to unload it within the deadline. */
static void send_evict(struct arbiter *a, struct model *m, uint64_t bytes_needed,
		       const struct holder *for_whom)
{
	Rocmmem__Wire__Event ev = ROCMMEM__WIRE__EVENT__INIT;
	Rocmmem__Wire__EvictRequest body = ROCMMEM__WIRE__EVICT_REQUEST__INIT;
	char sz[SIZE_FORMAT_MAX], owner[128], who[128];

	m->evict_started_ms = uv_now(a->loop);
	m->evict_due_ms = m->evict_started_ms + a->evict_deadline_ms;
	if (state_deadline_set(&a->state, DUE_EVICTION, m->id, m->evict_due_ms, &m->heap_slot) <
	    0) {
		/* Without a deadline an owner that never acks would hold the memory for good:
		 * not asked now, planned again on the next change. */
		log_error("Could not ask to unload model %" PRIu64 ": out of memory", m->id);
		return;
	}
	arbiter_deadlines_changed(a);
	m->evicting = true;
	body.has_model_id = true;
	body.model_id = m->id;
	body.has_bytes_needed = true;
	body.bytes_needed = bytes_needed;
	body.has_deadline_ms = true;
	body.deadline_ms = (uint32_t)a->evict_deadline_ms;
	body.has_generation = true;
	body.generation = m->generation;
	ev.body_case = ROCMMEM__WIRE__EVENT__BODY_EVICT_REQUEST;
	ev.evict_request = &body;
	{
		struct bus_event e = {.type = BUS_EVICT_REQUESTED,
				      .holder = m->owner,
				      .has_device = true,
				      .device = m->device,
				      .bytes = model_resident(m),
				      .model_id = m->id,
				      .model_name = m->name};

		bus_emitf(&a->bus, &e, LOG_LEVEL_INFO,
			  "asking %s to unload model %" PRIu64 " '%s' (%s %s) for %s",
			  holder_label(m->owner, owner, sizeof(owner)), m->id, m->name,
			  model_class_name(m->model_class),
			  size_format(model_resident(m), sz, sizeof(sz)),
			  for_whom ? holder_label(for_whom, who, sizeof(who)) : "an administrator");
	}
	client_event(arbiter_conn(a, m->owner), &ev);
}

/*
 * held_in_use: the bytes on d that only c can give back, by releasing: its leases and the
 * reservations of its unpinned models in use. Its idle models (evictable), models being
 * evicted (coming anyway), pinned models (never coming) and skip (the head's own model) are
 * counted elsewhere.
 */
static uint64_t held_in_use(const struct holder *c, const struct device *d,
			    const struct model *skip)
{
	uint64_t bytes = c->device_bytes[d->index];
	const struct model *m;

	TAILQ_FOREACH (m, &c->models, holder_link) {
		if (m->device != d->index)
			continue;
		if (m != skip && !m->pinned && model_state(m) == MODEL_IN_USE)
			bytes += m->reservation;
		else
			bytes -= m->lease_bytes < bytes ? m->lease_bytes : bytes;
	}
	return bytes;
}

/* minus subtracts, stopping at 0. */
static uint64_t minus(uint64_t a, uint64_t b)
{
	return a > b ? a - b : 0;
}

bool residency_bypass_begin(struct arbiter *a, const struct device *d, const struct waiter *head,
			    struct placement_bypass *b)
{
	uint64_t stamp = ++a->bypass_stamp, waiting = 0, other, aside = 0;
	const struct waiter *w;
	const struct model *m;
	bool any = false;

	memset(b, 0, sizeof(*b));
	b->head_bytes = head->size;
	/* The clients behind the head, each once, and what they hold. */
	for (w = TAILQ_NEXT(head, queue_link); w; w = TAILQ_NEXT(w, queue_link)) {
		if (w->holder == head->holder || w->holder->queue_mark == stamp)
			continue;
		w->holder->queue_mark = stamp;
		waiting += held_in_use(w->holder, d, head->model);
		any = true;
	}
	if (!any)
		return false;
	/* Every byte accounted on d is: coming for the head now (free, being evicted, idle),
	 * never (pinned, the head's own model and client), the waiting clients', or other
	 * clients' (in use, leases, allocations and releases under way), which they may free. */
	b->coming = device_free(d);
	TAILQ_FOREACH (m, &d->models, device_link) {
		if (m->evicting) {
			b->coming += model_resident(m);
		} else if (m == head->model || m->pinned) {
			aside += model_resident(m);
		} else if (model_state(m) == MODEL_IDLE) {
			b->coming += model_resident(m);
		} else if (model_state(m) == MODEL_IN_USE && head->model &&
			   m->owner->queue_mark == stamp &&
			   class_exclusion_conflict(&d->exclusive, head->model->model_class,
						    m->model_class)) {
			b->rival_waits = true;
		}
	}
	aside += held_in_use(head->holder, d, head->model);
	other = minus(d->leased + d->reserved, minus(b->coming, device_free(d)) + aside + waiting);
	b->coming += other;
	return b->coming < b->head_bytes || b->rival_waits;
}

bool residency_may_bypass(const struct arbiter *a, const struct device *d,
			  const struct waiter *head, const struct placement_bypass *b,
			  const struct waiter *w)
{
	return w->holder != head->holder && w->holder->queue_mark == a->bypass_stamp &&
	       held_in_use(w->holder, d, head->model) > 0 && placement_may_bypass(b, w->size);
}

void residency_plan(struct arbiter *a, struct device *d, const struct waiter *w)
{
	struct placement_request r;
	struct placement_plan plan;
	struct model **v;
	size_t n;

	if (d->nmodels == 0)
		return;
	request_of(a, d, w, &r);
	v = device_models(d, &n);
	if (!v)
		return;
	placement_plan(&r, v, n, &plan);
	for (unsigned i = 0; i < plan.nvictims; i++)
		send_evict(a, plan.victims[i], w->size, w->holder);
	free(v);
}

uint64_t residency_need(const struct waiter *w)
{
	const struct model *m = w->model;

	if (w->kind == WAIT_LEASE || !m)
		return w->size;
	if (m->evicting)
		return w->target;
	return w->target > m->reservation ? w->target - m->reservation : 0;
}

/* reply_residency answers an acquire or resize of m with the residency it now belongs to. */
static void reply_residency(struct client *c, uint64_t request_id, const struct model *m)
{
	Rocmmem__Wire__Reply reply = ROCMMEM__WIRE__REPLY__INIT;
	Rocmmem__Wire__ModelResidency body = ROCMMEM__WIRE__MODEL_RESIDENCY__INIT;

	body.has_model_id = body.has_generation = body.has_reservation = true;
	body.model_id = m->id;
	body.generation = m->generation;
	body.reservation = m->reservation;
	reply.has_id = true;
	reply.id = request_id;
	reply.has_error = true;
	reply.error = 0;
	reply.body_case = ROCMMEM__WIRE__REPLY__BODY_RESIDENCY;
	reply.residency = &body;
	client_reply(c, &reply, NULL, 0);
}

void residency_grant(struct arbiter *a, const struct waiter *w, uint64_t waited_ms)
{
	struct device *d = &a->state.devices[w->device];
	struct model *m = w->model;
	char sz[SIZE_FORMAT_MAX], who[128];

	device_reserve(d, w->size);
	m->reservation += w->size;
	/* A resize sets the reservation: one that grew meanwhile shrinks back to it. */
	if (w->kind == WAIT_MODEL_RESIZE && m->reservation > w->target) {
		device_unreserve(d, m->reservation - w->target);
		m->reservation = w->target;
	}
	adopt_model_changed(a, m);
	if (w->kind == WAIT_MODEL_ACQUIRE) {
		struct bus_event e = {.type = BUS_MODEL_LOADED,
				      .holder = w->holder,
				      .has_device = true,
				      .device = m->device,
				      .bytes = m->reservation,
				      .model_id = m->id,
				      .model_name = m->name,
				      .waited_ms = waited_ms};

		m->use_count++;
		m->last_used_ms = uv_now(a->loop);
		bus_emitf(&a->bus, &e, LOG_LEVEL_DEBUG,
			  "model %" PRIu64 " '%s' of %s is resident (%s reserved) after %" PRIu64
			  " ms",
			  m->id, m->name, holder_label(w->holder, who, sizeof(who)),
			  size_format(m->reservation, sz, sizeof(sz)), waited_ms);
	}
	reply_residency(arbiter_conn(a, w->holder), w->request_id, m);
}

/* waiter_for fills a model request's template for arbiter_admit: m's reservation to target. */
static void waiter_for(struct waiter *w, struct holder *h, uint64_t request_id, struct model *m,
		       enum waiter_kind kind, uint64_t target, int64_t timeout_ms)
{
	memset(w, 0, sizeof(*w));
	w->kind = kind;
	w->holder = h;
	w->request_id = request_id;
	w->device = m->device;
	w->model = m;
	w->target = target;
	w->size = residency_need(w);
	w->requested = w->size;
	w->timeout_ms = timeout_ms;
	snprintf(w->tag, sizeof(w->tag), "%s", m->name);
}

struct model *residency_create(struct arbiter *a, struct client *c, uint64_t request_id,
			       const Rocmmem__Wire__ModelRegister *req, uint64_t want_id)
{
	unsigned dev = req->has_device ? req->device : 0;
	unsigned cls = req->has_class_ ? (unsigned)req->class_ : 0;
	char sz[SIZE_FORMAT_MAX], b[SIZE_FORMAT_MAX], who[128];
	struct device *d;
	struct model *m;
	uint64_t size = 0;
	int err;

	/* dispatch checked the device index, the name, the class and the reservation. */
	assert(dev < a->state.ndevices && req->name && cls < MODEL_CLASSES);
	d = &a->state.devices[dev];
	if (req->has_size &&
	    (size_round_up(req->size, d->granule, &size) < 0 || size > d->budget)) {
		client_reply_error(c, request_id, -E2BIG,
				   "model '%s' needs %s, more than device %u's whole budget of %s",
				   req->name, size_format(req->size, sz, sizeof(sz)), dev,
				   size_format(d->budget, b, sizeof(b)));
		return NULL;
	}
	if (c->holder->model_count >= RESIDENCY_MAX_MODELS) {
		quota_hit(a->server, LIMIT_MODELS, NULL);
		client_reply_error(c, request_id, -EDQUOT,
				   "this connection already has %u models, the most allowed",
				   RESIDENCY_MAX_MODELS);
		return NULL;
	}
	m = calloc(1, sizeof(*m));
	if (!m) {
		client_reply_error(c, request_id, -ENOMEM, "the daemon is out of memory");
		return NULL;
	}
	/* The id table takes a chosen id only below its counter: the counter is never moved. */
	if (want_id && idtable_fill(&a->state.models, want_id, m) < 0 &&
	    idtable_insert(&a->state.models, want_id, m) < 0)
		want_id = 0; /* taken meanwhile: a fresh id, which the client maps */
	m->id = want_id;
	err = want_id ? 0 : idtable_add(&a->state.models, m, &m->id);
	if (err) {
		free(m);
		client_reply_error(c, request_id, err,
				   err == -EOVERFLOW ? "the daemon has handed out every model id"
						     : "the daemon is out of memory");
		return NULL;
	}
	m->owner = c->holder;
	m->device = dev;
	snprintf(m->name, sizeof(m->name), "%s", req->name);
	m->model_class = cls;
	m->size = size;
	m->priority = req->has_priority ? req->priority : 0;
	m->pinned = req->has_pinned && req->pinned;
	m->last_used_ms = uv_now(a->loop);
	m->generation = 1;
	TAILQ_INSERT_TAIL(&c->holder->models, m, holder_link);
	c->holder->model_count++;
	TAILQ_INSERT_TAIL(&d->models, m, device_link);
	d->nmodels++;
	log_debug("%s registered model %" PRIu64 " '%s' (%s, %s, priority %d%s) on device %u",
		  client_label(c, who, sizeof(who)), m->id, m->name, model_class_name(cls),
		  size_format(size, sz, sizeof(sz)), (int)m->priority, m->pinned ? ", pinned" : "",
		  dev);
	adopt_model_registered(a);
	return m;
}

void residency_register(struct arbiter *a, struct client *c, uint64_t request_id,
			const Rocmmem__Wire__ModelRegister *req)
{
	Rocmmem__Wire__Reply reply = ROCMMEM__WIRE__REPLY__INIT;
	Rocmmem__Wire__ModelRegistered body = ROCMMEM__WIRE__MODEL_REGISTERED__INIT;
	struct model *m = residency_create(a, c, request_id, req, 0);

	if (!m)
		return;
	body.has_model_id = true;
	body.model_id = m->id;
	body.has_generation = true;
	body.generation = m->generation;
	reply.has_id = true;
	reply.id = request_id;
	reply.has_error = true;
	reply.error = 0;
	reply.body_case = ROCMMEM__WIRE__REPLY__BODY_MODEL;
	reply.model = &body;
	client_reply(c, &reply, NULL, 0);
}

void residency_acquire(struct arbiter *a, struct client *c, uint64_t request_id,
		       const Rocmmem__Wire__ModelAcquire *req)
{
	struct model *m = owned(a, c, request_id, req->has_model_id ? req->model_id : 0);
	struct waiter w;

	if (!m)
		return;
	/* The count never wraps: a wrapped count would show a model in use as idle. */
	if (m->use_count >= UINT_MAX - m->waiters) {
		client_reply_error(c, request_id, -EOVERFLOW,
				   "model %" PRIu64
				   " '%s' is acquired %u times already: release it",
				   m->id, m->name, m->use_count);
		return;
	}
	/* Resident already, or nothing to reserve (its memory is leases): in use at once. */
	if (!m->evicting && (model_resident(m) > 0 || m->size == 0)) {
		m->use_count++;
		m->last_used_ms = uv_now(a->loop);
		reply_residency(c, request_id, m);
		return;
	}
	/* Being evicted: it waits until its memory is back, then needs its whole size again. */
	waiter_for(&w, c->holder, request_id, m, WAIT_MODEL_ACQUIRE, m->size,
		   req->has_timeout_ms ? req->timeout_ms : 0);
	arbiter_admit(a, &w);
}

void residency_release(struct arbiter *a, struct client *c, uint64_t request_id, uint64_t model_id)
{
	struct model *m = owned(a, c, request_id, model_id);

	if (!m)
		return;
	if (m->use_count == 0) {
		client_reply_error(c, request_id, -EINVAL, "model %" PRIu64 " '%s' is not in use",
				   m->id, m->name);
		return;
	}
	m->use_count--;
	m->last_used_ms = uv_now(a->loop);
	client_reply_ok(c, request_id);
	/* Idle now: it may be what a waiting request needs evicted. */
	if (m->use_count == 0)
		arbiter_pump(a);
}

void residency_resize(struct arbiter *a, struct client *c, uint64_t request_id,
		      const Rocmmem__Wire__ModelResize *req)
{
	struct model *m = owned(a, c, request_id, req->has_model_id ? req->model_id : 0);
	uint64_t target;
	struct waiter w;

	if (!m)
		return;
	/* dispatch checked that a reservation is given; it may still overflow the granule. */
	if (size_round_up(req->reservation, a->state.devices[m->device].granule, &target) < 0) {
		client_reply_error(c, request_id, -EINVAL, "resize needs a reservation in bytes");
		return;
	}
	if (m->evicting) {
		client_reply_error(c, request_id, -EBUSY,
				   "model %" PRIu64
				   " '%s' is being evicted: unload it and ack first",
				   m->id, m->name);
		return;
	}
	if (target <= m->reservation) {
		device_unreserve(&a->state.devices[m->device], m->reservation - target);
		m->reservation = target;
		adopt_model_changed(a, m);
		reply_residency(c, request_id, m);
		arbiter_pump(a);
		return;
	}
	waiter_for(&w, c->holder, request_id, m, WAIT_MODEL_RESIZE, target,
		   req->has_timeout_ms ? req->timeout_ms : 0);
	arbiter_admit(a, &w);
}

/* model_destroy frees everything a model holds; its waiters must be gone. */
static void model_destroy(struct arbiter *a, struct model *m)
{
	struct device *d = &a->state.devices[m->device];
	struct holder *c = m->owner;
	struct lease *l;

	if (m->heap_slot) {
		state_deadline_clear(&a->state, &m->heap_slot);
		arbiter_deadlines_changed(a);
	}
	m->evicting = false;
	if (m->reservation)
		device_unreserve(d, m->reservation);
	m->reservation = 0;
	adopt_model_changed(a, m);
	/* Leases outlive their model's registration as plain leases. */
	TAILQ_FOREACH (l, &c->leases, holder_link) {
		if (l->model == m)
			l->model = NULL;
	}
	answer_admin(a, m, false, model_resident(m));
	idtable_remove(&a->state.models, m->id);
	TAILQ_REMOVE(&c->models, m, holder_link);
	c->model_count--;
	TAILQ_REMOVE(&d->models, m, device_link);
	d->nmodels--;
	free(m);
}

void residency_unregister(struct arbiter *a, struct client *c, uint64_t request_id,
			  uint64_t model_id)
{
	struct model *m = owned(a, c, request_id, model_id);
	struct waiter *w, *next;

	if (!m)
		return;
	/* This client's own requests on the model's behalf end with it. */
	for (w = TAILQ_FIRST(&c->holder->waiters); w; w = next) {
		next = TAILQ_NEXT(w, holder_link);
		if (w->model == m)
			arbiter_cancel_waiter(a, w, -ECANCELED, "the model was unregistered");
	}
	model_destroy(a, m);
	client_reply_ok(c, request_id);
	arbiter_pump(a);
}

/*
 * stale_ack refuses an ack that does not name the eviction under way, logged at warning: a
 * late ack must never end a later eviction. Returns true when it refused.
 */
static bool stale_ack(struct client *c, uint64_t request_id, const struct model *m,
		      const Rocmmem__Wire__EvictAck *req)
{
	char who[128], why[256];
	int err = -EINVAL;

	if (!req->has_generation) {
		/* An older client: it acks whatever eviction is under way, as it always did. */
		if (m->evicting)
			return false;
		snprintf(why, sizeof(why),
			 "model %" PRIu64 " '%s' was not asked to unload%s (an ack without a "
			 "generation)",
			 m->id, m->name, m->evictions ? " (or its eviction is already over)" : "");
	} else if (req->generation == 0 || req->generation > m->generation) {
		snprintf(why, sizeof(why),
			 "model %" PRIu64 " '%s' has no generation %" PRIu64
			 " (its residency is generation %" PRIu64 ")",
			 m->id, m->name, req->generation, m->generation);
	} else if (req->generation < m->generation) {
		err = -ESTALE;
		snprintf(why, sizeof(why),
			 "the eviction of model %" PRIu64 " '%s' generation %" PRIu64
			 " is over (acked, or revoked at its deadline); the model is in generation "
			 "%" PRIu64 " now",
			 m->id, m->name, req->generation, m->generation);
	} else if (!m->evicting) {
		snprintf(why, sizeof(why),
			 "model %" PRIu64 " '%s' was not asked to unload (generation %" PRIu64 ")",
			 m->id, m->name, m->generation);
	} else {
		return false;
	}
	log_warn("refused an evict ack of %s: %s", client_label(c, who, sizeof(who)), why);
	client_reply_error(c, request_id, err, "%s", why);
	return true;
}

void residency_evict_ack(struct arbiter *a, struct client *c, uint64_t request_id,
			 const Rocmmem__Wire__EvictAck *req)
{
	struct model *m = owned(a, c, request_id, req->has_model_id ? req->model_id : 0);

	if (!m || stale_ack(c, request_id, m, req))
		return;
	if (m->use_count > 0) {
		client_reply_error(c, request_id, -EBUSY,
				   "model %" PRIu64 " '%s' is in use: release it before acking",
				   m->id, m->name);
		return;
	}
	unload(a, m, NULL);
	client_reply_ok(c, request_id);
	arbiter_pump(a);
}

/* may_administer: the model's owner, root, or a member of the admin group. */
static bool may_administer(const struct client *c, const struct model *m)
{
	return c->holder == m->owner || access_is_admin(&c->server->access, &c->holder->who);
}

static struct model *administered(struct arbiter *a, struct client *c, uint64_t request_id,
				  uint64_t model_id)
{
	struct model *m = residency_find(a, model_id);
	char who[128];

	if (!m) {
		client_reply_error(c, request_id, -ENOENT, "no model %" PRIu64, model_id);
		return NULL;
	}
	if (!may_administer(c, m)) {
		const struct access_policy *pol = &c->server->access;
		const char *group = pol->has_admin_group ? pol->admin_group_name : "";

		access_refuse(c, request_id,
			      "model %" PRIu64
			      " '%s' belongs to %s: only its owner%s%s%s may evict "
			      "or pin it",
			      m->id, m->name, holder_label(m->owner, who, sizeof(who)),
			      group[0] ? ", root or a member of group '" : " or root", group,
			      group[0] ? "' (admin_group)" : "");
		return NULL;
	}
	return m;
}

void residency_admin_evict(struct arbiter *a, struct client *c, uint64_t request_id,
			   uint64_t model_id)
{
	struct model *m = administered(a, c, request_id, model_id);

	if (!m)
		return;
	if (m->evict_requester) {
		client_reply_error(c, request_id, -EBUSY,
				   "model %" PRIu64 " '%s' is already being evicted on request",
				   m->id, m->name);
		return;
	}
	switch (model_state(m)) {
	case MODEL_EVICTED:
		/* Nothing resident: answered at once, as an eviction that freed nothing. */
		m->evict_requester = c->id;
		m->evict_request_id = request_id;
		answer_admin(a, m, false, 0);
		return;
	case MODEL_IN_USE:
		client_reply_error(c, request_id, -EBUSY,
				   "model %" PRIu64
				   " '%s' is in use: it can be evicted once released",
				   m->id, m->name);
		return;
	case MODEL_EVICTING:
		break; /* answered when the eviction under way is over */
	case MODEL_IDLE:
		send_evict(a, m, model_resident(m), NULL);
		break;
	}
	m->evict_requester = c->id;
	m->evict_request_id = request_id;
}

void residency_admin_pin(struct arbiter *a, struct client *c, uint64_t request_id,
			 const Rocmmem__Wire__AdminPinModel *req)
{
	struct model *m = administered(a, c, request_id, req->has_model_id ? req->model_id : 0);
	char who[128];

	if (!m)
		return;
	m->pinned = req->has_pinned && req->pinned;
	log_info("%s %s model %" PRIu64 " '%s'", client_label(c, who, sizeof(who)),
		 m->pinned ? "pinned" : "unpinned", m->id, m->name);
	client_reply_ok(c, request_id);
	arbiter_pump(a);
}

void residency_holder_gone(struct arbiter *a, struct holder *h)
{
	struct model *m;
	uint64_t after = 0, id;

	while ((m = TAILQ_FIRST(&h->models)))
		model_destroy(a, m);
	/* Evictions it asked for as an administrator go on, unanswered. */
	while ((m = idtable_next(&a->state.models, after, &id))) {
		if (m->evict_requester == h->id)
			m->evict_requester = 0;
		after = id;
	}
}
