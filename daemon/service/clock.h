/* SPDX-License-Identifier: MIT */
/* clock.h: the time the service runs on, as its user gives it (the event loop, or a simulation). */
#ifndef ROCMMEMD_CLOCK_H
#define ROCMMEMD_CLOCK_H

#include <stdint.h>

struct svc_clock {
	void *ctx;
	/* Monotonic milliseconds: deadlines, waits, ages. */
	uint64_t (*mono_ms)(void *ctx);
	/* Wall-clock milliseconds since the epoch: what events and denials carry. */
	uint64_t (*real_ms)(void *ctx);
};

#endif
