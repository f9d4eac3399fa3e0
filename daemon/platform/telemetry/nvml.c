/* SPDX-License-Identifier: MIT */
/* nvml.c: the NVIDIA source: NVML (libnvidia-ml.so.1) loaded at run time. */
#include "nvml_api.h"
#include "source.h"

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

_Static_assert(sizeof(struct nvmlapi_process_info) == 24, "nvmlProcessInfo_t is 24 bytes");
_Static_assert(sizeof(struct nvmlapi_memory) == 24, "nvmlMemory_t is 24 bytes");

/* Process queries race with processes starting: retry a few times with a larger buffer. */
#define NVML_PROCESS_TRIES 4
/* More than this is a broken driver answer, not a machine. */
#define NVML_MAX_PROCESSES 65536

struct nvml_state {
	void *lib;
	char path[PATH_MAX];
#define NVMLAPI_FIELD(name, required, ret, params) ret(*name) params;
	NVMLAPI_FUNCTIONS(NVMLAPI_FIELD)
#undef NVMLAPI_FIELD
	/* nvmlDeviceGetComputeRunningProcesses_v3, else _v2 (same struct), else NULL. */
	nvmlapi_return_t (*processes)(nvmlapi_device_t, unsigned int *,
				      struct nvmlapi_process_info *);
};

static const char *error_text(const struct nvml_state *s, nvmlapi_return_t result, char *buf,
			      size_t len)
{
	const char *text = s->nvmlErrorString ? s->nvmlErrorString(result) : NULL;

	snprintf(buf, len, "%s (%d)", text ? text : "nvmlReturn", result);
	return buf;
}

static void nvml_close(void *state)
{
	struct nvml_state *s = state;

	if (!s)
		return;
	if (s->nvmlShutdown)
		s->nvmlShutdown();
	if (s->lib)
		dlclose(s->lib);
	free(s);
}

