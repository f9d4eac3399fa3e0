/* SPDX-License-Identifier: MIT */
/* pool.c: the VMM chunk pool: released GPU leases' memory kept for their clients' next lease. */
#include "pool.h"

#include <errno.h>
#include <stdlib.h>

#include "adopt.h"
#include "base/log.h"
#include "reply.h"

/* A pooled allocation being exported again on a worker thread. */
struct park_job {
	struct job job;
	struct svc *svc;
	struct pool_entry *entry;
	uint64_t holder; /* answered once the memory is ready for its next grant */
	uint64_t request_id;
};

uint64_t svc_pool_limit(const struct svc *svc, const struct device *d)
{
	uint64_t max = svc->pool_cfg.max_bytes;

	if (!svc->backend || !svc->backend->ops->reexport ||
	    d->handle_kind != BACKEND_HANDLE_VMM_FD)
		return 0;
	return max == POOL_AUTO ? (d->budget / 4) & ~(d->granule - 1) : max;
}

/* held is what the device's books hold with the pool: leases, reservations, pooled memory. */
static uint64_t held(const struct device *d)
{
	return d->leased + d->reserved + d->truth.undeclared + d->pool.bytes;
}

/* pressure says whether the pool must let go of everything on d now. */
static bool pressure(const struct svc *svc, const struct device *d)
{
	return d->lost || svc->cfg.stopping || !queue_empty(&d->queue) || held(d) > d->budget ||
	       (d->has_meminfo && d->runtime_free < d->runtime_total / 10);
}

static void pool_release_done(struct job *job)
{
	struct svc *svc = job->data;

	free(job);
	/* Its memory is the runtime's again: what waits for it may fit now. */
	svc->pump(svc);
}

/* release_now frees one allocation of the pool on a worker thread (inline without memory). */
static void release_now(struct svc *svc, unsigned device, struct backend_alloc *a)
{
	struct job *job = calloc(1, sizeof(*job));

	backend_alloc_close_fds(a);
	if (!job) {
		svc->backend->ops->release(svc->backend, device, a);
		return;
	}
	job->kind = JOB_RELEASE;
	job->backend = svc->backend;
	job->device = device;
	job->alloc = *a;
	job->data = svc;
	job->done = pool_release_done;
	if (svc->runner.submit(svc->runner.ctx, job) < 0) {
		svc->backend->ops->release(svc->backend, device, &job->alloc);
		free(job);
	}
}

/*
 * drop takes e out of the pool: into job's drops when given (released before the job's own
 * work), else released on its own. One still being exported is only marked: park_done
 * releases it.
 */
static void drop(struct svc *svc, struct device *d, struct pool_entry *e, struct job *job)
{
	if (!e->ready) {
		e->dropped = true;
		return;
	}
	pool_unlink(&d->pool, e);
	d->pool.dropped_bytes += e->size;
	if (job) {
		backend_alloc_close_fds(&e->alloc);
		job->drops[job->ndrops++] = e->alloc;
	} else {
		release_now(svc, d->index, &e->alloc);
	}
	free(e);
}

/* drops_room gives job room for every entry of d's pool; false without memory. */
static bool drops_room(struct device *d, struct job *job)
{
	if (d->pool.count == 0)
		return false;
	job->drops = calloc(d->pool.count, sizeof(*job->drops));
	job->ndrops = 0;
	return job->drops != NULL;
}

static void park_done(struct job *job)
{
	struct park_job *p = (struct park_job *)job;
	struct svc *svc = p->svc;
	struct pool_entry *e = p->entry;
	struct device *d = &svc->state.devices[job->device];

	e->alloc = job->alloc;
	if (job->err)
		log_warn("device %u: a released lease's memory could not be pooled: %s", d->index,
			 job->why[0] ? job->why : "export failed");
	e->ready = true;
	if (job->err || e->dropped)
		drop(svc, d, e, NULL);
	if (state_holder_find(&svc->state, p->holder))
		svc_reply_ok(svc, p->holder, p->request_id);
	free(p);
}

