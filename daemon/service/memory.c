/* SPDX-License-Identifier: MIT */
/* memory.c: leases' memory in and out of the backend: allocation jobs, releases, reclaims. */
#include "memory.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adopt.h"
#include "arena.h"
#include "base/log.h"
#include "pool.h"
#include "reply.h"
#include "size.h"
#include "trim.h"

/* A lease request whose memory the backend is allocating. */
struct grant_job {
	struct job job;
	struct svc *svc;
	uint64_t holder; /* found again when done: it may have left meanwhile */
	bool fd;	 /* counted as a host lease's fd until it is a lease */
	char who[128];	 /* its label, for the log should it have left */
	uint64_t request_id;
	uint64_t model_id;
	uint64_t waited_ms;
	char tag[ROCMMEM_NAME_MAX + 1];
};

/* A release (or a grant undone) whose memory the backend is freeing. */
struct release_job {
	struct job job;
	struct svc *svc;
};

static void release_done(struct job *job)
{
	struct release_job *r = (struct release_job *)job;
	struct svc *svc = r->svc;
	struct device *d = &svc->state.devices[job->device];

	/* Only now is the memory really back: then it may be granted again. */
	d->releasing -= job->alloc.size;
	device_uncharge(d, job->alloc.size);
	svc_auto_trim(svc, job->device);
	free(r);
	svc->pump(svc);
}

void svc_free_allocation(struct svc *svc, unsigned device, const struct backend_alloc *alloc)
{
	struct release_job *r = calloc(1, sizeof(*r));

	if (!r) {
		/* Without memory for the job, free inline: a stall beats a leak. */
		svc->backend->ops->release(svc->backend, device, (struct backend_alloc *)alloc);
		device_uncharge(&svc->state.devices[device], alloc->size);
		return;
	}
	svc->state.devices[device].releasing += alloc->size;
	r->svc = svc;
	r->job.kind = JOB_RELEASE;
	r->job.backend = svc->backend;
	r->job.device = device;
	r->job.alloc = *alloc;
	r->job.done = release_done;
	if (svc->runner.submit(svc->runner.ctx, &r->job) < 0) {
		svc->backend->ops->release(svc->backend, device, &r->job.alloc);
		release_done(&r->job);
	}
}

void svc_lease_event(struct bus_event *e, const struct lease *l, enum bus_type type)
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

void svc_lease_released(struct svc *svc, const struct lease *l, enum log_level level,
			const char *how)
{
	struct bus_event e;
	char sz[SIZE_FORMAT_MAX], who[128];

	svc_lease_event(&e, l, BUS_LEASE_RELEASED);
	if (strcmp(how, "reclaimed") == 0)
		e.flags = BUS_RECLAIMED;
	if (!bus_wants_line(&svc->bus, &e, level)) {
		bus_emit(&svc->bus, &e, level, NULL); /* a release per round trip: format nothing */
		return;
	}
	bus_emitf(&svc->bus, &e, level, "%s lease %" PRIu64 " (%s on device %u) of %s", how, l->id,
		  size_format(l->size, sz, sizeof(sz)), l->device,
		  holder_label(l->owner, who, sizeof(who)));
}

/* lease_destroy takes l from its owner and frees its memory; keep_warm: an arena range may stay
 * warm for its client (a release). */
static void lease_destroy(struct svc *svc, struct lease *l, bool keep_warm)
{
	bool in_arena = l->arena != NULL;

	if (!in_arena && device_keeps_fds(&svc->state.devices[l->device]))
		state_fd_release(&svc->state, l->owner);
	adopt_lease_gone(svc, l);
	state_lease_unlink(&svc->state, l);
	if (in_arena) {
		/* Punched and given back now (or kept warm): nothing blocks, and no fd or job
		 * per lease. */
		if (!keep_warm || !svc_arena_keep_warm(svc, l))
			svc_arena_lease_gone(svc, l);
		svc->pump(svc);
	} else {
		svc_free_allocation(svc, l->device, &l->alloc);
	}
	lease_table_dispose(&svc->state.leases, l);
}

void svc_lease_destroy(struct svc *svc, struct lease *l)
{
	lease_destroy(svc, l, false);
}

void svc_lease_give_back(struct svc *svc, struct lease *l)
{
	lease_destroy(svc, l, true);
}

