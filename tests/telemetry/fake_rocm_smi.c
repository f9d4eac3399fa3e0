/* SPDX-License-Identifier: MIT */
/* fake_rocm_smi.c: a stand-in librocm_smi64 answering from the data file $FAKE_RSMI_DATA. */
#include <stdio.h>

#include "fake_data.h"
#include "platform/telemetry/rsmi_api.h"

/*
 * Data keys: "init <status>", "reject_flags 1" (rsmi_init fails unless flags are 0),
 * "count <n>", and per device i: "dev<i>.bdfid", "dev<i>.<vram|vis_vram|gtt>_<total|used>",
 * "dev<i>.temp<sensor>", "dev<i>.power_ave", "dev<i>.socket_power", "dev<i>.busy",
 * "dev<i>.mem_busy". A missing key answers RSMI_STATUS_NOT_SUPPORTED. Calls that matter are
 * logged to $FAKE_RSMI_LOG. Built twice: FAKE_MINIMAL exports only the required functions.
 */
#define DATA "FAKE_RSMI_DATA"
#define LOG "FAKE_RSMI_LOG"
#define NOT_SUPPORTED 2
#define INVALID_ARGS 1

#define EXPORT __attribute__((visibility("default")))

/* The same prototypes telemetry's loader expects, so the two cannot drift apart. */
#define FAKE_PROTOTYPE(name, required, ret, params) EXPORT ret name params;
RSMIAPI_FUNCTIONS(FAKE_PROTOTYPE)
EXPORT rsmiapi_status_t rsmi_dev_gpu_metrics_info_get(uint32_t dv, void *metrics);

static bool device_exists(uint32_t dv)
{
	uint64_t count = 0;

	return fake_u64(DATA, "count", &count) && dv < count;
}

static rsmiapi_status_t answer_u64(uint32_t dv, const char *name, uint64_t *out)
{
	char key[64];

	if (!out)
		return INVALID_ARGS;
	snprintf(key, sizeof(key), "dev%u.%s", (unsigned)dv, name);
	if (!device_exists(dv) || !fake_u64(DATA, key, out))
		return NOT_SUPPORTED;
	return 0;
}

rsmiapi_status_t rsmi_init(uint64_t flags)
{
	uint64_t status = 0, reject = 0;

	fake_log(LOG, "init 0x%llx", (unsigned long long)flags);
	if (fake_u64(DATA, "reject_flags", &reject) && reject && flags)
		return INVALID_ARGS;
	fake_u64(DATA, "init", &status);
	return (rsmiapi_status_t)status;
}

rsmiapi_status_t rsmi_shut_down(void)
{
	fake_log(LOG, "shut_down");
	return 0;
}

rsmiapi_status_t rsmi_num_monitor_devices(uint32_t *count)
{
	uint64_t n = 0;

	fake_u64(DATA, "count", &n);
	*count = (uint32_t)n;
	return 0;
}

rsmiapi_status_t rsmi_dev_pci_id_get(uint32_t dv, uint64_t *bdfid)
{
	return answer_u64(dv, "bdfid", bdfid);
}

#ifndef FAKE_MINIMAL
rsmiapi_status_t rsmi_status_string(rsmiapi_status_t status, const char **text)
{
	*text = status == 8 ? "RSMI_STATUS_INIT_ERROR" : "RSMI_STATUS_FAKE";
	return 0;
}

static const char *memory_name(int type)
{
	return type == 0 ? "vram" : type == 1 ? "vis_vram" : type == 2 ? "gtt" : "bad";
}

rsmiapi_status_t rsmi_dev_memory_total_get(uint32_t dv, int mem_type, uint64_t *bytes)
{
	char name[32];

	snprintf(name, sizeof(name), "%s_total", memory_name(mem_type));
	return answer_u64(dv, name, bytes);
}

rsmiapi_status_t rsmi_dev_memory_usage_get(uint32_t dv, int mem_type, uint64_t *bytes)
{
	char name[32];

	snprintf(name, sizeof(name), "%s_used", memory_name(mem_type));
	return answer_u64(dv, name, bytes);
}

rsmiapi_status_t rsmi_dev_temp_metric_get(uint32_t dv, uint32_t sensor, int metric,
					  int64_t *millidegrees)
{
	char key[64];

	snprintf(key, sizeof(key), "dev%u.temp%u", (unsigned)dv, (unsigned)sensor);
	if (metric != 0 || !device_exists(dv) || !fake_s64(DATA, key, millidegrees))
		return NOT_SUPPORTED;
	return 0;
}

rsmiapi_status_t rsmi_dev_power_ave_get(uint32_t dv, uint32_t sensor, uint64_t *microwatts)
{
	if (sensor != 0)
		return INVALID_ARGS;
	return answer_u64(dv, "power_ave", microwatts);
}

rsmiapi_status_t rsmi_dev_current_socket_power_get(uint32_t dv, uint64_t *microwatts)
{
	return answer_u64(dv, "socket_power", microwatts);
}

static rsmiapi_status_t answer_u32(uint32_t dv, const char *name, uint32_t *out)
{
	uint64_t v = 0;
	rsmiapi_status_t r = answer_u64(dv, name, &v);

	if (r == 0)
		*out = (uint32_t)v;
	return r;
}

rsmiapi_status_t rsmi_dev_busy_percent_get(uint32_t dv, uint32_t *percent)
{
	return answer_u32(dv, "busy", percent);
}

rsmiapi_status_t rsmi_dev_memory_busy_percent_get(uint32_t dv, uint32_t *percent)
{
	return answer_u32(dv, "mem_busy", percent);
}

/* Must never be called (its struct changed size between releases): the log tells on it. */
rsmiapi_status_t rsmi_dev_gpu_metrics_info_get(uint32_t dv, void *metrics)
{
	(void)dv;
	(void)metrics;
	fake_log(LOG, "gpu_metrics");
	return NOT_SUPPORTED;
}
#endif
