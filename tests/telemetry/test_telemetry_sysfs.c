/* SPDX-License-Identifier: MIT */
/* test_telemetry_sysfs.c: the sysfs source on fake trees, and PCI bus id spellings. */
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

/* The discrete card's ids: bus 3, KFD gpu_id 12345. */
#define DGPU "0000:03:00.0"
#define DGPU_GPU_ID 12345

struct fixture {
	char root[TREE_PATH_MAX];
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	if (!f)
		return -1;
	tree_create(f->root);
	/* Never the machine's own rocm-smi: these tests are about sysfs. */
	setenv("ROCMMEM_ROCM_SMI_LIBRARY", "/nonexistent/librocm_smi64.so", 1);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	tree_destroy(f->root);
	unsetenv("ROCMMEM_SYSFS_ROOT");
	free(f);
	return 0;
}

static void assert_contains(const char *haystack, const char *needle)
{
	if (!strstr(haystack, needle))
		fail_msg("'%s' does not contain '%s'", haystack, needle);
}

/* discrete_card builds card0: every file, hwmon with labels, KFD topology, two processes. */
static void discrete_card(const char *root)
{
	char dev[TREE_PATH_MAX];

	tree_pci_device(root, DGPU, "amdgpu", dev, sizeof(dev));
	tree_card(root, "card0", dev);
	tree_card(root, "card0-DP-1", dev);
	tree_card(root, "renderD128", dev);
	tree_amdgpu_memory(root, dev, 16 * GiB, 3 * GiB, 256 * MiB, 100 * MiB, 31 * GiB, GiB / 2);
	tree_dev_write(root, dev, "gpu_busy_percent", "37\n");
	tree_dev_write(root, dev, "mem_busy_percent", "12\n");
	tree_dev_write(root, dev, "power/runtime_status", "active\n");
	tree_dev_write(root, dev, "hwmon/hwmon3/name", "amdgpu\n");
	tree_dev_write(root, dev, "hwmon/hwmon3/temp1_input", "61000\n");
	tree_dev_write(root, dev, "hwmon/hwmon3/temp1_label", "junction\n");
	tree_dev_write(root, dev, "hwmon/hwmon3/temp2_input", "45000\n");
	tree_dev_write(root, dev, "hwmon/hwmon3/temp2_label", "edge\n");
	tree_dev_write(root, dev, "hwmon/hwmon3/temp3_input", "70000\n");
	tree_dev_write(root, dev, "hwmon/hwmon3/temp3_label", "mem\n");
	tree_dev_write(root, dev, "hwmon/hwmon3/power1_average", "151000000\n");
	tree_dev_write(root, dev, "hwmon/hwmon3/power1_input", "1000000\n");
	/* gpu_metrics exists but must not be read: a FIFO would hang a reader. */
	tree_fifo(root, "devices/pci0000:00/0000:00:01.0/" DGPU "/gpu_metrics");
	tree_kfd_node(root, 0, 0, 0, 0); /* the CPU */
	tree_kfd_node(root, 1, DGPU_GPU_ID, 0, 3 << 8);
	tree_kfd_vram(root, 1234, DGPU_GPU_ID, "1073741824\n");
	tree_kfd_vram(root, 1234, 999, "5\n"); /* another GPU's counter */
	tree_kfd_vram(root, 5678, DGPU_GPU_ID, "2097152\n");
	tree_kfd_vram(root, 42, DGPU_GPU_ID, "0\n"); /* opened the GPU, holds nothing */
	tree_kfd_vram(root, 77, DGPU_GPU_ID, "lots\n");
	tree_write(root, "class/kfd/kfd/proc/notapid/vram_12345", "4096\n");
}

static struct telemetry *open_amd(void)
{
	struct telemetry *t = NULL;
	char why[512] = "";

