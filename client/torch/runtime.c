/* SPDX-License-Identifier: MIT */
/* runtime.c: the GPU runtime calls of the allocator, through rocmmem's own loaders. */
#include "runtime.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "cuda_api.h"
#include "hip_api.h"

/* Loaded once per process and kept: a runtime that has initialised is never unloaded. */
static pthread_mutex_t load_lock = PTHREAD_MUTEX_INITIALIZER;
static struct hipapi hip;
static struct cuapi cuda;
static int hip_state, cuda_state; /* 0 not tried, 1 loaded, < 0 the error */
static char hip_why[256], cuda_why[256];

/* Not in the loaders' tables (the daemon never needs them): looked up here, may be NULL. */
static hipapi_error_t (*hip_get_device)(int *device);
static cuapi_result_t (*cu_ctx_get_current)(cuapi_ctx_t *ctx);

int runtime_load(enum torch_backend backend, char *why, size_t why_len)
{
	int rc = 0;

	if (backend == TORCH_BACKEND_HOST)
		return 0;
	pthread_mutex_lock(&load_lock);
	if (backend == TORCH_BACKEND_HIP) {
		if (hip_state == 0) {
			hip_state = hipapi_load(&hip, hip_why, sizeof(hip_why)) ? -ENODEV : 1;
			if (hip_state > 0)
				*(void **)&hip_get_device = dlsym(hip.lib, "hipGetDevice");
		}
		if (hip_state < 0)
			snprintf(why, why_len, "%s", hip_why);
		rc = hip_state < 0 ? hip_state : 0;
	} else {
		if (cuda_state == 0) {
			cuda_state = cuapi_load(&cuda, cuda_why, sizeof(cuda_why)) ? -ENODEV : 1;
			if (cuda_state > 0)
				*(void **)&cu_ctx_get_current = dlsym(cuda.lib, "cuCtxGetCurrent");
		}
		if (cuda_state < 0)
			snprintf(why, why_len, "%s", cuda_why);
		rc = cuda_state < 0 ? cuda_state : 0;
	}
	pthread_mutex_unlock(&load_lock);
	return rc;
}

int runtime_bus_id(enum torch_backend backend, int ordinal, char *buf, size_t len)
{
	int n = len > 1024 ? 1024 : (int)len;

	buf[0] = '\0';
	if (backend == TORCH_BACKEND_HIP) {
		if (hip_state > 0 && hip.hipDeviceGetPCIBusId(buf, n, ordinal) == HIPAPI_SUCCESS)
			return 0;
	} else if (backend == TORCH_BACKEND_CUDA) {
		cuapi_device_t dev;

		if (cuda_state > 0 && cuda.cuDeviceGet(&dev, ordinal) == CUAPI_SUCCESS &&
		    cuda.cuDeviceGetPCIBusId(buf, n, dev) == CUAPI_SUCCESS)
			return 0;
	}
	buf[0] = '\0';
	return -ENODEV;
}

bool runtime_same_bus_id(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);

	if (la == 0 || lb == 0)
		return false;
	/* Runtimes print the domain or not: "0000:03:00.0" is "03:00.0". */
	if (la > lb && la - lb == 5 && strncmp(a, "0000:", 5) == 0)
		a += 5;
	else if (lb > la && lb - la == 5 && strncmp(b, "0000:", 5) == 0)
		b += 5;
	return strcasecmp(a, b) == 0;
}

void runtime_save(enum torch_backend backend, struct runtime_saved *saved)
{
	memset(saved, 0, sizeof(*saved));
	if (backend == TORCH_BACKEND_HIP && hip_state > 0 && hip_get_device)
		saved->valid = hip_get_device(&saved->device) == HIPAPI_SUCCESS;
	else if (backend == TORCH_BACKEND_CUDA && cuda_state > 0 && cu_ctx_get_current)
		saved->valid = cu_ctx_get_current((cuapi_ctx_t *)&saved->ctx) == CUAPI_SUCCESS;
}

void runtime_restore(enum torch_backend backend, const struct runtime_saved *saved)
{
	if (!saved->valid)
		return;
	if (backend == TORCH_BACKEND_HIP)
		hip.hipSetDevice(saved->device);
	else if (backend == TORCH_BACKEND_CUDA)
		cuda.cuCtxSetCurrent((cuapi_ctx_t)saved->ctx);
}

int runtime_sync(enum torch_backend backend, int ordinal)
{
	if (backend == TORCH_BACKEND_HIP && hip_state > 0) {
		if (hip.hipSetDevice(ordinal) != HIPAPI_SUCCESS ||
		    hip.hipDeviceSynchronize() != HIPAPI_SUCCESS)
			return -EIO;
	} else if (backend == TORCH_BACKEND_CUDA && cuda_state > 0) {
		cuapi_device_t dev;
		cuapi_ctx_t ctx;
		cuapi_result_t err;

		/* The device's primary context, PyTorch's: whichever the thread has current. */
		if (cuda.cuDeviceGet(&dev, ordinal) != CUAPI_SUCCESS ||
		    cuda.cuDevicePrimaryCtxRetain(&ctx, dev) != CUAPI_SUCCESS)
			return -EIO;
		cuda.cuCtxSetCurrent(ctx);
		err = cuda.cuCtxSynchronize();
		cuda.cuDevicePrimaryCtxRelease(dev);
		if (err != CUAPI_SUCCESS)
			return -EIO;
	}
	return 0;
}
