/* SPDX-License-Identifier: MIT */
/* test_telemetry_smi.c: the rocm-smi source through dlopen of a fake librocm_smi64. */
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

/*
 * BDFID = (domain << 32) | (partition << 28) | (bus << 8) | (device << 3) | function.
 * Three devices: 0 = 0001:c1:1f.7, 1 = 0000:03:00.0 with bits 16-31 set (reserved; 6.x puts a
 * partition id in 28-31), 2 = one whose bus id cannot be read.
 */
static const char standard_data[] = "count 3\n"
				    "dev0.bdfid 0x10000c1ff\n"
				    "dev0.vram_total 1024\n"
				    "dev0.vram_used 512\n"
				    "dev1.bdfid 0x1abc0300\n"
				    "dev1.vram_total 25753026560\n"
				    "dev1.vram_used 4294967296\n"
				    "dev1.vis_vram_total 268435456\n"
				    "dev1.vis_vram_used 1048576\n"
				    "dev1.gtt_total 33554432000\n"
				    "dev1.gtt_used 20971520\n"
				    "dev1.temp0 44000\n"
				    "dev1.temp1 58000\n"
				    "dev1.power_ave 87000000\n"
				    "dev1.socket_power 99000000\n"
				    "dev1.busy 99\n"
				    "dev1.mem_busy 3\n";

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	char dev[TREE_PATH_MAX];

	if (!f)
		return -1;
	tree_create(f->root);
	snprintf(f->data, sizeof(f->data), "%s/rsmi.data", f->root);
	snprintf(f->log, sizeof(f->log), "%s/rsmi.log", f->root);
	setenv("FAKE_RSMI_DATA", f->data, 1);
	setenv("FAKE_RSMI_LOG", f->log, 1);
	setenv("ROCMMEM_ROCM_SMI_LIBRARY", FAKE_RSMI_PATH, 1);
	write_data(f, "w", "%s", standard_data);
	/* The sysfs side: KFD counters, runtime status, and a card for the fallback. */
	tree_pci_device(f->root, "0000:03:00.0", "amdgpu", dev, sizeof(dev));
	tree_card(f->root, "card0", dev);
	tree_dev_write(f->root, dev, "mem_info_vram_total", "1000\n");
	tree_dev_write(f->root, dev, "mem_info_vram_used", "10\n");
	tree_dev_write(f->root, dev, "power/runtime_status", "active\n");
	tree_kfd_node(f->root, 1, 4242, 0, 3 << 8);
	tree_kfd_node(f->root, 2, 4343, 1, (0xc1 << 8) | (0x1f << 3) | 7);
	tree_kfd_vram(f->root, 300, 4242, "8388608\n");
	tree_kfd_vram(f->root, 301, 4242, "16777216\n");
	tree_kfd_vram(f->root, 301, 4343, "4096\n");
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	tree_destroy(f->root);
	unsetenv("FAKE_RSMI_DATA");
	unsetenv("FAKE_RSMI_LOG");
	free(f);
	return 0;
}

static struct telemetry *open_smi(void)
{
	struct telemetry *t = NULL;
	char why[512] = "";

	if (telemetry_open(TELEMETRY_AMD, &t, why, sizeof(why)) != 0)
		fail_msg("telemetry_open: %s", why);
	assert_string_equal(telemetry_source(t), "rocm-smi");
	assert_string_equal(why, "");
	return t;
}

