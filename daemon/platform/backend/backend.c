/* SPDX-License-Identifier: MIT */
/* backend.c: the table of backends, the choice among them for --backend, shared helpers. */
#include "backend.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/log.h"
#include "rocmmem.pb-c.h"

/* In order of preference for --backend auto: GPU runtimes first, host memory last. */
static const struct backend_ops *const backends[] = {
    &backend_hip_ops,
    &backend_cuda_ops,
    &backend_host_ops,
};

static const char *sharing = "auto";
/* Why --backend auto ended on host memory ("hip: ...; cuda: ..."); "" when it did not. */
static char host_fallback[1024];

const char *backend_names(void)
{
	return "auto, hip, cuda, host";
}

bool backend_known(const char *name)
{
	if (strcmp(name, "auto") == 0)
		return true;
	for (size_t i = 0; i < sizeof(backends) / sizeof(backends[0]); i++)
		if (strcmp(name, backends[i]->name) == 0)
			return true;
	return false;
}

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
	case ROCMMEM__WIRE__HANDLE_KIND__HANDLE_MEMFD:
		return "memfd";
	case ROCMMEM__WIRE__HANDLE_KIND__HANDLE_VMM_FD:
		return "vmm-fd";
	case ROCMMEM__WIRE__HANDLE_KIND__HANDLE_DMABUF:
		return "dmabuf";
	case ROCMMEM__WIRE__HANDLE_KIND__HANDLE_IPC:
		return "ipc";
	default:
		return "none";
	}
}

void backend_alloc_close_fds(struct backend_alloc *a)
{
	for (unsigned i = 0; i < a->nfds; i++) {
		if (a->fds[i] >= 0)
			close(a->fds[i]);
		a->fds[i] = -1;
	}
	a->nfds = 0;
}

int backend_open(const char *name, struct backend **out)
{
	bool any = strcmp(name, "auto") == 0;
	char skipped[sizeof(host_fallback)] = "";
	int err = -ENOENT;

	host_fallback[0] = '\0';
	for (size_t i = 0; i < sizeof(backends) / sizeof(backends[0]); i++) {
		char why[512] = "";
		size_t used = strlen(skipped);

		if (!any && strcmp(name, backends[i]->name) != 0)
			continue;
		err = backends[i]->create(out, why, sizeof(why));
		if (err == 0) {
			log_info("using the %s backend%s", backends[i]->name,
				 any ? " (chosen by --backend auto)" : "");
			/* Host memory the user did not ask for: GPU models would be counted
			 * against system RAM. Said loudly, and kept for status. */
			if (any && backends[i] == &backend_host_ops) {
				snprintf(host_fallback, sizeof(host_fallback), "%s", skipped);
				log_warn(
				    "no GPU runtime found (%s): serving host memory (system RAM), "
				    "not GPU memory; set backend = host to mean it, or make the "
				    "runtime loadable (docs/backends.md)",
				    skipped);
			}
			return 0;
		}
		if (any) {
			log_info("backend %s unavailable: %s", backends[i]->name, why);
			snprintf(skipped + used, sizeof(skipped) - used, "%s%s: %s",
				 used ? "; " : "", backends[i]->name, why);
		} else {
			log_error("Could not open the %s backend: %s", backends[i]->name, why);
		}
	}
	return err;
}

const char *backend_host_fallback(void)
{
	return host_fallback[0] ? host_fallback : NULL;
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