	if (telemetry_open(TELEMETRY_AMD, &t, why, sizeof(why)) != 0)
		fail_msg("telemetry_open: %s", why);
	assert_string_equal(telemetry_source(t), "sysfs");
	assert_contains(why, "rocm-smi");
	return t;
}

static void test_discrete(void **state)
{
	struct fixture *f = *state;
	struct telemetry_sample s;
	struct telemetry *t;

	discrete_card(f->root);
	t = open_amd();
	assert_int_equal(telemetry_sample(t, DGPU, &s), 0);
	assert_string_equal(s.source, "sysfs");
	assert_int_equal(s.valid, TELEMETRY_HAS_VRAM | TELEMETRY_HAS_VIS_VRAM | TELEMETRY_HAS_GTT |
				      TELEMETRY_HAS_TEMPERATURE | TELEMETRY_HAS_POWER |
				      TELEMETRY_HAS_BUSY | TELEMETRY_HAS_MEM_BUSY |
				      TELEMETRY_HAS_PROCESSES);
	assert_true(s.vram_total == 16 * GiB && s.vram_used == 3 * GiB);
	assert_true(s.vis_vram_total == 256 * MiB && s.vis_vram_used == 100 * MiB);
	assert_true(s.gtt_total == 31 * GiB && s.gtt_used == GiB / 2);
	assert_int_equal(s.temperature_mc, 45000); /* the edge sensor, not temp1 */
	assert_int_equal(s.power_mw, 151000);	   /* the average, not the input */
	assert_int_equal(s.busy_percent, 37);
	assert_int_equal(s.mem_busy_percent, 12);
	assert_false(s.runtime_suspended);
	assert_int_equal(s.nprocesses, 2);
	assert_int_equal(s.nprocesses_total, 2);
	assert_int_equal(s.processes[0].pid, 1234);
	assert_true(s.processes[0].vram_bytes == GiB); /* not the other GPU's 5 bytes */
	assert_int_equal(s.processes[1].pid, 5678);
	assert_true(s.processes[1].vram_bytes == 2 * MiB);
	telemetry_close(t);
}

static void test_apu(void **state)
{
	struct fixture *f = *state;
	struct telemetry_sample s;
	struct telemetry *t;
	char dev[TREE_PATH_MAX];

	/* Strix Halo-like: a 512 MiB carve-out, most of RAM as GTT, no power file, no KFD. */
	tree_pci_device(f->root, "0000:c1:00.0", "amdgpu", dev, sizeof(dev));
	tree_card(f->root, "card1", dev);
	tree_amdgpu_memory(f->root, dev, 512 * MiB, 300 * MiB, 512 * MiB, 300 * MiB, 60 * GiB,
			   3 * GiB);
	tree_dev_write(f->root, dev, "gpu_busy_percent", "5\n");
	tree_dev_write(f->root, dev, "hwmon/hwmon0/temp1_input", "52000\n");
	t = open_amd();
	assert_int_equal(telemetry_sample(t, "0000:C1:00.0", &s), 0);
	assert_int_equal(s.valid, TELEMETRY_HAS_VRAM | TELEMETRY_HAS_VIS_VRAM | TELEMETRY_HAS_GTT |
				      TELEMETRY_HAS_TEMPERATURE | TELEMETRY_HAS_BUSY);
	/* Both as read, never summed. */
	assert_true(s.vram_total == 512 * MiB && s.vram_used == 300 * MiB);
	assert_true(s.gtt_total == 60 * GiB && s.gtt_used == 3 * GiB);
	assert_int_equal(s.temperature_mc, 52000);
	assert_int_equal(s.busy_percent, 5);
	assert_int_equal(s.nprocesses, 0);
	telemetry_close(t);
}