static int nvml_open(void **state, char *why, size_t why_len)
{
	struct nvml_state *s = calloc(1, sizeof(*s));
	const char *forced = getenv(TELEMETRY_NVML_LIBRARY_ENV);
	nvmlapi_return_t result;
	char text[128];

	if (!s) {
		snprintf(why, why_len, "out of memory");
		return -ENOMEM;
	}
	snprintf(s->path, sizeof(s->path), "%s",
		 forced && forced[0] ? forced : "libnvidia-ml.so.1");
	s->lib = dlopen(s->path, RTLD_NOW | RTLD_LOCAL);
	if (!s->lib) {
		const char *e = dlerror();

		snprintf(why, why_len, "NVML not loaded: %s (set %s to choose the library)",
			 e ? e : s->path, TELEMETRY_NVML_LIBRARY_ENV);
		free(s);
		return -ENOENT;
	}
#define NVMLAPI_LOOKUP(fn, required, ret, params)                                               \
	*(void **)&s->fn = dlsym(s->lib, #fn);                                                  \
	if (!s->fn && (required)) {                                                             \
		snprintf(why, why_len, "%s lacks %s: not a usable NVML library", s->path, #fn); \
		s->nvmlShutdown = NULL; /* never initialised */                                 \
		nvml_close(s);                                                                  \
		return -ENOSYS;                                                                 \
	}
	NVMLAPI_FUNCTIONS(NVMLAPI_LOOKUP)
#undef NVMLAPI_LOOKUP
	s->processes = s->nvmlDeviceGetComputeRunningProcesses_v3
			   ? s->nvmlDeviceGetComputeRunningProcesses_v3
			   : s->nvmlDeviceGetComputeRunningProcesses_v2;
	result = s->nvmlInit_v2();
	if (result != NVMLAPI_SUCCESS) {
		snprintf(why, why_len, "nvmlInit_v2 failed: %s",
			 error_text(s, result, text, sizeof(text)));
		s->nvmlShutdown = NULL;
		nvml_close(s);
		return -ENODEV;
	}
	*state = s;
	return 0;
}

static void read_processes(struct nvml_state *s, nvmlapi_device_t dev, struct telemetry_sample *out)
{
	struct nvmlapi_process_info *infos = NULL;
	unsigned int capacity = TELEMETRY_MAX_PROCESSES, count;
	nvmlapi_return_t result = NVMLAPI_ERROR_INSUFFICIENT_SIZE;

	if (!s->processes)
		return;
	for (int tries = 0; tries < NVML_PROCESS_TRIES; tries++) {
		struct nvmlapi_process_info *grown = realloc(infos, capacity * sizeof(*infos));

		if (!grown)
			break;
		infos = grown;
		count = capacity;
		result = s->processes(dev, &count, infos);
		if (result != NVMLAPI_ERROR_INSUFFICIENT_SIZE)
			break;
		/* count now holds what is needed; leave room for processes starting meanwhile. */
		if (count > NVML_MAX_PROCESSES)
			break;
		capacity = count > capacity ? count + count / 4 + 8 : capacity * 2;
	}
	if (result == NVMLAPI_SUCCESS) {
		for (unsigned int i = 0; i < count && i < capacity; i++) {
			uint64_t bytes = infos[i].used_gpu_memory;

			if (infos[i].pid == 0 || infos[i].pid > INT32_MAX)
				continue;
			telemetry_process_add(out, (int32_t)infos[i].pid,
					      bytes == NVMLAPI_VALUE_NOT_AVAILABLE ? 0 : bytes);
		}
		out->valid |= TELEMETRY_HAS_PROCESSES;
	}
	free(infos);
}

static int nvml_sample(void *state, const struct telemetry_pci *pci, struct telemetry_sample *out)
{
	struct nvml_state *s = state;
	char id[TELEMETRY_PCI_ID_SIZE];
	struct nvmlapi_memory mem;
	struct nvmlapi_utilization util;
	nvmlapi_device_t dev = NULL;
	nvmlapi_return_t result;
	unsigned int v;

	telemetry_pci_format(pci, id, sizeof(id));
	result = s->nvmlDeviceGetHandleByPciBusId_v2(id, &dev);
	if (result == NVMLAPI_ERROR_NOT_FOUND)
		return -ENODEV;
	if (result != NVMLAPI_SUCCESS)
		return -EIO;
	if (s->nvmlDeviceGetMemoryInfo &&
	    s->nvmlDeviceGetMemoryInfo(dev, &mem) == NVMLAPI_SUCCESS) {
		out->vram_total = mem.total;
		out->vram_used = mem.used;
		out->valid |= TELEMETRY_HAS_VRAM;
	}
	if (s->nvmlDeviceGetTemperature &&
	    s->nvmlDeviceGetTemperature(dev, NVMLAPI_TEMPERATURE_GPU, &v) == NVMLAPI_SUCCESS &&
	    v <= INT32_MAX / 1000) {
		out->temperature_mc = (int32_t)v * 1000;
		out->valid |= TELEMETRY_HAS_TEMPERATURE;
	}
	if (s->nvmlDeviceGetPowerUsage && s->nvmlDeviceGetPowerUsage(dev, &v) == NVMLAPI_SUCCESS) {
		out->power_mw = v;
		out->valid |= TELEMETRY_HAS_POWER;
	}
	if (s->nvmlDeviceGetUtilizationRates &&
	    s->nvmlDeviceGetUtilizationRates(dev, &util) == NVMLAPI_SUCCESS) {
		if (util.gpu <= 100) {
			out->busy_percent = util.gpu;
			out->valid |= TELEMETRY_HAS_BUSY;
		}
		if (util.memory <= 100) {
			out->mem_busy_percent = util.memory;
			out->valid |= TELEMETRY_HAS_MEM_BUSY;
		}
	}
	read_processes(s, dev, out);
	return 0;
}

const struct telemetry_source telemetry_nvml_source = {
    .name = "nvml",
    .open = nvml_open,
    .sample = nvml_sample,
    .close = nvml_close,
};
