/* SPDX-License-Identifier: MIT */
/* job.h: one backend operation with its inputs and results, and running it. */
#ifndef ROCMMEMD_JOB_H
#define ROCMMEMD_JOB_H

#include <stdint.h>

#include "platform/backend/backend.h"

enum job_kind {
	JOB_ALLOC,
	JOB_RELEASE,
	JOB_TRIM,
	JOB_MEMINFO,
	JOB_ADOPT, /* alloc holds the re-declared memory in, the adopted allocation out */
	JOB_PARK,  /* alloc's memory exported again (backend reexport) for the chunk pool */
};

struct job;
typedef void (*job_done_fn)(struct job *job);

/* One backend operation with its inputs and results. The submitter allocates it; `done`
 * runs on the loop thread (job_uv.h) and usually frees it. */
struct job {
	enum job_kind kind;
	struct backend *backend;
	unsigned device;
	uint64_t size;			/* JOB_ALLOC */
	char label[48];			/* JOB_ALLOC */
	struct backend_alloc alloc;	/* JOB_ALLOC result, JOB_RELEASE input */
	uint64_t released;		/* JOB_TRIM result */
	struct backend_meminfo meminfo; /* JOB_MEMINFO result */
	int err;
	char why[256];
	job_done_fn done;
	void *data;
	/* JOB_ALLOC and JOB_TRIM: pooled allocations to release first (their fds closed), so
	 * that the runtime has their memory back before allocating or trimming; a trim counts
	 * them in `released`. The submitter owns the array. */
	struct backend_alloc *drops;
	unsigned ndrops;
};

/*
 * job_run performs the operation here and now (it may block: a GPU runtime's call); the
 * results go into the job. `done` is not called.
 */
void job_run(struct job *job);

#endif