static void test_multiple_cards(void **state)
{
	struct fixture *f = *state;
	struct telemetry_sample s;
	struct telemetry *t;
	char dev[TREE_PATH_MAX];

	discrete_card(f->root);
	/* A second amdgpu card in another domain. */
	tree_pci_device(f->root, "0001:43:00.0", "amdgpu", dev, sizeof(dev));
	tree_card(f->root, "card1", dev);
	tree_amdgpu_memory(f->root, dev, 8 * GiB, GiB, 8 * GiB, GiB, 16 * GiB, 0);
	tree_kfd_node(f->root, 2, 777, 1, 0x43 << 8);
	tree_kfd_vram(f->root, 1234, 777, "4096\n");
	/* An NVIDIA card, even one with amdgpu-looking files, is not ours. */
	tree_pci_device(f->root, "0000:05:00.0", "nvidia", dev, sizeof(dev));
	tree_card(f->root, "card2", dev);
	tree_amdgpu_memory(f->root, dev, GiB, 0, GiB, 0, GiB, 0);
	/* No driver link: taken when amdgpu's files are there, skipped otherwise. */
	tree_pci_device(f->root, "0000:07:00.0", NULL, dev, sizeof(dev));
	tree_card(f->root, "card3", dev);
	tree_amdgpu_memory(f->root, dev, 2 * GiB, 0, 2 * GiB, 0, 2 * GiB, 0);
	tree_pci_device(f->root, "0000:08:00.0", NULL, dev, sizeof(dev));
	tree_card(f->root, "card4", dev);
	/* Connector and render-node entries lead to amdgpu devices no card names: skipped. */
	tree_pci_device(f->root, "0000:09:00.0", "amdgpu", dev, sizeof(dev));
	tree_amdgpu_memory(f->root, dev, GiB, 0, GiB, 0, GiB, 0);
	tree_card(f->root, "card9-DP-1", dev);
	tree_card(f->root, "renderD129", dev);
	tree_card(f->root, "card", dev);
	/* A card whose device is not a PCI device. */
	tree_mkdir(f->root, "devices/platform/amdgpu_xcp.1");
	tree_link(f->root, "devices/platform/amdgpu_xcp.1/drm/card5/device", "../..");
	tree_link(f->root, "class/drm/card5", "../../devices/platform/amdgpu_xcp.1/drm/card5");
	tree_write(f->root, "class/drm/version", "drm 1.1.0 20060810\n");
	/* KFD nodes of 03:00.1 (a partition on some kernels) and 03:01.0: not card0's. */
	tree_kfd_node(f->root, 3, 888, 0, (3 << 8) | 1);
	tree_kfd_vram(f->root, 1234, 888, "65536\n");
	tree_kfd_node(f->root, 4, 889, 0, (3 << 8) | (1 << 3));
	tree_kfd_vram(f->root, 1234, 889, "131072\n");

	t = open_amd();
	assert_int_equal(telemetry_sample(t, DGPU, &s), 0);
	assert_true(s.vram_total == 16 * GiB);
	assert_int_equal(s.nprocesses, 2);
	assert_int_equal(s.processes[0].pid, 1234);
	assert_true(s.processes[0].vram_bytes == GiB);
	assert_int_equal(telemetry_sample(t, "0001:43:00.0", &s), 0);
	assert_true(s.vram_total == 8 * GiB && s.gtt_total == 16 * GiB);
	assert_int_equal(s.nprocesses, 1);
	assert_int_equal(s.processes[0].pid, 1234);
	assert_true(s.processes[0].vram_bytes == 4096);
	assert_int_equal(telemetry_sample(t, "0000:07:00.0", &s), 0);
	assert_true(s.vram_total == 2 * GiB);
	assert_false(s.valid & TELEMETRY_HAS_PROCESSES); /* not in the KFD topology */
	assert_int_equal(telemetry_sample(t, "0000:05:00.0", &s), -ENODEV);
	assert_int_equal(s.valid, 0);
	assert_int_equal(telemetry_sample(t, "0000:08:00.0", &s), -ENODEV);
	assert_int_equal(telemetry_sample(t, "0000:09:00.0", &s), -ENODEV);
	assert_int_equal(telemetry_sample(t, "0000:43:00.0", &s), -ENODEV); /* wrong domain */
	telemetry_close(t);
}

