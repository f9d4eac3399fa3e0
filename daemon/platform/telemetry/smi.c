/* SPDX-License-Identifier: MIT */
/* smi.c: the rocm-smi-lib source: librocm_smi64 found and loaded at run time. */
#include "rsmi_api.h"
#include "source.h"

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct smi_state {
	void *lib;
	char path[PATH_MAX]; /* what was loaded */
	char root[PATH_MAX]; /* the sysfs root, for KFD's per-process counters */
#define RSMIAPI_FIELD(name, required, ret, params) ret(*name) params;
	RSMIAPI_FUNCTIONS(RSMIAPI_FIELD)
#undef RSMIAPI_FIELD
};

static bool try_open(struct smi_state *s, const char *path, char *why, size_t why_len)
{
	s->lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!s->lib) {
		const char *e = dlerror();

		snprintf(why, why_len, "%s", e ? e : path);
		return false;
	}
	snprintf(s->path, sizeof(s->path), "%s", path);
	return true;
}

/*
 * open_library loads $ROCMMEM_ROCM_SMI_LIBRARY, else the first SONAME found on the loader's
 * path, then in $ROCM_PATH/lib and /opt/rocm/lib.
 */
static bool open_library(struct smi_state *s, char *why, size_t why_len)
{
	static const char *const names[] = {"librocm_smi64.so.7", "librocm_smi64.so.6",
					    "librocm_smi64.so.5", "librocm_smi64.so.1",
					    "librocm_smi64.so"};
	const char *forced = getenv(TELEMETRY_ROCM_SMI_LIBRARY_ENV), *rocm = getenv("ROCM_PATH");
	const char *dirs[] = {"", rocm && rocm[0] ? rocm : NULL, "/opt/rocm"};
	char path[PATH_MAX];

	if (forced && forced[0])
		return try_open(s, forced, why, why_len);
	for (size_t d = 0; d < sizeof(dirs) / sizeof(dirs[0]); d++) {
		if (!dirs[d])
			continue;
		for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
			if (sysread_path(path, sizeof(path), "%s%s%s", dirs[d],
					 dirs[d][0] ? "/lib/" : "", names[i]) == 0 &&
			    try_open(s, path, why, why_len))
				return true;
		}
	}
	snprintf(why, why_len,
		 "librocm_smi64 not found (tried .so.7, .so.6, .so.5, .so.1, .so, $ROCM_PATH/lib, "
		 "/opt/rocm/lib; set %s to choose one)",
		 TELEMETRY_ROCM_SMI_LIBRARY_ENV);
	return false;
}

static const char *status_text(const struct smi_state *s, rsmiapi_status_t status, char *buf,
			       size_t len)
{
	const char *text = NULL;

	if (!s->rsmi_status_string || s->rsmi_status_string(status, &text) != RSMIAPI_SUCCESS)
		text = NULL;
	snprintf(buf, len, "%s (%d)", text ? text : "rsmi_status", status);
	return buf;
}

static void smi_close(void *state)
{
	struct smi_state *s = state;

	if (!s)
		return;
	if (s->rsmi_shut_down)
		s->rsmi_shut_down();
	if (s->lib)
		dlclose(s->lib);
	free(s);
}

