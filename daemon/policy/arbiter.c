/* SPDX-License-Identifier: MIT */
/* arbiter.c: who gets memory: grants within budget, fair waiting, release and reclaim. */
#include "arbiter.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service/adopt.h"
#include "net/client.h"
#include "service/bus.h"
#include "explain.h"
#include "platform/job.h"
#include "base/log.h"
#include "placement.h"
#include "quota.h"
#include "residency.h"
#include "net/server.h"
#include "size.h"

/* log_rules says which classes stay apart on device i, if any. */
static void log_rules(const struct device *d)
{
	char pairs[256];

	if (!class_exclusion_any(&d->exclusive))
		return;
	class_exclusion_format(&d->exclusive, pairs, sizeof(pairs));
	log_info("device %u: never resident together: %s", d->index, pairs);
}

int arbiter_init(struct arbiter *a, struct server *s, uv_loop_t *loop, struct backend *backend,
		 const struct budget_config *cfgs, const struct residency_config *res,
		 const struct svc_clock *clock)
{
	unsigned n = backend->ops->device_count(backend);

	memset(a, 0, sizeof(*a));
	a->server = s;
	a->loop = loop;
	a->backend = backend;
	a->evict_deadline_ms = res->evict_deadline_ms;
	a->clock = clock;
	bus_init(&a->bus, clock);
	state_init(&a->state);
	uv_timer_init(loop, &a->deadline_timer);
	a->deadline_timer.data = a;
	/* Deadlines belong to clients (and the grace period, which must not keep a stopping
	 * daemon up): the timer never keeps the loop alive by itself. */
	uv_unref((uv_handle_t *)&a->deadline_timer);
	a->timer_ready = true;
	if (n == 0) {
		log_error("The %s backend reports no devices", backend_name(backend));
		return -ENODEV;
	}
	if (n > BACKEND_MAX_DEVICES) {
		log_warn("managing the first %u of %u devices", BACKEND_MAX_DEVICES, n);
		n = BACKEND_MAX_DEVICES;
	}
	for (unsigned i = 0; i < n; i++) {
		char why[256], t[SIZE_FORMAT_MAX], b[SIZE_FORMAT_MAX], h[SIZE_FORMAT_MAX];
		struct backend_device info;
		uint64_t budget;
		int err = backend->ops->device_info(backend, i, &info);

		if (err) {
			log_error("Could not query device %u: %s", i, strerror(-err));
			return err;
		}
		err = device_budget(&cfgs[i], &info, &budget, why, sizeof(why));
		if (err) {
			log_error("Device %u (%s): %s", i, info.name, why);
			return err;
		}
		device_init(&a->state.devices[i], i, &info, budget);
		a->state.devices[i].exclusive = res->exclusive_all;
		class_exclusion_merge(&a->state.devices[i].exclusive, &res->exclusive[i]);
		log_info("device %u: %s, %s total, budget %s, headroom %s", i, info.name,
			 size_format(info.total_bytes, t, sizeof(t)),
			 size_format(budget, b, sizeof(b)),
			 size_format(a->state.devices[i].headroom, h, sizeof(h)));
		log_rules(&a->state.devices[i]);
	}
	for (unsigned i = n; i < BACKEND_MAX_DEVICES; i++) {
		if (class_exclusion_any(&res->exclusive[i]) || cfgs[i].named) {
			log_error("The configuration names device %u, but there are %u device(s)",
				  i, n);
			return -EINVAL;
		}
	}
	a->state.ndevices = n;
	return 0;
}

int arbiter_reconfigure(struct arbiter *a, const struct budget_config *cfgs,
			const struct residency_config *res, char *why, size_t why_len)
{
	uint64_t budgets[BACKEND_MAX_DEVICES];
	char t[SIZE_FORMAT_MAX], b[SIZE_FORMAT_MAX], h[SIZE_FORMAT_MAX];

	/* Everything is checked before anything changes: a bad setting changes nothing. */
	for (unsigned i = a->state.ndevices; i < BACKEND_MAX_DEVICES; i++) {
		if (class_exclusion_any(&res->exclusive[i]) || cfgs[i].named) {
			snprintf(why, why_len, "it names device %u, but there are %u device(s)", i,
				 a->state.ndevices);
			return -EINVAL;
		}
	}
	for (unsigned i = 0; i < a->state.ndevices; i++) {
		char reason[256];

		if (device_budget(&cfgs[i], &a->state.devices[i].info, &budgets[i], reason,
				  sizeof(reason)) < 0) {
			snprintf(why, why_len, "device %u (%s): %s", i, a->state.devices[i].name,
				 reason);
			return -EINVAL;
		}
	}
	a->evict_deadline_ms = res->evict_deadline_ms;
	for (unsigned i = 0; i < a->state.ndevices; i++) {
		struct device *d = &a->state.devices[i];
		struct class_exclusion rules = res->exclusive_all;

		class_exclusion_merge(&rules, &res->exclusive[i]);
		if (memcmp(&rules, &d->exclusive, sizeof(rules)) != 0) {
			d->exclusive = rules;
			if (class_exclusion_any(&rules))
				log_rules(d);
			else
				log_info("device %u: no classes kept apart any more", i);
		}
		if (budgets[i] != d->budget) {
			uint64_t held = d->leased + d->reserved;

			log_info("device %u: budget %s (was %s), headroom %s%s", i,
				 size_format(budgets[i], b, sizeof(b)),
				 size_format(d->budget, t, sizeof(t)),
				 size_format(d->total - budgets[i], h, sizeof(h)),
				 held > budgets[i] ? "; more than that is held: nothing is granted "
						     "until enough is released"
						   : "");
			device_set_budget(d, budgets[i]);
		}
	}
	/* A larger budget or fewer rules may let waiting requests through now. */
	arbiter_pump(a);
	return 0;
}

