/* SPDX-License-Identifier: MIT */
/* test_cuda_abi.c: the project's CUDA driver declarations against the toolkit's cuda.h. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cuda.h>

#include "cuda_api.h"

#define SAME_LAYOUT(theirs, ours, field_t, field_o)                                 \
	_Static_assert(offsetof(theirs, field_t) == offsetof(struct ours, field_o), \
		       #theirs "." #field_t)

_Static_assert(sizeof(CUmemAllocationProp) == sizeof(struct cuapi_alloc_prop),
	       "CUmemAllocationProp");
SAME_LAYOUT(CUmemAllocationProp, cuapi_alloc_prop, requestedHandleTypes, requested_handle_types);
SAME_LAYOUT(CUmemAllocationProp, cuapi_alloc_prop, location, location);
SAME_LAYOUT(CUmemAllocationProp, cuapi_alloc_prop, win32HandleMetaData, win32_handle_meta_data);
SAME_LAYOUT(CUmemAllocationProp, cuapi_alloc_prop, allocFlags, alloc_flags);
_Static_assert(sizeof(CUmemAccessDesc) == sizeof(struct cuapi_access_desc), "CUmemAccessDesc");
SAME_LAYOUT(CUmemAccessDesc, cuapi_access_desc, flags, flags);
_Static_assert(sizeof(CUmemGenericAllocationHandle) == sizeof(cuapi_mem_handle_t),
	       "CUmemGenericAllocationHandle");
_Static_assert(sizeof(CUdeviceptr) == sizeof(cuapi_deviceptr_t), "CUdeviceptr");
_Static_assert(sizeof(CUdevice) == sizeof(cuapi_device_t), "CUdevice");

static void test_constants(void **state)
{
	(void)state;
	assert_int_equal(CUDA_SUCCESS, CUAPI_SUCCESS);
	assert_int_equal(CUDA_ERROR_INVALID_VALUE, CUAPI_ERROR_INVALID_VALUE);
	assert_int_equal(CUDA_ERROR_OUT_OF_MEMORY, CUAPI_ERROR_OUT_OF_MEMORY);
	assert_int_equal(CUDA_ERROR_NOT_INITIALIZED, CUAPI_ERROR_NOT_INITIALIZED);
	assert_int_equal(CUDA_ERROR_NO_DEVICE, CUAPI_ERROR_NO_DEVICE);
	assert_int_equal(CUDA_ERROR_INVALID_DEVICE, CUAPI_ERROR_INVALID_DEVICE);
	assert_int_equal(CUDA_ERROR_NOT_SUPPORTED, CUAPI_ERROR_NOT_SUPPORTED);
	assert_int_equal(CU_DEVICE_ATTRIBUTE_INTEGRATED, CUAPI_ATTR_INTEGRATED);
	assert_int_equal(CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED,
			 CUAPI_ATTR_VMM_SUPPORTED);
	assert_int_equal(CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED,
			 CUAPI_ATTR_POSIX_FD_SUPPORTED);
	assert_int_equal(CU_MEM_ALLOCATION_TYPE_PINNED, CUAPI_MEM_ALLOCATION_PINNED);
	assert_int_equal(CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, CUAPI_MEM_HANDLE_POSIX_FD);
	assert_int_equal(CU_MEM_LOCATION_TYPE_DEVICE, CUAPI_MEM_LOCATION_DEVICE);
	assert_int_equal(CU_MEM_ACCESS_FLAGS_PROT_READWRITE, CUAPI_MEM_ACCESS_READWRITE);
	assert_int_equal(CU_MEM_ALLOC_GRANULARITY_MINIMUM, CUAPI_MEM_GRANULARITY_MINIMUM);
}

int main(void)
{
	const struct CMUnitTest tests[] = {cmocka_unit_test(test_constants)};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
