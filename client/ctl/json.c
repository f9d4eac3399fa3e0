/* SPDX-License-Identifier: MIT */
/* json.c: the JSON shapes rocmmemctl's commands share (status --json, watch --json, models). */
#include <json-c/json.h>
#include <stdio.h>

#include "format.h"
#include "json.h"

/* The version of status --json; bump only when a field changes meaning or goes away. */
#define STATUS_SCHEMA_VERSION 1

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

json_object *ctl_daemon_json(const struct rocmmem_daemon_info *d, bool fallback)
{
	json_object *o = json_object_new_object();

	ctl_json_str(o, "version", d->version);
	ctl_json_i64(o, "pid", d->pid);
	ctl_json_u64(o, "uptime_s", d->uptime_s);
	ctl_json_str(o, "backend", d->backend);
	ctl_json_u64(o, "protocol_version", d->protocol_version);
	if (fallback) {
		ctl_json_bool(o, "host_fallback", d->host_fallback);
		ctl_json_str(o, "host_fallback_reason",
			     d->host_fallback_reason ? d->host_fallback_reason : "");
		ctl_json_u64(o, "fds_open", d->fds_open);
		ctl_json_u64(o, "fds_limit", d->fds_limit);
	}
	return o;
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
	size_t nproc = rocmmem_status_process_count(st, v->index);

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
	/* The reconciled books: no numbers where nothing is measured. */
	ctl_json_bool(o, "measurable", v->measurable);
	if (v->measurable) {
		ctl_json_u64(o, "undeclared_bytes", v->undeclared_bytes);
		ctl_json_u64(o, "outside_bytes", v->outside_bytes);
	} else {
		ctl_json_str(o, "measured", "cannot measure: no per-process device memory here");
	}
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
	if (v->pool_limit_bytes || v->pool_bytes) {
		json_object *p = json_object_new_object();

		ctl_json_u64(p, "bytes", v->pool_bytes);
		ctl_json_u64(p, "chunks", v->pool_chunks);
		ctl_json_u64(p, "limit_bytes", v->pool_limit_bytes);
		ctl_json_u64(p, "warm_grants", v->pool_warm_grants);
		ctl_json_u64(p, "dropped_bytes", v->pool_dropped_bytes);
		json_object_object_add(o, "pool", p);
	}
	if (v->telemetry_source[0])
		json_object_object_add(o, "telemetry", telemetry_json(v));
	if (nproc) {
		json_object *procs = json_object_new_array();

		for (size_t k = 0; k < nproc; k++) {
			const struct rocmmem_process_info *p =
			    rocmmem_status_process(st, v->index, k);
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

/* books_json adds a client's reconciled books, summed and per device: no numbers measured where
 * nothing is measured. */
static void books_json(json_object *o, const struct rocmmem_client_info *v)
{
	json_object *books = json_object_new_array();

	ctl_json_u64(o, "declared_bytes", v->declared_bytes);
	ctl_json_bool(o, "measurable", v->measurable);
	if (v->measurable) {
		ctl_json_u64(o, "measured_bytes", v->measured_bytes);
		ctl_json_u64(o, "undeclared_bytes", v->undeclared_bytes);
	} else {
		ctl_json_str(o, "measured", "cannot measure: no per-process device memory here");
	}
	for (size_t i = 0; i < v->nbooks; i++) {
		const struct rocmmem_client_books *b = &v->books[i];
		json_object *bo = json_object_new_object();

		ctl_json_u64(bo, "device", b->device);
		ctl_json_u64(bo, "declared_bytes", b->declared_bytes);
		ctl_json_bool(bo, "measurable", b->measurable);
		if (b->measurable) {
			ctl_json_u64(bo, "measured_bytes", b->measured_bytes);
			ctl_json_u64(bo, "undeclared_bytes", b->undeclared_bytes);
		}
		json_object_array_add(books, bo);
	}
	json_object_object_add(o, "books", books);
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
	books_json(o, v);
	if (v->arena_bytes) {
		json_object *a = json_object_new_object();

		ctl_json_u64(a, "size_bytes", v->arena_bytes);
		ctl_json_u64(a, "used_bytes", v->arena_used_bytes);
		ctl_json_u64(a, "free_bytes", v->arena_free_bytes);
		ctl_json_u64(a, "largest_free_bytes", v->arena_largest_free);
		ctl_json_u64(a, "fallbacks", v->arena_fallbacks);
		json_object_object_add(o, "arena", a);
	}
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

/* ----------------------------------------------------------------------------------------- */
/* status --json */

static json_object *denials_json(const rocmmem_status *st)
{
	json_object *a = json_object_new_array();
	char name[32];

	for (size_t i = 0; i < rocmmem_status_denial_count(st); i++) {
		const struct rocmmem_denial_info *v = rocmmem_status_denial(st, i);
		json_object *o = json_object_new_object();

		ctl_json_u64(o, "timestamp_ms", v->timestamp_ms);
		ctl_json_i64(o, "pid", v->pid);
		ctl_json_str(o, "client_name", v->client_name);
		ctl_json_u64(o, "device", v->device);
		ctl_json_u64(o, "bytes", v->bytes);
		ctl_json_u64(o, "model_id", v->model_id);
		ctl_json_str(o, "model_name", v->model_name);
		ctl_json_str(o, "error", ctl_errno_name(v->error, name, sizeof(name)));
		ctl_json_i64(o, "errno", -(int64_t)v->error);
		ctl_json_str(o, "reason", v->reason);
		json_object_array_add(a, o);
	}
	return a;
}

/* limits_json: {"NAME": {"value": N, "unlimited": false, "hits": N}, ...} in the daemon's order. */
static json_object *limits_json(const rocmmem_status *st)
{
	json_object *o = json_object_new_object();

	for (size_t i = 0; i < rocmmem_status_limit_count(st); i++) {
		const struct rocmmem_limit_info *v = rocmmem_status_limit(st, i);
		json_object *l = json_object_new_object();

		ctl_json_u64(l, "value", v->value);
		ctl_json_bool(l, "unlimited", v->unlimited);
		ctl_json_u64(l, "hits", v->hits);
		json_object_object_add(o, v->name, l);
	}
	return o;
}

static json_object *access_json(const rocmmem_status *st)
{
	const struct rocmmem_access_info *v = rocmmem_status_access(st);
	json_object *o = json_object_new_object();

	ctl_json_u64(o, "peers_refused", v->peers_refused);
	ctl_json_u64(o, "requests_refused", v->requests_refused);
	return o;
}

static json_object *leases_json(const rocmmem_status *st)
{
	json_object *leases = json_object_new_array();

	for (size_t i = 0; i < rocmmem_status_lease_count(st); i++) {
		const struct rocmmem_lease_info *v = rocmmem_status_lease(st, i);
		json_object *o = json_object_new_object();

		ctl_json_u64(o, "id", v->id);
		ctl_json_i64(o, "owner_pid", v->owner_pid);
		ctl_json_u64(o, "device", v->device);
		ctl_json_u64(o, "bytes", v->bytes);
		ctl_json_str(o, "tag", v->tag);
		ctl_json_u64(o, "age_ms", v->age_ms);
		ctl_json_u64(o, "model_id", v->model_id);
		json_object_array_add(leases, o);
	}
	return leases;
}

static json_object *queue_json(const rocmmem_status *st)
{
	json_object *queue = json_object_new_array();

	for (size_t i = 0; i < rocmmem_status_waiter_count(st); i++) {
		const struct rocmmem_waiter_info *v = rocmmem_status_waiter(st, i);
		json_object *o = json_object_new_object();

		ctl_json_i64(o, "owner_pid", v->owner_pid);
		ctl_json_u64(o, "device", v->device);
		ctl_json_u64(o, "bytes", v->bytes);
		ctl_json_u64(o, "waited_ms", v->waited_ms);
		ctl_json_i64(o, "timeout_ms", v->timeout_ms);
		ctl_json_str(o, "tag", v->tag);
		ctl_json_u64(o, "model_id", v->model_id);
		json_object_array_add(queue, o);
	}
	return queue;
}

/* awaiting_json: what the previous daemon's clients have not re-declared yet, per process. */
static json_object *awaiting_json(const rocmmem_status *st)
{
	json_object *a = json_object_new_array();

	for (size_t i = 0; i < rocmmem_status_awaiting_count(st); i++) {
		const struct rocmmem_awaiting_info *v = rocmmem_status_awaiting(st, i);
		json_object *o = json_object_new_object();

		ctl_json_u64(o, "device", v->device);
		ctl_json_i64(o, "pid", v->pid);
		ctl_json_u64(o, "uid", v->uid);
		ctl_json_u64(o, "leases", v->leases);
		ctl_json_u64(o, "lease_bytes", v->lease_bytes);
		ctl_json_u64(o, "models", v->models);
		ctl_json_u64(o, "reserved_bytes", v->reserved_bytes);
		ctl_json_u64(o, "bytes", v->lease_bytes + v->reserved_bytes);
		ctl_json_u64(o, "grace_left_ms", v->grace_left_ms);
		json_object_array_add(a, o);
	}
	return a;
}

json_object *ctl_status_json(const rocmmem_status *st)
{
	json_object *root = json_object_new_object();
	json_object *devices = json_object_new_array(), *clients = json_object_new_array();
	json_object *models = json_object_new_array();

	ctl_json_i64(root, "schema_version", STATUS_SCHEMA_VERSION);
	json_object_object_add(root, "daemon", ctl_daemon_json(rocmmem_status_daemon(st), true));
	for (size_t i = 0; i < rocmmem_status_device_count(st); i++)
		json_object_array_add(devices, ctl_device_json(st, i));
	/* This query's own connection is not one of the daemon's clients to show. */
	for (size_t i = 0; i < rocmmem_status_client_count(st); i++)
		if (!ctl_is_self(rocmmem_status_client(st, i)))
			json_object_array_add(clients,
					      ctl_client_json(rocmmem_status_client(st, i)));
	for (size_t i = 0; i < rocmmem_status_model_count(st); i++)
		json_object_array_add(models, ctl_model_json(rocmmem_status_model(st, i)));
	json_object_object_add(root, "devices", devices);
	json_object_object_add(root, "clients", clients);
	json_object_object_add(root, "leases", leases_json(st));
	json_object_object_add(root, "models", models);
	json_object_object_add(root, "queue", queue_json(st));
	json_object_object_add(root, "denials", denials_json(st));
	json_object_object_add(root, "counters",
			       ctl_counters_json(rocmmem_status_counters(st), false));
	json_object_object_add(root, "limits", limits_json(st));
	json_object_object_add(root, "access", access_json(st));
	json_object_object_add(root, "awaiting_redeclare", awaiting_json(st));
	return root;
}

/* ----------------------------------------------------------------------------------------- */
/* watch --json: a line per sample or event */

/* shows: a device that `watch --device` (device >= 0) shows. */
static bool shows(long device, uint32_t index)
{
	return device < 0 || (unsigned long)device == index;
}

json_object *ctl_sample_json(const rocmmem_status *st, const struct rocmmem_sample_info *info,
			     long device)
{
	json_object *root = json_object_new_object();
	json_object *devices = json_object_new_array(), *clients = json_object_new_array();
	json_object *models = json_object_new_array();

	ctl_json_str(root, "type", "sample");
	ctl_json_u64(root, "timestamp_ms", info->timestamp_ms);
	ctl_json_u64(root, "interval_ms", info->interval_ms);
	ctl_json_u64(root, "dropped", info->dropped);
	ctl_json_u64(root, "uptime_ms", info->uptime_ms);
	/* A sample does not say whether the daemon fell back to host memory (status does). */
	json_object_object_add(root, "daemon", ctl_daemon_json(rocmmem_status_daemon(st), false));
	for (size_t i = 0; i < rocmmem_status_device_count(st); i++)
		if (shows(device, rocmmem_status_device(st, i)->index))
			json_object_array_add(devices, ctl_device_json(st, i));
	/* This watch's own connection is not one of the daemon's clients to show. */
	for (size_t i = 0; i < rocmmem_status_client_count(st); i++)
		if (!ctl_is_self(rocmmem_status_client(st, i)))
			json_object_array_add(clients,
					      ctl_client_json(rocmmem_status_client(st, i)));
	for (size_t i = 0; i < rocmmem_status_model_count(st); i++) {
		const struct rocmmem_model_info *m = rocmmem_status_model(st, i);

		if (shows(device, m->device))
			json_object_array_add(models, ctl_model_json(m));
	}
	json_object_object_add(root, "devices", devices);
	json_object_object_add(root, "clients", clients);
	json_object_object_add(root, "models", models);
	ctl_json_u64(root, "clients_omitted", info->clients_omitted);
	ctl_json_u64(root, "models_omitted", info->models_omitted);
	ctl_json_u64(root, "waiters", info->waiters);
	ctl_json_u64(root, "oldest_wait_ms", info->oldest_wait_ms);
	json_object_object_add(root, "counters",
			       ctl_counters_json(rocmmem_status_counters(st), true));
	return root;
}

json_object *ctl_event_json(const struct rocmmem_telemetry_event *e)
{
	json_object *o = json_object_new_object();

	ctl_json_str(o, "type", "event");
	ctl_json_str(o, "event", rocmmem_telemetry_name(e->type));
	ctl_json_u64(o, "timestamp_ms", e->timestamp_ms);
	ctl_json_i64(o, "pid", e->pid);
	ctl_json_str(o, "client_name", e->client_name);
	ctl_json_u64(o, "client_id", e->client_id);
	json_object_object_add(o, "device",
			       e->has_device ? json_object_new_uint64(e->device) : NULL);
	ctl_json_u64(o, "bytes", e->bytes);
	ctl_json_u64(o, "lease_id", e->lease_id);
	ctl_json_u64(o, "model_id", e->model_id);
	ctl_json_str(o, "model_name", e->model_name);
	ctl_json_i64(o, "error", e->error);
	ctl_json_u64(o, "waited_ms", e->waited_ms);
	ctl_json_str(o, "detail", e->detail);
	ctl_json_u64(o, "dropped", e->dropped);
	ctl_json_u64(o, "declared_bytes", e->declared_bytes);
	return o;
}

json_object *ctl_model_json(const struct rocmmem_model_info *v)
{
	json_object *o = json_object_new_object();

	/* The first keys in the order status --json always had them. */
	ctl_json_str(o, "name", v->name);
	ctl_json_str(o, "class", ctl_model_class_name(v->model_class));
	ctl_json_i64(o, "owner_pid", v->owner_pid);
	ctl_json_u64(o, "device", v->device);
	ctl_json_u64(o, "bytes", v->bytes);
	ctl_json_str(o, "state", ctl_model_state_name(v->state));
	ctl_json_u64(o, "id", v->id);
	ctl_json_i64(o, "priority", v->priority);
	ctl_json_bool(o, "pinned", v->pinned);
	ctl_json_u64(o, "size", v->size);
	ctl_json_u64(o, "reservation_bytes", v->reservation_bytes);
	ctl_json_u64(o, "lease_bytes", v->lease_bytes);
	ctl_json_u64(o, "idle_ms", v->idle_ms);
	ctl_json_u64(o, "use_count", v->use_count);
	ctl_json_u64(o, "evictions", v->evictions);
	return o;
}
