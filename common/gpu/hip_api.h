/* SPDX-License-Identifier: MIT */
/* hip_api.h: the subset of the HIP runtime ABI rocmmem uses, declared here, loaded by dlopen. */
#ifndef ROCMMEM_COMMON_HIP_API_H
#define ROCMMEM_COMMON_HIP_API_H

/*
 * The project declares what it calls instead of including HIP's headers: Debian ships HIP
 * 5.2.3 while users run 5.x to 7.x, whose ABI differs (see ../shared/notes/ROCM_FACTS.md).
 * Everything version-dependent is gated on hipRuntimeGetVersion() and device attributes;
 * hipDeviceProp_t is never used (its layout and symbol changed in 6.0).
 * HIP_VERSION encoding: major * 10000000 + minor * 100000 + patch.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef int hipapi_error_t; /* hipError_t */
#define HIPAPI_SUCCESS 0
#define HIPAPI_ERROR_INVALID_VALUE 1
#define HIPAPI_ERROR_OUT_OF_MEMORY 2
#define HIPAPI_ERROR_NOT_INITIALIZED 3
#define HIPAPI_ERROR_NO_DEVICE 100
#define HIPAPI_ERROR_INVALID_DEVICE 101
#define HIPAPI_ERROR_NOT_SUPPORTED 801

#define HIPAPI_VERSION(major, minor) ((major)*10000000 + (minor)*100000)
/* The oldest runtime rocmmem drives (IPC handles only). */
#define HIPAPI_MIN_VERSION HIPAPI_VERSION(5, 0)

/* hipDeviceAttribute_t values, equal in 5.2.3 and 6.x. */
#define HIPAPI_ATTR_INTEGRATED 16
#define HIPAPI_ATTR_MEMORY_POOLS_SUPPORTED 88
#define HIPAPI_ATTR_VMM_SUPPORTED 89 /* 6.x and later only */

/* Virtual memory management (hipMem* VMM API). */
typedef struct hipapi_generic_handle *hipapi_mem_handle_t; /* hipMemGenericAllocationHandle_t */
#define HIPAPI_MEM_ALLOCATION_PINNED 1			   /* hipMemAllocationTypePinned */
#define HIPAPI_MEM_HANDLE_POSIX_FD 1			   /* hipMemHandleTypePosixFileDescriptor */
#define HIPAPI_MEM_LOCATION_DEVICE 1			   /* hipMemLocationTypeDevice */
#define HIPAPI_MEM_ACCESS_READWRITE 3			   /* hipMemAccessFlagsProtReadWrite */
#define HIPAPI_MEM_GRANULARITY_MINIMUM 0
#define HIPAPI_MEM_GRANULARITY_RECOMMENDED 1

struct hipapi_mem_location {
	int type; /* HIPAPI_MEM_LOCATION_* */
	int id;	  /* device ordinal */
};

/* hipMemAllocationProp as laid out from HIP 5.3 on (5.2.3's order differs: never used). */
struct hipapi_alloc_prop {
	int type;		   /* HIPAPI_MEM_ALLOCATION_* */
	int requested_handle_type; /* HIPAPI_MEM_HANDLE_* */
	struct hipapi_mem_location location;
	void *win32_handle_meta_data;
	struct {
		unsigned char compression_type;
		unsigned char gpu_direct_rdma_capable;
		unsigned short usage;
	} alloc_flags;
};

struct hipapi_access_desc {
	struct hipapi_mem_location location;
	int flags; /* HIPAPI_MEM_ACCESS_* */
};

/* hipIpcMemHandle_t: 64 opaque bytes, passed by value. */
#define HIPAPI_IPC_HANDLE_SIZE 64
struct hipapi_ipc_handle {
	char reserved[HIPAPI_IPC_HANDLE_SIZE];
};
/* hipIpcMemLazyEnablePeerAccess: 0 up to HIP 5.7, 1 from 6.0. */
#define HIPAPI_IPC_LAZY_PEER_ACCESS(version) ((version) >= HIPAPI_VERSION(6, 0) ? 1u : 0u)

/*
 * External memory, for dma-buf fds (hipImportExternalMemory). HIP 6.x added reserved[16] to
 * both descriptors; before, they ended at `flags`. The larger layout is declared: older
 * runtimes read a prefix that matches, newer ones find the reserved words zeroed.
 */
