/* SPDX-License-Identifier: MIT */
/* status.c: `rocmmemctl status`: the daemon's state as a table or as the stable JSON contract. */
#include <getopt.h>
#include <json-c/json.h>
#include <stdio.h>
#include <string.h>

#include "args.h"
#include "ctl.h"
#include "size.h"

/* The version of the JSON below; bump only when a field changes meaning or goes away. */
#define STATUS_SCHEMA_VERSION 1

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

static void add_u64(json_object *o, const char *key, uint64_t v)
{
	json_object_object_add(o, key, json_object_new_uint64(v));
}

static void add_i64(json_object *o, const char *key, int64_t v)
{
	json_object_object_add(o, key, json_object_new_int64(v));
}

static void add_str(json_object *o, const char *key, const char *v)
{
	json_object_object_add(o, key, json_object_new_string(v));
}

static json_object *status_json(const rocmmem_status *st)
{
	const struct rocmmem_daemon_info *d = rocmmem_status_daemon(st);
	json_object *root = json_object_new_object(), *daemon = json_object_new_object();
	json_object *devices = json_object_new_array(), *clients = json_object_new_array();
	json_object *leases = json_object_new_array(), *models = json_object_new_array();
	json_object *queue = json_object_new_array();

	add_i64(root, "schema_version", STATUS_SCHEMA_VERSION);
	add_str(daemon, "version", d->version);
	add_i64(daemon, "pid", d->pid);
	add_u64(daemon, "uptime_s", d->uptime_s);
	add_str(daemon, "backend", d->backend);
	add_u64(daemon, "protocol_version", d->protocol_version);
	json_object_object_add(root, "daemon", daemon);

	for (size_t i = 0; i < rocmmem_status_device_count(st); i++) {
		const struct rocmmem_device_info *v = rocmmem_status_device(st, i);
		json_object *o = json_object_new_object();

		add_u64(o, "index", v->index);
		add_str(o, "name", v->name);
		add_str(o, "backend", v->backend);
		add_u64(o, "total_bytes", v->total_bytes);
		add_u64(o, "budget_bytes", v->budget_bytes);
		add_u64(o, "leased_bytes", v->leased_bytes);
		add_u64(o, "free_bytes", v->free_bytes);
		add_u64(o, "headroom_bytes", v->headroom_bytes);
		add_u64(o, "reserved_bytes", v->reserved_bytes);
		add_u64(o, "granule_bytes", v->granule_bytes);
		add_u64(o, "leases", v->leases);
		add_u64(o, "waiters", v->waiters);
		add_str(o, "handle", handle_name(v->handle_kind));
		add_str(o, "sharing", v->sharing);
		add_str(o, "pci_bus_id", v->pci_bus_id);
		json_object_object_add(o, "integrated", json_object_new_boolean(v->integrated));
		add_str(o, "state", v->state);
		if (v->valid & ROCMMEM_DEVICE_HAS_RUNTIME) {
			add_u64(o, "runtime_total_bytes", v->runtime_total_bytes);
			add_u64(o, "runtime_free_bytes", v->runtime_free_bytes);
			add_u64(o, "external_bytes", v->external_bytes);
		}
		if (v->telemetry_source[0]) {
			json_object *t = json_object_new_object();

			add_str(t, "source", v->telemetry_source);
			if (v->valid & ROCMMEM_DEVICE_HAS_VRAM) {
				add_u64(t, "vram_total_bytes", v->vram_total_bytes);
				add_u64(t, "vram_used_bytes", v->vram_used_bytes);
			}
			if (v->valid & ROCMMEM_DEVICE_HAS_GTT) {
				add_u64(t, "gtt_total_bytes", v->gtt_total_bytes);
				add_u64(t, "gtt_used_bytes", v->gtt_used_bytes);
			}
			if (v->valid & ROCMMEM_DEVICE_HAS_TEMPERATURE)
				add_i64(t, "temperature_mc", v->temperature_mc);
			if (v->valid & ROCMMEM_DEVICE_HAS_POWER)
				add_u64(t, "power_mw", v->power_mw);
			if (v->valid & ROCMMEM_DEVICE_HAS_BUSY)
				add_u64(t, "busy_percent", v->busy_percent);
			json_object_object_add(o, "telemetry", t);
		}
		if (rocmmem_status_process_count(st, i)) {
			json_object *procs = json_object_new_array();

			for (size_t k = 0; k < rocmmem_status_process_count(st, i); k++) {
				const struct rocmmem_process_info *p =
				    rocmmem_status_process(st, i, k);
				json_object *po = json_object_new_object();

				add_i64(po, "pid", p->pid);
				add_u64(po, "vram_bytes", p->vram_bytes);
				json_object_object_add(po, "client",
						       json_object_new_boolean(p->client));
				json_object_array_add(procs, po);
			}
			json_object_object_add(o, "processes", procs);
		}
		json_object_array_add(devices, o);
	}
	for (size_t i = 0; i < rocmmem_status_client_count(st); i++) {
		const struct rocmmem_client_info *v = rocmmem_status_client(st, i);
		json_object *o = json_object_new_object();

		add_i64(o, "pid", v->pid);
		add_u64(o, "uid", v->uid);
		add_str(o, "name", v->name);
		add_u64(o, "leases", v->leases);
		add_u64(o, "leased_bytes", v->leased_bytes);
		add_u64(o, "gid", v->gid);
		add_u64(o, "connected_s", v->connected_s);
		json_object_array_add(clients, o);
	}
	for (size_t i = 0; i < rocmmem_status_lease_count(st); i++) {
		const struct rocmmem_lease_info *v = rocmmem_status_lease(st, i);
		json_object *o = json_object_new_object();

		add_u64(o, "id", v->id);
		add_i64(o, "owner_pid", v->owner_pid);
		add_u64(o, "device", v->device);
		add_u64(o, "bytes", v->bytes);
		add_str(o, "tag", v->tag);
		add_u64(o, "age_ms", v->age_ms);
		add_u64(o, "model_id", v->model_id);
		json_object_array_add(leases, o);
	}
	for (size_t i = 0; i < rocmmem_status_model_count(st); i++)
		json_object_array_add(models, ctl_model_json(rocmmem_status_model(st, i)));
	for (size_t i = 0; i < rocmmem_status_waiter_count(st); i++) {
		const struct rocmmem_waiter_info *v = rocmmem_status_waiter(st, i);
		json_object *o = json_object_new_object();

		add_i64(o, "owner_pid", v->owner_pid);
		add_u64(o, "device", v->device);
		add_u64(o, "bytes", v->bytes);
		add_u64(o, "waited_ms", v->waited_ms);
		add_i64(o, "timeout_ms", v->timeout_ms);
		add_str(o, "tag", v->tag);
		add_u64(o, "model_id", v->model_id);
		json_object_array_add(queue, o);
	}
	json_object_object_add(root, "devices", devices);
	json_object_object_add(root, "clients", clients);
	json_object_object_add(root, "leases", leases);
	json_object_object_add(root, "models", models);
	json_object_object_add(root, "queue", queue);
	return root;
}

