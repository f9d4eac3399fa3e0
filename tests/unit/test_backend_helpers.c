/* SPDX-License-Identifier: MIT */
/* test_backend_helpers.c: chunk plans, default headroom and external usage arithmetic. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "platform/backend/backend.h"
#include "state/device.h"

#define MiB ((uint64_t)1 << 20)
#define GiB ((uint64_t)1 << 30)

static void test_chunk_plan_even_and_uneven(void **state)
{
	uint64_t sizes[BACKEND_MAX_CHUNKS];
	uint64_t sum = 0;

	(void)state;
	assert_int_equal(backend_chunk_plan(64 * MiB, 2 * MiB, 1, sizes), 0);
	assert_int_equal(sizes[0], 64 * MiB);
	assert_int_equal(backend_chunk_plan(64 * MiB, 2 * MiB, 4, sizes), 0);
	for (int i = 0; i < 4; i++)
		assert_int_equal(sizes[i], 16 * MiB);
	/* 7 granules in 2: the larger first, every chunk a whole number of granules. */
	assert_int_equal(backend_chunk_plan(14 * MiB, 2 * MiB, 2, sizes), 0);
	assert_int_equal(sizes[0], 8 * MiB);
	assert_int_equal(sizes[1], 6 * MiB);
	/* 10 GiB in 16 chunks with a 2 MiB granule: sums exactly, sizes differ by one granule. */
	assert_int_equal(backend_chunk_plan(10 * GiB + 6 * MiB, 2 * MiB, 16, sizes), 0);
	for (int i = 0; i < 16; i++) {
		assert_int_equal(sizes[i] % (2 * MiB), 0);
		assert_true(sizes[i] - sizes[15] <= 2 * MiB);
		sum += sizes[i];
	}
	assert_int_equal(sum, 10 * GiB + 6 * MiB);
}

static void test_chunk_plan_refusals(void **state)
{
	uint64_t sizes[BACKEND_MAX_CHUNKS];

	(void)state;
	assert_int_equal(backend_chunk_plan(8 * MiB, 2 * MiB, 0, sizes), -EINVAL);
	assert_int_equal(backend_chunk_plan(8 * MiB, 2 * MiB, BACKEND_MAX_CHUNKS + 1, sizes),
			 -EINVAL);
	/* More chunks than granules. */
	assert_int_equal(backend_chunk_plan(8 * MiB, 2 * MiB, 8, sizes), -EINVAL);
	/* Not a multiple of the granule, or no granule. */
	assert_int_equal(backend_chunk_plan(3 * MiB, 2 * MiB, 1, sizes), -EINVAL);
	assert_int_equal(backend_chunk_plan(8 * MiB, 0, 1, sizes), -EINVAL);
}

/* with_meminfo points the host MemAvailable reader at a fixture. */
static void with_meminfo(char *path, size_t len, uint64_t available_kib)
{
	FILE *f;
	int fd;

	snprintf(path, len, "/tmp/rocmmem-meminfo-XXXXXX");
	fd = mkstemp(path);
	assert_true(fd >= 0);
	f = fdopen(fd, "w");
	fprintf(f, "MemTotal:       99999999 kB\nMemFree:        1 kB\nMemAvailable:   %llu kB\n",
		(unsigned long long)available_kib);
	fclose(f);
	setenv("ROCMMEM_HOST_MEMINFO", path, 1);
}

static void test_default_headroom(void **state)
{
	char path[64];

	(void)state;
	/* Discrete: 5%, at least 512 MiB, rounded up to the granule. */
	assert_int_equal(backend_default_headroom(24 * GiB, false, 2 * MiB),
			 ((24 * GiB / 20) + 2 * MiB - 1) & ~(2 * MiB - 1));
	assert_int_equal(backend_default_headroom(4 * GiB, false, 2 * MiB), 512 * MiB);
	/* A device smaller than the minimum keeps half. */
	assert_int_equal(backend_default_headroom(512 * MiB, false, 2 * MiB), 256 * MiB);
	/* APU: a quarter of what the host has available stays with the host... */
	with_meminfo(path, sizeof(path), 64 * 1024 * 1024); /* 64 GiB available */
	assert_int_equal(backend_default_headroom(96 * GiB, true, 2 * MiB), 96 * GiB - 48 * GiB);
	/* ...and at least a tenth of the device, when the host has plenty. */
	assert_int_equal(backend_default_headroom(16 * GiB, true, 2 * MiB),
			 ((16 * GiB / 10) + 2 * MiB - 1) & ~(2 * MiB - 1));
	unlink(path);
	unsetenv("ROCMMEM_HOST_MEMINFO");
}

static void test_external_usage(void **state)
{
	struct backend_device info = {.name = "gpu", .total_bytes = 8 * GiB, .granule = 2 * MiB};
	struct device d;

	(void)state;
	device_init(&d, 0, &info, 6 * GiB);
	assert_int_equal(device_external(&d), 0); /* not sampled yet */
	d.has_meminfo = true;
	d.runtime_total = 8 * GiB;
	d.runtime_free = 5 * GiB;
	device_charge(&d, 1 * GiB);
	/* 3 GiB used on the device, 1 GiB of it rocmmemd's. */
	assert_int_equal(device_external(&d), 2 * GiB);
	/* A sample taken before an allocation shows less used than we hold: never negative. */
	device_charge(&d, 3 * GiB);
	assert_int_equal(device_external(&d), 0);
	d.runtime_free = 9 * GiB; /* garbage from a runtime: free above total */
	assert_int_equal(device_external(&d), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_chunk_plan_even_and_uneven),
	    cmocka_unit_test(test_chunk_plan_refusals),
	    cmocka_unit_test(test_default_headroom),
	    cmocka_unit_test(test_external_usage),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