typedef void *hipapi_external_memory_t;
#define HIPAPI_EXTERNAL_MEMORY_OPAQUE_FD 1  /* hipExternalMemoryHandleTypeOpaqueFd */
#define HIPAPI_MEM_RANGE_HANDLE_DMABUF_FD 1 /* hipMemRangeHandleTypeDmaBufFd */

struct hipapi_external_memory_handle_desc {
	int type;
	union {
		int fd;
		struct {
			void *handle;
			const void *name;
		} win32;
		const void *nv_sci_buf_object;
	} handle;
	unsigned long long size;
	unsigned int flags;
	unsigned int reserved[16];
};

struct hipapi_external_memory_buffer_desc {
	unsigned long long offset;
	unsigned long long size;
	unsigned int flags;
	unsigned int reserved[16];
};

typedef void *hipapi_mem_pool_t; /* hipMemPool_t */
#define HIPAPI_MEMCPY_HOST_TO_DEVICE 1
#define HIPAPI_MEMCPY_DEVICE_TO_HOST 2

/*
 * Every function rocmmem looks up: X(name, required, return type, parameters). Required
 * functions must exist in every supported runtime; the others are looked up and may be NULL.
 */
#define HIPAPI_FUNCTIONS(X)                                                                        \
	X(hipInit, 1, hipapi_error_t, (unsigned int flags))                                        \
	X(hipRuntimeGetVersion, 1, hipapi_error_t, (int *version))                                 \
	X(hipGetErrorString, 1, const char *, (hipapi_error_t error))                              \
	X(hipGetDeviceCount, 1, hipapi_error_t, (int *count))                                      \
	X(hipSetDevice, 1, hipapi_error_t, (int device))                                           \
	X(hipGetDevice, 1, hipapi_error_t, (int *device))                                          \
	X(hipDeviceGetAttribute, 1, hipapi_error_t, (int *value, int attr, int device))            \
	X(hipDeviceGetName, 1, hipapi_error_t, (char *name, int len, int device))                  \
	X(hipDeviceGetPCIBusId, 1, hipapi_error_t, (char *bus_id, int len, int device))            \
	X(hipDeviceTotalMem, 1, hipapi_error_t, (size_t * bytes, int device))                      \
	X(hipMemGetInfo, 1, hipapi_error_t, (size_t * free_bytes, size_t * total_bytes))           \
	X(hipMalloc, 1, hipapi_error_t, (void **ptr, size_t size))                                 \
	X(hipFree, 1, hipapi_error_t, (void *ptr))                                                 \
	X(hipMemcpy, 1, hipapi_error_t, (void *dst, const void *src, size_t size, int kind))       \
	X(hipMemset, 1, hipapi_error_t, (void *dst, int value, size_t size))                       \
	X(hipDeviceSynchronize, 1, hipapi_error_t, (void))                                         \
	X(hipIpcGetMemHandle, 1, hipapi_error_t, (struct hipapi_ipc_handle * handle, void *ptr))   \
	X(hipIpcOpenMemHandle, 1, hipapi_error_t,                                                  \
	  (void **ptr, struct hipapi_ipc_handle handle, unsigned int flags))                       \
	X(hipIpcCloseMemHandle, 1, hipapi_error_t, (void *ptr))                                    \
	X(hipMemGetAllocationGranularity, 0, hipapi_error_t,                                       \
	  (size_t * granularity, const struct hipapi_alloc_prop *prop, int option))                \
	X(hipMemCreate, 0, hipapi_error_t,                                                         \
	  (hipapi_mem_handle_t * handle, size_t size, const struct hipapi_alloc_prop *prop,        \
	   unsigned long long flags))                                                              \
	X(hipMemRelease, 0, hipapi_error_t, (hipapi_mem_handle_t handle))                          \
	X(hipMemExportToShareableHandle, 0, hipapi_error_t,                                        \
	  (void *shareable, hipapi_mem_handle_t handle, int handle_type,                           \
	   unsigned long long flags))                                                              \
	X(hipMemImportFromShareableHandle, 0, hipapi_error_t,                                      \
	  (hipapi_mem_handle_t * handle, void *os_handle, int handle_type))                        \
	X(hipMemAddressReserve, 0, hipapi_error_t,                                                 \
	  (void **ptr, size_t size, size_t alignment, void *addr, unsigned long long flags))       \
	X(hipMemAddressFree, 0, hipapi_error_t, (void *ptr, size_t size))                          \
	X(hipMemMap, 0, hipapi_error_t,                                                            \
	  (void *ptr, size_t size, size_t offset, hipapi_mem_handle_t handle,                      \
	   unsigned long long flags))                                                              \
	X(hipMemUnmap, 0, hipapi_error_t, (void *ptr, size_t size))                                \
	X(hipMemSetAccess, 0, hipapi_error_t,                                                      \
	  (void *ptr, size_t size, const struct hipapi_access_desc *desc, size_t count))           \
	X(hipMemGetHandleForAddressRange, 0, hipapi_error_t,                                       \
	  (void *handle, void *ptr, size_t size, int handle_type, unsigned long long flags))       \
	X(hipImportExternalMemory, 0, hipapi_error_t,                                              \
	  (hipapi_external_memory_t * out, const struct hipapi_external_memory_handle_desc *desc)) \
	X(hipExternalMemoryGetMappedBuffer, 0, hipapi_error_t,                                     \
	  (void **ptr, hipapi_external_memory_t mem,                                               \
	   const struct hipapi_external_memory_buffer_desc *desc))                                 \
	X(hipDestroyExternalMemory, 0, hipapi_error_t, (hipapi_external_memory_t mem))             \
	X(hipDeviceGetDefaultMemPool, 0, hipapi_error_t, (hipapi_mem_pool_t * pool, int device))   \
	X(hipMemPoolTrimTo, 0, hipapi_error_t, (hipapi_mem_pool_t pool, size_t keep))