static void test_values(void **state)
{
	struct fixture *f = *state;
	struct telemetry_sample s;
	struct telemetry *t = open_smi();
	char log[4096];

	assert_int_equal(telemetry_sample(t, "0000:03:00.0", &s), 0);
	assert_string_equal(s.source, "rocm-smi");
	assert_int_equal(s.valid, TELEMETRY_HAS_VRAM | TELEMETRY_HAS_VIS_VRAM | TELEMETRY_HAS_GTT |
				      TELEMETRY_HAS_TEMPERATURE | TELEMETRY_HAS_POWER |
				      TELEMETRY_HAS_BUSY | TELEMETRY_HAS_MEM_BUSY |
				      TELEMETRY_HAS_PROCESSES);
	assert_true(s.vram_total == 25753026560ull && s.vram_used == 4 * GiB);
	assert_true(s.vis_vram_total == 256 * MiB && s.vis_vram_used == MiB);
	assert_true(s.gtt_total == 33554432000ull && s.gtt_used == 20 * MiB);
	assert_int_equal(s.temperature_mc, 44000);
	assert_int_equal(s.power_mw, 87000);
	assert_int_equal(s.busy_percent, 99);
	assert_int_equal(s.mem_busy_percent, 3);
	assert_false(s.runtime_suspended);
	/* Per device, from KFD: 301's counter on the other GPU is not counted here. */
	assert_int_equal(s.nprocesses, 2);
	assert_int_equal(s.processes[0].pid, 301);
	assert_true(s.processes[0].vram_bytes == 16 * MiB);
	assert_int_equal(s.processes[1].pid, 300);
	assert_true(s.processes[1].vram_bytes == 8 * MiB);
	telemetry_close(t);
	read_log(f, log, sizeof(log));
	assert_contains(log, "init 0x400000000000000\n");
	assert_contains(log, "shut_down\n");
	assert_null(strstr(log, "gpu_metrics"));
}

static void test_bdfid_decoding(void **state)
{
	struct telemetry_sample s;
	struct telemetry *t = open_smi();

	(void)state;
	/* Domain 1, bus c1, device 1f, function 7, in several spellings. */
	assert_int_equal(telemetry_sample(t, "0001:c1:1f.7", &s), 0);
	assert_true(s.vram_total == 1024 && s.vram_used == 512);
	assert_int_equal(s.valid, TELEMETRY_HAS_VRAM | TELEMETRY_HAS_PROCESSES);
	assert_int_equal(s.nprocesses, 1);
	assert_int_equal(s.processes[0].pid, 301);
	assert_true(s.processes[0].vram_bytes == 4096);
	assert_int_equal(telemetry_sample(t, "0001:C1:1F.7", &s), 0);
	assert_true(s.vram_total == 1024);
	/* Without a domain it is domain 0: another device. */
	assert_int_equal(telemetry_sample(t, "c1:1f.7", &s), -ENODEV);
	/* Bits 16-31 of dev1's BDFID are not part of the bus id. */
	assert_int_equal(telemetry_sample(t, "03:00.0", &s), 0);
	assert_true(s.vram_total == 25753026560ull);
	assert_int_equal(telemetry_sample(t, "0000:bc:03:00.0", &s), -EINVAL);
	assert_int_equal(telemetry_sample(t, "0000:04:00.0", &s), -ENODEV);
	assert_int_equal(s.valid, 0);
	telemetry_close(t);
}

static void test_fallbacks_and_garbage(void **state)
{
	struct fixture *f = *state;
	struct telemetry_sample s;
	struct telemetry *t;

	/* No edge sensor (MI300): junction. An absurd average power: the socket power. Busy
	 * above 100: left out. */
	write_data(f, "a",
		   "dev1.temp0 99999999999\n"
		   "dev1.power_ave 18446744073709551615\n"
		   "dev1.busy 250\n");
	t = open_smi();
	assert_int_equal(telemetry_sample(t, "0000:03:00.0", &s), 0);
	assert_int_equal(s.temperature_mc, 58000);
	assert_int_equal(s.power_mw, 99000);
	assert_false(s.valid & TELEMETRY_HAS_BUSY);
	assert_true(s.valid & TELEMETRY_HAS_MEM_BUSY);
	telemetry_close(t);
}

static void test_runtime_suspended(void **state)
{
	struct fixture *f = *state;
	struct telemetry_sample s;
	struct telemetry *t = open_smi();
	char dev[TREE_PATH_MAX];

	tree_pci_device(f->root, "0000:03:00.0", "amdgpu", dev, sizeof(dev));
	tree_dev_write(f->root, dev, "power/runtime_status", "suspended\n");
	assert_int_equal(telemetry_sample(t, "0000:03:00.0", &s), 0);
	assert_true(s.runtime_suspended);
	assert_int_equal(s.valid, TELEMETRY_HAS_VRAM | TELEMETRY_HAS_VIS_VRAM | TELEMETRY_HAS_GTT |
				      TELEMETRY_HAS_PROCESSES);
	telemetry_close(t);
}

