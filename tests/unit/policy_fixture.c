/* SPDX-License-Identifier: MIT */
/* policy_fixture.c: books built by hand for the policy's unit tests (no daemon, no loop). */
#include "policy_fixture.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

void fx_init(struct fx *f, unsigned ndevices, uint64_t budget)
{
	struct backend_device info = {
	    .total_bytes = budget, .granule = GRANULE, .handle_kind = BACKEND_HANDLE_VMM_FD};

	memset(f, 0, sizeof(*f));
	state_init(&f->s);
	for (unsigned i = 0; i < ndevices; i++) {
		snprintf(info.name, sizeof(info.name), "gpu%u", i);
		device_init(&f->s.devices[i], i, &info, budget);
	}
	f->s.ndevices = ndevices;
	f->cfg.evict_deadline_ms = 20000;
	f->cfg.limits = (struct limits){.max_clients = 64,
					.max_pending = 64,
					.max_leases = 64,
					.max_clients_per_uid = 64,
					.max_message = 65536,
					.max_subscribers = 8};
	f->cfg.daemon_uid = 4242;
	f->cfg.fd_limit = 1 << 20;
	f->cfg.fd_own = 64;
	policy_scratch_init(&f->x);
	f->now = 1000000;
}

void fx_drop(struct fx *f, struct holder *h)
{
	struct waiter *w;
	struct lease *l;
	struct model *m;

	while ((w = TAILQ_FIRST(&h->waiters)))
		state_waiter_drop(&f->s, w);
	while ((l = TAILQ_FIRST(&h->leases))) {
		device_uncharge(&f->s.devices[l->device], l->size);
		state_lease_unlink(&f->s, l);
		free(l);
	}
	while ((m = TAILQ_FIRST(&h->models))) {
		device_unreserve(&f->s.devices[m->device], m->reservation);
		state_deadline_clear(&f->s, &m->heap_slot);
		state_deadline_clear(&f->s, &m->hold_slot);
		state_model_remove(&f->s, m);
	}
	state_holder_leave(&f->s, h);
	state_holder_free(h);
}

void fx_finish(struct fx *f)
{
	struct holder *h;

	while ((h = state_holder_next(&f->s, 0)))
		fx_drop(f, h);
	policy_scratch_finish(&f->x);
	state_finish(&f->s);
}

struct holder *fx_holder(struct fx *f, uid_t uid, pid_t pid, const char *name)
{
	struct identity who = {.pid = pid, .uid = uid, .gid = uid};
	struct holder *h = NULL;

	assert_int_equal(state_holder_add(&f->s, &who, f->now, &h), 0);
	snprintf(h->name, sizeof(h->name), "%s", name);
	return h;
}

struct model *fx_model(struct fx *f, struct holder *h, unsigned dev, const char *name, unsigned cls,
		       uint64_t size, int32_t priority)
{
	struct model *m = calloc(1, sizeof(*m));

	assert_non_null(m);
	m->owner = h;
	m->device = dev;
	snprintf(m->name, sizeof(m->name), "%s", name);
	m->model_class = cls;
	m->size = size;
	m->priority = priority;
	m->generation = 1;
	m->last_used_ms = f->now;
	assert_int_equal(state_model_add(&f->s, m, 0), 0);
	return m;
}

void fx_load(struct fx *f, struct model *m, unsigned use)
{
	device_reserve(&f->s.devices[m->device], m->size);
	m->reservation = m->size;
	m->use_count = use;
	m->last_used_ms = f->now;
}

struct lease *fx_lease(struct fx *f, struct holder *h, unsigned dev, uint64_t bytes,
		       struct model *m)
{
	struct lease *l = calloc(1, sizeof(*l));

	assert_non_null(l);
	assert_int_equal(lease_table_add(&f->s.leases, l), 0);
	l->device = dev;
	l->size = bytes;
	device_charge(&f->s.devices[dev], bytes);
	state_lease_link(&f->s, h, l, m ? m->id : 0, f->now);
	return l;
}

static struct waiter *queue_one(struct fx *f, struct waiter *t)
{
	struct waiter *w = NULL;
	uint64_t due = t->timeout_ms > 0 ? f->now + (uint64_t)t->timeout_ms : UINT64_MAX;

	assert_int_equal(state_waiter_add(&f->s, t, f->now, due, &w), 0);
	return w;
}

struct waiter *fx_wait(struct fx *f, struct holder *h, unsigned dev, uint64_t bytes,
		       int64_t timeout_ms)
{
	struct waiter t = {.kind = WAIT_LEASE,
			   .holder = h,
			   .request_id = 100 + h->waiter_count,
			   .device = dev,
			   .size = bytes,
			   .requested = bytes,
			   .timeout_ms = timeout_ms};

	return queue_one(f, &t);
}

struct waiter *fx_wait_model(struct fx *f, struct model *m, enum waiter_kind kind, uint64_t target,
			     int64_t timeout_ms)
{
	struct waiter t = {.kind = kind,
			   .holder = m->owner,
			   .model = m,
			   .request_id = 200 + m->owner->waiter_count,
			   .device = m->device,
			   .target = target,
			   .timeout_ms = timeout_ms};

	t.size = policy_need(&t);
	t.requested = t.size;
	snprintf(t.tag, sizeof(t.tag), "%s", m->name);
	return queue_one(f, &t);
}

struct policy_request fx_lease_request(const struct holder *h, unsigned dev, uint64_t bytes,
				       int64_t timeout_ms)
{
	struct policy_request r = {.kind = POLICY_LEASE,
				   .holder = h->id,
				   .request_id = 7,
				   .device = dev,
				   .requested = bytes,
				   .timeout_ms = timeout_ms,
				   .tag = ""};

	return r;
}

struct policy_request fx_model_request(const struct model *m, enum policy_request_kind kind,
				       uint64_t requested, int64_t timeout_ms)
{
	struct policy_request r = {.kind = kind,
				   .holder = m->owner->id,
				   .request_id = 8,
				   .requested = requested,
				   .model_id = m->id,
				   .timeout_ms = timeout_ms};

	return r;
}

void fx_next(struct fx *f, struct policy_decision *d)
{
	policy_next(&f->s, &f->cfg, f->now, &f->x, d);
}

void fx_contains(const char *text, const char *what)
{
	if (!strstr(text, what))
		fail_msg("'%s' does not say '%s'", text, what);
}