struct hipapi {
	void *lib;
	char path[256];	     /* what was loaded */
	int runtime_version; /* hipRuntimeGetVersion */
#define HIPAPI_FIELD(name, required, ret, params) ret(*name) params;
	HIPAPI_FUNCTIONS(HIPAPI_FIELD)
#undef HIPAPI_FIELD
};

/* The environment variable naming the runtime library to load instead of searching. */
#define HIPAPI_LIBRARY_ENV "ROCMMEM_HIP_LIBRARY"

/*
 * hipapi_load finds libamdhip64 ($ROCMMEM_HIP_LIBRARY, else libamdhip64.so, .so.7, .so.6,
 * .so.5, $ROCM_PATH/lib, /opt/rocm/lib), looks up the functions, sets
 * HSA_ENABLE_IPC_MODE_LEGACY=0 unless the environment already says otherwise (DMA-buf IPC
 * works on stock kernels; the legacy mode needs amdgpu-dkms), initialises the runtime and
 * reads its version. Returns 0, or a negative errno with the reason in `why`: -ENOENT (no
 * library), -ENOSYS (a required function is missing), -EPROTONOSUPPORT (older than
 * HIPAPI_MIN_VERSION), -ENODEV (hipInit failed: no usable device or driver).
 */
int hipapi_load(struct hipapi *api, char *why, size_t why_len);

/* hipapi_unload closes the library (the runtime itself is not torn down). */
void hipapi_unload(struct hipapi *api);

/* hipapi_has_vmm_fd says whether VMM memory can be exported as POSIX fds (HIP >= 6.2). */
bool hipapi_has_vmm_fd(const struct hipapi *api);

/* hipapi_has_dmabuf says whether dma-buf export and external-memory import are present. */
bool hipapi_has_dmabuf(const struct hipapi *api);

/*
 * hipapi_import_fd imports a POSIX fd of VMM memory, hiding the convention change: up to
 * HIP 7.0 the os_handle argument points to the fd, from 7.1 it is the fd value itself.
 */
hipapi_error_t hipapi_import_fd(const struct hipapi *api, hipapi_mem_handle_t *handle, int fd);

/* hipapi_strerror describes a HIP error for messages ("out of memory (2)"; 5.x gives names). */
const char *hipapi_strerror(const struct hipapi *api, hipapi_error_t err, char *buf, size_t len);

/* hipapi_errno maps a HIP error to a negative errno (-ENOMEM for out-of-memory, ...). */
int hipapi_errno(hipapi_error_t err);

#endif
