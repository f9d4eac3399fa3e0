/* SPDX-License-Identifier: MIT */
/* gpuclient.c: a client process that leases device memory, writes and reads it on the GPU. */
#include "gpuclient.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cuda_api.h"
#include "hip_api.h"
#include "rocmmem.h"

/* As HARNESS_WAIT_MS: generous, a wait ends as soon as the client answers. */
#define GPU_CLIENT_WAIT_MS 60000

#define SAMPLE ((size_t)32 << 20)
#define TAIL ((size_t)1 << 20)

static void report(int out, int64_t result, int64_t step, const rocmmem_lease *l)
{
	pipe_put(out, result);
	pipe_put(out, step);
	pipe_put(out, l ? (int64_t)rocmmem_lease_handle_kind(l) : 0);
	pipe_put(out, l ? (int64_t)rocmmem_lease_chunk_count(l) : 0);
	pipe_put(out, l ? (int64_t)rocmmem_lease_id(l) : 0);
}

/* copy moves bytes host <-> device with the runtime the lease came from. */
static int copy(const struct gpu_job *job, struct hipapi *hip, struct cuapi *cuda, void *dst,
		const void *src, size_t n, bool to_device)
{
	if (job->cuda) {
		cuapi_ctx_t ctx;
		cuapi_device_t dev;
		int rc = cuda->cuDeviceGet(&dev, (int)job->device);

		if (rc == 0)
			rc = cuda->cuDevicePrimaryCtxRetain(&ctx, dev);
		if (rc == 0)
			rc = cuda->cuCtxSetCurrent(ctx);
		if (rc == 0)
			rc = to_device
				 ? cuda->cuMemcpyHtoD((cuapi_deviceptr_t)(uintptr_t)dst, src, n)
				 : cuda->cuMemcpyDtoH(dst, (cuapi_deviceptr_t)(uintptr_t)src, n);
		return rc ? -EIO : 0;
	}
	hip->hipSetDevice((int)job->device);
	return hip->hipMemcpy(dst, src, n,
			      to_device ? HIPAPI_MEMCPY_HOST_TO_DEVICE
					: HIPAPI_MEMCPY_DEVICE_TO_HOST) == HIPAPI_SUCCESS
		   ? 0
		   : -EIO;
}

/* verify writes the pattern to the head and tail of the lease and reads it back. */
static int verify(const struct gpu_job *job, struct hipapi *hip, struct cuapi *cuda,
		  const rocmmem_lease *l, uint64_t *pattern, uint64_t *back, int64_t *step)
{
	size_t n = (size_t)job->size;

	/* The head and the tail of the lease: across chunk boundaries when there are some. */
	for (int part = 0; part < 2; part++) {
		size_t len = part == 0 ? (n < SAMPLE ? n : SAMPLE) : (n < TAIL ? n : TAIL);
		char *dev = (char *)rocmmem_lease_ptr(l) + (part == 0 ? 0 : n - len);

		memset(back, 0, len);
		if (copy(job, hip, cuda, dev, pattern, len, true)) {
			*step = GPU_STEP_WRITE;
			return -EIO;
		}
		if (copy(job, hip, cuda, back, dev, len, false)) {
			*step = GPU_STEP_READ;
			return -EIO;
		}
		if (memcmp(pattern, back, len) != 0) {
			*step = GPU_STEP_VERIFY;
			return -EBADMSG;
		}
	}
	return 0;
}

/* reconnected dispatches until the connection is back (up to 10 s): 0 or -ETIMEDOUT. */
static int reconnected(rocmmem_client *c)
{
	/* What the host sees on its event fd first: the end of the old connection. */
	rocmmem_dispatch(c);
	if (rocmmem_client_state(c) != ROCMMEM_RECONNECTING)
		return -ENOTCONN;
	for (int i = 0; i < 200 && rocmmem_client_state(c) != ROCMMEM_CONNECTED; i++) {
		struct pollfd p = {.fd = rocmmem_event_fd(c), .events = POLLIN};

		if (poll(&p, 1, 50) > 0)
			rocmmem_dispatch(c);
	}
	return rocmmem_client_state(c) == ROCMMEM_CONNECTED ? 0 : -ETIMEDOUT;
}

