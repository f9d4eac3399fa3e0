/* SPDX-License-Identifier: MIT */
/*
 * runner.c: the simulator's job runner: every backend job the service submits waits here until
 * the simulator completes it, in order or out of it, now and then with a failure (-ENOMEM, or
 * -ENODEV: the device is gone). What the jobs hold on each device is kept for the books'
 * invariant (checks.c).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"

static int submit(void *ctx, struct job *job)
{
	struct world *w = ctx;

	if (w->njobs == w->jobs_cap) {
		size_t cap = w->jobs_cap ? w->jobs_cap * 2 : 256;
		struct job **jobs = realloc(w->jobs, cap * sizeof(*jobs));

		if (!jobs)
			return -ENOMEM;
		w->jobs = jobs;
		w->jobs_cap = cap;
	}
	w->jobs[w->njobs++] = job;
	if (job->kind == JOB_ALLOC)
		w->allocating[job->device] += job->size;
	else if (job->kind == JOB_RELEASE)
		w->releasing[job->device] += job->alloc.size;
	return 0;
}

void runner_init(struct world *w)
{
	w->runner.ctx = w;
	w->runner.submit = submit;
}

/* fill_alloc makes the allocation the backend would have made. */
static void fill_alloc(struct world *w, struct job *job)
{
	memset(&job->alloc, 0, sizeof(job->alloc));
	job->alloc.handle_kind = BACKEND_HANDLE_VMM_FD;
	job->alloc.size = job->size;
	job->alloc.transient_fds = true;
	job->alloc.nchunks = 1;
	job->alloc.chunk_sizes[0] = job->size;
	if (rng_chance(&w->rng, 10000)) {
		job->err = -ENOMEM;
		snprintf(job->why, sizeof(job->why), "the simulated device is out of memory");
		w->stats.job_failures++;
	} else if (w->step >= w->opt.lose_after && !w->device_lost &&
		   job->device == w->opt.devices - 1 && rng_chance(&w->rng, 200)) {
		job->err = -ENODEV;
		snprintf(job->why, sizeof(job->why), "the simulator took the device away");
		w->device_lost = true;
		w->stats.job_failures++;
	}
}

void runner_complete(struct world *w, bool random_one)
{
	size_t i;
	struct job *job;

	if (w->njobs == 0)
		return;
	i = random_one ? rng_below(&w->rng, w->njobs) : 0;
	job = w->jobs[i];
	memmove(&w->jobs[i], &w->jobs[i + 1], (w->njobs - i - 1) * sizeof(*w->jobs));
	w->njobs--;
	job->err = 0;
	job->why[0] = '\0';
	switch (job->kind) {
	case JOB_ALLOC:
		w->allocating[job->device] -= job->size;
		fill_alloc(w, job);
		break;
	case JOB_RELEASE:
		w->releasing[job->device] -= job->alloc.size;
		break;
	case JOB_TRIM:
		job->released = 0;
		break;
	default:
		break;
	}
	w->stats.jobs++;
	sim_trace(w, "job %d on device %u done (%d)", (int)job->kind, job->device, job->err);
	job->done(job);
}

void runner_finish(struct world *w)
{
	free(w->jobs);
	w->jobs = NULL;
	w->njobs = w->jobs_cap = 0;
}
