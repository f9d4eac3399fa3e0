/* SPDX-License-Identifier: MIT */
/* test_hip_abi.c: the project's HIP declarations against the installed HIP headers. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <hip/hip_runtime_api.h>

#include "hip_api.h"

/*
 * Debian ships HIP 5.2.3 headers; what is stable across 5.x to 7.x (ROCM_FACTS.md) must match
 * exactly. hipMemAllocationProp is not compared: its field order changed in 5.3 and rocmmem
 * declares the newer layout, used only from 6.2 on.
 */
_Static_assert(sizeof(hipIpcMemHandle_t) == sizeof(struct hipapi_ipc_handle), "hipIpcMemHandle_t");
_Static_assert(sizeof(hipMemLocation) == sizeof(struct hipapi_mem_location), "hipMemLocation");
_Static_assert(sizeof(hipMemAccessDesc) == sizeof(struct hipapi_access_desc), "hipMemAccessDesc");
_Static_assert(offsetof(hipMemAccessDesc, flags) == offsetof(struct hipapi_access_desc, flags),
	       "hipMemAccessDesc.flags");
/*
 * External memory descriptors gained a trailing reserved[16] in 6.x (as CUDA's have): rocmmem
 * declares the larger layout, whose prefix must match the older one exactly.
 */
_Static_assert(sizeof(hipExternalMemoryHandleDesc) <=
		   sizeof(struct hipapi_external_memory_handle_desc),
	       "hipExternalMemoryHandleDesc");
_Static_assert(offsetof(hipExternalMemoryHandleDesc, handle) ==
		   offsetof(struct hipapi_external_memory_handle_desc, handle),
	       "hipExternalMemoryHandleDesc.handle");
_Static_assert(offsetof(hipExternalMemoryHandleDesc, size) ==
		   offsetof(struct hipapi_external_memory_handle_desc, size),
	       "hipExternalMemoryHandleDesc.size");
_Static_assert(offsetof(hipExternalMemoryHandleDesc, flags) ==
		   offsetof(struct hipapi_external_memory_handle_desc, flags),
	       "hipExternalMemoryHandleDesc.flags");
_Static_assert(sizeof(hipExternalMemoryBufferDesc) <=
		   sizeof(struct hipapi_external_memory_buffer_desc),
	       "hipExternalMemoryBufferDesc");
_Static_assert(offsetof(hipExternalMemoryBufferDesc, size) ==
		   offsetof(struct hipapi_external_memory_buffer_desc, size),
	       "hipExternalMemoryBufferDesc.size");
_Static_assert(offsetof(hipExternalMemoryBufferDesc, flags) ==
		   offsetof(struct hipapi_external_memory_buffer_desc, flags),
	       "hipExternalMemoryBufferDesc.flags");

static void test_constants(void **state)
{
	(void)state;
	assert_int_equal(hipSuccess, HIPAPI_SUCCESS);
	assert_int_equal(hipErrorInvalidValue, HIPAPI_ERROR_INVALID_VALUE);
	assert_int_equal(hipErrorOutOfMemory, HIPAPI_ERROR_OUT_OF_MEMORY);
	assert_int_equal(hipErrorNotInitialized, HIPAPI_ERROR_NOT_INITIALIZED);
	assert_int_equal(hipErrorNoDevice, HIPAPI_ERROR_NO_DEVICE);
	assert_int_equal(hipErrorInvalidDevice, HIPAPI_ERROR_INVALID_DEVICE);
	assert_int_equal(hipErrorNotSupported, HIPAPI_ERROR_NOT_SUPPORTED);
	assert_int_equal(hipDeviceAttributeIntegrated, HIPAPI_ATTR_INTEGRATED);
	assert_int_equal(hipMemAllocationTypePinned, HIPAPI_MEM_ALLOCATION_PINNED);
	assert_int_equal(hipMemHandleTypePosixFileDescriptor, HIPAPI_MEM_HANDLE_POSIX_FD);
	assert_int_equal(hipMemLocationTypeDevice, HIPAPI_MEM_LOCATION_DEVICE);
	assert_int_equal(hipMemAccessFlagsProtReadWrite, HIPAPI_MEM_ACCESS_READWRITE);
	assert_int_equal(hipMemAllocationGranularityMinimum, HIPAPI_MEM_GRANULARITY_MINIMUM);
	assert_int_equal(hipExternalMemoryHandleTypeOpaqueFd, HIPAPI_EXTERNAL_MEMORY_OPAQUE_FD);
	assert_int_equal(hipMemcpyHostToDevice, HIPAPI_MEMCPY_HOST_TO_DEVICE);
	assert_int_equal(hipMemcpyDeviceToHost, HIPAPI_MEMCPY_DEVICE_TO_HOST);
	/* The IPC flag HIP 5.x takes (hipIpcMemLazyEnablePeerAccess, 0 up to 5.7). */
	assert_int_equal(hipIpcMemLazyEnablePeerAccess,
			 HIPAPI_IPC_LAZY_PEER_ACCESS(HIPAPI_VERSION(5, 2)));
}

int main(void)
{
	const struct CMUnitTest tests[] = {cmocka_unit_test(test_constants)};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