bool svc_pool_park(struct svc *svc, struct lease *l, uint64_t request_id)
{
	struct device *d = &svc->state.devices[l->device];
	struct pool_entry *e;
	struct park_job *p;

	if (l->alloc.handle_kind != BACKEND_HANDLE_VMM_FD || pressure(svc, d) ||
	    !pool_room(&d->pool, svc_pool_limit(svc, d), l->size))
		return false;
	e = calloc(1, sizeof(*e));
	p = calloc(1, sizeof(*p));
	if (!e || !p) {
		free(e);
		free(p);
		return false;
	}
	e->holder = l->owner->id;
	e->size = l->size;
	e->alloc = l->alloc;
	adopt_lease_gone(svc, l);
	state_lease_unlink(&svc->state, l);
	device_uncharge(d, l->size);
	pool_add(&d->pool, e, svc_now(svc));
	free(l);
	if (e->alloc.kept_fds && e->alloc.nfds == e->alloc.nchunks) {
		/* Its grant's fds are still open: ready for the next grant as it is. */
		e->ready = true;
		free(p);
		svc_reply_ok(svc, e->holder, request_id);
		return true;
	}
	p->svc = svc;
	p->entry = e;
	p->holder = e->holder;
	p->request_id = request_id;
	p->job.kind = JOB_PARK;
	p->job.backend = svc->backend;
	p->job.device = d->index;
	p->job.alloc = e->alloc;
	p->job.done = park_done;
	if (svc->runner.submit(svc->runner.ctx, &p->job) < 0) {
		p->job.err = -EAGAIN;
		park_done(&p->job);
	}
	return true;
}

bool svc_pool_take(struct svc *svc, uint64_t holder, unsigned device, uint64_t size,
		   struct backend_alloc *out)
{
	struct device *d = &svc->state.devices[device];
	struct pool_entry *e = pool_find(&d->pool, holder, size);

	if (!e)
		return false;
	pool_unlink(&d->pool, e);
	d->pool.warm_grants++;
	*out = e->alloc;
	free(e);
	return true;
}

void svc_pool_make_room(struct svc *svc, unsigned device, struct job *job)
{
	struct device *d = &svc->state.devices[device];
	struct pool_entry *e, *next;

	if (held(d) <= d->budget || !drops_room(d, job))
		return;
	/* Oldest first: the memory least likely to be asked for again. */
	for (e = TAILQ_FIRST(&d->pool.entries); e && held(d) > d->budget; e = next) {
		next = TAILQ_NEXT(e, link);
		drop(svc, d, e, job);
	}
}

void svc_pool_trim(struct svc *svc, unsigned device, struct job *job)
{
	struct device *d = &svc->state.devices[device];
	struct pool_entry *e, *next;

	if (!drops_room(d, job))
		return;
	for (e = TAILQ_FIRST(&d->pool.entries); e; e = next) {
		next = TAILQ_NEXT(e, link);
		drop(svc, d, e, job);
	}
}

void svc_pool_release_drops(struct svc *svc, struct job *job)
{
	for (unsigned i = 0; i < job->ndrops; i++)
		release_now(svc, job->device, &job->drops[i]);
	free(job->drops);
	job->drops = NULL;
	job->ndrops = 0;
}

void svc_pool_check(struct svc *svc, unsigned device)
{
	struct device *d = &svc->state.devices[device];
	bool all = pressure(svc, d);
	uint64_t now = svc_now(svc);
	struct pool_entry *e, *next;

	for (e = TAILQ_FIRST(&d->pool.entries); e; e = next) {
		next = TAILQ_NEXT(e, link);
		/* Oldest first, also while the pool is above a limit lowered by a reload. */
		if (all || now - e->since_ms >= svc->pool_cfg.idle_ms ||
		    d->pool.bytes > svc_pool_limit(svc, d))
			drop(svc, d, e, NULL);
	}
}

void svc_pool_holder_gone(struct svc *svc, uint64_t holder)
{
	for (unsigned i = 0; i < svc->state.ndevices; i++) {
		struct device *d = &svc->state.devices[i];
		struct pool_entry *e, *next;

		for (e = TAILQ_FIRST(&d->pool.entries); e; e = next) {
			next = TAILQ_NEXT(e, link);
			if (e->holder == holder)
				drop(svc, d, e, NULL);
		}
	}
}

void svc_pool_finish(struct svc *svc)
{
	for (unsigned i = 0; i < svc->state.ndevices; i++) {
		struct device *d = &svc->state.devices[i];
		struct pool_entry *e;

		while ((e = TAILQ_FIRST(&d->pool.entries))) {
			pool_unlink(&d->pool, e);
			backend_alloc_close_fds(&e->alloc);
			if (svc->backend)
				svc->backend->ops->release(svc->backend, i, &e->alloc);
			free(e);
		}
	}
}