void arbiter_finish(struct arbiter *a)
{
	if (a->timer_ready) {
		uv_close((uv_handle_t *)&a->deadline_timer, NULL);
		uv_run(a->loop, UV_RUN_DEFAULT);
		a->timer_ready = false;
	}
	state_finish(&a->state);
	if (a->backend)
		a->backend->ops->destroy(a->backend);
	a->backend = NULL;
}

/* What a refused request was: its device, bytes and model (NULL for a lease). */
struct refused {
	unsigned device;
	uint64_t bytes;
	const struct model *model;
	uint64_t waited_ms;
	bool failed; /* the backend refused the allocation */
};

static void deny(struct arbiter *a, struct holder *h, uint64_t request_id, int err,
		 const struct refused *r, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));

/*
 * deny refuses a memory request: the client gets err and the explanation, and so do the log,
 * the telemetry subscribers and the latest refusals in status. A model request's explanation
 * starts with the model's name.
 */
static void deny(struct arbiter *a, struct holder *h, uint64_t request_id, int err,
		 const struct refused *r, const char *fmt, ...)
{
	struct client *c = arbiter_conn(a, h);
	struct bus_event e = {.type = BUS_LEASE_DENIED,
			      .holder = h,
			      .has_device = true,
			      .device = r->device,
			      .bytes = r->bytes,
			      .waited_ms = r->waited_ms,
			      .error = err,
			      .flags = r->failed ? BUS_FAILED : 0};
	char why[DENIAL_REASON_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	if (r->model) {
		e.model_id = r->model->id;
		e.model_name = r->model->name;
		client_reply_error(c, request_id, err, "model '%s': %s", r->model->name, why);
		bus_emitf(&a->bus, &e, LOG_LEVEL_WARN, "model '%s': %s", r->model->name, why);
	} else {
		client_reply_error(c, request_id, err, "%s", why);
		bus_emitf(&a->bus, &e, LOG_LEVEL_WARN, "%s", why);
	}
}

/* A lease request whose memory the backend is allocating. */
struct grant_job {
	struct job job;
	struct arbiter *arbiter;
	uint64_t holder; /* found again when done: it may have left meanwhile */
	bool fd;	 /* counted by quota_fd_admit until it is a lease */
	char who[128];	 /* its label, for the log should it have left */
	uint64_t request_id;
	uint64_t model_id;
	uint64_t waited_ms;
	char tag[ROCMMEM_NAME_MAX + 1];
};

/* A release (or a grant undone) whose memory the backend is freeing. */
struct release_job {
	struct job job;
	struct arbiter *arbiter;
};

/* A trim request, possibly spanning several devices, answered when all are done. */
struct trim_request {
	struct arbiter *arbiter;
	uint64_t holder; /* 0 for the daemon's own trims */
	uint64_t request_id;
	unsigned pending;
	uint64_t released;
	int err;
};

struct trim_job {
	struct job job;
	struct trim_request *request;
};

static void release_done(struct job *job)
{
	struct release_job *r = (struct release_job *)job;
	struct arbiter *a = r->arbiter;

	/* Only now is the memory really back: then it may be granted again. */
	a->state.devices[job->device].releasing -= job->alloc.size;
	device_uncharge(&a->state.devices[job->device], job->alloc.size);
	arbiter_auto_trim(a, &a->state.devices[job->device]);
	free(r);
	arbiter_pump(a);
}

/* free_allocation hands an allocation back to the backend and uncharges it when done. */
static void free_allocation(struct arbiter *a, unsigned device, const struct backend_alloc *alloc)
{
	struct release_job *r = calloc(1, sizeof(*r));

	if (!r) {
		/* Without memory for the job, free inline: a stall beats a leak. */
		a->backend->ops->release(a->backend, device, (struct backend_alloc *)alloc);
		device_uncharge(&a->state.devices[device], alloc->size);
		return;
	}
	a->state.devices[device].releasing += alloc->size;
	r->arbiter = a;
	r->job.kind = JOB_RELEASE;
	r->job.backend = a->backend;
	r->job.device = device;
	r->job.alloc = *alloc;
	r->job.done = release_done;
	if (job_submit(a->loop, &r->job) < 0) {
		a->backend->ops->release(a->backend, device, &r->job.alloc);
		release_done(&r->job);
	}
}

void arbiter_free_allocation(struct arbiter *a, unsigned device, const struct backend_alloc *alloc)
{
	free_allocation(a, device, alloc);
}

void arbiter_lease_event(struct bus_event *e, const struct lease *l, enum bus_type type)
{
	*e = (struct bus_event){.type = type,
				.holder = l->owner,
				.has_device = true,
				.device = l->device,
				.bytes = l->size,
				.lease_id = l->id,
				.model_id = l->model ? l->model->id : 0,
				.model_name = l->model ? l->model->name : NULL};
}

/* released tells the log and subscribers that l is going back (how: "released", "reclaimed"). */
static void released(struct arbiter *a, const struct lease *l, enum log_level level,
		     const char *how)
{
	struct bus_event e;
	char sz[SIZE_FORMAT_MAX], who[128];

	arbiter_lease_event(&e, l, BUS_LEASE_RELEASED);
	if (strcmp(how, "reclaimed") == 0)
		e.flags = BUS_RECLAIMED;
	bus_emitf(&a->bus, &e, level, "%s lease %" PRIu64 " (%s on device %u) of %s", how, l->id,
		  size_format(l->size, sz, sizeof(sz)), l->device,
		  holder_label(l->owner, who, sizeof(who)));
}

struct client *arbiter_conn(const struct arbiter *a, const struct holder *h)
{
	return h ? server_conn(a->server, h->id) : NULL;
}

void arbiter_lease_destroy(struct arbiter *a, struct lease *l)
{
	if (device_keeps_fds(&a->state.devices[l->device]))
		quota_fd_release(a->server, l->owner);
	adopt_lease_gone(a, l);
	state_lease_unlink(&a->state, l);
	free_allocation(a, l->device, &l->alloc);
	free(l);
}

static void reply_grant(struct arbiter *a, struct holder *h, uint64_t request_id,
			const struct lease *l, uint64_t waited_ms)
{
	Rocmmem__Wire__Reply reply = ROCMMEM__WIRE__REPLY__INIT;
	Rocmmem__Wire__LeaseGrant body = ROCMMEM__WIRE__LEASE_GRANT__INIT;
	const struct device *d = &a->state.devices[l->device];

	body.has_lease_id = true;
	body.lease_id = l->id;
	body.has_device = true;
	body.device = l->device;
	body.has_size = true;
	body.size = l->size;
	body.has_handle_kind = true;
	body.handle_kind = (Rocmmem__Wire__HandleKind)l->alloc.handle_kind;
	body.has_fd_count = true;
	body.fd_count = l->alloc.nfds;
	body.has_waited_ms = true;
	body.waited_ms = waited_ms;
	if (l->alloc.nchunks > 0) {
		body.n_chunk_sizes = l->alloc.nchunks;
		body.chunk_sizes = (uint64_t *)l->alloc.chunk_sizes;
		body.has_chunk_size = true;
		body.chunk_size = l->alloc.chunk_sizes[0];
	}
	if (l->alloc.has_ipc) {
		body.has_ipc_handle = true;
		body.ipc_handle.len = sizeof(l->alloc.ipc_handle);
		body.ipc_handle.data = (uint8_t *)l->alloc.ipc_handle;
		body.has_offset = true;
		body.offset = l->alloc.ipc_offset;
	}
	if (d->pci_bus_id[0])
		body.pci_bus_id = (char *)d->pci_bus_id;
	if (l->model) {
		body.has_model_generation = true;
		body.model_generation = l->model->generation;
	}
	reply.has_id = true;
	reply.id = request_id;
	reply.has_error = true;
	reply.error = 0;
	reply.body_case = ROCMMEM__WIRE__REPLY__BODY_LEASE;
	reply.lease = &body;
	/* If the client cannot take the reply it is kicked, and its teardown reclaims l. */
	client_reply(arbiter_conn(a, h), &reply, l->alloc.fds, l->alloc.nfds);
}

static void grant_done(struct job *job)
{
	struct grant_job *g = (struct grant_job *)job;
	struct arbiter *a = g->arbiter;
	struct holder *c = state_holder_find(&a->state, g->holder);
	struct device *d = &a->state.devices[job->device];
	char sz[SIZE_FORMAT_MAX], who[128];
	struct lease *l = NULL;
	int err;

	if (c)
		c->jobs--;
	/* No lease comes of it on every path but the last: what grant counted goes back. */
	if (g->fd && (job->err || !c || d->lost))
		quota_fd_release(a->server, c);
	if (job->err) {
		struct refused r = {
		    .device = d->index, .bytes = job->size, .waited_ms = g->waited_ms};

		device_uncharge(d, job->size);
		if (!c) {
			struct bus_event e = {.type = BUS_ALLOC_FAILED};

			bus_emitf(&a->bus, &e, LOG_LEVEL_WARN,
				  "Could not allocate %s on device %u for %s: %s",
				  size_format(job->size, sz, sizeof(sz)), d->index, g->who,
				  job->why[0] ? job->why : strerror(-job->err));
		} else {
			r.failed = true;
			deny(a, c, g->request_id, job->err, &r,
			     "Could not allocate %s on device %u (%s): %s",
			     size_format(job->size, sz, sizeof(sz)), d->index, d->name,
			     job->why[0] ? job->why : strerror(-job->err));
		}
		if (job->err == -ENODEV)
			arbiter_device_lost(a, d->index, job->why[0] ? job->why : "device gone");
		/* The charge is free again: a request queued behind this one may fit now. */
		arbiter_pump(a);
		goto out;
	}
	if (!c || d->lost) {
		/* Nobody to give it to any more: straight back. */
		free_allocation(a, d->index, &job->alloc);
		goto out;
	}
	l = calloc(1, sizeof(*l));
	err = l ? lease_table_add(&a->state.leases, l) : -ENOMEM;
	if (err) {
		free(l);
		free_allocation(a, d->index, &job->alloc);
		if (g->fd)
			quota_fd_release(a->server, c);
		client_reply_error(arbiter_conn(a, c), g->request_id, err,
				   err == -EOVERFLOW ? "the daemon has handed out every lease id"
						     : "the daemon is out of memory");
		goto out;
	}
	l->device = d->index;
	l->size = job->size;
	l->alloc = job->alloc;
	memcpy(l->tag, g->tag, sizeof(l->tag));
	state_lease_link(&a->state, c, l, g->model_id, uv_now(a->loop));
	adopt_lease_granted(a, l);
	{
		struct bus_event e;

		arbiter_lease_event(&e, l, BUS_LEASE_GRANTED);
		e.waited_ms = g->waited_ms;
		bus_emitf(&a->bus, &e, LOG_LEVEL_DEBUG,
			  "granted lease %" PRIu64 " (%s on device %u, %s%s%s) to %s after %" PRIu64
			  " ms",
			  l->id, size_format(l->size, sz, sizeof(sz)), d->index,
			  backend_sharing_name(l->alloc.handle_kind), l->tag[0] ? ", tag " : "",
			  l->tag, holder_label(c, who, sizeof(who)), g->waited_ms);
	}
	reply_grant(a, c, g->request_id, l, g->waited_ms);
	/* Exported for this grant only: the client has its own copies now. */
	if (l->alloc.transient_fds)
		backend_alloc_close_fds(&l->alloc);
out:
	free(g);
}

/* grant charges the budget and has the backend allocate; the reply follows in grant_done. */
static void grant(struct arbiter *a, struct holder *h, uint64_t request_id, struct device *d,
		  uint64_t size, const char *tag, uint64_t model_id, uint64_t waited_ms)
{
	struct client *c = arbiter_conn(a, h);
	bool fd = device_keeps_fds(d);
	struct grant_job *g;

	/* Counted from here until it is a lease and that lease is gone (or it fails). */
	if (fd && quota_fd_admit(a->server, c, request_id, true) < 0)
		return;
	g = calloc(1, sizeof(*g));
	if (!g) {
		if (fd)
			quota_fd_release(a->server, h);
		client_reply_error(c, request_id, -ENOMEM, "the daemon is out of memory");
		return;
	}
	g->arbiter = a;
	g->holder = h->id;
	g->fd = fd;
	holder_label(h, g->who, sizeof(g->who));
	g->request_id = request_id;
	g->model_id = model_id;
	g->waited_ms = waited_ms;
	snprintf(g->tag, sizeof(g->tag), "%s", tag ? tag : "");
	g->job.kind = JOB_ALLOC;
	g->job.backend = a->backend;
	g->job.device = d->index;
	g->job.size = size;
	snprintf(g->job.label, sizeof(g->job.label), "rocmmem-pid%d", (int)h->who.pid);
	g->job.done = grant_done;
	device_charge(d, size);
	h->jobs++;
	if (job_submit(a->loop, &g->job) < 0) {
		device_uncharge(d, size);
		if (fd)
			quota_fd_release(a->server, h);
		client_reply_error(c, request_id, -EAGAIN, "Could not queue the allocation");
		h->jobs--;
		free(g);
	}
}

static void waiter_drop(struct arbiter *a, struct waiter *w)
{
	struct holder *c = w->holder;

	queue_remove(&a->state.devices[w->device].queue, w);
	TAILQ_REMOVE(&c->waiters, w, holder_link);
	c->waiter_count--;
	if (w->model)
		w->model->waiters--;
	state_waiter_unnumber(&a->state, w);
	if (w->heap_slot) {
		state_deadline_clear(&a->state, &w->heap_slot);
		arbiter_deadlines_changed(a);
	}
	free(w);
}

/* waiter_fits says whether w could be granted now: the budget and residency agree. */
static bool waiter_fits(const struct arbiter *a, const struct device *d, const struct waiter *w)
{
	return device_fits(d, w->size) && !residency_blocked(a, d, w);
}

/* grant_waiter grants a request, from the queue or at once; w may be a template. */
static void grant_waiter(struct arbiter *a, const struct waiter *w, uint64_t waited_ms)
{
	if (w->kind == WAIT_LEASE)
		grant(a, w->holder, w->request_id, &a->state.devices[w->device], w->size, w->tag,
		      w->model ? w->model->id : 0, waited_ms);
	else
		residency_grant(a, w, waited_ms);
}

/*
 * bypass grants one request from behind a head that cannot be granted, when the head waits for
 * memory held in use by that request's client, which also waits behind it: hold and wait
 * across clients, which strict first come, first served would leave to a timeout. The rule
 * (docs/residency.md, "How the daemon decides"):
 *
 * - Only when the head could not be granted even if every idle model were evicted and every
 *   client that waits for nothing released what it holds (or an exclusive rival of the head's
 *   model is in use by a client waiting behind it): then the head waits for some client
 *   behind it whatever happens.
 * - Only a request that fits now (free budget, no exclusive rival, its model not being
 *   evicted), without eviction: in-flight evictions stay the head's.
 * - Only a client that holds memory in use on the device (its leases, its models in use),
 *   and only its first request behind the head: its own requests keep their order.
 * - With only a rival in the way (bytes enough), only out of the surplus beyond the head's
 *   bytes: a bypass never takes memory the head could otherwise have.
 *
 * What a bypass grants comes back when its client releases (an idle model is evictable, a
 * lease is freed), so the head is granted once the holders finish their step. A holder that
 * never releases leaves the head waiting until its timeout, as it would without the bypass.
 * Returns whether it granted one (the queue changed: the caller looks at the head again).
 */
static bool bypass(struct arbiter *a, struct device *d, struct waiter *head)
{
	struct placement_bypass b;
	struct waiter *w;
	char sz[SIZE_FORMAT_MAX], who[128], whom[128];

	if (!residency_bypass_begin(a, d, head, &b))
		return false;
	for (w = TAILQ_NEXT(head, queue_link); w; w = TAILQ_NEXT(w, queue_link)) {
		struct waiter copy;

		if (w->holder == head->holder || w->holder->queue_mark != a->bypass_stamp)
			continue;
		w->size = residency_need(w);
		if (!waiter_fits(a, d, w) || !residency_may_bypass(a, d, head, &b, w)) {
			w->holder->queue_mark = 0; /* its later requests stay behind this one */
			continue;
		}
		{
			struct bus_event e = {.type = BUS_BYPASS, .holder = w->holder};

			/* The count in the line is this bypass's: the counters see it next. */
			bus_emitf(&a->bus, &e, LOG_LEVEL_DEBUG,
				  "granting %s on device %u to %s ahead of %s, which waits for "
				  "memory it holds in use (%" PRIu64 " bypasses)",
				  size_format(w->size, sz, sizeof(sz)), d->index,
				  holder_label(w->holder, who, sizeof(who)),
				  holder_label(head->holder, whom, sizeof(whom)),
				  a->counters.bypasses + 1);
		}
		copy = *w;
		waiter_drop(a, w);
		grant_waiter(a, &copy, uv_now(a->loop) - copy.enqueued_ms);
		return true;
	}
	return false;
}

/*
 * pump grants waiting requests, oldest first per device, while the oldest fits; for an oldest
 * that does not, it asks owners of idle models to unload (only as much as needed), and lets
 * through requests of clients it waits for (bypass).
 */
void arbiter_pump(struct arbiter *a)
{
	if (a->server->stopping)
		return; /* everyone is being disconnected: granting now would be wasted work */
	if (a->pumping) {
		a->pump_again = true;
		return;
	}
	a->pumping = true;
	do {
		a->pump_again = false;
		for (unsigned i = 0; i < a->state.ndevices; i++) {
			struct device *d = &a->state.devices[i];
			struct waiter *w;

			while ((w = queue_head(&d->queue))) {
				struct waiter copy;

				w->size = residency_need(w);
				if (!waiter_fits(a, d, w)) {
					residency_plan(a, d, w);
					if (bypass(a, d, w))
						continue;
					break;
				}
				copy = *w;
				waiter_drop(a, w);
				grant_waiter(a, &copy, uv_now(a->loop) - copy.enqueued_ms);
			}
		}
	} while (a->pump_again);
	a->pumping = false;
}

/* timed_out refuses a waiting request whose timeout has passed. */
static void timed_out(struct arbiter *a, struct waiter *w)
{
	struct device *d = &a->state.devices[w->device];
	struct refused r = {.device = w->device,
			    .bytes = w->requested,
			    .model = w->model,
			    .waited_ms = uv_now(a->loop) - w->enqueued_ms};
	char why[DENIAL_REASON_MAX];

	w->size = residency_need(w);
	explain_refusal(a, d, w, why, sizeof(why));
	deny(a, w->holder, w->request_id, -ETIMEDOUT, &r, "timed out after %" PRId64 " ms: %s",
	     w->timeout_ms, why);
	waiter_drop(a, w);
	/* The queue's head may have changed: whoever is now first may fit. */
	arbiter_pump(a);
}

/* on_deadline runs whatever deadlines have passed, earliest first, then arms the timer again. */
static void on_deadline(uv_timer_t *timer)
{
	struct arbiter *a = timer->data;
	uint64_t now = uv_now(a->loop);
	struct heap_entry e;

	while (state_deadline_due(&a->state, now, &e)) {
		switch (e.kind) {
		case DUE_WAITER: {
			struct waiter *w = state_waiter_find(&a->state, e.id);

			if (w) {
				w->heap_slot = 0;
				timed_out(a, w);
			}
			break;
		}
		case DUE_EVICTION:
			residency_deadline(a, e.id);
			break;
		case DUE_GRACE:
			adopt_grace_over(a);
			break;
		}
	}
	arbiter_deadlines_changed(a);
}

void arbiter_deadlines_changed(struct arbiter *a)
{
	uint64_t due = state_next_due(&a->state), now;

	if (!a->timer_ready)
		return;
	if (due == UINT64_MAX) {
		uv_timer_stop(&a->deadline_timer);
		return;
	}
	now = uv_now(a->loop);
	uv_timer_start(&a->deadline_timer, on_deadline, due > now ? due - now : 0, 0);
}

void arbiter_acquire(struct arbiter *a, struct client *c, uint64_t request_id,
		     const Rocmmem__Wire__LeaseAcquire *req)
{
	const struct limits *lim = &a->server->limits;
	unsigned dev = req->has_device ? req->device : 0;
	int64_t timeout = req->has_timeout_ms ? req->timeout_ms : 0;
	char why[DENIAL_REASON_MAX];
	struct device *d;
	struct waiter w;
	uint64_t size;

	/* dispatch checked the size, the device index and the tag (validate_request). */
	assert(req->has_size && req->size > 0 && dev < a->state.ndevices);
	d = &a->state.devices[dev];
	if (d->lost) {
		client_reply_error(c, request_id, -ENODEV, "device %u (%s) is unusable: %s", dev,
				   d->name, d->lost_reason);
		return;
	}
	if (size_round_up(req->size, d->granule, &size) < 0 || size > d->budget) {
		struct refused r = {.device = dev, .bytes = req->size};

		explain_too_big(d, req->size, why, sizeof(why));
		deny(a, c->holder, request_id, -E2BIG, &r, "%s", why);
		return;
	}
	if (c->holder->lease_count + c->holder->jobs >= lim->max_leases) {
		quota_hit(a->server, LIMIT_LEASES, NULL);
		client_reply_error(
		    c, request_id, -EDQUOT,
		    "this connection already holds %u leases, the most allowed (leases)",
		    lim->max_leases);
		return;
	}
	/* Refused now rather than after waiting; grant checks again (and counts it). */
	if (device_keeps_fds(d) && quota_fd_admit(a->server, c, request_id, false) < 0)
		return;
	memset(&w, 0, sizeof(w));
	w.kind = WAIT_LEASE;
	if (req->has_model_id && req->model_id != 0) {
		/* A lease tagged with a model counts towards it: the owner's model, this device. */
		w.model = residency_find(a, req->model_id);
		if (!w.model) {
			client_reply_error(c, request_id, -ENOENT,
					   "no model %" PRIu64 " of this client's", req->model_id);
			return;
		}
		if (w.model->owner != c->holder) {
			char who[128];

			access_refuse(c, request_id,
				      "no model %" PRIu64 " of this client's: model %" PRIu64
				      " '%s' belongs to %s",
				      req->model_id, req->model_id, w.model->name,
				      holder_label(w.model->owner, who, sizeof(who)));
			return;
		}
		if (w.model->device != dev) {
			client_reply_error(c, request_id, -EINVAL,
					   "model '%s' lives on device %u, not %u", w.model->name,
					   w.model->device, dev);
			return;
		}
	}
	w.holder = c->holder;
	w.request_id = request_id;
	w.device = dev;
	w.size = size;
	w.requested = req->size;
	w.timeout_ms = timeout;
	snprintf(w.tag, sizeof(w.tag), "%s", req->tag ? req->tag : "");
	arbiter_admit(a, &w);
}

void arbiter_admit(struct arbiter *a, const struct waiter *t)
{
	const struct limits *lim = &a->server->limits;
	struct device *d = &a->state.devices[t->device];
	struct holder *h = t->holder;
	struct client *c = arbiter_conn(a, h);
	struct refused r = {.device = t->device, .bytes = t->requested, .model = t->model};
	char why[DENIAL_REASON_MAX], s1[SIZE_FORMAT_MAX];
	struct waiter *w;
	int err;

	if (d->lost) {
		client_reply_error(c, t->request_id, -ENODEV, "device %u (%s) is unusable: %s",
				   d->index, d->name, d->lost_reason);
		return;
	}
	/* Over its uid's quota, counting what it waits for: refused, whatever fits. */
	if (quota_admit(a->server, c, t->request_id, t->size) < 0)
		return;
	/* Never: pinned models or this client's own in-use models stand in the way for good. */
	err = residency_impossible(a, d, t, why, sizeof(why));
	if (err) {
		deny(a, h, t->request_id, err, &r, "%s", why);
		return;
	}
	if (queue_empty(&d->queue) && waiter_fits(a, d, t)) {
		grant_waiter(a, t, 0);
		return;
	}
	if (t->timeout_ms == 0) {
		explain_refusal(a, d, t, why, sizeof(why));
		deny(a, h, t->request_id, -ENOMEM, &r, "%s", why);
		return;
	}
	if (h->waiter_count >= lim->max_pending) {
		quota_hit(a->server, LIMIT_PENDING, NULL);
		client_reply_error(
		    c, t->request_id, -EBUSY,
		    "this connection already has %u requests waiting, the most allowed (pending)",
		    lim->max_pending);
		return;
	}
	w = calloc(1, sizeof(*w));
	if (!w) {
		client_reply_error(c, t->request_id, -ENOMEM, "the daemon is out of memory");
		return;
	}
	*w = *t;
	w->enqueued_ms = uv_now(a->loop);
	w->due_ms = w->timeout_ms > 0 ? w->enqueued_ms + (uint64_t)w->timeout_ms : UINT64_MAX;
	w->heap_slot = 0;
	if (state_waiter_number(&a->state, w) < 0) {
		free(w);
		client_reply_error(c, t->request_id, -ENOMEM, "the daemon is out of memory");
		return;
	}
	if (w->timeout_ms > 0 &&
	    state_deadline_set(&a->state, DUE_WAITER, w->seq, w->due_ms, &w->heap_slot) < 0) {
		state_waiter_unnumber(&a->state, w);
		free(w);
		client_reply_error(c, t->request_id, -ENOMEM, "the daemon is out of memory");
		return;
	}
	if (w->heap_slot)
		arbiter_deadlines_changed(a);
	queue_push(&d->queue, w);
	TAILQ_INSERT_TAIL(&h->waiters, w, holder_link);
	h->waiter_count++;
	if (w->model)
		w->model->waiters++;
	log_debug("queued %s on device %u for connection %" PRIu64 " (%u waiting)",
		  size_format(w->size, s1, sizeof(s1)), d->index, h->id, d->queue.count);
	/* If it is first in line, owners of idle models may have to make room. */
	arbiter_pump(a);
}

void arbiter_cancel_waiter(struct arbiter *a, struct waiter *w, int err, const char *why)
{
	client_reply_error(arbiter_conn(a, w->holder), w->request_id, err, "%s", why);
	waiter_drop(a, w);
}

void arbiter_release(struct arbiter *a, struct client *c, uint64_t request_id, uint64_t lease_id)
{
	struct lease *l = lease_table_find(&a->state.leases, lease_id);
	char owner[128];

	if (!l) {
		client_reply_error(c, request_id, -ENOENT, "no lease %" PRIu64, lease_id);
		return;
	}
	if (l->owner != c->holder) {
		access_refuse(c, request_id,
			      "lease %" PRIu64 " belongs to %s: only its owner may release it",
			      lease_id, holder_label(l->owner, owner, sizeof(owner)));
		return;
	}
	released(a, l, LOG_LEVEL_DEBUG, "released");
	arbiter_lease_destroy(a, l);
	client_reply_ok(c, request_id);
	arbiter_pump(a);
}

void arbiter_holder_gone(struct arbiter *a, struct holder *c)
{
	struct waiter *w;
	struct lease *l;

	while ((w = TAILQ_FIRST(&c->waiters)))
		waiter_drop(a, w);
	while ((l = TAILQ_FIRST(&c->leases))) {
		/* One line for them all follows from the disconnect; each one for subscribers. */
		released(a, l, LOG_LEVEL_DEBUG, "reclaimed");
		arbiter_lease_destroy(a, l);
	}
	residency_holder_gone(a, c);
	arbiter_pump(a);
}

void arbiter_device_lost(struct arbiter *a, unsigned device, const char *why)
{
	struct device *d = &a->state.devices[device];
	struct waiter *w;

	if (d->lost)
		return;
	d->lost = true;
	snprintf(d->lost_reason, sizeof(d->lost_reason), "%s", why);
	log_error("Device %u (%s) is unusable: %s", device, d->name, why);
	while ((w = queue_head(&d->queue))) {
		client_reply_error(arbiter_conn(a, w->holder), w->request_id, -ENODEV,
				   "device %u (%s) became unusable: %s", device, d->name, why);
		waiter_drop(a, w);
	}
}

static void trim_answer(struct trim_request *t)
{
	Rocmmem__Wire__Reply reply = ROCMMEM__WIRE__REPLY__INIT;
	Rocmmem__Wire__TrimReply body = ROCMMEM__WIRE__TRIM_REPLY__INIT;
	struct holder *h = t->holder ? state_holder_find(&t->arbiter->state, t->holder) : NULL;
	struct client *c = arbiter_conn(t->arbiter, h);

	if (h)
		h->jobs--;
	if (c) {
		if (t->err) {
			client_reply_error(c, t->request_id, t->err, "trim failed: %s",
					   strerror(-t->err));
		} else {
			body.has_bytes_trimmed = true;
			body.bytes_trimmed = t->released;
			reply.has_id = true;
			reply.id = t->request_id;
			reply.has_error = true;
			reply.error = 0;
			reply.body_case = ROCMMEM__WIRE__REPLY__BODY_TRIM;
			reply.trim = &body;
			client_reply(c, &reply, NULL, 0);
		}
	}
	free(t);
}

static void trim_done(struct job *job)
{
	struct trim_job *tj = (struct trim_job *)job;
	struct trim_request *t = tj->request;
	struct arbiter *a = t->arbiter;
	struct device *d = &a->state.devices[job->device];
	char sz[SIZE_FORMAT_MAX];

	d->trimming = false;
	if (job->err && job->err != -ENOTSUP)
		t->err = job->err;
	t->released += job->released;
	{
		struct bus_event e = {.type = BUS_TRIM_DONE,
				      .holder = t->holder ? state_holder_find(&a->state, t->holder)
							  : NULL,
				      .has_device = true,
				      .device = d->index,
				      .bytes = job->released};

		/* A trim that found nothing is worth a line only when debugging. */
		bus_emitf(&a->bus, &e, job->released ? LOG_LEVEL_INFO : LOG_LEVEL_DEBUG,
			  "trimmed %s on device %u%s", size_format(job->released, sz, sizeof(sz)),
			  d->index, t->holder ? " on request" : "");
	}
	free(tj);
	if (--t->pending == 0)
		trim_answer(t);
	/* What came back may be what a waiter needs. */
	arbiter_pump(a);
}

static void trim_device(struct trim_request *t, struct device *d)
{
	struct arbiter *a = t->arbiter;
	struct trim_job *tj = calloc(1, sizeof(*tj));

	if (!tj) {
		t->err = -ENOMEM;
		return;
	}
	tj->request = t;
	tj->job.kind = JOB_TRIM;
	tj->job.backend = a->backend;
	tj->job.device = d->index;
	tj->job.done = trim_done;
	d->trimming = true;
	t->pending++;
	if (job_submit(a->loop, &tj->job) < 0) {
		d->trimming = false;
		t->pending--;
		t->err = -EAGAIN;
		free(tj);
	}
}

static struct trim_request *trim_request_new(struct arbiter *a, struct holder *h,
					     uint64_t request_id)
{
	struct trim_request *t = calloc(1, sizeof(*t));

	if (!t)
		return NULL;
	t->arbiter = a;
	t->holder = h ? h->id : 0;
	t->request_id = request_id;
	/* Held until the last device answers (the submitter's own count). */
	t->pending = 1;
	if (h)
		h->jobs++;
	return t;
}

static void trim_request_submitted(struct trim_request *t)
{
	if (--t->pending == 0)
		trim_answer(t);
}

void arbiter_trim(struct arbiter *a, struct client *c, uint64_t request_id, bool all_devices,
		  unsigned device)
{
	struct trim_request *t;

	assert(all_devices || device < a->state.ndevices); /* validate_request */
	/*
	 * One trim per device at a time: the replies come later, so backpressure would not stop
	 * a client that pipelines trims from queueing runtime calls without bound.
	 */
	if (!all_devices && a->state.devices[device].trimming) {
		client_reply_error(c, request_id, -EBUSY, "a trim of device %u is already running",
				   device);
		return;
	}
	t = trim_request_new(a, c->holder, request_id);
	if (!t) {
		client_reply_error(c, request_id, -ENOMEM, "the daemon is out of memory");
		return;
	}
	for (unsigned i = 0; i < a->state.ndevices; i++)
		if ((all_devices || i == device) && !a->state.devices[i].lost &&
		    !a->state.devices[i].trimming)
			trim_device(t, &a->state.devices[i]);
	trim_request_submitted(t);
}

/*
 * auto_trim trims a device by itself after a release when memory is tight there (requests are
 * waiting, or the runtime reports under a tenth free), one trim at a time: runtimes cache
 * freed memory that only a trim returns to the driver, and to processes outside rocmmemd.
 */
void arbiter_auto_trim(struct arbiter *a, struct device *d)
{
	bool tight =
	    !queue_empty(&d->queue) || (d->has_meminfo && d->runtime_free < d->runtime_total / 10);
	struct trim_request *t;

	if (!a->backend->ops->trim || !a->backend->ops->blocking || d->trimming || d->lost ||
	    !tight || a->server->stopping)
		return;
	t = trim_request_new(a, NULL, 0);
	if (!t)
		return;
	trim_device(t, d);
	trim_request_submitted(t);
}