static void test_garbage(void **state)
{
	struct fixture *f = *state;
	struct telemetry_sample s;
	struct telemetry *t;
	char dev[TREE_PATH_MAX];

	tree_pci_device(f->root, DGPU, "amdgpu", dev, sizeof(dev));
	tree_card(f->root, "card0", dev);
	tree_dev_write(f->root, dev, "mem_info_vram_total", "  17179869184  \n");
	tree_dev_write(f->root, dev, "mem_info_vram_used", "12\n");
	tree_dev_write(f->root, dev, "mem_info_vis_vram_total", "268435456\n");
	tree_dev_write(f->root, dev, "mem_info_vis_vram_used", "99999999999999999999999\n");
	tree_mkdir(f->root, "devices/pci0000:00/0000:00:01.0/" DGPU "/mem_info_gtt_total");
	tree_dev_write(f->root, dev, "mem_info_gtt_used", "0\n");
	tree_fifo(f->root, "devices/pci0000:00/0000:00:01.0/" DGPU "/gpu_busy_percent");
	tree_dev_write(f->root, dev, "mem_busy_percent", "250\n");
	tree_dev_write(f->root, dev, "power/runtime_status", "\n");
	tree_dev_write(f->root, dev, "hwmon/hwmon1/temp1_input", "-5000\n");
	tree_dev_write(f->root, dev, "hwmon/hwmon1/temp2_input", "12abc\n");
	tree_dev_write(f->root, dev, "hwmon/hwmon1/temp2_label", "edge\n");
	tree_dev_write(f->root, dev, "hwmon/hwmon1/temp3_input", "99999999999\n");
	tree_dev_write(f->root, dev, "hwmon/hwmon1/temp3_label", "junction\n");
	tree_dev_write(f->root, dev, "hwmon/hwmon1/temp-4_input", "1\n");
	tree_dev_write(f->root, dev, "hwmon/hwmon1/power1_average", "\n");
	tree_dev_write(f->root, dev, "hwmon/hwmon1/power1_input", "99999999999999999\n");
	tree_dev_write(f->root, dev, "hwmon/hwmon2/power1_input", "30000000\n");
	tree_link(f->root, "devices/pci0000:00/0000:00:01.0/" DGPU "/hwmon/hwmon9", "/nonexistent");
	tree_write(f->root, "class/kfd/kfd/topology/nodes/1/gpu_id", "12345\n");
	tree_write(f->root, "class/kfd/kfd/topology/nodes/1/properties",
		   "location_id\ndomain x\n\n\n  \nlocation_id 768 extra\n"
		   "a_very_long_property_name_that_does_not_fit_the_key_buffer 1\n");
	tree_write(f->root, "class/kfd/kfd/topology/nodes/2/gpu_id", "%s", "");
	tree_write(f->root, "class/kfd/kfd/topology/nodes/x/gpu_id", "1\n");

	t = open_amd();
	assert_int_equal(telemetry_sample(t, DGPU, &s), 0);
	/* VRAM parses with spaces; the rest is garbage, a directory, a FIFO or out of range. */
	assert_int_equal(s.valid,
			 TELEMETRY_HAS_VRAM | TELEMETRY_HAS_TEMPERATURE | TELEMETRY_HAS_POWER);
	assert_true(s.vram_total == 16 * GiB && s.vram_used == 12);
	assert_int_equal(s.temperature_mc, -5000); /* edge and junction unreadable: temp1 */
	assert_int_equal(s.power_mw, 30000);	   /* hwmon1's power is absurd: hwmon2's */
	telemetry_close(t);
}

