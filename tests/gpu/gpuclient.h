/* SPDX-License-Identifier: MIT */
/* gpuclient.h: GPU test clients: child processes that lease device memory and use it. */
#ifndef ROCMMEM_TEST_GPUCLIENT_H
#define ROCMMEM_TEST_GPUCLIENT_H

#include <stdbool.h>
#include <stdint.h>

#include "proc.h"

/*
 * What one client does: lease size bytes on device, write a pattern on the device through
 * the runtime and read it back (the first 32 MiB and the last 1 MiB of the lease: proof that
 * the whole range is mapped, without copying gigabytes), report, then hold until told to
 * release.
 */
struct gpu_job {
	const char *socket;
	unsigned device;
	uint64_t size;
	int64_t timeout_ms;
	bool cuda; /* copy with the CUDA driver, else HIP */
};

/* Reports a client writes to its pipe, in order. */
struct gpu_report {
	int64_t result; /* 0, or the negative errno of the failed step */
	int64_t step;	/* GPU_STEP_* where it failed */
	int64_t kind;	/* ROCMMEM_HANDLE_* of the lease */
	int64_t chunks; /* VMM chunks */
	int64_t lease_id;
};

enum {
	GPU_STEP_CONNECT = 1,
	GPU_STEP_ACQUIRE,
	GPU_STEP_RUNTIME,
	GPU_STEP_WRITE,
	GPU_STEP_READ,
	GPU_STEP_VERIFY,
	GPU_STEP_DONE,
};

/* gpu_client_run is the child body for child_start: arg is a struct gpu_job. */
int gpu_client_run(void *arg, int in, int out);

/* gpu_client_report reads a client's report (up to timeout_ms). Returns false on timeout. */
bool gpu_client_report(struct child *c, struct gpu_report *r, long timeout_ms);

/* gpu_client_release tells a client to release its lease and waits for its exit status. */
int gpu_client_release(struct child *c);

/* gpu_client_verify has a client write and read its lease again; returns its report. */
bool gpu_client_verify(struct child *c, struct gpu_report *r);

/*
 * gpu_client_reconnect has a client dispatch until it has reconnected to a restarted daemon
 * (result -ETIMEDOUT, step GPU_STEP_CONNECT if it did not), then verify its lease again.
 */
bool gpu_client_reconnect(struct child *c, struct gpu_report *r);

#endif
