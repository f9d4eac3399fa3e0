/* SPDX-License-Identifier: MIT */
/* cuda_api.h: the subset of the CUDA driver API rocmmem uses, declared here, loaded by dlopen. */
#ifndef ROCMMEM_COMMON_CUDA_API_H
#define ROCMMEM_COMMON_CUDA_API_H

/*
 * Declared from the CUDA driver API's public documentation (cuda.h of CUDA 12/13), so that
 * rocmmem builds without the toolkit and runs where no driver is installed. Symbols that
 * cuda.h maps to versioned names (cuMemGetInfo -> cuMemGetInfo_v2) are looked up by the
 * versioned name, as the header would link them.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef int cuapi_result_t; /* CUresult */
#define CUAPI_SUCCESS 0
#define CUAPI_ERROR_INVALID_VALUE 1
#define CUAPI_ERROR_OUT_OF_MEMORY 2
#define CUAPI_ERROR_NOT_INITIALIZED 3
#define CUAPI_ERROR_NO_DEVICE 100
#define CUAPI_ERROR_INVALID_DEVICE 101
#define CUAPI_ERROR_NOT_SUPPORTED 801

/* Driver version encoding: 1000 * major + 10 * minor. */
#define CUAPI_VERSION(major, minor) ((major)*1000 + (minor)*10)
#define CUAPI_MIN_VERSION CUAPI_VERSION(11, 0)

typedef int cuapi_device_t;		       /* CUdevice */
typedef struct cuapi_ctx *cuapi_ctx_t;	       /* CUcontext */
typedef unsigned long long cuapi_deviceptr_t;  /* CUdeviceptr */
typedef unsigned long long cuapi_mem_handle_t; /* CUmemGenericAllocationHandle */

#define CUAPI_ATTR_INTEGRATED 18
#define CUAPI_ATTR_VMM_SUPPORTED 102
#define CUAPI_ATTR_POSIX_FD_SUPPORTED 103

#define CUAPI_MEM_ALLOCATION_PINNED 1
#define CUAPI_MEM_HANDLE_POSIX_FD 1
#define CUAPI_MEM_LOCATION_DEVICE 1
#define CUAPI_MEM_ACCESS_READWRITE 3
#define CUAPI_MEM_GRANULARITY_MINIMUM 0

struct cuapi_mem_location {
	int type;
	int id;
};

/* CUmemAllocationProp (v1). */
struct cuapi_alloc_prop {
	int type;
	int requested_handle_types;
	struct cuapi_mem_location location;
	void *win32_handle_meta_data;
	struct {
		unsigned char compression_type;
		unsigned char gpu_direct_rdma_capable;
		unsigned short usage;
		unsigned char reserved[4];
	} alloc_flags;
};

struct cuapi_access_desc {
	struct cuapi_mem_location location;
	int flags;
};