static void test_thread_only_flag_refused(void **state)
{
	struct fixture *f = *state;
	struct telemetry *t;
	char log[4096];

	write_data(f, "a", "reject_flags 1\n");
	t = open_smi();
	telemetry_close(t);
	read_log(f, log, sizeof(log));
	assert_contains(log, "init 0x400000000000000\ninit 0x0\n");
}

static void test_init_fails(void **state)
{
	struct fixture *f = *state;
	struct telemetry_sample s;
	struct telemetry *t = NULL;
	char why[512] = "", log[4096];

	write_data(f, "a", "init 8\n");
	assert_int_equal(telemetry_open(TELEMETRY_AMD, &t, why, sizeof(why)), 0);
	assert_string_equal(telemetry_source(t), "sysfs");
	assert_contains(why, "rsmi_init failed: RSMI_STATUS_INIT_ERROR (8)");
	assert_int_equal(telemetry_sample(t, "0000:03:00.0", &s), 0);
	assert_string_equal(s.source, "sysfs");
	assert_true(s.vram_total == 1000);
	telemetry_close(t);
	/* Never initialised, so never shut down. */
	read_log(f, log, sizeof(log));
	assert_null(strstr(log, "shut_down"));
}

static void test_no_devices(void **state)
{
	struct fixture *f = *state;
	struct telemetry *t = NULL;
	char why[512] = "", log[4096];

	write_data(f, "a", "count 0\n");
	assert_int_equal(telemetry_open(TELEMETRY_AMD, &t, why, sizeof(why)), 0);
	assert_string_equal(telemetry_source(t), "sysfs");
	assert_contains(why, "sees no GPU");
	telemetry_close(t);
	read_log(f, log, sizeof(log));
	assert_contains(log, "shut_down");
}

static void test_minimal_library(void **state)
{
	struct telemetry_sample s;
	struct telemetry *t;

	(void)state;
	/* Only the four required functions: found by bus id, everything else left out. */
	setenv("ROCMMEM_ROCM_SMI_LIBRARY", FAKE_RSMI_MINIMAL_PATH, 1);
	t = open_smi();
	assert_int_equal(telemetry_sample(t, "0000:03:00.0", &s), 0);
	assert_int_equal(s.valid, TELEMETRY_HAS_PROCESSES);
	telemetry_close(t);
}

static void test_not_rocm_smi(void **state)
{
	struct fixture *f = *state;
	struct telemetry *t = NULL;
	char why[1024] = "";

	/* A library without rsmi_init, then none at all: sysfs, then nothing. */
	setenv("ROCMMEM_ROCM_SMI_LIBRARY", FAKE_NVML_PATH, 1);
	assert_int_equal(telemetry_open(TELEMETRY_AMD, &t, why, sizeof(why)), 0);
	assert_string_equal(telemetry_source(t), "sysfs");
	assert_contains(why, "lacks rsmi_init");
	telemetry_close(t);
	setenv("ROCMMEM_ROCM_SMI_LIBRARY", "/nonexistent/librocm_smi64.so.7", 1);
	assert_int_equal(telemetry_open(TELEMETRY_AMD, &t, why, sizeof(why)), 0);
	assert_contains(why, "/nonexistent/librocm_smi64.so.7");
	telemetry_close(t);
	tree_destroy(f->root);
	assert_int_equal(telemetry_open(TELEMETRY_AMD, &t, why, sizeof(why)), -ENOENT);
	assert_null(t);
	assert_contains(why, "rocm-smi: ");
	assert_contains(why, "; sysfs: ");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_values, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_bdfid_decoding, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_fallbacks_and_garbage, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_runtime_suspended, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_thread_only_flag_refused, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_init_fails, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_no_devices, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_minimal_library, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_not_rocm_smi, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
