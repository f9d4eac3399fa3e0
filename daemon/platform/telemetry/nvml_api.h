/* SPDX-License-Identifier: MIT */
/* nvml_api.h: the subset of the NVML (libnvidia-ml.so.1) ABI telemetry uses, loaded by dlopen. */
#ifndef ROCMMEMD_TELEMETRY_NVML_API_H
#define ROCMMEMD_TELEMETRY_NVML_API_H

#include <stdint.h>

typedef int nvmlapi_return_t; /* nvmlReturn_t */
#define NVMLAPI_SUCCESS 0
#define NVMLAPI_ERROR_NOT_FOUND 6
#define NVMLAPI_ERROR_INSUFFICIENT_SIZE 7

typedef struct nvmlapi_device *nvmlapi_device_t; /* nvmlDevice_t */

#define NVMLAPI_TEMPERATURE_GPU 0
/* usedGpuMemory when the driver will not say (no permission, some containers). */
#define NVMLAPI_VALUE_NOT_AVAILABLE (~0ull)

struct nvmlapi_memory { /* nvmlMemory_t (v1) */
	unsigned long long total, free, used;
};

struct nvmlapi_utilization { /* nvmlUtilization_t */
	unsigned int gpu, memory;
};

/* nvmlProcessInfo_t as filled by the _v2 and _v3 process queries (24 bytes). */
struct nvmlapi_process_info {
	unsigned int pid;
	unsigned long long used_gpu_memory;
	unsigned int gpu_instance_id, compute_instance_id;
};

/* X(name, required, return type, parameters). Optional functions may be NULL. */
#define NVMLAPI_FUNCTIONS(X)                                                                  \
	X(nvmlInit_v2, 1, nvmlapi_return_t, (void))                                           \
	X(nvmlShutdown, 1, nvmlapi_return_t, (void))                                          \
	X(nvmlDeviceGetHandleByPciBusId_v2, 1, nvmlapi_return_t,                              \
	  (const char *bus_id, nvmlapi_device_t *device))                                     \
	X(nvmlErrorString, 0, const char *, (nvmlapi_return_t result))                        \
	X(nvmlDeviceGetMemoryInfo, 0, nvmlapi_return_t,                                       \
	  (nvmlapi_device_t device, struct nvmlapi_memory * memory))                          \
	X(nvmlDeviceGetTemperature, 0, nvmlapi_return_t,                                      \
	  (nvmlapi_device_t device, int sensor, unsigned int *celsius))                       \
	X(nvmlDeviceGetPowerUsage, 0, nvmlapi_return_t,                                       \
	  (nvmlapi_device_t device, unsigned int *milliwatts))                                \
	X(nvmlDeviceGetUtilizationRates, 0, nvmlapi_return_t,                                 \
	  (nvmlapi_device_t device, struct nvmlapi_utilization * rates))                      \
	X(nvmlDeviceGetComputeRunningProcesses_v3, 0, nvmlapi_return_t,                       \
	  (nvmlapi_device_t device, unsigned int *count, struct nvmlapi_process_info *infos)) \
	X(nvmlDeviceGetComputeRunningProcesses_v2, 0, nvmlapi_return_t,                       \
	  (nvmlapi_device_t device, unsigned int *count, struct nvmlapi_process_info *infos))

#endif
