/* SPDX-License-Identifier: MIT */
/* sampler.h: periodic reading of each device's runtime memory figures, off the event loop. */
#ifndef ROCMMEMD_SAMPLER_H
#define ROCMMEMD_SAMPLER_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "backend/backend.h"
#include "telemetry/registry.h"

/* How often devices are read when no subscriber asks for more. */
#define SAMPLER_DEFAULT_INTERVAL_MS 1000u

/* The longest PCI bus id kept. */
#define SAMPLER_PCI_MAX 32u

struct telemetry_job;

/* Where the readings go (installed by the sampler's user). */
struct sampler_hooks {
	void *ctx;
	/* usable says whether a device is worth reading (NULL: all are). */
	bool (*usable)(void *ctx, unsigned device);
	/* meminfo: the runtime's figures (err 0), or why not (-ENODEV: the device is gone). */
	void (*meminfo)(void *ctx, unsigned device, int err, const struct backend_meminfo *mi);
	/* telemetry: the hardware's readings (err 0), or that there are none now. */
	void (*telemetry)(void *ctx, unsigned device, int err, const struct telemetry_sample *t);
};

struct sampler {
	uv_loop_t *loop;
	struct backend *backend;
	struct sampler_hooks hooks;
	unsigned ndevices;
	char pci[BACKEND_MAX_DEVICES][SAMPLER_PCI_MAX]; /* each device's bus id ("": none) */
	uv_timer_t timer;
	uint64_t interval_ms;
	unsigned in_flight; /* jobs not yet done: a slow runtime never piles samples up */
	bool running;
	struct telemetry *telemetry;	     /* NULL when no source is available */
	struct telemetry_job *telemetry_job; /* in flight, or NULL */
};

/*
 * sampler_start opens a telemetry source for the backend's vendor (rocm-smi or sysfs for HIP,
 * NVML for CUDA; none for host memory) and samples each of the ndevices devices (whose bus ids
 * pci lists) now and then every interval_ms: the runtime's memory figures and the hardware
 * readings, told to hooks on the loop. Returns 0 or -errno.
 */
int sampler_start(struct sampler *s, uv_loop_t *loop, struct backend *backend,
		  const char (*pci)[SAMPLER_PCI_MAX], unsigned ndevices,
		  const struct sampler_hooks *hooks, uint64_t interval_ms);

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
