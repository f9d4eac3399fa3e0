/* SPDX-License-Identifier: MIT */
/* fake_nvml.c: a stand-in libnvidia-ml answering from the data file $FAKE_NVML_DATA. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake_data.h"
#include "platform/telemetry/nvml_api.h"

/*
 * Data keys: "init <result>", "count <n>", "lookup_error <result>" (every handle lookup
 * fails), and per device i: "dev<i>.busid" (in any spelling NVML accepts), "dev<i>.total",
 * ".free", ".used", ".temp" (°C), ".power" (mW), ".util_gpu", ".util_mem", ".procs"
 * ("pid:bytes,..." with "na" for NVML_VALUE_NOT_AVAILABLE), ".nprocs <n>" (n generated
 * processes, pid 1000 + k holding (k + 1) MiB, added after .procs), ".grow <k>" (each
 * process query sees k more than the previous one: processes starting meanwhile) and
 * ".always_short 1" (every process query answers NVML_ERROR_INSUFFICIENT_SIZE). A missing
 * key answers NVML_ERROR_NOT_SUPPORTED. Calls are logged to $FAKE_NVML_LOG. Built twice:
 * FAKE_MINIMAL exports the required functions, memory info and only the _v2 process query.
 */
#define DATA "FAKE_NVML_DATA"
#define LOG "FAKE_NVML_LOG"
#define INVALID_ARGUMENT 2
#define NOT_SUPPORTED 3

#define EXPORT __attribute__((visibility("default")))

#define FAKE_PROTOTYPE(name, required, ret, params) EXPORT ret name params;
NVMLAPI_FUNCTIONS(FAKE_PROTOTYPE)

static unsigned process_queries;

/* Handles are 1 + the device index, never dereferenced. */
static nvmlapi_device_t handle_of(unsigned i)
{
	return (nvmlapi_device_t)(uintptr_t)(i + 1);
}

static bool index_of(nvmlapi_device_t dev, unsigned *i)
{
	uint64_t count = 0;
	uintptr_t v = (uintptr_t)dev;

	fake_u64(DATA, "count", &count);
	if (v == 0 || v > count)
		return false;
	*i = (unsigned)(v - 1);
	return true;
}

static bool dev_u64(nvmlapi_device_t dev, const char *name, uint64_t *out)
{
	char key[64];
	unsigned i;

	if (!index_of(dev, &i))
		return false;
	snprintf(key, sizeof(key), "dev%u.%s", i, name);
	return fake_u64(DATA, key, out);
}

static bool parse_bus_id(const char *s, unsigned v[4])
{
	char tail;

	return sscanf(s, "%x:%x:%x.%x%c", &v[0], &v[1], &v[2], &v[3], &tail) == 4;
}

nvmlapi_return_t nvmlInit_v2(void)
{
	uint64_t result = 0;

	fake_log(LOG, "init");
	fake_u64(DATA, "init", &result);
	return (nvmlapi_return_t)result;
}

nvmlapi_return_t nvmlShutdown(void)
{
	fake_log(LOG, "shutdown");
	return 0;
}

nvmlapi_return_t nvmlDeviceGetHandleByPciBusId_v2(const char *bus_id, nvmlapi_device_t *device)
{
	uint64_t count = 0, error = 0;
	unsigned want[4], got[4];
	char key[64], value[64];

	fake_log(LOG, "lookup %s", bus_id);
	if (fake_u64(DATA, "lookup_error", &error))
		return (nvmlapi_return_t)error;
	if (!parse_bus_id(bus_id, want))
		return INVALID_ARGUMENT;
	fake_u64(DATA, "count", &count);
	for (unsigned i = 0; i < count; i++) {
		snprintf(key, sizeof(key), "dev%u.busid", i);
		if (fake_get(DATA, key, value, sizeof(value)) && parse_bus_id(value, got) &&
		    memcmp(want, got, sizeof(want)) == 0) {
			*device = handle_of(i);
			return 0;
		}
	}
	return NVMLAPI_ERROR_NOT_FOUND;
}

nvmlapi_return_t nvmlDeviceGetMemoryInfo(nvmlapi_device_t dev, struct nvmlapi_memory *memory)
{
	uint64_t total, free_bytes, used;

	if (!dev_u64(dev, "total", &total) || !dev_u64(dev, "free", &free_bytes) ||
	    !dev_u64(dev, "used", &used))
		return NOT_SUPPORTED;
	memory->total = total;
	memory->free = free_bytes;
	memory->used = used;
	return 0;
}

