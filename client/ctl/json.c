/* SPDX-License-Identifier: MIT */
/* json.c: the JSON shapes rocmmemctl's commands share (status --json, watch --json, models). */
#include <json-c/json.h>
#include <stdio.h>

#include "ctl.h"

void ctl_json_u64(json_object *o, const char *key, uint64_t v)
{
	json_object_object_add(o, key, json_object_new_uint64(v));
}

void ctl_json_i64(json_object *o, const char *key, int64_t v)
{
	json_object_object_add(o, key, json_object_new_int64(v));
}

void ctl_json_str(json_object *o, const char *key, const char *v)
{
	json_object_object_add(o, key, json_object_new_string(v));
}

void ctl_json_bool(json_object *o, const char *key, bool v)
{
	json_object_object_add(o, key, json_object_new_boolean(v));
}

int ctl_json_print(json_object *o)
{
	int rc = puts(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN |
							    JSON_C_TO_STRING_NOSLASHESCAPE));

	json_object_put(o);
	return rc < 0 ? -1 : 0;
}

static const char *handle_name(enum rocmmem_handle_kind k)
{
	switch (k) {
	case ROCMMEM_HANDLE_MEMFD:
		return "memfd";
	case ROCMMEM_HANDLE_VMM_FD:
		return "vmm-fd";
	case ROCMMEM_HANDLE_DMABUF:
		return "dmabuf";
	case ROCMMEM_HANDLE_IPC:
		return "ipc";
	default:
		return "none";
	}
}

static json_object *telemetry_json(const struct rocmmem_device_info *v)
{
	json_object *t = json_object_new_object();

	ctl_json_str(t, "source", v->telemetry_source);
	if (v->valid & ROCMMEM_DEVICE_HAS_VRAM) {
		ctl_json_u64(t, "vram_total_bytes", v->vram_total_bytes);
		ctl_json_u64(t, "vram_used_bytes", v->vram_used_bytes);
	}
	if (v->valid & ROCMMEM_DEVICE_HAS_GTT) {
		ctl_json_u64(t, "gtt_total_bytes", v->gtt_total_bytes);
		ctl_json_u64(t, "gtt_used_bytes", v->gtt_used_bytes);
	}
	if (v->valid & ROCMMEM_DEVICE_HAS_TEMPERATURE)
		ctl_json_i64(t, "temperature_mc", v->temperature_mc);
	if (v->valid & ROCMMEM_DEVICE_HAS_POWER)
		ctl_json_u64(t, "power_mw", v->power_mw);
	if (v->valid & ROCMMEM_DEVICE_HAS_BUSY)
		ctl_json_u64(t, "busy_percent", v->busy_percent);
	return t;
}

json_object *ctl_device_json(const rocmmem_status *st, size_t index)
{
	const struct rocmmem_device_info *v = rocmmem_status_device(st, index);
	json_object *o = json_object_new_object();
	size_t nproc = rocmmem_status_process_count(st, index);

	ctl_json_u64(o, "index", v->index);
	ctl_json_str(o, "name", v->name);
	ctl_json_str(o, "backend", v->backend);
	ctl_json_u64(o, "total_bytes", v->total_bytes);
	ctl_json_u64(o, "budget_bytes", v->budget_bytes);
	ctl_json_u64(o, "leased_bytes", v->leased_bytes);
	ctl_json_u64(o, "free_bytes", v->free_bytes);
	ctl_json_u64(o, "headroom_bytes", v->headroom_bytes);
	ctl_json_u64(o, "reserved_bytes", v->reserved_bytes);
	ctl_json_u64(o, "granule_bytes", v->granule_bytes);
	ctl_json_u64(o, "leases", v->leases);
	ctl_json_u64(o, "waiters", v->waiters);
	ctl_json_u64(o, "oldest_wait_ms", v->oldest_wait_ms);
	ctl_json_u64(o, "largest_grantable_bytes", v->largest_grantable);
	ctl_json_u64(o, "largest_with_eviction_bytes", v->largest_with_eviction);
	ctl_json_u64(o, "evictable_bytes", v->evictable_bytes);
	ctl_json_u64(o, "models_resident", v->models_resident);
	ctl_json_u64(o, "awaiting_redeclare_bytes", v->awaiting_redeclare_bytes);
	ctl_json_str(o, "handle", handle_name(v->handle_kind)); /* the same as "sharing" */
	ctl_json_str(o, "sharing", v->sharing);
	ctl_json_str(o, "pci_bus_id", v->pci_bus_id);
	ctl_json_bool(o, "integrated", v->integrated);
	ctl_json_str(o, "state", v->state);
	if (v->valid & ROCMMEM_DEVICE_HAS_RUNTIME) {
		ctl_json_u64(o, "runtime_total_bytes", v->runtime_total_bytes);
		ctl_json_u64(o, "runtime_free_bytes", v->runtime_free_bytes);
		ctl_json_u64(o, "external_bytes", v->external_bytes);
	}
	if (v->telemetry_source[0])
		json_object_object_add(o, "telemetry", telemetry_json(v));
	if (nproc) {
		json_object *procs = json_object_new_array();

		for (size_t k = 0; k < nproc; k++) {
			const struct rocmmem_process_info *p = rocmmem_status_process(st, index, k);
			json_object *po = json_object_new_object();

			ctl_json_i64(po, "pid", p->pid);
			ctl_json_u64(po, "vram_bytes", p->vram_bytes);
			ctl_json_bool(po, "client", p->client);
			json_object_array_add(procs, po);
		}
		json_object_object_add(o, "processes", procs);
	}
	return o;
}

json_object *ctl_client_json(const struct rocmmem_client_info *v)
{
	json_object *o = json_object_new_object();

	ctl_json_i64(o, "pid", v->pid);
	ctl_json_u64(o, "uid", v->uid);
	ctl_json_str(o, "name", v->name);
	ctl_json_u64(o, "leases", v->leases);
	ctl_json_u64(o, "leased_bytes", v->leased_bytes);
	ctl_json_u64(o, "gid", v->gid);
	ctl_json_u64(o, "connected_s", v->connected_s);
	ctl_json_u64(o, "client_id", v->client_id);
	ctl_json_u64(o, "models", v->models);
	ctl_json_u64(o, "reserved_bytes", v->reserved_bytes);
	ctl_json_u64(o, "waiting", v->waiting);
	ctl_json_bool(o, "pidfd", v->pidfd);
	return o;
}

json_object *ctl_counters_json(const struct rocmmem_counters *k, bool connections)
{
	json_object *o = json_object_new_object();

	ctl_json_u64(o, "grants", k->grants);
	ctl_json_u64(o, "denials", k->denials);
	ctl_json_u64(o, "timeouts", k->timeouts);
	ctl_json_u64(o, "releases", k->releases);
	ctl_json_u64(o, "reclaimed", k->reclaimed);
	ctl_json_u64(o, "failures", k->failures);
	ctl_json_u64(o, "evictions", k->evictions);
	ctl_json_u64(o, "revocations", k->revocations);
	ctl_json_u64(o, "trims", k->trims);
	ctl_json_u64(o, "bytes_trimmed", k->bytes_trimmed);
	if (connections)
		ctl_json_u64(o, "connections", k->connections);
	return o;
}
