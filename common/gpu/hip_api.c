/* SPDX-License-Identifier: MIT */
/* hip_api.c: finding and loading libamdhip64 at run time, and its version conventions. */
#include "hip_api.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Stable sizes (ROCM_FACTS.md): a mismatch here would corrupt every call that passes them. */
_Static_assert(sizeof(struct hipapi_ipc_handle) == 64, "hipIpcMemHandle_t is 64 bytes");
_Static_assert(sizeof(struct hipapi_alloc_prop) == 32, "hipMemAllocationProp is 32 bytes");
_Static_assert(sizeof(struct hipapi_access_desc) == 12, "hipMemAccessDesc is 12 bytes");

/* try_open dlopens one candidate; false (and the reason kept) when it is not there. */
static void close_uninitialised(struct hipapi *api);

static bool try_open(struct hipapi *api, const char *path, char *why, size_t why_len)
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

static bool open_library(struct hipapi *api, char *why, size_t why_len)
{
	static const char *const names[] = {"libamdhip64.so", "libamdhip64.so.7",
					    "libamdhip64.so.6", "libamdhip64.so.5"};
	const char *forced = getenv(HIPAPI_LIBRARY_ENV), *rocm = getenv("ROCM_PATH");
	char path[512];

	if (forced && forced[0])
		return try_open(api, forced, why, why_len);
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (try_open(api, names[i], why, why_len))
			return true;
	if (rocm && rocm[0]) {
		snprintf(path, sizeof(path), "%s/lib/libamdhip64.so", rocm);
		if (try_open(api, path, why, why_len))
			return true;
	}
	if (try_open(api, "/opt/rocm/lib/libamdhip64.so", why, why_len))
		return true;
	snprintf(why, why_len,
		 "libamdhip64 not found (tried libamdhip64.so, .so.7, .so.6, .so.5, "
		 "$ROCM_PATH/lib, /opt/rocm/lib; set %s to choose one)",
		 HIPAPI_LIBRARY_ENV);
	return false;
}

int hipapi_load(struct hipapi *api, char *why, size_t why_len)
{
	hipapi_error_t err;
	int count = 0;

	memset(api, 0, sizeof(*api));
	/* Before the runtime reads its environment; an explicit setting is respected. */
	setenv("HSA_ENABLE_IPC_MODE_LEGACY", "0", 0);
	if (!open_library(api, why, why_len))
		return -ENOENT;
#define HIPAPI_LOOKUP(fn, required, ret, params)                                                 \
	*(void **)&api->fn = dlsym(api->lib, #fn);                                               \
	if (!api->fn && (required)) {                                                            \
		snprintf(why, why_len, "%s lacks %s: not a usable HIP runtime", api->path, #fn); \
		close_uninitialised(api);                                                        \
		return -ENOSYS;                                                                  \
	}
	HIPAPI_FUNCTIONS(HIPAPI_LOOKUP)
#undef HIPAPI_LOOKUP
	err = api->hipInit(0);
	if (err != HIPAPI_SUCCESS) {
		char name[64];

		snprintf(why, why_len, "hipInit failed: %s (no usable GPU or driver)",
			 hipapi_strerror(api, err, name, sizeof(name)));
		hipapi_unload(api);
		return -ENODEV;
	}
	err = api->hipRuntimeGetVersion(&api->runtime_version);
	if (err != HIPAPI_SUCCESS || api->runtime_version < HIPAPI_MIN_VERSION) {
		snprintf(why, why_len,
			 "HIP runtime version %d is older than 5.0, the oldest supported",
			 api->runtime_version);
		hipapi_unload(api);
		return -EPROTONOSUPPORT;
	}
	if (api->hipGetDeviceCount(&count) != HIPAPI_SUCCESS || count <= 0) {
		snprintf(why, why_len, "the HIP runtime %s sees no device", api->path);
		hipapi_unload(api);
		return -ENODEV;
	}
	return 0;
}

void hipapi_unload(struct hipapi *api)
{
	/*
	 * Once hipInit has run, the runtime has threads and exit handlers of its own that do not
	 * survive dlclose: it stays loaded until the process exits.
	 */
	memset(api, 0, sizeof(*api));
}

/* close_uninitialised undoes a load that failed before the runtime was initialised. */
static void close_uninitialised(struct hipapi *api)
{
	if (api->lib)
		dlclose(api->lib);
	memset(api, 0, sizeof(*api));
}

bool hipapi_has_vmm_fd(const struct hipapi *api)
{
	return api->runtime_version >= HIPAPI_VERSION(6, 2) && api->hipMemCreate &&
	       api->hipMemRelease && api->hipMemExportToShareableHandle &&
	       api->hipMemImportFromShareableHandle && api->hipMemAddressReserve &&
	       api->hipMemAddressFree && api->hipMemMap && api->hipMemUnmap &&
	       api->hipMemSetAccess && api->hipMemGetAllocationGranularity;
}

bool hipapi_has_dmabuf(const struct hipapi *api)
{
	return api->hipMemGetHandleForAddressRange && api->hipImportExternalMemory &&
	       api->hipExternalMemoryGetMappedBuffer && api->hipDestroyExternalMemory;
}

hipapi_error_t hipapi_import_fd(const struct hipapi *api, hipapi_mem_handle_t *handle, int fd)
{
	if (!api->hipMemImportFromShareableHandle)
		return HIPAPI_ERROR_NOT_SUPPORTED;
	if (api->runtime_version >= HIPAPI_VERSION(7, 1))
		return api->hipMemImportFromShareableHandle(handle, (void *)(intptr_t)fd,
							    HIPAPI_MEM_HANDLE_POSIX_FD);
	return api->hipMemImportFromShareableHandle(handle, &fd, HIPAPI_MEM_HANDLE_POSIX_FD);
}

const char *hipapi_strerror(const struct hipapi *api, hipapi_error_t err, char *buf, size_t len)
{
	const char *name = api && api->hipGetErrorString ? api->hipGetErrorString(err) : NULL;

	snprintf(buf, len, "%s (%d)", name ? name : "hipError", err);
	return buf;
}

int hipapi_errno(hipapi_error_t err)
{
	switch (err) {
	case HIPAPI_SUCCESS:
		return 0;
	case HIPAPI_ERROR_OUT_OF_MEMORY:
		return -ENOMEM;
	case HIPAPI_ERROR_INVALID_VALUE:
		return -EINVAL;
	case HIPAPI_ERROR_NO_DEVICE:
	case HIPAPI_ERROR_INVALID_DEVICE:
		return -ENODEV;
	case HIPAPI_ERROR_NOT_SUPPORTED:
		return -EOPNOTSUPP;
	default:
		return -EIO;
	}
}
