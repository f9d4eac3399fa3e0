/* SPDX-License-Identifier: MIT */
/* cuda_api.c: finding and loading the CUDA driver (libcuda.so.1) at run time. */
#include "cuda_api.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

_Static_assert(sizeof(struct cuapi_alloc_prop) == 32, "CUmemAllocationProp is 32 bytes");
_Static_assert(sizeof(struct cuapi_access_desc) == 12, "CUmemAccessDesc is 12 bytes");

static void close_uninitialised(struct cuapi *api);

static bool try_open(struct cuapi *api, const char *path, char *why, size_t why_len)
{
	api->lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!api->lib) {
		const char *e = dlerror();

		snprintf(why, why_len, "%s", e ? e : path);
		return false;
	}
	snprintf(api->path, sizeof(api->path), "%s", path);
	return true;
}

int cuapi_load(struct cuapi *api, char *why, size_t why_len)
{
	const char *forced = getenv(CUAPI_LIBRARY_ENV);
	cuapi_result_t err;
	int count = 0;

	memset(api, 0, sizeof(*api));
	if (forced && forced[0]) {
		if (!try_open(api, forced, why, why_len))
			return -ENOENT;
	} else if (!try_open(api, "libcuda.so.1", why, why_len) &&
		   !try_open(api, "libcuda.so", why, why_len)) {
		snprintf(why, why_len,
			 "libcuda.so.1 not found (no NVIDIA driver; set %s to choose a library)",
			 CUAPI_LIBRARY_ENV);
		return -ENOENT;
	}
#define CUAPI_LOOKUP(symbol, field, required, ret, params)                                 \
	*(void **)&api->field = dlsym(api->lib, #symbol);                                  \
	if (!api->field && (required)) {                                                   \
		snprintf(why, why_len, "%s lacks %s: not a usable CUDA driver", api->path, \
			 #symbol);                                                         \
		close_uninitialised(api);                                                  \
		return -ENOSYS;                                                            \
	}
	CUAPI_FUNCTIONS(CUAPI_LOOKUP)
#undef CUAPI_LOOKUP
	err = api->cuInit(0);
	if (err != CUAPI_SUCCESS) {
		char name[96];

		snprintf(why, why_len, "cuInit failed: %s",
			 cuapi_strerror(api, err, name, sizeof(name)));
		cuapi_unload(api);
		return -ENODEV;
	}
	if (api->cuDriverGetVersion(&api->driver_version) != CUAPI_SUCCESS ||
	    api->driver_version < CUAPI_MIN_VERSION) {
		snprintf(why, why_len,
			 "CUDA driver version %d is older than 11.0, the oldest supported",
			 api->driver_version);
		cuapi_unload(api);
		return -EPROTONOSUPPORT;
	}
	if (api->cuDeviceGetCount(&count) != CUAPI_SUCCESS || count <= 0) {
		snprintf(why, why_len, "the CUDA driver %s sees no device", api->path);
		cuapi_unload(api);
		return -ENODEV;
	}
	return 0;
}

void cuapi_unload(struct cuapi *api)
{
	/*
	 * Once cuInit has run, the runtime has threads and exit handlers of its own that do not
	 * survive dlclose: it stays loaded until the process exits.
	 */
	memset(api, 0, sizeof(*api));
}

/* close_uninitialised undoes a load that failed before the runtime was initialised. */
static void close_uninitialised(struct cuapi *api)
{
	if (api->lib)
		dlclose(api->lib);
	memset(api, 0, sizeof(*api));
}

const char *cuapi_strerror(const struct cuapi *api, cuapi_result_t err, char *buf, size_t len)
{
	const char *name = NULL;

	if (api && api->cuGetErrorString)
		api->cuGetErrorString(err, &name);
	snprintf(buf, len, "%s (%d)", name ? name : "CUDA error", err);
	return buf;
}

int cuapi_errno(cuapi_result_t err)
{
	switch (err) {
	case CUAPI_SUCCESS:
		return 0;
	case CUAPI_ERROR_OUT_OF_MEMORY:
		return -ENOMEM;
	case CUAPI_ERROR_INVALID_VALUE:
		return -EINVAL;
	case CUAPI_ERROR_NO_DEVICE:
	case CUAPI_ERROR_INVALID_DEVICE:
		return -ENODEV;
	case CUAPI_ERROR_NOT_SUPPORTED:
		return -EOPNOTSUPP;
	default:
		return -EIO;
	}
}