static void test_missing_files(void **state)
{
	struct fixture *f = *state;
	struct telemetry_sample s;
	struct telemetry *t;
	char dev[TREE_PATH_MAX];

	/* The amdgpu driver link and nothing else: a card, with nothing to say. */
	tree_pci_device(f->root, DGPU, "amdgpu", dev, sizeof(dev));
	tree_card(f->root, "card0", dev);
	tree_write(f->root, "class/kfd/kfd/topology/nodes/1/gpu_id", "12345\n");
	tree_write(f->root, "class/kfd/kfd/topology/nodes/1/properties", "domain 0\n");
	t = open_amd();
	assert_int_equal(telemetry_sample(t, DGPU, &s), 0);
	assert_int_equal(s.valid, 0);
	assert_int_equal(s.nprocesses, 0);
	assert_string_equal(s.source, "sysfs");
	telemetry_close(t);
}

static void test_runtime_suspended(void **state)
{
	struct fixture *f = *state;
	struct telemetry_sample s;
	struct telemetry *t;
	char dev[TREE_PATH_MAX];

	discrete_card(f->root);
	tree_pci_device(f->root, DGPU, "amdgpu", dev, sizeof(dev));
	tree_dev_write(f->root, dev, "power/runtime_status", "suspended\n");
	t = open_amd();
	assert_int_equal(telemetry_sample(t, DGPU, &s), 0);
	assert_true(s.runtime_suspended);
	/* Memory and processes do not touch the hardware; sensors would wake it. */
	assert_int_equal(s.valid, TELEMETRY_HAS_VRAM | TELEMETRY_HAS_VIS_VRAM | TELEMETRY_HAS_GTT |
				      TELEMETRY_HAS_PROCESSES);
	telemetry_close(t);
}

static void test_many_processes(void **state)
{
	struct fixture *f = *state;
	struct telemetry_sample s;
	struct telemetry *t;

	discrete_card(f->root);
	for (int i = 0; i < 70; i++) {
		char value[32];

		snprintf(value, sizeof(value), "%d\n", (i + 1) * 4096);
		tree_kfd_vram(f->root, 2000 + i, DGPU_GPU_ID, value);
	}
	t = open_amd();
	assert_int_equal(telemetry_sample(t, DGPU, &s), 0);
	assert_int_equal(s.nprocesses, TELEMETRY_MAX_PROCESSES);
	assert_int_equal(s.nprocesses_total, 72);
	/* The largest kept, largest first: pid 1234 (1 GiB), 5678, then 2069 down to 2008. */
	assert_int_equal(s.processes[0].pid, 1234);
	assert_int_equal(s.processes[1].pid, 5678);
	assert_int_equal(s.processes[2].pid, 2069);
	assert_int_equal(s.processes[63].pid, 2008);
	for (unsigned i = 1; i < s.nprocesses; i++)
		assert_true(s.processes[i - 1].vram_bytes >= s.processes[i].vram_bytes);
	telemetry_close(t);
}

static void test_lookup_spellings(void **state)
{
	static const char *const same[] = {"0000:03:00.0", "03:00.0", "3:0.0", "00000000:03:00.0",
					   "0:03:00.0"};
	struct fixture *f = *state;
	struct telemetry_sample s;
	struct telemetry *t;
	char dev[TREE_PATH_MAX];

	discrete_card(f->root);
	tree_pci_device(f->root, "0000:0a:1f.7", "amdgpu", dev, sizeof(dev));
	tree_card(f->root, "card7", dev);
	tree_amdgpu_memory(f->root, dev, GiB, 1, GiB, 1, GiB, 1);
	t = open_amd();
	for (size_t i = 0; i < sizeof(same) / sizeof(same[0]); i++) {
		assert_int_equal(telemetry_sample(t, same[i], &s), 0);
		assert_true(s.vram_total == 16 * GiB);
	}
	assert_int_equal(telemetry_sample(t, "0000:0A:1F.7", &s), 0);
	assert_true(s.vram_total == GiB);
	assert_int_equal(telemetry_sample(t, "0a:1f.7", &s), 0);
	assert_int_equal(telemetry_sample(t, "0000:04:00.0", &s), -ENODEV);
	assert_int_equal(telemetry_sample(t, "0000:03:00", &s), -EINVAL);
	assert_int_equal(telemetry_sample(t, "", &s), -EINVAL);
	assert_int_equal(telemetry_sample(t, "card0", &s), -EINVAL);
	assert_int_equal(telemetry_sample(t, "0000:03:00.0\n", &s), -EINVAL);
	telemetry_close(t);
}

