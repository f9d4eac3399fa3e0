/* SPDX-License-Identifier: MIT */
/*
 * hooks.h: how the parts meet at run time: the event loop's clock and workers for the
 * service, the sampler's readings into the service, the books summed up for systemd.
 */
#ifndef ROCMMEMD_HOOKS_H
#define ROCMMEMD_HOOKS_H

#include <uv.h>

#include "platform/sampler.h"
#include "platform/systemd.h"
#include "service/svc.h"

struct server;

/* hooks_clock is the loop's time (monotonic) and the wall clock, for the service. */
struct svc_clock hooks_clock(uv_loop_t *loop);

/* hooks_runner runs the service's backend jobs on the loop's workers (platform/job_uv.h). */
struct job_runner hooks_runner(uv_loop_t *loop);

/* hooks_sampler hands the sampler's readings to the service (usable: not lost). */
struct sampler_hooks hooks_sampler(struct svc *svc);

/* hooks_systemd sums the server's connections and the service's books for the status line. */
struct systemd_source hooks_systemd(struct server *s);

#endif
