/* SPDX-License-Identifier: MIT */
/* rsmi_api.h: the subset of the librocm_smi64 ABI that telemetry uses, loaded by dlopen. */
#ifndef ROCMMEMD_TELEMETRY_RSMI_API_H
#define ROCMMEMD_TELEMETRY_RSMI_API_H

/*
 * Declared here rather than taken from rocm_smi.h: Debian ships 5.2.3 while users run 5.x to
 * 7.x, and only functions whose signatures are equal in all of them are called. Never call
 * rsmi_dev_gpu_metrics_info_get: rsmi_gpu_metrics_t grew from 96 to 424 bytes between 5.2.3
 * and 6.2, so a caller built against the wrong header overflows its buffer.
 *
 * The per-process API is not used either: rsmi_compute_process_info_get fills only the pid
 * and pasid of each rsmi_process_info_t (32 bytes: u32 process_id, u32 pasid, u64
 * vram_usage, u64 sdma_usage, u32 cu_occupancy), and rsmi_compute_process_info_by_pid_get
 * sums vram_usage over every GPU whose queues the process owns. Per-device figures come from
 * the KFD files rocm-smi itself reads (kfd.c).
 */

#include <stdint.h>

typedef int rsmiapi_status_t; /* rsmi_status_t */
#define RSMIAPI_SUCCESS 0

/* rsmi_init flags: the mutex guarding each device is per process, not in /dev/shm. Older
 * libraries may refuse the flag: rsmi_init is then retried with 0. */
#define RSMIAPI_INIT_THREAD_ONLY_MUTEX 0x400000000000000ull

/* rsmi_memory_type_t */
#define RSMIAPI_MEM_VRAM 0
#define RSMIAPI_MEM_VIS_VRAM 1
#define RSMIAPI_MEM_GTT 2

/* rsmi_temperature_type_t and rsmi_temperature_metric_t */
#define RSMIAPI_TEMP_EDGE 0
#define RSMIAPI_TEMP_JUNCTION 1
#define RSMIAPI_TEMP_CURRENT 0

/*
 * BDFID = (domain << 32) | (partition << 28) | (bus << 8) | (device << 3) | function; bits
 * 16-31 are reserved (6.x puts the partition id in 28-31), so they are masked off.
 */
#define RSMIAPI_BDF_DOMAIN(b) ((uint32_t)((b) >> 32))
#define RSMIAPI_BDF_BUS(b) ((uint8_t)(((b) >> 8) & 0xff))
#define RSMIAPI_BDF_DEVICE(b) ((uint8_t)(((b) >> 3) & 0x1f))
#define RSMIAPI_BDF_FUNCTION(b) ((uint8_t)((b)&0x7))

/* X(name, required, return type, parameters). Optional functions may be NULL. */
#define RSMIAPI_FUNCTIONS(X)                                                                     \
	X(rsmi_init, 1, rsmiapi_status_t, (uint64_t flags))                                      \
	X(rsmi_shut_down, 1, rsmiapi_status_t, (void))                                           \
	X(rsmi_num_monitor_devices, 1, rsmiapi_status_t, (uint32_t * count))                     \
	X(rsmi_dev_pci_id_get, 1, rsmiapi_status_t, (uint32_t dv, uint64_t * bdfid))             \
	X(rsmi_status_string, 0, rsmiapi_status_t, (rsmiapi_status_t status, const char **text)) \
	X(rsmi_dev_memory_total_get, 0, rsmiapi_status_t,                                        \
	  (uint32_t dv, int mem_type, uint64_t *bytes))                                          \
	X(rsmi_dev_memory_usage_get, 0, rsmiapi_status_t,                                        \
	  (uint32_t dv, int mem_type, uint64_t *bytes))                                          \
	X(rsmi_dev_temp_metric_get, 0, rsmiapi_status_t,                                         \
	  (uint32_t dv, uint32_t sensor, int metric, int64_t *millidegrees))                     \
	X(rsmi_dev_power_ave_get, 0, rsmiapi_status_t,                                           \
	  (uint32_t dv, uint32_t sensor, uint64_t * microwatts))                                 \
	X(rsmi_dev_current_socket_power_get, 0, rsmiapi_status_t,                                \
	  (uint32_t dv, uint64_t * microwatts))                                                  \
	X(rsmi_dev_busy_percent_get, 0, rsmiapi_status_t, (uint32_t dv, uint32_t * percent))     \
	X(rsmi_dev_memory_busy_percent_get, 0, rsmiapi_status_t, (uint32_t dv, uint32_t * percent))

#endif