/* fill_processes writes up to capacity entries and returns how many there are in all. */
static unsigned fill_processes(unsigned dev, struct nvmlapi_process_info *infos, unsigned capacity)
{
	char key[64], list[2048], *save = NULL, *item;
	uint64_t generated = 0, grow = 0;
	unsigned n = 0;

	snprintf(key, sizeof(key), "dev%u.procs", dev);
	if (fake_get(DATA, key, list, sizeof(list))) {
		for (item = strtok_r(list, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
			char bytes[32];
			unsigned pid;

			if (sscanf(item, "%u:%31s", &pid, bytes) != 2)
				continue;
			if (n < capacity) {
				memset(&infos[n], 0, sizeof(infos[n]));
				infos[n].pid = pid;
				infos[n].used_gpu_memory = strcmp(bytes, "na") == 0
							       ? NVMLAPI_VALUE_NOT_AVAILABLE
							       : strtoull(bytes, NULL, 0);
			}
			n++;
		}
	}
	snprintf(key, sizeof(key), "dev%u.nprocs", dev);
	fake_u64(DATA, key, &generated);
	snprintf(key, sizeof(key), "dev%u.grow", dev);
	fake_u64(DATA, key, &grow);
	generated += grow * process_queries;
	for (unsigned k = 0; k < generated; k++, n++) {
		if (n < capacity) {
			memset(&infos[n], 0, sizeof(infos[n]));
			infos[n].pid = 1000 + k;
			infos[n].used_gpu_memory = (uint64_t)(k + 1) << 20;
		}
	}
	return n;
}

static nvmlapi_return_t processes(const char *version, nvmlapi_device_t dev, unsigned int *count,
				  struct nvmlapi_process_info *infos)
{
	uint64_t short_always = 0;
	unsigned i, n;
	char key[64];

	if (!index_of(dev, &i) || !count)
		return INVALID_ARGUMENT;
	fake_log(LOG, "processes_%s %u", version, *count);
	n = fill_processes(i, infos, infos ? *count : 0);
	process_queries++;
	snprintf(key, sizeof(key), "dev%u.always_short", i);
	if ((fake_u64(DATA, key, &short_always) && short_always) || n > *count || !infos) {
		*count = n + (short_always ? 1 : 0);
		return n == 0 && !short_always ? 0 : NVMLAPI_ERROR_INSUFFICIENT_SIZE;
	}
	*count = n;
	return 0;
}

nvmlapi_return_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlapi_device_t dev, unsigned int *count,
							 struct nvmlapi_process_info *infos)
{
	return processes("v2", dev, count, infos);
}

#ifndef FAKE_MINIMAL
nvmlapi_return_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlapi_device_t dev, unsigned int *count,
							 struct nvmlapi_process_info *infos)
{
	return processes("v3", dev, count, infos);
}

const char *nvmlErrorString(nvmlapi_return_t result)
{
	return result == 9 ? "Driver Not Loaded" : "Fake Error";
}

nvmlapi_return_t nvmlDeviceGetTemperature(nvmlapi_device_t dev, int sensor, unsigned int *celsius)
{
	uint64_t v;

	if (sensor != NVMLAPI_TEMPERATURE_GPU || !dev_u64(dev, "temp", &v))
		return NOT_SUPPORTED;
	*celsius = (unsigned int)v;
	return 0;
}

nvmlapi_return_t nvmlDeviceGetPowerUsage(nvmlapi_device_t dev, unsigned int *milliwatts)
{
	uint64_t v;

	if (!dev_u64(dev, "power", &v))
		return NOT_SUPPORTED;
	*milliwatts = (unsigned int)v;
	return 0;
}

nvmlapi_return_t nvmlDeviceGetUtilizationRates(nvmlapi_device_t dev,
					       struct nvmlapi_utilization *rates)
{
	uint64_t gpu, mem;

	if (!dev_u64(dev, "util_gpu", &gpu) || !dev_u64(dev, "util_mem", &mem))
		return NOT_SUPPORTED;
	rates->gpu = (unsigned int)gpu;
	rates->memory = (unsigned int)mem;
	return 0;
}
#endif
