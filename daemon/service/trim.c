/* SPDX-License-Identifier: MIT */
/* trim.c: asking the backend to return cached memory: for a client, or by itself when tight. */
#include "trim.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "arena.h"
#include "pool.h"
#include "reply.h"
#include "size.h"

/* A trim request, possibly spanning several devices, answered when all are done. */
struct trim_request {
	struct svc *svc;
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

static void trim_answer(struct trim_request *t)
{
	struct svc *svc = t->svc;
	struct holder *h = t->holder ? state_holder_find(&svc->state, t->holder) : NULL;

	if (h) {
		h->jobs--;
		if (t->err) {
			svc_reply_error(svc, h->id, t->request_id, t->err, "trim failed: %s",
					strerror(-t->err));
		} else {
			struct svc_reply r = {.kind = SVC_TRIM, .bytes = t->released};

			svc_reply(svc, h->id, t->request_id, &r);
		}
	}
	free(t);
}

static void trim_done(struct job *job)
{
	struct trim_job *tj = (struct trim_job *)job;
	struct trim_request *t = tj->request;
	struct svc *svc = t->svc;
	struct device *d = &svc->state.devices[job->device];
	struct bus_event e = {.type = BUS_TRIM_DONE,
			      .holder =
				  t->holder ? state_holder_find(&svc->state, t->holder) : NULL,
			      .has_device = true,
			      .device = d->index,
			      .bytes = job->released};
	char sz[SIZE_FORMAT_MAX];

	d->trimming = false;
	free(job->drops);
	if (job->err && job->err != -ENOTSUP)
		t->err = job->err;
	t->released += job->released;
	/* A trim that found nothing is worth a line only when debugging. */
	bus_emitf(&svc->bus, &e, job->released ? LOG_LEVEL_INFO : LOG_LEVEL_DEBUG,
		  "trimmed %s on device %u%s", size_format(job->released, sz, sizeof(sz)), d->index,
		  t->holder ? " on request" : "");
	free(tj);
	if (--t->pending == 0)
		trim_answer(t);
	/* What came back may be what a waiter needs. */
	svc->pump(svc);
}

static void trim_device(struct trim_request *t, struct device *d)
{
	struct svc *svc = t->svc;
	struct trim_job *tj = calloc(1, sizeof(*tj));

	if (!tj) {
		t->err = -ENOMEM;
		return;
	}
	tj->request = t;
	tj->job.kind = JOB_TRIM;
	tj->job.backend = svc->backend;
	tj->job.device = d->index;
	tj->job.done = trim_done;
	d->trimming = true;
	t->pending++;
	/* The pool is cached memory too, the daemon's own: a trim returns it first. */
	svc_pool_trim(svc, d->index, &tj->job);
	if (svc->runner.submit(svc->runner.ctx, &tj->job) < 0) {
		svc_pool_release_drops(svc, &tj->job);
		d->trimming = false;
		t->pending--;
		t->err = -EAGAIN;
		free(tj);
	}
}

static struct trim_request *trim_request_new(struct svc *svc, struct holder *h, uint64_t request_id)
{
	struct trim_request *t = calloc(1, sizeof(*t));

	if (!t)
		return NULL;
	t->svc = svc;
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

void svc_trim_start(struct svc *svc, uint64_t holder, uint64_t request_id, bool all,
		    unsigned device)
{
	struct holder *h = holder ? state_holder_find(&svc->state, holder) : NULL;
	struct trim_request *t = trim_request_new(svc, h, request_id);

	if (!t) {
		svc_reply_error(svc, holder, request_id, -ENOMEM, "the daemon is out of memory");
		return;
	}
	for (unsigned i = 0; i < svc->state.ndevices; i++) {
		struct device *d = &svc->state.devices[i];

		/* Released arena ranges kept warm are the client's cache: a trim empties it. */
		if (all || i == device)
			svc_arenas_cool_device(svc, i);
		if ((all || i == device) && !d->lost && !d->trimming)
			trim_device(t, d);
	}
	trim_request_submitted(t);
}

/*
 * svc_auto_trim: runtimes cache freed memory that only a trim returns to the driver, and to
 * processes outside rocmmemd; one trim at a time.
 */
void svc_auto_trim(struct svc *svc, unsigned device)
{
	bool can_trim = svc->backend->ops->trim && svc->backend->ops->blocking;
	struct policy_decision d;
	struct trim_request *t;

	policy_auto_trim(&svc->state, &svc->cfg, device, can_trim, &d);
	if (d.verdict != POLICY_TRIM)
		return;
	t = trim_request_new(svc, NULL, 0);
	if (!t)
		return;
	trim_device(t, &svc->state.devices[device]);
	trim_request_submitted(t);
}
