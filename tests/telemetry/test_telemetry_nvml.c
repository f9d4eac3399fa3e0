/* SPDX-License-Identifier: MIT */
/* test_telemetry_nvml.c: the NVML source through dlopen of a fake libnvidia-ml. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fake_tree.h"
#include "platform/telemetry/registry.h"

#define MiB ((uint64_t)1 << 20)
#define GiB ((uint64_t)1 << 30)

struct fixture {
	char root[TREE_PATH_MAX];
	char data[TREE_PATH_MAX + 16], log[TREE_PATH_MAX + 16];
};

static void write_data(struct fixture *f, const char *mode, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void write_data(struct fixture *f, const char *mode, const char *fmt, ...)
{
	FILE *file = fopen(f->data, mode);
	va_list ap;

	assert_non_null(file);
	va_start(ap, fmt);
	vfprintf(file, fmt, ap);
	va_end(ap);
	fclose(file);
}

static char *read_log(struct fixture *f, char *buf, size_t len)
{
	FILE *file = fopen(f->log, "r");
	size_t n = 0;

	if (file) {
		n = fread(buf, 1, len - 1, file);
		fclose(file);
	}
	buf[n] = '\0';
	return buf;
}

static void assert_contains(const char *haystack, const char *needle)
{
	if (!strstr(haystack, needle))
		fail_msg("'%s' does not contain '%s'", haystack, needle);
}

/* Two GPUs; NVML writes bus ids with an 8-digit domain. */
static const char standard_data[] = "count 2\n"
				    "dev0.busid 00000000:17:00.0\n"
				    "dev0.total 85899345920\n"
				    "dev0.free 75161927680\n"
				    "dev0.used 10737418240\n"
				    "dev0.temp 41\n"
				    "dev0.power 123456\n"
				    "dev0.util_gpu 80\n"
				    "dev0.util_mem 30\n"
				    "dev0.procs 4242:1073741824,4343:na,4444:8589934592\n"
				    "dev1.busid 00000000:65:00.0\n"
				    "dev1.total 1024\n"
				    "dev1.free 1024\n"
				    "dev1.used 0\n";

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	if (!f)
		return -1;
	tree_create(f->root); /* a scratch directory; NVML reads no sysfs */
	snprintf(f->data, sizeof(f->data), "%s/nvml.data", f->root);
	snprintf(f->log, sizeof(f->log), "%s/nvml.log", f->root);
	setenv("FAKE_NVML_DATA", f->data, 1);
	setenv("FAKE_NVML_LOG", f->log, 1);
	setenv("ROCMMEM_NVML_LIBRARY", FAKE_NVML_PATH, 1);
	write_data(f, "w", "%s", standard_data);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	tree_destroy(f->root);
	unsetenv("FAKE_NVML_DATA");
	unsetenv("FAKE_NVML_LOG");
	free(f);
	return 0;
}

static struct telemetry *open_nvml(void)
{
	struct telemetry *t = NULL;
	char why[512] = "";

	if (telemetry_open(TELEMETRY_NVIDIA, &t, why, sizeof(why)) != 0)
		fail_msg("telemetry_open: %s", why);
	assert_string_equal(telemetry_source(t), "nvml");
	assert_string_equal(why, "");
	return t;
}

static void test_values(void **state)
{
	struct fixture *f = *state;
	struct telemetry_sample s;
	struct telemetry *t = open_nvml();
	char log[4096];

	assert_int_equal(telemetry_sample(t, "0000:17:00.0", &s), 0);
	assert_string_equal(s.source, "nvml");
	assert_int_equal(s.valid, TELEMETRY_HAS_VRAM | TELEMETRY_HAS_TEMPERATURE |
				      TELEMETRY_HAS_POWER | TELEMETRY_HAS_BUSY |
				      TELEMETRY_HAS_MEM_BUSY | TELEMETRY_HAS_PROCESSES);
	assert_true(s.vram_total == 80 * GiB && s.vram_used == 10 * GiB);
	assert_int_equal(s.temperature_mc, 41000);
	assert_int_equal(s.power_mw, 123456);
	assert_int_equal(s.busy_percent, 80);
	assert_int_equal(s.mem_busy_percent, 30);
	assert_false(s.runtime_suspended);
	/* Largest first; a process whose usage NVML will not tell is listed with 0. */
	assert_int_equal(s.nprocesses, 3);
	assert_int_equal(s.nprocesses_total, 3);
	assert_int_equal(s.processes[0].pid, 4444);
	assert_true(s.processes[0].vram_bytes == 8 * GiB);
	assert_int_equal(s.processes[1].pid, 4242);
	assert_true(s.processes[1].vram_bytes == GiB);
	assert_int_equal(s.processes[2].pid, 4343);
	assert_true(s.processes[2].vram_bytes == 0);
	telemetry_close(t);
	read_log(f, log, sizeof(log));
	assert_contains(log, "init\nlookup 0000:17:00.0\nprocesses_v3 64\nshutdown\n");
}