/* grant_failed answers a grant the backend could not allocate. */
static void grant_failed(struct svc *svc, struct grant_job *g, struct holder *h)
{
	struct job *job = &g->job;
	struct device *d = &svc->state.devices[job->device];
	char sz[SIZE_FORMAT_MAX];

	device_uncharge(d, job->size);
	if (!h) {
		struct bus_event e = {.type = BUS_ALLOC_FAILED};

		bus_emitf(&svc->bus, &e, LOG_LEVEL_WARN,
			  "Could not allocate %s on device %u for %s: %s",
			  size_format(job->size, sz, sizeof(sz)), d->index, g->who,
			  job->why[0] ? job->why : strerror(-job->err));
	} else {
		struct policy_decision r;

		policy_decision_init(&r);
		policy_refuse(&r, REFUSE_DENIAL, job->err,
			      "Could not allocate %s on device %u (%s): %s",
			      size_format(job->size, sz, sizeof(sz)), d->index, d->name,
			      job->why[0] ? job->why : strerror(-job->err));
		r.device = d->index;
		r.bytes = job->size;
		r.waited_ms = g->waited_ms;
		svc_refuse(svc, h->id, g->request_id, &r, BUS_FAILED);
	}
	if (job->err == -ENODEV) {
		const char *why = job->why[0] ? job->why : "device gone";

		if (state_device_lost(&svc->state, d->index, why))
			log_error("Device %u (%s) is unusable: %s", d->index, d->name, why);
	}
	/* The charge is free again: a request queued behind this one may fit now. */
	svc->pump(svc);
}

uint64_t svc_export_keep_cap(const struct svc *svc)
{
	struct fd_caps k;

	/* Half of what host leases' memfds may hold: a GPU backend has none, and connections
	 * and the daemon's own files keep their shares. */
	fd_caps_compute(svc->cfg.fd_limit, svc->cfg.fd_own, &svc->cfg.limits, &k);
	if (svc->pool_cfg.keep_fds != POOL_AUTO)
		return svc->pool_cfg.keep_fds < k.total ? svc->pool_cfg.keep_fds : k.total;
	return k.total / 2;
}

void svc_lease_made(struct svc *svc, struct holder *h, struct lease *l, uint64_t request_id,
		    uint64_t model_id, uint64_t waited_ms, bool send_arena_fd)
{
	struct svc_reply r = {
	    .kind = SVC_LEASE, .lease = l, .waited_ms = waited_ms, .send_arena_fd = send_arena_fd};
	char sz[SIZE_FORMAT_MAX], who[128];
	struct bus_event e;

	state_lease_link(&svc->state, h, l, model_id, svc_now(svc));
	adopt_lease_granted(svc, l);
	svc_lease_event(&e, l, BUS_LEASE_GRANTED);
	e.waited_ms = waited_ms;
	if (!bus_wants_line(&svc->bus, &e, LOG_LEVEL_DEBUG))
		bus_emit(&svc->bus, &e, LOG_LEVEL_DEBUG, NULL); /* a grant per round trip */
	else
		bus_emitf(&svc->bus, &e, LOG_LEVEL_DEBUG,
			  "granted lease %" PRIu64 " (%s on device %u, %s%s%s) to %s after %" PRIu64
			  " ms",
			  l->id, size_format(l->size, sz, sizeof(sz)), l->device,
			  backend_sharing_name(l->alloc.handle_kind), l->tag[0] ? ", tag " : "",
			  l->tag, holder_label(h, who, sizeof(who)), waited_ms);
	/* If the client cannot take the reply it is dropped, and its teardown reclaims l. */
	svc_reply(svc, h->id, request_id, &r);
	/* Exported for this grant: the client has its own copies now. Memory the pool may take
	 * keeps them while descriptors are plentiful, so that its next grant exports nothing. */
	if (l->alloc.transient_fds &&
	    (l->alloc.handle_kind != BACKEND_HANDLE_VMM_FD ||
	     svc_pool_limit(svc, &svc->state.devices[l->device]) == 0 ||
	     !backend_alloc_keep_fds(&l->alloc, svc_export_keep_cap(svc))))
		backend_alloc_close_fds(&l->alloc);
	/* Bytes in flight are now a model's: of an idle or evicted model they come to a head
	 * that waits (an eviction to ask, a backfill's surplus): the queues look again. */
	if (model_id)
		svc->pump(svc);
}