static int smi_open(void **state, char *why, size_t why_len)
{
	struct smi_state *s = calloc(1, sizeof(*s));
	rsmiapi_status_t status;
	char text[128];
	uint32_t count = 0;

	if (!s) {
		snprintf(why, why_len, "out of memory");
		return -ENOMEM;
	}
	snprintf(s->root, sizeof(s->root), "%s", telemetry_sysfs_root());
	if (!open_library(s, why, why_len)) {
		free(s);
		return -ENOENT;
	}
#define RSMIAPI_LOOKUP(fn, required, ret, params)                                             \
	*(void **)&s->fn = dlsym(s->lib, #fn);                                                \
	if (!s->fn && (required)) {                                                           \
		snprintf(why, why_len, "%s lacks %s: not a usable rocm-smi library", s->path, \
			 #fn);                                                                \
		s->rsmi_shut_down = NULL; /* never initialised */                             \
		smi_close(s);                                                                 \
		return -ENOSYS;                                                               \
	}
	RSMIAPI_FUNCTIONS(RSMIAPI_LOOKUP)
#undef RSMIAPI_LOOKUP
	/*
	 * Ask for per-process device mutexes: the default ones are shared through /dev/shm,
	 * where files left by another user or by a killed rocm-smi make calls fail or stall.
	 */
	status = s->rsmi_init(RSMIAPI_INIT_THREAD_ONLY_MUTEX);
	if (status != RSMIAPI_SUCCESS)
		status = s->rsmi_init(0);
	if (status != RSMIAPI_SUCCESS) {
		snprintf(why, why_len, "rsmi_init failed: %s",
			 status_text(s, status, text, sizeof(text)));
		s->rsmi_shut_down = NULL;
		smi_close(s);
		return -ENODEV;
	}
	status = s->rsmi_num_monitor_devices(&count);
	if (status != RSMIAPI_SUCCESS || count == 0) {
		snprintf(why, why_len, "rocm-smi (%s) sees no GPU", s->path);
		smi_close(s);
		return -ENODEV;
	}
	*state = s;
	return 0;
}

/* find_device maps a PCI bus id to rocm-smi's device index. */
static int find_device(struct smi_state *s, const struct telemetry_pci *pci, uint32_t *dv)
{
	uint32_t count = 0;

	if (s->rsmi_num_monitor_devices(&count) != RSMIAPI_SUCCESS)
		return -EIO;
	for (uint32_t i = 0; i < count; i++) {
		uint64_t b = 0;
		struct telemetry_pci got;

		if (s->rsmi_dev_pci_id_get(i, &b) != RSMIAPI_SUCCESS)
			continue;
		got.domain = RSMIAPI_BDF_DOMAIN(b);
		got.bus = RSMIAPI_BDF_BUS(b);
		got.device = RSMIAPI_BDF_DEVICE(b);
		got.function = RSMIAPI_BDF_FUNCTION(b);
		/* Partitions share the bus id: the first is the device's index. */
		if (telemetry_pci_equal(&got, pci)) {
			*dv = i;
			return 0;
		}
	}
	return -ENODEV;
}

static bool read_memory(struct smi_state *s, uint32_t dv, int type, uint64_t *total, uint64_t *used)
{
	uint64_t t = 0, u = 0;

	if (!s->rsmi_dev_memory_total_get || !s->rsmi_dev_memory_usage_get ||
	    s->rsmi_dev_memory_total_get(dv, type, &t) != RSMIAPI_SUCCESS ||
	    s->rsmi_dev_memory_usage_get(dv, type, &u) != RSMIAPI_SUCCESS)
		return false;
	*total = t;
	*used = u;
	return true;
}

/* read_temperature: the edge sensor, else junction (MI300 has no edge sensor). */
static bool read_temperature(struct smi_state *s, uint32_t dv, int32_t *out)
{
	static const uint32_t sensors[] = {RSMIAPI_TEMP_EDGE, RSMIAPI_TEMP_JUNCTION};

	if (!s->rsmi_dev_temp_metric_get)
		return false;
	for (size_t i = 0; i < sizeof(sensors) / sizeof(sensors[0]); i++) {
		int64_t v = 0;

		if (s->rsmi_dev_temp_metric_get(dv, sensors[i], RSMIAPI_TEMP_CURRENT, &v) ==
			RSMIAPI_SUCCESS &&
		    v >= INT32_MIN && v <= INT32_MAX) {
			*out = (int32_t)v;
			return true;
		}
	}
	return false;
}

/* read_power: the average, else the current socket power (6.x; newer GPUs have only that). */
static bool read_power(struct smi_state *s, uint32_t dv, uint32_t *mw)
{
	uint64_t uw = 0;

	if ((s->rsmi_dev_power_ave_get &&
	     s->rsmi_dev_power_ave_get(dv, 0, &uw) == RSMIAPI_SUCCESS && uw / 1000 <= UINT32_MAX) ||
	    (s->rsmi_dev_current_socket_power_get &&
	     s->rsmi_dev_current_socket_power_get(dv, &uw) == RSMIAPI_SUCCESS &&
	     uw / 1000 <= UINT32_MAX)) {
		*mw = (uint32_t)(uw / 1000);
		return true;
	}
	return false;
}

static bool read_percent(rsmiapi_status_t (*fn)(uint32_t, uint32_t *), uint32_t dv, uint32_t *out)
{
	uint32_t v = 0;

	if (!fn || fn(dv, &v) != RSMIAPI_SUCCESS || v > 100)
		return false;
	*out = v;
	return true;
}

static int smi_sample(void *state, const struct telemetry_pci *pci, struct telemetry_sample *out)
{
	struct smi_state *s = state;
	char id[TELEMETRY_PCI_ID_SIZE], dev[PATH_MAX];
	uint32_t dv = 0;
	int r = find_device(s, pci, &dv);

	if (r < 0)
		return r;
	if (read_memory(s, dv, RSMIAPI_MEM_VRAM, &out->vram_total, &out->vram_used))
		out->valid |= TELEMETRY_HAS_VRAM;
	if (read_memory(s, dv, RSMIAPI_MEM_VIS_VRAM, &out->vis_vram_total, &out->vis_vram_used))
		out->valid |= TELEMETRY_HAS_VIS_VRAM;
	if (read_memory(s, dv, RSMIAPI_MEM_GTT, &out->gtt_total, &out->gtt_used))
		out->valid |= TELEMETRY_HAS_GTT;
	/* rocm-smi reads the same sensor files as sysfs.c and would wake a suspended GPU too. */
	telemetry_pci_format(pci, id, sizeof(id));
	if (sysread_path(dev, sizeof(dev), "%s/bus/pci/devices/%s", s->root, id) == 0 &&
	    sysread_runtime_suspended(dev)) {
		out->runtime_suspended = true;
	} else {
		if (read_temperature(s, dv, &out->temperature_mc))
			out->valid |= TELEMETRY_HAS_TEMPERATURE;
		if (read_power(s, dv, &out->power_mw))
			out->valid |= TELEMETRY_HAS_POWER;
		if (read_percent(s->rsmi_dev_busy_percent_get, dv, &out->busy_percent))
			out->valid |= TELEMETRY_HAS_BUSY;
		if (read_percent(s->rsmi_dev_memory_busy_percent_get, dv, &out->mem_busy_percent))
			out->valid |= TELEMETRY_HAS_MEM_BUSY;
	}
	kfd_read_processes(s->root, pci, out);
	return 0;
}

const struct telemetry_source telemetry_smi_source = {
    .name = "rocm-smi",
    .open = smi_open,
    .sample = smi_sample,
    .close = smi_close,
};
