/* SPDX-License-Identifier: MIT */
/* sysfs.c: the AMD fallback source: amdgpu's sysfs and hwmon files, and KFD's counters. */
#include "source.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/*
 * Files of a card's PCI device directory (all optional): mem_info_{vram,vis_vram,gtt}_{total,
 * used} in bytes, gpu_busy_percent, mem_busy_percent, hwmon/hwmon*: temp*_input (m°C) named by
 * temp*_label, power1_average or power1_input (µW). gpu_metrics is never read: it can wake a
 * suspended GPU, as the sensors can on older kernels, which is why they are skipped while the
 * device is runtime-suspended.
 */

struct sysfs_state {
	char root[PATH_MAX];
};

/* is_card_name accepts "card<digits>": not renderD*, not connectors such as "card0-DP-1". */
static bool is_card_name(const char *name)
{
	const char *p = name + 4;

	if (strncmp(name, "card", 4) != 0 || !*p)
		return false;
	for (; *p; p++)
		if (*p < '0' || *p > '9')
			return false;
	return true;
}

/* is_amdgpu: the driver link names amdgpu; with no driver link, amdgpu's files are there. */
static bool is_amdgpu(const char *dev_dir)
{
	char path[PATH_MAX], target[PATH_MAX];
	const char *base;
	ssize_t n;

	if (sysread_path(path, sizeof(path), "%s/driver", dev_dir) < 0)
		return false;
	n = readlink(path, target, sizeof(target) - 1);
	if (n < 0) {
		if (sysread_path(path, sizeof(path), "%s/mem_info_vram_total", dev_dir) < 0)
			return false;
		return access(path, F_OK) == 0;
	}
	target[n] = '\0';
	base = strrchr(target, '/');
	return strcmp(base ? base + 1 : target, "amdgpu") == 0;
}

/*
 * scan_cards walks root/class/drm. With want, it finds that device's directory (returns 0 or
 * -ENODEV); without, it counts amdgpu cards. -EIO when the directory cannot be read.
 */
static int scan_cards(const char *root, const struct telemetry_pci *want, char *dev_dir,
		      size_t dev_len, unsigned *count)
{
	char drm[PATH_MAX], path[PATH_MAX], resolved[PATH_MAX];
	struct telemetry_pci pci;
	struct dirent *e;
	int r = -ENODEV;
	DIR *dir;

	if (count)
		*count = 0;
	if (sysread_path(drm, sizeof(drm), "%s/class/drm", root) < 0)
		return -EIO;
	dir = opendir(drm);
	if (!dir)
		return -EIO;
	while ((e = readdir(dir))) {
		const char *base;

		if (!is_card_name(e->d_name) ||
		    sysread_path(path, sizeof(path), "%s/%s/device", drm, e->d_name) < 0 ||
		    !realpath(path, resolved))
			continue;
		/* The device link of a PCI GPU resolves to a directory named by its bus id. */
		base = strrchr(resolved, '/');
		if (!base || telemetry_pci_parse(base + 1, &pci) < 0 || !is_amdgpu(resolved))
			continue;
		if (count)
			(*count)++;
		if (want && telemetry_pci_equal(want, &pci) &&
		    sysread_path(dev_dir, dev_len, "%s", resolved) == 0) {
			r = 0;
			break;
		}
	}
	closedir(dir);
	return r;
}

static int sysfs_open(void **state, char *why, size_t why_len)
{
	struct sysfs_state *s = calloc(1, sizeof(*s));
	unsigned count = 0;
	int r;

	if (!s) {
		snprintf(why, why_len, "out of memory");
		return -ENOMEM;
	}
	if (sysread_path(s->root, sizeof(s->root), "%s", telemetry_sysfs_root()) < 0) {
		snprintf(why, why_len, "%s is too long", TELEMETRY_SYSFS_ROOT_ENV);
		free(s);
		return -ENOENT;
	}
	r = scan_cards(s->root, NULL, NULL, 0, &count);
	if (r == -EIO || count == 0) {
		snprintf(why, why_len, "%s %s/class/drm",
			 r == -EIO ? "cannot read" : "no amdgpu card in", s->root);
		free(s);
		return -ENOENT;
	}
	*state = s;
	return 0;
}

/* read_pair reads mem_info_<name>_total and _used; both or neither. */
static bool read_pair(const char *dev, const char *name, uint64_t *total, uint64_t *used)
{
	char path[PATH_MAX];
	uint64_t t, u;

	if (sysread_path(path, sizeof(path), "%s/mem_info_%s_total", dev, name) < 0 ||
	    sysread_u64(path, &t) < 0 ||
	    sysread_path(path, sizeof(path), "%s/mem_info_%s_used", dev, name) < 0 ||
	    sysread_u64(path, &u) < 0)
		return false;
	*total = t;
	*used = u;
	return true;
}

static bool read_percent(const char *dev, const char *name, uint32_t *out)
{
	char path[PATH_MAX];
	uint64_t v;

	if (sysread_path(path, sizeof(path), "%s/%s", dev, name) < 0 || sysread_u64(path, &v) < 0 ||
	    v > 100)
		return false;
	*out = (uint32_t)v;
	return true;
}

struct temp_candidate {
	unsigned rank, index;
};

