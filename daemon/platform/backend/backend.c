/* SPDX-License-Identifier: MIT */
/* backend.c: what every backend shares: the sharing method chosen, chunk plans, headroom. */
#include "backend.h"

#include <dirent.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *sharing = "auto";
int backend_set_sharing(const char *name)
{
	static const char *const names[] = {"auto", "vmm", "dmabuf", "ipc"};

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		if (strcmp(name, names[i]) == 0) {
			sharing = names[i];
			return 0;
		}
	}
	return -EINVAL;
}

const char *backend_sharing_choice(void)
{
	return sharing;
}

const char *backend_sharing_name(uint32_t handle_kind)
{
	switch (handle_kind) {
	case BACKEND_HANDLE_MEMFD:
		return "memfd";
	case BACKEND_HANDLE_VMM_FD:
		return "vmm-fd";
	case BACKEND_HANDLE_DMABUF:
		return "dmabuf";
	case BACKEND_HANDLE_IPC:
		return "ipc";
	default:
		return "none";
	}
}

/* Exported fds kept open after their grants, in the whole process (any thread closes them). */
static atomic_uint_fast64_t kept_fds;

void backend_alloc_close_fds(struct backend_alloc *a)
{
	uint64_t closed = 0;

	for (unsigned i = 0; i < a->nfds; i++) {
		if (a->fds[i] >= 0) {
			close(a->fds[i]);
			closed++;
		}
		a->fds[i] = -1;
	}
	a->nfds = 0;
	if (a->kept_fds) {
		atomic_fetch_sub(&kept_fds, closed);
		a->kept_fds = false;
	}
}

bool backend_alloc_keep_fds(struct backend_alloc *a, uint64_t cap)
{
	uint_fast64_t now = atomic_load(&kept_fds);

	if (!a->transient_fds || a->nfds == 0)
		return false;
	do {
		if (now + a->nfds > cap)
			return false;
	} while (!atomic_compare_exchange_weak(&kept_fds, &now, now + a->nfds));
	a->transient_fds = false;
	a->kept_fds = true;
	return true;
}

uint64_t backend_kept_fds(void)
{
	return atomic_load(&kept_fds);
}

bool backend_gpu_node(char *path, size_t len)
{
	static const char *const fixed[] = {"kfd", "nvidia0"};
	const char *root = getenv(BACKEND_DEV_ROOT_ENV);
	char dri[512];
	struct dirent *e;
	DIR *dir;

	if (!root || !root[0])
		root = "/dev";
	for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++) {
		snprintf(path, len, "%s/%s", root, fixed[i]);
		if (access(path, F_OK) == 0)
			return true;
	}
	snprintf(dri, sizeof(dri), "%s/dri", root);
	dir = opendir(dri);
	if (!dir)
		return false;
	while ((e = readdir(dir))) {
		if (strncmp(e->d_name, "renderD", 7) == 0) {
			snprintf(path, len, "%s/%s", dri, e->d_name);
			closedir(dir);
			return true;
		}
	}
	closedir(dir);
	return false;
}

int backend_chunk_plan(uint64_t size, uint64_t granule, unsigned n, uint64_t *sizes)
{
	uint64_t units, base, extra;

	if (n == 0 || n > BACKEND_MAX_CHUNKS || granule == 0 || size % granule != 0)
		return -EINVAL;
	units = size / granule;
	if (n > units)
		return -EINVAL;
	base = units / n;
	extra = units % n;
	for (unsigned i = 0; i < n; i++)
		sizes[i] = (base + (i < extra ? 1 : 0)) * granule;
	return 0;
}

uint64_t backend_host_mem_available(void)
{
	const char *path = getenv("ROCMMEM_HOST_MEMINFO"); /* tests point this at a fixture */
	unsigned long long kib = 0;
	char line[256];
	FILE *f = fopen(path && path[0] ? path : "/proc/meminfo", "re");

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "MemAvailable: %llu kB", &kib) == 1)
			break;
	}
	fclose(f);
	if (kib > UINT64_MAX / 1024)
		return 0;
	return (uint64_t)kib * 1024;
}

uint64_t backend_default_headroom(uint64_t total, bool integrated, uint64_t granule)
{
	uint64_t headroom;

	if (integrated) {
		uint64_t avail = backend_host_mem_available();
		uint64_t usable = avail / 4 * 3;

		/* Never the sum of VRAM and GTT: the runtime's total, capped by the host. */
		headroom = usable < total ? total - usable : 0;
		if (headroom < total / 10)
			headroom = total / 10;
	} else {
		headroom = total / 20;
		if (headroom < ((uint64_t)512 << 20))
			headroom = (uint64_t)512 << 20;
	}
	if (headroom >= total)
		headroom = total / 2;
	return (headroom + granule - 1) & ~(granule - 1);
}
