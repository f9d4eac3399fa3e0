/* SPDX-License-Identifier: MIT */
/* job.h: running backend operations off the event loop when they may block. */
#ifndef ROCMMEMD_JOB_H
#define ROCMMEMD_JOB_H

#include <stdint.h>
#include <uv.h>

#include "platform/backend/backend.h"

enum job_kind {
	JOB_ALLOC,
	JOB_RELEASE,
	JOB_TRIM,
	JOB_MEMINFO,
	JOB_ADOPT, /* alloc holds the re-declared memory in, the adopted allocation out */
};

struct job;
typedef void (*job_done_fn)(struct job *job);

/* One backend operation with its inputs and results. The submitter allocates it; `done`
 * runs on the loop thread and usually frees it. */
struct job {
	uv_work_t work;
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
};

/*
 * job_submit runs the job: on a libuv worker thread when the backend may block, else at once.
 * `done` is called on the loop thread in both cases (synchronously, before job_submit
 * returns, for a non-blocking backend). Returns 0, or a negative errno when the work could
 * not be queued (done is then not called).
 */
int job_submit(uv_loop_t *loop, struct job *job);

#endif