static void test_lookup(void **state)
{
	struct fixture *f = *state;
	struct telemetry_sample s;
	struct telemetry *t = open_nvml();
	char log[4096];

	/* Every spelling reaches NVML in the canonical form. */
	assert_int_equal(telemetry_sample(t, "65:00.0", &s), 0);
	assert_true(s.vram_total == 1024 && s.vram_used == 0);
	assert_int_equal(s.valid, TELEMETRY_HAS_VRAM | TELEMETRY_HAS_PROCESSES);
	assert_int_equal(s.nprocesses, 0);
	assert_int_equal(telemetry_sample(t, "00000000:65:00.0", &s), 0);
	assert_int_equal(telemetry_sample(t, "0000:B3:00.0", &s), -ENODEV);
	assert_int_equal(telemetry_sample(t, "not a bus id", &s), -EINVAL);
	read_log(f, log, sizeof(log));
	assert_contains(log, "lookup 0000:65:00.0\n");
	assert_contains(log, "lookup 0000:b3:00.0\n");
	/* Any other lookup failure (a GPU fallen off the bus) is an I/O error. */
	write_data(f, "a", "lookup_error 15\n");
	assert_int_equal(telemetry_sample(t, "0000:17:00.0", &s), -EIO);
	assert_int_equal(s.valid, 0);
	assert_int_equal(s.nprocesses, 0);
	telemetry_close(t);
}

static void test_insufficient_size(void **state)
{
	struct fixture *f = *state;
	struct telemetry_sample s;
	struct telemetry *t = open_nvml();
	char log[8192];

	/* 73 processes: more than the first buffer, more than a sample keeps. */
	write_data(f, "a", "dev0.nprocs 70\n");
	assert_int_equal(telemetry_sample(t, "0000:17:00.0", &s), 0);
	assert_true(s.valid & TELEMETRY_HAS_PROCESSES);
	assert_int_equal(s.nprocesses, TELEMETRY_MAX_PROCESSES);
	assert_int_equal(s.nprocesses_total, 73);
	assert_int_equal(s.processes[0].pid, 4444);
	assert_int_equal(s.processes[1].pid, 4242);
	assert_int_equal(s.processes[2].pid, 1069); /* 70 MiB */
	assert_int_equal(s.processes[63].pid, 1008);
	read_log(f, log, sizeof(log));
	assert_contains(log, "processes_v3 64\nprocesses_v3 99\n");
	telemetry_close(t);
}

static void test_processes_racing(void **state)
{
	struct fixture *f = *state;
	struct telemetry_sample s;
	struct telemetry *t = open_nvml();

	/* 30 more processes at every query: the buffer has to grow twice. */
	write_data(f, "a", "dev0.nprocs 62\ndev0.grow 30\n");
	assert_int_equal(telemetry_sample(t, "0000:17:00.0", &s), 0);
	assert_true(s.valid & TELEMETRY_HAS_PROCESSES);
	assert_int_equal(s.nprocesses, TELEMETRY_MAX_PROCESSES);
	assert_true(s.nprocesses_total > 64);
	telemetry_close(t);

	/* A driver that always wants more: no list, no endless loop, the rest still there. */
	write_data(f, "a", "dev0.grow 0\ndev0.always_short 1\n");
	t = open_nvml();
	assert_int_equal(telemetry_sample(t, "0000:17:00.0", &s), 0);
	assert_false(s.valid & TELEMETRY_HAS_PROCESSES);
	assert_int_equal(s.nprocesses, 0);
	assert_true(s.valid & TELEMETRY_HAS_VRAM);
	telemetry_close(t);
}

static void test_minimal_library(void **state)
{
	struct fixture *f = *state;
	struct telemetry_sample s;
	struct telemetry *t;
	char log[4096];

	/* No _v3 process query (older drivers): _v2, whose struct is the same. No sensors. */
	setenv("ROCMMEM_NVML_LIBRARY", FAKE_NVML_MINIMAL_PATH, 1);
	t = open_nvml();
	assert_int_equal(telemetry_sample(t, "0000:17:00.0", &s), 0);
	assert_int_equal(s.valid, TELEMETRY_HAS_VRAM | TELEMETRY_HAS_PROCESSES);
	assert_int_equal(s.nprocesses, 3);
	telemetry_close(t);
	read_log(f, log, sizeof(log));
	assert_contains(log, "processes_v2 64\n");
}

static void test_missing(void **state)
{
	struct fixture *f = *state;
	struct telemetry *t = NULL;
	char why[512] = "", log[4096];

	setenv("ROCMMEM_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1", 1);
	assert_int_equal(telemetry_open(TELEMETRY_NVIDIA, &t, why, sizeof(why)), -ENOENT);
	assert_null(t);
	assert_contains(why, "NVML not loaded");
	assert_contains(why, "/nonexistent/libnvidia-ml.so.1");

	/* Not NVML at all. */
	setenv("ROCMMEM_NVML_LIBRARY", FAKE_RSMI_PATH, 1);
	assert_int_equal(telemetry_open(TELEMETRY_NVIDIA, &t, why, sizeof(why)), -ENOENT);
	assert_contains(why, "lacks nvmlInit_v2");

	/* Loaded, but no driver. */
	setenv("ROCMMEM_NVML_LIBRARY", FAKE_NVML_PATH, 1);
	write_data(f, "a", "init 9\n");
	assert_int_equal(telemetry_open(TELEMETRY_NVIDIA, &t, why, sizeof(why)), -ENOENT);
	assert_null(t);
	assert_contains(why, "nvmlInit_v2 failed: Driver Not Loaded (9)");
	read_log(f, log, sizeof(log));
	assert_null(strstr(log, "shutdown"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_values, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_lookup, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_insufficient_size, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_processes_racing, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_minimal_library, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_missing, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
