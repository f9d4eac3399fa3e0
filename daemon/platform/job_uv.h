/* SPDX-License-Identifier: MIT */
/* job_uv.h: backend jobs on libuv's worker threads when the backend may block, completed on the
 * loop. */
#ifndef ROCMMEMD_JOB_UV_H
#define ROCMMEMD_JOB_UV_H

#include <uv.h>

#include "job.h"

/*
 * job_uv_submit runs job: on a libuv worker thread when its backend may block, else at once.
 * `done` is called on the loop thread in both cases (synchronously, before job_uv_submit
 * returns, for a non-blocking backend; with err -ECANCELED if the loop cancelled the work).
 * ctx is the loop. Returns 0, or a negative errno when the work could not be queued (done is
 * then not called).
 */
int job_uv_submit(void *ctx, struct job *job);

#endif
