/* SPDX-License-Identifier: MIT */
/* sampler.h: periodic reading of each device's runtime memory figures, off the event loop. */
#ifndef ROCMMEMD_SAMPLER_H
#define ROCMMEMD_SAMPLER_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "platform/telemetry/registry.h"

/* How often devices are read when no subscriber asks for more. */
#define SAMPLER_DEFAULT_INTERVAL_MS 1000u

struct arbiter;
struct telemetry_job;

struct sampler {
	uv_loop_t *loop;
	struct arbiter *arbiter;
	uv_timer_t timer;
	uint64_t interval_ms;
	unsigned in_flight; /* jobs not yet done: a slow runtime never piles samples up */
	bool running;
	struct telemetry *telemetry;	     /* NULL when no source is available */
	struct telemetry_job *telemetry_job; /* in flight, or NULL */
};

/*
 * sampler_start opens a telemetry source for the backend's vendor (rocm-smi or sysfs for HIP,
 * NVML for CUDA; none for host memory) and samples every device now and then every
 * interval_ms: the runtime's memory figures and the hardware readings. Returns 0 or -errno.
 */
int sampler_start(struct sampler *s, uv_loop_t *loop, struct arbiter *a, uint64_t interval_ms);

/*
 * sampler_set_interval changes how often devices are read (from the next reading on): the
 * telemetry feed asks for more while subscribers sample fast, and for the default again after.
 */
void sampler_set_interval(struct sampler *s, uint64_t interval_ms);

/* sampler_stop stops the timer; jobs in flight complete harmlessly. */
void sampler_stop(struct sampler *s);

/* sampler_finish closes the telemetry source; after the loop has run out. */
void sampler_finish(struct sampler *s);

#endif