static void grant_done(struct job *job)
{
	struct grant_job *g = (struct grant_job *)job;
	struct svc *svc = g->svc;
	struct holder *h = state_holder_find(&svc->state, g->holder);
	struct device *d = &svc->state.devices[job->device];
	struct lease *l;
	int err;

	if (h)
		h->jobs--;
	/* No lease comes of it on every path but the last: what the grant counted goes back. */
	if (g->fd && (job->err || !h || d->lost))
		state_fd_release(&svc->state, h);
	if (job->err) {
		grant_failed(svc, g, h);
		goto out;
	}
	if (!h || d->lost) {
		/* Nobody to give it to any more: straight back. Being freed, it now comes to a
		 * head that waits (a backfill's surplus): the queues look again. */
		svc_free_allocation(svc, d->index, &job->alloc);
		svc->pump(svc);
		goto out;
	}
	l = lease_table_new(&svc->state.leases);
	err = l ? lease_table_add(&svc->state.leases, l) : -ENOMEM;
	if (err) {
		free(l);
		svc_free_allocation(svc, d->index, &job->alloc);
		if (g->fd)
			state_fd_release(&svc->state, h);
		svc_reply_error(svc, h->id, g->request_id, err,
				err == -EOVERFLOW ? "the daemon has handed out every lease id"
						  : "the daemon is out of memory");
		goto out;
	}
	l->device = d->index;
	l->size = job->size;
	l->alloc = job->alloc;
	memcpy(l->tag, g->tag, sizeof(l->tag));
	svc_lease_made(svc, h, l, g->request_id, g->model_id, g->waited_ms, false);
out:
	free(job->drops);
	free(g);
}

/* arena_grant grants q as a range of h's arena; false: the per-lease path grants it. */
static bool arena_grant(struct svc *svc, struct holder *h, const struct svc_grant *q)
{
	struct device *d = &svc->state.devices[q->device];
	char why[256], sz[SIZE_FORMAT_MAX];
	struct policy_decision r;
	struct lease *l = NULL;
	bool first = false;
	int rc = svc_arena_take(svc, h, q, &l, &first, why, sizeof(why));

	if (rc > 0) {
		svc_lease_made(svc, h, l, q->request_id, q->model_id, q->waited_ms, first);
		return true;
	}
	if (rc == 0)
		return false;
	/* Refused as a failed allocation of its own memfd would be (and counted so). */
	policy_decision_init(&r);
	policy_refuse(&r, REFUSE_DENIAL, rc, "Could not allocate %s on device %u (%s): %s",
		      size_format(q->size, sz, sizeof(sz)), d->index, d->name, why);
	r.device = d->index;
	r.bytes = q->size;
	r.waited_ms = q->waited_ms;
	svc_refuse(svc, h->id, q->request_id, &r, BUS_FAILED);
	return true;
}

void svc_grant_lease(struct svc *svc, struct holder *h, uint64_t request_id, unsigned device,
		     uint64_t size, const char *tag, uint64_t model_id, uint64_t waited_ms,
		     bool own_memfd)
{
	struct device *d = &svc->state.devices[device];
	bool fd = device_keeps_fds(d);
	struct svc_grant q = {.request_id = request_id,
			      .device = device,
			      .size = size,
			      .tag = tag,
			      .model_id = model_id,
			      .waited_ms = waited_ms};
	struct grant_job *g;

	if (!own_memfd && arena_grant(svc, h, &q))
		return;
	/* Counted from here until it is a lease and that lease is gone (or it fails). */
	if (fd) {
		struct policy_decision r;

		policy_fd_admit(&svc->state, &svc->cfg, h, &r);
		if (r.verdict == POLICY_REFUSE) {
			svc_refuse(svc, h->id, request_id, &r, 0);
			return;
		}
		state_fd_take(&svc->state, h);
	}
	g = calloc(1, sizeof(*g));
	if (!g) {
		if (fd)
			state_fd_release(&svc->state, h);
		svc_reply_error(svc, h->id, request_id, -ENOMEM, "the daemon is out of memory");
		return;
	}
	g->svc = svc;
	g->holder = h->id;
	g->fd = fd;
	holder_label(h, g->who, sizeof(g->who));
	g->request_id = request_id;
	g->model_id = model_id;
	g->waited_ms = waited_ms;
	snprintf(g->tag, sizeof(g->tag), "%s", tag ? tag : "");
	g->job.kind = JOB_ALLOC;
	g->job.backend = svc->backend;
	g->job.device = device;
	g->job.size = size;
	snprintf(g->job.label, sizeof(g->job.label), "rocmmem-pid%d", (int)h->who.pid);
	g->job.done = grant_done;
	device_charge(d, size);
	h->jobs++;
	/* A warm lease: the memory this client released, exported already: no runtime call. */
	if (svc_pool_take(svc, h->id, device, size, &g->job.alloc)) {
		g->job.size = size;
		g->job.alloc.size = size;
		grant_done(&g->job);
		return;
	}
	svc_pool_make_room(svc, device, &g->job);
	if (svc->runner.submit(svc->runner.ctx, &g->job) < 0) {
		svc_pool_release_drops(svc, &g->job);
		device_uncharge(d, size);
		if (fd)
			state_fd_release(&svc->state, h);
		svc_reply_error(svc, h->id, request_id, -EAGAIN, "Could not queue the allocation");
		h->jobs--;
		free(g);
	}
}