const char *ctl_duration(uint64_t s, char *buf, size_t len)
{
	if (s < 60)
		snprintf(buf, len, "%llus", (unsigned long long)s);
	else if (s < 3600)
		snprintf(buf, len, "%llum%02llus", (unsigned long long)(s / 60),
			 (unsigned long long)(s % 60));
	else
		snprintf(buf, len, "%lluh%02llum", (unsigned long long)(s / 3600),
			 (unsigned long long)(s % 3600 / 60));
	return buf;
}

/* print_device_details adds what is known beyond the budget: bus, sharing, runtime, sensors. */
static void print_device_details(const rocmmem_status *st, size_t index,
				 const struct rocmmem_device_info *v)
{
	char a[SIZE_FORMAT_MAX], b[SIZE_FORMAT_MAX], c[SIZE_FORMAT_MAX];

	if (v->pci_bus_id[0])
		printf("       %s%s, shared by %s\n", v->pci_bus_id,
		       v->integrated ? ", integrated (APU)" : "", v->sharing);
	if (strcmp(v->state, "ok") != 0)
		printf("       UNUSABLE: %s\n", v->state);
	if (v->reserved_bytes)
		printf("       %s reserved for models (not leased, not free)\n",
		       size_format(v->reserved_bytes, a, sizeof(a)));
	if (v->valid & ROCMMEM_DEVICE_HAS_RUNTIME)
		printf("       runtime: %s free of %s; %s used outside rocmmemd\n",
		       size_format(v->runtime_free_bytes, a, sizeof(a)),
		       size_format(v->runtime_total_bytes, b, sizeof(b)),
		       size_format(v->external_bytes, c, sizeof(c)));
	if (v->telemetry_source[0]) {
		printf("       %s:", v->telemetry_source);
		if (v->valid & ROCMMEM_DEVICE_HAS_VRAM)
			printf(" vram %s/%s", size_format(v->vram_used_bytes, a, sizeof(a)),
			       size_format(v->vram_total_bytes, b, sizeof(b)));
		if (v->valid & ROCMMEM_DEVICE_HAS_GTT)
			printf(" gtt %s/%s", size_format(v->gtt_used_bytes, a, sizeof(a)),
			       size_format(v->gtt_total_bytes, b, sizeof(b)));
		if (v->valid & ROCMMEM_DEVICE_HAS_TEMPERATURE)
			printf(" %.1f C", v->temperature_mc / 1000.0);
		if (v->valid & ROCMMEM_DEVICE_HAS_POWER)
			printf(" %.1f W", v->power_mw / 1000.0);
		if (v->valid & ROCMMEM_DEVICE_HAS_BUSY)
			printf(" busy %u%%", v->busy_percent);
		printf("\n");
	}
	for (size_t k = 0; k < rocmmem_status_process_count(st, index); k++) {
		const struct rocmmem_process_info *p = rocmmem_status_process(st, index, k);

		printf("       pid %d holds %s%s\n", (int)p->pid,
		       size_format(p->vram_bytes, a, sizeof(a)),
		       p->client ? " (a client)" : " outside rocmmemd");
	}
}

