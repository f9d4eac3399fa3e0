/* SPDX-License-Identifier: MIT */
/* kfd.c: per-process VRAM of one device from KFD's sysfs counters (both AMD sources use it). */
#include "source.h"

#include <dirent.h>
#include <stdio.h>
#include <string.h>

/* A physical device has one KFD node, or one per partition (MI300 CPX and the like). */
#define KFD_MAX_NODES 16

/*
 * node_matches reads one topology node's properties ("domain <n>" and "location_id <n>"
 * lines, location_id = (bus << 8) | (device << 3) | function; 6.x kernels put a partition id
 * in bits 28-31, so only the low 16 bits name the PCI function).
 */
static bool node_matches(const char *node_dir, const struct telemetry_pci *pci)
{
	char path[4096], text[8192], *line, *save = NULL;
	uint64_t domain = 0, location = 0;
	bool has_domain = false, has_location = false;

	if (sysread_path(path, sizeof(path), "%s/properties", node_dir) < 0 ||
	    sysread_text(path, text, sizeof(text)) <= 0)
		return false;
	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char key[32];
		char value[32];
		uint64_t v;

		if (sscanf(line, "%31s %31s", key, value) != 2 || sysread_parse_u64(value, &v) < 0)
			continue;
		if (strcmp(key, "domain") == 0) {
			domain = v;
			has_domain = true;
		} else if (strcmp(key, "location_id") == 0) {
			location = v;
			has_location = true;
		}
	}
	return has_domain && has_location && domain == pci->domain &&
	       ((location >> 8) & 0xff) == pci->bus && ((location >> 3) & 0x1f) == pci->device &&
	       (location & 0x7) == pci->function;
}

/* find_gpu_ids collects the gpu_id of every topology node of the device. */
static unsigned find_gpu_ids(const char *root, const struct telemetry_pci *pci,
			     uint64_t ids[KFD_MAX_NODES])
{
	char nodes[4096], node[4096], path[4096];
	struct dirent *e;
	unsigned n = 0;
	DIR *dir;

	if (sysread_path(nodes, sizeof(nodes), "%s/class/kfd/kfd/topology/nodes", root) < 0)
		return 0;
	dir = opendir(nodes);
	if (!dir)
		return 0;
	while (n < KFD_MAX_NODES && (e = readdir(dir))) {
		uint64_t index, gpu_id;

		if (sysread_parse_u64(e->d_name, &index) < 0 ||
		    sysread_path(node, sizeof(node), "%s/%s", nodes, e->d_name) < 0 ||
		    sysread_path(path, sizeof(path), "%s/gpu_id", node) < 0)
			continue;
		/* gpu_id 0 is a CPU node. */
		if (sysread_u64(path, &gpu_id) < 0 || gpu_id == 0 || !node_matches(node, pci))
			continue;
		ids[n++] = gpu_id;
	}
	closedir(dir);
	return n;
}

void kfd_read_processes(const char *root, const struct telemetry_pci *pci,
			struct telemetry_sample *out)
{
	char procs[4096], path[4096];
	uint64_t ids[KFD_MAX_NODES];
	unsigned nids = find_gpu_ids(root, pci, ids);
	struct dirent *e;
	DIR *dir;

	if (nids == 0)
		return;
	if (sysread_path(procs, sizeof(procs), "%s/class/kfd/kfd/proc", root) < 0)
		return;
	dir = opendir(procs);
	if (!dir)
		return;
	while ((e = readdir(dir))) {
		uint64_t pid, total = 0, bytes;
		bool seen = false;

		if (sysread_parse_u64(e->d_name, &pid) < 0 || pid == 0 || pid > INT32_MAX)
			continue;
		for (unsigned i = 0; i < nids; i++) {
			if (sysread_path(path, sizeof(path), "%s/%s/vram_%llu", procs, e->d_name,
					 (unsigned long long)ids[i]) < 0 ||
			    sysread_u64(path, &bytes) < 0)
				continue;
			seen = true;
			total = bytes > UINT64_MAX - total ? UINT64_MAX : total + bytes;
		}
		/*
		 * KFD keeps a vram_ counter for every device a process acquired, and ROCr acquires
		 * every GPU at start: only processes that hold memory here are listed.
		 */
		if (seen && total > 0)
			telemetry_process_add(out, (int32_t)pid, total);
	}
	closedir(dir);
	out->valid |= TELEMETRY_HAS_PROCESSES;
}
