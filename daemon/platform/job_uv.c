/* SPDX-License-Identifier: MIT */
/* job_uv.c: backend jobs on libuv's worker threads when the backend may block, completed on the
 * loop. */
#include "job_uv.h"

#include <errno.h>
#include <stdlib.h>

/* A job on its way through libuv's thread pool. */
struct uv_job {
	uv_work_t work;
	struct job *job;
};

static void work(uv_work_t *w)
{
	job_run(((struct uv_job *)w->data)->job);
}

static void after(uv_work_t *w, int status)
{
	struct uv_job *u = w->data;
	struct job *j = u->job;

	free(u);
	if (status == UV_ECANCELED)
		j->err = -ECANCELED;
	j->done(j);
}

int job_uv_submit(void *ctx, struct job *j)
{
	struct uv_job *u;
	int err;

	if (!j->backend->ops->blocking) {
		job_run(j);
		j->done(j);
		return 0;
	}
	u = malloc(sizeof(*u));
	if (!u)
		return -ENOMEM;
	u->work.data = u;
	u->job = j;
	err = uv_queue_work(ctx, &u->work, work, after);
	if (err)
		free(u);
	return err;
}