static int compare_candidates(const void *pa, const void *pb)
{
	const struct temp_candidate *a = pa, *b = pb;

	if (a->rank != b->rank)
		return a->rank < b->rank ? -1 : 1;
	return (a->index > b->index) - (a->index < b->index);
}

/* temp_index parses "temp<n>_input". */
static bool temp_index(const char *name, unsigned *index)
{
	char tail[8];
	unsigned n;

	if (sscanf(name, "temp%u%7s", &n, tail) != 2 || strcmp(tail, "_input") != 0 ||
	    strncmp(name, "temp", 4) != 0 || name[4] < '0' || name[4] > '9')
		return false;
	*index = n;
	return true;
}

/* read_temperature prefers the sensor labelled "edge", then "junction", then temp1. */
static bool read_temperature(const char *hwmon, int32_t *out)
{
	struct temp_candidate c[32];
	char path[PATH_MAX], label[32];
	unsigned n = 0, index;
	struct dirent *e;
	int64_t v;
	DIR *dir = opendir(hwmon);

	if (!dir)
		return false;
	while (n < sizeof(c) / sizeof(c[0]) && (e = readdir(dir))) {
		if (!temp_index(e->d_name, &index))
			continue;
		c[n].index = index;
		c[n].rank = index == 1 ? 2 : 3;
		if (sysread_path(path, sizeof(path), "%s/temp%u_label", hwmon, index) == 0 &&
		    sysread_text(path, label, sizeof(label)) > 0) {
			if (strcmp(label, "edge") == 0)
				c[n].rank = 0;
			else if (strcmp(label, "junction") == 0)
				c[n].rank = 1;
		}
		n++;
	}
	closedir(dir);
	qsort(c, n, sizeof(c[0]), compare_candidates);
	for (unsigned i = 0; i < n; i++) {
		if (sysread_path(path, sizeof(path), "%s/temp%u_input", hwmon, c[i].index) < 0 ||
		    sysread_s64(path, &v) < 0 || v < INT32_MIN || v > INT32_MAX)
			continue;
		*out = (int32_t)v;
		return true;
	}
	return false;
}

/* read_power: power1_average (older GPUs), else power1_input (newer ones have only that). */
static bool read_power(const char *hwmon, uint32_t *mw)
{
	static const char *const names[] = {"power1_average", "power1_input"};
	char path[PATH_MAX];
	uint64_t uw;

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		if (sysread_path(path, sizeof(path), "%s/%s", hwmon, names[i]) < 0 ||
		    sysread_u64(path, &uw) < 0 || uw / 1000 > UINT32_MAX)
			continue;
		*mw = (uint32_t)(uw / 1000);
		return true;
	}
	return false;
}

static void read_hwmon(const char *dev, struct telemetry_sample *out)
{
	char dirpath[PATH_MAX], hwmon[PATH_MAX];
	struct dirent *e;
	DIR *dir;

	if (sysread_path(dirpath, sizeof(dirpath), "%s/hwmon", dev) < 0)
		return;
	dir = opendir(dirpath);
	if (!dir)
		return;
	while ((e = readdir(dir))) {
		if (strncmp(e->d_name, "hwmon", 5) != 0 ||
		    sysread_path(hwmon, sizeof(hwmon), "%s/%s", dirpath, e->d_name) < 0)
			continue;
		if (!(out->valid & TELEMETRY_HAS_TEMPERATURE) &&
		    read_temperature(hwmon, &out->temperature_mc))
			out->valid |= TELEMETRY_HAS_TEMPERATURE;
		if (!(out->valid & TELEMETRY_HAS_POWER) && read_power(hwmon, &out->power_mw))
			out->valid |= TELEMETRY_HAS_POWER;
	}
	closedir(dir);
}

static int sysfs_sample(void *state, const struct telemetry_pci *pci, struct telemetry_sample *out)
{
	struct sysfs_state *s = state;
	char dev[PATH_MAX];
	int r = scan_cards(s->root, pci, dev, sizeof(dev), NULL);

	if (r < 0)
		return r;
	if (read_pair(dev, "vram", &out->vram_total, &out->vram_used))
		out->valid |= TELEMETRY_HAS_VRAM;
	if (read_pair(dev, "vis_vram", &out->vis_vram_total, &out->vis_vram_used))
		out->valid |= TELEMETRY_HAS_VIS_VRAM;
	if (read_pair(dev, "gtt", &out->gtt_total, &out->gtt_used))
		out->valid |= TELEMETRY_HAS_GTT;
	if (sysread_runtime_suspended(dev)) {
		out->runtime_suspended = true;
	} else {
		if (read_percent(dev, "gpu_busy_percent", &out->busy_percent))
			out->valid |= TELEMETRY_HAS_BUSY;
		if (read_percent(dev, "mem_busy_percent", &out->mem_busy_percent))
			out->valid |= TELEMETRY_HAS_MEM_BUSY;
		read_hwmon(dev, out);
	}
	kfd_read_processes(s->root, pci, out);
	return 0;
}

static void sysfs_close(void *state)
{
	free(state);
}

const struct telemetry_source telemetry_sysfs_source = {
    .name = "sysfs",
    .open = sysfs_open,
    .sample = sysfs_sample,
    .close = sysfs_close,
};
