/* SPDX-License-Identifier: MIT */
/* job.c: one backend operation, performed. */
#include "job.h"

#include <errno.h>
#include <string.h>

/* release_drops releases the pooled allocations the job carries; returns their bytes. */
static uint64_t release_drops(struct job *j)
{
	uint64_t bytes = 0;

	for (unsigned i = 0; i < j->ndrops; i++) {
		backend_alloc_close_fds(&j->drops[i]);
		j->backend->ops->release(j->backend, j->device, &j->drops[i]);
		bytes += j->drops[i].size;
	}
	return bytes;
}

void job_run(struct job *j)
{
	const struct backend_ops *ops = j->backend->ops;
	uint64_t dropped = release_drops(j);

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
		j->released += dropped;
		break;
	case JOB_PARK:
		j->err = ops->reexport ? ops->reexport(j->backend, j->device, &j->alloc, j->why,
						       sizeof(j->why))
				       : -EOPNOTSUPP;
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
