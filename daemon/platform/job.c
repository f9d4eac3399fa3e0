/* SPDX-License-Identifier: MIT */
/* job.c: backend operations on libuv's worker threads, completed on the loop thread. */
#include "job.h"

#include <errno.h>
#include <string.h>

/* run performs the operation; on a worker thread for blocking backends. */
static void run(uv_work_t *work)
{
	struct job *j = work->data;
	const struct backend_ops *ops = j->backend->ops;

	j->err = 0;
	j->why[0] = '\0';
	switch (j->kind) {
	case JOB_ALLOC:
		j->err = ops->alloc(j->backend, j->device, j->size, j->label, &j->alloc, j->why,
				    sizeof(j->why));
		break;
	case JOB_RELEASE:
		ops->release(j->backend, j->device, &j->alloc);
		break;
	case JOB_TRIM:
		j->released = 0;
		j->err = ops->trim ? ops->trim(j->backend, j->device, &j->released) : 0;
		break;
	case JOB_ADOPT:
		if (!ops->adopt) {
			backend_alloc_close_fds(&j->alloc);
			j->err = -EOPNOTSUPP;
			break;
		}
		j->err = ops->adopt(j->backend, j->device, &j->alloc, j->why, sizeof(j->why));
		break;
	case JOB_MEMINFO:
		memset(&j->meminfo, 0, sizeof(j->meminfo));
		j->err = ops->meminfo ? ops->meminfo(j->backend, j->device, &j->meminfo) : -ENOTSUP;
		break;
	}
}

static void after(uv_work_t *work, int status)
{
	struct job *j = work->data;

	if (status == UV_ECANCELED)
		j->err = -ECANCELED;
	j->done(j);
}

int job_submit(uv_loop_t *loop, struct job *j)
{
	j->work.data = j;
	if (!j->backend->ops->blocking) {
		run(&j->work);
		j->done(j);
		return 0;
	}
	return uv_queue_work(loop, &j->work, run, after);
}
