/* SPDX-License-Identifier: MIT */
/* job.c: one backend operation, performed. */
#include "job.h"

#include <errno.h>
#include <string.h>

void job_run(struct job *j)
{
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