int gpu_client_run(void *arg, int in, int out)
{
	const struct gpu_job *job = arg;
	struct rocmmem_lease_request req = {.struct_size = sizeof(req),
					    .device = job->device,
					    .size = job->size,
					    .timeout_ms = job->timeout_ms};
	struct hipapi hip;
	struct cuapi cuda;
	rocmmem_client *c = NULL;
	rocmmem_lease *l = NULL;
	uint64_t *pattern, *back;

	char why[256];
	int64_t go = 0, step = 0;
	int err;

	err = rocmmem_connect(job->socket, "gpu-client", 5000, &c);
	if (err) {
		report(out, err, GPU_STEP_CONNECT, NULL);
		return 0;
	}
	err = rocmmem_lease_acquire(c, &req, &l);
	if (err) {
		fprintf(stderr, "gpu client: %s\n", rocmmem_last_error());
		report(out, err, GPU_STEP_ACQUIRE, NULL);
		rocmmem_disconnect(c);
		return 0;
	}
	/* The same runtime librocmmem loaded for the import: dlopen finds it loaded. */
	err = job->cuda ? cuapi_load(&cuda, why, sizeof(why)) : hipapi_load(&hip, why, sizeof(why));
	if (err) {
		fprintf(stderr, "gpu client: %s\n", why);
		report(out, err, GPU_STEP_RUNTIME, l);
		return 0;
	}
	pattern = malloc(SAMPLE);
	back = malloc(SAMPLE);
	if (!pattern || !back)
		return 50;
	for (size_t i = 0; i < SAMPLE / sizeof(uint64_t); i++)
		pattern[i] = (i * 0x9e3779b97f4a7c15ull) ^ (uint64_t)getpid();
	err = verify(job, &hip, &cuda, l, pattern, back, &step);
	if (err) {
		report(out, err, step, l);
		return 0;
	}
	report(out, 0, GPU_STEP_DONE, l);
	/* Commands: 1 release and exit; 2 verify the memory again and report; 3 the same once
	 * the library has reconnected to a restarted daemon, dispatching as a host would. */
	while (pipe_get(in, &go, 60000) && (go == 2 || go == 3)) {
		err = go == 3 ? reconnected(c) : 0;
		step = GPU_STEP_CONNECT;
		if (!err)
			err = verify(job, &hip, &cuda, l, pattern, back, &step);
		report(out, err, err ? step : GPU_STEP_DONE, l);
	}
	free(pattern);
	free(back);
	if (go != 1)
		return 51;
	err = rocmmem_lease_release(l);
	rocmmem_disconnect(c);
	return err ? 52 : 0;
}

bool gpu_client_report(struct child *c, struct gpu_report *r, long timeout_ms)
{
	return pipe_get(c->from_child, &r->result, timeout_ms) &&
	       pipe_get(c->from_child, &r->step, timeout_ms) &&
	       pipe_get(c->from_child, &r->kind, timeout_ms) &&
	       pipe_get(c->from_child, &r->chunks, timeout_ms) &&
	       pipe_get(c->from_child, &r->lease_id, timeout_ms);
}

int gpu_client_release(struct child *c)
{
	pipe_put(c->to_child, 1);
	return child_wait(c, GPU_CLIENT_WAIT_MS);
}

bool gpu_client_verify(struct child *c, struct gpu_report *r)
{
	return pipe_put(c->to_child, 2) && gpu_client_report(c, r, GPU_CLIENT_WAIT_MS);
}

bool gpu_client_reconnect(struct child *c, struct gpu_report *r)
{
	return pipe_put(c->to_child, 3) && gpu_client_report(c, r, GPU_CLIENT_WAIT_MS);
}