/* X(symbol name, field name, required, return type, parameters) */
#define CUAPI_FUNCTIONS(X)                                                                         \
	X(cuInit, cuInit, 1, cuapi_result_t, (unsigned int flags))                                 \
	X(cuDriverGetVersion, cuDriverGetVersion, 1, cuapi_result_t, (int *version))               \
	X(cuGetErrorString, cuGetErrorString, 1, cuapi_result_t,                                   \
	  (cuapi_result_t error, const char **str))                                                \
	X(cuDeviceGetCount, cuDeviceGetCount, 1, cuapi_result_t, (int *count))                     \
	X(cuDeviceGet, cuDeviceGet, 1, cuapi_result_t, (cuapi_device_t * device, int ordinal))     \
	X(cuDeviceGetName, cuDeviceGetName, 1, cuapi_result_t,                                     \
	  (char *name, int len, cuapi_device_t device))                                            \
	X(cuDeviceGetAttribute, cuDeviceGetAttribute, 1, cuapi_result_t,                           \
	  (int *value, int attr, cuapi_device_t device))                                           \
	X(cuDeviceGetPCIBusId, cuDeviceGetPCIBusId, 1, cuapi_result_t,                             \
	  (char *bus_id, int len, cuapi_device_t device))                                          \
	X(cuDeviceTotalMem_v2, cuDeviceTotalMem, 1, cuapi_result_t,                                \
	  (size_t * bytes, cuapi_device_t device))                                                 \
	X(cuDevicePrimaryCtxRetain, cuDevicePrimaryCtxRetain, 1, cuapi_result_t,                   \
	  (cuapi_ctx_t * ctx, cuapi_device_t device))                                              \
	X(cuDevicePrimaryCtxRelease_v2, cuDevicePrimaryCtxRelease, 1, cuapi_result_t,              \
	  (cuapi_device_t device))                                                                 \
	X(cuCtxSetCurrent, cuCtxSetCurrent, 1, cuapi_result_t, (cuapi_ctx_t ctx))                  \
	X(cuCtxGetCurrent, cuCtxGetCurrent, 1, cuapi_result_t, (cuapi_ctx_t * ctx))                \
	X(cuMemGetInfo_v2, cuMemGetInfo, 1, cuapi_result_t, (size_t * free_bytes, size_t * total)) \
	X(cuMemGetAllocationGranularity, cuMemGetAllocationGranularity, 1, cuapi_result_t,         \
	  (size_t * granularity, const struct cuapi_alloc_prop *prop, int option))                 \
	X(cuMemCreate, cuMemCreate, 1, cuapi_result_t,                                             \
	  (cuapi_mem_handle_t * handle, size_t size, const struct cuapi_alloc_prop *prop,          \
	   unsigned long long flags))                                                              \
	X(cuMemRelease, cuMemRelease, 1, cuapi_result_t, (cuapi_mem_handle_t handle))              \
	X(cuMemExportToShareableHandle, cuMemExportToShareableHandle, 1, cuapi_result_t,           \
	  (void *shareable, cuapi_mem_handle_t handle, int handle_type, unsigned long long flags)) \
	X(cuMemImportFromShareableHandle, cuMemImportFromShareableHandle, 1, cuapi_result_t,       \
	  (cuapi_mem_handle_t * handle, void *os_handle, int handle_type))                         \
	X(cuMemAddressReserve, cuMemAddressReserve, 1, cuapi_result_t,                             \
	  (cuapi_deviceptr_t * ptr, size_t size, size_t alignment, cuapi_deviceptr_t addr,         \
	   unsigned long long flags))                                                              \
	X(cuMemAddressFree, cuMemAddressFree, 1, cuapi_result_t,                                   \
	  (cuapi_deviceptr_t ptr, size_t size))                                                    \
	X(cuMemMap, cuMemMap, 1, cuapi_result_t,                                                   \
	  (cuapi_deviceptr_t ptr, size_t size, size_t offset, cuapi_mem_handle_t handle,           \
	   unsigned long long flags))                                                              \
	X(cuMemUnmap, cuMemUnmap, 1, cuapi_result_t, (cuapi_deviceptr_t ptr, size_t size))         \
	X(cuMemSetAccess, cuMemSetAccess, 1, cuapi_result_t,                                       \
	  (cuapi_deviceptr_t ptr, size_t size, const struct cuapi_access_desc *desc,               \
	   size_t count))                                                                          \
	X(cuMemcpyHtoD_v2, cuMemcpyHtoD, 1, cuapi_result_t,                                        \
	  (cuapi_deviceptr_t dst, const void *src, size_t size))                                   \
	X(cuMemcpyDtoH_v2, cuMemcpyDtoH, 1, cuapi_result_t,                                        \
	  (void *dst, cuapi_deviceptr_t src, size_t size))                                         \
	X(cuMemsetD8_v2, cuMemsetD8, 1, cuapi_result_t,                                            \
	  (cuapi_deviceptr_t dst, unsigned char value, size_t count))                              \
	X(cuCtxSynchronize, cuCtxSynchronize, 1, cuapi_result_t, (void))

struct cuapi {
	void *lib;
	char path[256];
	int driver_version;
#define CUAPI_FIELD(symbol, field, required, ret, params) ret(*field) params;
	CUAPI_FUNCTIONS(CUAPI_FIELD)
#undef CUAPI_FIELD
};

#define CUAPI_LIBRARY_ENV "ROCMMEM_CUDA_LIBRARY"

/*
 * cuapi_load finds the driver ($ROCMMEM_CUDA_LIBRARY, else libcuda.so.1, libcuda.so), looks up
 * the functions, calls cuInit and checks the driver version. Returns 0, or a negative errno
 * with the reason in `why`: -ENOENT (no library), -ENOSYS (a function is missing),
 * -EPROTONOSUPPORT (older than CUDA 11.0), -ENODEV (cuInit failed or no device).
 */
int cuapi_load(struct cuapi *api, char *why, size_t why_len);

void cuapi_unload(struct cuapi *api);

/* cuapi_strerror describes a CUDA error for messages ("out of memory (2)"). */
const char *cuapi_strerror(const struct cuapi *api, cuapi_result_t err, char *buf, size_t len);

/* cuapi_errno maps a CUDA error to a negative errno. */
int cuapi_errno(cuapi_result_t err);

#endif