/* waiter_model names the model a request waits for: "flux (3)", "model 3" if not listed, "-". */
static const char *waiter_model(const rocmmem_status *st, const struct rocmmem_waiter_info *w,
				char *buf, size_t len)
{
	snprintf(buf, len, "-");
	if (!w->model_id)
		return buf;
	snprintf(buf, len, "model %llu", (unsigned long long)w->model_id);
	for (size_t i = 0; i < rocmmem_status_model_count(st); i++) {
		const struct rocmmem_model_info *m = rocmmem_status_model(st, i);

		if (m->id == w->model_id)
			snprintf(buf, len, "%s (%llu)", m->name, (unsigned long long)m->id);
	}
	return buf;
}

static void print_table(const rocmmem_status *st)
{
	const struct rocmmem_daemon_info *d = rocmmem_status_daemon(st);
	char a[SIZE_FORMAT_MAX], b[SIZE_FORMAT_MAX], c[SIZE_FORMAT_MAX], e[SIZE_FORMAT_MAX];
	char t[32];

	printf("rocmmemd %s, pid %d, up %s, backend %s\n\n", d->version, (int)d->pid,
	       ctl_duration(d->uptime_s, t, sizeof(t)), d->backend);
	printf("%-6s %-20s %10s %10s %10s %10s %7s %7s\n", "DEVICE", "NAME", "TOTAL", "BUDGET",
	       "LEASED", "FREE", "LEASES", "WAITING");
	for (size_t i = 0; i < rocmmem_status_device_count(st); i++) {
		const struct rocmmem_device_info *v = rocmmem_status_device(st, i);

		printf("%-6u %-20.20s %10s %10s %10s %10s %7llu %7u\n", v->index, v->name,
		       size_format(v->total_bytes, a, sizeof(a)),
		       size_format(v->budget_bytes, b, sizeof(b)),
		       size_format(v->leased_bytes, c, sizeof(c)),
		       size_format(v->free_bytes, e, sizeof(e)), (unsigned long long)v->leases,
		       v->waiters);
		print_device_details(st, i, v);
	}
	printf("\n%-8s %-6s %-24s %7s %10s %9s\n", "PID", "UID", "CLIENT", "LEASES", "LEASED",
	       "CONNECTED");
	for (size_t i = 0; i < rocmmem_status_client_count(st); i++) {
		const struct rocmmem_client_info *v = rocmmem_status_client(st, i);

		printf("%-8d %-6u %-24.24s %7u %10s %9s\n", (int)v->pid, v->uid,
		       v->name[0] ? v->name : "-", v->leases,
		       size_format(v->leased_bytes, a, sizeof(a)),
		       ctl_duration(v->connected_s, t, sizeof(t)));
	}
	if (rocmmem_status_lease_count(st)) {
		printf("\n%-8s %-8s %-6s %10s %9s  %s\n", "LEASE", "PID", "DEVICE", "SIZE", "AGE",
		       "TAG");
		for (size_t i = 0; i < rocmmem_status_lease_count(st); i++) {
			const struct rocmmem_lease_info *v = rocmmem_status_lease(st, i);

			printf("%-8llu %-8d %-6u %10s %9s  %s\n", (unsigned long long)v->id,
			       (int)v->owner_pid, v->device, size_format(v->bytes, a, sizeof(a)),
			       ctl_duration(v->age_ms / 1000, t, sizeof(t)), v->tag);
		}
	}
	if (rocmmem_status_model_count(st)) {
		printf("\n");
		ctl_models_table(st, -1);
	}
	if (rocmmem_status_waiter_count(st)) {
		printf("\n%-8s %-6s %10s %9s %9s  %-24s %s\n", "WAITING", "DEVICE", "SIZE",
		       "WAITED", "TIMEOUT", "MODEL", "TAG");
		for (size_t i = 0; i < rocmmem_status_waiter_count(st); i++) {
			const struct rocmmem_waiter_info *v = rocmmem_status_waiter(st, i);
			char to[32], model[96];

			if (v->timeout_ms < 0)
				snprintf(to, sizeof(to), "none");
			else
				ctl_duration((uint64_t)v->timeout_ms / 1000, to, sizeof(to));
			printf("%-8d %-6u %10s %9s %9s  %-24s %s\n", (int)v->owner_pid, v->device,
			       size_format(v->bytes, a, sizeof(a)),
			       ctl_duration(v->waited_ms / 1000, t, sizeof(t)), to,
			       waiter_model(st, v, model, sizeof(model)), v->tag);
		}
	}
}

