/* SPDX-License-Identifier: MIT */
/* fake_cuda.c: a stand-in CUDA driver (libcuda.so.1) over host memory: VMM and contexts. */
#include "cuda_api.h"
#include "fake_common.h"

#include <stdio.h>
#include <string.h>

/* The project's list, under the exported (versioned) symbol names. */
#define CU_DECLARE(symbol, field, required, ret, params) FAKE_EXPORT ret symbol params;
CUAPI_FUNCTIONS(CU_DECLARE)
#undef CU_DECLARE

_Static_assert(FAKE_INVALID_VALUE == CUAPI_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE");
_Static_assert(FAKE_OUT_OF_MEMORY == CUAPI_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY");
_Static_assert(FAKE_NOT_INITIALIZED == CUAPI_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED");
_Static_assert(FAKE_NO_DEVICE == CUAPI_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE");
_Static_assert(FAKE_INVALID_DEVICE == CUAPI_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE");
_Static_assert(FAKE_NOT_SUPPORTED == CUAPI_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED");
_Static_assert(sizeof(cuapi_deviceptr_t) >= sizeof(void *), "a host address fits a CUdeviceptr");

#define FD_LIMIT 65536
#define ATTR_MULTIPROCESSOR_COUNT 16
#define ATTR_COMPUTE_CAPABILITY_MAJOR 75
#define ATTR_COMPUTE_CAPABILITY_MINOR 76

/* A device's primary context. */
struct cuapi_ctx {
	int dev;
	unsigned refs; /* cuDevicePrimaryCtxRetain minus Release; 0: inactive */
};

static void cu_forget(void);

static struct fake cu = {
    .kind = "cuda",
    .prefix = "FAKECUDA",
    .default_version = 13000,
    .pin_until_address_free = false,
    .forget = cu_forget,
    .lock = PTHREAD_MUTEX_INITIALIZER,
};

static bool initialised; /* cuInit succeeded in this process */
static struct cuapi_ctx contexts[FAKE_MAX_DEVICES];
static _Thread_local struct cuapi_ctx *current;

static void cu_forget(void)
{
	initialised = false;
	memset(contexts, 0, sizeof(contexts));
}

__attribute__((destructor)) static void cu_unload(void)
{
	fake_teardown(&cu);
}

/* begin: as fake_begin, and every call but a few needs cuInit first. */
static int begin(const char *name, int default_failure)
{
	int err = fake_begin(&cu, name, default_failure);

	return !err && !initialised ? FAKE_NOT_INITIALIZED : err;
}

static int end(int err)
{
	return fake_end(&cu, err);
}

/* current_device: the current context's device, or why there is none. */
static int current_device(int *dev)
{
	if (!current || !current->refs)
		return FAKE_INVALID_CONTEXT;
	*dev = current->dev;
	return fake_check_device(&cu, *dev);
}

cuapi_result_t cuInit(unsigned int flags)
{
	int err = fake_begin(&cu, __func__, FAKE_NOT_SUPPORTED), usable = 0;

	if (!err && flags)
		err = FAKE_INVALID_VALUE;
	for (int i = 0; !err && i < cu.ndev; i++)
		usable += !fake_device_lost(&cu, i);
	if (!err && !usable)
		err = FAKE_NO_DEVICE;
	if (!err)
		initialised = true;
	return end(err);
}

cuapi_result_t cuDriverGetVersion(int *version)
{
	int err = fake_begin(&cu, __func__, FAKE_NOT_SUPPORTED);

	if (!err && !version)
		err = FAKE_INVALID_VALUE;
	if (!err)
		*version = cu.version;
	return end(err);
}

/* The driver's descriptions: cuGetErrorString, not cuGetErrorName. */
static const struct {
	int code;
	const char *text;
} errors[] = {
    {0, "no error"},
    {1, "invalid argument"},
    {2, "out of memory"},
    {3, "initialization error"},
    {100, "no CUDA-capable device is detected"},
    {101, "invalid device ordinal"},
    {201, "invalid device context"},
    {700, "an illegal memory access was encountered"},
    {801, "operation not supported"},
    {999, "unknown error"},
};

cuapi_result_t cuGetErrorString(cuapi_result_t error, const char **str)
{
	if (!str)
		return FAKE_INVALID_VALUE;
	for (size_t i = 0; i < sizeof(errors) / sizeof(errors[0]); i++) {
		if (errors[i].code == error) {
			*str = errors[i].text;
			return FAKE_SUCCESS;
		}
	}
	*str = NULL;
	return FAKE_INVALID_VALUE;
}

cuapi_result_t cuDeviceGetCount(int *count)
{
	int err = begin(__func__, FAKE_NOT_SUPPORTED);

	if (!err && !count)
		err = FAKE_INVALID_VALUE;
	if (!err)
		*count = cu.ndev;
	return end(err);
}

cuapi_result_t cuDeviceGet(cuapi_device_t *device, int ordinal)
{
	int err = begin(__func__, FAKE_NOT_SUPPORTED);

	if (!err && !device)
		err = FAKE_INVALID_VALUE;
	if (!err)
		err = fake_check_device(&cu, ordinal);
	if (!err)
		*device = ordinal;
	return end(err);
}

cuapi_result_t cuDeviceGetName(char *name, int len, cuapi_device_t device)
{
	int err = begin(__func__, FAKE_NOT_SUPPORTED);

	if (!err && (!name || len <= 0))
		err = FAKE_INVALID_VALUE;
	if (!err)
		err = fake_check_device(&cu, device);
	if (!err)
		snprintf(name, (size_t)len, "%s",
			 cu.integrated[device] ? "Fake NVIDIA GB10" : "Fake NVIDIA H100");
	return end(err);
}

cuapi_result_t cuDeviceGetAttribute(int *value, int attr, cuapi_device_t device)
{
	int err = begin(__func__, FAKE_NOT_SUPPORTED);

	if (!err && !value)
		err = FAKE_INVALID_VALUE;
	if (!err)
		err = fake_check_device(&cu, device);
	if (!err) {
		switch (attr) {
		case CUAPI_ATTR_INTEGRATED:
			*value = cu.integrated[device];
			break;
		case CUAPI_ATTR_VMM_SUPPORTED:
		case CUAPI_ATTR_POSIX_FD_SUPPORTED:
			*value = cu.vmm;
			break;
		case ATTR_MULTIPROCESSOR_COUNT:
			*value = 132;
			break;
		case ATTR_COMPUTE_CAPABILITY_MAJOR:
			*value = 9;
			break;
		case ATTR_COMPUTE_CAPABILITY_MINOR:
			*value = 0;
			break;
		default:
			err = FAKE_INVALID_VALUE;
			break;
		}
	}
	return end(err);
}

cuapi_result_t cuDeviceGetPCIBusId(char *bus_id, int len, cuapi_device_t device)
{
	int err = begin(__func__, FAKE_NOT_SUPPORTED);

	if (!err && (!bus_id || len < 13))
		err = FAKE_INVALID_VALUE;
	if (!err)
		err = fake_check_device(&cu, device);
	if (!err)
		snprintf(bus_id, (size_t)len, "0000:%02x:00.0", 0x41 + device);
	return end(err);
}

cuapi_result_t cuDeviceTotalMem_v2(size_t *bytes, cuapi_device_t device)
{
	int err = begin(__func__, FAKE_NOT_SUPPORTED);

	if (!err && !bytes)
		err = FAKE_INVALID_VALUE;
	if (!err)
		err = fake_check_device(&cu, device);
	if (!err)
		*bytes = cu.total[device];
	return end(err);
}

cuapi_result_t cuDevicePrimaryCtxRetain(cuapi_ctx_t *ctx, cuapi_device_t device)
{
	int err = begin(__func__, FAKE_NOT_SUPPORTED);

	if (!err && !ctx)
		err = FAKE_INVALID_VALUE;
	if (!err)
		err = fake_check_device(&cu, device);
	if (!err) {
		contexts[device].dev = device;
		contexts[device].refs++;
		*ctx = &contexts[device];
	}
	return end(err);
}

cuapi_result_t cuDevicePrimaryCtxRelease_v2(cuapi_device_t device)
{
	int err = begin(__func__, FAKE_NOT_SUPPORTED);

	if (!err)
		err = fake_check_device(&cu, device);
	if (!err && !contexts[device].refs)
		err = FAKE_INVALID_CONTEXT;
	if (!err)
		contexts[device].refs--;
	return end(err);
}

cuapi_result_t cuCtxSetCurrent(cuapi_ctx_t ctx)
{
	int err = begin(__func__, FAKE_NOT_SUPPORTED);

	if (!err && ctx) {
		int i = 0;

		while (i < FAKE_MAX_DEVICES && ctx != &contexts[i])
			i++;
		if (i == FAKE_MAX_DEVICES || !ctx->refs)
			err = FAKE_INVALID_CONTEXT;
	}
	if (!err)
		current = ctx;
	return end(err);
}

cuapi_result_t cuCtxGetCurrent(cuapi_ctx_t *ctx)
{
	int err = begin(__func__, FAKE_NOT_SUPPORTED);

	if (!err && !ctx)
		err = FAKE_INVALID_VALUE;
	if (!err)
		*ctx = current;
	return end(err);
}

cuapi_result_t cuMemGetInfo_v2(size_t *free_bytes, size_t *total)
{
	int err = begin(__func__, FAKE_NOT_SUPPORTED), dev = 0;

	if (!err)
		err = current_device(&dev);
	if (!err && (!free_bytes || !total))
		err = FAKE_INVALID_VALUE;
	if (!err) {
		uint64_t used = fake_used(&cu, dev);

		*total = cu.total[dev];
		*free_bytes = used < cu.total[dev] ? cu.total[dev] - used : 0;
	}
	return end(err);
}

static int check_prop(const struct cuapi_alloc_prop *prop)
{
	if (!prop || prop->type != CUAPI_MEM_ALLOCATION_PINNED ||
	    (prop->requested_handle_types & ~CUAPI_MEM_HANDLE_POSIX_FD) ||
	    prop->location.type != CUAPI_MEM_LOCATION_DEVICE || prop->location.id < 0 ||
	    prop->location.id >= cu.ndev)
		return FAKE_INVALID_VALUE;
	return fake_device_lost(&cu, prop->location.id) ? FAKE_NO_DEVICE : FAKE_SUCCESS;
}

cuapi_result_t cuMemGetAllocationGranularity(size_t *granularity,
					     const struct cuapi_alloc_prop *prop, int option)
{
	int err = begin(__func__, FAKE_NOT_SUPPORTED);

	if (!err && !cu.vmm)
		err = FAKE_NOT_SUPPORTED;
	if (!err && (!granularity || (option != 0 && option != 1)))
		err = FAKE_INVALID_VALUE;
	if (!err)
		err = check_prop(prop);
	if (!err)
		*granularity = cu.granularity;
	return end(err);
}

cuapi_result_t cuMemCreate(cuapi_mem_handle_t *handle, size_t size,
			   const struct cuapi_alloc_prop *prop, unsigned long long flags)
{
	int err = begin(__func__, FAKE_OUT_OF_MEMORY);
	struct fake_phys *p;

	if (!err && !cu.vmm)
		err = FAKE_NOT_SUPPORTED;
	if (!err && (!handle || flags))
		err = FAKE_INVALID_VALUE;
	if (!err)
		err = check_prop(prop);
	if (!err)
		err = fake_vmm_create(&cu, prop->location.id, size,
				      prop->requested_handle_types & CUAPI_MEM_HANDLE_POSIX_FD, &p);
	if (!err)
		*handle = (cuapi_mem_handle_t)(uintptr_t)p;
	return end(err);
}

static struct fake_phys *find_handle(cuapi_mem_handle_t handle)
{
	return fake_vmm_find(&cu, (const void *)(uintptr_t)handle);
}

cuapi_result_t cuMemRelease(cuapi_mem_handle_t handle)
{
	int err = begin(__func__, FAKE_NOT_SUPPORTED);
	struct fake_phys *p = err ? NULL : find_handle(handle);

	if (!err && !p)
		err = FAKE_INVALID_VALUE;
	/* Memory still mapped is freed by the last cuMemUnmap. */
	if (!err)
		err = fake_vmm_release(&cu, p);
	return end(err);
}

cuapi_result_t cuMemExportToShareableHandle(void *shareable, cuapi_mem_handle_t handle,
					    int handle_type, unsigned long long flags)
{
	int err = begin(__func__, FAKE_NOT_SUPPORTED);
	struct fake_phys *p = NULL;

	if (!err && (!shareable || handle_type != CUAPI_MEM_HANDLE_POSIX_FD || flags ||
		     !(p = find_handle(handle))))
		err = FAKE_INVALID_VALUE;
	if (!err)
		err = fake_vmm_export(&cu, p, shareable);
	return end(err);
}

cuapi_result_t cuMemImportFromShareableHandle(cuapi_mem_handle_t *handle, void *os_handle,
					      int handle_type)
{
	int err = begin(__func__, FAKE_NOT_SUPPORTED);
	struct fake_phys *p;

	/* A POSIX fd travels as its value cast to a pointer; a real pointer is a mistake. */
	if (!err && (!handle || handle_type != CUAPI_MEM_HANDLE_POSIX_FD ||
		     (uintptr_t)os_handle >= FD_LIMIT))
		err = FAKE_INVALID_VALUE;
	if (!err)
		err = fake_vmm_import(&cu, (int)(uintptr_t)os_handle, &p);
	if (!err)
		*handle = (cuapi_mem_handle_t)(uintptr_t)p;
	return end(err);
}

cuapi_result_t cuMemAddressReserve(cuapi_deviceptr_t *ptr, size_t size, size_t alignment,
				   cuapi_deviceptr_t addr, unsigned long long flags)
{
	int err = begin(__func__, FAKE_OUT_OF_MEMORY);
	void *base = NULL;

	(void)addr; /* a hint */
	if (!err && !cu.vmm)
		err = FAKE_NOT_SUPPORTED;
	if (!err && (!ptr || flags))
		err = FAKE_INVALID_VALUE;
	if (!err)
		err = fake_vmm_reserve(&cu, size, alignment, &base);
	if (!err)
		*ptr = (cuapi_deviceptr_t)(uintptr_t)base;
	return end(err);
}

static void *host(cuapi_deviceptr_t ptr)
{
	return (void *)(uintptr_t)ptr;
}

cuapi_result_t cuMemAddressFree(cuapi_deviceptr_t ptr, size_t size)
{
	int err = begin(__func__, FAKE_NOT_SUPPORTED);

	if (!err)
		err = fake_vmm_free(&cu, host(ptr), size);
	return end(err);
}

cuapi_result_t cuMemMap(cuapi_deviceptr_t ptr, size_t size, size_t offset,
			cuapi_mem_handle_t handle, unsigned long long flags)
{
	int err = begin(__func__, FAKE_NOT_SUPPORTED);
	struct fake_phys *p = NULL;

	if (!err && (!ptr || flags || !(p = find_handle(handle))))
		err = FAKE_INVALID_VALUE;
	if (!err)
		err = fake_vmm_map(&cu, host(ptr), size, offset, p);
	return end(err);
}

cuapi_result_t cuMemUnmap(cuapi_deviceptr_t ptr, size_t size)
{
	int err = begin(__func__, FAKE_NOT_SUPPORTED);

	if (!err)
		err = fake_vmm_unmap(&cu, host(ptr), size);
	return end(err);
}

cuapi_result_t cuMemSetAccess(cuapi_deviceptr_t ptr, size_t size,
			      const struct cuapi_access_desc *desc, size_t count)
{
	int err = begin(__func__, FAKE_NOT_SUPPORTED);

	if (!err && (!desc || !count))
		err = FAKE_INVALID_VALUE;
	for (size_t i = 0; !err && i < count; i++) {
		if (desc[i].location.type != CUAPI_MEM_LOCATION_DEVICE ||
		    desc[i].flags != CUAPI_MEM_ACCESS_READWRITE)
			err = FAKE_INVALID_VALUE;
		else
			err = fake_check_device(&cu, desc[i].location.id);
	}
	if (!err)
		err = fake_vmm_set_access(&cu, host(ptr), size);
	return end(err);
}

/* check_copy: a current context and a device range mapped with access. */
static int check_copy(cuapi_deviceptr_t dptr, const void *hptr, size_t size, bool needs_host)
{
	int dev, err = current_device(&dev);

	if (err || !size)
		return err;
	if (needs_host && !hptr)
		return FAKE_INVALID_VALUE;
	return fake_vmm_accessible(&cu, host(dptr), size);
}

cuapi_result_t cuMemcpyHtoD_v2(cuapi_deviceptr_t dst, const void *src, size_t size)
{
	int err = begin(__func__, FAKE_NOT_SUPPORTED);

	if (!err)
		err = check_copy(dst, src, size, true);
	end(FAKE_SUCCESS);
	if (!err && size)
		memmove(host(dst), src, size);
	return err;
}

cuapi_result_t cuMemcpyDtoH_v2(void *dst, cuapi_deviceptr_t src, size_t size)
{
	int err = begin(__func__, FAKE_NOT_SUPPORTED);

	if (!err)
		err = check_copy(src, dst, size, true);
	end(FAKE_SUCCESS);
	if (!err && size)
		memmove(dst, host(src), size);
	return err;
}

cuapi_result_t cuMemsetD8_v2(cuapi_deviceptr_t dst, unsigned char value, size_t count)
{
	int err = begin(__func__, FAKE_NOT_SUPPORTED);

	if (!err)
		err = check_copy(dst, NULL, count, false);
	end(FAKE_SUCCESS);
	if (!err && count)
		memset(host(dst), value, count);
	return err;
}

cuapi_result_t cuCtxSynchronize(void)
{
	int err = begin(__func__, FAKE_NOT_SUPPORTED), dev;

	if (!err)
		err = current_device(&dev);
	return end(err);
}

#define CU_CHECK(symbol, field, required, ret, params) \
	_Static_assert(__builtin_types_compatible_p(__typeof__(&symbol), ret(*) params), #symbol);
CUAPI_FUNCTIONS(CU_CHECK)
#undef CU_CHECK