static void test_normalize(void **state)
{
	char out[TELEMETRY_PCI_ID_SIZE];

	(void)state;
	assert_int_equal(telemetry_normalize_pci("0000:03:00.0", out, sizeof(out)), 0);
	assert_string_equal(out, "0000:03:00.0");
	assert_int_equal(telemetry_normalize_pci("0000:C1:1F.7", out, sizeof(out)), 0);
	assert_string_equal(out, "0000:c1:1f.7");
	assert_int_equal(telemetry_normalize_pci("c1:00.0", out, sizeof(out)), 0);
	assert_string_equal(out, "0000:c1:00.0");
	assert_int_equal(telemetry_normalize_pci("00000000:65:00.0", out, sizeof(out)), 0);
	assert_string_equal(out, "0000:65:00.0");
	assert_int_equal(telemetry_normalize_pci("10000:e1:00.0", out, sizeof(out)), 0);
	assert_string_equal(out, "10000:e1:00.0");
	assert_int_equal(telemetry_normalize_pci("FFFFFFFF:FF:1F.7", out, sizeof(out)), 0);
	assert_string_equal(out, "ffffffff:ff:1f.7");
	static const char *const bad[] = {"",
					  "0",
					  "03:00",
					  "0000:03:00",
					  "0000:03:00.8",
					  "0000:03:20.0",
					  "0000:100:00.0",
					  "000000000:03:00.0",
					  "0000:03:00.0.0",
					  "0000:03:00.00",
					  " 03:00.0",
					  "03:00.0 ",
					  "0x0:03:00.0",
					  "g0:00.0",
					  "1:2:3:4.0",
					  "0000::00.0",
					  "-1:00.0"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (telemetry_normalize_pci(bad[i], out, sizeof(out)) != -EINVAL)
			fail_msg("'%s' was accepted as '%s'", bad[i], out);
	assert_int_equal(telemetry_normalize_pci(NULL, out, sizeof(out)), -EINVAL);
	assert_int_equal(telemetry_normalize_pci("0000:03:00.0", out, 12), -EINVAL);
	assert_int_equal(telemetry_normalize_pci("0000:03:00.0", out, 13), 0);
}

static void test_no_card(void **state)
{
	struct fixture *f = *state;
	struct telemetry *t = (struct telemetry *)&t;
	char why[512] = "", dev[TREE_PATH_MAX];

	/* An empty tree, then only a non-amdgpu card. */
	assert_int_equal(telemetry_open(TELEMETRY_AMD, &t, why, sizeof(why)), -ENOENT);
	assert_null(t);
	assert_contains(why, "rocm-smi: ");
	assert_contains(why, "sysfs: cannot read");
	tree_pci_device(f->root, "0000:05:00.0", "nvidia", dev, sizeof(dev));
	tree_card(f->root, "card0", dev);
	assert_int_equal(telemetry_open(TELEMETRY_AMD, &t, why, sizeof(why)), -ENOENT);
	assert_contains(why, "sysfs: no amdgpu card");
	assert_int_equal(telemetry_open((enum telemetry_vendor)7, &t, why, sizeof(why)), -EINVAL);
	telemetry_close(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_discrete, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_apu, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_multiple_cards, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_garbage, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_missing_files, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_runtime_suspended, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_many_processes, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_lookup_spellings, setup, teardown),
	    cmocka_unit_test(test_normalize),
	    cmocka_unit_test_setup_teardown(test_no_card, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