int cmd_status(const struct ctl *global, int argc, char **argv)
{
	static const struct option longopts[] = {
	    {"json", no_argument, NULL, 'j'},
	    {"socket", required_argument, NULL, 's'},
	    {NULL, 0, NULL, 0},
	};
	struct ctl ctl = *global;
	rocmmem_client *client;
	rocmmem_status *st;
	int c, rc, err;
	char name[64];

	optind = 0;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":js:", longopts, NULL)) != -1) {
		if (c == 'j')
			ctl.json = true;
		else if (c == 's')
			ctl.socket = optarg;
		else if (c == ':')
			return ctl_usage("status", "option '%s' needs a value",
					 args_bad_option(argv, name, sizeof(name)));
		else
			return ctl_usage("status", "unknown option '%s'",
					 args_bad_option(argv, name, sizeof(name)));
	}
	if (optind < argc)
		return ctl_usage("status", "unexpected argument '%s'", argv[optind]);
	rc = ctl_connect(&ctl, &client);
	if (rc)
		return rc;
	err = rocmmem_status_get(client, &st);
	if (err) {
		rc = ctl_fail("status", err);
		rocmmem_disconnect(client);
		return rc;
	}
	if (ctl.json) {
		json_object *root = status_json(st);

		puts(json_object_to_json_string_ext(root, JSON_C_TO_STRING_PLAIN |
							      JSON_C_TO_STRING_NOSLASHESCAPE));
		json_object_put(root);
	} else {
		print_table(st);
	}
	rocmmem_status_free(st);
	rocmmem_disconnect(client);
	return fflush(stdout) == 0 ? CTL_EXIT_OK : CTL_EXIT_USAGE;
}
