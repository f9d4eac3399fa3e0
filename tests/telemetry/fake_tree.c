/* SPDX-License-Identifier: MIT */
/* fake_tree.c: fake /sys trees for the telemetry tests, laid out as the kernel does. */
#include "fake_tree.h"

#include <errno.h>
#include <ftw.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

static void full_path(const char *root, const char *rel, char out[TREE_PATH_MAX])
{
	int n = snprintf(out, TREE_PATH_MAX, "%s/%s", root, rel);

	assert_true(n > 0 && n < TREE_PATH_MAX);
}

static void mkdir_parents(char *path)
{
	for (char *p = strchr(path + 1, '/'); p; p = strchr(p + 1, '/')) {
		*p = '\0';
		if (mkdir(path, 0755) < 0 && errno != EEXIST)
			fail_msg("Could not create %s: %s", path, strerror(errno));
		*p = '/';
	}
}

void tree_create(char root[TREE_PATH_MAX])
{
	const char *tmp = getenv("TMPDIR");

	snprintf(root, TREE_PATH_MAX, "%s/rocmmem-sysfs-XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
	assert_non_null(mkdtemp(root));
	setenv("ROCMMEM_SYSFS_ROOT", root, 1);
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

void tree_destroy(const char *root)
{
	nftw(root, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

void tree_mkdir(const char *root, const char *rel)
{
	char path[TREE_PATH_MAX];

	full_path(root, rel, path);
	mkdir_parents(path);
	if (mkdir(path, 0755) < 0 && errno != EEXIST)
		fail_msg("Could not create %s: %s", path, strerror(errno));
}

static void write_file(const char *path, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));

static void write_file(const char *path, const char *fmt, va_list ap)
{
	FILE *f = fopen(path, "w");

	if (!f)
		fail_msg("Could not write %s: %s", path, strerror(errno));
	vfprintf(f, fmt, ap);
	fclose(f);
}

void tree_write(const char *root, const char *rel, const char *fmt, ...)
{
	char path[TREE_PATH_MAX];
	va_list ap;

	full_path(root, rel, path);
	mkdir_parents(path);
	va_start(ap, fmt);
	write_file(path, fmt, ap);
	va_end(ap);
}

void tree_link(const char *root, const char *rel, const char *target)
{
	char path[TREE_PATH_MAX];

	full_path(root, rel, path);
	mkdir_parents(path);
	unlink(path);
	if (symlink(target, path) < 0)
		fail_msg("Could not link %s: %s", path, strerror(errno));
}

void tree_fifo(const char *root, const char *rel)
{
	char path[TREE_PATH_MAX];

	full_path(root, rel, path);
	mkdir_parents(path);
	unlink(path);
	if (mkfifo(path, 0644) < 0)
		fail_msg("Could not make the FIFO %s: %s", path, strerror(errno));
}

void tree_pci_device(const char *root, const char *bus_id, const char *driver, char *rel,
		     size_t len)
{
	char domain[16], link[TREE_PATH_MAX], target[TREE_PATH_MAX];

	snprintf(domain, sizeof(domain), "%.*s", (int)(strchr(bus_id, ':') - bus_id), bus_id);
	snprintf(rel, len, "devices/pci%s:00/%s:00:01.0/%s", domain, domain, bus_id);
	tree_mkdir(root, rel);
	if (driver) {
		snprintf(link, sizeof(link), "%s/driver", rel);
		snprintf(target, sizeof(target), "../../../../bus/pci/drivers/%s", driver);
		tree_link(root, link, target);
	}
	snprintf(link, sizeof(link), "bus/pci/devices/%s", bus_id);
	snprintf(target, sizeof(target), "../../../%s", rel);
	tree_link(root, link, target);
}

void tree_card(const char *root, const char *name, const char *device_rel)
{
	char rel[TREE_PATH_MAX], target[TREE_PATH_MAX];
	const char *bus_id = strrchr(device_rel, '/') + 1;

	snprintf(rel, sizeof(rel), "%s/drm/%s/device", device_rel, name);
	snprintf(target, sizeof(target), "../../../%s", bus_id);
	tree_link(root, rel, target);
	snprintf(rel, sizeof(rel), "class/drm/%s", name);
	snprintf(target, sizeof(target), "../../%s/drm/%s", device_rel, name);
	tree_link(root, rel, target);
}

void tree_dev_write(const char *root, const char *device_rel, const char *file, const char *fmt,
		    ...)
{
	char rel[TREE_PATH_MAX], path[TREE_PATH_MAX];
	va_list ap;

	snprintf(rel, sizeof(rel), "%s/%s", device_rel, file);
	full_path(root, rel, path);
	mkdir_parents(path);
	va_start(ap, fmt);
	write_file(path, fmt, ap);
	va_end(ap);
}

void tree_amdgpu_memory(const char *root, const char *device_rel, uint64_t vram_total,
			uint64_t vram_used, uint64_t vis_total, uint64_t vis_used,
			uint64_t gtt_total, uint64_t gtt_used)
{
	tree_dev_write(root, device_rel, "mem_info_vram_total", "%llu\n",
		       (unsigned long long)vram_total);
	tree_dev_write(root, device_rel, "mem_info_vram_used", "%llu\n",
		       (unsigned long long)vram_used);
	tree_dev_write(root, device_rel, "mem_info_vis_vram_total", "%llu\n",
		       (unsigned long long)vis_total);
	tree_dev_write(root, device_rel, "mem_info_vis_vram_used", "%llu\n",
		       (unsigned long long)vis_used);
	tree_dev_write(root, device_rel, "mem_info_gtt_total", "%llu\n",
		       (unsigned long long)gtt_total);
	tree_dev_write(root, device_rel, "mem_info_gtt_used", "%llu\n",
		       (unsigned long long)gtt_used);
}

void tree_kfd_node(const char *root, unsigned node, uint64_t gpu_id, uint32_t domain,
		   uint32_t location_id)
{
	char rel[256];

	snprintf(rel, sizeof(rel), "class/kfd/kfd/topology/nodes/%u/gpu_id", node);
	tree_write(root, rel, "%llu\n", (unsigned long long)gpu_id);
	snprintf(rel, sizeof(rel), "class/kfd/kfd/topology/nodes/%u/properties", node);
	/* The real file has ~40 lines; these surround the two that matter. */
	tree_write(root, rel,
		   "cpu_cores_count 0\nsimd_count 240\nmem_banks_count 1\narray_count 12\n"
		   "vendor_id 4098\ndevice_id 29772\nlocation_id %u\ndomain %u\n"
		   "drm_render_minor 128\nhive_id 0\nnum_sdma_engines 2\n",
		   (unsigned)location_id, (unsigned)domain);
}

void tree_kfd_vram(const char *root, int pid, uint64_t gpu_id, const char *value)
{
	char rel[256];

	snprintf(rel, sizeof(rel), "class/kfd/kfd/proc/%d/vram_%llu", pid,
		 (unsigned long long)gpu_id);
	tree_write(root, rel, "%s", value);
	snprintf(rel, sizeof(rel), "class/kfd/kfd/proc/%d/pasid", pid);
	tree_write(root, rel, "32770\n");
}
